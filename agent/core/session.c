// SPDX-License-Identifier: Apache-2.0
#include "agent/core/session.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "agent/core/features.h"
#include "agent/proc/modules.h"
#include "agent/proc/proc_stat.h"
#include "agent/proc/proc_tracker.h"
#include "agent/proc/proc_tree.h"
#include "agent/proc/unwind_loader.h"
#include "agent/python/python.h"
#include "agent/sched/sched_collector.h"
#include "agent/sched/sched_targets.h"
#include "lib/clock.h"
#include "lib/enum_names.h"
#include "lib/log.h"
#include "symbolize/symbolize.h"

#define SESSION_ADOPT_MAX 1024 /* descendants of a --pid target adopted at start */

struct session {
	struct kernel_features features; /* probed at start: the path of each */
	struct sampler *sampler;
	struct module_registry *mods;
	struct proc_tracker *procs;
	struct symbolizer *sym;
	struct ksyms *ksyms;
	struct unwind_loader *unwind;  /* NULL: frame pointers only */
	struct python *python;	       /* NULL: no Python frames (--no-python) */
	struct sched_collector *sched; /* NULL: scheduler layer off */
	struct sched_targets *targets; /* host-wide: its automatic targets */
	struct gpu *gpu;	       /* NULL: --no-gpu, or the layer could not load */
	struct session_sink sink;
	int epfd, sigfd;
	uint32_t freq_hz;
	uint32_t drain_ms;
	uint64_t next_drain_ms;	   /* CLOCK_MONOTONIC */
	uint64_t window_start_ns;  /* CLOCK_REALTIME */
	struct rlimit nofile_orig; /* for children: they run as without us */
	uint64_t events_failed;
	uint64_t oom_kills, oom_kills_other; /* of processes followed / not */
	bool targeted;		   /* STRATA_FILTER_TGIDS: BPF sends only the targets' kills */
	struct sampler_stats base; /* counters at the last window's end */
	/* deep capture: the processes raised now (sorted), what is raised */
	uint32_t *raised;
	size_t nraised;
	struct session_raise raise;
};

/* PROC_EV_PY_STACK: symbolize a Python stack's new code objects now. */
static void python_stack_seen(struct session *s, const struct strata_proc_event *e)
{
	struct strata_py_stack *st;

	if (!s->python)
		return;
	st = malloc(sizeof(*st));
	if (st && !sampler__py_stack(s->sampler, e->flags, e->start, st))
		python__prefetch(s->python, e->mm_id, st);
	free(st);
}

/* PROC_EV_OOM_KILL: the OOM killer chose e->tgid.  Host-wide BPF sends
 * every kill; the sink hears of the processes the session follows (a GPU
 * process, even one that exited this window, a training target, or with
 * --pid a target: BPF sent only theirs). */
static bool follows(struct session *s, const struct gpu_data *d, uint32_t tgid)
{
	return s->targeted || (d && gpu_data__proc(d, tgid)) ||
	       (s->targets && sched_targets__is(s->targets, tgid));
}

static void oom_killed(struct session *s, const struct strata_proc_event *in)
{
	const struct gpu_data *d = s->gpu ? gpu__data(s->gpu) : NULL;
	struct strata_proc_event ev = *in, *e = &ev;
	bool followed = follows(s, d, e->tgid);
	uint32_t tgid;

	/* the record names the thread the killer picked: the group leader,
	 * unless that one had dropped its memory already */
	if (!followed && (tgid = proc_stat__tgid("/proc", e->tgid)) && tgid != e->tgid) {
		e->tgid = tgid;
		followed = follows(s, d, tgid);
	}

	if (!followed) { /* another's process: no word at the default level */
		pr_debug("session: the OOM killer chose process %u, not followed", e->tgid);
		s->oom_kills_other++;
		return;
	}
	pr_info("session: the OOM killer chose process %u (%s, resident %llu KiB, "
		"memory cgroup %llu, invoked by process %llu)",
		e->tgid, e->comm[0] ? e->comm : "?", (unsigned long long)e->end,
		(unsigned long long)e->start, (unsigned long long)e->pgoff);
	s->oom_kills++;
	if (s->sink.oom_kill)
		s->sink.oom_kill(s->sink.ctx, d, e);
}

