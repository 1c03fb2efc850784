// SPDX-License-Identifier: Apache-2.0
/* The profile data model: interning, merging, display names, bounds. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lib/profile.h"
#include "lib/utf8.h"

static int64_t intern(struct profile *p, const char *func, const char *file, uint32_t line,
		      const char *module, uint64_t addr, uint32_t flags)
{
	struct profile_frame f = { func, file, line, module, addr, flags };

	return profile__intern_frame(p, &f);
}

static void test_new_free(void **state)
{
	struct profile *p = profile__new(99);

	assert_non_null(p);
	assert_int_equal(p->freq_hz, 99);
	assert_int_equal(p->nframes, 0);
	assert_int_equal(p->nsamples, 0);
	assert_int_equal(profile__total(p), 0);
	profile__free(p);
	profile__free(NULL); /* destructors accept NULL */
}

static void test_intern_frames(void **state)
{
	struct profile *p = profile__new(99);
	char func[32], module[32];
	int64_t a, b, c, d;

	/* the profile copies: the caller's buffers may change afterwards */
	snprintf(func, sizeof(func), "main");
	snprintf(module, sizeof(module), "/usr/bin/app");
	a = intern(p, func, "app.c", 10, module, 0x1000, 0);
	snprintf(func, sizeof(func), "XXXX");
	snprintf(module, sizeof(module), "YYYY");
	assert_true(a >= 0);
	assert_string_equal(p->frames[a].func, "main");
	assert_string_equal(p->frames[a].module, "/usr/bin/app");

	b = intern(p, "main", "app.c", 10, "/usr/bin/app", 0x1000, 0);
	assert_int_equal(a, b);
	/* every field takes part in identity */
	c = intern(p, "main", "app.c", 11, "/usr/bin/app", 0x1000, 0);
	assert_int_not_equal(a, c);
	d = intern(p, "main", "app.c", 10, "/usr/bin/app", 0x1000, PROFILE_FRAME_INLINED);
	assert_int_not_equal(a, d);
	assert_int_not_equal(c, d);
	assert_int_not_equal(a, intern(p, "main", NULL, 10, "/usr/bin/app", 0x1000, 0));
	assert_int_not_equal(a, intern(p, "main", "app.c", 10, "/usr/bin/app", 0x1001, 0));
	/* strings are interned: equal strings share storage */
	assert_ptr_equal(p->frames[a].func, p->frames[c].func);
	assert_ptr_equal(p->frames[a].file, p->frames[d].file);
	assert_int_equal(p->nframes, 5);
	assert_int_equal(profile__intern_frame(p, NULL), -EINVAL);
	profile__free(p);
}

static void test_intern_many(void **state)
{
	struct profile *p = profile__new(99);
	char name[32];
	const char *first;

	/* enough to grow every table and the arena several times */
	for (int i = 0; i < 20000; i++) {
		snprintf(name, sizeof(name), "fn_%d", i);
		assert_int_equal(intern(p, name, "f.c", i, "/lib/x.so", i, 0), i);
	}
	first = p->frames[0].func;
	for (int i = 0; i < 20000; i += 997) {
		snprintf(name, sizeof(name), "fn_%d", i);
		assert_int_equal(intern(p, name, "f.c", i, "/lib/x.so", i, 0), i);
		assert_string_equal(p->frames[i].func, name);
	}
	/* interned strings never move */
	assert_ptr_equal(first, p->frames[0].func);
	assert_string_equal(first, "fn_0");
	profile__free(p);
}

