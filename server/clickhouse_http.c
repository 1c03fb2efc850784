// SPDX-License-Identifier: Apache-2.0
#include "server/clickhouse_http.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CH_DEFAULT_TIMEOUT_MS 30000
#define CH_DEFAULT_CONNECT_MS 3000
#define CH_DEFAULT_MAX_RESULT (256u << 20)
#define CH_ERR_MAX 512

struct ch_client {
	CURL *curl;
	char *base; /* URL up to and including "/?" plus the fixed parameters */
	char *userpwd;
	uint32_t timeout_ms;
	size_t max_result;
	bool (*stop)(uint64_t *next_check_ns); /* ch_opts' */
	uint64_t next_check_ns;		       /* the running request's, for stop */
	char err[CH_ERR_MAX];
};

/* The response body, bounded by the client's max_result. */
struct ch_body {
	char *p;
	size_t len, cap, max;
	int too_big;
};

int ch_parse_url(const char *spec, struct ch_opts *o, char *buf, size_t bufsz)
{
	const char *p, *at, *slash, *colon;
	size_t hostlen;
	int n;

	if (strncmp(spec, "clickhouse://", 13))
		return -EINVAL;
	p = spec + 13;
	/* The last '@' ends the user info (the database name holds none), so
	 * a password may hold '@' and '/'. */
	at = strrchr(p, '@');
	slash = strchr(at ? at + 1 : p, '/');
	if (!slash || !slash[1] ||
	    strspn(slash + 1, "abcdefghijklmnopqrstuvwxyz"
			      "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != strlen(slash + 1))
		return -EINVAL;
	const char *host = at ? at + 1 : p;
	colon = memrchr(host, ':', (size_t)(slash - host));
	if (!colon || colon == host || colon + 1 == slash ||
	    strspn(colon + 1, "0123456789") != (size_t)(slash - colon - 1))
		return -EINVAL;
	hostlen = (size_t)(slash - host);
	/* buf: "http://HOST:PORT\0DB\0USER\0PASSWORD\0" */
	n = snprintf(buf, bufsz, "http://%.*s", (int)hostlen, host);
	if (n < 0 || (size_t)n + 1 >= bufsz)
		return -ENAMETOOLONG;
	o->url = buf;
	char *w = buf + n + 1;
	size_t left = bufsz - (size_t)n - 1;
	n = snprintf(w, left, "%s", slash + 1);
	if (n < 0 || (size_t)n + 1 >= left)
		return -ENAMETOOLONG;
	o->database = w;
	w += n + 1, left -= (size_t)n + 1;
	o->user = o->password = NULL;
	if (at) {
		const char *pw = memchr(p, ':', (size_t)(at - p));
		size_t ulen = (size_t)((pw ? pw : at) - p);

		n = snprintf(w, left, "%.*s", (int)ulen, p);
		if (n < 0 || (size_t)n + 1 >= left || !ulen)
			return n < 0 || !ulen ? -EINVAL : -ENAMETOOLONG;
		o->user = w;
		w += n + 1, left -= (size_t)n + 1;
		if (pw) {
			n = snprintf(w, left, "%.*s", (int)(at - pw - 1), pw + 1);
			if (n < 0 || (size_t)n + 1 >= left)
				return -ENAMETOOLONG;
			o->password = w;
		}
	}
	return 0;
}

static void set_err(struct ch_client *c, const char *fmt, const char *a, size_t alen)
{
	snprintf(c->err, sizeof(c->err), fmt, (int)(alen < CH_ERR_MAX ? alen : CH_ERR_MAX), a);
}

struct ch_client *ch_client__new(const struct ch_opts *o)
{
	struct ch_client *c;
	char *db = NULL;
	int n;

	if (!o || o->sz < sizeof(*o) || !o->url) {
		errno = EINVAL;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->curl = curl_easy_init();
	if (!c->curl)
		goto err_out;
	c->timeout_ms = o->timeout_ms ? o->timeout_ms : CH_DEFAULT_TIMEOUT_MS;
	c->stop = o->stop;
	c->max_result = o->max_result_bytes ? o->max_result_bytes : CH_DEFAULT_MAX_RESULT;
	if (o->database) {
		db = curl_easy_escape(c->curl, o->database, 0);
		if (!db)
			goto err_out;
	}
	/*
	 * wait_end_of_query: the server buffers the whole result before the
	 * status line, so an error after the first rows is a 500, not a 200
	 * whose body ends in an exception.  max_execution_time: the server
	 * gives up when the client would.
	 */
	n = asprintf(&c->base, "%s/?wait_end_of_query=1&max_execution_time=%u%s%s%s%s", o->url,
		     (c->timeout_ms + 999) / 1000, db ? "&database=" : "", db ? db : "",
		     o->settings ? "&" : "", o->settings ? o->settings : "");
	curl_free(db);
	if (n < 0) {
		c->base = NULL;
		goto err_out;
	}
	if (o->user || o->password) {
		if (asprintf(&c->userpwd, "%s:%s", o->user ? o->user : "default",
			     o->password ? o->password : "") < 0) {
			c->userpwd = NULL;
			goto err_out;
		}
	}
	return c;
err_out:
	ch_client__free(c);
	errno = ENOMEM;
	return NULL;
}

void ch_client__free(struct ch_client *c)
{
	if (!c)
		return;
	if (c->curl)
		curl_easy_cleanup(c->curl);
	free(c->base);
	if (c->userpwd) {
		explicit_bzero(c->userpwd, strlen(c->userpwd));
		free(c->userpwd);
	}
	free(c);
}

const char *ch_client__error(const struct ch_client *c)
{
	return c->err;
}

int ch_client__error_code(const struct ch_client *c)
{
	static const char pfx[] = "clickhouse: Code: ";
	long code;

	if (strncmp(c->err, pfx, sizeof(pfx) - 1))
		return 0;
	code = strtol(c->err + sizeof(pfx) - 1, NULL, 10);
	return code > 0 && code < 100000 ? (int)code : 0;
}

/* Grows *buf (capacity *cap) to hold need bytes; -1 when out of memory. */
static int grow(char **buf, size_t *cap, size_t need)
{
	size_t c = *cap ? *cap : 4096;
	char *p;

	if (need <= *cap)
		return 0;
	while (c < need)
		c *= 2;
	p = realloc(*buf, c);
	if (!p)
		return -1;
	*buf = p, *cap = c;
	return 0;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *ctx)
{
	struct ch_body *b = ctx;
	size_t n = size * nmemb;

	if (b->len + n + 1 > b->max) {
		b->too_big = 1;
		return 0; /* curl stops with CURLE_WRITE_ERROR */
	}
	if (grow(&b->p, &b->cap, b->len + n + 1))
		return 0;
	memcpy(b->p + b->len, data, n);
	b->len += n;
	b->p[b->len] = '\0';
	return n;
}

static int curl_errno(CURLcode rc, const struct ch_body *b)
{
	switch (rc) {
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_ABORTED_BY_CALLBACK: /* stop(): the caller's bound */
		return -ETIMEDOUT;
	case CURLE_COULDNT_CONNECT:
		return -ECONNREFUSED;
	case CURLE_COULDNT_RESOLVE_HOST:
		return -EHOSTUNREACH;
	case CURLE_WRITE_ERROR:
		return b->too_big ? -EFBIG : -ENOMEM;
	case CURLE_OUT_OF_MEMORY:
		return -ENOMEM;
	default:
		return -EIO;
	}
}

/* CURLOPT_XFERINFOFUNCTION: nonzero abandons the request. */
static int ask_stop(void *ctx, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		    curl_off_t ulnow)
{
	struct ch_client *c = ctx;

	(void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
	return c->stop(&c->next_check_ns);
}

/*
 * POSTs body to base + extra (already URL-escaped) and collects the
 * response.  On an HTTP error the server's message goes to c->err.  A read
 * asks c->stop while it runs; statements and inserts run to their end (a
 * write abandoned after its body was sent may be committed anyway).
 */
static int request(struct ch_client *c, const char *extra, const char *body, size_t len, bool read,
		   struct ch_body *out)
{
	char *url = NULL;
	long status = 0;
	CURLcode rc;
	int err = 0;

	memset(out, 0, sizeof(*out));
	out->max = c->max_result;
	c->err[0] = '\0';
	if (asprintf(&url, "%s%s", c->base, extra ? extra : "") < 0)
		return -ENOMEM;
	curl_easy_reset(c->curl);
	curl_easy_setopt(c->curl, CURLOPT_URL, url);
	curl_easy_setopt(c->curl, CURLOPT_POST, 1L);
	curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, out);
	curl_easy_setopt(c->curl, CURLOPT_TIMEOUT_MS, (long)c->timeout_ms);
	curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT_MS, (long)CH_DEFAULT_CONNECT_MS);
	curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L); /* threads: no SIGALRM */
	curl_easy_setopt(c->curl, CURLOPT_PROTOCOLS_STR, "http,https");
	if (c->stop && read) {
		c->next_check_ns = 0;
		curl_easy_setopt(c->curl, CURLOPT_XFERINFOFUNCTION, ask_stop);
		curl_easy_setopt(c->curl, CURLOPT_XFERINFODATA, c);
		curl_easy_setopt(c->curl, CURLOPT_NOPROGRESS, 0L);
	}
	if (c->userpwd) {
		curl_easy_setopt(c->curl, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
		curl_easy_setopt(c->curl, CURLOPT_USERPWD, c->userpwd);
	}
	rc = curl_easy_perform(c->curl);
	if (rc != CURLE_OK) {
		err = curl_errno(rc, out);
		snprintf(c->err, sizeof(c->err), "clickhouse: %s: %s", c->base,
			 err == -EFBIG ? "result larger than max_result_bytes"
				       : curl_easy_strerror(rc));
		goto out;
	}
	curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
	if (status != 200) {
		size_t n = out->len;

		while (n && (out->p[n - 1] == '\n' || out->p[n - 1] == '\r'))
			n--;
		if (n)
			set_err(c, "clickhouse: %.*s", out->p, n);
		else
			snprintf(c->err, sizeof(c->err), "clickhouse: HTTP %ld", status);
		err = -EIO;
	}
out:
	free(url);
	if (err) {
		free(out->p);
		memset(out, 0, sizeof(*out));
	}
	return err;
}

int ch_client__exec(struct ch_client *c, const char *sql)
{
	struct ch_body b;
	int err = request(c, NULL, sql, strlen(sql), false, &b);

	free(b.p);
	return err;
}

/* Unescapes one TabSeparated field in place; returns its new length. */
static size_t tsv_unescape(char *s, size_t n)
{
	size_t r = 0, w = 0;

	while (r < n) {
		char ch = s[r++];

		if (ch == '\\' && r < n) {
			switch (s[r++]) {
			case 'n':
				ch = '\n';
				break;
			case 't':
				ch = '\t';
				break;
			case 'r':
				ch = '\r';
				break;
			case 'b':
				ch = '\b';
				break;
			case 'f':
				ch = '\f';
				break;
			case '0':
				ch = '\0';
				break;
			default:
				ch = s[r - 1];
				break; /* \\ \' and anything else */
			}
		}
		s[w++] = ch;
	}
	return w;
}

static int parse_tsv(char *buf, size_t len, struct ch_result *r)
{
	size_t rows = 0, cols = 0, cells = 0, i, line_cols = 1;

	/* Shape first: every line must have as many tabs as the first. */
	for (i = 0; i < len; i++) {
		if (buf[i] == '\t') {
			line_cols++;
		} else if (buf[i] == '\n') {
			if (rows == 0)
				cols = line_cols;
			else if (line_cols != cols)
				return -EPROTO;
			rows++;
			line_cols = 1;
		}
	}
	if (len && buf[len - 1] != '\n')
		return -EPROTO; /* a truncated last row */
	r->rows = rows, r->cols = rows ? cols : 0;
	if (!rows)
		return 0;
	r->cells = calloc(rows * cols, sizeof(*r->cells));
	r->lens = calloc(rows * cols, sizeof(*r->lens));
	if (!r->cells || !r->lens)
		return -ENOMEM;
	char *start = buf;
	for (i = 0; i < len; i++) {
		if (buf[i] != '\t' && buf[i] != '\n')
			continue;
		size_t n = tsv_unescape(start, (size_t)(buf + i - start));

		start[n] = '\0';
		r->cells[cells] = start;
		r->lens[cells++] = n;
		start = buf + i + 1;
	}
	return 0;
}

int ch_client__query(struct ch_client *c, const char *sql, struct ch_result *r)
{
	struct ch_body b;
	char *full = NULL;
	int err;

	memset(r, 0, sizeof(*r));
	if (asprintf(&full, "%s FORMAT TabSeparated", sql) < 0)
		return -ENOMEM;
	err = request(c, NULL, full, strlen(full), true, &b);
	free(full);
	if (err)
		return err;
	r->buf = b.p;
	err = r->buf ? parse_tsv(r->buf, b.len, r) : 0;
	if (err) {
		if (err == -EPROTO)
			snprintf(c->err, sizeof(c->err),
				 "clickhouse: malformed TabSeparated result");
		ch_result__free(r);
	}
	return err;
}

void ch_result__free(struct ch_result *r)
{
	if (!r)
		return;
	free(r->cells);
	free(r->lens);
	free(r->buf);
	memset(r, 0, sizeof(*r));
}

const char *ch_result__str(const struct ch_result *r, size_t row, size_t col)
{
	if (row >= r->rows || col >= r->cols)
		return "";
	return r->cells[row * r->cols + col];
}

uint64_t ch_result__u64(const struct ch_result *r, size_t row, size_t col, int *bad)
{
	const char *s = ch_result__str(r, row, col);
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *end || *s == '-') {
		if (bad)
			(*bad)++;
		return 0;
	}
	return v;
}

int64_t ch_result__i64(const struct ch_result *r, size_t row, size_t col, int *bad)
{
	const char *s = ch_result__str(r, row, col);
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || *end) {
		if (bad)
			(*bad)++;
		return 0;
	}
	return v;
}

