// SPDX-License-Identifier: Apache-2.0
/*
 * Decode amplification at the server: an empty repeated message
 * is 2 bytes on the wire and a struct plus a pointer once unpacked, so a
 * few KB of zstd could make protobuf-c allocate gigabytes before any
 * validation.  max_raw bounds a decode's memory (decompressed bytes plus
 * unpacked structures), every byte is charged to the shared budget while
 * the batch lives, and a spent shared budget is "busy" (503), not "too
 * large" (413, which the agent would drop).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include <cmocka.h>

#include "server/batch_decode.h"

/* A zstd frame of n empty Batch.stacks messages (field 14: tag 0x72, 0). */
static uint8_t *bomb(size_t n, size_t *len)
{
	size_t raw_len = 2 * n, cap;
	uint8_t *raw = malloc(raw_len), *z;

	assert_non_null(raw);
	for (size_t i = 0; i < n; i++) {
		raw[2 * i] = 0x72;
		raw[2 * i + 1] = 0;
	}
	cap = ZSTD_compressBound(raw_len);
	z = malloc(cap);
	assert_non_null(z);
	*len = ZSTD_compress(z, cap, raw, raw_len, 19);
	assert_false(ZSTD_isError(*len));
	free(raw);
	return z;
}

/* A small valid batch, compressed. */
static uint8_t *good(size_t *len)
{
	Strata__V1__Batch b = STRATA__V1__BATCH__INIT;
	static uint8_t id[BATCH_ID_LEN] = { 1, 2, 3 };
	char *strings[] = { "", "x" };
	uint8_t raw[256], *z;
	size_t n, cap;

	b.version = STRATA__V1__WIRE_VERSION__WIRE_VERSION_CURRENT;
	b.batch_id.data = id;
	b.batch_id.len = sizeof(id);
	b.node = "n";
	b.start_ns = 1;
	b.end_ns = 2;
	b.strings = strings;
	b.n_strings = 2;
	n = strata__v1__batch__pack(&b, raw);
	assert_true(n < sizeof(raw));
	cap = ZSTD_compressBound(n);
	z = malloc(cap);
	assert_non_null(z);
	*len = ZSTD_compress(z, cap, raw, n, 3);
	assert_false(ZSTD_isError(*len));
	return z;
}

static void test_decode_bomb(void **state)
{
	struct mem_budget shared = { .max = 1ull << 30 };
	struct batch_limits lim = { .max_wire = 16 << 20, .max_raw = 128 << 20, .budget = &shared };
	Strata__V1__Batch *b;
	char err[256];
	size_t len, raw;
	/* 64 MiB of empty stacks (32M messages) in a few KB */
	uint8_t *z = bomb(32u << 20, &len);

	print_message("64 MiB of empty stacks: %zu bytes of zstd\n", len);
	assert_true(len < 16384);
	assert_int_equal(batch_decode(z, len, &lim, &b, &raw, err, sizeof(err)), BATCH_TOO_LARGE);
	assert_null(b);
	assert_non_null(strstr(err, "decodes to more than"));
	/* the whole decode within max_raw (+ the zstd window and a block) */
	print_message("peak %zu bytes of a %zu bound\n", shared.peak, lim.max_raw);
	assert_true(shared.peak <= lim.max_raw + (8u << 20) + (128u << 10));
	assert_int_equal(shared.used, 0);
	free(z);

	/* the case: 2 MB of raw bytes under a 16 MiB bound */
	lim.max_raw = 16 << 20;
	shared.peak = 0;
	z = bomb(1u << 20, &len);
	assert_int_equal(batch_decode(z, len, &lim, &b, &raw, err, sizeof(err)), BATCH_TOO_LARGE);
	assert_int_equal(raw, 2u << 20);
	assert_true(shared.peak <= lim.max_raw + (2u << 20) + (128u << 10));
	assert_int_equal(shared.used, 0);
	free(z);
}

static void test_shared_budget(void **state)
{
	struct mem_budget shared = { .max = 1 << 20 };
	struct batch_limits lim = { .budget = &shared };
	Strata__V1__Batch *b;
	char err[256];
	size_t len;
	uint8_t *z = good(&len);

	/* decoded and charged while it lives; given back when freed */
	assert_int_equal(batch_decode(z, len, &lim, &b, NULL, err, sizeof(err)), BATCH_OK);
	assert_true(shared.used > 0);
	assert_string_equal(b->node, "n");
	batch_decode__free(b);
	assert_int_equal(shared.used, 0);
	/* other requests hold the budget: busy (503), not too large (413) */
	assert_int_equal(mem_budget__take(&shared, shared.max - 10), 0);
	assert_int_equal(batch_decode(z, len, &lim, &b, NULL, err, sizeof(err)), BATCH_BUSY);
	assert_int_equal(batch_error__http_status(BATCH_BUSY), 503);
	mem_budget__give(&shared, shared.max - 10);
	assert_int_equal(shared.used, 0);
	/* a decode bomb when the budget is nearly spent: busy, all given back */
	free(z);
	z = bomb(1u << 20, &len);
	assert_int_equal(batch_decode(z, len, &lim, &b, NULL, err, sizeof(err)), BATCH_BUSY);
	assert_int_equal(shared.used, 0);
	free(z);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_decode_bomb),
		cmocka_unit_test(test_shared_budget),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
