/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The GPU layer's private state, shared by its files (agent/gpu/gpu.h is
 * the public side).  Processes move through three states: watched (a
 * session target whose mappings are scanned with back-off), target (maps a
 * file with CUDA/NCCL entry points: in the BPF gpu_targets filter, holding
 * a reference on each such file), exited (its rows are read one last time
 * at the next drain, its outstanding allocations become the leaks at exit,
 * and its BPF entries are removed).
 *
 *   gpu.c         life cycle: the BPF object, tables, pre-attached files
 *   gpu_clock.c   BPF (monotonic) timestamps to wall-clock time
 *   gpu_files.c   GPU files: detected once per file through the tracker's
 *                 loader registry, probe attach/detach, grace
 *   gpu_usdt.c    the frameworks' USDT probes in those files
 *   gpu_procs.c   processes: watch, scan, target, exit
 *   gpu_events.c  the call-event ring buffer
 *   gpu_duty.c    the duty cycle and the poll loop
 *   gpu_stacks.c  call-site stacks: copied out of BPF, resolved, kernel names
 *   gpu_drain.c   the drain: BPF maps into the tables, exited processes swept
 *   gpu_view.c    the tables as struct gpu_data, state and -v report
 */
#ifndef STRATA_GPU_IMPL_H
#define STRATA_GPU_IMPL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/core/features.h"
#include "agent/core/resolve.h"
#include "agent/gpu/gpu.h"
#include "agent/gpu/gpu_budget.h"
#include "agent/gpu/gpu_elf.h"
#include "agent/gpu/gpu_leaks.h"
#include "agent/gpu/gpu_tables.h"
#include "agent/gpu/nccl_comm.h"
#include "agent/proc/proc_maps.h"
#include "agent/proc/usdt.h"

struct bpf_map;

#define GPU_MAX_FILES 64
#define GPU_MAX_PROCS 4096	   /* watched + targets + exited awaiting a drain */
#define GPU_PROC_FILES 8	   /* GPU files per process */
#define GPU_MAX_ROWS 65536	   /* per user-side table */
#define GPU_MAX_CALLS 262144	   /* call records kept for the trace */
#define GPU_MAX_ALLOC_EVENTS 65536 /* allocation calls (alloc_events) between two takes */
#define GPU_MAX_TRACED 4096	   /* processes traced for a capture (gpu_trace_tgids) */
#define GPU_MAX_ALLOC_RECS 262144  /* wire: outstanding allocations listed per drain */
#define GPU_MAX_INFLIGHT 4096	   /* wire: calls in flight listed per drain */
#define GPU_SCAN_FIRST_MS 5
/* the cap on a series' steps of maps reads (gpu_proc_scan); also how late a
 * target whose exit events were missed is found dead */
#define GPU_SCAN_MAX_MS 500
/* with PROC_EV_MAPPED_EXEC events, a series ends after its last step and
 * the maps are read again at the next event, or after this long (a lost
 * event) */
#define GPU_SCAN_IDLE_MS 30000
#define GPU_ALIVE_WATCH_MS 5000 /* a watched (not target) process's liveness check */
#define GPU_MAX_DLS 64		/* dynamic linker files hooked: one per container image, often */
#define GPU_GRACE_MS 5000	/* a file's probes stay attached this long unused */
#define GPU_RESOLVE_TRIES 8	/* drains a live process's stack may stay partly unknown */
#define GPU_EXIT_DRAINS 3	/* drains an exited process waits for its exit record */
/* drains a raw stack stays once no kept process's stack uses it
 * (gpu_retire.c): well past the GPU_RESOLVE_TRIES + GPU_EXIT_DRAINS a
 * resolution can take */
#define GPU_STACK_IDLE_DRAINS 64
/* the frames profile is rebuilt past this many frames, most unused */
#define GPU_FRAMES_COMPACT_MIN 16384

enum { GRP_FIXED, GRP_SHED, GRP_MAX }; /* probe groups: see group_attach() */

#define GPU_FILE_USDT 8	   /* framework USDT sites per file */
#define GPU_USDT_SPECS 256 /* gpu_usdt_specs entries (a freed file's are reused) */

