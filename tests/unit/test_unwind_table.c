// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests: the unwind table compiler, checked row by row against libdw's
 * own CFI evaluation for every pc of every executable section.
 *
 * The reference side does not pattern-match rules the way the compiler
 * does: it runs libdw's DWARF expressions on a small stack machine over two
 * made-up register states and a made-up memory, and the row is run the way
 * the BPF unwinder runs it (bpf/unwind_core.h).  A row agrees when both
 * give the same CFA, the same return-address slot and the same RBP slot in
 * both states, and carries FP_EXACT exactly when a frame-pointer step gives
 * those too.
 *
 * Fixtures are compiled at test time with cc/c++ into a temporary folder.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dwarf.h>
#include <elfutils/libdw.h>

#include <cmocka.h>

#include "tests/unit/test_util.h"

#include "unwind/unwind_table.h"

#define LIBC "/lib/x86_64-linux-gnu/libc.so.6"

/* ---- fixtures --------------------------------------------------------- */

static const char src_nofp[] =
	"#include <alloca.h>\n"
	"#include <stdio.h>\n"
	"#include <string.h>\n"
	"__attribute__((noinline)) int leaf(int x) { return x * 7 + (x >> 3); }\n"
	"__attribute__((noinline)) long big_frame(int n)\n"
	"{\n"
	"	volatile char buf[100000];\n"
	"	for (int i = 0; i < (int)sizeof(buf); i += 4096)\n"
	"		buf[i] = (char)(i + n);\n"
	"	return buf[(unsigned)n % sizeof(buf)] + leaf(n);\n"
	"}\n"
	"__attribute__((noinline)) long with_alloca(int n)\n"
	"{\n"
	"	char *p = alloca((size_t)n + 16);\n"
	"	memset(p, n, (size_t)n + 16);\n"
	"	return p[n] + leaf(p[1]);\n"
	"}\n"
	"__attribute__((noinline)) long recurse(int n)\n"
	"{\n"
	"	if (n <= 1)\n"
	"		return leaf(n);\n"
	"	long r = recurse(n - 1) * 3 + recurse(n - 2);\n"
	"	return r + leaf((int)r);\n"
	"}\n"
	"int main(int argc, char **argv)\n"
	"{\n"
	"	(void)argv;\n"
	"	printf(\"%ld\\n\", big_frame(argc) + with_alloca(argc * 40) + recurse(argc + "
	"10));\n"
	"	return 0;\n"
	"}\n";

static const char src_cxx[] =
	"#include <cstdio>\n"
	"#include <stdexcept>\n"
	"#include <string>\n"
	"#include <vector>\n"
	"template <typename T> struct Acc {\n"
	"	T sum{};\n"
	"	void add(T v)\n"
	"	{\n"
	"		if (v < T(0))\n"
	"			throw std::invalid_argument(\"negative\");\n"
	"		sum += v;\n"
	"	}\n"
	"};\n"
	"template <typename T> __attribute__((noinline)) T total(const std::vector<T> &v)\n"
	"{\n"
	"	Acc<T> a;\n"
	"	for (const T &x : v)\n"
	"		a.add(x);\n"
	"	return a.sum;\n"
	"}\n"
	"static inline int twice(int x) { return 2 * x; }\n"
	"__attribute__((noinline)) int guarded(int n)\n"
	"{\n"
	"	try {\n"
	"		std::vector<int> v(static_cast<size_t>(n) + 3, twice(n));\n"
	"		v.push_back(-n);\n"
	"		return total(v);\n"
	"	} catch (const std::invalid_argument &e) {\n"
	"		return static_cast<int>(std::string(e.what()).size());\n"
	"	}\n"
	"}\n"
	"int main(int argc, char **)\n"
	"{\n"
	"	std::vector<double> d{1.5, 2.5};\n"
	"	std::printf(\"%d %f %ld\\n\", guarded(argc), total(d), total(std::vector<long>{1, "
	"2}));\n"
	"	return 0;\n"
	"}\n";

