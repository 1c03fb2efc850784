// SPDX-License-Identifier: Apache-2.0
#include "agent/proc/proc_tracker.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "agent/proc/proc_stat.h"
#include "lib/log.h"

#define PROC_BUCKETS 4096
#define LIVENESS_EVERY 10 /* drains between checks that instances still live */
#define ATTACH_QUEUE 1024 /* deferred loader attaches (proc_tracker__defer_attach) */

struct proc_instance {
	uint32_t tgid;
	uint64_t mm_id;
	uint64_t start_ticks;	   /* /proc/PID/stat starttime; 0 = not known yet */
	struct proc_mapping *maps; /* sorted by start, non-overlapping */
	size_t nmaps, cap;
	bool exited;		  /* gone, or exec'd into another mm */
	bool superseded;	  /* exec'd: /proc now shows another program */
	bool attach_queued;	  /* in the deferred attach queue */
	uint64_t refreshed_epoch; /* drain epoch of the last /proc read */
	struct proc_instance *next;
};

struct proc_tracker {
	struct proc_instance *buckets[PROC_BUCKETS];
	struct module_registry *mods;
	size_t max, count;
	uint64_t epoch; /* drains so far */
	long clk_tck;
	struct proc_loaders loaders;
	/* deferred attaches, oldest at head; an instance is found again by
	 * its key (it may have been freed since) */
	struct {
		uint32_t tgid;
		uint64_t mm_id;
	} queue[ATTACH_QUEUE];
	size_t qhead, nqueued;
	bool defer;
	struct proc_tracker_stats st;
};

static size_t bucket_of(uint32_t tgid)
{
	return (tgid * 2654435761u) % PROC_BUCKETS;
}

/* The registry evicts a file: the loaders forget their answers for it. */
static void on_module_evict(void *ctx, struct module *m)
{
	struct proc_tracker *t = ctx;

	proc_loaders__forget(&t->loaders, m);
}

struct proc_tracker *proc_tracker__new(struct module_registry *mods, size_t max)
{
	struct proc_tracker *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->mods = mods;
	t->max = max ? max : 8192;
	t->epoch = 1; /* 0 means "never refreshed" */
	t->clk_tck = sysconf(_SC_CLK_TCK);
	if (t->clk_tck <= 0)
		t->clk_tck = 100;
	modules__on_evict(mods, on_module_evict, t);
	return t;
}

int proc_tracker__add_loader(struct proc_tracker *t, const struct proc_loader *l)
{
	return proc_loaders__add(&t->loaders, l);
}

void *proc_tracker__detect(struct proc_tracker *t, int loader, struct module *mod)
{
	return proc_loaders__detect(&t->loaders, loader, mod);
}

static void maps_clear(struct proc_tracker *t, struct proc_instance *p)
{
	for (size_t i = 0; i < p->nmaps; i++) {
		free((char *)p->maps[i].name);
		if (p->maps[i].mod)
			modules__unref(t->mods, p->maps[i].mod);
	}
	p->nmaps = 0;
}

static void instance_free(struct proc_tracker *t, struct proc_instance *p)
{
	maps_clear(t, p);
	free(p->maps);
	free(p);
}

void proc_tracker__free(struct proc_tracker *t)
{
	if (!t)
		return;
	for (size_t b = 0; b < PROC_BUCKETS; b++) {
		struct proc_instance *p = t->buckets[b], *next;

		for (; p; p = next) {
			next = p->next;
			instance_free(t, p);
		}
	}
	modules__on_evict(t->mods, NULL, NULL);
	free(t);
}

static struct proc_instance *find(struct proc_tracker *t, uint32_t tgid, uint64_t mm_id)
{
	for (struct proc_instance *p = t->buckets[bucket_of(tgid)]; p; p = p->next)
		if (p->tgid == tgid && p->mm_id == mm_id)
			return p;
	return NULL;
}

/* Unlinks and frees the exited instances. */
static void sweep_exited(struct proc_tracker *t)
{
	for (size_t b = 0; b < PROC_BUCKETS; b++) {
		struct proc_instance **pp = &t->buckets[b];

		while (*pp) {
			struct proc_instance *p = *pp;

			if (!p->exited) {
				pp = &p->next;
				continue;
			}
			*pp = p->next;
			proc_loaders__detach(&t->loaders, p->mm_id);
			instance_free(t, p);
			t->count--;
		}
	}
}

