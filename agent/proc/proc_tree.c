// SPDX-License-Identifier: Apache-2.0
#include "agent/proc/proc_tree.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TREE_MAX_PROCS (1u << 20) /* /proc entries read at most */

struct pid_parent {
	uint32_t pid, ppid;
};

/* The parent of pid from /proc/PID/stat (after the comm's last ')'), or 0. */
static uint32_t parent_of(const char *pid)
{
	char path[64], buf[512], *p;
	unsigned ppid = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%s/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 1, " %*c %u", &ppid) != 1)
		return 0;
	return ppid;
}

/* Every process with its parent, malloc'd; their number or -errno. */
static int read_parents(struct pid_parent **out)
{
	struct pid_parent *v = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	DIR *d = opendir("/proc");

	if (!d)
		return -errno;
	while ((de = readdir(d)) && n < TREE_MAX_PROCS) {
		uint32_t ppid;

		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		ppid = parent_of(de->d_name);
		if (!ppid)
			continue;
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 1024;
			struct pid_parent *t = realloc(v, ncap * sizeof(*v));

			if (!t) {
				free(v);
				closedir(d);
				return -ENOMEM;
			}
			v = t;
			cap = ncap;
		}
		v[n++] = (struct pid_parent){ (uint32_t)strtoul(de->d_name, NULL, 10), ppid };
	}
	closedir(d);
	*out = v;
	return (int)n;
}

int proc_tree__descendants(uint32_t root, uint32_t *out, size_t max, int *more)
{
	struct pid_parent *all = NULL;
	size_t found = 0;
	int n = read_parents(&all);

	*more = 0;
	if (n < 0)
		return n;
	/* Breadth first over out[] itself: out[i]'s children are appended. */
	for (size_t at = 0; at <= found; at++) {
		uint32_t parent = at == 0 ? root : out[at - 1];

		for (int i = 0; i < n; i++) {
			if (all[i].ppid != parent)
				continue;
			if (found == max) {
				*more = 1;
				goto out;
			}
			out[found++] = all[i].pid;
		}
	}
out:
	free(all);
	return (int)found;
}
