// SPDX-License-Identifier: Apache-2.0
#include "diagnose/comm_align.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/hash.h"

#define MAX_CANDIDATES 8     /* distinct nearest-exit offsets kept */
#define SEQ_BASE (1LL << 40) /* aligned sequence numbers start here: never negative */
#define SEQ_MAX (1ULL << 40) /* a call numbered beyond is refused: offsets stay in int64 */

struct stream {
	uint64_t key;
	uint32_t rank, nranks, pid;
	char node[DIAG_NAME_LEN];
	int used, aligned;
	uint64_t comm_hash;	      /* aligned: the group's derived hash */
	int64_t off;		      /* aligned: seq + off is the group's sequence number */
	int64_t last_ns;	      /* newest exit */
	struct comm_align_call *ring; /* held calls (unaligned), window slots */
	uint32_t head, n;
};

struct comm_align {
	struct comm_align_opts o;
	struct stream *s;
	int64_t newest_ns;
	struct comm_align_call *sorted_a, *sorted_b; /* window each */
	struct diag_coll_event *out;
	size_t out_cap;
	struct comm_align_stats st;
};

struct comm_align *comm_align__new(const struct comm_align_opts *o)
{
	struct comm_align *a = calloc(1, sizeof(*a));

	if (!a)
		return NULL;
	a->o = (struct comm_align_opts){ .window = 512,
					 .min_pairs = 32,
					 .margin = 8,
					 .max_streams = 256,
					 .stale_ns = 60000000000ULL };
	if (o) {
		if (o->window)
			a->o.window = o->window;
		if (o->min_pairs)
			a->o.min_pairs = o->min_pairs;
		if (o->margin > 1)
			a->o.margin = o->margin;
		if (o->max_streams)
			a->o.max_streams = o->max_streams;
		if (o->stale_ns)
			a->o.stale_ns = o->stale_ns;
	}
	a->s = calloc(a->o.max_streams, sizeof(*a->s));
	a->sorted_a = calloc(a->o.window, sizeof(*a->sorted_a));
	a->sorted_b = calloc(a->o.window, sizeof(*a->sorted_b));
	if (!a->s || !a->sorted_a || !a->sorted_b) {
		comm_align__free(a);
		return NULL;
	}
	return a;
}

void comm_align__free(struct comm_align *a)
{
	if (!a)
		return;
	for (uint32_t i = 0; a->s && i < a->o.max_streams; i++)
		free(a->s[i].ring);
	free(a->s);
	free(a->sorted_a);
	free(a->sorted_b);
	free(a->out);
	free(a);
}

static struct stream *stream_of(struct comm_align *a, uint64_t key, int create)
{
	struct stream *free_slot = NULL;

	for (uint32_t i = 0; i < a->o.max_streams; i++) {
		if (a->s[i].used && a->s[i].key == key)
			return &a->s[i];
		if (!a->s[i].used && !free_slot)
			free_slot = &a->s[i];
	}
	if (!create)
		return NULL;
	if (!free_slot) {
		a->st.streams_dropped++;
		return NULL;
	}
	memset(free_slot, 0, sizeof(*free_slot));
	free_slot->used = 1;
	free_slot->key = key;
	a->st.streams++;
	return free_slot;
}

int comm_align__map(const struct comm_align *a, uint64_t key, uint64_t *comm_hash, uint64_t *seq)
{
	for (uint32_t i = 0; i < a->o.max_streams; i++) {
		const struct stream *s = &a->s[i];

		if (!s->used || s->key != key)
			continue;
		if (!s->aligned || *seq >= SEQ_MAX)
			return -EAGAIN;
		*comm_hash = s->comm_hash;
		*seq = (uint64_t)((int64_t)*seq + s->off);
		return 0;
	}
	return -EAGAIN;
}

static void place(const struct stream *s, const struct comm_align_call *c,
		  struct diag_coll_event *out)
{
	*out = (struct diag_coll_event){ .comm_hash = s->comm_hash,
					 .seq = (uint64_t)((int64_t)c->seq + s->off),
					 .rank = s->rank,
					 .nranks = s->nranks,
					 .entry_ns = c->entry_ns,
					 .clock_err_ns = c->clock_err_ns,
					 .pid = s->pid,
					 .node = s->node };
}

