// SPDX-License-Identifier: Apache-2.0
#include "agent/python/python_symbols.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "agent/proc/proc_mem.h"
#include "lib/utf8.h"
#include "unwind/python_lines.h"

#define CODE_HEADER 256 /* bytes read from a code object: every field we use */

struct slot {
	uint64_t mm_id, code;
	uint32_t ident;
	int err; /* cached failure (-ESTALE, -EFAULT, ...), 0 when resolved */
	int firstlineno;
	unsigned minor;
	char qualname[PY_NAME_MAX];
	char filename[PY_NAME_MAX];
	uint8_t *lines; /* co_linetable copy */
	size_t nlines;
	int used;
};

struct py_symbols {
	struct slot *slots;
	size_t nslots;
	struct py_symbols_stats st;
};

struct py_symbols *py_symbols__new(size_t slots)
{
	struct py_symbols *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->nslots = slots ? slots : 4096;
	c->slots = calloc(c->nslots, sizeof(*c->slots));
	if (!c->slots) {
		free(c);
		return NULL;
	}
	return c;
}

static void slot_clear(struct slot *s)
{
	free(s->lines);
	memset(s, 0, sizeof(*s));
}

void py_symbols__free(struct py_symbols *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nslots; i++)
		free(c->slots[i].lines);
	free(c->slots);
	free(c);
}

void py_symbols__forget(struct py_symbols *c, uint64_t mm_id)
{
	for (size_t i = 0; i < c->nslots; i++)
		if (c->slots[i].used && c->slots[i].mm_id == mm_id)
			slot_clear(&c->slots[i]);
}

/* Appends code point cp as UTF-8; returns 0, or -1 when out is full. */
static int put_utf8(char *out, size_t sz, size_t *pos, uint32_t cp)
{
	char b[4];
	size_t n = utf8_encode(cp, b);

	if (*pos + n >= sz)
		return -1;
	memcpy(out + *pos, b, n);
	*pos += n;
	return 0;
}

int py_symbols__decode_str(uint32_t state, const uint8_t *data, size_t length, char *out, size_t sz)
{
	/* PyASCIIObject.state bits (Include/cpython/unicodeobject.h, 3.10-3.13):
	 * interned:2, kind:3, compact:1, ascii:1. */
	unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1;
	size_t pos = 0;

	if (!sz)
		return -EINVAL;
	out[0] = '\0';
	if (!compact || (kind != 1 && kind != 2 && kind != 4))
		return -EINVAL;
	for (size_t i = 0; i < length; i++) {
		uint32_t cp;

		if (kind == 1) {
			cp = data[i];
		} else if (kind == 2) {
			uint16_t u;

			memcpy(&u, data + 2 * i, 2);
			cp = u;
		} else {
			memcpy(&cp, data + 4 * i, 4);
			if (cp > 0x10ffff)
				cp = 0xfffd;
		}
		if (put_utf8(out, sz, &pos, cp))
			break; /* truncated at a character boundary */
	}
	out[pos] = '\0';
	return 0;
}

static uint64_t u64_at(const uint8_t *b, uint16_t off)
{
	uint64_t v;

	memcpy(&v, b + off, sizeof(v));
	return v;
}

/* Reads the str object at addr into out as UTF-8. */
static int read_str(uint32_t pid, const struct py_offsets *o, uint64_t addr, char *out, size_t sz)
{
	uint8_t hdr[128], data[4 * PY_NAME_MAX];
	uint32_t state;
	int64_t length;
	unsigned kind;
	size_t off, n;
	int err;

	/* The offsets come from the target (3.13's _Py_DebugOffsets): the
	 * fields must lie inside the header read. */
	if (o->uni_compact_size > sizeof(hdr) ||
	    o->uni_length + sizeof(length) > o->uni_compact_size ||
	    o->uni_state + sizeof(state) > o->uni_compact_size)
		return -EINVAL;
	err = proc_mem__read(pid, addr, hdr, o->uni_compact_size);
	if (err)
		return err;
	memcpy(&length, hdr + o->uni_length, sizeof(length));
	memcpy(&state, hdr + o->uni_state, sizeof(state));
	kind = (state >> 2) & 7;
	if (length < 0 || (kind != 1 && kind != 2 && kind != 4))
		return -EINVAL;
	off = (state >> 6) & 1 ? o->uni_ascii_size : o->uni_compact_size;
	n = (size_t)length < PY_NAME_MAX ? (size_t)length : PY_NAME_MAX - 1;
	err = proc_mem__read(pid, addr + off, data, n * kind);
	if (err)
		return err;
	return py_symbols__decode_str(state, data, n, out, sz);
}

