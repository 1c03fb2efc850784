// SPDX-License-Identifier: Apache-2.0
#include "agent/proc/modules.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/safe_open.h"

#define MODULE_BUCKETS 1024
#define NOT_FOUND_RING 256 /* (dev, ino) pairs recently not located */
#define LOCATE_MAX_DIRS 64 /* distinct module directories tried per search */
/* Drains an unused module stays (a program run every few seconds keeps its
 * files, their detection and unwind tables); a deleted one goes sooner. */
#define MODULE_IDLE_DRAINS 60
#define MODULE_IDLE_DELETED 2

struct file_id {
	dev_t dev;
	uint64_t ino;
};

struct module_registry {
	struct module *buckets[MODULE_BUCKETS];
	size_t max;
	/* Files searched for in vain, so that each exit of a process using
	 * them does not repeat the search (a ring: old entries age out). */
	struct file_id not_found[NOT_FOUND_RING];
	size_t not_found_next;
	uint64_t drains; /* modules__end_drain calls: the eviction clock */
	module_evict_fn on_evict;
	void *on_evict_ctx;
	struct module_stats st;
};

static size_t bucket_of(dev_t dev, uint64_t ino)
{
	uint64_t h = (ino ^ ((uint64_t)dev << 32)) * 0x9e3779b97f4a7c15ULL;

	return (h >> 40) % MODULE_BUCKETS;
}

struct module_registry *modules__new(size_t max)
{
	struct module_registry *r = calloc(1, sizeof(*r));

	if (r)
		r->max = max ? max : 4096;
	return r;
}

void modules__on_evict(struct module_registry *r, module_evict_fn fn, void *ctx)
{
	r->on_evict = fn;
	r->on_evict_ctx = ctx;
}

void modules__ref(struct module_registry *r, struct module *m)
{
	(void)r;
	m->refs++;
}

void modules__unref(struct module_registry *r, struct module *m)
{
	if (m->refs && --m->refs == 0)
		m->idle_since = r->drains;
}

static bool evictable(const struct module_registry *r, const struct module *m, uint64_t min_idle)
{
	return !m->refs && !m->pins && r->drains - m->idle_since >= min_idle;
}

/* Unlinks and frees *pp (its users were told first). */
static void evict(struct module_registry *r, struct module **pp)
{
	struct module *m = *pp;

	if (r->on_evict)
		r->on_evict(r->on_evict_ctx, m);
	*pp = m->next;
	close(m->fd);
	free(m->path);
	free(m);
	r->st.modules--;
	r->st.evicted++;
}

void modules__end_drain(struct module_registry *r)
{
	r->drains++;
	for (size_t b = 0; b < MODULE_BUCKETS; b++) {
		struct module **pp = &r->buckets[b];

		while (*pp) {
			struct module *m = *pp;

			if (evictable(r, m, m->deleted ? MODULE_IDLE_DELETED : MODULE_IDLE_DRAINS))
				evict(r, pp);
			else
				pp = &m->next;
		}
	}
}

/* The registry is full: the module unused for longest goes, if any has
 * been unused since before this drain (one converted in it may still be
 * named by frames being built).  0, or -ENOSPC. */
static int make_room(struct module_registry *r)
{
	struct module **victim = NULL;

	for (size_t b = 0; b < MODULE_BUCKETS; b++)
		for (struct module **pp = &r->buckets[b]; *pp; pp = &(*pp)->next)
			if (evictable(r, *pp, 1) &&
			    (!victim || (*pp)->idle_since < (*victim)->idle_since))
				victim = pp;
	if (!victim)
		return -ENOSPC;
	evict(r, victim);
	return 0;
}

void modules__free(struct module_registry *r)
{
	if (!r)
		return;
	for (size_t b = 0; b < MODULE_BUCKETS; b++) {
		struct module *m = r->buckets[b], *next;

		for (; m; m = next) {
			next = m->next;
			close(m->fd);
			free(m->path);
			free(m);
		}
	}
	free(r);
}

struct module *modules__find(struct module_registry *r, dev_t dev, uint64_t ino)
{
	for (struct module *m = r->buckets[bucket_of(dev, ino)]; m; m = m->next)
		if (m->dev == dev && m->ino == ino)
			return m;
	return NULL;
}

