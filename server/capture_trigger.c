// SPDX-License-Identifier: Apache-2.0
/*
 * Diagnosis and schedule triggers of deep captures (server/capture_trigger.h).
 */
#include "server/capture_trigger.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"

#define S_NS 1000000000ULL
#define MS_NS 1000000ULL

struct last_capture {
	char job[CAPTURE_NAME_LEN];
	int trigger; /* capture__trigger_index */
	uint64_t at_ns;
};

struct capture_triggers {
	struct capture_registry *reg;
	struct capture_triggers_opts o;
	pthread_mutex_t lock;
	struct last_capture last[TRIGGER_JOBS];
};

struct capture_triggers *capture_triggers__new(struct capture_registry *reg,
					       const struct capture_triggers_opts *o)
{
	struct capture_triggers *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->reg = reg;
	if (o)
		t->o = *o;
	if (!t->o.duration_s)
		t->o.duration_s = TRIGGER_DURATION_S;
	if (!t->o.cooldown_s)
		t->o.cooldown_s = TRIGGER_COOLDOWN_S;
	pthread_mutex_init(&t->lock, NULL);
	return t;
}

void capture_triggers__free(struct capture_triggers *t)
{
	if (!t)
		return;
	pthread_mutex_destroy(&t->lock);
	free(t);
}

/* Claims (job, trigger) for a capture now unless one was made within
 * period_s.  1 claimed, 0 not due. */
static int claim(struct capture_triggers *t, const char *job, int trigger, uint64_t period_s,
		 uint64_t now_ns)
{
	struct last_capture *slot = NULL, *oldest = &t->last[0];
	int ok = 1;

	pthread_mutex_lock(&t->lock);
	for (int i = 0; i < TRIGGER_JOBS && !slot; i++) {
		if (t->last[i].at_ns && t->last[i].trigger == trigger &&
		    !strcmp(t->last[i].job, job))
			slot = &t->last[i];
		else if (t->last[i].at_ns < oldest->at_ns)
			oldest = &t->last[i];
	}
	if (slot && now_ns < slot->at_ns + period_s * S_NS)
		ok = 0;
	if (ok) {
		if (!slot) {
			slot = oldest;
			snprintf(slot->job, sizeof(slot->job), "%s", job);
			slot->trigger = trigger;
		}
		slot->at_ns = now_ns;
	}
	pthread_mutex_unlock(&t->lock);
	return ok;
}

static void target(struct capture_spec *s, const char *node, uint32_t pid)
{
	for (uint32_t i = 0; i < s->ntargets; i++)
		if (s->targets[i].pid == pid && !strcmp(s->targets[i].node, node))
			return;
	if (s->ntargets == CAPTURE_MAX_TARGETS || !pid)
		return;
	snprintf(s->targets[s->ntargets].node, sizeof(s->targets[0].node), "%s", node);
	s->targets[s->ntargets++].pid = pid;
}

static int make(struct capture_triggers *t, struct capture_spec *s, const char *job,
		const char *trigger, uint64_t now_ns)
{
	struct capture c;
	char err[256];
	int ret;

	snprintf(s->job, sizeof(s->job), "%s", job);
	snprintf(s->trigger, sizeof(s->trigger), "%s", trigger);
	s->start_ns = now_ns + (uint64_t)t->o.lead_ms * MS_NS;
	s->end_ns = s->start_ns + (uint64_t)t->o.duration_s * S_NS;
	s->freq_hz = TRIGGER_FREQ_HZ;
	s->offcpu = s->gpu_calls = true;
	ret = capture_registry__add(t->reg, s, now_ns, &c, err, sizeof(err));
	if (ret && ret != -EINVAL && ret != -EBUSY)
		ret = 0; /* kept, not stored: agents still get it */
	if (ret)
		pr_warn("capture: %s trigger for job %s: %s", trigger, job, err);
	else
		pr_info("capture %s: %s of job %s: %s", c.id, trigger, job, s->reason);
	return ret;
}

