// SPDX-License-Identifier: Apache-2.0
/*
 * GPU-layer endpoints over stored events: NCCL collectives per
 * communicator and rank (who arrives last, and how long the others wait
 * for it), and a Perfetto / Chrome trace-event timeline of collectives,
 * CUDA copies/syncs and launches per rank.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "lib/hash.h"
#include "lib/profile.h"
#include "server/server.h"
#include "server/trace_json.h"

#define MAX_EVENTS_DEFAULT 100000u

static uint32_t limit_arg(const struct request *r)
{
	const char *v = request__arg(r, "limit");
	unsigned long n = v ? strtoul(v, NULL, 10) : 0;

	return n && n <= 1000000 ? (uint32_t)n : MAX_EVENTS_DEFAULT;
}

/* ---- collectives ---------------------------------------------------------------- */

struct rank_agg {
	uint64_t comm_hash;
	int32_t rank, nranks;
	char node[128];
	uint32_t pid;
	uint64_t count, bytes, total_ns, max_ns;
	uint64_t last_arrivals;	 /* collectives this rank entered last */
	uint64_t wait_caused_ns; /* sum of (its entry - first entry) when last */
};

struct seq_agg {
	uint64_t comm_hash, seq;
	uint64_t first_entry, last_entry;
	uint32_t last_rank_idx; /* into ranks */
	uint32_t nseen;
};

struct coll_ctx {
	struct rank_agg *ranks;
	uint32_t nranks, cap_ranks;
	struct profile_htab rank_ids;
	struct seq_agg *seqs;
	uint32_t nseqs, cap_seqs;
	struct profile_htab seq_ids;
};

static int rank_eq(uint32_t id, const void *key, const void *ctx)
{
	const struct coll_ctx *c = ctx;
	const uint64_t *k = key;

	return c->ranks[id].comm_hash == k[0] && c->ranks[id].rank == (int32_t)k[1];
}

static int seq_eq(uint32_t id, const void *key, const void *ctx)
{
	const struct coll_ctx *c = ctx;
	const uint64_t *k = key;

	return c->seqs[id].comm_hash == k[0] && c->seqs[id].seq == k[1];
}

static void *grow(void *v, uint32_t *cap, uint32_t n, size_t size)
{
	uint32_t ncap;
	void *nv;

	if (n < *cap)
		return v;
	ncap = *cap ? *cap * 2 : 64;
	nv = realloc(v, (size_t)ncap * size);
	if (nv)
		*cap = ncap;
	return nv;
}

static int coll_row(void *ctx, const struct store_event *e)
{
	struct coll_ctx *c = ctx;
	int32_t rank = e->comm_rank >= 0 ? e->comm_rank : e->has_rank ? e->rank : -1;
	uint64_t rk[2] = { e->comm_hash, (uint64_t)(uint32_t)rank };
	uint64_t sk[2] = { e->comm_hash, e->seq };
	uint64_t rh = hash_bytes(rk, sizeof(rk), 0), sh = hash_bytes(sk, sizeof(sk), 1);
	int64_t ri = profile_htab__find(&c->rank_ids, rh, rank_eq, rk, c);
	int64_t si;
	struct rank_agg *ra;
	struct seq_agg *sa;

	if (ri < 0) {
		void *nv = grow(c->ranks, &c->cap_ranks, c->nranks, sizeof(*c->ranks));

		if (!nv)
			return -ENOMEM;
		c->ranks = nv;
		ri = c->nranks;
		if (profile_htab__insert(&c->rank_ids, rh, (uint32_t)ri))
			return -ENOMEM;
		ra = &c->ranks[c->nranks++];
		memset(ra, 0, sizeof(*ra));
		ra->comm_hash = e->comm_hash;
		ra->rank = rank;
		ra->nranks = e->comm_nranks;
		snprintf(ra->node, sizeof(ra->node), "%s", e->node);
		ra->pid = e->pid;
	}
	ra = &c->ranks[ri];
	ra->count++;
	ra->bytes += e->bytes;
	ra->total_ns += e->dur_ns;
	if (e->dur_ns > ra->max_ns)
		ra->max_ns = e->dur_ns;

	si = profile_htab__find(&c->seq_ids, sh, seq_eq, sk, c);
	if (si < 0) {
		void *nv = grow(c->seqs, &c->cap_seqs, c->nseqs, sizeof(*c->seqs));

		if (!nv)
			return -ENOMEM;
		c->seqs = nv;
		si = c->nseqs;
		if (profile_htab__insert(&c->seq_ids, sh, (uint32_t)si))
			return -ENOMEM;
		sa = &c->seqs[c->nseqs++];
		*sa = (struct seq_agg){ e->comm_hash, e->seq,	    e->start_ns,
					e->start_ns,  (uint32_t)ri, 0 };
	}
	sa = &c->seqs[si];
	sa->nseen++;
	if (e->start_ns < sa->first_entry)
		sa->first_entry = e->start_ns;
	if (e->start_ns >= sa->last_entry) {
		sa->last_entry = e->start_ns;
		sa->last_rank_idx = (uint32_t)ri;
	}
	return 0;
}

