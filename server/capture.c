// SPDX-License-Identifier: Apache-2.0
/*
 * The capture registry (server/capture.h): a bounded table of captures
 * under one lock, each written to the store as a Capture record when it
 * is made and when it is cancelled.
 */
#include "server/capture.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "lib/clock.h"
#include "lib/hex.h"
#include "lib/json_str.h"
#include "server/batch_decode.h"
#include "server/store/backend.h"

#define S_NS 1000000000ULL

static const char *const TRIGGERS[] = { "api", "straggler", "hang", "oom", "schedule", "oom_kill" };

struct capture_registry {
	pthread_mutex_t lock;
	struct store *st;
	struct capture_opts o;
	struct capture *c; /* CAPTURE_KEEP slots, n used, oldest first */
	size_t n;
	struct capture_stats stats;
};

int capture__trigger_index(const char *trigger)
{
	for (size_t i = 0; i < sizeof(TRIGGERS) / sizeof(TRIGGERS[0]); i++)
		if (!strcmp(trigger, TRIGGERS[i]))
			return (int)i;
	return -1;
}

int capture__active(const struct capture *c, uint64_t now_ns)
{
	return !c->cancelled && now_ns < c->s.end_ns;
}

const char *capture__state(const struct capture *c, uint64_t now_ns)
{
	if (c->cancelled)
		return "cancelled";
	if (now_ns >= c->s.end_ns)
		return "ended";
	return now_ns < c->s.start_ns ? "scheduled" : "running";
}

struct capture_registry *capture_registry__new(struct store *st, const struct capture_opts *o)
{
	struct capture_registry *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->c = calloc(CAPTURE_KEEP, sizeof(*r->c));
	if (!r->c) {
		free(r);
		return NULL;
	}
	pthread_mutex_init(&r->lock, NULL);
	r->st = st;
	if (o)
		r->o = *o;
	if (!r->o.max_s)
		r->o.max_s = CAPTURE_MAX_S_DEFAULT;
	if (!r->o.max_active || r->o.max_active > CAPTURE_KEEP)
		r->o.max_active = CAPTURE_ACTIVE_MAX;
	return r;
}

void capture_registry__free(struct capture_registry *r)
{
	if (!r)
		return;
	pthread_mutex_destroy(&r->lock);
	free(r->c);
	free(r);
}

/* ---- the store's record ------------------------------------------------------ */

/* "PID NODE" a line. */
static char *targets_text(const struct capture_spec *s)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	for (uint32_t i = 0; i < s->ntargets; i++)
		fprintf(f, "%u %s\n", s->targets[i].pid, s->targets[i].node);
	if (fclose(f)) {
		free(buf);
		return NULL;
	}
	return buf;
}

static void targets_parse(const char *text, struct capture_spec *s)
{
	const char *p = text;

	s->ntargets = 0;
	while (p && *p && s->ntargets < CAPTURE_MAX_TARGETS) {
		struct capture_target *t = &s->targets[s->ntargets];
		const char *nl = strchr(p, '\n'), *sp = strchr(p, ' ');
		size_t end = nl ? (size_t)(nl - p) : strlen(p);
		char *e;
		unsigned long pid = strtoul(p, &e, 10);

		if (sp && (size_t)(sp - p) < end && e == sp && pid <= UINT32_MAX) {
			size_t nlen = end - (size_t)(sp + 1 - p);

			t->pid = (uint32_t)pid;
			snprintf(t->node, sizeof(t->node), "%.*s", (int)nlen, sp + 1);
			s->ntargets++;
		}
		p = nl ? nl + 1 : NULL;
	}
}

