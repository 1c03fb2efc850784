/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the unwind-table tests share: fixture programs compiled at test time
 * with cc/c++ into a temporary folder (cmocka group setup/teardown), and
 * building a table from a file with the invariants every table keeps.
 */
#ifndef STRATA_TESTS_UNWIND_TEST_UTIL_H
#define STRATA_TESTS_UNWIND_TEST_UTIL_H

#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "unwind/unwind_table.h"

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

/* A 64-bit mix (splitmix64): made-up memory and mutation choices. */
static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

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

#endif /* STRATA_TESTS_UNWIND_TEST_UTIL_H */
