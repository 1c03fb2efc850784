// SPDX-License-Identifier: Apache-2.0
#include "server/query_pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

struct query_pool {
	pthread_mutex_t lock;
	pthread_cond_t more;
	struct query_job *head, *tail; /* FIFO */
	unsigned queue;
	int stopping;
	struct query_pool_stats st;
	unsigned nthreads;
	pthread_t threads[];
};

static void *worker(void *arg)
{
	struct query_pool *p = arg;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		struct query_job *j;
		int cancel;

		while (!p->head && !p->stopping)
			pthread_cond_wait(&p->more, &p->lock);
		if (!p->head) /* stopping, nothing left */
			break;
		j = p->head;
		p->head = j->next;
		if (!p->head)
			p->tail = NULL;
		p->st.waiting--;
		p->st.running++;
		cancel = p->stopping;
		pthread_mutex_unlock(&p->lock);
		j->run(j, cancel);
		pthread_mutex_lock(&p->lock);
		p->st.running--;
		p->st.run++;
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

struct query_pool *query_pool__new(unsigned threads, unsigned queue)
{
	struct query_pool *p;
	int err;

	if (!threads || !queue) {
		errno = EINVAL;
		return NULL;
	}
	p = calloc(1, sizeof(*p) + threads * sizeof(p->threads[0]));
	if (!p)
		return NULL;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->more, NULL);
	p->queue = queue;
	for (; p->nthreads < threads; p->nthreads++) {
		err = pthread_create(&p->threads[p->nthreads], NULL, worker, p);
		if (err) {
			query_pool__free(p);
			errno = err;
			return NULL;
		}
	}
	return p;
}

int query_pool__submit(struct query_pool *p, struct query_job *j)
{
	pthread_mutex_lock(&p->lock);
	if (p->stopping) {
		pthread_mutex_unlock(&p->lock);
		return -ESHUTDOWN;
	}
	if (p->st.waiting >= p->queue) {
		p->st.refused++;
		pthread_mutex_unlock(&p->lock);
		return -EBUSY;
	}
	j->next = NULL;
	if (p->tail)
		p->tail->next = j;
	else
		p->head = j;
	p->tail = j;
	p->st.waiting++;
	pthread_cond_signal(&p->more);
	pthread_mutex_unlock(&p->lock);
	return 0;
}

void query_pool__stop(struct query_pool *p)
{
	int joined;

	pthread_mutex_lock(&p->lock);
	joined = p->stopping;
	p->stopping = 1; /* the workers cancel what waits, then leave */
	pthread_cond_broadcast(&p->more);
	pthread_mutex_unlock(&p->lock);
	for (unsigned i = 0; !joined && i < p->nthreads; i++)
		pthread_join(p->threads[i], NULL);
}

void query_pool__free(struct query_pool *p)
{
	if (!p)
		return;
	query_pool__stop(p);
	pthread_cond_destroy(&p->more);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

void query_pool__stats(struct query_pool *p, struct query_pool_stats *st)
{
	pthread_mutex_lock(&p->lock);
	*st = p->st;
	pthread_mutex_unlock(&p->lock);
}
