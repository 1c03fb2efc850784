// SPDX-License-Identifier: Apache-2.0
#include "agent/sched/sched_collector.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "agent/core/map_drain.h"
#include "agent/sched/sched_targets.h"
#include "lib/log.h"
#include "sched.skel.h"

/* Threads that exited, taken out of the BPF map: their final counters. */
struct retired_thread {
	struct strata_sched_key key;
	struct strata_sched_thread t;
};

struct sched_collector {
	struct sched_bpf *skel;
	struct bpf_link *layer_links[2];
	struct bpf_link *fault_links[2]; /* NULL: page faults not told apart */
	const char *test_layer_binary;
	int ncpus;
	struct retired_thread *retired; /* bounded: max_retired */
	uint32_t nretired, max_retired;
	struct sched_retire_stats rs;
	uint64_t drain_wait_timeouts; /* off-CPU generation never went quiet */
	uint64_t stacks_missing;      /* a key's stack not in its generation's map */
	/* STRATA_FILTER_AUTO: the mmapped bitmaps (agent/sched/sched_targets.h) */
	struct sched_bitmaps bits;
	size_t auto_len, exec_len, summary_len;
	uint32_t auto_nwords;
};

/* Words of the automatic-target bitmap: one bit per possible pid. */
static uint32_t auto_words_for_pid_max(void)
{
	unsigned long pid_max = 4194304; /* the kernel's limit (PID_MAX_LIMIT) */
	FILE *f = fopen("/proc/sys/kernel/pid_max", "r");

	if (f) {
		if (fscanf(f, "%lu", &pid_max) != 1 || !pid_max || pid_max > 4194304)
			pid_max = 4194304;
		fclose(f);
	}
	return (uint32_t)((pid_max + STRATA_AUTO_TARGET_BITS - 1) / STRATA_AUTO_TARGET_BITS);
}

/* Maps an mmapable array of 64-bit words (all of it) into *words. */
static int map_words(struct bpf_map *map, uint64_t **words, size_t *len)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t n = (size_t)bpf_map__max_entries(map) * sizeof(uint64_t);
	void *m;

	n = (n + (size_t)page - 1) / (size_t)page * (size_t)page;
	m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, bpf_map__fd(map), 0);
	if (m == MAP_FAILED) {
		int err = -errno;

		pr_err("sched: cannot map %s: %s", bpf_map__name(map), strerror(-err));
		return err;
	}
	*words = m;
	*len = n;
	return 0;
}

struct sched_collector *sched_collector__new(const struct sched_collector_opts *opts)
{
	struct sched_collector *c = calloc(1, sizeof(*c));
	int err;

