// SPDX-License-Identifier: Apache-2.0
#include "server/sym_asks.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "lib/hash.h"

#define PROBES 16

/* One ask: a 64-bit hash of (node, id) and when.  A collision could only
 * let an upload through to the build-id check, never past it. */
struct ask {
	uint64_t key, at_ns; /* key 0: free */
};

struct sym_asks {
	pthread_mutex_t lock;
	struct ask *v;
	uint32_t mask; /* slots - 1 */
	uint64_t ttl_ns;
	struct sym_asks_stats st;
};

struct sym_asks *sym_asks__new(uint32_t max, uint64_t ttl_ns)
{
	struct sym_asks *a = calloc(1, sizeof(*a));
	uint32_t slots = 1024;

	if (!a)
		return NULL;
	max = max ? max : 65536;
	while (slots < 2 * max && slots < (1u << 30)) /* at most half full */
		slots <<= 1;
	a->v = calloc(slots, sizeof(*a->v));
	if (!a->v) {
		free(a);
		return NULL;
	}
	a->mask = slots - 1;
	a->ttl_ns = ttl_ns ? ttl_ns : 3600ull * 1000000000ull;
	pthread_mutex_init(&a->lock, NULL);
	return a;
}

void sym_asks__free(struct sym_asks *a)
{
	if (!a)
		return;
	pthread_mutex_destroy(&a->lock);
	free(a->v);
	free(a);
}

static uint64_t key_of(const char *node, const char *hex)
{
	uint64_t h = hash_bytes(node, strlen(node) + 1, 0x61736b73); /* NUL: "ab"+"c" != "a"+"bc" */

	h = hash_bytes(hex, strlen(hex), h);
	return h ? h : 1;
}

static int live(const struct sym_asks *a, const struct ask *s, uint64_t now_ns)
{
	return s->key && now_ns - s->at_ns < a->ttl_ns;
}

void sym_asks__note(struct sym_asks *a, const char *node, const char *hex, uint64_t now_ns)
{
	uint64_t key = key_of(node, hex);
	struct ask *oldest = NULL;

	pthread_mutex_lock(&a->lock);
	a->st.asked++;
	for (uint32_t i = 0; i < PROBES; i++) {
		struct ask *s = &a->v[(key + i) & a->mask];

		if (s->key == key || !live(a, s, now_ns)) {
			oldest = s;
			break;
		}
		if (!oldest || s->at_ns < oldest->at_ns)
			oldest = s;
	}
	if (oldest->key != key && live(a, oldest, now_ns))
		a->st.dropped++;
	oldest->key = key;
	oldest->at_ns = now_ns;
	pthread_mutex_unlock(&a->lock);
}

int sym_asks__asked(struct sym_asks *a, const char *node, const char *hex, uint64_t now_ns)
{
	uint64_t key = key_of(node, hex);
	int found = 0;

	pthread_mutex_lock(&a->lock);
	for (uint32_t i = 0; i < PROBES && !found; i++) {
		const struct ask *s = &a->v[(key + i) & a->mask];

		found = s->key == key && live(a, s, now_ns);
	}
	if (found)
		a->st.allowed++;
	else
		a->st.refused++;
	pthread_mutex_unlock(&a->lock);
	return found;
}

void sym_asks__stats(struct sym_asks *a, struct sym_asks_stats *st)
{
	pthread_mutex_lock(&a->lock);
	*st = a->st;
	pthread_mutex_unlock(&a->lock);
}
