/* SPDX-License-Identifier: Apache-2.0 */
/*
 * strata-server's secrets, read from files at start (never from the
 * command line, where ps and the Kubernetes API would show them): the
 * ingest, read and metrics tokens, the TLS key and certificate, and the
 * ClickHouse password.
 */
#ifndef STRATA_SERVER_SERVER_CREDS_H
#define STRATA_SERVER_SERVER_CREDS_H

#include <stddef.h>

#include "server/server.h"

struct server_cred_files {
	const char *token;   /* --token-file: ingest and read (one credential) */
	const char *ingest;  /* --ingest-token-file */
	const char *read;    /* --read-token-file */
	const char *metrics; /* --metrics-token-file */
	const char *tls_cert, *tls_key;
	const char *store_password; /* --store-password-file */
};

/* Loads the files into srv (tokens, TLS) and *store_spec (the store spec
 * with the password put in, malloc'd; spec itself without a password
 * file).  0, or -errno with err set. */
int server_creds__load(const struct server_cred_files *f, struct server *srv, const char *spec,
		       char **store_spec, char *err, size_t errsz);
void server_creds__free(struct server *srv, char *store_spec);

#endif /* STRATA_SERVER_SERVER_CREDS_H */
