/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The CPython frame walker (3.10-3.13): finds the current thread's
 * PyThreadState and records its Python frames, leaf first, as (code object,
 * identity, instruction index) with a mark on the last frame of each native
 * _PyEval_EvalFrameDefault call, so user space can put each group of
 * Python frames where its eval call is in the native stack.
 *
 * Usable from any program type (perf_event, uprobe): it needs only the
 * process's descriptor (struct strata_py_proc, filled by the agent), the
 * thread's identity and user-memory reads.  Compiled into BPF, and with
 * STRATA_TESTING into a user-space test that walks a synthetic interpreter.
 *
 * The includer provides:
 *   py_hook_read(void *dst, __u32 size, __u64 addr)   -> 0 or negative
 *   py_hook_count(enum strata_py_err e)
 *   py_hook_stack()   -> struct strata_py_stack *  (per-CPU scratch)
 *   py_hook_buf()     -> struct py_read_buf *      (per-CPU scratch)
 *
 * Bounded: STRATA_PY_MAX_THREADS thread states searched, STRATA_PY_MAX_DEPTH
 * frames, one bpf_loop iteration each.
 */
#ifndef STRATA_PYTHON_WALK_H
#define STRATA_PYTHON_WALK_H

#ifndef PY_INLINE
#define PY_INLINE static __always_inline
#endif

/* One read per frame (d->fr_window bytes) and one per code object
 * (STRATA_PY_CODE_WINDOW): every field offset lies inside (the offsets
 * table's unit test checks it).  Offsets are masked for the verifier. */
#define PY_OFF_MASK 255

/* 3.12+ (Include/internal/pycore_frame.h, enum _frameowner): the shim
 * frame _PyEval_EvalFrameDefault pushes on entry. */
#define PY_FRAME_OWNED_BY_CSTACK 3

struct py_read_buf {
	__u8 frame[PY_OFF_MASK + 1 + 8];
	__u8 code[PY_OFF_MASK + 1 + 8];
};

#ifdef STRATA_TESTING
static long py_loop(__u32 n, long (*fn)(__u32, void *), void *ctx)
{
	for (__u32 i = 0; i < n; i++)
		if (fn(i, ctx))
			return i + 1;
	return n;
}
#else
#define py_loop(n, fn, ctx) bpf_loop(n, fn, ctx, 0)
#endif

PY_INLINE __u64 py_u64(const __u8 *buf, __u16 off)
{
	return *(const __u64 *)(buf + (off & PY_OFF_MASK));
}

PY_INLINE __u32 py_u32(const __u8 *buf, __u16 off)
{
	return *(const __u32 *)(buf + (off & PY_OFF_MASK));
}

PY_INLINE int py_read_ptr(__u64 *out, __u64 addr)
{
	if (!addr || py_hook_read(out, sizeof(*out), addr))
		return -1;
	return 0;
}

struct py_thread_ctx {
	const struct strata_py_proc *d; /* on the caller's stack */
	__u64 ts;			/* current candidate */
	__u64 want;			/* tid or pthread_self() */
	__u64 found;
	int err;
};

static long py_thread_step(__u32 i, void *data)
{
	struct py_thread_ctx *c = data;
	__u64 id = 0;

	if (!c->ts)
		return 1;
	if (py_hook_read(&id, c->d->match == STRATA_PY_MATCH_TID ? 4 : 8,
			 c->ts + c->d->ts_thread)) {
		c->err = 1;
		return 1;
	}
	if (id == c->want) {
		c->found = c->ts;
		return 1;
	}
	if (py_read_ptr(&c->ts, c->ts + c->d->ts_next))
		c->ts = 0;
	return 0;
}

/*
 * The PyThreadState of the thread identified by want (kernel tid or
 * pthread_self(), per d->match), or 0 (counted).  cached: an address found
 * before for this thread, re-validated by its id field first (thread states
 * are freed when threads end).  Searches the head interpreter's threads.
 */
PY_INLINE __u64 py_find_tstate(const struct strata_py_proc *d, __u64 want, __u64 cached)
{
	struct py_thread_ctx c = { .d = d, .want = want };
	__u64 interp, id = 0;

	if (cached &&
	    !py_hook_read(&id, d->match == STRATA_PY_MATCH_TID ? 4 : 8, cached + d->ts_thread) &&
	    id == want) {
		py_hook_count(STRATA_PY_TSTATE_CACHED);
		return cached;
	}
	if (py_read_ptr(&interp, d->runtime + d->rt_interp_head)) {
		py_hook_count(STRATA_PY_ERR_READ);
		return 0;
	}
	if (!interp) { /* not initialized yet, or finalized */
		py_hook_count(STRATA_PY_NO_THREAD);
		return 0;
	}
	if (py_read_ptr(&c.ts, interp + d->is_threads_head)) {
		py_hook_count(STRATA_PY_ERR_READ);
		return 0;
	}
	py_loop(STRATA_PY_MAX_THREADS, py_thread_step, &c);
	if (c.err && !c.found)
		py_hook_count(STRATA_PY_ERR_READ);
	else if (!c.found)
		py_hook_count(STRATA_PY_NO_THREAD);
	return c.found;
}

/*
 * The per-thread cache of thread-state addresses (py_tstates).  The id
 * check alone cannot see a thread state that was freed while its memory
 * still holds the thread's id: a C thread's PyGILState_Release() deletes
 * its state (pybind11's gil_scoped_acquire in PyTorch's worker threads
 * does so every time), the next PyGILState_Ensure() allocates another, and
 * the stale one would be walked (no frames, or garbage once reused) for as
 * long as it stays cached.  So a cached address is trusted for
 * STRATA_PY_TSTATE_TTL_NS after a full search found it, then searched for
 * again.
 */
