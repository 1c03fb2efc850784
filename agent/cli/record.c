// SPDX-License-Identifier: Apache-2.0
#include "agent/cli/record.h"
#include "agent/core/profile_sink.h"
#include "agent/sched/sched_report.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/log.h"

/*
 * Forks the command held at a pipe until the parent has made it a target
 * and attached the probes, so its exec and first instructions are seen.
 * The child gets the signal mask and open-file limit strata started with.
 */
static pid_t spawn_held(char *const *argv, const struct rlimit *nofile, int *go_fd)
{
	int fds[2];
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0) {
		int err = -errno;
		close(fds[0]);
		close(fds[1]);
		return err;
	}
	if (pid == 0) {
		sigset_t none;
		char c;

		close(fds[1]);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		setrlimit(RLIMIT_NOFILE, nofile);
		if (read(fds[0], &c, 1) != 1)
			_exit(127); /* parent failed to start profiling */
		execvp(argv[0], argv);
		fprintf(stderr, "strata: cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(fds[0]);
	*go_fd = fds[1];
	return pid;
}

static int exit_code(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return 1;
}

/*
 * INT/TERM sent to strata by another process (kill, a job manager) go on to
 * the command; one from the terminal (sender 0) reached it already.
 */
static void forward(pid_t child, int signo, pid_t from)
{
	if (child > 0 && from != 0 && (signo == SIGINT || signo == SIGTERM))
		kill(child, signo);
}

/* Waits for the command after profiling has stopped (signals still blocked
 * and forwarded).  Returns its exit code. */
static int wait_child(pid_t child)
{
	sigset_t mask;
	int status;

	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGCHLD);
	for (;;) {
		siginfo_t si;
		pid_t r = waitpid(child, &status, WNOHANG);

		if (r == child)
			return exit_code(status);
		if (r < 0)
			return 1;
		if (sigtimedwait(&mask, &si, &(struct timespec){ .tv_nsec = 100000000 }) > 0)
			forward(child, si.si_signo, si.si_pid);
	}
}

/* The local writers' context: what the window members write. */
struct record_writers {
	const struct record_opts *opts;
	const struct ksyms *ksyms;
};

/* --leaks / --trace / --tally: the GPU layer's tables at the window's end
 * (agent/core/sink.h). */
static int record_gpu_window(void *ctx, struct gpu *g, const struct session_window *w)
{
	const struct record_opts *opts = ((struct record_writers *)ctx)->opts;
	const struct gpu_data *d;
	struct {
		const char *path;
		int (*fn)(const struct gpu_data *, FILE *);
	} outs[] = {
		{ opts->trace_path, gpu_data__write_trace },
		{ opts->tally_path, gpu_data__write_tally },
	};
	int err;

	gpu__report(g);
	d = gpu__data(g);
	if (opts->leaks_path) {
		err = gpu_data__write_leaks_file(d, opts->leaks_path);
		if (err) {
			fprintf(stderr, "strata: cannot write %s: %s\n", opts->leaks_path,
				strerror(-err));
			return err;
		}
		fprintf(stderr, "strata: wrote %s\n", opts->leaks_path);
	}
	for (size_t i = 0; i < sizeof(outs) / sizeof(outs[0]); i++) {
		if (!outs[i].path)
			continue;
		err = gpu_data__write_file(d, outs[i].path, outs[i].fn);
		if (err) {
			fprintf(stderr, "strata: cannot write %s: %s\n", outs[i].path,
				strerror(-err));
			return err;
		}
		fprintf(stderr, "strata: wrote %s\n", outs[i].path);
	}
	return 0;
}

/* --sched FILE: the scheduler layer's window (its off-CPU aggregate is
 * drained while written). */
static int record_sched_window(void *ctx, struct sched_collector *c, const struct session_window *w)
{
	struct record_writers *r = ctx;
	int err;

	if (!r->opts->sched_output)
		return 0;
	err = sched_report__write_file(c, r->ksyms, r->opts->sched_output);
	if (err)
		fprintf(stderr, "strata: cannot write %s: %s\n", r->opts->sched_output,
			strerror(-err));
	return err;
}

int record_run(const struct record_opts *opts)
{
	struct record_writers wr = { .opts = opts };
	struct profile_sink_opts po = {
		.sz = sizeof(po),
		.ctx = &wr,
		.gpu_window = record_gpu_window,
		.sched_window = record_sched_window,
	};
	struct session_sources src;
	struct session_window win;
	struct profile_sink *ps = NULL;
	struct session *s;
	struct profile *p = NULL;
	pid_t child = 0;
	int go_fd = -1, status = 0, err, werr, rc = 0;
	uint64_t start;

	s = session__new(&opts->session);
	if (!s)
		return -errno;
	session__sources(s, &src);
	wr.ksyms = src.ksyms;
	ps = profile_sink__new(s, &po);
	if (!ps) {
		err = -errno;
		goto out;
	}
	if (opts->argv) {
		child = spawn_held(opts->argv, src.nofile_orig, &go_fd);
		if (child < 0) {
			err = child;
			child = 0;
			goto out;
		}
		err = session__add_target(s, child);
		if (err)
			goto out;
	}
	err = session__start(s);
	if (err)
		goto out;
	if (go_fd >= 0) {
		if (write(go_fd, "g", 1) != 1) {
			err = -errno;
			goto out;
		}
		close(go_fd);
		go_fd = -1;
	}

	start = mono_ms();
	for (;;) {
		struct session_signal sig = { 0 };
		int w = session__wait(s, 100, &sig);

		if (w < 0) {
			err = w;
			goto out;
		}
		if (child > 0 && waitpid(child, &status, WNOHANG) == child) {
			rc = exit_code(status);
			child = 0;
			break;
		}
		if (w == SESSION_SIGNAL) {
			/* Host/pid recordings end on INT/TERM; with a command
			 * we pass the signal on and wait for it to exit. */
			if (!opts->argv && sig.signo != SIGCHLD)
				break;
			forward(child, sig.signo, sig.from);
		}
		if (opts->duration_s > 0 &&
		    mono_ms() - start >= (uint64_t)(opts->duration_s * 1000))
			break;
	}

	/* The GPU and scheduler files are written at the window's end, inside
	 * the drain (record_gpu_window, record_sched_window); the profile
	 * after it. */
	werr = session__end_window(s, &win);
	p = profile_sink__take(ps, &win);
	if (!p) {
		err = -ENOMEM;
		goto out;
	}
	err = profile__write_file(p, opts->output, "strata record");
	if (err) {
		fprintf(stderr, "strata: cannot write %s: %s\n", opts->output, strerror(-err));
		goto out;
	}
	session__report(s, p);
	profile_sink__report(ps);
	fprintf(stderr, "strata: wrote %s\n", opts->output);
	if (!src.gpu && (opts->leaks_path || opts->trace_path || opts->tally_path))
		fprintf(stderr, "strata: GPU layer off: no --leaks/--trace/--tally output\n");
	err = werr;
out:
	if (go_fd >= 0)
		close(go_fd); /* the held child exits 127 */
	profile__free(p);
	session__free(s);
	profile_sink__free(ps);
	/* -d ended profiling before the command, or profiling failed: the
	 * command runs on as it would have, and its exit code is ours. */
	if (child > 0) {
		int crc = wait_child(child);

		if (!err)
			rc = crc;
	}
	return err ? err : rc;
}
