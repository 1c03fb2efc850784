// SPDX-License-Identifier: Apache-2.0
/*
 * NCCL hangs in strata-server (see diag_hang.h): batch -> detector, report
 * -> JSON (with the store's view of each missing rank), report -> store.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "lib/hash.h"
#include "lib/json_str.h"
#include "server/batch_decode.h"
#include "server/diag_hang.h"
#include "server/diag_inputs.h"
#include "server/store/backend.h"

#define LOOK_BACK_NS 10000000000ull /* the CPU stack: the rank's last 10 s */

static const char *str_of(const Strata__V1__Batch *b, uint32_t i)
{
	return i < b->n_strings ? b->strings[i] : "";
}

int diag_hang__is_p2p(const char *op)
{
	return !strcmp(op, "Send") || !strcmp(op, "Recv");
}

/* Kernel frames of a wire stack, folded root first (names from the
 * agent's kallsyms). */
static void fold_kernel(const Strata__V1__Batch *b, uint32_t stack, char *out, size_t size)
{
	size_t len = 0;

	out[0] = '\0';
	if (!stack || stack >= b->n_stacks)
		return;
	for (size_t i = 0; i < b->stacks[stack]->n_frames && len + 1 < size; i++) {
		const Strata__V1__Frame *f = b->stacks[stack]->frames[i];
		int n;

		if (f->kind != STRATA__V1__FRAME__KIND__KERNEL)
			continue;
		n = snprintf(out + len, size - len, "%s%s", len ? ";" : "", str_of(b, f->name_str));
		if (n < 0)
			break;
		len += (size_t)n;
	}
	if (len >= size)
		out[size - 1] = '\0';
}

size_t diag_hang__feed(struct hang_detector *hd, const Strata__V1__Batch *b, const char *job,
		       diag_rank_fn rank_of, void *ctx)
{
	int64_t as_of = (int64_t)b->end_ns;
	size_t nccl = 0;
	char kstack[256];

	hang_detector__batch(hd, b->node, as_of);
	for (size_t i = 0; i < b->n_nccl_collectives; i++) {
		const Strata__V1__NcclCollective *c = b->nccl_collectives[i];
		const Strata__V1__Process *p = b->processes[c->process];
		const char *op = str_of(b, c->op_str);
		struct hang_call k = { .comm_hash = c->comm_hash,
				       .node = b->node,
				       .pid = p->pid,
				       .seq = c->seq,
				       .op = op,
				       .bytes = c->bytes,
				       .entry_ns = (int64_t)c->entry_ns,
				       .exit_ns = c->exit_ns ? (int64_t)c->exit_ns : 1 };

		if (strcmp(store_process__job(b, p), job) || diag_hang__is_p2p(op) ||
		    !c->comm_hash ||
		    rank_of(ctx, b->node, p->pid, &k.comm_hash, &k.seq, &k.rank, &k.nranks))
			continue;
		hang_detector__call(hd, &k);
		nccl++;
	}
	for (size_t i = 0; i < b->n_inflight_calls; i++) {
		const Strata__V1__InflightCall *c = b->inflight_calls[i];
		const Strata__V1__Process *p = b->processes[c->process];
		const char *api = str_of(b, c->api_str);
		struct hang_call k = { .comm_hash = c->comm_hash,
				       .rank = c->rank,
				       .nranks = c->nranks,
				       .node = b->node,
				       .pid = p->pid,
				       .seq = c->seq,
				       .op = api,
				       .bytes = c->bytes,
				       .entry_ns = (int64_t)c->entry_ns,
				       .as_of_ns = as_of };

		if (strcmp(store_process__job(b, p), job))
			continue;
		/* an NCCL collective's rank: the server's word first */
		if (c->comm_hash && !diag_hang__is_p2p(api)) {
			int32_t rank = k.rank, nranks = k.nranks;
			int known = rank_of(ctx, b->node, p->pid, &k.comm_hash, &k.seq, &k.rank,
					    &k.nranks);

			if (known == -EAGAIN)
				continue;
			if (known) { /* the call's own word */
				k.rank = rank;
				k.nranks = nranks;
			}
		}
		nccl += diag_hang__inflight(hd, &k);
	}
	for (size_t i = 0; i < b->n_thread_states; i++) {
		const Strata__V1__ThreadState *t = b->thread_states[i];
		const Strata__V1__Process *p = b->processes[t->process];

		if (strcmp(store_process__job(b, p), job))
			continue;
		fold_kernel(b, t->stack, kstack, sizeof(kstack));
		hang_detector__thread_state(hd, b->node, p->pid, str_of(b, t->state_str),
					    str_of(b, t->wchan_str), kstack,
					    t->in_syscall ? (int32_t)t->syscall : -1, as_of);
	}
	for (size_t i = 0; i < b->n_processes; i++) {
		const Strata__V1__Process *p = b->processes[i];

		if (p->exit_ns && !strcmp(store_process__job(b, p), job))
			hang_detector__exit(hd, b->node, p->pid, (int64_t)p->exit_ns);
	}
	return nccl;
}

