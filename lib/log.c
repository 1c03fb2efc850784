// SPDX-License-Identifier: Apache-2.0
#include "lib/log.h"

#include <stdarg.h>
#include <stdio.h>

/*
 * The one piece of process-wide state: the verbosity, written once by main()
 * before threads start and only read afterwards.  libbpf's print callback
 * (agent/core/log_libbpf.c) has no context argument, so the level cannot live
 * in a context struct.
 */
static enum log_level log_level = LOG_WARN;

void log_set_level(enum log_level lvl)
{
	log_level = lvl;
}

int log_enabled(enum log_level lvl)
{
	return lvl <= log_level;
}

void log_msg(enum log_level lvl, const char *fmt, ...)
{
	static const char *const prefix[] = { "error", "warn", "info", "debug" };
	va_list ap;

	if (!log_enabled(lvl))
		return;
	fprintf(stderr, "strata %s: ", prefix[lvl]);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}
