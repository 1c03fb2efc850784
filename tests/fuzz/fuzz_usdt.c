// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target: the USDT note reader (agent/proc/usdt.c) on arbitrary
 * ELF images, and its argument-spec parser on arbitrary strings: notes
 * come from the files of traced processes.  Every delivered probe must be
 * within what the parser promises.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/proc/usdt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int check(void *ctx, const struct usdt_probe *p)
{
	(void)ctx;
	if (p->nargs > USDT_MAX_ARGS || !p->provider[0] || !p->name[0] ||
	    memchr(p->provider, '\0', USDT_NAME_MAX) == NULL ||
	    memchr(p->name, '\0', USDT_NAME_MAX) == NULL)
		__builtin_trap();
	for (uint32_t i = 0; i < p->nargs; i++) {
		const struct usdt_arg_spec *a = &p->args[i];

		if (a->size != 1 && a->size != 2 && a->size != 4 && a->size != 8)
			__builtin_trap();
		if (a->kind < USDT_ARG_CONST || a->kind > USDT_ARG_DEREF)
			__builtin_trap();
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct usdt_arg_spec args[USDT_MAX_ARGS];
	struct usdt_stats st = { 0 };
	char *s;
	int n;

	usdt_scan_mem(data, size, check, NULL, &st);
	/* the same bytes as one note's argument string */
	s = malloc(size + 1);
	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	n = usdt_args_parse(s, args, USDT_MAX_ARGS);
	if (n > USDT_MAX_ARGS)
		__builtin_trap();
	free(s);
	return 0;
}