static void test_merge_samples(void **state)
{
	struct profile *p = profile__new(100);
	uint32_t st[3], other[2];
	char comm[16];

	st[0] = intern(p, "main", NULL, 0, "/bin/a", 1, 0);
	st[1] = intern(p, "work", NULL, 0, "/bin/a", 2, 0);
	st[2] = intern(p, "leaf", NULL, 0, "/bin/a", 3, 0);
	other[0] = st[0];
	other[1] = st[2];

	snprintf(comm, sizeof(comm), "app");
	assert_int_equal(profile__add_sample(p, 1, 1, comm, st, 3, 5), 0);
	snprintf(comm, sizeof(comm), "zzz"); /* comm is copied */
	assert_int_equal(profile__add_sample(p, 1, 1, "app", st, 3, 7), 0);
	assert_int_equal(p->nsamples, 1);
	assert_int_equal(p->samples[0].count, 12);
	assert_string_equal(p->samples[0].comm, "app");

	/* each of pid, tid, comm and the stack keeps samples apart */
	assert_int_equal(profile__add_sample(p, 1, 2, "app", st, 3, 1), 0);
	assert_int_equal(profile__add_sample(p, 2, 1, "app", st, 3, 1), 0);
	assert_int_equal(profile__add_sample(p, 1, 1, "app2", st, 3, 1), 0);
	assert_int_equal(profile__add_sample(p, 1, 1, "app", other, 2, 1), 0);
	assert_int_equal(profile__add_sample(p, 1, 1, "app", st, 2, 1), 0);
	assert_int_equal(p->nsamples, 6);
	assert_int_equal(profile__total(p), 17);

	/* the stack is copied, root first */
	st[0] = 99;
	assert_int_equal(p->samples[0].frames[0], other[0]);
	assert_int_equal(p->samples[0].nframes, 3);

	/* count 0 adds nothing; a NULL comm is named */
	assert_int_equal(profile__add_sample(p, 3, 3, "x", other, 2, 0), 0);
	assert_int_equal(p->nsamples, 6);
	assert_int_equal(profile__add_sample(p, 3, 3, NULL, NULL, 0, 2), 0);
	assert_int_equal(p->nsamples, 7);
	assert_string_equal(p->samples[6].comm, "[unknown]");
	assert_int_equal(p->samples[6].nframes, 0);
	assert_int_equal(profile__add_sample(p, 3, 3, "", NULL, 0, 1), 0);
	assert_int_equal(p->nsamples, 7);
	assert_int_equal(p->samples[6].count, 3);
	profile__free(p);
}

static void test_many_samples(void **state)
{
	struct profile *p = profile__new(100);
	uint32_t st[2];

	st[0] = intern(p, "main", NULL, 0, "/bin/a", 1, 0);
	st[1] = intern(p, "leaf", NULL, 0, "/bin/a", 2, 0);
	for (uint32_t round = 0; round < 2; round++)
		for (uint32_t tid = 0; tid < 5000; tid++)
			assert_int_equal(profile__add_sample(p, 1, tid, "a", st, 2, 1), 0);
	assert_int_equal(p->nsamples, 5000);
	assert_int_equal(profile__total(p), 10000);
	for (uint32_t i = 0; i < p->nsamples; i++)
		assert_int_equal(p->samples[i].count, 2);
	profile__free(p);
}

static void test_bad_samples(void **state)
{
	struct profile *p = profile__new(100);
	uint32_t *big = calloc(PROFILE_MAX_FRAMES + 1, sizeof(*big));
	uint32_t bad = 5;

	assert_non_null(big);
	assert_int_equal(intern(p, "f", NULL, 0, "/bin/a", 1, 0), 0);
	assert_int_equal(profile__add_sample(p, 1, 1, "a", big, PROFILE_MAX_FRAMES + 1, 1), -E2BIG);
	assert_int_equal(profile__add_sample(p, 1, 1, "a", big, PROFILE_MAX_FRAMES, 1), 0);
	assert_int_equal(p->samples[0].nframes, PROFILE_MAX_FRAMES);
	assert_int_equal(profile__add_sample(p, 1, 1, "a", &bad, 1, 1), -EINVAL);
	assert_int_equal(profile__add_sample(p, 1, 1, "a", NULL, 1, 1), -EINVAL);
	assert_int_equal(profile__add_sample(NULL, 1, 1, "a", NULL, 0, 1), -EINVAL);
	assert_int_equal(profile__add_sample(p, 1, 1, "a", big, 1, UINT64_MAX), 0);
	assert_int_equal(profile__add_sample(p, 1, 1, "a", big, 1, 1), -EOVERFLOW);
	assert_int_equal(profile__total(p), UINT64_MAX); /* saturates */
	free(big);
	profile__free(p);
}