static int store_record(struct store *st, const struct capture *c, uint64_t now_ns)
{
	Strata__V1__Batch b = STRATA__V1__BATCH__INIT;
	Strata__V1__Capture rec = STRATA__V1__CAPTURE__INIT, *recp = &rec;
	char *strings[8], *targets = targets_text(&c->s), err_msg[128];
	uint8_t id[16];
	struct batch_limits lim = { 0 };
	int err;

	if (!targets)
		return -ENOMEM;
	/* one batch per (capture, state): the record of a cancel differs */
	for (int i = 0; i < 16; i++) {
		unsigned v;

		sscanf(c->id + 2 * i, "%2x", &v);
		id[i] = (uint8_t)(v ^ (c->cancelled ? 0x5a : 0));
	}
	strings[0] = (char *)"";
	strings[1] = (char *)c->id;
	strings[2] = (char *)c->s.job;
	strings[3] = (char *)c->s.trigger;
	strings[4] = (char *)c->s.reason;
	strings[5] = targets;
	strings[6] = (char *)(c->cancelled ? "cancelled" : "scheduled");
	b.version = STRATA__V1__WIRE_VERSION__WIRE_VERSION_CURRENT;
	b.batch_id = (ProtobufCBinaryData){ .len = sizeof(id), .data = id };
	b.node = (char *)STORE_SERVER_NODE;
	b.agent_version = (char *)"strata-server";
	b.start_ns = c->s.start_ns;
	b.end_ns = c->s.end_ns;
	b.strings = strings;
	b.n_strings = 7;
	rec.id_str = 1;
	rec.job_str = 2;
	rec.trigger_str = 3;
	rec.reason_str = 4;
	rec.created_ns = c->created_ns;
	rec.start_ns = c->s.start_ns;
	rec.end_ns = c->s.end_ns;
	rec.freq_hz = c->s.freq_hz;
	rec.offcpu = c->s.offcpu;
	rec.gpu_calls = c->s.gpu_calls;
	rec.targets_str = 5;
	rec.state_str = 6;
	b.captures = &recp;
	b.n_captures = 1;
	err = batch_validate(&b, &lim, err_msg, sizeof(err_msg)) == BATCH_OK ? 0 : -EINVAL;
	if (!err)
		err = st->ops->ingest(st, &(struct store_batch){ .pb = &b, .received_ns = now_ns });
	free(targets);
	return err == 1 ? 0 : err;
}

/* ---- the table ----------------------------------------------------------------- */

static struct capture *find(struct capture_registry *r, const char *id)
{
	for (size_t i = 0; i < r->n; i++)
		if (!strcmp(r->c[i].id, id))
			return &r->c[i];
	return NULL;
}

/* A free slot at the end: the oldest capture that is over goes. */
static struct capture *slot(struct capture_registry *r, uint64_t now_ns)
{
	if (r->n == CAPTURE_KEEP) {
		size_t i;

		for (i = 0; i < r->n && capture__active(&r->c[i], now_ns); i++)
			;
		if (i == r->n)
			return NULL;
		memmove(&r->c[i], &r->c[i + 1], (r->n - i - 1) * sizeof(*r->c));
		r->n--;
	}
	return &r->c[r->n++];
}

static size_t active_count(struct capture_registry *r, uint64_t now_ns)
{
	size_t n = 0;

	for (size_t i = 0; i < r->n; i++)
		n += capture__active(&r->c[i], now_ns) ? 1 : 0;
	return n;
}

static int bad(char *err, size_t errsz, const char *msg)
{
	snprintf(err, errsz, "%s", msg);
	return -EINVAL;
}

static int check_name(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return -EINVAL;
	return 0;
}

int capture_registry__add(struct capture_registry *r, const struct capture_spec *s, uint64_t now_ns,
			  struct capture *out, char *err, size_t errsz)
{
	struct capture c = { .s = *s, .created_ns = now_ns }, *dst;
	uint8_t id[16];
	int ret;

