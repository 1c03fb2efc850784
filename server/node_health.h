/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Each node's agent as this server last heard from it, for /metrics: the
 * series the shipped rules (deploy/prometheus/strata-rules.yml) alert on.
 *
 *   strata_agent_last_batch_timestamp_seconds{node}  StrataAgentDown
 *   strata_agent_batches_total{node}
 *   strata_agent_probe_budget_exceeded_total{node,probe}
 *   strata_agent_probe_duty_ratio{node,probe}        StrataProbeBudgetExceeded
 *
 * Times are this server's clock when the batch came (a node's own clock
 * may be off), duplicates included: the agent is alive.  A restarted
 * server starts from its store's nodes (node_health__seed), so a node that
 * died before the restart stays down, not unknown.  Node names come from
 * the network: bounded (NODE_HEALTH_MAX nodes, then counted as dropped;
 * NODE_HEALTH_PROBES probe names a node), escaped when printed, and a node
 * silent past the store's retention is forgotten.
 */
#ifndef STRATA_SERVER_NODE_HEALTH_H
#define STRATA_SERVER_NODE_HEALTH_H

#include <stdint.h>
#include <stdio.h>

#include "strata.pb-c.h"

#define NODE_HEALTH_MAX 16384
#define NODE_HEALTH_PROBES 4
#define NODE_HEALTH_PROBE_NAME 32

struct node_health;

/* NULL when out of memory. */
struct node_health *node_health__new(void);
void node_health__free(struct node_health *h);

/* A batch of b->node the store took (or had: duplicate) at received_ns. */
void node_health__batch(struct node_health *h, const Strata__V1__Batch *b, uint64_t received_ns,
			int duplicate);

/* node was last heard from at last_ns (the store's, at start); a later
 * time already known is kept. */
void node_health__seed(struct node_health *h, const char *node, uint64_t last_ns);

/* Forgets the nodes silent since before cutoff_ns (retention). */
void node_health__forget(struct node_health *h, uint64_t cutoff_ns);

/* The Prometheus text of the series above. */
void node_health__metrics(struct node_health *h, FILE *o);

#endif /* STRATA_SERVER_NODE_HEALTH_H */
