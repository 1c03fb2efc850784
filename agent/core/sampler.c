// SPDX-License-Identifier: Apache-2.0
#include "agent/core/sampler.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <stdio.h>
#include <unistd.h>

#include "agent/core/map_drain.h"
#include "lib/log.h"
#include "profile.skel.h"

struct sampler {
	struct profile_bpf *skel;
	struct bpf_link **links; /* one per CPU */
	int *pmu_fds;
	int ncpus; /* possible CPUs: index space of links/pmu_fds */
	int ncpus_online;
	struct ring_buffer *rb;
	sampler_event_fn on_event;
	void *event_ctx;
	int cgroup_fd;
	uint32_t freq_hz;
	uint64_t drains, drain_wait_timeouts, stacks_missing, samples_dropped;
	uint64_t events_malformed;
	/* deep capture: the second perf event (-1 / NULL when none) */
	struct bpf_link **clinks;
	int *cfds;
	uint32_t capture_hz;
	/* the generation to drain may hold timed samples: a capture ran in it
	 * (a drain walks the 65,536-entry timed maps only then) */
	bool timed_pending;
	uint64_t timed_dropped;
};

static void capture_detach(struct sampler *s);

static int ring_event(void *ctx, void *data, size_t len)
{
	struct sampler *s = ctx;

	if (len < sizeof(struct strata_proc_event)) {
		s->events_malformed++; /* ignored rather than abort the poll */
		return 0;
	}
	return s->on_event ? s->on_event(s->event_ctx, data) : 0;
}

