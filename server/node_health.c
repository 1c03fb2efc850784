// SPDX-License-Identifier: Apache-2.0
#include "server/node_health.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "lib/hash.h"
#include "lib/utf8.h"
#include "server/diag_inputs.h"
#include "server/prom_word.h"

#define SLOTS (2 * NODE_HEALTH_MAX) /* open addressing, at most half full */
#define NODE_KEY_MAX (3 * 256 + 4)  /* a batch's node (<= 255 bytes), each byte U+FFFD */

struct probe_row {
	char name[NODE_HEALTH_PROBE_NAME];
	uint64_t exceeded; /* batches whose probe ran duty-cycled */
	double ratio;	   /* the last batch's */
};

struct node_entry {
	uint64_t last_ns, batches;
	struct probe_row probes[NODE_HEALTH_PROBES];
	int nprobes;
	char node[]; /* NUL-terminated */
};

struct node_health {
	pthread_mutex_t lock;
	struct node_entry **slots; /* SLOTS */
	uint32_t n;
	uint64_t dropped;	 /* nodes not kept: the table full */
	uint64_t probes_dropped; /* probe rows not kept: malformed names, or too many */
};

struct node_health *node_health__new(void)
{
	struct node_health *h = calloc(1, sizeof(*h));

	if (!h)
		return NULL;
	h->slots = calloc(SLOTS, sizeof(*h->slots));
	if (!h->slots) {
		free(h);
		return NULL;
	}
	pthread_mutex_init(&h->lock, NULL);
	return h;
}

void node_health__free(struct node_health *h)
{
	if (!h)
		return;
	for (uint32_t i = 0; i < SLOTS; i++)
		free(h->slots[i]);
	free(h->slots);
	pthread_mutex_destroy(&h->lock);
	free(h);
}

/* The slot holding node, or the empty one where it goes. */
static struct node_entry **slot_of(struct node_entry **slots, const char *node)
{
	uint32_t i = (uint32_t)hash_bytes(node, strlen(node), 0x6e6f6465) & (SLOTS - 1);

	while (slots[i] && strcmp(slots[i]->node, node))
		i = (i + 1) & (SLOTS - 1);
	return &slots[i];
}

/*
 * node as its label prints (diag_prom_label: a bad byte or a control
 * character but the newline becomes U+FFFD), into out (cap >= 3 x its
 * length + 1): two names that print the same are one node, not two
 * series with the same labels (a scrape Prometheus refuses).
 */
static void label_key(const char *node, char *out, size_t cap)
{
	size_t k = 0;

	while (*node && k + 4 < cap) {
		uint32_t cp;
		size_t n = utf8_next(node, &cp);

		if (cp == UTF8_REPLACEMENT || (cp < 0x20 && cp != '\n') ||
		    (cp >= 0x7f && cp < 0xa0)) {
			memcpy(out + k, "\xef\xbf\xbd", 3);
			k += 3;
		} else {
			memcpy(out + k, node, n);
			k += n;
		}
		node += n;
	}
	out[k] = 0;
}

/* node's entry, made when new; NULL when the table is full. Locked. */
static struct node_entry *entry_of(struct node_health *h, const char *raw)
{
	char node[NODE_KEY_MAX];
	struct node_entry **s;
	size_t len;

	label_key(raw, node, sizeof(node));
	s = slot_of(h->slots, node);
	len = strlen(node);

	if (*s)
		return *s;
	if (h->n >= NODE_HEALTH_MAX || !(*s = calloc(1, sizeof(**s) + len + 1))) {
		h->dropped++;
		return NULL;
	}
	memcpy((*s)->node, node, len + 1);
	h->n++;
	return *s;
}

static void note_probe(struct node_health *h, struct node_entry *e, const char *name, double ratio)
{
	struct probe_row *p = NULL;

	if (!prom_word(name, NODE_HEALTH_PROBE_NAME)) {
		h->probes_dropped++;
		return;
	}
	for (int i = 0; i < e->nprobes && !p; i++)
		if (!strcmp(e->probes[i].name, name))
			p = &e->probes[i];
	if (!p) {
		if (e->nprobes == NODE_HEALTH_PROBES) {
			h->probes_dropped++;
			return;
		}
		p = &e->probes[e->nprobes++];
		snprintf(p->name, sizeof(p->name), "%s", name);
	}
	p->ratio = ratio;
	if (ratio < 1)
		p->exceeded++;
}

void node_health__batch(struct node_health *h, const Strata__V1__Batch *b, uint64_t received_ns,
			int duplicate)
{
	struct node_entry *e;

	pthread_mutex_lock(&h->lock);
	e = entry_of(h, b->node);
	if (e) {
		if (received_ns > e->last_ns)
			e->last_ns = received_ns;
		if (!duplicate) {
			e->batches++;
			/* probe_str was checked against the string table */
			for (size_t i = 0; i < b->n_probe_duty; i++)
				note_probe(h, e, b->strings[b->probe_duty[i]->probe_str],
					   b->probe_duty[i]->ratio);
		}
	}
	pthread_mutex_unlock(&h->lock);
}

