// SPDX-License-Identifier: Apache-2.0
#include "lib/sparse_elf.h"

#include "lib/elf_shdrs.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sparse_elf_reader__init(struct sparse_elf_reader *r)
{
	memset(r, 0, sizeof(*r));
}

void sparse_elf_reader__fini(struct sparse_elf_reader *r)
{
	free(r->table);
	free(r->r);
	r->table = NULL;
	r->r = NULL;
}

__attribute__((format(printf, 2, 3))) static int fail(struct sparse_elf_reader *r, const char *fmt,
						      ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->err, sizeof(r->err), fmt, ap);
	va_end(ap);
	r->failed = 1;
	return -EINVAL;
}

static uint64_t table_end(const struct sparse_elf_reader *r)
{
	return SPARSE_ELF_HEAD + 16 * (uint64_t)r->n;
}

static int parse_head(struct sparse_elf_reader *r)
{
	if (memcmp(r->head, SPARSE_ELF_MAGIC, 8))
		return fail(r, "not a sparse ELF (magic)");
	r->size = get_le(r->head + 8, 8);
	r->n = (uint32_t)get_le(r->head + 16, 4);
	if (get_le(r->head + 20, 4))
		return fail(r, "reserved header field not 0");
	if (!r->size || r->size > SPARSE_ELF_MAX_SIZE)
		return fail(r, "file size %llu outside 1..%llu", (unsigned long long)r->size,
			    (unsigned long long)SPARSE_ELF_MAX_SIZE);
	if (!r->n || r->n > SPARSE_ELF_MAX_RANGES)
		return fail(r, "%u ranges, want 1..%d", r->n, SPARSE_ELF_MAX_RANGES);
	r->table = malloc(16 * (size_t)r->n);
	r->r = malloc(sizeof(*r->r) * r->n);
	if (!r->table || !r->r) {
		r->failed = 1;
		return -ENOMEM;
	}
	return 0;
}

static int parse_table(struct sparse_elf_reader *r)
{
	uint64_t end = 0;

	for (uint32_t i = 0; i < r->n; i++) {
		uint64_t off = get_le(r->table + 16 * i, 8), len = get_le(r->table + 16 * i + 8, 8);

		if (!len || off < end || off > r->size || len > r->size - off)
			return fail(r, "range %u [%llu, +%llu) empty, out of order or past %llu", i,
				    (unsigned long long)off, (unsigned long long)len,
				    (unsigned long long)r->size);
		r->r[i] = (struct sparse_range){ off, len };
		end = off + len;
	}
	free(r->table);
	r->table = NULL;
	return 0;
}

int sparse_elf_reader__feed(struct sparse_elf_reader *r, const void *data, size_t len,
			    sparse_elf_write_fn write, void *ctx)
{
	const uint8_t *p = data;
	int err = 0;

	if (r->failed)
		return -EINVAL;
	while (len && !err) {
		size_t k;

		if (r->taken < SPARSE_ELF_HEAD) {
			k = SPARSE_ELF_HEAD - (size_t)r->taken;
			k = k < len ? k : len;
			memcpy(r->head + r->taken, p, k);
			r->taken += k;
			if (r->taken == SPARSE_ELF_HEAD)
				err = parse_head(r);
		} else if (r->taken < table_end(r)) {
			k = (size_t)(table_end(r) - r->taken);
			k = k < len ? k : len;
			memcpy(r->table + (r->taken - SPARSE_ELF_HEAD), p, k);
			r->taken += k;
			if (r->taken == table_end(r))
				err = parse_table(r);
		} else {
			const struct sparse_range *rg;

			if (r->ri == r->n)
				return fail(r, "bytes past the last range");
			rg = &r->r[r->ri];
			k = rg->len - r->in_range < len ? (size_t)(rg->len - r->in_range) : len;
			err = write(ctx, rg->off + r->in_range, p, k);
			if (err)
				r->failed = 1;
			r->taken += k;
			if ((r->in_range += k) == rg->len) {
				r->ri++;
				r->in_range = 0;
			}
		}
		p += k;
		len -= k;
	}
	return err;
}

int sparse_elf_reader__end(struct sparse_elf_reader *r, uint64_t *size)
{
	if (r->failed)
		return -EINVAL;
	if (r->taken < SPARSE_ELF_HEAD || r->taken < table_end(r) || r->ri < r->n)
		return fail(r, "body ended early (%llu bytes)", (unsigned long long)r->taken);
	*size = r->size;
	return 0;
}

bool sparse_elf_section_needed(const Elf64_Shdr *sh)
{
	if (sh->sh_type == SHT_NOBITS || sh->sh_type == SHT_NULL)
		return false;
	return !(sh->sh_flags & SHF_ALLOC) || sh->sh_type != SHT_PROGBITS;
}

struct cover {
	uint64_t size;
	const struct sparse_range *r;
	uint32_t n;
};

/* [off, off + len) inside one range (r sorted, disjoint). */
static bool covered(const struct cover *c, uint64_t off, uint64_t len)
{
	uint32_t lo = 0, hi = c->n;

	while (lo < hi) { /* the last range starting at or before off */
		uint32_t mid = lo + (hi - lo) / 2;

		if (c->r[mid].off <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo && off - c->r[lo - 1].off <= c->r[lo - 1].len &&
	       len <= c->r[lo - 1].len - (off - c->r[lo - 1].off);
}

static int check_section(void *ctx, const Elf64_Shdr *sh, const char *name)
{
	const struct cover *c = ctx;
	uint64_t len = sh->sh_size;

	(void)name;
	if (!sparse_elf_section_needed(sh) || sh->sh_offset >= c->size || !len)
		return 0;
	if (len > c->size - sh->sh_offset) /* clipped to the file, as the agent does */
		len = c->size - sh->sh_offset;
	return covered(c, sh->sh_offset, len) ? 0 : -EBADMSG;
}

int sparse_elf_check(int fd, uint64_t size, const struct sparse_range *r, uint32_t n)
{
	const struct cover c = { size, r, n };
	Elf64_Ehdr eh;
	uint64_t shnum = 0;
	int err;

	err = elf_shdrs__walk(fd, size, &eh, &shnum, check_section, (void *)&c);
	if (err != 1)
		return err;
	/* not a file whose sections we read: it must have come whole */
	return n == 1 && r[0].off == 0 && r[0].len == size ? 0 : -EBADMSG;
}
