// SPDX-License-Identifier: Apache-2.0
/*
 * NCCL hangs: GET /api/v1/hangs and the job page's section.  Now: the
 * hang detectors' ongoing hangs and recent mismatches (server/diag_live.c),
 * each missing rank with its state and current CPU stack from the store.
 * A past range (from/to): the stored records (server/diag_hang.c), one per
 * episode, the latest record of each (its end when it ended).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/diag_hang.h"
#include "server/diag_live.h"
#include "server/server.h"

#define MAX_HANGS 64
#define MAX_EPISODES 4096

struct episode {
	char job[DIAG_NAME_LEN], kind[16];
	uint64_t comm_hash, seq, until_ns;
	char *report;
};

struct past {
	struct episode *e;
	size_t n;
	int truncated;
};

/* The latest record of each (job, kind, communicator, seq): the ended one
 * if the episode ended. */
static int on_hang(void *ctx, const struct store_hang *h)
{
	struct past *p = ctx;
	struct episode *e = NULL;

	for (size_t i = 0; i < p->n && !e; i++)
		if (p->e[i].comm_hash == h->comm_hash && p->e[i].seq == h->seq &&
		    !strcmp(p->e[i].job, h->job) && !strcmp(p->e[i].kind, h->kind))
			e = &p->e[i];
	if (!e) {
		if (p->n == MAX_EPISODES) {
			p->truncated = 1;
			return 0;
		}
		e = &p->e[p->n++];
		memset(e, 0, sizeof(*e));
		snprintf(e->job, sizeof(e->job), "%s", h->job);
		snprintf(e->kind, sizeof(e->kind), "%s", h->kind);
		e->comm_hash = h->comm_hash;
		e->seq = h->seq;
	} else if (e->until_ns && !h->until_ns) {
		return 0; /* its end is known */
	}
	free(e->report);
	e->report = strdup(h->report);
	e->until_ns = h->until_ns;
	return e->report ? 0 : -ENOMEM;
}

static int past_hangs(struct server *srv, const struct store_filter *f, FILE *out)
{
	struct past p = { .e = calloc(MAX_EPISODES, sizeof(*p.e)) };
	int err;

	if (!p.e)
		return json_error(out, 500, "out of memory");
	err = srv->store->ops->hangs(srv->store, f, on_hang, &p);
	if (err < 0) {
		for (size_t i = 0; i < p.n; i++)
			free(p.e[i].report);
		free(p.e);
		return json_store_error(out, err);
	}
	fputc('[', out);
	for (size_t i = 0; i < p.n; i++) {
		fprintf(out, "%s%s", i ? "," : "", p.e[i].report);
		free(p.e[i].report);
	}
	fputs("]\n", out);
	free(p.e);
	return 200;
}

int api_hangs(struct server *srv, const struct request *r, FILE *out)
{
	struct store_filter f;
	struct hang_report *h;
	char ferr[128];
	size_t n;

	if (request__filter(r, "", &f, ferr, sizeof(ferr)))
		return json_error(out, 400, "%s", ferr);
	if (f.from_ns || f.to_ns)
		return past_hangs(srv, &f, out);
	if (!srv->live)
		return json_error(out, 503, "diagnosis is off");
	h = calloc(MAX_HANGS, sizeof(*h));
	if (!h)
		return json_error(out, 500, "out of memory");
	n = diag_live__hangs(srv->live, f.job && f.job[0] ? f.job : NULL, h, MAX_HANGS);
	fputc('[', out);
	for (size_t i = 0; i < n && i < MAX_HANGS; i++) {
		if (i)
			fputc(',', out);
		diag_hang__json(out, srv->store, &h[i]);
	}
	fputs("]\n", out);
	free(h);
	return 200;
}

static void rank_list(FILE *out, const struct hang_rank *r, uint32_t n)
{
	for (uint32_t i = 0; i < n && i < HANG_MAX_LISTED; i++)
		fprintf(out, "%s%d", i ? ", " : "", r[i].rank);
	if (n > HANG_MAX_LISTED)
		fprintf(out, " and %u more", n - HANG_MAX_LISTED);
}

void page_hangs(struct server *srv, const char *job, FILE *out)
{
	struct hang_report *h = calloc(MAX_HANGS, sizeof(*h));
	size_t n = h && srv->live ? diag_live__hangs(srv->live, job, h, MAX_HANGS) : 0;

	fputs("<h2>NCCL hangs</h2>", out);
	if (!n)
		fputs("<p>none: no rank waits in a collective its peers did not enter</p>", out);
	for (size_t i = 0; i < n && i < MAX_HANGS; i++) {
		const struct hang_report *r = &h[i];

		fprintf(out, "<h3>%s: ", diag_hang__kind(r->kind));
		page_html(out, r->op); /* the agent's string */
		fprintf(out, " #%" PRIu64 " of communicator %016" PRIx64 "</h3><p>", r->seq,
			r->comm_hash);
		if (r->kind == HANG_MISMATCH) {
			fputs("ranks that called something else: ", out);
			rank_list(out, r->mismatched, r->nmismatched);
		} else {
			fprintf(out, "%u of %d ranks wait since %.3f (threshold %.1f s); missing: ",
				r->nwaiting, r->nranks, r->since_ns / 1e9, r->threshold_s);
			rank_list(out, r->missing, r->nmissing);
		}
		fputs("</p><pre>", out);
		{
			char *json = NULL;
			size_t len = 0;
			FILE *f = open_memstream(&json, &len);

			if (f) {
				diag_hang__json(f, srv->store, r);
				fclose(f);
				page_html(out, json ? json : "");
			}
			free(json);
		}
		fputs("</pre>", out);
	}
	free(h);
}
