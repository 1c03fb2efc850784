// SPDX-License-Identifier: Apache-2.0
#include "agent/proc/unwind_loader.h"

#include <bpf/bpf.h>
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agent/core/row_alloc.h"
#include "agent/proc/table_builder.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "unwind/unwind_table.h"

#define TABLE_BUCKETS 1024
/* Processes with more executable mappings than this (frameworks: a python
 * with torch maps ~300 files, 90 MiB of tables) load tables lazily: a file's
 * table is built once samples land in it.  Smaller ones load eagerly, so a
 * short-lived program unwinds right from its first samples. */
#define EAGER_MAX_MAPS 64
#define ROW_BATCH 4096 /* rows per bpf_map_update_batch call */
#define MAX_SEGMENTS 16

/* A file's table as loaded in BPF, and the segments to map file offsets
 * to ELF virtual addresses. */
struct table_ref {
	const struct module *mod;
	uint32_t row_first; /* UNWIND_NO_TABLE: not in BPF (failed, no room, evicted) */
	uint32_t row_count;
	bool failed;   /* no usable CFI: never retried */
	bool wanted;   /* sampled while not loaded: load at the next flush */
	bool building; /* on the builder thread, as job seq */
	uint64_t seq;
	uint32_t refs;	    /* address spaces whose unwind_procs entry uses it */
	uint64_t last_used; /* loader clock when last sampled or loaded */
	struct {
		uint64_t offset, vaddr, filesz;
	} seg[MAX_SEGMENTS];
	int nseg;
	struct table_ref *next;
};

/* Which tables an address space's unwind_procs entry uses (for refs, and
 * for rewriting the entry when one of them is evicted). */
struct proc_ref {
	uint64_t mm_id;
	struct table_ref *tabs[UNWIND_MAX_MAPS];    /* per entry of maps[], or NULL */
	const struct module *mods[UNWIND_MAX_MAPS]; /* for lazy loads */
	uint64_t start[UNWIND_MAX_MAPS], pgoff[UNWIND_MAX_MAPS];
	uint32_t n;
	struct proc_ref *next;
};

#define PROC_BUCKETS 1024

struct unwind_loader {
	int rows_fd, procs_fd;
	uint32_t max_rows;
	uint64_t clock; /* bumped per touch batch: recency without syscalls */
	struct row_alloc rows;
	struct table_ref *buckets[TABLE_BUCKETS];
	struct proc_ref *procs[PROC_BUCKETS];
	bool have_wanted;
	struct table_builder *builder; /* NULL: every table built on the loop */
	uint64_t async_min_bytes;      /* files this large go to the builder */
	uint64_t next_seq;
	struct unwind_loader_stats st;
};

struct unwind_loader *unwind_loader__new(int rows_fd, uint32_t max_rows, int procs_fd)
{
	struct unwind_loader *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	l->rows_fd = rows_fd;
	l->procs_fd = procs_fd;
	l->max_rows = max_rows;
	l->st.rows_max = max_rows;
	row_alloc__init(&l->rows, max_rows);
	elf_version(EV_CURRENT);
	return l;
}

void unwind_loader__free(struct unwind_loader *l)
{
	if (!l)
		return;
	table_builder__free(l->builder); /* first: its results point at tables */
	for (size_t b = 0; b < TABLE_BUCKETS; b++) {
		struct table_ref *t = l->buckets[b], *next;

		for (; t; t = next) {
			next = t->next;
			free(t);
		}
	}
	for (size_t b = 0; b < PROC_BUCKETS; b++) {
		struct proc_ref *p = l->procs[b], *next;

		for (; p; p = next) {
			next = p->next;
			free(p);
		}
	}
	free(l);
}

