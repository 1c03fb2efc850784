// SPDX-License-Identifier: Apache-2.0
#include "agent/python/python.h"

#include <bpf/bpf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/proc/proc_mem.h"
#include "lib/log.h"

#define BUCKETS 1024

/* A file's answer (python_detect_file), kept for python__free. */
struct py_file_node {
	struct py_file f;
	struct py_file_node *next;
};

struct python {
	int procs_fd;
	struct py_file_node *files; /* interpreter files (one per module) */
	size_t max, count;
	struct python_proc *buckets[BUCKETS];
	struct py_symbols *syms;
	struct python_stats st;
};

static size_t bucket_of(uint64_t mm_id)
{
	return (size_t)((mm_id * 0x9e3779b97f4a7c15ULL) >> 54) % BUCKETS;
}

struct python *python__new(int py_procs_fd, size_t max)
{
	struct python *py = calloc(1, sizeof(*py));

	if (!py)
		return NULL;
	py->procs_fd = py_procs_fd;
	py->max = max ? max : 4096;
	py->syms = py_symbols__new(0);
	if (!py->syms) {
		free(py);
		return NULL;
	}
	return py;
}

void python__free(struct python *py)
{
	if (!py)
		return;
	for (size_t b = 0; b < BUCKETS; b++) {
		struct python_proc *p = py->buckets[b], *next;

		for (; p; p = next) {
			next = p->next;
			free(p);
		}
	}
	while (py->files) {
		struct py_file_node *f = py->files;

		py->files = f->next;
		free(f);
	}
	py_symbols__free(py->syms);
	free(py);
}

const struct python_proc *python__find(const struct python *py, uint64_t mm_id)
{
	for (struct python_proc *p = py->buckets[bucket_of(mm_id)]; p; p = p->next)
		if (p->mm_id == mm_id)
			return p;
	return NULL;
}

/*
 * 3.13+: the interpreter's own offsets, read from the start of _PyRuntime.
 * Returns 0, or -errno when they are unreadable or describe a layout the
 * walker cannot read (free-threaded, offsets outside its windows): the
 * interpreter is then refused, not walked with the table's guesses.
 */
static int apply_debug_offsets(struct python *py, struct python_proc *p)
{
	unsigned char buf[PY_DEBUG_OFFSETS_SIZE];
	struct py_offsets o;
	int err;

	if (p->offs.version < 0x030d)
		return 0;
	err = proc_mem__read(p->tgid, p->found.runtime, buf, sizeof(buf));
	if (!err)
		err = py_offsets__from_debug(buf, sizeof(buf), &p->offs, &o);
	if (err) {
		py->st.debug_offsets_bad++;
		pr_warn("python: pid %u: _Py_DebugOffsets of 3.%u %s (%s): native frames only",
			p->tgid, p->offs.version & 0xff,
			err == -ENOTSUP ? "describe another layout" : "unreadable or inconsistent",
			strerror(-err));
		return err;
	}
	p->offs = o;
	py->st.debug_offsets++;
	return 0;
}

/* The loader's detect(): the file's interpreter answer, once per file. */
static void *detect_file(void *ctx, struct module *mod)
{
	struct python *py = ctx;
	struct py_file_node *f = malloc(sizeof(*f));
	int err = f ? python_detect_file(mod, &f->f) : -ENOMEM;

	if (err && err != -ENOTSUP) {
		free(f);
		return NULL;
	}
	f->next = py->files;
	py->files = f;
	return &f->f;
}

