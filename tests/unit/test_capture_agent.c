// SPDX-License-Identifier: Apache-2.0
/*
 * The agent's side of deep capture (agent/capture/capture_ctl.h,
 * alloc_ring.h), on a fake clock: an order starts at its start and ends at
 * its end on the agent's monotonic clock with no further word from the
 * server; its realtime instants are read against the clock pair of the
 * answer that brought it (a step of the realtime clock later changes
 * nothing); an order the server stops listing is cancelled; an ended one
 * is reported once and never started again by a late answer; the agent's
 * own bound caps a long order; a capture of its own (out of memory) runs
 * without any order; the allocation ring keeps the last calls per process.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/capture/alloc_ring.h"
#include "agent/capture/capture_ctl.h"

#define S 1000000000ULL
#define MONO0 (1000 * S)
#define REAL0 (1709294400ULL * S)
#define ID1 "0123456789abcdef0123456789abcdef"
#define ID2 "fedcba9876543210fedcba9876543210"
#define ID3 "00000000000000000000000000000003"

struct reported {
	int n;
	struct capture_run last;
};

static void on_run(void *ctx, const struct capture_run *r)
{
	struct reported *rep = ctx;

	rep->n++;
	rep->last = *r;
}

static void order(Strata__V1__CaptureOrder *o, Strata__V1__CaptureTarget *t,
		  Strata__V1__CaptureTarget **tp, const char *id, uint64_t start, uint64_t end)
{
	strata__v1__capture_order__init(o);
	strata__v1__capture_target__init(t);
	o->id = (char *)id;
	o->job = "j1";
	o->start_ns = start;
	o->end_ns = end;
	o->freq_hz = 5000; /* over the agent's ceiling */
	o->gpu_calls = true;
	t->node = "n1";
	t->pid = 77;
	*tp = t;
	o->targets = tp;
	o->n_targets = 1;
}

static void test_ends_on_its_own_clock(void **state)
{
	struct capture_ctl *c = capture_ctl__new();
	Strata__V1__CaptureOrder o, *op = &o;
	Strata__V1__CaptureTarget t, *tp;
	struct reported rep = { 0 };
	struct capture_ctl_stats st;

	(void)state;
	assert_non_null(c);
	/* starts 3 s after the answer, lasts 5 s */
	order(&o, &t, &tp, ID1, REAL0 + 3 * S, REAL0 + 8 * S);
	capture_ctl__post(c, &op, 1, MONO0, REAL0);
	/* the next tick is due at the start */
	assert_int_equal(capture_ctl__tick(c, NULL, MONO0 + S / 2, REAL0 + S / 2), 1000);
	assert_int_equal(capture_ctl__tick(c, NULL, MONO0 + 2500 * 1000000ULL, 0), 500);
	assert_false(capture_ctl__captured(c, 77, REAL0 + 3 * S));
	/* the realtime clock stepped back an hour: the monotonic one rules */
	capture_ctl__tick(c, NULL, MONO0 + 3 * S, REAL0 - 3600 * S);
	assert_true(capture_ctl__busy(c));
	assert_true(capture_ctl__captured(c, 77, REAL0 - 3600 * S + 1));
	assert_false(capture_ctl__captured(c, 78, REAL0 - 3600 * S + 1));
	capture_ctl__count(c, 77, 10, 3, 1);
	capture_ctl__report(c, on_run, &rep);
	assert_int_equal(rep.n, 1);
	assert_int_equal(rep.last.state, CAP_RUNNING);
	assert_int_equal(rep.last.freq_hz, CAPTURE_AGENT_FREQ_MAX);
	assert_int_equal(rep.last.samples, 10);
	assert_int_equal(rep.last.processes, 1);
	/* no answer since (the server is gone): it ends at its end */
	assert_int_equal(capture_ctl__tick(c, NULL, MONO0 + 7 * S, REAL0 + 7 * S), 1000);
	assert_true(capture_ctl__busy(c));
	capture_ctl__tick(c, NULL, MONO0 + 8 * S, REAL0 + 8 * S);
	assert_false(capture_ctl__busy(c));
	/* calls drained after the end still count as the capture's, up to it */
	assert_true(capture_ctl__captured(c, 77, REAL0 + 8 * S));
	assert_false(capture_ctl__captured(c, 77, REAL0 + 8 * S + 1));
	rep.n = 0;
	capture_ctl__report(c, on_run, &rep);
	assert_int_equal(rep.n, 1);
	assert_int_equal(rep.last.state, CAP_ENDED);
	assert_string_equal(rep.last.end_reason, "end");
	assert_int_equal(rep.last.end_real, REAL0 + 8 * S);
	/* reported once, then forgotten; a late answer does not restart it */
	rep.n = 0;
	capture_ctl__report(c, on_run, &rep);
	assert_int_equal(rep.n, 0);
	capture_ctl__post(c, &op, 1, MONO0 + 8 * S, REAL0 + 7 * S); /* a lagging clock */
	capture_ctl__tick(c, NULL, MONO0 + 8 * S + 1, REAL0 + 8 * S);
	assert_false(capture_ctl__busy(c));
	capture_ctl__stats(c, &st);
	assert_int_equal(st.started, 1);
	assert_int_equal(st.ended, 1);
	assert_int_equal(st.late_ns_max, 0);
	capture_ctl__free(c);
}

