// SPDX-License-Identifier: Apache-2.0
/*
 * GPU layer logic without BPF: the probe budget (duty-cycling decisions,
 * frees never shed), symbol-name matching (versioned, _ptsz, _v2, NCCL
 * aliases), return-code names, the library finder's ldconfig parsing, the
 * leak groups (outstanding, growth, exit) and the tally / leak tables.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/gpu/gpu_budget.h"
#include "agent/gpu/gpu_data.h"
#include "agent/gpu/gpu_leaks.h"
#include "agent/gpu/gpu_libs.h"
#include "agent/gpu/gpu_names.h"

#define SEC 1000000000ULL
#define COST_NS 11000.0

/* ---- budget ------------------------------------------------------------ */

static void budget_light_load_stays_attached(void **state)
{
	struct gpu_budget b;
	uint64_t shed = 100, fixed = 10; /* per second: 0.12% of a CPU */

	gpu_budget__init(&b, 0.01, COST_NS, SEC, 0);
	assert_true(gpu_budget__plan(&b, &shed, &fixed, 1, SEC, SEC) == 1.0);
	assert_true(b.attached);
}

static void budget_heavy_load_sheds_to_the_budget(void **state)
{
	struct gpu_budget b;
	/* process 0: 50k launches/s = 55% of a CPU; process 1: light */
	uint64_t shed[2] = { 50000, 10 }, fixed[2] = { 0, 0 };
	double want = 0.01 / (50000 * COST_NS / 1e9);

	gpu_budget__init(&b, 0.01, COST_NS, SEC, 0);
	assert_float_equal(gpu_budget__plan(&b, shed, fixed, 2, SEC, SEC), want, 1e-9);
	/* hits seen while attached a quarter of the time are a full-rate
	 * estimate x 4: the same plan */
	shed[0] = (uint64_t)(50000 * want);
	assert_float_equal(gpu_budget__plan(&b, shed, fixed, 2, (uint64_t)(want * SEC), SEC), want,
			   1e-3);
}

static void budget_fixed_probes_leave_no_room(void **state)
{
	struct gpu_budget b;
	/* frees + NCCL alone take 2.2% of a CPU: shed to the floor, never 0 */
	uint64_t shed = 1000, fixed = 2000;

	gpu_budget__init(&b, 0.01, COST_NS, SEC, 0);
	assert_float_equal(gpu_budget__plan(&b, &shed, &fixed, 1, SEC, SEC), b.min_ratio, 1e-12);
}

static void budget_recovers_by_doubling(void **state)
{
	struct gpu_budget b;
	uint64_t heavy = 20000, quiet = 0, fixed = 0; /* 22% of a CPU */
	double r;

	gpu_budget__init(&b, 0.01, COST_NS, SEC, 0);
	r = gpu_budget__plan(&b, &heavy, &fixed, 1, SEC, SEC);
	assert_float_equal(r, 0.01 / 0.22, 1e-9);
	assert_float_equal(gpu_budget__plan(&b, &quiet, &fixed, 1, SEC, SEC), 2 * r, 1e-12);
	assert_float_equal(gpu_budget__plan(&b, &quiet, &fixed, 1, SEC, SEC), 4 * r, 1e-12);
}

static void budget_unlimited(void **state)
{
	struct gpu_budget b;
	uint64_t heavy = 1000000, fixed = 1000000;

	gpu_budget__init(&b, -1, COST_NS, SEC, 0);
	assert_true(gpu_budget__plan(&b, &heavy, &fixed, 1, SEC, SEC) == 1.0);
}

/* The duty cycle achieves the planned ratio and reports it. */
static void budget_tick_achieves_ratio(void **state)
{
	struct gpu_budget b;
	uint64_t next = 0, flips = 0;

	gpu_budget__init(&b, 0.01, COST_NS, SEC, 0);
	b.ratio = 0.25;
	for (uint64_t t = 0; t <= 10 * SEC; t += SEC / 100)
		flips += gpu_budget__tick(&b, t, &next);
	assert_float_equal(gpu_budget__achieved(&b), 0.25, 0.02);
	assert_in_range(flips, 18, 21); /* off and on once a period */
	assert_true(next > 10 * SEC - SEC && next <= 11 * SEC);
	/* back to full: attached at the next tick */
	b.ratio = 1.0;
	gpu_budget__tick(&b, 11 * SEC, &next);
	assert_true(b.attached);
}

