/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A small client for ClickHouse's HTTP interface (libcurl): statements,
 * queries whose results come back as TabSeparated and are parsed into
 * cells, and inserts of rows built here in escaped TabSeparated (so no
 * value is ever spliced into SQL text).  Works with ClickHouse 18.16
 * (Debian) and later.
 *
 * Errors: 0 or -errno.  -EIO: ClickHouse refused the query (its message,
 * "Code: N, e.displayText() = ...", is kept, see ch_client__error);
 * -ETIMEDOUT; -ECONNREFUSED / -EHOSTUNREACH: the server is not there;
 * -EFBIG: the result is larger than the client's max_result_bytes;
 * -EPROTO: a result that does not parse.
 *
 * One client is one connection: not thread-safe; use one per thread.
 */
#ifndef STRATA_SERVER_CLICKHOUSE_HTTP_H
#define STRATA_SERVER_CLICKHOUSE_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ch_opts {
	size_t sz;		     /* sizeof(struct ch_opts) */
	const char *url;	     /* "http://HOST:PORT" */
	const char *database;	     /* NULL: the server's default */
	const char *user;	     /* NULL: "default" */
	const char *password;	     /* NULL: none */
	uint32_t timeout_ms;	     /* whole request; 0: 30000 */
	uint32_t connect_timeout_ms; /* 0: 3000 */
	size_t max_result_bytes;     /* 0: 256 MiB */
	/* NULL, or settings for every request as URL parameters,
	 * "name=value&name=value" (constant text, not escaped here) */
	const char *settings;
	/* NULL, or asked while a query runs (ch_client__query; at least once
	 * a second, on the calling thread): true abandons it (-ETIMEDOUT).
	 * next_check_ns is the request's own, 0 at its start
	 * (store__read_over's form).  Statements and inserts are not asked. */
	bool (*stop)(uint64_t *next_check_ns);
};

/*
 * Parses "clickhouse://[USER[:PASSWORD]@]HOST:PORT/DB" into the url,
 * database, user and password of o (pointing into buf, bufsz bytes).
 * -EINVAL for anything else (the port and the database are required; the
 * database name must be [A-Za-z0-9_]+).
 */
int ch_parse_url(const char *spec, struct ch_opts *o, char *buf, size_t bufsz);

struct ch_client;

struct ch_client *ch_client__new(const struct ch_opts *o);
void ch_client__free(struct ch_client *c);
/* The last error's message ("" after a success). */
const char *ch_client__error(const struct ch_client *c);
/* ClickHouse's error code in the last error ("Code: N, ..."): 0 when the
 * error did not come from the server (or there was none). */
int ch_client__error_code(const struct ch_client *c);

/* Runs a statement that returns no rows (DDL, ALTER...). */
int ch_client__exec(struct ch_client *c, const char *sql);

/* A parsed TabSeparated result: cells are NUL-terminated, unescaped. */
struct ch_result {
	size_t rows, cols;
	char **cells; /* rows * cols */
	size_t *lens; /* byte length of each cell (cells may hold NUL bytes) */
	char *buf;
};

/*
 * Runs a SELECT (the client appends "FORMAT TabSeparated"); every row must
 * have the same number of columns.  ch_result__free accepts a zeroed or
 * freed result.
 */
int ch_client__query(struct ch_client *c, const char *sql, struct ch_result *r);
void ch_result__free(struct ch_result *r);
const char *ch_result__str(const struct ch_result *r, size_t row, size_t col);
/* Numeric cells; a cell that is not a number reads as 0 and is counted in
 * *bad when bad is not NULL. */
uint64_t ch_result__u64(const struct ch_result *r, size_t row, size_t col, int *bad);
int64_t ch_result__i64(const struct ch_result *r, size_t row, size_t col, int *bad);

/* Rows for an insert, built in escaped TabSeparated. */
struct ch_rows {
	char *buf;
	size_t len, cap;
	size_t rows;
	int at_row_start;
	int oom; /* an append failed: the insert refuses these rows */
};

void ch_rows__init(struct ch_rows *w);
void ch_rows__free(struct ch_rows *w);
void ch_rows__reset(struct ch_rows *w);
void ch_rows__str(struct ch_rows *w, const char *s); /* NULL: "" */
void ch_rows__bytes(struct ch_rows *w, const void *p, size_t n);
void ch_rows__u64(struct ch_rows *w, uint64_t v);
void ch_rows__i64(struct ch_rows *w, int64_t v);
void ch_rows__f64(struct ch_rows *w, double v);
/* A Date column, from CLOCK_REALTIME nanoseconds (UTC day). */
void ch_rows__date(struct ch_rows *w, uint64_t ns);
void ch_rows__end(struct ch_rows *w);
/* Appends src's whole rows to w (an incomplete or failed src fails w). */
void ch_rows__join(struct ch_rows *w, const struct ch_rows *src);

/*
 * INSERT INTO table_cols ("table (col, col, ...)") the rows of w, as one
 * request.  table_cols is the caller's constant text, never outside input.
 * No rows: nothing is sent.
 */
int ch_client__insert(struct ch_client *c, const char *table_cols, const struct ch_rows *w);

/*
 * SQL text built piece by piece: constant SQL via ch_sql__add (printf
 * formats for numbers only), outside strings only via ch_sql__quote, which
 * writes a ClickHouse string literal with \\ and ' escaped.  oom is set when
 * an append failed; callers refuse such a query.
 */
struct ch_sql {
	char *p;
	size_t len, cap;
	int oom;
};

void ch_sql__add(struct ch_sql *q, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ch_sql__quote(struct ch_sql *q, const char *s);
void ch_sql__free(struct ch_sql *q);

#endif /* STRATA_SERVER_CLICKHOUSE_HTTP_H */
