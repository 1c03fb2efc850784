// SPDX-License-Identifier: Apache-2.0
/*
 * The GPU layer's user side (see agent/gpu.h).  Processes move through
 * three states: watched (a session target whose mappings are scanned with
 * back-off), target (maps a file with CUDA/NCCL entry points: in the BPF
 * gpu_targets filter, holding a reference on each such file), exited (its
 * rows are read one last time at the next drain, its outstanding
 * allocations become the leaks at exit, and its BPF entries are removed).
 */
#include "agent/gpu.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "agent/gpu_budget.h"
#include "agent/gpu_elf.h"
#include "agent/gpu_leaks.h"
#include "agent/gpu_libs.h"
#include "agent/gpu_names.h"
#include "agent/gpu_tables.h"
#include "agent/proc_maps.h"
#include "agent/resolve.h"
#include "agent/uprobe_multi.h"
#include "lib/clock.h"
#include "lib/enum_names.h"
#include "lib/log.h"
#include "gpu.skel.h"

#define GPU_MAX_FILES 64
#define GPU_MAX_KNOWN 4096	  /* files classified (GPU or not) */
#define GPU_MAX_PROCS 4096	  /* watched + targets + exited awaiting a drain */
#define GPU_PROC_FILES 8	  /* GPU files per process */
#define GPU_MAX_ROWS 65536	  /* per user-side table */
#define GPU_MAX_CALLS 262144	  /* call records kept for the trace */
#define GPU_MAX_ALLOC_RECS 262144 /* wire: outstanding allocations listed per drain */
#define GPU_SCAN_FIRST_MS 5
/* also how late a target whose exit events were missed is found dead */
#define GPU_SCAN_MAX_MS 500
#define GPU_GRACE_MS 5000   /* a file's probes stay attached this long unused */
#define GPU_RESOLVE_TRIES 8 /* drains a live process's stack may stay partly unknown */
#define GPU_EXIT_DRAINS 3   /* drains an exited process waits for its exit record */

enum { GRP_FIXED, GRP_SHED, GRP_MAX }; /* probe groups: see group_attach() */

struct gpu_file {
	dev_t dev;
	uint64_t ino;
	struct module *mod;
	struct gpu_elf_probes probes;
	int multi[GRP_MAX][2]; /* uprobe_multi link fds [group][return], -1: none */
	size_t multi_n[GRP_MAX];
	struct bpf_link *enter[GPU_ELF_MAX_PROBES], *exit[GPU_ELF_MAX_PROBES]; /* fallback */
	uint32_t refs; /* target processes mapping it */
	bool attached;
	bool pinned;		/* attached for the whole session */
	uint64_t idle_since_ms; /* refs fell to 0 then */
};

struct gpu_known { /* key: dev, ino */
	uint64_t dev, ino;
	int file; /* index in files, or -1: not a GPU file */
};

enum gpu_proc_state { PROC_FREE = 0, PROC_WATCH, PROC_TARGET, PROC_EXITED };

struct gpu_proc {
	uint32_t tgid;
	uint32_t state;
	uint64_t next_scan_ms;
	uint32_t backoff_ms;
	uint32_t nfiles;
	int files[GPU_PROC_FILES];
	uint64_t mm_id;	      /* address space, as BPF saw it at a call or exit */
	uint64_t hint_mm_id;  /* from the sampler's exec/first-sample event */
	bool bpf_exited;      /* the GPU object's exit record (with the mappings) came */
	uint32_t exit_drains; /* drains since it exited without that record */
	struct gpu_proc_info info;
};

struct raw_stack { /* key: stack_id */
	uint64_t stack_id;
	uint32_t len;
	uint32_t tries; /* resolutions with unknown frames, while the process lived */
	uint64_t *ips;
};

struct py_stack_row { /* key: id */
	uint64_t id;
	struct strata_py_stack *py;
};

struct pair_row { /* key: id */
	uint64_t id;
	struct gpu_stack_pair pair;
};

struct stack_key {
	uint32_t tgid, pad;
	uint64_t stack_id;
};

struct stack_row {
	struct stack_key key;
	struct gpu_stack s;
};

struct func_key {
	uint32_t tgid, pad;
	uint64_t object;
};

struct func_row {
	struct func_key key;
	const char *name;
};

struct gpu {
	struct gpu_opts opts;
	struct gpu_bpf *skel;
	struct ring_buffer *rb;
	struct module_registry *mods;
	struct proc_tracker *procs_tracker;
	struct resolver res;
	struct gpu_budget budget;
	uint64_t budget_next_ns, window_start_ns, window_on_ns;

	struct gpu_file files[GPU_MAX_FILES];
	int nfiles;
	struct gpu_table known;
	struct gpu_proc *procs;

	struct gpu_table raw_stacks, py_stacks, pairs, stacks, sites, tally, errs, colls, funcs;
	struct gpu_leaks leaks;
	struct gpu_call_rec *calls;
	size_t ncalls;
	uint64_t *prev_calls; /* per tally row: calls at the last budget plan */
	size_t nprev;

	struct gpu_data data;
	bool no_multi, multi_ok; /* uprobe_multi refused / worked on this kernel */
	uint64_t adopted;	 /* BPF-admitted targets found without their event */
	uint64_t links, attach_failed, scans, scan_failed, files_dropped, procs_dropped;
	uint64_t exits;
};

/* ---- clock: bpf_ktime_get_ns is CLOCK_MONOTONIC ------------------------ */

/* realtime - monotonic, from the tightest of a few bracketed reads; the
 * error of a converted timestamp is at most half the bracket (plus any
 * step of the realtime clock between here and the event). */
static void clock_calibrate(struct gpu *g)
{
	uint64_t best = UINT64_MAX;

	for (int i = 0; i < 5; i++) {
		uint64_t a = mono_ns(), r = realtime_ns(), b = mono_ns();

		if (b - a < best) {
			best = b - a;
			g->data.clock_offset_ns = (int64_t)(r - (a + (b - a) / 2));
		}
	}
	g->data.clock_err_ns = best / 2 + 1;
}

static uint64_t to_realtime(const struct gpu *g, uint64_t mono)
{
	return mono ? (uint64_t)((int64_t)mono + g->data.clock_offset_ns) : 0;
}

/* ---- files: discovery and attachment ---------------------------------- */

/* Single-uprobe fallback (kernels before 6.6): two links per probe. */
static int attach_probe(struct gpu *g, struct gpu_file *f, size_t i)
{
	LIBBPF_OPTS(bpf_uprobe_opts, o, .bpf_cookie = f->probes.p[i].api);
	struct bpf_program *enter =
		g->opts.empty_probes ? g->skel->progs.gpu_empty : g->skel->progs.gpu_enter;
	const char *path = f->mod->open_path;
	uint64_t off = f->probes.p[i].offset;

	if (!f->enter[i]) {
		f->enter[i] = bpf_program__attach_uprobe_opts(enter, -1, path, off, &o);
		if (!f->enter[i]) {
			g->attach_failed++;
			pr_debug("gpu: %s: uprobe %s at %#llx: %s", f->mod->path,
				 gpu_api_name(f->probes.p[i].api), (unsigned long long)off,
				 strerror(errno));
			return -errno;
		}
		g->links++;
	}
	if (!f->exit[i]) {
		o.retprobe = true;
		f->exit[i] = bpf_program__attach_uprobe_opts(
			g->opts.empty_probes ? g->skel->progs.gpu_empty : g->skel->progs.gpu_exit,
			-1, path, off, &o);
		if (!f->exit[i]) {
			g->attach_failed++;
			return -errno;
		}
		g->links++;
	}
	return 0;
}