int comm_align__add(struct comm_align *a, uint64_t key, uint32_t rank, uint32_t nranks,
		    const char *node, uint32_t pid, const struct comm_align_call *c,
		    struct diag_coll_event *out)
{
	struct stream *s;

	if (!nranks || rank >= nranks || c->seq >= SEQ_MAX)
		return -EINVAL;
	s = stream_of(a, key, 1);
	if (!s)
		return -ENOSPC;
	if (s->nranks && (s->rank != rank || s->nranks != nranks)) {
		/* the process says another rank now: a new stream, no evidence */
		if (!s->aligned)
			a->st.calls_lost += s->n;
		free(s->ring);
		memset(s, 0, sizeof(*s));
		s->used = 1;
		s->key = key;
		a->st.streams++;
	}
	if (!s->nranks) {
		s->rank = rank;
		s->nranks = nranks;
		s->pid = pid;
		snprintf(s->node, sizeof(s->node), "%s", node ? node : "");
	}
	if (c->exit_ns > s->last_ns)
		s->last_ns = c->exit_ns;
	if (c->exit_ns > a->newest_ns)
		a->newest_ns = c->exit_ns;
	if (s->aligned) {
		place(s, c, out);
		return 1;
	}
	if (!s->ring) {
		s->ring = calloc(a->o.window, sizeof(*s->ring));
		if (!s->ring)
			return -ENOMEM;
	}
	if (s->n == a->o.window) { /* the oldest held call goes */
		s->ring[s->head] = *c;
		s->head = (s->head + 1) % a->o.window;
		a->st.calls_lost++;
	} else {
		s->ring[(s->head + s->n) % a->o.window] = *c;
		s->n++;
	}
	a->st.calls_held++;
	return 0;
}

static int by_seq(const void *x, const void *y)
{
	const struct comm_align_call *a = x, *b = y;

	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* |a - b| without signed overflow (times come from agents: any int64). */
static uint64_t dist(int64_t a, int64_t b)
{
	return a > b ? (uint64_t)a - (uint64_t)b : (uint64_t)b - (uint64_t)a;
}

static int by_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return a < b ? -1 : a > b;
}

static int by_value(const void *x, const void *y)
{
	int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;

	return a < b ? -1 : a > b;
}

/* s's held calls, sorted by seq, into out (window slots). */
static size_t sorted_calls(const struct comm_align *a, const struct stream *s,
			   struct comm_align_call *out)
{
	for (uint32_t i = 0; i < s->n; i++)
		out[i] = s->ring[(s->head + i) % a->o.window];
	qsort(out, s->n, sizeof(*out), by_seq);
	return s->n;
}

/* Index of the call of b (sorted by seq) whose seq is seq, or -1. */
static long find_seq(const struct comm_align_call *b, size_t nb, uint64_t seq)
{
	size_t lo = 0, hi = nb;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (b[mid].seq < seq)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < nb && b[lo].seq == seq ? (long)lo : -1;
}

/* Index of the call of b whose exit is nearest t (b's exits grow with seq). */
static size_t nearest_exit(const struct comm_align_call *b, size_t nb, int64_t t)
{
	size_t lo = 0, hi = nb;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (b[mid].exit_ns < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == nb)
		return nb - 1;
	if (lo > 0 && dist(t, b[lo - 1].exit_ns) < dist(b[lo].exit_ns, t))
		return lo - 1;
	return lo;
}

struct offset_score {
	int64_t k;
	size_t pairs, mismatches;
	uint64_t median; /* of |exit_a - exit_b| */
};

static void score(const struct comm_align_call *a, size_t na, const struct comm_align_call *b,
		  size_t nb, uint64_t *gaps, struct offset_score *sc)
{
	sc->pairs = sc->mismatches = 0;
	for (size_t i = 0; i < na; i++) {
		int64_t want = (int64_t)a[i].seq + sc->k;
		long j = want < 0 ? -1 : find_seq(b, nb, (uint64_t)want);

		if (j < 0)
			continue;
		if (a[i].op != b[j].op || a[i].bytes != b[j].bytes)
			sc->mismatches++;
		gaps[sc->pairs++] = dist(a[i].exit_ns, b[j].exit_ns);
	}
	sc->median = UINT64_MAX;
	if (!sc->pairs)
		return;
	qsort(gaps, sc->pairs, sizeof(*gaps), by_u64);
	sc->median = gaps[sc->pairs / 2];
}

