// SPDX-License-Identifier: Apache-2.0
/*
 * Server-rendered HTML: an index of jobs and one page per job (flame graph
 * inline, ranks, outstanding GPU memory).  Everything is in the page: no
 * scripts, fonts or styles from elsewhere, so it works offline and behind
 * any proxy.
 */
#include <inttypes.h>
#include <stdint.h>
#include <string.h>

#include "lib/profile.h"
#include "lib/xml_str.h"
#include "server/server.h"

void page_html(FILE *o, const char *s)
{
	xml_write_text(o, s, SIZE_MAX); /* valid UTF-8, no control characters */
}

#define html page_html

static void head(FILE *o, const char *title)
{
	fputs("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>", o);
	html(o, title);
	fputs("</title><style>body{font-family:sans-serif;margin:1em 2em}"
	      "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 8px;"
	      "text-align:left}th{background:#eee}.svg{overflow-x:auto}</style></head><body>",
	      o);
}

struct page_ctx {
	FILE *out;
};

static int job_row(void *ctx, const struct store_job *j)
{
	struct page_ctx *p = ctx;

	fputs("<tr><td><a href=\"/jobs/", p->out);
	html(p->out, j->job); /* job ids are URL-safe in practice; escaped for HTML */
	fputs("\">", p->out); /* no credential in links: browsers send the cookie */
	html(p->out, j->job);
	fprintf(p->out, "</a></td><td>%u</td><td>%u</td><td>%u</td><td>%" PRIu64 "</td></tr>",
		j->nodes, j->processes, j->ranks, j->cpu_samples);
	return 0;
}

int page_index(struct server *srv, const struct request *r, FILE *out)
{
	struct page_ctx p = { out };
	struct store_filter f = { 0 };

	head(out, "strata");
	fputs("<h1>strata: jobs</h1><table><tr><th>job</th><th>nodes</th><th>processes</th>"
	      "<th>ranks</th><th>CPU samples</th></tr>",
	      out);
	srv->store->ops->jobs(srv->store, &f, job_row, &p);
	fputs("</table></body></html>\n", out);
	return 200;
}

static int rank_row(void *ctx, const struct store_process *pr)
{
	FILE *o = ((struct page_ctx *)ctx)->out;

	fputs("<tr><td>", o);
	if (pr->has_rank)
		fprintf(o, "%d", pr->rank);
	fputs("</td><td>", o);
	html(o, pr->node);
	fprintf(o, "</td><td>%u</td><td>", pr->pid);
	html(o, pr->comm);
	fputs("</td><td>", o);
	html(o, pr->container);
	fprintf(o, "</td><td>%" PRIu64 "</td></tr>", pr->cpu_samples);
	return 0;
}

static int leak_row(void *ctx, const struct store_leak *l)
{
	FILE *o = ((struct page_ctx *)ctx)->out;
	char buf[512];

	fprintf(o, "<tr><td>%" PRIu64 "</td><td>%" PRIu64 "</td><td>", l->bytes, l->allocations);
	if (l->has_rank)
		fprintf(o, "%d", l->rank);
	fputs("</td><td><code>", o);
	/* Leaf first reads best in a table. */
	for (uint32_t i = l->stack->nframes; i-- > 0;) {
		const struct store_frame *sf = &l->stack->frames[i];
		struct profile_frame f = { .func = sf->func,
					   .module = sf->module ? sf->module : "[unknown]",
					   .addr = sf->addr,
					   .flags = sf->flags };

		html(o, profile__frame_name(&f, buf, sizeof(buf)));
		if (i)
			fputs("<br>", o);
	}
	fputs("</code></td></tr>", o);
	return 0;
}

int page_job(struct server *srv, const struct request *r, const char *job, FILE *out)
{
	struct page_ctx p = { out };
	struct store_filter f = { .job = job };
	struct profile *prof;
	char ferr[128];

	if (request__filter(r, "", &f, ferr, sizeof(ferr)))
		return json_error(out, 400, "%s", ferr);
	f.job = job;
	head(out, job);
	fputs("<h1>job ", out);
	html(out, job);
	fputs("</h1><h2>CPU flame graph</h2><div class=\"svg\">", out);
	if (!server__load_profile(srv, &f, STORE_PROFILE_CPU, &prof)) {
		/* Frames under 0.5 px are left out: a page, not an archive. */
		struct profile_svg_opts so = { .sz = sizeof(so), .min_width_px = 0.5 };

		if (profile__total(prof))
			profile__write_svg_opts(prof, out, job, &so);
		else
			fputs("<p>no CPU samples</p>", out);
		profile__free(prof);
	}
	fputs("</div><h2>Ranks</h2><table><tr><th>rank</th><th>node</th><th>pid</th><th>comm</th>"
	      "<th>container</th><th>CPU samples</th></tr>",
	      out);
	srv->store->ops->processes(srv->store, &f, rank_row, &p);
	fputs("</table><h2>Outstanding GPU memory by stack</h2><table><tr><th>bytes</th>"
	      "<th>allocations</th><th>rank</th><th>stack (leaf first)</th></tr>",
	      out);
	srv->store->ops->leaks(srv->store, &f, leak_row, &p);
	fputs("</table>", out);
	page_hangs(srv, job, out); /* server/api_hangs.c */
	if (srv->diag)		   /* stragglers, findings, breakdown, leaks (server/api_diag.c) */
		page_diagnosis(srv, job, out);
	page_collective_stats(srv, job, out); /* server/api_collstats.c */
	page_captures(srv, job, out);	      /* server/api_captures.c */
	fputs("</body></html>\n", out);
	return 200;
}