void node_health__seed(struct node_health *h, const char *node, uint64_t last_ns)
{
	struct node_entry *e;

	pthread_mutex_lock(&h->lock);
	e = entry_of(h, node);
	if (e && last_ns > e->last_ns)
		e->last_ns = last_ns;
	pthread_mutex_unlock(&h->lock);
}

void node_health__forget(struct node_health *h, uint64_t cutoff_ns)
{
	struct node_entry **kept = calloc(SLOTS, sizeof(*kept));

	if (!kept)
		return; /* the next pass */
	pthread_mutex_lock(&h->lock);
	for (uint32_t i = 0; i < SLOTS; i++) {
		struct node_entry *e = h->slots[i];

		if (!e)
			continue;
		if (e->last_ns < cutoff_ns) {
			free(e);
			h->n--;
		} else {
			*slot_of(kept, e->node) = e;
		}
	}
	free(h->slots);
	h->slots = kept;
	pthread_mutex_unlock(&h->lock);
}

void node_health__metrics(struct node_health *h, FILE *o)
{
	pthread_mutex_lock(&h->lock);
	fputs("# HELP strata_agent_last_batch_timestamp_seconds when this server last took a "
	      "batch from the node's agent (this server's clock)\n"
	      "# TYPE strata_agent_last_batch_timestamp_seconds gauge\n",
	      o);
	for (uint32_t i = 0; i < SLOTS; i++)
		if (h->slots[i]) {
			fputs("strata_agent_last_batch_timestamp_seconds{node=", o);
			diag_prom_label(o, h->slots[i]->node);
			fprintf(o, "} %.3f\n", (double)h->slots[i]->last_ns / 1e9);
		}
	fputs("# HELP strata_agent_batches_total batches stored from the node since this server "
	      "started\n"
	      "# TYPE strata_agent_batches_total counter\n",
	      o);
	for (uint32_t i = 0; i < SLOTS; i++)
		if (h->slots[i]) {
			fputs("strata_agent_batches_total{node=", o);
			diag_prom_label(o, h->slots[i]->node);
			fprintf(o, "} %" PRIu64 "\n", h->slots[i]->batches);
		}
	fputs("# HELP strata_agent_probe_budget_exceeded_total batches in which the agent "
	      "duty-cycled a probe to stay within its CPU budget\n"
	      "# TYPE strata_agent_probe_budget_exceeded_total counter\n",
	      o);
	for (uint32_t i = 0; i < SLOTS; i++)
		for (int p = 0; h->slots[i] && p < h->slots[i]->nprobes; p++) {
			fputs("strata_agent_probe_budget_exceeded_total{node=", o);
			diag_prom_label(o, h->slots[i]->node);
			fprintf(o, ",probe=\"%s\"} %" PRIu64 "\n", h->slots[i]->probes[p].name,
				h->slots[i]->probes[p].exceeded);
		}
	fputs("# HELP strata_agent_probe_duty_ratio the fraction of its last batch's window a "
	      "duty-cycled probe was on (1: not cut)\n"
	      "# TYPE strata_agent_probe_duty_ratio gauge\n",
	      o);
	for (uint32_t i = 0; i < SLOTS; i++)
		for (int p = 0; h->slots[i] && p < h->slots[i]->nprobes; p++) {
			fputs("strata_agent_probe_duty_ratio{node=", o);
			diag_prom_label(o, h->slots[i]->node);
			fprintf(o, ",probe=\"%s\"} %g\n", h->slots[i]->probes[p].name,
				h->slots[i]->probes[p].ratio);
		}
	fprintf(o,
		"# HELP strata_agent_nodes_tracked nodes in the table above\n"
		"# TYPE strata_agent_nodes_tracked gauge\n"
		"strata_agent_nodes_tracked %u\n"
		"# HELP strata_agent_nodes_dropped_total batches of nodes not tracked: more than "
		"%d\n"
		"# TYPE strata_agent_nodes_dropped_total counter\n"
		"strata_agent_nodes_dropped_total %" PRIu64 "\n"
		"# HELP strata_agent_probes_dropped_total probe rows not tracked: malformed names, "
		"or more than %d a node\n"
		"# TYPE strata_agent_probes_dropped_total counter\n"
		"strata_agent_probes_dropped_total %" PRIu64 "\n",
		h->n, NODE_HEALTH_MAX, h->dropped, NODE_HEALTH_PROBES, h->probes_dropped);
	pthread_mutex_unlock(&h->lock);
}
