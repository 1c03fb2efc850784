/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The unwind-table tests' reference: libdw's own CFI rules evaluated on a
 * toy machine, compared with a compiled row for every pc of a file.
 *
 * The reference side does not pattern-match rules the way the compiler
 * does: it runs libdw's DWARF expressions on a small stack machine over two
 * made-up register states and a made-up memory, and the row is run the way
 * the BPF unwinder runs it (bpf/unwind_core.h).  A row agrees when both
 * give the same CFA, the same return-address slot and the same RBP slot in
 * both states, and carries FP_EXACT exactly when a frame-pointer step gives
 * those too.
 */
#ifndef STRATA_TESTS_UNWIND_REF_H
#define STRATA_TESTS_UNWIND_REF_H

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <gelf.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "tests/unit/unwind_test_util.h"
#include "unwind/unwind_table.h"

/* ---- reference: libdw's rules on a toy machine ------------------------ */

struct regs {
	uint64_t rsp, rbp, rip, seed;
};

/* The toy memory: every address holds a value only it has. */
static uint64_t mem_at(const struct regs *s, uint64_t addr)
{
	return mix64(addr ^ s->seed);
}

static bool reg_value(const struct regs *s, uint64_t reg, uint64_t *v)
{
	switch (reg) {
	case 6:
		*v = s->rbp;
		return true;
	case 7:
		*v = s->rsp;
		return true;
	case 16:
		*v = s->rip;
		return true;
	default:
		return false; /* nothing else is known at a sample */
	}
}

enum loc_kind { LOC_FAIL, LOC_ADDR, LOC_VALUE, LOC_SAME, LOC_UNDEF };

struct loc {
	enum loc_kind kind;
	uint64_t v;
};

/* Evaluates a libdw expression; an address unless it ends in stack_value. */
static struct loc eval_ops(const Dwarf_Op *ops, size_t n, const struct regs *s, bool have_cfa,
			   uint64_t cfa)
{
	struct loc fail = { LOC_FAIL, 0 };
	uint64_t st[32], a, b;
	int sp = 0;

#define PUSH(x)                      \
	do {                         \
		if (sp == 32)        \
			return fail; \
		st[sp++] = (x);      \
	} while (0)
#define POP(x)                       \
	do {                         \
		if (!sp)             \
			return fail; \
		(x) = st[--sp];      \
	} while (0)

	for (size_t i = 0; i < n; i++) {
		const Dwarf_Op *op = &ops[i];
		uint8_t at = op->atom;

		if (at >= DW_OP_lit0 && at <= DW_OP_lit31) {
			PUSH((uint64_t)(at - DW_OP_lit0));
			continue;
		}
		if (at >= DW_OP_breg0 && at <= DW_OP_breg31) {
			if (!reg_value(s, at - DW_OP_breg0, &a))
				return fail;
			PUSH(a + op->number);
			continue;
		}
		switch (at) {
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
			PUSH(op->number);
			break;
		case DW_OP_bregx:
			if (!reg_value(s, op->number, &a))
				return fail;
			PUSH(a + op->number2);
			break;
		case DW_OP_call_frame_cfa:
			if (!have_cfa)
				return fail;
			PUSH(cfa);
			break;
		case DW_OP_plus_uconst:
			POP(a);
			PUSH(a + op->number);
			break;
		case DW_OP_deref:
			POP(a);
			PUSH(mem_at(s, a));
			break;
		case DW_OP_dup:
			POP(a);
			PUSH(a);
			PUSH(a);
			break;
		case DW_OP_drop:
			POP(a);
			break;
		case DW_OP_swap:
			POP(a);
			POP(b);
			PUSH(a);
			PUSH(b);
			break;
		case DW_OP_plus:
		case DW_OP_minus:
		case DW_OP_and:
		case DW_OP_or:
		case DW_OP_xor:
		case DW_OP_mul:
		case DW_OP_shl:
		case DW_OP_shr:
		case DW_OP_ge:
		case DW_OP_gt:
		case DW_OP_le:
		case DW_OP_lt:
		case DW_OP_eq:
		case DW_OP_ne:
			POP(b);
			POP(a);
			switch (at) {
			case DW_OP_plus:
				PUSH(a + b);
				break;
			case DW_OP_minus:
				PUSH(a - b);
				break;
			case DW_OP_and:
				PUSH(a & b);
				break;
			case DW_OP_or:
				PUSH(a | b);
				break;
			case DW_OP_xor:
				PUSH(a ^ b);
				break;
			case DW_OP_mul:
				PUSH(a * b);
				break;
			case DW_OP_shl:
				PUSH(b < 64 ? a << b : 0);
				break;
			case DW_OP_shr:
				PUSH(b < 64 ? a >> b : 0);
				break;
			/* DWARF compares as signed. */
			case DW_OP_ge:
				PUSH((int64_t)a >= (int64_t)b);
				break;
			case DW_OP_gt:
				PUSH((int64_t)a > (int64_t)b);
				break;
			case DW_OP_le:
				PUSH((int64_t)a <= (int64_t)b);
				break;
			case DW_OP_lt:
				PUSH((int64_t)a < (int64_t)b);
				break;
			case DW_OP_eq:
				PUSH(a == b);
				break;
			default:
				PUSH(a != b);
				break;
			}
			break;
		case DW_OP_stack_value:
			if (i + 1 != n || !sp)
				return fail;
			return (struct loc){ LOC_VALUE, st[sp - 1] };
		default:
			return fail;
		}
	}
#undef PUSH
#undef POP
	if (!sp)
		return fail;
	return (struct loc){ LOC_ADDR, st[sp - 1] };
}