static void detach_probe(struct gpu *g, struct gpu_file *f, size_t i)
{
	if (f->enter[i]) {
		bpf_link__destroy(f->enter[i]);
		f->enter[i] = NULL;
		g->links--;
	}
	if (f->exit[i]) {
		bpf_link__destroy(f->exit[i]);
		f->exit[i] = NULL;
		g->links--;
	}
}

/*
 * Attaches one probe group of a file (GRP_SHED: the probes the duty cycle
 * sheds; GRP_FIXED: the rest) as two uprobe_multi links, entry and return.
 * The first refusal of uprobe_multi (an older kernel) switches the session
 * to single uprobes for good.
 */
static int group_attach(struct gpu *g, struct gpu_file *f, int grp)
{
	uint64_t offs[GPU_ELF_MAX_PROBES], cookies[GPU_ELF_MAX_PROBES];
	size_t n = 0;

	for (size_t i = 0; i < f->probes.n; i++) {
		if (gpu_budget__sheddable(f->probes.p[i].api) != (grp == GRP_SHED))
			continue;
		if (g->no_multi) {
			attach_probe(g, f, i);
			continue;
		}
		offs[n] = f->probes.p[i].offset;
		cookies[n++] = f->probes.p[i].api;
	}
	for (int ret = 0; n && !g->no_multi && ret < 2; ret++) {
		/* the benchmark floor: empty programs on entry and return */
		struct bpf_program *prog = g->opts.empty_probes ? g->skel->progs.gpu_empty_multi
					   : ret		? g->skel->progs.gpu_exit_multi
								: g->skel->progs.gpu_enter_multi;
		int fd;

		if (f->multi[grp][ret] > 0)
			continue;
		fd = uprobe_multi__attach(prog, f->mod->open_path, offs, cookies, n, ret, -1);
		if ((fd == -EINVAL || fd == -EOPNOTSUPP) && !g->multi_ok) {
			pr_info("gpu: no uprobe_multi links (%s): single uprobes", strerror(-fd));
			g->no_multi = true;
			return group_attach(g, f, grp);
		}
		if (fd < 0) {
			g->attach_failed++;
			pr_warn("gpu: %s: attaching %zu probes: %s", f->mod->path, n,
				strerror(-fd));
			return fd;
		}
		g->multi_ok = true;
		f->multi[grp][ret] = fd;
		f->multi_n[grp] = n;
		g->links += n;
	}
	return 0;
}

static void group_detach(struct gpu *g, struct gpu_file *f, int grp)
{
	for (size_t i = 0; i < f->probes.n; i++)
		if (gpu_budget__sheddable(f->probes.p[i].api) == (grp == GRP_SHED))
			detach_probe(g, f, i);
	for (int ret = 0; ret < 2; ret++) {
		if (f->multi[grp][ret] <= 0)
			continue;
		close(f->multi[grp][ret]); /* one grace period for the whole group */
		f->multi[grp][ret] = -1;
		g->links -= f->multi_n[grp];
	}
}

/* Attaches a file's probes (the sheddable ones only while the duty cycle
 * has them on). */
static void file_attach(struct gpu *g, struct gpu_file *f)
{
	group_attach(g, f, GRP_FIXED);
	if (g->budget.attached)
		group_attach(g, f, GRP_SHED);
	f->attached = true;
}

static void file_detach(struct gpu *g, struct gpu_file *f)
{
	group_detach(g, f, GRP_FIXED);
	group_detach(g, f, GRP_SHED);
	f->attached = false;
}

/* A file gained a user (a target process maps it). */
static void file_ref(struct gpu *g, struct gpu_file *f)
{
	f->refs++;
	if (!f->attached)
		file_attach(g, f);
}

/* A file lost a user: detached once it has had none for the grace period
 * (gpu__poll), so churn of processes using one library costs one attach,
 * and their first calls are seen (admit() in BPF). */
static void file_unref(struct gpu *g, struct gpu_file *f)
{
	if (f->refs && --f->refs == 0)
		f->idle_since_ms = mono_ms();
}

/* Detaches the files idle past the grace period; returns the next
 * deadline (ms). */
static uint64_t files_expire(struct gpu *g, uint64_t now_ms)
{
	uint64_t next = UINT64_MAX;

	for (int i = 0; i < g->nfiles; i++) {
		struct gpu_file *f = &g->files[i];
		uint64_t due = f->idle_since_ms + g->opts.grace_ms;

		if (!f->attached || f->refs || f->pinned)
			continue;
		if (now_ms >= due) {
			pr_info("gpu: %s: no user for %u ms: detached", f->mod->path,
				g->opts.grace_ms);
			file_detach(g, f);
		} else if (due < next) {
			next = due;
		}
	}
	return next;
}

/* The GPU file index of (dev, ino), classifying the file on first sight;
 * -1 for other files.  mod_of opens the file (NULL: not now, retried at
 * the next sight). */
static int classify_file(struct gpu *g, dev_t dev, uint64_t ino,
			 struct module *(*mod_of)(struct gpu *g, const void *arg), const void *arg)
{
	struct gpu_known key = { .dev = dev, .ino = ino };
	struct gpu_known *k = gpu_table__find(&g->known, &key);
	struct module *mod;
	struct gpu_file *f;
	int err = 0;

	if (k)
		return k->file;
	mod = mod_of(g, arg);
	if (!mod)
		return -1; /* not now: retried at the next scan */
	k = gpu_table__get(&g->known, &key, &err);
	if (!k)
		return -1;
	k->file = -1;
	if (g->nfiles >= GPU_MAX_FILES) {
		g->files_dropped++;
		return -1;
	}
	f = &g->files[g->nfiles];
	memset(f, 0, sizeof(*f));
	if (gpu_elf_scan(mod->fd, &f->probes) || !f->probes.n)
		return -1;
	f->dev = key.dev;
	f->ino = key.ino;
	f->mod = mod;
	memset(f->multi, 0xff, sizeof(f->multi)); /* -1: no link */
	k->file = g->nfiles++;
	pr_info("gpu: %s: %zu CUDA/NCCL entry points", mod->path, f->probes.n);
	return k->file;
}

struct map_arg {
	int pid;
	const struct proc_map *m;
};

static struct module *mod_of_map(struct gpu *g, const void *arg)
{
	const struct map_arg *a = arg;

	return modules__from_map(g->mods, a->pid, a->m);
}

/* The GPU file index for a mapping of pid, or -1. */
static int classify(struct gpu *g, int pid, const struct proc_map *m)
{
	struct map_arg a = { .pid = pid, .m = m };

	return classify_file(g, makedev(m->dev_major, m->dev_minor), m->inode, mod_of_map, &a);
}

