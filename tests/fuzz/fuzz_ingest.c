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
 * request took from the server's memory budget is given back.
 */
#include <ftw.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "server/buildid_store.h"
#include "server/capture.h"
#include "server/central_sym.h"
#include "server/diag_live.h"
#include "server/server.h"
#include "server/store.h"
#include "server/sym_asks.h"

/* The store is recreated after this many inputs: it only grows. */
#define INPUTS_PER_STORE 2000

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Harness state: one server for the whole run, as the real one lives. */
static struct server srv;
static unsigned inputs;
static char dir[] = "/tmp/fuzz_ingest.XXXXXX"; /* the build-id store */

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static void remove_dir(void)
{
	nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void open_store(void)
{
	char err[256];

	if (srv.live)
		diag_live__free(srv.live);
	capture_registry__free(srv.captures);
	if (srv.store)
		store__close(srv.store);
	srv.store = store__open("sqlite::memory:", err, sizeof(err));
	srv.captures = srv.store ? capture_registry__new(srv.store, NULL) : NULL;
	srv.live = diag_live__new(&(struct diag_live_opts){ .sz = sizeof(struct diag_live_opts),
							    .store = srv.store });
	if (!srv.store || !srv.captures || !srv.live) {
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
	return 0;
}
