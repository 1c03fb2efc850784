// SPDX-License-Identifier: Apache-2.0
#include "server/kernel_paths.h"

#include <inttypes.h>
#include <string.h>

#include "server/prom_word.h"

void kernel_paths__init(struct kernel_paths *k)
{
	memset(k, 0, sizeof(*k));
	pthread_mutex_init(&k->lock, NULL);
}

void kernel_paths__fini(struct kernel_paths *k)
{
	pthread_mutex_destroy(&k->lock);
}

void kernel_paths__note(struct kernel_paths *k, const char *name, const char *taken, bool fallback)
{
	pthread_mutex_lock(&k->lock);
	if (!prom_word(name, KERNEL_PATH_NAME) || !prom_word(taken, KERNEL_PATH_NAME)) {
		k->dropped++;
		goto out;
	}
	for (int i = 0; i < k->n; i++) {
		struct kernel_path_count *r = &k->rows[i];

		if (r->fallback == fallback && !strcmp(r->name, name) && !strcmp(r->taken, taken)) {
			r->batches++;
			goto out;
		}
	}
	if (k->n == KERNEL_PATHS_MAX) {
		k->dropped++;
		goto out;
	}
	struct kernel_path_count *r = &k->rows[k->n++];

	snprintf(r->name, sizeof(r->name), "%s", name);
	snprintf(r->taken, sizeof(r->taken), "%s", taken);
	r->fallback = fallback;
	r->batches = 1;
out:
	pthread_mutex_unlock(&k->lock);
}

void kernel_paths__print(struct kernel_paths *k, FILE *o)
{
	pthread_mutex_lock(&k->lock);
	fputs("# HELP strata_agent_kernel_path_batches_total batches by the path a kernel feature "
	      "took on the sending agent's node (docs/kernels.md)\n"
	      "# TYPE strata_agent_kernel_path_batches_total counter\n",
	      o);
	for (int i = 0; i < k->n; i++)
		fprintf(o,
			"strata_agent_kernel_path_batches_total{path=\"%s\",taken=\"%s\","
			"fallback=\"%d\"} %" PRIu64 "\n",
			k->rows[i].name, k->rows[i].taken, k->rows[i].fallback, k->rows[i].batches);
	fprintf(o,
		"# HELP strata_agent_kernel_paths_dropped_total kernel paths not counted "
		"(malformed, or more than %d distinct)\n"
		"# TYPE strata_agent_kernel_paths_dropped_total counter\n"
		"strata_agent_kernel_paths_dropped_total %" PRIu64 "\n",
		KERNEL_PATHS_MAX, k->dropped);
	pthread_mutex_unlock(&k->lock);
}