static struct module *mod_of_path(struct gpu *g, const void *arg)
{
	return modules__from_path(g->mods, arg);
}

/* Attaches a library for the whole session (pre-attach, --gpu-lib). */
static void pin_file(void *ctx, const char *path)
{
	struct gpu *g = ctx;
	struct stat st;
	int fi;

	if (stat(path, &st)) {
		pr_warn("gpu: %s: %s", path, strerror(errno));
		return;
	}
	fi = classify_file(g, st.st_dev, st.st_ino, mod_of_path, path);
	if (fi < 0) {
		pr_debug("gpu: %s: no CUDA/NCCL entry points", path);
		return;
	}
	if (!g->files[fi].pinned) {
		g->files[fi].pinned = true;
		file_attach(g, &g->files[fi]);
	}
}

/* ---- processes --------------------------------------------------------- */

static struct gpu_proc *proc_find(struct gpu *g, uint32_t tgid)
{
	for (size_t i = 0; i < GPU_MAX_PROCS; i++)
		if (g->procs[i].state != PROC_FREE && g->procs[i].tgid == tgid &&
		    g->procs[i].state != PROC_EXITED)
			return &g->procs[i];
	return NULL;
}

/* The exited process tgid whose rows await the next drain, or NULL. */
static struct gpu_proc *proc_find_exited(struct gpu *g, uint32_t tgid)
{
	for (size_t i = 0; i < GPU_MAX_PROCS; i++)
		if (g->procs[i].state == PROC_EXITED && g->procs[i].tgid == tgid)
			return &g->procs[i];
	return NULL;
}

static void read_environ(struct gpu_proc *p)
{
	char path[64], buf[32768];
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
	f = fopen(path, "r");
	if (!f)
		return;
	n = fread(buf, 1, sizeof(buf) - 1, f);
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
	}
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

/* Scans a process's executable mappings for GPU files. */
static void proc_scan(struct gpu *g, struct gpu_proc *p, uint64_t now_ms)
{
	struct proc_map *maps = NULL;
	size_t n = 0;

	g->scans++;
	if (proc_maps__read((int)p->tgid, 1, &maps, &n)) {
		g->scan_failed++;
		/* Gone.  A target that died before its BPF filter entry was
		 * made sends no exit event: finish it like an exited one (its
		 * file references and filter entry are released). */
		if (p->state == PROC_TARGET || p->nfiles) {
			p->state = PROC_EXITED;
			p->info.exited = true;
			g->exits++;
		} else {
			p->state = PROC_FREE;
		}
		return;
	}
	for (size_t i = 0; i < n; i++) {
		bool have = false;
		int fi;

		if (!maps[i].inode)
			continue;
		fi = classify(g, (int)p->tgid, &maps[i]);
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
		file_ref(g, &g->files[fi]);
	}
	free(maps);
	if (p->nfiles && p->state == PROC_WATCH)
		proc_target(g, p, false);
	/* dlopen can add a library later (PyTorch loads CUDA on import) */
	p->next_scan_ms = now_ms + p->backoff_ms;
	p->backoff_ms = p->backoff_ms * 2 > GPU_SCAN_MAX_MS ? GPU_SCAN_MAX_MS : p->backoff_ms * 2;
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
		return p;
	}
	g->procs_dropped++;
	return NULL;
}

void gpu__watch(struct gpu *g, uint32_t tgid)
{
	struct gpu_proc *p = proc_find(g, tgid);

	if (p) {
		p->backoff_ms = GPU_SCAN_FIRST_MS; /* exec: a new image to look at */
		p->next_scan_ms = 0;
		return;
	}
	p = proc_new(g, tgid);
	if (p)
		proc_scan(g, p, mono_ms());
}

/*
 * A process exited (or exec'd: the BPF side dropped it as a target).  Two
 * events tell of one exit (the sampler's and the GPU object's, in either
 * order): the address-space id, which the exit-time stacks are resolved
 * with, is taken from whichever carries it.
 */
static void proc_exited(struct gpu *g, uint32_t tgid, uint64_t mm_id)
{
	struct gpu_proc *p = proc_find(g, tgid);

	if (!p) {
		p = proc_find_exited(g, tgid);
		if (p && !p->mm_id)
			p->mm_id = mm_id;
		return;
	}
	if (!p->mm_id)
		p->mm_id = mm_id;
	if (p->state == PROC_TARGET || p->nfiles) {
		p->state = PROC_EXITED; /* finished at the next drain */
		p->info.exited = true;
		g->exits++;
	} else {
		p->state = PROC_FREE;
	}
}

void gpu__on_proc_event(struct gpu *g, const struct strata_proc_event *e)
{
	if (e->type == PROC_EV_NEW || e->type == PROC_EV_EXEC) {
		struct gpu_proc *p;

		gpu__watch(g, e->tgid);
		p = proc_find(g, e->tgid);
		/* the image's address space before any call: only a hint for
		 * the tracker (proc_scan); stacks resolve with the id BPF saw */
		if (p)
			p->hint_mm_id = e->mm_id;
		return;
	} else if (e->type == PROC_EV_EXIT)
		proc_exited(g, e->tgid, e->mm_id);
}

/* A process BPF made a target at its first call: scanned now; a target
 * even if it is gone already (its exit event follows and finishes it). */
static void proc_admitted(struct gpu *g, uint32_t tgid, uint64_t mm_id, const char *comm)
{
	struct gpu_proc *p = proc_find(g, tgid);

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
	proc_scan(g, p, mono_ms());
}

/* Targets BPF admitted whose event was lost (ring buffer full) are
 * adopted at the drain, so their entries are swept at exit like any. */
static void adopt_targets(struct gpu *g)
{
	int fd = bpf_map__fd(g->skel->maps.gpu_targets);
	uint32_t key, next;
	struct gpu_target t;
	void *prev = NULL;

	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		key = next;
		prev = &key;
		if (!proc_find(g, key) && !proc_find_exited(g, key) &&
		    !bpf_map_lookup_elem(fd, &key, &t)) {
			g->adopted++;
			proc_admitted(g, key, t.mm_id, NULL);
		}
	}
}

/* The GPU object's own process events: exits of targets with their
 * exit-time mappings (for the tracker: see bpf/gpu.bpf.c), and execs. */
