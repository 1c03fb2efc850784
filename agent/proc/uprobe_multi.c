// SPDX-License-Identifier: Apache-2.0
#include "agent/proc/uprobe_multi.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
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

static int link_create(int prog_fd, const char *path, const uint64_t *offsets,
		       const uint64_t *cookies, size_t n, bool ret, int pid)
{
	struct link_create_uprobe_multi a;
	long fd;

	if (!n)
		return -EINVAL;
	memset(&a, 0, sizeof(a));
	a.prog_fd = (uint32_t)prog_fd;
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

int uprobe_multi__attach(const struct bpf_program *prog, const char *path, const uint64_t *offsets,
			 const uint64_t *cookies, size_t n, bool ret, int pid)
{
	return link_create(bpf_program__fd(prog), path, offsets, cookies, n, ret, pid);
}

/* The trial link's probe site: never called, so the breakpoint the trial
 * puts on its first instruction (in this process only) is never hit. */
__attribute__((noinline, used)) void uprobe_multi_trial_site(void)
{
	__asm__ volatile("" ::: "memory");
}

/* File offset of addr in the file mapped there (/proc/self/maps). */
static int self_file_offset(uintptr_t addr, uint64_t *off)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	int err = -ENOENT;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		unsigned long start, end, pgoff;

		if (sscanf(line, "%lx-%lx %*4s %lx", &start, &end, &pgoff) == 3 && addr >= start &&
		    addr < end) {
			*off = addr - start + pgoff;
			err = 0;
			break;
		}
	}
	fclose(f);
	return err;
}

int uprobe_multi__probe(void)
{
	/* r0 = 0; exit */
	const struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	LIBBPF_OPTS(bpf_prog_load_opts, o,
		    .expected_attach_type = (enum bpf_attach_type)STRATA_BPF_TRACE_UPROBE_MULTI);
	uint64_t off;
	int prog, link, err;

	err = self_file_offset((uintptr_t)&uprobe_multi_trial_site, &off);
	if (err)
		return err;
	prog = bpf_prog_load(BPF_PROG_TYPE_KPROBE, "strata_um_trial", "GPL", insns, 2, &o);
	if (prog < 0)
		return prog;
	link = link_create(prog, "/proc/self/exe", &off, NULL, 1, false, getpid());
	close(prog);
	if (link < 0)
		return link;
	close(link);
	return 0;
}
