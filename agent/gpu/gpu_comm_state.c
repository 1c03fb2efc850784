// SPDX-License-Identifier: Apache-2.0
#include "agent/gpu/gpu_comm_state.h"

#include <bpf/bpf.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/proc/proc_stat.h"
#include "bpf/strata.h"
#include "lib/hash.h"

#define MAX_ENTRIES 4096 /* the gpu_comms map's size */
#define HEADER "strata-nccl-comms 1"

struct entry {
	uint32_t tgid;
	uint64_t start, comm, job_hash, hash, seq, p2p_seq;
	int32_t rank, nranks;
};

struct gpu_comm_state {
	char path[4096];
	uint64_t mix;		/* XORed into restored hashes; never 0 */
	struct entry *restored; /* what this run put back */
	size_t nrestored;
	struct entry *scratch; /* save */
	struct entry *saved;   /* what the file holds (valid when written) */
	size_t nsaved;
	bool written;
	struct gpu_comm_state_stats st;
};

struct gpu_comm_state *gpu_comm_state__new(const char *path, uint64_t run_id)
{
	struct gpu_comm_state *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	snprintf(s->path, sizeof(s->path), "%s", path);
	s->mix = hash_bytes(&run_id, sizeof(run_id), 0x6e63636c) | 1;
	s->restored = calloc(MAX_ENTRIES, sizeof(*s->restored));
	s->scratch = calloc(MAX_ENTRIES, sizeof(*s->scratch));
	s->saved = calloc(MAX_ENTRIES, sizeof(*s->saved));
	if (!s->restored || !s->scratch || !s->saved) {
		gpu_comm_state__free(s);
		return NULL;
	}
	return s;
}

void gpu_comm_state__free(struct gpu_comm_state *s)
{
	if (!s)
		return;
	free(s->restored);
	free(s->scratch);
	free(s->saved);
	free(s);
}

static int parse(const char *line, struct entry *e)
{
	return sscanf(line,
		      "%" SCNu32 " %" SCNu64 " %" SCNx64 " %" SCNx64 " %" SCNx64 " %" SCNd32
		      " %" SCNd32 " %" SCNu64 " %" SCNu64,
		      &e->tgid, &e->start, &e->comm, &e->job_hash, &e->hash, &e->rank, &e->nranks,
		      &e->seq, &e->p2p_seq) == 9 &&
			       e->tgid && e->nranks > 0 && e->rank >= 0 && e->rank < e->nranks
		       ? 0
		       : -EINVAL;
}

int gpu_comm_state__restore(struct gpu_comm_state *s, int comms_fd, const char *proc_root)
{
	FILE *f = fopen(s->path, "re");
	char line[512];
	int n = 0;

	if (!f)
		return errno == ENOENT ? 0 : -errno;
	if (!fgets(line, sizeof(line), f) || strncmp(line, HEADER, strlen(HEADER))) {
		fclose(f);
		s->st.bad_lines++;
		return -EINVAL;
	}
	struct entry *in = s->scratch;
	size_t nin = 0;

	while (fgets(line, sizeof(line), f) && nin < MAX_ENTRIES) {
		if (parse(line, &in[nin])) {
			s->st.bad_lines++;
			continue;
		}
		if (proc_stat__start_ticks(proc_root, in[nin].tgid, NULL, 0) != in[nin].start) {
			s->st.stale++; /* gone, or the pid is another process now */
			continue;
		}
		nin++;
	}
	fclose(f);
	/*
	 * The ranks of one communicator restored together continue from one
	 * count: at the snapshot a rank may have left a collective a moment
	 * before the others (one more counted), while at the restore, as at
	 * any moment but the instant a collective completes, ranks whose
	 * collectives return together have completed the same number.
	 */
	for (size_t i = 0; i < nin; i++)
		for (size_t j = 0; j < nin; j++)
			if (in[j].job_hash == in[i].job_hash) {
				if (in[j].seq > in[i].seq)
					in[i].seq = in[j].seq;
				if (in[j].p2p_seq > in[i].p2p_seq)
					in[i].p2p_seq = in[j].p2p_seq;
			}
	for (size_t i = 0; i < nin && s->nrestored < MAX_ENTRIES; i++) {
		struct entry e = in[i];
		struct gpu_comm_key k = { .tgid = e.tgid, .comm = e.comm };
		struct gpu_comm_val v = { .id_hash = e.job_hash ^ s->mix,
					  .rank = (uint32_t)e.rank,
					  .nranks = (uint32_t)e.nranks,
					  .seq = e.seq,
					  .p2p_seq = e.p2p_seq };

		/* an init seen since this agent started wins */
		if (bpf_map_update_elem(comms_fd, &k, &v, BPF_NOEXIST))
			continue;
		e.hash = v.id_hash;
		s->restored[s->nrestored++] = e;
		n++;
	}
	s->st.restored += (uint64_t)n;
	return n;
}