static int on_proc_event(void *ctx, void *data, size_t size)
{
	struct gpu *g = ctx;
	const struct strata_proc_event *e = data;

	if (size < sizeof(*e))
		return 0;
	switch (e->type) {
	case PROC_EV_NEW: /* admitted by BPF at its first call */
		/* its libraries are mapped now (the exec-time read had only the
		 * program and ld.so): read the maps again, so the call-site
		 * walks get every table from the next calls on */
		proc_tracker__on_event(g->procs_tracker, e);
		proc_admitted(g, e->tgid, e->mm_id, e->comm);
		break;
	case PROC_EV_EXIT: {
		struct gpu_proc *p;

		proc_tracker__on_event(g->procs_tracker, e);
		proc_exited(g, e->tgid, e->mm_id);
		p = proc_find_exited(g, e->tgid);
		if (p)
			p->bpf_exited = true;
		break;
	}
	case PROC_EV_VMA:
		proc_tracker__on_event(g->procs_tracker, e);
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
		proc_exited(g, e->tgid, 0);
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
static bool proc_settled(const struct gpu_proc *p)
{
	return p->state == PROC_EXITED && (p->bpf_exited || p->exit_drains >= GPU_EXIT_DRAINS);
}

/* ---- events ------------------------------------------------------------ */

/*
 * The process a call event belongs to.  Events are read at the next poll
 * or drain, often after the process has exited (a short job ends within
 * one drain interval; its exit may be read first, from the other ring):
 * the exited entry still counts, it is remembered at this drain.  A process
 * not known at all (its admission event not read yet) is admitted now.
 */
static struct gpu_proc *proc_of_event(struct gpu *g, uint32_t tgid)
{
	struct gpu_proc *p = proc_find(g, tgid);

	if (!p)
		p = proc_find_exited(g, tgid);
	if (!p) {
		proc_admitted(g, tgid, 0, NULL);
		p = proc_find(g, tgid);
		if (!p)
			p = proc_find_exited(g, tgid);
	}
	return p;
}

static int on_event(void *ctx, void *data, size_t size)
{
	struct gpu *g = ctx;
	const struct gpu_event *e = data;
	struct gpu_call_rec *r;

	if (size < sizeof(*e))
		return 0;
	if (e->api < GPU_API_MAX && gpu_api_kind(e->api) == GPU_KIND_NCCL_INIT && !e->ret) {
		struct gpu_proc *p = proc_of_event(g, e->tgid);

		if (p && p->info.nccl_rank < 0) {
			p->info.nccl_rank = (int32_t)(e->a[5] & 0xffffffff);
			p->info.nccl_nranks = (int32_t)(e->a[5] >> 32);
			p->info.comm_hash = e->a[0];
		}
	}
	if (g->ncalls >= GPU_MAX_CALLS) {
		g->data.dropped_calls++;
		return 0;
	}
	r = &g->calls[g->ncalls++];
	r->ev = *e;
	r->ev.start_ns = to_realtime(g, e->start_ns);
	r->ev.end_ns = to_realtime(g, e->end_ns);
	return 0;
}

int gpu__event_fd(const struct gpu *g)
{
	return ring_buffer__epoll_fd(g->rb);
}

/* ---- duty cycle -------------------------------------------------------- */

static void shed_set(struct gpu *g, bool attach)
{
	for (int fi = 0; fi < g->nfiles; fi++) {
		struct gpu_file *f = &g->files[fi];

		if (!f->attached)
			continue;
		if (attach)
			group_attach(g, f, GRP_SHED);
		else
			group_detach(g, f, GRP_SHED);
	}
}

/* Plans the next window's ratio from the tally's per-process deltas. */
static void budget_plan(struct gpu *g, uint64_t now_ns)
{
	uint64_t shed[64] = { 0 }, fixed[64] = { 0 };
	uint32_t tgids[64];
	size_t np = 0;
	const struct gpu_tally_row *rows = g->tally.rows;
	uint64_t on = g->budget.on_ns - g->window_on_ns;

	if (g->nprev < g->tally.n) {
		uint64_t *p = realloc(g->prev_calls, g->tally.n * sizeof(*p));

		if (!p)
			return;
		memset(p + g->nprev, 0, (g->tally.n - g->nprev) * sizeof(*p));
		g->prev_calls = p;
		g->nprev = g->tally.n;
	}
	for (size_t i = 0; i < g->tally.n; i++) {
		uint64_t d = rows[i].val.calls - g->prev_calls[i];
		size_t j;

		g->prev_calls[i] = rows[i].val.calls;
		for (j = 0; j < np && tgids[j] != rows[i].key.tgid; j++)
			;
		if (j == np) {
			if (np == 64)
				continue; /* the busiest 64 are enough to plan */
			tgids[np++] = rows[i].key.tgid;
		}
		if (gpu_budget__sheddable(rows[i].key.api))
			shed[j] += d;
		else
			fixed[j] += d;
	}
	gpu_budget__plan(&g->budget, shed, fixed, np, on, now_ns - g->window_start_ns);
	g->window_start_ns = now_ns;
	g->window_on_ns = g->budget.on_ns;
}

int gpu__poll(struct gpu *g)
{
	uint64_t now = mono_ms(), next = now + 1000, now_ns = mono_ns(), bnext, fexp;

	ring_buffer__consume(g->rb);
	for (size_t i = 0; i < GPU_MAX_PROCS; i++) {
		struct gpu_proc *p = &g->procs[i];

		if (p->state != PROC_WATCH && p->state != PROC_TARGET)
			continue;
		if (p->next_scan_ms <= now)
			proc_scan(g, p, now);
		if (p->state != PROC_FREE && p->next_scan_ms < next)
			next = p->next_scan_ms;
	}
	if (g->opts.budget >= 0 && gpu_budget__tick(&g->budget, now_ns, &bnext))
		shed_set(g, g->budget.attached);
	else if (g->opts.budget < 0)
		bnext = now_ns + 1000000000ULL;
	if (bnext / 1000000 < next)
		next = bnext / 1000000;
	fexp = files_expire(g, now);
	if (fexp < next)
		next = fexp;
	return next > now ? (int)(next - now) : 0;
}

/* ---- drain ------------------------------------------------------------- */

/* Moves every entry of a BPF map keyed by a u64 id into user space:
 * keep() stores it (by id: a later copy of the same content is ignored),
 * and the BPF entry is deleted so the map stays small. */
static void drain_ids(struct gpu *g, struct bpf_map *m,
		      void (*keep)(struct gpu *g, uint64_t id, const void *val))
{
	int fd = bpf_map__fd(m);
	uint64_t key, next, *batch = NULL;
	size_t nb = 0, cap = 0;
	void *val = malloc(bpf_map__value_size(m)), *prev = NULL;

	while (val && bpf_map_get_next_key(fd, prev, &next) == 0) {
		key = next;
		prev = &key;
		if (nb == cap) {
			uint64_t *b = realloc(batch, (cap ? 2 * cap : 256) * sizeof(*b));

			if (!b)
				break;
			batch = b;
			cap = cap ? 2 * cap : 256;
		}
		batch[nb++] = key;
	}
	for (size_t i = 0; i < nb; i++) {
		if (bpf_map_lookup_elem(fd, &batch[i], val))
			continue;
		bpf_map_delete_elem(fd, &batch[i]);
		keep(g, batch[i], val);
	}
	free(batch);
	free(val);
}

/* The row of id in t, added when new; NULL (counted) when t is full. */
static void *id_row(struct gpu *g, struct gpu_table *t, uint64_t id)
{
	int err = 0;
	void *r = gpu_table__get(t, &id, &err);

	if (!r)
		g->data.dropped_rows++;
	return r;
}

static void keep_native(struct gpu *g, uint64_t id, const void *val)
{
	const struct strata_stack *st = val;
	uint32_t len = st->len > STRATA_MAX_STACK_DEPTH ? STRATA_MAX_STACK_DEPTH : st->len;
	struct raw_stack *r = id_row(g, &g->raw_stacks, id);

	if (!r || r->ips)
		return;
	r->ips = malloc((len ? len : 1) * sizeof(uint64_t));
	if (!r->ips)
		return;
	memcpy(r->ips, st->ips, len * sizeof(uint64_t));
	r->len = len;
}

static void keep_python(struct gpu *g, uint64_t id, const void *val)
{
	struct py_stack_row *r = id_row(g, &g->py_stacks, id);

	if (r && !r->py)
		r->py = malloc(sizeof(*r->py));
	if (r && r->py)
		memcpy(r->py, val, sizeof(*r->py));
}

static void keep_pair(struct gpu *g, uint64_t id, const void *val)
{
	struct pair_row *r = id_row(g, &g->pairs, id);

	if (r)
		r->pair = *(const struct gpu_stack_pair *)val;
}

/* Copies new stacks out of BPF: native frames, Python frames, and the
 * pairs naming sites that have both. */
static void drain_stacks(struct gpu *g)
{
	drain_ids(g, g->skel->maps.gpu_stacks, keep_native);
	drain_ids(g, g->skel->maps.gpu_py_stacks, keep_python);
	drain_ids(g, g->skel->maps.gpu_stack_pairs, keep_pair);
}

static uint64_t proc_mm_id(struct gpu *g, uint32_t tgid)
{
	struct gpu_target t;

	if (bpf_map_lookup_elem(bpf_map__fd(g->skel->maps.gpu_targets), &tgid, &t))
		return 0;
	return t.mm_id;
}

/*
 * Resolves (tgid, stack_id) of process p (NULL: gone).  Kept once resolved;
 * a resolution with frames in no known mapping is retried at the next
 * drains while the process lives (a library mapped after the tracker's last
 * /proc read: the exit-time mapping records, or a later read, fill it in).
 */
static void resolve_stack(struct gpu *g, uint32_t tgid, uint64_t stack_id, const struct gpu_proc *p)
{
	struct stack_key k = { .tgid = tgid, .stack_id = stack_id };
	uint64_t mm_id = p ? p->mm_id : 0, unknown = g->res.frames_unknown;
	bool final = !p || proc_settled(p);
	const struct strata_py_stack *py = NULL;
	const struct pair_row *pair;
	struct raw_stack *raw;
	struct strata_stack st;
	uint32_t idx[PROFILE_MAX_FRAMES];
	struct stack_row *row;
	int n, err = 0;

	if (stack_id <= STRATA_STACK_LOST || gpu_table__find(&g->stacks, &k))
		return;
	pair = gpu_table__find(&g->pairs, &stack_id);
	if (pair) { /* native + Python */
		const struct py_stack_row *pr = gpu_table__find(&g->py_stacks, &pair->pair.py);

		if (!pr || !pr->py)
			return; /* not copied yet */
		py = pr->py;
		raw = gpu_table__find(&g->raw_stacks, &pair->pair.native);
	} else {
		raw = gpu_table__find(&g->raw_stacks, &stack_id);
	}
	if (!raw || !raw->ips || !mm_id)
		return; /* not copied yet (next drain), or process never called */
	st.len = raw->len;
	memcpy(st.ips, raw->ips, raw->len * sizeof(uint64_t));
	n = resolver__user_stack(&g->res, tgid, mm_id, &st, py, idx, PROFILE_MAX_FRAMES);
	if (n < 0)
		return;
	if (g->res.frames_unknown != unknown && !final && ++raw->tries < GPU_RESOLVE_TRIES)
		return;
	row = gpu_table__get(&g->stacks, &k, &err);
	if (!row) {
		g->data.dropped_rows++;
		return;
	}
	row->s.tgid = tgid;
	row->s.stack_id = stack_id;
	row->s.frames = malloc(((size_t)n + 1) * sizeof(uint32_t));
	if (row->s.frames)
		memcpy(row->s.frames, idx, (size_t)n * sizeof(uint32_t));
	row->s.nframes = row->s.frames ? (uint32_t)n : 0;
}

/* Name of a launched kernel: the driver handle's name from the lookup
 * probes, else the host stub's symbol. */
static const char *kernel_name(struct gpu *g, uint32_t tgid, uint64_t mm_id, uint32_t api,
			       uint64_t object)
{
	struct func_key fk = { .tgid = tgid, .object = object };
	struct func_row *fr = gpu_table__find(&g->funcs, &fk);
	char buf[GPU_KERNEL_NAME_LEN + 32];
	int err = 0;

	if (fr)
		return fr->name;
	if (api == GPU_API_cuLaunchKernel || api == GPU_API_cuLaunchKernelEx) {
		struct gpu_func_key bk = { .tgid = tgid, .handle = object };
		struct gpu_func_name n;

		if (bpf_map_lookup_elem(bpf_map__fd(g->skel->maps.gpu_funcs), &bk, &n))
			return NULL;
		n.name[sizeof(n.name) - 1] = 0;
		snprintf(buf, sizeof(buf), "%s", n.name);
	} else if (api == GPU_API_cudaGraphLaunch) {
		snprintf(buf, sizeof(buf), "graph@%#llx", (unsigned long long)object);
	} else {
		struct strata_stack st = { .len = 1, .ips = { object } };
		uint32_t idx[SYM_MAX_INLINE * 2];
		int n = mm_id ? resolver__user_stack(&g->res, tgid, mm_id, &st, NULL, idx, 32) : -1;

		if (n <= 0)
			return NULL;
		profile__frame_name(&g->data.frames->frames[idx[n - 1]], buf, sizeof(buf));
	}
	fr = gpu_table__get(&g->funcs, &fk, &err);
	if (!fr)
		return NULL;
	/* interned in the frames profile, which owns its strings */
	struct profile_frame f = { .func = buf, .module = "[kernel-name]" };
	int64_t fi = profile__intern_frame(g->data.frames, &f);

	fr->name = fi >= 0 ? g->data.frames->frames[fi].func : NULL;
	return fr->name;
}

/* Reads every entry of a BPF hash map into a user table (cumulative
 * values: BPF never deletes, so nothing is lost between read and clear). */
static void read_map(struct gpu *g, struct bpf_map *m, struct gpu_table *t, size_t val_off)
{
	int fd = bpf_map__fd(m), err = 0;
	size_t ks = bpf_map__key_size(m), vs = bpf_map__value_size(m);
	char key[64], next[64], val[128];
	void *prev = NULL;

	while (bpf_map_get_next_key(fd, prev, next) == 0) {
		char *row;

		memcpy(key, next, ks);
		prev = key;
		if (bpf_map_lookup_elem(fd, key, val))
			continue;
		row = gpu_table__get(t, key, &err);
		if (!row) {
			g->data.dropped_rows++;
			continue;
		}
		memcpy(row + val_off, val, vs);
	}
}

/* Outstanding allocations, grouped by (process, stack). */
static void snapshot_allocs(struct gpu *g)
{
	int fd = bpf_map__fd(g->skel->maps.gpu_allocs);
	struct gpu_alloc_key key, next;
	struct gpu_alloc_val v;
	void *prev = NULL;

	gpu_leaks__begin(&g->leaks, realtime_ns());
	g->data.nallocs = 0; /* wire: this drain's outstanding set */
	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		struct gpu_proc *p;

		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &v))
			continue;
		p = proc_find(g, key.tgid);
		if (!p) /* exited: rows already final */
			p = proc_find_exited(g, key.tgid);
		if (gpu_leaks__add(&g->leaks, key.tgid, v.stack_id, v.size, to_realtime(g, v.ts_ns),
				   p && p->state == PROC_EXITED)) {
			g->data.dropped_rows++;
			continue;
		}
		resolve_stack(g, key.tgid, v.stack_id, p);
		if (g->data.allocs && g->data.nallocs < GPU_MAX_ALLOC_RECS)
			g->data.allocs[g->data.nallocs++] = (struct gpu_alloc_rec){
				key.tgid,   v.api,  key.ptr, v.size, to_realtime(g, v.ts_ns),
				v.stack_id, v.ts_ns
			};
		else
			g->data.allocs_dropped++;
	}
	gpu_leaks__end(&g->leaks);
}

