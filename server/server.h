/* SPDX-License-Identifier: Apache-2.0 */
/*
 * strata-server's context (no globals: every handler gets this) and the
 * handlers behind the HTTP routes (server/http.c routes, the api_*.c files
 * answer).  A handler writes its body to out and returns the HTTP status;
 * *ctype is set when the body is not JSON.
 */
#ifndef STRATA_SERVER_SERVER_H
#define STRATA_SERVER_SERVER_H

#include <stdint.h>
#include <stdio.h>

#include "server/batch_decode.h"
#include "server/buildid_store.h"
#include "server/central_sym.h"
#include "server/kernel_paths.h"
#include "server/mem_budget.h"
#include "server/store.h"
#include "server/store_sizes.h"
#include "server/sym_asks.h"

/* Request latency buckets (seconds) of the /metrics histograms. */
#define METRIC_BUCKETS 8

struct diag_engine;
struct diag_live;
struct diag_shared;
struct replicas;
struct capture_registry;
struct capture_triggers;
struct query_pool;

struct latency_hist {
	uint64_t buckets[METRIC_BUCKETS]; /* cumulative per bound */
	uint64_t count;
	uint64_t sum_ns;
};

/* Counters for /metrics; updated with atomics from every request thread. */
struct server_metrics {
	uint64_t batches_received, batches_stored, batches_duplicate;
	uint64_t rejected[BATCH_BUSY + 1]; /* by enum batch_error */
	uint64_t rejected_unauthorized, rejected_store_error;
	uint64_t wire_bytes, raw_bytes, cpu_samples;
	uint64_t agent_drops[8]; /* Drops fields the agents reported, in wire order */
	uint64_t symbol_uploads, symbol_upload_rejected;
	uint64_t queries, query_errors;
	uint64_t queries_refused;   /* the query threads' queue full */
	uint64_t queries_abandoned; /* the client hung up before its answer */
	uint64_t retention_runs, retention_deleted;
	struct latency_hist store_ingest, query, symbolize;
};

#define AUTH_MAX_TOKENS 16

/* One credential: the tokens that grant it (none: open). */
struct auth_tokens {
	char *v[AUTH_MAX_TOKENS];
	size_t n;
};

struct server {
	struct store *store;
	struct central_sym *sym;
	struct buildid_store *bids;
	struct sym_asks *asks; /* build-ids asked of each node; uploads need one */
	struct auth_tokens ingest, read, metrics; /* server/http_auth.h */
	int tls;				  /* served over TLS: cookies are Secure */
	const char *tls_cert, *tls_key;		  /* PEM text, when tls */
	struct batch_limits limits;
	size_t max_symbol_upload;  /* bytes */
	unsigned max_conns_per_ip; /* 0: no bound but the daemon's */
	struct mem_budget budget;  /* request bodies in memory, all connections */
	struct server_metrics m;
	struct store_sizes_cache sizes;	   /* /metrics: the store's sizes, kept a minute */
	struct diag_engine *diag;	   /* server/diag_engine.h; NULL: no diagnosis */
	struct diag_live *live;		   /* server/diag_live.h: stragglers at ingest */
	struct replicas *replicas;	   /* server/replicas.h: NULL when not replicated */
	struct diag_shared *shared;	   /* replicated: stragglers from the store instead */
	struct kernel_paths kpaths;	   /* the agents' kernel feature paths, for /metrics */
	struct node_health *nodes;	   /* server/node_health.h: each agent last heard */
	struct capture_registry *captures; /* server/capture.h: deep captures */
	uint32_t capture_lead_ms;	   /* an API capture starts this long after it is made */
	unsigned query_threads;		   /* threads for queries and pages (0: 2) */
	struct query_pool *queries;	   /* http.c's, while it serves (for /metrics) */
};

/* A request as the handlers see it. */
struct request {
	const char *method, *path;
	void *conn; /* struct MHD_Connection */
	/* query-string value of key, NULL when absent */
	const char *(*arg)(const struct request *r, const char *key);
	/* request header value, NULL when absent (NULL: no headers) */
	const char *(*header)(const struct request *r, const char *key);
	const char *body; /* BODY_MEMORY routes */
	size_t body_len;
	struct buildid_upload *upload; /* BODY_FILE routes: the handler commits it */
};

/* Query-string value (NULL when absent). */
const char *request__arg(const struct request *r, const char *key);
/* Request header value (NULL when absent). */
const char *request__header(const struct request *r, const char *key);

