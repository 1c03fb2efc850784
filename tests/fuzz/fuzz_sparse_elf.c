// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target: the two sides of the sparse ELF upload on arbitrary
 * bytes.  Byte 0 picks the side:
 *   0: the server's reader (lib/sparse_elf.c) fed the rest in pieces whose
 *      sizes come from byte 1: every write must land inside the size the
 *      header declared, and a body it takes must have been whole;
 *   1: the agent's elf_slim__ranges (uploader/elf_slim.c) on the rest as a
 *      file (a memfd: a target's library is hostile too): the ranges must
 *      be sorted, disjoint, non-empty and inside the file, and pass the
 *      server's sparse_elf_check.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lib/sparse_elf.h"
#include "uploader/elf_slim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int check_write(void *ctx, uint64_t off, const void *d, size_t len)
{
	struct sparse_elf_reader *r = ctx;

	(void)d;
	if (!len || off + len > r->size || off + len < off)
		__builtin_trap();
	return 0;
}

static void reader(const uint8_t *data, size_t size)
{
	struct sparse_elf_reader r;
	size_t step = size ? (size_t)data[0] % 61 + 1 : 1;
	uint64_t got = 0;
	int err = 0;

	sparse_elf_reader__init(&r);
	for (size_t at = 1; at < size && !err; at += step)
		err = sparse_elf_reader__feed(&r, data + at, at + step < size ? step : size - at,
					      check_write, &r);
	if (!err && !sparse_elf_reader__end(&r, &got) &&
	    (got != r.size || r.ri != r.n || !got || got > SPARSE_ELF_MAX_SIZE))
		__builtin_trap();
	sparse_elf_reader__fini(&r);
}

static void slim(const uint8_t *data, size_t size)
{
	static int fd = -1; /* one memfd for the run: harness state */
	static struct elf_slim s;
	uint64_t end = 0, kept = 0;

	if (fd < 0 && (fd = memfd_create("fuzz_sparse_elf", MFD_CLOEXEC)) < 0)
		__builtin_trap();
	if (ftruncate(fd, 0) || (size && pwrite(fd, data, size, 0) != (ssize_t)size))
		__builtin_trap();
	if (elf_slim__ranges(fd, size, &s))
		return;
	if (s.size != size || s.n > ELF_SLIM_MAX_RANGES)
		__builtin_trap();
	for (uint32_t i = 0; i < s.n; i++) {
		if (!s.r[i].len || (i && s.r[i].off < end) || s.r[i].off + s.r[i].len > size)
			__builtin_trap();
		end = s.r[i].off + s.r[i].len;
		kept += s.r[i].len;
	}
	if (kept != s.kept || kept > size)
		__builtin_trap();
	/* what the agent sends (never an empty file) passes the server's check */
	if (size && sparse_elf_check(fd, size, s.r, s.n) == -EBADMSG)
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;
	if (data[0] & 1)
		slim(data + 1, size - 1);
	else
		reader(data + 1, size - 1);
	return 0;
}
