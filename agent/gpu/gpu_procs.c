// SPDX-License-Identifier: Apache-2.0
/*
 * The processes of the GPU layer: watched, target, exited (gpu_impl.h), and
 * the GPU object's own process events.
 */
#include "agent/gpu/gpu_comm_state.h"
#include "agent/gpu/gpu_impl.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "agent/proc/proc_env.h"
#include "agent/proc/proc_stat.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "gpu.skel.h"

struct gpu_proc *gpu_proc_find(struct gpu *g, uint32_t tgid)
{
	for (size_t i = 0; i < GPU_MAX_PROCS; i++)
		if (g->procs[i].state != PROC_FREE && g->procs[i].tgid == tgid &&
		    g->procs[i].state != PROC_EXITED)
			return &g->procs[i];
	return NULL;
}

/* The exited process tgid whose rows await the next drain, or NULL. */
struct gpu_proc *gpu_proc_find_exited(struct gpu *g, uint32_t tgid)
{
	for (size_t i = 0; i < GPU_MAX_PROCS; i++)
		if (g->procs[i].state == PROC_EXITED && g->procs[i].tgid == tgid)
			return &g->procs[i];
	return NULL;
}

static void read_environ(struct gpu_proc *p)
{
	char path[64], *buf;
	struct gpu_proc_info *in = &p->info;
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/comm", p->tgid);
	f = fopen(path, "r");
	if (f) {
		if (fgets(in->comm, sizeof(in->comm), f))
			in->comm[strcspn(in->comm, "\n")] = 0;
		fclose(f);
	}
	snprintf(path, sizeof(path), "/proc/%u/environ", p->tgid);
	f = fopen(path, "re");
	if (!f)
		return;
	buf = malloc(PROC_ENV_MAX);
	if (!buf) {
		fclose(f);
		return;
	}
	n = proc_env_whole(buf, fread(buf, 1, PROC_ENV_MAX - 1, f), PROC_ENV_MAX - 1);
	fclose(f);
	buf[n] = 0;
	for (size_t i = 0; i < n; i += strlen(buf + i) + 1) {
		const char *e = buf + i;

		if (!strncmp(e, "RANK=", 5))
			in->rank = atoi(e + 5);
		else if (!strncmp(e, "LOCAL_RANK=", 11))
			in->local_rank = atoi(e + 11);
		else if (!strncmp(e, "WORLD_SIZE=", 11))
			in->world_size = atoi(e + 11);
		else if (!strncmp(e, "TORCHELASTIC_RUN_ID=", 20))
			snprintf(in->run_id, sizeof(in->run_id), "%s", e + 20);
		else if (!strncmp(e, "SLURM_JOB_ID=", 13))
			snprintf(in->slurm_job, sizeof(in->slurm_job), "%s", e + 13);
		else if (!strncmp(e, "STRATA_JOB=", 11))
			snprintf(in->strata_job, sizeof(in->strata_job), "%s", e + 11);
	}
	free(buf);
}

/* p is a target: in the BPF filter (in_bpf: BPF admitted it already, and
 * a process gone since must not be put back). */
static void proc_target(struct gpu *g, struct gpu_proc *p, bool in_bpf)
{
	struct gpu_target t = {};

	/* NOEXIST: BPF may have admitted it meanwhile, its mm_id kept */
	if (!in_bpf &&
	    bpf_map_update_elem(bpf_map__fd(g->skel->maps.gpu_targets), &p->tgid, &t,
				BPF_NOEXIST) &&
	    errno != EEXIST) {
		pr_warn("gpu: pid %u: targets map full", p->tgid);
		return;
	}
	p->state = PROC_TARGET;
	read_environ(p);
	pr_info("gpu: tracing pid %u (%s)", p->tgid, p->info.comm);
}

/* The process is gone, told by its exit event or found gone (a target that
 * died before its BPF filter entry was made sends no event): a target is
 * finished at the next drain (its file references and filter entry are
 * released), a watched process's slot is free at once. */
static void proc_vanished(struct gpu *g, struct gpu_proc *p)
{
	if (p->in_notify_filter) {
		bpf_map_delete_elem(bpf_map__fd(g->skel->maps.gpu_mapped_last), &p->tgid);
		p->in_notify_filter = false;
	}
	if (p->state == PROC_TARGET || p->nfiles || p->owes_purge) {
		p->state = PROC_EXITED; /* finished at the next drain */
		p->info.exited = true;
		p->info.exit_ns = realtime_ns();
		g->exits++;
	} else {
		p->state = PROC_FREE;
	}
}

/* How long a process goes between liveness checks: a target's exit must
 * be noticed within GPU_SCAN_MAX_MS should its exit event be lost; a
 * watched process that was never sampled sends none (and its slot must not
 * outlive it long: its pid may be reused). */
