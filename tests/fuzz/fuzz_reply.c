// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target: what the agent takes from the server's answers to its
 * batches (a server it is pointed at, or anything between the two on plain
 * HTTP): the build-ids it is asked to upload (protobuf IngestReply, or the
 * JSON answer an older server gives) and the deep captures it is ordered
 * to take (capture_ctl: posted, then ticked on the agent's clock through
 * the order's span).  Checks what the agent promises whatever it is told:
 * every id it would upload is short lowercase hex; at most
 * CAPTURE_AGENT_MAX captures, none longer than CAPTURE_AGENT_MAX_S nor
 * faster than CAPTURE_AGENT_FREQ_MAX, none running before its start or
 * after its end.  Byte 0: odd, the rest is the JSON answer; even, the
 * protobuf one, and bytes 1-8 the agent's realtime clock at the answer.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/capture/capture_ctl.h"
#include "lib/log.h"
#include "uploader/uploader.h"

#define MAX_IDS 64
#define S_NS 1000000000ull
#define MONO0 (1000 * S_NS) /* the agent's monotonic clock at the answer */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_ids(char (*ids)[129], int n)
{
	if (n < 0 || n > MAX_IDS)
		abort();
	for (int i = 0; i < n; i++) {
		size_t len = strnlen(ids[i], 129);

		if (len < 2 || len >= 129 || len % 2 || strspn(ids[i], "0123456789abcdef") != len)
			abort(); /* would name a file path or an id no file has */
	}
}

struct seen {
	int n;
	uint64_t now_mono;
};

static void on_run(void *ctx, const struct capture_run *r)
{
	struct seen *s = ctx;

	s->n++;
	if (s->n > CAPTURE_AGENT_MAX || r->freq_hz > CAPTURE_AGENT_FREQ_MAX ||
	    r->npids > CAPTURE_AGENT_PIDS || r->end_mono < r->start_mono ||
	    r->end_mono - r->start_mono > CAPTURE_AGENT_MAX_S * S_NS || strlen(r->id) != 32)
		abort();
	if (r->state == CAP_RUNNING && (s->now_mono < r->start_mono || s->now_mono >= r->end_mono))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char ids[MAX_IDS][129];
	Strata__V1__IngestReply *reply = NULL;
	struct capture_ctl *c;
	uint64_t real = 0;
	int n;

	if (size < 1)
		return 0;
	log_set_level(LOG_ERROR);
	if (data[0] & 1) {
		char *json = malloc(size);

		if (!json)
			return 0;
		memcpy(json, data + 1, size - 1);
		json[size - 1] = '\0';
		check_ids(ids, uploader__parse_missing(json, ids, MAX_IDS));
		free(json);
		return 0;
	}
	if (size < 9)
		return 0;
	memcpy(&real, data + 1, sizeof(real));
	n = uploader__parse_reply(data + 9, size - 9, ids, MAX_IDS, &reply);
	check_ids(ids, n);
	if (!reply)
		return 0;
	c = capture_ctl__new();
	if (!c)
		abort();
	capture_ctl__post(c, reply->captures, reply->n_captures, MONO0, real);
	strata__v1__ingest_reply__free_unpacked(reply, NULL); /* as the uploader does */
	/* ticks over the longest span an order may take, and past it */
	for (uint64_t t = 0; t <= CAPTURE_AGENT_MAX_S + 2; t += 1 + t / 4) {
		struct seen s = { .now_mono = MONO0 + t * S_NS };

		capture_ctl__tick(c, NULL, s.now_mono, real + t * S_NS);
		capture_ctl__report(c, on_run, &s);
	}
	capture_ctl__free(c);
	return 0;
}
