// SPDX-License-Identifier: Apache-2.0
#include "server/http_auth.h"

#include <errno.h>
#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>

#define TOKEN_MAX 4096

/* What a cookie value may hold (RFC 6265 cookie-octet). */
static int cookie_safe(const char *s)
{
	for (; *s; s++)
		if (*s <= 0x20 || *s >= 0x7f || *s == '"' || *s == ',' || *s == ';' || *s == '\\')
			return 0;
	return 1;
}

int auth_tokens__load(struct auth_tokens *t, const char *path)
{
	char line[TOKEN_MAX + 2];
	FILE *f = fopen(path, "r");
	size_t before = t->n;
	int err = 0;

	if (!f)
		return -errno;
	while (!err && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\r\n")] = 0;
		if (!line[0])
			continue;
		if (!cookie_safe(line) || t->n == AUTH_MAX_TOKENS)
			err = -EINVAL;
		else if (!(t->v[t->n++] = strdup(line)))
			err = -ENOMEM;
	}
	fclose(f);
	return err ? err : t->n == before ? -EINVAL : 0;
}

void auth_tokens__free(struct auth_tokens *t)
{
	for (size_t i = 0; i < t->n; i++) {
		explicit_bzero(t->v[i], strlen(t->v[i]));
		free(t->v[i]);
	}
	t->n = 0;
}

/* Constant time in the token's content: a timing side channel must not
 * tell how much of a guess was right. */
static int same(const char *want, const char *got)
{
	size_t wn = strlen(want), gn = strlen(got);
	unsigned char diff = 0;

	for (size_t i = 0; i < wn; i++)
		diff |= (unsigned char)want[i] ^ (unsigned char)(i < gn ? got[i] : 0);
	return !diff && wn == gn;
}

int auth_tokens__match(const struct auth_tokens *t, const char *got)
{
	int ok = 0;

	for (size_t i = 0; got && i < t->n; i++)
		ok |= same(t->v[i], got);
	return ok;
}

static const char *bearer(struct MHD_Connection *c)
{
	const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");

	return h && !strncmp(h, "Bearer ", 7) ? h + 7 : NULL;
}

int auth__ok(const struct server *srv, void *conn, enum route_auth need)
{
	struct MHD_Connection *c = conn;
	const char *b = bearer(c);
	const char *cookie = MHD_lookup_connection_value(c, MHD_COOKIE_KIND, AUTH_COOKIE);
	int any = srv->ingest.n || srv->read.n;

	switch (need) {
	case ROUTE_OPEN:
		return 1;
	case ROUTE_METRICS:
		if (!srv->metrics.n)
			return 1;
		return auth_tokens__match(&srv->metrics, b) || auth_tokens__match(&srv->read, b);
	case ROUTE_INGEST: /* agents: the header only */
		return !srv->ingest.n || auth_tokens__match(&srv->ingest, b);
	case ROUTE_READ:
		return !srv->read.n || auth_tokens__match(&srv->read, b) ||
		       auth_tokens__match(&srv->read, cookie);
	case ROUTE_ANY: /* no such route: any credential may hear so */
		return !any || auth_tokens__match(&srv->ingest, b) ||
		       auth_tokens__match(&srv->read, b) || auth_tokens__match(&srv->read, cookie);
	}
	return 0;
}

void auth__login_page(FILE *out, const char *msg)
{
	fputs("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>strata: sign in</title>"
	      "<style>body{font-family:sans-serif;margin:2em}</style></head><body>"
	      "<h1>strata</h1>",
	      out);
	if (msg)
		fprintf(out, "<p><b>%s</b></p>", msg); /* our own constant text */
	fputs("<form method=\"post\" action=\"/login\"><label>read token "
	      "<input type=\"password\" name=\"token\" autocomplete=\"current-password\">"
	      "</label> <button type=\"submit\">sign in</button></form></body></html>\n",
	      out);
}

static int unhex(char c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10
				      : -1;
}

int auth__form_token(const char *body, size_t len, char *tok, size_t sz)
{
	const char *p = body, *end = body + len;
	size_t n = 0;

	/* application/x-www-form-urlencoded: the field "token" */
	while (p < end) {
		const char *amp = memchr(p, '&', (size_t)(end - p));
		const char *fe = amp ? amp : end;

		if (fe - p > 6 && !memcmp(p, "token=", 6)) {
			for (p += 6; p < fe; p++) {
				int c = *p;

				if (c == '+') {
					c = ' ';
				} else if (c == '%') {
					if (fe - p < 3 || unhex(p[1]) < 0 || unhex(p[2]) < 0)
						return -EINVAL;
					c = unhex(p[1]) * 16 + unhex(p[2]);
					p += 2;
				}
				if (!c || n + 1 >= sz)
					return -EINVAL;
				tok[n++] = (char)c;
			}
			tok[n] = 0;
			return 0;
		}
		p = fe + 1;
	}
	return -EINVAL;
}
