/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Python frame symbolization: a code object's qualified name, file and
 * line table read from the live process (process_vm_readv), cached by
 * (address space, code object address, identity).  Code objects are freed
 * and their addresses reused: the identity the BPF walker recorded
 * (first line and name pointer) is re-checked on every read, and a
 * mismatch is reported as stale, never as another function's name.
 * Bounded: a fixed number of slots; a new code object evicts the one in
 * its slot (counted).
 */
#ifndef STRATA_PYTHON_SYMBOLS_H
#define STRATA_PYTHON_SYMBOLS_H

#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>

#include "bpf/strata.h"
#include "unwind/python_offsets.h"

#define PY_NAME_MAX 256	       /* bytes of a qualified name or file name kept */
#define PY_LINETABLE_MAX 65536 /* bytes of a line table read */

struct py_symbols_stats {
	uint64_t lookups, hits, evictions;
	uint64_t read_failed; /* code object or its strings unreadable (freed, process gone) */
	uint64_t stale;	      /* identity mismatch: the address holds another object now */
	uint64_t no_line;     /* line table did not cover the instruction */
};

/* What a Python frame resolves to; strings owned by the cache, valid until
 * the next call. */
struct py_frame_sym {
	const char *qualname;
	const char *filename;
	int line; /* -1 unknown */
};

struct py_symbols;

struct py_symbols *py_symbols__new(size_t slots); /* 0: 4096 */
void py_symbols__free(struct py_symbols *c);

/*
 * Resolves frame f of process pid (address space mm_id) whose interpreter
 * has offsets o.  Returns 0, or -errno (-ESTALE: identity mismatch; the
 * frame should be shown as unknown).
 */
int py_symbols__resolve(struct py_symbols *c, uint32_t pid, uint64_t mm_id,
			const struct py_offsets *o, const struct strata_py_frame *f,
			struct py_frame_sym *out);

/* Drops every entry of an address space that is gone. */
void py_symbols__forget(struct py_symbols *c, uint64_t mm_id);

void py_symbols__stats(const struct py_symbols *c, struct py_symbols_stats *st);

/*
 * Decodes a str object's data into UTF-8 (for tests and the reader):
 * state is PyASCIIObject.state, data the characters (length of them).
 * Writes at most sz - 1 bytes plus NUL; returns 0, or -EINVAL (a kind or
 * layout we do not read).
 */
int py_symbols__decode_str(uint32_t state, const uint8_t *data, size_t length, char *out,
			   size_t sz);

#endif /* STRATA_PYTHON_SYMBOLS_H */
