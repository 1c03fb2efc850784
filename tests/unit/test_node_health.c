// SPDX-License-Identifier: Apache-2.0
/* Each node's agent as the server last heard it (server/node_health.c):
 * the series StrataAgentDown and StrataProbeBudgetExceeded read, a
 * duplicate batch, a seed from the store, a hostile node name, the
 * bounds, and forgetting past retention. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "server/node_health.h"

struct one_batch {
	Strata__V1__Batch b;
	Strata__V1__ProbeDutyCycle duty, *dutyp;
	char *strings[2];
};

static void make_batch(struct one_batch *o, const char *node, const char *probe, double ratio)
{
	memset(o, 0, sizeof(*o));
	strata__v1__batch__init(&o->b);
	strata__v1__probe_duty_cycle__init(&o->duty);
	o->b.node = (char *)node;
	o->strings[0] = "";
	o->strings[1] = (char *)probe;
	o->b.strings = o->strings;
	o->b.n_strings = 2;
	if (probe) {
		o->duty.probe_str = 1;
		o->duty.ratio = ratio;
		o->dutyp = &o->duty;
		o->b.probe_duty = &o->dutyp;
		o->b.n_probe_duty = 1;
	}
}

static char *scrape(struct node_health *h)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *o = open_memstream(&buf, &len);

	assert_non_null(o);
	node_health__metrics(h, o);
	fclose(o);
	return buf;
}

static void test_series(void **state)
{
	struct node_health *h = node_health__new();
	struct one_batch o;
	char *m;

	(void)state;
	assert_non_null(h);
	make_batch(&o, "node-a", "cuda", 0.25);
	node_health__batch(h, &o.b, 100500000000ull, 0);
	make_batch(&o, "node-a", "cuda", 1);
	node_health__batch(h, &o.b, 110000000000ull, 0);
	/* a retried batch the store had: alive, not counted again */
	node_health__batch(h, &o.b, 120000000000ull, 1);
	make_batch(&o, "node-b", NULL, 0);
	node_health__batch(h, &o.b, 90000000000ull, 0);
	m = scrape(h);
	assert_non_null(strstr(m, "strata_agent_last_batch_timestamp_seconds{node=\"node-a\"} "
				  "120.000\n"));
	assert_non_null(strstr(m, "strata_agent_last_batch_timestamp_seconds{node=\"node-b\"} "
				  "90.000\n"));
	assert_non_null(strstr(m, "strata_agent_batches_total{node=\"node-a\"} 2\n"));
	assert_non_null(strstr(m, "strata_agent_probe_budget_exceeded_total{node=\"node-a\","
				  "probe=\"cuda\"} 1\n"));
	assert_non_null(strstr(m, "strata_agent_probe_duty_ratio{node=\"node-a\",probe=\"cuda\"} "
				  "1\n"));
	assert_null(strstr(m, "node=\"node-b\",probe"));
	assert_non_null(strstr(m, "strata_agent_nodes_tracked 2\n"));
	free(m);

	/* the store's newest at start: a later time already known stays */
	node_health__seed(h, "node-a", 50000000000ull);
	node_health__seed(h, "node-c", 60000000000ull);
	m = scrape(h);
	assert_non_null(strstr(m, "{node=\"node-a\"} 120.000\n"));
	assert_non_null(strstr(m, "{node=\"node-c\"} 60.000\n"));
	assert_non_null(strstr(m, "strata_agent_batches_total{node=\"node-c\"} 0\n"));
	free(m);

	/* retention: node-b and node-c go, node-a stays and is found again */
	node_health__forget(h, 100000000000ull);
	make_batch(&o, "node-a", "cuda", 0.5);
	node_health__batch(h, &o.b, 130000000000ull, 0);
	m = scrape(h);
	assert_null(strstr(m, "node-b"));
	assert_null(strstr(m, "node-c"));
	assert_non_null(strstr(m, "strata_agent_batches_total{node=\"node-a\"} 3\n"));
	assert_non_null(strstr(m, "probe=\"cuda\"} 2\n"));
	assert_non_null(strstr(m, "strata_agent_nodes_tracked 1\n"));
	free(m);
	node_health__free(h);
}