static int on_event(void *ctx, const struct strata_proc_event *e)
{
	struct session *s = ctx;

	if (e->type == PROC_EV_PY_STACK) {
		python_stack_seen(s, e);
		return 0;
	}
	if (e->type == PROC_EV_OOM_KILL) {
		oom_killed(s, e);
		return 0;
	}

	if (proc_tracker__on_event(s->procs, e))
		s->events_failed++;
	if (s->gpu)
		gpu__on_proc_event(s->gpu, e);
	return 0;
}

/* Symbolization keeps one fd per executable file: make room for them, and
 * remember the original limit for the commands we start. */
static void raise_nofile(struct rlimit *orig)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, orig))
		return;
	rl = *orig;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/*
 * BPF follows a target's children from the moment the target is in its
 * filter; the children forked before that (starting the agent takes
 * seconds on a loaded node, and a job does not wait for it) are found in
 * /proc and made targets too.  Twice: a child forked by one of them
 * before it was added is seen the second time, after that BPF follows.
 */
static void adopt_descendants(struct session *s, const struct session_opts *opts)
{
	uint32_t kids[SESSION_ADOPT_MAX];

	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < opts->npids; i++) {
			int more, n = proc_tree__descendants(opts->pids[i], kids, SESSION_ADOPT_MAX,
							     &more);

			if (more)
				pr_warn("session: pid %u: more than %d descendants: the first "
					"followed",
					opts->pids[i], SESSION_ADOPT_MAX);
			for (int k = 0; k < n; k++) {
				if (sampler__add_target(s->sampler, kids[k]))
					continue;
				if (s->gpu)
					gpu__watch(s->gpu, kids[k]);
			}
		}
	}
}

struct session *session__new(const struct session_opts *opts)
{
	/* the files are the profiled processes': read, never mapped; their
	 * heap copies are what the open modules cost, so fewer are kept */
	struct symbolizer_opts sopts = { .sz = sizeof(sopts),
					 .hostile_files = 1,
					 .max_modules = 16 };
	struct epoll_event ev = { .events = EPOLLIN };
	struct sampler_opts so;
	struct session *s;
	char why[256];
	sigset_t mask;
	int err;

	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->epfd = s->sigfd = -1;
	s->freq_hz = opts->sampler.freq_hz;
	s->drain_ms = opts->drain_ms ? opts->drain_ms : 1000;
	s->targeted = opts->sampler.filter == STRATA_FILTER_TGIDS;
	s->next_drain_ms = mono_ms() + s->drain_ms;
	raise_nofile(&s->nofile_orig);

