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
	uint32_t line;	  /* 0 when unknown */
	int inlined;	  /* 1: inlined into sym_frame[i + 1] */
};

struct symbolizer_opts {
	size_t sz;	    /* sizeof(struct symbolizer_opts) */
	size_t max_modules; /* open ELF/DWARF handles kept (LRU); 0 = 64 */
	size_t max_cache;   /* cached address results; 0 = 65536 */
	int use_debuginfod; /* ask debuginfod (DEBUGINFOD_URLS) when set */
	/* The files belong to profiled processes (the agent), which may
	 * truncate them while they are read: read with pread into heap copies,
	 * never mapped (SIGBUS), and a file's DWARF over 64 MiB left unread
	 * (symbols only).  0: the files are the caller's own (the server's
	 * store): mapped. */
	int hostile_files;
};

struct symbolizer_stats {
	uint64_t lookups, cache_hits;
	uint64_t unresolved; /* lookups that returned 0 or -errno */
	uint64_t module_open_failed, module_evicted, cache_evicted;
	uint64_t modules_open;	/* now, failed opens remembered included */
	uint64_t cache_entries; /* now */
	uint64_t strings_bytes; /* interned names/files/keys (never freed) */
	uint64_t debuginfod_queries, debuginfod_found, debuginfod_failed;
	uint64_t debuginfod_skipped; /* backing off, no URLs or no library */
	/* files whose symbol table or DWARF was refused (too big for
	 * lib/elf_bounds.h, or malformed strings): counted once per open */
	uint64_t modules_degraded;
};

/*
 * Not thread-safe: one symbolizer per thread, or serialize calls.
 * A failed open is remembered: it costs one open (one module_open_failed)
 * per 10 s, and is retried at once when the same key (build-id) comes
 * with another path.
 */
struct symbolizer;

/* NULL with errno set on failure; opts may be NULL (defaults). */
struct symbolizer *symbolizer__new(const struct symbolizer_opts *opts);
void symbolizer__free(struct symbolizer *s);

/*
 * Resolves file_offset inside the ELF file at path.  build_id (raw bytes,
 * may be NULL/0-length) keys the caches so that one file seen under many
 * paths (containers) is opened once.  The caller passes, for return
 * addresses, the offset of the call instruction (ret addr - 1).
 *
 * Fills out[0..n): out[0] is the innermost (inlined) function at the
 * address, out[n-1] the real function containing it; with more frames
 * than max, the innermost max-1 and the real function are kept.  Returns
 * n (0 when unresolved) or -errno when the file cannot be opened
 * (-ENOENT...), is not ELF (-ENOEXEC), or its build-id differs from
 * build_id (-ESTALE).  Strings stay valid until symbolizer__free().
 * Without a build_id, the key is the path plus the file's identity
 * (dev, inode, size, mtime: one stat() per call), so a replaced file or
 * a reused "/proc/self/fd/N" is never answered from a stale cache.
 */
int symbolizer__resolve(struct symbolizer *s, const char *path, const uint8_t *build_id,
			size_t build_id_len, uint64_t file_offset, struct sym_frame *out, int max);

void symbolizer__stats(const struct symbolizer *s, struct symbolizer_stats *st);

/* Kernel symbols from /proc/kallsyms (or a file in the same format). */
struct ksyms;
/* NULL with errno set on failure. */
struct ksyms *ksyms__load(const char *path /* NULL: /proc/kallsyms */);
void ksyms__free(struct ksyms *k);
/*
 * Name of the function containing addr ("name" or "name [module]" is split:
 * module set to NULL for vmlinux); NULL when addr is outside every known
 * function (e.g. beyond the last symbol of a section).  kallsyms has no
 * sizes: a function ends at the next symbol of any kind or end marker
 * (_etext...), and a region's last one covers at most 4 KiB (the full
 * rule is in kallsyms.c).
 */
const char *ksyms__resolve(const struct ksyms *k, uint64_t addr, const char **module,
			   uint64_t *sym_start);
/*
 * 1 when the file showed only zero addresses (kptr_restrict hides them
 * from this reader): every ksyms__resolve() then returns NULL.
 */
int ksyms__restricted(const struct ksyms *k);
/* Functions indexed (0 when restricted). */
size_t ksyms__count(const struct ksyms *k);

/* Demangles C++ (Itanium) names; returns a malloc'd string or NULL. */
char *sym_demangle(const char *mangled);

#endif /* STRATA_SYMBOLIZE_H */
