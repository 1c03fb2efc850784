// SPDX-License-Identifier: Apache-2.0
/*
 * The agent's deep captures (agent/capture/capture_ctl.h): orders into
 * captures on the monotonic clock, their processes, the session's raise.
 */
#include "agent/capture/capture_ctl.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "agent/core/session.h"
#include "agent/proc/proc_stat.h"
#include "agent/ship/proc_labels.h"
#include "lib/hex.h"
#include "lib/log.h"

#define S_NS 1000000000ULL
#define MS_NS 1000000ULL
#define JOB_SLOTS 2048 /* tgid -> job, checked against the start time */

struct posted {
	Strata__V1__CaptureOrder o;
	char id[33], job[128];
	uint32_t pids[CAPTURE_AGENT_PIDS];
	uint32_t npids;
	bool every_process; /* a target with pid 0: the job's processes here */
};

struct job_slot {
	uint32_t tgid;
	uint64_t start_ticks;
	char job[PROC_LABEL_LEN];
};

struct capture_ctl {
	pthread_mutex_t lock; /* the mailbox */
	struct posted *mail;  /* CAPTURE_ORDERS_MAX */
	size_t nmail;
	bool fresh; /* an answer came since the last tick */
	uint64_t mail_mono, mail_real;

	struct capture_run runs[CAPTURE_AGENT_MAX];
	struct job_slot *jobs; /* JOB_SLOTS */
	uint64_t boot_epoch_ns;

	/* ids of captures that ended here: an answer that still lists one
	 * (the server's clock, or a late answer) never starts it again */
	char ended[CAPTURE_AGENT_MAX][33];
	uint32_t nended;

	/* the raise now: its processes, sorted */
	uint32_t *procs;
	size_t nprocs;
	uint64_t resolved_mono; /* processes are resolved once a second at most */
	bool dirty;		/* a capture started or ended since */
	uint32_t freq_hz;
	bool offcpu, gpu_calls;

	struct capture_ctl_stats st;
};

#define MAIL_MAX 8

struct capture_ctl *capture_ctl__new(void)
{
	struct capture_ctl *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->mail = calloc(MAIL_MAX, sizeof(*c->mail));
	c->jobs = calloc(JOB_SLOTS, sizeof(*c->jobs));
	c->procs = calloc(SESSION_RAISE_MAX, sizeof(*c->procs));
	if (!c->mail || !c->jobs || !c->procs) {
		capture_ctl__free(c);
		return NULL;
	}
	pthread_mutex_init(&c->lock, NULL);
	c->boot_epoch_ns = proc_labels__boot_epoch_ns();
	return c;
}

void capture_ctl__free(struct capture_ctl *c)
{
	if (!c)
		return;
	if (c->mail)
		pthread_mutex_destroy(&c->lock);
	free(c->mail);
	free(c->jobs);
	free(c->procs);
	free(c);
}

void capture_ctl__post(struct capture_ctl *c, Strata__V1__CaptureOrder *const *orders, size_t n,
		       uint64_t now_mono, uint64_t now_real)
{
	pthread_mutex_lock(&c->lock);
	c->nmail = 0;
	for (size_t i = 0; i < n && c->nmail < MAIL_MAX; i++) {
		const Strata__V1__CaptureOrder *o = orders[i];
		struct posted *p = &c->mail[c->nmail];

		if (!o->id || strlen(o->id) != 32 || !o->job)
			continue;
		memset(p, 0, sizeof(*p));
		p->o = *o;
		snprintf(p->id, sizeof(p->id), "%s", o->id);
		snprintf(p->job, sizeof(p->job), "%s", o->job);
		for (size_t t = 0; t < o->n_targets && p->npids < CAPTURE_AGENT_PIDS; t++)
			if (o->targets[t]->pid)
				p->pids[p->npids++] = o->targets[t]->pid;
			else
				p->every_process = true;
		/* targets with pids only, or the job's processes */
		if (!o->n_targets)
			p->every_process = true;
		c->nmail++;
	}
	c->st.orders += n;
	c->fresh = true;
	c->mail_mono = now_mono;
	c->mail_real = now_real;
	pthread_mutex_unlock(&c->lock);
}

