// SPDX-License-Identifier: Apache-2.0
#include "lib/hex.h"

char *build_id_hex(const uint8_t *id, size_t len, char *buf, size_t sz)
{
	static const char digits[] = "0123456789abcdef";
	size_t i;

	if (!buf || sz == 0)
		return buf;
	if (!id)
		len = 0;
	/* Whole bytes only: a truncated id must not look like a longer one. */
	for (i = 0; i < len && 2 * i + 3 <= sz; i++) {
		buf[2 * i] = digits[id[i] >> 4];
		buf[2 * i + 1] = digits[id[i] & 0xf];
	}
	buf[2 * i] = '\0';
	return buf;
}