/* ---- rows ------------------------------------------------------------------ */

void ch_rows__init(struct ch_rows *w)
{
	memset(w, 0, sizeof(*w));
	w->at_row_start = 1;
}

void ch_rows__free(struct ch_rows *w)
{
	free(w->buf);
	ch_rows__init(w);
}

void ch_rows__reset(struct ch_rows *w)
{
	w->len = 0;
	w->rows = 0;
	w->oom = 0;
	w->at_row_start = 1;
}

static int reserve(struct ch_rows *w, size_t n)
{
	if (w->oom || grow(&w->buf, &w->cap, w->len + n + 1)) {
		w->oom = 1;
		return -1;
	}
	return 0;
}

/* Starts a field: a tab unless it is the row's first. */
static int field(struct ch_rows *w, size_t n)
{
	if (reserve(w, n + 1))
		return -1;
	if (!w->at_row_start)
		w->buf[w->len++] = '\t';
	w->at_row_start = 0;
	return 0;
}

void ch_rows__bytes(struct ch_rows *w, const void *p, size_t n)
{
	const unsigned char *s = p;

	/* Worst case every byte is escaped into two. */
	if (field(w, 2 * n))
		return;
	for (size_t i = 0; i < n; i++) {
		char esc = 0;

		switch (s[i]) {
		case '\\':
			esc = '\\';
			break;
		case '\t':
			esc = 't';
			break;
		case '\n':
			esc = 'n';
			break;
		case '\r':
			esc = 'r';
			break;
		case '\b':
			esc = 'b';
			break;
		case '\f':
			esc = 'f';
			break;
		case '\0':
			esc = '0';
			break;
		}
		if (esc) {
			w->buf[w->len++] = '\\';
			w->buf[w->len++] = esc;
		} else {
			w->buf[w->len++] = (char)s[i];
		}
	}
}

