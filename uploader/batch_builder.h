/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Builds the wire batch (proto/strata.proto): processes with their
 * job/rank labels, mappings (build-id + path), deduplicated stacks of
 * (mapping, file offset) frames, merged CPU samples and the other record
 * lists, then encodes and compresses it (uploader/batch_encode.c).  It
 * knows only the wire: the agent turns what it drains into these calls
 * (agent/ship/).
 *
 * Bounded: past max_stacks distinct stacks or max_samples distinct sample
 * rows in one batch, samples are dropped and counted (rows_dropped, sent in
 * Drops.batch_rows_dropped).  Not thread-safe (the agent's main loop owns
 * it).
 */
#ifndef STRATA_UPLOADER_BATCH_BUILDER_H
#define STRATA_UPLOADER_BATCH_BUILDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/profile.h"

#include "strata.pb-c.h"

struct batch_builder_opts {
	size_t sz;
	const char *node;	   /* NULL: gethostname() */
	const char *agent_version; /* NULL: STRATA_VERSION */
	uint32_t max_stacks;	   /* 0 = 65536 */
	uint32_t max_samples;	   /* 0 = 262144 */
	int zstd_level;		   /* 0 = 3 */
	/* Called once per build-id the first time a file with it is seen, so
	 * the uploader can send the file when the server asks for it. */
	void (*on_file)(void *ctx, const char *build_id_hex, const char *open_path);
	void *on_file_ctx;
	/* The agent's kernel and its feature paths, sent in every batch
	 * (the strings must outlive the builder). */
	const char *kernel_release;
	const struct bb_kernel_path *kernel_paths;
	size_t nkernel_paths;
};

#define BB_MAX_KERNEL_PATHS 8 /* more are not sent */

struct bb_kernel_path {
	const char *name, *taken;
	bool fallback;
};

/* A frame as the builder takes it. */
struct bb_frame {
	uint32_t kind;		 /* Strata__V1__Frame__Kind */
	const uint8_t *build_id; /* NATIVE */
	size_t build_id_len;
	const char *path; /* NATIVE: mapped file's path */
	uint64_t addr;	  /* NATIVE: file offset; KERNEL/UNKNOWN: ip */
	int is_return;
	const char *name;      /* KERNEL/PYTHON */
	const char *module;    /* KERNEL: module, NULL = vmlinux */
	const char *file;      /* PYTHON */
	uint32_t line;	       /* PYTHON */
	const char *open_path; /* NATIVE: the file the server may ask for (NULL: none) */
};

/* A process as the builder takes it (the agent reads it from /proc). */
#define BB_MAX_LABELS 6 /* Process.labels per process */
/* Label keys of the labels' provenance (docs/wire-format.md, "Labels and
 * trust"): where the job and the rank came from (env:VAR, nccl), and the
 * identity the kernel vouches for that the claims are bound to. */
#define BB_LABEL_JOB_SOURCE "strata.io/job-source"
#define BB_LABEL_RANK_SOURCE "strata.io/rank-source"
#define BB_LABEL_IDENTITY "strata.io/identity"

struct bb_process {
	uint32_t pid, ppid;
	uint64_t start_time_ns;
	const char *comm, *cmdline, *cgroup, *container, *pod;
	const char *job, *torchelastic_run_id, *slurm_job_id;
	int has_rank;
	int32_t rank, local_rank, world_size;
	/* other labels (Process.labels): key, value; where the job and rank
	 * came from and what identity they are bound to (docs/wire-format.md) */
	const char *labels[BB_MAX_LABELS][2];
	int nlabels;
};

struct batch_meta {
	uint64_t start_ns, end_ns; /* CLOCK_REALTIME */
	uint32_t freq_hz;
	struct profile_drops drops;
	uint64_t spool_dropped;
	uint64_t seq;
	uint64_t cuda_events_lost, nccl_events_lost; /* GPU layer, this window */
	uint64_t other_lost;			     /* added to Drops.other */
};

struct batch_builder_stats {
	uint64_t batches, samples, rows_dropped;
	uint64_t raw_bytes, wire_bytes; /* of every finished batch */
};

struct batch_builder;

struct batch_builder *batch_builder__new(const struct batch_builder_opts *opts);
void batch_builder__free(struct batch_builder *bb);

/* Index of the process in this batch (deduplicated by pid + start time). */
int64_t batch_builder__process(struct batch_builder *bb, const struct bb_process *p);
/* Adds count samples of the stack frames[0..n) (root first).  0 or -errno;
 * a sample over the bounds is dropped, counted, and 0 is returned. */
int batch_builder__add(struct batch_builder *bb, uint32_t process, uint32_t tid, const char *comm,
		       const struct bb_frame *frames, uint32_t n, uint64_t count);

/* Samples added since the last finish. */
uint64_t batch_builder__pending(const struct batch_builder *bb);

/*
 * Encodes everything added since the last finish as one batch (new random
 * batch id), zstd-compressed into *out (malloc'd, *len bytes), and starts
 * the next batch.  0 or -errno.
 */