/* A framework USDT probe site of a GPU file (gpu_usdt.c). */
struct gpu_usdt_site {
	uint64_t offset, sem_offset; /* file offsets of the site and its semaphore */
	uint32_t spec_id;	     /* gpu_usdt_specs key: the attach cookie */
	struct gpu_usdt_spec spec;
	struct bpf_link *link;
};

struct gpu_file {
	dev_t dev;
	uint64_t ino;
	struct module *mod;
	struct gpu_elf_probes probes;
	int multi[GRP_MAX][2]; /* uprobe_multi link fds [group][return], -1: none */
	size_t multi_n[GRP_MAX];
	struct bpf_link *enter[GPU_ELF_MAX_PROBES], *exit[GPU_ELF_MAX_PROBES]; /* fallback */
	struct gpu_usdt_site usdt[GPU_FILE_USDT];
	uint32_t nusdt;
	uint32_t refs; /* target processes mapping it */
	bool used;     /* the slot holds a file (else free for the next one) */
	bool mod_pin;  /* holds a pin on mod: from detection until its grace
			* without users ends, and while attached */
	bool attached;
	bool pinned;		/* attached for the whole session */
	uint64_t idle_since_ms; /* refs fell to 0 then */
};

enum gpu_proc_state { PROC_FREE = 0, PROC_WATCH, PROC_TARGET, PROC_EXITED };

struct gpu_proc {
	uint32_t tgid;
	uint32_t state;
	uint64_t next_scan_ms;
	uint64_t next_alive_ms; /* a target's next liveness check (no maps read) */
	uint64_t start_ticks;	/* /proc/PID/stat's start time, at the first read */
	bool notified;		/* it runs a hooked ld.so: PROC_EV_MAPPED_EXEC comes */
	bool in_notify_filter;	/* in BPF's gpu_mapped_last: its events are sent */
	uint32_t backoff_ms;
	uint32_t nfiles;
	int files[GPU_PROC_FILES];
	uint64_t mm_id;		/* address space, as BPF saw it at a call or exit */
	uint64_t hint_mm_id;	/* from the sampler's exec/first-sample event */
	bool bpf_exited;	/* the GPU object's exit record (with the mappings) came */
	uint32_t exit_drains;	/* drains since it exited without that record */
	uint64_t gone_ktime_ns; /* its exit or exec event's bpf_ktime; 0: found gone */
	bool owes_purge;	/* BPF rows of an earlier image of its pid are its to purge */
	struct gpu_proc_info info;
};

struct raw_stack { /* key: stack_id */
	uint64_t stack_id;
	uint32_t len;
	uint32_t tries; /* resolutions with unknown frames, while the process lived */
	uint64_t *ips;
	uint64_t used; /* the last drain that copied or resolved it (gpu_retire.c) */
};

struct py_stack_row { /* key: id */
	uint64_t id;
	struct strata_py_stack *py;
	uint64_t used;
};

struct pair_row { /* key: id */
	uint64_t id;
	struct gpu_stack_pair pair;
	uint64_t used;
};

struct stack_key {
	uint32_t tgid, pad;
	uint64_t stack_id;
};

struct stack_row {
	struct stack_key key;
	struct gpu_stack s;
};

struct func_key {
	uint32_t tgid, pad;
	uint64_t object;
};

struct func_row {
	struct func_key key;
	const char *name;
};

#define GPU_RECOVER_FAILED 256 /* communicators that could not be read, not retried */

/* Communicators recovered from process memory (gpu_nccl_recover.c). */
struct gpu_recover {
	uint64_t mix; /* this agent run's: in every recovered hash */
	struct gpu_comm_key failed[GPU_RECOVER_FAILED];
	uint32_t failed_next;		 /* ring: the oldest failure is retried first */
	uint64_t outcome[NCCL_READ_MAX]; /* attempts by enum nccl_read */
	uint64_t map_full, ambiguous;	 /* gpu_comms full; two NCCL releases mapped */
};

struct gpu {
	struct gpu_opts opts;
	struct gpu_bpf *skel;
	struct ring_buffer *rb;
	struct module_registry *mods;
	struct proc_tracker *procs_tracker;
	int loader; /* its id in the tracker's loader registry */
	struct resolver res;
	struct gpu_budget budget;
	uint64_t budget_next_ns, window_start_ns, window_on_ns;
	bool hold_probes;    /* a deep capture: GPU_CAPTURE_BUDGET for the probes */
	double saved_budget; /* the budget before it */

