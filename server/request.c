// SPDX-License-Identifier: Apache-2.0
/*
 * What a handler reads from a request (query-string arguments, the common
 * filters) and the JSON answer helpers every handler writes with.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "lib/json_str.h"
#include "server/server.h"

const char *request__arg(const struct request *r, const char *key)
{
	return r->arg ? r->arg(r, key) : NULL;
}

const char *request__header(const struct request *r, const char *key)
{
	return r->header ? r->header(r, key) : NULL;
}

void json_str(FILE *out, const char *s)
{
	json_write_str(out, s); /* valid UTF-8 JSON whatever bytes s holds */
}

int json_error(FILE *out, int status, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fputs("{\"error\":", out);
	json_str(out, msg);
	fputs("}\n", out);
	return status;
}

int json_store_error(FILE *out, int err)
{
	if (err == -ETIMEDOUT)
		return json_error(
			out, 503,
			"store query took longer than 30 s: ask for a shorter from..to, or "
			"filter by job, node or rank");
	return json_error(out, 503, "store query failed: %s", strerror(-err));
}

void latency_hist__add(struct latency_hist *h, uint64_t ns)
{
	static const uint64_t bounds_us[METRIC_BUCKETS] = { 1000,   5000,    25000,   100000,
							    250000, 1000000, 5000000, 30000000 };

	for (int i = 0; i < METRIC_BUCKETS; i++)
		if (ns <= bounds_us[i] * 1000)
			__atomic_fetch_add(&h->buckets[i], 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&h->count, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&h->sum_ns, ns, __ATOMIC_RELAXED);
}

int request__parse_u64(const char *s, uint64_t *v)
{
	char *end;

	if (!s || *s < '0' || *s > '9') /* strtoull takes "-1" and " 1" */
		return -EINVAL;
	errno = 0;
	*v = strtoull(s, &end, 10);
	return errno || end == s || *end ? -EINVAL : 0;
}

int request__filter(const struct request *r, const char *prefix, struct store_filter *f, char *err,
		    size_t errsz)
{
	static const char *const keys[] = {
		"from", "to", "node", "pid", "job", "rank", "container"
	};
	const char *v[7];
	char key[64];
	uint64_t n;

	memset(f, 0, sizeof(*f));
	for (int i = 0; i < 7; i++) {
		snprintf(key, sizeof(key), "%s%s", prefix, keys[i]);
		v[i] = request__arg(r, key);
	}
	for (int i = 0; i < 2; i++) {
		if (!v[i])
			continue;
		/* Unix seconds; past 2^63 ns would wrap. */
		if (request__parse_u64(v[i], &n) || n > 9000000000ull) {
			snprintf(err, errsz, "%s%s: want unix seconds", prefix, keys[i]);
			return -EINVAL;
		}
		*(i ? &f->to_ns : &f->from_ns) = n * 1000000000ull;
	}
	f->node = v[2];
	if (v[3] && (request__parse_u64(v[3], &n) || n == 0 || n > UINT32_MAX)) {
		snprintf(err, errsz, "%spid: want a process id", prefix);
		return -EINVAL;
	}
	f->pid = v[3] ? (uint32_t)n : 0;
	f->job = v[4];
	if (v[5]) {
		const char *s = v[5];

		f->rank_negate = s[0] == '!';
		if (request__parse_u64(s + f->rank_negate, &n) || n > INT32_MAX) {
			snprintf(err, errsz, "%srank: want N or !N", prefix);
			return -EINVAL;
		}
		f->has_rank = 1;
		f->rank = (int32_t)n;
	}
	f->container = v[6];
	return 0;
}
