// SPDX-License-Identifier: Apache-2.0
/*
 * Files with CUDA/NCCL entry points: classified once per (device, inode),
 * their probes attached while a target maps them (or for the whole session:
 * pre-attach, --gpu-lib), detached after a grace period without users.
 * Then the file's module is no longer pinned: when the registry evicts it
 * (no process maps it for a while, or at once when deleted), its slot is
 * given back.  A node runs jobs from many images over weeks, each with its
 * own copies (inodes) of the CUDA libraries: GPU_MAX_FILES bounds the files
 * in use, not the files ever seen.
 */
#include "agent/gpu/gpu_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "agent/gpu/gpu_names.h"
#include "agent/proc/uprobe_multi.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "gpu.skel.h"

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
		g->link_objs++;
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
		g->link_objs++;
	}
	return 0;
}

static void detach_probe(struct gpu *g, struct gpu_file *f, size_t i)
{
	if (f->enter[i]) {
		bpf_link__destroy(f->enter[i]);
		f->enter[i] = NULL;
		g->links--;
		g->link_objs--;
	}
	if (f->exit[i]) {
		bpf_link__destroy(f->exit[i]);
		f->exit[i] = NULL;
		g->links--;
		g->link_objs--;
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
		g->link_objs++;
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
		g->link_objs--;
	}
}

/* Attaches a file's probes (the sheddable ones only while the duty cycle
 * has them on). */
static void file_attach(struct gpu *g, struct gpu_file *f)
{
	uint64_t t0 = mono_ns();

	if (!f->mod_pin) { /* its probes attach through mod's fd */
		f->mod->pins++;
		f->mod_pin = true;
	}
	group_attach(g, f, GRP_FIXED);
	gpu_usdt_attach(g, f);
	if (g->budget.attached)
		group_attach(g, f, GRP_SHED);
	f->attached = true;
	g->attach_ns += mono_ns() - t0;
}

void gpu_file_detach(struct gpu *g, struct gpu_file *f)
{
	group_detach(g, f, GRP_FIXED);
	group_detach(g, f, GRP_SHED);
	gpu_usdt_detach(g, f);
	f->attached = false;
}

/* A file gained a user (a target process maps it). */
void gpu_file_ref(struct gpu *g, struct gpu_file *f)
{
	f->refs++;
	if (!f->attached)
		file_attach(g, f);
}

/* A file lost a user: detached once it has had none for the grace period
 * (gpu__poll), so churn of processes using one library costs one attach,
 * and their first calls are seen (admit() in BPF). */
void gpu_file_unref(struct gpu *g, struct gpu_file *f)
{
	if (f->refs && --f->refs == 0)
		f->idle_since_ms = mono_ms();
}

/* Detaches the files idle past the grace period; returns the next
 * deadline (ms). */
uint64_t gpu_files_expire(struct gpu *g, uint64_t now_ms)
{
	uint64_t next = UINT64_MAX;

	for (int i = 0; i < g->nfiles; i++) {
		struct gpu_file *f = &g->files[i];
		uint64_t due = f->idle_since_ms + g->opts.grace_ms;

		/* attached, or detected and never used (a process with
		 * GPU_PROC_FILES already): both hold mod until their grace ends */
		if (!f->used || f->refs || f->pinned || !f->mod_pin)
			continue;
		if (now_ms >= due) {
			if (f->attached) {
				pr_info("gpu: %s: no user for %u ms: detached", f->mod->path,
					g->opts.grace_ms);
				gpu_file_detach(g, f);
			}
			/* the registry may evict it now (forget_file) */
			f->mod->pins--;
			f->mod_pin = false;
		} else if (due < next) {
			next = due;
		}
	}
	return next;
}

/* A dynamic linker (ld.so) the watched processes run: its debugger hook
 * tells of every dlopen (PROC_EV_MAPPED_EXEC, bpf/gpu.bpf.c), so their maps
 * need not be polled. */
static void hook_dl(struct gpu *g, struct module *mod, uint64_t off)
{
	LIBBPF_OPTS(bpf_uprobe_opts, o);
	struct bpf_link *link;

	if (g->ndls >= GPU_MAX_DLS) {
		g->dls_dropped++;
		return;
	}
	link = bpf_program__attach_uprobe_opts(g->skel->progs.gpu_dl_notify, -1, mod->open_path,
					       off, &o);
	if (!link) {
		g->dls_failed++;
		pr_info("gpu: %s: no uprobe on _dl_debug_state (%s): the maps of its processes "
			"are read every %d ms",
			mod->path, strerror(errno), GPU_SCAN_MAX_MS);
		return;
	}
	mod->pins++; /* the uprobe holds the file: kept for good */
	g->dls[g->ndls++] = (struct gpu_dl){ .mod = mod, .link = link };
	pr_debug("gpu: %s: dynamic linker hooked at %#llx", mod->path, (unsigned long long)off);
}

