// SPDX-License-Identifier: Apache-2.0
/*
 * The encoders (folded, pprof, SVG, JSON) on one small profile that has
 * every kind of frame: kernel, inlined chains, unresolved, Python, and
 * names that break naive formats (';', '<>&"', control bytes, bad UTF-8).
 * External checkers (xmllint, python3, go tool pprof) run when installed.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include "lib/profile.h"
#include "profile.pb-c.h"

#define FREQ 100
#define PERIOD_NS (1000000000 / FREQ)
#define TOTAL 72

enum {
	F_MAIN,
	F_WORK,
	F_HELP,
	F_HOT,
	F_SYS,
	F_OPEN,
	F_UNRES,
	F_WEIRD,
	F_PY,
	F_BAD,
	F_COUNT,
};

static const struct profile_frame frames[F_COUNT] = {
	[F_MAIN] = { "main", "app.c", 10, "/usr/bin/app", 0x1000, 0 },
	[F_WORK] = { "work", "app.c", 20, "/usr/bin/app", 0x2000, 0 },
	[F_HELP] = { "helper", "util.h", 5, "/usr/bin/app", 0x2000, PROFILE_FRAME_INLINED },
	[F_HOT] = { "hot_inner", "util.h", 7, "/usr/bin/app", 0x2000, PROFILE_FRAME_INLINED },
	[F_SYS] = { "entry_SYSCALL_64", NULL, 0, "[kernel]", 0xffffffff81000100ull,
		    PROFILE_FRAME_KERNEL },
	[F_OPEN] = { "do_sys_open", NULL, 0, "[kernel]", 0xffffffff81200200ull,
		     PROFILE_FRAME_KERNEL },
	[F_UNRES] = { NULL, NULL, 0, "/usr/lib/libfoo.so.1", 0xabc, PROFILE_FRAME_UNRESOLVED },
	[F_WEIRD] = { "ns::op<a;b>&\"q\"", "w.cc", 3, "/usr/bin/app", 0x3000, 0 },
	[F_PY] = { "train_step", "train.py", 42, "/usr/bin/python3.11", 0x42,
		   PROFILE_FRAME_PYTHON },
	[F_BAD] = { "bad\x01name\xff", NULL, 0, "/usr/bin/app", 0x4000, 0 },
};

struct fixture {
	struct profile *p;
	char dir[64];
};

static int add(struct profile *p, uint32_t pid, uint32_t tid, const char *comm, uint64_t count,
	       int n, ...)
{
	uint32_t st[8];
	va_list ap;

	va_start(ap, n);
	for (int i = 0; i < n; i++)
		st[i] = va_arg(ap, int);
	va_end(ap);
	return profile__add_sample(p, pid, tid, comm, st, n, count);
}

static int setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof(*fx));
	struct profile *p;

	if (!fx)
		return -1;
	p = fx->p = profile__new(FREQ);
	if (!p)
		return -1;
	p->start_ns = 1700000000000000000ull;
	p->end_ns = p->start_ns + 2000000000ull;
	p->drops.map_full = 7;
	p->drops.other = 1;
	for (int i = 0; i < F_COUNT; i++)
		if (profile__intern_frame(p, &frames[i]) != i)
			return -1;
	if (add(p, 100, 100, "app", 50, 4, F_MAIN, F_WORK, F_HELP, F_HOT) ||
	    add(p, 100, 101, "app", 10, 4, F_MAIN, F_WORK, F_HELP, F_HOT) ||
	    add(p, 100, 100, "app", 5, 3, F_MAIN, F_SYS, F_OPEN) ||
	    add(p, 100, 100, "app", 3, 2, F_MAIN, F_UNRES) ||
	    add(p, 100, 100, "app", 2, 2, F_MAIN, F_WEIRD) ||
	    add(p, 200, 200, "py;thon\n", 1, 1, F_PY) ||
	    add(p, 300, 300, "app", 1, 2, F_MAIN, F_BAD))
		return -1;
	snprintf(fx->dir, sizeof(fx->dir), "/tmp/strata-test-XXXXXX");
	if (!mkdtemp(fx->dir))
		return -1;
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fx->dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", fx->dir);
	profile__free(fx->p);
	free(fx);
	return 0;
}

/* Runs an encoder into memory; the result is NUL-terminated, free() it. */
static char *encode(const struct profile *p, int (*enc)(const struct profile *, FILE *),
		    size_t *len)
{
	char *buf = NULL;
	size_t sz = 0;
	FILE *f = open_memstream(&buf, &sz);

	assert_non_null(f);
	assert_int_equal(enc(p, f), 0);
	assert_int_equal(fclose(f), 0);
	if (len)
		*len = sz;
	return buf;
}

