// SPDX-License-Identifier: Apache-2.0
/*
 * Layered differential diagnosis on synthetic 8-rank windows: each injected
 * fault must come out as the top finding in the right layer with evidence;
 * a healthy rank must produce no finding at all.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "diagnose/differential.h"

#define WALL 10e9 /* 10 s window */
#define NPEERS 7

static const struct diag_stack peer_oncpu[] = {
	{ "python;train;forward;matmul", 3.0e9 },
	{ "python;train;backward;matmul_bwd", 2.5e9 },
	{ "python;train;DataLoader.__next__;collate", 0.3e9 },
};
static const struct diag_stack peer_io[] = { { "python;DataLoader;read;vfs_read", 0.05e9 } };
static const struct diag_foreign peer_foreign[] = { { "kworker/3:1", 77, 0.02e9 } };
static const struct diag_irq peer_irq[] = { { 3, 3, true, 0.15e9 }, { 3, 1, true, 0.05e9 } };

/* A healthy rank, with a few percent of rank-to-rank noise. */
static struct diag_rank_window healthy(uint32_t rank)
{
	double k = 1 + 0.02 * (double)((rank * 7) % 5) - 0.04;

	return (struct diag_rank_window){
		.rank = rank,
		.wall_ns = WALL,
		.oncpu = peer_oncpu,
		.n_oncpu = 3,
		.runnable_ns = 0.08e9 * k,
		.foreign = peer_foreign,
		.n_foreign = 1,
		.irq = peer_irq,
		.n_irq = 2,
		.offcpu_ns = { [STRATA_OFF_IO] = 0.05e9 * k,
			       [STRATA_OFF_LOCK] = 0.4e9 * k,
			       [STRATA_OFF_SLEEP] = 0.2e9 * k },
		.offcpu = { [STRATA_OFF_IO] = peer_io },
		.n_offcpu = { [STRATA_OFF_IO] = 1 },
		.launches = 20000 * k,
		.sync_ns = 1.0e9 * k,
		.copy_ns = 0.2e9 * k,
		.collective_ns = 2.0e9 * k,
		.collective_bytes = 4e9 * k,
	};
}

static int diagnose(const struct diag_rank_window *fl, struct diag_finding *out, size_t max)
{
	struct diag_rank_window peers[NPEERS];

	for (uint32_t i = 0; i < NPEERS; i++)
		peers[i] = healthy(i + 1);
	return diag_differential(fl, peers, NPEERS, NULL, out, max);
}

static bool any_evidence(const struct diag_finding *f, const char *needle)
{
	for (uint32_t i = 0; i < f->n_evidence; i++)
		if (strstr(f->evidence[i], needle))
			return true;
	return false;
}

static void healthy_rank_no_findings(void **state)
{
	struct diag_finding out[16];
	struct diag_rank_window w = healthy(0);

	assert_int_equal(diagnose(&w, out, 16), 0);
}

static void cpu_contention(void **state)
{
	static const struct diag_foreign hog[] = { { "kworker/3:1", 77, 0.02e9 },
						   { "stress-ng", 4242, 4.8e9 } };
	struct diag_finding out[16];
	struct diag_rank_window w = healthy(0);
	int n;

	w.runnable_ns = 4.9e9;
	w.foreign = hog;
	w.n_foreign = 2;
	n = diagnose(&w, out, 16);
	assert_true(n >= 2);
	assert_int_equal(out[0].layer, DIAG_LAYER_CPU);
	assert_true(!strcmp(out[0].metric, "runnable_share") ||
		    !strcmp(out[0].metric, "foreign_cpu_share"));
	assert_true(out[0].value > 0.45);
	assert_true(out[0].peer_median < 0.01);
	assert_true(any_evidence(&out[0], "stress-ng (pid 4242)"));
	assert_true(out[0].score > 30); /* ~48 points of wall time / 1% floor */
}