	struct gpu_file files[GPU_MAX_FILES];
	int nfiles;
	struct gpu_proc *procs;

	struct gpu_table raw_stacks, py_stacks, pairs, stacks, sites, tally, errs, colls, funcs;
	struct gpu_leaks leaks;	   /* driver allocations (segments) */
	struct gpu_leaks fw_leaks; /* framework allocations (USDT: tensors) */
	struct usdt_stats usdt;	   /* notes read, skipped (args not understood) */
	uint32_t usdt_specs;	   /* gpu_usdt_specs entries used now */
	uint64_t usdt_spec_used[GPU_USDT_SPECS / 64]; /* which */
	uint64_t usdt_dropped; /* sites beyond GPU_FILE_USDT / GPU_USDT_SPECS */
	int stats_fd;	       /* STRATA_BPF_STATS: the kernel's run-time stats on */
	struct gpu_call_rec *calls;
	size_t ncalls;
	/* alloc_events of processes not traced: apart from calls, so they
	 * never crowd out the NCCL calls the straggler detection needs */
	struct gpu_call_rec *alloc_calls;
	size_t nalloc_calls;
	uint32_t *traced; /* sorted: gpu__trace_process's processes */
	size_t ntraced;
	uint64_t *prev_calls; /* per tally row: calls at the last budget plan */
	size_t nprev;

	struct gpu_data data;
	struct gpu_comm_state *comm_state; /* NULL: identities not kept */
	bool no_multi, multi_ok;	   /* uprobe_multi refused / worked on this kernel */
	struct kernel_features features;   /* the session's: which path each feature takes */
	struct bpf_program *exit_prog;	   /* one of gpu_proc_exit's four variants */
	uint64_t link_objs;		   /* kernel link objects open (a multi link holds many) */
	uint64_t attach_ns;		   /* time spent attaching, all files */
	uint64_t adopted;		   /* BPF-admitted targets found without their event */
	uint64_t links, attach_failed, scans, scan_failed, files_dropped, procs_dropped;
	uint64_t files_freed; /* slots given back: their file unused and evicted */
	/* the dynamic linkers hooked (gpu_dl_notify on _dl_debug_state): one
	 * per distinct ld.so file the watched processes run */
	struct gpu_dl {
		struct module *mod;
		struct bpf_link *link;
	} dls[GPU_MAX_DLS];
	size_t ndls;
	uint64_t dls_dropped, dls_failed;
	/* gpu_allocs [0] and gpu_fw_allocs [1] as last read (gpu_drain.c) */
	struct gpu_alloc_mirror {
		struct gpu_alloc_entry {
			struct gpu_alloc_key key;
			struct gpu_alloc_val val;
		} * v;
		size_t n, cap;
		uint64_t seen; /* the map's change count at that read */
		bool valid;
	} alloc_mirror[2];
	uint64_t alloc_walks_skipped; /* drains that found a map unchanged */
	uint64_t events_lost_seen;    /* GPU_CNT_EVENTS_LOST at the last drain */
	uint64_t slots_reused;	      /* slots let go: their pid is another process's */
	uint64_t mapped_seen;	      /* PROC_EV_MAPPED_EXEC events of watched processes */
	uint64_t notify_full;	      /* watched, not in gpu_mapped_last: polled instead */
	uint64_t mapped_ignored;      /* PROC_EV_MAPPED_EXEC of others (BPF filters them) */
	uint64_t alive_checks;
	uint64_t exits;
	uint64_t calls_taken_ns;  /* CLOCK_REALTIME of the last gpu__calls_taken */
	uint64_t procs_pruned;	  /* exited processes' rows dropped after a batch told them */
	uint64_t purges_deferred; /* exited, their pid live again: its entries kept */
	uint64_t drains;	  /* gpu__drain calls: the raw stacks' clock */
	uint32_t *retired;	  /* sorted: the last gpu_retire's processes */
	size_t nretired, retired_cap;
	uint64_t rows_retired, stacks_retired, frames_compacted; /* gpu_retire.c */
	struct gpu_recover recover;
};

