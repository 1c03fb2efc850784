// SPDX-License-Identifier: Apache-2.0
/*
 * libdw frame state -> unwind_row rules (x86-64).
 *
 * libdw hands rules back as DWARF expressions in a canonical form
 * (libdw/dwarf_frame_cfa.c, dwarf_frame_register.c):
 *   CFA reg+off          -> DW_OP_bregx reg off
 *   CFA expression E     -> E
 *   register offset(N)   -> DW_OP_call_frame_cfa [DW_OP_plus_uconst N]
 *   register expression  -> DW_OP_call_frame_cfa E (the CFA is pushed first)
 *   val_* rules          -> the above + DW_OP_stack_value
 *   register(R)          -> DW_OP_regx R
 *   same value           -> no ops, NULL; undefined -> no ops, non-NULL
 * so matching those shapes is exact, not a heuristic.
 */
#include "unwind/frame_rule.h"

#include <dwarf.h>
#include <string.h>

/* DWARF register numbers (x86-64 psABI). */
#define REG_RBP 6
#define REG_RSP 7
#define REG_RIP 16

/* A base-register op: DW_OP_bregN off or DW_OP_bregx N off. */
static bool op_breg(const Dwarf_Op *op, unsigned *reg, int64_t *off)
{
	if (op->atom >= DW_OP_breg0 && op->atom <= DW_OP_breg31) {
		*reg = op->atom - DW_OP_breg0;
		*off = (int64_t)op->number;
		return true;
	}
	if (op->atom == DW_OP_bregx && op->number <= 0xffff) {
		*reg = (unsigned)op->number;
		*off = (int64_t)op->number2;
		return true;
	}
	return false;
}

static bool op_lit(const Dwarf_Op *op, unsigned lit)
{
	return op->atom == DW_OP_lit0 + lit;
}

static bool fits_s32(int64_t v)
{
	return v >= INT32_MIN && v <= INT32_MAX;
}

static bool fits_s16(int64_t v)
{
	return v >= INT16_MIN && v <= INT16_MAX;
}

/*
 * The lazy-binding PLT rule binutils emits for a whole .plt section:
 *   DW_OP_breg7 K; DW_OP_breg16 0; DW_OP_lit15; DW_OP_and; DW_OP_litN;
 *   DW_OP_ge; DW_OP_lit3; DW_OP_shl; DW_OP_plus
 * i.e. CFA = RSP + K, + 8 once the slot has pushed its index (pc & 15 >= N).
 */
static bool plt_expr(const Dwarf_Op *ops, size_t n, int64_t *base, unsigned *thresh)
{
	unsigned reg;
	int64_t off;

	if (n != 9 || !op_breg(&ops[0], &reg, base) || reg != REG_RSP ||
	    !op_breg(&ops[1], &reg, &off) || reg != REG_RIP || off != 0 || !op_lit(&ops[2], 15) ||
	    ops[3].atom != DW_OP_and || ops[4].atom < DW_OP_lit0 || ops[4].atom > DW_OP_lit31 ||
	    ops[5].atom != DW_OP_ge || !op_lit(&ops[6], 3) || ops[7].atom != DW_OP_shl ||
	    ops[8].atom != DW_OP_plus)
		return false;
	*thresh = ops[4].atom - DW_OP_lit0;
	return true;
}

static void cfa_rule(Dwarf_Frame *frame, struct frame_rule *fr)
{
	struct unwind_row *r = &fr->row;
	Dwarf_Op *ops;
	size_t n;
	unsigned reg, thresh;
	int64_t off;

	r->cfa_type = UNWIND_CFA_UNSUPPORTED;
	/* n == 0: no CFA rule at all here (nothing to unwind with). */
	if (dwarf_frame_cfa(frame, &ops, &n) || n == 0)
		return;
	if (n == 1 && op_breg(&ops[0], &reg, &off) && (reg == REG_RSP || reg == REG_RBP)) {
		if (fits_s32(off)) {
			r->cfa_type = reg == REG_RSP ? UNWIND_CFA_RSP : UNWIND_CFA_RBP;
			r->cfa_off = (int32_t)off;
		}
		return;
	}
	/* Signal trampolines: the interrupted RSP is saved in the frame. */
	if (n == 2 && op_breg(&ops[0], &reg, &off) && reg == REG_RSP &&
	    ops[1].atom == DW_OP_deref) {
		if (fits_s32(off)) {
			r->cfa_type = UNWIND_CFA_DEREF_RSP;
			r->cfa_off = (int32_t)off;
		}
		return;
	}
	if (plt_expr(ops, n, &off, &thresh)) {
		if (!fits_s32(off) || !fits_s32(off + 8))
			return;
		fr->plt = true;
		if (off == 8 && thresh == 11) {
			r->cfa_type = UNWIND_CFA_PLT;
			r->cfa_off = 8;
		} else {
			r->cfa_type = UNWIND_CFA_RSP;
			r->cfa_off = (int32_t)off;
			fr->plt_split = true;
			fr->plt_thresh = (uint8_t)thresh;
		}
	}
}

