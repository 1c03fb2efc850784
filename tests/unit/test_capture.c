// SPDX-License-Identifier: Apache-2.0
/*
 * Triggered deep capture at the server (server/capture.h, trace_json.h):
 * the registry checks and bounds what it is asked for, hands each node
 * only the orders (and targets) that name it, ends a cancelled capture
 * and survives a restart through its store records; the stores keep the
 * agents' timed samples, GPU calls and capture runs and hand them back
 * with their stacks (SQLite here, ClickHouse too under
 * tests/integration/test_store_clickhouse.sh); the trace writer turns
 * samples into balanced flame-chart slices per thread.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/capture.h"
#include "server/capture_trigger.h"
#include "server/store.h"
#include "server/trace_json.h"
#include "store_test_batch.h"
#include "store_test_util.h"

#define T0 (1709294400ULL * NS)

static struct capture_spec spec(const char *job, uint64_t start, uint64_t secs)
{
	struct capture_spec s = { .start_ns = start, .end_ns = start + secs * NS, .freq_hz = 99 };

	snprintf(s.job, sizeof(s.job), "%s", job);
	snprintf(s.trigger, sizeof(s.trigger), "api");
	return s;
}

static void test_registry_bounds(void **state)
{
	struct capture_registry *r =
		capture_registry__new(NULL, &(struct capture_opts){ .max_s = 30, .max_active = 2 });
	struct capture_spec s = spec("j1", T0, 100);
	struct capture c, c2;
	char err[256];

	(void)state;
	assert_non_null(r);
	/* no job and no target, nothing raised, unknown trigger */
	s.job[0] = 0;
	assert_int_equal(capture_registry__add(r, &s, T0, &c, err, sizeof(err)), -EINVAL);
	s = spec("j1", T0, 100);
	s.freq_hz = 0;
	assert_int_equal(capture_registry__add(r, &s, T0, &c, err, sizeof(err)), -EINVAL);
	s = spec("j1", T0, 100);
	snprintf(s.trigger, sizeof(s.trigger), "magic");
	assert_int_equal(capture_registry__add(r, &s, T0, &c, err, sizeof(err)), -EINVAL);
	/* bounded: 30 s at most, the frequency at the ceiling; a start in the
	 * past moves to now with its duration */
	s = spec("j1", T0 - 5 * NS, 10);
	s.freq_hz = 100000;
	assert_int_equal(capture_registry__add(r, &s, T0, &c, err, sizeof(err)), 0);
	assert_int_equal(c.s.start_ns, T0);
	assert_int_equal(c.s.end_ns, T0 + 10 * NS);
	assert_int_equal(c.s.freq_hz, CAPTURE_FREQ_MAX);
	assert_int_equal(strlen(c.id), 32);
	s = spec("j1", T0, 100);
	assert_int_equal(capture_registry__add(r, &s, T0, &c2, err, sizeof(err)), 0);
	assert_int_equal(c2.s.end_ns - c2.s.start_ns, 30 * NS);
	assert_string_not_equal(c.id, c2.id);
	/* two run: a third waits for one to end */
	assert_int_equal(capture_registry__add(r, &s, T0, NULL, err, sizeof(err)), -EBUSY);
	assert_int_equal(capture_registry__add(r, &s, T0 + 11 * NS, NULL, err, sizeof(err)), 0);
	assert_string_equal(capture__state(&c, T0 + 11 * NS), "ended");
	assert_string_equal(capture__state(&c2, T0 + 11 * NS), "running");
	capture_registry__free(r);
}

