/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Hybrid unwinding: compiled CFI rows and per-process mappings.
 * Part of the BPF ABI (bpf/strata.h): plain __u32/__u64 types and no libc
 * includes, so it compiles after either vmlinux.h or <linux/types.h>.
 * Every struct that crosses the boundary has its size asserted.
 */
#ifndef STRATA_BPF_STRATA_UNWIND_H
#define STRATA_BPF_STRATA_UNWIND_H

#include "lib/enums.h"

/*
 * Hybrid unwinding (x86-64).  One compiled CFI row says, for ELF virtual
 * addresses [pc, next row's pc), how to find the caller's frame.  Rows of
 * one file are sorted by pc; a gap between functions is a row of type
 * UNWIND_CFA_NONE so a pc there never borrows a neighbour's rule.
 */
enum unwind_cfa {
	UNWIND_CFA_NONE = 0,	    /* no CFI here: fall back to a frame-pointer step */
	UNWIND_CFA_RSP = 1,	    /* CFA = RSP + cfa_off */
	UNWIND_CFA_RBP = 2,	    /* CFA = RBP + cfa_off */
	UNWIND_CFA_PLT = 3,	    /* PLT stub: CFA = RSP + 8, + 8 when (RIP & 15) >= 11 */
	UNWIND_CFA_DEREF_RSP = 4,   /* CFA = *(RSP + cfa_off) (signal trampoline) */
	UNWIND_CFA_END = 5,	    /* outermost frame (return address undefined) */
	UNWIND_CFA_UNSUPPORTED = 6, /* an expression we do not evaluate */
};

enum unwind_reg_rule {
	UNWIND_REG_SAME = 0,	  /* register unchanged in the caller */
	UNWIND_REG_CFA_OFF = 1,	  /* saved at *(CFA + off) */
	UNWIND_REG_SP_OFF = 2,	  /* saved at *(RSP + off) (signal frames) */
	UNWIND_REG_UNDEFINED = 3, /* not recoverable */
	UNWIND_REG_UNSUPPORTED = 4,
};

#define UNWIND_ROW_FP_EXACT 1 /* a frame-pointer step gives the same caller here */

struct unwind_row {
	__u32 pc;      /* ELF virtual address where the row starts */
	__u8 cfa_type; /* enum unwind_cfa */
	__u8 rbp_rule; /* enum unwind_reg_rule for RBP */
	__u8 ra_rule;  /* enum unwind_reg_rule for the return address */
	__u8 flags;    /* UNWIND_ROW_* */
	__s32 cfa_off;
	__s16 rbp_off;
	__s16 ra_off; /* -8 for every ordinary x86-64 frame */
};

/* A process's executable mappings as the unwinder sees them, sorted by
 * start; keyed by mm_id in the unwind_procs map. */
#define UNWIND_MAX_MAPS 512 /* power of two: indexes are masked for the verifier */
#define UNWIND_NO_TABLE 0xffffffffu

struct unwind_map {
	__u64 start, end; /* [start, end) of the mapping */
	__u64 bias;	  /* ELF vaddr = ip - bias */
	__u32 row_first;  /* first row in unwind_rows, or UNWIND_NO_TABLE */
	__u32 row_count;
};

struct unwind_proc {
	__u32 nmaps;
	__u32 pad;
	struct unwind_map maps[UNWIND_MAX_MAPS];
};

/* Why an unwind stopped or fell back, counted per CPU (map "unwind_errors"):
 * enum unwind_err, listed in lib/enums.h (STRATA_UNWIND_COUNTERS). */

_Static_assert(sizeof(struct unwind_row) == 16, "unwind_row layout");
_Static_assert(sizeof(struct unwind_map) == 32, "unwind_map layout");
_Static_assert(sizeof(struct unwind_proc) == 8 + 32 * UNWIND_MAX_MAPS, "unwind_proc layout");

#endif /* STRATA_BPF_STRATA_UNWIND_H */