static int have_tool(const char *name)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", name);
	return system(cmd) == 0;
}

static size_t count_str(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *s = hay; (s = strstr(s, needle)); s += strlen(needle))
		n++;
	return n;
}

/* --- folded ------------------------------------------------------------- */

static void test_folded(void **state)
{
	struct fixture *fx = *state;
	char *out = encode(fx->p, profile__write_folded, NULL);

	/* sorted; tid 100 and 101 merged; separators in names neutralized */
	assert_string_equal(out, "app;main;bad\x01name\xff 1\n"
				 "app;main;entry_SYSCALL_64_[k];do_sys_open_[k] 5\n"
				 "app;main;libfoo.so.1+0xabc 3\n"
				 "app;main;ns::op<a:b>&\"q\" 2\n"
				 "app;main;work;helper_[i];hot_inner_[i] 60\n"
				 "py:thon ;train_step (train.py:42) 1\n");
	free(out);
}

static void test_folded_merges_display_equal(void **state)
{
	struct profile *p = profile__new(FREQ);
	struct profile_frame a = { "same", "a.c", 1, "/bin/x", 1, 0 };
	struct profile_frame b = { "same", "a.c", 2, "/bin/x", 2, 0 };
	uint32_t sa, sb;
	char *out;

	sa = profile__intern_frame(p, &a);
	sb = profile__intern_frame(p, &b);
	assert_int_not_equal(sa, sb);
	assert_int_equal(profile__add_sample(p, 1, 1, "c", &sa, 1, 2), 0);
	assert_int_equal(profile__add_sample(p, 2, 2, "c", &sb, 1, 3), 0);
	out = encode(p, profile__write_folded, NULL);
	assert_string_equal(out, "c;same 5\n");
	free(out);
	profile__free(p);

	p = profile__new(FREQ);
	out = encode(p, profile__write_folded, NULL);
	assert_string_equal(out, "");
	free(out);
	profile__free(p);
}

/* --- pprof -------------------------------------------------------------- */

static Perftools__Profiles__Profile *pprof_decode(const char *gz, size_t len)
{
	Perftools__Profiles__Profile *prof;
	z_stream zs = { 0 };
	size_t cap = 1 << 16, n = 0;
	uint8_t *raw = malloc(cap);
	int zerr;

	assert_non_null(raw);
	assert_true(len > 2 && (uint8_t)gz[0] == 0x1f && (uint8_t)gz[1] == 0x8b);
	assert_int_equal(inflateInit2(&zs, 15 + 16), Z_OK); /* gzip only */
	zs.next_in = (Bytef *)gz;
	zs.avail_in = len;
	do {
		if (n == cap) {
			cap *= 2;
			raw = realloc(raw, cap);
			assert_non_null(raw);
		}
		zs.next_out = raw + n;
		zs.avail_out = cap - n;
		zerr = inflate(&zs, Z_NO_FLUSH);
		assert_true(zerr == Z_OK || zerr == Z_STREAM_END);
		n = cap - zs.avail_out;
	} while (zerr != Z_STREAM_END);
	inflateEnd(&zs);
	prof = perftools__profiles__profile__unpack(NULL, n, raw);
	free(raw);
	assert_non_null(prof);
	return prof;
}

static const char *S(const Perftools__Profiles__Profile *prof, int64_t i)
{
	assert_true(i >= 0 && (size_t)i < prof->n_string_table);
	return prof->string_table[i];
}

static const Perftools__Profiles__Location *loc_by_id(const Perftools__Profiles__Profile *prof,
						      uint64_t id)
{
	for (size_t i = 0; i < prof->n_location; i++)
		if (prof->location[i]->id == id)
			return prof->location[i];
	fail_msg("no location %" PRIu64, id);
	return NULL;
}