/* Registers an opened file (fd ownership moves to the registry). */
static struct module *module_add(struct module_registry *r, dev_t dev, uint64_t ino,
				 const char *path, int fd)
{
	struct module *m;
	size_t b = bucket_of(dev, ino);

	if (r->st.modules >= r->max && make_room(r)) {
		r->st.dropped++;
		goto err_out;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		goto err_out;
	m->path = strdup(path);
	if (!m->path) {
		free(m);
		goto err_out;
	}
	m->dev = dev;
	m->ino = ino;
	m->fd = fd;
	m->idle_since = r->drains;
	snprintf(m->open_path, sizeof(m->open_path), "/proc/self/fd/%d", fd);
	int n = build_id_read(NULL, fd, m->build_id, sizeof(m->build_id));
	m->build_id_len = n > 0 ? n : 0;
	m->next = r->buckets[b];
	r->buckets[b] = m;
	r->st.modules++;
	return m;

err_out:
	close(fd);
	return NULL;
}

/*
 * Keeps fd only if it is the file (dev, ino): a path can name another file
 * by now (package upgrade, container layer, a target replacing its own
 * file), and a wrong file would give wrong names for good.  fd comes from
 * safe_open (lib/safe_open.h: a regular file, opened without blocking on
 * whatever the target put there).  Returns fd or -1.
 */
static int verified(struct module_registry *r, int fd, const struct stat *st, dev_t dev,
		    uint64_t ino)
{
	if (fd < 0) {
		if (fd == -EINVAL || fd == -ELOOP)
			r->st.not_regular++;
		return -1;
	}
	if (st->st_dev != dev || st->st_ino != ino) {
		close(fd);
		return -1;
	}
	return fd;
}

struct module *modules__from_map(struct module_registry *r, int pid, const struct proc_map *pm)
{
	dev_t dev = makedev(pm->dev_major, pm->dev_minor);
	struct module *m = modules__find(r, dev, pm->inode);
	char p[PATH_MAX + 64];
	struct stat st;
	int fd;

	if (m)
		return m;
	/* map_files works for deleted and containerized files; the root-
	 * relative path is the fallback where map_files is not permitted.
	 * (On overlayfs the two can report different inodes: verified
	 * against what maps says either way.) */
	snprintf(p, sizeof(p), "/proc/%d/map_files/%llx-%llx", pid, (unsigned long long)pm->start,
		 (unsigned long long)pm->end);
	fd = safe_open(AT_FDCWD, p, 0, &st);
	fd = verified(r, fd, &st, dev, pm->inode);
	if (fd < 0 && pm->path[0] == '/') {
		/* resolved inside its root: its symlinks cannot lead out */
		fd = safe_open_in_root(pid, pm->path, 0, &st);
		fd = verified(r, fd, &st, dev, pm->inode);
	}
	if (fd < 0) {
		/* Not registered: a later mapping of the file tries again
		 * (the process may just have exited under us). */
		r->st.open_failed++;
		pr_debug("modules: %s (pid %d): cannot open it as %u:%u/%llu", pm->path, pid,
			 major(dev), minor(dev), (unsigned long long)pm->inode);
		return NULL;
	}
	m = module_add(r, dev, pm->inode, pm->path, fd);
	if (m)
		m->deleted = pm->deleted;
	return m;
}

/* Opens dir/name and registers it when it is the file (dev, ino). */
static struct module *try_dir(struct module_registry *r, const char *dir, dev_t dev, uint64_t ino,
			      const char *name)
{
	char path[PATH_MAX];
	struct stat st;
	int fd;

	if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
		return NULL;
	/* the mapped file's own name: never a symlink to follow */
	fd = safe_open(AT_FDCWD, path, SAFE_OPEN_NOFOLLOW, &st);
	fd = verified(r, fd, &st, dev, ino);
	return fd < 0 ? NULL : module_add(r, dev, ino, path, fd);
}

struct module *modules__from_path(struct module_registry *r, const char *path)
{
	char real[PATH_MAX];
	struct module *m;
	struct stat st;
	int fd = safe_open(AT_FDCWD, path, 0, &st);

	if (fd < 0)
		return NULL;
	m = modules__find(r, st.st_dev, st.st_ino);
	if (m) {
		close(fd);
		return m;
	}
	/* the file's own name, not a symlink's (libcudart.so -> .so.13) */
	return module_add(r, st.st_dev, st.st_ino, realpath(path, real) ? real : path, fd);
}

struct module *modules__locate(struct module_registry *r, dev_t dev, uint64_t ino, const char *name)
{
	static const char *const std_dirs[] = {
		"/lib/x86_64-linux-gnu",
		"/usr/lib/x86_64-linux-gnu",
		"/lib/aarch64-linux-gnu",
		"/usr/lib/aarch64-linux-gnu",
		"/lib64",
		"/usr/lib64",
		"/lib",
		"/usr/lib",
		"/usr/local/lib",
		"/bin",
		"/usr/bin",
		"/sbin",
		"/usr/sbin",
		"/usr/local/bin",
	};
	struct module *m = modules__find(r, dev, ino);
	const char *tried[LOCATE_MAX_DIRS];
	size_t ntried = 0;

	if (m)
		return m;
	for (size_t i = 0; i < NOT_FOUND_RING; i++)
		if (r->not_found[i].dev == dev && r->not_found[i].ino == ino)
			goto not_found;
	if (!*name || strchr(name, '/'))
		goto remember;
	for (size_t i = 0; i < sizeof(std_dirs) / sizeof(std_dirs[0]); i++)
		if ((m = try_dir(r, std_dirs[i], dev, ino, name)))
			goto found;
	/* Directories of files already known: a workload's own libraries
	 * usually sit beside its executable or each other.  Each distinct
	 * directory is tried once, at most LOCATE_MAX_DIRS of them. */
	for (size_t b = 0; b < MODULE_BUCKETS && ntried < LOCATE_MAX_DIRS; b++) {
		for (struct module *k = r->buckets[b]; k && ntried < LOCATE_MAX_DIRS; k = k->next) {
			const char *slash = strrchr(k->path, '/');
			char dir[PATH_MAX];
			size_t len, i;

			if (!slash || slash == k->path)
				continue;
			len = (size_t)(slash - k->path);
			for (i = 0; i < ntried; i++)
				if (strrchr(tried[i], '/') == tried[i] + len &&
				    !strncmp(tried[i], k->path, len))
					break; /* same directory */
			if (i < ntried || len >= sizeof(dir))
				continue;
			tried[ntried++] = k->path;
			memcpy(dir, k->path, len);
			dir[len] = '\0';
			if ((m = try_dir(r, dir, dev, ino, name)))
				goto found;
		}
	}
remember:
	r->not_found[r->not_found_next++ % NOT_FOUND_RING] = (struct file_id){ dev, ino };
not_found:
	r->st.not_located++;
	return NULL;
found:
	r->st.located++;
	return m;
}

/*
 * The vDSO has no file, but it is one image per kernel, mapped into every
 * process: a memfd copy of our own serves as its file, for unwind tables
 * and symbols alike.  Built on first use; (dev 0, inode 0) is its key.
 */
struct module *modules__vdso(struct module_registry *r)
{
	char line[512];
	unsigned long lo = 0, hi = 0;
	struct module *m = modules__find(r, 0, 0);
	FILE *f;
	int fd;

	if (m)
		return m;
	f = fopen("/proc/self/maps", "re");
	if (!f)
		return NULL;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "[vdso]") && sscanf(line, "%lx-%lx", &lo, &hi) == 2)
			break;
	fclose(f);
	if (hi <= lo || hi - lo > (1UL << 20))
		return NULL;
	fd = memfd_create("strata-vdso", MFD_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (write(fd, (const void *)lo, hi - lo) != (ssize_t)(hi - lo)) {
		close(fd);
		return NULL;
	}
	m = module_add(r, 0, 0, "[vdso]", fd);
	if (m)
		m->pins++; /* every process has it: never worth evicting */
	return m;
}

void modules__stats(const struct module_registry *r, struct module_stats *st)
{
	*st = r->st;
}

/* --- wire (strata-agent --server): GPU call-site frames carry only the path --- */
struct module *modules__find_path(struct module_registry *r, const char *path)
{
	struct module *found = NULL;

	for (size_t b = 0; b < MODULE_BUCKETS; b++)
		for (struct module *m = r->buckets[b]; m; m = m->next)
			if (m->path && !strcmp(m->path, path)) {
				if (found)
					return NULL; /* two files (two containers' CUDA) */
				found = m;
			}
	return found;
}