	/* Blocked before anything slow, so a TERM during start-up is read from
	 * the signalfd and ends the session cleanly instead of killing it. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGCHLD);
	if (sigprocmask(SIG_BLOCK, &mask, NULL)) {
		err = -errno;
		goto err_out;
	}

	s->mods = modules__new(0);
	s->procs = s->mods ? proc_tracker__new(s->mods, 0) : NULL;
	s->sym = symbolizer__new(&sopts);
	if (!s->procs || !s->sym) {
		err = -ENOMEM;
		goto err_out;
	}
	s->ksyms = ksyms__load(NULL);
	if (!s->ksyms)
		pr_warn("session: /proc/kallsyms unreadable: kernel frames stay addresses");
	else if (ksyms__restricted(s->ksyms))
		pr_warn("session: /proc/kallsyms hides addresses (kptr_restrict): kernel frames "
			"stay addresses");
	s->window_start_ns = realtime_ns();

	/* Each kernel-dependent feature's path, chosen once (features.h). */
	kernel_features__probe(&s->features);
	kernel_features__log(&s->features);
	if (kernel_features__missing_required(&s->features, why, sizeof(why))) {
		pr_err("session: kernel %s lacks %s", s->features.release, why);
		err = -EOPNOTSUPP;
		goto err_out;
	}
	so = opts->sampler;
	so.features = &s->features;
	if (!s->features.have[KFEAT_BPF_LOOP] && (so.hybrid || !so.no_python)) {
		pr_warn("session: kernel %s has no bpf_loop (Linux 5.17): frame-pointer stacks "
			"only, no Python frames",
			s->features.release);
		so.hybrid = false;
		so.no_python = true;
	}
	s->sampler = sampler__new(&so, on_event, s);
	if (!s->sampler) {
		err = -errno;
		goto err_out;
	}
	if (so.hybrid) {
		int rows_fd, procs_fd;
		uint32_t max_rows;

		sampler__unwind_maps(s->sampler, &rows_fd, &max_rows, &procs_fd);
		s->unwind = unwind_loader__new(rows_fd, max_rows, procs_fd);
		if (!s->unwind) {
			err = -ENOMEM;
			goto err_out;
		}
	}
	if (!so.no_python && !so.no_user) {
		s->python = python__new(sampler__py_procs_fd(s->sampler), 0);
		if (!s->python) {
			err = -ENOMEM;
			goto err_out;
		}
	}
	/* The loaders, in the order they act (agent/proc/loaders.h); the GPU
	 * layer adds its own. */
	if (s->unwind) {
		struct proc_loader l;

		unwind_loader__loader(s->unwind, &l);
		proc_tracker__add_loader(s->procs, &l);
	}
	if (s->python) {
		struct proc_loader l;

		python__loader(s->python, &l);
		proc_tracker__add_loader(s->procs, &l);
	}
	if (opts->sched) {
		/* Host-wide, the layer follows the processes of training
		 * jobs only (agent/sched/sched_targets.h): every other
		 * switch leaves at the top of the programs. */
		struct sched_collector_opts so = {
			.sz = sizeof(so),
			.filter = opts->sampler.filter == STRATA_FILTER_NONE ? STRATA_FILTER_AUTO
									     : opts->sampler.filter,
			.test_layer_binary = opts->sched_test_layer_binary,
		};
		const struct sched_bitmaps *bits;

		sampler__filter_maps(s->sampler, &so.targets_fd, &so.cgroup_map_fd);
		s->sched = sched_collector__new(&so);
		if (!s->sched) {
			err = -errno;
			goto err_out;
		}
		bits = sched_collector__bitmaps(s->sched);
		if (bits && !(s->targets = sched_targets__new(bits, "/proc"))) {
			err = -ENOMEM;
			goto err_out;
		}
	}
	if (!opts->no_gpu) { /* GPU layer: after sched, whose API-layer map it marks */
		struct gpu_opts go = opts->gpu;

		go.filter = opts->sampler.filter;
		go.features = &s->features;
		sampler__filter_maps(s->sampler, &go.targets_fd, &go.cgroup_map_fd);
		go.api_layers_fd = s->sched ? sched_collector__api_layers_fd(s->sched) : -1;
		go.python = s->python;
		go.py_procs_fd = s->python ? sampler__py_procs_fd(s->sampler) : -1;
		if (s->unwind) { /* the call-site stacks walk the same tables */
			uint32_t max_rows;

			sampler__unwind_maps(s->sampler, &go.unwind_rows_fd, &max_rows,
					     &go.unwind_procs_fd);
		}
		s->gpu = gpu__new(&go, s->mods, s->procs, s->sym, s->ksyms);
		if (!s->gpu)
			pr_warn("session: GPU layer off: %s", strerror(errno));
	}
	for (size_t i = 0; i < opts->npids; i++) {
		err = sampler__add_target(s->sampler, opts->pids[i]);
		if (err)
			goto err_out;
		if (s->gpu)
			gpu__watch(s->gpu, opts->pids[i]);
	}
	adopt_descendants(s, opts);