static const Perftools__Profiles__Mapping *map_by_id(const Perftools__Profiles__Profile *prof,
						     uint64_t id)
{
	for (size_t i = 0; i < prof->n_mapping; i++)
		if (prof->mapping[i]->id == id)
			return prof->mapping[i];
	fail_msg("no mapping %" PRIu64, id);
	return NULL;
}

static const char *fn_name(const Perftools__Profiles__Profile *prof, uint64_t id)
{
	for (size_t i = 0; i < prof->n_function; i++)
		if (prof->function[i]->id == id)
			return S(prof, prof->function[i]->name);
	fail_msg("no function %" PRIu64, id);
	return NULL;
}

static int64_t label_num(const Perftools__Profiles__Profile *prof,
			 const Perftools__Profiles__Sample *s, const char *key)
{
	for (size_t i = 0; i < s->n_label; i++)
		if (!strcmp(S(prof, s->label[i]->key), key))
			return s->label[i]->num;
	return -1;
}

static const char *label_str(const Perftools__Profiles__Profile *prof,
			     const Perftools__Profiles__Sample *s, const char *key)
{
	for (size_t i = 0; i < s->n_label; i++)
		if (!strcmp(S(prof, s->label[i]->key), key))
			return S(prof, s->label[i]->str);
	return NULL;
}

/* The sample whose leaf location is at addr for (pid, tid). */
static const Perftools__Profiles__Sample *find_sample(const Perftools__Profiles__Profile *prof,
						      int64_t tid, uint64_t leaf_addr)
{
	for (size_t i = 0; i < prof->n_sample; i++) {
		const Perftools__Profiles__Sample *s = prof->sample[i];

		if (label_num(prof, s, "tid") == tid && s->n_location_id &&
		    loc_by_id(prof, s->location_id[0])->address == leaf_addr)
			return s;
	}
	fail_msg("no sample tid %" PRId64 " at %" PRIx64, tid, leaf_addr);
	return NULL;
}

