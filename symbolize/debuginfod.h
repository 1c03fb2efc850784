/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Optional debuginfod client: libdebuginfod.so.1 is dlopen'ed on first
 * use, so strata neither links nor requires it.  Queries go out only when
 * DEBUGINFOD_URLS is set, give up quickly on an unreachable server, and
 * back off after a network failure; every outcome is counted.
 */
#ifndef STRATA_DEBUGINFOD_H
#define STRATA_DEBUGINFOD_H

#include <stddef.h>
#include <stdint.h>

struct debuginfod;

struct debuginfod_stats {
	uint64_t queries; /* requests sent */
	uint64_t found;	  /* debug files obtained */
	uint64_t failed;  /* not found, network error or timeout */
	uint64_t skipped; /* not sent: backing off, no URLs, no library */
};

struct debuginfod *debuginfod__new(void);
void debuginfod__free(struct debuginfod *d);
/*
 * Fetches (or takes from its cache) the debug file for a build-id.
 * Returns an open fd and the file's malloc'd path in *path, or -errno:
 * -ENOSYS when no server/library is available, -EAGAIN while backing off.
 */
int debuginfod__find_debuginfo(struct debuginfod *d, const uint8_t *id, size_t len, char **path);
/* The same for the executable (the ELF with code and program headers, which
 * strata-server symbolizes file offsets against). */
int debuginfod__find_executable(struct debuginfod *d, const uint8_t *id, size_t len, char **path);
void debuginfod__stats(const struct debuginfod *d, struct debuginfod_stats *st);

#endif /* STRATA_DEBUGINFOD_H */
