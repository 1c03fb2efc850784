// SPDX-License-Identifier: Apache-2.0
/*
 * diagnose/ inputs from the store (see diag_inputs.h).  The differential
 * findings read, per rank of the job over the range: on-CPU stacks (CPU
 * samples x the node's sampling period), off-CPU time by reason (scheduler
 * counters) with blocking stacks (assigned to a reason by their kernel
 * frames, since stored off-CPU stacks are summed over reasons), runnable
 * time, CUDA API tallies (launches, sync and copy time, allocation
 * failures) and NCCL collectives (time, bytes, sequence gaps), and the
 * CPU layer: other processes' and softirq time on the CPUs the rank ran on.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/diag_inputs.h"

#include "lib/utf8.h"

/* ---- string arena --------------------------------------------------------------- */

struct diag_strings {
	char **chunks;
	size_t n, cap, used, size; /* used/size of the last chunk */
};

struct diag_strings *diag_strings__new(void)
{
	return calloc(1, sizeof(struct diag_strings));
}

const char *diag_strings__add(struct diag_strings *s, const char *str)
{
	size_t len = strlen(str) + 1;
	char *dst;

	if (!s->n || s->used + len > s->size) {
		size_t size = len > 65536 ? len : 65536;

		if (s->n == s->cap) {
			size_t cap = s->cap ? s->cap * 2 : 8;
			void *p = realloc(s->chunks, cap * sizeof(*s->chunks));

			if (!p)
				return NULL;
			s->chunks = p;
			s->cap = cap;
		}
		s->chunks[s->n] = malloc(size);
		if (!s->chunks[s->n])
			return NULL;
		s->n++;
		s->used = 0;
		s->size = size;
	}
	dst = s->chunks[s->n - 1] + s->used;
	memcpy(dst, str, len);
	s->used += len;
	return dst;
}

void diag_strings__free(struct diag_strings *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++)
		free(s->chunks[i]);
	free(s->chunks);
	free(s);
}

/* ---- clocks --------------------------------------------------------------------- */

#define MAX_NODES 4096

struct diag_clocks {
	struct {
		char node[64];
		uint64_t err;
		uint32_t freq;
	} v[MAX_NODES];
	size_t n;
};

struct diag_clocks *diag_clocks__new(void)
{
	return calloc(1, sizeof(struct diag_clocks));
}

void diag_clocks__free(struct diag_clocks *c)
{
	free(c);
}

static int on_clock(void *ctx, const struct store_node_clock *nc)
{
	struct diag_clocks *c = ctx;

	if (c->n == MAX_NODES)
		return 0; /* unknown nodes read as error 0, freq 49 */
	snprintf(c->v[c->n].node, sizeof(c->v[c->n].node), "%s", nc->node);
	c->v[c->n].err = nc->clock_error_ns;
	c->v[c->n].freq = nc->freq_hz;
	c->n++;
	return 0;
}

int diag_clocks__load(struct diag_clocks *c, struct store *st, const struct store_filter *f)
{
	c->n = 0;
	return st->ops->node_clocks(st, f, on_clock, c);
}

static size_t clock_idx(const struct diag_clocks *c, const char *node)
{
	for (size_t i = 0; i < c->n; i++)
		if (!strcmp(c->v[i].node, node))
			return i;
	return SIZE_MAX;
}

uint64_t diag_clocks__error(const struct diag_clocks *c, const char *node)
{
	size_t i = clock_idx(c, node);

	return i == SIZE_MAX ? 0 : c->v[i].err;
}

uint32_t diag_clocks__freq(const struct diag_clocks *c, const char *node)
{
	size_t i = clock_idx(c, node);

	return i == SIZE_MAX || !c->v[i].freq ? 49 : c->v[i].freq;
}

/* ---- small helpers ---------------------------------------------------------------- */

/* One frame's folded name into out (size bytes); its length. */
static size_t fold_frame(const struct store_frame *f, char *out, size_t size)
{
	const char *mod = f->module ? strrchr(f->module, '/') : NULL;
	int n;

	mod = mod ? mod + 1 : (f->module ? f->module : "?");
	if (f->func)
		n = snprintf(out, size, "%s", f->func);
	else
		n = snprintf(out, size, "%s+0x%llx", mod, (unsigned long long)f->addr);
	return n < 0 ? 0 : (size_t)n;
}