/* The loader's attach(): the address space's mappings were (re)read. */
static void maps_read(void *ctx, uint32_t tgid, uint64_t mm_id, const struct proc_mapping *maps,
		      void *const *files, size_t n)
{
	struct python *py = ctx;
	const struct py_offsets *table;
	struct strata_py_proc d;
	struct python_proc *p;
	struct py_found found;

	int err;

	if (python__find(py, mm_id))
		return;
	err = python_detect(maps, (const struct py_file *const *)files, n, &found);
	if (err == -ENOTSUP) {
		py->st.refused++;
		pr_info("python: pid %u: %s is a debug or free-threaded CPython %u.%u build: "
			"native frames only",
			tgid, found.mod->path, found.major, found.minor);
		return;
	}
	if (err)
		return;
	table = py_offsets__for(found.major, found.minor);
	if (!table) {
		py->st.unknown_version++;
		pr_info("python: pid %u: CPython %u.%u is not supported: native frames only", tgid,
			found.major, found.minor);
		return;
	}
	if (py->count >= py->max) {
		py->st.dropped++;
		return;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return;
	p->mm_id = mm_id;
	p->tgid = tgid;
	p->offs = *table;
	p->found = found;
	if (apply_debug_offsets(py, p)) {
		py->st.refused++;
		free(p);
		return;
	}
	py_offsets__to_bpf(&p->offs, found.runtime, &d);
	if (py->procs_fd >= 0 && bpf_map_update_elem(py->procs_fd, &mm_id, &d, BPF_ANY)) {
		py->st.dropped++;
		free(p);
		return;
	}
	p->next = py->buckets[bucket_of(mm_id)];
	py->buckets[bucket_of(mm_id)] = p;
	py->count++;
	py->st.interpreters++;
	pr_info("python: pid %u: CPython %u.%u in %s, _PyRuntime at 0x%llx", tgid, found.major,
		found.minor, found.mod->path, (unsigned long long)found.runtime);
}

/* The loader's detach(): the address space is gone. */
static void forget(void *ctx, uint64_t mm_id)
{
	struct python *py = ctx;
	struct python_proc **pp = &py->buckets[bucket_of(mm_id)];

	for (; *pp; pp = &(*pp)->next) {
		struct python_proc *p = *pp;

		if (p->mm_id != mm_id)
			continue;
		*pp = p->next;
		if (py->procs_fd >= 0)
			bpf_map_delete_elem(py->procs_fd, &mm_id);
		py_symbols__forget(py->syms, mm_id);
		free(p);
		py->count--;
		return;
	}
}

/* The loader's forget(): the registry evicts a file; its answer goes. */
static void forget_file(void *ctx, struct module *mod, void *answer)
{
	struct python *py = ctx;

	(void)mod;
	for (struct py_file_node **pp = &py->files; *pp; pp = &(*pp)->next) {
		if (&(*pp)->f != answer)
			continue;
		struct py_file_node *f = *pp;

		*pp = f->next;
		free(f);
		return;
	}
}

void python__loader(struct python *py, struct proc_loader *out)
{
	*out = (struct proc_loader){
		.name = "python",
		.ctx = py,
		.detect = detect_file,
		.attach = maps_read,
		.detach = forget,
		.forget = forget_file,
	};
}

int python_proc__is_eval(const struct python_proc *pp, const struct module *mod, uint64_t off)
{
	if (mod != pp->found.mod)
		return 0;
	for (int i = 0; i < pp->found.neval; i++)
		if (off >= pp->found.eval_lo[i] && off < pp->found.eval_hi[i])
			return 1;
	return 0;
}

int python__resolve_frame(struct python *py, const struct python_proc *pp,
			  const struct strata_py_frame *f, struct py_frame_sym *out)
{
	return py_symbols__resolve(py->syms, pp->tgid, pp->mm_id, &pp->offs, f, out);
}

void python__prefetch(struct python *py, uint64_t mm_id, const struct strata_py_stack *st)
{
	const struct python_proc *pp = python__find(py, mm_id);
	struct py_frame_sym sym;

	if (!pp)
		return;
	py->st.prefetched++;
	/* Failures are cached and counted by the symbol cache; the drain's
	 * lookups of these frames hit it. */
	for (uint32_t i = 0; i < st->len && i < STRATA_PY_MAX_DEPTH; i++)
		python__resolve_frame(py, pp, &st->frames[i], &sym);
}

struct python_stats *python__stats(struct python *py)
{
	return &py->st;
}

void python__symbol_stats(const struct python *py, struct py_symbols_stats *st)
{
	py_symbols__stats(py->syms, st);
}
