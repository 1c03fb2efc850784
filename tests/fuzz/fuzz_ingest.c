// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target: what strata-server does with a batch after it decoded
 * (fuzz_batch_decode stops there): api_ingest as a request to
 * POST /api/v1/ingest runs it, with the server's own parts - the central
 * symbolizer (build-ids, paths, offsets an agent names), the SQLite store
 * (its rows, strings and stacks), the live straggler and hang detection,
 * the deep captures an agent started.  Every field is an ingest client's.
 * Byte 0 as in fuzz_batch_decode: odd, the rest is the body as sent; even,
 * it is protobuf that is compressed here.  Afterwards every byte the
 * request took from the server's memory budget is given back.  Every
 * METRICS_EVERY inputs the windowed diagnosis judges what was stored and
 * /metrics is rendered: a scraper must read it (tests/fuzz/text_check.h),
 * whatever names the agents sent.
 */
#include <ftw.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "server/buildid_store.h"
#include "server/capture.h"
#include "server/central_sym.h"
#include "server/diag_engine.h"
#include "server/diag_live.h"
#include "server/server.h"
#include "server/store.h"
#include "server/sym_asks.h"
#include "tests/fuzz/text_check.h"

/* The store is recreated after this many inputs: it only grows. */
#define INPUTS_PER_STORE 2000
#define METRICS_EVERY 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Harness state: one server for the whole run, as the real one lives. */
static struct server srv;
static unsigned inputs;
/* the build-id store; the database in DIR.db (tmpfs: fast commits) */
static char dir[] = "/dev/shm/fuzz_ingest.XXXXXX";

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static void remove_dir(void)
{
	char db[64];

	snprintf(db, sizeof(db), "%s.db", dir);
	nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
	nftw(db, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void open_store(void)
{
	char err[256], spec[64];

	if (srv.diag)
		diag_engine__free(srv.diag);
	if (srv.live)
		diag_live__free(srv.live);
	capture_registry__free(srv.captures);
	if (srv.store)
		store__close(srv.store);
	/* a file, as the server's (its readers share it with the writer),
	 * new each time: the old one's files removed first */
	snprintf(spec, sizeof(spec), "%s.db", dir);
	nftw(spec, remove_one, 16, FTW_DEPTH | FTW_PHYS);
	if (mkdir(spec, 0700))
		abort();
	snprintf(spec, sizeof(spec), "sqlite:%s.db/store.db?sync=normal", dir);
	srv.store = store__open(spec, err, sizeof(err));
	srv.captures = srv.store ? capture_registry__new(srv.store, NULL) : NULL;
	srv.live = diag_live__new(&(struct diag_live_opts){ .sz = sizeof(struct diag_live_opts),
							    .store = srv.store });
	/* judged when asked, a few windows a job at a time (speed) */
	srv.diag = srv.store ? diag_engine__new(srv.store,
						&(struct diag_engine_opts){
							.sz = sizeof(struct diag_engine_opts),
							.interval_ns = UINT64_MAX,
							.max_catchup = 4,
						})
			     : NULL;
	if (!srv.store || !srv.captures || !srv.live || !srv.diag) {
		fprintf(stderr, "fuzz_ingest: %s\n", err);
		abort();
	}
}

static void init(void)
{
	if (!mkdtemp(dir))
		abort();
	atexit(remove_dir);
	srv.limits.max_wire = 1 << 20;
	srv.limits.max_raw = 8 << 20;
	srv.budget.max = 16 << 20;
	srv.limits.budget = &srv.budget;
	kernel_paths__init(&srv.kpaths);
	srv.bids = buildid_store__open(dir, 64 << 20, 0);
	srv.asks = sym_asks__new(0, 0);
	srv.sym = srv.bids ? central_sym__new(srv.bids, 0) : NULL;
	if (!srv.sym || !srv.asks)
		abort();
	open_store();
}

/* The jobs' newest data, up to 16 of them. */
struct lasts {
	uint64_t v[16];
	size_t n;
};

static int newest(void *ctx, const struct store_job *j)
{
	struct lasts *l = ctx;

	if (l->n < 16)
		l->v[l->n++] = j->last_ns;
	return 0;
}

static int by_value(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct request r = { .method = "POST", .path = "/api/v1/ingest" };
	const char *ctype = NULL;
	uint8_t *z = NULL;
	char *text = NULL;
	size_t text_len = 0;
	FILE *out;
	int status;

	if (size < 1)
		return 0;
	if (!srv.store)
		init();
	if (++inputs % INPUTS_PER_STORE == 0)
		open_store();
	if (data[0] & 1) {
		r.body = (const char *)data + 1;
		r.body_len = size - 1;
	} else {
		size_t cap = ZSTD_compressBound(size - 1), n;

		z = malloc(cap);
		if (!z)
			return 0;
		n = ZSTD_compress(z, cap, data + 1, size - 1, 1);
		if (ZSTD_isError(n)) {
			free(z);
			return 0;
		}
		r.body = (const char *)z;
		r.body_len = n;
	}
	out = open_memstream(&text, &text_len);
	if (!out)
		abort();
	status = api_ingest(&srv, &r, out, &ctype);
	fclose(out);
	/* a status the agent's uploader knows, and a body to go with it */
	if ((status != 200 && status != 400 && status != 413 && status != 415 && status != 422 &&
	     status != 503 && status != 507) ||
	    !text_len)
		abort();
	free(text);
	free(z);
	if (srv.budget.used)
		abort();
	if (inputs % METRICS_EVERY == 0) {
		struct lasts l = { .n = 0 };

		/* "now" just after each job's newest data in turn (oldest
		 * first): its windows are judged, the jobs before go idle */
		srv.store->ops->jobs(srv.store, &(struct store_filter){ 0 }, newest, &l);
		qsort(l.v, l.n, sizeof(l.v[0]), by_value);
		for (size_t i = 0; i < l.n; i++)
			diag_engine__run(srv.diag, l.v[i] < UINT64_MAX / 2 ? l.v[i] + 30000000000ull
									   : l.v[i]);
		text = NULL;
		out = open_memstream(&text, &text_len);
		if (!out || api_metrics(&srv, out) != 200)
			abort();
		fclose(out);
		prom_text_check((const unsigned char *)text, text_len);
		free(text);
	}
	return 0;
}
