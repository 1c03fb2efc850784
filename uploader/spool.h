/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agent's bounded on-disk spool: every batch is written here first and
 * removed only once the server took it, so an outage (or an agent restart)
 * loses nothing until the bound.  Files are DIR/<seq>.batch, seq increasing
 * (continued across restarts), replayed oldest first.  When a new batch
 * would exceed max_bytes, the oldest batches are deleted and counted.
 * Thread-safe (the agent writes, the upload thread reads and removes).
 */
#ifndef STRATA_UPLOADER_SPOOL_H
#define STRATA_UPLOADER_SPOOL_H

#include <stddef.h>
#include <stdint.h>

struct spool_stats {
	uint64_t files, bytes; /* now */
	uint64_t written;      /* batches put */
	uint64_t dropped_full; /* oldest batches deleted to make room */
	uint64_t write_failed; /* put failed (disk full, ...) */
	uint64_t recovered;    /* found at open (left by an earlier run) */
};

struct spool;

/* Creates dir if needed and takes over the batches it holds.  NULL + errno. */
struct spool *spool__open(const char *dir, uint64_t max_bytes);
void spool__free(struct spool *s);

/* Writes one batch (atomically: temp file + rename).  0 or -errno
 * (-EFBIG: the batch alone is larger than max_bytes). */
int spool__put(struct spool *s, const void *data, size_t len, uint64_t *seq);

/* Reads the oldest batch into *data (malloc'd).  0, -ENOENT when empty. */
int spool__oldest(struct spool *s, uint64_t *seq, uint8_t **data, size_t *len);

/* Deletes batch seq (done, or refused for good).  0 or -ENOENT. */
int spool__remove(struct spool *s, uint64_t seq);

size_t spool__count(struct spool *s);
void spool__stats(struct spool *s, struct spool_stats *st);

#endif /* STRATA_UPLOADER_SPOOL_H */