static uint64_t alive_every_ms(const struct gpu_proc *p)
{
	return p->state == PROC_TARGET ? GPU_SCAN_MAX_MS : GPU_ALIVE_WATCH_MS;
}

/* Between two maps reads: still the same process?  (One small read of
 * /proc/PID/stat, where a maps read of a training process reads thousands
 * of lines.) */
bool gpu_proc_checks_alive(const struct gpu_proc *p)
{
	return p->state == PROC_TARGET || (p->state == PROC_WATCH && p->notified);
}

/* Whether p's process is gone: its pid is another process's now, or no
 * process has it.  A /proc read that failed for another reason (no memory,
 * no fd left) is not a death: vanishing deletes a live process's BPF state
 * (its communicators' identities and sequence numbers among them). */
static bool proc_gone(const struct gpu_proc *p)
{
	uint64_t start = proc_stat__start_ticks("/proc", p->tgid, NULL, 0);

	if (start)
		return p->start_ticks && start != p->start_ticks;
	return kill((pid_t)p->tgid, 0) && errno == ESRCH;
}

void gpu_proc_alive(struct gpu *g, struct gpu_proc *p, uint64_t now_ms)
{
	g->alive_checks++;
	p->next_alive_ms = now_ms + alive_every_ms(p);
	if (proc_gone(p))
		proc_vanished(g, p);
}

/* The live slot of tgid, or NULL: a slot whose process is gone and whose
 * pid another process has now (its start time differs) is let go, not
 * taken for the new one (whose liveness check would then find it "gone"
 * and sweep its entries). */
static struct gpu_proc *live_slot(struct gpu *g, uint32_t tgid)
{
	struct gpu_proc *p = gpu_proc_find(g, tgid);
	uint64_t start;

	if (!p || !p->start_ticks)
		return p;
	start = proc_stat__start_ticks("/proc", tgid, NULL, 0);
	if (!start || start == p->start_ticks)
		return p; /* the same, or gone already: its exit event follows */
	proc_vanished(g, p);
	g->slots_reused++;
	return NULL;
}

/* When a process's maps are read next: a series of reads at growing
 * intervals after it started or mapped a file (ld.so maps a burst of
 * libraries: 5 ms .. 320 ms apart, ~0.6 s in all), then, where the kernel tells of new mappings
 * (its dynamic linker hooked: PROC_EV_MAPPED_EXEC), only at the next one,
 * or after GPU_SCAN_IDLE_MS should its event be lost; without those events
 * every GPU_SCAN_MAX_MS, for good (dlopen may add a GPU library at any
 * time). */
static void next_scan(struct gpu *g, struct gpu_proc *p, uint64_t now_ms)
{
	bool series_over = p->backoff_ms >= GPU_SCAN_MAX_MS;

	p->next_scan_ms = now_ms + (series_over && p->notified ? GPU_SCAN_IDLE_MS : p->backoff_ms);
	p->next_alive_ms = now_ms + alive_every_ms(p);
	p->backoff_ms = p->backoff_ms * 2 > GPU_SCAN_MAX_MS ? GPU_SCAN_MAX_MS : p->backoff_ms * 2;
}

/* Scans a process's executable mappings for GPU files. */
void gpu_proc_scan(struct gpu *g, struct gpu_proc *p, uint64_t now_ms)
{
	struct proc_map *maps = NULL;
	bool notified = false;
	size_t n = 0, ndls = g->ndls;
	int err;

	g->scans++;
	if (!p->start_ticks)
		p->start_ticks = proc_stat__start_ticks("/proc", p->tgid, NULL, 0);
	err = proc_maps__read((int)p->tgid, 1, &maps, &n);
	if (err) {
		g->scan_failed++;
		if (err == -ESRCH || proc_gone(p))
			proc_vanished(g, p);
		else /* alive, its maps unread this time: again later */
			next_scan(g, p, now_ms);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		bool have = false;
		int fi;

		if (!maps[i].inode)
			continue;
		fi = gpu_classify(g, (int)p->tgid, &maps[i], &notified);
		if (fi < 0)
			continue;
		/* The process tracker re-reads the maps while they lack a GPU
		 * file (once per drain), which also lets the Python layer find
		 * an interpreter loaded since exec: call-site stacks get Python
		 * frames from the first calls on. */
		if (p->mm_id || p->hint_mm_id) {
			const struct proc_mapping *pm;

			proc_tracker__lookup(g->procs_tracker, p->tgid,
					     p->mm_id ? p->mm_id : p->hint_mm_id, maps[i].start,
					     &pm);
		}
		for (uint32_t j = 0; j < p->nfiles; j++)
			have |= p->files[j] == fi;
		if (have || p->nfiles >= GPU_PROC_FILES)
			continue;
		p->files[p->nfiles++] = fi;
		gpu_file_ref(g, &g->files[fi]);
	}
	free(maps);
	/* a dynamic linker hooked during this read: a dlopen between the read
	 * and the hook told nothing, so the series goes on */
	p->notified = notified && g->ndls == ndls && p->in_notify_filter;
	if (p->nfiles && p->state == PROC_WATCH)
		proc_target(g, p, false);
	/* dlopen can add a library later (PyTorch loads CUDA on import) */
	next_scan(g, p, now_ms);
}

