/* SPDX-License-Identifier: Apache-2.0 */
/* The target and rate options shared by `strata record` and strata-agent. */
#ifndef STRATA_AGENT_CLI_COMMON_H
#define STRATA_AGENT_CLI_COMMON_H

#include <stdint.h>

#define CLI_MAX_PIDS 256

struct session_opts;

/*
 * The target and rate options every command takes: -F HZ, -p PID[,PID],
 * -G CGROUP_DIR.  pids (CLI_MAX_PIDS long) backs opts->pids.  Returns 1 when
 * c was one of them, 0 when it was not, -EINVAL for a bad value.
 */
int cli_common_opt(int c, const char *arg, struct session_opts *opts, uint32_t *pids);

#endif /* STRATA_AGENT_CLI_COMMON_H */