static void softirq_storm(void **state)
{
	static const struct diag_irq storm[] = { { 3, 3, true, 0.15e9 }, { 5, 3, true, 4.0e9 } };
	struct diag_finding out[16];
	struct diag_rank_window w = healthy(0);

	w.irq = storm;
	assert_int_equal(diagnose(&w, out, 16), 1);
	assert_int_equal(out[0].layer, DIAG_LAYER_CPU);
	assert_string_equal(out[0].metric, "irq_cpu_share_max");
	assert_true(out[0].value > 0.39 && out[0].value < 0.41);
	assert_true(out[0].peer_median > 0.014 && out[0].peer_median < 0.016);
	assert_true(any_evidence(&out[0], "CPU 5 softirq NET_RX"));
}

static void io_stall_in_data_loader(void **state)
{
	static const struct diag_stack slow_io[] = {
		{ "python;DataLoader.__next__;read;vfs_read;io_schedule", 3.0e9 },
		{ "python;DataLoader;read;vfs_read", 0.05e9 },
	};
	struct diag_finding out[16];
	struct diag_rank_window w = healthy(0);
	int n;

	w.offcpu_ns[STRATA_OFF_IO] = 3.05e9;
	w.offcpu[STRATA_OFF_IO] = slow_io;
	w.n_offcpu[STRATA_OFF_IO] = 2;
	n = diagnose(&w, out, 16);
	assert_int_equal(n, 2);
	/* The OS layer says why (blocked on I/O, which stack), the Python
	 * layer says where (the data loader); both weigh ~30% of the window. */
	int os = out[0].layer == DIAG_LAYER_OS ? 0 : 1, py = 1 - os;
	assert_int_equal(out[os].layer, DIAG_LAYER_OS);
	assert_string_equal(out[os].metric, "offcpu_io_share");
	assert_true(out[os].value > 0.3);
	assert_true(any_evidence(&out[os], "io_schedule"));
	assert_int_equal(out[py].layer, DIAG_LAYER_PYTHON);
	assert_string_equal(out[py].metric, "dataloader_share");
	assert_true(out[py].value > 0.3);
	assert_true(any_evidence(&out[py], "DataLoader.__next__;read"));
}

static void slow_gpu_compute(void **state)
{
	struct diag_finding out[16];
	struct diag_rank_window w = healthy(0);

	w.sync_ns = 3.5e9; /* kernels take longer: blocked in syncs */
	w.launches = 12000;
	w.collective_ns = 0.3e9; /* peers wait for it, it does not wait */
	assert_true(diagnose(&w, out, 16) >= 2);
	assert_int_equal(out[0].layer, DIAG_LAYER_CUDA);
	assert_string_equal(out[0].metric, "sync_blocked_share");
	assert_int_equal(out[1].layer, DIAG_LAYER_CUDA);
	assert_string_equal(out[1].metric, "launch_rate");
	assert_true(out[1].score < 0); /* lower than its peers */
}

static void differential_stack(void **state)
{
	static const struct diag_stack hot[] = {
		{ "python;train;forward;matmul", 3.0e9 },
		{ "python;train;backward;matmul_bwd", 2.5e9 },
		{ "python;train;DataLoader.__next__;collate", 0.3e9 },
		{ "python;train;log_metrics;json_dumps", 2.5e9 },
	};
	struct diag_finding out[16];
	struct diag_rank_window w = healthy(0);
	int n = 0;

	w.oncpu = hot;
	w.n_oncpu = 4;
	n = diagnose(&w, out, 16);
	assert_true(n >= 1);
	bool seen = false;
	for (int i = 0; i < n; i++)
		if (!strcmp(out[i].metric, "oncpu_stack_share")) {
			assert_true(any_evidence(&out[i], "log_metrics;json_dumps"));
			assert_true(out[i].value > 0.29 && out[i].value < 0.31);
			assert_true(out[i].peer_median == 0);
			seen = true;
		}
	assert_true(seen);
}

