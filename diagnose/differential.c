// SPDX-License-Identifier: Apache-2.0
#include "diagnose/differential.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose/robust.h"
#include "lib/enum_names.h"

#define SCORE_CAP 1000.0       /* a 0-MAD peer set with no floor cannot give inf */
#define STACK_CANDIDATES 64    /* flagged stacks compared one by one */
#define STACK_FINDINGS 3       /* stack findings reported at most */
#define STACK_SHARE_FLOOR 0.02 /* 2% of on-CPU time */

enum metric_id {
	M_ONCPU,
	M_RUNNABLE,
	M_FOREIGN,
	M_IRQ,
	M_OFF_IO,
	M_OFF_LOCK,
	M_OFF_SLEEP,
	M_OFF_FAULT,
	M_OFF_OTHER,
	M_LOADER,
	M_LAUNCH_RATE,
	M_SYNC,
	M_COPY,
	M_ALLOC_FAIL,
	M_COLLECTIVE,
	M_BYTES_RATE,
	M_SEQ_GAPS,
	M_MAX,
};

/*
 * Each metric: its layer, whether only "higher" is abnormal (+1) or both
 * directions are (0), and its floors: the smallest difference that can
 * matter, in the metric's unit (abs) and relative to the peer median (rel).
 * Shares are of wall time, so a floor of 0.01 means "1% of the window".
 */
static const struct metric_desc {
	uint32_t layer;
	const char *name;
	int dir;
	double floor_abs, floor_rel;
} metrics[M_MAX] = {
	[M_ONCPU] = { DIAG_LAYER_CPU, "oncpu_share", 0, 0.02, 0.1 },
	[M_RUNNABLE] = { DIAG_LAYER_CPU, "runnable_share", 1, 0.01, 0.1 },
	[M_FOREIGN] = { DIAG_LAYER_CPU, "foreign_cpu_share", 1, 0.01, 0.1 },
	[M_IRQ] = { DIAG_LAYER_CPU, "irq_cpu_share_max", 1, 0.01, 0.1 },
	[M_OFF_IO] = { DIAG_LAYER_OS, "offcpu_io_share", 1, 0.01, 0.1 },
	[M_OFF_LOCK] = { DIAG_LAYER_OS, "offcpu_lock_share", 1, 0.01, 0.1 },
	[M_OFF_SLEEP] = { DIAG_LAYER_OS, "offcpu_sleep_share", 1, 0.01, 0.1 },
	[M_OFF_FAULT] = { DIAG_LAYER_OS, "offcpu_fault_share", 1, 0.01, 0.1 },
	[M_OFF_OTHER] = { DIAG_LAYER_OS, "offcpu_other_share", 1, 0.01, 0.1 },
	[M_LOADER] = { DIAG_LAYER_PYTHON, "dataloader_share", 1, 0.01, 0.1 },
	[M_LAUNCH_RATE] = { DIAG_LAYER_CUDA, "launch_rate", 0, 50, 0.1 },
	[M_SYNC] = { DIAG_LAYER_CUDA, "sync_blocked_share", 1, 0.01, 0.1 },
	[M_COPY] = { DIAG_LAYER_CUDA, "copy_blocked_share", 1, 0.01, 0.1 },
	[M_ALLOC_FAIL] = { DIAG_LAYER_CUDA, "alloc_failures", 1, 1, 0.1 },
	[M_COLLECTIVE] = { DIAG_LAYER_NCCL, "collective_share", 1, 0.01, 0.1 },
	[M_BYTES_RATE] = { DIAG_LAYER_NCCL, "collective_bytes_per_s", 0, 1e6, 0.1 },
	[M_SEQ_GAPS] = { DIAG_LAYER_NCCL, "seq_gaps", 1, 1, 0.1 },
};

static const char *const default_loader_patterns[] = {
	"DataLoader", /* torch.utils.data: _SingleProcess/_MultiProcessingDataLoaderIter */
	"dataloader", "__getitem__", "collate", "_next_data", NULL,
};

const char *diag_layer_name(enum diag_layer l)
{
	static const char *const names[DIAG_LAYER_MAX] = { "cpu", "os", "python", "cuda", "nccl" };

	return l < DIAG_LAYER_MAX ? names[l] : "unknown";
}

