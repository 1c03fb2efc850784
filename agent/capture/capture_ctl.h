/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Triggered deep capture in the agent (docs/diagnosis.md "Deep capture"):
 * the captures strata-server orders in its answers to this node's batches
 * (proto CaptureOrder), and the ones the agent starts itself (a CUDA
 * out-of-memory return, a process the OOM killer chose), each applied
 * for its bounded time:
 *
 *   - an order's start and end are turned into this agent's monotonic
 *     clock when it arrives: a capture starts and ENDS on that clock, with
 *     or without the server (it never waits for an answer to end one), and
 *     lasts at most CAPTURE_AGENT_MAX_S whatever the order says;
 *   - an order the server stops listing ended there (cancelled);
 *   - the processes are resolved every tick: the order's pids, or the
 *     job's processes among the session's candidates (training processes
 *     and their forks), so a rank that starts late joins;
 *   - what the running captures raise together goes to the session in one
 *     call (session__raise): the timed sampler's rate (the highest), every
 *     GPU call (duty cycle held), off-CPU stacks.
 *
 * Orders arrive on the uploader's thread (capture_ctl__post); everything
 * else runs on the agent's main loop.  Bounded: CAPTURE_AGENT_MAX captures
 * kept (orders beyond are refused and counted).
 */
#ifndef STRATA_AGENT_CAPTURE_CAPTURE_CTL_H
#define STRATA_AGENT_CAPTURE_CAPTURE_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "strata.pb-c.h"

#define CAPTURE_AGENT_MAX 16	   /* captures kept (pending, running, ended unreported) */
#define CAPTURE_AGENT_MAX_S 600	   /* longest capture the agent runs, whatever it is told */
#define CAPTURE_AGENT_FREQ_MAX 999 /* its timed sampler's ceiling (Hz) */
#define CAPTURE_AGENT_PIDS 64	   /* processes named by one capture */
#define CAPTURE_AGENT_PROCS 1024   /* processes one capture may resolve to */

struct session;

enum capture_state { CAP_PENDING = 1, CAP_RUNNING, CAP_ENDED };

/* One capture as the agent runs it. */
struct capture_run {
	char id[33];
	char job[128];
	char trigger[16]; /* "" ordered by the server; "oom", "oom_kill": the agent's own */
	uint32_t pids[CAPTURE_AGENT_PIDS]; /* 0 in pids[0] with npids 1: every process of the job */
	uint32_t npids;
	uint32_t freq_hz;
	bool offcpu, gpu_calls;
	enum capture_state state;
	uint64_t start_mono, end_mono;	     /* this agent's clock */
	uint64_t start_real, end_real;	     /* when it really started / ended (0: not yet) */
	uint64_t from_real;		     /* its own capture: its data from here (the ring) */
	const char *end_reason;		     /* "end", "cancelled", "stop" */
	uint32_t processes;		     /* resolved at the last tick */
	uint32_t procs[CAPTURE_AGENT_PROCS]; /* they: every one it ever held, sorted */
	uint32_t nprocs;
	uint64_t samples, gpu_calls_seen, dropped;
	bool reported_end;
	bool seen; /* listed in the latest answer */
};

struct capture_ctl_stats {
	uint64_t orders, refused, started, ended, cancelled, oom;
	uint64_t raise_errors;
	uint64_t late_ns_max; /* the latest end after its deadline (tick lateness) */
};

struct capture_ctl;

/* NULL without memory. */
struct capture_ctl *capture_ctl__new(void);
void capture_ctl__free(struct capture_ctl *c);

/* The uploader's thread: the captures of one answer (all the server wants
 * of this node now), received at (mono, real).  Thread-safe. */
void capture_ctl__post(struct capture_ctl *c, Strata__V1__CaptureOrder *const *orders, size_t n,
		       uint64_t now_mono, uint64_t now_real);

/* A capture the agent starts itself (trigger "oom": a CUDA out-of-memory
 * return of tgid; "oom_kill": the OOM killer chose tgid; of job: ""
 * unknown), secs long from now, with data from from_real (what it kept
 * before).  0 or -ENOSPC. */
int capture_ctl__start_own(struct capture_ctl *c, const char *trigger, uint32_t tgid,
			   const char *job, uint32_t secs, uint32_t freq_hz, uint64_t from_real,
			   uint64_t now_mono, uint64_t now_real, char *id_out);

/* The main loop: takes what was posted, starts and ends captures on the
 * monotonic clock, resolves their processes and raises them in s (NULL:
 * tests; then only the orders' pids are resolved).
 * Returns the milliseconds until the next start or end (at most 1000). */
int capture_ctl__tick(struct capture_ctl *c, struct session *s, uint64_t now_mono,
		      uint64_t now_real);

/* Ends every capture now ("stop": the agent exits) and lowers the raise. */
void capture_ctl__stop(struct capture_ctl *c, struct session *s, uint64_t now_mono,
		       uint64_t now_real);

/* Whether tgid was in a capture that asks for GPU calls at t_real (one
 * running, or ended and not reported yet); counts what was recorded for
 * the captures that hold it. */
bool capture_ctl__captured(const struct capture_ctl *c, uint32_t tgid, uint64_t t_real);
void capture_ctl__count(struct capture_ctl *c, uint32_t tgid, uint64_t samples, uint64_t calls,
			uint64_t dropped);

/* The captures to report in this batch: running ones, and ended ones once
 * (then forgotten).  fn's run is valid during the call. */
typedef void (*capture_run_fn)(void *ctx, const struct capture_run *r);
void capture_ctl__report(struct capture_ctl *c, capture_run_fn fn, void *ctx);

/* True while a capture runs or waits to start. */
bool capture_ctl__busy(const struct capture_ctl *c);

void capture_ctl__stats(const struct capture_ctl *c, struct capture_ctl_stats *st);

#endif /* STRATA_AGENT_CAPTURE_CAPTURE_CTL_H */
