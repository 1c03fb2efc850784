// SPDX-License-Identifier: Apache-2.0
/*
 * Communicators no agent saw initialise (the job started before the agent,
 * or its init was missed): at the first collective event on an unknown
 * (tgid, ncclComm_t), the rank and size are read from the process's struct
 * ncclComm with the offsets of the NCCL release its library says it is
 * (agent/gpu/nccl_comm.h), and the communicator goes into gpu_comms, so
 * BPF numbers its collectives from there on.  What the process's memory
 * does not give is a cross-rank identity and the count of collectives
 * before this point: the communicator gets a hash of its own (tagged
 * GPU_COMM_RECOVERED_TAG) and the server matches the ranks of one job by
 * their collective streams (docs/diagnosis.md "Communicator identity").
 * A communicator that cannot be read stays unknown, counted by outcome,
 * and is not read again while it is among the last GPU_RECOVER_FAILED
 * failures.
 */
#include "agent/gpu/gpu_impl.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdio.h>

#include "agent/gpu/gpu_names.h"
#include "gpu.skel.h"
#include "lib/clock.h"
#include "lib/hash.h"
#include "lib/log.h"

/* The NCCL release p maps, 0 when none or two different ones. */
static uint32_t proc_nccl_version(struct gpu *g, const struct gpu_proc *p)
{
	uint32_t v = 0;

	for (uint32_t j = 0; j < p->nfiles; j++) {
		uint32_t fv = g->files[p->files[j]].probes.nccl_version;

		if (!fv)
			continue;
		if (v && fv != v) {
			g->recover.ambiguous++;
			return 0;
		}
		v = fv;
	}
	return v;
}

static bool failed_before(const struct gpu *g, const struct gpu_comm_key *k)
{
	for (size_t i = 0; i < GPU_RECOVER_FAILED; i++)
		if (g->recover.failed[i].tgid == k->tgid && g->recover.failed[i].comm == k->comm)
			return true;
	return false;
}

void gpu_nccl_recover(struct gpu *g, const struct gpu_event *e)
{
	struct gpu_recover *r = &g->recover;
	struct gpu_comm_key k = { .tgid = e->tgid, .comm = e->a[2] };
	struct gpu_comm_val v = {};
	int fd = bpf_map__fd(g->skel->maps.gpu_comms);
	uint32_t kind = gpu_api_kind(e->api);
	struct gpu_proc *p;
	int32_t rank, nranks;
	int res;

	if ((kind != GPU_KIND_COLL && kind != GPU_KIND_P2P) || e->a[0] || !k.comm)
		return; /* known, or not a communicator's call */
	if (failed_before(g, &k) || !bpf_map_lookup_elem(fd, &k, &v))
		return; /* not readable; or recovered after this event was queued */
	p = gpu_proc_find(g, e->tgid);
	if (!p || !p->nfiles)
		return; /* exited: nothing left to read; or its files not scanned yet */
	if (!r->mix)
		r->mix = hash_bytes(&g->data.start_ns, sizeof(g->data.start_ns), 0x7265636f) | 1;
	res = nccl_comm_read((pid_t)e->tgid, k.comm, nccl_layout__find(proc_nccl_version(g, p)),
			     &rank, &nranks);
	r->outcome[res]++;
	if (res != NCCL_READ_OK) {
		static const char *const why[NCCL_READ_MAX] = {
			"", "NCCL release not known", "not readable", "bad magic", "bad rank/size",
		};

		pr_debug("gpu: pid %u: NCCL communicator %#llx stays unknown: %s", e->tgid,
			 (unsigned long long)k.comm, why[res]);
		r->failed[r->failed_next++ % GPU_RECOVER_FAILED] = k;
		return;
	}
	v = (struct gpu_comm_val){ .rank = (uint32_t)rank, .nranks = (uint32_t)nranks };
	v.id_hash = hash_bytes(&k, sizeof(k), r->mix) & ((1ULL << 48) - 1);
	v.id_hash |= GPU_COMM_RECOVERED_TAG << 48;
	if (bpf_map_update_elem(fd, &k, &v, BPF_NOEXIST)) {
		if (errno != EEXIST)
			r->map_full++;
		return;
	}
	pr_info("gpu: pid %u: NCCL communicator %#llx read from the process: rank %d of %d",
		e->tgid, (unsigned long long)k.comm, rank, nranks);
	if (p->info.nccl_rank < 0) {
		p->info.nccl_rank = rank;
		p->info.nccl_nranks = nranks;
		p->info.comm_hash = p->info.job_hash = v.id_hash;
	}
}

void gpu_nccl_recover_report(const struct gpu *g)
{
	const struct gpu_recover *r = &g->recover;

	fprintf(stderr,
		"  gpu nccl recovered: ok=%llu no_layout=%llu fault=%llu bad_magic=%llu "
		"bad_rank=%llu ambiguous=%llu map_full=%llu\n",
		(unsigned long long)r->outcome[NCCL_READ_OK],
		(unsigned long long)r->outcome[NCCL_READ_NO_LAYOUT],
		(unsigned long long)r->outcome[NCCL_READ_FAULT],
		(unsigned long long)r->outcome[NCCL_READ_BAD_MAGIC],
		(unsigned long long)r->outcome[NCCL_READ_BAD_RANK],
		(unsigned long long)r->ambiguous, (unsigned long long)r->map_full);
}
