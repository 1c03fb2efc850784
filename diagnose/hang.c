// SPDX-License-Identifier: Apache-2.0
/*
 * NCCL hang detection (see hang.h).  Per communicator: each rank's last
 * completed call and its call in flight with when it was seen, the recent
 * sequence numbers (their first entry, for the period, and the variants of
 * (op, bytes) the ranks called there, for mismatches); per node its latest
 * batch end; per process its exit and its GPU call in flight.
 */
#include "diagnose/hang.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/hash.h"

#define RECENT 64	 /* sequence numbers remembered per communicator */
#define VARIANTS 4	 /* distinct (op, bytes) at one sequence number */
#define NODE_SLOTS 8192	 /* power of two; at most half used */
#define PROC_SLOTS 16384 /* power of two; at most half used */
#define MISMATCH_KEPT 16
/* A communicator with no call in this many of the job's batches per node
 * (60: 10 minutes at the agents' 10-s period; counted in batches, not by
 * the calls' own times, which a node's clock can put anywhere) may give
 * its slot to a new one when all are taken: its job restarted. */
#define COMM_IDLE_BATCHES 60

struct node_st {
	uint64_t key; /* 0: free */
	char node[DIAG_NAME_LEN];
	int64_t as_of;
};

struct proc_st {
	uint64_t key; /* 0: free */
	int64_t exited_ns;
	char api[40];
	int64_t api_entry, api_as_of;
	char sched_state[4], wchan[40], kstack[256];
	int32_t syscall;
	int64_t state_as_of;
};

struct rank_st {
	bool used;
	char node[DIAG_NAME_LEN];
	uint32_t pid;
	uint64_t node_key, proc_key;
	bool has_last;
	uint64_t last_seq, last_bytes;
	char last_op[HANG_OP_LEN];
	int64_t last_entry, last_exit;
	bool has_in;
	uint64_t in_seq, in_bytes;
	char in_op[HANG_OP_LEN];
	int64_t in_entry, in_as_of;
};

struct variant {
	char op[HANG_OP_LEN];
	uint64_t bytes;
	uint32_t count;
};

struct recent {
	bool used, reported;
	uint64_t seq;
	int64_t first_entry;
	uint32_t seen;
	struct variant v[VARIANTS];
	uint32_t nv;
	struct {
		int32_t rank;
		uint8_t variant;
	} who[HANG_MAX_LISTED * 2];
	uint32_t nwho;
};

struct comm_st {
	uint64_t comm_hash;
	int32_t nranks;
	struct rank_st *ranks;
	struct recent recent[RECENT];
	bool hang_on;
	struct hang_report cur;
	uint64_t seen_batch; /* the job's batch count at its latest call */
};

struct hang_detector {
	char job[DIAG_NAME_LEN];
	struct hang_opts o;
	struct comm_st *comms;
	uint32_t ncomms;
	struct node_st *nodes;
	uint32_t nnodes;
	struct proc_st *procs;
	uint32_t nprocs;
	struct hang_report mism[MISMATCH_KEPT]; /* ring, newest at mism_next - 1 */
	uint32_t mism_next, nmism;
	struct hang_transition *pending; /* mismatches decided at a call, until evaluated */
	size_t npending;
	uint64_t batches;   /* hang_detector__batch calls */
	uint64_t forgot_at; /* batches + 1 at the last forget_unranked */
	struct hang_stats st;
};

struct hang_detector *hang_detector__new(const char *job, const struct hang_opts *o)
{
	struct hang_detector *d = calloc(1, sizeof(*d));

	if (!d)
		return NULL;
	snprintf(d->job, sizeof(d->job), "%s", job ? job : "");
	d->o = (struct hang_opts){
		.period_factor = 10, .min_ns = 5000000000ull, .max_comms = 256, .max_ranks = 8192
	};
	if (o) {
		if (o->period_factor > 0)
			d->o.period_factor = o->period_factor;
		if (o->min_ns)
			d->o.min_ns = o->min_ns;
		if (o->max_comms)
			d->o.max_comms = o->max_comms;
		if (o->max_ranks)
			d->o.max_ranks = o->max_ranks;
	}
	d->comms = calloc(d->o.max_comms, sizeof(*d->comms));
	d->nodes = calloc(NODE_SLOTS, sizeof(*d->nodes));
	d->procs = calloc(PROC_SLOTS, sizeof(*d->procs));
	d->pending = calloc(MISMATCH_KEPT, sizeof(*d->pending));
	if (!d->comms || !d->nodes || !d->procs || !d->pending) {
		hang_detector__free(d);
		return NULL;
	}
	return d;
}

