// SPDX-License-Identifier: Apache-2.0
#include "agent/proc/proc_stat.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The start of root/PID/name into buf (NUL-terminated): its length, or 0
 * when it is gone or empty. */
static ssize_t read_head(const char *root, uint32_t pid, const char *name, char *buf, size_t size)
{
	char path[128];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%u/%s", root ? root : "/proc", pid, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	return n;
}

uint64_t proc_stat__start_ticks(const char *root, uint32_t pid, char *comm, size_t commsz)
{
	char buf[1024], *p, *c;
	unsigned long long start = 0;

	if (!read_head(root, pid, "stat", buf, sizeof(buf)))
		return 0;
	c = strchr(buf, '(');
	p = strrchr(buf, ')');
	/* After ") ": state is field 3, starttime field 22. */
	if (!c || !p || c > p || !p[1] ||
	    sscanf(p + 2,
		   "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u "
		   "%*d %*d %*d %*d %*d %*d %llu",
		   &start) != 1)
		return 0;
	if (comm && commsz)
		snprintf(comm, commsz, "%.*s", (int)(p - c - 1), c + 1);
	return start ? start : 1; /* a process started at tick 0 (init) is live */
}

char proc_stat__state(const char *root, uint32_t pid)
{
	char buf[1024], *p;

	if (!read_head(root, pid, "stat", buf, sizeof(buf)))
		return 0;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : 0;
}

uint32_t proc_stat__tgid(const char *root, uint32_t tid)
{
	char buf[512], *p; /* Tgid is the fourth line */
	unsigned int tgid = 0;

	if (!read_head(root, tid, "status", buf, sizeof(buf)))
		return 0;
	p = strstr(buf, "\nTgid:");
	if (!p || sscanf(p + 6, "%u", &tgid) != 1)
		return 0;
	return tgid;
}