const char *diag_softirq_name(uint32_t vector)
{
	/* include/linux/interrupt.h, stable since 2.6 */
	static const char *const names[] = { "HI",	 "TIMER",   "NET_TX", "NET_RX",	 "BLOCK",
					     "IRQ_POLL", "TASKLET", "SCHED",  "HRTIMER", "RCU" };

	return vector < sizeof(names) / sizeof(names[0]) ? names[vector] : "unknown";
}

static bool is_loader(const char *frames, const char *const *pat)
{
	for (; frames && *pat; pat++)
		if (strstr(frames, *pat))
			return true;
	return false;
}

static double sum_stacks(const struct diag_stack *s, size_t n)
{
	double t = 0;

	for (size_t i = 0; i < n; i++)
		t += s[i].ns;
	return t;
}

static double loader_ns(const struct diag_rank_window *w, const char *const *pat)
{
	double t = 0;

	for (size_t i = 0; i < w->n_oncpu; i++)
		if (is_loader(w->oncpu[i].frames, pat))
			t += w->oncpu[i].ns;
	for (int r = 0; r < STRATA_OFF_MAX; r++)
		for (size_t i = 0; i < w->n_offcpu[r]; i++)
			if (is_loader(w->offcpu[r][i].frames, pat))
				t += w->offcpu[r][i].ns;
	return t;
}

static double irq_max_ns(const struct diag_rank_window *w)
{
	double m = 0;

	for (size_t i = 0; i < w->n_irq; i++)
		if (w->irq[i].ns > m)
			m = w->irq[i].ns;
	return m;
}

static void rank_metrics(const struct diag_rank_window *w, const char *const *pat, double *m)
{
	double wall = w->wall_ns > 0 ? w->wall_ns : 1, foreign = 0;

	for (size_t i = 0; i < w->n_foreign; i++)
		foreign += w->foreign[i].ns;
	m[M_ONCPU] = sum_stacks(w->oncpu, w->n_oncpu) / wall;
	m[M_RUNNABLE] = w->runnable_ns / wall;
	m[M_FOREIGN] = foreign / wall;
	m[M_IRQ] = irq_max_ns(w) / wall;
	for (int r = 0; r < STRATA_OFF_MAX; r++)
		m[M_OFF_IO + r] = w->offcpu_ns[r] / wall;
	m[M_LOADER] = loader_ns(w, pat) / wall;
	m[M_LAUNCH_RATE] = w->launches / (wall / 1e9);
	m[M_SYNC] = w->sync_ns / wall;
	m[M_COPY] = w->copy_ns / wall;
	m[M_ALLOC_FAIL] = w->alloc_failures;
	m[M_COLLECTIVE] = w->collective_ns / wall;
	m[M_BYTES_RATE] = w->collective_bytes / (wall / 1e9);
	m[M_SEQ_GAPS] = w->seq_gaps;
}

/* The tail of a folded stack when it does not fit: the leaf says most. */
static void put_stack(char *dst, const char *frames, double share)
{
	size_t n = strlen(frames), room = DIAG_EVIDENCE_LEN - 16;

	if (n <= room)
		snprintf(dst, DIAG_EVIDENCE_LEN, "%5.1f%% %s", 100 * share, frames);
	else
		snprintf(dst, DIAG_EVIDENCE_LEN, "%5.1f%% ...%s", 100 * share,
			 frames + n - room + 3);
}

static int cmp_stack_desc(const void *pa, const void *pb)
{
	const struct diag_stack *a = *(const struct diag_stack *const *)pa;
	const struct diag_stack *b = *(const struct diag_stack *const *)pb;

	return (a->ns < b->ns) - (a->ns > b->ns);
}

