// SPDX-License-Identifier: Apache-2.0
#include "agent/core/features.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>

#include "agent/proc/uprobe_multi.h"
#include "lib/clock.h"
#include "lib/log.h"

static const struct {
	const char *name, *since;
} feature_desc[KFEAT_MAX] = {
#define X(id, name, since) [id] = { name, since },
	STRATA_KERNEL_FEATURES(X)
#undef X
};

static const char *const path_names[KPATH_MAX] = {
#define X(id, name) [id] = name,
	STRATA_KERNEL_PATHS(X)
#undef X
};

static bool required(enum kernel_feature id)
{
	return id == KFEAT_BTF || id == KFEAT_RINGBUF || id == KFEAT_TASK_STORAGE ||
	       id == KFEAT_TASK_PT_REGS;
}

/* A function of that name in the kernel's BTF (a kfunc, or an fentry
 * target); module BTF does not matter here. */
static bool have_func(const struct btf *vmlinux, const char *name)
{
	return vmlinux && btf__find_by_name_kind(vmlinux, name, BTF_KIND_FUNC) > 0;
}

/*
 * sched_process_exit fires before exit_mm() since it gained a group_dead
 * argument (both in one kernel change): its BTF typedef
 * btf_trace_sched_process_exit is a pointer to a prototype (void *ctx,
 * struct task_struct *p, bool group_dead).
 */
static bool exit_tracepoint_has_mm(const struct btf *vmlinux)
{
	const struct btf_type *t;
	int id;

	if (!vmlinux)
		return false;
	id = btf__find_by_name_kind(vmlinux, "btf_trace_sched_process_exit", BTF_KIND_TYPEDEF);
	if (id <= 0)
		return false;
	t = btf__type_by_id(vmlinux, btf__resolve_type(vmlinux, id));
	if (!t || !btf_is_ptr(t))
		return false;
	t = btf__type_by_id(vmlinux, t->type);
	return t && btf_is_func_proto(t) && btf_vlen(t) >= 3;
}

/* Test hook: STRATA_KERNEL_FEATURES_OFF="vma_iter,uprobe_multi" takes the
 * fallback paths on a kernel that has them (tests run them on the host). */
static void features_off(struct kernel_features *f, const char *list)
{
	for (const char *p = list; p && *p;) {
		size_t n = strcspn(p, ",");

		for (int i = 0; i < KFEAT_MAX; i++)
			if (strlen(feature_desc[i].name) == n &&
			    !strncmp(p, feature_desc[i].name, n)) {
				f->have[i] = false;
				pr_info("features: %s off (STRATA_KERNEL_FEATURES_OFF)",
					feature_desc[i].name);
			}
		p += n + (p[n] == ',');
	}
}

/*
 * fentry on func loads and attaches (a program returning 0, attached for a
 * moment).  In BTF is not enough: some kernels refuse trampolines (no
 * DYNAMIC_FTRACE_WITH_DIRECT_CALLS, or a sandbox: EPERM at load).
 */
static bool fentry_works(const struct btf *vmlinux, const char *func)
{
	const struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0 }, /* r0 = 0 */
		{ .code = BPF_JMP | BPF_EXIT },
	};
	int id = vmlinux ? btf__find_by_name_kind(vmlinux, func, BTF_KIND_FUNC) : -1;
	int prog, link;

	if (id <= 0)
		return false;
	LIBBPF_OPTS(bpf_prog_load_opts, o, .expected_attach_type = BPF_TRACE_FENTRY,
		    .attach_btf_id = (__u32)id);
	prog = bpf_prog_load(BPF_PROG_TYPE_TRACING, "strata_fentry", "GPL", insns, 2, &o);
	if (prog < 0)
		return false;
	link = bpf_raw_tracepoint_open(NULL, prog);
	close(prog);
	if (link < 0)
		return false;
	close(link);
	return true;
}

void kernel_features__probe(struct kernel_features *f)
{
	uint64_t t0 = mono_ns();
	struct utsname u;
	struct btf *vmlinux;

	memset(f, 0, sizeof(*f));
	if (uname(&u) == 0)
		snprintf(f->release, sizeof(f->release), "%s", u.release);
	f->have[KFEAT_BTF] = access("/sys/kernel/btf/vmlinux", R_OK) == 0;
	f->have[KFEAT_RINGBUF] = libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, NULL) == 1;
	f->have[KFEAT_TASK_STORAGE] =
		libbpf_probe_bpf_map_type(BPF_MAP_TYPE_TASK_STORAGE, NULL) == 1;
	f->have[KFEAT_TASK_PT_REGS] =
		libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_task_pt_regs, NULL) == 1;
	f->have[KFEAT_BPF_LOOP] =
		libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_loop, NULL) == 1;
	f->have[KFEAT_UPROBE_MULTI] = uprobe_multi__probe() == 0;
	vmlinux = f->have[KFEAT_BTF] ? btf__load_vmlinux_btf() : NULL;
	if (libbpf_get_error(vmlinux))
		vmlinux = NULL;
	/* the three came together (6.7) */
	f->have[KFEAT_VMA_ITER] = have_func(vmlinux, "bpf_iter_task_vma_new") &&
				  have_func(vmlinux, "bpf_iter_task_vma_next") &&
				  have_func(vmlinux, "bpf_iter_task_vma_destroy");
	f->have[KFEAT_EXIT_TP_MM] = exit_tracepoint_has_mm(vmlinux);
	/* only needed (and tried: a trampoline costs a grace period to
	 * take down) where the tracepoint comes too late */
	f->have[KFEAT_EXIT_MM_RELEASE] =
		!f->have[KFEAT_EXIT_TP_MM] && fentry_works(vmlinux, "exit_mm_release");
	btf__free(vmlinux);
	features_off(f, getenv("STRATA_KERNEL_FEATURES_OFF"));
	f->probe_ns = mono_ns() - t0;
}