#define STRATA_PY_TSTATE_TTL_NS 250000000ULL

struct py_tstate_cache {
	__u64 ts;	/* PyThreadState address */
	__u64 found_ns; /* when a search of the thread list found it */
};

_Static_assert(sizeof(struct py_tstate_cache) == 16, "py_tstate_cache layout");

/* The cached address still to be trusted at now, or 0 (search again). */
PY_INLINE __u64 py_tstate_fresh(const struct py_tstate_cache *c, __u64 now)
{
	if (!c || now < c->found_ns || now - c->found_ns >= STRATA_PY_TSTATE_TTL_NS)
		return 0;
	return c->ts;
}

struct py_walk_ctx {
	struct strata_py_proc d; /* a copy: map values cannot live in loop contexts */
	__u64 frame;
	__u32 n;
	int err;
};

/* Marks the frame recorded last as the end of its eval call's group. */
PY_INLINE void py_mark_entry(struct strata_py_stack *s, __u32 n)
{
	__u32 last = n - 1;

	if (last < STRATA_PY_MAX_DEPTH) /* n == 0 wraps: nothing recorded yet */
		s->frames[last].flags |= STRATA_PY_FRAME_ENTRY;
}

static long py_frame_step(__u32 i, void *data)
{
	struct py_walk_ctx *c = data;
	struct strata_py_stack *s = py_hook_stack();
	struct py_read_buf *b = py_hook_buf();
	const struct strata_py_proc *d = &c->d;
	struct strata_py_frame *f;
	__u64 code, name;
	__u8 entry = 0;
	__u32 n;

	if (!s || !b || !c->frame)
		return 1;
	if (py_hook_read(b->frame, d->fr_window & (STRATA_PY_FRAME_WINDOW_MAX - 1), c->frame)) {
		c->err = 1;
		return 1;
	}
	code = py_u64(b->frame, d->fr_code);
	if (d->fr_entry != STRATA_PY_NO_FIELD)
		entry = b->frame[d->fr_entry & PY_OFF_MASK];
	c->frame = py_u64(b->frame, d->fr_previous);
	if (d->frames == STRATA_PY_FRAMES_312 && entry == PY_FRAME_OWNED_BY_CSTACK) {
		py_mark_entry(s, c->n); /* a shim: the frames above it were one call */
		return 0;
	}
	n = c->n;
	if (n >= STRATA_PY_MAX_DEPTH) {
		s->flags |= STRATA_PY_FRAME_TRUNCATED;
		return 1;
	}
	if (!code || py_hook_read(b->code, STRATA_PY_CODE_WINDOW, code)) {
		c->err = 1;
		return 1;
	}
	f = &s->frames[n];
	f->code = code;
	name = py_u64(b->code, d->co_name);
	f->ident = strata_py_ident(py_u32(b->code, d->co_firstlineno), name,
				   py_u64(b->code, d->co_filename));
	f->flags = 0;
	f->pad = 0;
	if (d->frames == STRATA_PY_FRAMES_310) {
		f->lasti = (__s32)py_u32(b->frame, d->fr_instr);
		f->flags = STRATA_PY_FRAME_ENTRY; /* one eval call per frame */
	} else {
		__u64 instr = py_u64(b->frame, d->fr_instr);
		__u64 first = code + d->co_code_adaptive;

		f->lasti = instr >= first && instr - first < (1ULL << 31)
				   ? (__s32)((instr - first) / 2)
				   : -1;
		if (d->frames == STRATA_PY_FRAMES_311 && entry)
			f->flags = STRATA_PY_FRAME_ENTRY;
	}
	c->n = n + 1;
	return 0;
}

/*
 * Records the Python frames of thread state ts into py_hook_stack(), leaf
 * first.  Returns the number of frames (0: none or failed; counted).
 */
PY_INLINE __u32 py_walk(const struct strata_py_proc *d, __u64 ts)
{
	struct py_walk_ctx c = { .d = *d };
	struct strata_py_stack *s = py_hook_stack();
	__u64 cframe;

	if (!s)
		return 0;
	s->len = 0;
	s->flags = 0;
	if (py_read_ptr(&cframe, ts + d->ts_frame)) {
		py_hook_count(STRATA_PY_ERR_READ);
		return 0;
	}
	c.frame = cframe;
	if (d->cframe_current != STRATA_PY_NO_FIELD &&
	    py_read_ptr(&c.frame, cframe + d->cframe_current)) {
		py_hook_count(STRATA_PY_ERR_READ);
		return 0;
	}
	if (!c.frame) {
		py_hook_count(STRATA_PY_NO_FRAMES);
		return 0;
	}
	/* One more iteration than frames: the shims of 3.12+ take some. */
	py_loop(2 * STRATA_PY_MAX_DEPTH, py_frame_step, &c);
	s = py_hook_stack();
	if (!s)
		return 0;
	if (c.err)
		py_hook_count(STRATA_PY_ERR_READ);
	else if (c.frame) /* frames left after the last iteration */
		s->flags |= STRATA_PY_FRAME_TRUNCATED;
	if (s->flags & STRATA_PY_FRAME_TRUNCATED)
		py_hook_count(STRATA_PY_ERR_DEPTH);
	s->len = c.n > STRATA_PY_MAX_DEPTH ? STRATA_PY_MAX_DEPTH : c.n;
	if (s->len)
		py_hook_count(STRATA_PY_WALKED);
	else
		py_hook_count(STRATA_PY_NO_FRAMES);
	return s->len;
}

#endif /* STRATA_PYTHON_WALK_H */
