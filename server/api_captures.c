// SPDX-License-Identifier: Apache-2.0
/*
 * Deep captures over HTTP (server/capture.h, docs/diagnosis.md "Deep
 * capture"):
 *   POST /api/v1/captures?job=J&node=N&pids=P,P&duration_s=S&freq=HZ
 *        &offcpu=0|1&gpu_calls=0|1&start_in_s=S      starts one
 *   GET  /api/v1/captures[?job=J]                     lists them
 *   GET  /api/v1/captures/ID                          one, with each agent's run
 *   GET  /api/v1/captures/ID/trace                    its Perfetto trace
 *   POST /api/v1/captures/ID/cancel                   ends it now
 * and the job page's list.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/json_str.h"
#include "server/capture.h"
#include "server/server.h"
#include "server/trace_json.h"

#define LIST_MAX 64
#define DURATION_DEFAULT_S 10
#define FREQ_DEFAULT 199
#define TRACE_EVENTS_MAX 1000000
#define MS 1000000ULL

static int flag_arg(const struct request *r, const char *key, bool def, bool *out)
{
	const char *v = request__arg(r, key);

	if (!v || !v[0]) {
		*out = def;
		return 0;
	}
	if (strcmp(v, "0") && strcmp(v, "1"))
		return -EINVAL;
	*out = v[0] == '1';
	return 0;
}

static int u64_arg(const struct request *r, const char *key, uint64_t def, uint64_t max,
		   uint64_t *out)
{
	const char *v = request__arg(r, key);

	*out = def;
	if (!v || !v[0])
		return 0;
	if (request__parse_u64(v, out) || *out > max)
		return -EINVAL;
	return 0;
}

/* pids=1,2,3 on node (or every node): the targets. */
static int targets_arg(const struct request *r, struct capture_spec *s)
{
	const char *node = request__arg(r, "node"), *pids = request__arg(r, "pids");

	if (node && strlen(node) >= CAPTURE_NAME_LEN)
		return -EINVAL;
	if (!pids || !pids[0]) {
		if (node && node[0]) {
			snprintf(s->targets[0].node, sizeof(s->targets[0].node), "%s", node);
			s->ntargets = 1;
		}
		return 0;
	}
	while (*pids) {
		char *e;
		unsigned long pid = strtoul(pids, &e, 10);

		if (e == pids || !pid || pid > UINT32_MAX || s->ntargets == CAPTURE_MAX_TARGETS ||
		    (*e && *e != ','))
			return -EINVAL;
		snprintf(s->targets[s->ntargets].node, sizeof(s->targets[0].node), "%s",
			 node ? node : "");
		s->targets[s->ntargets++].pid = (uint32_t)pid;
		pids = *e ? e + 1 : e;
	}
	return 0;
}

int api_captures_post(struct server *srv, const struct request *r, FILE *out)
{
	struct capture_spec *s;
	struct capture c;
	const char *job = request__arg(r, "job");
	uint64_t dur, freq, lead, now = realtime_ns();
	char err[256];
	int ret;

	if (!srv->captures)
		return json_error(out, 503, "captures are off");
	s = calloc(1, sizeof(*s));
	if (!s)
		return json_error(out, 503, "out of memory");
	if ((job && strlen(job) >= sizeof(s->job)) || targets_arg(r, s) ||
	    u64_arg(r, "duration_s", DURATION_DEFAULT_S, 86400, &dur) || !dur ||
	    u64_arg(r, "freq", FREQ_DEFAULT, 100000, &freq) ||
	    u64_arg(r, "start_in_s", srv->capture_lead_ms / 1000, 3600, &lead) ||
	    flag_arg(r, "offcpu", true, &s->offcpu) ||
	    flag_arg(r, "gpu_calls", true, &s->gpu_calls)) {
		free(s);
		return json_error(out, 400,
				  "want job and/or node[, pids=P,P], duration_s (1..), freq (Hz), "
				  "offcpu and gpu_calls (0 or 1), start_in_s");
	}
	snprintf(s->job, sizeof(s->job), "%s", job ? job : "");
	snprintf(s->trigger, sizeof(s->trigger), "api");
	snprintf(s->reason, sizeof(s->reason), "asked for through the API");
	s->freq_hz = (uint32_t)freq;
	/* start_in_s given: exactly then; default: the server's lead, so that
	 * every agent has heard of it (one batch period) before it starts */
	s->start_ns = now + (request__arg(r, "start_in_s") ? lead * 1000 * MS
							   : (uint64_t)srv->capture_lead_ms * MS);
	s->end_ns = s->start_ns + dur * 1000 * MS;
	ret = capture_registry__add(srv->captures, s, now, &c, err, sizeof(err));
	free(s);
	if (ret == -EINVAL)
		return json_error(out, 400, "%s", err);
	if (ret == -EBUSY)
		return json_error(out, 429, "%s", err);
	capture__json(out, &c, now); /* kept even when the store failed */
	fputc('\n', out);
	return 201;
}

