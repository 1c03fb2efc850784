// SPDX-License-Identifier: Apache-2.0
/*
 * GET /api/v1/profile/diff: a differential flame graph between a selection
 * (the usual filters) and a base (the same filters prefixed "base."), e.g.
 * rank=3 against base.rank=!3.  Both profiles are folded by the agent's
 * folded encoder, so a "stack" means the same thing here as in every
 * export; frames are laid out by the selection's share and coloured by the
 * change of their share (red: more of the selection's time than of the
 * base's, blue: less).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "lib/hash.h"
#include "lib/profile.h"
#include "lib/xml_str.h"
#include "server/server.h"

struct dnode {
	char *name;
	uint64_t a, b; /* selection, base */
	uint32_t first_child, next_sibling;
};

struct dtree {
	struct dnode *v;
	uint32_t n, cap;
	uint64_t total_a, total_b;
};

static int64_t child(struct dtree *t, uint32_t parent, const char *name, size_t len)
{
	uint32_t *link;

	if (t->n == t->cap) { /* grown first: link points into the array */
		struct dnode *nv = realloc(t->v, 2 * t->cap * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		t->v = nv;
		t->cap *= 2;
	}
	/* Siblings stay sorted by name, so equal profiles draw alike. */
	link = &t->v[parent].first_child;
	while (*link) {
		struct dnode *c = &t->v[*link];
		int cmp = strncmp(c->name, name, len);

		if (!cmp && c->name[len] == 0)
			return *link;
		if (cmp > 0 || (!cmp && c->name[len]))
			break;
		link = &c->next_sibling;
	}
	struct dnode *nn = &t->v[t->n];
	nn->name = strndup(name, len);
	if (!nn->name)
		return -ENOMEM;
	nn->a = nn->b = 0;
	nn->first_child = 0;
	nn->next_sibling = *link;
	*link = t->n;
	return t->n++;
}

/* Adds every line "f1;f2;...;fn COUNT" of folded text to the tree. */
static int add_folded(struct dtree *t, char *text, int side)
{
	for (char *save = NULL, *line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *sp = strrchr(line, ' ');
		uint64_t n;
		uint32_t at = 0;

		if (!sp)
			continue;
		n = strtoull(sp + 1, NULL, 10);
		*sp = 0;
		(side ? &t->v[0].b : &t->v[0].a)[0] += n;
		for (char *p = line; *p;) {
			size_t len = strcspn(p, ";");
			int64_t c = child(t, at, p, len);

			if (c < 0)
				return (int)c;
			at = (uint32_t)c;
			(side ? &t->v[at].b : &t->v[at].a)[0] += n;
			p += len;
			if (*p == ';')
				p++;
		}
	}
	return 0;
}

static int folded_text(const struct profile *p, char **text)
{
	size_t len;
	FILE *f = open_memstream(text, &len);
	int err;

	if (!f)
		return -ENOMEM;
	err = profile__write_folded(p, f);
	if (fclose(f) && !err)
		err = -ENOMEM;
	return err;
}

#define DIFF_WIDTH 1200.0
#define ROW_H 16

static uint32_t depth_of(const struct dtree *t, uint32_t i, uint32_t d)
{
	uint32_t best = d;

	for (uint32_t c = t->v[i].first_child; c; c = t->v[c].next_sibling) {
		uint32_t cd = depth_of(t, c, d + 1);

		if (cd > best)
			best = cd;
	}
	return best;
}

static void draw(FILE *out, const struct dtree *t, uint32_t i, double x, uint32_t depth,
		 uint32_t maxd)
{
	const struct dnode *n = &t->v[i];
	double w = t->total_a ? DIFF_WIDTH * (double)n->a / (double)t->total_a : 0;
	double sa = t->total_a ? (double)n->a / (double)t->total_a : 0;
	double sb = t->total_b ? (double)n->b / (double)t->total_b : 0;
	double delta = sa - sb; /* change of share, -1..1 */
	int shade = (int)(255 - (delta > 0 ? delta : -delta) * 4 * 255);

	if (w < 0.2)
		return;
	if (shade < 60)
		shade = 60;
	double y = (double)(maxd - depth) * ROW_H;
	fprintf(out, "<g><title>");
	xml_write_text(out, i ? n->name : "all", SIZE_MAX);
	fprintf(out,
		" (selection %" PRIu64 " = %.2f%%, base %" PRIu64 " = %.2f%%, %+.2f pp)</title>",
		n->a, 100 * sa, n->b, 100 * sb, 100 * delta);
	fprintf(out,
		"<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"rgb(%d,%d,%d)\"/>",
		x, y, w, ROW_H - 1, delta > 0 ? 255 : shade, shade, delta < 0 ? 255 : shade);
	if (w > 40) {
		fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" clip-path=\"inset(0 0 0 0)\">", x + 3,
			y + ROW_H - 4);
		/* by code points: a cut never splits a character */
		xml_write_text(out, i ? n->name : "all", (size_t)(w / 7));
		fputs("</text>", out);
	}
	fputs("</g>\n", out);
	for (uint32_t c = n->first_child; c; c = t->v[c].next_sibling) {
		draw(out, t, c, x, depth + 1, maxd);
		x += t->total_a ? DIFF_WIDTH * (double)t->v[c].a / (double)t->total_a : 0;
	}
}

