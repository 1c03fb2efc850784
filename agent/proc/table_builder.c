// SPDX-License-Identifier: Apache-2.0
#include "agent/proc/table_builder.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "lib/clock.h"

enum slot_state { SLOT_FREE, SLOT_QUEUED, SLOT_BUILDING, SLOT_DONE };

struct slot {
	enum slot_state state;
	uint64_t key, seq; /* seq: submission order */
	int fd;		   /* the builder's own (dup) */
	int err;
	struct unwind_table *tab;
	uint64_t ns;
};

struct table_builder {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t work;
	bool stop;
	int efd;
	uint64_t next_seq;
	struct slot slots[TABLE_BUILDER_SLOTS];
};

/* The oldest queued slot, or NULL.  Under b->lock. */
static struct slot *next_job(struct table_builder *b)
{
	struct slot *best = NULL;

	for (size_t i = 0; i < TABLE_BUILDER_SLOTS; i++)
		if (b->slots[i].state == SLOT_QUEUED && (!best || b->slots[i].seq < best->seq))
			best = &b->slots[i];
	return best;
}

static void *run(void *arg)
{
	struct table_builder *b = arg;
	const uint64_t one = 1;

	pthread_mutex_lock(&b->lock);
	for (;;) {
		struct slot *s;

		while (!b->stop && !(s = next_job(b)))
			pthread_cond_wait(&b->work, &b->lock);
		if (b->stop)
			break;
		s->state = SLOT_BUILDING;
		pthread_mutex_unlock(&b->lock);

		/* the slot is the builder's alone while BUILDING */
		uint64_t t0 = mono_ns();

		s->err = unwind_table__build(s->fd, &s->tab);
		s->ns = mono_ns() - t0;
		close(s->fd);
		s->fd = -1;

		pthread_mutex_lock(&b->lock);
		s->state = SLOT_DONE;
		/* after DONE: a collect that read the eventfd before this sees
		 * the eventfd readable again */
		if (write(b->efd, &one, sizeof(one)) != sizeof(one)) {
			/* the counter cannot overflow at 64 slots */
		}
	}
	pthread_mutex_unlock(&b->lock);
	return NULL;
}

struct table_builder *table_builder__new(void)
{
	struct table_builder *b = calloc(1, sizeof(*b));
	int err;

	if (!b)
		return NULL;
	b->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (b->efd < 0) {
		err = errno;
		free(b);
		errno = err;
		return NULL;
	}
	for (size_t i = 0; i < TABLE_BUILDER_SLOTS; i++)
		b->slots[i].fd = -1;
	pthread_mutex_init(&b->lock, NULL);
	pthread_cond_init(&b->work, NULL);
	err = pthread_create(&b->thread, NULL, run, b);
	if (err) {
		pthread_cond_destroy(&b->work);
		pthread_mutex_destroy(&b->lock);
		close(b->efd);
		free(b);
		errno = err;
		return NULL;
	}
	return b;
}

void table_builder__free(struct table_builder *b)
{
	if (!b)
		return;
	pthread_mutex_lock(&b->lock);
	b->stop = true;
	pthread_cond_broadcast(&b->work);
	pthread_mutex_unlock(&b->lock);
	pthread_join(b->thread, NULL);
	for (size_t i = 0; i < TABLE_BUILDER_SLOTS; i++) {
		if (b->slots[i].fd >= 0)
			close(b->slots[i].fd);
		unwind_table__free(b->slots[i].tab);
	}
	pthread_cond_destroy(&b->work);
	pthread_mutex_destroy(&b->lock);
	close(b->efd);
	free(b);
}

int table_builder__fd(const struct table_builder *b)
{
	return b->efd;
}

int table_builder__submit(struct table_builder *b, int fd, uint64_t key)
{
	struct slot *s = NULL;
	int dfd;

	pthread_mutex_lock(&b->lock);
	for (size_t i = 0; i < TABLE_BUILDER_SLOTS && !s; i++)
		if (b->slots[i].state == SLOT_FREE)
			s = &b->slots[i];
	if (!s) {
		pthread_mutex_unlock(&b->lock);
		return -EBUSY;
	}
	dfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (dfd < 0) {
		int err = -errno;

		pthread_mutex_unlock(&b->lock);
		return err;
	}
	*s = (struct slot){ .state = SLOT_QUEUED, .key = key, .seq = ++b->next_seq, .fd = dfd };
	pthread_cond_signal(&b->work);
	pthread_mutex_unlock(&b->lock);
	return 0;
}

static int by_seq(const void *a, const void *b)
{
	const struct slot *x = a, *y = b;

	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

size_t table_builder__collect(struct table_builder *b, table_builder_fn fn, void *ctx)
{
	struct slot done[TABLE_BUILDER_SLOTS];
	uint64_t v;
	size_t n = 0;

	if (read(b->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		return 0;
	pthread_mutex_lock(&b->lock);
	for (size_t i = 0; i < TABLE_BUILDER_SLOTS; i++) {
		struct slot *s = &b->slots[i];

		if (s->state != SLOT_DONE)
			continue;
		done[n++] = *s;
		*s = (struct slot){ .state = SLOT_FREE, .fd = -1 };
	}
	pthread_mutex_unlock(&b->lock);
	qsort(done, n, sizeof(done[0]), by_seq);
	for (size_t i = 0; i < n; i++)
		fn(ctx, done[i].key, done[i].err, done[i].err ? NULL : done[i].tab, done[i].ns);
	return n;
}
