// SPDX-License-Identifier: Apache-2.0
/* libFuzzer: CPython line tables (3.10 and 3.11+ formats) and str decoding,
 * both parsers of another process's memory.  Byte 0 picks the version and
 * bytes 1-2 the offset looked up; the rest is the table. */
#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>

#include "agent/python/python_symbols.h"
#include "unwind/python_lines.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char out[64];

	if (size < 3)
		return 0;
	unsigned minor = 10 + data[0] % 4;
	int addr = ((int)data[1] << 8 | data[2]) - 2;

	py_line_for(minor, data + 3, size - 3, data[0], addr);
	/* As UCS-1/2/4 characters: whole characters only. */
	unsigned kind = 1u << (data[0] % 3);
	py_symbols__decode_str(kind << 2 | 1 << 5, data + 3, (size - 3) / kind, out, sizeof(out));
	return 0;
}