	if (!c)
		return NULL;
	c->ncpus = libbpf_num_possible_cpus();
	c->test_layer_binary = opts->test_layer_binary;
	c->max_retired = opts->max_retired ? opts->max_retired : 65536;
	c->skel = sched_bpf__open();
	if (!c->skel || c->ncpus <= 0) {
		err = c->skel ? -EINVAL : -errno;
		pr_err("sched: cannot open BPF object: %s", strerror(-err));
		goto err_out;
	}
	c->skel->rodata->filter_mode = opts->filter;
	c->skel->rodata->stack_interval_ns = !opts->stack_interval_ns ? 1000000ULL
					     : opts->stack_interval_ns == UINT64_MAX
						     ? 0
						     : opts->stack_interval_ns;
	if (getenv("STRATA_SCHED_STACK_NS")) /* bench knob */
		c->skel->rodata->stack_interval_ns =
			strtoull(getenv("STRATA_SCHED_STACK_NS"), NULL, 10);
	c->auto_nwords = opts->filter == STRATA_FILTER_AUTO ? auto_words_for_pid_max() : 1;
	bpf_map__set_max_entries(c->skel->maps.auto_targets, c->auto_nwords);
	bpf_map__set_max_entries(c->skel->maps.exec_words, c->auto_nwords);
	bpf_map__set_max_entries(c->skel->maps.exec_summary,
				 (c->auto_nwords + STRATA_AUTO_TARGET_BITS - 1) /
					 STRATA_AUTO_TARGET_BITS);
	bpf_program__set_autoload(c->skel->progs.on_fork, opts->filter == STRATA_FILTER_AUTO);
	bpf_program__set_autoload(c->skel->progs.on_exec, opts->filter == STRATA_FILTER_AUTO);
	if (opts->max_threads)
		bpf_map__set_max_entries(c->skel->maps.threads, opts->max_threads);
	if (opts->max_offcpu) {
		bpf_map__set_max_entries(c->skel->maps.offcpu0, opts->max_offcpu);
		bpf_map__set_max_entries(c->skel->maps.offcpu1, opts->max_offcpu);
	}
	if (opts->targets_fd >= 0 &&
	    (err = bpf_map__reuse_fd(c->skel->maps.targets, opts->targets_fd))) {
		pr_err("sched: cannot share the targets map: %s", strerror(-err));
		goto err_out;
	}
	if (opts->cgroup_map_fd >= 0 &&
	    (err = bpf_map__reuse_fd(c->skel->maps.cgroup_map, opts->cgroup_map_fd))) {
		pr_err("sched: cannot share the cgroup map: %s", strerror(-err));
		goto err_out;
	}
	/* Attached by hand in start(): optional (kernels without kprobes). */
	bpf_program__set_autoattach(c->skel->progs.fault_enter, false);
	bpf_program__set_autoattach(c->skel->progs.fault_exit, false);
	if (!opts->test_layer_binary) {
		bpf_program__set_autoload(c->skel->progs.test_layer_enter, false);
		bpf_program__set_autoload(c->skel->progs.test_layer_exit, false);
	}
	err = sched_bpf__load(c->skel);
	if (err) {
		pr_err("sched: cannot load BPF programs: %s (run with -v for the verifier log)",
		       strerror(-err));
		goto err_out;
	}
	if (opts->filter == STRATA_FILTER_AUTO &&
	    ((err = map_words(c->skel->maps.auto_targets, &c->bits.auto_words, &c->auto_len)) ||
	     (err = map_words(c->skel->maps.exec_words, &c->bits.exec_words, &c->exec_len)) ||
	     (err = map_words(c->skel->maps.exec_summary, &c->bits.exec_summary, &c->summary_len))))
		goto err_out;
	c->bits.nwords = c->auto_nwords;
	return c;

err_out:
	sched_collector__free(c);
	errno = -err;
	return NULL;
}

void sched_collector__free(struct sched_collector *c)
{
	if (!c)
		return;
	bpf_link__destroy(c->fault_links[0]);
	bpf_link__destroy(c->fault_links[1]);
	bpf_link__destroy(c->layer_links[0]);
	bpf_link__destroy(c->layer_links[1]);
	if (c->bits.auto_words)
		munmap(c->bits.auto_words, c->auto_len);
	if (c->bits.exec_words)
		munmap(c->bits.exec_words, c->exec_len);
	if (c->bits.exec_summary)
		munmap(c->bits.exec_summary, c->summary_len);
	sched_bpf__destroy(c->skel);
	free(c->retired);
	free(c);
}

static int attach_layer_probe(struct sched_collector *c, int i, struct bpf_program *prog,
			      const char *func)
{
	LIBBPF_OPTS(bpf_uprobe_opts, uo, .func_name = func);

	c->layer_links[i] = bpf_program__attach_uprobe_opts(prog, -1, c->test_layer_binary, 0, &uo);
	if (!c->layer_links[i]) {
		int err = -errno;

		pr_err("sched: uprobe %s:%s: %s", c->test_layer_binary, func, strerror(-err));
		return err;
	}
	return 0;
}

int sched_collector__start(struct sched_collector *c)
{
	int err = sched_bpf__attach(c->skel);

	if (err) {
		pr_err("sched: attach: %s", strerror(-err));
		return err;
	}
	c->fault_links[0] = bpf_program__attach(c->skel->progs.fault_enter);
	c->fault_links[1] =
		c->fault_links[0] ? bpf_program__attach(c->skel->progs.fault_exit) : NULL;
	if (!c->fault_links[1]) {
		pr_info("sched: no kprobe on handle_mm_fault (%s): page-fault waits count as "
			"their sleep state's reason",
			strerror(errno));
		bpf_link__destroy(c->fault_links[0]);
		c->fault_links[0] = NULL;
	}
	if (c->test_layer_binary &&
	    ((err = attach_layer_probe(c, 0, c->skel->progs.test_layer_enter,
				       "strata_test_layer_enter")) ||
	     (err = attach_layer_probe(c, 1, c->skel->progs.test_layer_exit,
				       "strata_test_layer_exit"))))
		return err;
	return 0;
}

int sched_collector__api_layers_fd(const struct sched_collector *c)
{
	return bpf_map__fd(c->skel->maps.api_layers);
}