static void test_orders_per_node(void **state)
{
	struct capture_registry *r = capture_registry__new(NULL, NULL);
	struct capture_orders *o = malloc(sizeof(*o));
	struct capture_spec s = spec("", T0 + NS, 10);
	struct capture a, b;
	char err[256];

	(void)state;
	assert_non_null(o);
	/* a: two processes on n1 and one on n2; b: the whole job j2 */
	s.ntargets = 3;
	snprintf(s.targets[0].node, sizeof(s.targets[0].node), "n1");
	s.targets[0].pid = 10;
	snprintf(s.targets[1].node, sizeof(s.targets[1].node), "n2");
	s.targets[1].pid = 20;
	snprintf(s.targets[2].node, sizeof(s.targets[2].node), "n1");
	s.targets[2].pid = 11;
	s.gpu_calls = true;
	assert_int_equal(capture_registry__add(r, &s, T0, &a, err, sizeof(err)), 0);
	s = spec("j2", T0 + NS, 5);
	assert_int_equal(capture_registry__add(r, &s, T0, &b, err, sizeof(err)), 0);

	assert_int_equal(capture_registry__orders(r, "n1", T0, o), 2);
	assert_string_equal(o->op[0]->id, a.id);
	assert_int_equal(o->op[0]->n_targets, 2);
	assert_int_equal(o->op[0]->targets[0]->pid, 10);
	assert_int_equal(o->op[0]->targets[1]->pid, 11);
	assert_true(o->op[0]->gpu_calls);
	assert_int_equal(o->op[0]->start_ns, T0 + NS);
	assert_string_equal(o->op[1]->job, "j2");
	assert_int_equal(o->op[1]->n_targets, 0);
	assert_int_equal(capture_registry__orders(r, "n2", T0, o), 2);
	assert_int_equal(o->op[0]->n_targets, 1);
	assert_int_equal(o->op[0]->targets[0]->pid, 20);
	assert_int_equal(capture_registry__orders(r, "n3", T0, o), 1); /* the job's only */
	/* b ends at T0 + 6 s; a cancelled capture is no order any more */
	assert_int_equal(capture_registry__orders(r, "n1", T0 + 7 * NS, o), 1);
	assert_int_equal(capture_registry__cancel(r, a.id, T0 + 8 * NS), 0);
	assert_int_equal(capture_registry__orders(r, "n1", T0 + 8 * NS, o), 0);
	assert_int_equal(capture_registry__cancel(r, "nope", T0), -ENOENT);
	assert_int_equal(capture_registry__get(r, a.id, &a), 0);
	assert_string_equal(capture__state(&a, T0 + 8 * NS), "cancelled");
	assert_int_equal(capture_registry__list(r, "j2", &a, 1), 1);
	assert_int_equal(capture_registry__list(r, NULL, &a, 1), 2);
	free(o);
	capture_registry__free(r);
}

/* Records survive a restart: a new registry over the same store. */
static void restart_check(struct store *st)
{
	struct capture_registry *r = capture_registry__new(st, NULL);
	struct capture_spec s = spec("j1", T0, 10);
	struct capture a, b, got;
	char err[256];

	assert_non_null(r);
	s.ntargets = 2;
	snprintf(s.targets[0].node, sizeof(s.targets[0].node), "node with space");
	s.targets[0].pid = 7;
	s.targets[1].pid = 0; /* every node */
	snprintf(s.reason, sizeof(s.reason), "rank 3 straggles");
	assert_int_equal(capture_registry__add(r, &s, T0, &a, err, sizeof(err)), 0);
	s = spec("j2", T0, 20);
	assert_int_equal(capture_registry__add(r, &s, T0, &b, err, sizeof(err)), 0);
	assert_int_equal(capture_registry__cancel(r, b.id, T0 + 2 * NS), 0);
	capture_registry__free(r);

	r = capture_registry__new(st, NULL);
	assert_int_equal(capture_registry__load(r, T0 + 3 * NS), 0);
	assert_int_equal(capture_registry__get(r, a.id, &got), 0);
	assert_string_equal(got.s.reason, "rank 3 straggles");
	assert_int_equal(got.s.ntargets, 2);
	assert_string_equal(got.s.targets[0].node, "node with space");
	assert_int_equal(got.s.targets[0].pid, 7);
	assert_string_equal(got.s.targets[1].node, "");
	assert_int_equal(got.s.freq_hz, 99);
	assert_string_equal(capture__state(&got, T0 + 3 * NS), "running");
	assert_int_equal(capture_registry__get(r, b.id, &got), 0);
	assert_string_equal(capture__state(&got, T0 + 3 * NS), "cancelled");
	assert_int_equal(got.s.end_ns, T0 + 2 * NS);
	capture_registry__free(r);
}

static void test_restart_sqlite(void **state)
{
	(void)state;
	check_on_sqlite(restart_check);
}

static void test_restart_clickhouse(void **state)
{
	(void)state;
	check_on_clickhouse(restart_check, "strata_capture_r");
}

/* ---- the agents' records in the stores ------------------------------------------------ */

struct got {
	int samples, calls, collectives;
	uint64_t first_sample_ns;
	uint32_t sample_frames;
	char kernel[64], call_kind[16];
	int32_t ret;
	uint32_t call_frames;
};

