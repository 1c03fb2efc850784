// SPDX-License-Identifier: Apache-2.0
#include "lib/cli.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

int cli_parse_u32(const char *arg, uint32_t max, uint32_t *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(arg, &end, 10);
	if (errno || end == arg || *end || v == 0 || v > max)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

int cli_parse_pids(const char *arg, uint32_t *pids, size_t *n, size_t max)
{
	const char *p = arg;

	while (*p) {
		char *end;
		unsigned long v = strtoul(p, &end, 10);

		if (end == p || v == 0 || v > 0x3fffffff || *n >= max)
			return -EINVAL;
		pids[(*n)++] = (uint32_t)v;
		if (*end == ',')
			end++;
		else if (*end)
			return -EINVAL;
		p = end;
	}
	return *n ? 0 : -EINVAL;
}

const char *cli_option_name(int c, const struct option *longopts, char *buf, size_t n)
{
	for (const struct option *o = longopts; o && o->name; o++) {
		if (!o->flag && o->val == c) {
			snprintf(buf, n, "--%s", o->name);
			return buf;
		}
	}
	if (c > 0 && c < 128 && isprint(c))
		snprintf(buf, n, "-%c", c);
	else
		snprintf(buf, n, "option %d", c);
	return buf;
}
