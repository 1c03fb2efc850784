// SPDX-License-Identifier: Apache-2.0
#include "agent/sched/sched_targets.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/proc/proc_env.h"
#include "agent/proc/proc_stat.h"
#include "lib/hash.h"

#define SEEN_SLOTS 131072 /* power of two; at most half used */
#define SEEN_MAX (SEEN_SLOTS / 2)
#define KIDS_MAX 1024 /* descendants marked with a process found by its labels */

struct sched_targets {
	struct sched_bitmaps bits;
	char proc_root[64];
	uint64_t *seen; /* hash of (pid, start time); 0: empty */
	uint32_t nseen;
	char *env;	/* environ, then children lists */
	uint32_t *kids; /* mark_children's queue */
	struct sched_targets_stats st;
};

struct sched_targets *sched_targets__new(const struct sched_bitmaps *bits, const char *proc_root)
{
	struct sched_targets *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->bits = *bits;
	snprintf(t->proc_root, sizeof(t->proc_root), "%s", proc_root ? proc_root : "/proc");
	t->seen = calloc(SEEN_SLOTS, sizeof(*t->seen));
	t->env = malloc(PROC_ENV_MAX);
	t->kids = malloc(KIDS_MAX * sizeof(*t->kids));
	if (!t->seen || !t->env || !t->kids) {
		sched_targets__free(t);
		return NULL;
	}
	return t;
}

void sched_targets__free(struct sched_targets *t)
{
	if (!t)
		return;
	free(t->seen);
	free(t->env);
	free(t->kids);
	free(t);
}

/*
 * Sets tgid's bit; true when it was not set.  A process that has exited
 * (gone, or a zombie: the children lists hold those) gets its bit taken
 * back: BPF clears a bit at the exit, which came before this set, and the
 * next process with that pid would be taken for a target.  One that exits
 * after the check is cleared by BPF.
 */
static bool set_target(struct sched_targets *t, uint32_t tgid)
{
	uint64_t *words = t->bits.auto_words, bit = 1ULL << (tgid % 64);
	uint32_t w = tgid / 64;
	char state;

	if (w >= t->bits.nwords) {
		t->st.out_of_range++;
		return false;
	}
	if (__atomic_load_n(&words[w], __ATOMIC_RELAXED) & bit)
		return false;
	__atomic_fetch_or(&words[w], bit, __ATOMIC_SEQ_CST);
	state = proc_stat__state(t->proc_root, tgid);
	if (!state || state == 'Z' || state == 'X') {
		__atomic_fetch_and(&words[w], ~bit, __ATOMIC_SEQ_CST);
		t->st.gone++;
		return false;
	}
	return true;
}

bool sched_targets__mark(struct sched_targets *t, uint32_t tgid, bool gpu)
{
	if (!set_target(t, tgid))
		return false;
	if (gpu)
		t->st.by_gpu++;
	else
		t->st.by_labels++;
	return true;
}

bool sched_targets__is(const struct sched_targets *t, uint32_t tgid)
{
	return tgid / 64 < t->bits.nwords &&
	       (__atomic_load_n(&t->bits.auto_words[tgid / 64], __ATOMIC_RELAXED) >> (tgid % 64) &
		1);
}

bool sched_targets__env_has_label(const char *env, size_t n)
{
	static const char *const keys[] = { "RANK=",	     "LOCAL_RANK=",
					    "WORLD_SIZE=",   "TORCHELASTIC_RUN_ID=",
					    "SLURM_JOB_ID=", "STRATA_JOB=" };

	for (size_t i = 0; i < n;) {
		const char *e = env + i;
		size_t len = strnlen(e, n - i);

		for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
			size_t kl = strlen(keys[k]);

			if (len > kl && !memcmp(e, keys[k], kl))
				return true;
		}
		i += len + 1;
	}
	return false;
}

/* The process instance (start time) mixed with its command name, so an
 * exec (a fork of a launcher examined before it ran the rank's program
 * with RANK set) is examined again; 0 when gone. */
