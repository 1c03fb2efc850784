// SPDX-License-Identifier: Apache-2.0
/*
 * strata-server --listen ADDR --store sqlite:PATH|clickhouse://HOST:PORT/DB
 *               [--token-file F] [options]
 * The main thread only waits for signals and runs retention; requests are
 * served by libmicrohttpd's thread pool.
 */
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "lib/cli.h"
#include "lib/clock.h"
#include "server/capture.h"
#include "server/capture_trigger.h"
#include "server/diag_engine.h"
#include "server/diag_live.h"
#include "server/diag_shared.h"
#include "server/node_health.h"
#include "server/replicas.h"
#include "server/server.h"
#include "server/server_creds.h"

struct server_opts {
	const char *listen, *store, *buildid_dir;
	const char *ch_cluster;		/* --clickhouse-cluster */
	struct server_cred_files creds; /* server/server_creds.h */
	uint32_t retention_h, threads, max_batch_mb, max_symbol_mb, buildid_max_mb, max_buffered_mb;
	uint32_t max_conns_per_ip;
	uint32_t query_threads;
	int debuginfod;
	/* diagnosis (server/diag_engine.c) */
	uint32_t diag_window_ms, diag_delay_ms;
	uint32_t hang_min_ms, hang_periods; /* 0: the hang detection's defaults */
	int diag_on_query;		    /* no background runs: judge on query only */
	const char *alert_webhook, *external_url;
	/* deep captures (server/capture.h) */
	uint32_t capture_max_s, capture_lead_ms, capture_max_active;
	uint32_t capture_every_s; /* schedule (0: none) */
	int no_capture_triggers;  /* no captures on straggler/hang confirmations */
	/* replicas on one shared store (server/replicas.h; NULL id: alone) */
	const char *replica_id;
	uint32_t replica_ttl_ms, replica_lookback_s;
};

