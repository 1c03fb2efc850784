// SPDX-License-Identifier: Apache-2.0
/* GET /metrics: Prometheus text exposition of the server's counters. */
#include <inttypes.h>

#include "lib/clock.h"
#include "server/capture.h"
#include "server/diag_engine.h"
#include "server/diag_live.h"
#include "server/node_health.h"
#include "server/diag_shared.h"
#include "server/query_pool.h"
#include "server/replicas.h"
#include "server/server.h"

static uint64_t ld(const uint64_t *v)
{
	return __atomic_load_n(v, __ATOMIC_RELAXED);
}

static size_t ld64(const size_t *v)
{
	return __atomic_load_n(v, __ATOMIC_RELAXED);
}

static void counter(FILE *o, const char *name, const char *help, uint64_t v)
{
	fprintf(o, "# HELP %s %s\n# TYPE %s counter\n%s %" PRIu64 "\n", name, help, name, name, v);
}

static void gauge(FILE *o, const char *name, const char *help, double v)
{
	fprintf(o, "# HELP %s %s\n# TYPE %s gauge\n%s %g\n", name, help, name, name, v);
}

static void histogram(FILE *o, const char *name, const char *help, const struct latency_hist *h)
{
	static const char *const le[METRIC_BUCKETS] = { "0.001", "0.005", "0.025", "0.1",
							"0.25",	 "1",	  "5",	   "30" };

	fprintf(o, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
	for (int i = 0; i < METRIC_BUCKETS; i++)
		fprintf(o, "%s_bucket{le=\"%s\"} %" PRIu64 "\n", name, le[i], ld(&h->buckets[i]));
	fprintf(o, "%s_bucket{le=\"+Inf\"} %" PRIu64 "\n%s_sum %.6f\n%s_count %" PRIu64 "\n", name,
		ld(&h->count), name, ld(&h->sum_ns) / 1e9, name, ld(&h->count));
}

int api_metrics(struct server *srv, FILE *o)
{
	static const char *const reasons[] = { "ok",	       "too_large",   "not_zstd",
					       "bad_protobuf", "bad_version", "invalid",
					       "busy" };
	const struct server_metrics *m = &srv->m;
	struct central_sym_stats cs;
	struct buildid_store_stats bs;
	struct sym_asks_stats as;
	struct store_stats ss;
	struct store_sizes sz;
	uint64_t age_ns;

	counter(o, "strata_batches_received_total", "POSTed batches", ld(&m->batches_received));
	counter(o, "strata_batches_stored_total", "batches stored", ld(&m->batches_stored));
	counter(o, "strata_batches_duplicate_total", "batches already stored (agent retries)",
		ld(&m->batches_duplicate));
	fputs("# HELP strata_batches_rejected_total batches refused, by reason\n"
	      "# TYPE strata_batches_rejected_total counter\n",
	      o);
	for (int i = 1; i <= BATCH_BUSY; i++)
		fprintf(o, "strata_batches_rejected_total{reason=\"%s\"} %" PRIu64 "\n", reasons[i],
			ld(&m->rejected[i]));
	fprintf(o, "strata_batches_rejected_total{reason=\"unauthorized\"} %" PRIu64 "\n",
		ld(&m->rejected_unauthorized));
	fprintf(o, "strata_batches_rejected_total{reason=\"store_error\"} %" PRIu64 "\n",
		ld(&m->rejected_store_error));
	gauge(o, "strata_request_memory_bytes",
	      "request bodies and batch decodes in memory now (all connections)",
	      (double)ld64(&srv->budget.used));
	gauge(o, "strata_request_memory_peak_bytes", "highest strata_request_memory_bytes seen",
	      (double)ld64(&srv->budget.peak));
	gauge(o, "strata_request_memory_limit_bytes", "their bound (--max-buffered-mb)",
	      (double)srv->budget.max);
	counter(o, "strata_ingest_wire_bytes_total", "compressed bytes received",
		ld(&m->wire_bytes));
	counter(o, "strata_ingest_raw_bytes_total", "decompressed bytes of decoded batches",
		ld(&m->raw_bytes));
	counter(o, "strata_ingest_cpu_samples_total", "CPU samples stored", ld(&m->cpu_samples));
	static const char *const drops[8] = { "map_full",	  "stack_lost",
					      "proc_unknown",	  "other",
					      "spool_dropped",	  "cuda_events_lost",
					      "nccl_events_lost", "batch_rows_dropped" };
	fputs("# HELP strata_agent_drops_total what agents reported losing, by kind\n"
	      "# TYPE strata_agent_drops_total counter\n",
	      o);
	for (int i = 0; i < 8; i++)
		fprintf(o, "strata_agent_drops_total{kind=\"%s\"} %" PRIu64 "\n", drops[i],
			ld(&m->agent_drops[i]));
	kernel_paths__print(&srv->kpaths, o);
	if (srv->nodes) /* docs/metrics.md: agent health */
		node_health__metrics(srv->nodes, o);
	histogram(o, "strata_store_ingest_seconds", "time to store one batch", &m->store_ingest);
	histogram(o, "strata_query_seconds", "time to answer one API query", &m->query);
	histogram(o, "strata_symbolize_seconds", "time to symbolize one batch", &m->symbolize);
	counter(o, "strata_queries_total", "API queries", ld(&m->queries));
	counter(o, "strata_query_errors_total", "API queries answered 5xx", ld(&m->query_errors));
	counter(o, "strata_queries_refused_total",
		"queries and pages answered 503: the query threads' queue was full",
		ld(&m->queries_refused));
	counter(o, "strata_queries_abandoned_total",
		"queries and pages whose client hung up before the answer: stopped, or never run",
		ld(&m->queries_abandoned));
	if (srv->queries) {
		struct query_pool_stats qs;

		query_pool__stats(srv->queries, &qs);
		gauge(o, "strata_queries_waiting", "queries and pages waiting for a query thread",
		      (double)qs.waiting);
		gauge(o, "strata_queries_running", "queries and pages on the query threads",
		      (double)qs.running);
	}

	central_sym__stats(srv->sym, &cs);
	counter(o, "strata_symbolize_native_frames_total", "native frames symbolized",
		cs.frames_native);
	counter(o, "strata_symbolize_resolved_frames_total", "native frames given a function",
		cs.frames_resolved);
	gauge(o, "strata_symbolize_hit_rate", "resolved / native frames since start",
	      cs.frames_native ? (double)cs.frames_resolved / (double)cs.frames_native : 0);
	counter(o, "strata_symbolize_late_resolved_total",
		"frames stored unresolved and resolved at query time", cs.late_resolved);
	counter(o, "strata_symbolize_stack_cache_hits_total",
		"wire stacks whose symbolized frames were reused", cs.stacks.hits);
	counter(o, "strata_symbolize_stack_cache_misses_total", "wire stacks symbolized",
		cs.stacks.misses);
	gauge(o, "strata_symbolize_stack_cache_entries", "symbolized stacks cached",
	      (double)cs.stacks.entries);
	counter(o, "strata_symbolize_stack_cache_resets_total",
		"times the full stack cache was emptied", cs.stacks.resets);
	counter(o, "strata_symbolize_stack_cache_refused_total",
		"stacks not cached: string pool at its bound", cs.stacks.refused_full);
	counter(o, "strata_symbolize_generations_total",
		"times symbolization started afresh: the symbolizer's names or the stack "
		"cache passed their budget (the old ones freed once no batch or query holds "
		"them)",
		cs.generations);
	gauge(o, "strata_symbolize_generations_live",
	      "symbolization generations in memory: the current one and those batches or "
	      "queries still hold (stays near 1; growth is a leak)",
	      (double)(cs.generations - cs.generations_freed + 1));
	gauge(o, "strata_symbolize_symbolizer_string_bytes",
	      "names, files and keys the symbolizer holds (budget 128 MiB)",
	      (double)cs.symbolizer_string_bytes);
	gauge(o, "strata_symbolize_stack_cache_string_bytes",
	      "strings of the symbolized stack cache (budget 256 MiB)",
	      (double)cs.stacks.string_bytes);
	counter(o, "strata_symbolize_cache_lookups_total", "symbolizer lookups", cs.lookups);
	counter(o, "strata_symbolize_cache_hits_total", "symbolizer cache hits", cs.cache_hits);
	counter(o, "strata_symbolize_modules_degraded_total",
		"files whose symbol table or DWARF was refused (too big, or malformed strings): "
		"their frames get what is left",
		cs.modules_degraded);
	counter(o, "strata_symbolize_missing_build_id_frames_total",
		"frames whose build-id the server lacks", cs.missing_build_ids);
	counter(o, "strata_debuginfod_found_total", "debug files from debuginfod",
		cs.debuginfod_found);
	counter(o, "strata_debuginfod_failed_total", "debuginfod misses", cs.debuginfod_failed);
	counter(o, "strata_debuginfod_negative_hits_total",
		"lookups answered by a remembered miss (not asked again within the TTL)",
		cs.debuginfod_negative_hits);
	counter(o, "strata_debuginfod_not_asked_total", "build-ids not queued: queue full",
		cs.debuginfod_not_asked);
	counter(o, "strata_debuginfod_capped_total",
		"build-ids left for a later batch: over a batch's cap of new queries",
		cs.debuginfod_capped);
	gauge(o, "strata_debuginfod_pending", "queries queued or in flight",
	      (double)cs.debuginfod_pending);
	counter(o, "strata_symbolize_pending_frames_total",
		"frames stored unresolved while their file was being fetched (resolved at query "
		"time)",
		cs.frames_pending);

	buildid_store__stats(srv->bids, &bs);
	gauge(o, "strata_buildid_store_files", "files in the build-id store", (double)bs.files);
	gauge(o, "strata_buildid_store_bytes", "bytes in the build-id store", (double)bs.bytes);
	gauge(o, "strata_buildid_store_incoming_bytes",
	      "bytes of symbol uploads in progress (at most half the store's bound)",
	      (double)bs.incoming);
	counter(o, "strata_buildid_store_evicted_total",
		"files removed, least recently used first, to stay within the bounds", bs.evicted);
	counter(o, "strata_buildid_store_replaced_total",
		"stored files dropped because their build-id note is not their id", bs.replaced);
	sym_asks__stats(srv->asks, &as);
	counter(o, "strata_symbol_asks_total", "build-ids asked of nodes (missing in answers)",
		as.asked);
	counter(o, "strata_symbol_asks_dropped_total", "asks pushed out of the bounded table",
		as.dropped);
	counter(o, "strata_symbol_uploads_not_asked_total",
		"symbol uploads refused: that node was not asked for that build-id", as.refused);
	counter(o, "strata_symbol_uploads_total", "symbol files accepted", ld(&m->symbol_uploads));
	counter(o, "strata_symbol_uploads_rejected_total",
		"symbol uploads refused (not that ELF, store full)",
		ld(&m->symbol_upload_rejected));

	if (!store_sizes__get(&srv->sizes, srv->store, mono_ns(), &sz, &age_ns)) {
		gauge(o, "strata_store_stacks", "distinct stacks stored", (double)sz.stacks);
		gauge(o, "strata_store_cpu_rows", "CPU sample rows stored", (double)sz.cpu_rows);
		gauge(o, "strata_store_event_rows", "timed event rows stored",
		      (double)sz.event_rows);
		gauge(o, "strata_store_bytes", "store size on disk", (double)sz.bytes_on_disk);
		gauge(o, "strata_store_sizes_age_seconds",
		      "age of the four above: read from the store at most once a minute",
		      (double)age_ns / 1e9);
	}
	counter(o, "strata_store_size_reads_total", "reads of the store's sizes (scans)",
		ld(&srv->sizes.reads));
	if (!srv->store->ops->stats(srv->store, &ss)) {
		counter(o, "strata_store_columns_added_total",
			"columns added at open to a database an older server made",
			ss.columns_added);
		counter(o, "strata_store_commit_groups_total",
			"inserts of several batches' rows at once (ClickHouse group commit)",
			ss.commit_groups);
		counter(o, "strata_store_commit_grouped_batches_total",
			"batches written in those groups", ss.commit_grouped);
		counter(o, "strata_store_commit_group_splits_total",
			"groups the store refused, their batches then written one by one",
			ss.commit_splits);
	}
	counter(o, "strata_retention_runs_total", "retention passes", ld(&m->retention_runs));
	counter(o, "strata_retention_deleted_batches_total", "batches deleted by retention",
		ld(&m->retention_deleted));
	if (srv->captures) /* docs/metrics.md: deep captures */
		capture_registry__metrics(srv->captures, o);
	if (srv->live) /* docs/metrics.md: stragglers */
		diag_live__metrics(srv->live, o);
	if (srv->diag) /* docs/metrics.md: breakdown, leaks */
		diag_engine__metrics(srv->diag, o);
	if (srv->replicas) /* docs/metrics.md: replicas */
		replicas__metrics(srv->replicas, o);
	if (srv->shared)
		diag_shared__metrics(srv->shared, o);
	return 200;
}