	s->sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (s->sigfd < 0 || s->epfd < 0) {
		err = -errno;
		goto err_out;
	}
	ev.data.fd = s->sigfd;
	if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->sigfd, &ev)) {
		err = -errno;
		goto err_out;
	}
	ev.data.fd = sampler__event_fd(s->sampler);
	if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, ev.data.fd, &ev)) {
		err = -errno;
		goto err_out;
	}
	if (s->gpu) {
		ev.data.fd = gpu__event_fd(s->gpu);
		if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, ev.data.fd, &ev)) {
			err = -errno;
			goto err_out;
		}
	}
	/* large files' unwind tables built off the loop (consume_events) */
	if (s->unwind) {
		ev.data.fd = unwind_loader__async(s->unwind, UNWIND_ASYNC_MIN_BYTES);
		if (ev.data.fd < 0 || epoll_ctl(s->epfd, EPOLL_CTL_ADD, ev.data.fd, &ev))
			pr_warn("session: unwind tables built on the loop: %s",
				strerror(ev.data.fd < 0 ? -ev.data.fd : errno));
	}
	return s;

err_out:
	session__free(s);
	errno = -err;
	return NULL;
}

void session__free(struct session *s)
{
	if (!s)
		return;
	gpu__free(s->gpu); /* resolves through the tracker: goes first */
	/* The tracker's hooks feed the loader: free the tracker first. */
	proc_tracker__free(s->procs);
	unwind_loader__free(s->unwind);
	python__free(s->python);
	sched_targets__free(s->targets);
	sched_collector__free(s->sched);
	sampler__free(s->sampler);
	ksyms__free(s->ksyms);
	symbolizer__free(s->sym);
	modules__free(s->mods);
	if (s->epfd >= 0)
		close(s->epfd);
	if (s->sigfd >= 0)
		close(s->sigfd);
	free(s->raised);
	free(s);
}

int session__add_target(struct session *s, uint32_t tgid)
{
	int err = sampler__add_target(s->sampler, tgid);

	if (!err && s->gpu)
		gpu__watch(s->gpu, tgid);
	return err;
}

static void labelled_target(void *ctx, uint32_t tgid);

int session__start(struct session *s)
{
	int err = sampler__start(s->sampler);

	if (!err && s->sched)
		err = sched_collector__start(s->sched);
	if (!err && s->targets) /* jobs that run already are targets at once */
		sched_targets__scan(s->targets, labelled_target, s);
	return err;
}

static int drain(struct session *s, struct session_window *w);

/*
 * The BPF side's events: the maps of every process in the batch are read
 * first, the loaders' slow part after, one process at a time, with the
 * events that came meanwhile taken between two; the unwind tables of large
 * files are built on the builder thread, and those it has finished are
 * installed here.  Attached one by one as they came, with every table built
 * on the loop (a large binary's: up to seconds on a loaded node), a
 * short-lived process (or one that started before the agent) queued behind
 * a few large binaries was gone before its maps were read, and its samples
 * stayed unsymbolized.
 */
static void consume_events(struct session *s)
{
	proc_tracker__defer_attach(s->procs, 1);
	sampler__consume_events(s->sampler);
	while (proc_tracker__attach_next(s->procs))
		sampler__consume_events(s->sampler);
	proc_tracker__defer_attach(s->procs, 0);
	if (s->unwind)
		unwind_loader__collect(s->unwind);
}

int session__wait(struct session *s, int timeout_ms, struct session_signal *sig)
{
	struct epoll_event evs[3];
	uint64_t now = mono_ms();
	int n, ret = SESSION_TIMEOUT;

	if (s->gpu) {
		int gpu_ms = gpu__poll(s->gpu); /* discovery and duty cycle deadlines */

		if (gpu_ms < timeout_ms)
			timeout_ms = gpu_ms;
	}
	if (s->next_drain_ms > now && s->next_drain_ms - now < (uint64_t)timeout_ms)
		timeout_ms = (int)(s->next_drain_ms - now);
	else if (s->next_drain_ms <= now)
		timeout_ms = 0;
	n = epoll_wait(s->epfd, evs, 3, timeout_ms);
	if (n < 0 && errno != EINTR)
		return -errno;
	consume_events(s);
	for (int i = 0; i < n; i++) {
		struct signalfd_siginfo si;

		if (evs[i].data.fd != s->sigfd)
			continue;
		if (read(s->sigfd, &si, sizeof(si)) == sizeof(si)) {
			sig->signo = (int)si.ssi_signo;
			sig->from = (pid_t)si.ssi_pid;
			ret = SESSION_SIGNAL;
		}
	}
	if (mono_ms() >= s->next_drain_ms) {
		drain(s, NULL);
		s->next_drain_ms = mono_ms() + s->drain_ms;
	}
	return ret;
}

