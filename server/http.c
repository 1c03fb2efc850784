// SPDX-License-Identifier: Apache-2.0
/*
 * HTTP for strata-server on libmicrohttpd (a thread pool serves requests):
 * request bodies are collected up to a per-route bound (past it the rest is
 * read and dropped, and the answer is 413), the bearer token is checked in
 * constant time, and each path goes to its handler.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/clock.h"
#include "server/server.h"

struct http_daemon {
	struct MHD_Daemon *mhd;
};

struct conn_state {
	char *body;
	size_t len, cap, max;
	int too_large;
};

const char *request__arg(const struct request *r, const char *key)
{
	return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, key);
}

void json_str(FILE *out, const char *s)
{
	if (!s) {
		fputs("null", out);
		return;
	}
	fputc('"', out);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(out, "\\%c", *p);
		else if (*p < 0x20)
			fprintf(out, "\\u%04x", *p);
		else
			fputc(*p, out);
	}
	fputc('"', out);
}

int json_error(FILE *out, int status, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fputs("{\"error\":", out);
	json_str(out, msg);
	fputs("}\n", out);
	return status;
}

void latency_hist__add(struct latency_hist *h, uint64_t ns)
{
	static const uint64_t bounds_us[METRIC_BUCKETS] = { 1000,   5000,    25000,   100000,
							    250000, 1000000, 5000000, 30000000 };

	for (int i = 0; i < METRIC_BUCKETS; i++)
		if (ns <= bounds_us[i] * 1000)
			__atomic_fetch_add(&h->buckets[i], 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&h->count, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&h->sum_ns, ns, __ATOMIC_RELAXED);
}

static int parse_u64(const char *s, uint64_t *v)
{
	char *end;

	errno = 0;
	*v = strtoull(s, &end, 10);
	return errno || end == s || *end ? -EINVAL : 0;
}

int request__filter(const struct request *r, const char *prefix, struct store_filter *f, char *err,
		    size_t errsz)
{
	static const char *const keys[] = {
		"from", "to", "node", "pid", "job", "rank", "container"
	};
	const char *v[7];
	char key[64];
	uint64_t n;

	memset(f, 0, sizeof(*f));
	for (int i = 0; i < 7; i++) {
		snprintf(key, sizeof(key), "%s%s", prefix, keys[i]);
		v[i] = request__arg(r, key);
	}
	for (int i = 0; i < 2; i++) {
		if (!v[i])
			continue;
		/* Unix seconds; past 2^63 ns would wrap. */
		if (parse_u64(v[i], &n) || n > 9000000000ull) {
			snprintf(err, errsz, "%s%s: want unix seconds", prefix, keys[i]);
			return -EINVAL;
		}
		*(i ? &f->to_ns : &f->from_ns) = n * 1000000000ull;
	}
	f->node = v[2];
	if (v[3] && (parse_u64(v[3], &n) || n == 0 || n > UINT32_MAX)) {
		snprintf(err, errsz, "%spid: want a process id", prefix);
		return -EINVAL;
	}
	f->pid = v[3] ? (uint32_t)n : 0;
	f->job = v[4];
	if (v[5]) {
		const char *s = v[5];

		f->rank_negate = s[0] == '!';
		if (parse_u64(s + f->rank_negate, &n) || n > INT32_MAX) {
			snprintf(err, errsz, "%srank: want N or !N", prefix);
			return -EINVAL;
		}
		f->has_rank = 1;
		f->rank = (int32_t)n;
	}
	f->container = v[6];
	return 0;
}

/* Constant-time: a timing side channel must not leak the token. */
static int token_ok(const struct server *srv, struct MHD_Connection *c)
{
	const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
	const char *q = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "token");
	const char *got = NULL;
	size_t want = strlen(srv->token), n;
	unsigned char diff = 0;

	if (h && !strncmp(h, "Bearer ", 7))
		got = h + 7;
	else if (q)
		got = q; /* browsers (the HTML pages) cannot set headers */
	if (!got)
		return 0;
	n = strlen(got);
	for (size_t i = 0; i < want; i++)
		diff |= (unsigned char)srv->token[i] ^ (unsigned char)(i < n ? got[i] : 0);
	return !diff && n == want;
}

static int route(struct server *srv, const struct request *r, FILE *out, const char **ctype)
{
	const char *p = r->path;
	int get = !strcmp(r->method, "GET"), post = !strcmp(r->method, "POST");

	if (!strcmp(p, "/healthz"))
		return fputs("{\"status\":\"ok\"}\n", out), 200;
	if (!strcmp(p, "/metrics")) {
		*ctype = "text/plain; version=0.0.4";
		return api_metrics(srv, out);
	}
	if (!strcmp(p, "/api/v1/batches"))
		return post ? api_ingest(srv, r, out) : json_error(out, 405, "POST a batch here");
	if (!strncmp(p, "/api/v1/symbols/", 16))
		return post ? api_symbols(srv, r, p + 16, out)
			    : json_error(out, 405, "POST an ELF file here");
	if (!get)
		return json_error(out, 405, "method %s not allowed on %s", r->method, p);
	if (!strcmp(p, "/api/v1/jobs"))
		return api_jobs(srv, r, out);
	if (!strcmp(p, "/api/v1/nodes"))
		return api_nodes(srv, r, out);
	if (!strcmp(p, "/api/v1/processes") || !strcmp(p, "/api/v1/ranks"))
		return api_processes(srv, r, out);
	if (!strcmp(p, "/api/v1/profile"))
		return api_profile(srv, r, out, ctype);
	if (!strcmp(p, "/api/v1/profile/diff"))
		return api_profile_diff(srv, r, out, ctype);
	if (!strcmp(p, "/api/v1/leaks"))
		return api_leaks(srv, r, out);
	if (!strcmp(p, "/api/v1/tally"))
		return api_tally(srv, r, out);
	if (!strcmp(p, "/api/v1/collectives"))
		return api_collectives(srv, r, out);
	if (!strcmp(p, "/api/v1/trace"))
		return api_trace(srv, r, out);
	/* diagnosis (server/api_diag.c) */
	if (!strcmp(p, "/api/v1/stragglers"))
		return api_stragglers(srv, r, out);
	if (!strcmp(p, "/api/v1/findings"))
		return api_findings(srv, r, out);
	if (!strcmp(p, "/api/v1/breakdown"))
		return api_breakdown(srv, r, out);
	if (!strcmp(p, "/api/v1/leak_reports"))
		return api_leak_reports(srv, r, out);
	if (!strcmp(p, "/")) {
		*ctype = "text/html; charset=utf-8";
		return page_index(srv, r, out);
	}
	if (!strncmp(p, "/jobs/", 6) && p[6]) {
		*ctype = "text/html; charset=utf-8";
		return page_job(srv, r, p + 6, out);
	}
	return json_error(out, 404, "no such path: %s", p);
}

