// SPDX-License-Identifier: Apache-2.0
/* strata: the command-line tool.  `strata record` profiles locally. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/cli/cli_common.h"
#include "agent/cli/cli_gpu.h"
#include "agent/core/log_libbpf.h"
#include "agent/cli/record.h"
#include "lib/cli.h"
#include "lib/log.h"

#define STRATA_VERSION "0.1.0"

static void usage(FILE *f)
{
	fputs("usage: strata record [options] [-- CMD [ARGS...]]\n"
	      "       strata version\n\n"
	      "record: sample CPU stacks (user + kernel) and write a symbolized profile.\n"
	      "  -F, --freq HZ         samples per second per CPU (default 49)\n"
	      "  -o, --output FILE     .svg (flamegraph) .folded .pb.gz (pprof) .json\n"
	      "                        (default strata.svg)\n"
	      "  -p, --pid PID[,PID]   profile these processes (and their children)\n"
	      "  -G, --cgroup DIR      profile tasks in this cgroup v2 directory\n"
	      "  -d, --duration SEC    stop after SEC seconds (default: until CMD exits\n"
	      "                        or Ctrl-C)\n"
	      "      --no-kernel       user stacks only\n"
	      "      --no-user         kernel stacks only\n"
	      "      --no-python       no CPython frames in native stacks\n"
	      "      --unwind MODE     hybrid (CFI tables + frame pointers, default) or fp\n"
	      "      --max-unwind-rows N  unwind table rows kept in kernel (2097152, 16 B each)\n"
	      "      --max-stacks N    distinct stacks kept in kernel per drain (8192)\n"
	      "      --max-counts N    distinct (thread, stacks) counts per drain (16384)\n"
	      "      --drain-interval MS  how often kernel maps are drained (1000)\n"
	      "GPU (CUDA runtime/driver and NCCL uprobes, on when the target uses them):\n"
	      "      --leaks FILE      GPU allocations outstanding at exit by stack:\n"
	      "                        .txt (table) or .pb.gz (pprof heap profile)\n"
	      "      --trace FILE.json Perfetto/Chrome trace of launches, copies, syncs,\n"
	      "                        collectives (per-call CUDA events on)\n"
	      "      --tally FILE.txt  per-API calls, time in call, return codes\n" CLI_GPU_USAGE
	      "      --sched FILE      also write the scheduler layer (on/off-CPU,\n"
	      "                        runnable, blocking stacks, irq) as JSON\n"
	      "  -v, --verbose         counters and libbpf messages (-vv: debug)\n"
	      "With -- CMD, runs CMD, profiles it and its children until it exits,\n"
	      "and returns its exit code.  Without CMD, --pid or --cgroup: whole host.\n",
	      f);
}

static int cmd_record(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "freq", required_argument, NULL, 'F' },
		{ "output", required_argument, NULL, 'o' },
		{ "pid", required_argument, NULL, 'p' },
		{ "cgroup", required_argument, NULL, 'G' },
		{ "duration", required_argument, NULL, 'd' },
		{ "no-kernel", no_argument, NULL, 'K' },
		{ "no-user", no_argument, NULL, 'U' },
		{ "no-python", no_argument, NULL, 'P' },
		{ "max-stacks", required_argument, NULL, 'S' },
		{ "drain-interval", required_argument, NULL, 'I' },
		{ "max-counts", required_argument, NULL, 'C' },
		{ "unwind", required_argument, NULL, 'W' },
		{ "max-unwind-rows", required_argument, NULL, 'R' },
		{ "leaks", required_argument, NULL, 'L' },
		{ "trace", required_argument, NULL, 'T' },
		{ "tally", required_argument, NULL, 'Y' },
		CLI_GPU_LONGOPTS,
		{ "sched", required_argument, NULL, 's' },
		{ "sched-test-layers", required_argument, NULL, 'J' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	uint32_t pids[CLI_MAX_PIDS];
	const char *gpu_libs[CLI_MAX_GPU_LIBS];
	struct record_opts o = {
		.sz = sizeof(o),
		.output = "strata.svg",
		.session = { .sz = sizeof(o.session),
			     .gpu = { .sz = sizeof(o.session.gpu) },
			     .sampler = { .sz = sizeof(o.session.sampler),
					  .freq_hz = 49,
					  .hybrid = true } },
	};
	struct sampler_opts *so = &o.session.sampler;
	int c, verbose = 0, rc;
	char optname[64];
	char *end;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+F:o:p:G:d:vh", longopts, NULL)) != -1) {
		int handled = cli_common_opt(c, optarg, &o.session, pids);

		if (!handled)
			handled = cli_gpu_opt(c, optarg, &o.session, gpu_libs);

		if (handled < 0)
			goto bad;
		if (handled)
			continue;
		switch (c) {
		case 'o':
			o.output = optarg;
			break;
		case 'd':
			o.duration_s = strtod(optarg, &end);
			if (*end || o.duration_s <= 0)
				goto bad;
			break;
		case 'K':
			so->no_kernel = true;
			break;
		case 'U':
			so->no_user = true;
			break;
		case 'P':
			so->no_python = true;
			break;
		case 'S':
			if (cli_parse_u32(optarg, 1u << 22, &so->max_stacks))
				goto bad;
			break;
		case 'R':
			if (cli_parse_u32(optarg, 1u << 26, &so->max_unwind_rows))
				goto bad;
			break;
		case 'W':
			if (!strcmp(optarg, "fp"))
				so->hybrid = false;
			else if (!strcmp(optarg, "hybrid"))
				so->hybrid = true;
			else
				goto bad;
			break;
		case 'C':
			if (cli_parse_u32(optarg, 1u << 22, &so->max_counts))
				goto bad;
			break;
		case 'I':
			if (cli_parse_u32(optarg, 3600000, &o.session.drain_ms))
				goto bad;
			break;
		case 'L':
			if (!strstr(optarg, ".txt") && !strstr(optarg, ".pb.gz"))
				goto bad;
			o.leaks_path = optarg;
			break;
		case 'T':
			o.trace_path = optarg;
			o.session.gpu.trace = true;
			break;
		case 'Y':
			o.tally_path = optarg;
			break;
		case 's':
			o.sched_output = optarg;
			o.session.sched = true;
			break;
		case 'J': /* tests: API-layer uprobes on this binary */
			o.session.sched_test_layer_binary = optarg;
			break;
		case 'v':
			verbose++;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		if (so->filter != STRATA_FILTER_NONE) {
			fprintf(stderr, "strata: give a command or --pid/--cgroup, not both\n");
			return 2;
		}
		o.argv = &argv[optind];
		so->filter = STRATA_FILTER_TGIDS;
	}
	log_set_level(verbose >= 2 ? LOG_DEBUG : verbose ? LOG_INFO : LOG_WARN);
	log_route_libbpf();

	rc = record_run(&o);
	if (rc < 0) {
		fprintf(stderr, "strata: record failed: %s%s\n", strerror(-rc),
			rc == -EPERM ? " (needs root or CAP_BPF+CAP_PERFMON+CAP_SYS_PTRACE)" : "");
		return 1;
	}
	return rc;
bad:
	fprintf(stderr, "strata: bad value for %s: %s\n",
		cli_option_name(c, longopts, optname, sizeof(optname)), optarg);
	return 2;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "record"))
		return cmd_record(argc - 1, argv + 1);
	if (!strcmp(argv[1], "version") || !strcmp(argv[1], "--version")) {
		printf("strata %s\n", STRATA_VERSION);
		return 0;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(stdout);
		return 0;
	}
	fprintf(stderr, "strata: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
