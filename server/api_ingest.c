// SPDX-License-Identifier: Apache-2.0
/*
 * POST /api/v1/batches: decode (bounded), symbolize centrally, store
 * atomically.  Bad input gets a 4xx that says what was wrong and stores
 * nothing; a store failure is a 503 (the agent keeps the batch and
 * retries).  The answer lists the build-ids the server could not resolve,
 * so the agent uploads those files (POST /api/v1/symbols/HEX), and the
 * deep captures the node takes part in now (server/capture.h).  An agent
 * that sends "Accept: application/x-strata-reply" gets the answer as a
 * protobuf IngestReply (proto/strata.proto), anyone else as JSON.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/hex.h"
#include "lib/json_str.h"
#include "server/capture.h"
#include "server/diag_live.h"
#include "server/node_health.h"
#include "server/server.h"

#define REPLY_CTYPE "application/x-strata-reply"

static void add(uint64_t *c, uint64_t v)
{
	__atomic_fetch_add(c, v, __ATOMIC_RELAXED);
}

static void reply_json(FILE *out, const Strata__V1__IngestReply *a)
{
	fprintf(out,
		"{\"status\":\"%s\",\"batch_id\":\"%s\",\"cpu_samples\":%llu,"
		"\"missing_build_ids\":[",
		a->status, a->batch_id, (unsigned long long)a->cpu_samples);
	for (size_t i = 0; i < a->n_missing_build_ids; i++)
		fprintf(out, "%s\"%s\"", i ? "," : "", a->missing_build_ids[i]);
	fputs("],\"captures\":[", out);
	for (size_t i = 0; i < a->n_captures; i++) {
		const Strata__V1__CaptureOrder *o = a->captures[i];

		fprintf(out, "%s{\"id\":\"%s\",\"job\":", i ? "," : "", o->id);
		json_write_str(out, o->job);
		fprintf(out,
			",\"start_ns\":%llu,\"end_ns\":%llu,\"freq_hz\":%u,\"offcpu\":%s,"
			"\"gpu_calls\":%s,\"targets\":[",
			(unsigned long long)o->start_ns, (unsigned long long)o->end_ns, o->freq_hz,
			o->offcpu ? "true" : "false", o->gpu_calls ? "true" : "false");
		for (size_t k = 0; k < o->n_targets; k++) {
			fputs(k ? ",{\"node\":" : "{\"node\":", out);
			json_write_str(out, o->targets[k]->node);
			fprintf(out, ",\"pid\":%u}", o->targets[k]->pid);
		}
		fputs("]}", out);
	}
	fputs("]}\n", out);
}

/* The answer, as the agent asked for it. */
static int reply(struct server *srv, const struct request *r, const Strata__V1__Batch *b,
		 Strata__V1__IngestReply *a, FILE *out, const char **ctype)
{
	const char *accept = request__header(r, "Accept");
	struct capture_orders *co = NULL;
	uint8_t *buf;
	size_t len;

	if (srv->captures && (co = malloc(sizeof(*co)))) {
		capture_registry__orders(srv->captures, b->node, realtime_ns(), co);
		a->captures = co->op;
		a->n_captures = co->n;
	}
	if (!accept || !strstr(accept, REPLY_CTYPE)) {
		reply_json(out, a);
		free(co);
		return 200;
	}
	len = strata__v1__ingest_reply__get_packed_size(a);
	buf = malloc(len ? len : 1);
	if (!buf) {
		free(co);
		return json_error(out, 503, "out of memory");
	}
	strata__v1__ingest_reply__pack(a, buf);
	fwrite(buf, 1, len, out);
	free(buf);
	free(co);
	*ctype = REPLY_CTYPE;
	return 200;
}

int api_ingest(struct server *srv, const struct request *r, FILE *out, const char **ctype)
{
	Strata__V1__IngestReply a = STRATA__V1__INGEST_REPLY__INIT;
	char *missing[CENTRAL_SYM_MAX_MISSING];
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
	if (srv->nodes) /* a duplicate too: the agent is alive */
		node_health__batch(srv->nodes, b, stb.received_ns, ret == 1);
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
		if (srv->live && !srv->shared) /* replicas: the owner reads the store */
			diag_live__batch(srv->live, b, stb.received_ns);
		/* captures an agent started itself (CUDA out of memory) */
		if (srv->captures && b->n_capture_runs)
			capture_registry__note_batch(srv->captures, b, stb.received_ns);
	}
	a.status = ret == 1 ? "duplicate" : "stored";
	a.batch_id = id;
	a.cpu_samples = samples;
	for (size_t i = 0; i < sb.nmissing; i++)
		missing[i] = sb.missing[i];
	a.missing_build_ids = missing;
	a.n_missing_build_ids = sb.nmissing;
	status = reply(srv, r, b, &a, out, ctype);
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
		if (err == -EBADMSG)
			return json_error(out, 400,
					  "malformed sparse ELF upload of %s (cut short?)", hex);
		if (err == -ENOSPC)
			return json_error(out, 507, "build-id store is full");
		return json_error(out, 500, "cannot store %s: %s", hex, strerror(-err));
	}
	add(&srv->m.symbol_uploads, 1);
	fprintf(out, "{\"status\":\"stored\",\"build_id\":\"%s\"}\n", hex);
	return 200;
}