/* The heaviest stacks of s[0..n) (matching pat when given) as evidence. */
static void top_stacks(struct diag_finding *f, const struct diag_stack *s, size_t n, double wall,
		       const char *const *pat)
{
	const struct diag_stack **p = malloc((n + 1) * sizeof(*p));
	size_t k = 0;

	if (!p)
		return;
	for (size_t i = 0; i < n; i++)
		if (s[i].frames && (!pat || is_loader(s[i].frames, pat)))
			p[k++] = &s[i];
	qsort(p, k, sizeof(*p), cmp_stack_desc);
	for (size_t i = 0; i < k && f->n_evidence < DIAG_EVIDENCE_MAX; i++)
		put_stack(f->evidence[f->n_evidence++], p[i]->frames, p[i]->ns / wall);
	free(p);
}

static int cmp_foreign_desc(const void *pa, const void *pb)
{
	double a = ((const struct diag_foreign *)pa)->ns, b = ((const struct diag_foreign *)pb)->ns;

	return (a < b) - (a > b);
}

static int cmp_irq_desc(const void *pa, const void *pb)
{
	double a = ((const struct diag_irq *)pa)->ns, b = ((const struct diag_irq *)pb)->ns;

	return (a < b) - (a > b);
}

/* Evidence of a metric finding, from the flagged rank's own data. */
static void evidence(struct diag_finding *f, enum metric_id id, const struct diag_rank_window *w,
		     const char *const *pat)
{
	double wall = w->wall_ns > 0 ? w->wall_ns : 1;
	char *e;

	switch (id) {
	case M_ONCPU:
		top_stacks(f, w->oncpu, w->n_oncpu, wall, NULL);
		break;
	case M_RUNNABLE:
	case M_FOREIGN: {
		/* Who else ran on its CPUs explains contention. */
		struct diag_foreign *c = malloc((w->n_foreign + 1) * sizeof(*c));

		if (!c)
			break;
		memcpy(c, w->foreign, w->n_foreign * sizeof(*c));
		qsort(c, w->n_foreign, sizeof(*c), cmp_foreign_desc);
		for (size_t i = 0; i < w->n_foreign && f->n_evidence < DIAG_EVIDENCE_MAX; i++) {
			e = f->evidence[f->n_evidence++];
			snprintf(e, DIAG_EVIDENCE_LEN, "%5.1f%% on its CPUs: %s (pid %u)",
				 100 * c[i].ns / wall, c[i].comm ? c[i].comm : "?", c[i].pid);
		}
		free(c);
		break;
	}
	case M_IRQ: {
		struct diag_irq *c = malloc((w->n_irq + 1) * sizeof(*c));

		if (!c)
			break;
		memcpy(c, w->irq, w->n_irq * sizeof(*c));
		qsort(c, w->n_irq, sizeof(*c), cmp_irq_desc);
		for (size_t i = 0; i < w->n_irq && f->n_evidence < DIAG_EVIDENCE_MAX; i++) {
			e = f->evidence[f->n_evidence++];
			if (c[i].softirq)
				snprintf(e, DIAG_EVIDENCE_LEN, "%5.1f%% CPU %u softirq %s",
					 100 * c[i].ns / wall, c[i].cpu,
					 diag_softirq_name(c[i].vector));
			else
				snprintf(e, DIAG_EVIDENCE_LEN, "%5.1f%% CPU %u irq %u",
					 100 * c[i].ns / wall, c[i].cpu, c[i].vector);
		}
		free(c);
		break;
	}
	case M_OFF_IO:
	case M_OFF_LOCK:
	case M_OFF_SLEEP:
	case M_OFF_FAULT:
	case M_OFF_OTHER:
		top_stacks(f, w->offcpu[id - M_OFF_IO], w->n_offcpu[id - M_OFF_IO], wall, NULL);
		break;
	case M_LOADER:
		top_stacks(f, w->oncpu, w->n_oncpu, wall, pat);
		for (int r = 0; r < STRATA_OFF_MAX && f->n_evidence < DIAG_EVIDENCE_MAX; r++)
			top_stacks(f, w->offcpu[r], w->n_offcpu[r], wall, pat);
		break;
	default:
		break; /* counters: the value is the evidence */
	}
}

static bool abnormal(double z, int dir, double min)
{
	return dir > 0 ? z >= min : fabs(z) >= min;
}

static double cap(double z)
{
	return z > SCORE_CAP ? SCORE_CAP : z < -SCORE_CAP ? -SCORE_CAP : z;
}