size_t diag_hang__inflight(struct hang_detector *hd, const struct hang_call *k)
{
	if (!k->comm_hash) { /* a CUDA call, or NCCL without a communicator */
		hang_detector__gpu_call(hd, k->node, k->pid, k->op, k->entry_ns, k->as_of_ns);
		return 0;
	}
	if (diag_hang__is_p2p(k->op) || k->rank < 0 || k->nranks <= 0)
		return 0;
	hang_detector__call(hd, k);
	return 1;
}

/* ---- JSON ---------------------------------------------------------------------- */

const char *diag_hang__kind(uint32_t kind)
{
	return kind == HANG_STALLED ? "stalled" : kind == HANG_MISMATCH ? "mismatch" : "missing";
}

static void time_or_null(FILE *o, const char *key, int64_t ns)
{
	if (ns > 0)
		fprintf(o, ",\"%s\":%.3f", key, (double)ns / 1e9);
	else
		fprintf(o, ",\"%s\":null", key);
}

/* Where a sleeping thread waits, by its wait channel or a kernel frame. */
static const char *const futex_marks[] = { "futex", NULL };
static const char *const io_marks[] = { "pipe",	      "sk_wait",   "wait_for_partner",
					"fifo_open",  "tcp",	   "unix",
					"wait_woken", "sock_read", NULL };
static const char *const sleep_marks[] = { "sleep", "hrtimer", NULL };

static bool sleeps_on(const struct hang_rank *r, const char *const *marks)
{
	for (; *marks; marks++)
		if (strstr(r->wchan, *marks) || strstr(r->kstack, *marks))
			return true;
	return false;
}

/* What a rank that did not come is doing now, in words. */
static const char *state_of(const struct hang_rank *r, const char **reason)
{
	*reason = NULL;
	if (!r->known)
		return "never_seen";
	if (r->exited_ns)
		return "gone";
	if (r->in_other)
		return "in_other_collective";
	if (r->gpu_call[0])
		return "in_cuda_call";
	switch (r->sched_state[0]) {
	case 'R':
		return "running";
	case 'D':
		*reason = "io";
		return "blocked";
	case 'S': /* what it sleeps on says why */
		*reason = sleeps_on(r, futex_marks)   ? "lock"
			  : sleeps_on(r, io_marks)    ? "io"
			  : sleeps_on(r, sleep_marks) ? "sleep"
						      : "wait";
		return "blocked";
	case 'T':
	case 't':
		return "stopped";
	case 'Z':
	case 'X':
		return "gone";
	default:
		return "unknown";
	}
}

struct top_stack {
	char folded[1024];
	uint64_t best, total;
};

static int on_sample(void *ctx, const struct store_sample *s)
{
	struct top_stack *t = ctx;

	t->total += s->value;
	if (s->value > t->best) {
		t->best = s->value;
		diag_fold_stack(s->stack, t->folded, sizeof(t->folded));
	}
	return 0;
}