void session__sources(const struct session *s, struct session_sources *out)
{
	*out = (struct session_sources){
		.procs = s->procs,
		.mods = s->mods,
		.sym = s->sym,
		.ksyms = s->ksyms,
		.unwind = s->unwind,
		.python = s->python,
		.freq_hz = s->freq_hz,
		.gpu = s->gpu != NULL,
		.sched = s->sched != NULL,
		.nofile_orig = &s->nofile_orig,
		.features = &s->features,
	};
}

void session__set_sink(struct session *s, const struct session_sink *sink)
{
	s->sink = *sink;
}

static int drop_sample(void *ctx, const struct sampler_sample *smp)
{
	return 0;
}

/* The sampler's losses since the last window's end. */
static void window_drops(struct session *s, struct profile_drops *d)
{
	struct sampler_stats st;
	const uint64_t *c = st.counters, *b = s->base.counters;

	sampler__stats(s->sampler, &st);
	d->map_full = c[STRATA_CNT_COUNTS_FULL] - b[STRATA_CNT_COUNTS_FULL] + st.samples_dropped -
		      s->base.samples_dropped;
	d->stack_lost = c[STRATA_CNT_STACKS_FULL] - b[STRATA_CNT_STACKS_FULL] +
			c[STRATA_CNT_USER_STACK_ERR] - b[STRATA_CNT_USER_STACK_ERR] +
			c[STRATA_CNT_KERN_STACK_ERR] - b[STRATA_CNT_KERN_STACK_ERR] +
			st.stacks_missing - s->base.stacks_missing;
	d->proc_unknown = 0;
	/* Lost process events, truncated exit walks and children that could
	 * not become targets: attribution, not sample, losses. */
	d->other = c[STRATA_CNT_EVENTS_LOST] - b[STRATA_CNT_EVENTS_LOST] +
		   c[STRATA_CNT_VMAS_TRUNCATED] - b[STRATA_CNT_VMAS_TRUNCATED] +
		   c[STRATA_CNT_TARGETS_FULL] - b[STRATA_CNT_TARGETS_FULL];
	s->base = st;
}

/* The window's end, inside the drain bracket: the sink's window members. */
static int end_window(struct session *s, struct session_window *w)
{
	const struct session_sink *k = &s->sink;
	int err = 0;

	w->start_ns = s->window_start_ns;
	w->end_ns = realtime_ns();
	window_drops(s, &w->drops);
	s->window_start_ns = w->end_ns;
	if (s->gpu && k->gpu_window)
		err = k->gpu_window(k->ctx, s->gpu, w);
	if (!err && s->sched && k->sched_window)
		err = k->sched_window(k->ctx, s->sched, w);
	return err;
}

/* A process with training labels: the GPU layer looks at its mappings
 * now, so its probes are attached before it initialises NCCL (host-wide,
 * nothing else makes a process that has not been sampled yet a GPU
 * candidate). */
static void labelled_target(void *ctx, uint32_t tgid)
{
	struct session *s = ctx;

	if (s->gpu)
		gpu__watch(s->gpu, tgid);
}

/* Host-wide scheduler layer: the GPU layer's processes and those with
 * training labels become its targets. */
static void mark_targets(struct session *s)
{
	if (s->gpu) {
		const struct gpu_data *d = gpu__data(s->gpu);

		for (size_t i = 0; i < d->nprocs; i++)
			if (!d->procs[i].exited)
				sched_targets__mark(s->targets, d->procs[i].tgid, true);
	}
	sched_targets__tick(s->targets, labelled_target, s);
}

/*
 * The one drain of every layer, in the one order (agent/core/sink.h), with
 * the window's end when w is set.  Returns the window members' first error.
 */