static struct proc_instance *get_or_add(struct proc_tracker *t, uint32_t tgid, uint64_t mm_id)
{
	struct proc_instance *p = find(t, tgid, mm_id);
	size_t b = bucket_of(tgid);

	if (p)
		return p;
	/* Exited instances are freed only after the drain that follows their
	 * exit (their samples may not be drained yet), so a full table refuses
	 * new instances rather than evicting. */
	if (t->count >= t->max) {
		t->st.refused++;
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->tgid = tgid;
	p->mm_id = mm_id;
	p->next = t->buckets[b];
	t->buckets[b] = p;
	t->count++;
	t->st.instances++;
	return p;
}

static struct proc_mapping *mapping_find(struct proc_instance *p, uint64_t ip)
{
	size_t lo = 0, hi = p->nmaps;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (ip < p->maps[mid].start)
			hi = mid;
		else if (ip >= p->maps[mid].end)
			lo = mid + 1;
		else
			return &p->maps[mid];
	}
	return NULL;
}

/* Inserts a mapping keeping maps sorted; an overlapping one is left alone. */
static int mapping_insert(struct proc_tracker *t, struct proc_instance *p, uint64_t start,
			  uint64_t end, uint64_t pgoff, struct module *mod, const char *name)
{
	size_t i = 0;

	if (p->nmaps && start >= p->maps[p->nmaps - 1].end) {
		i = p->nmaps; /* in address order, as /proc lists them: append */
	} else {
		if (mapping_find(p, start) || mapping_find(p, end - 1))
			return 0;
		/* the first mapping above start (binary search: an exit-time
		 * record can arrive in any order) */
		size_t lo = 0, hi = p->nmaps;

		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;

			if (p->maps[mid].start < start)
				lo = mid + 1;
			else
				hi = mid;
		}
		i = lo;
	}
	if (p->nmaps == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 16;
		struct proc_mapping *m = realloc(p->maps, cap * sizeof(*m));

		if (!m)
			return -ENOMEM;
		p->maps = m;
		p->cap = cap;
	}
	char *dup = strdup(name);
	if (!dup)
		return -ENOMEM;
	memmove(&p->maps[i + 1], &p->maps[i], (p->nmaps - i) * sizeof(*p->maps));
	p->maps[i] = (struct proc_mapping){ start, end, pgoff, mod, dup };
	p->nmaps++;
	if (mod)
		modules__ref(t->mods, mod);
	return 0;
}

/* True when /proc/PID is still the process instance p. */
static bool same_process(struct proc_tracker *t, struct proc_instance *p)
{
	uint64_t now = proc_stat__start_ticks("/proc", p->tgid, NULL, 0);

	if (!now || p->superseded)
		return false;
	if (!p->start_ticks)
		p->start_ticks = now; /* first sight: nothing to compare yet */
	return now == p->start_ticks;
}

/* The loaders see p's mappings: now, or queued while attaches are deferred. */
static void attach(struct proc_tracker *t, struct proc_instance *p)
{
	if (t->defer && p->attach_queued)
		return; /* the queued attach will see these maps */
	if (t->defer && t->nqueued < ATTACH_QUEUE) {
		size_t i = (t->qhead + t->nqueued++) % ATTACH_QUEUE;

		t->queue[i].tgid = p->tgid;
		t->queue[i].mm_id = p->mm_id;
		p->attach_queued = true;
		t->st.attach_deferred++;
		return;
	}
	if (t->defer)
		t->st.attach_queue_full++;
	proc_loaders__attach(&t->loaders, p->tgid, p->mm_id, p->maps, p->nmaps);
}

int proc_tracker__attach_next(struct proc_tracker *t)
{
	struct proc_instance *p;

	if (!t->nqueued)
		return 0;
	p = find(t, t->queue[t->qhead].tgid, t->queue[t->qhead].mm_id);
	t->qhead = (t->qhead + 1) % ATTACH_QUEUE;
	t->nqueued--;
	if (p && p->attach_queued) {
		p->attach_queued = false;
		proc_loaders__attach(&t->loaders, p->tgid, p->mm_id, p->maps, p->nmaps);
	}
	return 1;
}

void proc_tracker__defer_attach(struct proc_tracker *t, int on)
{
	if (!on)
		while (proc_tracker__attach_next(t))
			;
	t->defer = on;
}

/*
 * (Re)reads the executable mappings of p from /proc, only while /proc/PID
 * is still that process (same start time, not exec'd since): maps of a
 * later program must never be applied to this one's samples.
 */