static void rank_json(FILE *o, struct store *st, const struct hang_rank *r, int missing)
{
	const char *reason, *state = state_of(r, &reason);

	fprintf(o, "{\"rank\":%d,\"known\":%s", r->rank, r->known ? "true" : "false");
	if (!r->known) {
		fputs(",\"state\":\"never_seen\"}", o);
		return;
	}
	fputs(",\"node\":", o);
	json_write_str(o, r->node);
	fprintf(o, ",\"pid\":%u", r->pid);
	if (!missing) {
		time_or_null(o, "since", r->since_ns);
		if (r->op[0]) {
			fputs(",\"op\":", o);
			json_write_str(o, r->op);
			fprintf(o, ",\"bytes\":%" PRIu64, r->bytes);
		}
		fputc('}', o);
		return;
	}
	if (r->has_last) {
		fprintf(o, ",\"last_collective\":{\"seq\":%" PRIu64 ",\"op\":", r->last_seq);
		json_write_str(o, r->last_op);
		fprintf(o, ",\"exit\":%.3f}", (double)r->last_exit_ns / 1e9);
	} else {
		fputs(",\"last_collective\":null", o);
	}
	fprintf(o, ",\"state\":\"%s\",\"reason\":", state);
	json_write_str(o, reason ? reason : "");
	if (r->in_other) {
		fprintf(o, ",\"in_collective\":{\"seq\":%" PRIu64 ",\"op\":", r->other_seq);
		json_write_str(o, r->other_op);
		fprintf(o, ",\"bytes\":%" PRIu64 "}", r->other_bytes);
	}
	if (r->gpu_call[0]) {
		fputs(",\"gpu_call\":{\"api\":", o);
		json_write_str(o, r->gpu_call);
		fprintf(o, ",\"since\":%.3f}", (double)r->gpu_call_since_ns / 1e9);
	}
	fputs(",\"thread\":{\"state\":", o);
	json_write_str(o, r->sched_state);
	fputs(",\"wchan\":", o);
	json_write_str(o, r->wchan);
	fputs(",\"kernel_stack\":", o);
	json_write_str(o, r->kstack);
	fprintf(o, ",\"syscall\":%d}", r->syscall);
	time_or_null(o, "exited", r->exited_ns);
	time_or_null(o, "heard", r->heard_ns);
	if (st && r->heard_ns > 0) { /* what it ran lately: its current CPU stack */
		struct top_stack t = { .folded = "" };
		struct store_filter f = { .node = r->node,
					  .pid = r->pid,
					  .from_ns = (uint64_t)r->heard_ns > LOOK_BACK_NS
							     ? (uint64_t)r->heard_ns - LOOK_BACK_NS
							     : 1,
					  .to_ns = (uint64_t)r->heard_ns + 1 };

		st->ops->profile(st, &f, STORE_PROFILE_CPU, on_sample, &t);
		fprintf(o, ",\"cpu_samples\":%" PRIu64 ",\"cpu_stack\":", t.total);
		json_write_str(o, t.folded);
	}
	fputc('}', o);
}

static void ranks_json(FILE *o, struct store *st, const char *key, const struct hang_rank *r,
		       uint32_t n, int missing)
{
	fprintf(o, ",\"%s\":[", key);
	for (uint32_t i = 0; i < n && i < HANG_MAX_LISTED; i++) {
		if (i)
			fputc(',', o);
		rank_json(o, st, &r[i], missing);
	}
	fputc(']', o);
}