/* Where libdw says the caller's regno is. */
static struct loc ref_reg(Dwarf_Frame *f, int regno, const struct regs *s, bool have_cfa,
			  uint64_t cfa)
{
	Dwarf_Op mem[3], *ops;
	size_t n;

	if (dwarf_frame_register(f, regno, mem, &ops, &n))
		return (struct loc){ LOC_FAIL, 0 };
	if (n == 0)
		return (struct loc){ ops ? LOC_UNDEF : LOC_SAME, 0 };
	if (n == 1 && ops[0].atom == DW_OP_regx)
		return (struct loc){ ops[0].number == (Dwarf_Word)regno ? LOC_SAME : LOC_FAIL, 0 };
	return eval_ops(ops, n, s, have_cfa, cfa);
}

/* The row run as bpf/unwind_core.h runs it. */
static bool row_cfa(const struct unwind_row *r, const struct regs *s, uint64_t *cfa)
{
	switch (r->cfa_type) {
	case UNWIND_CFA_RSP:
		*cfa = s->rsp + (int64_t)r->cfa_off;
		return true;
	case UNWIND_CFA_RBP:
		*cfa = s->rbp + (int64_t)r->cfa_off;
		return true;
	case UNWIND_CFA_PLT:
		*cfa = s->rsp + 8 + ((s->rip & 15) >= 11 ? 8 : 0);
		return true;
	case UNWIND_CFA_DEREF_RSP:
		*cfa = mem_at(s, s->rsp + (int64_t)r->cfa_off);
		return true;
	default:
		return false;
	}
}

static struct loc row_reg(uint8_t rule, int16_t off, const struct regs *s, uint64_t cfa)
{
	switch (rule) {
	case UNWIND_REG_SAME:
		return (struct loc){ LOC_SAME, 0 };
	case UNWIND_REG_CFA_OFF:
		return (struct loc){ LOC_ADDR, cfa + (int64_t)off };
	case UNWIND_REG_SP_OFF:
		return (struct loc){ LOC_ADDR, s->rsp + (int64_t)off };
	case UNWIND_REG_UNDEFINED:
		return (struct loc){ LOC_UNDEF, 0 };
	default:
		return (struct loc){ LOC_FAIL, 0 };
	}
}

struct cmp {
	uint64_t pcs, with_cfi, from_debug, none, mismatches;
	uint64_t unsupported, fp_exact, rbp_cfa, max_rsp_off, plt, signal, end;
};

static void report(uint64_t pc, const struct unwind_row *r, const char *what, struct cmp *c)
{
	if (c->mismatches++ < 10)
		print_message("  mismatch at %#llx: %s (row pc %#x cfa %u/%d rbp %u/%d ra %u/%d "
			      "flags %u)\n",
			      (unsigned long long)pc, what, r->pc, r->cfa_type, r->cfa_off,
			      r->rbp_rule, r->rbp_off, r->ra_rule, r->ra_off, r->flags);
}

