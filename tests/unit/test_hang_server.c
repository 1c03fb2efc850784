// SPDX-License-Identifier: Apache-2.0
/*
 * NCCL hangs through strata-server's ingest path (server/diag_live.c,
 * server/diag_hang.c) with a SQLite store: two nodes' batches of a 4-rank
 * job (rank/communicator rows, 50 completed allreduces, then ranks 0, 1, 3
 * in flight at collective 50 and rank 2 blocked in I/O: its thread in D
 * state with an io_schedule kernel stack, CPU samples in load_batch).  The
 * hang is listed with the missing rank's state and CPU stack, stored as a
 * record (a past range finds it, and its end once 50 completes), counted
 * on /metrics, and a webhook payload names it.  A batch that claims to be
 * the server's own is refused by the decoder.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "diagnose/alert_webhook.h"
#include "lib/clock.h"
#include "server/batch_decode.h"
#include "server/diag_hang.h"
#include "server/diag_live.h"
#include "server/store.h"

#define MS 1000000ULL
#define S (1000 * MS)
#define T0 (1709294400ULL * S)
#define COMM 0x5eedULL
#define MAXR 256

struct nb {
	Strata__V1__Batch b;
	char *strings[16];
	Strata__V1__Process proc[2], *procp[2];
	Strata__V1__RankLabels rank[2];
	Strata__V1__NcclComm comm[2], *commp[2];
	Strata__V1__NcclCollective c[MAXR], *cp[MAXR];
	Strata__V1__InflightCall in[2], *inp[2];
	Strata__V1__ThreadState ts[2], *tsp[2];
	Strata__V1__CpuSample cs[2], *csp[2];
	Strata__V1__Stack stk[3], *stkp[3];
	Strata__V1__Frame fr[4], *frp[4];
	Strata__V1__Mapping map, *mapp;
	uint8_t id[16];
	struct store_stack stacks[3];
	struct store_frame sframes[2];
	struct store_batch sb;
};

enum { S_EMPTY, S_TRAINER, S_JOB, S_AR, S_F32, S_D, S_IO, S_ENTRY, S_IOSCHED, S_R, S_LOAD };

/* Node n (ranks 2n, 2n + 1), the batch ending at end; seq [0, done) done
 * by every rank of the node, then: waiting ranks in flight at 50, rank 2
 * (if on this node) in D state, reading a batch. */
