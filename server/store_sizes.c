/* SPDX-License-Identifier: Apache-2.0 */
#include "server/store_sizes.h"

#include <errno.h>
#include <string.h>

#include "lib/log.h"

static uint64_t ld(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static void st(uint64_t *p, uint64_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
}

/* True when this caller won the read due at now_ns. */
static bool claim(struct store_sizes_cache *c, uint64_t now_ns)
{
	uint64_t last = ld(&c->claimed_ns);

	/* signed: a caller that read the clock before another claimed (its
	 * now_ns below last) finds the sizes fresh */
	if (last && (int64_t)(now_ns - last) < (int64_t)STORE_SIZES_EVERY_NS)
		return false;
	return __atomic_compare_exchange_n(&c->claimed_ns, &last, now_ns ? now_ns : 1, false,
					   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

int store_sizes__get(struct store_sizes_cache *c, struct store *s, uint64_t now_ns,
		     struct store_sizes *out, uint64_t *age_ns)
{
	uint64_t read;

	if (!s->ops->sizes)
		return -EOPNOTSUPP; /* a store that cannot tell */
	if (claim(c, now_ns)) {
		struct store_sizes z;
		int err = s->ops->sizes(s, &z);

		__atomic_fetch_add(&c->reads, 1, __ATOMIC_RELAXED);
		if (!err) {
			st(&c->v[0], z.stacks);
			st(&c->v[1], z.cpu_rows);
			st(&c->v[2], z.event_rows);
			st(&c->v[3], z.bytes_on_disk);
			st(&c->read_ns, now_ns ? now_ns : 1);
		} else {
			pr_warn("metrics: the store's sizes not read: %s", strerror(-err));
		}
	}
	read = ld(&c->read_ns);
	if (!read)
		return -EAGAIN;
	/* A concurrent read may be storing newer values: each is a whole
	 * count, some from the newer read (gauges, none lost). */
	*out = (struct store_sizes){ .stacks = ld(&c->v[0]),
				     .cpu_rows = ld(&c->v[1]),
				     .event_rows = ld(&c->v[2]),
				     .bytes_on_disk = ld(&c->v[3]) };
	*age_ns = now_ns > read ? now_ns - read : 0;
	return 0;
}