static const char src_fp[] =
	"#include <stdio.h>\n"
	"__attribute__((noinline)) long fp_leaf(long x) { return x * 3 + 1; }\n"
	"__attribute__((noinline)) long fp_mid(long x)\n"
	"{\n"
	"	long a[8];\n"
	"	for (int i = 0; i < 8; i++)\n"
	"		a[i] = fp_leaf(x + i);\n"
	"	return a[x & 7] + a[0];\n"
	"}\n"
	"__attribute__((noinline)) long fp_top(long x)\n"
	"{\n"
	"	long s = 0;\n"
	"	for (long i = 0; i < x; i++)\n"
	"		s += fp_mid(i);\n"
	"	return s;\n"
	"}\n"
	"int main(int argc, char **argv)\n"
	"{\n"
	"	(void)argv;\n"
	"	printf(\"%ld\\n\", fp_top(argc + 5));\n"
	"	return 0;\n"
	"}\n";

static const char src_dbg[] =
	"#include <stdio.h>\n"
	"__attribute__((noinline)) long df_leaf(long x) { return x * 5 - 1; }\n"
	"__attribute__((noinline)) long df_work(long n)\n"
	"{\n"
	"	volatile long buf[64];\n"
	"	for (long i = 0; i < 64; i++)\n"
	"		buf[i] = df_leaf(i + n);\n"
	"	return buf[n & 63];\n"
	"}\n"
	"int main(int argc, char **argv)\n"
	"{\n"
	"	(void)argv;\n"
	"	printf(\"%ld\\n\", df_work(argc));\n"
	"	return 0;\n"
	"}\n";

static const char src_tiny[] = "void _start(void) { for (;;) ; }\n";

struct fixtures {
	char dir[64];
	char nofp[128], cxx[128], fp[128], dbg[128], ibt[128], high[128], nocfi[128];
	bool have_ibt, have_high, have_nocfi;
};

static int compile(const char *dir, const char *name, const char *src, const char *ext,
		   const char *cmd, char *out, size_t outsz)
{
	char path[256], line[1024];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s.%s", dir, name, ext);
	f = fopen(path, "w");
	if (!f)
		return -1;
	fputs(src, f);
	fclose(f);
	snprintf(out, outsz, "%s/%s", dir, name);
	snprintf(line, sizeof(line), "%s -o '%s' '%s' 2>'%s.log'", cmd, out, path, out);
	return system(line) == 0 ? 0 : -1;
}

static int setup(void **state)
{
	struct fixtures *fx = calloc(1, sizeof(*fx));

	if (!fx)
		return -1;
	snprintf(fx->dir, sizeof(fx->dir), "/tmp/strata-test-unwind-XXXXXX");
	if (!mkdtemp(fx->dir))
		return -1;
	if (compile(fx->dir, "nofp", src_nofp, "c", "cc -O2 -fomit-frame-pointer -g", fx->nofp,
		    sizeof(fx->nofp)) ||
	    compile(fx->dir, "cxx", src_cxx, "cc", "c++ -O2 -fomit-frame-pointer", fx->cxx,
		    sizeof(fx->cxx)) ||
	    compile(fx->dir, "fp", src_fp, "c", "cc -O1 -fno-omit-frame-pointer", fx->fp,
		    sizeof(fx->fp)) ||
	    compile(fx->dir, "dbg", src_dbg, "c",
		    "cc -O2 -fomit-frame-pointer -fno-asynchronous-unwind-tables -g", fx->dbg,
		    sizeof(fx->dbg))) {
		fprintf(stderr, "fixture build failed: see %s/*.log\n", fx->dir);
		return -1;
	}
	/* IBT PLT slots (endbr64 first): the PLT rule's threshold is 9, not
	 * the 11 UNWIND_CFA_PLT encodes. */
	fx->have_ibt =
		!compile(fx->dir, "ibt", src_nofp, "c", "cc -O2 -fomit-frame-pointer -Wl,-z,ibtplt",
			 fx->ibt, sizeof(fx->ibt));
	/* Text above 4 GiB (row pcs are 32-bit): a linker feature, optional. */
	fx->have_high = !compile(fx->dir, "high", src_tiny, "c",
				 "cc -O2 -nostdlib -static -no-pie -Wl,-Ttext-segment=0x100000000",
				 fx->high, sizeof(fx->high));
	/* No CFI at all. */
	fx->have_nocfi = !compile(fx->dir, "nocfi", src_tiny, "c",
				  "cc -O2 -nostdlib -static -fno-asynchronous-unwind-tables "
				  "-fno-unwind-tables -Wl,--no-eh-frame-hdr",
				  fx->nocfi, sizeof(fx->nocfi));
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixtures *fx = *state;
	char cmd[128];

	if (fx) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fx->dir);
		if (system(cmd))
			fprintf(stderr, "could not remove %s\n", fx->dir);
		free(fx);
	}
	return 0;
}

