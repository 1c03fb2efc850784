// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target: what strata-server parses of a request before and
 * besides the batch (fuzz_batch_decode has that): the route table, the
 * query-string filters (with and without the "base." prefix), the login
 * form's token, build-id hex, and the ClickHouse store URL.  The first
 * byte picks the parser; the rest is its input.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/buildid_store.h"
#include "server/clickhouse_http.h"
#include "server/http_auth.h"
#include "server/http_route.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_ARGS 16

/* A query string "k=v&k=v..." split in place, as libmicrohttpd hands it. */
struct args {
	const char *k[MAX_ARGS], *v[MAX_ARGS];
	int n;
};

static struct args *g_args; /* the one being fuzzed (single-threaded) */

static const char *arg_of(const struct request *r, const char *key)
{
	for (int i = 0; i < g_args->n; i++)
		if (!strcmp(g_args->k[i], key))
			return g_args->v[i];
	return NULL;
}

static void split(char *s, struct args *a)
{
	a->n = 0;
	for (char *save = NULL, *kv = strtok_r(s, "&", &save); kv && a->n < MAX_ARGS;
	     kv = strtok_r(NULL, "&", &save)) {
		char *eq = strchr(kv, '=');

		if (eq)
			*eq = 0;
		a->k[a->n] = kv;
		a->v[a->n++] = eq ? eq + 1 : "";
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s, buf[4096], tok[256];
	struct store_filter f;
	struct args a;
	struct request r = { .method = "GET", .path = "/api/v1/profile", .arg = arg_of };
	struct ch_opts o = { .sz = sizeof(o) };
	int ok;

	if (size < 1)
		return 0;
	s = malloc(size);
	if (!s)
		return 0;
	memcpy(s, data + 1, size - 1);
	s[size - 1] = 0;
	switch (data[0] % 5) {
	case 0: { /* route: "METHOD PATH" */
		char *sp = strchr(s, ' ');

		if (sp) {
			*sp = 0;
			const struct route *rt = route__find(sp + 1, s, &ok);

			if (rt)
				(void)route__rest(rt, sp + 1)[0];
		}
		break;
	}
	case 1:
		split(s, &a);
		g_args = &a;
		if (!request__filter(&r, "", &f, buf, sizeof(buf)) && f.from_ns && f.to_ns &&
		    (f.from_ns > 9000000000ull * 1000000000ull))
			abort(); /* parsed seconds must fit */
		request__filter(&r, "base.", &f, buf, sizeof(buf));
		break;
	case 2:
		if (!auth__form_token(s, size - 1, tok, sizeof(tok)) && strlen(tok) >= sizeof(tok))
			abort();
		break;
	case 3:
		(void)buildid_hex_valid(s);
		break;
	default:
		ch_parse_url(s, &o, buf, sizeof(buf));
		break;
	}
	free(s);
	return 0;
}
