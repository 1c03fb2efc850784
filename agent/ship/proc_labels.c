// SPDX-License-Identifier: Apache-2.0
#include "agent/ship/proc_labels.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/proc/proc_env.h"
#include "lib/clock.h"

/*
 * Reads up to sz-1 bytes of name in the process directory dir (an fd of
 * /proc/PID: once that process is gone, reads fail, even if its pid names
 * another process by then); returns bytes read or -errno.
 */
static ssize_t read_file(int dir, const char *name, char *buf, size_t sz)
{
	int fd = openat(dir, name, O_RDONLY | O_CLOEXEC);
	size_t n = 0;

	if (fd < 0)
		return -errno;
	while (n < sz - 1) {
		ssize_t r = read(fd, buf + n, sz - 1 - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	buf[n] = 0;
	return (ssize_t)n;
}

uint64_t proc_labels__boot_epoch_ns(void)
{
	uint64_t rt = realtime_ns();

	return rt - boottime_ns();
}

static int read_stat(int dir, uint64_t boot_epoch, uint64_t want_ticks, struct proc_labels *o)
{
	char buf[1024], *open_p, *close_p;
	unsigned long long start = 0;
	int ppid = 0;
	long tck = sysconf(_SC_CLK_TCK);

	if (read_file(dir, "stat", buf, sizeof(buf)) <= 0)
		return -ESRCH;
	/* comm may hold spaces and parentheses: it ends at the last ')'. */
	open_p = strchr(buf, '(');
	close_p = strrchr(buf, ')');
	if (!open_p || !close_p || close_p < open_p)
		return -EINVAL;
	snprintf(o->comm, sizeof(o->comm), "%.*s", (int)(close_p - open_p - 1), open_p + 1);
	/* After ") ": state(3) ppid(4) ... starttime(22). */
	if (sscanf(close_p + 2,
		   "%*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d "
		   "%*d %*d %*d %llu",
		   &ppid, &start) != 2)
		return -EINVAL;
	if (want_ticks && start != want_ticks)
		return -ESTALE; /* the pid is another process's now */
	o->ppid = (uint32_t)ppid;
	if (tck <= 0)
		tck = 100;
	o->start_time_ns = boot_epoch + start * (1000000000ull / (uint64_t)tck);
	/* Whole clock ticks: round so that two reads agree. */
	o->start_time_ns -= o->start_time_ns % (1000000000ull / (uint64_t)tck);
	return 0;
}

static void read_cmdline(int dir, struct proc_labels *o)
{
	ssize_t n = read_file(dir, "cmdline", o->cmdline, sizeof(o->cmdline));

	for (ssize_t i = 0; i + 1 < n; i++)
		if (!o->cmdline[i])
			o->cmdline[i] = ' ';
}

static int is_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isxdigit((unsigned char)s[i]))
			return 0;
	return 1;
}

/* The 64-hex container id in segment seg[0..len) (docker-<id>.scope,
 * cri-containerd-<id>.scope, crio-<id>, <id>), or NULL. */
static const char *container_in(const char *seg, size_t len)
{
	for (size_t i = 0; i + 64 <= len; i++)
		if (is_hex(seg + i, 64) &&
		    (i + 64 == len || !isxdigit((unsigned char)seg[i + 64])) &&
		    (i == 0 || !isxdigit((unsigned char)seg[i - 1])))
			return seg + i;
	return NULL;
}

/* The pod uid in segment seg[0..len) (kubepods-burstable-pod<uid>.slice
 * or pod<uid>; "kubepods" itself holds "pod", so every occurrence is
 * tried) into pod, '_' made '-' (systemd's escape); 1 if found. */
static int pod_in(const char *seg, size_t len, char *pod, size_t psz)
{
	for (const char *pd = seg; (pd = memmem(pd, len - (size_t)(pd - seg), "pod", 3)); pd += 3) {
		size_t ul = 0;

		if ((size_t)(pd - seg) + 3 + 36 > len)
			break;
		while (ul < 36 && (isxdigit((unsigned char)pd[3 + ul]) || pd[3 + ul] == '-' ||
				   pd[3 + ul] == '_'))
			ul++;
		if (ul == 36) {
			snprintf(pod, psz, "%.36s", pd + 3);
			for (char *c = pod; *c; c++)
				if (*c == '_')
					*c = '-';
			return 1;
		}
	}
	return 0;
}

