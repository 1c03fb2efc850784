// SPDX-License-Identifier: Apache-2.0
/*
 * Collective health of one window (see diag_collstats.h): stored calls ->
 * diagnose/collstats -> the server's own batch of CollectiveStat records.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/hash.h"
#include "server/batch_decode.h"
#include "server/diag_hang.h"
#include "server/diag_collstats.h"

#define MAX_OPS 16 /* distinct op names of one window ("AllReduce", ...) */

struct read_ctx {
	struct collstat_call *c;
	size_t n, cap;
	char ops[MAX_OPS][COLLSTAT_OP_LEN];
	uint32_t nops;
	struct diag_collstats_counts *k;
};

static const char *op_of(struct read_ctx *r, const char *op)
{
	for (uint32_t i = 0; i < r->nops; i++)
		if (!strcmp(r->ops[i], op))
			return r->ops[i];
	if (r->nops == MAX_OPS)
		return "other";
	snprintf(r->ops[r->nops], COLLSTAT_OP_LEN, "%s", op);
	return r->ops[r->nops++];
}

static int on_call(void *ctx, const struct store_event *e)
{
	struct read_ctx *r = ctx;
	const char *op = e->name ? e->name : "";
	uint64_t who[2];

	if (diag_hang__is_p2p(op))
		return 0;
	if (!e->comm_hash) { /* no communicator identity: cannot be placed */
		r->k->no_communicator++;
		return 0;
	}
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 1024;
		void *p = realloc(r->c, cap * sizeof(*r->c));

		if (!p)
			return -ENOMEM;
		r->c = p;
		r->cap = cap;
	}
	/* a rank is a process: never merge two processes' calls (issue 13) */
	who[0] = hash_bytes(e->node, strlen(e->node), 0x72616e6b);
	who[1] = e->pid;
	r->c[r->n++] = (struct collstat_call){
		.comm_hash = e->comm_hash,
		.seq = e->seq,
		.op = op_of(r, op),
		.bytes = e->bytes,
		.nranks = e->comm_nranks,
		.rank_id = hash_bytes(who, sizeof(who), 1),
		.entry_ns = (int64_t)e->start_ns,
		.exit_ns = (int64_t)(e->start_ns + e->dur_ns),
	};
	return 0;
}

int diag_collstats__window(struct store *st, const char *job, uint64_t ws, uint64_t we,
			   uint64_t margin_ns, struct collstat_row *rows, size_t max,
			   struct diag_collstats_counts *k)
{
	struct store_filter f = { .job = job,
				  .from_ns = ws > margin_ns ? ws - margin_ns : 1,
				  .to_ns = we + margin_ns };
	struct read_ctx r = { .k = k };
	struct collstat_counts c;
	int truncated = 0, err;
	size_t n;

	err = st->ops->events(st, &f, STORE_EVENT_COLLECTIVE, DIAG_COLLSTAT_EVENTS, &truncated,
			      on_call, &r);
	if (err) {
		free(r.c);
		return err < 0 ? err : -EIO;
	}
	if (truncated)
		k->events_truncated++;
	n = collstat_window(r.c, r.n, (int64_t)ws, (int64_t)we, rows, max, &c);
	k->c.collectives += c.collectives;
	k->c.partial += c.partial;
	k->c.duplicates += c.duplicates;
	k->c.no_exit += c.no_exit;
	k->c.rows_dropped += c.rows_dropped;
	free(r.c);
	return (int)n;
}

int diag_collstats__store(struct store *st, const char *job, uint64_t ws, uint64_t we,
			  const struct collstat_row *rows, size_t n, uint64_t now_ns)
{
	Strata__V1__Batch b = STRATA__V1__BATCH__INIT;
	Strata__V1__CollectiveStat *recs = NULL, **ptrs = NULL;
	char **strings = NULL, err_msg[128];
	uint64_t id[2], key[2] = { ws, we };
	struct batch_limits lim = { 0 };
	int err = -ENOMEM;

	if (!n)
		return 0;
	recs = calloc(n, sizeof(*recs));
	ptrs = calloc(n, sizeof(*ptrs));
	strings = calloc(2 + n, sizeof(*strings));
	if (!recs || !ptrs || !strings)
		goto out;
	/* the same window of the same job: the same batch id, stored once */
	id[0] = hash_bytes(job, strlen(job), hash_bytes(key, sizeof(key), 0x636f6c6c));
	id[1] = hash_bytes(key, sizeof(key), id[0]);
	b.version = STRATA__V1__WIRE_VERSION__WIRE_VERSION_CURRENT;
	b.batch_id = (ProtobufCBinaryData){ .len = sizeof(id), .data = (uint8_t *)id };
	b.node = (char *)STORE_SERVER_NODE;
	b.agent_version = (char *)"strata-server";
	b.start_ns = ws;
	b.end_ns = we;
	strings[0] = (char *)"";
	strings[1] = (char *)job;
	b.strings = strings;
	b.n_strings = 2;
	for (size_t i = 0; i < n; i++) {
		Strata__V1__CollectiveStat *c = &recs[i];

		strata__v1__collective_stat__init(c);
		c->job_str = 1;
		c->comm_hash = rows[i].comm_hash;
		c->op_str = (uint32_t)b.n_strings;
		strings[b.n_strings++] = (char *)rows[i].op;
		c->size_class = rows[i].size_class;
		c->nranks = rows[i].nranks;
		c->occurrences = rows[i].occurrences;
		c->observed_ns = rows[i].observed_ns;
		c->stall_ns = rows[i].stall_ns;
		c->slack_ns = rows[i].slack_ns;
		c->bytes = rows[i].bytes;
		c->observed_max_ns = rows[i].observed_max_ns;
		ptrs[i] = c;
	}
	b.collective_stats = ptrs;
	b.n_collective_stats = n;
	if (batch_validate(&b, &lim, err_msg, sizeof(err_msg)) != BATCH_OK) {
		err = -EINVAL;
		goto out;
	}
	err = st->ops->ingest(st, &(struct store_batch){ .pb = &b, .received_ns = now_ns });
	if (err == 1)
		err = 0; /* stored before (judged again after a restart) */
out:
	free(recs);
	free(ptrs);
	free(strings);
	return err;
}
