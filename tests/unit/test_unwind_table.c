// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests: the unwind table compiler, checked row by row against libdw's
 * own CFI evaluation for every pc of every executable section
 * (tests/unit/unwind_ref.h), on fixtures compiled at test time and on libc;
 * files without CFI or with text out of the rows' reach get no table.
 * Hostile input: test_unwind_hostile.c.
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

#include "tests/unit/unwind_ref.h"
#include "tests/unit/unwind_test_util.h"
#include "unwind/unwind_table.h"

#define LIBC "/lib/x86_64-linux-gnu/libc.so.6"

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
		cmocka_unit_test(test_no_cfi),
		cmocka_unit_test(test_text_above_4g),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
