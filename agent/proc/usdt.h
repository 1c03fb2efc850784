/* SPDX-License-Identifier: Apache-2.0 */
/*
 * USDT (SystemTap SDT) probes of an ELF file: the .note.stapsdt notes that
 * <sys/sdt.h> emits (PyTorch's c10 allocator, CPython, glibc, ...), with
 * each probe's address, semaphore and argument locations, ready to attach
 * as a uprobe (the semaphore through the uprobe's reference counter).
 *
 * Arguments are x86-64 operand specs, "SIZE@OPERAND" with SIZE one of
 * 1, 2, 4, 8 (negative: signed): "-4@%edi", "8@%rax", "8@-16(%rbp)",
 * "4@$42".  A spec this parser does not understand (an index register,
 * a %rip-relative symbol, a high-byte register, no size) makes the probe
 * skipped and counted (struct usdt_stats), never guessed.
 */
#ifndef STRATA_PROC_USDT_H
#define STRATA_PROC_USDT_H

#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>

#include "bpf/strata.h"

#define USDT_NAME_MAX 64

struct usdt_probe {
	char provider[USDT_NAME_MAX];
	char name[USDT_NAME_MAX];
	uint64_t offset;     /* file offset of the probe's instruction (attach here) */
	uint64_t sem_offset; /* file offset of its semaphore; 0: none */
	uint32_t nargs;
	struct usdt_arg_spec args[USDT_MAX_ARGS];
};

struct usdt_stats {
	uint64_t notes;	    /* stapsdt notes read */
	uint64_t bad_args;  /* skipped: an argument spec not understood */
	uint64_t malformed; /* skipped: a note that is not a valid stapsdt note */
};

/* Called for each probe with understood arguments; non-zero stops the scan
 * (and is returned by usdt_scan). */
typedef int (*usdt_probe_fn)(void *ctx, const struct usdt_probe *p);

/*
 * Reads the USDT probes of the ELF file open at fd.  Returns 0 (no notes:
 * 0 probes), a callback's non-zero value, or -errno (-ENOEXEC: not ELF).
 * Counts into *st (added to, not reset).
 */
int usdt_scan(int fd, usdt_probe_fn fn, void *ctx, struct usdt_stats *st);

/* The same on an ELF image in memory (the fuzz target). */
int usdt_scan_mem(const void *image, size_t size, usdt_probe_fn fn, void *ctx,
		  struct usdt_stats *st);

/*
 * Parses one note's argument string ("-4@%edi 8@-16(%rbp)", "" for none)
 * into out[max].  Returns the number of arguments, -EINVAL for a spec not
 * understood, -E2BIG for more than max.
 */
int usdt_args_parse(const char *s, struct usdt_arg_spec *out, int max);

#endif /* STRATA_PROC_USDT_H */
