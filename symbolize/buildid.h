/* SPDX-License-Identifier: Apache-2.0 */
/* GNU build-id from an ELF file's NT_GNU_BUILD_ID note. */
#ifndef STRATA_BUILDID_H
#define STRATA_BUILDID_H

#include <stddef.h>
#include <stdint.h>

#include "lib/hex.h"

#define BUILD_ID_MAX 20 /* sha1; longer ids are truncated and flagged */

/*
 * Reads the build-id of the ELF at path (or already-open fd when path is
 * NULL).  Returns its length (1..BUILD_ID_MAX), 0 when the file has no
 * build-id note, or -errno (-ENOEXEC for a non-ELF / corrupt file).
 */
int build_id_read(const char *path, int fd, uint8_t *out, size_t max);

/* build_id_hex() prints one (lib/hex.h). */

#endif /* STRATA_BUILDID_H */
