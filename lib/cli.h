/* SPDX-License-Identifier: Apache-2.0 */
/* Option parsing helpers shared by every command (strata, strata-agent,
 * strata-server). */
#ifndef STRATA_CLI_H
#define STRATA_CLI_H

#include <stddef.h>
#include <stdint.h>

/* Parses a comma-separated pid list into pids (appending at *n).  0/-EINVAL. */
int cli_parse_pids(const char *arg, uint32_t *pids, size_t *n, size_t max);
/* Parses a positive integer no larger than max.  0/-EINVAL. */
int cli_parse_u32(const char *arg, uint32_t max, uint32_t *out);

struct option;
/*
 * The option that getopt_long returned as c, as the user would type it:
 * "--probe-budget" (its long name in longopts), else "-F".  Error messages
 * use it: long-only options have codes that are no printable character.
 */
const char *cli_option_name(int c, const struct option *longopts, char *buf, size_t n);

#endif /* STRATA_CLI_H */
