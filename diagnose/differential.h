/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Layered differential diagnosis: one flagged rank against its peers over
 * the same window, metric by metric and layer by layer (cpu, os, python,
 * cuda, nccl), ranked by how far the rank sits from the peer median in
 * robust units (MAD-scaled, with floors in the metric's own units so that
 * identical peers do not turn noise into a finding).  It proposes causes
 * with evidence; it does not act.
 *
 * Inputs are per-rank summaries the server builds from its store; every
 * pointer is borrowed for the call.  Pure computation: no I/O, no globals.
 */
#ifndef STRATA_DIAGNOSE_DIFFERENTIAL_H
#define STRATA_DIAGNOSE_DIFFERENTIAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/enums.h"

enum diag_layer {
	DIAG_LAYER_CPU = 0,
	DIAG_LAYER_OS,
	DIAG_LAYER_PYTHON,
	DIAG_LAYER_CUDA,
	DIAG_LAYER_NCCL,
	DIAG_LAYER_MAX,
};

/* A stack with a weight: folded frames "outermost;...;leaf", value in ns. */
struct diag_stack {
	const char *frames;
	double ns;
};

/* Another process that ran on one of the rank's CPUs. */
struct diag_foreign {
	const char *comm;
	uint32_t pid;
	double ns;
};

/* IRQ or softirq time on one CPU the rank ran on. */
struct diag_irq {
	uint32_t cpu;
	uint32_t vector; /* softirq: NET_RX = 3 ...; hardirq: irq number */
	bool softirq;
	double ns;
};

/* One rank over one window.  Absent data: leave 0 / NULL (then the metric
 * is 0 for that rank, which is what "no time spent there" means). */
struct diag_rank_window {
	uint32_t rank;
	double wall_ns; /* window length: shares are of this */
	/* cpu */
	const struct diag_stack *oncpu; /* on-CPU time by stack (samples * period) */
	size_t n_oncpu;
	/* How many samples oncpu was measured from (0: exact times).  A stack
	 * share from few samples is noisy (binomial): the finding needs a
	 * difference beyond that noise, not one sample among six. */
	double oncpu_samples;
	double runnable_ns; /* runnable, waiting for a CPU */
	const struct diag_foreign *foreign;
	size_t n_foreign;
	const struct diag_irq *irq;
	size_t n_irq;
	/* os */
	double offcpu_ns[STRATA_OFF_MAX];
	const struct diag_stack *offcpu[STRATA_OFF_MAX]; /* blocking stacks by reason */
	size_t n_offcpu[STRATA_OFF_MAX];
	/* cuda */
	double launches;       /* kernel launches in the window */
	double sync_ns;	       /* blocked in cuda*Synchronize / event waits */
	double copy_ns;	       /* blocked in cudaMemcpy* */
	double alloc_failures; /* cudaMalloc* returning an error */
	/* nccl */
	double collective_ns;
	double collective_bytes;
	double seq_gaps; /* sequence numbers skipped (calls not seen) */
};

#define DIAG_METRIC_LEN 40
#define DIAG_EVIDENCE_MAX 3
#define DIAG_EVIDENCE_LEN 256

struct diag_finding {
	uint32_t layer; /* enum diag_layer */
	char metric[DIAG_METRIC_LEN];
	double value;	    /* the flagged rank's */
	double peer_median; /* the peers' */
	double score;	    /* robust z: (value - median) / max(1.4826 MAD, floor) */
	uint32_t n_evidence;
	char evidence[DIAG_EVIDENCE_MAX][DIAG_EVIDENCE_LEN];
};

struct diag_diff_opts {
	size_t sz;
	double min_score; /* findings below are noise (3) */
	/* Frames that mark data loading (substrings); NULL-terminated.  NULL:
	 * PyTorch's DataLoader and common dataset frames. */
	const char *const *loader_patterns;
};

/*
 * Compares flagged with peers[0..npeers) (npeers >= 1) and writes up to max
 * findings, highest score first.  Returns how many were written, or -EINVAL
 * / -ENOMEM.
 */
int diag_differential(const struct diag_rank_window *flagged, const struct diag_rank_window *peers,
		      size_t npeers, const struct diag_diff_opts *opts, struct diag_finding *out,
		      size_t max);

const char *diag_layer_name(enum diag_layer l);
const char *diag_softirq_name(uint32_t vector);

#endif /* STRATA_DIAGNOSE_DIFFERENTIAL_H */
