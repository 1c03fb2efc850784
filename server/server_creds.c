// SPDX-License-Identifier: Apache-2.0
#include "server/server_creds.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/http_auth.h"

#define PEM_MAX (1u << 20)

/* The whole (small) file, NUL-terminated; NULL + errno. */
static char *slurp(const char *path, size_t max)
{
	FILE *f = fopen(path, "r");
	char *buf;
	size_t n;

	if (!f)
		return NULL;
	buf = malloc(max + 1);
	n = buf ? fread(buf, 1, max + 1, f) : 0;
	fclose(f);
	if (!buf || n > max || !n) {
		free(buf);
		errno = buf ? EINVAL : ENOMEM;
		return NULL;
	}
	buf[n] = 0;
	return buf;
}

static int tokens(struct auth_tokens *t, const char *path, char *err, size_t errsz)
{
	int e = path ? auth_tokens__load(t, path) : 0;

	if (e)
		snprintf(err, errsz, "%s: %s", path,
			 e == -EINVAL ? "no token, or one with spaces, ';', ',', quotes or "
					"control characters"
				      : strerror(-e));
	return e;
}

/* "clickhouse://USER@HOST..." + password -> "clickhouse://USER:PASSWORD@HOST..." */
static int with_password(const char *spec, const char *path, char **out, char *err, size_t errsz)
{
	const char *p = spec + 13, *at = strrchr(spec, '@');
	char *pw;
	int n;

	if (strncmp(spec, "clickhouse://", 13) || !at || memchr(p, ':', (size_t)(at - p))) {
		snprintf(err, errsz, "--store-password-file wants clickhouse://USER@HOST:PORT/DB");
		return -EINVAL;
	}
	pw = slurp(path, 4096);
	if (!pw) {
		snprintf(err, errsz, "%s: %s", path, strerror(errno));
		return -errno;
	}
	pw[strcspn(pw, "\r\n")] = 0;
	n = asprintf(out, "%.*s:%s%s", (int)(at - spec), spec, pw, at);
	explicit_bzero(pw, strlen(pw));
	free(pw);
	if (n < 0) {
		*out = NULL;
		return -ENOMEM;
	}
	return 0;
}

int server_creds__load(const struct server_cred_files *f, struct server *srv, const char *spec,
		       char **store_spec, char *err, size_t errsz)
{
	int e;

	*store_spec = NULL;
	if ((e = tokens(&srv->ingest, f->token, err, errsz)) ||
	    (e = tokens(&srv->read, f->token, err, errsz)) ||
	    (e = tokens(&srv->ingest, f->ingest, err, errsz)) ||
	    (e = tokens(&srv->read, f->read, err, errsz)) ||
	    (e = tokens(&srv->metrics, f->metrics, err, errsz)))
		return e;
	if (!f->tls_cert != !f->tls_key) {
		snprintf(err, errsz, "--tls-cert and --tls-key go together");
		return -EINVAL;
	}
	if (f->tls_cert) {
		char *cert = slurp(f->tls_cert, PEM_MAX),
		     *key = cert ? slurp(f->tls_key, PEM_MAX) : NULL;

		if (!key) {
			snprintf(err, errsz, "%s: %s", cert ? f->tls_key : f->tls_cert,
				 strerror(errno));
			free(cert);
			return -EINVAL;
		}
		srv->tls = 1;
		srv->tls_cert = cert;
		srv->tls_key = key;
	}
	if (f->store_password)
		return with_password(spec, f->store_password, store_spec, err, errsz);
	*store_spec = strdup(spec);
	return *store_spec ? 0 : -ENOMEM;
}

void server_creds__free(struct server *srv, char *store_spec)
{
	auth_tokens__free(&srv->ingest);
	auth_tokens__free(&srv->read);
	auth_tokens__free(&srv->metrics);
	if (srv->tls_key)
		explicit_bzero((char *)srv->tls_key, strlen(srv->tls_key));
	free((char *)srv->tls_key);
	free((char *)srv->tls_cert);
	srv->tls_key = srv->tls_cert = NULL;
	if (store_spec)
		explicit_bzero(store_spec, strlen(store_spec));
	free(store_spec);
}
