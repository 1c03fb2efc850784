// SPDX-License-Identifier: Apache-2.0
/*
 * Parsing of /proc/PID/maps.
 *
 * Line format (fs/proc/task_mmu.c, show_map_vma):
 *   "%08lx-%08lx %c%c%c%c %08llx %02x:%02x %lu " then padding and the path.
 * The path runs to the end of the line and may contain spaces; the kernel
 * escapes only '\n' (as "\012"), so a line never spans two.  The parser is
 * hand-written rather than sscanf: sscanf accepts signs, leading blanks
 * and silently overflows, and this input comes from processes we trace.
 */
#include "agent/proc/proc_maps.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define DELETED_SUFFIX " (deleted)"

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Parses 1..16 hex digits at *p; advances *p.  0 or -EINVAL. */
static int parse_hex(const char **p, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;
	int n = 0, d;

	while ((d = hexval(*s)) >= 0) {
		if (++n > 16)
			return -EINVAL;
		v = (v << 4) | (uint64_t)d;
		s++;
	}
	if (n == 0)
		return -EINVAL;
	*p = s;
	*out = v;
	return 0;
}

static int parse_dec(const char **p, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;
	int n = 0;

	while (*s >= '0' && *s <= '9') {
		uint64_t d = (uint64_t)(*s - '0');

		if (v > (UINT64_MAX - d) / 10)
			return -EINVAL;
		v = v * 10 + d;
		s++;
		n++;
	}
	if (n == 0)
		return -EINVAL;
	*p = s;
	*out = v;
	return 0;
}

static int expect(const char **p, char c)
{
	if (**p != c)
		return -EINVAL;
	(*p)++;
	return 0;
}

static int parse_prot(const char **p, uint32_t *prot)
{
	static const char want[3] = { 'r', 'w', 'x' };
	const char *s = *p;
	uint32_t v = 0;

	for (int i = 0; i < 3; i++) {
		if (s[i] == want[i])
			v |= 1u << i; /* PROC_MAP_R, _W, _X in that order */
		else if (s[i] != '-')
			return -EINVAL;
	}
	if (s[3] == 's')
		v |= PROC_MAP_SHARED;
	else if (s[3] != 'p')
		return -EINVAL;
	*p = s + 4;
	*prot = v;
	return 0;
}

int proc_maps__parse_line(const char *line, struct proc_map *out)
{
	const char *p = line;
	uint64_t maj, min;
	size_t len;

	if (!line || !out)
		return -EINVAL;
	memset(out, 0, offsetof(struct proc_map, path));
	out->path[0] = '\0';
	out->deleted = 0;

	if (parse_hex(&p, &out->start) || expect(&p, '-') || parse_hex(&p, &out->end) ||
	    expect(&p, ' ') || parse_prot(&p, &out->prot) || expect(&p, ' ') ||
	    parse_hex(&p, &out->pgoff) || expect(&p, ' ') || parse_hex(&p, &maj) ||
	    expect(&p, ':') || parse_hex(&p, &min) || expect(&p, ' ') || parse_dec(&p, &out->inode))
		return -EINVAL;
	if (out->start >= out->end || maj > UINT32_MAX || min > UINT32_MAX)
		return -EINVAL;
	out->dev_major = (uint32_t)maj;
	out->dev_minor = (uint32_t)min;

	/* Anonymous mappings end right after the inode (maybe one blank). */
	if (*p != '\0' && *p != '\n' && *p != ' ')
		return -EINVAL;
	while (*p == ' ')
		p++;
	len = strcspn(p, "\n");
	/* Only a single trailing newline may follow the path. */
	if (p[len] == '\n' && p[len + 1] != '\0')
		return -EINVAL;
	if (len >= sizeof(DELETED_SUFFIX) - 1 &&
	    !memcmp(p + len - (sizeof(DELETED_SUFFIX) - 1), DELETED_SUFFIX,
		    sizeof(DELETED_SUFFIX) - 1)) {
		len -= sizeof(DELETED_SUFFIX) - 1;
		out->deleted = 1;
	}
	if (len >= sizeof(out->path))
		return -EINVAL;
	memcpy(out->path, p, len);
	out->path[len] = '\0';
	return 0;
}

int proc_maps__read(int pid, int only_exec, struct proc_map **out, size_t *n)
{
	return proc_maps__read_counted(pid, only_exec, out, n, NULL);
}

int proc_maps__read_counted(int pid, int only_exec, struct proc_map **out, size_t *n,
			    uint64_t *dropped)
{
	struct proc_map *v = NULL, *tmp;
	size_t cnt = 0, cap = 0, linecap = 0, anon = 0;
	char fname[64], *line = NULL;
	FILE *f = NULL;
	int err;

	if (!out || !n || pid <= 0)
		return -EINVAL;
	*out = NULL;
	*n = 0;
	snprintf(fname, sizeof(fname), "/proc/%d/maps", pid);
	f = fopen(fname, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;

	for (;;) {
		errno = 0;
		ssize_t r = getline(&line, &linecap, f);

		if (r < 0) {
			/* ESRCH: the process exited while we read. */
			if (errno) {
				err = -errno;
				goto err_out;
			}
			break;
		}
		if (cnt == cap) {
			size_t ncap = cap ? cap * 2 : 64;

			if (ncap > SIZE_MAX / sizeof(*v)) {
				err = -ENOMEM;
				goto err_out;
			}
			tmp = realloc(v, ncap * sizeof(*v));
			if (!tmp) {
				err = -ENOMEM;
				goto err_out;
			}
			v = tmp;
			cap = ncap;
		}
		/*
		 * The kernel writes well-formed lines; the only realistic
		 * failure is a path longer than PROC_MAP_PATH_MAX.  Such a
		 * mapping is skipped rather than failing the whole process.
		 */
		if (proc_maps__parse_line(line, &v[cnt]))
			continue;
		if (only_exec && !(v[cnt].prot & PROC_MAP_X))
			continue;
		if (cnt >= PROC_MAPS_MAX || (!v[cnt].path[0] && anon >= PROC_MAPS_ANON_MAX)) {
			if (dropped)
				(*dropped)++;
			continue;
		}
		anon += !v[cnt].path[0];
		cnt++;
	}
	/*
	 * A process that exits between open and read gives an empty file;
	 * tell that apart from a kernel thread (no mappings, still alive).
	 */
	if (cnt == 0) {
		struct stat st;

		snprintf(fname, sizeof(fname), "/proc/%d", pid);
		if (stat(fname, &st)) {
			err = -ESRCH;
			goto err_out;
		}
	}
	free(line);
	fclose(f);
	*out = v;
	*n = cnt;
	return 0;

err_out:
	free(line);
	free(v);
	fclose(f);
	return err;
}
