/* SPDX-License-Identifier: Apache-2.0 */
/*
 * strata-server's routes, written down once: for each path the method it
 * takes, the credential it needs and whether (and where) it takes a body.
 * server/http.c consults this on a request's first callback, before any
 * byte of the body is read, so a request without the right credential, to
 * no route, or with a body over the bound is answered at once.
 */
#ifndef STRATA_SERVER_HTTP_ROUTE_H
#define STRATA_SERVER_HTTP_ROUTE_H

#include <stdio.h>

#include "server/server.h"

enum route_auth {
	ROUTE_OPEN,    /* /healthz, the login form */
	ROUTE_METRICS, /* /metrics: open unless the server protects it */
	ROUTE_READ,    /* queries and pages */
	ROUTE_INGEST,  /* batches and symbol uploads */
	ROUTE_ANY,     /* no such route: any credential may be told so */
};

enum route_body {
	BODY_NONE,   /* a body is refused (413) */
	BODY_MEMORY, /* collected in memory, up to the batch bound */
	BODY_FILE,   /* streamed to the build-id store, up to the upload bound */
};

struct route {
	const char *path;
	int prefix; /* path is a prefix; something must follow it */
	const char *method;
	enum route_auth auth;
	enum route_body body;
	int query;	 /* counted in strata_queries_total */
	int id;		 /* what route__run calls */
	int html;	 /* a page: without the credential, off to /login */
	size_t max_body; /* 0: the server's bound for the body kind */
};

/* What an answer carries besides its status and body. */
struct route_answer {
	const char *ctype;    /* "application/json" unless set */
	const char *location; /* a redirect's target, or NULL */
	char *cookie;	      /* Set-Cookie value (malloc'd), or NULL */
};

/* The route of path and method, or of path alone with *method_ok 0 (405),
 * or NULL (404). */
const struct route *route__find(const char *path, const char *method, int *method_ok);

/* The part of path after a prefix route's prefix ("" for others). */
const char *route__rest(const struct route *rt, const char *path);

/* Runs the route's handler: the HTTP status, the body written to out. */
int route__run(const struct route *rt, struct server *srv, const struct request *r, FILE *out,
	       struct route_answer *a);

#endif /* STRATA_SERVER_HTTP_ROUTE_H */