/* Scores x against peer values v[0..n) (v is reordered). */
static double score_against(double x, double *v, size_t n, double floor_abs, double floor_rel,
			    double *med_out)
{
	double med = robust_median(v, n), mad = robust_mad(v, n, med);
	double floor = fmax(floor_abs, floor_rel * fabs(med));

	*med_out = med;
	return cap(robust_z(x, med, mad, floor));
}

/* Index of a peer's stacks sorted by frames, for lookups by name. */
struct sorted_stacks {
	const struct diag_stack **s;
	size_t n;
	double total;
};

static int cmp_frames(const void *pa, const void *pb)
{
	const struct diag_stack *a = *(const struct diag_stack *const *)pa;
	const struct diag_stack *b = *(const struct diag_stack *const *)pb;

	return strcmp(a->frames ? a->frames : "", b->frames ? b->frames : "");
}

static double share_in(const struct sorted_stacks *ss, const char *frames)
{
	struct diag_stack key = { .frames = frames };
	const struct diag_stack *kp = &key, **hit;

	if (!ss->total)
		return 0;
	hit = bsearch(&kp, ss->s, ss->n, sizeof(*ss->s), cmp_frames);
	return hit ? (*hit)->ns / ss->total : 0;
}

/*
 * The sampling noise of a stack share: the binomial standard error of k
 * hits in n samples, with Laplace's (k+1)/(n+2) so that 1 hit of 1 (or of
 * 6) is not certainty.  0 when the times are exact.
 */
static double share_noise(double share, double samples)
{
	double p;

	if (samples <= 0)
		return 0;
	p = (share * samples + 1) / (samples + 2);
	return sqrt(p * (1 - p) / samples);
}

/* The kernel's side of a system call starts at its entry (x86-64, its
 * 32-bit entries, arm64). */
static const char *const SYSCALL_ENTRY[] = { "entry_SYSCALL_64",     "do_syscall_64",
					     "entry_SYSCALL_compat", "do_int80_syscall_32",
					     "do_fast_syscall_32",   "el0_svc" };
/* An interrupt taken during the call: what follows is its handler's, not
 * the call's (a block completion softirq is not the caller's I/O). */
static const char *const INTERRUPT[] = { "asm_common_interrupt", "asm_sysvec_",	 "irq_exit_rcu",
					 "__irq_exit_rcu",	 "__do_softirq", "handle_softirqs",
					 "el1_interrupt",	 "el0_interrupt" };
/* Frames of storage I/O: the block layer, the page cache, direct I/O, a
 * file system's read or write (not pipes, sockets, stat or ioctl, which
 * also pass the VFS). */
static const char *const IO_PATH[] = { "blk_",	     "__blk_",	      "submit_bio",	"iomap_",
				       "__iomap_",   "filemap_",      "page_cache_",	"io_uring",
				       "io_submit_", "__x64_sys_io_", "__arm64_sys_io_" };
static const char *const IO_PATH_SUFFIX[] = { "_file_read_iter", "_file_write_iter" };

static bool frame_is(const char *f, size_t len, const char *const *names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (len >= strlen(names[i]) && !strncmp(f, names[i], strlen(names[i])))
			return true;
	return false;
}

static bool frame_ends(const char *f, size_t len, const char *const *names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (len >= strlen(names[i]) &&
		    !strncmp(f + len - strlen(names[i]), names[i], strlen(names[i])))
			return true;
	return false;
}

#define NAMES(a) a, sizeof(a) / sizeof(*(a))

/*
 * An on-CPU stack in the kernel's storage I/O path: a system call's frames
 * through a file system's read or write, the page cache or the block
 * layer.  That CPU time is the I/O's own cost (on a virtual disk, each
 * request's notify is a VM exit the vCPU spends on-CPU), so it belongs to
 * the OS layer, beside the off-CPU I/O wait, not to the rank's compute.
 */