/* The BPF maps whose keys start with a tgid. */
#define PROC_MAPS 7
static void proc_maps_of(struct gpu *g, struct bpf_map **maps)
{
	struct bpf_map *m[PROC_MAPS] = { g->skel->maps.gpu_sites, g->skel->maps.gpu_tally,
					 g->skel->maps.gpu_errs,  g->skel->maps.gpu_allocs,
					 g->skel->maps.gpu_funcs, g->skel->maps.gpu_comms,
					 g->skel->maps.gpu_colls };

	memcpy(maps, m, sizeof(m));
}

/* The per-thread call entries of a dead process (keyed by thread id). */
static void purge_threads(struct gpu *g, uint32_t tgid)
{
	int fd = bpf_map__fd(g->skel->maps.gpu_inflight);
	uint32_t key, next;
	struct gpu_call c;
	void *prev = NULL;

	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		key = next;
		if (!bpf_map_lookup_elem(fd, &key, &c) && c.tgid == tgid) {
			bpf_map_delete_elem(fd, &key);
			prev = NULL; /* restart: the iteration order changed */
			continue;
		}
		prev = &key;
	}
}

/* Deletes every BPF entry of an exited process (its rows were read). */
static void purge_bpf(struct gpu *g, uint32_t tgid)
{
	struct bpf_map *maps[PROC_MAPS];

	proc_maps_of(g, maps);
	for (size_t m = 0; m < PROC_MAPS; m++) {
		int fd = bpf_map__fd(maps[m]);
		char key[64], next[64];
		void *prev = NULL;

		/* every key of these maps starts with the tgid */
		while (bpf_map_get_next_key(fd, prev, next) == 0) {
			memcpy(key, next, sizeof(key));
			if (*(uint32_t *)key == tgid) {
				bpf_map_delete_elem(fd, key);
				prev = NULL; /* restart: the iteration order changed */
				continue;
			}
			prev = key;
		}
	}
	bpf_map_delete_elem(bpf_map__fd(g->skel->maps.gpu_targets), &tgid);
	purge_threads(g, tgid);
}

