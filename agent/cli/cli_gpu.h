/* SPDX-License-Identifier: Apache-2.0 */
/* The GPU layer's options, shared by `strata record` and strata-agent. */
#ifndef STRATA_CLI_GPU_H
#define STRATA_CLI_GPU_H

#include <getopt.h>

#define CLI_MAX_GPU_LIBS 16 /* --gpu-lib */

struct session_opts;

/* Option codes (no short forms): above any character. */
enum {
	CLI_GPU_NO_GPU = 0x1000,
	CLI_GPU_BUDGET,
	CLI_GPU_LIB,
	CLI_GPU_GRACE,
	CLI_GPU_NO_PREATTACH,
	CLI_GPU_PROBE_MODE,
};

#define CLI_GPU_LONGOPTS                                                         \
	{ "no-gpu", no_argument, NULL, CLI_GPU_NO_GPU },                         \
		{ "probe-budget", required_argument, NULL, CLI_GPU_BUDGET },     \
		{ "gpu-lib", required_argument, NULL, CLI_GPU_LIB },             \
		{ "gpu-grace", required_argument, NULL, CLI_GPU_GRACE },         \
		{ "no-gpu-preattach", no_argument, NULL, CLI_GPU_NO_PREATTACH }, \
	{                                                                        \
		"gpu-probe-mode", required_argument, NULL, CLI_GPU_PROBE_MODE    \
	}

#define CLI_GPU_USAGE                                                                \
	"      --no-gpu          do not trace CUDA/NCCL\n"                           \
	"      --probe-budget PCT  CPU share of one core the probes may take per\n"  \
	"                        process (default 1; 0: no limit); costly probes\n"  \
	"                        are duty-cycled beyond it\n"                        \
	"      --gpu-lib PATH    also attach to this CUDA/NCCL library (or a file\n" \
	"                        linking them statically) from the start; the\n"     \
	"                        ld.so cache's and /usr/local/cuda's always are\n"   \
	"      --no-gpu-preattach  only attach to files found in targets' maps\n"    \
	"      --gpu-grace MS    keep an unused file's probes this long (5000)\n"

/*
 * Applies GPU option c.  libs (CLI_MAX_GPU_LIBS long) backs
 * opts->gpu.libs.  Returns 1 when c was one, 0 when not, -EINVAL for a bad
 * value.
 */
int cli_gpu_opt(int c, const char *arg, struct session_opts *opts, const char **libs);

#endif /* STRATA_CLI_GPU_H */
