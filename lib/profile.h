/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A symbolized, aggregated CPU profile: the one data model every output
 * format (folded, pprof, SVG, JSON) encodes.  Built by `strata record` and
 * the agent after a drain; later also by the server from stored data.
 *
 * Strings and frames are interned: a profile owns all its memory and a
 * frame index stays valid for the profile's life.
 */
#ifndef STRATA_PROFILE_H
#define STRATA_PROFILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Sanity bound on one stack; deeper ones are bugs or hostile input. */
#define PROFILE_MAX_FRAMES 4096

/*
 * What a frame is and how to show it: the one frame-kind/flag vocabulary
 * of the agent, the wire and the server.  The kinds are numbered as the
 * wire's Frame.Kind (lib/wire_enums.h checks them); the stores keep the
 * kind beside the flags.
 */
enum profile_frame_kind {
	PROFILE_KIND_NATIVE = 1,  /* ELF file + file offset */
	PROFILE_KIND_KERNEL = 2,  /* kernel ip, named from kallsyms */
	PROFILE_KIND_PYTHON = 3,  /* interpreter frame: qualname, file, line */
	PROFILE_KIND_LOST = 4,	  /* "[stack lost]": the stack could not be read */
	PROFILE_KIND_UNKNOWN = 5, /* user ip in no known mapping */
};

enum profile_frame_flags {
	PROFILE_FRAME_KERNEL = 1u << 0,	    /* kernel text */
	PROFILE_FRAME_INLINED = 1u << 1,    /* inlined into the frame below it */
	PROFILE_FRAME_UNRESOLVED = 1u << 2, /* no symbol: shown as module+0xaddr */
	PROFILE_FRAME_PYTHON = 1u << 3,	    /* interpreter-level frame */
	/* addr is a return address (symbolized at addr - 1): kept where a
	 * frame stored unresolved may be resolved later (the server) */
	PROFILE_FRAME_RETURN = 1u << 16,
};

struct profile_frame {
	const char *func;   /* demangled function name; NULL when unresolved */
	const char *file;   /* source file, NULL when unknown */
	uint32_t line;	    /* 0 when unknown */
	const char *module; /* path of the ELF ("[kernel]" / kernel module name) */
	uint64_t addr;	    /* file offset in module (user), address (kernel) */
	uint32_t flags;	    /* enum profile_frame_flags */
};

struct profile_sample {
	uint32_t pid; /* tgid */
	uint32_t tid;
	const char *comm; /* thread name */
	uint32_t nframes;
	uint32_t *frames; /* indices into profile.frames, ROOT FIRST, leaf last */
	uint64_t count;	  /* number of samples with exactly this stack */
};

/* What the sampler lost or could not attribute, carried into every output. */
struct profile_drops {
	uint64_t map_full;     /* aggregation map had no room */
	uint64_t stack_lost;   /* stack could not be read / stored */
	uint64_t proc_unknown; /* process vanished before its mappings were read */
	uint64_t other;
};

struct profile {
	uint32_t freq_hz;  /* sampling frequency; period = 1e9 / freq ns */
	uint64_t start_ns; /* CLOCK_REALTIME, start of the window */
	uint64_t end_ns;   /* CLOCK_REALTIME, end of the window */
	struct profile_drops drops;

	struct profile_frame *frames; /* interned, strings owned by the profile */
	uint32_t nframes;
	struct profile_sample *samples;
	uint32_t nsamples;

	struct profile_impl *impl; /* interning tables; private */
};

struct profile *profile__new(uint32_t freq_hz);
void profile__free(struct profile *p);

/* Interns a frame (copying its strings); returns its index, or -errno. */
int64_t profile__intern_frame(struct profile *p, const struct profile_frame *f);

/*
 * Adds count samples for the stack frames[0..n) (root first).  Identical
 * (pid, tid, comm, stack) samples are merged.  A NULL or empty comm is
 * stored as "[unknown]"; count 0 adds nothing.  Returns 0, -E2BIG when
 * n > PROFILE_MAX_FRAMES, -EINVAL for a frame index the profile lacks,
 * -EOVERFLOW when a merged count would wrap, or -ENOMEM.
 */
