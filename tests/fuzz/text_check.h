/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Independent readers for the fuzz targets: what a client of the server's
 * text makes of it (strict UTF-8, the Prometheus text exposition format),
 * written apart from the server's writers so that a bug in those is not
 * repeated here.  Each aborts (a libFuzzer find) on text a client would
 * refuse or misread.  Included by the fuzz_*.c that use it.
 */
#ifndef STRATA_TESTS_FUZZ_TEXT_CHECK_H
#define STRATA_TESTS_FUZZ_TEXT_CHECK_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Strict UTF-8 (no overlongs, surrogates, or values past U+10FFFF): the
 * code point at s (len bytes left) into *cp; bytes used, 0 if invalid. */
static inline size_t strict_next(const unsigned char *s, size_t len, uint32_t *cp)
{
	size_t n;
	uint32_t c, min;

	if (s[0] < 0x80) {
		*cp = s[0];
		return 1;
	}
	if ((s[0] & 0xe0) == 0xc0)
		n = 2, c = s[0] & 0x1f, min = 0x80;
	else if ((s[0] & 0xf0) == 0xe0)
		n = 3, c = s[0] & 0x0f, min = 0x800;
	else if ((s[0] & 0xf8) == 0xf0)
		n = 4, c = s[0] & 0x07, min = 0x10000;
	else
		return 0;
	if (len < n)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (s[i] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return n;
}

/* A character no text of ours should carry raw: C0, DEL and C1. */
static inline int is_control(uint32_t c)
{
	return c < 0x20 || (c >= 0x7f && c < 0xa0);
}

/*
 * A Prometheus label value at s (n bytes left) as the text exposition
 * format reads it: in quotes, \\ \" \n the only escapes, no raw quote,
 * newline or other control character, valid UTF-8.  Returns the bytes it
 * takes, both quotes included; its code points into *cps.
 */
static inline size_t prom_label_scan(const unsigned char *s, size_t n, size_t *cps)
{
	size_t i = 1, k = 0, m;
	uint32_t c;

	if (n < 2 || s[0] != '"')
		abort();
	while (i < n && s[i] != '"') {
		if (s[i] == '\\') {
			if (i + 1 >= n || !strchr("\\\"n", s[i + 1]))
				abort(); /* an escape the format does not have */
			i += 2;
			k++;
			continue;
		}
		m = strict_next(s + i, n - i, &c);
		if (!m || is_control(c))
			abort(); /* invalid UTF-8 or a control character */
		i += m;
		k++;
	}
	if (i >= n)
		abort(); /* no closing quote */
	*cps = k;
	return i + 1;
}

static inline int prom_name_char(unsigned char c, int first)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
	       (!first && c >= '0' && c <= '9');
}

/* One line of the exposition format (without its newline). */
static inline void prom_line_check(const unsigned char *l, size_t n)
{
	size_t i = 0, cps;
	char num[64];
	char *end;

	if (n && l[0] == '#') {
		uint32_t c;

		if (n < 7 || (memcmp(l, "# HELP ", 7) && memcmp(l, "# TYPE ", 7)))
			abort();
		for (i = 7; i < n;) {
			size_t m = strict_next(l + i, n - i, &c);

			if (!m || is_control(c))
				abort();
			i += m;
		}
		return;
	}
	if (!n || !prom_name_char(l[0], 1))
		abort();
	while (i < n && prom_name_char(l[i], 0))
		i++;
	if (i < n && l[i] == '{') {
		i++;
		while (i < n && l[i] != '}') {
			size_t at = i;

			/* a label name ([a-zA-Z_][a-zA-Z0-9_]*), =, a value */
			while (i < n && l[i] != ':' && prom_name_char(l[i], i == at))
				i++;
			if (i == at || i >= n || l[i] != '=')
				abort();
			i++;
			i += prom_label_scan(l + i, n - i, &cps);
			if (i < n && l[i] == ',')
				i++;
			else if (i < n && l[i] != '}')
				abort();
		}
		if (i >= n)
			abort();
		i++;
	}
	if (i >= n || l[i] != ' ' || n - i - 1 == 0 || n - i - 1 >= sizeof(num))
		abort();
	memcpy(num, l + i + 1, n - i - 1);
	num[n - i - 1] = '\0';
	strtod(num, &end); /* a float, Inf or NaN; no timestamp is written */
	if (*end)
		abort();
}

/* A whole exposition: lines, each ending in a newline. */
static inline void prom_text_check(const unsigned char *t, size_t n)
{
	size_t i = 0;

	while (i < n) {
		const unsigned char *nl = memchr(t + i, '\n', n - i);

		if (!nl)
			abort();
		prom_line_check(t + i, (size_t)(nl - (t + i)));
		i = (size_t)(nl - t) + 1;
	}
}

#endif /* STRATA_TESTS_FUZZ_TEXT_CHECK_H */