static int drain(struct session *s, struct session_window *w)
{
	const struct session_sink *k = &s->sink;
	int n, err = 0;

	/* Exit events first: the instances they finish are still needed by
	 * the samples drained now, and are freed right after. */
	consume_events(s);
	if (s->unwind)
		unwind_loader__tick(s->unwind);
	n = sampler__drain(s->sampler, k->sample ? k->sample : drop_sample, k->timed_sample,
			   k->ctx);
	if (s->gpu) {
		gpu__drain(s->gpu); /* before end_drain: exited processes still resolve */
		if (k->gpu_drained)
			k->gpu_drained(k->ctx, s->gpu, gpu__data(s->gpu));
	}
	if (s->sched && k->sched_drained) {
		int e = k->sched_drained(k->ctx, s->sched);

		if (e < 0)
			pr_warn("session: off-CPU drain: %s", strerror(-e));
	}
	if (s->unwind)
		unwind_loader__flush(s->unwind);
	if (s->sched) /* exited threads out of the BPF map */
		sched_collector__retire(s->sched, mono_ns(), SCHED_RETIRE_GRACE_NS);
	if (s->targets)
		mark_targets(s);
	if (w)
		err = end_window(s, w);
	proc_tracker__end_drain(s->procs);
	if (n < 0)
		pr_warn("session: drain: %s", strerror(-n));
	return err;
}

int session__end_window(struct session *s, struct session_window *w)
{
	return drain(s, w);
}

/* ---- deep capture ---------------------------------------------------------------- */

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static bool has(const uint32_t *v, size_t n, uint32_t x)
{
	return n && bsearch(&x, v, n, sizeof(*v), cmp_u32);
}

/* One process in or out of what a capture raises. */
static int raise_one(struct session *s, uint32_t tgid, bool on, bool gpu_calls, bool offcpu)
{
	int err = sampler__capture_target(s->sampler, tgid, on);

	if (s->gpu) {
		int e = gpu__trace_process(s->gpu, tgid, on && gpu_calls);

		if (!err)
			err = e;
	}
	/* off-CPU stacks: the scheduler layer follows the process (host-wide
	 * it follows training processes only) */
	if (on && offcpu && s->targets)
		sched_targets__mark(s->targets, tgid, false);
	return err;
}

int session__raise(struct session *s, const struct session_raise *r)
{
	uint32_t *next = NULL;
	size_t n = r->ntgids < SESSION_RAISE_MAX ? r->ntgids : SESSION_RAISE_MAX;
	int err = 0, e;

	if (n) {
		next = malloc(n * sizeof(*next));
		if (!next)
			return -ENOMEM;
		memcpy(next, r->tgids, n * sizeof(*next));
		qsort(next, n, sizeof(*next), cmp_u32);
	}
	for (size_t i = 0; i < s->nraised; i++)
		if (!has(next, n, s->raised[i]))
			raise_one(s, s->raised[i], false, false, false);
	for (size_t i = 0; i < n; i++) {
		e = raise_one(s, next[i], true, r->gpu_calls, r->offcpu);
		if (!err && e != -ESRCH)
			err = e;
	}
	free(s->raised);
	s->raised = next;
	s->nraised = n;
	e = sampler__capture_freq(s->sampler, n ? r->freq_hz : 0);
	if (!err)
		err = e;
	if (s->gpu)
		gpu__hold_probes(s->gpu, n && r->gpu_calls);
	s->raise = *r;
	s->raise.tgids = NULL;
	return err;
}

void session__candidates(struct session *s, session_proc_fn fn, void *ctx)
{
	if (s->gpu) {
		const struct gpu_data *d = gpu__data(s->gpu);

		for (size_t i = 0; i < d->nprocs; i++)
			if (!d->procs[i].exited)
				fn(ctx, d->procs[i].tgid);
	}
	if (s->targets)
		sched_targets__each(s->targets, fn, ctx);
}

void session__report_gpu(struct session *s)
{
	if (s->gpu)
		gpu__report(s->gpu);
}

