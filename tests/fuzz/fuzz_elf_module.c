// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target: the symbolizer's ELF module (symbolize/elf_module.c:
 * program headers, .symtab/.dynsym, DWARF CUs, inline chains, line tables,
 * C++ demangling) on arbitrary bytes.  Its files come from profiled
 * processes (the agent's GPU call sites) and from the network (binaries
 * agents upload to the server's build-id store), so every byte is hostile.
 * Byte 0 picks the mode (bit 0: hostile pread reads as the agent does, or
 * mapped as the server does); the rest is the file, passed as a memfd.
 * Offsets across the whole file are resolved; each answer must be within
 * what elf_module__resolve promises.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lib/strpool.h"
#include "symbolize/elf_module.h"

#define LOOKUPS 64
#define FRAMES_MAX 8

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Reads every byte of the strings (ASan checks they are in bounds). */
static volatile size_t sink;

static void check_frames(const struct sym_frame *f, int n, int max)
{
	if (n == -ENOMEM)
		return;
	if (n < 0 || n > max)
		__builtin_trap();
	for (int i = 0; i < n; i++) {
		/* Every frame is named ("??" at worst); only the last is real. */
		if (!f[i].func || f[i].inlined != (i < n - 1))
			__builtin_trap();
		sink += strlen(f[i].func);
		if (f[i].file)
			sink += strlen(f[i].file);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* One memfd for the whole run: harness state, not library state. */
	static int fd = -1;
	static char path[64];
	struct sym_frame frames[FRAMES_MAX];
	struct elf_module *m = NULL;
	struct strpool *pool;
	int err;

	if (size < 1)
		return 0;
	if (fd < 0) {
		fd = memfd_create("fuzz_elf_module", MFD_CLOEXEC);
		if (fd < 0)
			__builtin_trap();
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	}
	if (ftruncate(fd, 0) ||
	    (size > 1 && pwrite(fd, data + 1, size - 1, 0) != (ssize_t)(size - 1)))
		__builtin_trap();

	err = elf_module__open(path, NULL, 0, NULL, data[0] & 1, &m);
	if (err) {
		if (m || err > 0)
			__builtin_trap();
		return 0;
	}
	if (!m)
		__builtin_trap();
	pool = strpool__new();
	if (!pool)
		__builtin_trap();
	/* Offsets spread over the file, each also as a return address - 1. */
	size_t step = (size - 1) / LOOKUPS + 1;

	for (uint64_t off = 0; off < size - 1 + step; off += step) {
		check_frames(frames, elf_module__resolve(m, off, pool, frames, FRAMES_MAX),
			     FRAMES_MAX);
		check_frames(frames, elf_module__resolve(m, off + 1, pool, frames, 1), 1);
	}
	strpool__free(pool);
	elf_module__free(m);
	return 0;
}