static void usage(FILE *f)
{
	fputs("usage: strata-server --listen HOST:PORT --store "
	      "sqlite:PATH|clickhouse://HOST:PORT/DB\n"
	      "  -l, --listen ADDR        address to serve HTTP on (port 0: any free port)\n"
	      "  -s, --store SPEC         sqlite:PATH or clickhouse://HOST:PORT/DB; "
	      "sqlite:PATH?sync=normal\n"
	      "                           syncs at checkpoints only (faster; a host crash may "
	      "lose\n"
	      "                           the last acknowledged batches; default ?sync=full)\n"
	      "  -t, --token-file F       one credential for ingest and read (each line a token)\n"
	      "      --ingest-token-file F  agents (batches, symbol uploads) need one of these\n"
	      "      --read-token-file F  queries and pages need one of these (header, or the\n"
	      "                           cookie POST /login sets)\n"
	      "      --metrics-token-file F  /metrics needs one of these (or a read token)\n"
	      "      --tls-cert F --tls-key F  serve HTTPS (PEM files; TLS 1.2 and 1.3)\n"
	      "      --store-password-file F  ClickHouse password (--store clickhouse://USER@...)\n"
	      "      --clickhouse-cluster NAME  the store is ClickHouse cluster NAME (its\n"
	      "                           remote_servers): --store clickhouse://HOST:PORT,...\n"
	      "                           names every server; local tables on each shard,\n"
	      "                           Distributed tables over them (docs/server.md)\n"
	      "  -b, --buildid-dir DIR    uploaded binaries (default: PATH.buildids / ./buildids)\n"
	      "  -r, --retention-hours H  delete data older than H hours (default 72)\n"
	      "  -j, --threads N          HTTP connection threads: batches, uploads (default 4)\n"
	      "      --query-threads N    threads answering queries and pages, so that no\n"
	      "                           query holds up the agents' batches (default 2;\n"
	      "                           64 more may wait, then 503)\n"
	      "      --max-batch-mb N     compressed batch limit (default 16)\n"
	      "      --max-symbol-mb N    symbol upload limit (default 512)\n"
	      "      --max-buffered-mb N  batch bodies and decodes in memory, all connections\n"
	      "                           together (default 1024; 503 past it)\n"
	      "      --buildid-max-mb N   build-id store bound (default 20480)\n"
	      "      --max-conns-per-ip N  connections one address may hold, of 1024 (default\n"
	      "                           256; 0: no bound, e.g. behind a proxy)\n"
	      "      --no-debuginfod      never ask DEBUGINFOD_URLS\n"
	      "      --diag-window-ms N   breakdown/leak window (default 10000; 0: diagnosis off)\n"
	      "      --diag-delay-ms N    judge a window this long after it ends (default: "
	      "window)\n"
	      "      --diag-on-query      judge windows only when queried (replayed data)\n"
	      "      --hang-min-ms N      an NCCL hang: ranks wait at least this long (default\n"
	      "                           5000) ...\n"
	      "      --hang-periods N     ... and N times the communicator's median period\n"
	      "                           (default 10)\n"
	      "      --alert-webhook URL  POST Alertmanager webhooks on straggler and hang\n"
	      "                           confirm/clear\n"
	      "      --external-url URL   this server's URL, linked from alerts\n"
	      "      --capture-max-s N    longest deep capture (default 60)\n"
	      "      --capture-lead-ms N  an API capture starts this long after it is asked\n"
	      "                           for, so every agent has heard of it (default 15000:\n"
	      "                           one agent period, the upload and the ingest)\n"
	      "      --capture-max-active N  captures running at once (default 8)\n"
	      "      --capture-every-s N  capture each live job's ranks every N s (default:\n"
	      "                           never)\n"
	      "      --no-capture-triggers  no capture when a straggler or hang is confirmed\n"
	      "      --replica-id ID      one of several servers on one ClickHouse store: each\n"
	      "                           job is diagnosed by one replica (docs/server.md)\n"
	      "      --replica-ttl-ms N   a replica silent this long is gone, its jobs taken\n"
	      "                           over (default 10000)\n"
	      "      --replica-lookback-s N  the owner reads each job's collectives this far\n"
	      "                           back (default 30)\n",
	      f);
}

/* --clickhouse-cluster NAME: the store spec (*spec, replaced) gains
 * "?cluster=NAME" (server/store/clickhouse_cluster.c reads it). */
static int with_cluster(char **spec, const char *name, char *err, size_t errsz)
{
	char *s = NULL;

	if (strncmp(*spec, "clickhouse://", 13) || strchr(*spec, '?')) {
		snprintf(err, errsz,
			 "--clickhouse-cluster wants --store clickhouse://HOST:PORT,.../DB");
		return -EINVAL;
	}
	if (asprintf(&s, "%s?cluster=%s", *spec, name) < 0) {
		snprintf(err, errsz, "out of memory");
		return -ENOMEM;
	}
	explicit_bzero(*spec, strlen(*spec));
	free(*spec);
	*spec = s;
	return 0;
}

/* The windowed diagnosis judges only the jobs this replica owns. */
static int owns_job(void *ctx, const char *job)
{
	return replicas__owns(ctx, job, realtime_ns());
}

/* Replicated (--replica-id): membership, and the owner's stragglers from
 * the store instead of at ingest.  0, or 1 with a message. */
static int start_replicas(struct server *srv, const struct server_opts *o)
{
	struct replicas_opts ro = { .sz = sizeof(ro),
				    .id = o->replica_id,
				    .ttl_ns = (uint64_t)o->replica_ttl_ms * 1000000ull,
				    .store = srv->store };

	srv->replicas = replicas__new(&ro);
	if (!srv->replicas) {
		fprintf(stderr,
			"strata-server: --replica-id: %s (an id of 1-%d characters, and a store "
			"replicas share: clickhouse://)\n",
			strerror(errno), REPLICA_ID_LEN - 1);
		return 1;
	}
	if (replicas__start(srv->replicas)) {
		fprintf(stderr, "strata-server: replicas: %s\n", strerror(ENOMEM));
		return 1;
	}
	return 0;
}

