// SPDX-License-Identifier: Apache-2.0
#include "agent/record.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/log.h"

#define DRAIN_INTERVAL_MS 1000 /* default: keeps the kernel maps far from full */

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * Forks the command held at a pipe until the parent has made it a target
 * and attached the probes, so its exec and first instructions are seen.
 */
static pid_t spawn_held(char *const *argv, int *go_fd)
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

int record_run(const struct record_opts *opts)
{
	struct session *s;
	struct profile *p = NULL;
	pid_t child = 0;
	int go_fd = -1, status = 0, err, rc = 0;
	uint64_t start, next_drain;
	uint32_t drain_ms = opts->drain_ms ? opts->drain_ms : DRAIN_INTERVAL_MS;

	s = session__new(&opts->session);
	if (!s)
		return -errno;
	if (opts->argv) {
		child = spawn_held(opts->argv, &go_fd);
		if (child < 0) {
			err = child;
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
	next_drain = start + drain_ms;
	for (;;) {
		int signo = 0, w = session__wait(s, drain_ms < 100 ? (int)drain_ms : 100, &signo);

		if (w < 0) {
			err = w;
			goto out;
		}
		if (child > 0 && waitpid(child, &status, WNOHANG) == child) {
			rc = exit_code(status);
			child = 0;
			break;
		}
		/* INT/TERM end a host/pid recording; with a command we wait
		 * for it (it got the same terminal signal). */
		if (w == SESSION_SIGNAL && signo != SIGCHLD && !opts->argv)
			break;
		if (opts->duration_s > 0 &&
		    mono_ms() - start >= (uint64_t)(opts->duration_s * 1000))
			break;
		if (mono_ms() >= next_drain) {
			session__drain(s);
			next_drain = mono_ms() + drain_ms;
		}
	}

	p = session__take_profile(s);
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
	fprintf(stderr, "strata: wrote %s\n", opts->output);
out:
	if (go_fd >= 0)
		close(go_fd); /* the held child exits 127 */
	if (child > 0) {
		/* Profiling failed: leave the command as it would have run. */
		waitpid(child, &status, 0);
	}
	profile__free(p);
	session__free(s);
	return err ? err : rc;
}
