// SPDX-License-Identifier: Apache-2.0
/*
 * strata-server's HTTP layer in process (libmicrohttpd + libcurl, under
 * ASan/UBSan): a request is refused on its headers before its body is
 * read (401, 404, 405, 413, 400), batch bodies share one memory budget
 * (503 past it, given back after), and symbol uploads are streamed to the
 * build-id store: committed when verified, dropped (file and reserved
 * bytes) when the client goes away mid-upload.  And the text the answers
 * carry: JSON, Prometheus labels and HTML stay valid UTF-8 whatever bytes
 * a name holds.
 */
#include <curl/curl.h>
#include <dirent.h>
#include <fcntl.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/clock.h"
#include "server/diag_inputs.h"
#include "server/http_auth.h"
#include "server/server.h"
#include "symbolize/buildid.h"
#include "test_util.h"

struct fx {
	char dir[64];
	struct server srv;
	struct http_daemon *d;
	uint16_t port;
	const char *node; /* X-Strata-Node of the requests, or NULL */
};

static int setup(void **state)
{
	struct fx *fx = calloc(1, sizeof(*fx));
	char db[128], bdir[128], err[256];

	assert_non_null(fx);
	snprintf(fx->dir, sizeof(fx->dir), "/tmp/strata-http-XXXXXX");
	assert_non_null(mkdtemp(fx->dir));
	snprintf(db, sizeof(db), "sqlite:%s/db", fx->dir);
	snprintf(bdir, sizeof(bdir), "%s/buildids", fx->dir);
	fx->srv.store = store__open(db, err, sizeof(err));
	assert_non_null(fx->srv.store);
	fx->srv.bids = buildid_store__open(bdir, 64ull << 20, 0);
	assert_non_null(fx->srv.bids);
	fx->srv.sym = central_sym__new(fx->srv.bids, 0);
	fx->srv.asks = sym_asks__new(0, 0);
	assert_non_null(fx->srv.asks);
	assert_non_null(fx->srv.sym);
	fx->srv.ingest.v[fx->srv.ingest.n++] = strdup("t0ken");
	fx->srv.read.v[fx->srv.read.n++] = strdup("t0ken");
	fx->srv.limits.max_wire = 1 << 20;
	fx->srv.max_symbol_upload = 32 << 20;
	fx->srv.budget.max = 3 << 20;
	fx->d = http__start(&fx->srv, "127.0.0.1:0", 2, &fx->port, err, sizeof(err));
	assert_non_null(fx->d);
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fx *fx = *state;
	char cmd[128];

	http__stop(fx->d);
	central_sym__free(fx->srv.sym);
	buildid_store__free(fx->srv.bids);
	sym_asks__free(fx->srv.asks);
	auth_tokens__free(&fx->srv.ingest);
	auth_tokens__free(&fx->srv.read);
	store__close(fx->srv.store);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fx->dir);
	assert_int_equal(system(cmd), 0);
	free(fx);
	return 0;
}

/* The request body: data[0..len) sent, then (when abort_at) the client
 * gives up after abort_at bytes. */
struct src {
	const char *data;
	size_t len, off, abort_at;
};

static size_t on_read(char *buf, size_t size, size_t n, void *ctx)
{
	struct src *s = ctx;
	size_t want = size * n, left = s->len - s->off;

	if (s->abort_at && s->off >= s->abort_at)
		return CURL_READFUNC_ABORT;
	if (want > left)
		want = left;
	if (s->abort_at && want > s->abort_at - s->off)
		want = s->abort_at - s->off;
	memcpy(buf, s->data + s->off, want);
	s->off += want;
	return want;
}

static size_t on_write(char *p, size_t size, size_t n, void *ctx)
{
	return size * n;
}

/* method path (token or NULL) body[0..len) declared as `declared` bytes
 * (-1: chunked); expect: send "Expect: 100-continue".  The status, or 0. */
static long req(struct fx *fx, const char *method, const char *path, const char *token,
		struct src *body, long declared, int expect)
{
	char url[256], auth[64], node[128];
	struct curl_slist *h = NULL;
	CURL *c = curl_easy_init();
	long status = 0;