static void frees_and_nccl_never_shed(void **state)
{
	for (uint32_t api = 0; api < GPU_API_MAX; api++) {
		uint32_t k = gpu_api_kind(api);
		bool never = k == GPU_KIND_FREE || k == GPU_KIND_NCCL_INIT || k == GPU_KIND_COLL ||
			     k == GPU_KIND_P2P || k == GPU_KIND_GROUP;

		assert_int_equal(gpu_budget__sheddable(api), !never);
	}
	assert_false(gpu_budget__sheddable(GPU_API_cudaFree));
	assert_false(gpu_budget__sheddable(GPU_API_cuMemFreeAsync));
	assert_true(gpu_budget__sheddable(GPU_API_cudaLaunchKernel));
	assert_true(gpu_budget__sheddable(GPU_API_cudaMalloc));
	assert_false(gpu_budget__sheddable(GPU_API_MAX));
}

/* The layer of every API follows its library's prefix: nccl*, cuda*, cu*
 * (call_stale() in BPF relies on it to tell a missed return from nesting). */
static void layers_follow_the_library(void **state)
{
	for (uint32_t api = 0; api < GPU_API_MAX; api++) {
		const char *n = gpu_api_name(api);
		uint32_t want = !strncmp(n, "nccl", 4)	 ? GPU_LAYER_NCCL
				: !strncmp(n, "cuda", 4) ? GPU_LAYER_RUNTIME
							 : GPU_LAYER_DRIVER;

		assert_int_equal(gpu_api_layer(api), want);
	}
}

/* ---- names ------------------------------------------------------------- */

static void symbol_names(void **state)
{
	assert_int_equal(gpu_api_of_symbol("cudaMalloc"), GPU_API_cudaMalloc);
	assert_int_equal(gpu_api_of_symbol("cudaMalloc@@libcudart.so.13"), GPU_API_cudaMalloc);
	assert_int_equal(gpu_api_of_symbol("cudaMalloc@libcudart.so.12"), GPU_API_cudaMalloc);
	assert_int_equal(gpu_api_of_symbol("cudaLaunchKernel_ptsz"), GPU_API_cudaLaunchKernel);
	assert_int_equal(gpu_api_of_symbol("cudaMemcpyAsync_ptsz@@libcudart.so.13"),
			 GPU_API_cudaMemcpyAsync);
	assert_int_equal(gpu_api_of_symbol("cuMemAlloc_v2"), GPU_API_cuMemAlloc);
	assert_int_equal(gpu_api_of_symbol("cuMemFree_v2"), GPU_API_cuMemFree);
	assert_int_equal(gpu_api_of_symbol("cuLaunchKernel_ptsz"), GPU_API_cuLaunchKernel);
	assert_int_equal(gpu_api_of_symbol("pncclAllReduce"), GPU_API_ncclAllReduce);
	assert_int_equal(gpu_api_of_symbol("ncclCommInitRank"), GPU_API_ncclCommInitRank);
	/* near misses are not ours */
	assert_int_equal(gpu_api_of_symbol("cudaMallocPitch"), -1);
	assert_int_equal(gpu_api_of_symbol("cudaMalloc_v3"), -1);
	assert_int_equal(gpu_api_of_symbol("__cudaLaunchKernel"), -1);
	assert_int_equal(gpu_api_of_symbol("cudaMallo"), -1);
	assert_int_equal(gpu_api_of_symbol(""), -1);
	assert_int_equal(gpu_api_of_symbol("@@libcudart.so.13"), -1);
}

static void return_code_names(void **state)
{
	assert_string_equal(gpu_ret_name(GPU_API_cudaMalloc, 2), "cudaErrorMemoryAllocation");
	assert_string_equal(gpu_ret_name(GPU_API_cudaLaunchKernel, 35),
			    "cudaErrorInsufficientDriver");
	assert_string_equal(gpu_ret_name(GPU_API_cuMemAlloc, 2), "CUDA_ERROR_OUT_OF_MEMORY");
	assert_string_equal(gpu_ret_name(GPU_API_ncclAllReduce, 4), "ncclInvalidArgument");
	assert_string_equal(gpu_ret_name(GPU_API_ncclCommInitRank, 1), "ncclUnhandledCudaError");
	assert_string_equal(gpu_ret_name(GPU_API_cudaFree, 0), "success");
	assert_null(gpu_ret_name(GPU_API_cudaMalloc, 987654));
	assert_string_equal(gpu_api_name(GPU_API_MAX), "?");
}