/* ---- reference: libdw's rules on a toy machine ------------------------ */

struct regs {
	uint64_t rsp, rbp, rip, seed;
};

static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

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

/* Structural invariants every table keeps. */
static void check_shape(const struct unwind_table *t)
{
	assert_true(t->nrows > 0);
	assert_int_equal(t->st.rows, t->nrows);
	assert_true(t->st.rows_raw >= t->nrows);
	assert_true(t->vaddr_lo < t->vaddr_hi);
	assert_true(t->vaddr_hi <= UNWIND_TABLE_MAX_VADDR);
	assert_int_equal(t->rows[0].pc, t->vaddr_lo);
	for (uint32_t i = 1; i < t->nrows; i++)
		assert_true(t->rows[i - 1].pc < t->rows[i].pc);
	assert_true(t->rows[t->nrows - 1].pc < t->vaddr_hi);
	assert_null(unwind_table__find(t, t->vaddr_hi));
	assert_ptr_equal(unwind_table__find(t, t->vaddr_lo), &t->rows[0]);
	if (t->vaddr_lo)
		assert_null(unwind_table__find(t, t->vaddr_lo - 1));
	assert_ptr_equal(unwind_table__find(t, t->vaddr_hi - 1), &t->rows[t->nrows - 1]);
}

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

/* ---- tests ------------------------------------------------------------ */

static void test_c_omit_frame_pointer(void **state)
{
	struct fixtures *fx = *state;
	struct cmp c = compare_file(fx->nofp, 1, NULL);

	assert_int_equal(c.unsupported, 0);
	assert_true(c.plt > 0);		     /* lazy-binding .plt */
	assert_true(c.rbp_cfa > 0);	     /* alloca: CFA from RBP */
	assert_true(c.max_rsp_off > 100000); /* the big frame */
	assert_true(c.end > 0);		     /* _start */
}

static void test_cxx_inline_exceptions(void **state)
{
	struct fixtures *fx = *state;
	struct cmp c = compare_file(fx->cxx, 1, NULL);

	assert_int_equal(c.unsupported, 0);
}

static void test_frame_pointer_exact(void **state)
{
	/* Not fp_leaf: gcc sets no frame up for a leaf that needs none, even
	 * with -fno-omit-frame-pointer (and the compare above checks that the
	 * flag is absent there). */
	static const char *const fns[] = { "fp_mid", "fp_top", "main" };
	struct fixtures *fx = *state;
	struct unwind_table *t;
	struct cmp c = compare_file(fx->fp, 1, &t);
	uint64_t bytes = 0, exact = 0;

	assert_int_equal(c.unsupported, 0);
	assert_true(t->st.fp_exact_ranges > 0);
	for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
		uint64_t lo, hi, n = 0;

		assert_true(sym_range(fx->fp, fns[i], &lo, &hi));
		for (uint64_t pc = lo; pc < hi; pc++)
			n += !!(unwind_table__find(t, pc)->flags & UNWIND_ROW_FP_EXACT);
		/* push %rbp; mov %rsp,%rbp and the pop/ret are not exact. */
		print_message("  %s: %llu of %llu bytes FP-exact\n", fns[i], (unsigned long long)n,
			      (unsigned long long)(hi - lo));
		assert_true(n > 0);
		assert_true(n <= hi - lo - 4);
		bytes += hi - lo;
		exact += n;
	}
	assert_true(exact * 2 > bytes);
	unwind_table__free(t);
}

