/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agent's bounded on-disk spool: every batch is written here first and
 * removed only once the server took it, so an outage (or an agent restart)
 * loses nothing until the bound.  Files are DIR/<seq>.batch, seq increasing
 * (continued across restarts), replayed oldest first.  When a new batch
 * would exceed max_bytes, the oldest batches are deleted and counted.
 *
 * The node's disk is the training job's too: a checkpoint can fill it, a
 * cleanup can remove the directory.  Neither stops the batches while the
 * server is reachable: a directory found gone is made again, and a batch
 * the disk refuses (full, read-only, unwritable) is held in memory, up to
 * min(max_bytes, SPOOL_MEM_MAX), oldest first out, in the same order as the
 * files.  Held batches are written out at spool__free when the disk takes
 * them again, so an agent's restart keeps them (else a warning counts
 * them).  A spool whose directory
 * cannot be made at open runs from memory only (a warning is logged).
 * Thread-safe (the agent writes, the upload thread reads and removes).
 */
#ifndef STRATA_UPLOADER_SPOOL_H
#define STRATA_UPLOADER_SPOOL_H

#include <stddef.h>
#include <stdint.h>

#define SPOOL_MEM_MAX (32ull << 20) /* bytes held in memory at most */

struct spool_stats {
	uint64_t files, bytes;	       /* now, in memory included */
	uint64_t mem_files, mem_bytes; /* now, held in memory */
	uint64_t written;	       /* batches put (on disk or in memory) */
	uint64_t dropped_full;	       /* oldest batches dropped to make room */
	uint64_t write_failed;	       /* batches lost at put: larger than the bound,
					* or refused by the disk with memory full */
	uint64_t disk_failed;	       /* refused by the disk (then held in memory
					* when it fits there) */
	uint64_t dir_made;	       /* the directory was gone and made again */
	uint64_t lost;		       /* spooled files gone or unreadable when sent */
	uint64_t recovered;	       /* found at open (left by an earlier run) */
	/* The drops to tell the server, summed since the spool opened: 1 for
	 * each batch lost (the four ways above) plus the drops that batch was
	 * carrying, told again by a later batch. */
	uint64_t to_report;
};

struct spool;

/* Creates dir if needed and takes over the batches it holds.  When dir
 * cannot be made or read, the spool still opens, in memory: *dir_err is
 * then -errno (0 when dir is usable).  NULL + errno only for no memory. */
struct spool *spool__open(const char *dir, uint64_t max_bytes, int *dir_err);
void spool__free(struct spool *s);

/* Writes one batch (atomically: temp file + rename), else holds it in
 * memory.  carried: the drops the batch tells the server (told again if
 * the batch is lost).  0 or -errno: -EFBIG, the batch alone is larger
 * than max_bytes; the disk's error when memory could not take it either. */
int spool__put(struct spool *s, const void *data, size_t len, uint64_t carried, uint64_t *seq);

/* Reads the oldest batch into *data (malloc'd).  0, -ENOENT when empty.
 * A file gone or unreadable is dropped (counted in lost), and the next
 * one read. */
int spool__oldest(struct spool *s, uint64_t *seq, uint8_t **data, size_t *len);

/* Deletes batch seq (done, or refused for good).  0 or -ENOENT. */
int spool__remove(struct spool *s, uint64_t seq);

/* Batches spooled (on disk or in memory). */
size_t spool__count(struct spool *s);
void spool__stats(struct spool *s, struct spool_stats *st);

#endif /* STRATA_UPLOADER_SPOOL_H */