static void ldconfig_lines(void **state)
{
	char buf[256];

	assert_true(gpu_libs_name_match("libcudart.so.13"));
	assert_true(gpu_libs_name_match("libcuda.so"));
	assert_true(gpu_libs_name_match("libnccl.so.2.27.3"));
	assert_false(gpu_libs_name_match("libcudart_static.a"));
	assert_false(gpu_libs_name_match("libcudadevrt.a"));
	assert_false(gpu_libs_name_match("libcudnn.so.9"));
	assert_string_equal(gpu_libs_ldconfig_line("\tlibcuda.so.1 (libc6,x86-64) => "
						   "/usr/lib/x86_64-linux-gnu/libcuda.so.1\n",
						   buf, sizeof(buf)),
			    "/usr/lib/x86_64-linux-gnu/libcuda.so.1");
	assert_null(gpu_libs_ldconfig_line("\tlibcublas.so.13 (libc6,x86-64) => /x/libcublas.so.13",
					   buf, sizeof(buf)));
	assert_null(gpu_libs_ldconfig_line("1234 libs found in cache `/etc/ld.so.cache'", buf,
					   sizeof(buf)));
	assert_null(
		gpu_libs_ldconfig_line("\tlibnccl.so (libc6) => relative/path", buf, sizeof(buf)));
	assert_null(gpu_libs_ldconfig_line("\tlibnccl.so (libc6) => /a/very/long/path", buf, 8));
}

/* ---- leak groups ---------------------------------------------------------- */

static const struct gpu_leak *find_leak(const struct gpu_leak *v, size_t n, uint32_t tgid,
					uint64_t stack)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].tgid == tgid && v[i].stack_id == stack)
			return &v[i];
	return NULL;
}

static void leak_groups_growth_and_exit(void **state)
{
	struct gpu_leaks lk;
	struct gpu_leak *v;
	size_t n;

	gpu_leaks__init(&lk, 16);
	/* t=1 s: pid 10 has 2 x 1 MiB at stack 7 (made at 0.5 s and 0.9 s) and
	 * a 4 KiB scratch at stack 8 */
	gpu_leaks__begin(&lk, 1 * SEC);
	assert_int_equal(gpu_leaks__add(&lk, 10, 7, 1 << 20, SEC / 2, false), 0);
	assert_int_equal(gpu_leaks__add(&lk, 10, 7, 1 << 20, 9 * SEC / 10, false), 0);
	assert_int_equal(gpu_leaks__add(&lk, 10, 8, 4096, SEC, false), 0);
	gpu_leaks__end(&lk);
	/* t=3 s: stack 7 grew to 4 MiB, the scratch was freed */
	gpu_leaks__begin(&lk, 3 * SEC);
	for (int i = 0; i < 4; i++)
		gpu_leaks__add(&lk, 10, 7, 1 << 20, SEC / 2 + (uint64_t)i, false);
	gpu_leaks__end(&lk);
	v = gpu_leaks__outstanding(&lk, &n);
	assert_int_equal(n, 1);
	assert_int_equal(v[0].bytes, 4 << 20);
	assert_int_equal(v[0].count, 4);
	assert_int_equal(v[0].oldest_ns, SEC / 2);
	assert_int_equal(v[0].first_bytes, 2 << 20); /* growth from the first sight */
	assert_int_equal(v[0].first_ns, 1 * SEC);
	assert_int_equal(v[0].last_ns, 3 * SEC);
	assert_false(v[0].at_exit);
	free(v);
	/* t=4 s: the process exited with 1 MiB at stack 7: kept at exit, and
	 * kept in the next snapshots that no longer see it */
	gpu_leaks__begin(&lk, 4 * SEC);
	gpu_leaks__add(&lk, 10, 7, 1 << 20, SEC / 2, true);
	gpu_leaks__end(&lk);
	gpu_leaks__begin(&lk, 5 * SEC);
	gpu_leaks__end(&lk);
	v = gpu_leaks__outstanding(&lk, &n);
	assert_int_equal(n, 1);
	assert_true(find_leak(v, n, 10, 7)->at_exit);
	assert_int_equal(find_leak(v, n, 10, 7)->bytes, 1 << 20);
	free(v);
	gpu_leaks__fini(&lk);
}

static void leak_groups_bounded(void **state)
{
	struct gpu_leaks lk;

	gpu_leaks__init(&lk, 2);
	gpu_leaks__begin(&lk, SEC);
	assert_int_equal(gpu_leaks__add(&lk, 1, 1, 10, 0, false), 0);
	assert_int_equal(gpu_leaks__add(&lk, 1, 2, 10, 0, false), 0);
	assert_int_equal(gpu_leaks__add(&lk, 1, 3, 10, 0, false), -ENOSPC);
	assert_int_equal(gpu_leaks__add(&lk, 1, 1, 10, 0, false), 0); /* known group: fine */
	gpu_leaks__end(&lk);
	gpu_leaks__fini(&lk);
}