static void test_debug_frame_only(void **state)
{
	struct fixtures *fx = *state;
	struct unwind_table *t;
	struct cmp c = compare_file(fx->dbg, 1, &t);
	uint64_t lo, hi;

	assert_int_equal(c.unsupported, 0);
	assert_true(c.from_debug > 0);
	/* The compiled functions have rows from .debug_frame, not NONE. */
	assert_true(sym_range(fx->dbg, "df_work", &lo, &hi));
	for (uint64_t pc = lo; pc < hi; pc++)
		assert_int_not_equal(unwind_table__find(t, pc)->cfa_type, UNWIND_CFA_NONE);
	unwind_table__free(t);
}

static void test_ibt_plt(void **state)
{
	struct fixtures *fx = *state;
	struct unwind_table *t;
	struct cmp c;

	if (!fx->have_ibt)
		skip();
	c = compare_file(fx->ibt, 1, &t);
	/* Exact per-slot RSP rows stand in for the PLT rule. */
	assert_true(t->st.plt_ranges > 0);
	assert_int_equal(c.plt, 0);
	assert_int_equal(c.unsupported, 0);
	unwind_table__free(t);
}

static void test_libc(void **state)
{
	struct unwind_table *t;
	struct cmp c;

	if (access(LIBC, R_OK))
		skip();
	c = compare_file(LIBC, 1, &t);
	print_message("  libc: %llu fdes, %llu CFI bytes, %u rows (%llu raw), %llu unsupported, "
		      "%llu PLT, %llu signal, %llu FP-exact ranges\n",
		      (unsigned long long)t->st.fdes, (unsigned long long)t->st.cfi_bytes, t->nrows,
		      (unsigned long long)t->st.rows_raw,
		      (unsigned long long)t->st.unsupported_ranges,
		      (unsigned long long)t->st.plt_ranges, (unsigned long long)t->st.signal_ranges,
		      (unsigned long long)t->st.fp_exact_ranges);
	assert_true(t->st.plt_ranges > 0);
	assert_true(t->st.signal_ranges >= 1); /* __restore_rt */
	assert_true(c.plt > 0 && c.signal > 0);
	/* Only a few hand-written or stack-realigning functions. */
	assert_true(t->st.unsupported_ranges < t->nrows / 100);
	unwind_table__free(t);
}

/* Builds the table of len bytes of buf through a memfd. */
static int build_bytes(const void *buf, size_t len, struct unwind_table **t)
{
	int fd = memfd_create("unwind-test", MFD_CLOEXEC), err;

	assert_true(fd >= 0);
	if (len)
		assert_int_equal(write(fd, buf, len), (ssize_t)len);
	err = unwind_table__build(fd, t);
	close(fd);
	return err;
}

static void test_corrupt_files(void **state)
{
	struct fixtures *fx = *state;
	struct unwind_table *t = NULL;
	uint8_t junk[65536];
	size_t len, cuts[] = { 1, 16, 64, 1000, 4096 };
	uint8_t *elf;

	/* Empty and random. */
	assert_int_equal(build_bytes("", 0, &t), -ENOEXEC);
	assert_null(t);
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)mix64(i);
	assert_int_equal(build_bytes(junk, sizeof(junk), &t), -ENOEXEC);
	/* ELF magic in front of junk. */
	memcpy(junk, "\177ELF\2\1\1", 7);
	assert_int_equal(build_bytes(junk, sizeof(junk), &t), -ENOEXEC);

	/* Truncated: the section headers (at the end) are gone. */
	elf = read_all(fx->nofp, &len);
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		int err = build_bytes(elf, cuts[i], &t);

		assert_true(err == -ENOEXEC || err == -ENODATA);
	}
	{
		int err = build_bytes(elf, len / 2, &t);

		assert_true(err == -ENOEXEC || err == -ENODATA);
	}
	free(elf);
	/* Not a file at all. */
	assert_int_equal(unwind_table__build(-1, &t), -ENOEXEC);
	unwind_table__free(NULL);
	assert_null(unwind_table__find(NULL, 0));
}