static int rank_cmp(const void *a, const void *b)
{
	const struct rank_agg *x = a, *y = b;

	if (x->comm_hash != y->comm_hash)
		return x->comm_hash < y->comm_hash ? -1 : 1;
	return (x->rank > y->rank) - (x->rank < y->rank);
}

int api_collectives(struct server *srv, const struct request *r, FILE *out)
{
	struct coll_ctx c = { 0 };
	struct store_filter f;
	char ferr[128];
	int truncated = 0, err;

	if (request__filter(r, "", &f, ferr, sizeof(ferr)))
		return json_error(out, 400, "%s", ferr);
	err = srv->store->ops->events(srv->store, &f, STORE_EVENT_COLLECTIVE, limit_arg(r),
				      &truncated, coll_row, &c);
	if (err) {
		err = json_store_error(out, err);
		goto out;
	}
	/* Blame the last arrival of every collective all ranks were seen in. */
	for (uint32_t i = 0; i < c.nseqs; i++) {
		struct seq_agg *s = &c.seqs[i];

		if (s->nseen < 2)
			continue;
		c.ranks[s->last_rank_idx].last_arrivals++;
		c.ranks[s->last_rank_idx].wait_caused_ns += s->last_entry - s->first_entry;
	}
	if (c.nranks)
		qsort(c.ranks, c.nranks, sizeof(*c.ranks), rank_cmp);
	fputs("{\"communicators\":[", out);
	for (uint32_t i = 0; i < c.nranks; i++) {
		const struct rank_agg *a = &c.ranks[i];
		int first = i == 0 || c.ranks[i - 1].comm_hash != a->comm_hash;

		if (first)
			fprintf(out,
				"%s{\"comm_hash\":\"%016" PRIx64 "\",\"nranks\":%d,\"ranks\":[",
				i ? "]}," : "", a->comm_hash, a->nranks);
		else
			fputc(',', out);
		fprintf(out, "{\"rank\":%d,\"node\":", a->rank);
		json_str(out, a->node);
		fprintf(out,
			",\"pid\":%u,\"collectives\":%" PRIu64 ",\"bytes\":%" PRIu64
			",\"total_ns\":%" PRIu64 ",\"max_ns\":%" PRIu64
			",\"last_arrivals\":%" PRIu64 ",\"wait_caused_ns\":%" PRIu64 "}",
			a->pid, a->count, a->bytes, a->total_ns, a->max_ns, a->last_arrivals,
			a->wait_caused_ns);
	}
	fprintf(out, "%s],\"truncated\":%s}\n", c.nranks ? "]}" : "", truncated ? "true" : "false");
	err = 200;
out:
	free(c.ranks);
	free(c.seqs);
	profile_htab__fini(&c.rank_ids);
	profile_htab__fini(&c.seq_ids);
	return err;
}

/* ---- Perfetto / Chrome trace (server/trace_json.h) ------------------------------------ */

int api_trace(struct server *srv, const struct request *r, FILE *out)
{
	struct trace_json t;
	struct store_filter f;
	char ferr[128];
	int truncated = 0, err;

	if (request__filter(r, "", &f, ferr, sizeof(ferr)))
		return json_error(out, 400, "%s", ferr);
	trace_json__begin(&t, out, 0);
	err = srv->store->ops->events(
		srv->store, &f, STORE_EVENT_COLLECTIVE | STORE_EVENT_TRANSFER | STORE_EVENT_LAUNCH,
		limit_arg(r), &truncated, trace_json__event, &t);
	if (err) {
		trace_json__fini(&t);
		rewind(out);
		return json_store_error(out, err);
	}
	trace_json__end(&t, truncated, "");
	return 200;
}
