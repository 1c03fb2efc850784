// SPDX-License-Identifier: Apache-2.0
/*
 * The per-kernel paths (agent/core/features.c) from probe results: which
 * exit program is loaded and what each path is called, for the kernels of
 * docs/kernels.md; and the server's bounded count of what agents report
 * (server/kernel_paths.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/core/features.h"
#include "server/kernel_paths.h"

/* The features of a kernel of that version, as the probes find them. */
static struct kernel_features kernel(int major, int minor)
{
	struct kernel_features f = { .release = "test" };
	int v = major * 100 + minor;

	f.have[KFEAT_BTF] = v >= 504;
	f.have[KFEAT_RINGBUF] = v >= 508;
	f.have[KFEAT_TASK_STORAGE] = v >= 511;
	f.have[KFEAT_TASK_PT_REGS] = v >= 515;
	f.have[KFEAT_BPF_LOOP] = v >= 517;
	f.have[KFEAT_UPROBE_MULTI] = v >= 606;
	f.have[KFEAT_VMA_ITER] = v >= 607;
	f.have[KFEAT_EXIT_TP_MM] = v >= 616;
	f.have[KFEAT_EXIT_MM_RELEASE] = v >= 505 && v < 616; /* tried only where needed */
	return f;
}

static void check(int major, int minor, const char *hook, const char *maps, const char *gpu,
		  const char *stacks)
{
	struct kernel_features f = kernel(major, minor);

	assert_string_equal(kernel_features__path(&f, KPATH_EXIT_HOOK, NULL), hook);
	assert_string_equal(kernel_features__path(&f, KPATH_EXIT_MAPS, NULL), maps);
	assert_string_equal(kernel_features__path(&f, KPATH_GPU_PROBES, NULL), gpu);
	assert_string_equal(kernel_features__path(&f, KPATH_USER_STACKS, NULL), stacks);
}

static void test_paths_per_kernel(void **state)
{
	(void)state;
	check(6, 1, "fentry_exit_mm_release", "kept_maps", "single_uprobes", "cfi_and_fp");
	check(6, 6, "fentry_exit_mm_release", "kept_maps", "uprobe_multi", "cfi_and_fp");
	check(6, 8, "fentry_exit_mm_release", "vma_iter", "uprobe_multi", "cfi_and_fp");
	check(6, 12, "fentry_exit_mm_release", "vma_iter", "uprobe_multi", "cfi_and_fp");
	check(6, 18, "tracepoint", "vma_iter", "uprobe_multi", "cfi_and_fp");
	check(5, 15, "fentry_exit_mm_release", "kept_maps", "single_uprobes", "fp_only");
}

static void test_exit_prog(void **state)
{
	struct kernel_features f = kernel(6, 12);
	bool early, vmas, fb;

	(void)state;
	kernel_features__exit_prog(&f, &early, &vmas);
	assert_true(early && vmas);
	/* no trampolines (a sandbox): the late tracepoint, and no walk (no mm) */
	f.have[KFEAT_EXIT_MM_RELEASE] = false;
	kernel_features__exit_prog(&f, &early, &vmas);
	assert_false(early);
	assert_false(vmas);
	assert_string_equal(kernel_features__path(&f, KPATH_EXIT_HOOK, &fb), "late_tracepoint");
	assert_true(fb);
	assert_string_equal(kernel_features__path(&f, KPATH_EXIT_MAPS, &fb), "kept_maps");
	assert_true(fb);
	f = kernel(6, 18);
	kernel_features__exit_prog(&f, &early, &vmas);
	assert_false(early);
	assert_true(vmas);
	assert_string_equal(kernel_features__path(&f, KPATH_EXIT_HOOK, &fb), "tracepoint");
	assert_false(fb);
}

static void test_required(void **state)
{
	struct kernel_features f = kernel(5, 10);
	char why[256];

	(void)state;
	assert_true(kernel_features__missing_required(&f, why, sizeof(why)));
	assert_string_equal(why, "task_storage (Linux 5.11), task_pt_regs (Linux 5.15)");
	f = kernel(6, 1);
	assert_false(kernel_features__missing_required(&f, why, sizeof(why)));
	assert_string_equal(why, "");
	f = kernel(5, 4);
	assert_true(kernel_features__missing_required(&f, why, 8)); /* truncated, terminated */
	assert_int_equal(strlen(why), 7);
}

static void test_server_counts(void **state)
{
	struct kernel_paths k;
	char *buf = NULL;
	size_t len = 0;
	FILE *o;

	(void)state;
	kernel_paths__init(&k);
	kernel_paths__note(&k, "exit_mappings", "kept_maps", true);
	kernel_paths__note(&k, "exit_mappings", "kept_maps", true);
	kernel_paths__note(&k, "exit_mappings", "vma_iter", false);
	kernel_paths__note(&k, "exit_mappings", "bad\"label", false); /* refused */
	kernel_paths__note(&k, "", "x", false);
	for (int i = 0; i < KERNEL_PATHS_MAX + 5; i++) {
		char taken[16];

		snprintf(taken, sizeof(taken), "t%d", i);
		kernel_paths__note(&k, "gpu_probes", taken, false);
	}
	o = open_memstream(&buf, &len);
	assert_non_null(o);
	kernel_paths__print(&k, o);
	fclose(o);
	assert_non_null(strstr(buf, "strata_agent_kernel_path_batches_total{path=\"exit_mappings\","
				    "taken=\"kept_maps\",fallback=\"1\"} 2\n"));
	assert_non_null(strstr(buf, "taken=\"vma_iter\",fallback=\"0\"} 1\n"));
	assert_null(strstr(buf, "bad"));
	/* 2 refused + 32 - 2 rows taken by gpu_probes, the 7 more dropped */
	assert_non_null(strstr(buf, "strata_agent_kernel_paths_dropped_total 9\n"));
	free(buf);
	kernel_paths__fini(&k);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_paths_per_kernel),
		cmocka_unit_test(test_exit_prog),
		cmocka_unit_test(test_required),
		cmocka_unit_test(test_server_counts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