static void nb_make(struct nb *t, int n, uint64_t end, uint64_t done, int hang, uint8_t idb)
{
	static char *const strs[] = { "",
				      "trainer",
				      "hj",
				      "AllReduce",
				      "float32",
				      "D",
				      "io_schedule",
				      "entry_SYSCALL_64",
				      "io_schedule",
				      "R",
				      "load_batch" };

	memset(t, 0, sizeof(*t));
	strata__v1__batch__init(&t->b);
	t->b.version = 1;
	memset(t->id, idb, sizeof(t->id));
	t->b.batch_id = (ProtobufCBinaryData){ .len = 16, .data = t->id };
	t->b.node = n ? "hn1" : "hn0";
	t->b.agent_version = "test";
	t->b.start_ns = end - 10 * S;
	t->b.end_ns = end;
	t->b.freq_hz = 49;
	for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
		t->strings[i] = strs[i];
	t->b.strings = t->strings;
	t->b.n_strings = sizeof(strs) / sizeof(strs[0]);
	/* stacks: 0 empty, 1 a kernel stack, 2 a user stack (load_batch) */
	for (int i = 0; i < 3; i++) {
		strata__v1__stack__init(&t->stk[i]);
		t->stkp[i] = &t->stk[i];
	}
	for (int i = 0; i < 3; i++)
		strata__v1__frame__init(&t->fr[i]);
	t->fr[0].kind = STRATA__V1__FRAME__KIND__KERNEL;
	t->fr[0].name_str = S_ENTRY;
	t->fr[1].kind = STRATA__V1__FRAME__KIND__KERNEL;
	t->fr[1].name_str = S_IOSCHED;
	t->fr[2].kind = STRATA__V1__FRAME__KIND__PYTHON;
	t->fr[2].name_str = S_LOAD;
	for (int i = 0; i < 3; i++)
		t->frp[i] = &t->fr[i];
	t->stk[1].frames = t->frp;
	t->stk[1].n_frames = 2;
	t->stk[2].frames = &t->frp[2];
	t->stk[2].n_frames = 1;
	t->b.stacks = t->stkp;
	t->b.n_stacks = 3;
	t->stacks[0] = (struct store_stack){ .id = 1 };
	t->sframes[0] =
		(struct store_frame){ .kind = STORE_FRAME_KERNEL, .func = "entry_SYSCALL_64" };
	t->sframes[1] = (struct store_frame){ .kind = STORE_FRAME_KERNEL, .func = "io_schedule" };
	t->stacks[1] = (struct store_stack){ .id = 2, .nframes = 2, .frames = t->sframes };
	static const struct store_frame py = { .kind = STORE_FRAME_PYTHON, .func = "load_batch" };
	t->stacks[2] = (struct store_stack){ .id = 3, .nframes = 1, .frames = &py };
	t->b.processes = t->procp;
	t->b.nccl_comms = t->commp;
	t->b.nccl_collectives = t->cp;
	t->b.inflight_calls = t->inp;
	t->b.thread_states = t->tsp;
	t->b.cpu_samples = t->csp;
	for (uint32_t p = 0; p < 2; p++) {
		int r = 2 * n + (int)p;

		strata__v1__process__init(&t->proc[p]);
		strata__v1__rank_labels__init(&t->rank[p]);
		t->proc[p].pid = 900 + (uint32_t)r;
		t->proc[p].start_time_ns = 1;
		t->proc[p].comm_str = S_TRAINER;
		t->proc[p].job_str = S_JOB;
		t->rank[p].rank = r;
		t->rank[p].world_size = 4;
		t->proc[p].rank = &t->rank[p];
		t->procp[t->b.n_processes++] = &t->proc[p];
		strata__v1__nccl_comm__init(&t->comm[p]);
		t->comm[p].comm_hash = COMM;
		t->comm[p].process = p;
		t->comm[p].rank = r;
		t->comm[p].nranks = 4;
		t->commp[t->b.n_nccl_comms++] = &t->comm[p];
		for (uint64_t k = done > 50 ? 50 : 0; k < done; k++) {
			size_t i = t->b.n_nccl_collectives++;

			strata__v1__nccl_collective__init(&t->c[i]);
			t->c[i].process = p;
			t->c[i].tid = t->proc[p].pid;
			t->c[i].comm_hash = COMM;
			t->c[i].seq = k;
			t->c[i].op_str = S_AR;
			t->c[i].dtype_str = S_F32;
			t->c[i].bytes = 4096;
			t->c[i].entry_ns = T0 + k * 100 * MS;
			t->c[i].exit_ns = T0 + k * 100 * MS + 10 * MS;
			t->c[i].peer = -1;
			t->cp[i] = &t->c[i];
		}
		if (!hang)
			continue;
		if (r == 2) { /* blocked in I/O, reading a batch */
			strata__v1__thread_state__init(&t->ts[0]);
			t->ts[0].process = p;
			t->ts[0].tid = t->proc[p].pid;
			t->ts[0].state_str = S_D;
			t->ts[0].wchan_str = S_IO;
			t->ts[0].stack = 1;
			t->ts[0].syscall = 17;
			t->ts[0].in_syscall = 1;
			t->tsp[t->b.n_thread_states++] = &t->ts[0];
			strata__v1__cpu_sample__init(&t->cs[0]);
			t->cs[0].process = p;
			t->cs[0].tid = t->proc[p].pid;
			t->cs[0].stack = 2;
			t->cs[0].count = 7;
			t->csp[t->b.n_cpu_samples++] = &t->cs[0];
			continue;
		}
		size_t i = t->b.n_inflight_calls++;

		strata__v1__inflight_call__init(&t->in[i]);
		t->in[i].process = p;
		t->in[i].tid = t->proc[p].pid;
		t->in[i].api_str = S_AR;
		t->in[i].entry_ns = T0 + 50 * 100 * MS;
		t->in[i].comm_hash = COMM;
		t->in[i].seq = 50;
		t->in[i].bytes = 4096;
		t->in[i].rank = r;
		t->in[i].nranks = 4;
		t->inp[i] = &t->in[i];
	}
	t->sb = (struct store_batch){ .pb = &t->b, .stacks = t->stacks, .received_ns = end };
}