int api_captures(struct server *srv, const struct request *r, FILE *out)
{
	struct capture *c;
	size_t n;
	uint64_t now = realtime_ns();

	if (!srv->captures)
		return json_error(out, 503, "captures are off");
	c = calloc(LIST_MAX, sizeof(*c));
	if (!c)
		return json_error(out, 503, "out of memory");
	n = capture_registry__list(srv->captures, request__arg(r, "job"), c, LIST_MAX);
	fputc('[', out);
	for (size_t i = 0; i < n && i < LIST_MAX; i++) {
		if (i)
			fputc(',', out);
		capture__json(out, &c[i], now);
	}
	fputs("]\n", out);
	free(c);
	return 200;
}

/* ---- one capture ----------------------------------------------------------------- */

struct runs_ctx {
	FILE *out;
	int n;
};

static int run_row(void *ctx, const struct store_capture_run *ru)
{
	struct runs_ctx *rc = ctx;
	FILE *o = rc->out;

	fputs(rc->n++ ? ",{\"node\":" : "{\"node\":", o);
	json_write_str(o, ru->node);
	fprintf(o, ",\"start_ns\":%" PRIu64 ",\"end_ns\":%" PRIu64 ",\"end_reason\":", ru->start_ns,
		ru->end_ns);
	json_write_str(o, ru->end_reason);
	fprintf(o,
		",\"freq_hz\":%u,\"processes\":%u,\"samples\":%" PRIu64 ",\"gpu_calls\":%" PRIu64
		",\"dropped\":%" PRIu64 ",\"reported_ns\":%" PRIu64 "}",
		ru->freq_hz, ru->processes, ru->samples, ru->gpu_calls, ru->dropped,
		ru->reported_ns);
	return 0;
}

/* "ID" or "ID/SUFFIX": the capture; *suffix gets what follows. */
static int capture_of(struct server *srv, const char *rest, struct capture *c, const char **suffix)
{
	char id[CAPTURE_ID_LEN];
	size_t n = strcspn(rest, "/");

	if (n != CAPTURE_ID_LEN - 1)
		return -ENOENT;
	memcpy(id, rest, n);
	id[n] = 0;
	*suffix = rest[n] ? rest + n + 1 : "";
	return capture_registry__get(srv->captures, id, c);
}

/* Every rank's CPU samples, GPU calls and collectives of the capture's
 * range and processes, on the agents' realtime clock. */
static int capture_trace(struct server *srv, const struct request *r, const struct capture *c,
			 FILE *out)
{
	const uint32_t kinds = STORE_EVENT_COLLECTIVE | STORE_EVENT_TRANSFER |
			       STORE_EVENT_CPU_SAMPLE | STORE_EVENT_GPU_CALL | STORE_EVENT_STACKS;
	struct trace_json t;
	char other[256];
	int truncated = 0, any = 0, err = 0;
	struct store_filter f = { .from_ns = c->s.start_ns, .to_ns = c->s.end_ns };

	(void)r;
	trace_json__begin(&t, out, c->s.freq_hz ? 1000000000ULL / c->s.freq_hz : 0);
	/* One query per target (node, pid), or the job's processes. */
	for (uint32_t i = 0; !err && (i < c->s.ntargets || (!c->s.ntargets && !any)); i++) {
		int tr = 0;

		if (t.events >= TRACE_EVENTS_MAX) { /* one bound for all the targets */
			truncated = 1;
			break;
		}
		f.job = c->s.job[0] ? c->s.job : NULL;
		f.node = c->s.ntargets && c->s.targets[i].node[0] ? c->s.targets[i].node : NULL;
		f.pid = c->s.ntargets ? c->s.targets[i].pid : 0;
		any = 1;
		err = srv->store->ops->events(srv->store, &f, kinds,
					      (uint32_t)(TRACE_EVENTS_MAX - t.events), &tr,
					      trace_json__event, &t);
		truncated |= tr;
	}
	if (err) {
		trace_json__fini(&t);
		rewind(out);
		return json_store_error(out, err);
	}
	snprintf(other, sizeof(other),
		 "\"capture\":\"%s\",\"freq_hz\":%u,\"start_ns\":%" PRIu64 ",\"end_ns\":%" PRIu64,
		 c->id, c->s.freq_hz, c->s.start_ns, c->s.end_ns);
	trace_json__end(&t, truncated, other);
	return 200;
}

