// SPDX-License-Identifier: Apache-2.0
/*
 * Query endpoints over the store: jobs, nodes, processes/ranks, profiles
 * (exported by the agent's own encoders through lib/profile.h), leaks
 * and CUDA API tallies.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "lib/profile.h"
#include "server/server.h"

#define FILTER_OR_400(r, prefix, f)                                            \
	do {                                                                   \
		char ferr_[128];                                               \
		if (request__filter((r), (prefix), (f), ferr_, sizeof(ferr_))) \
			return json_error(out, 400, "%s", ferr_);              \
	} while (0)

struct list_ctx {
	FILE *out;
	int n;
};

static void sep(struct list_ctx *l)
{
	if (l->n++)
		fputc(',', l->out);
}

static int list_end(struct list_ctx *l, int err)
{
	if (err) {
		/* The body may be half written: start over with the error. */
		rewind(l->out);
		return json_store_error(l->out, err);
	}
	fputs("]}\n", l->out);
	return 200;
}

static int job_row(void *ctx, const struct store_job *j)
{
	struct list_ctx *l = ctx;

	sep(l);
	fputs("{\"job\":", l->out);
	json_str(l->out, j->job);
	fprintf(l->out,
		",\"nodes\":%u,\"processes\":%u,\"ranks\":%u,\"world_size\":%d,\"first\":%.3f,"
		"\"last\":%.3f,\"cpu_samples\":%" PRIu64 "}",
		j->nodes, j->processes, j->ranks, j->world_size, j->first_ns / 1e9,
		j->last_ns / 1e9, j->cpu_samples);
	return 0;
}

int api_jobs(struct server *srv, const struct request *r, FILE *out)
{
	struct list_ctx l = { out, 0 };
	struct store_filter f;

	FILTER_OR_400(r, "", &f);
	fputs("{\"jobs\":[", out);
	return list_end(&l, srv->store->ops->jobs(srv->store, &f, job_row, &l));
}

static int node_row(void *ctx, const struct store_node *n)
{
	struct list_ctx *l = ctx;

	sep(l);
	fputs("{\"node\":", l->out);
	json_str(l->out, n->node);
	fputs(",\"agent_version\":", l->out);
	json_str(l->out, n->agent_version);
	fprintf(l->out,
		",\"first\":%.3f,\"last\":%.3f,\"batches\":%" PRIu64 ",\"cpu_samples\":%" PRIu64
		",\"drops\":%" PRIu64 "}",
		n->first_ns / 1e9, n->last_ns / 1e9, n->batches, n->cpu_samples, n->drops);
	return 0;
}

int api_nodes(struct server *srv, const struct request *r, FILE *out)
{
	struct list_ctx l = { out, 0 };
	struct store_filter f;

	FILTER_OR_400(r, "", &f);
	fputs("{\"nodes\":[", out);
	return list_end(&l, srv->store->ops->nodes(srv->store, &f, node_row, &l));
}

static void json_rank(FILE *out, int has_rank, int32_t rank)
{
	if (has_rank)
		fprintf(out, ",\"rank\":%d", rank);
	else
		fputs(",\"rank\":null", out);
}

static int process_row(void *ctx, const struct store_process *p)
{
	struct list_ctx *l = ctx;
	FILE *o = l->out;

	sep(l);
	fputs("{\"node\":", o);
	json_str(o, p->node);
	fprintf(o, ",\"pid\":%u,\"start_time\":%.3f,\"comm\":", p->pid, p->start_time_ns / 1e9);
	json_str(o, p->comm);
	fputs(",\"cmdline\":", o);
	json_str(o, p->cmdline);
	fputs(",\"container\":", o);
	json_str(o, p->container);
	fputs(",\"pod\":", o);
	json_str(o, p->pod);
	fputs(",\"job\":", o);
	json_str(o, p->job);
	json_rank(o, p->has_rank, p->rank);
	fprintf(o,
		",\"local_rank\":%d,\"world_size\":%d,\"first\":%.3f,\"last\":%.3f,"
		"\"cpu_samples\":%" PRIu64 "}",
		p->local_rank, p->world_size, p->first_ns / 1e9, p->last_ns / 1e9, p->cpu_samples);
	return 0;
}

int api_processes(struct server *srv, const struct request *r, FILE *out)
{
	struct list_ctx l = { out, 0 };
	struct store_filter f;

	FILTER_OR_400(r, "", &f);
	fputs("{\"processes\":[", out);
	return list_end(&l, srv->store->ops->processes(srv->store, &f, process_row, &l));
}

/* ---- profiles --------------------------------------------------------------- */

struct load_ctx {
	struct profile *p;
	struct central_sym *sym;
	uint32_t dbgd_queued; /* debuginfod queries this query made */
};

