/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A Prometheus label value that agents send as a short word of [a-z0-9_]
 * (a kernel path, a probe name): nothing to escape, and the label space
 * stays small.  Anything else is refused (and counted) by the caller.
 */
#ifndef STRATA_SERVER_PROM_WORD_H
#define STRATA_SERVER_PROM_WORD_H

#include <stdbool.h>
#include <string.h>

/* s is 1..max-1 bytes of [a-z0-9_]. */
static inline bool prom_word(const char *s, size_t max)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || n >= max)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
			return false;
	return true;
}

#endif /* STRATA_SERVER_PROM_WORD_H */
