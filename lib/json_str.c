// SPDX-License-Identifier: Apache-2.0
#include "lib/json_str.h"

#include <inttypes.h>

#include "lib/utf8.h"

/* A JSON string (or null): always valid UTF-8, whatever s holds. */
void json_write_str(FILE *out, const char *s)
{
	if (!s) {
		fputs("null", out);
		return;
	}
	fputc('"', out);
	while (*s) {
		uint32_t cp;
		size_t n = utf8_next(s, &cp);

		switch (cp) {
		case '"':
			fputs("\\\"", out);
			break;
		case '\\':
			fputs("\\\\", out);
			break;
		case '\n':
			fputs("\\n", out);
			break;
		case '\r':
			fputs("\\r", out);
			break;
		case '\t':
			fputs("\\t", out);
			break;
		case 0xfffd:
			/* also what invalid input decodes to */
			fputs("\\ufffd", out);
			break;
		default:
			if (cp < 0x20 || cp == 0x7f)
				fprintf(out, "\\u%04" PRIx32, cp);
			else
				fwrite(s, 1, n, out);
		}
		s += n;
	}
	fputc('"', out);
}