bool gpu_comm_state__identity(const struct gpu_comm_state *s, uint32_t tgid,
			      struct gpu_comm_identity *id)
{
	for (size_t i = 0; i < s->nrestored; i++)
		if (s->restored[i].tgid == tgid) {
			*id = (struct gpu_comm_identity){ .hash = s->restored[i].hash,
							  .job_hash = s->restored[i].job_hash,
							  .rank = s->restored[i].rank,
							  .nranks = s->restored[i].nranks };
			return true;
		}
	return false;
}

/* The communicator's own hash: a restored entry's, else the map's. */
static uint64_t job_hash_of(const struct gpu_comm_state *s, const struct gpu_comm_key *k,
			    uint64_t map_hash)
{
	for (size_t i = 0; i < s->nrestored; i++)
		if (s->restored[i].tgid == k->tgid && s->restored[i].comm == k->comm &&
		    s->restored[i].hash == map_hash)
			return s->restored[i].job_hash;
	return map_hash;
}

static bool entry_eq(const struct entry *a, const struct entry *b)
{
	return a->tgid == b->tgid && a->start == b->start && a->comm == b->comm &&
	       a->job_hash == b->job_hash && a->hash == b->hash && a->seq == b->seq &&
	       a->p2p_seq == b->p2p_seq && a->rank == b->rank && a->nranks == b->nranks;
}

/* The file already holds scratch[0..n) (in the map's order). */
static bool file_holds(const struct gpu_comm_state *s, size_t n)
{
	if (!s->written || n != s->nsaved)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!entry_eq(&s->scratch[i], &s->saved[i]))
			return false;
	return true;
}

int gpu_comm_state__save(struct gpu_comm_state *s, int comms_fd, const char *proc_root)
{
	struct gpu_comm_key key, next, *prev = NULL;
	char tmp[4200];
	size_t n = 0;
	FILE *f;
	int err = 0;

	while (n < MAX_ENTRIES && !bpf_map_get_next_key(comms_fd, prev, &next)) {
		struct gpu_comm_val v;
		uint64_t start;

		key = next;
		prev = &key;
		/* a recovered communicator is read again from the process by the
		 * next run, under a hash of that run (the server realigns it) */
		if (bpf_map_lookup_elem(comms_fd, &key, &v) || !v.nranks ||
		    GPU_COMM_IS_RECOVERED(v.id_hash))
			continue;
		start = proc_stat__start_ticks(proc_root, key.tgid, NULL, 0);
		if (!start)
			continue; /* exited: nothing to restore */
		s->scratch[n++] = (struct entry){ .tgid = key.tgid,
						  .start = start,
						  .comm = key.comm,
						  .job_hash = job_hash_of(s, &key, v.id_hash),
						  .hash = v.id_hash,
						  .seq = v.seq,
						  .p2p_seq = v.p2p_seq,
						  .rank = (int32_t)v.rank,
						  .nranks = (int32_t)v.nranks };
	}
	s->st.saves++;
	/* a node without NCCL jobs (or between collectives) rewrites nothing:
	 * the file is written when what it holds changes, or when it is gone
	 * (removed by hand, or the state directory cleaned: a restart would
	 * find nothing) */
	if (file_holds(s, n) && !access(s->path, F_OK)) {
		s->st.unchanged++;
		return 0;
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp", s->path);
	f = fopen(tmp, "we");
	if (!f) {
		s->st.save_failed++;
		return -errno;
	}
	fprintf(f, "%s\n", HEADER);
	for (size_t i = 0; i < n; i++) {
		const struct entry *e = &s->scratch[i];

		fprintf(f,
			"%" PRIu32 " %" PRIu64 " %" PRIx64 " %" PRIx64 " %" PRIx64 " %" PRId32
			" %" PRId32 " %" PRIu64 " %" PRIu64 "\n",
			e->tgid, e->start, e->comm, e->job_hash, e->hash, e->rank, e->nranks,
			e->seq, e->p2p_seq);
	}
	if (fflush(f) || ferror(f))
		err = -EIO;
	if (fclose(f) && !err)
		err = -EIO;
	if (!err && rename(tmp, s->path))
		err = -errno;
	if (err) {
		unlink(tmp);
		s->st.save_failed++;
		return err;
	}
	s->st.saved_entries = n;
	memcpy(s->saved, s->scratch, n * sizeof(*s->saved));
	s->nsaved = n;
	s->written = true;
	return 0;
}

void gpu_comm_state__stats(const struct gpu_comm_state *s, struct gpu_comm_state_stats *st)
{
	*st = s->st;
}