static int on_event(void *ctx, const struct store_event *e)
{
	struct got *g = ctx;

	assert_non_null(e->stack);
	if (e->kind == STORE_EVENT_CPU_SAMPLE) {
		if (!g->samples++) {
			g->first_sample_ns = e->start_ns;
			g->sample_frames = e->stack->nframes;
		}
	} else if (e->kind == STORE_EVENT_GPU_CALL) {
		g->calls++;
		snprintf(g->kernel, sizeof(g->kernel), "%s", e->detail);
		snprintf(g->call_kind, sizeof(g->call_kind), "%s", e->call_kind);
		g->ret = e->ret;
		g->call_frames = e->stack->nframes;
	}
	return 0;
}

static int on_bare_event(void *ctx, const struct store_event *e)
{
	assert_null(e->stack);
	assert_int_equal(e->kind, STORE_EVENT_CPU_SAMPLE);
	(*(int *)ctx)++;
	return 0;
}

struct runs {
	int n;
	uint64_t samples, end_ns;
	char reason[16];
};

static int on_run(void *ctx, const struct store_capture_run *ru)
{
	struct runs *r = ctx;

	r->n++;
	r->samples = ru->samples;
	r->end_ns = ru->end_ns;
	snprintf(r->reason, sizeof(r->reason), "%s", ru->end_reason);
	assert_string_equal(ru->node, "n1");
	return 0;
}

static void capture_batch(struct tb *t, uint8_t id, uint64_t start, int ended)
{
	static Strata__V1__CaptureSample cs[3], *csp[3];
	static Strata__V1__GpuCall gc, *gcp;
	static Strata__V1__CaptureRun run, *runp;
	uint32_t r0;

	tb_init(t, id, "n1", start);
	r0 = tb_proc(t, 100, "j1", 0);
	for (int i = 0; i < 3; i++) {
		strata__v1__capture_sample__init(&cs[i]);
		cs[i].process = r0;
		cs[i].tid = 100;
		cs[i].stack = i == 2 ? 2 : 1;
		cs[i].time_ns = start + (uint64_t)(i + 1) * 10000000ULL;
		csp[i] = &cs[i];
	}
	t->b.capture_samples = csp;
	t->b.n_capture_samples = 3;
	strata__v1__gpu_call__init(&gc);
	gc.process = r0;
	gc.tid = 100;
	gc.api_str = tb_str(t, "cudaLaunchKernel");
	gc.kind_str = tb_str(t, "launch");
	gc.name_str = tb_str(t, "gemm_kernel");
	gc.start_ns = start + 15000000ULL;
	gc.end_ns = gc.start_ns + 5000;
	gc.ret = 2;
	gc.stack = 1;
	gcp = &gc;
	t->b.gpu_calls = &gcp;
	t->b.n_gpu_calls = 1;
	strata__v1__capture_run__init(&run);
	run.capture_str = tb_str(t, "0123456789abcdef0123456789abcdef");
	run.start_ns = T0;
	run.end_ns = ended ? start + 5 * NS : 0;
	run.end_reason_str = tb_str(t, ended ? "deadline" : "");
	run.samples = ended ? 6 : 3;
	run.freq_hz = 99;
	runp = &run;
	t->b.capture_runs = &runp;
	t->b.n_capture_runs = 1;
}

static void records_check(struct store *st)
{
	struct tb *t = malloc(sizeof(*t));
	/* every filter at once, over every kind: a capture's trace of one target */
	struct store_filter f = {
		.from_ns = T0, .to_ns = T0 + 100 * NS, .job = "j1", .node = "n1", .pid = 100
	};
	struct got g = { 0 };
	struct runs ru = { 0 };
	int truncated = 0, n;

	assert_non_null(t);
	capture_batch(t, 1, T0, 0);
	assert_int_equal(st->ops->ingest(st, &t->sb), 0);
	capture_batch(t, 2, T0 + 10 * NS, 1);
	assert_int_equal(st->ops->ingest(st, &t->sb), 0);
	assert_int_equal(st->ops->events(st, &f,
					 STORE_EVENT_CPU_SAMPLE | STORE_EVENT_GPU_CALL |
						 STORE_EVENT_COLLECTIVE | STORE_EVENT_TRANSFER |
						 STORE_EVENT_STACKS,
					 0, &truncated, on_event, &g),
			 0);
	assert_int_equal(g.samples, 6);
	assert_int_equal(g.calls, 2);
	assert_int_equal(g.first_sample_ns, T0 + 10000000ULL);
	assert_int_equal(g.sample_frames, 3); /* stack A */
	assert_string_equal(g.kernel, "gemm_kernel");
	assert_string_equal(g.call_kind, "launch");
	assert_int_equal(g.ret, 2);
	assert_int_equal(g.call_frames, 3);
	/* without stacks, of the first batch's range */
	f.to_ns = T0 + 5 * NS;
	n = 0;
	assert_int_equal(
		st->ops->events(st, &f, STORE_EVENT_CPU_SAMPLE, 0, &truncated, on_bare_event, &n),
		0);
	assert_int_equal(n, 3);
	/* the run: its latest row */
	assert_int_equal(st->ops->capture_runs(st, "0123456789abcdef0123456789abcdef", on_run, &ru),
			 0);
	assert_int_equal(ru.n, 1);
	assert_int_equal(ru.samples, 6);
	assert_int_equal(ru.end_ns, T0 + 15 * NS);
	assert_string_equal(ru.reason, "deadline");
	free(t);
}

