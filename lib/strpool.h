/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Interned strings: one copy of each, stable address until the pool is
 * freed.  Symbolizer results point into it, so they outlive the ELF
 * module (and its string tables) they came from.
 */
#ifndef STRATA_STRPOOL_H
#define STRATA_STRPOOL_H

#include <stddef.h>

struct strpool;

struct strpool *strpool__new(void);
void strpool__free(struct strpool *p);
/* The pooled copy of s[0..len) (no NUL needed in s); NULL on ENOMEM. */
const char *strpool__intern_len(struct strpool *p, const char *s, size_t len);
const char *strpool__intern(struct strpool *p, const char *s);
/* Bytes held (strings and index), for stats. */
size_t strpool__bytes(const struct strpool *p);

#endif /* STRATA_STRPOOL_H */
