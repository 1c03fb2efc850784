/* SPDX-License-Identifier: Apache-2.0 */
/* Separate debug file named by an ELF's .gnu_debuglink section. */
#ifndef STRATA_DEBUGLINK_H
#define STRATA_DEBUGLINK_H

#include <stddef.h>
#include <stdint.h>

/*
 * Searches, in GDB's order, DIR/NAME, DIR/.debug/NAME and
 * /usr/lib/debug/DIR/NAME, where DIR is file_name's directory (and its
 * symlink-resolved directory).  A candidate is accepted when its build-id
 * equals bid (when the binary has one), else when its CRC32 equals crc;
 * the binary itself is never returned.  Returns an open fd and the
 * malloc'd path in *path, or -errno (-ENOENT: nothing matching).
 */
int debuglink_find(const char *file_name, const char *debuglink, uint32_t crc, const uint8_t *bid,
		   size_t bid_len, char **path);

#endif /* STRATA_DEBUGLINK_H */
