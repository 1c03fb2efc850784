/* SPDX-License-Identifier: Apache-2.0 */
/* Parsing of /proc/PID/maps. */
#ifndef STRATA_PROC_MAPS_H
#define STRATA_PROC_MAPS_H

#include <stdint.h>
#include <stddef.h>

#define PROC_MAP_PATH_MAX 4096

enum proc_map_prot {
	PROC_MAP_R = 1,
	PROC_MAP_W = 2,
	PROC_MAP_X = 4,
	PROC_MAP_SHARED = 8,
};

struct proc_map {
	uint64_t start, end; /* [start, end) */
	uint64_t pgoff;	     /* file offset of start */
	uint64_t inode;
	uint32_t dev_major, dev_minor;
	uint32_t prot;		      /* enum proc_map_prot */
	char path[PROC_MAP_PATH_MAX]; /* "" for anonymous; "[vdso]" etc. */
	int deleted;		      /* path ended in " (deleted)" (suffix removed) */
};

/* Parses one line (with or without trailing newline): 0 or -EINVAL. */
int proc_maps__parse_line(const char *line, struct proc_map *out);

/*
 * Bounds on one read: a process churning JIT code can have tens of
 * thousands of executable mappings, and each kept one costs a struct
 * proc_map (4 KiB) here and work in every user of the maps.  Anonymous
 * ones (JIT code: frame pointers only, nothing to open) go first.
 */
#define PROC_MAPS_MAX 4096	/* mappings returned at most */
#define PROC_MAPS_ANON_MAX 1024 /* of them anonymous (no file) at most */

/*
 * Reads the mappings of pid (root-relative: /proc/PID/maps), within the
 * bounds above.  With only_exec, keeps executable mappings only.  *out is
 * malloc'd.  Returns 0 or -errno (-ESRCH when the process is gone).
 */
int proc_maps__read(int pid, int only_exec, struct proc_map **out, size_t *n);
/* The same; *dropped (not NULL) += the mappings the bounds left out. */
int proc_maps__read_counted(int pid, int only_exec, struct proc_map **out, size_t *n,
			    uint64_t *dropped);

#endif /* STRATA_PROC_MAPS_H */
