// SPDX-License-Identifier: Apache-2.0
#include "agent/cli/cli_gpu.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/core/session.h"
#include "lib/cli.h"

int cli_gpu_opt(int c, const char *arg, struct session_opts *opts, const char **libs)
{
	struct gpu_opts *g = &opts->gpu;
	char *end;

	switch (c) {
	case CLI_GPU_NO_GPU:
		opts->no_gpu = true;
		return 1;
	case CLI_GPU_BUDGET: {
		double pct = strtod(arg, &end);

		if (*end || end == arg || pct < 0 || pct > 100)
			return -EINVAL;
		g->budget = pct > 0 ? pct / 100 : -1;
		return 1;
	}
	case CLI_GPU_LIB:
		if (g->nlibs >= CLI_MAX_GPU_LIBS || !*arg)
			return -EINVAL;
		libs[g->nlibs++] = arg;
		g->libs = libs;
		return 1;
	case CLI_GPU_GRACE:
		return cli_parse_u32(arg, 3600000, &g->grace_ms) ? -EINVAL : 1;
	case CLI_GPU_NO_PREATTACH:
		g->no_preattach = true;
		return 1;
	case CLI_GPU_PROBE_MODE: /* benchmarks: full (default), empty (floor), nostack */
		if (!strcmp(arg, "empty"))
			g->empty_probes = true;
		else if (!strcmp(arg, "nostack"))
			g->no_stacks = true;
		else if (strcmp(arg, "full"))
			return -EINVAL;
		return 1;
	default:
		return 0;
	}
}