/*
 * The CFI sections of a real file overwritten at random: every outcome must
 * be a clean error or a well-formed table, under ASan/UBSan.
 */
static void test_mutated_cfi(void **state)
{
	struct fixtures *fx = *state;
	const char *files[] = { fx->nofp, fx->dbg };
	unsigned ok = 0, failed = 0;

	elf_version(EV_CURRENT);
	for (size_t fi = 0; fi < 2; fi++) {
		uint64_t off[2] = { 0 }, size[2] = { 0 };
		size_t len, shstrndx;
		Elf_Scn *scn = NULL;
		uint8_t *orig, *buf;
		Elf *e;
		int fd = open(files[fi], O_RDONLY);

		assert_true(fd >= 0);
		e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
		assert_int_equal(elf_getshdrstrndx(e, &shstrndx), 0);
		while ((scn = elf_nextscn(e, scn))) {
			GElf_Shdr sh;
			const char *name;
			int k = -1;

			gelf_getshdr(scn, &sh);
			name = elf_strptr(e, shstrndx, sh.sh_name);
			if (name && !strcmp(name, ".eh_frame"))
				k = 0;
			else if (name &&
				 (!strcmp(name, ".debug_frame") || !strcmp(name, ".eh_frame_hdr")))
				k = 1;
			if (k >= 0 && sh.sh_type != SHT_NOBITS) {
				off[k] = sh.sh_offset;
				size[k] = sh.sh_size;
			}
		}
		elf_end(e);
		close(fd);
		orig = read_all(files[fi], &len);
		buf = malloc(len);
		assert_non_null(buf);
		for (uint64_t it = 0; it < 300; it++) {
			uint64_t h = mix64(it * 7919 + fi);
			int k = (int)(h & 1), err;
			struct unwind_table *t = NULL;

			if (!size[k])
				k ^= 1;
			memcpy(buf, orig, len);
			/* Flip a few bytes, or smear one run with a single value. */
			if (h & 2) {
				for (int j = 0; j < 1 + (int)((h >> 8) & 7); j++) {
					uint64_t r = mix64(h + (uint64_t)j);

					buf[off[k] + r % size[k]] ^= (uint8_t)(r >> 32) | 1;
				}
			} else {
				uint64_t at = (h >> 8) % size[k], n = (h >> 40) % 64;

				if (at + n > size[k])
					n = size[k] - at;
				memset(buf + off[k] + at, (int)(h >> 56), n);
			}
			err = build_bytes(buf, len, &t);
			if (!err) {
				check_shape(t);
				for (uint64_t pc = t->vaddr_lo; pc < t->vaddr_hi; pc += 7)
					assert_non_null(unwind_table__find(t, pc));
				unwind_table__free(t);
				ok++;
			} else {
				assert_true(err == -ENOEXEC || err == -ENODATA || err == -E2BIG);
				failed++;
			}
		}
		free(buf);
		free(orig);
	}
	print_message("  mutated CFI: %u tables, %u clean errors\n", ok, failed);
}

/* Section header index and file offset of name in the ELF bytes. */
static bool find_section(const uint8_t *buf, size_t len, const char *name, size_t *ndx,
			 uint64_t *off, uint64_t *size)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	bool found = false;
	Elf *e = elf_memory((char *)buf, len);

	assert_non_null(e);
	assert_int_equal(elf_getshdrstrndx(e, &shstrndx), 0);
	while (!found && (scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		const char *n;

		if (!gelf_getshdr(scn, &sh) || !(n = elf_strptr(e, shstrndx, sh.sh_name)))
			continue;
		if (!strcmp(n, name)) {
			*ndx = elf_ndxscn(scn);
			*off = sh.sh_offset;
			*size = sh.sh_size;
			found = true;
		}
	}
	elf_end(e);
	return found;
}