/* The PT_LOAD segments of the file, for file offset -> vaddr. */
static int read_segments(int fd, struct table_ref *t)
{
	/* ELF_C_READ (pread into bounded heap copies), never mmap: the file
	 * is a target's, which may truncate it while we read (SIGBUS) */
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	size_t nph;
	int err = 0;

	if (!elf)
		return -ENOEXEC;
	if (elf_kind(elf) != ELF_K_ELF || elf_getphdrnum(elf, &nph)) {
		err = -ENOEXEC;
		goto out;
	}
	for (size_t i = 0; i < nph && t->nseg < MAX_SEGMENTS; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		t->seg[t->nseg].offset = ph.p_offset;
		t->seg[t->nseg].vaddr = ph.p_vaddr;
		t->seg[t->nseg].filesz = ph.p_filesz;
		t->nseg++;
	}
out:
	elf_end(elf);
	return err;
}

/* Load bias of a mapping: ELF vaddr = ip - bias, from the segment holding
 * the mapping's file offset.  Returns 0, or -ENOENT. */
static int bias_of(const struct table_ref *t, const struct proc_mapping *m, uint64_t *bias)
{
	for (int i = 0; i < t->nseg; i++) {
		/* Segments start mid-page: compare page-aligned offsets. */
		uint64_t off = t->seg[i].offset & ~0xfffULL;

		if (m->pgoff >= off && m->pgoff < t->seg[i].offset + t->seg[i].filesz) {
			*bias = m->start - m->pgoff + t->seg[i].offset - t->seg[i].vaddr;
			return 0;
		}
	}
	return -ENOENT;
}

/* Copies rows into unwind_rows[first...] in batches. */
static int write_rows(struct unwind_loader *l, uint32_t first, const struct unwind_row *rows,
		      uint32_t n)
{
	uint32_t keys[ROW_BATCH];

	for (uint32_t done = 0; done < n;) {
		uint32_t cnt = n - done < ROW_BATCH ? n - done : ROW_BATCH;

		for (uint32_t i = 0; i < cnt; i++)
			keys[i] = first + done + i;
		if (bpf_map_update_batch(l->rows_fd, keys, rows + done, &cnt, NULL)) {
			/* No batch support: one row at a time. */
			for (uint32_t i = 0; i < cnt; i++)
				if (bpf_map_update_elem(l->rows_fd, &keys[i], &rows[done + i],
							BPF_ANY))
					return -errno;
		}
		done += cnt;
	}
	return 0;
}

static struct table_ref *table_find(struct unwind_loader *l, const struct module *mod)
{
	for (struct table_ref *t = l->buckets[((uintptr_t)mod >> 4) % TABLE_BUCKETS]; t;
	     t = t->next)
		if (t->mod == mod)
			return t;
	return NULL;
}

static struct proc_ref **proc_slot(struct unwind_loader *l, uint64_t mm_id)
{
	struct proc_ref **pp = &l->procs[(mm_id * 0x9e3779b97f4a7c15ULL) >> 54];

	while (*pp && (*pp)->mm_id != mm_id)
		pp = &(*pp)->next;
	return pp;
}

/*
 * Rewrites every address space's unwind_procs entry that maps t's file:
 * attach points the entries without a table at t's rows; detach turns the
 * entries using t into "no table" (FP steps there).
 */
static void retarget(struct unwind_loader *l, struct table_ref *t, bool attach)
{
	for (size_t b = 0; b < PROC_BUCKETS; b++) {
		for (struct proc_ref *p = l->procs[b]; p; p = p->next) {
			struct unwind_proc proc;
			bool changed = false;

			for (uint32_t i = 0; i < p->n; i++) {
				struct proc_mapping m = { .start = p->start[i],
							  .pgoff = p->pgoff[i] };
				uint64_t bias = 0;

				if (attach ? p->mods[i] != t->mod || p->tabs[i] ||
						     bias_of(t, &m, &bias)
					   : p->tabs[i] != t)
					continue;
				if (!changed && bpf_map_lookup_elem(l->procs_fd, &p->mm_id, &proc))
					break;
				changed = true;
				if (attach) {
					proc.maps[i].bias = bias;
					proc.maps[i].row_first = t->row_first;
					proc.maps[i].row_count = t->row_count;
					p->tabs[i] = t;
					t->refs++;
				} else {
					proc.maps[i].row_first = UNWIND_NO_TABLE;
					p->tabs[i] = NULL;
					t->refs--;
				}
			}
			if (changed)
				bpf_map_update_elem(l->procs_fd, &p->mm_id, &proc, BPF_ANY);
		}
	}
}