int profile__add_sample(struct profile *p, uint32_t pid, uint32_t tid, const char *comm,
			const uint32_t *frames, uint32_t n, uint64_t count);

/* Total of all sample counts. */
uint64_t profile__total(const struct profile *p);

/*
 * The name a frame is displayed under: "func" when resolved, otherwise
 * "basename(module)+0xaddr".  Writes into buf (always NUL-terminated) and
 * returns buf.
 */
const char *profile__frame_name(const struct profile_frame *f, char *buf, size_t sz);

/* Encoders: 0 or -errno.  Each writes the whole profile to out. */
int profile__write_folded(const struct profile *p, FILE *out);
int profile__write_pprof(const struct profile *p, FILE *out); /* gzipped */
/* pprof with n caller-given values per sample (values[i * n + k] for sample
 * i) instead of samples/cpu, and no period: e.g. the GPU leak report's
 * inuse_space/inuse_objects/alloc_space/alloc_objects heap profile. */
#define PROFILE_PPROF_MAX_VALUES 8
int profile__write_pprof_values(const struct profile *p, FILE *out, uint32_t n,
				const char *const *types, const char *const *units,
				const int64_t *values, const char *default_type);
int profile__write_svg(const struct profile *p, FILE *out, const char *title);
int profile__write_json(const struct profile *p, FILE *out);

/* SVG layout knobs; zero fields take the defaults. */
struct profile_svg_opts {
	size_t sz;	     /* sizeof(struct profile_svg_opts) */
	uint32_t width;	     /* image width in px; 0 = 1200 */
	double min_width_px; /* narrower frames are left out; 0 = 0.1 */
};

int profile__write_svg_opts(const struct profile *p, FILE *out, const char *title,
			    const struct profile_svg_opts *opts);

/*
 * Picks the encoder from path's extension (.folded .pb.gz .svg .json;
 * anything else -EINVAL) and writes through a temporary file in the same
 * directory that is renamed over path, so a reader never sees half a file.
 */
int profile__write_file(const struct profile *p, const char *path, const char *title);

/*
 * --- Support shared by the encoders (not a general-purpose API) ---------
 */

/* 64-bit hash of n bytes, chained through seed (0 to start). */
uint64_t profile__hash(const void *data, size_t n, uint64_t seed);

/*
 * Open-addressing table from a 64-bit hash to a uint32_t id.  It stores
 * only (hash, id); callers keep the keys and decide equality, so one table
 * type serves strings, frames, stacks and encoder-side keys alike.
 */
struct profile_htab {
	uint64_t *hashes;
	uint32_t *ids; /* id + 1; 0 marks an empty slot */
	uint32_t cap;  /* power of two, or 0 before the first insert */
	uint32_t n;
};

/* Returns 1 when the caller's key equals the key stored under id. */
typedef int (*profile_htab_eq_fn)(uint32_t id, const void *key, const void *ctx);

/* The id stored for key, or -ENOENT. */
int64_t profile_htab__find(const struct profile_htab *h, uint64_t hash, profile_htab_eq_fn eq,
			   const void *key, const void *ctx);
/* Adds (hash, id) after a failed find; 0 or -ENOMEM. */
int profile_htab__insert(struct profile_htab *h, uint64_t hash, uint32_t id);
/* Frees the table's memory; h may be NULL. */
void profile_htab__fini(struct profile_htab *h);

/*
 * The display name (as profile__frame_name, never truncated) of every
 * frame: names[i] for frame i.  Resolved names point at the profile's own
 * strings.  One allocation: free() it.  NULL on ENOMEM (errno set).
 */
const char **profile__display_names(const struct profile *p);

/* True when the frame has no function name to show. */
static inline int profile_frame__unresolved(const struct profile_frame *f)
{
	return !f->func || !f->func[0] || (f->flags & PROFILE_FRAME_UNRESOLVED);
}

#endif /* STRATA_PROFILE_H */