static void test_pprof(void **state)
{
	struct fixture *fx = *state;
	size_t len, nmain = 0;
	char *gz = encode(fx->p, profile__write_pprof, &len);
	Perftools__Profiles__Profile *prof = pprof_decode(gz, len);
	const Perftools__Profiles__Sample *s;
	const Perftools__Profiles__Location *l;
	const Perftools__Profiles__Mapping *m;
	int64_t sum = 0;
	int found_drops = 0, found_kernel = 0;

	assert_true(prof->n_string_table > 0);
	assert_string_equal(prof->string_table[0], "");
	assert_int_equal(prof->n_sample_type, 2);
	assert_string_equal(S(prof, prof->sample_type[0]->type), "samples");
	assert_string_equal(S(prof, prof->sample_type[0]->unit), "count");
	assert_string_equal(S(prof, prof->sample_type[1]->type), "cpu");
	assert_string_equal(S(prof, prof->sample_type[1]->unit), "nanoseconds");
	assert_non_null(prof->period_type);
	assert_string_equal(S(prof, prof->period_type->type), "cpu");
	assert_string_equal(S(prof, prof->period_type->unit), "nanoseconds");
	assert_int_equal(prof->period, PERIOD_NS);
	assert_int_equal(prof->time_nanos, fx->p->start_ns);
	assert_int_equal(prof->duration_nanos, 2000000000);

	/* one pprof sample per model sample; cpu = count * period */
	assert_int_equal(prof->n_sample, fx->p->nsamples);
	for (size_t i = 0; i < prof->n_sample; i++) {
		s = prof->sample[i];
		assert_int_equal(s->n_value, 2);
		assert_int_equal(s->value[1], s->value[0] * PERIOD_NS);
		sum += s->value[0];
	}
	assert_int_equal(sum, TOTAL);

	/* the inline chain is one location, innermost line first */
	s = find_sample(prof, 100, 0x2000);
	assert_int_equal(s->value[0], 50);
	assert_int_equal(label_num(prof, s, "pid"), 100);
	assert_string_equal(label_str(prof, s, "comm"), "app");
	assert_int_equal(s->n_location_id, 2);
	l = loc_by_id(prof, s->location_id[0]);
	assert_int_equal(l->n_line, 3);
	assert_string_equal(fn_name(prof, l->line[0]->function_id), "hot_inner");
	assert_int_equal(l->line[0]->line, 7);
	assert_string_equal(fn_name(prof, l->line[1]->function_id), "helper");
	assert_int_equal(l->line[1]->line, 5);
	assert_string_equal(fn_name(prof, l->line[2]->function_id), "work");
	assert_int_equal(l->line[2]->line, 20);
	m = map_by_id(prof, l->mapping_id);
	assert_string_equal(S(prof, m->filename), "/usr/bin/app");
	assert_true(m->has_inline_frames);
	l = loc_by_id(prof, s->location_id[1]); /* the root */
	assert_int_equal(l->n_line, 1);
	assert_string_equal(fn_name(prof, l->line[0]->function_id), "main");
	/* the same stack on another thread reuses the locations */
	assert_memory_equal(find_sample(prof, 101, 0x2000)->location_id, s->location_id,
			    2 * sizeof(uint64_t));

	/* unresolved: an address and a mapping, no line */
	s = find_sample(prof, 100, 0xabc);
	l = loc_by_id(prof, s->location_id[0]);
	assert_int_equal(l->n_line, 0);
	m = map_by_id(prof, l->mapping_id);
	assert_string_equal(S(prof, m->filename), "/usr/lib/libfoo.so.1");
	assert_false(m->has_functions);
	assert_true(m->memory_start <= 0xabc && 0xabc < m->memory_limit);

	/* kernel frames: leaf first, in their own mapping */
	s = find_sample(prof, 100, 0xffffffff81200200ull);
	assert_int_equal(s->n_location_id, 3);
	l = loc_by_id(prof, s->location_id[1]);
	assert_string_equal(fn_name(prof, l->line[0]->function_id), "entry_SYSCALL_64");

	s = find_sample(prof, 200, 0x42);
	assert_string_equal(label_str(prof, s, "comm"), "py;thon\n");

	for (size_t i = 0; i < prof->n_mapping; i++) {
		m = prof->mapping[i];
		assert_int_not_equal(m->id, 0);
		if (!strcmp(S(prof, m->filename), "[kernel]")) {
			found_kernel = 1;
			assert_true(m->has_functions);
			assert_false(m->has_filenames);
		}
	}
	assert_true(found_kernel);
	/* functions are deduplicated */
	for (size_t i = 0; i < prof->n_function; i++)
		nmain += !strcmp(S(prof, prof->function[i]->name), "main");
	assert_int_equal(nmain, 1);
	for (size_t i = 0; i < prof->n_comment; i++)
		found_drops |=
			!strcmp(S(prof, prof->comment[i]), "dropped: map_full=7 stack_lost=0 "
							   "proc_unknown=0 other=1");
	assert_true(found_drops);

	perftools__profiles__profile__free_unpacked(prof, NULL);
	free(gz);
}

static void test_pprof_empty(void **state)
{
	struct profile *p = profile__new(0);
	size_t len;
	char *gz = encode(p, profile__write_pprof, &len);
	Perftools__Profiles__Profile *prof = pprof_decode(gz, len);

	assert_int_equal(prof->n_sample, 0);
	assert_string_equal(prof->string_table[0], "");
	perftools__profiles__profile__free_unpacked(prof, NULL);
	free(gz);
	profile__free(p);
}

static void test_pprof_go_tool(void **state)
{
	struct fixture *fx = *state;
	char path[128], cmd[512], line[512], gocache[128];
	int found = 0;
	FILE *f;

	if (!have_tool("go"))
		skip();
	/* go refuses to run without a writable cache directory */
	snprintf(gocache, sizeof(gocache), "%s/gocache", fx->dir);
	if (!getenv("GOCACHE"))
		setenv("GOCACHE", gocache, 1);
	if (!getenv("HOME"))
		setenv("HOME", fx->dir, 1);
	snprintf(path, sizeof(path), "%s/cpu.pb.gz", fx->dir);
	assert_int_equal(profile__write_file(fx->p, path, NULL), 0);
	snprintf(cmd, sizeof(cmd), "go tool pprof -top '%s' 2>&1", path);
	f = popen(cmd, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		if (strstr(line, "hot_inner")) {
			found = 1;
			printf("  go tool pprof: %s", line);
		}
	}
	assert_int_equal(pclose(f), 0);
	assert_true(found);
}

/* --- SVG ---------------------------------------------------------------- */

static int svg_default(const struct profile *p, FILE *out)
{
	return profile__write_svg(p, out, "Test <flame> & \"graph\"");
}

