/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The hybrid unwinder's core: one frame step from compiled CFI rows, or a
 * frame-pointer step where there are none.  Written once and compiled twice:
 * into the BPF sampler (bpf/profile.bpf.c) and, with STRATA_TESTING, into
 * user-space replay tests that feed recorded registers and stack memory.
 *
 * The includer provides:
 *   unwind_hook_read(void *dst, __u32 size, __u64 addr)     -> 0 or negative
 *   unwind_hook_row(__u32 index)                            -> const struct unwind_row *
 *   unwind_hook_count(enum unwind_err e)
 *   unwind_hook_miss(__u64 pc)   a pc with no mapping or table was met
 *
 * Besides the frames, each step says which stack slots its result came
 * from (ra_addr, and rbp_from/used_rbp when it computed from rbp), so a
 * caller can tell later, by re-reading those slots, that a walk from the
 * same registers would give the same frames (bpf/gpu_stack.bpf.h).
 */
#ifndef STRATA_UNWIND_CORE_H
#define STRATA_UNWIND_CORE_H

#ifndef UNWIND_INLINE
#define UNWIND_INLINE static __always_inline
#endif

struct unwind_regs {
	__u64 rip, rsp, rbp;
	__u32 first; /* the first frame: rip is exact, not a return address */
	/* rip is a function's first instruction (a uprobe on its symbol): the
	 * callee has pushed nothing, so CFA = rsp + 8 and the return address
	 * is at rsp, whatever the tables or rbp say.  A frame-pointer step
	 * there would take the caller's rbp and skip the caller. */
	__u32 entry;
	/* Filled by every step, for callers that re-validate a walk: */
	__u64 ra_addr;	    /* where the caller's return address was read */
	__u64 rbp_from;	    /* where rbp's value was read (0: the initial register) */
	__u64 used_from;    /* the step computed from rbp, whose value came from here */
	__u64 used_rbp;	    /* ... and was this (valid when used) */
	__u8 used;	    /* the step computed from rbp (CFA = rbp + off, FP step) */
	__u8 fallback;	    /* an FP step for want of tables (they may come later) */
	__u8 volatile_step; /* read something not logged (signal frame): no reuse */
	__u8 pad[5];
};

/* The mapping holding pc (binary search over proc->maps), or NULL. */
UNWIND_INLINE const struct unwind_map *unwind_find_map(const struct unwind_proc *proc, __u64 pc)
{
	__u32 lo = 0, hi = proc->nmaps;

	/* Never more (the loader truncates, counted).  Not clamped to the
	 * constant: constant bounds made every probe of the search a
	 * distinct verifier state (pointer offsets compared exactly). */
	if (hi > UNWIND_MAX_MAPS)
		return NULL;
	for (int i = 0; i < 10; i++) { /* log2(UNWIND_MAX_MAPS) + 1 */
		if (lo >= hi)
			break;
		__u32 mid = (lo + hi) / 2;
		const struct unwind_map *m = &proc->maps[mid & (UNWIND_MAX_MAPS - 1)];

		if (pc < m->start)
			hi = mid;
		else if (pc >= m->end)
			lo = mid + 1;
		else
			return m;
	}
	return NULL;
}

/*
 * Copies the row covering vaddr in rows [first, first + count) into *out;
 * returns 0, or -1 when none does.  The row is copied, not pointed to, so
 * the hook may return a buffer it reuses.
 */