static int start_shared(struct server *srv, const struct server_opts *o)
{
	struct diag_shared_opts so = { .sz = sizeof(so),
				       .store = srv->store,
				       .live = srv->live,
				       .replicas = srv->replicas,
				       .captures = srv->captures,
				       .lookback_ns =
					       (uint64_t)o->replica_lookback_s * 1000000000ull };

	srv->shared = diag_shared__new(&so);
	if (!srv->shared || diag_shared__start(srv->shared)) {
		fprintf(stderr, "strata-server: replicas: %s\n", strerror(ENOMEM));
		return 1;
	}
	return 0;
}

static int seed_node(void *ctx, const struct store_node *n)
{
	uint64_t now = realtime_ns();

	/* the store has the agent's clock: one running ahead must not put
	 * the node's last batch in the future (no alert until then) */
	node_health__seed(ctx, n->node, n->last_ns < now ? n->last_ns : now);
	return 0;
}

/* The nodes the store heard from within retention: an agent that died
 * before this server (re)started stays down for StrataAgentDown instead of
 * vanishing from /metrics.  Once, from the main thread, while requests are
 * served already (a big store takes a while). */
static void seed_nodes(struct server *srv, uint32_t retention_h)
{
	uint64_t keep_ns = (uint64_t)retention_h * 3600 * 1000000000ull, now = realtime_ns();
	struct store_filter f = { .from_ns = now > keep_ns ? now - keep_ns : 0 };
	int err = srv->store->ops->nodes(srv->store, &f, seed_node, srv->nodes);

	if (err)
		fprintf(stderr,
			"strata-server: nodes not read from the store (%s): agents "
			"down before this start are not known\n",
			strerror(-err));
}

/*
 * Every connection is an fd, and so are the store's, the uploads' and
 * debuginfod's: with the common soft limit of 1024, a full connection
 * table left none for them (EMFILE in SQLite and curl).  The soft limit
 * goes up to the hard one (at least the connections and a reserve, when
 * the hard limit allows).
 */
static void raise_fd_limit(void)
{
	struct rlimit rl;
	rlim_t want = (rlim_t)CONNECTION_LIMIT * 4 + 1024;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur >= want)
		return;
	rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl))
		fprintf(stderr, "strata-server: cannot raise the fd limit to %llu: %s\n",
			(unsigned long long)rl.rlim_cur, strerror(errno));
}

