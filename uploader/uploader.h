/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Ships spooled batches to strata-server from its own thread, so the
 * agent's sampling loop never waits on the network.
 *
 *  - POST URL/api/v1/batches (Content-Encoding: zstd), bearer token from
 *    --token-file, TLS verified against --ca-file when the URL is https.
 *  - In order: the oldest spooled batch goes first and leaves the spool only
 *    when the server took it (2xx; "duplicate" counts as taken: the server
 *    dedups by batch id).  A batch the server refuses for good (400, 413,
 *    422) is dropped and counted, so one bad batch cannot block the rest.
 *  - Unreachable, 5xx, 401/403, 429: exponential backoff with jitter (half
 *    the delay fixed, half random), from backoff_min to backoff_max.
 *  - The server lists build-ids it cannot resolve; the files behind them
 *    (noted by the agent) are uploaded once each, bounded in size and count.
 *  - The answer is asked for as a protobuf IngestReply (Accept:
 *    application/x-strata-reply; a server that answers JSON is read too)
 *    and handed to on_reply: the deep captures the server orders.
 */
#ifndef STRATA_UPLOADER_UPLOADER_H
#define STRATA_UPLOADER_UPLOADER_H

#include <stddef.h>
#include <stdint.h>

#include "uploader/spool.h"

#include "strata.pb-c.h"

struct uploader_opts {
	size_t sz;
	const char *url;	/* http[s]://host:port, no trailing path */
	const char *token_file; /* NULL: no Authorization header */
	const char *ca_file;	/* NULL: the system's CAs */
	const char *spool_dir;
	uint64_t spool_max_bytes;    /* 0 = 256 MiB */
	uint32_t timeout_ms;	     /* per request; 0 = 10000 */
	uint32_t backoff_min_ms;     /* 0 = 500 */
	uint32_t backoff_max_ms;     /* 0 = 60000 */
	uint64_t max_symbol_file;    /* bytes sent of a file (its loaded code and
				      * data left out, elf_slim.h); 0 = 512 MiB */
	uint32_t max_symbol_uploads; /* symbol files sent or tried an hour; 0 = 1024 */
	const char *node;	     /* the batches' node name (NULL: hostname): the
				      * server takes symbol files only for the ids
				      * it asked of this node (X-Strata-Node) */
	/* Every answer to a batch (IngestReply, proto/strata.proto: the deep
	 * captures the node takes part in), on the sender's thread; NULL:
	 * none.  reply is valid during the call. */
	void (*on_reply)(void *ctx, const Strata__V1__IngestReply *reply);
	void *on_reply_ctx;
};

struct uploader_stats {
	uint64_t sent, duplicates, attempts, failures; /* failures: no 2xx, retried */
	uint64_t rejected;			       /* refused for good, dropped */
	uint64_t replies_bad;			       /* protobuf answers that did not decode */
	uint64_t symbols_sent, symbols_failed, symbols_skipped; /* skipped: unknown/too big/bound */
	uint64_t symbols_noted_resets; /* the noted-files table, full, started again */
	uint32_t backoff_ms;	       /* now; 0 when healthy */
	int last_status;	       /* last HTTP status, 0 transport error */
	struct spool_stats spool;
};

struct uploader;

/* Reads the token, opens the spool, starts the thread.  NULL + errno (a
 * message is logged). */
struct uploader *uploader__new(const struct uploader_opts *opts);
/* Stops the thread (after at most one request in flight); keeps the spool. */
void uploader__free(struct uploader *u);

/* Spools one compressed batch and wakes the sender.  carried: the
 * batch's Drops.spool_dropped (told again if the batch is lost too).
 * 0 or -errno. */
int uploader__submit(struct uploader *u, const void *data, size_t len, uint64_t carried);
/* Remembers which file holds a build-id (for symbol uploads). Thread-safe. */
void uploader__note_file(void *u, const char *build_id_hex, const char *path);
/* Waits until the spool is empty or timeout_ms passed; 0 or -ETIMEDOUT. */
int uploader__drain(struct uploader *u, uint32_t timeout_ms);
/* Batches the spool lost since the last call, with the drops they
 * carried (for Drops.spool_dropped: spool_stats.to_report). */
uint64_t uploader__take_spool_dropped(struct uploader *u);
void uploader__stats(struct uploader *u, struct uploader_stats *st);

/* Parses the build-ids of an ingest answer's "missing_build_ids" array into
 * ids (n of BUILD-ID hex strings, 129 bytes each); returns how many. */
int uploader__parse_missing(const char *json, char (*ids)[129], int max);
/* The same of a protobuf IngestReply (len bytes); *reply gets the decoded
 * answer (free with strata__v1__ingest_reply__free_unpacked(r, NULL)) or
 * NULL when it does not decode. */
int uploader__parse_reply(const uint8_t *buf, size_t len, char (*ids)[129], int max,
			  Strata__V1__IngestReply **reply);

#endif /* STRATA_UPLOADER_UPLOADER_H */