UNWIND_INLINE int unwind_find_row(__u32 first, __u32 count, __u64 vaddr, struct unwind_row *out)
{
	__u32 lo = 0, hi = count;
	int found = -1;

	if (vaddr > 0xffffffffULL)
		return -1;
	for (int i = 0; i < 25; i++) { /* tables up to 16M rows */
		if (lo >= hi)
			break;
		__u32 mid = lo + (hi - lo) / 2;
		const struct unwind_row *r = unwind_hook_row(first + mid);

		if (!r)
			return -1;
		if (r->pc <= (__u32)vaddr) {
			*out = *r;
			found = 0;
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	return found;
}

/* Reads a saved register per rule; 0, or negative (rule not supported). */
UNWIND_INLINE int unwind_saved_reg(__u8 rule, __s16 off, __u64 cfa, __u64 sp, __u64 same,
				   __u64 *out)
{
	switch (rule) {
	case UNWIND_REG_SAME:
		*out = same;
		return 0;
	case UNWIND_REG_CFA_OFF:
		return unwind_hook_read(out, sizeof(*out), cfa + (__s64)off);
	case UNWIND_REG_SP_OFF:
		return unwind_hook_read(out, sizeof(*out), sp + (__s64)off);
	case UNWIND_REG_UNDEFINED:
		*out = 0;
		return 0;
	default:
		return -1;
	}
}

/* Where a register saved by rule was read (0: not from memory). */
UNWIND_INLINE __u64 unwind_slot(__u8 rule, __s16 off, __u64 cfa, __u64 sp)
{
	return rule == UNWIND_REG_CFA_OFF  ? cfa + (__s64)off
	       : rule == UNWIND_REG_SP_OFF ? sp + (__s64)off
					   : 0;
}

/*
 * At a function's first instruction: the return address is at rsp, the
 * caller's rsp is rsp + 8 and rbp is still the caller's.  True for every
 * x86-64 function, with or without CFI or frame pointers (the call pushed
 * the return address and the callee has run nothing yet).
 */
UNWIND_INLINE int unwind_entry_step(struct unwind_regs *r)
{
	__u64 ra;

	r->entry = 0;
	r->ra_addr = r->rsp;
	if (unwind_hook_read(&ra, sizeof(ra), r->rsp)) {
		unwind_hook_count(UNWIND_ERR_READ);
		return -1;
	}
	if (!ra) {
		unwind_hook_count(UNWIND_OK_END);
		return 1;
	}
	r->rsp += 8;
	r->rip = ra;
	r->first = 0;
	unwind_hook_count(UNWIND_ENTRY_STEPS);
	return 0;
}

/*
 * The classic frame-pointer step: [rbp] = caller's rbp, [rbp + 8] = RA.
 * The return address is kept even when the saved rbp is not a frame
 * pointer (the caller keeps none): rbp then becomes 0, so only a CFI step
 * can go further.
 */
UNWIND_INLINE int unwind_fp_step(struct unwind_regs *r)
{
	__u64 frame[2];

	r->used = 1;
	r->used_from = r->rbp_from;
	r->used_rbp = r->rbp;
	r->ra_addr = r->rbp + 8;
	if (!r->rbp || unwind_hook_read(frame, sizeof(frame), r->rbp)) {
		unwind_hook_count(UNWIND_ERR_READ);
		return -1;
	}
	if (!frame[1]) {
		unwind_hook_count(UNWIND_OK_END);
		return 1;
	}
	r->rsp = r->rbp + 16;
	r->rbp_from = r->rbp;
	r->rbp = frame[0] > r->rbp ? frame[0] : 0; /* frames grow up the stack */
	r->rip = frame[1];
	r->first = 0;
	unwind_hook_count(UNWIND_FP_STEPS);
	return 0;
}

/*
 * One step from the frame in r to its caller.  Returns 0 (r is the caller),
 * 1 (outermost frame reached) or -1 (stop; the reason is counted).
 */
UNWIND_INLINE int unwind_step(struct unwind_regs *r, const struct unwind_proc *proc)
{
	const struct unwind_map *m;
	struct unwind_row rowbuf, *row = &rowbuf;
	__u64 pc, cfa, ra, rbp;

	r->used = 0;
	r->ra_addr = 0;
	if (r->entry)
		return unwind_entry_step(r);
	if (!proc) {
		unwind_hook_count(UNWIND_ERR_NO_PROC);
		unwind_hook_miss(r->first ? r->rip : r->rip - 1); /* no tables yet */
		r->fallback = 1;
		return unwind_fp_step(r);
	}
	/* A return address points after the call, maybe past the end of a
	 * noreturn function's CFI: look the call itself up. */
	pc = r->first ? r->rip : r->rip - 1;
	m = unwind_find_map(proc, pc);
	if (!m) {
		unwind_hook_count(UNWIND_ERR_NO_MAPPING);
		unwind_hook_miss(pc);
		r->fallback = 1;
		return unwind_fp_step(r);
	}
	if (m->row_first == UNWIND_NO_TABLE) {
		unwind_hook_count(UNWIND_ERR_NO_TABLE);
		unwind_hook_miss(pc);
		r->fallback = 1;
		return unwind_fp_step(r);
	}
	if (unwind_find_row(m->row_first, m->row_count, pc - m->bias, row) ||
	    row->cfa_type == UNWIND_CFA_NONE) {
		unwind_hook_count(UNWIND_ERR_NO_ROW);
		return unwind_fp_step(r);
	}
	switch (row->cfa_type) {
	case UNWIND_CFA_RSP:
		cfa = r->rsp + (__s64)row->cfa_off;
		break;
	case UNWIND_CFA_RBP:
		r->used = 1;
		r->used_from = r->rbp_from;
		r->used_rbp = r->rbp;
		cfa = r->rbp + (__s64)row->cfa_off;
		break;
	case UNWIND_CFA_PLT:
		cfa = r->rsp + 8 + (((r->rip & 15) >= 11) ? 8 : 0);
		break;
	case UNWIND_CFA_DEREF_RSP:
		r->volatile_step = 1;
		if (unwind_hook_read(&cfa, sizeof(cfa), r->rsp + (__s64)row->cfa_off)) {
			unwind_hook_count(UNWIND_ERR_READ);
			return -1;
		}
		break;
	case UNWIND_CFA_END:
		unwind_hook_count(UNWIND_OK_END);
		return 1;
	default:
		unwind_hook_count(UNWIND_ERR_UNSUPPORTED);
		return -1;
	}
	if (unwind_saved_reg(row->ra_rule, row->ra_off, cfa, r->rsp, 0, &ra) ||
	    unwind_saved_reg(row->rbp_rule, row->rbp_off, cfa, r->rsp, r->rbp, &rbp)) {
		unwind_hook_count(row->ra_rule == UNWIND_REG_UNSUPPORTED ||
						  row->rbp_rule == UNWIND_REG_UNSUPPORTED
					  ? UNWIND_ERR_UNSUPPORTED
					  : UNWIND_ERR_READ);
		return -1;
	}
	if (!ra) {
		unwind_hook_count(UNWIND_OK_END);
		return 1;
	}
	/* The stack only grows towards the caller (signal frames excepted,
	 * whose CFA is the interrupted stack pointer, read from memory). */
	if (cfa <= r->rsp && row->cfa_type != UNWIND_CFA_DEREF_RSP) {
		unwind_hook_count(UNWIND_ERR_BAD_FRAME);
		return -1;
	}
	r->ra_addr = unwind_slot(row->ra_rule, row->ra_off, cfa, r->rsp);
	if (row->rbp_rule != UNWIND_REG_SAME)
		r->rbp_from = unwind_slot(row->rbp_rule, row->rbp_off, cfa, r->rsp);
	r->rsp = cfa;
	r->rbp = rbp;
	r->rip = ra;
	/* After a signal frame the next pc is exact (interrupted there). */
	r->first = row->cfa_type == UNWIND_CFA_DEREF_RSP;
	unwind_hook_count(UNWIND_CFI_STEPS);
	return 0;
}

#endif /* STRATA_UNWIND_CORE_H */
