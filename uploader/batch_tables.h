/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The batch being built: its interned tables and record lists.  Private to
 * uploader/batch_builder.c (interning, rows) and uploader/batch_encode.c
 * (protobuf encoding, compression).
 */
#ifndef STRATA_UPLOADER_BATCH_TABLES_H
#define STRATA_UPLOADER_BATCH_TABLES_H

#include <stddef.h>
#include <stdint.h>

#include "lib/profile.h"
#include "lib/vec.h"
#include "uploader/batch_builder.h"

/* Compared and hashed as bytes: no implicit padding. */
struct wframe {
	uint64_t addr;
	uint32_t kind, mapping, is_return, name, module, file, line, pad;
};

struct wstack {
	uint32_t first, n; /* into frames */
};

struct wmapping {
	uint8_t id[64];
	uint32_t idlen, path;
};

struct wsample {
	uint32_t stack, process, tid, comm;
	uint64_t count;
};

struct wproc {
	uint32_t pid, ppid;
	uint64_t start_time_ns;
	uint32_t comm, cmdline, cgroup, container, pod, job, te, slurm;
	int has_rank;
	int32_t rank, local_rank, world_size;
	uint64_t exit_ns;		   /* 0: alive (or not known) */
	uint32_t labels[BB_MAX_LABELS][2]; /* interned key, value */
	int nlabels;
};

struct batch_builder {
	struct batch_builder_opts o;
	char node[256];
	uint8_t run_id[16];

	/* per batch */
	struct vec strings; /* char * */
	struct profile_htab string_ids;
	struct vec mappings; /* struct wmapping */
	struct profile_htab mapping_ids;
	struct vec frames; /* struct wframe */
	struct vec stacks; /* struct wstack */
	struct profile_htab stack_ids;
	struct vec procs; /* struct bb_process copies: strings interned */
	struct profile_htab proc_ids;
	struct vec samples; /* struct wsample */
	struct profile_htab sample_ids;
	struct vec rows[BB_LIST_MAX]; /* the other record lists (enum bb_list) */
	uint64_t pending;
	uint64_t rows_dropped; /* this batch */

	struct batch_builder_stats st; /* across batches */
};

/* Size of one row of list l (0: no such list). */
size_t batch_row_size(enum bb_list l);
/* Empties the per-batch tables (the cross-batch ones stay). */
void batch_reset(struct batch_builder *bb);

#endif /* STRATA_UPLOADER_BATCH_TABLES_H */
