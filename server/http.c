// SPDX-License-Identifier: Apache-2.0
/*
 * HTTP for strata-server on libmicrohttpd (a thread pool serves requests).
 * A request is judged on its first callback, from its headers alone: the
 * credential (checked in constant time), the route and the declared size;
 * only then is its body read.  Batch bodies are held in memory within one
 * budget shared by all connections (503 past it); symbol uploads are
 * streamed to a file of the build-id store.  Past a route's bound the rest
 * of a body is read and dropped, and the answer is 413.  Queries and pages
 * run on a pool of their own (server/query_pool.h): the connection
 * threads, which every agent's batches go through, never wait on a store.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "lib/clock.h"
#include "lib/sparse_elf.h"
#include "server/http_auth.h"
#include "server/http_route.h"
#include "server/query_pool.h"
#include "server/server.h"

/* A body in memory is first given this much of the budget, then more as
 * its bytes arrive (doubling, up to the route's bound). */
#define BODY_FIRST_CAP ((size_t)64 << 10)

#define QUERY_THREADS_DEFAULT 2
#define QUERY_QUEUE 64 /* queries waiting for a query thread; past it 503 */

struct http_daemon {
	struct MHD_Daemon *mhd;
	struct query_pool *queries;
	struct server *srv;
};

/* A request's query-string arguments and headers, copied: a query runs on
 * a query thread while its connection is suspended. */
struct kv {
	char *key, *value;
	int kind; /* enum MHD_ValueKind */
};

/* A query: handed to the pool (QUERY_QUEUED: waiting or running), then
 * its answer (QUERY_ANSWERED), kept until the resumed connection sends it. */
enum query_state { QUERY_NONE, QUERY_QUEUED, QUERY_ANSWERED };

struct query {
	struct query_job job; /* first: the pool's */
	struct server *srv;
	struct MHD_Connection *conn;
	const struct route *rt;
	char *method, *path;
	struct kv *kv;
	size_t nkv;
	int copy_failed; /* ENOMEM copying kv */
	const char *body;
	size_t body_len;
	int status;
	char *out; /* the answer's body (malloc'd) */
	size_t out_len;
	struct route_answer a;
	int fd;	   /* the client's socket (-1: unknown), polled while suspended */
	bool gone; /* the client hung up: nobody reads the answer */
};

/* One request, from its first callback to its completion. */
struct conn_state {
	enum query_state qstate;
	struct query q;
	const struct route *rt;
	int fail;		   /* status to answer once the body is read; 0 none */
	int login;		   /* fail is a redirect to the login form */
	char answer[320];	   /* its JSON body */
	char *body;		   /* BODY_MEMORY */
	size_t len, cap, max;	   /* cap bytes are held in srv->budget */
	size_t declared;	   /* Content-Length (0: none) */
	struct buildid_upload *up; /* BODY_FILE */
};

static const char *conn_arg(const struct request *r, const char *key)
{
	return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, key);
}

static const char *conn_header(const struct request *r, const char *key)
{
	return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, key);
}