static void test_frame_name(void **state)
{
	struct profile_frame f = { .func = "do_work",
				   .module = "/usr/lib/libx.so.1",
				   .addr = 0x1a2b };
	char buf[64], tiny[8];

	assert_string_equal(profile__frame_name(&f, buf, sizeof(buf)), "do_work");
	f.func = NULL;
	assert_string_equal(profile__frame_name(&f, buf, sizeof(buf)), "libx.so.1+0x1a2b");
	f.func = "";
	assert_string_equal(profile__frame_name(&f, buf, sizeof(buf)), "libx.so.1+0x1a2b");
	/* the UNRESOLVED flag wins over a name */
	f.func = "nearby_symbol";
	f.flags = PROFILE_FRAME_UNRESOLVED;
	assert_string_equal(profile__frame_name(&f, buf, sizeof(buf)), "libx.so.1+0x1a2b");
	f.module = "[kernel]";
	f.addr = 0xffffffff81000010ull;
	assert_string_equal(profile__frame_name(&f, buf, sizeof(buf)),
			    "[kernel]+0xffffffff81000010");
	f.module = NULL;
	f.addr = 0;
	assert_string_equal(profile__frame_name(&f, buf, sizeof(buf)), "[unknown]+0x0");
	f.module = "noslash";
	assert_string_equal(profile__frame_name(&f, buf, sizeof(buf)), "noslash+0x0");
	/* truncated, but always terminated */
	f.module = "/lib/verylongname.so";
	assert_ptr_equal(profile__frame_name(&f, tiny, sizeof(tiny)), tiny);
	assert_string_equal(tiny, "verylon");
}

static void test_display_names(void **state)
{
	struct profile *p = profile__new(100);
	const char **names;
	int64_t a, b;

	a = intern(p, "resolved", NULL, 0, "/bin/a", 1, 0);
	b = intern(p, NULL, NULL, 0, "/opt/lib/libz.so", 0xdead, 0);
	names = profile__display_names(p);
	assert_non_null(names);
	assert_ptr_equal(names[a], p->frames[a].func);
	assert_string_equal(names[b], "libz.so+0xdead");
	free(names);
	profile__free(p);
}

static void test_utf8(void **state)
{
	uint32_t cp;

	assert_int_equal(utf8_next("a", &cp), 1);
	assert_int_equal(cp, 'a');
	assert_int_equal(utf8_next("\xc3\xa9", &cp), 2);
	assert_int_equal(cp, 0xe9);
	assert_int_equal(utf8_next("\xe2\x82\xac", &cp), 3);
	assert_int_equal(cp, 0x20ac);
	assert_int_equal(utf8_next("\xf0\x9f\x94\xa5", &cp), 4);
	assert_int_equal(cp, 0x1f525);
	/* invalid: lone continuation, overlong, surrogate, truncated */
	assert_int_equal(utf8_next("\x80", &cp), 1);
	assert_int_equal(cp, 0xfffd);
	assert_int_equal(utf8_next("\xc0\xaf", &cp), 1);
	assert_int_equal(cp, 0xfffd);
	assert_int_equal(utf8_next("\xed\xa0\x80", &cp), 1);
	assert_int_equal(cp, 0xfffd);
	assert_int_equal(utf8_next("\xe2\x82", &cp), 1);
	assert_int_equal(cp, 0xfffd);
}

static void test_utf8_encode(void **state)
{
	static const uint32_t cps[] = { 'a',	0x7f,	0x80,	 0xe9,	  0x7ff,   0x800,
					0x20ac, 0xffff, 0x10000, 0x1f525, 0x10ffff };
	char b[5];
	uint32_t cp;

	for (size_t i = 0; i < sizeof(cps) / sizeof(cps[0]); i++) {
		size_t n = utf8_encode(cps[i], b);

		b[n] = '\0';
		assert_int_equal(utf8_next(b, &cp), n);
		assert_int_equal(cp, cps[i]);
	}
	/* not encodable: a surrogate, past U+10FFFF */
	assert_int_equal(utf8_encode(0xd800, b), 3);
	assert_memory_equal(b, "\xef\xbf\xbd", 3);
	assert_int_equal(utf8_encode(0x110000, b), 3);
	assert_memory_equal(b, "\xef\xbf\xbd", 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_new_free),     cmocka_unit_test(test_intern_frames),
		cmocka_unit_test(test_intern_many),  cmocka_unit_test(test_merge_samples),
		cmocka_unit_test(test_many_samples), cmocka_unit_test(test_bad_samples),
		cmocka_unit_test(test_frame_name),   cmocka_unit_test(test_display_names),
		cmocka_unit_test(test_utf8),	     cmocka_unit_test(test_utf8_encode),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
