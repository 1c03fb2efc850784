/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NCCL communicator identities that survive an agent restart.  The BPF
 * gpu_comms map learns (process, ncclComm_t) -> (communicator hash, rank,
 * nranks, sequence numbers) from ncclCommInitRank; an agent that restarts
 * (DaemonSet rollout, OOM kill) loses the map while the job goes on.  So
 * every drain writes the map to a small file (one line per communicator
 * of a live process, at most 4096, atomic rename), and a starting agent
 * puts back the entries whose process is the same instance (pid and start
 * time), before any probe fires.
 *
 * Sequence numbers continue from the snapshot, but the collectives issued
 * while no agent ran were not counted: a restored communicator is
 * reported under a hash of its own (the communicator hash mixed with this
 * agent run's id), so the ranks restored together (one node, one restart)
 * are compared with each other and never with ranks whose count did not
 * stop (other nodes), and continue from one common count: they stay
 * aligned when every rank has completed the same collectives at the
 * restore, which holds (but at the instant a collective completes) for
 * collectives that return on every rank together (NCCL with blocking host
 * calls, the test stand-in); docs/diagnosis.md.  The
 * job label of a process without one keeps the original hash.
 * Processes never seen initialising and not in the file stay unknown
 * (counted: GPU_CNT_COMM_UNKNOWN in BPF, no_rank at the server).
 */
#ifndef STRATA_AGENT_GPU_COMM_STATE_H
#define STRATA_AGENT_GPU_COMM_STATE_H

#include <stdbool.h>
#include <stdint.h>

struct gpu_comm_state_stats {
	uint64_t restored, stale, bad_lines, saves, save_failed, saved_entries;
	uint64_t unchanged; /* saves that found the file up to date */
};

/* What a restored process was. */
struct gpu_comm_identity {
	uint64_t hash;	   /* as reported from now on (mixed with the run id) */
	uint64_t job_hash; /* the communicator's own hash (job labels) */
	int32_t rank, nranks;
};

struct gpu_comm_state;

/* path: the state file; run_id: this agent run (any value unique per
 * start).  NULL on no memory. */
struct gpu_comm_state *gpu_comm_state__new(const char *path, uint64_t run_id);
void gpu_comm_state__free(struct gpu_comm_state *s);

/* Puts the file's entries of live, same-instance processes into the
 * gpu_comms map (fd).  Returns how many, or -errno (no file: 0). */
int gpu_comm_state__restore(struct gpu_comm_state *s, int comms_fd, const char *proc_root);

/* The first restored communicator of tgid; false when none. */
bool gpu_comm_state__identity(const struct gpu_comm_state *s, uint32_t tgid,
			      struct gpu_comm_identity *id);

/* Writes the map's entries of live processes to the file, unless it holds
 * them already.  0 or -errno. */
int gpu_comm_state__save(struct gpu_comm_state *s, int comms_fd, const char *proc_root);

void gpu_comm_state__stats(const struct gpu_comm_state *s, struct gpu_comm_state_stats *st);

#endif /* STRATA_AGENT_GPU_COMM_STATE_H */
