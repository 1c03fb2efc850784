// SPDX-License-Identifier: Apache-2.0
/*
 * Diagnosis endpoints and the job page's diagnosis
 * section, over server/diag_live.c (stragglers: decided at ingest; past
 * ranges judged again from the store), server/diag_engine.c (breakdown,
 * leaks: judged per window) and server/diag_inputs.c (findings: computed on request over
 * the last judged windows, or from/to).  Every answer first brings the
 * engine up to date, so a query never reads older state than the data.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose/breakdown.h"
#include "lib/clock.h"
#include "lib/enum_names.h"
#include "server/diag_engine.h"
#include "server/diag_inputs.h"
#include "server/diag_live.h"
#include "server/server.h"

#define MAX_LIST 4096
#define MAX_FINDINGS 32
#define FINDINGS_WINDOWS 3			     /* the recent past a finding describes */
#define MAX_RANGE_NS (7 * 24 * 3600 * 1000000000ULL) /* straggler replays */

static int need_engine(struct server *srv, FILE *out)
{
	if (!srv->diag)
		return json_error(out, 503, "diagnosis is off");
	diag_engine__run(srv->diag, realtime_ns());
	return 0;
}

static const char *state_name(uint32_t state)
{
	return state == STRAGGLER_CONFIRMED ? "confirmed"
	       : state == STRAGGLER_SUSPECT ? "suspect"
					    : "ok";
}

static void straggler_json(FILE *out, const struct straggler_rank *r, int first)
{
	fputs(first ? "{\"job\":" : ",{\"job\":", out);
	json_str(out, r->job);
	fprintf(out, ",\"communicator\":\"%016" PRIx64 "\",\"rank\":%u,\"nranks\":%u,\"node\":",
		r->communicator, r->rank, r->nranks);
	json_str(out, r->node);
	fprintf(out,
		",\"pid\":%u,\"lag_seconds\":%.6f,\"score\":%.4f,\"since\":%.3f,"
		"\"decided_at\":%.3f,\"evidence\":%.3f,\"collectives\":%" PRIu64
		",\"state\":\"%s\",\"last_fraction\":%.3f,\"period_seconds\":%.6f",
		r->pid, r->lag_seconds, r->score, r->since_ns / 1e9, r->decided_ns / 1e9,
		r->evidence, r->collectives, state_name(r->state), r->last_fraction,
		r->period_seconds);
}

/* from/to: every straggler episode of the range, judged again from the
 * store by the same rule (a post-mortem of a job that ended). */
static int stragglers_range(struct server *srv, const struct request *r, const char *job, FILE *out)
{
	struct store_filter f = { 0 };
	struct diag_episode *ep;
	char err[256];
	int n, truncated = 0;

	if (request__filter(r, "", &f, err, sizeof(err)))
		return json_error(out, 400, "%s", err);
	if (!f.to_ns)
		f.to_ns = realtime_ns();
	if (f.from_ns >= f.to_ns || f.to_ns - f.from_ns > MAX_RANGE_NS)
		return json_error(out, 400, "want from < to, at most 7 days apart");
	ep = calloc(MAX_LIST, sizeof(*ep));
	if (!ep)
		return json_error(out, 500, "out of memory");
	n = diag_live__replay(srv->store, job, f.from_ns, f.to_ns, NULL, ep, MAX_LIST, &truncated);
	if (n < 0) {
		free(ep);
		return n == -ETIMEDOUT ? json_store_error(out, n)
				       : json_error(out, 503, "stragglers: %s", strerror(-n));
	}
	fputc('[', out);
	for (int i = 0; i < n && i < MAX_LIST; i++) {
		straggler_json(out, &ep[i].r, !i);
		if (ep[i].until_ns)
			fprintf(out, ",\"until\":%.3f,\"missing\":%s", ep[i].until_ns / 1e9,
				ep[i].missing ? "true" : "false");
		else
			fputs(",\"until\":null", out);
		fprintf(out, ",\"truncated\":%s}", truncated ? "true" : "false");
	}
	fputs("]\n", out);
	free(ep);
	return 200;
}

int api_stragglers(struct server *srv, const struct request *r, FILE *out)
{
	const char *job = request__arg(r, "job"), *all = request__arg(r, "all");
	struct straggler_rank *v;
	size_t n;

	if (!srv->live)
		return json_error(out, 503, "diagnosis is off");
	if (job && !job[0])
		job = NULL;
	if (request__arg(r, "from") || request__arg(r, "to"))
		return stragglers_range(srv, r, job, out);
	v = calloc(MAX_LIST, sizeof(*v));
	if (!v)
		return json_error(out, 500, "out of memory");
	n = diag_live__stragglers(srv->live, job, !(all && *all == '1'), v, MAX_LIST);
	fputc('[', out);
	for (size_t i = 0; i < n && i < MAX_LIST; i++) {
		straggler_json(out, &v[i], !i);
		fputc('}', out);
	}
	fputs("]\n", out);
	free(v);
	return 200;
}