void session__report_sched(struct session *s)
{
	if (s->sched) { /* scheduler layer */
		uint64_t sc[STRATA_SCHED_CNT_MAX];
		struct sched_retire_stats rs;

		sched_collector__counters(s->sched, sc);
		fprintf(stderr, "  sched:");
		for (int i = 0; i < STRATA_SCHED_CNT_MAX; i++)
			fprintf(stderr, " %s=%llu", strata_sched_counter_name(i),
				(unsigned long long)sc[i]);
		sched_collector__retire_stats(s->sched, &rs);
		fprintf(stderr, " retired=%llu retired_dropped=%llu stacks_missing=%llu\n",
			(unsigned long long)rs.retired, (unsigned long long)rs.dropped,
			(unsigned long long)sched_collector__stacks_missing(s->sched));
		if (s->targets) {
			struct sched_targets_stats ts;

			sched_targets__stats(s->targets, &ts);
			fprintf(stderr,
				"  sched targets: scans=%llu examined=%llu by_labels=%llu "
				"by_gpu=%llu unreadable=%llu out_of_range=%llu resets=%llu "
				"execs=%llu gone=%llu children=%llu kids_dropped=%llu\n",
				(unsigned long long)ts.scans, (unsigned long long)ts.examined,
				(unsigned long long)ts.by_labels, (unsigned long long)ts.by_gpu,
				(unsigned long long)ts.unreadable,
				(unsigned long long)ts.out_of_range, (unsigned long long)ts.resets,
				(unsigned long long)ts.execs, (unsigned long long)ts.gone,
				(unsigned long long)ts.children,
				(unsigned long long)ts.kids_dropped);
		}
	}
}