/*
 * Takes victim's rows back.  Address spaces using it first get their
 * entries rewritten to "no table", so BPF stops reading the rows before
 * they are reused.
 */
static void evict(struct unwind_loader *l, struct table_ref *victim)
{
	if (victim->refs)
		retarget(l, victim, false);
	row_alloc__put(&l->rows, victim->row_first, victim->row_count);
	victim->row_first = UNWIND_NO_TABLE;
	victim->refs = 0;
	l->st.tables_evicted++;
}

/* Rows for n, evicting least recently sampled tables (unused ones first)
 * until they fit; -1 when even that cannot make room. */
static int64_t rows_get(struct unwind_loader *l, uint32_t n, const struct table_ref *keep)
{
	int64_t first;

	while ((first = row_alloc__get(&l->rows, n)) < 0) {
		struct table_ref *victim = NULL;

		for (size_t b = 0; b < TABLE_BUCKETS; b++) {
			for (struct table_ref *t = l->buckets[b]; t; t = t->next) {
				if (t == keep || t->row_first == UNWIND_NO_TABLE)
					continue;
				if (!victim || (t->refs == 0) > (victim->refs == 0) ||
				    ((t->refs == 0) == (victim->refs == 0) &&
				     t->last_used < victim->last_used))
					victim = t;
			}
		}
		if (!victim)
			return -1;
		evict(l, victim);
	}
	return first;
}

/* The table record of a file, created (not built) on first sight. */
static struct table_ref *table_get(struct unwind_loader *l, const struct module *mod)
{
	size_t b = ((uintptr_t)mod >> 4) % TABLE_BUCKETS;
	struct table_ref *t = table_find(l, mod);

	if (t)
		return t;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->mod = mod;
	t->row_first = UNWIND_NO_TABLE;
	t->next = l->buckets[b];
	l->buckets[b] = t;
	if (read_segments(mod->fd, t)) {
		t->failed = true;
		l->st.tables_failed++;
	}
	return t;
}

/* Copies a built table (err: none could be built) into BPF; frees tab. */
static void table_install(struct unwind_loader *l, struct table_ref *t, int err,
			  struct unwind_table *tab)
{
	int64_t first;

	if (err) {
		t->failed = true;
		l->st.tables_failed++;
		pr_debug("unwind: %s: no table: %s", t->mod->path, strerror(-err));
		return;
	}
	l->st.tables_built++;
	first = tab->nrows ? rows_get(l, tab->nrows, t) : -1;
	if (first < 0) {
		l->st.tables_dropped_full++;
		pr_info("unwind: %s: %u rows do not fit (%u of %u used): frame pointers only",
			t->mod->path, tab->nrows, l->rows.used, l->max_rows);
	} else if (!write_rows(l, (uint32_t)first, tab->rows, tab->nrows)) {
		t->row_first = (uint32_t)first;
		t->row_count = tab->nrows;
	} else {
		row_alloc__put(&l->rows, (uint32_t)first, tab->nrows);
		l->st.tables_failed++;
	}
	l->st.rows_used = l->rows.used;
	unwind_table__free(tab);
}

/* A large file's table goes to the builder thread; true if it went. */
static bool table_submit(struct unwind_loader *l, struct table_ref *t)
{
	struct stat st;

	if (!l->builder || fstat(t->mod->fd, &st) || (uint64_t)st.st_size < l->async_min_bytes)
		return false;
	if (table_builder__submit(l->builder, t->mod->fd, l->next_seq + 1)) {
		l->st.tables_async_busy++; /* built here instead */
		return false;
	}
	t->seq = ++l->next_seq;
	t->building = true;
	l->st.tables_async++;
	return true;
}