void ch_rows__str(struct ch_rows *w, const char *s)
{
	ch_rows__bytes(w, s ? s : "", s ? strlen(s) : 0);
}

static void fmt_field(struct ch_rows *w, const char *text, int n)
{
	if (n < 0 || field(w, (size_t)n))
		return;
	memcpy(w->buf + w->len, text, (size_t)n);
	w->len += (size_t)n;
}

void ch_rows__u64(struct ch_rows *w, uint64_t v)
{
	char t[24];

	fmt_field(w, t, snprintf(t, sizeof(t), "%" PRIu64, v));
}

void ch_rows__i64(struct ch_rows *w, int64_t v)
{
	char t[24];

	fmt_field(w, t, snprintf(t, sizeof(t), "%" PRId64, v));
}

void ch_rows__f64(struct ch_rows *w, double v)
{
	char t[32];

	fmt_field(w, t, snprintf(t, sizeof(t), "%.17g", v));
}

void ch_rows__date(struct ch_rows *w, uint64_t ns)
{
	time_t secs = (time_t)(ns / 1000000000ULL);
	struct tm tm;
	char t[16];

	if (!gmtime_r(&secs, &tm)) {
		w->oom = 1; /* unrepresentable: refuse the rows rather than guess */
		return;
	}
	fmt_field(w, t, (int)strftime(t, sizeof(t), "%Y-%m-%d", &tm));
}