const char *kernel_feature__name(enum kernel_feature id)
{
	return (unsigned)id < KFEAT_MAX ? feature_desc[id].name : "?";
}

const char *kernel_feature__since(enum kernel_feature id)
{
	return (unsigned)id < KFEAT_MAX ? feature_desc[id].since : "?";
}

const char *kernel_path__name(enum kernel_path id)
{
	return (unsigned)id < KPATH_MAX ? path_names[id] : "?";
}

void kernel_features__exit_prog(const struct kernel_features *f, bool *early, bool *with_vmas)
{
	*early = !f->have[KFEAT_EXIT_TP_MM] && f->have[KFEAT_EXIT_MM_RELEASE];
	/* the walk needs the mm: no point on the late tracepoint */
	*with_vmas = f->have[KFEAT_VMA_ITER] && (f->have[KFEAT_EXIT_TP_MM] || *early);
}

const char *kernel_features__path(const struct kernel_features *f, enum kernel_path id,
				  bool *fallback)
{
	bool early, vmas, fb = false;
	const char *name = "?";

	kernel_features__exit_prog(f, &early, &vmas);
	switch (id) {
	case KPATH_EXIT_HOOK:
		/* fentry is as good as the tracepoint: not a fallback */
		name = f->have[KFEAT_EXIT_TP_MM] ? "tracepoint"
		       : early			 ? "fentry_exit_mm_release"
						 : "late_tracepoint";
		fb = !f->have[KFEAT_EXIT_TP_MM] && !early;
		break;
	case KPATH_EXIT_MAPS:
		name = vmas ? "vma_iter" : "kept_maps";
		fb = !vmas;
		break;
	case KPATH_GPU_PROBES:
		name = f->have[KFEAT_UPROBE_MULTI] ? "uprobe_multi" : "single_uprobes";
		fb = !f->have[KFEAT_UPROBE_MULTI];
		break;
	case KPATH_USER_STACKS:
		name = f->have[KFEAT_BPF_LOOP] ? "cfi_and_fp" : "fp_only";
		fb = !f->have[KFEAT_BPF_LOOP];
		break;
	default:
		break;
	}
	if (fallback)
		*fallback = fb;
	return name;
}

bool kernel_features__missing_required(const struct kernel_features *f, char *buf, size_t n)
{
	size_t len = 0;

	if (n)
		buf[0] = '\0';
	for (int i = 0; i < KFEAT_MAX; i++) {
		if (!required(i) || f->have[i])
			continue;
		int w = snprintf(buf + len, len < n ? n - len : 0, "%s%s (Linux %s)",
				 len ? ", " : "", feature_desc[i].name, feature_desc[i].since);
		if (w > 0)
			len += (size_t)w;
	}
	return len > 0;
}

/* What each fallback loses, for the log. */
static const char *const path_loses[KPATH_MAX] = {
	[KPATH_EXIT_HOOK] = "exit records carry no address space: exit-time mappings lost",
	[KPATH_EXIT_MAPS] = "mappings are those last read from /proc: a process that exits "
			    "before its first read (or after an unread dlopen) keeps those "
			    "frames unresolved",
	[KPATH_GPU_PROBES] = ("one link per probed function: slower attach, and a grace period "
			      "per probe when a library is dropped"),
	[KPATH_USER_STACKS] = "no CFI (hybrid) unwinding and no Python frames",
};

void kernel_features__log(const struct kernel_features *f)
{
	char line[512];
	size_t len = 0;

	for (int i = 0; i < KFEAT_MAX; i++) {
		/* the fentry hook is not tried where the tracepoint will do */
		bool untried = i == KFEAT_EXIT_MM_RELEASE && f->have[KFEAT_EXIT_TP_MM];
		int w = snprintf(line + len, len < sizeof(line) ? sizeof(line) - len : 0, " %s=%s",
				 feature_desc[i].name,
				 untried      ? "untried"
				 : f->have[i] ? "yes"
					      : "no");
		if (w > 0)
			len += (size_t)w;
	}
	pr_info("features: kernel %s (probed in %.1f ms):%s", f->release, (double)f->probe_ns / 1e6,
		line);
	for (int i = 0; i < KPATH_MAX; i++) {
		bool fb;
		const char *p = kernel_features__path(f, i, &fb);

		if (fb)
			pr_info("features: %s: %s (fallback: %s)", path_names[i], p, path_loses[i]);
		else
			pr_info("features: %s: %s", path_names[i], p);
	}
}