void diag_hang__json(FILE *o, struct store *st, const struct hang_report *h)
{
	fputs("{\"job\":", o);
	json_write_str(o, h->job);
	fprintf(o,
		",\"kind\":\"%s\",\"communicator\":\"%016" PRIx64 "\",\"seq\":%" PRIu64 ",\"op\":",
		diag_hang__kind(h->kind), h->comm_hash, h->seq);
	json_write_str(o, h->op);
	fprintf(o, ",\"bytes\":%" PRIu64 ",\"nranks\":%d", h->bytes, h->nranks);
	time_or_null(o, "since", h->since_ns);
	time_or_null(o, "decided_at", h->decided_ns);
	time_or_null(o, "as_of", h->as_of_ns);
	time_or_null(o, "until", h->until_ns);
	fprintf(o,
		",\"threshold_seconds\":%.3f,\"period_seconds\":%.6f,\"waiting_count\":%u,"
		"\"missing_count\":%u,\"mismatched_count\":%u",
		h->threshold_s, h->period_s, h->nwaiting, h->nmissing, h->nmismatched);
	ranks_json(o, NULL, "waiting", h->waiting, h->nwaiting, 0);
	ranks_json(o, st, "missing", h->missing, h->nmissing, 1);
	ranks_json(o, NULL, "mismatched", h->mismatched, h->nmismatched, 0);
	fputc('}', o);
}

/* ---- the store ----------------------------------------------------------------- */

int diag_hang__store(struct store *st, const struct hang_report *h, uint64_t now_ns)
{
	Strata__V1__Batch b = STRATA__V1__BATCH__INIT;
	Strata__V1__Hang rec = STRATA__V1__HANG__INIT, *recp = &rec;
	char *strings[5], *report = NULL, err_msg[128];
	uint64_t id[2], key[4] = { h->comm_hash, h->seq, h->until_ns ? 1 : 0, h->kind };
	size_t len = 0;
	struct batch_limits lim = { 0 };
	FILE *f = open_memstream(&report, &len);
	int err;

	if (!f)
		return -ENOMEM;
	diag_hang__json(f, st, h);
	if (fclose(f)) {
		free(report);
		return -ENOMEM;
	}
	id[0] = hash_bytes(h->job, strlen(h->job), hash_bytes(key, sizeof(key), 0x68616e67));
	id[1] = hash_bytes(key, sizeof(key), id[0]);
	strings[0] = (char *)"";
	strings[1] = (char *)h->job;
	strings[2] = (char *)diag_hang__kind(h->kind);
	strings[3] = (char *)h->op;
	strings[4] = report;
	b.version = STRATA__V1__WIRE_VERSION__WIRE_VERSION_CURRENT;
	b.batch_id = (ProtobufCBinaryData){ .len = sizeof(id), .data = (uint8_t *)id };
	b.node = (char *)STORE_SERVER_NODE;
	b.agent_version = (char *)"strata-server";
	b.start_ns = h->decided_ns > 0 ? (uint64_t)h->decided_ns : now_ns;
	b.end_ns = h->until_ns > h->decided_ns ? (uint64_t)h->until_ns : b.start_ns;
	b.strings = strings;
	b.n_strings = 5;
	rec.job_str = 1;
	rec.kind_str = 2;
	rec.comm_hash = h->comm_hash;
	rec.seq = h->seq;
	rec.op_str = 3;
	rec.bytes = h->bytes;
	rec.nranks = h->nranks;
	rec.since_ns = h->since_ns > 0 ? (uint64_t)h->since_ns : 0;
	rec.decided_ns = h->decided_ns > 0 ? (uint64_t)h->decided_ns : 0;
	rec.until_ns = h->until_ns > 0 ? (uint64_t)h->until_ns : 0;
	rec.waiting = h->nwaiting;
	rec.missing = h->nmissing;
	rec.mismatched = h->nmismatched;
	rec.report_str = 4;
	b.hangs = &recp;
	b.n_hangs = 1;
	err = batch_validate(&b, &lim, err_msg, sizeof(err_msg)) == BATCH_OK ? 0 : -EINVAL;
	if (!err)
		err = st->ops->ingest(st, &(struct store_batch){ .pb = &b, .received_ns = now_ns });
	free(report);
	return err == 1 ? 0 : err;
}