static void finish_exited(struct gpu *g)
{
	for (size_t i = 0; i < GPU_MAX_PROCS; i++) {
		struct gpu_proc *p = &g->procs[i];

		if (p->state != PROC_EXITED)
			continue;
		if (!proc_settled(p)) {
			p->exit_drains++;
			continue;
		}
		purge_bpf(g, p->tgid);
		for (uint32_t j = 0; j < p->nfiles; j++) {
			file_unref(g, &g->files[p->files[j]]);
		}
		p->nfiles = 0;
		p->state = PROC_FREE; /* its info stays in the data's process table */
	}
}

static void remember_procs(struct gpu *g);

int gpu__drain(struct gpu *g)
{
	const size_t site_val = offsetof(struct gpu_site, val);

	clock_calibrate(g);
	ring_buffer__consume(g->rb);
	adopt_targets(g);
	drain_stacks(g);
	for (size_t i = 0; i < GPU_MAX_PROCS; i++) {
		struct gpu_proc *p = &g->procs[i];

		if ((p->state == PROC_TARGET || p->state == PROC_EXITED) && !p->mm_id)
			p->mm_id = proc_mm_id(g, p->tgid);
	}
	read_map(g, g->skel->maps.gpu_sites, &g->sites, site_val);
	read_map(g, g->skel->maps.gpu_tally, &g->tally, offsetof(struct gpu_tally_row, val));
	read_map(g, g->skel->maps.gpu_errs, &g->errs, offsetof(struct gpu_err_row, count));
	read_map(g, g->skel->maps.gpu_colls, &g->colls, offsetof(struct gpu_coll_row, val));
	for (size_t i = 0; i < g->sites.n; i++) {
		struct gpu_site *s = (struct gpu_site *)g->sites.rows + i;
		struct gpu_proc *p = proc_find(g, s->key.tgid);
		uint64_t mm;

		if (!p)
			p = proc_find_exited(g, s->key.tgid);
		mm = p ? p->mm_id : 0;
		resolve_stack(g, s->key.tgid, s->key.stack_id, p);
		if (gpu_api_kind(s->key.api) == GPU_KIND_LAUNCH && !s->kernel)
			s->kernel = kernel_name(g, s->key.tgid, mm, s->key.api, s->key.object);
	}
	snapshot_allocs(g);
	if (g->opts.budget >= 0)
		budget_plan(g, mono_ns());
	remember_procs(g);
	finish_exited(g);
	return 0;
}

/* ---- data view ---------------------------------------------------------- */

static void remember_procs(struct gpu *g)
{
	/* the data's process table: every process ever traced */
	for (size_t i = 0; i < GPU_MAX_PROCS; i++) {
		const struct gpu_proc *p = &g->procs[i];
		struct gpu_proc_info *in = NULL;

		if (p->state != PROC_TARGET && p->state != PROC_EXITED)
			continue;
		for (size_t j = 0; j < g->data.nprocs; j++)
			if (g->data.procs[j].tgid == p->tgid)
				in = &g->data.procs[j];
		if (!in) {
			void *np = realloc(g->data.procs, (g->data.nprocs + 1) * sizeof(*in));

			if (!np)
				return;
			g->data.procs = np;
			in = &g->data.procs[g->data.nprocs++];
		}
		*in = p->info;
	}
}

/* One slot of a per-CPU array map, summed over CPUs (0 when unreadable). */
static uint64_t percpu_sum(const struct bpf_map *map, uint32_t key)
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t *v = calloc(ncpu > 0 ? ncpu : 1, sizeof(*v)), sum = 0;

	if (v && !bpf_map_lookup_elem(bpf_map__fd(map), &key, v))
		for (int i = 0; i < ncpu; i++)
			sum += v[i];
	free(v);
	return sum;
}

