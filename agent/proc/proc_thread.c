// SPDX-License-Identifier: Apache-2.0
/*
 * A thread's state now from /proc (see proc_thread.h).
 */
#include "agent/proc/proc_thread.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * root/PID/task/TID/name into buf, NUL-terminated: its first line when
 * line, else all of it that fits (stat: the comm, the thread's own choice,
 * may hold a newline, and what follows it must still be read).  0 or
 * -errno.
 */
static int read_text(const char *root, uint32_t pid, uint32_t tid, const char *name, char *buf,
		     size_t size, bool line)
{
	char path[256];
	size_t n;
	FILE *f;
	int err = 0;

	snprintf(path, sizeof(path), "%s/%u/task/%u/%s", root, pid, tid, name);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	n = fread(buf, 1, size - 1, f);
	buf[n] = '\0';
	if (!n)
		err = ferror(f) ? -EIO : -ENODATA;
	else if (line)
		buf[strcspn(buf, "\n")] = '\0';
	fclose(f);
	return err;
}

/* "[<0>] io_schedule+0x12/0x40" -> "io_schedule" */
static void frame_name(const char *line, char *out, size_t size)
{
	const char *p = strchr(line, ']');
	size_t n;

	p = p ? p + 1 : line;
	while (*p == ' ')
		p++;
	n = strcspn(p, "+ \n");
	if (n >= size)
		n = size - 1;
	memcpy(out, p, n);
	out[n] = '\0';
}

/* A syscall line: "NR a1 a2 a3 a4 a5 a6 sp pc" or "-1 sp pc" (blocked
 * outside a system call); "running" has neither.  The sp is the next to
 * last field.  Returns the syscall number (-1: none) and sets *sp, or -2
 * when the line holds no stack pointer. */
static int parse_syscall(const char *line, uint64_t *sp)
{
	const char *last = strrchr(line, ' '), *prev;
	char *end;

	*sp = 0;
	if (!last || !((line[0] >= '0' && line[0] <= '9') || line[0] == '-'))
		return -2;
	for (prev = last; prev > line && prev[-1] != ' '; prev--)
		;
	if (prev == line)
		return -2;
	*sp = strtoull(prev, &end, 0);
	if (end != last)
		return -2;
	return (int)strtol(line, NULL, 10);
}

int proc_thread__user_sp(const char *root, uint32_t pid, uint32_t tid, uint64_t *sp)
{
	char buf[512];
	int err = read_text(root, pid, tid, "syscall", buf, sizeof(buf), true);

	*sp = 0;
	if (err)
		return err == -ESRCH ? -ENOENT : err;
	return parse_syscall(buf, sp) == -2 || !*sp ? -EAGAIN : 0;
}

int proc_thread__read(const char *root, uint32_t pid, uint32_t tid, struct proc_thread_state *out)
{
	char buf[1024], path[256], *rp;
	FILE *f;
	int err;

	memset(out, 0, sizeof(*out));
	out->syscall = -1;
	err = read_text(root, pid, tid, "stat", buf, sizeof(buf), false);
	if (err)
		return err == -ENOENT || err == -ESRCH ? -ENOENT : err;
	/* the comm may hold spaces and ')': the state follows the last ')' */
	rp = strrchr(buf, ')');
	if (!rp || rp[1] != ' ' || !rp[2])
		return -EINVAL;
	out->state = rp[2];
	if (!read_text(root, pid, tid, "wchan", buf, sizeof(buf), true) && strcmp(buf, "0"))
		snprintf(out->wchan, sizeof(out->wchan), "%.*s", PROC_THREAD_NAME - 1, buf);
	/* "NR args... sp pc", "running", or "-1 sp pc" (blocked, no syscall) */
	if (!read_text(root, pid, tid, "syscall", buf, sizeof(buf), true)) {
		int nr = parse_syscall(buf, &out->user_sp);

		out->syscall = nr >= 0 ? nr : -1;
	}
	snprintf(path, sizeof(path), "%s/%u/task/%u/stack", root, pid, tid);
	f = fopen(path, "re");
	if (f) { /* root only; an empty or unreadable stack is no error */
		while (out->nframes < PROC_THREAD_FRAMES && fgets(buf, sizeof(buf), f))
			frame_name(buf, out->frames[out->nframes++], PROC_THREAD_NAME);
		fclose(f);
	}
	return 0;
}
