// SPDX-License-Identifier: Apache-2.0
#include "lib/utf8.h"

size_t utf8_next(const char *s, uint32_t *cp)
{
	const unsigned char *b = (const unsigned char *)s;
	uint32_t c = b[0], min;
	size_t n;

	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf) {
		n = 2;
		c &= 0x1f;
		min = 0x80;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		c &= 0x0f;
		min = 0x800;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		c &= 0x07;
		min = 0x10000;
	} else {
		goto bad;
	}
	/* a NUL is not a continuation byte, so this never reads past it */
	for (size_t i = 1; i < n; i++) {
		if ((b[i] & 0xc0) != 0x80)
			goto bad;
		c = (c << 6) | (b[i] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		goto bad;
	*cp = c;
	return n;
bad:
	*cp = 0xfffd;
	return 1;
}

size_t utf8_encode(uint32_t cp, char out[4])
{
	if (cp >= 0xd800 && cp < 0xe000)
		cp = UTF8_REPLACEMENT; /* lone surrogate: not valid UTF-8 */
	else if (cp > 0x10ffff)
		cp = UTF8_REPLACEMENT;
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | cp >> 6);
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xe0 | cp >> 12);
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | cp >> 18);
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}