struct sampler *sampler__new(const struct sampler_opts *opts, sampler_event_fn on_event,
			     void *event_ctx)
{
	struct kernel_features kf;
	struct sampler *s;
	int err;

	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->cgroup_fd = -1;
	s->on_event = on_event;
	s->event_ctx = event_ctx;
	s->freq_hz = opts->freq_hz ? opts->freq_hz : 49;

	s->ncpus = libbpf_num_possible_cpus();
	if (s->ncpus <= 0) {
		err = s->ncpus ? s->ncpus : -EINVAL;
		pr_err("sampler: cannot count possible CPUs: %s", strerror(-err));
		goto err_out;
	}
	s->links = calloc(s->ncpus, sizeof(*s->links));
	s->pmu_fds = malloc(s->ncpus * sizeof(*s->pmu_fds));
	s->clinks = calloc(s->ncpus, sizeof(*s->clinks));
	s->cfds = malloc(s->ncpus * sizeof(*s->cfds));
	if (!s->links || !s->pmu_fds || !s->clinks || !s->cfds) {
		err = -ENOMEM;
		goto err_out;
	}
	for (int i = 0; i < s->ncpus; i++)
		s->pmu_fds[i] = s->cfds[i] = -1;

	s->skel = profile_bpf__open();
	if (!s->skel) {
		err = -errno;
		pr_err("sampler: cannot open BPF object: %s", strerror(-err));
		goto err_out;
	}
	s->skel->rodata->filter_mode = opts->filter;
	s->skel->rodata->want_user = !opts->no_user;
	s->skel->rodata->want_kernel = !opts->no_kernel;
	s->skel->rodata->debug = opts->debug_bpf;
	s->skel->rodata->want_hybrid = opts->hybrid;
	s->skel->rodata->want_python = !opts->no_python && !opts->no_user;
	s->skel->rodata->page_shift = (uint32_t)__builtin_ctzl((unsigned long)getpagesize());
	if (opts->max_counts) {
		bpf_map__set_max_entries(s->skel->maps.counts0, opts->max_counts);
		bpf_map__set_max_entries(s->skel->maps.counts1, opts->max_counts);
	}
	if (opts->max_unwind_rows)
		bpf_map__set_max_entries(s->skel->maps.unwind_rows, opts->max_unwind_rows);
	if (opts->max_stacks) {
		bpf_map__set_max_entries(s->skel->maps.stacks0, opts->max_stacks);
		bpf_map__set_max_entries(s->skel->maps.stacks1, opts->max_stacks);
		bpf_map__set_max_entries(s->skel->maps.py_stacks0, opts->max_stacks);
		bpf_map__set_max_entries(s->skel->maps.py_stacks1, opts->max_stacks);
	}

	/* One exit program of four: the hook that still sees the mm, with the
	 * VMA walk where the kernel has the iterator (features.h). */
	{
		struct bpf_program *exits[2][2] = {
			{ s->skel->progs.on_exit, s->skel->progs.on_exit_kept },
			{ s->skel->progs.on_exit_early, s->skel->progs.on_exit_early_kept },
		};
		bool early, vmas;

		if (!opts->features)
			kernel_features__probe(&kf);
		kernel_features__exit_prog(opts->features ?: &kf, &early, &vmas);
		for (int e = 0; e < 2; e++)
			for (int k = 0; k < 2; k++)
				bpf_program__set_autoload(exits[e][k], e == early && k == !vmas);
	}
	/* attached apart (sampler__start): the trigger is not worth failing for */
	bpf_program__set_autoattach(s->skel->progs.on_oom_victim, false);
	err = profile_bpf__load(s->skel);
	if (err) {
		pr_err("sampler: cannot load BPF programs: %s (run with -v for the verifier log)",
		       strerror(-err));
		goto err_out;
	}

	if (opts->filter == STRATA_FILTER_CGROUP) {
		uint32_t zero = 0;

		s->cgroup_fd = open(opts->cgroup, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (s->cgroup_fd < 0) {
			err = -errno;
			pr_err("sampler: cgroup %s: %s", opts->cgroup, strerror(errno));
			goto err_out;
		}
		if (bpf_map_update_elem(bpf_map__fd(s->skel->maps.cgroup_map), &zero, &s->cgroup_fd,
					BPF_ANY)) {
			err = -errno;
			pr_err("sampler: cgroup %s is not a cgroup v2 directory: %s", opts->cgroup,
			       strerror(errno));
			goto err_out;
		}
	}

	s->rb = ring_buffer__new(bpf_map__fd(s->skel->maps.events), ring_event, s, NULL);
	if (!s->rb) {
		err = -errno;
		pr_err("sampler: cannot create ring buffer: %s", strerror(-err));
		goto err_out;
	}
	return s;

err_out:
	sampler__free(s);
	errno = -err;
	return NULL;
}

void sampler__free(struct sampler *s)
{
	if (!s)
		return;
	if (s->clinks && s->cfds)
		capture_detach(s);
	if (s->links)
		for (int i = 0; i < s->ncpus; i++)
			bpf_link__destroy(s->links[i]);
	if (s->pmu_fds)
		for (int i = 0; i < s->ncpus; i++)
			if (s->pmu_fds[i] >= 0)
				close(s->pmu_fds[i]);
	ring_buffer__free(s->rb);
	profile_bpf__destroy(s->skel);
	if (s->cgroup_fd >= 0)
		close(s->cgroup_fd);
	free(s->links);
	free(s->pmu_fds);
	free(s->clinks);
	free(s->cfds);
	free(s);
}

int sampler__add_target(struct sampler *s, uint32_t tgid)
{
	uint32_t one = 1;

	if (bpf_map_update_elem(bpf_map__fd(s->skel->maps.targets), &tgid, &one, BPF_ANY))
		return -errno;
	return 0;
}

static int open_cpu_clock(int cpu, uint32_t freq_hz)
{
	struct perf_event_attr attr = {
		.size = sizeof(attr),
		.type = PERF_TYPE_SOFTWARE,
		.config = PERF_COUNT_SW_CPU_CLOCK,
		/* cpu-clock counts nanoseconds: a fixed period gives exactly
		 * freq_hz samples per busy second, so counts scale to time. */
		.sample_period = 1000000000ULL / freq_hz,
	};
	int fd = syscall(__NR_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

/*
 * Marks online CPUs from a sysfs list ("0-3,5,7-8") into online[0..n).
 * Returns 0 or -errno.
 */
static int read_online_cpus(bool *online, int n)
{
	char buf[4096], *p = buf, *end;
	FILE *f = fopen("/sys/devices/system/cpu/online", "re");
	int err = 0;

	if (!f)
		return -errno;
	if (!fgets(buf, sizeof(buf), f))
		err = -EIO;
	fclose(f);
	while (!err && *p && *p != '\n') {
		long lo = strtol(p, &end, 10), hi = lo;

		if (end == p)
			return -EINVAL;
		if (*end == '-') {
			p = end + 1;
			hi = strtol(p, &end, 10);
			if (end == p || hi < lo)
				return -EINVAL;
		}
		for (long c = lo; c <= hi && c < n; c++)
			online[c] = true;
		p = *end == ',' ? end + 1 : end;
	}
	return err;
}

/*
 * The OOM killer's choice (oom:mark_victim: PROC_EV_OOM_KILL), the
 * oom_kill capture's trigger.  A kernel without the tracepoint (or without
 * tracefs mounted) loses that trigger alone: said once, then on without.
 */
static void attach_oom_victim(struct sampler *s)
{
	struct bpf_link *l = bpf_program__attach(s->skel->progs.on_oom_victim);

	if (!l) {
		pr_info("sampler: no oom:mark_victim tracepoint (%s): processes the OOM killer "
			"ends start no capture",
			strerror(errno));
		return;
	}
	s->skel->links.on_oom_victim = l; /* destroyed with the skeleton */
}

int sampler__start(struct sampler *s)
{
	bool online[s->ncpus];
	int err;

	/* before the first CPU's event is on: what it writes is drained even
	 * if a later CPU fails and the capture is undone */
	s->timed_pending = true;
	memset(online, 0, sizeof(online));
	err = read_online_cpus(online, s->ncpus);
	if (err) {
		pr_err("sampler: cannot read online CPUs: %s", strerror(-err));
		return err;
	}
	for (int cpu = 0; cpu < s->ncpus; cpu++) {
		if (!online[cpu])
			continue;
		int fd = open_cpu_clock(cpu, s->freq_hz);
		if (fd < 0) {
			err = fd;
			pr_err("sampler: perf_event_open(cpu-clock, cpu %d): %s", cpu,
			       strerror(-err));
			return err;
		}
		s->pmu_fds[cpu] = fd;
		s->links[cpu] = bpf_program__attach_perf_event(s->skel->progs.profile_sample, fd);
		if (!s->links[cpu]) {
			err = -errno;
			pr_err("sampler: attach to cpu %d: %s", cpu, strerror(-err));
			return err;
		}
		s->ncpus_online++;
	}
	err = profile_bpf__attach(s->skel); /* the process tracepoints */
	if (err) {
		pr_err("sampler: attach tracepoints: %s", strerror(-err));
		return err;
	}
	attach_oom_victim(s);
	return 0;
}

int sampler__event_fd(const struct sampler *s)
{
	return ring_buffer__epoll_fd(s->rb);
}

int sampler__consume_events(struct sampler *s)
{
	return ring_buffer__consume(s->rb);
}

/* Looks a stack up in the drained generation's stack map. */
static const struct strata_stack *stack_lookup(struct sampler *s, int fd, uint64_t id,
					       struct strata_stack *buf)
{
	if (id == STRATA_STACK_NONE || id == STRATA_STACK_LOST)
		return NULL;
	if (bpf_map_lookup_elem(fd, &id, buf)) {
		s->stacks_missing++;
		return NULL;
	}
	if (buf->len > STRATA_MAX_STACK_DEPTH)
		buf->len = STRATA_MAX_STACK_DEPTH;
	return buf;
}

/* Looks a Python stack up in the drained generation's py_stacks map. */
static const struct strata_py_stack *py_stack_lookup(struct sampler *s, int fd, uint64_t id,
						     struct strata_py_stack *buf)
{
	if (id == STRATA_STACK_NONE || id == STRATA_STACK_LOST)
		return NULL;
	if (bpf_map_lookup_elem(fd, &id, buf)) {
		s->stacks_missing++;
		return NULL;
	}
	if (buf->len > STRATA_PY_MAX_DEPTH)
		buf->len = STRATA_PY_MAX_DEPTH;
	return buf;
}

/* Python support: a stack of generation gen, while it is live. */
int sampler__py_stack(struct sampler *s, uint32_t gen, uint64_t id, struct strata_py_stack *buf)
{
	struct bpf_map *m = gen & 1 ? s->skel->maps.py_stacks1 : s->skel->maps.py_stacks0;

	if (bpf_map_lookup_elem(bpf_map__fd(m), &id, buf))
		return -errno;
	if (buf->len > STRATA_PY_MAX_DEPTH)
		buf->len = STRATA_PY_MAX_DEPTH;
	return 0;
}

/* Scratch for one drain's stack lookups. */
struct drain_bufs {
	struct strata_stack *u, *k;
	struct strata_py_stack *py;
};

/*
 * Hands out every entry of one quiet count map (keys of key_sz bytes that
 * start with a struct strata_stack_key; timed: a struct strata_timed_key)
 * with its stacks, then deletes them.  Returns how many were handed out
 * or -errno.
 */
static int drain_counts(struct sampler *s, struct bpf_map *cmap, size_t key_sz, bool timed, int sfd,
			int pfd, struct drain_bufs *b, sampler_sample_fn fn, void *ctx)
{
	int cfd = bpf_map__fd(cmap), n = 0, err;
	struct strata_stack_count val;
	char *keys = NULL, comm[STRATA_COMM_LEN + 1];
	/* Keys first, then values: the generation is quiet, so the key set is
	 * final, and collecting it avoids restarting iteration per delete. */
	int64_t nkeys = map_drain__keys(cfd, key_sz, bpf_map__max_entries(cmap), (void **)&keys);

	if (nkeys < 0) {
		free(keys);
		return (int)nkeys;
	}
	for (int64_t i = 0; i < nkeys; i++) {
		const struct strata_stack_key *k = (const void *)(keys + i * key_sz);

		if (bpf_map_lookup_elem(cfd, k, &val))
			continue;
		memcpy(comm, val.comm, STRATA_COMM_LEN);
		comm[STRATA_COMM_LEN] = '\0';
		struct sampler_sample smp = {
			.key = k,
			.count = val.count,
			.comm = comm,
			.user = stack_lookup(s, sfd, k->user_stack, b->u),
			.kern = stack_lookup(s, sfd, k->kern_stack, b->k),
			.py = py_stack_lookup(s, pfd, k->py_stack, b->py),
			.time_ns = timed ? ((const struct strata_timed_key *)k)->time_ns : 0,
		};
		/* A sample the consumer cannot take (no memory) is dropped
		 * and counted; the generation is cleared regardless, so no
		 * sample is ever handed out twice. */
		if (fn(ctx, &smp))
			*(timed ? &s->timed_dropped : &s->samples_dropped) += val.count;
		else
			n++;
	}
	err = map_drain__delete_keys(cfd, keys, key_sz, (uint32_t)nkeys);
	free(keys);
	return err ? err : n;
}

static int drop_timed(void *ctx, const struct sampler_sample *smp)
{
	return 0;
}

int sampler__drain(struct sampler *s, sampler_sample_fn fn, sampler_sample_fn timed_fn, void *ctx)
{
	const struct map_generation mg = {
		.gen = &s->skel->bss->gen,
		.inflight_fd = bpf_map__fd(s->skel->maps.inflight),
		.ncpus = s->ncpus,
	};
	int old = map_generation__flip(&mg, &s->drain_wait_timeouts);
	struct bpf_map *pmap, *smap;
	struct drain_bufs b = { 0 };
	int err = 0, n = 0, q, sfd, pfd;

	if (old < 0)
		return old;
	pmap = old ? s->skel->maps.py_stacks1 : s->skel->maps.py_stacks0;
	smap = old ? s->skel->maps.stacks1 : s->skel->maps.stacks0;
	sfd = bpf_map__fd(smap);
	pfd = bpf_map__fd(pmap);
	b.u = malloc(sizeof(*b.u));
	b.k = malloc(sizeof(*b.k));
	b.py = malloc(sizeof(*b.py));
	if (!b.u || !b.k || !b.py) {
		err = -ENOMEM;
		goto out;
	}
	n = drain_counts(s, old ? s->skel->maps.counts1 : s->skel->maps.counts0,
			 sizeof(struct strata_stack_key), false, sfd, pfd, &b, fn, ctx);
	if (n < 0)
		err = n;
	/* deep capture: the timed samples, before their stacks are cleared */
	if (s->timed_pending) {
		q = drain_counts(s, old ? s->skel->maps.timed1 : s->skel->maps.timed0,
				 sizeof(struct strata_timed_key), true, sfd, pfd, &b,
				 timed_fn ? timed_fn : drop_timed, ctx);
		if (!err && q < 0)
			err = q;
	}
	s->timed_pending = s->capture_hz != 0; /* it writes the next generation */
	q = map_drain__clear(sfd, sizeof(uint64_t), bpf_map__max_entries(smap));
	if (!err)
		err = q;
	q = map_drain__clear(pfd, sizeof(uint64_t), bpf_map__max_entries(pmap));
	if (!err)
		err = q;
	s->drains++;
out:
	free(b.py);
	free(b.u);
	free(b.k);
	return err ? err : n;
}

/* ---- deep capture: the second perf event ------------------------------------------------ */

static void capture_detach(struct sampler *s)
{
	for (int i = 0; i < s->ncpus; i++) {
		bpf_link__destroy(s->clinks[i]);
		s->clinks[i] = NULL;
		if (s->cfds[i] >= 0)
			close(s->cfds[i]);
		s->cfds[i] = -1;
	}
	s->capture_hz = 0;
}

int sampler__capture_freq(struct sampler *s, uint32_t freq_hz)
{
	bool online[s->ncpus];
	int err;

	if (freq_hz == s->capture_hz)
		return 0;
	capture_detach(s);
	if (!freq_hz)
		return 0;
	/* before the first CPU's event is on: what it writes is drained even
	 * if a later CPU fails and the capture is undone */
	s->timed_pending = true;
	memset(online, 0, sizeof(online));
	err = read_online_cpus(online, s->ncpus);
	for (int cpu = 0; !err && cpu < s->ncpus; cpu++) {
		if (!online[cpu])
			continue;
		s->cfds[cpu] = open_cpu_clock(cpu, freq_hz);
		if (s->cfds[cpu] < 0) {
			err = s->cfds[cpu];
			break;
		}
		s->clinks[cpu] =
			bpf_program__attach_perf_event(s->skel->progs.capture_sample, s->cfds[cpu]);
		if (!s->clinks[cpu])
			err = -errno;
	}
	if (err) {
		pr_warn("sampler: capture at %u Hz: %s", freq_hz, strerror(-err));
		capture_detach(s);
		return err;
	}
	s->capture_hz = freq_hz;
	s->timed_pending = true;
	return 0;
}

int sampler__capture_target(struct sampler *s, uint32_t tgid, bool on)
{
	int fd = bpf_map__fd(s->skel->maps.capture_tgids);
	uint32_t one = 1;

	if (on)
		return bpf_map_update_elem(fd, &tgid, &one, BPF_ANY) ? -errno : 0;
	return bpf_map_delete_elem(fd, &tgid) && errno != ENOENT ? -errno : 0;
}

void sampler__stats(const struct sampler *s, struct sampler_stats *st)
{
	uint64_t vals[s->ncpus];

	memset(st, 0, sizeof(*st));
	for (uint32_t c = 0; c < STRATA_CNT_MAX; c++) {
		if (bpf_map_lookup_elem(bpf_map__fd(s->skel->maps.counters), &c, vals))
			continue;
		for (int i = 0; i < s->ncpus; i++)
			st->counters[c] += vals[i];
	}
	st->drains = s->drains;
	st->drain_wait_timeouts = s->drain_wait_timeouts;
	st->stacks_missing = s->stacks_missing;
	st->samples_dropped = s->samples_dropped;
	st->events_malformed = s->events_malformed;
	st->timed_dropped = s->timed_dropped;
	st->capture_hz = s->capture_hz;
}

void sampler__filter_maps(const struct sampler *s, int *targets_fd, int *cgroup_map_fd)
{
	*targets_fd = bpf_map__fd(s->skel->maps.targets);
	*cgroup_map_fd = bpf_map__fd(s->skel->maps.cgroup_map);
}

void sampler__unwind_maps(const struct sampler *s, int *rows_fd, uint32_t *max_rows, int *procs_fd)
{
	*rows_fd = bpf_map__fd(s->skel->maps.unwind_rows);
	*max_rows = bpf_map__max_entries(s->skel->maps.unwind_rows);
	*procs_fd = bpf_map__fd(s->skel->maps.unwind_procs);
}

void sampler__unwind_counters(const struct sampler *s, uint64_t *out)
{
	uint64_t vals[s->ncpus];

	for (uint32_t e = 0; e < UNWIND_ERR_MAX; e++) {
		out[e] = 0;
		if (bpf_map_lookup_elem(bpf_map__fd(s->skel->maps.unwind_errors), &e, vals))
			continue;
		for (int i = 0; i < s->ncpus; i++)
			out[e] += vals[i];
	}
}

int sampler__py_procs_fd(const struct sampler *s)
{
	return bpf_map__fd(s->skel->maps.py_procs);
}

void sampler__py_counters(const struct sampler *s, uint64_t *out)
{
	uint64_t vals[s->ncpus];

	for (uint32_t e = 0; e < STRATA_PY_ERR_MAX; e++) {
		out[e] = 0;
		if (bpf_map_lookup_elem(bpf_map__fd(s->skel->maps.py_errors), &e, vals))
			continue;
		for (int i = 0; i < s->ncpus; i++)
			out[e] += vals[i];
	}
}
