// SPDX-License-Identifier: Apache-2.0
/*
 * Flame graph SVG, self-contained: the frames, a stylesheet and a small
 * script for click-to-zoom, search and details, with no external files.
 *
 * The tree is the folded view of the profile: "all" at the bottom, then
 * the process name (comm), then the stack from its root.  Sibling frames
 * are merged by displayed name and sorted by it, as flamegraph.pl does,
 * so equal profiles give identical images.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "lib/profile.h"
#include "lib/xml_str.h"

#define SVG_WIDTH 1200
#define SVG_MIN_WIDTH_PX 0.1
#define SVG_FRAME_H 16
#define SVG_FONT 12
#define SVG_CHAR_W 0.59 /* average glyph width, in font sizes (Verdana) */
#define SVG_XPAD 10
#define SVG_YPAD_TOP (SVG_FONT * 5)
#define SVG_YPAD_BOTTOM (SVG_FONT * 2 + 10)

enum node_cls {
	CLS_ALL,
	CLS_COMM,
	CLS_NATIVE,
	CLS_KERNEL,
	CLS_INLINED,
	CLS_PYTHON,
	CLS_UNRESOLVED,
};

struct node {
	const char *name; /* profile-owned or names[] */
	const char *file; /* of the first frame merged in; interned */
	uint64_t count;
	uint64_t off; /* samples left of this node in the whole graph */
	uint32_t parent;
	uint32_t depth;
	uint32_t line;
	uint8_t cls;
	uint8_t file_mixed, line_mixed; /* merged frames disagree */
};

struct tree {
	struct node *nodes;
	uint32_t n, cap;
	struct profile_htab h;
};

struct node_key {
	uint32_t parent;
	uint8_t cls;
	const char *name;
};

static uint64_t node_hash(const struct node_key *k)
{
	uint64_t seed = ((uint64_t)k->parent << 8) | k->cls;

	return profile__hash(k->name, strlen(k->name), seed);
}

static int node_eq(uint32_t id, const void *key, const void *ctx)
{
	const struct node_key *k = key;
	const struct node *n = &((const struct tree *)ctx)->nodes[id];

	return n->parent == k->parent && n->cls == k->cls &&
	       (n->name == k->name || !strcmp(n->name, k->name));
}

/* The child of parent named name (created on first use), or -errno. */
static int64_t tree_child(struct tree *t, uint32_t parent, uint8_t cls, const char *name)
{
	struct node_key k = { parent, cls, name };
	uint64_t h = node_hash(&k);
	struct node *n;
	int64_t id;
	int err;

	id = profile_htab__find(&t->h, h, node_eq, &k, t);
	if (id >= 0)
		return id;
	if (t->n == t->cap) {
		uint32_t ncap = t->cap ? t->cap * 2 : 256;
		struct node *nn;

		if (t->cap >= (1u << 30))
			return -ENOMEM;
		nn = realloc(t->nodes, (size_t)ncap * sizeof(*nn));
		if (!nn)
			return -ENOMEM;
		t->nodes = nn;
		t->cap = ncap;
	}
	err = profile_htab__insert(&t->h, h, t->n);
	if (err)
		return err;
	n = &t->nodes[t->n];
	memset(n, 0, sizeof(*n));
	n->name = name;
	n->parent = parent;
	n->depth = t->nodes[parent].depth + 1;
	n->cls = cls;
	return t->n++;
}

static uint8_t frame_cls(const struct profile_frame *f)
{
	if (profile_frame__unresolved(f))
		return CLS_UNRESOLVED;
	if (f->flags & PROFILE_FRAME_KERNEL)
		return CLS_KERNEL;
	if (f->flags & PROFILE_FRAME_INLINED)
		return CLS_INLINED;
	if (f->flags & PROFILE_FRAME_PYTHON)
		return CLS_PYTHON;
	return CLS_NATIVE;
}

static void node_add(struct node *n, const struct profile_frame *f, uint64_t count, int fresh)
{
	n->count = count > UINT64_MAX - n->count ? UINT64_MAX : n->count + count;
	if (!f)
		return;
	if (fresh) {
		n->file = f->file;
		n->line = f->line;
	} else {
		n->file_mixed |= n->file != f->file;
		n->line_mixed |= n->line != f->line;
	}
}