/* On-CPU time in the kernel's storage I/O path (a virtual disk's notify
 * exits) is the OS layer's; a system call elsewhere (a clock read, a pipe
 * read, a stat), a block completion interrupting another call, and user
 * code whose names look like the kernel's, stay compute. */
static void io_path_stack_is_os(void **state)
{
	static const struct {
		const char *frames;
		bool io;
	} cases[] = {
		{ "main;load;__libc_pread64;entry_SYSCALL_64_after_hwframe;do_syscall_64;"
		  "__x64_sys_pread64;vfs_read;ext4_file_read_iter;iomap_dio_rw;blk_finish_plug;"
		  "blk_mq_dispatch_rq_list;virtio_queue_rq;iowrite16",
		  true },
		{ "main;save;write;entry_SYSCALL_64_after_hwframe;do_syscall_64;ksys_write;vfs_"
		  "write;"
		  "xfs_file_write_iter;copy_page_from_iter",
		  true },
		{ "main;spin_us;__clock_gettime;entry_SYSCALL_64_after_hwframe;do_syscall_64;"
		  "pvm_irq_enable",
		  false },
		{ "main;vfs_read_mirror;blk_copy", false },
		{ "main;queue_get;read;entry_SYSCALL_64_after_hwframe;do_syscall_64;ksys_read;"
		  "vfs_read;pipe_read;copy_page_to_iter",
		  false },
		{ "main;import;stat;entry_SYSCALL_64_after_hwframe;do_syscall_64;__do_sys_newstat;"
		  "vfs_statx;filename_lookup",
		  false },
		{ "main;wait;syscall;entry_SYSCALL_64_after_hwframe;do_syscall_64;__x64_sys_futex;"
		  "futex_wait;asm_common_interrupt;common_interrupt;__irq_exit_rcu;handle_softirqs;"
		  "blk_done_softirq;blk_complete_reqs",
		  false },
	};

	(void)state;
	for (size_t c = 0; c < sizeof(cases) / sizeof(*cases); c++) {
		const struct diag_stack hot[] = {
			{ "python;train;forward;matmul", 4.0e9 },
			{ cases[c].frames, 3.0e9 },
		};
		struct diag_finding out[16];
		struct diag_rank_window w = healthy(0);
		int n, seen = 0;

		w.oncpu = hot;
		w.n_oncpu = 2;
		n = diagnose(&w, out, 16);
		for (int i = 0; i < n; i++) {
			if (strcmp(out[i].metric, "oncpu_io_stack_share") &&
			    strcmp(out[i].metric, "oncpu_stack_share"))
				continue;
			seen++;
			if (cases[c].io != !strcmp(out[i].metric, "oncpu_io_stack_share") ||
			    out[i].layer != (cases[c].io ? DIAG_LAYER_OS : DIAG_LAYER_CPU))
				fail_msg("case %zu: %s (layer %d) for %s", c, out[i].metric,
					 out[i].layer, cases[c].frames);
		}
		assert_int_equal(seen, 1);
	}
}

/* Two new stacks with the same share tie on everything but the stack: the
 * findings come out in one order whatever order the stacks arrive in. */
static void tied_stacks_ordered(void **state)
{
	static const struct diag_stack ab[] = {
		{ "python;train;forward;matmul", 3.0e9 },
		{ "python;train;zz_hook;spin", 2.0e9 },
		{ "python;train;aa_hook;spin", 2.0e9 },
	};
	static const struct diag_stack ba[] = {
		{ "python;train;forward;matmul", 3.0e9 },
		{ "python;train;aa_hook;spin", 2.0e9 },
		{ "python;train;zz_hook;spin", 2.0e9 },
	};
	const struct diag_stack *orders[2] = { ab, ba };
	char first[2][DIAG_EVIDENCE_LEN];

	(void)state;
	for (int k = 0; k < 2; k++) {
		struct diag_finding out[16];
		struct diag_rank_window w = healthy(0);
		int n, seen = 0;

		w.oncpu = orders[k];
		w.n_oncpu = 3;
		n = diagnose(&w, out, 16);
		for (int i = 0; i < n; i++) {
			if (strcmp(out[i].metric, "oncpu_stack_share") || !out[i].n_evidence ||
			    !strstr(out[i].evidence[0], "_hook"))
				continue;
			if (!seen++)
				snprintf(first[k], sizeof(first[k]), "%s", out[i].evidence[0]);
		}
		assert_int_equal(seen, 2);
	}
	assert_string_equal(first[0], first[1]);
}