/* Keeps one retired thread's final counters; 0, or -ENOSPC (counted). */
static int keep_retired(struct sched_collector *c, const struct strata_sched_key *k,
			const struct strata_sched_thread *t)
{
	if (c->nretired >= c->max_retired) {
		c->rs.dropped++;
		return -ENOSPC;
	}
	if (!c->retired) {
		c->retired = calloc(c->max_retired, sizeof(*c->retired));
		if (!c->retired) {
			c->rs.dropped++;
			return -ENOMEM;
		}
	}
	c->retired[c->nretired].key = *k;
	c->retired[c->nretired].t = *t;
	c->nretired++;
	return 0;
}

int sched_collector__retire(struct sched_collector *c, uint64_t now_ns, uint64_t grace_ns)
{
	int fd = bpf_map__fd(c->skel->maps.threads), n = 0;
	struct strata_sched_key *keys = NULL;
	int64_t nkeys = map_drain__keys(
		fd, sizeof(*keys), bpf_map__max_entries(c->skel->maps.threads), (void **)&keys);

	if (nkeys < 0) {
		free(keys);
		return (int)nkeys;
	}
	for (int64_t i = 0; i < nkeys; i++) {
		struct strata_sched_thread t;

		/* The grace period covers the thread's final switch-out, the
		 * last update its entry gets: nothing writes it any more. */
		if (bpf_map_lookup_elem(fd, &keys[i], &t) || !t.exit_ns || now_ns < t.exit_ns ||
		    now_ns - t.exit_ns < grace_ns)
			continue;
		keep_retired(c, &keys[i], &t);
		if (!bpf_map_delete_elem(fd, &keys[i])) {
			c->rs.retired++;
			n++;
		}
	}
	free(keys);
	return n;
}

void sched_collector__retire_stats(const struct sched_collector *c, struct sched_retire_stats *st)
{
	*st = c->rs;
}

int sched_collector__threads(struct sched_collector *c, sched_thread_fn fn, void *ctx)
{
	int fd = bpf_map__fd(c->skel->maps.threads), n = 0;
	struct strata_sched_key k, next;
	struct strata_sched_thread t;
	void *prev = NULL;

	for (uint32_t i = 0; i < c->nretired; i++) {
		int err = fn(ctx, &c->retired[i].key, &c->retired[i].t);
		if (err)
			return err;
		n++;
	}
	while (!bpf_map_get_next_key(fd, prev, &next)) {
		k = next;
		prev = &k;
		if (bpf_map_lookup_elem(fd, &k, &t))
			continue; /* exited and removed meanwhile */
		int err = fn(ctx, &k, &t);
		if (err)
			return err;
		n++;
	}
	return n;
}

/* The frames of stack id in the drained generation's stack map; 0 when
 * the id is reserved (none, lost, not walked) or missing (counted). */
static size_t read_stack(struct sched_collector *c, int fd, uint64_t id, struct strata_stack *st)
{
	if (id <= STRATA_STACK_RESERVED)
		return 0;
	if (bpf_map_lookup_elem(fd, &id, st)) {
		c->stacks_missing++;
		return 0;
	}
	return st->len < STRATA_MAX_STACK_DEPTH ? st->len : STRATA_MAX_STACK_DEPTH;
}

/*
 * Off-CPU time is double buffered (bpf/generation.bpf.h): flip, wait until
 * no program still adds to the old generation, then read and clear it.  A
 * per-entry lookup_and_delete instead loses increments made through a
 * pointer the program looked up before the delete, or adds them to another
 * key once the preallocated element is reused.
 */