void hang_detector__free(struct hang_detector *d)
{
	if (!d)
		return;
	for (uint32_t i = 0; d->comms && i < d->ncomms; i++)
		free(d->comms[i].ranks);
	free(d->comms);
	free(d->nodes);
	free(d->procs);
	free(d->pending);
	free(d);
}

/* ---- tables ------------------------------------------------------------------ */

/* A bounded copy that tolerates what snprintf's checks cannot prove
 * (dst inside the detector, src a variant chosen by index). */
static void copy_str(char *dst, size_t size, const char *src)
{
	size_t n = strnlen(src, size - 1);

	memmove(dst, src, n);
	dst[n] = '\0';
}

static uint64_t node_key(const char *node)
{
	uint64_t k = hash_bytes(node, strlen(node), 0x6e6f6465);

	return k ? k : 1;
}

static uint64_t proc_key(uint64_t nk, uint32_t pid)
{
	uint64_t v[2] = { nk, pid }, k = hash_bytes(v, sizeof(v), 0x70726f63);

	return k ? k : 1;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * Rebuilds an open-addressing table of nslots slots of sz bytes, each
 * starting with its uint64_t key (0: free), keeping only the keys in
 * keep[0..nkeep) (sorted).  Returns the entries kept, or -ENOMEM with the
 * table unchanged.
 */
static int64_t table_keep(void *slots, uint32_t nslots, size_t sz, const uint64_t *keep,
			  size_t nkeep)
{
	char *old = malloc((size_t)nslots * sz), *t = slots;
	int64_t n = 0;

	if (!old)
		return -ENOMEM;
	memcpy(old, t, (size_t)nslots * sz);
	memset(t, 0, (size_t)nslots * sz);
	for (uint32_t i = 0; i < nslots; i++) {
		uint64_t key;
		uint32_t j;

		memcpy(&key, old + (size_t)i * sz, sizeof(key));
		if (!key || !nkeep || !bsearch(&key, keep, nkeep, sizeof(*keep), cmp_u64))
			continue;
		for (j = (uint32_t)key & (nslots - 1); *(uint64_t *)(t + (size_t)j * sz);
		     j = (j + 1) & (nslots - 1))
			;
		memcpy(t + (size_t)j * sz, old + (size_t)i * sz, sz);
		n++;
	}
	free(old);
	return n;
}

/*
 * A full process or node table lets go of the entries no communicator's
 * rank is bound to: the processes of a restarted job's earlier runs, a
 * job's DataLoader workers that exited, nodes it left.  Each batch of
 * every job names processes; without this the tables filled in days and
 * the exits, GPU calls and thread states of the job's new ranks were lost
 * (procs_dropped).  At most once per batch: when the ranks themselves fill
 * a table, adds fail (counted) until the next.  True when it ran.
 */
static bool forget_unranked(struct hang_detector *d)
{
	size_t n = 0, cap = 0;
	uint64_t *keys;
	int64_t kept;

	if (d->forgot_at == d->batches + 1)
		return false;
	d->forgot_at = d->batches + 1;
	for (uint32_t i = 0; i < d->ncomms; i++)
		cap += (size_t)d->comms[i].nranks;
	keys = malloc((cap ? cap : 1) * sizeof(*keys));
	if (!keys)
		return false;
	for (int pass = 0; pass < 2; pass++) {
		n = 0;
		for (uint32_t i = 0; i < d->ncomms; i++)
			for (int32_t r = 0; r < d->comms[i].nranks; r++)
				if (d->comms[i].ranks[r].used)
					keys[n++] = pass ? d->comms[i].ranks[r].node_key
							 : d->comms[i].ranks[r].proc_key;
		qsort(keys, n, sizeof(*keys), cmp_u64);
		kept = pass ? table_keep(d->nodes, NODE_SLOTS, sizeof(*d->nodes), keys, n)
			    : table_keep(d->procs, PROC_SLOTS, sizeof(*d->procs), keys, n);
		if (kept < 0)
			continue;
		if (pass) {
			d->st.nodes_forgotten += d->nnodes - (uint32_t)kept;
			d->nnodes = (uint32_t)kept;
		} else {
			d->st.procs_forgotten += d->nprocs - (uint32_t)kept;
			d->nprocs = (uint32_t)kept;
		}
	}
	free(keys);
	return true;
}

/*
 * The slot of key in the process (procs) or node table, added when add and
 * fewer than half the slots are used (a full table first lets go of what
 * no rank uses); NULL when absent, or refused (counted).
 */
static void *slot_get(struct hang_detector *d, bool procs, uint64_t key, int add)
{
	char *t = procs ? (char *)d->procs : (char *)d->nodes;
	uint32_t nslots = procs ? PROC_SLOTS : NODE_SLOTS, *n = procs ? &d->nprocs : &d->nnodes;
	size_t sz = procs ? sizeof(*d->procs) : sizeof(*d->nodes);

	for (int tries = 0; tries < 2; tries++) {
		for (uint32_t i = (uint32_t)key & (nslots - 1);; i = (i + 1) & (nslots - 1)) {
			uint64_t *k = (uint64_t *)(t + (size_t)i * sz);

			if (*k == key)
				return k;
			if (*k)
				continue;
			if (!add)
				return NULL;
			if (*n < nslots / 2) {
				*k = key;
				(*n)++;
				return k;
			}
			break;
		}
		if (!forget_unranked(d))
			break;
	}
	if (procs)
		d->st.procs_dropped++;
	else
		d->st.nodes_dropped++;
	return NULL;
}

_Static_assert(offsetof(struct node_st, key) == 0 && offsetof(struct proc_st, key) == 0,
	       "slot_get: the key starts a slot");

static struct node_st *node_get(struct hang_detector *d, uint64_t key, const char *name, int add)
{
	struct node_st *n = slot_get(d, false, key, add);

	if (n && !n->node[0] && name) /* new */
		snprintf(n->node, sizeof(n->node), "%s", name);
	return n;
}

static struct proc_st *proc_get(struct hang_detector *d, uint64_t key, int add)
{
	return slot_get(d, true, key, add);
}

static struct comm_st *comm_get(struct hang_detector *d, uint64_t hash, int32_t nranks)
{
	struct rank_st *ranks;
	struct comm_st *c;

	for (uint32_t i = 0; i < d->ncomms; i++)
		if (d->comms[i].comm_hash == hash)
			return &d->comms[i];
	if (nranks < 1 || (uint32_t)nranks > d->o.max_ranks) {
		d->st.ranks_dropped++;
		return NULL;
	}
	if (d->ncomms == d->o.max_comms) {
		/* all taken: the one idle longest, if idle for
		 * COMM_IDLE_BATCHES per node and not hung, makes room (a job
		 * that restarts makes new communicators each time; they used
		 * to fill the table, and the job's hangs went undetected from
		 * then on) */
		uint64_t idle = COMM_IDLE_BATCHES * (uint64_t)(d->nnodes ? d->nnodes : 1);

		c = NULL;
		for (uint32_t i = 0; i < d->ncomms; i++)
			if (!d->comms[i].hang_on && (!c || d->comms[i].seen_batch < c->seen_batch))
				c = &d->comms[i];
		if (!c || c->seen_batch + idle > d->batches) {
			d->st.comms_dropped++;
			return NULL;
		}
	} else {
		c = &d->comms[d->ncomms];
	}
	ranks = calloc((size_t)nranks, sizeof(*ranks));
	if (!ranks)
		return NULL;
	if (c == &d->comms[d->ncomms]) {
		d->ncomms++;
	} else {
		free(c->ranks);
		d->st.comms_evicted++;
	}
	memset(c, 0, sizeof(*c));
	c->ranks = ranks;
	c->comm_hash = hash;
	c->nranks = nranks;
	return c;
}

/* ---- input --------------------------------------------------------------------- */

void hang_detector__batch(struct hang_detector *d, const char *node, int64_t as_of_ns)
{
	struct node_st *n = node_get(d, node_key(node), node, 1);

	d->batches++;
	if (n && as_of_ns > n->as_of)
		n->as_of = as_of_ns;
}

static int same_call(const struct variant *v, const char *op, uint64_t bytes)
{
	return v->bytes == bytes && !strncmp(v->op, op, HANG_OP_LEN - 1);
}

static void mismatch_report(struct hang_detector *d, struct comm_st *c, struct recent *r);

/* A completed call at seq: the sequence's first entry and its variants. */
static void note_recent(struct hang_detector *d, struct comm_st *c, const struct hang_call *k)
{
	struct recent *r = &c->recent[k->seq % RECENT];
	uint32_t v;

	if (!r->used || r->seq != k->seq) {
		if (r->used && r->seq > k->seq)
			return; /* older than what the ring holds */
		if (r->used && r->nv > 1 && !r->reported)
			mismatch_report(d, c, r); /* evicted before every rank came */
		memset(r, 0, sizeof(*r));
		r->used = true;
		r->seq = k->seq;
		r->first_entry = k->entry_ns;
	}
	if (k->entry_ns < r->first_entry)
		r->first_entry = k->entry_ns;
	r->seen++;
	for (v = 0; v < r->nv && !same_call(&r->v[v], k->op, k->bytes); v++)
		;
	if (v == r->nv) {
		if (r->nv == VARIANTS)
			return;
		snprintf(r->v[v].op, sizeof(r->v[v].op), "%s", k->op);
		r->v[v].bytes = k->bytes;
		r->nv++;
	}
	r->v[v].count++;
	if (r->nwho < sizeof(r->who) / sizeof(r->who[0])) {
		r->who[r->nwho].rank = k->rank;
		r->who[r->nwho].variant = (uint8_t)v;
		r->nwho++;
	}
	if (r->nv > 1 && !r->reported && r->seen >= (uint32_t)c->nranks)
		mismatch_report(d, c, r);
}

static void rank_fill(const struct hang_detector *d, const struct comm_st *c, int32_t rank,
		      struct hang_rank *o);

/* The ranks that called something else than the majority at r->seq. */
static void mismatch_report(struct hang_detector *d, struct comm_st *c, struct recent *r)
{
	struct hang_report *h = &d->mism[d->mism_next];
	uint32_t major = 0;

	r->reported = true;
	for (uint32_t v = 1; v < r->nv; v++)
		if (r->v[v].count > r->v[major].count)
			major = v;
	memset(h, 0, sizeof(*h));
	copy_str(h->job, sizeof(h->job), d->job);
	h->kind = HANG_MISMATCH;
	h->comm_hash = c->comm_hash;
	h->seq = r->seq;
	snprintf(h->op, sizeof(h->op), "%s", r->v[major].op);
	h->bytes = r->v[major].bytes;
	h->nranks = c->nranks;
	h->since_ns = h->as_of_ns = h->decided_ns = r->first_entry;
	for (uint32_t i = 0; i < r->nwho; i++) {
		struct hang_rank *m;

		if (r->who[i].variant == major)
			continue;
		if (h->nmismatched++ >= HANG_MAX_LISTED)
			continue;
		m = &h->mismatched[h->nmismatched - 1];
		rank_fill(d, c, r->who[i].rank, m);
		snprintf(m->op, sizeof(m->op), "%s", r->v[r->who[i].variant].op);
		m->bytes = r->v[r->who[i].variant].bytes;
	}
	d->mism_next = (d->mism_next + 1) % MISMATCH_KEPT;
	if (d->nmism < MISMATCH_KEPT)
		d->nmism++;
	d->st.mismatches++;
	if (d->npending < MISMATCH_KEPT)
		d->pending[d->npending++] =
			(struct hang_transition){ .change = HANG_CONFIRM, .h = *h };
}

void hang_detector__call(struct hang_detector *d, const struct hang_call *k)
{
	struct comm_st *c;
	struct rank_st *r;

	if (!k->node || !k->op || k->rank < 0 || k->rank >= k->nranks) {
		d->st.bad++;
		return;
	}
	c = comm_get(d, k->comm_hash, k->nranks);
	if (!c)
		return;
	c->seen_batch = d->batches;
	if (k->rank >= c->nranks) {
		d->st.bad++;
		return;
	}
	r = &c->ranks[k->rank];
	if (!r->used || r->pid != k->pid || strcmp(r->node, k->node)) {
		/* a new process for the rank (a restart): it starts afresh */
		memset(r, 0, sizeof(*r));
		r->used = true;
		snprintf(r->node, sizeof(r->node), "%s", k->node);
		r->pid = k->pid;
		r->node_key = node_key(k->node);
		r->proc_key = proc_key(r->node_key, k->pid);
	}
	if (k->exit_ns) {
		d->st.calls++;
		if (!r->has_last || k->seq >= r->last_seq) {
			r->has_last = true;
			r->last_seq = k->seq;
			r->last_bytes = k->bytes;
			snprintf(r->last_op, sizeof(r->last_op), "%s", k->op);
			r->last_entry = k->entry_ns;
			r->last_exit = k->exit_ns;
		}
		note_recent(d, c, k);
		return;
	}
	d->st.inflight++;
	if (r->has_in && k->as_of_ns < r->in_as_of)
		return; /* an older batch, arrived late */
	r->has_in = true;
	r->in_seq = k->seq;
	r->in_bytes = k->bytes;
	snprintf(r->in_op, sizeof(r->in_op), "%s", k->op);
	r->in_entry = k->entry_ns;
	r->in_as_of = k->as_of_ns;
}

void hang_detector__gpu_call(struct hang_detector *d, const char *node, uint32_t pid,
			     const char *api, int64_t entry_ns, int64_t as_of_ns)
{
	struct proc_st *p = proc_get(d, proc_key(node_key(node), pid), 1);

	if (!p || as_of_ns < p->api_as_of)
		return;
	snprintf(p->api, sizeof(p->api), "%s", api ? api : "");
	p->api_entry = entry_ns;
	p->api_as_of = as_of_ns;
}

void hang_detector__thread_state(struct hang_detector *d, const char *node, uint32_t pid,
				 const char *state, const char *wchan, const char *kstack,
				 int32_t syscall, int64_t as_of_ns)
{
	struct proc_st *p = proc_get(d, proc_key(node_key(node), pid), 1);

	if (!p || as_of_ns < p->state_as_of)
		return;
	copy_str(p->sched_state, sizeof(p->sched_state), state ? state : "");
	copy_str(p->wchan, sizeof(p->wchan), wchan ? wchan : "");
	copy_str(p->kstack, sizeof(p->kstack), kstack ? kstack : "");
	p->syscall = syscall;
	p->state_as_of = as_of_ns;
}

void hang_detector__exit(struct hang_detector *d, const char *node, uint32_t pid, int64_t exit_ns)
{
	struct proc_st *p = proc_get(d, proc_key(node_key(node), pid), 1);

	d->st.exits++;
	if (p && exit_ns > 0)
		p->exited_ns = exit_ns;
}

/* ---- judging ------------------------------------------------------------------- */

static int64_t heard(struct hang_detector *d, const struct rank_st *r)
{
	const struct node_st *n = node_get(d, r->node_key, NULL, 0);

	return n ? n->as_of : 0;
}

/* In flight now: its node's latest batch listed it, and no later call
 * completed. */
static bool in_flight(struct hang_detector *d, const struct rank_st *r)
{
	if (!r->used || !r->has_in || (r->has_last && r->last_seq >= r->in_seq))
		return false;
	return r->in_as_of >= heard(d, r);
}

static void rank_fill(const struct hang_detector *d, const struct comm_st *c, int32_t rank,
		      struct hang_rank *o)
{
	const struct rank_st *r = rank >= 0 && rank < c->nranks ? &c->ranks[rank] : NULL;
	const struct proc_st *p;
	const struct node_st *n;

	memset(o, 0, sizeof(*o));
	o->rank = rank;
	o->syscall = -1;
	if (!r || !r->used)
		return;
	o->known = true;
	snprintf(o->node, sizeof(o->node), "%s", r->node);
	o->pid = r->pid;
	o->has_last = r->has_last;
	o->last_seq = r->last_seq;
	snprintf(o->last_op, sizeof(o->last_op), "%s", r->last_op);
	o->last_exit_ns = r->last_exit;
	n = node_get((struct hang_detector *)d, r->node_key, NULL, 0);
	o->heard_ns = n ? n->as_of : 0;
	p = proc_get((struct hang_detector *)d, r->proc_key, 0);
	if (p) {
		o->exited_ns = p->exited_ns;
		/* a GPU call its node's latest batch listed */
		if (p->api[0] && p->api_as_of >= o->heard_ns) {
			snprintf(o->gpu_call, sizeof(o->gpu_call), "%s", p->api);
			o->gpu_call_since_ns = p->api_entry;
		}
		o->syscall = -1;
		if (p->state_as_of && p->state_as_of >= o->heard_ns) {
			copy_str(o->sched_state, sizeof(o->sched_state), p->sched_state);
			copy_str(o->wchan, sizeof(o->wchan), p->wchan);
			copy_str(o->kstack, sizeof(o->kstack), p->kstack);
			o->syscall = p->syscall;
		}
	}
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

/* Median time per sequence step over the recent consecutive collectives
 * (0: unknown). */
static int64_t period_of(const struct comm_st *c)
{
	int64_t gaps[RECENT];
	size_t n = 0;

	for (uint32_t i = 0; i < RECENT; i++) {
		const struct recent *r = &c->recent[i], *p;

		if (!r->used || !r->seq)
			continue;
		p = &c->recent[(r->seq - 1) % RECENT];
		if (p->used && p->seq == r->seq - 1 && r->first_entry > p->first_entry)
			gaps[n++] = r->first_entry - p->first_entry;
	}
	if (n < 3)
		return 0;
	qsort(gaps, n, sizeof(gaps[0]), cmp_i64);
	return gaps[n / 2];
}

/* The hang of c now, if any: ranks waiting in the newest collective any
 * rank is in, for at least the threshold. */
static bool judge(struct hang_detector *d, struct comm_st *c, struct hang_report *h)
{
	int64_t period = period_of(c), threshold, first = INT64_MAX, as_of = INT64_MIN;
	uint64_t n = 0;
	bool any = false;
	uint32_t counts[VARIANTS] = { 0 }, nv = 0, major = 0;
	struct variant v[VARIANTS];

	for (int32_t i = 0; i < c->nranks; i++) {
		const struct rank_st *r = &c->ranks[i];

		if (!in_flight(d, r))
			continue;
		if (!any || r->in_seq > n)
			n = r->in_seq;
		any = true;
	}
	if (!any)
		return false;
	for (int32_t i = 0; i < c->nranks; i++) {
		const struct rank_st *r = &c->ranks[i];

		if (r->used && r->has_last && r->last_seq >= n)
			return false; /* a rank completed it: the others' view is stale */
	}
	memset(h, 0, sizeof(*h));
	for (int32_t i = 0; i < c->nranks; i++) {
		const struct rank_st *r = &c->ranks[i];
		uint32_t k;

		if (!in_flight(d, r) || r->in_seq != n)
			continue;
		first = r->in_entry < first ? r->in_entry : first;
		as_of = r->in_as_of > as_of ? r->in_as_of : as_of;
		for (k = 0; k < nv && !(v[k].bytes == r->in_bytes && !strcmp(v[k].op, r->in_op));
		     k++)
			;
		if (k == nv && nv < VARIANTS) {
			snprintf(v[nv].op, sizeof(v[nv].op), "%s", r->in_op);
			v[nv].bytes = r->in_bytes;
			nv++;
		}
		if (k < nv)
			counts[k]++;
	}
	threshold = (int64_t)(d->o.period_factor * (double)period);
	if (threshold < (int64_t)d->o.min_ns)
		threshold = (int64_t)d->o.min_ns;
	if (as_of - first < threshold)
		return false;
	/* A rank is missing only on its own node's word: a batch cut at least
	 * the threshold after the wait began that does not list it in N, or
	 * its node silent for twice the threshold (its agent gone); a rank
	 * that exited is missing at once. */
	for (int32_t i = 0; i < c->nranks; i++) {
		const struct rank_st *r = &c->ranks[i];
		const struct proc_st *p;
		int64_t h;

		if (!r->used || (in_flight(d, r) && r->in_seq == n))
			continue;
		p = proc_get(d, r->proc_key, 0);
		h = heard(d, r);
		if ((!p || !p->exited_ns) && h < first + threshold && as_of - h < 2 * threshold)
			return false;
	}
	for (uint32_t k = 1; k < nv; k++)
		if (counts[k] > counts[major])
			major = k;
	snprintf(h->job, sizeof(h->job), "%s", d->job);
	h->comm_hash = c->comm_hash;
	h->seq = n;
	copy_str(h->op, sizeof(h->op), v[major].op);
	h->bytes = v[major].bytes;
	h->nranks = c->nranks;
	h->since_ns = first;
	h->as_of_ns = h->decided_ns = as_of;
	h->threshold_s = (double)threshold / 1e9;
	h->period_s = (double)period / 1e9;
	for (int32_t i = 0; i < c->nranks; i++) {
		const struct rank_st *r = &c->ranks[i];
		struct hang_rank tmp;

		rank_fill(d, c, i, &tmp);
		if (in_flight(d, r) && r->in_seq == n) {
			tmp.since_ns = r->in_entry;
			snprintf(tmp.op, sizeof(tmp.op), "%s", r->in_op);
			tmp.bytes = r->in_bytes;
			if (h->nwaiting++ < HANG_MAX_LISTED)
				h->waiting[h->nwaiting - 1] = tmp;
			if ((r->in_bytes != v[major].bytes || strcmp(r->in_op, v[major].op)) &&
			    h->nmismatched++ < HANG_MAX_LISTED)
				h->mismatched[h->nmismatched - 1] = tmp;
			continue;
		}
		if (in_flight(d, r)) { /* in another collective: desynchronised */
			tmp.in_other = true;
			tmp.other_seq = r->in_seq;
			snprintf(tmp.other_op, sizeof(tmp.other_op), "%s", r->in_op);
			tmp.other_bytes = r->in_bytes;
		}
		if (h->nmissing++ < HANG_MAX_LISTED)
			h->missing[h->nmissing - 1] = tmp;
	}
	h->kind = h->nmissing ? HANG_MISSING : HANG_STALLED;
	return true;
}

static void emit(struct hang_transition *out, size_t max, size_t *n, uint32_t change,
		 const struct hang_report *h)
{
	if (*n < max)
		out[*n] = (struct hang_transition){ .change = change, .h = *h };
	(*n)++;
}

/* The latest observation of c's ranks (when a hang is seen to be over). */
static int64_t latest(struct hang_detector *d, const struct comm_st *c)
{
	int64_t t = c->cur.as_of_ns;

	for (int32_t i = 0; i < c->nranks; i++) {
		const struct rank_st *r = &c->ranks[i];

		if (r->used && heard(d, r) > t)
			t = heard(d, r);
		if (r->used && r->has_last && r->last_exit > t)
			t = r->last_exit;
	}
	return t;
}

size_t hang_detector__evaluate(struct hang_detector *d, struct hang_transition *out, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < d->npending; i++)
		emit(out, max, &n, d->pending[i].change, &d->pending[i].h);
	d->npending = 0;
	for (uint32_t i = 0; i < d->ncomms; i++) {
		struct comm_st *c = &d->comms[i];
		struct hang_report h;
		bool hung = judge(d, c, &h);

		if (c->hang_on && (!hung || h.seq != c->cur.seq)) {
			c->cur.until_ns = latest(d, c);
			emit(out, max, &n, HANG_CLEAR, &c->cur);
			c->hang_on = false;
		}
		if (hung && !c->hang_on) {
			c->cur = h;
			c->hang_on = true;
			d->st.hangs++;
			emit(out, max, &n, HANG_CONFIRM, &c->cur);
		} else if (hung) { /* still: refresh what it shows */
			h.decided_ns = c->cur.decided_ns;
			c->cur = h;
		}
	}
	return n;
}

size_t hang_detector__expire(struct hang_detector *d, struct hang_transition *out, size_t max)
{
	size_t n = 0;

	for (uint32_t i = 0; i < d->ncomms; i++) {
		struct comm_st *c = &d->comms[i];

		if (!c->hang_on)
			continue;
		c->cur.until_ns = latest(d, c);
		emit(out, max, &n, HANG_CLEAR, &c->cur);
		c->hang_on = false;
	}
	return n;
}

size_t hang_detector__list(const struct hang_detector *d, struct hang_report *out, size_t max)
{
	size_t n = 0;

	for (uint32_t i = 0; i < d->ncomms; i++)
		if (d->comms[i].hang_on) {
			if (n < max)
				out[n] = d->comms[i].cur;
			n++;
		}
	for (uint32_t k = 0; k < d->nmism; k++) {
		uint32_t i = (d->mism_next + MISMATCH_KEPT - 1 - k) % MISMATCH_KEPT;

		if (n < max)
			out[n] = d->mism[i];
		n++;
	}
	return n;
}

void hang_detector__stats(const struct hang_detector *d, struct hang_stats *st)
{
	*st = d->st;
}