/*
 * Root first, ';' between frames.  A stack longer than the buffer keeps its
 * leaf end ("...;" for the rest): the allocation or blocking site and its
 * callers are what a report is read for (a Python training step's native
 * frames fill hundreds of bytes above them).
 */
void diag_fold_stack(const struct store_stack *s, char *out, size_t size)
{
	char name[512];
	size_t need = 0, len = 0;
	uint32_t first = 0;

	if (!size)
		return;
	out[0] = 0;
	if (!s)
		return;
	/* the innermost frames that fit, with room for "...;" */
	for (uint32_t i = s->nframes; i-- > 0;) {
		size_t n = fold_frame(&s->frames[i], name, sizeof(name)) + (i ? 1 : 0);

		if (need + n + 4 >= size) {
			first = i + 1;
			break;
		}
		need += n;
	}
	if (first)
		len = (size_t)snprintf(out, size, "...");
	for (uint32_t i = first; i < s->nframes && len + 1 < size; i++) {
		int w;

		fold_frame(&s->frames[i], name, sizeof(name));
		w = snprintf(out + len, size - len, "%s%s", len ? ";" : "", name);
		if (w < 0 || (size_t)w >= size - len)
			break;
		len += (size_t)w;
	}
}

void diag_prom_label(FILE *o, const char *v)
{
	fputc('"', o);
	while (v && *v) {
		uint32_t cp;
		size_t n = utf8_next(v, &cp);

		/*
		 * The exposition format is UTF-8 and escapes only \\, \" and \\n:
		 * a bad byte, and any other control character (an ESC would
		 * recolour the terminal of whoever curls /metrics; a CR splits
		 * the line for some scrapers), becomes U+FFFD.
		 */
		if (cp == '"' || cp == '\\')
			fprintf(o, "\\%c", (char)cp);
		else if (cp == '\n')
			fputs("\\n", o);
		else if (cp == UTF8_REPLACEMENT || cp < 0x20 || (cp >= 0x7f && cp < 0xa0))
			fputs("\xef\xbf\xbd", o);
		else
			fwrite(v, 1, n, o);
		v += n;
	}
	fputc('"', o);
}

/* ---- findings ----------------------------------------------------------------------- */

#define MAX_RANKS 1024

struct stack_vec {
	struct diag_stack *v;
	size_t n, cap;
};

struct comm_seq {
	uint64_t comm, min, max, count;
};

struct foreign_vec {
	struct diag_foreign *v;
	size_t n, cap;
};

struct irq_vec {
	struct diag_irq *v;
	size_t n, cap;
};

struct rank_in {
	struct foreign_vec foreign;
	struct irq_vec irq;
	int32_t rank;
	uint32_t pid;
	uint64_t last_ns;
	char node[64];
	struct diag_rank_window w;
	struct stack_vec on, off[STRATA_OFF_MAX];
	struct comm_seq seqs[16];
	size_t nseqs;
};

/* CPU layer rows (store_cpu_time), kept until every row is in: a rank's
 * CPUs must be known before other processes' time on them is charged. */
#define MAX_CPU_ROWS 262144

struct cpu_row {
	const char *node, *comm; /* in fctx.names */
	uint32_t kind, cpu, pid, vector;
	int has_rank;
	int32_t rank;
	double ns;
};

struct fctx {
	struct rank_in *r;
	size_t n;
	struct cpu_row *cpu;
	size_t ncpu, cpu_dropped;
	struct diag_strings *names;
	struct diag_clocks *clocks;
	int oom;
};

static struct rank_in *rank_of(struct fctx *c, int has_rank, int32_t rank)
{
	if (!has_rank)
		return NULL;
	for (size_t i = 0; i < c->n; i++)
		if (c->r[i].rank == rank)
			return &c->r[i];
	return NULL;
}