/* The BPF maps whose keys start with a tgid: gpu_proc_maps_of(). */
#define GPU_PROC_MAPS 8

static inline uint64_t gpu_to_realtime(const struct gpu *g, uint64_t mono)
{
	return mono ? (uint64_t)((int64_t)mono + g->data.clock_offset_ns) : 0;
}

/* gpu_clock.c */
void gpu_clock_calibrate(struct gpu *g);

/* gpu_files.c */
int gpu_files_register(struct gpu *g);
/* The GPU file index of a mapping, or -1; *dl set when the mapping is a
 * dynamic linker hooked for PROC_EV_MAPPED_EXEC. */
int gpu_classify(struct gpu *g, int pid, const struct proc_map *m, bool *dl);
void gpu_file_ref(struct gpu *g, struct gpu_file *f);
void gpu_file_unref(struct gpu *g, struct gpu_file *f);
void gpu_file_detach(struct gpu *g, struct gpu_file *f);
uint64_t gpu_files_expire(struct gpu *g, uint64_t now_ms);
void gpu_pin_file(void *ctx, const char *path);
void gpu_shed_set(struct gpu *g, bool attach);

/* gpu_usdt.c */
int gpu_usdt_scan(struct gpu *g, struct gpu_file *f);
void gpu_usdt_attach(struct gpu *g, struct gpu_file *f);
void gpu_usdt_detach(struct gpu *g, struct gpu_file *f);
/* The file's slot is given back: its sites' spec ids too (detached). */
void gpu_usdt_release(struct gpu *g, struct gpu_file *f);

/* gpu_procs.c */
struct gpu_proc *gpu_proc_find(struct gpu *g, uint32_t tgid);
struct gpu_proc *gpu_proc_find_exited(struct gpu *g, uint32_t tgid);
void gpu_proc_scan(struct gpu *g, struct gpu_proc *p, uint64_t now_ms);
/* Between maps reads a target's liveness is checked every 500 ms, a watched
 * process's every 5 s where its reads wait for dynamic-linker events. */
bool gpu_proc_checks_alive(const struct gpu_proc *p);
void gpu_proc_alive(struct gpu *g, struct gpu_proc *p, uint64_t now_ms);
void gpu_rescan_notified(struct gpu *g);
uint64_t gpu_counter(const struct gpu *g, uint32_t c);
void gpu_proc_admitted(struct gpu *g, uint32_t tgid, uint64_t mm_id, const char *comm);
void gpu_adopt_targets(struct gpu *g);
int gpu_on_proc_event(void *ctx, void *data, size_t size);
bool gpu_proc_settled(const struct gpu_proc *p);

/* gpu_events.c */
int gpu_on_event(void *ctx, void *data, size_t size);

/* gpu_nccl_recover.c */
void gpu_nccl_recover(struct gpu *g, const struct gpu_event *e);
void gpu_nccl_recover_report(const struct gpu *g);
/* gpu_duty.c */
void gpu_duty_plan(struct gpu *g, uint64_t now_ns);

/* gpu_stacks.c */
void gpu_drain_stacks(struct gpu *g);
void gpu_resolve_stack(struct gpu *g, uint32_t tgid, uint64_t stack_id, const struct gpu_proc *p);
const char *gpu_kernel_name(struct gpu *g, uint32_t tgid, uint64_t mm_id, uint32_t api,
			    uint64_t object);

/* gpu_drain.c */
void gpu_proc_maps_of(struct gpu *g, struct bpf_map **maps);

/* gpu_view.c */
void gpu_remember_procs(struct gpu *g);

/* gpu.c: the user-side tables (raw_stacks .. funcs, leaks), empty / freed. */
void gpu_tables_init(struct gpu *g);
void gpu_tables_fini(struct gpu *g);

/* gpu_retire.c: after a batch, the rows of processes whose exit a batch
 * told before told_before_ns, idle raw stacks, unused frames. */
void gpu_retire(struct gpu *g, uint64_t told_before_ns);

/* gpu.c: whether tgid is traced for a capture (gpu__trace_process) */
bool gpu_traced(const struct gpu *g, uint32_t tgid);

#endif /* STRATA_GPU_IMPL_H */