/* The findings range: from/to when given, else the last judged windows. */
static int findings_range(struct server *srv, const struct request *r, const char *job,
			  uint64_t *from, uint64_t *to, char *err, size_t errsz)
{
	struct store_filter f = { 0 };
	uint64_t W = diag_engine__window_ns(srv->diag);

	if (request__filter(r, "", &f, err, errsz))
		return -EINVAL;
	*to = f.to_ns ? f.to_ns : diag_engine__judged_until(srv->diag, job);
	*from = f.from_ns ? f.from_ns
			  : (*to > FINDINGS_WINDOWS * W ? *to - FINDINGS_WINDOWS * W : 0);
	if (!*to || *from >= *to) {
		snprintf(err, errsz, "no judged window for job %s yet (or from >= to)", job);
		return -ENOENT;
	}
	return 0;
}

static void finding_json(FILE *out, const struct diag_finding *f, int first)
{
	fputs(first ? "{\"layer\":" : ",{\"layer\":", out);
	json_str(out, diag_layer_name(f->layer));
	fputs(",\"metric\":", out);
	json_str(out, f->metric);
	fprintf(out, ",\"value\":%.6g,\"peer_median\":%.6g,\"score\":%.2f,\"evidence\":[", f->value,
		f->peer_median, f->score);
	for (uint32_t k = 0; k < f->n_evidence; k++) {
		if (k)
			fputc(',', out);
		json_str(out, f->evidence[k]);
	}
	fputs("]}", out);
}

int api_findings(struct server *srv, const struct request *r, FILE *out)
{
	const char *job = request__arg(r, "job"), *rk = request__arg(r, "rank");
	struct diag_finding f[MAX_FINDINGS];
	char err[256], *end = NULL;
	uint64_t from, to;
	long rank;
	int n, st = need_engine(srv, out);

	if (st)
		return st;
	if (!job || !job[0] || !rk)
		return json_error(out, 400, "job and rank are required");
	rank = strtol(rk, &end, 10);
	if (!*rk || *end || rank < 0 || rank > INT32_MAX)
		return json_error(out, 400, "bad rank: %s", rk);
	n = findings_range(srv, r, job, &from, &to, err, sizeof(err));
	if (n)
		return json_error(out, n == -EINVAL ? 400 : 404, "%s", err);
	n = diag_findings(srv->store, job, (int32_t)rank, from, to, f, MAX_FINDINGS);
	if (n == -ENOENT)
		return json_error(out, 404, "rank %ld of job %s or its peers have no data", rank,
				  job);
	if (n < 0)
		return n == -ETIMEDOUT ? json_store_error(out, n)
				       : json_error(out, 503, "findings: %s", strerror(-n));
	fputc('[', out);
	for (int i = 0; i < n; i++)
		finding_json(out, &f[i], !i);
	fputs("]\n", out);
	return 200;
}

int api_breakdown(struct server *srv, const struct request *r, FILE *out)
{
	const char *job = request__arg(r, "job");
	struct diag_rank_time *v;
	size_t n;
	int st = need_engine(srv, out);

	if (st)
		return st;
	if (!job || !job[0])
		return json_error(out, 400, "job is required");
	v = calloc(MAX_LIST, sizeof(*v));
	if (!v)
		return json_error(out, 500, "out of memory");
	n = diag_engine__breakdown(srv->diag, job, v, MAX_LIST);
	fputc('[', out);
	for (size_t i = 0; i < n && i < MAX_LIST; i++) {
		uint64_t wall = 0;

		fprintf(out, "%s{\"rank\":%d,\"node\":", i ? "," : "", v[i].rank);
		json_str(out, v[i].node);
		fprintf(out, ",\"pid\":%u,\"tid\":%u,\"seconds\":{", v[i].pid, v[i].tid);
		for (uint32_t c = 0; c < STRATA_TIME_MAX; c++) {
			fprintf(out, "%s\"%s\":%.6f", c ? "," : "", strata_time_cat_name(c),
				v[i].ns[c] / 1e9);
			wall += v[i].ns[c];
		}
		fprintf(out, "},\"wall_seconds\":%.6f}", wall / 1e9);
	}
	fputs("]\n", out);
	free(v);
	return 200;
}

int api_leak_reports(struct server *srv, const struct request *r, FILE *out)
{
	const char *job = request__arg(r, "job");
	struct diag_leak_report *v;
	size_t n;
	int st = need_engine(srv, out);

	if (st)
		return st;
	v = calloc(MAX_LIST, sizeof(*v));
	if (!v)
		return json_error(out, 500, "out of memory");
	n = diag_engine__leaks(srv->diag, job && job[0] ? job : NULL, v, MAX_LIST);
	fputc('[', out);
	for (size_t i = 0; i < n && i < MAX_LIST; i++) {
		const struct diag_leak *l = &v[i].l;

		fputs(i ? ",{\"node\":" : "{\"node\":", out);
		json_str(out, v[i].node);
		fprintf(out,
			",\"pid\":%u,\"rank\":%d,\"level\":\"%s\",\"stack_id\":\"%016" PRIx64
			"\",\"stack\":",
			l->pid, v[i].rank, l->level ? "framework" : "driver", l->stack_id);
		json_str(out, l->stack);
		fprintf(out,
			",\"growth_bytes_per_second\":%.1f,\"outstanding_bytes\":%" PRIu64
			",\"age_seconds\":%.1f,\"tau\":%.3f,\"windows\":%u}",
			l->growth_bytes_per_s, l->outstanding_bytes, l->age_seconds, l->tau,
			l->windows);
	}
	fputs("]\n", out);
	free(v);
	return 200;
}

