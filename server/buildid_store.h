/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The server's build-id store: ELF files (binaries or their debug files)
 * uploaded by agents, one per build-id, under DIR/<first 2 hex>/<rest>.
 * An upload is accepted only when it is an ELF whose own build-id note is
 * exactly the one it claims (same length and bytes); the first good upload
 * of an id wins, and a stored file found not to match its id (checked
 * once, on first use) is dropped so the next upload replaces it.  Uploads
 * stream to a file under DIR/.incoming (never held in memory) and are
 * renamed into place once verified; a sparse ELF upload (an agent leaves a
 * library's loaded code and data out) is stored with its holes.  Bounded in bytes and files: the
 * least recently used files are evicted for room (their last use survives restarts in the mtime);
 * an upload larger than the whole bound is refused.  Every outcome is counted.  Thread-safe.
 */
#ifndef STRATA_SERVER_BUILDID_STORE_H
#define STRATA_SERVER_BUILDID_STORE_H

#include <stddef.h>
#include <stdint.h>

#define BUILDID_HEX_MAX 129 /* 64 bytes of id as hex + NUL */

struct buildid_store_stats {
	uint64_t files, bytes; /* stored now */
	uint64_t incoming;     /* now: taken by uploads in progress (at most half the bound) */
	uint64_t uploads, rejected, refused_full; /* since start */
	uint64_t evicted;			  /* least recently used, for room */
	uint64_t replaced;			  /* stored files that failed their check */
};

struct buildid_store;

/* Creates dir if needed and indexes what it holds (evicting down to the
 * bounds; max_files 0: 262144).  NULL + errno. */
struct buildid_store *buildid_store__open(const char *dir, uint64_t max_bytes, uint32_t max_files);
void buildid_store__free(struct buildid_store *s);

/* Path of the file for hex (a lowercase build-id) into buf, counted as a
 * use; 0, or -ENOENT when the store does not have it (or its file just
 * failed its check), -EINVAL for a malformed id. */
int buildid_store__path(struct buildid_store *s, const char *hex, char *buf, size_t sz);

/*
 * Stores data[0..n) as the file of hex.  0 (stored, or already had it),
 * -EINVAL (malformed id), -ENOEXEC (not an ELF with that build-id),
 * -ENOSPC (store full), or another -errno.
 */
int buildid_store__put(struct buildid_store *s, const char *hex, const void *data, size_t n);

/*
 * Streaming upload of the file of hex: buildid_store__begin opens a
 * temporary file and reserves expect bytes (0: unknown) of the bound;
 * buildid_upload__write appends (reserving more as it grows);
 * buildid_store__commit verifies and moves the file into place (0, or as
 * buildid_store__put) and frees u; buildid_upload__abort drops it.
 * begin: 0, -EEXIST (the store has that id: the first upload wins),
 * -EINVAL, -ENOSPC (store full) or -errno; write: 0, -ENOSPC or -errno (the
 * upload is then only good for abort).
 */
struct buildid_upload;
int buildid_store__begin(struct buildid_store *s, const char *hex, uint64_t expect,
			 struct buildid_upload **out);
int buildid_upload__write(struct buildid_upload *u, const void *data, size_t n);
/* The body is a sparse ELF (lib/sparse_elf.h), not the file whole: write
 * takes it in pieces and places each range at its offset (holes take no
 * disk, and only the bytes sent count against the bound); write and
 * commit fail with -EBADMSG when it is malformed or cut short.  0 or
 * -ENOMEM.  Right after begin. */
int buildid_upload__sparse(struct buildid_upload *u);
int buildid_store__commit(struct buildid_upload *u);
void buildid_upload__abort(struct buildid_upload *u);

void buildid_store__stats(struct buildid_store *s, struct buildid_store_stats *st);

/* 1 when hex is 2..128 lowercase hex digits (an even number). */
int buildid_hex_valid(const char *hex);

#endif /* STRATA_SERVER_BUILDID_STORE_H */
