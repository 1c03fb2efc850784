/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Address -> source symbolization for user ELF files (libdw) and the
 * kernel (/proc/kallsyms).  The agent (local mode) and the server
 * (central symbolization) use the same code.
 *
 * A frame that cannot be resolved is reported as unresolved (count 0),
 * never given a nearby wrong name: a symbol is accepted only when the
 * address lies inside the symbol's [start, start+size) range.
 */
#ifndef STRATA_SYMBOLIZE_H
#define STRATA_SYMBOLIZE_H

#include <stddef.h>
#include <stdint.h>

#define SYM_MAX_INLINE 16

struct sym_frame {
	const char *func; /* demangled; owned by the symbolizer cache */
	const char *file; /* may be NULL */
	uint32_t line;    /* 0 when unknown */
	int inlined;      /* 1: inlined into sym_frame[i + 1] */
};

struct symbolizer_opts {
	size_t sz;            /* sizeof(struct symbolizer_opts) */
	size_t max_modules;   /* open ELF/DWARF handles kept (LRU); 0 = 64 */
	size_t max_cache;     /* cached address results; 0 = 65536 */
	int use_debuginfod;   /* ask debuginfod (DEBUGINFOD_URLS) when set */
};

struct symbolizer_stats {
	uint64_t lookups, cache_hits, unresolved;
	uint64_t module_open_failed, module_evicted, cache_evicted;
};

struct symbolizer;

struct symbolizer *symbolizer__new(const struct symbolizer_opts *opts);
void symbolizer__free(struct symbolizer *s);

/*
 * Resolves file_offset inside the ELF file at path.  build_id (raw bytes,
 * may be NULL/0-length) keys the caches so that one file seen under many
 * paths (containers) is opened once.  The caller passes, for return
 * addresses, the offset of the call instruction (ret addr - 1).
 *
 * Fills out[0..n): out[0] is the innermost (inlined) function at the
 * address, out[n-1] the real function containing it.  Returns n (0 when
 * unresolved) or -errno when the file cannot be opened / is not ELF.
 * Strings stay valid until symbolizer__free().
 */
int symbolizer__resolve(struct symbolizer *s, const char *path,
			const uint8_t *build_id, size_t build_id_len,
			uint64_t file_offset, struct sym_frame *out, int max);

void symbolizer__stats(const struct symbolizer *s, struct symbolizer_stats *st);

/* Kernel symbols from /proc/kallsyms (or a file in the same format). */
struct ksyms;
struct ksyms *ksyms__load(const char *path /* NULL: /proc/kallsyms */);
void ksyms__free(struct ksyms *k);
/*
 * Name of the function containing addr ("name" or "name [module]" is split:
 * module set to NULL for vmlinux); NULL when addr is outside every known
 * function (e.g. beyond the last symbol of a section).
 */
const char *ksyms__resolve(const struct ksyms *k, uint64_t addr,
			   const char **module, uint64_t *sym_start);

/* Demangles C++ (Itanium) names; returns a malloc'd string or NULL. */
char *sym_demangle(const char *mangled);

#endif /* STRATA_SYMBOLIZE_H */