static struct capture_run *find(struct capture_ctl *c, const char *id)
{
	for (int i = 0; i < CAPTURE_AGENT_MAX; i++)
		if (c->runs[i].state && !strcmp(c->runs[i].id, id))
			return &c->runs[i];
	return NULL;
}

static bool ended_here(const struct capture_ctl *c, const char *id)
{
	for (uint32_t i = 0; i < CAPTURE_AGENT_MAX && i < c->nended; i++)
		if (!strcmp(c->ended[i], id))
			return true;
	return false;
}

static struct capture_run *new_run(struct capture_ctl *c)
{
	for (int i = 0; i < CAPTURE_AGENT_MAX; i++)
		if (!c->runs[i].state)
			return memset(&c->runs[i], 0, sizeof(c->runs[i]));
	c->st.refused++;
	return NULL;
}

/* A realtime instant of the server's into this agent's monotonic clock,
 * as seen at (mono, real) when the answer came. */
static uint64_t to_mono(uint64_t t_real, uint64_t mono, uint64_t real)
{
	return t_real > real ? mono + (t_real - real) : mono;
}

static void end_run(struct capture_ctl *c, struct capture_run *r, const char *why,
		    uint64_t now_mono, uint64_t now_real)
{
	if (r->state == CAP_RUNNING) {
		r->end_real = now_real;
		if (now_mono > r->end_mono && now_mono - r->end_mono > c->st.late_ns_max)
			c->st.late_ns_max = now_mono - r->end_mono;
	}
	if (r->state == CAP_PENDING)
		r->start_real = r->end_real = now_real; /* never ran: report it ended */
	r->state = CAP_ENDED;
	r->end_reason = why;
	c->dirty = true;
	memcpy(c->ended[c->nended++ % CAPTURE_AGENT_MAX], r->id, sizeof(r->id));
	c->st.ended++;
	if (!strcmp(why, "cancelled"))
		c->st.cancelled++;
	pr_info("capture %s: ended (%s)", r->id, why);
}

/* Merges the latest answer: new orders become captures, a capture the
 * server stopped listing ended there. */
static void take_mail(struct capture_ctl *c, uint64_t now_mono, uint64_t now_real)
{
	struct posted mail[MAIL_MAX];
	uint64_t mono, real;
	size_t n;

	pthread_mutex_lock(&c->lock);
	if (!c->fresh) {
		pthread_mutex_unlock(&c->lock);
		return;
	}
	n = c->nmail;
	memcpy(mail, c->mail, n * sizeof(*mail));
	mono = c->mail_mono;
	real = c->mail_real;
	c->fresh = false;
	pthread_mutex_unlock(&c->lock);

	for (int i = 0; i < CAPTURE_AGENT_MAX; i++)
		c->runs[i].seen = false;
	for (size_t i = 0; i < n; i++) {
		const struct posted *p = &mail[i];
		struct capture_run *r = find(c, p->id);
		uint64_t start = to_mono(p->o.start_ns, mono, real);
		uint64_t end = to_mono(p->o.end_ns, mono, real);

		if (r) {
			r->seen = true;
			/* shortened: never lengthened; to before its start,
			 * it is cancelled before it began */
			if (end < r->end_mono)
				r->end_mono = end > r->start_mono ? end : r->start_mono;
			if (r->state == CAP_PENDING && end <= r->start_mono)
				end_run(c, r, "cancelled", now_mono, now_real);
			continue;
		}
		/* over already, or ending before it starts: nothing to take
		 * (the bound below would turn the latter into 600 s) */
		if (p->o.end_ns <= real || end <= start || ended_here(c, p->id) ||
		    !(r = new_run(c)))
			continue;
		snprintf(r->id, sizeof(r->id), "%s", p->id);
		snprintf(r->job, sizeof(r->job), "%s", p->job);
		memcpy(r->pids, p->pids, p->npids * sizeof(*r->pids));
		r->npids = p->npids;
		if (p->every_process)
			r->pids[r->npids < CAPTURE_AGENT_PIDS ? r->npids++ : r->npids - 1] = 0;
		r->freq_hz = p->o.freq_hz < CAPTURE_AGENT_FREQ_MAX ? p->o.freq_hz
								   : CAPTURE_AGENT_FREQ_MAX;
		r->offcpu = p->o.offcpu;
		r->gpu_calls = p->o.gpu_calls;
		r->start_mono = start;
		r->end_mono = end;
		/* the agent's own bound, whatever it is told */
		if (r->end_mono - r->start_mono > CAPTURE_AGENT_MAX_S * S_NS)
			r->end_mono = r->start_mono + CAPTURE_AGENT_MAX_S * S_NS;
		r->state = CAP_PENDING;
		r->seen = true;
		pr_info("capture %s: ordered, starts in %.3f s for %.3f s", r->id,
			(double)(r->start_mono > now_mono ? r->start_mono - now_mono : 0) / 1e9,
			(double)(r->end_mono - r->start_mono) / 1e9);
	}
	/* listed no more: the server ended or cancelled it */
	for (int i = 0; i < CAPTURE_AGENT_MAX; i++) {
		struct capture_run *r = &c->runs[i];

		if ((r->state == CAP_PENDING || r->state == CAP_RUNNING) && !r->seen &&
		    !r->trigger[0] && now_mono < r->end_mono)
			end_run(c, r, "cancelled", now_mono, now_real);
	}
}

