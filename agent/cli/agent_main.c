// SPDX-License-Identifier: Apache-2.0
/*
 * strata-agent: the node daemon.  Samples continuously and, every period,
 * turns what it drained into one profile written to a directory (--output),
 * or into one wire batch shipped to strata-server (--server, uploader/).
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/cli/cli_common.h"
#include "agent/cli/cli_gpu.h"
#include "agent/core/log_libbpf.h"
#include "agent/core/profile_sink.h"
#include "agent/core/session.h"
#include "agent/ship/shipper.h"
#include "lib/cli.h"
#include "lib/clock.h"
#include "lib/log.h"

/* Blocks from this size up get their own mapping, unmapped at free (main). */
#define AGENT_MMAP_THRESHOLD (128 << 10)

struct agent_opts {
	struct session_opts session;
	const char *output_dir;
	const char *format; /* file extension */
	uint32_t period_s;
	/* --server mode */
	struct shipper_opts ship;
	uint32_t spool_max_mb;
};

static void usage(FILE *f)
{
	fputs("usage: strata-agent --output DIR | --server URL [options]\n"
	      "  -o, --output DIR      write one profile per period into DIR\n"
	      "  -P, --period SEC      profile period (default 10)\n"
	      "  -F, --freq HZ         samples per second per CPU (default 49)\n"
	      "  -f, --format EXT      pb.gz (default), folded, json or svg\n"
	      "  -p, --pid PID[,PID]   only these processes (and children)\n"
	      "  -G, --cgroup DIR      only tasks in this cgroup v2 directory\n"
	      "  -W, --unwind MODE     hybrid (CFI tables + frame pointers, default) or fp\n"
	      "      --no-python       no CPython frames in native stacks\n"
	      "  -s, --server URL      ship batches to strata-server (http[s]://HOST:PORT)\n"
	      "      --token-file F    bearer token for the server\n"
	      "      --ca-file F       CA bundle for an https server\n"
	      "      --spool DIR       unsent batches (default /var/lib/strata/spool)\n"
	      "      --spool-max MB    spool bound, oldest dropped first (default 256)\n"
	      "      --node NAME       node name sent with batches (default: $STRATA_NODE_NAME,\n"
	      "                        which the DaemonSet sets to the node, else hostname)\n"
	      "      --drain-interval MS  how often kernel maps are drained (1000)\n"
	      /* --- scheduler layer in the agent --- */
	      "      --sched, --no-sched  off-CPU, runnable, irq and time breakdown\n"
	      "                        (default: on with --server; host-wide it follows\n"
	      "                        the processes using CUDA/NCCL or carrying RANK,\n"
	      "                        LOCAL_RANK, WORLD_SIZE, TORCHELASTIC_RUN_ID,\n"
	      "                        SLURM_JOB_ID or STRATA_JOB, and their forks)\n"
	      "GPU (CUDA/NCCL uprobes: on by default; per period, the API tally and the\n"
	      "outstanding allocations are written beside the profile):\n" CLI_GPU_USAGE
	      "  -v, --verbose         print counters every period\n",
	      f);
}

/* The file name of a period's outputs, without extension:
 * DIR/strata-HOST-STARTTIME. */