static int serve(const struct server_opts *o)
{
	struct server srv = { 0 };
	struct capture_triggers *triggers = NULL;
	struct http_daemon *d = NULL;
	char err[512], bdir[PATH_MAX];
	char *spec = NULL; /* the store spec, with its password */
	uint16_t port;
	sigset_t mask;
	int ret = 1;

	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	/* Blocked before any thread starts, so every thread inherits it. */
	pthread_sigmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	curl_global_init(CURL_GLOBAL_DEFAULT); /* before any thread: the alert webhook */
	raise_fd_limit();

	if (server_creds__load(&o->creds, &srv, o->store, &spec, err, sizeof(err))) {
		fprintf(stderr, "strata-server: %s\n", err);
		server_creds__free(&srv, spec);
		return 1;
	}
	if (o->ch_cluster && with_cluster(&spec, o->ch_cluster, err, sizeof(err))) {
		fprintf(stderr, "strata-server: %s\n", err);
		server_creds__free(&srv, spec);
		return 2;
	}
	srv.limits.max_wire = (size_t)o->max_batch_mb << 20;
	srv.limits.max_raw = srv.limits.max_wire * 8;
	srv.max_symbol_upload = (size_t)o->max_symbol_mb << 20;
	srv.max_conns_per_ip = o->max_conns_per_ip;
	srv.query_threads = o->query_threads;
	srv.budget.max = (size_t)o->max_buffered_mb << 20;
	srv.limits.budget = &srv.budget;	   /* decodes draw from it too */
	if (srv.budget.max < srv.limits.max_raw) { /* one decode must always fit */
		fprintf(stderr, "strata-server: --max-buffered-mb below 8 x --max-batch-mb (one "
				"batch's decode)\n");
		server_creds__free(&srv, spec);
		return 2;
	}
	kernel_paths__init(&srv.kpaths);
	if (o->buildid_dir)
		snprintf(bdir, sizeof(bdir), "%s", o->buildid_dir);
	else if (!strncmp(o->store, "sqlite:", 7))
		snprintf(bdir, sizeof(bdir), "%.*s.buildids",
			 (int)store_sqlite__path_len(o->store + 7), o->store + 7);
	else
		snprintf(bdir, sizeof(bdir), "buildids");
	srv.store = store__open(spec, err, sizeof(err));
	if (!srv.store) {
		fprintf(stderr, "strata-server: %s\n", err);
		goto out;
	}
	srv.nodes = node_health__new();
	if (!srv.nodes) {
		fprintf(stderr, "strata-server: out of memory\n");
		goto out;
	}
	srv.captures = capture_registry__new(
		srv.store, &(struct capture_opts){ .max_s = o->capture_max_s,
						   .max_active = o->capture_max_active });
	if (!srv.captures) {
		fprintf(stderr, "strata-server: %s\n", strerror(ENOMEM));
		goto out;
	}
	srv.capture_lead_ms = o->capture_lead_ms;
	if (capture_registry__load(srv.captures, realtime_ns()))
		fprintf(stderr, "strata-server: captures: the store's records could not be read\n");
	srv.bids = buildid_store__open(bdir, (uint64_t)o->buildid_max_mb << 20, 0);
	if (!srv.bids) {
		fprintf(stderr, "strata-server: build-id store %s: %s\n", bdir, strerror(errno));
		goto out;
	}
	srv.asks = sym_asks__new(0, 0);
	if (!srv.asks) {
		fprintf(stderr, "strata-server: %s\n", strerror(ENOMEM));
		goto out;
	}
	srv.sym = central_sym__new(srv.bids, o->debuginfod);
	if (!srv.sym) {
		fprintf(stderr, "strata-server: %s\n", strerror(errno));
		goto out;
	}
	if (o->diag_window_ms && o->replica_id && start_replicas(&srv, o))
		goto out;
	if (o->diag_window_ms) {
		struct diag_engine_opts dopts = {
			.sz = sizeof(dopts),
			.window_ns = (uint64_t)o->diag_window_ms * 1000000ull,
			.delay_ns = (uint64_t)o->diag_delay_ms * 1000000ull,
			.interval_ns = o->diag_on_query ? UINT64_MAX : 0,
			.owns = srv.replicas ? owns_job : NULL,
			.owns_ctx = srv.replicas,
		};

		struct hang_opts hopts = {
			.sz = sizeof(hopts),
			.period_factor = o->hang_periods,
			.min_ns = (uint64_t)o->hang_min_ms * 1000000ull,
		};
		struct diag_live_opts lopts = {
			.sz = sizeof(lopts),
			.alert_webhook = o->alert_webhook,
			.external_url = o->external_url,
			.hang = &hopts,
			.store = srv.store, /* hang reports: GET /api/v1/hangs?from=&to= */
		};

		/* deep captures on confirmations (and on schedule): they
		 * start one agent period later, so every agent has heard */
		if (!o->no_capture_triggers || o->capture_every_s) {
			struct capture_triggers_opts to = { .lead_ms = o->capture_lead_ms,
							    .every_s = o->capture_every_s };

			triggers = capture_triggers__new(srv.captures, &to);
			if (!triggers) {
				fprintf(stderr, "strata-server: %s\n", strerror(ENOMEM));
				goto out;
			}
			lopts.triggers = triggers;
		}

		srv.diag = diag_engine__new(srv.store, &dopts);
		srv.live = diag_live__new(&lopts);
		if (!srv.diag || diag_engine__start(srv.diag) || !srv.live ||
		    diag_live__start(srv.live)) {
			fprintf(stderr, "strata-server: diagnosis: %s\n", strerror(ENOMEM));
			goto out;
		}
		if (srv.replicas && start_shared(&srv, o))
			goto out;
	}
	d = http__start(&srv, o->listen, (int)o->threads, &port, err, sizeof(err));
	if (!d) {
		fprintf(stderr, "strata-server: %s\n", err);
		goto out;
	}
	printf("strata-server: listening on port %u%s, store %s, build-ids in %s\n", port,
	       srv.tls ? " (https)" : "", o->store, bdir);
	fflush(stdout);
	seed_nodes(&srv, o->retention_h);
	for (;;) {
		struct timespec every = { .tv_sec = 60 };
		int sig = sigtimedwait(&mask, NULL, &every);
		uint64_t deleted = 0;

		if (sig == SIGINT || sig == SIGTERM)
			break;
		if (sig < 0 && errno != EAGAIN)
			continue;
		/* Retention, once a minute: cheap when nothing is old. */
		uint64_t keep_ns = (uint64_t)o->retention_h * 3600 * 1000000000ull;
		uint64_t now = realtime_ns();

		if (now > keep_ns && !srv.store->ops->retain(srv.store, now - keep_ns, &deleted)) {
			__atomic_fetch_add(&srv.m.retention_runs, 1, __ATOMIC_RELAXED);
			__atomic_fetch_add(&srv.m.retention_deleted, deleted, __ATOMIC_RELAXED);
		}
		if (now > keep_ns) /* their data is gone: so is their health */
			node_health__forget(srv.nodes, now - keep_ns);
	}
	ret = 0;
out:
	http__stop(d);
	diag_shared__free(srv.shared);
	diag_live__free(srv.live);
	capture_triggers__free(triggers);
	kernel_paths__fini(&srv.kpaths);
	diag_engine__free(srv.diag);
	replicas__free(srv.replicas);
	central_sym__free(srv.sym);
	buildid_store__free(srv.bids);
	sym_asks__free(srv.asks);
	capture_registry__free(srv.captures);
	node_health__free(srv.nodes);
	store__close(srv.store);
	server_creds__free(&srv, spec);
	return ret;
}