/* ---- tables ---------------------------------------------------------------- */

static char *write_to_string(int (*fn)(const struct gpu_data *, FILE *), const struct gpu_data *d)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	assert_int_equal(fn(d, f), 0);
	fclose(f);
	return buf;
}

static void tally_table(void **state)
{
	struct gpu_tally_row tally[] = {
		{ .key = { .tgid = 1, .api = GPU_API_cudaMalloc },
		  .val = { .calls = 2, .total_ns = 4000, .min_ns = 1000, .max_ns = 3000 } },
		{ .key = { .tgid = 2, .api = GPU_API_cudaMalloc },
		  .val = { .calls = 1, .total_ns = 5000, .min_ns = 5000, .max_ns = 5000 } },
		{ .key = { .tgid = 1, .api = GPU_API_ncclAllReduce },
		  .val = { .calls = 4, .total_ns = 4000000, .min_ns = 1, .max_ns = 2000000 } },
	};
	struct gpu_err_row errs[] = {
		{ .key = { .tgid = 2, .api = GPU_API_cudaMalloc, .code = 2 }, .count = 1 },
		{ .key = { .tgid = 1, .api = GPU_API_ncclAllReduce, .code = 12345 }, .count = 3 },
	};
	struct gpu_data d = { .tally = tally,
			      .ntally = 3,
			      .errs = errs,
			      .nerrs = 2,
			      .nprocs = 2,
			      .sampling_ratio = 0.5 };
	char *s = write_to_string(gpu_data__write_tally, &d);

	/* summed over processes: 3 calls, 9 us, min 1, avg 3, max 5, 1 error */
	assert_non_null(strstr(s, "divide their calls by 0.5000"));
	assert_non_null(strstr(s, "cudaMalloc                          3        0.009       1.00"
				  "       3.00       5.00        1\n"));
	assert_non_null(strstr(s, "ncclAllReduce                       4        4.000"));
	assert_non_null(strstr(s, "cudaMalloc                 cudaErrorMemoryAllocation"));
	assert_non_null(strstr(s, "ncclAllReduce              12345")); /* unknown: the number */
	free(s);
}

static void leak_table(void **state)
{
	struct gpu_leak leaks[] = {
		{ .tgid = 5,
		  .stack_id = 9,
		  .bytes = 1000,
		  .count = 1,
		  .oldest_ns = 1 * SEC,
		  .first_ns = 2 * SEC,
		  .first_bytes = 1000,
		  .last_ns = 4 * SEC },
		{ .tgid = 5,
		  .stack_id = 7,
		  .bytes = 5 << 20,
		  .count = 5,
		  .oldest_ns = 1 * SEC,
		  .first_ns = 2 * SEC,
		  .first_bytes = 1 << 20,
		  .last_ns = 4 * SEC },
	};
	struct gpu_proc_info procs[] = { { .tgid = 5, .rank = 3, .nccl_rank = -1 } };
	struct gpu_data d = { .leaks = leaks, .nleaks = 2, .procs = procs, .nprocs = 1 };
	char *s = write_to_string(gpu_data__write_leaks_text, &d);
	char *big = strstr(s, "5242880"), *small = strstr(s, "   1000 ");

	/* largest first; growth (5 - 1) MiB over 2 s; age 3 s; rank from RANK */
	assert_non_null(big);
	assert_non_null(small);
	assert_true(big < small);
	assert_non_null(strstr(s, "5242880        5      3.000        2097152      5 rank 3"));
	assert_non_null(strstr(s, "[stack unavailable]"));
	assert_non_null(strstr(s, "5243880 bytes in 6 allocations, 2 stacks"));
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(budget_light_load_stays_attached),
		cmocka_unit_test(budget_heavy_load_sheds_to_the_budget),
		cmocka_unit_test(budget_fixed_probes_leave_no_room),
		cmocka_unit_test(budget_recovers_by_doubling),
		cmocka_unit_test(budget_unlimited),
		cmocka_unit_test(budget_tick_achieves_ratio),
		cmocka_unit_test(frees_and_nccl_never_shed),
		cmocka_unit_test(layers_follow_the_library),
		cmocka_unit_test(symbol_names),
		cmocka_unit_test(return_code_names),
		cmocka_unit_test(ldconfig_lines),
		cmocka_unit_test(leak_groups_growth_and_exit),
		cmocka_unit_test(leak_groups_bounded),
		cmocka_unit_test(tally_table),
		cmocka_unit_test(leak_table),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
