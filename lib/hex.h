/* SPDX-License-Identifier: Apache-2.0 */
/* Ids as text: build-ids, batch ids, run ids in lower-case hex. */
#ifndef STRATA_LIB_HEX_H
#define STRATA_LIB_HEX_H

#include <stddef.h>
#include <stdint.h>

/* Lower-case hex of id into buf (2*len+1 bytes); returns buf.  Only whole
 * bytes are written when buf is short. */
char *build_id_hex(const uint8_t *id, size_t len, char *buf, size_t sz);

#endif /* STRATA_LIB_HEX_H */
