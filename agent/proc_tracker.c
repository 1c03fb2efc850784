// SPDX-License-Identifier: Apache-2.0
#include "agent/proc_tracker.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "agent/log.h"

#define PROC_BUCKETS 4096

struct proc_instance {
	uint32_t tgid;
	uint64_t mm_id;
	struct proc_mapping *maps; /* sorted by start, non-overlapping */
	size_t nmaps, cap;
	bool exited;
	uint64_t refreshed_epoch;  /* drain epoch of the last /proc read */
	struct proc_instance *next;
};

struct proc_tracker {
	struct proc_instance *buckets[PROC_BUCKETS];
	struct module_registry *mods;
	size_t max, count;
	uint64_t epoch; /* drains so far */
	struct proc_tracker_stats st;
};

static size_t bucket_of(uint32_t tgid)
{
	return (tgid * 2654435761u) % PROC_BUCKETS;
}

struct proc_tracker *proc_tracker__new(struct module_registry *mods, size_t max)
{
	struct proc_tracker *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->mods = mods;
	t->max = max ? max : 8192;
	t->epoch = 1; /* 0 means "never refreshed" */
	return t;
}

static void maps_clear(struct proc_instance *p)
{
	for (size_t i = 0; i < p->nmaps; i++)
		free((char *)p->maps[i].name);
	p->nmaps = 0;
}

static void instance_free(struct proc_instance *p)
{
	maps_clear(p);
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
			instance_free(p);
		}
	}
	free(t);
}

static struct proc_instance *find(struct proc_tracker *t, uint32_t tgid,
				  uint64_t mm_id)
{
	for (struct proc_instance *p = t->buckets[bucket_of(tgid)]; p; p = p->next)
		if (p->tgid == tgid && p->mm_id == mm_id)
			return p;
	return NULL;
}

/* Unlinks and frees instances matching the predicate; returns how many. */
static size_t sweep(struct proc_tracker *t, bool only_one,
		    bool (*pred)(const struct proc_instance *, const void *),
		    const void *arg)
{
	size_t n = 0;

	for (size_t b = 0; b < PROC_BUCKETS; b++) {
		struct proc_instance **pp = &t->buckets[b];

		while (*pp) {
			struct proc_instance *p = *pp;

			if (!pred(p, arg)) {
				pp = &p->next;
				continue;
			}
			*pp = p->next;
			instance_free(p);
			t->count--;
			n++;
			if (only_one)
				return n;
		}
	}
	return n;
}

static bool is_exited(const struct proc_instance *p, const void *arg)
{
	return p->exited;
}

static struct proc_instance *get_or_add(struct proc_tracker *t, uint32_t tgid,
					uint64_t mm_id)
{
	struct proc_instance *p = find(t, tgid, mm_id);
	size_t b = bucket_of(tgid);

	if (p)
		return p;
	if (t->count >= t->max) {
		if (!sweep(t, true, is_exited, NULL)) {
			t->st.refused++;
			return NULL;
		}
		t->st.evicted++;
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
static int mapping_insert(struct proc_instance *p, uint64_t start, uint64_t end,
			  uint64_t pgoff, struct module *mod, const char *name)
{
	size_t i = 0;

	if (mapping_find(p, start) || mapping_find(p, end - 1))
		return 0;
	if (p->nmaps == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 16;
		struct proc_mapping *m = realloc(p->maps, cap * sizeof(*m));

		if (!m)
			return -ENOMEM;
		p->maps = m;
		p->cap = cap;
	}
	while (i < p->nmaps && p->maps[i].start < start)
		i++;
	char *dup = strdup(name);
	if (!dup)
		return -ENOMEM;
	memmove(&p->maps[i + 1], &p->maps[i], (p->nmaps - i) * sizeof(*p->maps));
	p->maps[i] = (struct proc_mapping){ start, end, pgoff, mod, dup };
	p->nmaps++;
	return 0;
}

/* (Re)reads the executable mappings of p from /proc. */
static int read_maps(struct proc_tracker *t, struct proc_instance *p)
{
	struct proc_map *pm = NULL;
	size_t n = 0;
	int err;

	p->refreshed_epoch = t->epoch;
	err = proc_maps__read(p->tgid, 1, &pm, &n);
	if (err) {
		t->st.maps_read_failed++;
		return err;
	}
	t->st.maps_read++;
	maps_clear(p);
	for (size_t i = 0; i < n && !err; i++) {
		struct module *mod = NULL;

		if (pm[i].inode)
			mod = modules__from_map(t->mods, p->tgid, &pm[i]);
		err = mapping_insert(p, pm[i].start, pm[i].end, pm[i].pgoff, mod,
				     pm[i].path[0] ? pm[i].path : "[anon]");
	}
	free(pm);
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
	return mapping_insert(p, e->start, e->end, e->pgoff, mod,
			      mod ? mod->path : name);
}

int proc_tracker__on_event(struct proc_tracker *t,
			   const struct strata_proc_event *e)
{
	struct proc_instance *p;

	switch (e->type) {
	case PROC_EV_NEW:
	case PROC_EV_EXEC:
		p = get_or_add(t, e->tgid, e->mm_id);
		if (!p)
			return -ENOSPC;
		/* At exec only the executable and ld.so are mapped: read now
		 * anyway (the process may die soon), and let the first sample's
		 * NEW event or a miss read the libraries.  A failed read is
		 * counted; the exit-time VMA records may still cover it. */
		read_maps(t, p);
		return 0;
	case PROC_EV_VMA:
		return on_exit_vma(t, e);
	case PROC_EV_EXIT:
		p = find(t, e->tgid, e->mm_id);
		if (p)
			p->exited = true;
		return 0;
	default:
		return 0;
	}
}

int proc_tracker__lookup(struct proc_tracker *t, uint32_t tgid, uint64_t mm_id,
			 uint64_t ip, const struct proc_mapping **out)
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

const char *proc_tracker__exe(struct proc_tracker *t, uint32_t tgid,
			      uint64_t mm_id)
{
	struct proc_instance *p = find(t, tgid, mm_id);

	return p && p->nmaps ? p->maps[0].name : NULL;
}

void proc_tracker__end_drain(struct proc_tracker *t)
{
	sweep(t, false, is_exited, NULL);
	t->epoch++;
}

void proc_tracker__stats(const struct proc_tracker *t,
			 struct proc_tracker_stats *st)
{
	*st = t->st;
}