void ch_rows__join(struct ch_rows *w, const struct ch_rows *src)
{
	if (src->oom || !src->at_row_start || !w->at_row_start) {
		w->oom = 1;
		return;
	}
	if (!src->len || reserve(w, src->len))
		return;
	memcpy(w->buf + w->len, src->buf, src->len);
	w->len += src->len;
	w->rows += src->rows;
}

void ch_rows__end(struct ch_rows *w)
{
	if (reserve(w, 1))
		return;
	w->buf[w->len++] = '\n';
	w->rows++;
	w->at_row_start = 1;
}

int ch_client__insert(struct ch_client *c, const char *table_cols, const struct ch_rows *w)
{
	struct ch_body b;
	char *q = NULL, *esc, *extra = NULL;
	int err;

	if (w->oom) {
		snprintf(c->err, sizeof(c->err), "clickhouse: rows for %s incomplete (no memory)",
			 table_cols);
		return -ENOMEM;
	}
	if (!w->rows)
		return 0;
	if (!w->at_row_start) {
		snprintf(c->err, sizeof(c->err), "clickhouse: rows for %s: last row not ended",
			 table_cols);
		return -EINVAL;
	}
	if (asprintf(&q, "INSERT INTO %s FORMAT TabSeparated", table_cols) < 0)
		return -ENOMEM;
	esc = curl_easy_escape(c->curl, q, 0);
	free(q);
	if (!esc || asprintf(&extra, "&query=%s", esc) < 0) {
		curl_free(esc);
		return -ENOMEM;
	}
	curl_free(esc);
	err = request(c, extra, w->buf, w->len, false, &b);
	free(extra);
	free(b.p);
	return err;
}

/* ---- SQL text ---------------------------------------------------------------- */

static int sql_reserve(struct ch_sql *q, size_t n)
{
	if (q->oom || grow(&q->p, &q->cap, q->len + n + 1)) {
		q->oom = 1;
		return -1;
	}
	return 0;
}

void ch_sql__add(struct ch_sql *q, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || sql_reserve(q, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(q->p + q->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	q->len += (size_t)n;
}

void ch_sql__quote(struct ch_sql *q, const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (sql_reserve(q, 2 * n + 2))
		return;
	q->p[q->len++] = '\'';
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '\\' || s[i] == '\'')
			q->p[q->len++] = '\\';
		q->p[q->len++] = s[i];
	}
	q->p[q->len++] = '\'';
	q->p[q->len] = '\0';
}

void ch_sql__free(struct ch_sql *q)
{
	free(q->p);
	memset(q, 0, sizeof(*q));
}