static void write_svg(FILE *out, const struct dtree *t)
{
	uint32_t maxd = depth_of(t, 0, 0);

	fprintf(out,
		"<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
		"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%u\" "
		"font-family=\"monospace\" font-size=\"11\">\n"
		"<text x=\"4\" y=\"14\">differential flame graph: width = selection (%" PRIu64
		" samples), red = larger share than in base (%" PRIu64 "), blue = smaller</text>\n",
		DIFF_WIDTH, (maxd + 3) * ROW_H, t->total_a, t->total_b);
	fprintf(out, "<g transform=\"translate(0,%d)\">\n", 2 * ROW_H);
	draw(out, t, 0, 0, 0, maxd);
	fputs("</g></svg>\n", out);
}

static void write_json(FILE *out, const struct dtree *t, uint32_t i, int *first, char *path,
		       size_t len, size_t cap)
{
	const struct dnode *n = &t->v[i];
	size_t nl = len;
	uint64_t ca = 0, cb = 0;

	if (i) {
		int w = snprintf(path + len, cap - len, "%s%s", len ? ";" : "", n->name);

		nl = w > 0 && (size_t)w < cap - len ? len + (size_t)w : cap - 1;
	}
	for (uint32_t c = n->first_child; c; c = t->v[c].next_sibling) {
		ca += t->v[c].a;
		cb += t->v[c].b;
	}
	/* A node's own (self) counts are what its children do not cover. */
	if (i && (n->a > ca || n->b > cb)) {
		fputs(*first ? "" : ",", out);
		*first = 0;
		fputs("{\"stack\":", out);
		json_str(out, path);
		fprintf(out, ",\"selection\":%" PRIu64 ",\"base\":%" PRIu64 "}", n->a - ca,
			n->b - cb);
	}
	for (uint32_t c = n->first_child; c; c = t->v[c].next_sibling)
		write_json(out, t, c, first, path, nl, cap);
	path[len] = 0;
}

int api_profile_diff(struct server *srv, const struct request *r, FILE *out, const char **ctype)
{
	const char *fmt = request__arg(r, "format");
	struct store_filter fa, fb;
	struct profile *pa = NULL, *pb = NULL;
	struct dtree t = { 0 };
	char *ta = NULL, *tb = NULL, ferr[128];
	int err, status;

	if (request__filter(r, "", &fa, ferr, sizeof(ferr)) ||
	    request__filter(r, "base.", &fb, ferr, sizeof(ferr)))
		return json_error(out, 400, "%s", ferr);
	if (!fmt)
		fmt = "json";
	if (strcmp(fmt, "svg") && strcmp(fmt, "json"))
		return json_error(out, 400, "format: want svg or json");
	/* The base keeps the selection's time range unless it names its own. */
	if (!request__arg(r, "base.from"))
		fb.from_ns = fa.from_ns;
	if (!request__arg(r, "base.to"))
		fb.to_ns = fa.to_ns;
	t.cap = 1024;
	t.v = calloc(t.cap, sizeof(*t.v));
	if (!t.v)
		return json_error(out, 503, "out of memory");
	t.n = 1;
	err = server__load_profile(srv, &fa, STORE_PROFILE_CPU, &pa);
	if (!err)
		err = server__load_profile(srv, &fb, STORE_PROFILE_CPU, &pb);
	if (!err)
		err = folded_text(pa, &ta);
	if (!err)
		err = folded_text(pb, &tb);
	if (!err)
		err = add_folded(&t, ta, 0);
	if (!err)
		err = add_folded(&t, tb, 1);
	if (err) {
		status = err == -ETIMEDOUT
				 ? json_store_error(out, err)
				 : json_error(out, 503, "diff failed: %s", strerror(-err));
		goto out;
	}
	t.total_a = t.v[0].a;
	t.total_b = t.v[0].b;
	if (!strcmp(fmt, "svg")) {
		*ctype = "image/svg+xml";
		write_svg(out, &t);
	} else {
		char path[8192] = "";
		int first = 1;

		fprintf(out,
			"{\"selection_total\":%" PRIu64 ",\"base_total\":%" PRIu64 ",\"stacks\":[",
			t.total_a, t.total_b);
		write_json(out, &t, 0, &first, path, 0, sizeof(path));
		fputs("]}\n", out);
	}
	status = 200;
out:
	for (uint32_t i = 1; i < t.n; i++)
		free(t.v[i].name);
	free(t.v);
	free(ta);
	free(tb);
	profile__free(pa);
	profile__free(pb);
	return status;
}
