/* SPDX-License-Identifier: Apache-2.0 */
/*
 * UTF-8 decoding and encoding shared by every writer of text that leaves
 * the process (JSON, SVG, Python names): whatever bytes come in, what goes
 * out is valid UTF-8.
 */
#ifndef STRATA_LIB_UTF8_H
#define STRATA_LIB_UTF8_H

#include <stddef.h>
#include <stdint.h>

#define UTF8_REPLACEMENT 0xfffd /* U+FFFD, what anything invalid becomes */

/*
 * Decodes one UTF-8 code point from NUL-terminated s (which must not
 * point at the NUL).  Returns the bytes consumed (1..4); an invalid,
 * overlong, surrogate or truncated sequence consumes one byte and yields
 * U+FFFD, so a caller can always make progress.
 */
size_t utf8_next(const char *s, uint32_t *cp);

/*
 * Encodes code point cp into out (1..4 bytes, no NUL) and returns the
 * length.  A surrogate or a value past U+10FFFF is encoded as U+FFFD.
 */
size_t utf8_encode(uint32_t cp, char out[4]);

#endif /* STRATA_LIB_UTF8_H */