enum comm_align_outcome comm_align__match(const struct comm_align_call *a, size_t na,
					  const struct comm_align_call *b, size_t nb,
					  const struct comm_align_opts *o, int64_t *k)
{
	struct offset_score cand[MAX_CANDIDATES * 3];
	size_t counts[MAX_CANDIDATES] = { 0 };
	int64_t near[MAX_CANDIDATES];
	size_t nnear = 0, ncand = 0, best = SIZE_MAX;
	enum comm_align_outcome res = COMM_ALIGN_OK;
	int64_t *offs;
	uint64_t *gaps;

	if (na < o->min_pairs || nb < o->min_pairs)
		return COMM_ALIGN_SHORT;
	/* candidates: the offsets that pair each call of a with the call of b
	 * nearest in exit time, the most frequent MAX_CANDIDATES of them (at
	 * the streams' ends, where one has no partner, they scatter) */
	offs = malloc(na * sizeof(*offs));
	gaps = malloc(na * sizeof(*gaps));
	if (!offs || !gaps) {
		free(offs);
		free(gaps);
		return COMM_ALIGN_SHORT;
	}
	/* seqs are < SEQ_MAX (comm_align__add): differences fit */
	for (size_t i = 0; i < na; i++)
		offs[i] = (int64_t)b[nearest_exit(b, nb, a[i].exit_ns)].seq - (int64_t)a[i].seq;
	qsort(offs, na, sizeof(*offs), by_value);
	for (size_t i = 0, run; i < na; i += run) {
		size_t c = nnear;

		for (run = 1; i + run < na && offs[i + run] == offs[i]; run++)
			;
		if (nnear < MAX_CANDIDATES)
			nnear++;
		else if (run <= counts[nnear - 1])
			continue;
		/* insertion into near[] / counts[], most frequent first */
		for (c = nnear - 1; c > 0 && counts[c - 1] < run; c--) {
			near[c] = near[c - 1];
			counts[c] = counts[c - 1];
		}
		near[c] = offs[i];
		counts[c] = run;
	}
	free(offs);
	/* each candidate and its neighbours, scored on every pair */
	for (size_t c = 0; c < nnear; c++)
		for (int64_t d = -1; d <= 1; d++) {
			size_t x = 0;

			while (x < ncand && cand[x].k != near[c] + d)
				x++;
			if (x == ncand)
				cand[ncand++].k = near[c] + d;
		}
	for (size_t x = 0; x < ncand; x++) {
		score(a, na, b, nb, gaps, &cand[x]);
		if (cand[x].pairs >= o->min_pairs &&
		    (best == SIZE_MAX || cand[x].median < cand[best].median))
			best = x;
	}
	free(gaps);
	if (best == SIZE_MAX)
		return COMM_ALIGN_SHORT;
	if (cand[best].mismatches)
		return COMM_ALIGN_MISMATCH;
	/* the neighbours k +- 1 must have been seen (enough pairs) and every
	 * other scored offset must be worse by the margin */
	for (int64_t d = -1; d <= 1; d += 2) {
		size_t x = 0;

		while (x < ncand && cand[x].k != cand[best].k + d)
			x++;
		if (x == ncand || cand[x].pairs < o->min_pairs / 2)
			return COMM_ALIGN_SHORT;
	}
	for (size_t x = 0; x < ncand; x++) {
		if (x == best || cand[x].pairs < o->min_pairs / 2)
			continue;
		if (!cand[x].median ||
		    (double)cand[x].median < o->margin * (double)cand[best].median)
			res = COMM_ALIGN_AMBIGUOUS;
	}
	if (res == COMM_ALIGN_OK)
		*k = cand[best].k;
	return res;
}

