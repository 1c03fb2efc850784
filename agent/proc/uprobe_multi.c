// SPDX-License-Identifier: Apache-2.0
#include "agent/proc/uprobe_multi.h"

#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/libbpf.h>
#include <linux/bpf.h>

/* From the kernel's uapi (include/uapi/linux/bpf.h, v6.6): the system's
 * headers may predate them. */
#define STRATA_BPF_TRACE_UPROBE_MULTI 48
#define STRATA_BPF_F_UPROBE_MULTI_RETURN 1U

/* union bpf_attr, BPF_LINK_CREATE with its uprobe_multi member. */
struct link_create_uprobe_multi {
	uint32_t prog_fd, target_fd, attach_type, flags;
	uint64_t path, offsets, ref_ctr_offsets, cookies;
	uint32_t cnt, um_flags, pid, pad;
};
_Static_assert(sizeof(struct link_create_uprobe_multi) == 64, "link_create layout");

int uprobe_multi__prepare(struct bpf_program *prog)
{
	return bpf_program__set_expected_attach_type(
		prog, (enum bpf_attach_type)STRATA_BPF_TRACE_UPROBE_MULTI);
}

int uprobe_multi__attach(const struct bpf_program *prog, const char *path, const uint64_t *offsets,
			 const uint64_t *cookies, size_t n, bool ret, int pid)
{
	struct link_create_uprobe_multi a;
	long fd;

	if (!n)
		return -EINVAL;
	memset(&a, 0, sizeof(a));
	a.prog_fd = (uint32_t)bpf_program__fd(prog);
	a.attach_type = STRATA_BPF_TRACE_UPROBE_MULTI;
	a.path = (uint64_t)(uintptr_t)path;
	a.offsets = (uint64_t)(uintptr_t)offsets;
	a.cookies = (uint64_t)(uintptr_t)cookies;
	a.cnt = (uint32_t)n;
	a.um_flags = ret ? STRATA_BPF_F_UPROBE_MULTI_RETURN : 0;
	a.pid = pid > 0 ? (uint32_t)pid : 0;
	fd = syscall(__NR_bpf, BPF_LINK_CREATE, &a, sizeof(a));
	return fd < 0 ? -errno : (int)fd;
}