/*
 * The pod is the outermost pod segment: kubelet made it, and a process
 * with a delegated cgroup subtree can make any name below its own
 * (".../pod<another pod's uid>").  The container is, under a pod, the
 * first id below it (the runtime's; a runtime outside, as with kind or
 * Docker-in-Docker, sits above the pod); without a pod, the innermost.
 */
void proc_labels__parse_cgroup(const char *path, char *container, size_t csz, char *pod, size_t psz)
{
	int under_pod = 0;

	container[0] = pod[0] = 0;
	for (const char *p = path; *p;) {
		size_t len = strcspn(p, "/");
		const char *id;

		if (!under_pod && pod_in(p, len, pod, psz)) {
			under_pod = 1;
			container[0] = 0; /* what was above it is not this pod's */
		} else if ((id = container_in(p, len)) && !(under_pod && container[0])) {
			snprintf(container, csz, "%.64s", id);
		}
		p += len;
		if (*p == '/')
			p++;
	}
}

static void read_cgroup(int dir, struct proc_labels *o)
{
	char buf[4096], *line;

	if (read_file(dir, "cgroup", buf, sizeof(buf)) <= 0)
		return;
	/* cgroup v2: "0::/path"; with v1 also present, the v2 line wins (a
	 * v1 path holding "::" is not it) */
	for (char *save = NULL, *l = strtok_r(buf, "\n", &save); l;
	     l = strtok_r(NULL, "\n", &save)) {
		line = !strncmp(l, "0::", 3) ? l + 1 : NULL;
		if (line || !o->cgroup[0])
			snprintf(o->cgroup, sizeof(o->cgroup), "%s",
				 line		  ? line + 2
				 : strchr(l, ':') ? strrchr(l, ':') + 1
						  : l);
	}
	proc_labels__parse_cgroup(o->cgroup, o->container, sizeof(o->container), o->pod,
				  sizeof(o->pod));
}

static int env_int(const char *v, int32_t *out)
{
	char *end;
	long n;

	errno = 0;
	n = strtol(v, &end, 10);
	if (errno || end == v || *end || n < 0 || n > INT32_MAX)
		return -EINVAL;
	*out = (int32_t)n;
	return 0;
}

static void read_environ(int dir, struct proc_labels *o)
{
	char *buf = malloc(PROC_ENV_MAX);
	ssize_t n;

	if (!buf)
		return;
	n = read_file(dir, "environ", buf, PROC_ENV_MAX);
	if (n > 0)
		n = (ssize_t)proc_env_whole(buf, (size_t)n, PROC_ENV_MAX - 1);
	for (ssize_t i = 0; i < n;) {
		const char *kv = buf + i;
		size_t len = strnlen(kv, (size_t)(n - i));

#define ENV_IS(name) (!strncmp(kv, name "=", sizeof(name)))
#define ENV_VAL (kv + strcspn(kv, "=") + 1)
		if (ENV_IS("RANK")) {
			o->has_rank = !env_int(ENV_VAL, &o->rank);
			o->rank_source = o->has_rank ? "env:RANK" : "";
		} else if (ENV_IS("LOCAL_RANK"))
			env_int(ENV_VAL, &o->local_rank);
		else if (ENV_IS("WORLD_SIZE"))
			env_int(ENV_VAL, &o->world_size);
		else if (ENV_IS("TORCHELASTIC_RUN_ID"))
			snprintf(o->torchelastic_run_id, sizeof(o->torchelastic_run_id), "%s",
				 ENV_VAL);
		else if (ENV_IS("SLURM_JOB_ID"))
			snprintf(o->slurm_job_id, sizeof(o->slurm_job_id), "%s", ENV_VAL);
		else if (ENV_IS("STRATA_JOB"))
			snprintf(o->job, sizeof(o->job), "%s", ENV_VAL);
#undef ENV_IS
#undef ENV_VAL
		i += (ssize_t)len + 1;
	}
	free(buf);
	if (o->job[0])
		o->job_source = "env:STRATA_JOB";
	else if (o->torchelastic_run_id[0])
		o->job_source = "env:TORCHELASTIC_RUN_ID";
	else if (o->slurm_job_id[0])
		o->job_source = "env:SLURM_JOB_ID";
	if (!o->job[0])
		snprintf(o->job, sizeof(o->job), "%s",
			 o->torchelastic_run_id[0] ? o->torchelastic_run_id : o->slurm_job_id);
}