static int on_process(void *ctx, const struct store_process *p)
{
	struct fctx *c = ctx;
	struct rank_in *r = rank_of(c, p->has_rank, p->rank);

	if (!p->has_rank)
		return 0;
	if (!r) {
		if (c->n == MAX_RANKS)
			return 0;
		r = &c->r[c->n++];
		r->rank = p->rank;
	} else if (p->last_ns < r->last_ns) {
		return 0; /* an earlier incarnation of the rank */
	}
	r->pid = p->pid;
	r->last_ns = p->last_ns;
	snprintf(r->node, sizeof(r->node), "%s", p->node);
	return 0;
}

static int push(struct fctx *c, struct stack_vec *v, const struct store_stack *s, double ns)
{
	char folded[1024];

	if (v->n == v->cap) {
		size_t cap = v->cap ? v->cap * 2 : 64;
		void *p = realloc(v->v, cap * sizeof(*v->v));

		if (!p)
			return -ENOMEM;
		v->v = p;
		v->cap = cap;
	}
	diag_fold_stack(s, folded, sizeof(folded));
	v->v[v->n].frames = diag_strings__add(c->names, folded);
	v->v[v->n].ns = ns;
	if (!v->v[v->n].frames)
		return -ENOMEM;
	v->n++;
	return 0;
}

static int on_cpu_sample(void *ctx, const struct store_sample *s)
{
	struct fctx *c = ctx;
	struct rank_in *r = rank_of(c, s->has_rank, s->rank);

	if (!r)
		return 0;
	r->w.oncpu_samples += (double)s->value;
	return push(c, &r->on, s->stack, s->value * 1e9 / diag_clocks__freq(c->clocks, s->node));
}

/* Stored off-CPU stacks are summed over reasons: the kernel frames say
 * which one (the BPF side decides the same way, docs/diagnosis.md). */
static int offcpu_reason_of(const struct store_stack *s)
{
	for (uint32_t i = s->nframes; i-- > 0;) {
		const char *fn = s->frames[i].func;

		if (s->frames[i].kind != PROFILE_KIND_KERNEL || !fn)
			continue;
		if (strstr(fn, "futex"))
			return STRATA_OFF_LOCK;
		if (strstr(fn, "fault"))
			return STRATA_OFF_FAULT;
		if (strstr(fn, "io_schedule") || strstr(fn, "jbd2") || strstr(fn, "blk") ||
		    strstr(fn, "wait_on_page") || strstr(fn, "folio_wait"))
			return STRATA_OFF_IO;
		if (strstr(fn, "nanosleep") || strstr(fn, "hrtimer") || strstr(fn, "poll") ||
		    strstr(fn, "select"))
			return STRATA_OFF_SLEEP;
	}
	return STRATA_OFF_OTHER;
}

static int on_offcpu_sample(void *ctx, const struct store_sample *s)
{
	struct fctx *c = ctx;
	struct rank_in *r = rank_of(c, s->has_rank, s->rank);

	if (!r)
		return 0;
	return push(c, &r->off[offcpu_reason_of(s->stack)], s->stack, (double)s->value);
}

static int on_thread_time(void *ctx, const struct store_thread_time *t)
{
	struct rank_in *r = rank_of(ctx, t->has_rank, t->rank);

	if (!r)
		return 0;
	if (t->kind == STORE_THREAD_OFFCPU && t->index < STRATA_OFF_MAX)
		r->w.offcpu_ns[t->index] += (double)t->ns;
	else if (t->kind == STORE_THREAD_RUNNABLE)
		r->w.runnable_ns += (double)t->ns;
	return 0;
}

static int on_tally(void *ctx, const struct store_tally *t)
{
	struct rank_in *r = rank_of(ctx, t->has_rank, t->rank);

	if (!r)
		return 0;
	if (strstr(t->fn, "Launch"))
		r->w.launches += (double)t->calls;
	else if (strstr(t->fn, "Synchronize") || strstr(t->fn, "StreamWait"))
		r->w.sync_ns += (double)t->total_ns;
	else if (strstr(t->fn, "Memcpy") || strstr(t->fn, "cuMemcpy"))
		r->w.copy_ns += (double)t->total_ns;
	if (strstr(t->fn, "Malloc") || strstr(t->fn, "MemAlloc"))
		for (uint32_t i = 0; i < t->ncodes; i++)
			r->w.alloc_failures += (double)t->codes[i].count;
	return 0;
}