int capture_ctl__start_own(struct capture_ctl *c, const char *trigger, uint32_t tgid,
			   const char *job, uint32_t secs, uint32_t freq_hz, uint64_t from_real,
			   uint64_t now_mono, uint64_t now_real, char *id_out)
{
	struct capture_run *r = new_run(c);
	uint8_t id[16];

	if (!r)
		return -ENOSPC;
	if (getrandom(id, sizeof(id), GRND_NONBLOCK) != sizeof(id))
		for (int i = 0; i < 16; i++)
			id[i] = (uint8_t)((now_mono >> (i % 8 * 8)) ^ (now_real >> (i % 7)) ^ tgid);
	build_id_hex(id, sizeof(id), r->id, sizeof(r->id));
	snprintf(r->trigger, sizeof(r->trigger), "%s", trigger);
	snprintf(r->job, sizeof(r->job), "%s", job ? job : "");
	r->pids[0] = tgid;
	r->npids = 1;
	r->freq_hz = freq_hz;
	r->gpu_calls = true;
	r->offcpu = true;
	r->start_mono = now_mono;
	r->end_mono = now_mono + (uint64_t)secs * S_NS;
	r->from_real = from_real;
	r->state = CAP_PENDING;
	c->st.oom++;
	if (id_out)
		memcpy(id_out, r->id, sizeof(r->id));
	return 0;
}

/* ---- processes -------------------------------------------------------------------- */

/* tgid's job label (the server's rule: STRATA_JOB, TORCHELASTIC_RUN_ID,
 * SLURM_JOB_ID), cached by (tgid, start time); NULL when gone. */
static const char *job_of(struct capture_ctl *c, uint32_t tgid)
{
	struct job_slot *j = &c->jobs[(tgid * 2654435761u) % JOB_SLOTS];
	uint64_t start = proc_stat__start_ticks("/proc", tgid, NULL, 0);
	struct proc_labels *l;

	if (!start)
		return NULL;
	if (j->tgid == tgid && j->start_ticks == start)
		return j->job;
	l = malloc(sizeof(*l));
	if (!l || proc_labels__read(tgid, c->boot_epoch_ns, start, l)) {
		free(l);
		return NULL;
	}
	j->tgid = tgid;
	j->start_ticks = start;
	snprintf(j->job, sizeof(j->job), "%s", l->job);
	free(l);
	return j->job;
}

struct resolve_ctx {
	uint32_t *procs; /* SESSION_RAISE_MAX */
	size_t n;
};

static void add_proc(struct resolve_ctx *x, uint32_t tgid)
{
	for (size_t i = 0; i < x->n; i++)
		if (x->procs[i] == tgid)
			return;
	if (x->n < SESSION_RAISE_MAX)
		x->procs[x->n++] = tgid;
}

/* The candidates, deduplicated, once per tick. */
struct cand_ctx {
	uint32_t *v;
	size_t n, max;
};