int main(int argc, char **argv)
{
	enum {
		OPT_BATCH = 256,
		OPT_SYMBOL,
		OPT_BIDMAX,
		OPT_NODBGD,
		OPT_DIAG_WINDOW,
		OPT_DIAG_DELAY,
		OPT_WEBHOOK,
		OPT_EXTURL,
		OPT_DIAG_ONQUERY,
		OPT_CONNS_PER_IP,
		OPT_QUERY_THREADS,
		OPT_BUFFERED,
		OPT_INGEST_TOKEN,
		OPT_READ_TOKEN,
		OPT_METRICS_TOKEN,
		OPT_TLS_CERT,
		OPT_TLS_KEY,
		OPT_STORE_PASSWORD,
		OPT_CH_CLUSTER,
		OPT_HANG_MIN,
		OPT_HANG_PERIODS,
		OPT_CAPTURE_MAX_S,
		OPT_CAPTURE_LEAD,
		OPT_CAPTURE_ACTIVE,
		OPT_CAPTURE_EVERY,
		OPT_NO_CAPTURE_TRIGGERS,
		OPT_REPLICA_ID,
		OPT_REPLICA_TTL,
		OPT_REPLICA_LOOKBACK,
	};
	static const struct option longopts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "store", required_argument, NULL, 's' },
		{ "token-file", required_argument, NULL, 't' },
		{ "ingest-token-file", required_argument, NULL, OPT_INGEST_TOKEN },
		{ "read-token-file", required_argument, NULL, OPT_READ_TOKEN },
		{ "metrics-token-file", required_argument, NULL, OPT_METRICS_TOKEN },
		{ "tls-cert", required_argument, NULL, OPT_TLS_CERT },
		{ "tls-key", required_argument, NULL, OPT_TLS_KEY },
		{ "store-password-file", required_argument, NULL, OPT_STORE_PASSWORD },
		{ "clickhouse-cluster", required_argument, NULL, OPT_CH_CLUSTER },
		{ "buildid-dir", required_argument, NULL, 'b' },
		{ "retention-hours", required_argument, NULL, 'r' },
		{ "threads", required_argument, NULL, 'j' },
		{ "max-batch-mb", required_argument, NULL, OPT_BATCH },
		{ "max-symbol-mb", required_argument, NULL, OPT_SYMBOL },
		{ "max-buffered-mb", required_argument, NULL, OPT_BUFFERED },
		{ "buildid-max-mb", required_argument, NULL, OPT_BIDMAX },
		{ "max-conns-per-ip", required_argument, NULL, OPT_CONNS_PER_IP },
		{ "query-threads", required_argument, NULL, OPT_QUERY_THREADS },
		{ "no-debuginfod", no_argument, NULL, OPT_NODBGD },
		{ "diag-window-ms", required_argument, NULL, OPT_DIAG_WINDOW },
		{ "diag-delay-ms", required_argument, NULL, OPT_DIAG_DELAY },
		{ "hang-min-ms", required_argument, NULL, OPT_HANG_MIN },
		{ "hang-periods", required_argument, NULL, OPT_HANG_PERIODS },
		{ "alert-webhook", required_argument, NULL, OPT_WEBHOOK },
		{ "diag-on-query", no_argument, NULL, OPT_DIAG_ONQUERY },
		{ "external-url", required_argument, NULL, OPT_EXTURL },
		{ "capture-max-s", required_argument, NULL, OPT_CAPTURE_MAX_S },
		{ "capture-lead-ms", required_argument, NULL, OPT_CAPTURE_LEAD },
		{ "capture-max-active", required_argument, NULL, OPT_CAPTURE_ACTIVE },
		{ "capture-every-s", required_argument, NULL, OPT_CAPTURE_EVERY },
		{ "no-capture-triggers", no_argument, NULL, OPT_NO_CAPTURE_TRIGGERS },
		{ "replica-id", required_argument, NULL, OPT_REPLICA_ID },
		{ "replica-ttl-ms", required_argument, NULL, OPT_REPLICA_TTL },
		{ "replica-lookback-s", required_argument, NULL, OPT_REPLICA_LOOKBACK },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	struct server_opts o = {
		.retention_h = 72,
		.threads = 4,
		.max_batch_mb = 16,
		.max_symbol_mb = 512,
		.buildid_max_mb = 20480,
		.max_buffered_mb = 1024,
		.max_conns_per_ip = 256,
		.query_threads = 2,
		.debuginfod = 1,
		.diag_window_ms = 10000,
		.capture_max_s = 60,
		.capture_lead_ms = 15000,
		.capture_max_active = 8,
		.replica_ttl_ms = 10000,
		.replica_lookback_s = 30,
	};
	int c, bad = 0;
	char oname[64];

	while ((c = getopt_long(argc, argv, "l:s:t:b:r:j:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'l':
			o.listen = optarg;
			break;
		case 's':
			o.store = optarg;
			break;
		case 't':
			o.creds.token = optarg;
			break;
		case OPT_INGEST_TOKEN:
			o.creds.ingest = optarg;
			break;
		case OPT_READ_TOKEN:
			o.creds.read = optarg;
			break;
		case OPT_METRICS_TOKEN:
			o.creds.metrics = optarg;
			break;
		case OPT_TLS_CERT:
			o.creds.tls_cert = optarg;
			break;
		case OPT_TLS_KEY:
			o.creds.tls_key = optarg;
			break;
		case OPT_STORE_PASSWORD:
			o.creds.store_password = optarg;
			break;
		case OPT_CH_CLUSTER:
			o.ch_cluster = optarg;
			break;
		case 'b':
			o.buildid_dir = optarg;
			break;
		case 'r':
			bad |= cli_parse_u32(optarg, 100000, &o.retention_h);
			break;
		case 'j':
			bad |= cli_parse_u32(optarg, 256, &o.threads);
			break;
		case OPT_BATCH:
			bad |= cli_parse_u32(optarg, 1024, &o.max_batch_mb);
			break;
		case OPT_SYMBOL:
			bad |= cli_parse_u32(optarg, 16384, &o.max_symbol_mb);
			break;
		case OPT_BUFFERED:
			bad |= cli_parse_u32(optarg, 1 << 20, &o.max_buffered_mb);
			break;
		case OPT_BIDMAX:
			bad |= cli_parse_u32(optarg, 1 << 24, &o.buildid_max_mb);
			break;
		case OPT_QUERY_THREADS:
			bad |= cli_parse_u32(optarg, 64, &o.query_threads) || !o.query_threads;
			break;
		case OPT_CONNS_PER_IP: /* 0 is documented: no bound per address */
			if (strcmp(optarg, "0") == 0)
				o.max_conns_per_ip = 0;
			else
				bad |= cli_parse_u32(optarg, CONNECTION_LIMIT, &o.max_conns_per_ip);
			break;
		case OPT_NODBGD:
			o.debuginfod = 0;
			break;
		case OPT_DIAG_WINDOW: /* 0 is documented: the windowed engine off */
			if (strcmp(optarg, "0") == 0)
				o.diag_window_ms = 0;
			else
				bad |= cli_parse_u32(optarg, 3600000, &o.diag_window_ms);
			break;
		case OPT_DIAG_DELAY:
			bad |= cli_parse_u32(optarg, 3600000, &o.diag_delay_ms);
			break;
		case OPT_DIAG_ONQUERY:
			o.diag_on_query = 1;
			break;
		case OPT_HANG_MIN:
			bad |= cli_parse_u32(optarg, 86400000, &o.hang_min_ms) || !o.hang_min_ms;
			break;
		case OPT_HANG_PERIODS:
			bad |= cli_parse_u32(optarg, 1000000, &o.hang_periods) || !o.hang_periods;
			break;
		case OPT_WEBHOOK:
			o.alert_webhook = optarg;
			break;
		case OPT_EXTURL:
			o.external_url = optarg;
			break;
		case OPT_CAPTURE_MAX_S:
			bad |= cli_parse_u32(optarg, 3600, &o.capture_max_s) || !o.capture_max_s;
			break;
		case OPT_CAPTURE_LEAD:
			bad |= cli_parse_u32(optarg, 3600000, &o.capture_lead_ms);
			break;
		case OPT_CAPTURE_EVERY:
			bad |= cli_parse_u32(optarg, 7 * 86400, &o.capture_every_s);
			break;
		case OPT_NO_CAPTURE_TRIGGERS:
			o.no_capture_triggers = 1;
			break;
		case OPT_CAPTURE_ACTIVE:
			bad |= cli_parse_u32(optarg, CAPTURE_KEEP, &o.capture_max_active) ||
			       !o.capture_max_active;
			break;
		case OPT_REPLICA_ID:
			o.replica_id = optarg;
			break;
		case OPT_REPLICA_TTL:
			bad |= cli_parse_u32(optarg, 3600000, &o.replica_ttl_ms) ||
			       o.replica_ttl_ms < 500;
			break;
		case OPT_REPLICA_LOOKBACK:
			bad |= cli_parse_u32(optarg, 3600, &o.replica_lookback_s) ||
			       !o.replica_lookback_s;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
		if (bad) {
			fprintf(stderr, "strata-server: bad value for %s: %s\n",
				cli_option_name(c, longopts, oname, sizeof(oname)), optarg);
			return 2;
		}
	}
	if (!o.listen || !o.store || optind != argc) {
		usage(stderr);
		return 2;
	}
	return serve(&o);
}