static int on_collective(void *ctx, const struct store_event *e)
{
	struct rank_in *r = rank_of(ctx, e->has_rank, e->rank);
	struct comm_seq *q = NULL;

	if (!r)
		return 0;
	r->w.collective_ns += (double)e->dur_ns;
	r->w.collective_bytes += (double)e->bytes;
	for (size_t i = 0; i < r->nseqs && !q; i++)
		if (r->seqs[i].comm == e->comm_hash)
			q = &r->seqs[i];
	if (!q && r->nseqs < 16) {
		q = &r->seqs[r->nseqs++];
		*q = (struct comm_seq){ .comm = e->comm_hash, .min = e->seq, .max = e->seq };
	}
	if (q) {
		q->min = e->seq < q->min ? e->seq : q->min;
		q->max = e->seq > q->max ? e->seq : q->max;
		q->count++;
	}
	return 0;
}

static int on_cpu_time(void *ctx, const struct store_cpu_time *t)
{
	struct fctx *c = ctx;
	struct cpu_row *r;

	if (c->ncpu == MAX_CPU_ROWS) {
		c->cpu_dropped++;
		return 0;
	}
	r = &c->cpu[c->ncpu];
	*r = (struct cpu_row){ .node = diag_strings__add(c->names, t->node ? t->node : ""),
			       .comm = diag_strings__add(c->names, t->comm ? t->comm : ""),
			       .kind = t->kind,
			       .cpu = t->cpu,
			       .pid = t->pid,
			       .vector = t->vector,
			       .has_rank = t->has_rank,
			       .rank = t->rank,
			       .ns = (double)t->ns };
	if (!r->node || !r->comm)
		return -ENOMEM;
	c->ncpu++;
	return 0;
}

#define GROW(vec)                                                               \
	do {                                                                    \
		if ((vec)->n == (vec)->cap) {                                   \
			size_t cap_ = (vec)->cap ? (vec)->cap * 2 : 16;         \
			void *p_ = realloc((vec)->v, cap_ * sizeof(*(vec)->v)); \
			if (!p_)                                                \
				return -ENOMEM;                                 \
			(vec)->v = p_;                                          \
			(vec)->cap = cap_;                                      \
		}                                                               \
	} while (0)

static int add_foreign(struct foreign_vec *v, const struct cpu_row *row, double ns)
{
	for (size_t i = 0; i < v->n; i++)
		if (v->v[i].pid == row->pid && !strcmp(v->v[i].comm, row->comm)) {
			v->v[i].ns += ns;
			return 0;
		}
	GROW(v);
	v->v[v->n++] = (struct diag_foreign){ .comm = row->comm, .pid = row->pid, .ns = ns };
	return 0;
}

/*
 * A rank's CPUs are those its process ran on (TargetCpu rows), each with
 * its share of the rank's on-CPU time: another process's time and softirq
 * time on a CPU count for the rank in that share, so a rank pinned to one
 * CPU takes all of it and one spread over eight takes an eighth of each.
 */
static int charge_cpus(struct fctx *c, struct rank_in *r)
{
	double total = 0;

	for (size_t i = 0; i < c->ncpu; i++)
		if (c->cpu[i].kind == STORE_CPU_TARGET && c->cpu[i].has_rank &&
		    c->cpu[i].rank == r->rank && c->cpu[i].pid == r->pid &&
		    !strcmp(c->cpu[i].node, r->node))
			total += c->cpu[i].ns;
	if (total <= 0)
		return 0;
	for (size_t i = 0; i < c->ncpu; i++) {
		const struct cpu_row *t = &c->cpu[i];

		if (t->kind != STORE_CPU_TARGET || !t->has_rank || t->rank != r->rank ||
		    t->pid != r->pid || strcmp(t->node, r->node))
			continue;
		for (size_t j = 0; j < c->ncpu; j++) {
			const struct cpu_row *o = &c->cpu[j];
			double ns = o->ns * t->ns / total;

			if (o->cpu != t->cpu || strcmp(o->node, r->node) || ns <= 0)
				continue;
			if (o->kind == STORE_CPU_FOREIGN) {
				int err = add_foreign(&r->foreign, o, ns);

				if (err)
					return err;
			} else if (o->kind == STORE_CPU_SOFTIRQ) {
				GROW(&r->irq);
				r->irq.v[r->irq.n++] = (struct diag_irq){ .cpu = o->cpu,
									  .vector = o->vector,
									  .softirq = true,
									  .ns = ns };
			}
		}
	}
	r->w.foreign = r->foreign.v;
	r->w.n_foreign = r->foreign.n;
	r->w.irq = r->irq.v;
	r->w.n_irq = r->irq.n;
	return 0;
}

