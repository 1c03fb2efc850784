// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target: the text writers every agent-controlled string goes
 * through on its way to a browser or an API client (process names, labels,
 * function and file names in JSON, SVG flamegraphs and HTML pages):
 * json_write_str, xml_write_text and the UTF-8 decoder under them.  The
 * output is checked by an independent reader, not by the writers' own
 * code: a JSON string that parses back to exactly the code points
 * utf8_next reads from the input; XML text with no markup character left
 * raw (the SVG and HTML are otherwise an injection), no control character
 * and only valid UTF-8; a Prometheus label value quoted, with only the
 * format's three escapes, no control character raw, one code point out
 * per code point in.  Byte 0 is the XML writer's code-point limit.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/json_str.h"
#include "lib/utf8.h"
#include "lib/xml_str.h"
#include "server/diag_inputs.h"
#include "tests/fuzz/text_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static unsigned hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	abort(); /* not a hex digit in \uXXXX */
}

/* Reads the JSON string in out[0..n) into cps; aborts on invalid JSON. */
static size_t json_read(const unsigned char *out, size_t n, uint32_t *cps, size_t max)
{
	size_t i = 1, k = 0;

	if (n < 2 || out[0] != '"' || out[n - 1] != '"')
		abort();
	while (i < n - 1) {
		uint32_t c;

		if (k == max)
			abort(); /* more code points than the input has */
		if (out[i] == '"' || out[i] < 0x20)
			abort(); /* unescaped quote or control character */
		if (out[i] != '\\') {
			size_t m = strict_next(out + i, n - 1 - i, &c);

			if (!m)
				abort(); /* invalid UTF-8 in the output */
			cps[k++] = c;
			i += m;
			continue;
		}
		if (i + 1 >= n - 1)
			abort();
		switch (out[i + 1]) {
		case '"':
			c = '"';
			break;
		case '\\':
			c = '\\';
			break;
		case '/':
			c = '/';
			break;
		case 'b':
			c = '\b';
			break;
		case 'f':
			c = '\f';
			break;
		case 'n':
			c = '\n';
			break;
		case 'r':
			c = '\r';
			break;
		case 't':
			c = '\t';
			break;
		case 'u':
			if (i + 6 > n - 1)
				abort();
			c = hexval(out[i + 2]) << 12 | hexval(out[i + 3]) << 8 |
			    hexval(out[i + 4]) << 4 | hexval(out[i + 5]);
			if (c >= 0xd800 && c <= 0xdfff)
				abort(); /* a lone surrogate: not UTF-8 once decoded */
			i += 4;
			break;
		default:
			abort();
		}
		cps[k++] = c;
		i += 2;
	}
	return k;
}

/* XML text: valid UTF-8, no markup character raw, no control character;
 * returns its code points, an entity counting as one. */
static size_t xml_check(const unsigned char *out, size_t n)
{
	static const char *const entities[] = {
		"&lt;", "&gt;", "&amp;", "&quot;", "&#39;", "&apos;"
	};
	size_t i = 0, k = 0;

	while (i < n) {
		uint32_t c;
		size_t m;

		if (out[i] == '<' || out[i] == '>' || out[i] == '"' || out[i] == '\'')
			abort();
		if (out[i] == '&') {
			size_t e = 0;

			while (e < sizeof(entities) / sizeof(entities[0]) &&
			       strncmp((const char *)out + i, entities[e], strlen(entities[e])))
				e++;
			if (e == sizeof(entities) / sizeof(entities[0]))
				abort(); /* a raw '&' or an entity we do not write */
			i += strlen(entities[e]);
			k++;
			continue;
		}
		m = strict_next(out + i, n - i, &c);
		if (!m || c < 0x20 || c == 0xfffe || c == 0xffff)
			abort(); /* invalid UTF-8, or a character XML 1.0 forbids */
		i += m;
		k++;
	}
	return k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s, *text = NULL;
	uint32_t *want, *got;
	size_t len = 0, n = 0, k;
	FILE *out;

	if (size < 1)
		return 0;
	/* the input as the C string the writers take (up to its first NUL) */
	s = malloc(size);
	want = malloc(size * sizeof(*want));
	got = malloc(size * sizeof(*got));
	if (!s || !want || !got)
		abort();
	memcpy(s, data + 1, size - 1);
	s[size - 1] = '\0';
	for (const char *p = s; *p; n++) {
		size_t m = utf8_next(p, &want[n]);
		char enc[4];

		if (m < 1 || m > 4 || m > strlen(p))
			abort();
		/* the decoder and the encoder agree */
		if (want[n] != 0xfffd && (utf8_encode(want[n], enc) != m || memcmp(enc, p, m)))
			abort();
		p += m;
	}

	out = open_memstream(&text, &len);
	if (!out)
		abort();
	json_write_str(out, s);
	fclose(out);
	k = json_read((const unsigned char *)text, len, got, n);
	if (k != n || memcmp(got, want, n * sizeof(*got)))
		abort(); /* the JSON reads back as other text than the input's */
	free(text);

	text = NULL;
	out = open_memstream(&text, &len);
	if (!out)
		abort();
	xml_write_text(out, s, data[0]);
	fclose(out);
	if (xml_check((const unsigned char *)text, len) > data[0] || utf8_count(s) != n)
		abort();
	free(text);

	text = NULL;
	out = open_memstream(&text, &len);
	if (!out)
		abort();
	diag_prom_label(out, s);
	fclose(out);
	if (prom_label_scan((const unsigned char *)text, len, &k) != len || k != n)
		abort(); /* more than one label, or one code point out not per one in */
	free(text);
	free(s);
	free(want);
	free(got);
	return 0;
}
