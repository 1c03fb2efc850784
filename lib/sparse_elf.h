/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sparse ELF upload (docs/wire-format.md "Sparse ELF upload"): what an
 * agent sends of a file for symbolization, its loaded code and data left
 * out (uploader/elf_slim.h), and the server stores as a sparse file with
 * every kept byte at its own offset.  Little-endian:
 *
 *   header  "STRSPARS" | u64 size | u32 nranges | u32 0
 *   ranges  nranges x { u64 offset, u64 length }: sorted, disjoint,
 *           non-empty, within size
 *   data    each range's bytes, in order; nothing after
 *
 * The reader takes the body in pieces of any size (as HTTP brings it) and
 * treats it as hostile: every field checked before it is used, the table
 * bounded (SPARSE_ELF_MAX_RANGES), the size too (SPARSE_ELF_MAX_SIZE).
 */
#ifndef STRATA_LIB_SPARSE_ELF_H
#define STRATA_LIB_SPARSE_ELF_H

#include <elf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SPARSE_ELF_CTYPE "application/x-strata-sparse-elf"
#define SPARSE_ELF_MAGIC "STRSPARS"
#define SPARSE_ELF_HEAD 24
#define SPARSE_ELF_MAX_RANGES 4096
#define SPARSE_ELF_MAX_SIZE (16ull << 30) /* the file's size, holes included */

struct sparse_range {
	uint64_t off, len;
};

static inline void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline void put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint64_t get_le(const uint8_t *p, int bytes)
{
	uint64_t v = 0;

	for (int i = bytes - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* Where a piece of the body goes: len bytes at off of the file.  0 or
 * -errno (the reading stops). */
typedef int (*sparse_elf_write_fn)(void *ctx, uint64_t off, const void *data, size_t len);

struct sparse_elf_reader {
	uint8_t head[SPARSE_ELF_HEAD];
	uint64_t taken;		/* body bytes taken so far */
	uint64_t size;		/* the file's, from the header */
	uint32_t n, ri;		/* ranges; the one being filled */
	uint64_t in_range;	/* of it, bytes written */
	struct sparse_range *r; /* n of them, once the table is in */
	uint8_t *table;		/* the table's bytes while it comes */
	int failed;		/* nothing more is taken */
	char err[128];		/* why it failed */
};

void sparse_elf_reader__init(struct sparse_elf_reader *r);
void sparse_elf_reader__fini(struct sparse_elf_reader *r);

/* Takes len more bytes of the body.  0; -EINVAL when it is malformed
 * (r->err says how), -ENOMEM, or write's error. */
int sparse_elf_reader__feed(struct sparse_elf_reader *r, const void *data, size_t len,
			    sparse_elf_write_fn write, void *ctx);

/* The body ended: 0 and the file's size when it was whole, -EINVAL. */
int sparse_elf_reader__end(struct sparse_elf_reader *r, uint64_t *size);

/* A section a symbolizer reads, which an upload must carry whole: all but
 * the loaded code and data (SHF_ALLOC SHT_PROGBITS) and those with nothing
 * in the file (SHT_NOBITS, SHT_NULL). */
bool sparse_elf_section_needed(const Elf64_Shdr *sh);

/*
 * The file fd (size bytes) as stored from the ranges r[0..n): 0 when every
 * section it needs lies inside one range, or the file came whole;
 * -EBADMSG otherwise (a hole where a symbol table claims to be: the
 * server's symbolizer would read gigabytes of zeros); -ENOMEM, -EIO.
 */
int sparse_elf_check(int fd, uint64_t size, const struct sparse_range *r, uint32_t n);

#endif /* STRATA_LIB_SPARSE_ELF_H */