static void feed(struct store *st, struct diag_live *l, struct nb *t)
{
	char err[128];

	assert_int_equal(batch_validate(&t->b, &(struct batch_limits){ 0 }, err, sizeof(err)),
			 BATCH_OK);
	assert_int_equal(st->ops->ingest(st, &t->sb), 0);
	/* the server's wall clock: the live thread expires jobs idle by it */
	assert_int_equal(diag_live__batch(l, &t->b, realtime_ns()), 0);
}

struct count {
	size_t n, ended;
	char report[4096];
};

static int on_hang(void *ctx, const struct store_hang *h)
{
	struct count *c = ctx;

	c->n++;
	c->ended += h->until_ns != 0;
	snprintf(c->report, sizeof(c->report), "%s", h->report);
	assert_string_equal(h->job, "hj");
	assert_string_equal(h->kind, "missing");
	assert_int_equal(h->seq, 50);
	assert_int_equal(h->missing, 1);
	assert_int_equal(h->waiting, 3);
	return 0;
}

static struct count stored(struct store *st, size_t want)
{
	struct count c;

	for (int i = 0; i < 100; i++) { /* the live thread writes them */
		memset(&c, 0, sizeof(c));
		assert_int_equal(st->ops->hangs(st,
						&(struct store_filter){ .job = "hj",
									.from_ns = T0,
									.to_ns = T0 + 3600 * S },
						on_hang, &c),
				 0);
		if (c.n >= want)
			break;
		usleep(50000);
	}
	return c;
}

