// SPDX-License-Identifier: Apache-2.0
/*
 * A replica's hang inputs from the store (diag_shared_hang.h): the job's
 * nodes -> their latest batch ends; calls in flight, thread states and
 * exits -> rows kept for the feed, strings in one arena.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "server/diag_hang.h"
#include "server/diag_inputs.h"
#include "server/diag_shared_hang.h"

struct heard {
	const char *node;
	int64_t end_ns;
};

struct hang_row {
	uint32_t kind; /* STORE_EVENT_INFLIGHT, _THREAD, _EXIT */
	const char *node;
	uint32_t pid;
	const char *name; /* API or op (in flight); state (thread) */
	const char *wchan, *kstack;
	uint64_t comm_hash, seq, bytes;
	int32_t rank, nranks, syscall;
	int64_t entry_ns; /* in flight: its entry; thread: its batch's end; exit: the exit */
	int64_t as_of_ns; /* in flight: its batch's end */
};

struct shared_hang_read {
	struct diag_strings *names;
	struct heard *nodes;
	size_t nnodes, cap_nodes;
	struct hang_row *rows;
	size_t nrows, cap_rows;
	int nccl; /* an NCCL call in flight */
};

static void *grow(void *v, size_t *cap, size_t n, size_t size)
{
	size_t c = *cap ? *cap * 2 : 64;
	void *p;

	if (n < *cap)
		return v;
	p = realloc(v, c * size);
	if (p)
		*cap = c;
	return p;
}

static int on_node(void *ctx, const struct store_node *n)
{
	struct shared_hang_read *r = ctx;
	struct heard *v = grow(r->nodes, &r->cap_nodes, r->nnodes, sizeof(*v));

	if (!v)
		return -ENOMEM;
	r->nodes = v;
	v[r->nnodes].node = diag_strings__add(r->names, n->node);
	v[r->nnodes].end_ns = (int64_t)n->last_ns;
	return v[r->nnodes++].node ? 0 : -ENOMEM;
}

static int on_row(void *ctx, const struct store_event *e)
{
	struct shared_hang_read *r = ctx;
	struct hang_row *v = grow(r->rows, &r->cap_rows, r->nrows, sizeof(*v)), *w;
	char kstack[256] = "";

	if (!v)
		return -ENOMEM;
	r->rows = v;
	w = &v[r->nrows];
	*w = (struct hang_row){ .kind = e->kind,
				.pid = e->pid,
				.comm_hash = e->comm_hash,
				.seq = e->seq,
				.bytes = e->bytes,
				.rank = e->comm_rank,
				.nranks = e->comm_nranks,
				.syscall = (int32_t)e->ret,
				.entry_ns = (int64_t)e->start_ns,
				.as_of_ns = (int64_t)(e->start_ns + e->dur_ns) };
	if (e->kind == STORE_EVENT_THREAD)
		diag_fold_stack(e->stack, kstack, sizeof(kstack));
	w->node = diag_strings__add(r->names, e->node);
	w->name = diag_strings__add(r->names, e->name ? e->name : "");
	w->wchan = diag_strings__add(r->names, e->detail ? e->detail : "");
	w->kstack = diag_strings__add(r->names, kstack);
	if (!w->node || !w->name || !w->wchan || !w->kstack)
		return -ENOMEM;
	if (e->kind == STORE_EVENT_INFLIGHT && e->comm_hash)
		r->nccl = 1;
	r->nrows++;
	return 0;
}

int shared_hang__load(struct shared_hang_read **out, struct store *st, const char *job,
		      uint64_t from_ns, uint32_t limit, int *truncated)
{
	struct store_filter f = { .job = job, .from_ns = from_ns };
	struct shared_hang_read *r = calloc(1, sizeof(*r));
	int err;

	*out = r;
	if (!r || !(r->names = diag_strings__new()))
		return -ENOMEM;
	/* the nodes first (see the header) */
	err = st->ops->nodes(st, &f, on_node, r);
	if (!err)
		err = st->ops->events(st, &f,
				      STORE_EVENT_INFLIGHT | STORE_EVENT_THREAD | STORE_EVENT_EXIT |
					      STORE_EVENT_STACKS,
				      limit, truncated, on_row, r);
	return err;
}

void shared_hang__free(struct shared_hang_read *r)
{
	if (!r)
		return;
	diag_strings__free(r->names);
	free(r->nodes);
	free(r->rows);
	free(r);
}

int shared_hang__has_nccl(const struct shared_hang_read *r)
{
	return r && r->nccl;
}

/* A call in flight (diag_hang__inflight's rule). */
static size_t feed_inflight(struct hang_detector *hd, const struct hang_row *w)
{
	struct hang_call k = { .comm_hash = w->comm_hash,
			       .rank = w->rank,
			       .nranks = w->nranks,
			       .node = w->node,
			       .pid = w->pid,
			       .seq = w->seq,
			       .op = w->name,
			       .bytes = w->bytes,
			       .entry_ns = w->entry_ns,
			       .as_of_ns = w->as_of_ns };

	return diag_hang__inflight(hd, &k);
}

size_t shared_hang__feed(void *ctx, struct hang_detector *hd)
{
	const struct shared_hang_feed *in = ctx;
	const struct shared_hang_read *r = in->read;
	size_t nccl = 0;

	for (size_t i = 0; r && i < r->nnodes; i++)
		hang_detector__batch(hd, r->nodes[i].node, r->nodes[i].end_ns);
	for (size_t i = 0; i < in->n; i++) {
		const struct diag_coll_event *e = &in->ev[i];
		struct hang_call k = { .comm_hash = e->comm_hash,
				       .rank = (int32_t)e->rank,
				       .nranks = (int32_t)e->nranks,
				       .node = e->node,
				       .pid = e->pid,
				       .seq = e->seq,
				       .op = in->call[i].op,
				       .bytes = in->call[i].bytes,
				       .entry_ns = e->entry_ns,
				       .exit_ns = in->call[i].exit_ns };

		hang_detector__call(hd, &k);
		nccl++;
	}
	for (size_t i = 0; r && i < r->nrows; i++) {
		const struct hang_row *w = &r->rows[i];

		switch (w->kind) {
		case STORE_EVENT_INFLIGHT:
			nccl += feed_inflight(hd, w);
			break;
		case STORE_EVENT_THREAD:
			hang_detector__thread_state(hd, w->node, w->pid, w->name, w->wchan,
						    w->kstack, w->syscall, w->entry_ns);
			break;
		case STORE_EVENT_EXIT:
			hang_detector__exit(hd, w->node, w->pid, w->entry_ns);
			break;
		}
	}
	return nccl;
}