int sched_collector__drain_offcpu(struct sched_collector *c, sched_offcpu_fn fn, void *ctx)
{
	const struct map_generation mg = {
		.gen = &c->skel->bss->gen,
		.inflight_fd = bpf_map__fd(c->skel->maps.inflight),
		.ncpus = c->ncpus,
	};
	int old = map_generation__flip(&mg, &c->drain_wait_timeouts);
	struct bpf_map *m = old ? c->skel->maps.offcpu1 : c->skel->maps.offcpu0;
	struct bpf_map *sm = old ? c->skel->maps.sched_stacks1 : c->skel->maps.sched_stacks0;
	int fd = bpf_map__fd(m), sfd = bpf_map__fd(sm);
	struct strata_stack *u = malloc(sizeof(*u)), *kst = malloc(sizeof(*kst));
	struct strata_offcpu_key *keys = NULL;
	int64_t nkeys = 0;
	int err = old < 0 ? old : 0, n = 0;

	if (!err && (!u || !kst))
		err = -ENOMEM;
	if (!err) {
		nkeys = map_drain__keys(fd, sizeof(*keys), bpf_map__max_entries(m), (void **)&keys);
		err = nkeys < 0 ? (int)nkeys : 0;
	}
	for (int64_t i = 0; !err && i < nkeys; i++) {
		struct strata_offcpu_val v;

		if (bpf_map_lookup_elem(fd, &keys[i], &v))
			continue;
		struct sched_offcpu o = {
			.key = &keys[i],
			.ns = v.ns,
			.count = v.count,
			.user = (const uint64_t *)u->ips, /* __u64: same width */
			.kern = (const uint64_t *)kst->ips,
			.n_user = read_stack(c, sfd, keys[i].user_stack, u),
			.n_kern = read_stack(c, sfd, keys[i].kern_stack, kst),
		};
		if ((err = fn(ctx, &o)))
			break;
		n++;
	}
	/* Cleared whatever the consumer said: nothing is handed out twice.
	 * The stacks go with the keys that name them; a block that ends
	 * later stores its stacks again, from the thread's storage. */
	if (nkeys > 0) {
		int derr = map_drain__delete_keys(fd, keys, sizeof(*keys), (uint32_t)nkeys);

		if (!err)
			err = derr;
	}
	if (old >= 0) {
		int cerr = map_drain__clear(sfd, sizeof(uint64_t), bpf_map__max_entries(sm));

		if (cerr < 0 && !err)
			err = cerr;
	}
	free(keys);
	free(u);
	free(kst);
	return err ? err : n;
}

uint64_t sched_collector__drain_wait_timeouts(const struct sched_collector *c)
{
	return c->drain_wait_timeouts;
}

uint64_t sched_collector__stacks_missing(const struct sched_collector *c)
{
	return c->stacks_missing;
}

int sched_collector__foreign(struct sched_collector *c, bool targets, sched_foreign_fn fn,
			     void *ctx)
{
	int fd = bpf_map__fd(targets ? c->skel->maps.target_cpu : c->skel->maps.foreign), n = 0;
	struct strata_foreign_key k, next;
	struct strata_foreign_val v;
	void *prev = NULL;

	while (!bpf_map_get_next_key(fd, prev, &next)) {
		k = next;
		prev = &k;
		if (bpf_map_lookup_elem(fd, &k, &v))
			continue;
		int err = fn(ctx, &k, &v);
		if (err)
			return err;
		n++;
	}
	return n;
}

int sched_collector__foreign_forget(struct sched_collector *c, bool targets,
				    const struct strata_foreign_key *k)
{
	int fd = bpf_map__fd(targets ? c->skel->maps.target_cpu : c->skel->maps.foreign);

	return bpf_map_delete_elem(fd, k) ? -errno : 0;
}

int sched_collector__irq(struct sched_collector *c, sched_irq_fn fn, void *ctx)
{
	struct strata_irq_time *t = calloc((size_t)c->ncpus, sizeof(*t));
	uint32_t zero = 0;
	int err = 0;

	if (!t)
		return -ENOMEM;
	if (bpf_map_lookup_elem(bpf_map__fd(c->skel->maps.irq_time), &zero, t)) {
		err = -errno;
		goto out;
	}
	for (int cpu = 0; cpu < c->ncpus && !err; cpu++) {
		for (uint32_t v = 0; v < STRATA_SOFTIRQS && !err; v++)
			if (t[cpu].softirq_ns[v])
				err = fn(ctx, (uint32_t)cpu, true, v, t[cpu].softirq_ns[v]);
		for (uint32_t v = 0; v < STRATA_HARDIRQS && !err; v++)
			if (t[cpu].hardirq_ns[v])
				err = fn(ctx, (uint32_t)cpu, false, v, t[cpu].hardirq_ns[v]);
	}
out:
	free(t);
	return err;
}

void sched_collector__counters(const struct sched_collector *c, uint64_t *out)
{
	uint64_t vals[c->ncpus];

	for (uint32_t i = 0; i < STRATA_SCHED_CNT_MAX; i++) {
		out[i] = 0;
		if (bpf_map_lookup_elem(bpf_map__fd(c->skel->maps.sched_counters), &i, vals))
			continue;
		for (int cpu = 0; cpu < c->ncpus; cpu++)
			out[i] += vals[cpu];
	}
}

const struct sched_bitmaps *sched_collector__bitmaps(const struct sched_collector *c)
{
	return c->bits.auto_words ? &c->bits : NULL;
}