/* CFA + constant as libdw or a DW_CFA_expression may spell it. */
static bool cfa_plus(const Dwarf_Op *ops, size_t n, int64_t *off)
{
	if (n == 1) {
		*off = 0;
		return true;
	}
	if (n == 2 && ops[1].atom == DW_OP_plus_uconst) {
		*off = (int64_t)ops[1].number;
		return true;
	}
	if (n == 3 && ops[2].atom == DW_OP_plus) {
		switch (ops[1].atom) {
		case DW_OP_const1u:
		case DW_OP_const1s:
		case DW_OP_const2u:
		case DW_OP_const2s:
		case DW_OP_const4u:
		case DW_OP_const4s:
		case DW_OP_const8u:
		case DW_OP_const8s:
		case DW_OP_constu:
		case DW_OP_consts:
			*off = (int64_t)ops[1].number;
			return true;
		default:
			if (ops[1].atom >= DW_OP_lit0 && ops[1].atom <= DW_OP_lit31) {
				*off = ops[1].atom - DW_OP_lit0;
				return true;
			}
		}
	}
	return false;
}

static void reg_rule(Dwarf_Frame *frame, int regno, __u8 *rule, __s16 *roff)
{
	Dwarf_Op mem[3], *ops;
	size_t n;
	unsigned reg;
	int64_t off;

	*rule = UNWIND_REG_UNSUPPORTED;
	*roff = 0;
	if (regno < 0 || dwarf_frame_register(frame, regno, mem, &ops, &n))
		return;
	if (n == 0) {
		*rule = ops ? UNWIND_REG_UNDEFINED : UNWIND_REG_SAME;
		return;
	}
	/* A computed value (val_offset, val_expression) is not a slot. */
	if (ops[n - 1].atom == DW_OP_stack_value)
		return;
	if (ops[0].atom == DW_OP_call_frame_cfa) {
		if (cfa_plus(ops, n, &off)) {
			if (fits_s16(off)) {
				*rule = UNWIND_REG_CFA_OFF;
				*roff = (__s16)off;
			}
			return;
		}
		/* DW_CFA_expression "breg7 N": the top of the stack, RSP + N. */
		if (n == 2 && op_breg(&ops[1], &reg, &off) && reg == REG_RSP) {
			if (fits_s16(off)) {
				*rule = UNWIND_REG_SP_OFF;
				*roff = (__s16)off;
			}
			return;
		}
		return;
	}
	if (n == 1 && ((ops[0].atom == DW_OP_regx && ops[0].number == (Dwarf_Word)regno) ||
		       (regno < 32 && ops[0].atom == DW_OP_reg0 + regno)))
		*rule = UNWIND_REG_SAME;
}

void frame_rule__translate(Dwarf_Frame *frame, struct frame_rule *fr)
{
	struct unwind_row *r = &fr->row;
	bool signal = false;
	int ra_reg;

	memset(fr, 0, sizeof(*fr));
	/* The CIE names the return-address column (16 on x86-64). */
	ra_reg = dwarf_frame_info(frame, NULL, NULL, &signal);
	fr->signal = signal;

	reg_rule(frame, ra_reg, &r->ra_rule, &r->ra_off);
	if (r->ra_rule == UNWIND_REG_UNDEFINED) {
		/* The outermost frame (_start, thread entry): nothing above. */
		r->cfa_type = UNWIND_CFA_END;
		r->ra_off = 0;
		return;
	}
	cfa_rule(frame, fr);
	if (r->cfa_type == UNWIND_CFA_UNSUPPORTED) {
		/* Slots relative to an unknown CFA mean nothing: normalize so
		 * such rows merge. */
		fr->plt = fr->plt_split = false;
		r->cfa_off = 0;
		r->ra_rule = r->rbp_rule = UNWIND_REG_UNSUPPORTED;
		r->ra_off = r->rbp_off = 0;
		return;
	}
	reg_rule(frame, REG_RBP, &r->rbp_rule, &r->rbp_off);

	/* A frame-pointer step (CFA = RBP + 16, RBP at [RBP], RA at
	 * [RBP + 8]) finds the same caller exactly when the rules say so. */
	if (r->cfa_type == UNWIND_CFA_RBP && r->cfa_off == 16 &&
	    r->rbp_rule == UNWIND_REG_CFA_OFF && r->rbp_off == -16 &&
	    r->ra_rule == UNWIND_REG_CFA_OFF && r->ra_off == -8)
		r->flags |= UNWIND_ROW_FP_EXACT;
}

bool frame_rule__same_row(const struct unwind_row *a, const struct unwind_row *b)
{
	return a->cfa_type == b->cfa_type && a->rbp_rule == b->rbp_rule &&
	       a->ra_rule == b->ra_rule && a->flags == b->flags && a->cfa_off == b->cfa_off &&
	       a->rbp_off == b->rbp_off && a->ra_off == b->ra_off;
}