	if (!s->job[0] && !s->ntargets)
		return bad(err, errsz, "a capture needs a job or a node");
	if (s->ntargets > CAPTURE_MAX_TARGETS)
		return bad(err, errsz, "too many targets");
	if (check_name(s->job))
		return bad(err, errsz, "job has control characters");
	for (uint32_t i = 0; i < s->ntargets; i++)
		if (check_name(s->targets[i].node))
			return bad(err, errsz, "node has control characters");
	if (s->end_ns <= s->start_ns)
		return bad(err, errsz, "a capture must last at least 1 s");
	if (capture__trigger_index(s->trigger) < 0)
		return bad(err, errsz, "unknown trigger");
	if (!s->freq_hz && !s->offcpu && !s->gpu_calls)
		return bad(err, errsz, "a capture must raise something (freq, offcpu, gpu_calls)");
	if (c.s.start_ns < now_ns) { /* keep the duration */
		c.s.end_ns += now_ns - c.s.start_ns;
		c.s.start_ns = now_ns;
	}
	if (c.s.end_ns - c.s.start_ns > (uint64_t)r->o.max_s * S_NS)
		c.s.end_ns = c.s.start_ns + (uint64_t)r->o.max_s * S_NS;
	if (c.s.freq_hz > CAPTURE_FREQ_MAX)
		c.s.freq_hz = CAPTURE_FREQ_MAX;
	if (getrandom(id, sizeof(id), 0) != sizeof(id))
		for (int i = 0; i < 16; i++) /* no entropy yet: time and a counter */
			id[i] = (uint8_t)((now_ns >> (8 * (i % 8))) ^ (mono_ns() >> (i % 8)) ^ i);
	build_id_hex(id, sizeof(id), c.id, sizeof(c.id));

	pthread_mutex_lock(&r->lock);
	if (active_count(r, now_ns) >= r->o.max_active || !(dst = slot(r, now_ns))) {
		r->stats.refused++;
		pthread_mutex_unlock(&r->lock);
		snprintf(err, errsz, "%u captures run already", r->o.max_active);
		return -EBUSY;
	}
	*dst = c;
	r->stats.created[capture__trigger_index(c.s.trigger)]++;
	pthread_mutex_unlock(&r->lock);
	if (out)
		*out = c;
	ret = r->st ? store_record(r->st, &c, now_ns) : 0;
	if (ret) {
		__atomic_fetch_add(&r->stats.store_errors, 1, __ATOMIC_RELAXED);
		snprintf(err, errsz, "capture kept, but not stored: %s", strerror(-ret));
	}
	return ret;
}

int capture_registry__cancel(struct capture_registry *r, const char *id, uint64_t now_ns)
{
	struct capture *c, copy;
	int ret;

	pthread_mutex_lock(&r->lock);
	c = find(r, id);
	if (!c) {
		pthread_mutex_unlock(&r->lock);
		return -ENOENT;
	}
	if (!capture__active(c, now_ns)) {
		pthread_mutex_unlock(&r->lock);
		return 0;
	}
	c->cancelled = true;
	if (c->s.end_ns > now_ns)
		c->s.end_ns = now_ns > c->s.start_ns ? now_ns : c->s.start_ns + 1;
	copy = *c;
	pthread_mutex_unlock(&r->lock);
	ret = r->st ? store_record(r->st, &copy, now_ns) : 0;
	if (ret)
		__atomic_fetch_add(&r->stats.store_errors, 1, __ATOMIC_RELAXED);
	return 0;
}

int capture_registry__get(struct capture_registry *r, const char *id, struct capture *out)
{
	struct capture *c;

	pthread_mutex_lock(&r->lock);
	c = find(r, id);
	if (c)
		*out = *c;
	pthread_mutex_unlock(&r->lock);
	return c ? 0 : -ENOENT;
}

size_t capture_registry__list(struct capture_registry *r, const char *job, struct capture *out,
			      size_t max)
{
	size_t n = 0;

	pthread_mutex_lock(&r->lock);
	for (size_t i = r->n; i-- > 0;) {
		if (job && job[0] && strcmp(r->c[i].s.job, job))
			continue;
		if (n < max)
			out[n] = r->c[i];
		n++;
	}
	pthread_mutex_unlock(&r->lock);
	return n;
}

