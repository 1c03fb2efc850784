// SPDX-License-Identifier: Apache-2.0
#include "server/http_route.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/http_auth.h"

enum route_id {
	R_HEALTHZ,
	R_METRICS,
	R_BATCHES,
	R_SYMBOLS,
	R_JOBS,
	R_NODES,
	R_PROCESSES,
	R_PROFILE,
	R_DIFF,
	R_LEAKS,
	R_TALLY,
	R_COLLECTIVES,
	R_COLLECTIVE_STATS,
	R_HANGS,
	R_TRACE,
	R_CAPTURES,
	R_CAPTURES_POST,
	R_CAPTURE,
	R_CAPTURE_CANCEL,
	R_STRAGGLERS,
	R_FINDINGS,
	R_BREAKDOWN,
	R_LEAK_REPORTS,
	R_INDEX,
	R_JOB_PAGE,
	R_LOGIN_FORM,
	R_LOGIN,
	R_LOGOUT,
};

#define GET_Q(p, id)                                            \
	{                                                       \
		p, 0, "GET", ROUTE_READ, BODY_NONE, 1, id, 0, 0 \
	}

static const struct route routes[] = {
	{ "/healthz", 0, "GET", ROUTE_OPEN, BODY_NONE, 0, R_HEALTHZ },
	{ "/metrics", 0, "GET", ROUTE_METRICS, BODY_NONE, 0, R_METRICS },
	{ "/api/v1/batches", 0, "POST", ROUTE_INGEST, BODY_MEMORY, 0, R_BATCHES },
	{ "/api/v1/symbols/", 1, "POST", ROUTE_INGEST, BODY_FILE, 0, R_SYMBOLS },
	GET_Q("/api/v1/jobs", R_JOBS),
	GET_Q("/api/v1/nodes", R_NODES),
	GET_Q("/api/v1/processes", R_PROCESSES),
	GET_Q("/api/v1/ranks", R_PROCESSES),
	GET_Q("/api/v1/profile", R_PROFILE),
	GET_Q("/api/v1/profile/diff", R_DIFF),
	GET_Q("/api/v1/leaks", R_LEAKS),
	GET_Q("/api/v1/tally", R_TALLY),
	GET_Q("/api/v1/collectives", R_COLLECTIVES),
	GET_Q("/api/v1/collective_stats", R_COLLECTIVE_STATS),
	GET_Q("/api/v1/hangs", R_HANGS),
	GET_Q("/api/v1/trace", R_TRACE),
	/* deep captures (server/api_captures.c): starting one takes a read
	 * token (bounded in time, rate and number: server/capture.h) */
	GET_Q("/api/v1/captures", R_CAPTURES),
	{ "/api/v1/captures", 0, "POST", ROUTE_READ, BODY_MEMORY, 1, R_CAPTURES_POST, 0, 4096 },
	{ "/api/v1/captures/", 1, "GET", ROUTE_READ, BODY_NONE, 1, R_CAPTURE },
	{ "/api/v1/captures/", 1, "POST", ROUTE_READ, BODY_MEMORY, 1, R_CAPTURE_CANCEL, 0, 4096 },
	/* diagnosis (server/api_diag.c) */
	GET_Q("/api/v1/stragglers", R_STRAGGLERS),
	GET_Q("/api/v1/findings", R_FINDINGS),
	GET_Q("/api/v1/breakdown", R_BREAKDOWN),
	GET_Q("/api/v1/leak_reports", R_LEAK_REPORTS),
	{ "/", 0, "GET", ROUTE_READ, BODY_NONE, 0, R_INDEX, 1 },
	{ "/jobs/", 1, "GET", ROUTE_READ, BODY_NONE, 0, R_JOB_PAGE, 1 },
	/* browsers: a read token for an HttpOnly cookie (server/http_auth.h) */
	{ "/login", 0, "GET", ROUTE_OPEN, BODY_NONE, 0, R_LOGIN_FORM },
	{ "/login", 0, "POST", ROUTE_OPEN, BODY_MEMORY, 0, R_LOGIN, 0, 4096 },
	{ "/logout", 0, "GET", ROUTE_OPEN, BODY_NONE, 0, R_LOGOUT },
};

