/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Double-buffered maps that user space drains (agent/core/map_drain.c): BPF
 * writes generation gen of an ARRAY_OF_MAPS; user space flips gen through
 * the mmap'd .bss, waits until no program still runs against the old
 * generation (the per-CPU inflight counters), then reads and clears it
 * while nothing writes it.  A per-entry lookup_and_delete drain instead
 * races with programs that hold a pointer to the entry: their increment
 * lands after the copy (lost), or in a preallocated hash in an element
 * already reused for another key (misattributed).
 *
 * Used by bpf/profile.bpf.c (CPU samples) and bpf/sched.bpf.c (off-CPU
 * time).  Defines gen and the inflight map, so include it once per object,
 * after vmlinux.h, bpf_helpers.h and strata.h.
 */
#ifndef STRATA_BPF_GENERATION_BPF_H
#define STRATA_BPF_GENERATION_BPF_H

/*
 * A double-buffered hash: name0 and name1 (struct name##_map, which user
 * space sizes and clears by those names) behind the ARRAY_OF_MAPS name,
 * indexed by generation.
 */
#define STRATA_GENERATION_MAPS(name, key_type, value_type, entries) \
	struct name##_map {                                         \
		__uint(type, BPF_MAP_TYPE_HASH);                    \
		__uint(max_entries, entries);                       \
		__type(key, key_type);                              \
		__type(value, value_type);                          \
	} name##0 SEC(".maps"), name##1 SEC(".maps");               \
	struct {                                                    \
		__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);           \
		__uint(max_entries, STRATA_GENERATIONS);            \
		__type(key, __u32);                                 \
		__array(values, struct name##_map);                 \
	} name SEC(".maps") = {                                     \
		.values = { &name##0, &name##1 },                   \
	}

/* Generation BPF writes to; flipped by user space through the mmap'd .bss. */
__u32 gen;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct strata_inflight);
} inflight SEC(".maps");

/* An atomic add whose result is consumed, so clang emits the fetch form
 * (BPF_ATOMIC | BPF_FETCH), which every JIT makes fully ordered. */
static __always_inline void add_ordered(__u64 *p, __s64 v)
{
	volatile __u64 old = __sync_fetch_and_add(p, v);

	(void)old;
}

/*
 * Enter generation g: announce ourselves in inflight[g] before re-reading
 * gen.  The fetch form of the atomic add is a full barrier on every JIT
 * (lock xadd on x86, LDADDAL / LL-SC with barriers on arm64; the non-fetch
 * form is not ordered on arm64), so either user space's flip happened before
 * our re-read (we see it and move over), or our increment is visible to user
 * space's inflight check after its flip (it waits for us).  Either way no
 * update lands in a generation that is being drained.  After moving over we
 * do not re-check: the next flip comes a drain interval (>= milliseconds)
 * later, and BPF programs run with migration disabled and never sleep here.
 */
static __always_inline __u32 generation_enter(struct strata_inflight *inf)
{
	__u32 g = *(volatile __u32 *)&gen & 1;

	add_ordered(&inf->n[g], 1);
	__u32 now = *(volatile __u32 *)&gen & 1;
	if (now != g) {
		add_ordered(&inf->n[g], -1);
		g = now;
		add_ordered(&inf->n[g], 1);
	}
	return g;
}

/* Ordered too: our map updates are visible before user space can see the
 * generation quiet. */
static __always_inline void generation_leave(struct strata_inflight *inf, __u32 g)
{
	add_ordered(&inf->n[g & 1], -1);
}

/* This CPU's inflight counters (NULL only if the map is broken). */
static __always_inline struct strata_inflight *generation_inflight(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&inflight, &zero);
}

#endif /* STRATA_BPF_GENERATION_BPF_H */
