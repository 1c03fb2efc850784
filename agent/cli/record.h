/* SPDX-License-Identifier: Apache-2.0 */
/* `strata record`: profile a command, some processes, a cgroup or the host. */
#ifndef STRATA_RECORD_H
#define STRATA_RECORD_H

#include "agent/core/session.h"

struct record_opts {
	size_t sz;
	struct session_opts session;
	const char *output; /* file; its extension picks the format */
	double duration_s;  /* 0: until the command exits / SIGINT; with a
			     * command, profiling stops then and strata
			     * waits for the command's exit code */
	char *const *argv;  /* command to run, or NULL */
	/* GPU layer outputs (NULL: not written) */
	const char *leaks_path;	  /* .txt table or .pb.gz heap profile */
	const char *trace_path;	  /* Perfetto/Chrome trace JSON */
	const char *tally_path;	  /* per-API table */
	const char *sched_output; /* scheduler-layer JSON report, or NULL */
};

/* Returns the command's exit status (128+signal when killed), or, without a
 * command, 0; a negative errno when profiling itself failed. */
int record_run(const struct record_opts *opts);

#endif /* STRATA_RECORD_H */