static void rank_blocked_in_io(void **state)
{
	char dir[] = "/tmp/strata-hang-XXXXXX", spec[600], cmd[700], err[256];
	struct nb *t = calloc(1, sizeof(*t));
	struct hang_report h[4];
	struct store *st;
	struct diag_live *l;
	char *json = NULL, *metrics = NULL;
	size_t len = 0, mlen = 0;
	FILE *f;

	(void)state;
	assert_non_null(t);
	assert_non_null(mkdtemp(dir));
	snprintf(spec, sizeof(spec), "sqlite:%s/db", dir);
	st = store__open(spec, err, sizeof(err));
	assert_non_null(st);
	l = diag_live__new(
		&(struct diag_live_opts){ .sz = sizeof(struct diag_live_opts), .store = st });
	assert_non_null(l);
	assert_int_equal(diag_live__start(l), 0);

	/* 50 collectives, every rank */
	for (int n = 0; n < 2; n++) {
		nb_make(t, n, T0 + 5 * S, 50, 0, (uint8_t)(1 + n));
		feed(st, l, t);
	}
	assert_int_equal(diag_live__hangs(l, "hj", h, 4), 0);
	/* T0 + 12 s: ranks 0, 1, 3 wait in 50 since T0 + 5 s (7 s > 5 s) */
	for (int n = 0; n < 2; n++) {
		nb_make(t, n, T0 + 12 * S, 50, 1, (uint8_t)(3 + n));
		feed(st, l, t);
	}
	assert_int_equal(diag_live__hangs(l, "hj", h, 4), 1);
	assert_int_equal(h[0].kind, HANG_MISSING);
	assert_int_equal(h[0].seq, 50);
	assert_int_equal(h[0].nwaiting, 3);
	assert_int_equal(h[0].nmissing, 1);
	assert_int_equal(h[0].missing[0].rank, 2);
	assert_int_equal(h[0].missing[0].last_seq, 49);
	assert_string_equal(h[0].missing[0].sched_state, "D");
	assert_string_equal(h[0].missing[0].kstack, "entry_SYSCALL_64;io_schedule");

	/* the report: state blocked on io, its CPU stack from the store */
	f = open_memstream(&json, &len);
	assert_non_null(f);
	diag_hang__json(f, st, &h[0]);
	fclose(f);
	assert_non_null(strstr(json, "\"kind\":\"missing\""));
	assert_non_null(strstr(json, "\"state\":\"blocked\",\"reason\":\"io\""));
	assert_non_null(strstr(json, "\"kernel_stack\":\"entry_SYSCALL_64;io_schedule\""));
	assert_non_null(strstr(json, "\"syscall\":17"));
	assert_non_null(strstr(json, "\"cpu_stack\":\"load_batch\""));
	assert_non_null(strstr(json, "\"last_collective\":{\"seq\":49,\"op\":\"AllReduce\""));
	free(json);

	/* kept in the store; /metrics */
	struct count c = stored(st, 1);
	assert_int_equal(c.n, 1);
	assert_int_equal(c.ended, 0);
	assert_non_null(strstr(c.report, "\"cpu_stack\":\"load_batch\""));
	f = open_memstream(&metrics, &mlen);
	diag_live__metrics(l, f);
	fclose(f);
	assert_non_null(strstr(metrics,
			       "strata_nccl_hang{job=\"hj\",communicator=\"0000000000005eed\","
			       "seq=\"50\",kind=\"missing\",op=\"AllReduce\"} 1"));
	assert_non_null(strstr(metrics, "strata_nccl_hang_waiting_seconds{job=\"hj\""));
	assert_non_null(strstr(metrics, "strata_nccl_hangs_total{change=\"confirmed\"} 1"));
	free(metrics);

	/* rank 2 comes: 50 completes on every rank, the hang ends */
	for (int n = 0; n < 2; n++) {
		nb_make(t, n, T0 + 22 * S, 51, 0, (uint8_t)(5 + n));
		feed(st, l, t);
	}
	assert_int_equal(diag_live__hangs(l, "hj", h, 4), 0);
	c = stored(st, 2);
	assert_int_equal(c.n, 2);
	assert_int_equal(c.ended, 1);
	assert_non_null(strstr(c.report, "\"until\":"));

	diag_live__free(l);
	store__close(st);
	free(t);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

static void webhook_payload(void **state)
{
	struct hang_transition tr = { .change = HANG_CONFIRM };
	char *json = NULL;
	size_t len = 0;

	(void)state;
	snprintf(tr.h.job, sizeof(tr.h.job), "hj");
	tr.h.kind = HANG_MISSING;
	tr.h.comm_hash = COMM;
	tr.h.seq = 50;
	snprintf(tr.h.op, sizeof(tr.h.op), "AllReduce");
	tr.h.nranks = 4;
	tr.h.nwaiting = 3;
	tr.h.nmissing = 1;
	tr.h.decided_ns = (int64_t)(T0 + 12 * S);
	tr.h.threshold_s = 5;
	tr.h.missing[0] = (struct hang_rank){
		.rank = 2, .known = true, .pid = 902, .exited_ns = (int64_t)(T0 + 6 * S)
	};
	snprintf(tr.h.missing[0].node, sizeof(tr.h.missing[0].node), "hn1");
	assert_int_equal(alert_webhook__build_hangs(&tr, 1, NULL, &json, &len), 0);
	assert_non_null(strstr(json, "\"alertname\": \"StrataNcclHang\""));
	assert_non_null(strstr(json, "\"status\": \"firing\""));
	assert_non_null(strstr(json, "\"seq\": \"50\""));
	assert_non_null(strstr(json, "\"kind\": \"missing\""));
	assert_non_null(strstr(json,
			       "job hj hangs in AllReduce #50 of communicator 0000000000005eed:"
			       " 3 of 4 ranks wait for rank 2 (hn1 pid 902: exited)"));
	free(json);
	tr.change = HANG_CLEAR;
	tr.h.until_ns = (int64_t)(T0 + 20 * S);
	assert_int_equal(alert_webhook__build_hangs(&tr, 1, NULL, &json, &len), 0);
	assert_non_null(strstr(json, "\"status\": \"resolved\""));
	assert_null(strstr(json, "0001-01-01"));
	free(json);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(rank_blocked_in_io),
		cmocka_unit_test(webhook_payload),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
