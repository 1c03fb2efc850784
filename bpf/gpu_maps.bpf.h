/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Maps of bpf/gpu.bpf.c.  Every one is bounded; a full map is counted
 * (enum gpu_counter), never silent.  User space may resize them before
 * load. */
#ifndef STRATA_BPF_GPU_MAPS_BPF_H
#define STRATA_BPF_GPU_MAPS_BPF_H

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct gpu_target);
} gpu_targets SEC(".maps");

/* The session's own filter (the sampler's maps, shared with
 * bpf_map__reuse_fd): a process the session profiles becomes a GPU target
 * at its first call into an attached file (see admit()). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, __u32);
} session_targets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_CGROUP_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} session_cgroup SEC(".maps");

/* Deep capture (agent/capture/): processes whose every CUDA call is sent
 * as an event (as --trace does for all), while a capture asks for it. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u32);
} gpu_trace_tgids SEC(".maps");

/* Keyed by thread id: one entry per calling thread, kept between calls (no
 * map update or delete per call).  LRU: dead threads' entries age out. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct gpu_call);
} gpu_inflight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, GPU_CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} gpu_counters SEC(".maps");

/* Call-site stacks, deduplicated by content hash; user space copies and
 * deletes them every drain. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct strata_stack);
} gpu_stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct strata_stack);
} gpu_scratch SEC(".maps");

/* Python frames of call sites (by content hash) and the (native, Python)
 * pairs naming a site that has both; drained and deleted like gpu_stacks. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 2048);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* 2.3 KiB values */
	__type(key, __u64);
	__type(value, struct strata_py_stack);
} gpu_py_stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct gpu_stack_pair);
} gpu_stack_pairs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct gpu_site_key);
	__type(value, struct gpu_site_val);
} gpu_sites SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct gpu_tally_key);
	__type(value, struct gpu_tally_val);
} gpu_tally SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct gpu_err_key);
	__type(value, __u64);
} gpu_errs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 262144);
	__type(key, struct gpu_alloc_key);
	__type(value, struct gpu_alloc_val);
} gpu_allocs SEC(".maps");

/* Inserts and deletes in gpu_allocs and gpu_fw_allocs so far: user space
 * walks one of those maps (262,144 buckets, ~0.3 ms even empty) at a drain
 * only when its count moved since the last walk (agent/gpu/gpu_drain.c).
 * Raised after the map operation, with a fully ordered atomic. */
__u64 gpu_allocs_changes;
__u64 gpu_fw_allocs_changes;

static __always_inline void allocs_changed(__u64 *changes)
{
	volatile __u64 old = __sync_fetch_and_add(changes, 1); /* the fetch form: ordered */

	(void)old;
}

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct gpu_func_key);
	__type(value, struct gpu_func_name);
} gpu_funcs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct gpu_comm_key);
	__type(value, struct gpu_comm_val);
} gpu_comms SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct gpu_coll_key);
	__type(value, struct gpu_coll_val);
} gpu_colls SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1024 * 1024);
} gpu_events SEC(".maps");

/* Exits and execs of targets, with the exit-time mappings (struct
 * strata_proc_event, as the sampler's events: user space feeds them to the
 * process tracker). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} gpu_proc_events SEC(".maps");

static __always_inline void gpu_count(enum gpu_counter c)
{
	__u32 key = c;
	__u64 *v = bpf_map_lookup_elem(&gpu_counters, &key);

	if (v)
		*v += 1; /* per-CPU; uprobe programs run with migration off */
}

/* Adds v to *p atomically (maps shared by every CPU). */
#define gpu_add(p, v) __sync_fetch_and_add((p), (v))

#endif /* STRATA_BPF_GPU_MAPS_BPF_H */