static void on_candidate(void *ctx, uint32_t tgid)
{
	struct cand_ctx *cc = ctx;

	for (size_t i = 0; i < cc->n; i++)
		if (cc->v[i] == tgid)
			return;
	if (cc->n < cc->max)
		cc->v[cc->n++] = tgid;
}

static bool wants_job(const struct capture_run *r)
{
	for (uint32_t i = 0; i < r->npids; i++)
		if (!r->pids[i])
			return true;
	return false;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* Remembers that r held tgid (for the calls drained after it ended). */
static void hold(struct capture_run *r, uint32_t tgid)
{
	if (bsearch(&tgid, r->procs, r->nprocs, sizeof(tgid), cmp_u32) ||
	    r->nprocs == CAPTURE_AGENT_PROCS)
		return;
	r->procs[r->nprocs++] = tgid;
	qsort(r->procs, r->nprocs, sizeof(tgid), cmp_u32);
}

static bool holds(const struct capture_run *r, uint32_t tgid)
{
	return bsearch(&tgid, r->procs, r->nprocs, sizeof(tgid), cmp_u32) != NULL;
}

static void resolve(struct capture_ctl *c, struct session *s, struct resolve_ctx *x)
{
	struct cand_ctx cc = { .max = SESSION_RAISE_MAX };
	bool any_job = false;

	for (int i = 0; i < CAPTURE_AGENT_MAX; i++)
		any_job |= c->runs[i].state == CAP_RUNNING && wants_job(&c->runs[i]);
	if (any_job && s) {
		cc.v = malloc(cc.max * sizeof(*cc.v));
		if (cc.v)
			session__candidates(s, on_candidate, &cc);
	}
	for (int i = 0; i < CAPTURE_AGENT_MAX; i++) {
		struct capture_run *r = &c->runs[i];
		uint32_t count = 0;

		if (r->state != CAP_RUNNING)
			continue;
		for (uint32_t p = 0; p < r->npids; p++)
			if (r->pids[p]) {
				add_proc(x, r->pids[p]);
				hold(r, r->pids[p]);
				count++;
			}
		for (size_t k = 0; wants_job(r) && k < cc.n && count < CAPTURE_AGENT_PROCS; k++) {
			const char *job = job_of(c, cc.v[k]);

			if (job && job[0] && !strcmp(job, r->job)) {
				add_proc(x, cc.v[k]);
				hold(r, cc.v[k]);
				count++;
			}
		}
		r->processes = count;
	}
	free(cc.v);
}

/* Raises what the running captures want together, when it changed. */
static void apply(struct capture_ctl *c, struct session *s)
{
	struct resolve_ctx x = { 0 };
	uint32_t freq = 0;
	bool offcpu = false, gpu = false, same;

	x.procs = malloc(SESSION_RAISE_MAX * sizeof(*x.procs));
	if (!x.procs)
		return;
	for (int i = 0; i < CAPTURE_AGENT_MAX; i++) {
		const struct capture_run *r = &c->runs[i];

		if (r->state != CAP_RUNNING)
			continue;
		freq = r->freq_hz > freq ? r->freq_hz : freq;
		offcpu |= r->offcpu;
		gpu |= r->gpu_calls;
	}
	resolve(c, s, &x);
	/* sorted, so that a set in another order is the same set */
	qsort(x.procs, x.n, sizeof(*x.procs), cmp_u32);
	same = x.n == c->nprocs && freq == c->freq_hz && offcpu == c->offcpu &&
	       gpu == c->gpu_calls && !memcmp(x.procs, c->procs, x.n * sizeof(*x.procs));
	if (!same) {
		struct session_raise sr = { .freq_hz = freq,
					    .gpu_calls = gpu,
					    .offcpu = offcpu,
					    .tgids = x.procs,
					    .ntgids = x.n };

		if (s && session__raise(s, &sr))
			c->st.raise_errors++;
		memcpy(c->procs, x.procs, x.n * sizeof(*x.procs));
		c->nprocs = x.n;
		c->freq_hz = freq;
		c->offcpu = offcpu;
		c->gpu_calls = gpu;
		pr_info("capture: raising %zu processes (%u Hz%s%s)", x.n, freq,
			gpu ? ", every GPU call" : "", offcpu ? ", off-CPU stacks" : "");
	}
	free(x.procs);
}

int capture_ctl__tick(struct capture_ctl *c, struct session *s, uint64_t now_mono,
		      uint64_t now_real)
{
	uint64_t next = now_mono + 1000 * MS_NS;

	take_mail(c, now_mono, now_real);
	for (int i = 0; i < CAPTURE_AGENT_MAX; i++) {
		struct capture_run *r = &c->runs[i];

		if (r->state == CAP_PENDING && now_mono >= r->start_mono) {
			c->dirty = true;
			r->state = CAP_RUNNING;
			r->start_real = now_real;
			c->st.started++;
			pr_info("capture %s: started", r->id);
		}
		if (r->state == CAP_RUNNING && now_mono >= r->end_mono)
			end_run(c, r, "end", now_mono, now_real);
		if (r->state == CAP_PENDING && r->start_mono < next)
			next = r->start_mono;
		if (r->state == CAP_RUNNING && r->end_mono < next)
			next = r->end_mono;
	}
	/* The loop wakes for every event: processes are looked up (their job
	 * labels, the session's candidates) once a second, or at a change. */
	if (c->dirty || (capture_ctl__busy(c) && now_mono >= c->resolved_mono + 1000 * MS_NS)) {
		apply(c, s);
		c->dirty = false;
		c->resolved_mono = now_mono;
	}
	return next > now_mono ? (int)((next - now_mono + MS_NS - 1) / MS_NS) : 0;
}

void capture_ctl__stop(struct capture_ctl *c, struct session *s, uint64_t now_mono,
		       uint64_t now_real)
{
	for (int i = 0; i < CAPTURE_AGENT_MAX; i++)
		if (c->runs[i].state == CAP_PENDING || c->runs[i].state == CAP_RUNNING)
			end_run(c, &c->runs[i], "stop", now_mono, now_real);
	apply(c, s);
}

bool capture_ctl__captured(const struct capture_ctl *c, uint32_t tgid, uint64_t t_real)
{
	for (int i = 0; c && i < CAPTURE_AGENT_MAX; i++) {
		const struct capture_run *r = &c->runs[i];

		if ((r->state != CAP_RUNNING && r->state != CAP_ENDED) || !r->gpu_calls ||
		    !r->start_real || t_real < r->start_real ||
		    (r->state == CAP_ENDED && t_real > r->end_real))
			continue;
		if (holds(r, tgid))
			return true;
	}
	return false;
}

void capture_ctl__count(struct capture_ctl *c, uint32_t tgid, uint64_t samples, uint64_t calls,
			uint64_t dropped)
{
	/* Every running capture that holds the process: by its pids, or by
	 * job (the resolved set holds it and the capture wants its job). */
	for (int i = 0; i < CAPTURE_AGENT_MAX; i++) {
		struct capture_run *r = &c->runs[i];

		if ((r->state != CAP_RUNNING && r->state != CAP_ENDED) || !holds(r, tgid))
			continue;
		r->samples += samples;
		r->gpu_calls_seen += calls;
		r->dropped += dropped;
	}
}

void capture_ctl__report(struct capture_ctl *c, capture_run_fn fn, void *ctx)
{
	for (int i = 0; i < CAPTURE_AGENT_MAX; i++) {
		struct capture_run *r = &c->runs[i];

		if (r->state == CAP_RUNNING)
			fn(ctx, r);
		else if (r->state == CAP_ENDED && !r->reported_end) {
			fn(ctx, r);
			r->reported_end = true;
			r->state = 0; /* reported: forgotten (its id stays unknown) */
		}
	}
}

bool capture_ctl__busy(const struct capture_ctl *c)
{
	for (int i = 0; i < CAPTURE_AGENT_MAX; i++)
		if (c->runs[i].state == CAP_PENDING || c->runs[i].state == CAP_RUNNING)
			return true;
	return false;
}

void capture_ctl__stats(const struct capture_ctl *c, struct capture_ctl_stats *st)
{
	*st = c->st;
}
