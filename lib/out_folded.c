// SPDX-License-Identifier: Apache-2.0
/*
 * Collapsed ("folded") stacks, the input of Brendan Gregg's flamegraph.pl
 * and of most flame graph tools: one line per distinct stack,
 *
 *	comm;root;...;leaf COUNT
 *
 * Kernel frames carry "_[k]" and inlined frames "_[i]" (flamegraph.pl's
 * palette hints).  Samples that differ only in what this format cannot
 * show (pid, tid, frames with equal names) are summed into one line, and
 * lines are sorted so that equal profiles give byte-identical files.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "lib/profile.h"

struct folded_line {
	size_t off;	  /* into the text buffer, while it may still move */
	const char *text; /* set once the buffer is complete */
	uint64_t count;
};

struct folded_buf {
	char *text;
	size_t len, cap;
};

static int buf_reserve(struct folded_buf *b, size_t more)
{
	size_t ncap;
	char *nt;

	if (b->cap - b->len >= more)
		return 0;
	if (more > SIZE_MAX / 2 - b->len)
		return -ENOMEM;
	ncap = b->cap ? b->cap : 4096;
	while (ncap - b->len < more)
		ncap *= 2;
	nt = realloc(b->text, ncap);
	if (!nt)
		return -ENOMEM;
	b->text = nt;
	b->cap = ncap;
	return 0;
}

/*
 * Appends s with the format's separators made harmless: ';' splits frames
 * and a newline ends the record, so neither may appear inside a name.
 */
static int buf_put_name(struct folded_buf *b, const char *s, const char *sfx)
{
	size_t n = strlen(s), m = strlen(sfx);
	char *d;
	int err;

	err = buf_reserve(b, n + m + 1);
	if (err)
		return err;
	d = b->text + b->len;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		d[i] = c == ';' ? ':' : (c == '\n' || c == '\r') ? ' ' : c;
	}
	memcpy(d + n, sfx, m);
	b->len += n + m;
	return 0;
}

static const char *frame_suffix(const struct profile_frame *f)
{
	/* kernel wins over inlined: the user/kernel boundary is what a
	 * reader of a mixed stack most needs to see */
	if (f->flags & PROFILE_FRAME_KERNEL)
		return "_[k]";
	if (f->flags & PROFILE_FRAME_INLINED)
		return "_[i]";
	return "";
}

static int line_cmp(const void *a, const void *b)
{
	const struct folded_line *x = a, *y = b;

	return strcmp(x->text, y->text);
}

int profile__write_folded(const struct profile *p, FILE *out)
{
	struct folded_buf buf = { 0 };
	struct folded_line *lines = NULL;
	const char **names = NULL;
	uint32_t nlines = 0;
	int err = 0;

	if (!p || !out)
		return -EINVAL;
	names = profile__display_names(p);
	lines = calloc(p->nsamples ? p->nsamples : 1, sizeof(*lines));
	if (!names || !lines) {
		err = -ENOMEM;
		goto err_out;
	}

	for (uint32_t i = 0; i < p->nsamples; i++) {
		const struct profile_sample *s = &p->samples[i];

		lines[i].off = buf.len;
		lines[i].count = s->count;
		err = buf_put_name(&buf, s->comm, "");
		for (uint32_t j = 0; !err && j < s->nframes; j++) {
			const struct profile_frame *f = &p->frames[s->frames[j]];

			err = buf_reserve(&buf, 1);
			if (!err) {
				buf.text[buf.len++] = ';';
				err = buf_put_name(&buf, names[s->frames[j]], frame_suffix(f));
			}
		}
		if (!err)
			err = buf_reserve(&buf, 1);
		if (err)
			goto err_out;
		buf.text[buf.len++] = '\0';
	}
	nlines = p->nsamples;
	for (uint32_t i = 0; i < nlines; i++)
		lines[i].text = buf.text + lines[i].off;
	if (nlines)
		qsort(lines, nlines, sizeof(*lines), line_cmp);

	for (uint32_t i = 0; i < nlines;) {
		uint64_t sum = 0;
		uint32_t j;

		for (j = i; j < nlines && !strcmp(lines[i].text, lines[j].text); j++)
			sum = lines[j].count > UINT64_MAX - sum ? UINT64_MAX : sum + lines[j].count;
		if (fprintf(out, "%s %" PRIu64 "\n", lines[i].text, sum) < 0) {
			err = -EIO;
			goto err_out;
		}
		i = j;
	}
	if (fflush(out) || ferror(out))
		err = -EIO;
err_out:
	free(buf.text);
	free(lines);
	free(names);
	return err;
}