static void test_records_sqlite(void **state)
{
	(void)state;
	check_on_sqlite(records_check);
}

static void test_records_clickhouse(void **state)
{
	(void)state;
	check_on_clickhouse(records_check, "strata_capture");
}

/* An agent's own capture of a process the OOM killer chose: recorded under
 * the job the agent knew (the batch has no row of the dead process), once,
 * and counted under its trigger. */
static void test_adopt_oom_kill(void **state)
{
	struct capture_registry *r = capture_registry__new(NULL, &(struct capture_opts){ 0 });
	char *strings[] = { "", "0123456789abcdef0123456789abcdef", "oom_kill", "job-k" };
	Strata__V1__CaptureRun run = STRATA__V1__CAPTURE_RUN__INIT, *runs[] = { &run };
	Strata__V1__Batch b = STRATA__V1__BATCH__INIT;
	struct capture_stats st;
	struct capture c[2];

	(void)state;
	assert_non_null(r);
	run.capture_str = 1;
	run.trigger_str = 2;
	run.job_str = 3;
	run.pid = 4242;
	run.start_ns = T0;
	run.from_ns = T0 - 10 * NS;
	run.until_ns = T0 + NS;
	run.freq_hz = 99;
	b.node = "n1";
	b.strings = strings;
	b.n_strings = 4;
	b.capture_runs = runs;
	b.n_capture_runs = 1;
	capture_registry__note_batch(r, &b, T0);
	capture_registry__note_batch(r, &b, T0 + NS); /* the next batch: known */
	assert_int_equal(capture_registry__list(r, "job-k", c, 2), 1);
	assert_string_equal(c[0].s.trigger, "oom_kill");
	assert_int_equal(c[0].s.targets[0].pid, 4242);
	assert_int_equal(c[0].s.start_ns, T0 - 10 * NS);
	assert_non_null(strstr(c[0].s.reason, "OOM killer"));
	capture_registry__stats(r, T0, &st);
	assert_int_equal(st.created[capture__trigger_index("oom_kill")], 1);
	assert_int_equal(st.created[capture__trigger_index("oom")], 0);

	/* an agent's run at the end of time (its window would wrap), or ten
	 * years ahead (it would hold a running slot for years): not adopted,
	 * counted */
	strings[1] = "fedcba9876543210fedcba9876543210";
	for (int i = 0; i < 2; i++) {
		run.start_ns = i ? T0 + 10 * 365 * 86400 * NS : UINT64_MAX - NS;
		run.from_ns = 0;
		run.until_ns = 0;
		run.freq_hz = 5000;
		capture_registry__note_batch(r, &b, T0 + 2 * NS);
		assert_int_equal(capture_registry__list(r, "job-k", c, 2), 1);
	}
	capture_registry__stats(r, T0, &st);
	assert_int_equal(st.created[capture__trigger_index("oom_kill")], 1);
	assert_int_equal(st.refused, 2);
	assert_int_equal(st.active, 1);
	/* one of its own seconds ahead of the server's clock: adopted, at the
	 * timed sampler's ceiling */
	strings[1] = "00000000000000000000000000000007";
	run.start_ns = T0 + 3 * NS;
	capture_registry__note_batch(r, &b, T0 + 2 * NS);
	assert_int_equal(capture_registry__list(r, "job-k", c, 2), 2);
	assert_int_equal(c[0].s.freq_hz == CAPTURE_FREQ_MAX || c[1].s.freq_hz == CAPTURE_FREQ_MAX,
			 1);
	capture_registry__free(r);
}

