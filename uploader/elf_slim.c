// SPDX-License-Identifier: Apache-2.0
#include "uploader/elf_slim.h"

#include <elf.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/elf_shdrs.h"

/* What the server does not read: loaded code and data
 * (!sparse_elf_section_needed), but for the unwind tables and MiniDebugInfo,
 * kept in case (small). */
static bool dropped(const Elf64_Shdr *sh, const char *name)
{
	static const char *const keep[] = { ".eh_frame", ".eh_frame_hdr", ".gnu_debugdata" };

	if (sparse_elf_section_needed(sh))
		return false;
	if (sh->sh_type == SHT_NOBITS || sh->sh_type == SHT_NULL)
		return true; /* nothing in the file */
	for (size_t i = 0; name && i < sizeof(keep) / sizeof(*keep); i++)
		if (!strcmp(name, keep[i]))
			return false;
	return true;
}

struct range_list {
	struct sparse_range *v;
	size_t n, cap;
};

/* [off, off + len) clipped to the file. */
static int add(struct range_list *l, uint64_t size, uint64_t off, uint64_t len)
{
	if (off >= size || !len)
		return 0;
	if (len > size - off)
		len = size - off;
	if (l->n == l->cap) {
		size_t ncap = l->cap ? 2 * l->cap : 64;
		struct sparse_range *nv = realloc(l->v, ncap * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		l->v = nv;
		l->cap = ncap;
	}
	l->v[l->n++] = (struct sparse_range){ off, len };
	return 0;
}

static int cmp_off(const void *a, const void *b)
{
	const struct sparse_range *x = a, *y = b;

	return (x->off > y->off) - (x->off < y->off);
}

/* Sorted l merged into out, ranges closer than gap joined; 0, or -E2BIG
 * when more than ELF_SLIM_MAX_RANGES remain. */
static int merge(const struct range_list *l, uint64_t gap, struct elf_slim *out)
{
	out->n = 0;
	out->kept = 0;
	for (size_t i = 0; i < l->n; i++) {
		struct sparse_range *last = out->n ? &out->r[out->n - 1] : NULL;
		uint64_t end = l->v[i].off + l->v[i].len;

		if (last && l->v[i].off <= last->off + last->len + gap) {
			if (end > last->off + last->len)
				last->len = end - last->off;
			continue;
		}
		if (out->n == ELF_SLIM_MAX_RANGES)
			return -E2BIG;
		out->r[out->n++] = l->v[i];
	}
	for (uint32_t i = 0; i < out->n; i++)
		out->kept += out->r[i].len;
	return 0;
}

struct walk {
	struct range_list *l;
	uint64_t size;
};

static int on_section(void *ctx, const Elf64_Shdr *sh, const char *name)
{
	struct walk *w = ctx;

	return dropped(sh, name) ? 0 : add(w->l, w->size, sh->sh_offset, sh->sh_size);
}

/* The ranges of an ELF64 LSB file's headers and kept sections; 1 when it
 * is not one (the caller sends it whole), 0, or -errno. */
static int section_ranges(int fd, uint64_t size, struct range_list *l)
{
	struct walk w = { l, size };
	Elf64_Ehdr eh;
	uint64_t shnum = 0;
	int err = elf_shdrs__walk(fd, size, &eh, &shnum, on_section, &w);

	if (err)
		return err;
	err = add(l, size, 0, sizeof(eh));
	if (!err)
		err = add(l, size, eh.e_shoff, shnum * sizeof(Elf64_Shdr));
	if (!err && eh.e_phnum)
		err = add(l, size, eh.e_phoff, (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr));
	return err;
}

int elf_slim__ranges(int fd, uint64_t size, struct elf_slim *out)
{
	struct range_list l = { 0 };
	int err;

	memset(out, 0, sizeof(*out));
	out->size = size;
	err = section_ranges(fd, size, &l);
	if (err < 0)
		goto out;
	if (err > 0 || !l.n) { /* not one we read: whole */
		out->n = size ? 1 : 0;
		out->r[0] = (struct sparse_range){ 0, size };
		out->kept = size;
		err = 0;
		goto out;
	}
	qsort(l.v, l.n, sizeof(*l.v), cmp_off);
	/* thousands of sections (a -ffunction-sections object): wider joins,
	 * at worst one range (a gap past the file's size joins them all) */
	for (uint64_t gap = ELF_SLIM_GAP;; gap *= 4) {
		err = merge(&l, gap, out);
		if (err != -E2BIG || gap > size)
			break;
	}
out:
	free(l.v);
	return err;
}
