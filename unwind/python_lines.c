// SPDX-License-Identifier: Apache-2.0
#include "unwind/python_lines.h"

/*
 * 3.10 (Objects/codeobject.c: advance(), _PyCode_CheckLineNumber()): each
 * entry is two bytes, an unsigned byte-offset delta and a signed line
 * delta; -128 means "no line" for that range.
 */
/* Lines are tracked in 64 bits: a hostile table cannot overflow them. */
static int clamp_line(int64_t line)
{
	return line >= 0 && line <= INT32_MAX ? (int)line : -1;
}

static int line_310(const uint8_t *t, size_t n, int64_t line, int addr)
{
	int64_t end = 0, cur = -1;

	for (size_t i = 0; i + 1 < n; i += 2) {
		int64_t start = end, ldelta = (int8_t)t[i + 1];

		end += t[i];
		if (ldelta == -128) {
			cur = -1;
		} else {
			line += ldelta;
			cur = line;
		}
		if (start <= addr && addr < end)
			return clamp_line(cur);
	}
	return -1;
}

/* Objects/locations.md: 6-bit little-endian chunks, 0x40 = more follow. */
static int read_varint(const uint8_t *t, size_t n, size_t *i, uint32_t *out)
{
	uint32_t v = 0;
	unsigned shift = 0;

	for (;;) {
		if (*i >= n || shift > 30)
			return -1;
		uint8_t b = t[(*i)++];

		v |= (uint32_t)(b & 63) << shift;
		if (!(b & 64))
			break;
		shift += 6;
	}
	*out = v;
	return 0;
}

static int read_svarint(const uint8_t *t, size_t n, size_t *i, int *out)
{
	uint32_t u;

	if (read_varint(t, n, i, &u))
		return -1;
	*out = (u & 1) ? -(int)(u >> 1) : (int)(u >> 1);
	return 0;
}

/*
 * 3.11+ (Objects/codeobject.c: advance(), get_line_delta()): an entry
 * starts with a byte with bit 7 set: code = bits 3..6, length = bits 0..2
 * + 1 code units.  Codes 0-9 short form (same line), 10-12 one-line forms
 * (line delta = code - 10), 13 no column (svarint line delta), 14 long
 * form (svarint line delta, then three varints), 15 no location.
 */
static int line_311(const uint8_t *t, size_t n, int64_t line, int addr)
{
	int64_t end = 0;
	size_t i = 0;

	while (i < n) {
		uint8_t first = t[i];
		int code = (first >> 3) & 15, delta = 0;
		int64_t start = end;
		size_t next = i + 1;

		if (!(first & 128))
			return -1; /* not at an entry: corrupt */
		if (code == 13 || code == 14) {
			if (read_svarint(t, n, &next, &delta))
				return -1;
		} else if (code >= 10 && code <= 12) {
			delta = code - 10;
		}
		line += delta;
		end += ((first & 7) + 1) * 2;
		if (start <= addr && addr < end)
			return code == 15 ? -1 : clamp_line(line);
		/* Skip the rest of the entry: up to the next start byte. */
		i = next;
		while (i < n && !(t[i] & 128))
			i++;
	}
	return -1;
}

int py_line_for(unsigned minor, const uint8_t *table, size_t n, int firstlineno, int addr)
{
	if (addr < 0)
		return firstlineno;
	if (!table)
		return -1;
	return minor >= 11 ? line_311(table, n, firstlineno, addr)
			   : line_310(table, n, firstlineno, addr);
}