/* ---- triggers ----------------------------------------------------------------------- */

static void test_triggers(void **state)
{
	struct capture_registry *r = capture_registry__new(NULL, NULL);
	struct capture_triggers *t =
		capture_triggers__new(r, &(struct capture_triggers_opts){ .lead_ms = 10000 });
	struct straggler_rank ranks[6] = { 0 };
	struct straggler_transition tr = { .change = STRAGGLER_CONFIRM };
	struct hang_report *h = calloc(1, sizeof(*h));
	struct capture c[4];

	(void)state;
	assert_non_null(t);
	assert_non_null(h);
	/* a 6-rank job: rank 2 straggles, rank 3 is suspect; one rank of
	 * another communicator */
	for (int i = 0; i < 6; i++) {
		snprintf(ranks[i].job, sizeof(ranks[i].job), "j1");
		snprintf(ranks[i].node, sizeof(ranks[i].node), "n%d", i / 2);
		ranks[i].communicator = i == 5 ? 9 : 7;
		ranks[i].rank = (uint32_t)i;
		ranks[i].nranks = 5;
		ranks[i].pid = 100 + (uint32_t)i;
		ranks[i].score = 0.01 * i;
	}
	ranks[2].state = STRAGGLER_CONFIRMED;
	ranks[3].state = STRAGGLER_SUSPECT;
	tr.r = ranks[2];
	assert_int_equal(capture_triggers__straggler(t, &tr, ranks, 6, T0), 0);
	assert_int_equal(capture_registry__list(r, "j1", c, 4), 1);
	assert_string_equal(c[0].s.trigger, "straggler");
	/* one period later, all together: the flagged rank, then healthy
	 * peers (for its neighbour 3, suspect, the healthiest: 0; and its
	 * other neighbour 1) */
	assert_int_equal(c[0].s.start_ns, T0 + 10 * NS);
	assert_int_equal(c[0].s.end_ns, T0 + (10 + TRIGGER_DURATION_S) * NS);
	assert_int_equal(c[0].s.ntargets, 3);
	assert_int_equal(c[0].s.targets[0].pid, 102);
	assert_string_equal(c[0].s.targets[0].node, "n1");
	assert_int_equal(c[0].s.targets[1].pid, 100);
	assert_int_equal(c[0].s.targets[2].pid, 101);
	assert_true(c[0].s.gpu_calls && c[0].s.freq_hz);
	/* cooling down: the next confirmation of the job makes none */
	assert_int_equal(capture_triggers__straggler(t, &tr, ranks, 6, T0 + 60 * NS), -EALREADY);
	/* a hang: the missing rank and two waiting ones */
	snprintf(h->job, sizeof(h->job), "j1");
	h->kind = HANG_MISSING;
	h->nmissing = 1;
	h->missing[0] = (struct hang_rank){ .rank = 4, .pid = 104, .known = true };
	snprintf(h->missing[0].node, sizeof(h->missing[0].node), "n2");
	h->nwaiting = 3;
	for (int i = 0; i < 3; i++) {
		h->waiting[i] =
			(struct hang_rank){ .rank = i, .pid = 100 + (uint32_t)i, .known = true };
		snprintf(h->waiting[i].node, sizeof(h->waiting[i].node), "n%d", i / 2);
	}
	assert_int_equal(capture_triggers__hang(t, h, T0 + 60 * NS), 0);
	assert_int_equal(capture_registry__list(r, "j1", c, 4), 2);
	assert_string_equal(c[0].s.trigger, "hang");
	assert_int_equal(c[0].s.ntargets, 3);
	assert_int_equal(c[0].s.targets[0].pid, 104);
	/* the schedule: off unless asked for */
	assert_int_equal(capture_triggers__schedule(t, "j1", T0), -EINVAL);
	capture_triggers__free(t);
	t = capture_triggers__new(r, &(struct capture_triggers_opts){ .every_s = 600 });
	assert_int_equal(capture_triggers__schedule(t, "j1", T0 + 100 * NS), 0);
	assert_int_equal(capture_triggers__schedule(t, "j1", T0 + 600 * NS), -EALREADY);
	assert_int_equal(capture_triggers__schedule(t, "j1", T0 + 700 * NS), 0);
	capture_triggers__free(t);
	capture_registry__free(r);
	free(h);
}