/* Builds t's table and copies it into BPF (again after an eviction), or
 * has the builder thread build it (the address spaces mapping the file get
 * it when it is back: unwind_loader__collect). */
static void table_load(struct unwind_loader *l, struct table_ref *t)
{
	struct unwind_table *tab = NULL;
	uint64_t t0;
	int err;

	t->wanted = false;
	if (t->row_first != UNWIND_NO_TABLE || t->failed || t->building)
		return;
	t->last_used = ++l->clock;
	if (table_submit(l, t))
		return;
	t0 = mono_ns();
	err = unwind_table__build(t->mod->fd, &tab);
	l->st.build_ns += mono_ns() - t0;
	table_install(l, t, err, tab);
}

/* Drops an address space's references (before reload or when it is gone). */
static void proc_unref(struct proc_ref *p)
{
	for (uint32_t i = 0; i < p->n; i++)
		if (p->tabs[i] && p->tabs[i]->refs)
			p->tabs[i]->refs--;
	p->n = 0;
}

void unwind_loader__touch(struct unwind_loader *l, const struct module *mod)
{
	struct table_ref *t = table_find(l, mod);

	if (!t)
		t = table_get(l, mod);
	if (!t)
		return;
	t->last_used = l->clock;
	if (t->row_first == UNWIND_NO_TABLE && !t->failed && !t->wanted) {
		t->wanted = true;
		l->have_wanted = true;
	}
}

void unwind_loader__tick(struct unwind_loader *l)
{
	l->clock++;
}

void unwind_loader__flush(struct unwind_loader *l)
{
	if (!l->have_wanted)
		return;
	l->have_wanted = false;
	for (size_t b = 0; b < TABLE_BUCKETS; b++) {
		for (struct table_ref *t = l->buckets[b]; t; t = t->next) {
			if (!t->wanted)
				continue;
			table_load(l, t);
			if (t->row_first != UNWIND_NO_TABLE) {
				l->st.tables_lazy++;
				retarget(l, t, true);
			}
		}
	}
}

int unwind_loader__load(struct unwind_loader *l, uint64_t mm_id, const struct proc_mapping *maps,
			size_t n)
{
	struct table_ref *tabs[UNWIND_MAX_MAPS] = { 0 };
	struct proc_ref **slot, *pref;
	struct unwind_proc *proc;
	size_t nmaps = n < UNWIND_MAX_MAPS ? n : UNWIND_MAX_MAPS;
	int err = 0;

	if (!mm_id)
		return 0;
	if (n > nmaps)
		l->st.maps_truncated += n - nmaps;
	slot = proc_slot(l, mm_id);
	pref = *slot;
	if (!pref) {
		pref = calloc(1, sizeof(*pref));
		if (!pref)
			return -ENOMEM;
		pref->mm_id = mm_id;
		*slot = pref;
	}
	proc_unref(pref);
	proc = calloc(1, sizeof(*proc));
	if (!proc)
		return -ENOMEM;

	/* Phase 1: every table this address space needs, built or loaded.
	 * Loading one may evict another, even one of these: the entry is
	 * filled only afterwards, from each table's state at that point. */
	for (size_t i = 0; i < nmaps; i++) {
		if (!maps[i].mod)
			continue; /* anonymous (JIT) code: frame pointers */
		tabs[i] = table_get(l, maps[i].mod);
		if (!tabs[i])
			continue;
		if (n <= EAGER_MAX_MAPS)
			table_load(l, tabs[i]);
		tabs[i]->last_used = l->clock;
	}
	/* Phase 2: the entry, and the references it holds. */
	for (size_t i = 0; i < nmaps; i++) {
		struct unwind_map *um = &proc->maps[i];
		struct table_ref *t = tabs[i];
		uint64_t bias;

		um->start = maps[i].start;
		um->end = maps[i].end;
		um->row_first = UNWIND_NO_TABLE;
		pref->tabs[i] = NULL;
		pref->mods[i] = maps[i].mod;
		pref->start[i] = maps[i].start;
		pref->pgoff[i] = maps[i].pgoff;
		if (!t || t->row_first == UNWIND_NO_TABLE || bias_of(t, &maps[i], &bias))
			continue;
		um->bias = bias;
		um->row_first = t->row_first;
		um->row_count = t->row_count;
		pref->tabs[i] = t;
		t->refs++;
	}
	proc->nmaps = (uint32_t)nmaps;
	pref->n = (uint32_t)nmaps;
	if (bpf_map_update_elem(l->procs_fd, &mm_id, proc, BPF_ANY)) {
		err = -errno;
		l->st.procs_failed++;
	} else {
		l->st.procs_loaded++;
	}
	free(proc);
	return err;
}

