// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target: proc_maps__parse_line() on arbitrary text, whole and
 * line by line, checking what a successful parse promises.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/proc/proc_maps.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const char *line)
{
	struct proc_map m;

	if (proc_maps__parse_line(line, &m))
		return;
	if (m.start >= m.end || strlen(m.path) >= sizeof(m.path) ||
	    (m.prot & ~(uint32_t)(PROC_MAP_R | PROC_MAP_W | PROC_MAP_X | PROC_MAP_SHARED)) ||
	    (m.deleted != 0 && m.deleted != 1) || strchr(m.path, '\n'))
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = malloc(size + 1), *line, *save = NULL;

	if (!buf)
		return 0;
	memcpy(buf, data, size);
	buf[size] = '\0';
	check(buf);
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		check(line);
	free(buf);
	return 0;
}