static void xmllint(const char *dir, const char *name, const char *svg)
{
	char path[128], cmd[256];
	FILE *f;

	if (!have_tool("xmllint"))
		return;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fputs(svg, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
	snprintf(cmd, sizeof(cmd), "xmllint --noout '%s'", path);
	assert_int_equal(system(cmd), 0);
}

static void test_svg(void **state)
{
	struct fixture *fx = *state;
	char *svg = encode(fx->p, svg_default, NULL);

	assert_true(!strncmp(svg, "<?xml", 5));
	assert_non_null(strstr(svg, "<svg "));
	assert_non_null(strstr(svg, "</svg>\n"));
	assert_non_null(strstr(svg, "Test &lt;flame&gt; &amp; &quot;graph&quot;"));
	assert_non_null(strstr(
		svg,
		"<title>ns::op&lt;a;b&gt;&amp;&quot;q&quot; (2 samples, 2.78%)\nw.cc:3</title>"));
	assert_non_null(strstr(svg, "<title>all (72 samples, 100.00%)</title>"));
	assert_non_null(strstr(svg, "<title>hot_inner (60 samples, 83.33%)\nutil.h:7</title>"));
	assert_non_null(strstr(svg, "<title>libfoo.so.1+0xabc (3 samples"));
	assert_non_null(strstr(svg, "<title>py;thon  (1 samples"));
	/* control byte and invalid UTF-8 become U+FFFD */
	assert_non_null(strstr(svg, "bad\xef\xbf\xbdname\xef\xbf\xbd"));
	assert_null(strstr(svg, "\x01"));
	assert_non_null(strstr(svg, "dropped: map_full=7"));
	/* 13 frames (all, 2 comms, 10 stack nodes) + the background */
	assert_int_equal(count_str(svg, "<g><title>"), 13);
	assert_int_equal(count_str(svg, "<rect "), 14);
	/* the interactive parts are there */
	assert_non_null(strstr(svg, "function zoom("));
	assert_non_null(strstr(svg, "function search("));
	assert_non_null(strstr(svg, "id=\"unzoom\""));
	xmllint(fx->dir, "t.svg", svg);
	free(svg);
}

static void test_svg_prunes_and_empty(void **state)
{
	struct fixture *fx = *state;
	struct profile *p = profile__new(FREQ);
	struct profile_frame a = { "big", NULL, 0, "/bin/x", 1, 0 };
	struct profile_frame b = { "tiny", NULL, 0, "/bin/x", 2, 0 };
	struct profile_frame c = { "tinier", NULL, 0, "/bin/x", 3, 0 };
	uint32_t st[2];
	char *svg;

	svg = encode(p, svg_default, NULL);
	assert_non_null(strstr(svg, "No samples"));
	xmllint(fx->dir, "empty.svg", svg);
	free(svg);

	st[0] = profile__intern_frame(p, &a);
	assert_int_equal(profile__add_sample(p, 1, 1, "c", st, 1, 1000000), 0);
	st[0] = profile__intern_frame(p, &b);
	st[1] = profile__intern_frame(p, &c);
	assert_int_equal(profile__add_sample(p, 1, 1, "c", st, 2, 1), 0);
	svg = encode(p, svg_default, NULL);
	assert_non_null(strstr(svg, ">big"));
	assert_null(strstr(svg, "tiny"));
	assert_non_null(strstr(svg, "; 2 frames narrower than 0.1 px not drawn"));
	xmllint(fx->dir, "pruned.svg", svg);
	free(svg);
	profile__free(p);
}

/* --- JSON --------------------------------------------------------------- */

static const char json_check[] =
	"import json, sys\n"
	"d = json.load(open(sys.argv[1], encoding='utf-8'))\n"
	"assert d['version'] == 1 and d['freq_hz'] == 100, d\n"
	"assert d['total'] == 72 and d['start_ns'] == 1700000000000000000\n"
	"assert d['drops'] == {'map_full': 7, 'stack_lost': 0,"
	" 'proc_unknown': 0, 'other': 1}\n"
	"fr = d['frames']\n"
	"assert fr[3]['func'] == 'hot_inner' and fr[3]['inlined'] is True\n"
	"assert fr[4]['addr'] == '0xffffffff81000100' and fr[4]['kernel']\n"
	"assert fr[6]['func'] is None and fr[6]['unresolved']\n"
	"assert fr[6]['name'] == 'libfoo.so.1+0xabc'\n"
	"assert fr[7]['func'] == 'ns::op<a;b>&\"q\"'\n"
	"assert fr[8]['python'] and fr[8]['line'] == 42\n"
	"assert fr[9]['func'] == 'bad\\x01name\\ufffd', fr[9]\n"
	"s = d['samples']\n"
	"assert s[0]['count'] == 50 and s[1]['tid'] == 101 and s[0]['frames'] == [0, 1, 2, 3]\n"
	"assert any(x['comm'] == 'py;thon\\n' for x in s)\n"
	"assert sum(x['count'] for x in s) == 72\n";

static void test_json(void **state)
{
	struct fixture *fx = *state;
	char *json = encode(fx->p, profile__write_json, NULL);
	char path[128], script[128], cmd[512];
	FILE *f;

	assert_non_null(strstr(json, "\"func\": \"ns::op<a;b>&\\\"q\\\"\""));
	assert_non_null(strstr(json, "\"comm\": \"py;thon\\n\""));
	assert_non_null(strstr(json, "\"bad\\u0001name\\ufffd\""));
	assert_non_null(strstr(json, "\"func\": null"));
	if (!have_tool("python3")) {
		free(json);
		skip();
	}
	snprintf(path, sizeof(path), "%s/p.json", fx->dir);
	snprintf(script, sizeof(script), "%s/check.py", fx->dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(json, f);
	assert_int_equal(fclose(f), 0);
	f = fopen(script, "w");
	assert_non_null(f);
	fputs(json_check, f);
	assert_int_equal(fclose(f), 0);
	snprintf(cmd, sizeof(cmd), "python3 '%s' '%s'", script, path);
	assert_int_equal(system(cmd), 0);
	free(json);
}

/* --- profile__write_file ------------------------------------------------ */

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf;
	long n;

	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	assert_true(n >= 0);
	rewind(f);
	buf = calloc(1, n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, n, f), (size_t)n);
	fclose(f);
	return buf;
}