void unwind_loader__forget(struct unwind_loader *l, uint64_t mm_id)
{
	struct proc_ref **slot = proc_slot(l, mm_id), *p = *slot;

	bpf_map_delete_elem(l->procs_fd, &mm_id);
	if (!p)
		return;
	proc_unref(p);
	*slot = p->next;
	free(p);
}

/* A file is evicted from the registry: its table record goes (no address
 * space maps the file, so none uses its rows). */
static void loader_forget(void *ctx, struct module *mod, void *answer)
{
	struct unwind_loader *l = ctx;
	struct table_ref **pp = &l->buckets[((uintptr_t)mod >> 4) % TABLE_BUCKETS];

	(void)answer;
	while (*pp && (*pp)->mod != mod)
		pp = &(*pp)->next;
	if (!*pp)
		return;
	struct table_ref *t = *pp;

	if (t->row_first != UNWIND_NO_TABLE)
		evict(l, t);
	*pp = t->next;
	free(t);
	l->st.tables_forgotten++;
}

/* A table back from the builder thread: installed, and given to every
 * address space mapping its file; dropped if the file was forgotten since. */
static void built(void *ctx, uint64_t seq, int err, struct unwind_table *tab, uint64_t build_ns)
{
	struct unwind_loader *l = ctx;

	l->st.build_ns += build_ns;
	for (size_t b = 0; b < TABLE_BUCKETS; b++) {
		for (struct table_ref *t = l->buckets[b]; t; t = t->next) {
			if (!t->building || t->seq != seq)
				continue;
			t->building = false;
			table_install(l, t, err, tab);
			if (t->row_first != UNWIND_NO_TABLE)
				retarget(l, t, true);
			return;
		}
	}
	unwind_table__free(tab);
}

int unwind_loader__async(struct unwind_loader *l, uint64_t min_bytes)
{
	l->async_min_bytes = min_bytes;
	if (!l->builder)
		l->builder = table_builder__new();
	return l->builder ? table_builder__fd(l->builder) : -errno;
}

void unwind_loader__collect(struct unwind_loader *l)
{
	if (l->builder)
		table_builder__collect(l->builder, built, l);
}

/* The registry's calls (agent/proc/loaders.h). */
static void loader_attach(void *ctx, uint32_t tgid, uint64_t mm_id, const struct proc_mapping *maps,
			  void *const *files, size_t n)
{
	unwind_loader__load(ctx, mm_id, maps, n); /* failures counted */
}

static void loader_detach(void *ctx, uint64_t mm_id)
{
	unwind_loader__forget(ctx, mm_id);
}

static void loader_wanted(void *ctx, const struct module *mod)
{
	unwind_loader__touch(ctx, mod);
	unwind_loader__flush(ctx);
}

void unwind_loader__loader(struct unwind_loader *l, struct proc_loader *out)
{
	*out = (struct proc_loader){
		.name = "unwind",
		.ctx = l,
		.attach = loader_attach,
		.detach = loader_detach,
		.wanted = loader_wanted,
		.forget = loader_forget,
	};
}

void unwind_loader__stats(const struct unwind_loader *l, struct unwind_loader_stats *st)
{
	*st = l->st;
	st->rows_leaked = l->rows.leaked;
}