/* The identity the kernel vouches for (the process cannot change its own
 * cgroup): its pod, else its container, else its cgroup path. */
static void bind_identity(struct proc_labels *o)
{
	if (o->pod[0])
		snprintf(o->identity, sizeof(o->identity), "pod:%s", o->pod);
	else if (o->container[0])
		snprintf(o->identity, sizeof(o->identity), "container:%s", o->container);
	else if (o->cgroup[0])
		snprintf(o->identity, sizeof(o->identity), "cgroup:%s", o->cgroup);
}

int proc_labels__read(uint32_t pid, uint64_t boot_epoch_ns, uint64_t start_ticks,
		      struct proc_labels *o)
{
	char path[32];
	int dir, err;

	memset(o, 0, sizeof(*o));
	o->pid = pid;
	o->rank = o->local_rank = o->world_size = -1;
	/* Every file through one fd of the process's directory: a pid reused
	 * between two reads fails them instead of mixing two processes. */
	snprintf(path, sizeof(path), "/proc/%u", pid);
	dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0)
		return -ESRCH;
	err = read_stat(dir, boot_epoch_ns, start_ticks, o);
	if (!err) {
		o->job_source = o->rank_source = "";
		read_cmdline(dir, o);
		read_cgroup(dir, o);
		read_environ(dir, o);
		bind_identity(o);
	}
	close(dir);
	return err;
}

/* The string fields of struct proc_labels, in their packed order. */
#define LABEL_STR(f)                                                                  \
	{                                                                             \
		offsetof(struct proc_labels, f), sizeof(((struct proc_labels *)0)->f) \
	}
static const struct {
	size_t off, size;
} label_strs[] = {
	LABEL_STR(comm),
	LABEL_STR(cmdline),
	LABEL_STR(cgroup),
	LABEL_STR(container),
	LABEL_STR(pod),
	LABEL_STR(job),
	LABEL_STR(torchelastic_run_id),
	LABEL_STR(slurm_job_id),
	LABEL_STR(identity),
};
#define NLABEL_STRS (sizeof(label_strs) / sizeof(label_strs[0]))

/* Packed: the numbers (the two source pointers point at string literals),
 * then each string of label_strs with its NUL. */
struct packed_labels {
	uint32_t pid, ppid;
	uint64_t start_time_ns;
	int has_rank;
	int32_t rank, local_rank, world_size;
	const char *job_source, *rank_source;
	char strs[];
};

void *proc_labels__pack(const struct proc_labels *l)
{
	size_t len[NLABEL_STRS], total = sizeof(struct packed_labels);
	struct packed_labels *p;
	char *at;

	for (size_t i = 0; i < NLABEL_STRS; i++) {
		len[i] = strnlen((const char *)l + label_strs[i].off, label_strs[i].size - 1);
		total += len[i] + 1;
	}
	p = malloc(total);
	if (!p)
		return NULL;
	*p = (struct packed_labels){ .pid = l->pid,
				     .ppid = l->ppid,
				     .start_time_ns = l->start_time_ns,
				     .has_rank = l->has_rank,
				     .rank = l->rank,
				     .local_rank = l->local_rank,
				     .world_size = l->world_size,
				     .job_source = l->job_source,
				     .rank_source = l->rank_source };
	at = p->strs;
	for (size_t i = 0; i < NLABEL_STRS; i++) {
		memcpy(at, (const char *)l + label_strs[i].off, len[i]);
		at[len[i]] = 0;
		at += len[i] + 1;
	}
	return p;
}

void proc_labels__unpack(const void *packed, struct proc_labels *out)
{
	const struct packed_labels *p = packed;
	const char *at = p->strs;

	memset(out, 0, sizeof(*out));
	out->pid = p->pid;
	out->ppid = p->ppid;
	out->start_time_ns = p->start_time_ns;
	out->has_rank = p->has_rank;
	out->rank = p->rank;
	out->local_rank = p->local_rank;
	out->world_size = p->world_size;
	out->job_source = p->job_source;
	out->rank_source = p->rank_source;
	for (size_t i = 0; i < NLABEL_STRS; i++) {
		size_t n = strlen(at); /* < the field's size: pack bounded it */

		memcpy((char *)out + label_strs[i].off, at, n);
		at += n + 1;
	}
}