static uint64_t identity(const struct sched_targets *t, uint32_t pid)
{
	char comm[64];
	uint64_t start = proc_stat__start_ticks(t->proc_root, pid, comm, sizeof(comm));
	uint64_t v;

	if (!start)
		return 0;
	v = hash_bytes(comm, strlen(comm), start);
	return v ? v : 1;
}

/* true the first time (pid, start) is asked about. */
static bool first_look(struct sched_targets *t, uint32_t pid, uint64_t start)
{
	uint64_t key[2] = { pid, start }, h = hash_bytes(key, sizeof(key), 0);
	uint32_t mask = SEEN_SLOTS - 1;

	h = h ? h : 1;
	if (t->nseen >= SEEN_MAX) {
		memset(t->seen, 0, SEEN_SLOTS * sizeof(*t->seen));
		t->nseen = 0;
		t->st.resets++;
	}
	for (uint32_t i = (uint32_t)h & mask;; i = (i + 1) & mask) {
		if (t->seen[i] == h)
			return false;
		if (!t->seen[i]) {
			t->seen[i] = h;
			t->nseen++;
			return true;
		}
	}
}

/* Reads fd to its end or limit bytes into t->env (seq_file and environ
 * give a page or so a read), closes it; the length read. */
static size_t read_env_buf(struct sched_targets *t, int fd, size_t limit)
{
	size_t total = 0;
	ssize_t n;

	while (total < limit && (n = read(fd, t->env + total, limit - total)) > 0)
		total += (size_t)n;
	close(fd);
	return total;
}

static bool has_label(struct sched_targets *t, uint32_t pid)
{
	char path[96];
	int fd;

	snprintf(path, sizeof(path), "%s/%u/environ", t->proc_root, pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT || errno == ESRCH)
			t->st.gone++;
		else
			t->st.unreadable++;
		return false;
	}
	return sched_targets__env_has_label(t->env, read_env_buf(t, fd, PROC_ENV_MAX));
}

/* Appends the children of pid's threads (/proc/PID/task/TID/children) to
 * t->kids[*n..KIDS_MAX). */
static void children_of(struct sched_targets *t, uint32_t pid, uint32_t *n)
{
	char path[128];
	struct dirent *de;
	DIR *d;

	snprintf(path, sizeof(path), "%s/%u/task", t->proc_root, pid);
	d = opendir(path);
	if (!d)
		return;
	while ((de = readdir(d)) && *n < KIDS_MAX) {
		size_t len;
		int fd;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%u/task/%.16s/children", t->proc_root, pid,
			 de->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			/* ENOENT, not counted: a thread that ended meanwhile,
			 * or a kernel without CONFIG_PROC_CHILDREN (Debian's,
			 * RHEL's and Ubuntu's have it), where this window's
			 * children are not followed */
			if (errno != ENOENT && errno != ESRCH)
				t->st.unreadable++;
			continue;
		}
		len = read_env_buf(t, fd, PROC_ENV_MAX - 1);
		t->env[len] = 0;
		for (char *p = t->env, *end;; p = end) {
			unsigned long kid = strtoul(p, &end, 10);

			if (end == p)
				break;
			if (!kid || kid > UINT32_MAX || kid == (unsigned long)getpid())
				continue; /* never itself (started from a job's shell) */
			if (*n == KIDS_MAX) {
				t->st.kids_dropped++;
				break;
			}
			t->kids[(*n)++] = (uint32_t)kid;
		}
	}
	closedir(d);
}

/*
 * A process just marked by its labels: the children (and theirs) it forked
 * between the harvest that took its exec bit and the mark are marked too.
 * BPF follows forks of targets (on_fork) and of processes still pending,
 * but in between the parent was neither.  Bounded by KIDS_MAX.
 */
static void mark_children(struct sched_targets *t, uint32_t pid, sched_target_fn marked_fn,
			  void *ctx)
{
	uint32_t n = 0;

	children_of(t, pid, &n);
	for (uint32_t at = 0; at < n; at++) {
		uint32_t kid = t->kids[at];

		if (!set_target(t, kid))
			continue;
		t->st.children++;
		if (marked_fn)
			marked_fn(ctx, kid);
		children_of(t, kid, &n);
	}
}

