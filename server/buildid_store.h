/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The server's build-id store: ELF files (binaries or their debug files)
 * uploaded by agents, one per build-id, under DIR/<first 2 hex>/<rest>.
 * An upload is accepted only when it is an ELF whose own build-id note is
 * the one it claims, so a client cannot plant symbols for another binary.
 * Bounded: uploads that would take the store past max_bytes are refused
 * and counted.  Thread-safe.
 */
#ifndef STRATA_SERVER_BUILDID_STORE_H
#define STRATA_SERVER_BUILDID_STORE_H

#include <stddef.h>
#include <stdint.h>

#define BUILDID_HEX_MAX 129 /* 64 bytes of id as hex + NUL */

struct buildid_store_stats {
	uint64_t files, bytes;			  /* now */
	uint64_t uploads, rejected, refused_full; /* since start */
};

struct buildid_store;

/* Creates dir if needed and indexes what it holds.  NULL + errno. */
struct buildid_store *buildid_store__open(const char *dir, uint64_t max_bytes);
void buildid_store__free(struct buildid_store *s);

/* Path of the file for hex (a lowercase build-id) into buf; 0, or -ENOENT
 * when the store does not have it, -EINVAL for a malformed id. */
int buildid_store__path(struct buildid_store *s, const char *hex, char *buf, size_t sz);

/*
 * Stores data[0..n) as the file of hex.  0 (stored, or already had it),
 * -EINVAL (malformed id), -ENOEXEC (not an ELF with that build-id),
 * -ENOSPC (store full), or another -errno.
 */
int buildid_store__put(struct buildid_store *s, const char *hex, const void *data, size_t n);

void buildid_store__stats(struct buildid_store *s, struct buildid_store_stats *st);

/* 1 when hex is 2..128 lowercase hex digits (an even number). */
int buildid_hex_valid(const char *hex);

#endif /* STRATA_SERVER_BUILDID_STORE_H */