/* Copies the bytes object at addr (co_linetable) into a new buffer. */
static int read_bytes(uint32_t pid, const struct py_offsets *o, uint64_t addr, uint8_t **out,
		      size_t *n)
{
	int64_t size;
	int err;

	*out = NULL;
	*n = 0;
	err = proc_mem__read(pid, addr + o->bytes_size, &size, sizeof(size));
	if (err)
		return err;
	if (size < 0 || size > PY_LINETABLE_MAX)
		return -EINVAL;
	if (!size)
		return 0;
	*out = malloc((size_t)size);
	if (!*out)
		return -ENOMEM;
	err = proc_mem__read(pid, addr + o->bytes_sval, *out, (size_t)size);
	if (err) {
		free(*out);
		*out = NULL;
		return err;
	}
	*n = (size_t)size;
	return 0;
}

/* Fills slot s from the code object f->code of pid. */
static int load(uint32_t pid, const struct py_offsets *o, const struct strata_py_frame *f,
		struct slot *s)
{
	uint8_t hdr[CODE_HEADER];
	uint64_t name, file, lines;
	int32_t first;
	int err;

	err = proc_mem__read(pid, f->code, hdr, sizeof(hdr));
	if (err)
		return err;
	memcpy(&first, hdr + o->co_firstlineno, sizeof(first));
	name = u64_at(hdr, o->co_qualname);
	file = u64_at(hdr, o->co_filename);
	lines = u64_at(hdr, o->co_linetable);
	if (strata_py_ident((uint32_t)first, name, file) != f->ident)
		return -ESTALE;
	s->firstlineno = first;
	s->minor = o->version & 0xff;
	err = read_str(pid, o, name, s->qualname, sizeof(s->qualname));
	if (!err)
		err = read_str(pid, o, file, s->filename, sizeof(s->filename));
	if (!err)
		err = read_bytes(pid, o, lines, &s->lines, &s->nlines);
	return err;
}

static size_t slot_of(const struct py_symbols *c, uint64_t mm_id, uint64_t code, uint32_t ident)
{
	uint64_t h = (mm_id ^ code * 0x9e3779b97f4a7c15ULL ^ ident) * 0xff51afd7ed558ccdULL;

	return (size_t)((h ^ h >> 33) % c->nslots);
}

int py_symbols__resolve(struct py_symbols *c, uint32_t pid, uint64_t mm_id,
			const struct py_offsets *o, const struct strata_py_frame *f,
			struct py_frame_sym *out)
{
	struct slot *s = &c->slots[slot_of(c, mm_id, f->code, f->ident)];

	if (CODE_HEADER < (size_t)o->co_linetable + 8 || CODE_HEADER < (size_t)o->co_filename + 8 ||
	    CODE_HEADER < (size_t)o->co_qualname + 8 || CODE_HEADER < (size_t)o->co_firstlineno + 4)
		return -EINVAL;
	c->st.lookups++;
	if (s->used && s->mm_id == mm_id && s->code == f->code && s->ident == f->ident) {
		c->st.hits++;
	} else {
		if (s->used)
			c->st.evictions++;
		slot_clear(s);
		s->used = 1;
		s->mm_id = mm_id;
		s->code = f->code;
		s->ident = f->ident;
		/* Failures are cached too: a freed code object stays freed. */
		s->err = load(pid, o, f, s);
		if (s->err == -ESTALE)
			c->st.stale++;
		else if (s->err)
			c->st.read_failed++;
	}
	if (s->err)
		return s->err;
	out->qualname = s->qualname;
	out->filename = s->filename;
	/* Line tables count bytes: two per code unit. */
	out->line = py_line_for(s->minor, s->lines, s->nlines, s->firstlineno,
				f->lasti < 0 || f->lasti > INT_MAX / 2 ? -1 : f->lasti * 2);
	if (out->line < 0)
		c->st.no_line++;
	return 0;
}

void py_symbols__stats(const struct py_symbols *c, struct py_symbols_stats *st)
{
	*st = c->st;
}