static bool stack_in_io_path(const char *frames)
{
	bool call = false;

	for (const char *f = frames; f && *f;) {
		size_t len = strcspn(f, ";");

		if (frame_is(f, len, NAMES(INTERRUPT)))
			call = false;
		else if (!call)
			call = frame_is(f, len, NAMES(SYSCALL_ENTRY));
		else if (frame_is(f, len, NAMES(IO_PATH)) ||
			 frame_ends(f, len, NAMES(IO_PATH_SUFFIX)))
			return true;
		f += len + (f[len] == ';');
	}
	return false;
}

/*
 * The differential flamegraph as findings: stacks whose share of the
 * flagged rank's on-CPU time exceeds their share on the peers by more than
 * the peers' spread and the flagged rank's own sampling noise.  A stack in
 * the kernel's I/O path is an OS finding (oncpu_io_stack_share).
 */
static int stack_findings(const struct diag_rank_window *fl, const struct diag_rank_window *peers,
			  size_t np, double min, struct diag_finding *cand, size_t *nc)
{
	struct sorted_stacks *ps = calloc(np, sizeof(*ps));
	const struct diag_stack **top = malloc((fl->n_oncpu + 1) * sizeof(*top));
	double *v = malloc(np * sizeof(*v)), total = sum_stacks(fl->oncpu, fl->n_oncpu);
	size_t k = 0, found = 0;
	int err = 0;

	if (!ps || !top || !v) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t p = 0; p < np; p++) {
		ps[p].s = malloc((peers[p].n_oncpu + 1) * sizeof(*ps[p].s));
		if (!ps[p].s) {
			err = -ENOMEM;
			goto out;
		}
		for (size_t i = 0; i < peers[p].n_oncpu; i++)
			if (peers[p].oncpu[i].frames)
				ps[p].s[ps[p].n++] = &peers[p].oncpu[i];
		ps[p].total = sum_stacks(peers[p].oncpu, peers[p].n_oncpu);
		qsort(ps[p].s, ps[p].n, sizeof(*ps[p].s), cmp_frames);
	}
	for (size_t i = 0; i < fl->n_oncpu; i++)
		if (fl->oncpu[i].frames)
			top[k++] = &fl->oncpu[i];
	qsort(top, k, sizeof(*top), cmp_stack_desc);
	for (size_t i = 0; i < k && i < STACK_CANDIDATES && found < STACK_FINDINGS && total; i++) {
		double share = top[i]->ns / total, med, z;

		for (size_t p = 0; p < np; p++)
			v[p] = share_in(&ps[p], top[i]->frames);
		z = score_against(share, v, np,
				  fmax(STACK_SHARE_FLOOR, share_noise(share, fl->oncpu_samples)),
				  0.1, &med);
		if (z < min)
			continue;
		struct diag_finding *f = &cand[(*nc)++];
		memset(f, 0, sizeof(*f));
		if (stack_in_io_path(top[i]->frames)) {
			f->layer = DIAG_LAYER_OS;
			snprintf(f->metric, sizeof(f->metric), "oncpu_io_stack_share");
		} else {
			f->layer = DIAG_LAYER_CPU;
			snprintf(f->metric, sizeof(f->metric), "oncpu_stack_share");
		}
		f->value = share;
		f->peer_median = med;
		f->score = z;
		f->n_evidence = 1;
		put_stack(f->evidence[0], top[i]->frames, share);
		found++;
	}
out:
	if (ps)
		for (size_t p = 0; p < np; p++)
			free(ps[p].s);
	free(ps);
	free(top);
	free(v);
	return err;
}

/*
 * Which layer explains which when two findings score the same (scores
 * saturate at the robust z's cap): resources (CPU, OS) explain the device
 * (CUDA), which explains the application (Python: a data loader slowed by
 * I/O waits), which explains the collectives (NCCL: time waiting for
 * others).  Lower is more causal.
 */
static const int causal_order[DIAG_LAYER_MAX] = {
	[DIAG_LAYER_CPU] = 0,	 [DIAG_LAYER_OS] = 0,	[DIAG_LAYER_CUDA] = 1,
	[DIAG_LAYER_PYTHON] = 2, [DIAG_LAYER_NCCL] = 3,
};

/* A finding's place in causal_order.  Voluntary sleep is the exception in
 * the OS layer: a thread sleeps because it waits for something else (a
 * CUDA sync that sleeps, a barrier), so it explains nothing. */