/* A stack seen in 1 of 6 samples (a mostly idle rank at 49 Hz) is noise,
 * however rare it is on the peers; the same share over 600 samples is not. */
static void stack_share_needs_samples(void **state)
{
	static const struct diag_stack few[] = {
		{ "python;train;forward;matmul", 5 * 20e6 },
		{ "python;train;once;uretprobe", 1 * 20e6 },
	};
	struct diag_finding out[16];
	struct diag_rank_window w = healthy(0);
	int n;

	w.oncpu = few;
	w.n_oncpu = 2;
	w.oncpu_samples = 6;
	n = diagnose(&w, out, 16);
	for (int i = 0; i < n; i++)
		assert_string_not_equal(out[i].metric, "oncpu_stack_share");
	w.oncpu_samples = 600;
	n = diagnose(&w, out, 16);
	bool seen = false;
	for (int i = 0; i < n; i++)
		seen |= !strcmp(out[i].metric, "oncpu_stack_share") &&
			any_evidence(&out[i], "once;uretprobe");
	assert_true(seen);
}

static void alloc_failures_and_seq_gaps(void **state)
{
	struct diag_finding out[16];
	struct diag_rank_window w = healthy(0);

	w.alloc_failures = 12;
	w.seq_gaps = 40;
	assert_int_equal(diagnose(&w, out, 16), 2);
	assert_string_equal(out[0].metric, "seq_gaps");
	assert_int_equal(out[0].layer, DIAG_LAYER_NCCL);
	assert_string_equal(out[1].metric, "alloc_failures");
	assert_int_equal(out[1].layer, DIAG_LAYER_CUDA);
	assert_int_equal(diagnose(&w, out, 1), 1); /* max respected */
}

static void custom_loader_patterns_and_bad_input(void **state)
{
	static const struct diag_stack mine[] = { { "python;train;my_reader;parse", 3e9 } };
	static const char *const pat[] = { "my_reader", NULL };
	struct diag_diff_opts o = { .sz = sizeof(o), .loader_patterns = pat };
	struct diag_finding out[16];
	struct diag_rank_window w = healthy(0), peers[NPEERS];
	int n;

	for (uint32_t i = 0; i < NPEERS; i++)
		peers[i] = healthy(i + 1);
	w.offcpu[STRATA_OFF_SLEEP] = mine;
	w.n_offcpu[STRATA_OFF_SLEEP] = 1;
	n = diag_differential(&w, peers, NPEERS, &o, out, 16);
	assert_int_equal(n, 1);
	assert_string_equal(out[0].metric, "dataloader_share");
	assert_true(any_evidence(&out[0], "my_reader"));
	assert_int_equal(diag_differential(&w, peers, 0, NULL, out, 16), -EINVAL);
	assert_string_equal(diag_layer_name(DIAG_LAYER_NCCL), "nccl");
	assert_string_equal(diag_softirq_name(99), "unknown");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(healthy_rank_no_findings),
		cmocka_unit_test(cpu_contention),
		cmocka_unit_test(softirq_storm),
		cmocka_unit_test(io_stall_in_data_loader),
		cmocka_unit_test(slow_gpu_compute),
		cmocka_unit_test(differential_stack),
		cmocka_unit_test(tied_stacks_ordered),
		cmocka_unit_test(io_path_stack_is_os),
		cmocka_unit_test(stack_share_needs_samples),
		cmocka_unit_test(alloc_failures_and_seq_gaps),
		cmocka_unit_test(custom_loader_patterns_and_bad_input),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