static int tree_build(struct tree *t, const struct profile *p, const char **names)
{
	int64_t id;

	/* node 0 is "all"; a child's id is always above its parent's */
	if (tree_child(t, 0, CLS_ALL, "all") != 0)
		return -ENOMEM;
	t->nodes[0].depth = 0;
	t->nodes[0].parent = UINT32_MAX;
	for (uint32_t i = 0; i < p->nsamples; i++) {
		const struct profile_sample *s = &p->samples[i];

		node_add(&t->nodes[0], NULL, s->count, 0);
		id = tree_child(t, 0, CLS_COMM, s->comm);
		if (id < 0)
			return id;
		node_add(&t->nodes[id], NULL, s->count, 0);
		for (uint32_t j = 0; j < s->nframes; j++) {
			const struct profile_frame *f = &p->frames[s->frames[j]];
			uint32_t before = t->n;

			id = tree_child(t, id, frame_cls(f), names[s->frames[j]]);
			if (id < 0)
				return id;
			node_add(&t->nodes[id], f, s->count, t->n != before);
		}
	}
	return 0;
}

/* qsort has no context argument: sort records that carry their keys. */
struct order {
	const struct node *n;
	uint32_t id;
};

static int sibling_cmp(const void *a, const void *b)
{
	const struct order *x = a, *y = b;
	int c;

	if (x->n->parent != y->n->parent)
		return x->n->parent < y->n->parent ? -1 : 1;
	c = strcmp(x->n->name, y->n->name);
	if (c)
		return c;
	return x->n->cls < y->n->cls ? -1 : x->n->cls > y->n->cls;
}