static int read_maps(struct proc_tracker *t, struct proc_instance *p)
{
	struct proc_map *pm = NULL;
	size_t n = 0;
	int err;

	p->refreshed_epoch = t->epoch;
	if (!same_process(t, p)) {
		t->st.maps_read_failed++;
		pr_debug("procs: %u: not the process seen (start %llu ticks, /proc %llu)", p->tgid,
			 (unsigned long long)p->start_ticks,
			 (unsigned long long)proc_stat__start_ticks("/proc", p->tgid, NULL, 0));
		return -ESRCH;
	}
	err = proc_maps__read_counted(p->tgid, 1, &pm, &n, &t->st.maps_dropped);
	/* The PID could have been reused during the read: check again.  No
	 * executable mapping at all: an exiting process (a zombie's maps are
	 * empty), whose exit-time records must not be wiped by this read. */
	if (!err && (!same_process(t, p) || !n)) {
		free(pm);
		err = -ESRCH;
	}
	if (err) {
		t->st.maps_read_failed++;
		pr_debug("procs: %u: maps not read: %s", p->tgid, strerror(-err));
		return err;
	}
	t->st.maps_read++;
	maps_clear(t, p);
	for (size_t i = 0; i < n && !err; i++) {
		struct module *mod = NULL;

		if (pm[i].inode)
			mod = modules__from_map(t->mods, p->tgid, &pm[i]);
		else if (!strcmp(pm[i].path, "[vdso]"))
			mod = modules__vdso(t->mods);
		err = mapping_insert(t, p, pm[i].start, pm[i].end, pm[i].pgoff, mod,
				     pm[i].path[0] ? pm[i].path : "[anon]");
	}
	free(pm);
	if (!err)
		attach(t, p);
	return err;
}

static int on_exit_vma(struct proc_tracker *t, const struct strata_proc_event *e)
{
	struct proc_instance *p = get_or_add(t, e->tgid, e->mm_id);
	/* Kernel dev_t is MAJOR << 20 | MINOR (include/linux/kdev_t.h). */
	dev_t dev = makedev(e->dev >> 20, e->dev & 0xfffff);
	char name[STRATA_NAME_LEN + 1];
	struct module *mod;

	if (!p)
		return -ENOSPC;
	t->st.exit_vmas++;
	if (mapping_find(p, e->start))
		return 0; /* already known from /proc */
	memcpy(name, e->name, STRATA_NAME_LEN);
	name[STRATA_NAME_LEN] = '\0';
	mod = modules__locate(t->mods, dev, e->ino, name);
	if (!mod)
		t->st.exit_vmas_unlocated++;
	return mapping_insert(t, p, e->start, e->end, e->pgoff, mod, mod ? mod->path : name);
}

/* Marks every instance of tgid other than keep_mm exited (keep_mm 0: all). */
static void retire_tgid(struct proc_tracker *t, uint32_t tgid, uint64_t keep_mm, bool superseded)
{
	for (struct proc_instance *p = t->buckets[bucket_of(tgid)]; p; p = p->next) {
		if (p->tgid != tgid || (keep_mm && p->mm_id == keep_mm))
			continue;
		p->exited = true;
		p->superseded |= superseded;
	}
}

static uint64_t ns_to_ticks(const struct proc_tracker *t, uint64_t ns)
{
	/* The kernel's nsec_to_clock_t: exact integer division. */
	return ns / (1000000000ULL / (uint64_t)t->clk_tck);
}

/* The BPF unwinder met e->start with no mapping (dlopen since the last
 * read: read again) or no table (ask for it). */
static int on_unwind_miss(struct proc_tracker *t, const struct strata_proc_event *e)
{
	struct proc_instance *p = find(t, e->tgid, e->mm_id);
	struct proc_mapping *m;

	if (!p || p->exited)
		return 0;
	m = mapping_find(p, e->start);
	if (!m) {
		/* once per drain at most: a process churning JIT code sends
		 * misses faster than its maps can be read */
		if (p->refreshed_epoch == t->epoch) {
			t->st.refreshes_limited++;
			return 0;
		}
		t->st.refreshes++;
		if (read_maps(t, p))
			return 0;
		m = mapping_find(p, e->start);
	}
	if (m && m->mod)
		proc_loaders__wanted(&t->loaders, m->mod);
	return 0;
}