static int for_node(const struct capture_target *t, const char *node)
{
	return !t->node[0] || !strcmp(t->node, node);
}

size_t capture_registry__orders(struct capture_registry *r, const char *node, uint64_t now_ns,
				struct capture_orders *out)
{
	out->n = 0;
	pthread_mutex_lock(&r->lock);
	for (size_t i = 0; i < r->n && out->n < CAPTURE_ORDERS_MAX; i++) {
		const struct capture *c = &r->c[i];
		struct capture *k = &out->keep[out->n];
		Strata__V1__CaptureOrder *o = &out->o[out->n];
		uint32_t nt = 0;
		int mine = !c->s.ntargets;

		if (!capture__active(c, now_ns))
			continue;
		for (uint32_t t = 0; t < c->s.ntargets && !mine; t++)
			mine = for_node(&c->s.targets[t], node);
		if (!mine)
			continue;
		*k = *c;
		strata__v1__capture_order__init(o);
		o->id = k->id;
		o->job = k->s.job;
		o->start_ns = k->s.start_ns;
		o->end_ns = k->s.end_ns;
		o->freq_hz = k->s.freq_hz;
		o->offcpu = k->s.offcpu;
		o->gpu_calls = k->s.gpu_calls;
		for (uint32_t t = 0; t < k->s.ntargets; t++) {
			Strata__V1__CaptureTarget *ct = &out->t[out->n][nt];

			if (!for_node(&k->s.targets[t], node))
				continue;
			strata__v1__capture_target__init(ct);
			ct->node = k->s.targets[t].node;
			ct->pid = k->s.targets[t].pid;
			out->tp[out->n][nt++] = ct;
		}
		o->targets = out->tp[out->n];
		o->n_targets = nt;
		out->op[out->n] = o;
		out->n++;
	}
	r->stats.orders += out->n;
	pthread_mutex_unlock(&r->lock);
	return out->n;
}

/* How far ahead of the server's clock an agent's own capture may say it
 * started (clock skew between nodes). */
#define ADOPT_SKEW_NS (300 * S_NS)

/* A capture an agent started itself (CaptureRun.trigger_str set: a CUDA
 * out-of-memory return, oom; a process the OOM killer chose, oom_kill),
 * recorded the first time the server hears of it.  Its job: the batch's
 * process row's, else the one the agent knew (a killed process may be gone
 * before the agent read its labels). */