const struct gpu_data *gpu__data(struct gpu *g)
{
	struct gpu_data *d = &g->data;
	for (uint32_t c = 0; c < GPU_CNT_MAX; c++)
		d->bpf[c] = percpu_sum(g->skel->maps.gpu_counters, c);
	d->stacks = NULL;
	d->nstacks = g->stacks.n;
	d->sites = g->sites.rows;
	d->nsites = g->sites.n;
	d->tally = g->tally.rows;
	d->ntally = g->tally.n;
	d->errs = g->errs.rows;
	d->nerrs = g->errs.n;
	d->colls = g->colls.rows;
	d->ncolls = g->colls.n;
	d->calls = g->calls;
	d->ncalls = g->ncalls;
	d->end_ns = realtime_ns();
	d->sampling_ratio = gpu_budget__achieved(&g->budget);
	/* leaks: a compact copy of the groups with something outstanding */
	free(d->leaks);
	d->leaks = gpu_leaks__outstanding(&g->leaks, &d->nleaks);
	/* stacks: pointers into the stack table's rows */
	free(d->stacks_view);
	d->stacks_view = calloc(g->stacks.n + 1, sizeof(*d->stacks_view));
	for (size_t i = 0; d->stacks_view && i < g->stacks.n; i++)
		d->stacks_view[i] = ((const struct stack_row *)g->stacks.rows + i)->s;
	d->stacks = d->stacks_view;
	d->stack_index = &g->stacks;
	return d;
}

const struct gpu_stack *gpu_data__stack(const struct gpu_data *d, uint32_t tgid, uint64_t stack_id)
{
	struct stack_key k = { .tgid = tgid, .stack_id = stack_id };
	const struct stack_row *r = d->stack_index ? gpu_table__find(d->stack_index, &k) : NULL;

	return r ? &r->s : NULL;
}

const struct gpu_proc_info *gpu_data__proc(const struct gpu_data *d, uint32_t tgid)
{
	for (size_t i = 0; i < d->nprocs; i++)
		if (d->procs[i].tgid == tgid)
			return &d->procs[i];
	return NULL;
}

/* ---- life cycle ---------------------------------------------------------- */

/* Before load: the session's filter maps, for admission in BPF, and the
 * scheduler layer's API-layer map. */
static int session_maps(struct gpu *g)
{
	uint32_t f = g->opts.filter;
	bool admit = f == STRATA_FILTER_NONE;
	int err = 0;

	g->skel->rodata->filter_mode = f;
	if (f == STRATA_FILTER_TGIDS && g->opts.targets_fd > 0) {
		err = bpf_map__reuse_fd(g->skel->maps.session_targets, g->opts.targets_fd);
		admit = !err;
	} else if (f == STRATA_FILTER_CGROUP && g->opts.cgroup_map_fd > 0) {
		err = bpf_map__reuse_fd(g->skel->maps.session_cgroup, g->opts.cgroup_map_fd);
		admit = !err;
	} /* else no filter to admit by: /proc discovery only */
	g->skel->rodata->admit_in_bpf = admit;
	if (!err && g->opts.python && g->opts.py_procs_fd > 0) {
		err = bpf_map__reuse_fd(g->skel->maps.py_procs, g->opts.py_procs_fd);
		g->skel->rodata->want_python = !err && !g->opts.no_stacks;
	}
	if (!err && g->opts.api_layers_fd > 0) {
		err = bpf_map__reuse_fd(g->skel->maps.api_layers, g->opts.api_layers_fd);
		g->skel->rodata->mark_layers = !err;
	}
	if (!err && g->opts.unwind_rows_fd > 0 && g->opts.unwind_procs_fd > 0) {
		err = bpf_map__reuse_fd(g->skel->maps.unwind_rows, g->opts.unwind_rows_fd)
			      ?: bpf_map__reuse_fd(g->skel->maps.unwind_procs,
						   g->opts.unwind_procs_fd);
	} else if (!err) { /* no tables: the walker's frame-pointer steps only */
		bpf_map__set_max_entries(g->skel->maps.unwind_rows, 1);
		bpf_map__set_max_entries(g->skel->maps.unwind_procs, 1);
	}
	return err;
}

struct gpu *gpu__new(const struct gpu_opts *opts, struct module_registry *mods,
		     struct proc_tracker *procs, struct symbolizer *sym, struct ksyms *ksyms)
{
	struct gpu *g = calloc(1, sizeof(*g));
	int err;

	if (!g)
		return NULL;
	g->opts = *opts;
	if (g->opts.budget == 0)
		g->opts.budget = 0.01;
	if (g->opts.probe_cost_ns <= 0)
		g->opts.probe_cost_ns = 11000;
	if (!g->opts.grace_ms)
		g->opts.grace_ms = GPU_GRACE_MS;
	g->mods = mods;
	g->procs_tracker = procs;
	g->procs = calloc(GPU_MAX_PROCS, sizeof(*g->procs));
	g->calls = calloc(GPU_MAX_CALLS, sizeof(*g->calls));
	g->data.allocs = calloc(GPU_MAX_ALLOC_RECS, sizeof(*g->data.allocs));
	g->data.frames = profile__new(1);
	if (!g->procs || !g->calls || !g->data.frames) {
		err = -ENOMEM;
		goto err_out;
	}
	g->res = (struct resolver){
		.procs = procs,
		.sym = sym,
		.ksyms = ksyms,
		.out = g->data.frames,
		.python = opts->python,
	};
	gpu_table__init(&g->known, sizeof(struct gpu_known), 0, 16, GPU_MAX_KNOWN);
	gpu_table__init(&g->raw_stacks, sizeof(struct raw_stack), 0, 8, GPU_MAX_ROWS);
	gpu_table__init(&g->py_stacks, sizeof(struct py_stack_row), 0, 8, GPU_MAX_ROWS);
	gpu_table__init(&g->pairs, sizeof(struct pair_row), 0, 8, GPU_MAX_ROWS);
	gpu_table__init(&g->stacks, sizeof(struct stack_row), 0, sizeof(struct stack_key),
			GPU_MAX_ROWS);
	gpu_table__init(&g->sites, sizeof(struct gpu_site), 0, sizeof(struct gpu_site_key),
			GPU_MAX_ROWS);
	gpu_table__init(&g->tally, sizeof(struct gpu_tally_row), 0, sizeof(struct gpu_tally_key),
			GPU_MAX_ROWS);
	gpu_table__init(&g->errs, sizeof(struct gpu_err_row), 0, sizeof(struct gpu_err_key),
			GPU_MAX_ROWS);
	gpu_leaks__init(&g->leaks, GPU_MAX_ROWS);
	gpu_table__init(&g->colls, sizeof(struct gpu_coll_row), 0, sizeof(struct gpu_coll_key),
			GPU_MAX_ROWS);
	gpu_table__init(&g->funcs, sizeof(struct func_row), 0, sizeof(struct func_key),
			GPU_MAX_ROWS);

