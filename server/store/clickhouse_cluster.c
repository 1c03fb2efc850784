// SPDX-License-Identifier: Apache-2.0
/*
 * The ClickHouse store's servers: the spec names one server, or every
 * server of a cluster with the cluster's name (clickhouse.h says how the
 * tables are laid out on a cluster).  Queries and inserts go to the first
 * server named (its Distributed tables reach every shard); the DDL and
 * the retention run on each server named, since ClickHouse 18.16 runs
 * ON CLUSTER statements only through ZooKeeper, which a cluster of
 * Distributed tables over plain MergeTree shards does not need.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "server/store/clickhouse.h"

#define IDENT_CHARS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"

/*
 * "clickhouse://[USER[:PASSWORD]@]HOST:PORT[,HOST:PORT...]/DB[?cluster=NAME]":
 * each HOST:PORT parsed as a one-server spec (ch_parse_url) with the same
 * user and database.  The password ends at the last '@', as there.
 */
int ch_store__parse_spec(struct ch_store *s, const char *spec, char *err, size_t errsz)
{
	const char *hosts, *slash, *query, *h;
	char one[1024];

	if (strncmp(spec, "clickhouse://", 13))
		goto bad;
	hosts = strrchr(spec, '@');
	hosts = hosts ? hosts + 1 : spec + 13;
	slash = strchr(hosts, '/');
	if (!slash)
		goto bad;
	query = strchr(slash, '?');
	if (query) {
		const char *name = query + 1;

		if (strncmp(name, "cluster=", 8) || !name[8] ||
		    strspn(name + 8, IDENT_CHARS) != strlen(name + 8) ||
		    strlen(name + 8) >= sizeof(s->cluster))
			goto bad;
		snprintf(s->cluster, sizeof(s->cluster), "%s", name + 8);
	} else {
		query = slash + strlen(slash);
	}
	s->nnodes = 0;
	for (h = hosts; h < slash; s->nnodes++) {
		const char *end = memchr(h, ',', (size_t)(slash - h));
		struct ch_node *n = &s->nodes[s->nnodes];
		int len;

		if (!end)
			end = slash;
		if (s->nnodes == CH_NODES_MAX) {
			snprintf(err, errsz, "bad store: more than %d servers", CH_NODES_MAX);
			return -EINVAL;
		}
		/* the user info, this server, the database */
		len = snprintf(one, sizeof(one), "%.*s%.*s%.*s", (int)(hosts - spec), spec,
			       (int)(end - h), h, (int)(query - slash), slash);
		n->opts.sz = sizeof(n->opts);
		if (len < 0 || (size_t)len >= sizeof(one) ||
		    ch_parse_url(one, &n->opts, n->buf, sizeof(n->buf)))
			goto bad;
		explicit_bzero(one, sizeof(one));
		n->opts.stop = store__read_over; /* a query's deadline, its client gone */
		if (s->cluster[0])
			n->opts.settings = CH_CLUSTER_SETTINGS;
		h = end < slash ? end + 1 : end;
	}
	if (s->nnodes > 1 && !s->cluster[0]) {
		snprintf(err, errsz, "bad store: several servers want ?cluster=NAME");
		return -EINVAL;
	}
	if (strlen(s->nodes[0].opts.database) >= sizeof(s->db))
		goto bad;
	snprintf(s->db, sizeof(s->db), "%s", s->nodes[0].opts.database);
	s->opts = s->nodes[0].opts;
	/* The database may not exist yet: the schema is made without it. */
	for (unsigned i = 0; i < s->nnodes; i++)
		s->nodes[i].opts.database = NULL;
	s->opts.database = NULL;
	return 0;
bad:
	explicit_bzero(one, sizeof(one));
	snprintf(err, errsz,
		 "bad store \"%s\": want clickhouse://[USER[:PASSWORD]@]HOST:PORT/DB or, for a"
		 " cluster, clickhouse://[USER[:PASSWORD]@]HOST:PORT,HOST:PORT.../DB?cluster=NAME",
		 spec);
	return -EINVAL;
}

int ch_store__check_cluster(struct ch_store *s, struct ch_client *c, char *err, size_t errsz)
{
	struct ch_sql q = { 0 };
	struct ch_result r;
	uint64_t n;
	int rc;

	if (!s->cluster[0])
		return 0;
	ch_sql__add(&q, "SELECT count() FROM system.clusters WHERE cluster = ");
	ch_sql__quote(&q, s->cluster);
	rc = ch_store__query(c, &q, &r, "system.clusters");
	ch_sql__free(&q);
	if (rc) {
		snprintf(err, errsz, "%s", ch_client__error(c));
		return rc;
	}
	n = ch_result__u64(&r, 0, 0, NULL);
	ch_result__free(&r);
	/* A server left out would get no tables: its shard's inserts fail. */
	if (n != s->nnodes) {
		snprintf(err, errsz,
			 "clickhouse: cluster %s has %llu servers in remote_servers, the store"
			 " names %u",
			 s->cluster, (unsigned long long)n, s->nnodes);
		return -EINVAL;
	}
	return 0;
}
