// SPDX-License-Identifier: Apache-2.0
/*
 * POST /api/v1/batches: decode (bounded), symbolize centrally, store
 * atomically.  Bad input gets a 4xx that says what was wrong and stores
 * nothing; a store failure is a 503 (the agent keeps the batch and
 * retries).  The answer lists the build-ids the server could not resolve,
 * so the agent uploads those files (POST /api/v1/symbols/HEX).
 */
#include <errno.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/hex.h"
#include "server/diag_live.h"
#include "server/server.h"

static void add(uint64_t *c, uint64_t v)
{
	__atomic_fetch_add(c, v, __ATOMIC_RELAXED);
}

int api_ingest(struct server *srv, const struct request *r, FILE *out)
{
	struct sym_batch sb = { 0 };
	Strata__V1__Batch *b;
	char err[256], id[2 * BATCH_ID_LEN + 1];
	size_t raw_len = 0;
	enum batch_error e;
	uint64_t t0, samples = 0;
	int ret, status;

	add(&srv->m.batches_received, 1);
	add(&srv->m.wire_bytes, r->body_len);
	e = batch_decode(r->body, r->body_len, &srv->limits, &b, &raw_len, err, sizeof(err));
	if (e != BATCH_OK) {
		add(&srv->m.rejected[e], 1);
		return json_error(out, batch_error__http_status(e), "%s", err);
	}
	add(&srv->m.raw_bytes, raw_len);
	build_id_hex(b->batch_id.data, b->batch_id.len, id, sizeof(id));
	t0 = mono_ns();
	ret = central_sym__batch(srv->sym, b, &sb);
	latency_hist__add(&srv->m.symbolize, mono_ns() - t0);
	if (ret) {
		status = json_error(out, 503, "symbolization failed: %s", strerror(-ret));
		goto out;
	}
	/* what is asked of this node is what it may upload */
	for (size_t i = 0; i < sb.nmissing; i++)
		sym_asks__note(srv->asks, b->node, sb.missing[i], mono_ns());
	struct store_batch stb = {
		.pb = b,
		.stacks = sb.stacks,
		.received_ns = realtime_ns(),
		.wire_bytes = r->body_len,
	};
	t0 = mono_ns();
	ret = srv->store->ops->ingest(srv->store, &stb);
	latency_hist__add(&srv->m.store_ingest, mono_ns() - t0);
	if (ret < 0) {
		add(&srv->m.rejected_store_error, 1);
		status = json_error(out, 503, "store failed: %s", strerror(-ret));
		goto out;
	}
	if (ret == 1) {
		add(&srv->m.batches_duplicate, 1);
	} else {
		const Strata__V1__Drops *d = b->drops;

		for (size_t i = 0; i < b->n_cpu_samples; i++)
			samples += b->cpu_samples[i]->count;
		if (d) {
			const uint64_t v[8] = { d->map_full,	     d->stack_lost,
						d->proc_unknown,     d->other,
						d->spool_dropped,    d->cuda_events_lost,
						d->nccl_events_lost, d->batch_rows_dropped };

			for (int i = 0; i < 8; i++)
				add(&srv->m.agent_drops[i], v[i]);
		}
		for (size_t i = 0; i < b->n_kernel_paths; i++)
			kernel_paths__note(&srv->kpaths, b->kernel_paths[i]->name,
					   b->kernel_paths[i]->taken, b->kernel_paths[i]->fallback);
		add(&srv->m.batches_stored, 1);
		add(&srv->m.cpu_samples, samples);
		/* Straggler evidence as it arrives (after the store has it, so
		 * a replay of the range sees the same collectives). */
		if (srv->live)
			diag_live__batch(srv->live, b, stb.received_ns);
	}
	fprintf(out,
		"{\"status\":\"%s\",\"batch_id\":\"%s\",\"cpu_samples\":%llu,"
		"\"missing_build_ids\":[",
		ret == 1 ? "duplicate" : "stored", id, (unsigned long long)samples);
	for (size_t i = 0; i < sb.nmissing; i++)
		fprintf(out, "%s\"%s\"", i ? "," : "", sb.missing[i]);
	fputs("]}\n", out);
	status = 200;
out:
	sym_batch__fini(&sb);
	batch_decode__free(b);
	return status;
}

int api_symbols(struct server *srv, const struct request *r, const char *hex, FILE *out)
{
	int err;

	if (!r->upload) /* server/http.c begins it on the first callback */
		return json_error(out, 500, "no upload for %s", hex);
	err = buildid_store__commit(r->upload);
	if (err) {
		add(&srv->m.symbol_upload_rejected, 1);
		if (err == -ENOEXEC)
			return json_error(out, 422, "not an ELF file with build-id %s", hex);
		if (err == -ENOSPC)
			return json_error(out, 507, "build-id store is full");
		return json_error(out, 500, "cannot store %s: %s", hex, strerror(-err));
	}
	add(&srv->m.symbol_uploads, 1);
	fprintf(out, "{\"status\":\"stored\",\"build_id\":\"%s\"}\n", hex);
	return 200;
}