static void finish_rank(struct rank_in *r, double wall)
{
	r->w.rank = (uint32_t)r->rank;
	r->w.wall_ns = wall;
	r->w.oncpu = r->on.v;
	r->w.n_oncpu = r->on.n;
	for (int k = 0; k < STRATA_OFF_MAX; k++) {
		r->w.offcpu[k] = r->off[k].v;
		r->w.n_offcpu[k] = r->off[k].n;
	}
	for (size_t i = 0; i < r->nseqs; i++)
		if (r->seqs[i].max - r->seqs[i].min + 1 > r->seqs[i].count)
			r->w.seq_gaps +=
				(double)(r->seqs[i].max - r->seqs[i].min + 1 - r->seqs[i].count);
}

int diag_findings(struct store *st, const char *job, int32_t rank, uint64_t from_ns, uint64_t to_ns,
		  struct diag_finding *out, size_t max)
{
	struct fctx c = { .names = diag_strings__new(), .clocks = diag_clocks__new() };
	/* by batch end: a batch counts in one range only, so shares stay <= 1 */
	struct store_filter f = {
		.job = job, .from_ns = from_ns, .to_ns = to_ns, .batch_by_end = 1
	};
	struct diag_rank_window *peers = NULL;
	struct rank_in *flagged = NULL;
	size_t np = 0;
	int err = -ENOMEM;

	c.r = calloc(MAX_RANKS, sizeof(*c.r));
	c.cpu = malloc(MAX_CPU_ROWS * sizeof(*c.cpu));
	if (!c.r || !c.cpu || !c.names || !c.clocks)
		goto out;
	err = st->ops->processes(st, &f, on_process, &c);
	if (!err)
		err = diag_clocks__load(
			c.clocks, st, &(struct store_filter){ .from_ns = from_ns, .to_ns = to_ns });
	if (!err)
		err = st->ops->profile(st, &f, STORE_PROFILE_CPU, on_cpu_sample, &c);
	if (!err)
		err = st->ops->profile(st, &f, STORE_PROFILE_OFFCPU, on_offcpu_sample, &c);
	if (!err)
		err = st->ops->thread_times(st, &f, on_thread_time, &c);
	if (!err)
		err = st->ops->tally(st, &f, on_tally, &c);
	if (!err)
		err = st->ops->events(st, &f, STORE_EVENT_COLLECTIVE, 1000000, NULL, on_collective,
				      &c);
	if (!err && st->ops->cpu_times)
		err = st->ops->cpu_times(st, &f, on_cpu_time, &c);
	for (size_t i = 0; !err && i < c.n; i++)
		err = charge_cpus(&c, &c.r[i]);
	if (err)
		goto out;
	peers = calloc(c.n ? c.n : 1, sizeof(*peers));
	if (!peers) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < c.n; i++) {
		finish_rank(&c.r[i], (double)(to_ns - from_ns));
		if (c.r[i].rank == rank)
			flagged = &c.r[i];
		else
			peers[np++] = c.r[i].w;
	}
	err = !flagged || !np ? -ENOENT : diag_differential(&flagged->w, peers, np, NULL, out, max);
out:
	for (size_t i = 0; c.r && i < c.n; i++) {
		free(c.r[i].on.v);
		free(c.r[i].foreign.v);
		free(c.r[i].irq.v);
		for (int k = 0; k < STRATA_OFF_MAX; k++)
			free(c.r[i].off[k].v);
	}
	free(c.r);
	free(c.cpu);
	free(peers);
	diag_strings__free(c.names);
	diag_clocks__free(c.clocks);
	return err;
}