	assert_non_null(c);
	snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", fx->port, path);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 20L);
	if (token) {
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
		h = curl_slist_append(h, auth);
	}
	h = curl_slist_append(h, expect ? "Expect: 100-continue" : "Expect:");
	if (fx->node) {
		snprintf(node, sizeof(node), "X-Strata-Node: %s", fx->node);
		h = curl_slist_append(h, node);
	}
	if (body) {
		curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(c, CURLOPT_READDATA, body);
		if (declared >= 0)
			curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)declared);
		else
			h = curl_slist_append(h, "Transfer-Encoding: chunked");
	}
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	return status;
}

static size_t incoming_files(struct fx *fx)
{
	char p[128];
	DIR *d;
	struct dirent *e;
	size_t n = 0;

	snprintf(p, sizeof(p), "%s/buildids/.incoming", fx->dir);
	d = opendir(p);
	if (!d)
		return 0;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* Waits (up to 5 s) for the server thread to finish a request the client
 * left: the budget and the store's reservation are given back then. */
static void settle(struct fx *fx, uint64_t want_store_bytes)
{
	struct buildid_store_stats st;

	for (int i = 0; i < 500; i++) {
		buildid_store__stats(fx->srv.bids, &st);
		if (!__atomic_load_n(&fx->srv.budget.used, __ATOMIC_RELAXED) &&
		    st.bytes == want_store_bytes && !incoming_files(fx))
			return;
		usleep(10000);
	}
	fail_msg("budget %zu, store bytes %llu (want %llu), %zu temporary files",
		 fx->srv.budget.used, (unsigned long long)st.bytes,
		 (unsigned long long)want_store_bytes, incoming_files(fx));
}

static struct src *src_of(struct src *s, const char *data, size_t len)
{
	*s = (struct src){ data, len, 0, 0 };
	return s;
}

static void test_refused_on_headers(void **state)
{
	struct fx *fx = *state;
	size_t n = 8 << 20;
	char *big = calloc(1, n);
	struct src s;

	assert_non_null(big);
#define SRC(len_) src_of(&s, big, (len_))
	/* 100-continue: answered, nothing sent */
	assert_int_equal(req(fx, "POST", "/api/v1/batches", NULL, SRC(n), (long)n, 1), 401);
	assert_int_equal(s.off, 0);
	assert_int_equal(req(fx, "POST", "/api/v1/batches", "wrong", SRC(n), (long)n, 1), 401);
	assert_int_equal(req(fx, "POST", "/api/v1/batches", "t0ken", SRC(n), (long)n, 1), 413);
	assert_int_equal(s.off, 0);
	assert_int_equal(req(fx, "POST", "/nosuch", "t0ken", SRC(n), (long)n, 1), 404);
	assert_int_equal(req(fx, "GET", "/api/v1/batches", "t0ken", NULL, 0, 0), 405);
	assert_int_equal(req(fx, "POST", "/api/v1/symbols/abc", "t0ken", SRC(10), 10, 1), 400);
	/* small bodies without 100-continue: read, dropped, answered */
	assert_int_equal(req(fx, "POST", "/api/v1/batches", NULL, SRC(1000), 1000, 0), 401);
	assert_int_equal(req(fx, "POST", "/api/v1/jobs", "t0ken", SRC(1000), 1000, 0), 405);
	assert_int_equal(req(fx, "GET", "/api/v1/jobs", "t0ken", SRC(1000), 1000, 0), 413);
	/* chunked, over the bound: the rest read and dropped, then 413 */
	assert_int_equal(req(fx, "POST", "/api/v1/batches", "t0ken", SRC(2 << 20), -1, 0), 413);
	/* a body that is not a batch still reaches the decoder: 400 */
	assert_int_equal(req(fx, "POST", "/api/v1/batches", "t0ken", SRC(1000), 1000, 0), 400);
	assert_int_equal(req(fx, "GET", "/healthz", NULL, NULL, 0, 0), 200);
	assert_int_equal(req(fx, "GET", "/api/v1/jobs", NULL, NULL, 0, 0), 401);
	assert_int_equal(req(fx, "GET", "/api/v1/jobs", "t0ken", NULL, 0, 0), 200);
	settle(fx, 0);
	assert_true(fx->srv.budget.peak <= (2u << 20));
	free(big);
}

/* Three 1 MiB bodies held at once do not fit a 3 MiB budget with a
 * fourth: the client that would pass it gets 503; afterwards the budget
 * is whole again. */
static void test_budget(void **state)
{
	struct fx *fx = *state;
	size_t n = 1 << 20;
	char *big = calloc(1, n);
	struct src s;

	assert_non_null(big);
	/* hold most of the budget as an in-flight request would */
	assert_int_equal(mem_budget__take(&fx->srv.budget, (2 << 20) + 1), 0);
	assert_int_equal(req(fx, "POST", "/api/v1/batches", "t0ken", SRC(n), (long)n, 1), 503);
	assert_int_equal(fx->srv.m.rejected[BATCH_BUSY], 1);
	/* chunked (no size declared): refused while growing */
	assert_int_equal(req(fx, "POST", "/api/v1/batches", "t0ken", SRC(n), -1, 0), 503);
	mem_budget__give(&fx->srv.budget, (2 << 20) + 1);
	assert_int_equal(req(fx, "POST", "/api/v1/batches", "t0ken", SRC(n), (long)n, 1), 400);
	settle(fx, 0);
	assert_true(fx->srv.budget.refused >= 2);
	free(big);
#undef SRC
}

static void test_symbol_stream(void **state)
{
	struct fx *fx = *state;
	uint8_t id[BUILD_ID_MAX];
	char hex[2 * BUILD_ID_MAX + 1], path[160], bad[160];
	size_t n, got;
	char *elf = read_all("/proc/self/exe", &n);
	int idlen = build_id_read("/proc/self/exe", -1, id, sizeof(id));
	struct src s = { elf, n, 0, 0 };
	void *stored;

	assert_true(idlen > 0);
	build_id_hex(id, (size_t)idlen, hex, sizeof(hex));
	snprintf(path, sizeof(path), "/api/v1/symbols/%s", hex);
	/* only ids asked of the node that uploads: none yet, another node's,
	 * no node named: 403, answered from the headers */
	fx->node = "n1";
	assert_int_equal(req(fx, "POST", path, "t0ken", &s, (long)n, 1), 403);
	sym_asks__note(fx->srv.asks, "n2", hex, mono_ns());
	assert_int_equal(req(fx, "POST", path, "t0ken", &s, (long)n, 1), 403);
	sym_asks__note(fx->srv.asks, "n1", hex, mono_ns());
	fx->node = NULL;
	assert_int_equal(req(fx, "POST", path, "t0ken", &s, (long)n, 1), 403);
	assert_int_equal(s.off, 0);
	fx->node = "n1";
	/* the client goes away half way: nothing stored, nothing reserved */
	s.abort_at = n / 2;
	assert_int_equal(req(fx, "POST", path, "t0ken", &s, (long)n, 0), 0);
	settle(fx, 0);
	/* not the file of the id it claims: 422, nothing kept */
	snprintf(bad, sizeof(bad), "/api/v1/symbols/00112233445566778899aabbccddeeff00112233");
	sym_asks__note(fx->srv.asks, "n1", bad + 16, mono_ns());
	s = (struct src){ elf, n, 0, 0 };
	assert_int_equal(req(fx, "POST", bad, "t0ken", &s, (long)n, 0), 422);
	settle(fx, 0);
	/* chunked: stored; again: answered from the headers, nothing read */
	s = (struct src){ elf, n, 0, 0 };
	assert_int_equal(req(fx, "POST", path, "t0ken", &s, -1, 0), 200);
	settle(fx, n);
	s = (struct src){ elf, n, 0, 0 };
	assert_int_equal(req(fx, "POST", path, "t0ken", &s, (long)n, 1), 200);
	assert_int_equal(s.off, 0);
	assert_int_equal(buildid_store__path(fx->srv.bids, hex, path, sizeof(path)), 0);
	stored = read_all(path, &got);
	assert_int_equal(got, n);
	assert_memory_equal(stored, elf, n);
	free(stored);
	free(elf);
}

/* writes s with fn into a string (static buffer) */
static const char *render(void (*fn)(FILE *, const char *), const char *s)
{
	static char buf[256];
	FILE *f = fmemopen(buf, sizeof(buf), "w");

	assert_non_null(f);
	fn(f, s);
	fclose(f);
	return buf;
}

static void test_text_escapes(void **state)
{
	const char *bad = "a\xff\xc3(\x01\x1b\"\\<&>\n\xe2\x82";

	assert_string_equal(render(json_str, bad),
			    "\"a\\ufffd\\ufffd(\\u0001\\u001b\\\"\\\\<&>\\n\\ufffd\\ufffd\"");
	assert_string_equal(render(diag_prom_label, bad),
			    "\"a\xef\xbf\xbd\xef\xbf\xbd(\xef\xbf\xbd\xef\xbf\xbd\\\"\\\\<&>\\n"
			    "\xef\xbf\xbd\xef\xbf\xbd\"");
	assert_string_equal(
		render(page_html, bad),
		"a\xef\xbf\xbd\xef\xbf\xbd(\xef\xbf\xbd\xef\xbf\xbd&quot;\\&lt;&amp;&gt; "
		"\xef\xbf\xbd\xef\xbf\xbd");
}

/* The login form's body and the token lists (server/http_auth.c). */
static void test_auth_parts(void **state)
{
	struct auth_tokens t = { 0 };
	char tok[16], path[] = "/tmp/strata-tokens-XXXXXX";
	const char *body = "a=1&token=ab%2Fc+d&x";
	int fd = mkstemp(path);

	assert_int_equal(auth__form_token(body, strlen(body), tok, sizeof(tok)), 0);
	assert_string_equal(tok, "ab/c d");
	assert_int_equal(auth__form_token("token=%4", 8, tok, sizeof(tok)), -EINVAL);
	assert_int_equal(auth__form_token("token=%00x", 10, tok, sizeof(tok)), -EINVAL);
	assert_int_equal(auth__form_token("token=0123456789abcdef", 22, tok, sizeof(tok)),
			 -EINVAL); /* longer than tok */
	assert_int_equal(auth__form_token("tokens=1", 8, tok, sizeof(tok)), -EINVAL);
	/* the body is not a string: no NUL needed, none read past */
	assert_int_equal(auth__form_token("token=abc", 7, tok, sizeof(tok)), 0);
	assert_string_equal(tok, "a");

	assert_true(fd >= 0);
	assert_int_equal(write(fd, "new\r\n\nold\n", 10), 10);
	close(fd);
	assert_int_equal(auth_tokens__load(&t, path), 0);
	assert_int_equal(t.n, 2);
	assert_true(auth_tokens__match(&t, "new"));
	assert_true(auth_tokens__match(&t, "old"));
	assert_false(auth_tokens__match(&t, "ne"));
	assert_false(auth_tokens__match(&t, "newer"));
	assert_false(auth_tokens__match(&t, ""));
	assert_false(auth_tokens__match(&t, NULL));
	auth_tokens__free(&t);
	fd = open(path, O_WRONLY | O_TRUNC);
	assert_int_equal(write(fd, "a;b\n", 4), 4);
	close(fd);
	assert_int_equal(auth_tokens__load(&t, path), -EINVAL); /* no cookie could carry it */
	auth_tokens__free(&t);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_refused_on_headers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_budget, setup, teardown),
		cmocka_unit_test_setup_teardown(test_symbol_stream, setup, teardown),
		cmocka_unit_test(test_text_escapes),
		cmocka_unit_test(test_auth_parts),
	};

	curl_global_init(CURL_GLOBAL_DEFAULT);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