int batch_builder__finish(struct batch_builder *bb, const struct batch_meta *m, uint8_t **out,
			  size_t *len);

void batch_builder__stats(const struct batch_builder *bb, struct batch_builder_stats *st);

/* ---- the other record lists (GPU and scheduler layers: agent/ship/batch_gpu.c,
 * agent/ship/batch_sched.c) ------------------------------------------------------ */

enum bb_list {
	BB_OFFCPU,	   /* Strata__V1__OffCpuSample */
	BB_SCHED,	   /* Strata__V1__SchedStat */
	BB_IRQ,		   /* Strata__V1__IrqStat */
	BB_BREAKDOWN,	   /* Strata__V1__TimeBreakdown */
	BB_LAUNCH,	   /* Strata__V1__CudaLaunch */
	BB_ALLOC,	   /* Strata__V1__CudaAlloc */
	BB_ALLOC_FAIL,	   /* Strata__V1__CudaAllocFailure */
	BB_TRANSFER,	   /* Strata__V1__CudaTransfer */
	BB_TALLY,	   /* struct bb_tally_row */
	BB_DUTY,	   /* Strata__V1__ProbeDutyCycle */
	BB_COMM,	   /* Strata__V1__NcclComm */
	BB_COLL,	   /* Strata__V1__NcclCollective */
	BB_COLL_STAT,	   /* Strata__V1__NcclCollectiveStat */
	BB_SOFTIRQ,	   /* Strata__V1__SoftirqVectorStat */
	BB_FOREIGN,	   /* Strata__V1__ForeignRun */
	BB_TARGET_CPU,	   /* Strata__V1__TargetCpu */
	BB_CAPTURE_RUN,	   /* Strata__V1__CaptureRun */
	BB_CAPTURE_SAMPLE, /* Strata__V1__CaptureSample */
	BB_GPU_CALL,	   /* Strata__V1__GpuCall */
	BB_INFLIGHT,	   /* Strata__V1__InflightCall */
	BB_THREAD,	   /* Strata__V1__ThreadState */
	BB_LIST_MAX,
};

#define BB_TALLY_CODES 8 /* non-success codes sent per API tally row */
struct bb_tally_row {
	Strata__V1__CudaApiTally m; /* m.errors is set at encoding */
	Strata__V1__CudaApiTally__Code codes[BB_TALLY_CODES];
	Strata__V1__CudaApiTally__Code *ptrs[BB_TALLY_CODES];
};

/* Index of s in this batch's string table; UINT32_MAX on ENOMEM. */
uint32_t batch_builder__string(struct batch_builder *bb, const char *s);
/* Index of the stack frames[0..n) (root first; n = 0: the empty stack 0);
 * -E2BIG past max_stacks (the caller drops its row and counts it with
 * batch_builder__dropped), -ENOMEM, -EINVAL. */
int64_t batch_builder__stack(struct batch_builder *bb, const struct bb_frame *frames, uint32_t n);
/* Index of the first process of this batch with this pid, or -ENOENT. */
int64_t batch_builder__find_pid(const struct batch_builder *bb, uint32_t pid);
/* Fills in what the process's environment did not give: a rank (from
 * ncclCommInitRank) and a job (the NCCL unique-id hash). */
void batch_builder__label_rank(struct batch_builder *bb, uint32_t process, int32_t rank,
			       int32_t nranks, const char *job);
/* Names the process's job where nothing named it yet (a process gone
 * before its environment was read, whose job another layer kept), with
 * where the name came from (strata.io/job-source). */
void batch_builder__label_job(struct batch_builder *bb, uint32_t process, const char *job,
			      const char *source);
/* Names the process where nothing named it yet: a process gone before its
 * /proc was read whose first record in the batch carried no name (an
 * off-CPU block), named by a later layer that kept one (the GPU layer). */
void batch_builder__label_comm(struct batch_builder *bb, uint32_t process, const char *comm);
/* The process exited at exit_ns (CLOCK_REALTIME): Process.exit_ns. */
void batch_builder__process_exit(struct batch_builder *bb, uint32_t process, uint64_t exit_ns);
/* A new row of list l: a zeroed, initialized message (strata.pb-c.h; for
 * BB_TALLY a struct bb_tally_row), or NULL past max_samples rows (counted in
 * rows_dropped) or on ENOMEM. */
void *batch_builder__row(struct batch_builder *bb, enum bb_list l);
/* Rows of list l in this batch, and row i of them (NULL past the end; the
 * pointer holds until the next batch_builder__row of l). */
uint32_t batch_builder__rows(const struct batch_builder *bb, enum bb_list l);
void *batch_builder__row_at(struct batch_builder *bb, enum bb_list l, uint32_t i);
/* Counts n rows a converter had to leave out (Drops.batch_rows_dropped). */
void batch_builder__dropped(struct batch_builder *bb, uint64_t n);

#endif /* STRATA_UPLOADER_BATCH_BUILDER_H */
