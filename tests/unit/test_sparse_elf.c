// SPDX-License-Identifier: Apache-2.0
/* The sparse ELF upload's reader (lib/sparse_elf.c): a body in pieces of
 * any size lands at its offsets; every malformed body is refused with a
 * reason, before any byte lands where it should not. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lib/sparse_elf.h"

#define FILE_SIZE 4096

struct sink {
	uint8_t file[FILE_SIZE];
	size_t writes;
	int fail_at; /* the write that fails (-EIO), 0: none */
};

static int sink_write(void *ctx, uint64_t off, const void *data, size_t len)
{
	struct sink *s = ctx;

	if (s->fail_at && ++s->writes == (size_t)s->fail_at)
		return -EIO;
	assert_true(off + len <= FILE_SIZE);
	memcpy(s->file + off, data, len);
	return 0;
}

/* A body of size with the ranges given; data bytes are (offset & 0xff). */
static size_t make_body(uint8_t *b, uint64_t size, uint32_t n, const struct sparse_range *r)
{
	size_t len = SPARSE_ELF_HEAD + 16 * (size_t)n;

	memcpy(b, SPARSE_ELF_MAGIC, 8);
	put_le64(b + 8, size);
	put_le32(b + 16, n);
	put_le32(b + 20, 0);
	for (uint32_t i = 0; i < n; i++) {
		put_le64(b + SPARSE_ELF_HEAD + 16 * i, r[i].off);
		put_le64(b + SPARSE_ELF_HEAD + 16 * i + 8, r[i].len);
		for (uint64_t k = 0; k < r[i].len; k++)
			b[len++] = (uint8_t)(r[i].off + k);
	}
	return len;
}

/* Feeds body in pieces of step bytes; returns feed's first error, or end's. */
static int read_body(const uint8_t *b, size_t len, size_t step, struct sink *s, uint64_t *size,
		     char *why)
{
	struct sparse_elf_reader r;
	int err = 0;

	sparse_elf_reader__init(&r);
	for (size_t at = 0; at < len && !err; at += step)
		err = sparse_elf_reader__feed(&r, b + at, at + step < len ? step : len - at,
					      sink_write, s);
	if (!err)
		err = sparse_elf_reader__end(&r, size);
	if (why)
		snprintf(why, 128, "%s", r.err);
	sparse_elf_reader__fini(&r);
	return err;
}

static void test_round_trip(void **state)
{
	static const struct sparse_range r[] = {
		{ 0, 64 }, { 100, 3 }, { 1000, 900 }, { 4000, 96 }
	};
	static uint8_t body[8192];
	size_t len = make_body(body, FILE_SIZE, 4, r);

	(void)state;
	for (size_t step = 1; step <= len; step = step < 64 ? step + 1 : step * 3) {
		struct sink s = { 0 };
		uint64_t size = 0;

		assert_int_equal(read_body(body, len, step, &s, &size, NULL), 0);
		assert_int_equal(size, FILE_SIZE);
		for (size_t i = 0; i < 4; i++)
			for (uint64_t k = 0; k < r[i].len; k++)
				assert_int_equal(s.file[r[i].off + k], (uint8_t)(r[i].off + k));
		assert_int_equal(s.file[99], 0); /* a hole */
		assert_int_equal(s.file[3999], 0);
	}
}

static void expect_refused(const uint8_t *body, size_t len, const char *why_has)
{
	struct sink s = { 0 };
	uint64_t size;
	char why[128];

	assert_int_equal(read_body(body, len, 7, &s, &size, why), -EINVAL);
	if (!strstr(why, why_has))
		fail_msg("refused for \"%s\", want \"%s\"", why, why_has);
}

static void test_malformed(void **state)
{
	static uint8_t b[8192];
	struct sparse_range r[3] = { { 0, 10 }, { 20, 10 }, { 40, 10 } };
	size_t len;

	(void)state;
	len = make_body(b, FILE_SIZE, 3, r);
	b[0] = 'X';
	expect_refused(b, len, "magic");
	len = make_body(b, FILE_SIZE, 3, r);
	put_le32(b + 20, 1);
	expect_refused(b, len, "reserved");
	len = make_body(b, 0, 3, r);
	expect_refused(b, len, "file size");
	len = make_body(b, SPARSE_ELF_MAX_SIZE + 1, 3, r);
	expect_refused(b, len, "file size");
	len = make_body(b, FILE_SIZE, 0, r);
	expect_refused(b, len, "ranges");
	put_le32(b + 16, SPARSE_ELF_MAX_RANGES + 1);
	expect_refused(b, len, "ranges");
	r[1] = (struct sparse_range){ 5, 10 }; /* overlaps the first */
	len = make_body(b, FILE_SIZE, 3, r);
	expect_refused(b, len, "range 1");
	r[1] = (struct sparse_range){ 20, 0 }; /* empty */
	len = make_body(b, FILE_SIZE, 2, r);
	expect_refused(b, len, "range 1");
	r[1] = (struct sparse_range){ FILE_SIZE - 5, 10 }; /* past the size */
	len = make_body(b, FILE_SIZE, 2, r);
	expect_refused(b, len, "range 1");
	/* offset + length wraps around (patched into the table) */
	r[1] = (struct sparse_range){ 20, 10 };
	len = make_body(b, FILE_SIZE, 2, r);
	put_le64(b + SPARSE_ELF_HEAD + 16 + 8, UINT64_MAX - 10);
	expect_refused(b, len, "range 1");
	r[1] = (struct sparse_range){ 20, 10 };
	len = make_body(b, FILE_SIZE, 3, r);
	b[len++] = 0xee; /* a byte past the last range */
	expect_refused(b, len, "past the last range");
	len = make_body(b, FILE_SIZE, 3, r);
	expect_refused(b, len - 1, "ended early");
	expect_refused(b, 10, "ended early");
	expect_refused(b, SPARSE_ELF_HEAD + 20, "ended early");
}

static void test_write_error_stops(void **state)
{
	static const struct sparse_range r[] = { { 0, 10 }, { 20, 10 } };
	static uint8_t body[256];
	size_t len = make_body(body, FILE_SIZE, 2, r);
	struct sparse_elf_reader rd;
	struct sink s = { .fail_at = 2 };

	(void)state;
	sparse_elf_reader__init(&rd);
	assert_int_equal(sparse_elf_reader__feed(&rd, body, len, sink_write, &s), -EIO);
	assert_int_equal(sparse_elf_reader__feed(&rd, body, 1, sink_write, &s), -EINVAL);
	sparse_elf_reader__fini(&rd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_write_error_stops),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