/* An answer with both orders at second at_s, the agent's tick at tick_s,
 * and what it reports then. */
static void answer(struct capture_ctl *c, Strata__V1__CaptureOrder **op, uint64_t at_s,
		   uint64_t tick_s, struct reported *rep)
{
	capture_ctl__post(c, op, 2, MONO0 + at_s * S, REAL0 + at_s * S);
	capture_ctl__tick(c, NULL, MONO0 + tick_s * S, REAL0 + tick_s * S);
	rep->n = 0;
	capture_ctl__report(c, on_run, rep);
}

static void test_cancel_and_bounds(void **state)
{
	struct capture_ctl *c = capture_ctl__new();
	Strata__V1__CaptureOrder o[2], *op[2] = { &o[0], &o[1] };
	Strata__V1__CaptureTarget t[2], *tp[2];
	struct reported rep = { 0 };
	char id[33];

	(void)state;
	order(&o[0], &t[0], &tp[0], ID1, REAL0, REAL0 + 3600 * S);
	order(&o[1], &t[1], &tp[1], ID2, REAL0, REAL0 + 60 * S);
	capture_ctl__post(c, op, 2, MONO0, REAL0);
	capture_ctl__tick(c, NULL, MONO0, REAL0);
	/* the next answer lists ID1 only: ID2 was cancelled */
	capture_ctl__post(c, op, 1, MONO0 + 10 * S, REAL0 + 10 * S);
	capture_ctl__tick(c, NULL, MONO0 + 10 * S, REAL0 + 10 * S);
	capture_ctl__report(c, on_run, &rep);
	assert_int_equal(rep.n, 2);
	assert_string_equal(rep.last.id, ID2);
	assert_string_equal(rep.last.end_reason, "cancelled");
	/* an order that ends before it starts is no capture (not one of
	 * CAPTURE_AGENT_MAX_S) */
	order(&o[1], &t[1], &tp[1], ID3, REAL0 + 30 * S, REAL0 + 20 * S);
	answer(c, op, 11, 31, &rep);
	assert_int_equal(rep.n, 1);
	assert_string_equal(rep.last.id, ID1);
	/* a pending capture shortened to before its start never starts */
	order(&o[1], &t[1], &tp[1], ID3, REAL0 + 60 * S, REAL0 + 70 * S);
	answer(c, op, 32, 32, &rep);
	o[1].end_ns = REAL0 + 50 * S;
	answer(c, op, 33, 61, &rep);
	assert_int_equal(rep.n, 2);
	assert_string_equal(rep.last.id, ID3);
	assert_string_equal(rep.last.end_reason, "cancelled");
	assert_int_equal(rep.last.start_real, rep.last.end_real); /* never ran */
	/* ID1 asked for an hour: the agent stops it at CAPTURE_AGENT_MAX_S */
	capture_ctl__tick(c, NULL, MONO0 + CAPTURE_AGENT_MAX_S * S - 1, REAL0);
	assert_true(capture_ctl__busy(c));
	capture_ctl__tick(c, NULL, MONO0 + CAPTURE_AGENT_MAX_S * S, REAL0);
	assert_false(capture_ctl__busy(c));
	/* its own: an out-of-memory capture, with no order at all */
	assert_int_equal(
		capture_ctl__start_own(c, "oom", 99, "j9", 5, 99, REAL0 - 10 * S, MONO0, REAL0, id),
		0);
	capture_ctl__tick(c, NULL, MONO0 + 1, REAL0 + 1);
	assert_true(capture_ctl__captured(c, 99, REAL0 + 2));
	/* an answer without it does not cancel it: the server never ordered it */
	capture_ctl__post(c, op, 0, MONO0 + 2 * S, REAL0 + 2 * S);
	capture_ctl__tick(c, NULL, MONO0 + 2 * S, REAL0 + 2 * S);
	assert_true(capture_ctl__busy(c));
	capture_ctl__tick(c, NULL, MONO0 + 5 * S + 1, REAL0 + 5 * S);
	assert_false(capture_ctl__busy(c));
	rep.n = 0;
	capture_ctl__report(c, on_run, &rep);
	assert_int_equal(rep.n, 2);
	assert_string_equal(rep.last.id, id);
	assert_string_equal(rep.last.trigger, "oom");
	assert_string_equal(rep.last.job, "j9");
	assert_int_equal(rep.last.from_real, REAL0 - 10 * S);
	capture_ctl__free(c);
}

