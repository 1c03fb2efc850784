/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One libdw frame state (what dwarf_cfi_addrframe says holds at a pc)
 * translated into the rules of a struct unwind_row: the few CFA and
 * register forms x86-64 code uses, everything else UNSUPPORTED.
 */
#ifndef STRATA_UNWIND_FRAME_RULE_H
#define STRATA_UNWIND_FRAME_RULE_H

#include <elfutils/libdw.h>
#include <linux/types.h>
#include <stdbool.h>
#include <stdint.h>

#include "bpf/strata.h"

struct frame_rule {
	struct unwind_row row; /* rules only: pc is the caller's to set */
	bool signal;	       /* signal frame: the caller was interrupted at
				* an exact pc, not calling */
	bool plt;	       /* from the x86-64 PLT CFA expression */
	/*
	 * A PLT expression with another base or threshold than the one
	 * UNWIND_CFA_PLT encodes: CFA = RSP + row.cfa_off, plus 8 where
	 * (pc & 15) >= plt_thresh.  row is an RSP rule; the caller emits one
	 * RSP row per part of each 16-byte slot (exact, no new row type).
	 */
	bool plt_split;
	uint8_t plt_thresh;
};

/* Fills *out from frame.  Never fails: what it cannot express is
 * UNSUPPORTED in the row. */
void frame_rule__translate(Dwarf_Frame *frame, struct frame_rule *out);

/* Whether a and b unwind identically (pc ignored). */
bool frame_rule__same_row(const struct unwind_row *a, const struct unwind_row *b);

#endif /* STRATA_UNWIND_FRAME_RULE_H */
