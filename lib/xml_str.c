// SPDX-License-Identifier: Apache-2.0
#include "lib/xml_str.h"

#include <stdint.h>

#include "lib/utf8.h"

size_t utf8_count(const char *s)
{
	size_t n = 0;
	uint32_t cp;

	while (s && *s) {
		s += utf8_next(s, &cp);
		n++;
	}
	return n;
}

void xml_write_text(FILE *out, const char *s, size_t max)
{
	for (size_t i = 0; s && *s && i < max; i++) {
		uint32_t cp;
		size_t n = utf8_next(s, &cp);

		switch (cp) {
		case '&':
			fputs("&amp;", out);
			break;
		case '<':
			fputs("&lt;", out);
			break;
		case '>':
			fputs("&gt;", out);
			break;
		case '"':
			fputs("&quot;", out);
			break;
		case '\'':
			fputs("&apos;", out);
			break;
		case '\t':
		case '\n':
		case '\r':
			fputc(' ', out);
			break;
		default:
			if (cp < 0x20 || cp == 0x7f || cp == 0xfffe || cp == 0xffff || cp == 0xfffd)
				fputs("\xef\xbf\xbd", out); /* U+FFFD */
			else
				fwrite(s, 1, n, out);
		}
		s += n;
	}
}