static enum MHD_Result respond(struct MHD_Connection *c, int status, char *body, size_t len,
			       const char *ctype)
{
	struct MHD_Response *resp =
		MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	enum MHD_Result ret;

	if (!resp) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type", ctype);
	MHD_add_response_header(resp, "Cache-Control", "no-store");
	ret = MHD_queue_response(c, (unsigned)status, resp);
	MHD_destroy_response(resp);
	return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_size, void **con_cls)
{
	struct server *srv = cls;
	struct conn_state *cs = *con_cls;
	struct request r = { .method = method, .path = url, .conn = c };
	const char *ctype = "application/json";
	char *body = NULL;
	size_t len = 0;
	FILE *out;
	int status, is_query;

	if (!cs) {
		cs = calloc(1, sizeof(*cs));
		if (!cs)
			return MHD_NO;
		cs->max = !strncmp(url, "/api/v1/symbols/", 16) ? srv->max_symbol_upload
								: srv->limits.max_wire;
		*con_cls = cs;
		return MHD_YES;
	}
	if (*upload_size) {
		/* Past the bound, keep reading (the client is still sending)
		 * but keep nothing: the answer will be 413. */
		if (!cs->too_large && *upload_size > cs->max - cs->len)
			cs->too_large = 1;
		if (!cs->too_large) {
			if (cs->len + *upload_size > cs->cap) {
				size_t ncap = cs->cap ? cs->cap : 65536;
				char *nb;

				while (ncap < cs->len + *upload_size)
					ncap *= 2;
				nb = realloc(cs->body, ncap);
				if (!nb)
					return MHD_NO;
				cs->body = nb;
				cs->cap = ncap;
			}
			memcpy(cs->body + cs->len, upload, *upload_size);
			cs->len += *upload_size;
		}
		*upload_size = 0;
		return MHD_YES;
	}
	out = open_memstream(&body, &len);
	if (!out)
		return MHD_NO;
	is_query = !strncmp(url, "/api/v1/", 8) && strcmp(url, "/api/v1/batches") &&
		   strncmp(url, "/api/v1/symbols/", 16);
	if (srv->token && strcmp(url, "/healthz") && strcmp(url, "/metrics") && !token_ok(srv, c)) {
		__atomic_fetch_add(&srv->m.rejected_unauthorized, 1, __ATOMIC_RELAXED);
		status = json_error(out, 401, "missing or wrong bearer token");
	} else if (cs->too_large) {
		if (!strcmp(url, "/api/v1/batches"))
			__atomic_fetch_add(&srv->m.rejected[BATCH_TOO_LARGE], 1, __ATOMIC_RELAXED);
		status = json_error(out, 413, "request body over %zu bytes", cs->max);
	} else {
		uint64_t t0 = mono_ns();

		r.body = cs->body;
		r.body_len = cs->len;
		status = route(srv, &r, out, &ctype);
		if (is_query) {
			__atomic_fetch_add(&srv->m.queries, 1, __ATOMIC_RELAXED);
			if (status >= 500)
				__atomic_fetch_add(&srv->m.query_errors, 1, __ATOMIC_RELAXED);
			latency_hist__add(&srv->m.query, mono_ns() - t0);
		}
	}
	if (fclose(out))
		return MHD_NO;
	return respond(c, status, body, len, ctype);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct conn_state *cs = *con_cls;

	if (cs) {
		free(cs->body);
		free(cs);
		*con_cls = NULL;
	}
}

static int parse_addr(const char *addr, struct sockaddr_in *sa)
{
	const char *colon = strrchr(addr, ':');
	char host[64];
	uint64_t port;

	if (!colon || parse_u64(colon + 1, &port) || port > 65535 ||
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
	d->mhd = MHD_start_daemon(
		MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG, 0, NULL, NULL,
		on_request, srv, MHD_OPTION_SOCK_ADDR, &sa, MHD_OPTION_THREAD_POOL_SIZE,
		(unsigned)threads, MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
		MHD_OPTION_CONNECTION_LIMIT, 1024u, MHD_OPTION_CONNECTION_TIMEOUT, 60u,
		MHD_OPTION_END);
	if (!d->mhd) {
		snprintf(err, errsz, "cannot listen on %s: %s", addr, strerror(errno));
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
	MHD_stop_daemon(d->mhd);
	free(d);
}
