// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target: the server's batch decoder on hostile bodies.  The
 * first byte picks the layer: odd, the rest is the HTTP body as sent
 * (zstd framing, bombs, truncation); even, the rest is compressed here
 * first, so that mutations reach the protobuf decoder and the validation
 * of every cross-reference.  The decode draws from a memory budget, which
 * must be whole again afterwards.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <zstd.h>

#include "server/batch_decode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mem_budget shared = { .max = 6 << 20 };
	struct batch_limits lim = { .max_wire = 1 << 20, .max_raw = 4 << 20, .budget = &shared };
	Strata__V1__Batch *b = NULL;
	char err[256];
	size_t raw;

	if (size < 1)
		return 0;
	if (data[0] & 1) {
		batch_decode(data + 1, size - 1, &lim, &b, &raw, err, sizeof(err));
	} else {
		size_t cap = ZSTD_compressBound(size - 1), n;
		uint8_t *z = malloc(cap);

		if (!z)
			return 0;
		n = ZSTD_compress(z, cap, data + 1, size - 1, 1);
		if (!ZSTD_isError(n))
			batch_decode(z, n, &lim, &b, &raw, err, sizeof(err));
		free(z);
	}
	if (b) {
		/* A batch that passed must be safe to index everywhere. */
		for (size_t i = 0; i < b->n_cpu_samples; i++) {
			const Strata__V1__Stack *s = b->stacks[b->cpu_samples[i]->stack];

			for (size_t j = 0; j < s->n_frames; j++)
				(void)b->strings[s->frames[j]->name_str][0];
			(void)b->processes[b->cpu_samples[i]->process]->pid;
		}
		batch_decode__free(b);
	}
	/* every byte a decode took is given back, whatever the input */
	if (shared.used)
		abort();
	return 0;
}