static size_t dir_entries(const char *dir, const char *needle)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		n += strstr(e->d_name, needle) != NULL;
	closedir(d);
	return n;
}

static void test_write_file(void **state)
{
	struct fixture *fx = *state;
	static const char *const exts[] = { "folded", "pb.gz", "svg", "json" };
	char path[128], *got, *want;

	for (size_t i = 0; i < sizeof(exts) / sizeof(exts[0]); i++) {
		snprintf(path, sizeof(path), "%s/out.%s", fx->dir, exts[i]);
		assert_int_equal(profile__write_file(fx->p, path, "t"), 0);
		assert_int_equal(access(path, R_OK), 0);
	}
	/* the file holds exactly what the encoder writes */
	snprintf(path, sizeof(path), "%s/out.folded", fx->dir);
	got = slurp(path);
	want = encode(fx->p, profile__write_folded, NULL);
	assert_string_equal(got, want);
	free(got);
	free(want);
	/* overwriting works too */
	assert_int_equal(profile__write_file(fx->p, path, NULL), 0);

	snprintf(path, sizeof(path), "%s/out.txt", fx->dir);
	assert_int_equal(profile__write_file(fx->p, path, NULL), -EINVAL);
	assert_int_equal(access(path, F_OK), -1);
	snprintf(path, sizeof(path), "%s/.svg", fx->dir);
	assert_int_equal(profile__write_file(fx->p, path, NULL), -EINVAL);
	assert_int_equal(profile__write_file(fx->p, "out.gz", NULL), -EINVAL);
	assert_int_equal(profile__write_file(fx->p, "/nonexistent-dir/x.svg", NULL), -ENOENT);
	assert_int_equal(dir_entries(fx->dir, ".tmp."), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_folded),
		cmocka_unit_test(test_folded_merges_display_equal),
		cmocka_unit_test(test_pprof),
		cmocka_unit_test(test_pprof_empty),
		cmocka_unit_test(test_pprof_go_tool),
		cmocka_unit_test(test_svg),
		cmocka_unit_test(test_svg_prunes_and_empty),
		cmocka_unit_test(test_json),
		cmocka_unit_test(test_write_file),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
