// SPDX-License-Identifier: Apache-2.0
#include "agent/cli/cli_common.h"

#include <errno.h>

#include "agent/core/session.h"
#include "lib/cli.h"

int cli_common_opt(int c, const char *arg, struct session_opts *opts, uint32_t *pids)
{
	struct sampler_opts *so = &opts->sampler;

	switch (c) {
	case 'F':
		return cli_parse_u32(arg, 100000, &so->freq_hz) ? -EINVAL : 1;
	case 'p':
		if (cli_parse_pids(arg, pids, &opts->npids, CLI_MAX_PIDS))
			return -EINVAL;
		opts->pids = pids;
		so->filter = STRATA_FILTER_TGIDS;
		return 1;
	case 'G':
		so->cgroup = arg;
		so->filter = STRATA_FILTER_CGROUP;
		return 1;
	default:
		return 0;
	}
}