/* The loader's detect() (agent/proc/loaders.h: once per file): the file's
 * CUDA/NCCL entry points, as a GPU file; NULL for other files. */
static void *detect_file(void *ctx, struct module *mod)
{
	struct gpu *g = ctx;
	struct gpu_file *f = NULL;

	for (int i = 0; i < g->nfiles && !f; i++)
		if (!g->files[i].used)
			f = &g->files[i];
	if (!f && g->nfiles >= GPU_MAX_FILES) {
		g->files_dropped++;
		return NULL;
	}
	if (!f)
		f = &g->files[g->nfiles];
	memset(f, 0, sizeof(*f));
	f->mod = mod;
	if (gpu_elf_scan(mod->fd, &f->probes))
		return NULL;
	if (f->probes.dl_notify && !f->probes.n) {
		hook_dl(g, mod, f->probes.dl_notify);
		return NULL;
	}
	gpu_usdt_scan(g, f); /* a framework library (libc10_cuda.so) has only these */
	if (!f->probes.n && !f->nusdt)
		return NULL;
	f->dev = mod->dev;
	f->ino = mod->ino;
	memset(f->multi, 0xff, sizeof(f->multi)); /* -1: no link */
	if (f == &g->files[g->nfiles])
		g->nfiles++;
	f->used = true;
	/* kept until its first users come and go (gpu_files_expire) */
	mod->pins++;
	f->mod_pin = true;
	f->idle_since_ms = mono_ms();
	pr_info("gpu: %s: %zu CUDA/NCCL entry points, %u framework USDT probes", mod->path,
		f->probes.n, f->nusdt);
	return f;
}

/* The loader's forget(): the registry evicts a file no process maps, so
 * it is detached and unpinned (pinned ones are never evicted): its slot is
 * free.  Mapped again later, it is detected again. */
static void forget_file(void *ctx, struct module *mod, void *answer)
{
	struct gpu *g = ctx;
	struct gpu_file *f = answer;

	(void)mod;
	if (!f)
		return;
	gpu_usdt_release(g, f);
	f->used = false;
	f->mod = NULL;
	g->files_freed++;
}

int gpu_files_register(struct gpu *g)
{
	struct proc_loader l = {
		.name = "gpu", .ctx = g, .detect = detect_file, .forget = forget_file
	};

	g->loader = proc_tracker__add_loader(g->procs_tracker, &l);
	return g->loader < 0 ? g->loader : 0;
}

/* The GPU file index of a module, or -1 (NULL: the file could not be
 * opened now, retried at the next sight). */
static int file_index(struct gpu *g, struct module *mod)
{
	struct gpu_file *f = mod ? proc_tracker__detect(g->procs_tracker, g->loader, mod) : NULL;

	return f ? (int)(f - g->files) : -1;
}

int gpu_classify(struct gpu *g, int pid, const struct proc_map *m, bool *dl)
{
	struct module *mod = modules__from_map(g->mods, pid, m);
	int fi = file_index(g, mod);

	for (size_t i = 0; mod && fi < 0 && i < g->ndls; i++)
		if (g->dls[i].mod == mod)
			*dl = true;
	return fi;
}

/* Attaches a library for the whole session (pre-attach, --gpu-lib). */
void gpu_pin_file(void *ctx, const char *path)
{
	struct gpu *g = ctx;
	struct stat st;
	int fi;

	if (stat(path, &st)) {
		pr_warn("gpu: %s: %s", path, strerror(errno));
		return;
	}
	fi = file_index(g, modules__from_path(g->mods, path));
	if (fi < 0) {
		pr_debug("gpu: %s: no CUDA/NCCL entry points", path);
		return;
	}
	if (!g->files[fi].pinned) {
		g->files[fi].pinned = true;
		file_attach(g, &g->files[fi]);
	}
}

/* The duty cycle: the sheddable probes of every attached file on or off. */
void gpu_shed_set(struct gpu *g, bool attach)
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
	/* after the detach: the calls entered before it are the ones that
	 * may never see their return (call_stale() in BPF) */
	if (!attach)
		g->skel->bss->gpu_shed_epoch++;
}