int proc_tracker__on_event(struct proc_tracker *t, const struct strata_proc_event *e)
{
	struct proc_instance *p;

	switch (e->type) {
	case PROC_EV_EXEC:
		/* The old image's samples resolve with the maps already read;
		 * /proc shows only the new image from now on. */
		retire_tgid(t, e->tgid, e->mm_id, true);
		/* fall through */
	case PROC_EV_NEW:
		p = get_or_add(t, e->tgid, e->mm_id);
		if (!p)
			return -ENOSPC;
		if (!p->start_ticks)
			p->start_ticks = ns_to_ticks(t, e->start_ns);
		/* At exec only the executable and ld.so are mapped: read now
		 * anyway (the process may die soon); a miss re-reads later.
		 * A failed read is counted; exit-time VMA records may cover.
		 * This early read does not spend the drain's refresh: the
		 * first miss (a library ld.so mapped since) re-reads at once,
		 * or the libraries of a process that starts early in a drain
		 * stayed unknown for up to a whole drain (test_unwind_eviction:
		 * 60% of a 2-s program's stacks cut short). */
		read_maps(t, p);
		p->refreshed_epoch = 0;
		return 0;
	case PROC_EV_VMA:
		return on_exit_vma(t, e);
	case PROC_EV_UNWIND_MISS:
		return on_unwind_miss(t, e);
	case PROC_EV_EXIT:
		/* A sampled process gets an instance even if none exists yet,
		 * for the VMA records that follow. */
		if (e->flags & PROC_EV_F_SAMPLED && !get_or_add(t, e->tgid, e->mm_id))
			return -ENOSPC;
		retire_tgid(t, e->tgid, 0, false);
		return 0;
	default:
		return 0;
	}
}

int proc_tracker__lookup(struct proc_tracker *t, uint32_t tgid, uint64_t mm_id, uint64_t ip,
			 const struct proc_mapping **out)
{
	struct proc_instance *p = find(t, tgid, mm_id);
	struct proc_mapping *m;

	if (!p) {
		/* No event for it (ring buffer full, or sampled before we
		 * started listening): try /proc while it lives. */
		p = get_or_add(t, tgid, mm_id);
		if (!p)
			return -ESRCH;
		if (read_maps(t, p)) {
			p->exited = true;
			return -ESRCH;
		}
	}
	m = mapping_find(p, ip);
	if (!m && !p->exited && p->refreshed_epoch != t->epoch) {
		t->st.refreshes++;
		if (read_maps(t, p) == 0)
			m = mapping_find(p, ip);
	}
	if (!m)
		return -ENOENT;
	*out = m;
	return 0;
}

struct module *proc_tracker__module_at(struct proc_tracker *t, uint32_t tgid, const char *path)
{
	struct module *found = NULL;

	for (struct proc_instance *p = t->buckets[bucket_of(tgid)]; p; p = p->next) {
		if (p->tgid != tgid || (found && p->exited))
			continue;
		for (size_t i = 0; i < p->nmaps; i++)
			if (p->maps[i].mod && p->maps[i].name && !strcmp(p->maps[i].name, path)) {
				found = p->maps[i].mod;
				if (!p->exited)
					return found;
				break;
			}
	}
	return found;
}

uint64_t proc_tracker__start_ticks(struct proc_tracker *t, uint32_t tgid, uint64_t mm_id)
{
	const struct proc_instance *p = t ? find(t, tgid, mm_id) : NULL;

	return p ? p->start_ticks : 0;
}

/*
 * An exit event can be lost (ring full) or never sent (an instance made from
 * /proc without events): marks instances whose process is gone exited, to
 * be freed after the next drain.
 */
static void find_dead(struct proc_tracker *t)
{
	for (size_t b = 0; b < PROC_BUCKETS; b++) {
		for (struct proc_instance *p = t->buckets[b]; p; p = p->next) {
			if (!p->exited && !same_process(t, p)) {
				p->exited = true;
				t->st.found_dead++;
			}
		}
	}
}

void proc_tracker__end_drain(struct proc_tracker *t)
{
	/* Every instance that exited before this drain has had its samples
	 * drained: free it. */
	sweep_exited(t);
	if (t->epoch % LIVENESS_EVERY == 0)
		find_dead(t);
	/* files no instance maps any more, after their grace period */
	modules__end_drain(t->mods);
	t->epoch++;
}

void proc_tracker__stats(const struct proc_tracker *t, struct proc_tracker_stats *st)
{
	*st = t->st;
}
