// SPDX-License-Identifier: Apache-2.0
#include "agent/core/log_libbpf.h"

#include <bpf/libbpf.h>
#include <stdarg.h>
#include <stdio.h>

#include "lib/log.h"

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	enum log_level lvl = level == LIBBPF_WARN   ? LOG_WARN
			     : level == LIBBPF_INFO ? LOG_INFO
						    : LOG_DEBUG;

	/* libbpf warnings are only interesting with -v: we report our own. */
	if (!log_enabled(lvl == LOG_WARN ? LOG_INFO : lvl))
		return 0;
	fputs("libbpf: ", stderr);
	return vfprintf(stderr, fmt, ap);
}

void log_route_libbpf(void)
{
	libbpf_set_print(libbpf_print);
}
