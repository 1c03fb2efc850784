/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Compiled unwind tables: the CFI of one ELF file (.eh_frame, .debug_frame)
 * turned into sorted struct unwind_row entries that BPF can binary-search.
 * One table per file (build-id); rows hold ELF virtual addresses, so the
 * same table serves every process that maps the file.
 */
#ifndef STRATA_UNWIND_TABLE_H
#define STRATA_UNWIND_TABLE_H

#include <linux/types.h>
#include <stdint.h>

#include "bpf/strata.h"

/* Bounds on the work one (possibly hostile) file can cause. */
#define UNWIND_TABLE_MAX_ROWS (16u << 20) /* libdw rows per table: -E2BIG */
#define UNWIND_TABLE_MAX_FDES (8u << 20)  /* FDEs per CFI section: -E2BIG */
#define UNWIND_TABLE_MAX_RANGE_ROWS 4096  /* rows per FDE range, see .c */
#define UNWIND_TABLE_MAX_OVERLAP 64	  /* FDEs covering one pc, see .c */
/* CFI bytes libdw may run, in all: base + per byte of CFI (real files need
 * about 20 per byte), then -E2BIG.  Linear in the input, whatever it holds. */
#define UNWIND_TABLE_WORK_BASE (64ULL << 20)
#define UNWIND_TABLE_WORK_PER_BYTE 256
#define UNWIND_TABLE_MAX_VADDR (1ULL << 32) /* row pcs are 32-bit */

struct unwind_table_stats {
	uint64_t fdes;		     /* FDEs with a non-empty range, both sections */
	uint64_t cfi_bytes;	     /* .eh_frame + .debug_frame sizes */
	uint64_t rows_raw;	     /* rows before adjacent identical rules merged */
	uint64_t rows;		     /* rows in the table */
	uint64_t unsupported_ranges; /* rows with any UNSUPPORTED rule (including
				      * the rest of a range past its row bound) */
	uint64_t plt_ranges;	     /* rows from the x86-64 PLT CFA expression */
	uint64_t signal_ranges;	     /* rows of signal frames ('S' augmentation) */
	uint64_t fp_exact_ranges;    /* rows with UNWIND_ROW_FP_EXACT */
	uint64_t bad_entries;	     /* CIE/FDE entries skipped as malformed */
	uint64_t bad_regs;	     /* FDEs naming a register past FDE_MAX_DWARF_REG:
				      * their ranges UNSUPPORTED, libdw never asked */
	uint64_t work;		     /* CFI bytes libdw may have run (bound) */
};

struct unwind_table {
	/*
	 * Sorted by pc, adjacent identical rules merged.  Row i covers
	 * [rows[i].pc, rows[i + 1].pc); the last one runs to vaddr_hi.  The
	 * first row starts at vaddr_lo, and every address in between has a
	 * row (UNWIND_CFA_NONE where no CFI describes it).
	 */
	struct unwind_row *rows;
	uint32_t nrows;
	uint64_t vaddr_lo, vaddr_hi; /* executable text covered */
	struct unwind_table_stats st;
};

/*
 * Compiles the CFI of the x86-64 ELF file open on fd (ET_EXEC or ET_DYN).
 * .eh_frame wins where both sections describe a pc; .debug_frame is used
 * where only it does.  Returns 0 and *out (free with unwind_table__free),
 * or -errno: -ENOEXEC not a (valid) x86-64 ELF or unreadable CFI, -ENODATA
 * no CFI, -E2BIG a vaddr >= 4 GiB or more rows, FDEs or work than the
 * bounds above, -ENOMEM.
 */
int unwind_table__build(int fd, struct unwind_table **out);

void unwind_table__free(struct unwind_table *t);

/* The row covering vaddr, or NULL outside [vaddr_lo, vaddr_hi). */
const struct unwind_row *unwind_table__find(const struct unwind_table *t, uint64_t vaddr);

#endif /* STRATA_UNWIND_TABLE_H */
