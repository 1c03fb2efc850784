/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Decodes one POSTed batch: zstd frame -> protobuf -> validated
 * Strata__V1__Batch.  Everything here treats its input as hostile: sizes are
 * bounded before any allocation (a zstd bomb stops at max_raw bytes; the
 * unpacked structures get what is left of max_raw, so a decode bomb of
 * empty repeated messages stops there too; both are charged to the shared
 * budget while the batch lives), and
 * every cross-reference (string, stack, process, mapping index) is checked,
 * so the rest of the server indexes the batch without further checks.
 */
#ifndef STRATA_SERVER_BATCH_DECODE_H
#define STRATA_SERVER_BATCH_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "server/mem_budget.h"
#include "strata.pb-c.h"

#define BATCH_ID_LEN 16

struct batch_limits {
	size_t max_wire;	   /* compressed bytes; 0 = 16 MiB */
	size_t max_raw;		   /* memory of a decode: decompressed bytes plus
				    * unpacked structures; 0 = 128 MiB */
	uint32_t max_stack_frames; /* 0 = 4096 (PROFILE_MAX_FRAMES) */
	struct mem_budget *budget; /* shared with other requests; NULL: none */
};

enum batch_error {
	BATCH_OK = 0,
	BATCH_TOO_LARGE,   /* HTTP 413 */
	BATCH_NOT_ZSTD,	   /* 400: not a zstd frame, or truncated / corrupt */
	BATCH_BAD_PROTO,   /* 400: not a protobuf batch */
	BATCH_BAD_VERSION, /* 400: a wire version this server does not speak */
	BATCH_INVALID,	   /* 422: decodes, but references or fields are bad */
	BATCH_BUSY,	   /* 503: the shared memory budget is spent; retry later */
};

/*
 * Decodes wire[0..n).  On success *out is the batch (free it with
 * batch_decode__free) and BATCH_OK is returned; otherwise *out is NULL and
 * err (errsz bytes) says what was wrong, for the HTTP answer.  raw_len,
 * when not NULL, gets the decompressed size.
 */
enum batch_error batch_decode(const void *wire, size_t n, const struct batch_limits *lim,
			      Strata__V1__Batch **out, size_t *raw_len, char *err, size_t errsz);
void batch_decode__free(Strata__V1__Batch *b);

/* Checks every reference and bound of an unpacked batch; used by
 * batch_decode and by tests.  BATCH_OK or BATCH_INVALID/BATCH_BAD_VERSION. */
enum batch_error batch_validate(const Strata__V1__Batch *b, const struct batch_limits *lim,
				char *err, size_t errsz);

/* HTTP status for an error (200 for BATCH_OK). */
int batch_error__http_status(enum batch_error e);

#endif /* STRATA_SERVER_BATCH_DECODE_H */