static bool loc_equal(struct loc a, struct loc b)
{
	return a.kind == b.kind && (a.kind != LOC_ADDR || a.v == b.v);
}

/* Compares the row for pc with libdw's rule there. */
static void compare_pc(Dwarf_CFI *eh, Dwarf_CFI *dbg, const struct unwind_table *t, uint64_t pc,
		       struct cmp *c)
{
	const struct unwind_row *r = unwind_table__find(t, pc);
	Dwarf_Frame *f = NULL;
	bool fp_exact = true, from_debug = false;
	int ra_reg;

	c->pcs++;
	if (!r) {
		if (c->mismatches++ < 10)
			print_message("  no row for %#llx\n", (unsigned long long)pc);
		return;
	}
	if (!eh || dwarf_cfi_addrframe(eh, pc, &f)) {
		f = NULL;
		if (dbg && !dwarf_cfi_addrframe(dbg, pc, &f))
			from_debug = true;
		else
			f = NULL;
	}
	if (!f) {
		c->none++;
		if (r->cfa_type != UNWIND_CFA_NONE)
			report(pc, r, "libdw has no CFI here", c);
		return;
	}
	c->with_cfi++;
	c->from_debug += from_debug;
	ra_reg = dwarf_frame_info(f, NULL, NULL, NULL);

	for (int k = 0; k < 2; k++) {
		uint64_t h = mix64(pc * 2 + (uint64_t)k);
		struct regs s = {
			.rsp = 0x7ff000000000ULL + (h & 0xffff0),
			.rbp = 0x7fe000000000ULL + ((h >> 24) & 0xffff0),
			.rip = pc,
			.seed = mix64(h),
		};
		Dwarf_Op *ops;
		size_t n;
		uint64_t cfa = 0;
		struct loc ref_cfa = { LOC_FAIL, 0 }, ref_ra, ref_rbp, ra, rbp;
		bool have_cfa;

		/* The CFA is the expression's value (no stack_value here). */
		if (!dwarf_frame_cfa(f, &ops, &n) && n)
			ref_cfa = eval_ops(ops, n, &s, false, 0);
		have_cfa = ref_cfa.kind == LOC_ADDR;
		ref_ra = ref_reg(f, ra_reg, &s, have_cfa, ref_cfa.v);
		ref_rbp = ref_reg(f, 6, &s, have_cfa, ref_cfa.v);

		if (ref_ra.kind == LOC_UNDEF) {
			if (r->cfa_type != UNWIND_CFA_END)
				report(pc, r, "libdw: RA undefined (outermost)", c);
			c->end += !k;
			fp_exact = false;
			break;
		}
		if (r->cfa_type == UNWIND_CFA_END) {
			report(pc, r, "END but libdw has an RA", c);
			fp_exact = false;
			break;
		}
		if (r->cfa_type == UNWIND_CFA_UNSUPPORTED) {
			/* The table may decline; it must never be wrong. */
			c->unsupported += !k;
			fp_exact = false;
			break;
		}
		if (!row_cfa(r, &s, &cfa) || !have_cfa || cfa != ref_cfa.v) {
			report(pc, r, "CFA differs", c);
			fp_exact = false;
			break;
		}
		ra = row_reg(r->ra_rule, r->ra_off, &s, cfa);
		rbp = row_reg(r->rbp_rule, r->rbp_off, &s, cfa);
		if (ra.kind == LOC_FAIL || rbp.kind == LOC_FAIL)
			c->unsupported += !k;
		if ((ra.kind != LOC_FAIL && !loc_equal(ra, ref_ra)) ||
		    (rbp.kind != LOC_FAIL && !loc_equal(rbp, ref_rbp))) {
			report(pc, r, "RA or RBP slot differs", c);
			fp_exact = false;
			break;
		}
		/* A frame-pointer step: CFA = RBP + 16, RBP at [RBP], RA at [RBP + 8]. */
		if (ref_cfa.v != s.rbp + 16 || ref_rbp.kind != LOC_ADDR || ref_rbp.v != s.rbp ||
		    ref_ra.kind != LOC_ADDR || ref_ra.v != s.rbp + 8)
			fp_exact = false;
		if (k == 1 && fp_exact != !!(r->flags & UNWIND_ROW_FP_EXACT))
			report(pc, r, "FP_EXACT flag wrong", c);
	}
	if (fp_exact)
		c->fp_exact++;
	if (r->cfa_type == UNWIND_CFA_RBP)
		c->rbp_cfa++;
	if (r->cfa_type == UNWIND_CFA_RSP && (uint64_t)r->cfa_off > c->max_rsp_off)
		c->max_rsp_off = (uint64_t)r->cfa_off;
	c->plt += r->cfa_type == UNWIND_CFA_PLT;
	c->signal += r->cfa_type == UNWIND_CFA_DEREF_RSP;
	free(f);
}