static int fail(struct conn_state *cs, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int fail(struct conn_state *cs, int status, const char *fmt, ...)
{
	FILE *out = fmemopen(cs->answer, sizeof(cs->answer), "w");
	char msg[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (out) {
		json_error(out, status, "%s", msg);
		fclose(out);
	}
	cs->fail = status;
	return status;
}

/* Drops the body held in memory and gives its bytes back to the budget. */
static void body_release(struct server *srv, struct conn_state *cs)
{
	free(cs->body);
	mem_budget__give(&srv->budget, cs->cap);
	cs->body = NULL;
	cs->len = cs->cap = 0;
}

/* Grows the in-memory body to cap bytes, within the global budget. */
static int body_grow(struct server *srv, struct conn_state *cs, size_t cap)
{
	char *nb;

	if (mem_budget__take(&srv->budget, cap - cs->cap))
		return -ENOBUFS;
	nb = realloc(cs->body, cap);
	if (!nb) {
		mem_budget__give(&srv->budget, cap - cs->cap);
		return -ENOMEM;
	}
	cs->body = nb;
	cs->cap = cap;
	return 0;
}

static int busy(struct server *srv, struct conn_state *cs)
{
	__atomic_fetch_add(&srv->m.rejected[BATCH_BUSY], 1, __ATOMIC_RELAXED);
	return fail(cs, 503, "server busy: request bodies in memory at their bound; retry later");
}

static int too_large(struct server *srv, struct conn_state *cs)
{
	if (cs->rt->body == BODY_MEMORY)
		__atomic_fetch_add(&srv->m.rejected[BATCH_TOO_LARGE], 1, __ATOMIC_RELAXED);
	return fail(cs, 413, "request body over %zu bytes", cs->max);
}

/*
 * A request's first callback: its headers are in, no byte of its body is.
 * Everything that can refuse it without the body does so here, so an
 * unauthenticated, misrouted or oversized upload is never read.  Returns
 * 0 (read the body) or the status to answer now (its body in cs->answer).
 */
static int preflight(struct server *srv, struct MHD_Connection *c, const char *url,
		     const char *method, struct conn_state *cs)
{
	const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
	uint64_t clen = 0;
	int method_ok, err;

	cs->rt = route__find(url, method, &method_ok);
	if (!auth__ok(srv, c, cs->rt ? cs->rt->auth : ROUTE_ANY)) {
		__atomic_fetch_add(&srv->m.rejected_unauthorized, 1, __ATOMIC_RELAXED);
		cs->login = cs->rt && cs->rt->html; /* a browser: to the form */
		return fail(cs, cs->login ? 303 : 401, "missing or wrong bearer token");
	}
	if (!cs->rt)
		return fail(cs, 404, "no such path: %s", url);
	if (!method_ok)
		return fail(cs, 405, "method %s not allowed on %s (%s it)", method, url,
			    cs->rt->method);
	if (cl && request__parse_u64(cl, &clen))
		return fail(cs, 400, "bad Content-Length");
	cs->max = cs->rt->max_body		? cs->rt->max_body
		  : cs->rt->body == BODY_MEMORY ? srv->limits.max_wire
		  : cs->rt->body == BODY_FILE	? srv->max_symbol_upload
						: 0;
	if (clen > cs->max)
		return too_large(srv, cs);
	cs->declared = (size_t)clen;
	/* What the body will take is reserved as it comes, not as declared:
	 * idle connections that declare 16 MiB each and send nothing would
	 * hold the whole budget (every agent refused) with headers alone. */
	if (cs->rt->body == BODY_MEMORY && clen &&
	    body_grow(srv, cs, clen < BODY_FIRST_CAP ? (size_t)clen : BODY_FIRST_CAP))
		return busy(srv, cs);
	if (cs->rt->body == BODY_FILE) {
		const char *hex = route__rest(cs->rt, url);

		const char *node = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Strata-Node");

		if (!buildid_hex_valid(hex))
			return fail(cs, 400, "bad build-id \"%s\": want lowercase hex", hex);
		if (!node || !sym_asks__asked(srv->asks, node, hex, mono_ns())) {
			__atomic_fetch_add(&srv->m.symbol_upload_rejected, 1, __ATOMIC_RELAXED);
			return fail(cs, 403, "build-id %s was not asked of node %s", hex,
				    node ? node : "(no X-Strata-Node header)");
		}
		err = buildid_store__begin(srv->bids, hex, clen, &cs->up);
		if (err == -EEXIST) { /* first upload wins: nothing to read */
			snprintf(cs->answer, sizeof(cs->answer),
				 "{\"status\":\"stored\",\"build_id\":\"%s\"}\n", hex);
			return cs->fail = 200;
		}
		if (err) {
			__atomic_fetch_add(&srv->m.symbol_upload_rejected, 1, __ATOMIC_RELAXED);
			if (err == -ENOSPC)
				return fail(cs, 507,
					    "build-id store full, or uploads in progress at their "
					    "bound");
			return fail(cs, 500, "cannot store %s: %s", hex, strerror(-err));
		}
		/* an agent sends the file without its loaded code and data */
		const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");

		if (ct && !strncmp(ct, SPARSE_ELF_CTYPE, strlen(SPARSE_ELF_CTYPE)) &&
		    buildid_upload__sparse(cs->up))
			return fail(cs, 500, "cannot store %s: out of memory", hex);
	}
	return 0;
}

/* One piece of the body: kept (in memory or in the upload's file) while
 * within the bounds; past them the rest is read and dropped, and the
 * answer is the failure. */
static void take_body(struct server *srv, struct conn_state *cs, const char *data, size_t n)
{
	int err;

	if (cs->fail)
		return;
	if (n > cs->max - cs->len) {
		too_large(srv, cs);
	} else if (cs->rt->body == BODY_FILE) {
		err = buildid_upload__write(cs->up, data, n);
		cs->len += n;
		if (err == -ENOSPC)
			fail(cs, 507, "build-id store full, or uploads in progress at their bound");
		else if (err == -EBADMSG)
			fail(cs, 400, "malformed sparse ELF upload");
		else if (err)
			fail(cs, 500, "cannot store the upload: %s", strerror(-err));
	} else {
		if (cs->len + n > cs->cap) {
			size_t ncap = cs->cap ? cs->cap : BODY_FIRST_CAP;

			while (ncap < cs->len + n)
				ncap *= 2;
			if (ncap > cs->max)
				ncap = cs->max;
			/* no more than it said it would send (it may send less) */
			if (cs->declared >= cs->len + n && ncap > cs->declared)
				ncap = cs->declared;
			if (body_grow(srv, cs, ncap)) {
				busy(srv, cs);
				goto out;
			}
		}
		memcpy(cs->body + cs->len, data, n);
		cs->len += n;
		return;
	}
out:
	if (cs->fail) {
		body_release(srv, cs);
		buildid_upload__abort(cs->up);
		cs->up = NULL;
	}
}

static enum MHD_Result respond(struct MHD_Connection *c, int status, char *body, size_t len,
			       const struct route_answer *a)
{
	struct MHD_Response *resp =
		MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	enum MHD_Result ret;

	if (!resp) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type", a->ctype);
	MHD_add_response_header(resp, "Cache-Control", "no-store");
	/* pages: not framed elsewhere, not sniffed, no URL leaks onward */
	MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
	MHD_add_response_header(resp, "X-Frame-Options", "DENY");
	MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
	if (a->location)
		MHD_add_response_header(resp, "Location", a->location);
	if (a->cookie)
		MHD_add_response_header(resp, "Set-Cookie", a->cookie);
	if (status == 503)
		MHD_add_response_header(resp, "Retry-After", "5");
	ret = MHD_queue_response(c, (unsigned)status, resp);
	MHD_destroy_response(resp);
	return ret;
}

static enum MHD_Result answer_fail(struct MHD_Connection *c, const struct conn_state *cs)
{
	struct route_answer a = { .ctype = "application/json",
				  .location = cs->login ? "/login" : NULL };
	char *body = strdup(cs->answer);

	if (!body)
		return MHD_NO;
	return respond(c, cs->fail, body, strlen(body), &a);
}

/*
 * A refused request is answered before its body is read (libmicrohttpd
 * then reads none of it and closes the connection) when the client waits
 * for "100 Continue" (it has sent nothing yet), or when the body is large
 * or of unknown length.  A small body (at most DRAIN_MAX, e.g. an agent's
 * batch with a stale token) is read and dropped first: a client still
 * sending when the connection closes may see a reset instead of the answer.
 */
#define DRAIN_MAX (1u << 20)

static int drain_first(struct MHD_Connection *c)
{
	const char *expect = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Expect");
	const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
	uint64_t clen;

	if (expect && !strcasecmp(expect, "100-continue"))
		return 0;
	if (!cl) /* chunked, or no body at all */
		return !MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Transfer-Encoding");
	return !request__parse_u64(cl, &clen) && clen <= DRAIN_MAX;
}

/* ---- queries, on the query threads ---------------------------------------- */

static const char *snap_value(const struct request *r, int kind, const char *key)
{
	const struct query *q = r->conn;

	/* caseless, as libmicrohttpd's own lookup is for every kind */
	for (size_t i = 0; i < q->nkv; i++)
		if (q->kv[i].kind == kind && !strcasecmp(q->kv[i].key, key))
			return q->kv[i].value;
	return NULL;
}

static const char *snap_arg(const struct request *r, const char *key)
{
	return snap_value(r, MHD_GET_ARGUMENT_KIND, key);
}

static const char *snap_header(const struct request *r, const char *key)
{
	return snap_value(r, MHD_HEADER_KIND, key);
}

static void query_clear(struct query *q)
{
	for (size_t i = 0; i < q->nkv; i++) {
		free(q->kv[i].key);
		free(q->kv[i].value);
	}
	free(q->kv);
	free(q->method);
	free(q->path);
	free(q->out);
	free(q->a.cookie);
	memset(q, 0, sizeof(*q));
}

static enum MHD_Result copy_value(void *cls, enum MHD_ValueKind kind, const char *key,
				  const char *value)
{
	struct query *q = cls;
	struct kv *kv;

	if (!key)
		return MHD_YES;
	kv = realloc(q->kv, (q->nkv + 1) * sizeof(*kv));
	if (!kv) {
		q->copy_failed = 1;
		return MHD_NO;
	}
	q->kv = kv;
	kv = &q->kv[q->nkv];
	kv->kind = kind;
	kv->key = strdup(key);
	kv->value = value ? strdup(value) : NULL;
	if (!kv->key || (value && !kv->value)) {
		free(kv->key);
		free(kv->value);
		q->copy_failed = 1;
		return MHD_NO;
	}
	q->nkv++;
	return MHD_YES;
}

/* What the query reads, copied from the connection (which is suspended
 * while it runs); 0 or -ENOMEM. */
static int query_snapshot(struct query *q, struct MHD_Connection *c, const char *url,
			  const char *method)
{
	MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, copy_value, q);
	if (!q->copy_failed)
		MHD_get_connection_values(c, MHD_HEADER_KIND, copy_value, q);
	q->path = strdup(url);
	q->method = strdup(method);
	return !q->path || !q->method || q->copy_failed ? -ENOMEM : 0;
}

/*
 * Has the client of a suspended connection hung up?  (libmicrohttpd does
 * not poll a suspended connection's socket.)  A client that closed, or
 * only shut down its sending side, as nginx also takes it, is gone: a
 * request is answered only to a client that still reads.
 */
static bool client_gone(void *ctx)
{
	struct query *q = ctx;
	struct pollfd p = { .fd = q->fd, .events = POLLRDHUP };

	if (!q->gone && q->fd >= 0 && poll(&p, 1, 0) > 0 &&
	    (p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
		q->gone = true;
	return q->gone;
}

static void query_run(struct query_job *j, int cancelled)
{
	struct query *q = (struct query *)j;
	struct conn_state *cs = (struct conn_state *)((char *)q - offsetof(struct conn_state, q));
	struct request r = { .method = q->method,
			     .path = q->path,
			     .conn = q,
			     .arg = snap_arg,
			     .header = snap_header,
			     .body = q->body,
			     .body_len = q->body_len };
	FILE *out = open_memstream(&q->out, &q->out_len);
	uint64_t t0 = mono_ns();

	q->a = (struct route_answer){ .ctype = "application/json" };
	if (!out) {
		q->status = 0; /* the connection is closed */
	} else if (cancelled) {
		q->status = json_error(out, 503, "server stopping");
	} else if (client_gone(q)) { /* gave up while it waited */
		q->status = 0;
	} else {
		store__set_read_deadline(t0 + STORE_QUERY_MAX_NS);
		store__set_read_client(client_gone, q);
		q->status = route__run(q->rt, q->srv, &r, out, &q->a);
		store__set_read_client(NULL, NULL);
		store__set_read_deadline(0);
		client_gone(q);	    /* its reads were stopped, or it left since */
		if (q->rt->query) { /* it ran: counted, its time too (abandoned
				     * ones are mostly the slow tail) */
			__atomic_fetch_add(&q->srv->m.queries, 1, __ATOMIC_RELAXED);
			if (q->status >= 500 && !q->gone)
				__atomic_fetch_add(&q->srv->m.query_errors, 1, __ATOMIC_RELAXED);
			latency_hist__add(&q->srv->m.query, mono_ns() - t0);
		}
		if (q->gone)
			q->status = 0;
	}
	if (q->gone)
		__atomic_fetch_add(&q->srv->m.queries_abandoned, 1, __ATOMIC_RELAXED);
	if (out && fclose(out))
		q->status = 0;
	cs->qstate = QUERY_ANSWERED; /* read after the resume (its lock orders it) */
	MHD_resume_connection(q->conn);
}

/*
 * A query or page: its connection suspended, the query handed to a query
 * thread, which resumes the connection with the answer (answer_query()).
 * With the pool's queue full (or the pool stopping) the answer is 503 at
 * once, by the same way.
 */
static enum MHD_Result query_start(struct server *srv, struct MHD_Connection *c, const char *url,
				   const char *method, struct conn_state *cs)
{
	struct query *q = &cs->q;
	int err;

	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);

	*q = (struct query){ .job.run = query_run,
			     .srv = srv,
			     .conn = c,
			     .rt = cs->rt,
			     .body = cs->body,
			     .body_len = cs->len,
			     .fd = ci ? ci->connect_fd : -1 };
	if (query_snapshot(q, c, url, method)) {
		query_clear(q);
		return MHD_NO;
	}
	cs->qstate = QUERY_QUEUED;
	MHD_suspend_connection(c);
	err = query_pool__submit(srv->queries, &q->job);
	if (!err)
		return MHD_YES;
	if (err == -ESHUTDOWN) {
		fail(cs, 503, "server stopping");
	} else {
		__atomic_fetch_add(&srv->m.queries_refused, 1, __ATOMIC_RELAXED);
		fail(cs, 503, "server busy: %u queries waiting; retry later", QUERY_QUEUE);
	}
	query_clear(q);
	cs->qstate = QUERY_NONE; /* answered as a failure */
	MHD_resume_connection(c);
	return MHD_YES;
}

static enum MHD_Result answer_query(struct MHD_Connection *c, struct conn_state *cs)
{
	struct query *q = &cs->q;
	enum MHD_Result ret;

	if (!q->status) {
		query_clear(q);
		return MHD_NO;
	}
	ret = respond(c, q->status, q->out, q->out_len, &q->a);
	q->out = NULL; /* the response owns it */
	if (q->a.cookie)
		explicit_bzero(q->a.cookie, strlen(q->a.cookie));
	query_clear(q);
	return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_size, void **con_cls)
{
	struct server *srv = cls;
	struct conn_state *cs = *con_cls;
	struct request r = {
		.method = method, .path = url, .conn = c, .arg = conn_arg, .header = conn_header
	};
	struct route_answer a = { .ctype = "application/json" };
	enum MHD_Result ret;
	char *body = NULL;
	size_t len = 0;
	FILE *out;
	int status;
	uint64_t t0;

	if (!cs) {
		cs = calloc(1, sizeof(*cs));
		if (!cs)
			return MHD_NO;
		*con_cls = cs;
		if (preflight(srv, c, url, method, cs) && !drain_first(c))
			return answer_fail(c, cs);
		return MHD_YES;
	}
	if (*upload_size) {
		take_body(srv, cs, upload, *upload_size);
		*upload_size = 0;
		return MHD_YES;
	}
	if (cs->qstate == QUERY_ANSWERED) {
		cs->qstate = QUERY_NONE;
		body_release(srv, cs); /* the query is done with it */
		return answer_query(c, cs);
	}
	if (cs->qstate == QUERY_QUEUED) /* not resumed yet: not called */
		return MHD_YES;
	if (cs->fail)
		return answer_fail(c, cs);
	if ((cs->rt->query || cs->rt->html) && srv->queries)
		return query_start(srv, c, url, method, cs);
	out = open_memstream(&body, &len);
	if (!out)
		return MHD_NO;
	t0 = mono_ns();
	r.body = cs->body;
	r.body_len = cs->len;
	r.upload = cs->up; /* the handler commits (and frees) it */
	cs->up = NULL;
	status = route__run(cs->rt, srv, &r, out, &a);
	if (cs->rt->query) {
		__atomic_fetch_add(&srv->m.queries, 1, __ATOMIC_RELAXED);
		if (status >= 500)
			__atomic_fetch_add(&srv->m.query_errors, 1, __ATOMIC_RELAXED);
		latency_hist__add(&srv->m.query, mono_ns() - t0);
	}
	body_release(srv, cs); /* the handler is done with it */
	if (fclose(out)) {
		free(a.cookie);
		return MHD_NO;
	}
	ret = respond(c, status, body, len, &a);
	if (a.cookie)
		explicit_bzero(a.cookie, strlen(a.cookie)); /* it may hold a token */
	free(a.cookie);
	return ret;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct conn_state *cs = *con_cls;

	if (cs) {
		body_release(cls, cs);
		buildid_upload__abort(cs->up);
		query_clear(&cs->q);
		free(cs);
		*con_cls = NULL;
	}
}

static int parse_addr(const char *addr, struct sockaddr_in *sa)
{
	const char *colon = strrchr(addr, ':');
	char host[64];
	uint64_t port;

	if (!colon || request__parse_u64(colon + 1, &port) || port > 65535 ||
	    (size_t)(colon - addr) >= sizeof(host))
		return -EINVAL;
	memcpy(host, addr, (size_t)(colon - addr));
	host[colon - addr] = 0;
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((uint16_t)port);
	if (!host[0] || !strcmp(host, "0.0.0.0"))
		sa->sin_addr.s_addr = htonl(INADDR_ANY);
	else if (!strcmp(host, "localhost"))
		sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	else if (inet_pton(AF_INET, host, &sa->sin_addr) != 1)
		return -EINVAL;
	return 0;
}

struct http_daemon *http__start(struct server *srv, const char *addr, int threads, uint16_t *port,
				char *err, size_t errsz)
{
	struct http_daemon *d;
	struct sockaddr_in sa;
	const union MHD_DaemonInfo *info;

	if (parse_addr(addr, &sa)) {
		snprintf(err, errsz, "bad listen address \"%s\": want HOST:PORT", addr);
		return NULL;
	}
	d = calloc(1, sizeof(*d));
	if (!d) {
		snprintf(err, errsz, "out of memory");
		return NULL;
	}
	/* poll, not epoll: with epoll (libmicrohttpd 0.9.75) a client that
	 * vanished mid-upload was noticed only at the connection timeout, so
	 * its body held the budget for 60 s (test_server_http). */
	if (srv->tls && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
		snprintf(err, errsz, "this libmicrohttpd has no TLS");
		free(d);
		return NULL;
	}
	/* TLS (GnuTLS through libmicrohttpd): 1.2 and 1.3 only.  Without TLS
	 * the key options are ignored. */
	srv->queries = query_pool__new(
		srv->query_threads ? srv->query_threads : QUERY_THREADS_DEFAULT, QUERY_QUEUE);
	if (!srv->queries) {
		snprintf(err, errsz, "cannot start the query threads: %s", strerror(errno));
		free(d);
		return NULL;
	}
	d->queries = srv->queries;
	d->srv = srv;
	d->mhd = MHD_start_daemon(
		MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ERROR_LOG |
			MHD_ALLOW_SUSPEND_RESUME | (srv->tls ? MHD_USE_TLS : 0),
		0, NULL, NULL, on_request, srv, MHD_OPTION_SOCK_ADDR, &sa,
		MHD_OPTION_THREAD_POOL_SIZE, (unsigned)threads, MHD_OPTION_NOTIFY_COMPLETED,
		on_completed, srv, MHD_OPTION_CONNECTION_LIMIT, (unsigned)CONNECTION_LIMIT,
		MHD_OPTION_PER_IP_CONNECTION_LIMIT, srv->max_conns_per_ip,
		MHD_OPTION_CONNECTION_TIMEOUT, 60u,
		srv->tls ? MHD_OPTION_HTTPS_MEM_KEY : MHD_OPTION_END, srv->tls_key,
		MHD_OPTION_HTTPS_MEM_CERT, srv->tls_cert, MHD_OPTION_HTTPS_PRIORITIES,
		"NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2", MHD_OPTION_END);
	if (!d->mhd) {
		snprintf(err, errsz, "cannot listen on %s: %s", addr, strerror(errno));
		query_pool__free(d->queries);
		srv->queries = NULL;
		free(d);
		return NULL;
	}
	info = MHD_get_daemon_info(d->mhd, MHD_DAEMON_INFO_BIND_PORT);
	*port = info ? info->port : ntohs(sa.sin_port);
	return d;
}

void http__stop(struct http_daemon *d)
{
	if (!d)
		return;
	/* no connection may stay suspended when the daemon stops: the
	 * queries running finish, those waiting are answered 503, and any
	 * later one is refused (and resumed) at once */
	query_pool__stop(d->queries);
	MHD_stop_daemon(d->mhd);
	d->srv->queries = NULL;
	query_pool__free(d->queries);
	free(d);
}