const struct route *route__find(const char *path, const char *method, int *method_ok)
{
	const struct route *found = NULL;

	*method_ok = 0;
	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		const struct route *rt = &routes[i];
		size_t n = strlen(rt->path);

		if (rt->prefix ? strncmp(path, rt->path, n) || !path[n] : strcmp(path, rt->path))
			continue;
		if (!strcmp(method, rt->method)) {
			*method_ok = 1;
			return rt;
		}
		found = found ? found : rt;
	}
	return found;
}

const char *route__rest(const struct route *rt, const char *path)
{
	return rt->prefix ? path + strlen(rt->path) : "";
}

/* POST /login: a read token for the cookie browsers then send. */
static int login(struct server *srv, const struct request *r, FILE *out, struct route_answer *a)
{
	char tok[4100];

	a->ctype = "text/html; charset=utf-8";
	if (auth__form_token(r->body ? r->body : "", r->body_len, tok, sizeof(tok)) ||
	    !auth_tokens__match(&srv->read, tok)) {
		__atomic_fetch_add(&srv->m.rejected_unauthorized, 1, __ATOMIC_RELAXED);
		auth__login_page(out, "That is not a read token.");
		explicit_bzero(tok, sizeof(tok));
		return 401;
	}
	if (asprintf(&a->cookie, AUTH_COOKIE "=%s; Path=/; HttpOnly; SameSite=Strict%s", tok,
		     srv->tls ? "; Secure" : "") < 0)
		a->cookie = NULL;
	explicit_bzero(tok, sizeof(tok));
	if (!a->cookie)
		return json_error(out, 503, "out of memory");
	a->location = "/";
	return 303;
}

int route__run(const struct route *rt, struct server *srv, const struct request *r, FILE *out,
	       struct route_answer *a)
{
	const char *rest = route__rest(rt, r->path);
	const char **ctype = &a->ctype;

	switch ((enum route_id)rt->id) {
	case R_HEALTHZ:
		fputs("{\"status\":\"ok\"}\n", out);
		return 200;
	case R_METRICS:
		*ctype = "text/plain; version=0.0.4";
		return api_metrics(srv, out);
	case R_BATCHES:
		return api_ingest(srv, r, out, ctype);
	case R_SYMBOLS:
		return api_symbols(srv, r, rest, out);
	case R_JOBS:
		return api_jobs(srv, r, out);
	case R_NODES:
		return api_nodes(srv, r, out);
	case R_PROCESSES:
		return api_processes(srv, r, out);
	case R_PROFILE:
		return api_profile(srv, r, out, ctype);
	case R_DIFF:
		return api_profile_diff(srv, r, out, ctype);
	case R_LEAKS:
		return api_leaks(srv, r, out);
	case R_TALLY:
		return api_tally(srv, r, out);
	case R_COLLECTIVES:
		return api_collectives(srv, r, out);
	case R_COLLECTIVE_STATS:
		return api_collective_stats(srv, r, out);
	case R_HANGS:
		return api_hangs(srv, r, out);
	case R_TRACE:
		return api_trace(srv, r, out);
	case R_CAPTURES:
		return api_captures(srv, r, out);
	case R_CAPTURES_POST:
		return api_captures_post(srv, r, out);
	case R_CAPTURE:
		return api_capture(srv, r, rest, out);
	case R_CAPTURE_CANCEL:
		return api_capture_cancel(srv, r, rest, out);
	case R_STRAGGLERS:
		return api_stragglers(srv, r, out);
	case R_FINDINGS:
		return api_findings(srv, r, out);
	case R_BREAKDOWN:
		return api_breakdown(srv, r, out);
	case R_LEAK_REPORTS:
		return api_leak_reports(srv, r, out);
	case R_INDEX:
		*ctype = "text/html; charset=utf-8";
		return page_index(srv, r, out);
	case R_JOB_PAGE:
		*ctype = "text/html; charset=utf-8";
		return page_job(srv, r, rest, out);
	case R_LOGIN_FORM:
		*ctype = "text/html; charset=utf-8";
		auth__login_page(out, NULL);
		return 200;
	case R_LOGIN:
		return login(srv, r, out, a);
	case R_LOGOUT:
		a->cookie = strdup(AUTH_COOKIE "=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict");
		a->location = "/login";
		return 303;
	}
	return json_error(out, 404, "no such path: %s", r->path);
}