/* The table of the file at path; *err its build's result. */
static struct unwind_table *build_path(const char *path, int *err)
{
	struct unwind_table *t = NULL;
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	*err = unwind_table__build(fd, &t);
	close(fd);
	if (*err)
		assert_null(t);
	return t;
}

/*
 * Builds path's table and compares every pc of every executable section
 * (step stride) with libdw.  Returns the counts; fails on any mismatch.
 */
static struct cmp compare_file(const char *path, unsigned stride, struct unwind_table **out)
{
	struct cmp c = { 0 };
	struct unwind_table *t;
	Elf_Scn *scn = NULL;
	Dwarf *dw = NULL;
	Dwarf_CFI *eh, *dbg = NULL;
	Elf *elf;
	size_t shstrndx;
	bool has_debug_frame = false;
	int fd, err;

	t = build_path(path, &err);
	assert_int_equal(err, 0);
	check_shape(t);

	elf_version(EV_CURRENT);
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	assert_non_null(elf);
	assert_int_equal(elf_getshdrstrndx(elf, &shstrndx), 0);
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *name;

		assert_non_null(gelf_getshdr(scn, &sh));
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (name && !strcmp(name, ".debug_frame"))
			has_debug_frame = true;
	}
	eh = dwarf_getcfi_elf(elf);
	if (has_debug_frame) {
		dw = dwarf_begin_elf(elf, DWARF_C_READ, NULL);
		assert_non_null(dw);
		dbg = dwarf_getcfi(dw);
		assert_non_null(dbg);
	}

	scn = NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;

		assert_non_null(gelf_getshdr(scn, &sh));
		if (!(sh.sh_flags & SHF_EXECINSTR) || sh.sh_type == SHT_NOBITS || !sh.sh_size)
			continue;
		for (uint64_t pc = sh.sh_addr; pc < sh.sh_addr + sh.sh_size; pc += stride)
			compare_pc(eh, dbg, t, pc, &c);
	}
	if (eh)
		dwarf_cfi_end(eh);
	dwarf_end(dw);
	elf_end(elf);
	close(fd);

	print_message("  %s: %llu pcs compared (%llu with CFI, %llu from .debug_frame, %llu "
		      "none), %llu rows (%llu raw), %llu fdes, %llu unsupported pcs, %llu FP-exact "
		      "pcs, %llu mismatches\n",
		      path, (unsigned long long)c.pcs, (unsigned long long)c.with_cfi,
		      (unsigned long long)c.from_debug, (unsigned long long)c.none,
		      (unsigned long long)t->nrows, (unsigned long long)t->st.rows_raw,
		      (unsigned long long)t->st.fdes, (unsigned long long)c.unsupported,
		      (unsigned long long)c.fp_exact, (unsigned long long)c.mismatches);
	assert_int_equal(c.mismatches, 0);
	assert_true(c.with_cfi > 0);
	if (out)
		*out = t;
	else
		unwind_table__free(t);
	return c;
}

/* [lo, hi) of the FUNC symbol name, from .symtab. */
static bool sym_range(const char *path, const char *name, uint64_t *lo, uint64_t *hi)
{
	Elf_Scn *scn = NULL;
	bool found = false;
	Elf *elf;
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	assert_non_null(elf);
	while (!found && (scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB || !sh.sh_entsize)
			continue;
		d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym sym;
			const char *n;

			if (!gelf_getsym(d, (int)i, &sym) || GELF_ST_TYPE(sym.st_info) != STT_FUNC)
				continue;
			n = elf_strptr(elf, sh.sh_link, sym.st_name);
			if (n && !strcmp(n, name)) {
				*lo = sym.st_value;
				*hi = sym.st_value + sym.st_size;
				found = true;
				break;
			}
		}
	}
	elf_end(elf);
	close(fd);
	return found;
}

#endif /* STRATA_TESTS_UNWIND_REF_H */