static int period_base(const struct agent_opts *o, uint64_t start_ns, char *base, size_t len)
{
	char host[HOST_NAME_MAX + 1] = "node", stamp[32];
	time_t t = (time_t)(start_ns / 1000000000ULL);
	struct tm tm;

	gethostname(host, sizeof(host) - 1);
	gmtime_r(&t, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
	if (snprintf(base, len, "%s/strata-%s-%s", o->output_dir, host, stamp) >= (int)len)
		return -ENAMETOOLONG;
	return 0;
}

/* GPU layer data of the period (cumulative since the agent started:
 * struct gpu_data), beside the profile: the API tally and the outstanding
 * allocations by stack.  The local writers' GPU window member. */
static int write_gpu_period(void *ctx, struct gpu *g, const struct session_window *w)
{
	const struct agent_opts *o = ctx;
	char path[PATH_MAX], base[PATH_MAX];
	const struct gpu_data *d = gpu__data(g);
	int err = period_base(o, w->start_ns, base, sizeof(base));

	if (!err && snprintf(path, sizeof(path), "%s.gpu-tally.txt", base) >= (int)sizeof(path))
		err = -ENAMETOOLONG;
	if (!err)
		err = gpu_data__write_file(d, path, gpu_data__write_tally);
	if (!err && snprintf(path, sizeof(path), "%s.gpu-leaks.txt", base) >= (int)sizeof(path))
		err = -ENAMETOOLONG;
	if (!err)
		err = gpu_data__write_leaks_file(d, path);
	if (err)
		pr_warn("agent: cannot write GPU files: %s", strerror(-err));
	return 0; /* the profile is still written */
}

static int write_period(const struct agent_opts *o, struct profile *p)
{
	char path[PATH_MAX], base[PATH_MAX], host[HOST_NAME_MAX + 1] = "node";
	int err = period_base(o, p->start_ns, base, sizeof(base));

	if (err)
		return err;
	if (snprintf(path, sizeof(path), "%s.%s", base, o->format) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	gethostname(host, sizeof(host) - 1);
	return profile__write_file(p, path, host);
}

static int run(const struct agent_opts *o)
{
	struct session *s = session__new(&o->session);
	struct profile_sink_opts po = {
		.sz = sizeof(po),
		.ctx = (void *)o,
		.gpu_window = write_gpu_period,
	};
	struct profile_sink *ps = NULL;
	struct shipper *sh = NULL;
	int err, stop = 0;

	if (!s)
		return -errno;
	/* the sink: the wire batch (--server) or the local writers (--output) */
	if (o->ship.upload.url)
		sh = shipper__new(&o->ship, s);
	else
		ps = profile_sink__new(s, &po);
	if (!sh && !ps) {
		err = -errno;
		goto out;
	}
	err = session__start(s);
	if (err)
		goto out;
	pr_info("agent: sampling at %u Hz, every %u s to %s", o->session.sampler.freq_hz,
		o->period_s, sh ? o->ship.upload.url : o->output_dir);
	while (!stop) {
		uint64_t deadline = mono_ms() + (uint64_t)o->period_s * 1000;

		malloc_trim(0); /* free pages inside the heaps go back (main: mallopt) */
		do {
			struct session_signal sig = { 0 };
			/* deep captures start and end on time (agent/capture/) */
			int wait_ms = sh ? shipper__tick(sh, s) : 1000, w;

			w = session__wait(s, wait_ms < 1000 ? wait_ms : 1000, &sig);

			if (w < 0) {
				err = w;
				goto out;
			}
			if (w == SESSION_SIGNAL && (sig.signo == SIGINT || sig.signo == SIGTERM))
				stop = 1;
		} while (!stop && mono_ms() < deadline);

		if (sh) {
			if (stop) /* the last batch says how each capture ended */
				shipper__stop(sh, s);
			err = shipper__period(sh, s);
			if (err == -ENOMEM)
				goto out;
			if (log_enabled(LOG_INFO)) {
				shipper__report(sh);
				if (stop) { /* what each part read, refused, dropped */
					session__report_counters(s);
					session__report_gpu(s);
				} else
					session__report_sched(s);
			}
			err = 0;
			continue;
		}
		struct session_window w;
		struct profile *p;

		session__end_window(s, &w); /* GPU files written in it */
		p = profile_sink__take(ps, &w);
		if (!p) {
			err = -ENOMEM;
			goto out;
		}
		err = write_period(o, p);
		if (err)
			pr_warn("agent: cannot write profile: %s", strerror(-err));
		if (log_enabled(LOG_INFO)) {
			session__report(s, p);
			profile_sink__report(ps);
		}
		profile__free(p);
		err = 0;
	}
out:
	/* Batches still spooled get a few seconds to go out; the rest wait
	 * on disk for the next start. */
	shipper__free(sh, 5000);
	session__free(s);
	profile_sink__free(ps);
	return err;
}

int main(int argc, char **argv)
{
	enum {
		OPT_TOKEN = 256,
		OPT_CA,
		OPT_SPOOL,
		OPT_SPOOL_MAX,
		OPT_NODE,
		OPT_DRAIN,
		OPT_SCHED,
		OPT_NO_SCHED
	};
	int sched = -1; /* --sched / --no-sched; -1: on for --pid/--cgroup targets */
	static const struct option longopts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "period", required_argument, NULL, 'P' },
		{ "freq", required_argument, NULL, 'F' },
		{ "format", required_argument, NULL, 'f' },
		{ "pid", required_argument, NULL, 'p' },
		{ "cgroup", required_argument, NULL, 'G' },
		{ "server", required_argument, NULL, 's' },
		{ "unwind", required_argument, NULL, 'W' },
		{ "no-python", no_argument, NULL, 'Y' },
		CLI_GPU_LONGOPTS,
		{ "verbose", no_argument, NULL, 'v' },
		{ "token-file", required_argument, NULL, OPT_TOKEN },
		{ "ca-file", required_argument, NULL, OPT_CA },
		{ "spool", required_argument, NULL, OPT_SPOOL },
		{ "spool-max", required_argument, NULL, OPT_SPOOL_MAX },
		{ "node", required_argument, NULL, OPT_NODE },
		{ "sched", no_argument, NULL, OPT_SCHED },
		{ "no-sched", no_argument, NULL, OPT_NO_SCHED },
		{ "drain-interval", required_argument, NULL, OPT_DRAIN },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	uint32_t pids[CLI_MAX_PIDS];
	const char *gpu_libs[CLI_MAX_GPU_LIBS];
	struct agent_opts o = {
		.format = "pb.gz",
		.period_s = 10,
		.ship = { .sz = sizeof(o.ship),
			  .upload = { .sz = sizeof(o.ship.upload),
				      .spool_dir = "/var/lib/strata/spool" } },
		.spool_max_mb = 256,
		.session = { .sz = sizeof(o.session),
			     .gpu = { .sz = sizeof(o.session.gpu) },
			     .sampler = { .sz = sizeof(o.session.sampler),
					  .freq_hz = 49,
					  .hybrid = true } },
	};
	struct stat st;
	int c, verbose = 0, err;
	char optname[64];

	while ((c = getopt_long(argc, argv, "o:P:F:f:p:G:s:W:vh", longopts, NULL)) != -1) {
		int handled = cli_common_opt(c, optarg, &o.session, pids);

		if (!handled)
			handled = cli_gpu_opt(c, optarg, &o.session, gpu_libs);

		if (handled < 0)
			goto bad;
		if (handled)
			continue;
		switch (c) {
		case 'o':
			o.output_dir = optarg;
			break;
		case 'P':
			if (cli_parse_u32(optarg, 86400, &o.period_s))
				goto bad;
			break;
		case 'f':
			if (strcmp(optarg, "pb.gz") && strcmp(optarg, "folded") &&
			    strcmp(optarg, "json") && strcmp(optarg, "svg"))
				goto bad;
			o.format = optarg;
			break;
		case 'W':
			if (strcmp(optarg, "fp") && strcmp(optarg, "hybrid"))
				goto bad;
			o.session.sampler.hybrid = !strcmp(optarg, "hybrid");
			break;
		case 'Y':
			o.session.sampler.no_python = true;
			break;
		case 's':
			o.ship.upload.url = optarg;
			break;
		case OPT_TOKEN:
			o.ship.upload.token_file = optarg;
			break;
		case OPT_CA:
			o.ship.upload.ca_file = optarg;
			break;
		case OPT_SPOOL:
			o.ship.upload.spool_dir = optarg;
			break;
		case OPT_SPOOL_MAX:
			if (cli_parse_u32(optarg, 1 << 20, &o.spool_max_mb))
				goto bad;
			break;
		case OPT_NODE:
			o.ship.node = optarg;
			break;
		case OPT_DRAIN:
			if (cli_parse_u32(optarg, 3600000, &o.session.drain_ms))
				goto bad;
			break;
		/* --- scheduler layer in the agent --- */
		case OPT_SCHED:
		case OPT_NO_SCHED:
			sched = c == OPT_SCHED;
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
	if (!o.output_dir == !o.ship.upload.url || optind != argc) {
		usage(stderr);
		return 2;
	}
	/* The scheduler layer runs on every context switch of the host; its
	 * programs leave at once for non-targets (--pid/--cgroup, or host-wide
	 * the automatic targets: processes of training jobs).  On by default
	 * when its data goes somewhere (batches carry it; --output profiles
	 * do not). */
	o.session.sched = sched >= 0 ? sched : o.ship.upload.url != NULL;
	/* In a pod the hostname is the pod's name: the DaemonSet passes the
	 * node's in the environment. */
	if (!o.ship.node && getenv("STRATA_NODE_NAME") && getenv("STRATA_NODE_NAME")[0])
		o.ship.node = getenv("STRATA_NODE_NAME");
	/* NCCL communicator identities survive a restart beside the spool
	 * (the DaemonSet keeps it on the host). */
	static char comm_state[PATH_MAX];
	if (o.ship.upload.url && snprintf(comm_state, sizeof(comm_state), "%s/nccl_comms.state",
					  o.ship.upload.spool_dir) < (int)sizeof(comm_state))
		o.session.gpu.comm_state_path = comm_state;
	o.ship.upload.spool_max_bytes = (uint64_t)o.spool_max_mb << 20;
	/* allocation calls as events: the ring a CUDA out-of-memory capture
	 * sends (docs/diagnosis.md "Deep capture") */
	o.session.gpu.alloc_events = o.ship.upload.url != NULL;
	o.ship.freq_hz = o.session.sampler.freq_hz;
	if (o.output_dir && (stat(o.output_dir, &st) || !S_ISDIR(st.st_mode))) {
		fprintf(stderr, "strata-agent: %s is not a directory\n", o.output_dir);
		return 2;
	}
	log_set_level(verbose >= 2 ? LOG_DEBUG : verbose ? LOG_INFO : LOG_WARN);
	log_route_libbpf();
	/*
	 * glibc raises its mmap threshold to the size of each mapped block
	 * freed (up to 32 MiB), so once a period's big buffers (encoded
	 * batches, table builds) are freed, their successors come from the
	 * heaps instead, and the free space they leave between live chunks is
	 * never given back: the always-on agent's RSS crept up 0.6-1.4 MB a
	 * minute in the soak (bench/soak.sh, docs/benchmarks.md).  A fixed
	 * threshold keeps big blocks mapped (returned at free); run() trims
	 * the heaps after each period.
	 */
	mallopt(M_MMAP_THRESHOLD, AGENT_MMAP_THRESHOLD);
	err = run(&o);
	if (err) {
		fprintf(stderr, "strata-agent: %s\n", strerror(-err));
		return 1;
	}
	return 0;
bad:
	fprintf(stderr, "strata-agent: bad value for %s: %s\n",
		cli_option_name(c, longopts, optname, sizeof(optname)), optarg);
	return 2;
}