/* Parses from/to/node/pid/job/rank/container (with prefix, e.g. "base.")
 * into f.  0, or -EINVAL with err set. */
int request__filter(const struct request *r, const char *prefix, struct store_filter *f, char *err,
		    size_t errsz);

/* A decimal number with nothing around it.  0 or -EINVAL. */
int request__parse_u64(const char *s, uint64_t *v);

void latency_hist__add(struct latency_hist *h, uint64_t ns);

/* Handlers: return the HTTP status. */
int api_ingest(struct server *srv, const struct request *r, FILE *out, const char **ctype);
int api_symbols(struct server *srv, const struct request *r, const char *hex, FILE *out);
int api_jobs(struct server *srv, const struct request *r, FILE *out);
int api_nodes(struct server *srv, const struct request *r, FILE *out);
int api_processes(struct server *srv, const struct request *r, FILE *out);
int api_profile(struct server *srv, const struct request *r, FILE *out, const char **ctype);
int api_profile_diff(struct server *srv, const struct request *r, FILE *out, const char **ctype);
int api_leaks(struct server *srv, const struct request *r, FILE *out);
int api_tally(struct server *srv, const struct request *r, FILE *out);
int api_collectives(struct server *srv, const struct request *r, FILE *out);
int api_trace(struct server *srv, const struct request *r, FILE *out);
/* Collective health (server/api_collstats.c): GET /api/v1/collective_stats
 * and the job page's table. */
int api_collective_stats(struct server *srv, const struct request *r, FILE *out);
void page_collective_stats(struct server *srv, const char *job, FILE *out);
/* NCCL hangs (server/api_hangs.c): GET /api/v1/hangs and the job page's section. */
int api_hangs(struct server *srv, const struct request *r, FILE *out);
void page_hangs(struct server *srv, const char *job, FILE *out);
int api_metrics(struct server *srv, FILE *out);
/* Deep captures (server/api_captures.c): POST/GET /api/v1/captures,
 * GET /api/v1/captures/ID[/trace], POST /api/v1/captures/ID/cancel, the
 * job page's list. */
int api_captures_post(struct server *srv, const struct request *r, FILE *out);
int api_captures(struct server *srv, const struct request *r, FILE *out);
int api_capture(struct server *srv, const struct request *r, const char *rest, FILE *out);
int api_capture_cancel(struct server *srv, const struct request *r, const char *rest, FILE *out);
void page_captures(struct server *srv, const char *job, FILE *out);
/* Diagnosis (server/api_diag.c): GET /api/v1/stragglers, findings, breakdown,
 * leak_reports; the job page's diagnosis section. */
int api_stragglers(struct server *srv, const struct request *r, FILE *out);
int api_findings(struct server *srv, const struct request *r, FILE *out);
int api_breakdown(struct server *srv, const struct request *r, FILE *out);
int api_leak_reports(struct server *srv, const struct request *r, FILE *out);
void page_diagnosis(struct server *srv, const char *job, FILE *out);
void page_html(FILE *out, const char *s); /* HTML-escaped text */
int page_job(struct server *srv, const struct request *r, const char *job, FILE *out);
int page_index(struct server *srv, const struct request *r, FILE *out);

/* JSON helpers. */
void json_str(FILE *out, const char *s); /* quoted, escaped; NULL -> null */
int json_error(FILE *out, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A store read that failed (-errno): 503 with what went wrong; a read
 * past its time bound (-ETIMEDOUT, 30 s) says to ask for less. */
int json_store_error(FILE *out, int err);

/* Builds an lib/profile.h profile from the store for f. */
struct profile;
int server__load_profile(struct server *srv, const struct store_filter *f,
			 enum store_profile_kind kind, struct profile **out);

/* Starts the HTTP daemon on addr ("HOST:PORT", ":PORT"); returns an
 * opaque handle and the bound port, or NULL with err set. */
struct http_daemon;
/* Connections the server holds at once (all clients); one address holds
 * at most --max-conns-per-ip of them, so one slow client cannot take all. */
#define CONNECTION_LIMIT 1024

struct http_daemon *http__start(struct server *srv, const char *addr, int threads, uint16_t *port,
				char *err, size_t errsz);
void http__stop(struct http_daemon *d);

#endif /* STRATA_SERVER_SERVER_H */