static void adopt(struct capture_registry *r, const Strata__V1__Batch *b,
		  const Strata__V1__CaptureRun *run, uint64_t now_ns)
{
	const char *const *S = (const char *const *)b->strings;
	const char *id = S[run->capture_str], *trigger = S[run->trigger_str];
	struct capture c = { .created_ns = now_ns }, *dst;
	int ret;

	if (strlen(id) != CAPTURE_ID_LEN - 1 || strspn(id, "0123456789abcdef") != strlen(id) ||
	    capture__trigger_index(trigger) < 0)
		return;
	memcpy(c.id, id, sizeof(c.id));
	for (size_t i = 0; i < b->n_processes; i++)
		if (b->processes[i]->pid == run->pid)
			snprintf(c.s.job, sizeof(c.s.job), "%s",
				 store_process__job(b, b->processes[i]));
	if (!c.s.job[0])
		snprintf(c.s.job, sizeof(c.s.job), "%s", S[run->job_str]);
	snprintf(c.s.trigger, sizeof(c.s.trigger), "%s", trigger);
	snprintf(c.s.reason, sizeof(c.s.reason), "started by the agent on %s: process %u (%s)",
		 b->node, run->pid,
		 !strcmp(trigger, "oom")	? "CUDA out of memory"
		 : !strcmp(trigger, "oom_kill") ? "chosen by the kernel's OOM killer"
						: trigger);
	snprintf(c.s.targets[0].node, sizeof(c.s.targets[0].node), "%s", b->node);
	c.s.targets[0].pid = run->pid;
	c.s.ntargets = 1;
	c.s.start_ns = run->from_ns && run->from_ns < run->start_ns ? run->from_ns : run->start_ns;
	/* The agent's times.  Its capture began at its trigger, before this
	 * batch: one that claims to start later than a clock's skew from now
	 * would hold a running slot for as long as it claims (the API's,
	 * stragglers' and hangs' captures refused meanwhile). */
	if (run->start_ns > now_ns + ADOPT_SKEW_NS) {
		pthread_mutex_lock(&r->lock);
		r->stats.refused++;
		pthread_mutex_unlock(&r->lock);
		return;
	}
	c.s.end_ns = run->until_ns > c.s.start_ns ? run->until_ns : c.s.start_ns + S_NS;
	if (c.s.end_ns - c.s.start_ns > (uint64_t)r->o.max_s * S_NS)
		c.s.end_ns = c.s.start_ns + (uint64_t)r->o.max_s * S_NS;
	c.s.freq_hz = run->freq_hz < CAPTURE_FREQ_MAX ? run->freq_hz : CAPTURE_FREQ_MAX;
	c.s.gpu_calls = c.s.offcpu = true;
	pthread_mutex_lock(&r->lock);
	if (find(r, id) || !(dst = slot(r, now_ns))) {
		pthread_mutex_unlock(&r->lock);
		return;
	}
	*dst = c;
	r->stats.created[capture__trigger_index(trigger)]++;
	pthread_mutex_unlock(&r->lock);
	ret = r->st ? store_record(r->st, &c, now_ns) : 0;
	if (ret)
		__atomic_fetch_add(&r->stats.store_errors, 1, __ATOMIC_RELAXED);
}

void capture_registry__note_batch(struct capture_registry *r, const Strata__V1__Batch *b,
				  uint64_t now_ns)
{
	for (size_t i = 0; i < b->n_capture_runs; i++)
		if (b->strings[b->capture_runs[i]->trigger_str][0])
			adopt(r, b, b->capture_runs[i], now_ns);
}

void capture_registry__stats(struct capture_registry *r, uint64_t now_ns, struct capture_stats *st)
{
	pthread_mutex_lock(&r->lock);
	*st = r->stats;
	st->active = active_count(r, now_ns);
	pthread_mutex_unlock(&r->lock);
	st->store_errors = __atomic_load_n(&r->stats.store_errors, __ATOMIC_RELAXED);
}

void capture_registry__metrics(struct capture_registry *r, FILE *o)
{
	struct capture_stats st;

	capture_registry__stats(r, realtime_ns(), &st);
	fputs("# HELP strata_captures_total deep captures made, by trigger\n"
	      "# TYPE strata_captures_total counter\n",
	      o);
	for (size_t i = 0; i < sizeof(TRIGGERS) / sizeof(TRIGGERS[0]); i++)
		fprintf(o, "strata_captures_total{trigger=\"%s\"} %" PRIu64 "\n", TRIGGERS[i],
			st.created[i]);
	fprintf(o,
		"# HELP strata_captures_refused_total captures refused: too many running, or an "
		"agent's own that claims to start ahead of the server's clock\n"
		"# TYPE strata_captures_refused_total counter\n"
		"strata_captures_refused_total %" PRIu64 "\n"
		"# HELP strata_capture_orders_total capture orders handed to agents in batch "
		"answers\n"
		"# TYPE strata_capture_orders_total counter\n"
		"strata_capture_orders_total %" PRIu64 "\n"
		"# HELP strata_capture_store_errors_total capture records not stored\n"
		"# TYPE strata_capture_store_errors_total counter\n"
		"strata_capture_store_errors_total %" PRIu64 "\n"
		"# HELP strata_captures_active captures running or about to start\n"
		"# TYPE strata_captures_active gauge\n"
		"strata_captures_active %" PRIu64 "\n",
		st.refused, st.orders, st.store_errors, st.active);
}