static void expire(struct comm_align *a, int64_t now_ns)
{
	for (uint32_t i = 0; i < a->o.max_streams; i++) {
		struct stream *s = &a->s[i];

		if (!s->used || now_ns <= s->last_ns || dist(now_ns, s->last_ns) <= a->o.stale_ns)
			continue;
		if (!s->aligned)
			a->st.calls_lost += s->n;
		free(s->ring);
		memset(s, 0, sizeof(*s));
		a->st.streams_expired++;
	}
}

static int reserve_out(struct comm_align *a, size_t n)
{
	struct diag_coll_event *o;

	if (n <= a->out_cap)
		return 0;
	o = realloc(a->out, n * sizeof(*o));
	if (!o)
		return -ENOMEM;
	a->out = o;
	a->out_cap = n;
	return 0;
}

/* Aligns the unaligned streams of size nranks to the one of rank 0;
 * appends their held calls to a->out. */
static enum comm_align_outcome align_group(struct comm_align *a, uint32_t nranks, size_t *nout)
{
	struct stream **by_rank;
	enum comm_align_outcome res = COMM_ALIGN_OK;
	int64_t *k;
	size_t na, held = 0;

	if (nranks > a->o.max_streams)
		return COMM_ALIGN_INCOMPLETE; /* can never all be here */
	by_rank = calloc(nranks, sizeof(*by_rank));
	k = calloc(nranks, sizeof(*k));
	if (!by_rank || !k) {
		res = COMM_ALIGN_INCOMPLETE;
		goto out;
	}
	for (uint32_t i = 0; i < a->o.max_streams; i++) {
		struct stream *s = &a->s[i];

		if (!s->used || s->aligned || s->nranks != nranks)
			continue;
		if (by_rank[s->rank]) {
			res = COMM_ALIGN_DUPLICATE;
			goto out;
		}
		by_rank[s->rank] = s;
		held += s->n;
	}
	for (uint32_t r = 0; r < nranks; r++)
		if (!by_rank[r]) {
			res = COMM_ALIGN_INCOMPLETE;
			goto out;
		}
	na = sorted_calls(a, by_rank[0], a->sorted_a);
	for (uint32_t r = 1; r < nranks && res == COMM_ALIGN_OK; r++) {
		size_t nb = sorted_calls(a, by_rank[r], a->sorted_b);

		res = comm_align__match(a->sorted_a, na, a->sorted_b, nb, &a->o, &k[r]);
	}
	if (res != COMM_ALIGN_OK || reserve_out(a, *nout + held)) {
		if (res == COMM_ALIGN_OK)
			res = COMM_ALIGN_INCOMPLETE;
		goto out;
	}
	uint64_t hash = hash_bytes(&by_rank[0]->key, sizeof(by_rank[0]->key), nranks) | 1;

	for (uint32_t r = 0; r < nranks; r++) {
		struct stream *s = by_rank[r];

		s->aligned = 1;
		s->comm_hash = hash;
		s->off = SEQ_BASE - k[r];
		for (uint32_t i = 0; i < s->n; i++)
			place(s, &s->ring[(s->head + i) % a->o.window], &a->out[(*nout)++]);
		a->st.calls_released += s->n;
		free(s->ring);
		s->ring = NULL;
		s->n = s->head = 0;
		a->st.streams_aligned++;
	}
	a->st.groups_aligned++;
out:
	free(by_rank);
	free(k);
	return res;
}

size_t comm_align__try(struct comm_align *a, int64_t now_ns, const struct diag_coll_event **out)
{
	uint32_t done[64];
	size_t ndone = 0, nout = 0;

	expire(a, now_ns ? now_ns : a->newest_ns);
	for (uint32_t i = 0; i < a->o.max_streams; i++) {
		const struct stream *s = &a->s[i];
		size_t d = 0;

		if (!s->used || s->aligned)
			continue;
		while (d < ndone && done[d] != s->nranks)
			d++;
		if (d < ndone || ndone == 64)
			continue;
		done[ndone++] = s->nranks;
		a->st.attempts[align_group(a, s->nranks, &nout)]++;
	}
	*out = a->out;
	return nout;
}

void comm_align__stats(const struct comm_align *a, struct comm_align_stats *st)
{
	*st = a->st;
}