void session__report_counters(struct session *s)
{
	struct sampler_stats st;
	struct proc_tracker_stats pt;
	struct module_stats ms;
	struct symbolizer_stats ss;

	sampler__stats(s->sampler, &st);
	proc_tracker__stats(s->procs, &pt);
	modules__stats(s->mods, &ms);
	symbolizer__stats(s->sym, &ss);
	for (int i = 0; i < STRATA_CNT_MAX; i++)
		fprintf(stderr, "  bpf.%s=%llu\n", strata_sampler_counter_name(i),
			(unsigned long long)st.counters[i]);
	fprintf(stderr,
		"  drains=%llu drain_wait_timeouts=%llu stacks_missing=%llu samples_dropped=%llu "
		"events_malformed=%llu\n",
		(unsigned long long)st.drains, (unsigned long long)st.drain_wait_timeouts,
		(unsigned long long)st.stacks_missing, (unsigned long long)st.samples_dropped,
		(unsigned long long)st.events_malformed);
	fprintf(stderr,
		"  procs: instances=%llu found_dead=%llu refused=%llu maps_read=%llu failed=%llu "
		"refreshes=%llu refreshes_limited=%llu maps_dropped=%llu exit_vmas=%llu "
		"unlocated=%llu events_failed=%llu attach_deferred=%llu attach_queue_full=%llu "
		"oom_kills=%llu oom_kills_other=%llu\n",
		(unsigned long long)pt.instances, (unsigned long long)pt.found_dead,
		(unsigned long long)pt.refused, (unsigned long long)pt.maps_read,
		(unsigned long long)pt.maps_read_failed, (unsigned long long)pt.refreshes,
		(unsigned long long)pt.refreshes_limited, (unsigned long long)pt.maps_dropped,
		(unsigned long long)pt.exit_vmas, (unsigned long long)pt.exit_vmas_unlocated,
		(unsigned long long)s->events_failed, (unsigned long long)pt.attach_deferred,
		(unsigned long long)pt.attach_queue_full, (unsigned long long)s->oom_kills,
		(unsigned long long)s->oom_kills_other);
	fprintf(stderr,
		"  modules=%llu dropped=%llu evicted=%llu open_failed=%llu not_regular=%llu "
		"located=%llu not_located=%llu\n",
		(unsigned long long)ms.modules, (unsigned long long)ms.dropped,
		(unsigned long long)ms.evicted, (unsigned long long)ms.open_failed,
		(unsigned long long)ms.not_regular, (unsigned long long)ms.located,
		(unsigned long long)ms.not_located);
	if (s->unwind) {
		uint64_t uc[UNWIND_ERR_MAX];
		struct unwind_loader_stats ul;

		sampler__unwind_counters(s->sampler, uc);
		fprintf(stderr, "  unwind:");
		for (int i = 0; i < UNWIND_ERR_MAX; i++)
			fprintf(stderr, " %s=%llu", strata_unwind_counter_name(i),
				(unsigned long long)uc[i]);
		unwind_loader__stats(s->unwind, &ul);
		fprintf(stderr,
			"\n  unwind tables: built=%llu lazy=%llu failed=%llu dropped_full=%llu "
			"evicted=%llu forgotten=%llu "
			"rows=%llu/%llu procs=%llu failed=%llu maps_truncated=%llu build_ms=%.1f "
			"async=%llu async_busy=%llu\n",
			(unsigned long long)ul.tables_built, (unsigned long long)ul.tables_lazy,
			(unsigned long long)ul.tables_failed,
			(unsigned long long)ul.tables_dropped_full,
			(unsigned long long)ul.tables_evicted,
			(unsigned long long)ul.tables_forgotten, (unsigned long long)ul.rows_used,
			(unsigned long long)ul.rows_max, (unsigned long long)ul.procs_loaded,
			(unsigned long long)ul.procs_failed, (unsigned long long)ul.maps_truncated,
			ul.build_ns / 1e6, (unsigned long long)ul.tables_async,
			(unsigned long long)ul.tables_async_busy);
	}
	if (s->python) {
		uint64_t pc[STRATA_PY_ERR_MAX];
		const struct python_stats *ps = python__stats(s->python);
		struct py_symbols_stats sy;

		sampler__py_counters(s->sampler, pc);
		fprintf(stderr, "  python:");
		for (int i = 0; i < STRATA_PY_ERR_MAX; i++)
			fprintf(stderr, " %s=%llu", strata_py_counter_name(i),
				(unsigned long long)pc[i]);
		python__symbol_stats(s->python, &sy);
		fprintf(stderr,
			"\n  python procs: interpreters=%llu unknown_version=%llu refused=%llu "
			"debug_offsets=%llu debug_offsets_bad=%llu dropped=%llu prefetched=%llu "
			"stitched=%llu "
			"stitch_native_short=%llu stitch_python_short=%llu frames=%llu "
			"frames_unknown=%llu\n"
			"  python symbols: lookups=%llu hits=%llu evictions=%llu read_failed=%llu "
			"stale=%llu no_line=%llu\n",
			(unsigned long long)ps->interpreters,
			(unsigned long long)ps->unknown_version, (unsigned long long)ps->refused,
			(unsigned long long)ps->debug_offsets,
			(unsigned long long)ps->debug_offsets_bad, (unsigned long long)ps->dropped,
			(unsigned long long)ps->prefetched, (unsigned long long)ps->stitched,
			(unsigned long long)ps->stitch_native_short,
			(unsigned long long)ps->stitch_python_short, (unsigned long long)ps->frames,
			(unsigned long long)ps->frames_unknown, (unsigned long long)sy.lookups,
			(unsigned long long)sy.hits, (unsigned long long)sy.evictions,
			(unsigned long long)sy.read_failed, (unsigned long long)sy.stale,
			(unsigned long long)sy.no_line);
	}
	session__report_sched(s);
	fprintf(stderr,
		"  symbolizer: lookups=%llu cache_hits=%llu unresolved=%llu open_failed=%llu "
		"degraded=%llu\n",
		(unsigned long long)ss.lookups, (unsigned long long)ss.cache_hits,
		(unsigned long long)ss.unresolved, (unsigned long long)ss.module_open_failed,
		(unsigned long long)ss.modules_degraded);
}

void session__report(struct session *s, const struct profile *p)
{
	fprintf(stderr,
		"strata: %llu samples in profile; drops: map_full=%llu stack_lost=%llu "
		"unknown_frames=%llu other=%llu\n",
		(unsigned long long)profile__total(p), (unsigned long long)p->drops.map_full,
		(unsigned long long)p->drops.stack_lost, (unsigned long long)p->drops.proc_unknown,
		(unsigned long long)p->drops.other);
	if (log_enabled(LOG_INFO))
		session__report_counters(s);
}
