// SPDX-License-Identifier: Apache-2.0
/*
 * The NCCL communicator state file (agent/gpu/gpu_comm_state.c): a save
 * writes the live processes' communicators, a save that finds the file up
 * to date writes nothing (a node without NCCL jobs rewrote it every
 * second), a changed count writes it again, and a restarted agent's
 * restore puts the entry back under a hash of its run.  Needs root (a BPF
 * map); skips otherwise.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <cmocka.h>

#include "agent/gpu/gpu_comm_state.h"
#include "bpf/strata_gpu.h"

struct env {
	char dir[64], path[96];
	int fd;
};

static int setup(void **state)
{
	static struct env e;

	snprintf(e.dir, sizeof(e.dir), "/tmp/strata-comm-state.XXXXXX");
	if (!mkdtemp(e.dir))
		return -1;
	snprintf(e.path, sizeof(e.path), "%s/nccl-comms", e.dir);
	e.fd = bpf_map_create(BPF_MAP_TYPE_HASH, "comms", sizeof(struct gpu_comm_key),
			      sizeof(struct gpu_comm_val), 4096, NULL);
	*state = &e;
	return 0;
}

static int teardown(void **state)
{
	struct env *e = *state;
	char tmp[128];

	if (e->fd >= 0)
		close(e->fd);
	unlink(e->path);
	snprintf(tmp, sizeof(tmp), "%s.tmp", e->path);
	unlink(tmp);
	rmdir(e->dir);
	return 0;
}

static ino_t inode(const char *path)
{
	struct stat st;

	return stat(path, &st) ? 0 : st.st_ino;
}

static void test_save_only_changes(void **state)
{
	struct env *e = *state;
	struct gpu_comm_state *s = gpu_comm_state__new(e->path, 1);
	struct gpu_comm_key k = { .tgid = (uint32_t)getpid(), .comm = 0x7f00dead0000ull };
	struct gpu_comm_val v = { .id_hash = 0xabcdef, .rank = 1, .nranks = 4, .seq = 10 };
	struct gpu_comm_state_stats st;
	ino_t first;

	if (e->fd < 0)
		skip(); /* not root: no BPF map */
	assert_non_null(s);
	/* no communicator yet: the file is written once (a previous run's
	 * entries must not stay), then left alone */
	assert_int_equal(gpu_comm_state__save(s, e->fd, "/proc"), 0);
	first = inode(e->path);
	assert_true(first != 0);
	assert_int_equal(gpu_comm_state__save(s, e->fd, "/proc"), 0);
	assert_true(inode(e->path) == first);
	gpu_comm_state__stats(s, &st);
	assert_int_equal(st.saves, 2);
	assert_int_equal(st.unchanged, 1);

	/* a communicator of this (live) process: written; the count moves:
	 * written again; nothing moves: not */
	assert_int_equal(bpf_map_update_elem(e->fd, &k, &v, BPF_ANY), 0);
	assert_int_equal(gpu_comm_state__save(s, e->fd, "/proc"), 0);
	assert_true(inode(e->path) != first);
	first = inode(e->path);
	v.seq = 11;
	assert_int_equal(bpf_map_update_elem(e->fd, &k, &v, BPF_ANY), 0);
	assert_int_equal(gpu_comm_state__save(s, e->fd, "/proc"), 0);
	assert_true(inode(e->path) != first);
	first = inode(e->path);
	assert_int_equal(gpu_comm_state__save(s, e->fd, "/proc"), 0);
	assert_true(inode(e->path) == first);
	/* the file removed under it: written again, unchanged as it is */
	assert_int_equal(unlink(e->path), 0);
	assert_int_equal(gpu_comm_state__save(s, e->fd, "/proc"), 0);
	assert_true(inode(e->path) != 0);
	gpu_comm_state__stats(s, &st);
	assert_int_equal(st.saves, 6);
	assert_int_equal(st.unchanged, 2);
	assert_int_equal(st.saved_entries, 1);
	gpu_comm_state__free(s);

	/* a restarted agent (another run id) puts it back: its count goes on,
	 * under a hash of its own */
	assert_int_equal(bpf_map_delete_elem(e->fd, &k), 0);
	s = gpu_comm_state__new(e->path, 2);
	assert_non_null(s);
	assert_int_equal(gpu_comm_state__restore(s, e->fd, "/proc"), 1);
	memset(&v, 0, sizeof(v));
	assert_int_equal(bpf_map_lookup_elem(e->fd, &k, &v), 0);
	assert_int_equal(v.seq, 11);
	assert_int_equal(v.rank, 1);
	assert_int_equal(v.nranks, 4);
	assert_true(v.id_hash != 0xabcdef);
	gpu_comm_state__free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_save_only_changes),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