struct taken {
	int n;
	uint64_t first, last;
};

static void on_taken(void *ctx, const struct gpu_event *e)
{
	struct taken *t = ctx;

	if (!t->n++)
		t->first = e->start_ns;
	t->last = e->start_ns;
}

static void test_alloc_ring(void **state)
{
	struct alloc_ring *r = alloc_ring__new();
	struct alloc_ring_stats st;
	struct gpu_event e = { .tgid = 5 };
	struct taken tk = { 0 };

	(void)state;
	assert_non_null(r);
	for (uint64_t i = 1; i <= RING_EVENTS + 10; i++) {
		e.start_ns = i;
		alloc_ring__push(r, &e);
	}
	/* the oldest went; since 100: from 100 on */
	assert_int_equal(alloc_ring__take(r, 5, 100, on_taken, &tk), RING_EVENTS + 10 - 99);
	assert_int_equal(tk.first, 100);
	assert_int_equal(tk.last, RING_EVENTS + 10);
	assert_int_equal(alloc_ring__take(r, 5, 0, on_taken, &tk), 0); /* taken: forgotten */
	/* more processes than slots: the least recently active goes */
	for (uint32_t p = 1; p <= RING_PROCS + 1; p++) {
		e.tgid = 1000 + p;
		e.start_ns = 10 * p;
		alloc_ring__push(r, &e);
	}
	alloc_ring__stats(r, &st);
	assert_int_equal(st.overwritten, 10);
	assert_int_equal(st.procs_evicted, 1);
	tk.n = 0;
	assert_int_equal(alloc_ring__take(r, 1001, 0, on_taken, &tk), 0);
	assert_int_equal(alloc_ring__take(r, 1000 + RING_PROCS + 1, 0, on_taken, &tk), 1);
	alloc_ring__free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ends_on_its_own_clock),
		cmocka_unit_test(test_cancel_and_bounds),
		cmocka_unit_test(test_alloc_ring),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
