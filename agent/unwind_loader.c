// SPDX-License-Identifier: Apache-2.0
#include "agent/unwind_loader.h"

#include <bpf/bpf.h>
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>

#include "agent/clock.h"
#include "agent/log.h"
#include "unwind/unwind_table.h"

#define TABLE_BUCKETS 1024
#define ROW_BATCH 4096 /* rows per bpf_map_update_batch call */
#define MAX_SEGMENTS 16

/* A file's table as loaded in BPF, and the segments to map file offsets
 * to ELF virtual addresses. */
struct table_ref {
	const struct module *mod;
	uint32_t row_first; /* UNWIND_NO_TABLE: none (failed or no room) */
	uint32_t row_count;
	struct {
		uint64_t offset, vaddr, filesz;
	} seg[MAX_SEGMENTS];
	int nseg;
	struct table_ref *next;
};

struct unwind_loader {
	int rows_fd, procs_fd;
	uint32_t max_rows, next_row;
	struct table_ref *buckets[TABLE_BUCKETS];
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
	elf_version(EV_CURRENT);
	return l;
}

void unwind_loader__free(struct unwind_loader *l)
{
	if (!l)
		return;
	for (size_t b = 0; b < TABLE_BUCKETS; b++) {
		struct table_ref *t = l->buckets[b], *next;

		for (; t; t = next) {
			next = t->next;
			free(t);
		}
	}
	free(l);
}

/* The PT_LOAD segments of the file, for file offset -> vaddr. */
static int read_segments(int fd, struct table_ref *t)
{
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
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

/* The loaded table of a file, compiling and loading it on first use. */
static struct table_ref *table_of(struct unwind_loader *l, const struct module *mod)
{
	size_t b = ((uintptr_t)mod >> 4) % TABLE_BUCKETS;
	struct unwind_table *tab = NULL;
	struct table_ref *t;
	uint64_t t0;
	int err;

	for (t = l->buckets[b]; t; t = t->next)
		if (t->mod == mod)
			return t;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->mod = mod;
	t->row_first = UNWIND_NO_TABLE;
	t->next = l->buckets[b];
	l->buckets[b] = t;

	if (read_segments(mod->fd, t)) {
		l->st.tables_failed++;
		return t;
	}
	t0 = mono_ns();
	err = unwind_table__build(mod->fd, &tab);
	l->st.build_ns += mono_ns() - t0;
	if (err) {
		l->st.tables_failed++;
		pr_debug("unwind: %s: no table: %s", mod->path, strerror(-err));
		return t;
	}
	l->st.tables_built++;
	if (tab->nrows > l->max_rows - l->next_row) {
		l->st.tables_dropped_full++;
		pr_info("unwind: %s: rows map full (%u of %u used): frame pointers only", mod->path,
			l->next_row, l->max_rows);
	} else if (!write_rows(l, l->next_row, tab->rows, tab->nrows)) {
		t->row_first = l->next_row;
		t->row_count = tab->nrows;
		l->next_row += tab->nrows;
		l->st.rows_used = l->next_row;
	} else {
		l->st.tables_failed++;
	}
	unwind_table__free(tab);
	return t;
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

int unwind_loader__load(struct unwind_loader *l, uint64_t mm_id, const struct proc_mapping *maps,
			size_t n)
{
	struct unwind_proc *proc;
	int err = 0;

	if (!mm_id)
		return 0;
	proc = calloc(1, sizeof(*proc));
	if (!proc)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		struct unwind_map *um;
		struct table_ref *t;
		uint64_t bias;

		if (proc->nmaps == UNWIND_MAX_MAPS) {
			l->st.maps_truncated += n - i;
			break;
		}
		um = &proc->maps[proc->nmaps++];
		um->start = maps[i].start;
		um->end = maps[i].end;
		um->row_first = UNWIND_NO_TABLE;
		if (!maps[i].mod)
			continue; /* [vdso], JIT code: frame pointers */
		t = table_of(l, maps[i].mod);
		if (!t || t->row_first == UNWIND_NO_TABLE || bias_of(t, &maps[i], &bias))
			continue;
		um->bias = bias;
		um->row_first = t->row_first;
		um->row_count = t->row_count;
	}
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
	bpf_map_delete_elem(l->procs_fd, &mm_id);
}

void unwind_loader__stats(const struct unwind_loader *l, struct unwind_loader_stats *st)
{
	*st = l->st;
}