static int to_profile_frame(struct profile *p, const struct store_frame *sf, uint32_t *idx)
{
	struct profile_frame f = {
		.func = sf->func,
		.file = sf->file,
		.line = sf->line,
		.module = sf->module ? sf->module : "[unknown]",
		.addr = sf->addr,
		.flags = sf->flags & ~PROFILE_FRAME_RETURN,
	};
	int64_t i = profile__intern_frame(p, &f);

	if (i < 0)
		return (int)i;
	*idx = (uint32_t)i;
	return 0;
}

/*
 * A stored frame as display frames, outermost first: itself, or, when it
 * was stored unresolved and its file has arrived since, what the central
 * symbolizer says now (inlines expanded; their strings held until
 * central_sym__release(sym, *gen)).  Returns how many (>= 1).
 */
static int expand_frame(struct central_sym *sym, const struct store_frame *sf,
			struct store_frame *out, struct sym_frame *late, int max, uint32_t *queued,
			struct sym_gen **gen)
{
	int nl = central_sym__resolve_late(sym, sf, late, max, queued, gen);

	if (nl <= 0) {
		out[0] = *sf;
		return 1;
	}
	for (int j = nl - 1; j >= 0; j--) {
		struct store_frame *g = &out[nl - 1 - j];

		*g = *sf;
		g->func = late[j].func;
		g->file = late[j].file;
		g->line = late[j].line;
		g->flags = late[j].inlined ? PROFILE_FRAME_INLINED : 0;
	}
	return nl;
}

static int load_row(void *ctx, const struct store_sample *s)
{
	struct load_ctx *l = ctx;
	uint32_t idx[PROFILE_MAX_FRAMES], n = 0;

	for (uint32_t i = 0; i < s->stack->nframes && n < PROFILE_MAX_FRAMES; i++) {
		struct store_frame g[SYM_MAX_INLINE];
		struct sym_frame late[SYM_MAX_INLINE];
		struct sym_gen *gen;
		int ng = expand_frame(l->sym, &s->stack->frames[i], g, late, SYM_MAX_INLINE,
				      &l->dbgd_queued, &gen);
		int err = 0;

		for (int j = 0; j < ng && n < PROFILE_MAX_FRAMES && !err; j++)
			err = to_profile_frame(l->p, &g[j], &idx[n++]); /* copies */
		central_sym__release(l->sym, gen);
		if (err)
			return err;
	}
	return profile__add_sample(l->p, s->pid, s->tid, s->comm, idx, n, s->value);
}

int server__load_profile(struct server *srv, const struct store_filter *f,
			 enum store_profile_kind kind, struct profile **out)
{
	struct load_ctx l = { profile__new(49), srv->sym };
	int err;

	if (!l.p)
		return -ENOMEM;
	l.p->start_ns = f->from_ns;
	l.p->end_ns = f->to_ns;
	err = srv->store->ops->profile(srv->store, f, kind, load_row, &l);
	if (err) {
		profile__free(l.p);
		return err < 0 ? err : -EIO;
	}
	*out = l.p;
	return 0;
}

static int profile_kind(const struct request *r, enum store_profile_kind *k)
{
	const char *v = request__arg(r, "kind");

	*k = STORE_PROFILE_CPU;
	if (!v || !strcmp(v, "cpu"))
		return 0;
	if (!strcmp(v, "offcpu")) {
		*k = STORE_PROFILE_OFFCPU;
		return 0;
	}
	return -EINVAL;
}

int api_profile(struct server *srv, const struct request *r, FILE *out, const char **ctype)
{
	const char *fmt = request__arg(r, "format");
	enum store_profile_kind kind;
	struct store_filter f;
	struct profile *p;
	int err;

	FILTER_OR_400(r, "", &f);
	if (profile_kind(r, &kind))
		return json_error(out, 400, "kind: want cpu or offcpu");
	if (!fmt)
		fmt = "json";
	if (strcmp(fmt, "folded") && strcmp(fmt, "pprof") && strcmp(fmt, "svg") &&
	    strcmp(fmt, "json"))
		return json_error(out, 400, "format: want folded, pprof, svg or json");
	const char *freq = request__arg(r, "freq");
	unsigned long hz = freq ? strtoul(freq, NULL, 10) : 49;

	if (hz == 0 || hz > 100000)
		return json_error(out, 400, "freq: want the agents' sampling rate in Hz");
	/* folded and SVG show comm and frames only: let the store sum the
	 * threads (pprof and JSON keep pid and tid) */
	f.merge_threads = !strcmp(fmt, "folded") || !strcmp(fmt, "svg");
	err = server__load_profile(srv, &f, kind, &p);
	if (err)
		return json_store_error(out, err);
	/* pprof states a sample's period; stored samples carry no rate, so it
	 * is the agents' (default 49 Hz, --freq) unless the query says. */
	p->freq_hz = (uint32_t)hz;
	if (!strcmp(fmt, "folded")) {
		*ctype = "text/plain; charset=utf-8";
		err = profile__write_folded(p, out);
	} else if (!strcmp(fmt, "pprof")) {
		*ctype = "application/octet-stream"; /* gzipped profile.proto */
		err = profile__write_pprof(p, out);
	} else if (!strcmp(fmt, "svg")) {
		*ctype = "image/svg+xml";
		err = profile__write_svg(p, out, f.job ? f.job : "strata profile");
	} else {
		err = profile__write_json(p, out);
	}
	profile__free(p);
	if (err) {
		rewind(out);
		*ctype = "application/json";
		return json_error(out, 500, "encoding failed: %s", strerror(-err));
	}
	return 200;
}