/* Dynamic-linker events were lost (the ring was full): every process they
 * may have been about reads its maps again. */
void gpu_rescan_notified(struct gpu *g)
{
	for (size_t i = 0; i < GPU_MAX_PROCS; i++) {
		struct gpu_proc *p = &g->procs[i];

		if ((p->state == PROC_WATCH || p->state == PROC_TARGET) && p->notified) {
			p->backoff_ms = GPU_SCAN_FIRST_MS;
			p->next_scan_ms = 0;
		}
	}
}

/* The process's dynamic linker changed its loaded objects
 * (PROC_EV_MAPPED_EXEC): a read at once, in a series of reads. */
static void proc_mapped(struct gpu *g, uint32_t tgid)
{
	struct gpu_proc *p = gpu_proc_find(g, tgid);

	if (!p || (p->state != PROC_WATCH && p->state != PROC_TARGET)) {
		g->mapped_ignored++;
		return;
	}
	g->mapped_seen++;
	/* A read now.  During a series (a burst of dlopens: `import torch`
	 * sends an event every 200 ms for seconds) the series goes on from
	 * where it is rather than starting over at 5 ms: its later steps,
	 * 320 ms and more after this event, still see what the dlopens the
	 * rate limit held back mapped.  After a series, a new one. */
	if (p->backoff_ms >= GPU_SCAN_MAX_MS)
		p->backoff_ms = GPU_SCAN_FIRST_MS;
	p->next_scan_ms = 0;
}

/* A process whose communicator a previous agent run saw initialise. */
static void gpu_restored_identity(struct gpu *g, struct gpu_proc *p)
{
	struct gpu_comm_identity id;

	if (!g->comm_state || !gpu_comm_state__identity(g->comm_state, p->tgid, &id))
		return;
	p->info.nccl_rank = id.rank;
	p->info.nccl_nranks = id.nranks;
	p->info.comm_hash = id.hash;
	p->info.job_hash = id.job_hash;
}

/* Its dynamic linker's events are sent from now on (bpf/gpu.bpf.c's filter,
 * as many entries as slots); without room it is polled (counted). */
static void notify_filter_add(struct gpu *g, struct gpu_proc *p)
{
	uint64_t never = 0;

	p->in_notify_filter = !bpf_map_update_elem(bpf_map__fd(g->skel->maps.gpu_mapped_last),
						   &p->tgid, &never, BPF_ANY);
	if (!p->in_notify_filter)
		g->notify_full++;
}

/* A free slot for tgid, watched; NULL (counted) when none is left. */
static struct gpu_proc *proc_new(struct gpu *g, uint32_t tgid)
{
	for (size_t i = 0; i < GPU_MAX_PROCS; i++) {
		struct gpu_proc *p = &g->procs[i];

		if (p->state != PROC_FREE)
			continue;
		memset(p, 0, sizeof(*p));
		p->tgid = tgid;
		p->state = PROC_WATCH;
		p->backoff_ms = GPU_SCAN_FIRST_MS;
		p->info.tgid = tgid;
		p->info.rank = p->info.local_rank = p->info.world_size = -1;
		p->info.nccl_rank = p->info.nccl_nranks = -1;
		gpu_restored_identity(g, p);
		notify_filter_add(g, p);
		return p;
	}
	g->procs_dropped++;
	return NULL;
}

void gpu__watch(struct gpu *g, uint32_t tgid)
{
	struct gpu_proc *p = live_slot(g, tgid);

	if (p) {
		p->backoff_ms = GPU_SCAN_FIRST_MS; /* exec: a new image to look at */
		p->next_scan_ms = 0;
		return;
	}
	p = proc_new(g, tgid);
	if (p)
		gpu_proc_scan(g, p, mono_ms());
}

/*
 * A process exited (or exec'd: the BPF side dropped it as a target).  Two
 * events tell of one exit (the sampler's and the GPU object's, in either
 * order): the address-space id, which the exit-time stacks are resolved
 * with, is taken from whichever carries it.
 */
static void proc_exited(struct gpu *g, const struct strata_proc_event *e, uint64_t mm_id)
{
	struct gpu_proc *p = gpu_proc_find(g, e->tgid);

	if (!p) {
		p = gpu_proc_find_exited(g, e->tgid);
		if (p && !p->mm_id)
			p->mm_id = mm_id;
		return;
	}
	if (!p->mm_id)
		p->mm_id = mm_id;
	p->gone_ktime_ns = e->ts_ns;
	proc_vanished(g, p); /* exit_ns: within a drain of the exit */
}

