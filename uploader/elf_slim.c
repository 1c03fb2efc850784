// SPDX-License-Identifier: Apache-2.0
#include "uploader/elf_slim.h"

#include <elf.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SHNUM_MAX 65536		 /* section headers read at most (4 MiB) */
#define SHSTRTAB_MAX (16u << 20) /* section names read at most */

static int pread_all(int fd, void *buf, size_t n, uint64_t off)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EIO;
		got += (size_t)r;
	}
	return 0;
}

/* Loaded code and data the server does not read; the rest is kept. */
static bool dropped(const Elf64_Shdr *sh, const char *name)
{
	static const char *const keep[] = { ".eh_frame", ".eh_frame_hdr", ".gnu_debugdata" };

	if (sh->sh_type == SHT_NOBITS || sh->sh_type == SHT_NULL)
		return true; /* nothing in the file */
	if (!(sh->sh_flags & SHF_ALLOC) || sh->sh_type != SHT_PROGBITS)
		return false;
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

/* The section headers' ranges of an ELF64 LSB file; 1 when it is not one
 * (the caller sends it whole), 0, or -errno. */
static int section_ranges(int fd, uint64_t size, struct range_list *l)
{
	Elf64_Ehdr eh;
	Elf64_Shdr *sh = NULL, first;
	char *names = NULL;
	uint64_t shnum, names_len = 0;
	uint32_t shstrndx;
	int err;

	if (size < sizeof(eh) || pread_all(fd, &eh, sizeof(eh), 0))
		return 1;
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_ident[EI_DATA] != ELFDATA2LSB || !eh.e_shoff ||
	    eh.e_shentsize != sizeof(Elf64_Shdr) ||
	    (eh.e_phnum && eh.e_phentsize != sizeof(Elf64_Phdr)))
		return 1;
	/* extended numbering: the counts in the first section header */
	if (eh.e_shoff > size - sizeof(first) || pread_all(fd, &first, sizeof(first), eh.e_shoff))
		return 1;
	shnum = eh.e_shnum ? eh.e_shnum : first.sh_size;
	shstrndx = eh.e_shstrndx == SHN_XINDEX ? first.sh_link : eh.e_shstrndx;
	if (!shnum || shnum > SHNUM_MAX || shnum * sizeof(*sh) > size - eh.e_shoff)
		return 1;
	sh = malloc(shnum * sizeof(*sh));
	if (!sh)
		return -ENOMEM;
	err = pread_all(fd, sh, shnum * sizeof(*sh), eh.e_shoff);
	if (err)
		goto out;
	if (shstrndx < shnum && sh[shstrndx].sh_type == SHT_STRTAB &&
	    sh[shstrndx].sh_size <= SHSTRTAB_MAX && sh[shstrndx].sh_offset <= size &&
	    sh[shstrndx].sh_size <= size - sh[shstrndx].sh_offset) {
		names_len = sh[shstrndx].sh_size;
		names = malloc(names_len + 1);
		if (!names) {
			err = -ENOMEM;
			goto out;
		}
		if (pread_all(fd, names, names_len, sh[shstrndx].sh_offset))
			names_len = 0; /* nameless: every loaded section goes */
		names[names_len] = 0;
	}
	err = add(l, size, 0, sizeof(eh));
	if (!err)
		err = add(l, size, eh.e_shoff, shnum * sizeof(*sh));
	if (!err && eh.e_phnum)
		err = add(l, size, eh.e_phoff, (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr));
	for (uint64_t i = 0; !err && i < shnum; i++) {
		const char *name =
			names && sh[i].sh_name < names_len ? names + sh[i].sh_name : NULL;

		if (!dropped(&sh[i], name))
			err = add(l, size, sh[i].sh_offset, sh[i].sh_size);
	}
out:
	free(names);
	free(sh);
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