/* 1 when pid became a target now (told to marked_fn), else 0.  once: the
 * scan's look, skipped for an instance examined before; an exec is always
 * examined (a launcher's exec of the same command with RANK set keeps its
 * start time and name). */
static int examine(struct sched_targets *t, uint32_t pid, bool once, sched_target_fn marked_fn,
		   void *ctx)
{
	uint64_t start;

	/* never itself: an agent started from a job's shell inherits its
	 * labels */
	if (!pid || pid == (uint32_t)getpid() || sched_targets__is(t, pid))
		return 0;
	if (once && (!(start = identity(t, pid)) || !first_look(t, pid, start)))
		return 0;
	t->st.examined++;
	if (!has_label(t, pid) || !sched_targets__mark(t, pid, false))
		return 0;
	if (marked_fn)
		marked_fn(ctx, pid);
	mark_children(t, pid, marked_fn, ctx);
	return 1;
}

int sched_targets__scan(struct sched_targets *t, sched_target_fn marked_fn, void *ctx)
{
	DIR *d = opendir(t->proc_root);
	struct dirent *de;
	int marked = 0;

	if (!d)
		return -errno;
	t->st.scans++;
	while ((de = readdir(d))) {
		char *end;
		unsigned long pid = strtoul(de->d_name, &end, 10);

		if (!*end && pid <= UINT32_MAX)
			marked += examine(t, (uint32_t)pid, true, marked_fn, ctx);
	}
	closedir(d);
	return marked;
}

/* Takes exec word w's bits (atomically: BPF may set more meanwhile, they
 * stay for the next tick) and examines their processes. */
static int take_exec_word(struct sched_targets *t, uint32_t w, sched_target_fn marked_fn, void *ctx)
{
	uint64_t bits = __atomic_exchange_n(&t->bits.exec_words[w], 0, __ATOMIC_SEQ_CST);
	int marked = 0;

	while (bits) {
		uint32_t pid = w * 64 + (uint32_t)__builtin_ctzll(bits);

		bits &= bits - 1;
		t->st.execs++;
		marked += examine(t, pid, false, marked_fn, ctx);
	}
	return marked;
}

int sched_targets__tick(struct sched_targets *t, sched_target_fn marked_fn, void *ctx)
{
	uint32_t nsummary = (t->bits.nwords + 63) / 64;
	int marked = 0;

	if (!t->bits.exec_words || !t->bits.exec_summary)
		return sched_targets__scan(t, marked_fn, ctx);
	/* the summary first, then the words it names: a bit BPF sets after
	 * the word was taken raises the summary again (bpf/sched.bpf.c) */
	for (uint32_t i = 0; i < nsummary; i++) {
		uint64_t sum;

		if (!__atomic_load_n(&t->bits.exec_summary[i], __ATOMIC_RELAXED))
			continue;
		sum = __atomic_exchange_n(&t->bits.exec_summary[i], 0, __ATOMIC_SEQ_CST);
		while (sum) {
			uint32_t w = i * 64 + (uint32_t)__builtin_ctzll(sum);

			sum &= sum - 1;
			if (w < t->bits.nwords)
				marked += take_exec_word(t, w, marked_fn, ctx);
		}
	}
	return marked;
}

void sched_targets__stats(const struct sched_targets *t, struct sched_targets_stats *st)
{
	*st = t->st;
}

void sched_targets__each(const struct sched_targets *t, sched_target_fn fn, void *ctx)
{
	for (uint32_t w = 0; w < t->bits.nwords; w++) {
		uint64_t bits = __atomic_load_n(&t->bits.auto_words[w], __ATOMIC_RELAXED);

		while (bits) {
			int b = __builtin_ctzll(bits);

			fn(ctx, w * 64 + (uint32_t)b);
			bits &= bits - 1;
		}
	}
}
