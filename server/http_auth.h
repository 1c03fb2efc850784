/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Who may do what at strata-server.  Three credentials, each a file of
 * tokens (one a line, so one can be rotated in before the old one goes):
 * ingest (agents: batches and symbol uploads), read (queries and pages),
 * metrics (/metrics, when protected; a read token also serves).  A token
 * travels only in "Authorization: Bearer", or for browsers in the
 * HttpOnly strata_token cookie that POST /login sets after checking a read
 * token: never in a URL, never in a page.  Compared in constant time.
 */
#ifndef STRATA_SERVER_HTTP_AUTH_H
#define STRATA_SERVER_HTTP_AUTH_H

#include <stddef.h>
#include <stdio.h>

#include "server/http_route.h"
#include "server/server.h"

#define AUTH_COOKIE "strata_token"

/* Appends the tokens of path (each non-empty line).  0, or -errno
 * (-EINVAL: no token in it, or one a cookie could not carry). */
int auth_tokens__load(struct auth_tokens *t, const char *path);
void auth_tokens__free(struct auth_tokens *t);
/* 1 when got is one of t's tokens. */
int auth_tokens__match(const struct auth_tokens *t, const char *got);

/* 1 when the request (its Authorization header, or its cookie where a
 * browser may use one) carries the credential need asks for. */
int auth__ok(const struct server *srv, void *conn, enum route_auth need);

/* The login form (HTML), with msg (NULL: none) above it. */
void auth__login_page(FILE *out, const char *msg);
/* The token of a login form body ("token=..."), URL-decoded into tok.
 * 0 or -EINVAL. */
int auth__form_token(const char *body, size_t len, char *tok, size_t sz);

#endif /* STRATA_SERVER_HTTP_AUTH_H */