void gpu__on_proc_event(struct gpu *g, const struct strata_proc_event *e)
{
	if (e->type == PROC_EV_NEW || e->type == PROC_EV_EXEC) {
		struct gpu_proc *p;

		gpu__watch(g, e->tgid);
		p = gpu_proc_find(g, e->tgid);
		/* the image's address space before any call: only a hint for
		 * the tracker (gpu_proc_scan); stacks resolve with the id BPF saw */
		if (p)
			p->hint_mm_id = e->mm_id;
		return;
	} else if (e->type == PROC_EV_EXIT)
		proc_exited(g, e, e->mm_id);
}

/* A target's first call, BPF's admission or not: scanned now; a target
 * even if it is gone already (its exit event follows and finishes it). */
void gpu_proc_admitted(struct gpu *g, uint32_t tgid, uint64_t mm_id, const char *comm)
{
	struct gpu_proc *p = live_slot(g, tgid);

	if (!p)
		p = proc_new(g, tgid);
	if (!p)
		return;
	if (!p->mm_id)
		p->mm_id = mm_id;
	if (comm && !p->info.comm[0]) /* /proc may be gone by now */
		snprintf(p->info.comm, sizeof(p->info.comm), "%.*s", (int)sizeof(p->info.comm) - 1,
			 comm);
	if (p->state == PROC_WATCH)
		proc_target(g, p, true);
	p->next_scan_ms = 0; /* its files, now */
	gpu_proc_scan(g, p, mono_ms());
}

/* Targets BPF admitted whose event was lost (ring buffer full) are
 * adopted at the drain, so their entries are swept at exit like any. */
void gpu_adopt_targets(struct gpu *g)
{
	int fd = bpf_map__fd(g->skel->maps.gpu_targets);
	uint32_t key, next;
	struct gpu_target t;
	void *prev = NULL;

	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		key = next;
		prev = &key;
		if (!gpu_proc_find(g, key) && !gpu_proc_find_exited(g, key) &&
		    !bpf_map_lookup_elem(fd, &key, &t)) {
			g->adopted++;
			gpu_proc_admitted(g, key, t.mm_id, NULL);
		}
	}
}

/* The GPU object's own process events: exits of targets with their
 * exit-time mappings (for the tracker: see bpf/gpu.bpf.c), and execs. */
int gpu_on_proc_event(void *ctx, void *data, size_t size)
{
	struct gpu *g = ctx;
	const struct strata_proc_event *e = data;

	if (size < sizeof(*e))
		return 0;
	switch (e->type) {
	case PROC_EV_NEW: /* a target's first call (bpf/gpu_call.bpf.h) */
		/* its libraries are mapped now (the exec-time read had only the
		 * program and ld.so; a /proc scan may have caught ld.so halfway):
		 * read the maps again, so the call-site walks get every table
		 * from the next calls on */
		proc_tracker__on_event(g->procs_tracker, e);
		gpu_proc_admitted(g, e->tgid, e->mm_id, e->comm);
		break;
	case PROC_EV_EXIT: {
		struct gpu_proc *p;

		proc_tracker__on_event(g->procs_tracker, e);
		proc_exited(g, e, e->mm_id);
		p = gpu_proc_find_exited(g, e->tgid);
		if (p)
			p->bpf_exited = true;
		break;
	}
	case PROC_EV_VMA:
		proc_tracker__on_event(g->procs_tracker, e);
		break;
	case PROC_EV_MAPPED_EXEC:
		proc_mapped(g, e->tgid);
		break;
	case PROC_EV_UNWIND_MISS: { /* a call-site walk met a pc without table */
		const struct proc_mapping *m;

		/* a target the sampler has not seen has no instance yet: made
		 * (maps read, tables loaded) by the lookup */
		proc_tracker__lookup(g->procs_tracker, e->tgid, e->mm_id, e->start, &m);
		proc_tracker__on_event(g->procs_tracker, e);
		break;
	}
	case PROC_EV_EXEC: /* the old image is finished; the new one is watched */
		proc_exited(g, e, 0);
		gpu__watch(g, e->tgid);
		break;
	default:
		break;
	}
	return 0;
}

/*
 * An exited process is settled once the GPU object's exit record (and the
 * mapping records after it) came, or after a few drains without (it was no
 * BPF target then): the sampler's exit event can be read first, before the
 * exiting task ran the GPU exit program, and resolving its stacks then
 * would find none of its mappings.
 */
bool gpu_proc_settled(const struct gpu_proc *p)
{
	return p->state == PROC_EXITED && (p->bpf_exited || p->exit_drains >= GPU_EXIT_DRAINS);
}