static int draw_cmp(const void *a, const void *b)
{
	const struct order *x = a, *y = b;

	if (x->n->depth != y->n->depth)
		return x->n->depth < y->n->depth ? -1 : 1;
	if (x->n->off != y->n->off)
		return x->n->off < y->n->off ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

/*
 * Lays siblings side by side in name order: off = parent's off + counts of
 * the siblings sorted before it.
 */
static int tree_layout(struct tree *t)
{
	struct order *o = calloc(t->n, sizeof(*o));
	uint64_t *rel = calloc(t->n, sizeof(*rel));
	uint32_t m = 0;

	if (!o || !rel) {
		free(o);
		free(rel);
		return -ENOMEM;
	}
	for (uint32_t i = 1; i < t->n; i++) {
		o[m].n = &t->nodes[i];
		o[m++].id = i;
	}
	qsort(o, m, sizeof(*o), sibling_cmp);
	for (uint32_t i = 0; i < m; i++) {
		uint32_t parent = o[i].n->parent;
		uint64_t acc = 0;

		for (; i < m && o[i].n->parent == parent; i++) {
			rel[o[i].id] = acc;
			acc += o[i].n->count;
		}
		i--;
	}
	t->nodes[0].off = 0;
	for (uint32_t i = 1; i < t->n; i++)
		t->nodes[i].off = t->nodes[t->nodes[i].parent].off + rel[i];
	free(o);
	free(rel);
	return 0;
}

/* --- XML text ----------------------------------------------------------- */

/* The label drawn inside a frame w px wide: the script uses the same rule. */
static void xml_put_fitted(FILE *out, const char *name, double w)
{
	double room = (w - 3) / (SVG_FONT * SVG_CHAR_W);
	size_t fit, len;

	if (room < 3)
		return;
	fit = (size_t)room; /* truncation: floor for a positive value */
	len = utf8_count(name);
	if (len <= fit) {
		xml_write_text(out, name, len);
	} else {
		xml_write_text(out, name, fit - 2);
		fputs("..", out);
	}
}

/* --- colours ------------------------------------------------------------ */

/*
 * One palette per frame kind, the shade picked by a hash of the name so a
 * function keeps its colour across graphs.
 */
static void node_color(const struct node *n, char *buf, size_t sz)
{
	uint64_t h = profile__hash(n->name, strlen(n->name), 0);
	double v1 = (h & 0xffff) / 65536.0, v2 = ((h >> 16) & 0xffff) / 65536.0,
	       v3 = ((h >> 32) & 0xffff) / 65536.0;
	int r, g, b;

	switch (n->cls) {
	case CLS_KERNEL: /* orange */
		r = 215 + 40 * v1, g = 130 + 50 * v1, b = 20 * v3;
		break;
	case CLS_INLINED: /* aqua */
		r = 50 * v1, g = 170 + 55 * v2, b = 170 + 55 * v2;
		break;
	case CLS_PYTHON: /* green */
		r = 60 + 60 * v1, g = 175 + 55 * v2, b = 60 + 50 * v3;
		break;
	case CLS_UNRESOLVED: /* grey */
		r = g = b = 165 + 50 * v1;
		break;
	case CLS_ALL:
	case CLS_COMM: /* violet: not code, just grouping */
		r = 170 + 40 * v1, g = 160 + 40 * v1, b = 215 + 40 * v2;
		break;
	default: /* native: red, as in flamegraph.pl's java/js palettes */
		r = 200 + 55 * v1, g = b = 50 + 80 * v2;
		break;
	}
	snprintf(buf, sz, "rgb(%d,%d,%d)", r, g, b);
}

/* --- document ----------------------------------------------------------- */

/*
 * Zoom: a clicked frame fills the width; its ancestors stretch under it
 * (faded), frames outside its range hide.  Search: frames whose name
 * matches a regexp turn magenta; the matched share counts nested matches
 * once.  Frame geometry and names are read back from the drawn SVG.
 */
static const char svg_script[] =
	"\"use strict\";\n"
	"var W,XP=10,FS=12,CW=0.59,fr=[],det,mt,unz,srch,re=null,tot=0;\n"
	"function init(){var s=document.documentElement;W=+s.getAttribute('width');\n"
	" det=document.getElementById('details').firstChild;"
	"mt=document.getElementById('matched').firstChild;\n"
	" unz=document.getElementById('unzoom');srch=document.getElementById('search');\n"
	" var fg=document.getElementById('frames'),gs=fg.getElementsByTagName('g');\n"
	" for(var i=0;i<gs.length;i++){var g=gs[i],r=g.getElementsByTagName('rect')[0],"
	"ti=g.getElementsByTagName('title')[0].textContent,l=ti.split('\\n')[0],"
	"k=l.lastIndexOf(' (');\n"
	"  var f={g:g,r:r,t:g.getElementsByTagName('text')[0],x:+r.getAttribute('x'),"
	"w:+r.getAttribute('width'),y:+r.getAttribute('y'),n:l.substring(0,k),"
	"c:parseInt(l.substring(k+2),10),d:ti.replace('\\n',' at '),"
	"fill:r.getAttribute('fill')};\n"
	"  g.fi=i;fr.push(f);if(f.c>tot)tot=f.c;}\n"
	" fg.addEventListener('click',function(e){var f=hit(e);if(f)zoom(f);});\n"
	" fg.addEventListener('mouseover',function(e){var f=hit(e);if(f)det.nodeValue=f.d;});\n"
	" fg.addEventListener('mouseout',function(){det.nodeValue=' ';});\n"
	" unz.addEventListener('click',unzoom);\n"
	" srch.addEventListener('click',function(){if(re)reset_search();else search();});\n"
	" window.addEventListener('keydown',function(e){\n"
	"  "
	"if(e.keyCode===114||((e.ctrlKey||e.metaKey)&&e.keyCode===70)){e.preventDefault();search();"
	"}\n"
	"  else if(e.keyCode===27){reset_search();unzoom();}});}\n"
	"function hit(e){var g=e.target;while(g&&g.fi===undefined)g=g.parentNode;"
	"return g?fr[g.fi]:null;}\n"
	"function place(f,x,w){f.r.setAttribute('x',x.toFixed(2));"
	"f.r.setAttribute('width',w.toFixed(2));f.t.setAttribute('x',(x+3).toFixed(2));\n"
	" var m=Math.floor((w-3)/(FS*CW));"
	"f.t.textContent=m<3?'':f.n.length<=m?f.n:f.n.substring(0,m-2)+'..';}\n"
	"function show(f,on,par){f.g.style.display=on?'':'none';"
	"f.g.classList.toggle('parent',!!par);}\n"
	"function zoom(z){var s=(W-2*XP)/z.w,e=0.01;unz.classList.remove('hide');\n"
	" for(var i=0;i<fr.length;i++){var f=fr[i];\n"
	"  if(f.y>z.y){var a=f.x<=z.x+e&&f.x+f.w>=z.x+z.w-e;show(f,a,1);if(a)place(f,XP,W-2*XP);}\n"
	"  else if(f.x>=z.x-e&&f.x+f.w<=z.x+z.w+e){show(f,1,0);place(f,XP+(f.x-z.x)*s,f.w*s);}\n"
	"  else show(f,0,0);}}\n"
	"function unzoom(){unz.classList.add('hide');\n"
	" for(var i=0;i<fr.length;i++){show(fr[i],1,0);place(fr[i],fr[i].x,fr[i].w);}}\n"
	"function search(){var t=prompt('Search frames (regular expression):','');\n"
	" if(t===null||t==='')return;var r;try{r=new RegExp(t);}"
	"catch(x){alert('Bad regular expression: '+x.message);return;}\n"
	" reset_search();re=r;var m=[];\n"
	" for(var "
	"i=0;i<fr.length;i++)if(r.test(fr[i].n)){fr[i].r.setAttribute('fill','rgb(230,0,230)');"
	"m.push(fr[i]);}\n"
	" m.sort(function(a,b){return a.x-b.x||b.w-a.w;});var n=0,end=-1;\n"
	" for(var j=0;j<m.length;j++)if(m[j].x>end-0.05){n+=m[j].c;end=m[j].x+m[j].w;}\n"
	" mt.nodeValue='Matched: '+(tot?100*n/tot:0).toFixed(2)+'% ('+n+' samples)';\n"
	" srch.firstChild.nodeValue='Reset Search';}\n"
	"function reset_search(){if(!re)return;re=null;\n"
	" for(var i=0;i<fr.length;i++)fr[i].r.setAttribute('fill',fr[i].fill);\n"
	" mt.nodeValue=' ';srch.firstChild.nodeValue='Search';}\n";

static void write_head(FILE *out, uint32_t width, uint32_t height, const char *title,
		       const char *note)
{
	fprintf(out,
		"<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
		"<svg version=\"1.1\" width=\"%" PRIu32 "\" height=\"%" PRIu32
		"\" viewBox=\"0 0 %" PRIu32 " %" PRIu32 "\" onload=\"init()\""
		" xmlns=\"http://www.w3.org/2000/svg\">\n",
		width, height, width, height);
	fprintf(out,
		"<defs><linearGradient id=\"bg\" y1=\"0\" y2=\"1\" x1=\"0\" x2=\"0\">"
		"<stop stop-color=\"#eeeeee\" offset=\"5%%\"/>"
		"<stop stop-color=\"#eeeeb0\" offset=\"95%%\"/></linearGradient></defs>\n"
		"<style type=\"text/css\">\n"
		"text{font-family:Verdana,sans-serif;font-size:%dpx;fill:#000}\n"
		"#title{text-anchor:middle;font-size:17px}\n"
		"#note{text-anchor:middle;fill:#555}\n"
		"#unzoom,#search{cursor:pointer}\n"
		"#matched{text-anchor:end}\n"
		".hide{display:none}\n.parent{opacity:0.5}\n"
		"#frames g{cursor:pointer}\n"
		"#frames g:hover rect{stroke:#000;stroke-width:0.5}\n"
		"#frames text{pointer-events:none}\n"
		"</style>\n<script type=\"text/ecmascript\"><![CDATA[\n%s]]></script>\n",
		SVG_FONT, svg_script);
	fprintf(out,
		"<rect x=\"0\" y=\"0\" width=\"%" PRIu32 "\" height=\"%" PRIu32
		"\" fill=\"url(#bg)\"/>\n<text id=\"title\" x=\"%.1f\" y=\"24\">",
		width, height, width / 2.0);
	xml_write_text(out, title, SIZE_MAX);
	fprintf(out, "</text>\n<text id=\"note\" x=\"%.1f\" y=\"42\">", width / 2.0);
	xml_write_text(out, note, SIZE_MAX);
	fprintf(out,
		"</text>\n<text id=\"unzoom\" class=\"hide\" x=\"%d\" y=\"24\">"
		"Reset Zoom</text>\n"
		"<text id=\"search\" x=\"%" PRIu32 "\" y=\"24\">Search</text>\n"
		"<text id=\"details\" x=\"%d\" y=\"%" PRIu32 "\"> </text>\n"
		"<text id=\"matched\" x=\"%" PRIu32 "\" y=\"%" PRIu32 "\"> </text>\n",
		SVG_XPAD, width > 110 ? width - 110 : 0, SVG_XPAD, height - 17,
		width > SVG_XPAD ? width - SVG_XPAD : 0, height - 17);
}

static void write_frame(FILE *out, const struct node *n, uint64_t total, double x, double y,
			double w)
{
	char color[32];

	node_color(n, color, sizeof(color));
	fputs("<g><title>", out);
	xml_write_text(out, n->name, SIZE_MAX);
	fprintf(out, " (%" PRIu64 " samples, %.2f%%)", n->count,
		total ? 100.0 * (double)n->count / (double)total : 0.0);
	if (n->file && !n->file_mixed) {
		fputc('\n', out);
		xml_write_text(out, n->file, SIZE_MAX);
		if (n->line && !n->line_mixed)
			fprintf(out, ":%" PRIu32, n->line);
	}
	fprintf(out,
		"</title><rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\""
		" fill=\"%s\" rx=\"2\" ry=\"2\"/><text x=\"%.2f\" y=\"%.1f\">",
		x, y, w, SVG_FRAME_H - 1, color, x + 3, y + SVG_FONT - 0.5);
	xml_put_fitted(out, n->name, w);
	fputs("</text></g>\n", out);
}

int profile__write_svg_opts(const struct profile *p, FILE *out, const char *title,
			    const struct profile_svg_opts *opts)
{
	uint32_t width = SVG_WIDTH, height, maxdepth = 0, drawn = 0;
	double min_w = SVG_MIN_WIDTH_PX, scale;
	struct tree t = { 0 };
	struct order *o = NULL;
	const char **names;
	uint64_t total, pruned = 0;
	char note[512];
	int err;

	if (!p || !out)
		return -EINVAL;
	if (opts && opts->sz >= sizeof(*opts)) {
		if (opts->width)
			width = opts->width;
		if (opts->min_width_px > 0)
			min_w = opts->min_width_px;
	}
	if (width < 2 * SVG_XPAD + 100)
		return -EINVAL;
	if (!title || !title[0])
		title = "strata CPU profile";
	names = profile__display_names(p);
	if (!names)
		return -ENOMEM;
	err = tree_build(&t, p, names);
	if (!err)
		err = tree_layout(&t);
	if (!err) {
		o = calloc(t.n, sizeof(*o));
		if (!o)
			err = -ENOMEM;
	}
	if (err)
		goto err_out;

	total = t.nodes[0].count;
	scale = total ? (width - 2.0 * SVG_XPAD) / (double)total : 0;
	for (uint32_t i = 0; i < t.n; i++) {
		/* ancestors are never narrower, so what is drawn stays a tree */
		if (!total || (double)t.nodes[i].count * scale < min_w) {
			pruned++;
			continue;
		}
		o[drawn].n = &t.nodes[i];
		o[drawn++].id = i;
		if (t.nodes[i].depth > maxdepth)
			maxdepth = t.nodes[i].depth;
	}
	qsort(o, drawn, sizeof(*o), draw_cmp);

	snprintf(note, sizeof(note),
		 "%" PRIu64 " samples at %" PRIu32 " Hz; dropped: map_full=%" PRIu64
		 " stack_lost=%" PRIu64 " proc_unknown=%" PRIu64 " other=%" PRIu64 "; %" PRIu64
		 " frames narrower than %.2g px not drawn",
		 total, p->freq_hz, p->drops.map_full, p->drops.stack_lost, p->drops.proc_unknown,
		 p->drops.other, total ? pruned : 0, min_w);
	height = SVG_YPAD_TOP + (maxdepth + 1) * SVG_FRAME_H + SVG_YPAD_BOTTOM;
	write_head(out, width, height, title, note);

	fputs("<g id=\"frames\">\n", out);
	for (uint32_t i = 0; i < drawn; i++) {
		const struct node *n = o[i].n;
		double y = height - SVG_YPAD_BOTTOM - (n->depth + 1.0) * SVG_FRAME_H;

		write_frame(out, n, total, SVG_XPAD + (double)n->off * scale, y,
			    (double)n->count * scale);
	}
	fputs("</g>\n", out);
	if (!total)
		fprintf(out,
			"<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">"
			"No samples</text>\n",
			width / 2.0, SVG_YPAD_TOP + SVG_FRAME_H - 4);
	fputs("</svg>\n", out);
	if (fflush(out) || ferror(out))
		err = -EIO;
err_out:
	free(o);
	free(t.nodes);
	profile_htab__fini(&t.h);
	free(names);
	return err;
}

int profile__write_svg(const struct profile *p, FILE *out, const char *title)
{
	return profile__write_svg_opts(p, out, title, NULL);
}