int api_capture(struct server *srv, const struct request *r, const char *rest, FILE *out)
{
	struct capture c;
	struct runs_ctx rc = { .out = out };
	const char *suffix;
	int err;

	if (!srv->captures)
		return json_error(out, 503, "captures are off");
	if (capture_of(srv, rest, &c, &suffix))
		return json_error(out, 404, "no such capture: %s", rest);
	if (!strcmp(suffix, "trace"))
		return capture_trace(srv, r, &c, out);
	if (suffix[0])
		return json_error(out, 404, "no such path: %s", r->path);
	fputc('{', out);
	capture__json_members(out, &c, realtime_ns());
	fputs(",\"runs\":[", out); /* each agent's part */
	err = srv->store->ops->capture_runs(srv->store, c.id, run_row, &rc);
	fprintf(out, "],\"runs_error\":%s}\n", err ? "true" : "false");
	return 200;
}

int api_capture_cancel(struct server *srv, const struct request *r, const char *rest, FILE *out)
{
	struct capture c;
	const char *suffix;

	if (!srv->captures)
		return json_error(out, 503, "captures are off");
	if (capture_of(srv, rest, &c, &suffix) || strcmp(suffix, "cancel"))
		return json_error(out, 404, "no such capture: %s", r->path);
	capture_registry__cancel(srv->captures, c.id, realtime_ns());
	capture_registry__get(srv->captures, c.id, &c);
	capture__json(out, &c, realtime_ns());
	fputc('\n', out);
	return 200;
}

/* ---- the job page -------------------------------------------------------------------- */

void page_captures(struct server *srv, const char *job, FILE *out)
{
	struct capture *c = srv->captures ? calloc(LIST_MAX, sizeof(*c)) : NULL;
	size_t n = c ? capture_registry__list(srv->captures, job, c, LIST_MAX) : 0;
	uint64_t now = realtime_ns();

	fputs("<h2>Deep captures</h2>", out);
	if (!n)
		fputs("<p>none</p>", out);
	else
		fputs("<table><tr><th>capture</th><th>trigger</th><th>state</th><th>start</th>"
		      "<th>seconds</th><th>why</th><th>trace</th></tr>",
		      out);
	for (size_t i = 0; i < n && i < LIST_MAX; i++) {
		fprintf(out, "<tr><td><a href=\"/api/v1/captures/%s\">%.8s</a></td><td>", c[i].id,
			c[i].id);
		page_html(out, c[i].s.trigger);
		fprintf(out, "</td><td>%s</td><td>%.3f</td><td>%.1f</td><td>",
			capture__state(&c[i], now), c[i].s.start_ns / 1e9,
			(double)(c[i].s.end_ns - c[i].s.start_ns) / 1e9);
		page_html(out, c[i].s.reason);
		fprintf(out,
			"</td><td><a href=\"/api/v1/captures/%s/trace\" "
			"download=\"capture-%s.json\">"
			"Perfetto trace</a></td></tr>",
			c[i].id, c[i].id);
	}
	if (n)
		fputs("</table>", out);
	if (srv->captures && job) {
		fputs("<form method=\"post\" action=\"/api/v1/captures?duration_s=10&amp;job=",
		      out);
		for (const char *p = job; *p; p++) /* the job, URL-encoded */
			if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			    (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.')
				fputc(*p, out);
			else
				fprintf(out, "%%%02X", (unsigned char)*p);
		fputs("\"><button>capture this job for 10 s</button> (open traces in "
		      "<a href=\"https://ui.perfetto.dev\">ui.perfetto.dev</a>)</form>",
		      out);
	}
	free(c);
}