/* ---- job page ------------------------------------------------------------------ */

static void page_findings(struct server *srv, const char *job, int32_t rank, FILE *out)
{
	struct diag_finding f[8];
	uint64_t W = diag_engine__window_ns(srv->diag);
	uint64_t to = diag_engine__judged_until(srv->diag, job);
	int n = to > FINDINGS_WINDOWS * W
			? diag_findings(srv->store, job, rank, to - FINDINGS_WINDOWS * W, to, f, 8)
			: -ENOENT;

	if (n <= 0) {
		fputs("<p>no finding (the rank looks like its peers)</p>", out);
		return;
	}
	fputs("<table><tr><th>layer</th><th>metric</th><th>rank</th><th>peer median</th>"
	      "<th>score</th><th>evidence</th></tr>",
	      out);
	for (int i = 0; i < n; i++) {
		fputs("<tr><td>", out);
		page_html(out, diag_layer_name(f[i].layer));
		fputs("</td><td>", out);
		page_html(out, f[i].metric);
		fprintf(out, "</td><td>%.4g</td><td>%.4g</td><td>%.1f</td><td><code>", f[i].value,
			f[i].peer_median, f[i].score);
		for (uint32_t k = 0; k < f[i].n_evidence; k++) {
			page_html(out, f[i].evidence[k]);
			fputs("<br>", out);
		}
		fputs("</code></td></tr>", out);
	}
	fputs("</table>", out);
}

void page_diagnosis(struct server *srv, const char *job, FILE *out)
{
	struct straggler_rank s[64];
	struct diag_rank_time *t = calloc(MAX_LIST, sizeof(*t));
	struct diag_leak_report l[32];
	size_t n;

	diag_engine__run(srv->diag, realtime_ns());
	fputs("<h2>Stragglers</h2>", out);
	n = srv->live ? diag_live__stragglers(srv->live, job, 0, s, 64) : 0;
	if (!n || s[0].state == STRAGGLER_OK)
		fputs("<p>none: every rank arrives with its peers</p>", out);
	for (size_t i = 0; i < n && i < 64 && s[i].state != STRAGGLER_OK; i++) {
		fprintf(out, "<h3>rank %u (%s) on ", s[i].rank,
			s[i].state == STRAGGLER_CONFIRMED ? "confirmed" : "suspect");
		page_html(out, s[i].node);
		fprintf(out,
			" pid %u</h3><p>communicator %016" PRIx64
			": %.1f ms late (score %.3f of the %.1f ms collective period), last in "
			"%.0f%%"
			" of its collectives</p>",
			s[i].pid, s[i].communicator, s[i].lag_seconds * 1e3, s[i].score,
			s[i].period_seconds * 1e3, s[i].last_fraction * 100);
		page_findings(srv, job, (int32_t)s[i].rank, out);
	}
	fputs("<h2>Time breakdown (main thread, seconds)</h2><table><tr><th>rank</th><th>node</th>",
	      out);
	for (uint32_t c = 0; c < STRATA_TIME_MAX; c++)
		fprintf(out, "<th>%s</th>", strata_time_cat_name(c));
	fputs("</tr>", out);
	n = t ? diag_engine__breakdown(srv->diag, job, t, MAX_LIST) : 0;
	for (size_t i = 0; i < n && i < MAX_LIST; i++) {
		fprintf(out, "<tr><td>%d</td><td>", t[i].rank);
		page_html(out, t[i].node);
		fputs("</td>", out);
		for (uint32_t c = 0; c < STRATA_TIME_MAX; c++)
			fprintf(out, "<td>%.2f</td>", t[i].ns[c] / 1e9);
		fputs("</tr>", out);
	}
	fputs("</table><h2>GPU memory leaks</h2>", out);
	n = diag_engine__leaks(srv->diag, job, l, 32);
	if (!n)
		fputs("<p>no allocation stack keeps growing</p>", out);
	else
		fputs("<table><tr><th>rank</th><th>node</th><th>pid</th><th>growth MiB/s</th>"
		      "<th>outstanding MiB</th><th>age s</th><th>stack</th></tr>",
		      out);
	for (size_t i = 0; i < n && i < 32; i++) {
		fprintf(out, "<tr><td>%d</td><td>", l[i].rank);
		page_html(out, l[i].node);
		fprintf(out, "</td><td>%u</td><td>%.2f</td><td>%.1f</td><td>%.0f</td><td><code>",
			l[i].l.pid, l[i].l.growth_bytes_per_s / 1048576.0,
			l[i].l.outstanding_bytes / 1048576.0, l[i].l.age_seconds);
		page_html(out, l[i].l.stack);
		fputs("</code></td></tr>", out);
	}
	if (n)
		fputs("</table>", out);
	free(t);
}