/* ---- the trace ------------------------------------------------------------------------- */

static const struct store_frame F_MAIN = { .kind = STORE_FRAME_NATIVE,
					   .func = "main",
					   .module = "/bin/t" };
static const struct store_frame F_STEP = { .kind = STORE_FRAME_NATIVE,
					   .func = "step",
					   .module = "/bin/t" };
static const struct store_frame F_LOAD = { .kind = STORE_FRAME_NATIVE,
					   .func = "load",
					   .module = "/bin/t" };

static size_t count(const char *s, const char *what)
{
	size_t n = 0;

	for (const char *p = s; (p = strstr(p, what)); p += strlen(what))
		n++;
	return n;
}

static void test_trace_flame(void **state)
{
	struct store_frame ms[2] = { F_MAIN, F_STEP }, ml[2] = { F_MAIN, F_LOAD };
	struct store_stack a = { .id = 1, .nframes = 2, .frames = ms };
	struct store_stack b = { .id = 2, .nframes = 2, .frames = ml };
	struct store_event e = { .kind = STORE_EVENT_CPU_SAMPLE,
				 .node = "n1",
				 .pid = 100,
				 .tid = 101,
				 .has_rank = 1,
				 .rank = 3,
				 .name = "cpu" };
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);
	struct trace_json t;

	(void)state;
	assert_non_null(out);
	trace_json__begin(&t, out, 10000000); /* 100 Hz */
	/* main;step twice, main;load once, a gap, main;step */
	e.stack = &a;
	e.start_ns = T0;
	assert_int_equal(trace_json__event(&t, &e), 0);
	e.start_ns = T0 + 10000000;
	assert_int_equal(trace_json__event(&t, &e), 0);
	e.stack = &b;
	e.start_ns = T0 + 20000000;
	assert_int_equal(trace_json__event(&t, &e), 0);
	e.stack = &a;
	e.start_ns = T0 + 200000000;
	assert_int_equal(trace_json__event(&t, &e), 0);
	/* a GPU call on the thread itself */
	e = (struct store_event){ .kind = STORE_EVENT_GPU_CALL,
				  .node = "n1",
				  .pid = 100,
				  .tid = 101,
				  .has_rank = 1,
				  .rank = 3,
				  .name = "cudaLaunchKernel",
				  .call_kind = "launch",
				  .detail = "gemm",
				  .start_ns = T0 + 5000,
				  .dur_ns = 1500 };
	assert_int_equal(trace_json__event(&t, &e), 0);
	assert_int_equal(trace_json__end(&t, 0, "\"capture\":\"x\""), 0);
	fclose(out);
	/* slices: main (opened twice: the gap), step twice, load once */
	assert_int_equal(count(buf, "\"ph\":\"B\""), 5);
	assert_int_equal(count(buf, "\"ph\":\"E\""), 5);
	assert_int_equal(count(buf, "\"name\":\"main\""), 2);
	assert_int_equal(count(buf, "\"name\":\"load\""), 1);
	assert_non_null(strstr(buf, "\"name\":\"rank 3 (n1:100)\""));
	/* exact microseconds; the call on the thread's own track */
	assert_non_null(strstr(buf, "\"ts\":1709294400000005.000,\"dur\":1.500"));
	assert_non_null(strstr(buf, "\"cat\":\"launch\""));
	assert_non_null(strstr(buf, "\"kernel\":\"gemm\""));
	/* load ends when main;step comes back... */
	assert_non_null(strstr(
		buf, "\"ph\":\"E\",\"pid\":3,\"tid\":1073741925,\"ts\":1709294400030000.000"));
	/* ... and everything a sample after the last one */
	assert_non_null(strstr(buf, "\"ts\":1709294400210000.000"));
	assert_non_null(strstr(buf, "\"capture\":\"x\",\"truncated\":false,\"cpu_samples\":4"));
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_registry_bounds), cmocka_unit_test(test_orders_per_node),
		cmocka_unit_test(test_restart_sqlite),	cmocka_unit_test(test_restart_clickhouse),
		cmocka_unit_test(test_records_sqlite),	cmocka_unit_test(test_records_clickhouse),
		cmocka_unit_test(test_trace_flame),	cmocka_unit_test(test_triggers),
		cmocka_unit_test(test_adopt_oom_kill),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
