// SPDX-License-Identifier: Apache-2.0
/*
 * Collective health per communicator: GET /api/v1/collective_stats and the
 * job page's table, over the stored windows (server/diag_collstats.c
 * writes them; diagnose/collstats.h defines every number).  Rows come
 * largest aggregated stall first.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose/collstats.h"
#include "lib/clock.h"
#include "server/diag_engine.h"
#include "server/server.h"

#define PAGE_ROWS 20

static void rates_of(const struct store_collstat *c, struct collstat_rates *rt)
{
	struct collstat_row r = { .comm_hash = c->comm_hash,
				  .size_class = c->size_class,
				  .nranks = c->nranks,
				  .occurrences = c->occurrences,
				  .observed_ns = c->observed_ns,
				  .stall_ns = c->stall_ns,
				  .slack_ns = c->slack_ns,
				  .bytes = c->bytes,
				  .observed_max_ns = c->observed_max_ns };

	snprintf(r.op, sizeof(r.op), "%s", c->op);
	collstat_rates(&r, rt);
}

struct json_ctx {
	FILE *out;
	size_t n;
};

static int json_row(void *ctx, const struct store_collstat *c)
{
	struct json_ctx *j = ctx;
	struct collstat_rates rt;

	rates_of(c, &rt);
	fputs(j->n++ ? ",{\"job\":" : "{\"job\":", j->out);
	json_str(j->out, c->job);
	fprintf(j->out, ",\"communicator\":\"%016" PRIx64 "\",\"op\":", c->comm_hash);
	json_str(j->out, c->op);
	fprintf(j->out,
		",\"size_class\":%" PRIu64 ",\"nranks\":%d,\"windows\":%" PRIu64
		",\"occurrences\":%" PRIu64 ",\"observed_seconds\":%.9f"
		",\"observed_max_seconds\":%.9f,\"stall_seconds\":%.9f"
		",\"total_stall_seconds\":%.9f,\"slack_seconds\":%.9f,\"bytes\":%.1f"
		",\"total_bytes\":%" PRIu64 ",\"required_bandwidth\":%.1f"
		",\"algo_bandwidth\":%.1f,\"bus_bandwidth\":%.1f,\"bus_factor\":%.6f"
		",\"from\":%.3f,\"to\":%.3f}",
		c->size_class, c->nranks, c->windows, c->occurrences, rt.observed_s,
		c->observed_max_ns / 1e9, rt.stall_s, rt.total_stall_s, rt.slack_s, rt.bytes,
		c->bytes, rt.required_bps, rt.algo_bps, rt.bus_bps, rt.bus_factor,
		c->first_ns / 1e9, c->last_ns / 1e9);
	return 0;
}

int api_collective_stats(struct server *srv, const struct request *r, FILE *out)
{
	struct json_ctx j = { 0 };
	struct store_filter f;
	char ferr[128], *body = NULL;
	size_t len = 0;
	int err;

	if (request__filter(r, "", &f, ferr, sizeof(ferr)))
		return json_error(out, 400, "%s", ferr);
	if (srv->diag) /* the windows judged up to the data */
		diag_engine__run(srv->diag, realtime_ns());
	j.out = open_memstream(&body, &len); /* a failed query answers 503, not half a list */
	if (!j.out)
		return json_error(out, 500, "out of memory");
	err = srv->store->ops->collective_stats(srv->store, &f, json_row, &j);
	fclose(j.out);
	if (err < 0) {
		free(body);
		return json_store_error(out, err);
	}
	fprintf(out, "[%s]\n", body ? body : "");
	free(body);
	return 200;
}

static const char *human_bytes(double b, char *buf, size_t size)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	int u = 0;

	while (b >= 1024 && u < 4) {
		b /= 1024;
		u++;
	}
	snprintf(buf, size, "%.4g %s", b, unit[u]);
	return buf;
}

static int page_row(void *ctx, const struct store_collstat *c)
{
	struct json_ctx *p = ctx;
	struct collstat_rates rt;
	char b1[32], b2[32];

	if (p->n++ >= PAGE_ROWS)
		return 0;
	rates_of(c, &rt);
	fprintf(p->out, "<tr><td>%016" PRIx64 "</td><td>", c->comm_hash);
	page_html(p->out, c->op);
	fprintf(p->out,
		"</td><td>%s</td><td>%d</td><td>%" PRIu64 "</td><td>%.3f</td><td>%.3f</td>"
		"<td>%.3f</td><td>%.3f</td><td>%s</td><td>%.3f</td><td>%.3f</td><td>%.3f</td>"
		"</tr>",
		human_bytes((double)c->size_class, b1, sizeof(b1)), c->nranks, c->occurrences,
		rt.observed_s * 1e3, rt.stall_s * 1e3, rt.total_stall_s, rt.slack_s * 1e3,
		human_bytes(rt.bytes, b2, sizeof(b2)), rt.required_bps / 1e9, rt.algo_bps / 1e9,
		rt.bus_bps / 1e9);
	return 0;
}

void page_collective_stats(struct server *srv, const char *job, FILE *out)
{
	struct store_filter f = { .job = job };
	struct json_ctx p = { .out = out };

	fputs("<h2>Collectives (by aggregated stall)</h2><table><tr><th>communicator</th>"
	      "<th>op</th><th>size class</th><th>ranks</th><th>occurrences</th>"
	      "<th>observed ms</th><th>stall ms</th><th>total stall s</th><th>slack ms</th>"
	      "<th>bytes</th><th>required GB/s</th><th>algo GB/s</th><th>bus GB/s</th></tr>",
	      out);
	srv->store->ops->collective_stats(srv->store, &f, page_row, &p);
	fputs("</table>", out);
	if (!p.n)
		fputs("<p>no collective judged yet</p>", out);
	else if (p.n > PAGE_ROWS)
		fprintf(out, "<p>%zu more in <code>/api/v1/collective_stats?job=...</code></p>",
			p.n - PAGE_ROWS);
}