/* ---- leaks and tallies --------------------------------------------------------- */

/* A stack as a JSON array of display names, root first; frames stored
 * unresolved are resolved now when their file has arrived since. */
static void json_stack(FILE *out, struct central_sym *sym, const struct store_stack *s)
{
	char buf[512];
	int n = 0;

	fputc('[', out);
	for (uint32_t i = 0; i < s->nframes; i++) {
		struct store_frame g[SYM_MAX_INLINE];
		struct sym_frame late[SYM_MAX_INLINE];
		uint32_t no_asks = CENTRAL_SYM_DBGD_PER_BATCH; /* ingest asks */
		struct sym_gen *gen;
		int ng = expand_frame(sym, &s->frames[i], g, late, SYM_MAX_INLINE, &no_asks, &gen);

		for (int j = 0; j < ng; j++) {
			struct profile_frame f = { .func = g[j].func,
						   .module =
							   g[j].module ? g[j].module : "[unknown]",
						   .addr = g[j].addr,
						   .flags = g[j].flags };

			if (n++)
				fputc(',', out);
			json_str(out, profile__frame_name(&f, buf, sizeof(buf)));
		}
		central_sym__release(sym, gen);
	}
	fputc(']', out);
}

struct leak_ctx {
	struct list_ctx l; /* first: list_end() takes it */
	struct central_sym *sym;
};

static int leak_row(void *ctx, const struct store_leak *lk)
{
	struct leak_ctx *lc = ctx;
	struct list_ctx *l = &lc->l;

	sep(l);
	fputs("{\"node\":", l->out);
	json_str(l->out, lk->node);
	fprintf(l->out, ",\"pid\":%u", lk->pid);
	json_rank(l->out, lk->has_rank, lk->rank);
	fprintf(l->out,
		",\"level\":\"%s\",\"bytes\":%" PRIu64 ",\"allocations\":%" PRIu64
		",\"oldest\":%.3f,\"stack\":",
		lk->level ? "framework" : "driver", lk->bytes, lk->allocations,
		lk->oldest_ns / 1e9);
	json_stack(l->out, lc->sym, lk->stack);
	fputc('}', l->out);
	return 0;
}

int api_leaks(struct server *srv, const struct request *r, FILE *out)
{
	struct leak_ctx lc = { { out, 0 }, srv->sym };
	struct store_filter f;

	FILTER_OR_400(r, "", &f);
	fputs("{\"outstanding\":[", out);
	return list_end(&lc.l, srv->store->ops->leaks(srv->store, &f, leak_row, &lc));
}

static int tally_row(void *ctx, const struct store_tally *t)
{
	struct list_ctx *l = ctx;

	sep(l);
	fputs("{\"node\":", l->out);
	json_str(l->out, t->node);
	fprintf(l->out, ",\"pid\":%u", t->pid);
	json_rank(l->out, t->has_rank, t->rank);
	fputs(",\"fn\":", l->out);
	json_str(l->out, t->fn);
	fprintf(l->out,
		",\"calls\":%" PRIu64 ",\"total_ns\":%" PRIu64 ",\"min_ns\":%" PRIu64
		",\"max_ns\":%" PRIu64 ",\"errors\":[",
		t->calls, t->total_ns, t->min_ns, t->max_ns);
	for (uint32_t i = 0; i < t->ncodes; i++) {
		fprintf(l->out, "%s{\"code\":%d,\"name\":", i ? "," : "", t->codes[i].code);
		json_str(l->out, t->codes[i].name);
		fprintf(l->out, ",\"count\":%" PRIu64 "}", t->codes[i].count);
	}
	fputs("]}", l->out);
	return 0;
}

int api_tally(struct server *srv, const struct request *r, FILE *out)
{
	struct list_ctx l = { out, 0 };
	struct store_filter f;

	FILTER_OR_400(r, "", &f);
	fputs("{\"tally\":[", out);
	return list_end(&l, srv->store->ops->tally(srv->store, &f, tally_row, &l));
}