	g->skel = gpu_bpf__open();
	if (!g->skel) {
		err = -errno;
		goto err_out;
	}
	g->skel->rodata->trace_cuda = opts->trace;
	g->skel->rodata->want_stacks = !opts->no_stacks;
	g->skel->rodata->page_shift = (uint32_t)__builtin_ctzl((unsigned long)getpagesize());
	err = session_maps(g);
	if (err)
		goto err_out;
	err = uprobe_multi__prepare(g->skel->progs.gpu_enter_multi) ?:
	      uprobe_multi__prepare(g->skel->progs.gpu_exit_multi) ?:
	      uprobe_multi__prepare(g->skel->progs.gpu_empty_multi);
	if (err)
		goto err_out;
	err = gpu_bpf__load(g->skel);
	if (err) {
		pr_warn("gpu: cannot load the BPF object: %s", strerror(-err));
		goto err_out;
	}
	if (!bpf_program__attach(g->skel->progs.gpu_proc_exit) ||
	    !bpf_program__attach(g->skel->progs.gpu_proc_exec)) {
		err = -errno;
		goto err_out;
	}
	g->rb = ring_buffer__new(bpf_map__fd(g->skel->maps.gpu_events), on_event, g, NULL);
	if (!g->rb) {
		err = -errno;
		goto err_out;
	}
	err = ring_buffer__add(g->rb, bpf_map__fd(g->skel->maps.gpu_proc_events), on_proc_event, g);
	if (err)
		goto err_out;
	clock_calibrate(g);
	g->data.start_ns = realtime_ns();
	gpu_budget__init(&g->budget, g->opts.budget, g->opts.probe_cost_ns, 1000000000ULL,
			 mono_ns());
	g->window_start_ns = mono_ns();
	for (size_t i = 0; i < g->opts.nlibs; i++)
		pin_file(g, g->opts.libs[i]);
	if (!g->opts.no_preattach)
		gpu_libs_find(pin_file, g);
	return g;
err_out:
	gpu__free(g);
	errno = -err;
	return NULL;
}

void gpu__free(struct gpu *g)
{
	if (!g)
		return;
	for (int i = 0; i < g->nfiles; i++)
		file_detach(g, &g->files[i]);
	ring_buffer__free(g->rb);
	gpu_bpf__destroy(g->skel);
	for (size_t i = 0; i < g->raw_stacks.n; i++)
		free(((struct raw_stack *)g->raw_stacks.rows)[i].ips);
	for (size_t i = 0; i < g->py_stacks.n; i++)
		free(((struct py_stack_row *)g->py_stacks.rows)[i].py);
	gpu_table__fini(&g->py_stacks);
	gpu_table__fini(&g->pairs);
	for (size_t i = 0; i < g->stacks.n; i++)
		free(((struct stack_row *)g->stacks.rows)[i].s.frames);
	gpu_table__fini(&g->known);
	gpu_table__fini(&g->raw_stacks);
	gpu_table__fini(&g->stacks);
	gpu_table__fini(&g->sites);
	gpu_table__fini(&g->tally);
	gpu_table__fini(&g->errs);
	gpu_leaks__fini(&g->leaks);
	gpu_table__fini(&g->colls);
	gpu_table__fini(&g->funcs);
	profile__free(g->data.frames);
	free(g->data.procs);
	free(g->data.leaks);
	free(g->data.stacks_view);
	free(g->data.allocs);
	free(g->prev_calls);
	free(g->procs);
	free(g->calls);
	free(g);
}

static uint64_t map_entries(struct bpf_map *m)
{
	int fd = bpf_map__fd(m);
	char key[64], next[64];
	void *prev = NULL;
	uint64_t n = 0;

	while (bpf_map_get_next_key(fd, prev, next) == 0) {
		memcpy(key, next, sizeof(key));
		prev = key;
		n++;
	}
	return n;
}

void gpu__state(struct gpu *g, struct gpu_state *st)
{
	memset(st, 0, sizeof(*st));
	for (int i = 0; i < g->nfiles; i++)
		st->files_attached += g->files[i].refs > 0;
	st->links = g->links;
	for (size_t i = 0; i < GPU_MAX_PROCS; i++) {
		st->targets += g->procs[i].state == PROC_TARGET;
		st->watched += g->procs[i].state == PROC_WATCH;
	}
	st->bpf_targets = map_entries(g->skel->maps.gpu_targets);
	st->bpf_allocs = map_entries(g->skel->maps.gpu_allocs);
	st->bpf_inflight = map_entries(g->skel->maps.gpu_inflight);
	{
		struct bpf_map *maps[PROC_MAPS];

		proc_maps_of(g, maps);
		for (size_t m = 0; m < PROC_MAPS; m++)
			st->bpf_proc_rows += map_entries(maps[m]);
	}
}

void gpu__report(struct gpu *g)
{
	const struct gpu_data *d = gpu__data(g);
	struct gpu_state st;

	gpu__state(g, &st);
	fprintf(stderr,
		"strata: gpu: %zu processes traced, %d files with CUDA/NCCL, %zu call sites, "
		"%zu NCCL/trace calls; sampled %.1f%% of the time (ratio %.3f, %llu toggles)\n",
		d->nprocs, g->nfiles, d->nsites, d->ncalls, 100 * d->sampling_ratio,
		g->budget.ratio, (unsigned long long)g->budget.toggles);
	if (!log_enabled(LOG_INFO))
		return;
	fprintf(stderr, "  gpu.bpf:");
	for (int i = 0; i < GPU_CNT_MAX; i++)
		fprintf(stderr, " %s=%llu", strata_gpu_counter_name(i),
			(unsigned long long)d->bpf[i]);
	fprintf(stderr, "\n  gpu.unwind:");
	for (uint32_t i = 0; i < UNWIND_ERR_MAX; i++)
		fprintf(stderr, " %s=%llu", strata_unwind_counter_name(i),
			(unsigned long long)percpu_sum(g->skel->maps.unwind_errors, i));
	fprintf(stderr,
		"\n  gpu: links=%llu attach_failed=%llu files_attached=%llu targets=%llu "
		"watched=%llu exits=%llu scans=%llu bpf_targets=%llu bpf_allocs=%llu "
		"bpf_inflight=%llu bpf_proc_rows=%llu adopted=%llu dropped_rows=%llu "
		"dropped_calls=%llu procs_dropped=%llu "
		"clock_err_ns=%llu\n",
		(unsigned long long)st.links, (unsigned long long)g->attach_failed,
		(unsigned long long)st.files_attached, (unsigned long long)st.targets,
		(unsigned long long)st.watched, (unsigned long long)g->exits,
		(unsigned long long)g->scans, (unsigned long long)st.bpf_targets,
		(unsigned long long)st.bpf_allocs, (unsigned long long)st.bpf_inflight,
		(unsigned long long)st.bpf_proc_rows, (unsigned long long)g->adopted,
		(unsigned long long)d->dropped_rows, (unsigned long long)d->dropped_calls,
		(unsigned long long)g->procs_dropped, (unsigned long long)d->clock_err_ns);
}

/* --- wire (strata-agent --server): call records handed over --- */
void gpu__calls_taken(struct gpu *g)
{
	/* The agent shipped d->calls: the table starts again, so an
	 * always-on agent never reaches GPU_MAX_CALLS. */
	g->ncalls = 0;
	g->data.ncalls = 0;
}