static void test_hostile_names(void **state)
{
	struct node_health *h = node_health__new();
	struct one_batch o;
	char *m;

	(void)state;
	/* a label breaker for a node, probe names that are not words */
	make_batch(&o, "evil\"} 1\nstrata_up 0 #", "cuda", 0.5);
	node_health__batch(h, &o.b, 1000000000ull, 0);
	make_batch(&o, "n", "bad\"probe", 0.5);
	node_health__batch(h, &o.b, 1000000000ull, 0);
	make_batch(&o, "n", "", 0.5);
	node_health__batch(h, &o.b, 1000000000ull, 0);
	for (int i = 0; i < NODE_HEALTH_PROBES + 2; i++) {
		char p[16];

		snprintf(p, sizeof(p), "p%d", i);
		make_batch(&o, "n", p, 0.5);
		node_health__batch(h, &o.b, 1000000000ull, 0);
	}
	/* two names that print the same: one node, not two series alike */
	make_batch(&o, "dup\xff", NULL, 0);
	node_health__batch(h, &o.b, 2000000000ull, 0);
	make_batch(&o, "dup\x01", NULL, 0);
	node_health__batch(h, &o.b, 3000000000ull, 0);
	m = scrape(h);
	assert_non_null(strstr(m, "{node=\"dup\xef\xbf\xbd\"} 3.000\n"));
	assert_non_null(strstr(m, "strata_agent_batches_total{node=\"dup\xef\xbf\xbd\"} 2\n"));
	assert_non_null(strstr(m, "{node=\"evil\\\"} 1\\nstrata_up 0 #\"} 1.000\n"));
	assert_null(strstr(m, "\nstrata_up"));
	assert_null(strstr(m, "bad"));
	assert_non_null(strstr(m, "probe=\"p3\"} 1\n"));
	assert_null(strstr(m, "probe=\"p4\""));
	/* two malformed, two over the bound */
	assert_non_null(strstr(m, "strata_agent_probes_dropped_total 4\n"));
	free(m);
	node_health__free(h);
}

static void test_bound(void **state)
{
	struct node_health *h = node_health__new();
	struct one_batch o;
	char node[32], *m;

	(void)state;
	for (int i = 0; i < NODE_HEALTH_MAX + 3; i++) {
		snprintf(node, sizeof(node), "node-%d", i);
		make_batch(&o, node, NULL, 0);
		node_health__batch(h, &o.b, 1000000000ull + (uint64_t)i, 0);
	}
	/* a known node is still taken at the bound */
	make_batch(&o, "node-0", NULL, 0);
	node_health__batch(h, &o.b, 5000000000ull, 0);
	m = scrape(h);
	assert_non_null(strstr(m, "strata_agent_nodes_tracked 16384\n"));
	assert_non_null(strstr(m, "strata_agent_nodes_dropped_total 3\n"));
	assert_non_null(strstr(m, "strata_agent_batches_total{node=\"node-0\"} 2\n"));
	assert_null(strstr(m, "node=\"node-16384\""));
	free(m);
	/* forgetting half makes room again */
	node_health__forget(h, 1000000000ull + NODE_HEALTH_MAX / 2);
	make_batch(&o, "late", NULL, 0);
	node_health__batch(h, &o.b, 9000000000ull, 0);
	m = scrape(h);
	assert_non_null(strstr(m, "{node=\"late\"} 9.000\n"));
	assert_non_null(strstr(m, "{node=\"node-0\"} 5.000\n"));
	assert_non_null(strstr(m, "strata_agent_nodes_tracked 8194\n"));
	free(m);
	node_health__free(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_series),
		cmocka_unit_test(test_hostile_names),
		cmocka_unit_test(test_bound),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