static int causal_rank(const struct diag_finding *f)
{
	if (f->layer >= DIAG_LAYER_MAX)
		return DIAG_LAYER_MAX;
	if (!strcmp(f->metric, "offcpu_sleep_share"))
		return causal_order[DIAG_LAYER_NCCL];
	return causal_order[f->layer];
}

/* How many times the peers' median the flagged value is (effect size). */
static double effect(const struct diag_finding *f)
{
	return fabs(f->value - f->peer_median) / fmax(fabs(f->peer_median), 1e-9);
}

/* A score's 5%-wide bucket on a log scale: scores in one bucket are a tie
 * (estimates from a few windows), and bucketing keeps the order transitive. */
static long score_bucket(double score)
{
	double b = floor(log(fabs(score) + 1e-12) / log(1.05));

	return isfinite(b) ? (long)b : isnan(b) ? LONG_MIN : LONG_MAX; /* no UB on NaN/inf */
}

/* Highest score bucket first; ties: the more causal layer, then the larger
 * effect, then by name and first evidence, so the order never depends on
 * qsort's or the input's. */
static int cmp_finding(const void *pa, const void *pb)
{
	const struct diag_finding *fa = pa, *fb = pb;
	long ba = score_bucket(fa->score), bb = score_bucket(fb->score);
	double a, b;
	int la = causal_rank(fa), lb = causal_rank(fb);

	if (ba != bb)
		return (ba < bb) - (ba > bb);
	if (la != lb)
		return la - lb;
	a = effect(fa);
	b = effect(fb);
	if (a != b)
		return (a < b) - (a > b);
	if (strcmp(fa->metric, fb->metric))
		return strcmp(fa->metric, fb->metric);
	/* Stack findings share one metric name: their stacks tell them apart. */
	return strcmp(fa->n_evidence ? fa->evidence[0] : "", fb->n_evidence ? fb->evidence[0] : "");
}

int diag_differential(const struct diag_rank_window *flagged, const struct diag_rank_window *peers,
		      size_t npeers, const struct diag_diff_opts *opts, struct diag_finding *out,
		      size_t max)
{
	const char *const *pat =
		opts && opts->loader_patterns ? opts->loader_patterns : default_loader_patterns;
	double min = opts && opts->min_score > 0 ? opts->min_score : 3.0;
	double fm[M_MAX], (*pm)[M_MAX] = NULL, *v = NULL;
	struct diag_finding *cand = NULL;
	size_t nc = 0;
	int err = 0;

	if (!flagged || !peers || !npeers)
		return -EINVAL;
	pm = malloc(npeers * sizeof(*pm));
	v = malloc(npeers * sizeof(*v));
	cand = malloc((M_MAX + STACK_FINDINGS) * sizeof(*cand));
	if (!pm || !v || !cand) {
		err = -ENOMEM;
		goto out;
	}
	rank_metrics(flagged, pat, fm);
	for (size_t p = 0; p < npeers; p++)
		rank_metrics(&peers[p], pat, pm[p]);
	for (int id = 0; id < M_MAX; id++) {
		const struct metric_desc *d = &metrics[id];
		double med, z;

		for (size_t p = 0; p < npeers; p++)
			v[p] = pm[p][id];
		z = score_against(fm[id], v, npeers, d->floor_abs, d->floor_rel, &med);
		if (!abnormal(z, d->dir, min))
			continue;
		struct diag_finding *f = &cand[nc++];
		memset(f, 0, sizeof(*f));
		f->layer = d->layer;
		snprintf(f->metric, sizeof(f->metric), "%s", d->name);
		f->value = fm[id];
		f->peer_median = med;
		f->score = z;
		evidence(f, id, flagged, pat);
	}
	err = stack_findings(flagged, peers, npeers, min, cand, &nc);
	if (err)
		goto out;
	qsort(cand, nc, sizeof(*cand), cmp_finding);
	if (nc > max)
		nc = max;
	memcpy(out, cand, nc * sizeof(*cand));
out:
	free(pm);
	free(v);
	free(cand);
	return err ? err : (int)nc;
}