/* ---- loading at start ---------------------------------------------------------- */

struct load_ctx {
	struct capture_registry *r;
};

static int on_record(void *ctx, const struct store_capture *sc)
{
	struct capture_registry *r = ((struct load_ctx *)ctx)->r;
	struct capture *c = find(r, sc->id);

	if (strlen(sc->id) != CAPTURE_ID_LEN - 1)
		return 0;
	if (!c) {
		if (r->n == CAPTURE_KEEP) { /* oldest out: the store hands them oldest first */
			memmove(&r->c[0], &r->c[1], (r->n - 1) * sizeof(*r->c));
			r->n--;
		}
		c = &r->c[r->n++];
		memset(c, 0, sizeof(*c));
		snprintf(c->id, sizeof(c->id), "%s", sc->id);
	}
	snprintf(c->s.job, sizeof(c->s.job), "%s", sc->job);
	snprintf(c->s.trigger, sizeof(c->s.trigger), "%s", sc->trigger);
	snprintf(c->s.reason, sizeof(c->s.reason), "%s", sc->reason);
	c->created_ns = sc->created_ns;
	c->s.start_ns = sc->start_ns;
	c->s.end_ns = sc->end_ns;
	c->s.freq_hz = sc->freq_hz;
	c->s.offcpu = sc->offcpu;
	c->s.gpu_calls = sc->gpu_calls;
	c->cancelled = !strcmp(sc->state, "cancelled");
	targets_parse(sc->targets, &c->s);
	return 0;
}

int capture_registry__load(struct capture_registry *r, uint64_t now_ns)
{
	struct load_ctx lc = { .r = r };
	struct store_filter f = { 0 };
	int err;

	(void)now_ns;
	if (!r->st)
		return 0;
	pthread_mutex_lock(&r->lock);
	err = r->st->ops->captures(r->st, &f, on_record, &lc);
	pthread_mutex_unlock(&r->lock);
	return err;
}

/* ---- JSON ------------------------------------------------------------------------ */

void capture__json(FILE *o, const struct capture *c, uint64_t now_ns)
{
	fputc('{', o);
	capture__json_members(o, c, now_ns);
	fputc('}', o);
}

void capture__json_members(FILE *o, const struct capture *c, uint64_t now_ns)
{
	fprintf(o, "\"id\":\"%s\",\"job\":", c->id);
	json_write_str(o, c->s.job);
	fputs(",\"trigger\":", o);
	json_write_str(o, c->s.trigger);
	fputs(",\"reason\":", o);
	json_write_str(o, c->s.reason);
	fprintf(o,
		",\"state\":\"%s\",\"created_ns\":%" PRIu64 ",\"start_ns\":%" PRIu64
		",\"end_ns\":%" PRIu64 ",\"duration_s\":%.3f,\"freq_hz\":%u,\"offcpu\":%s,"
		"\"gpu_calls\":%s,\"targets\":[",
		capture__state(c, now_ns), c->created_ns, c->s.start_ns, c->s.end_ns,
		(double)(c->s.end_ns - c->s.start_ns) / 1e9, c->s.freq_hz,
		c->s.offcpu ? "true" : "false", c->s.gpu_calls ? "true" : "false");
	for (uint32_t i = 0; i < c->s.ntargets; i++) {
		fputs(i ? ",{\"node\":" : "{\"node\":", o);
		json_write_str(o, c->s.targets[i].node);
		fprintf(o, ",\"pid\":%u}", c->s.targets[i].pid);
	}
	fprintf(o, "],\"trace\":\"/api/v1/captures/%s/trace\"", c->id);
}