int capture_triggers__straggler(struct capture_triggers *t, const struct straggler_transition *tr,
				const struct straggler_rank *ranks, size_t n, uint64_t now_ns)
{
	const struct straggler_rank *r = &tr->r;
	const struct straggler_rank *peer[2] = { NULL, NULL };
	struct capture_spec *s;
	int ret;

	if (tr->change != STRAGGLER_CONFIRM || !r->pid)
		return -EINVAL;
	if (!claim(t, r->job, capture__trigger_index("straggler"), t->o.cooldown_s, now_ns))
		return -EALREADY;
	/* two healthy peers: its neighbours in the ring when they are, else
	 * the healthiest of the communicator */
	for (size_t i = 0; i < n; i++) {
		const struct straggler_rank *p = &ranks[i];
		uint32_t next = (r->rank + 1) % (r->nranks ? r->nranks : 1);
		uint32_t prev =
			(r->rank + (r->nranks ? r->nranks : 1) - 1) % (r->nranks ? r->nranks : 1);

		if (p->communicator != r->communicator || p->rank == r->rank || !p->pid ||
		    p->state != STRAGGLER_OK)
			continue;
		if (p->rank == next)
			peer[0] = p;
		else if (p->rank == prev)
			peer[1] = p;
	}
	for (size_t i = 0; i < n && (!peer[0] || !peer[1]); i++) {
		const struct straggler_rank *p = &ranks[i];
		const struct straggler_rank **slot = !peer[0] ? &peer[0] : &peer[1];

		if (p->communicator != r->communicator || p->rank == r->rank || !p->pid ||
		    p->state != STRAGGLER_OK || p == peer[0] || p == peer[1])
			continue;
		if (!*slot || p->score < (*slot)->score)
			*slot = p;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	target(s, r->node, r->pid);
	for (int k = 0; k < 2; k++)
		if (peer[k])
			target(s, peer[k]->node, peer[k]->pid);
	snprintf(s->reason, sizeof(s->reason),
		 "rank %u straggles (%.1f%% of the period); peers %d and %d", r->rank,
		 r->score * 100, peer[0] ? (int)peer[0]->rank : -1,
		 peer[1] ? (int)peer[1]->rank : -1);
	ret = make(t, s, r->job, "straggler", now_ns);
	free(s);
	return ret;
}

int capture_triggers__hang(struct capture_triggers *t, const struct hang_report *h, uint64_t now_ns)
{
	struct capture_spec *s;
	const struct hang_rank *flagged = h->kind == HANG_MISMATCH ? h->mismatched : h->missing;
	uint32_t nflagged = h->kind == HANG_MISMATCH ? h->nmismatched : h->nmissing;
	uint32_t ok = 0;
	int ret;

	if (!claim(t, h->job, capture__trigger_index("hang"), t->o.cooldown_s, now_ns))
		return -EALREADY;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	for (uint32_t i = 0; i < nflagged && i < HANG_MAX_LISTED; i++)
		if (flagged[i].known)
			target(s, flagged[i].node, flagged[i].pid);
	for (uint32_t i = 0; i < h->nwaiting && i < HANG_MAX_LISTED && ok < 2; i++)
		if (h->waiting[i].known) {
			target(s, h->waiting[i].node, h->waiting[i].pid);
			ok++;
		}
	if (!s->ntargets) { /* no process known: the whole job */
		ret = -ENOENT;
		free(s);
		return ret;
	}
	snprintf(s->reason, sizeof(s->reason), "NCCL hang at %s #%llu of communicator %016llx",
		 h->op, (unsigned long long)h->seq, (unsigned long long)h->comm_hash);
	ret = make(t, s, h->job, "hang", now_ns);
	free(s);
	return ret;
}

int capture_triggers__schedule(struct capture_triggers *t, const char *job, uint64_t now_ns)
{
	struct capture_spec *s;
	int ret;

	if (!t->o.every_s || !job || !job[0])
		return -EINVAL;
	if (!claim(t, job, capture__trigger_index("schedule"), t->o.every_s, now_ns))
		return -EALREADY;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	snprintf(s->reason, sizeof(s->reason), "every %u s", t->o.every_s);
	ret = make(t, s, job, "schedule", now_ns);
	free(s);
	return ret;
}