/*
 * An .eh_frame_hdr libdw would trust but that leads elsewhere than the
 * FDEs (or that libdw would read past) makes the .eh_frame unusable:
 * -ENOEXEC, as the fixture has no .debug_frame to fall back on.
 */
static void test_bad_eh_frame_hdr(void **state)
{
	struct fixtures *fx = *state;
	struct unwind_table *t = NULL;
	uint64_t off, size;
	size_t len, ndx;
	uint8_t *orig, *buf;
	Elf64_Ehdr *eh;
	uint32_t v;

	orig = read_all(fx->nofp, &len);
	buf = malloc(len);
	assert_non_null(buf);
	assert_true(find_section(orig, len, ".eh_frame_hdr", &ndx, &off, &size));
	assert_true(size >= 20);
	/* version 1, eh_frame_ptr pcrel|sdata4, count udata4, table datarel|sdata4 */
	assert_int_equal(orig[off], 1);
	assert_int_equal(orig[off + 3], DW_EH_PE_datarel | DW_EH_PE_sdata4);

	/* The intact file builds. */
	assert_int_equal(build_bytes(orig, len, &t), 0);
	unwind_table__free(t);

	/* Last entry's FDE pointer moved 4 bytes into its FDE. */
	memcpy(buf, orig, len);
	memcpy(&v, buf + off + size - 4, 4);
	v += 4;
	memcpy(buf + off + size - 4, &v, 4);
	assert_int_equal(build_bytes(buf, len, &t), -ENOEXEC);

	/* Last entry's initial location off by one. */
	memcpy(buf, orig, len);
	memcpy(&v, buf + off + size - 8, 4);
	v += 1;
	memcpy(buf + off + size - 8, &v, 4);
	assert_int_equal(build_bytes(buf, len, &t), -ENOEXEC);

	/* More entries than the section holds. */
	memcpy(buf, orig, len);
	v = 0x10000000;
	memcpy(buf + off + 8, &v, 4);
	assert_int_equal(build_bytes(buf, len, &t), -ENOEXEC);

	/* A header shorter than its fixed fields is refused; an empty one
	 * is no search table (libdw scans the section instead). */
	eh = (Elf64_Ehdr *)orig;
	for (uint64_t sz = 0; sz < 3; sz += 2) {
		Elf64_Shdr sh;
		uint64_t at = eh->e_shoff + ndx * eh->e_shentsize;

		memcpy(buf, orig, len);
		memcpy(&sh, buf + at, sizeof(sh));
		sh.sh_size = sz;
		memcpy(buf + at, &sh, sizeof(sh));
		assert_int_equal(build_bytes(buf, len, &t), sz ? -ENOEXEC : 0);
		unwind_table__free(t);
		t = NULL;
	}
	free(buf);
	free(orig);
}

static void test_no_cfi(void **state)
{
	struct fixtures *fx = *state;
	int err;

	if (!fx->have_nocfi)
		skip();
	assert_null(build_path(fx->nocfi, &err));
	assert_int_equal(err, -ENODATA);
}

static void test_text_above_4g(void **state)
{
	struct fixtures *fx = *state;
	int err;

	if (!fx->have_high)
		skip();
	assert_null(build_path(fx->high, &err));
	assert_int_equal(err, -E2BIG);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_c_omit_frame_pointer),
		cmocka_unit_test(test_cxx_inline_exceptions),
		cmocka_unit_test(test_frame_pointer_exact),
		cmocka_unit_test(test_debug_frame_only),
		cmocka_unit_test(test_ibt_plt),
		cmocka_unit_test(test_libc),
		cmocka_unit_test(test_corrupt_files),
		cmocka_unit_test(test_mutated_cfi),
		cmocka_unit_test(test_bad_eh_frame_hdr),
		cmocka_unit_test(test_no_cfi),
		cmocka_unit_test(test_text_above_4g),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
