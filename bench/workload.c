// SPDX-License-Identifier: Apache-2.0
/*
 * Fixed-work CPU-bound benchmark workload: one thread per CPU, each runs the
 * same number of iterations of a call chain with a hot leaf; prints the
 * wall time in seconds.  Throughput = work / wall time, so profiler overhead
 * shows up as a longer time.  argv[1]: iterations per thread (millions).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static long iters;

/* The seed keeps the compiler from hoisting a pure call out of the loop. */
__attribute__((noinline)) static double leaf(long seed, long n)
{
	double x = 0;

	for (long i = seed; i < seed + n; i++)
		x += (double)(i ^ (i >> 3)) * 1e-9;
	return x;
}

__attribute__((noinline)) static double middle(long n)
{
	double x = 0;

	for (long i = 0; i < n; i += 100000)
		x += leaf(i, 100000);
	return x;
}

static void *worker(void *arg)
{
	volatile double r = middle(iters);

	(void)r;
	return arg;
}

int main(int argc, char **argv)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	pthread_t th[256];
	struct timespec t0, t1;

	iters = (argc > 1 ? atol(argv[1]) : 6000) * 1000000L;
	if (ncpu < 1 || ncpu > 256)
		ncpu = 1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long i = 0; i < ncpu; i++)
		pthread_create(&th[i], NULL, worker, NULL);
	for (long i = 0; i < ncpu; i++)
		pthread_join(th[i], NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("%.6f\n", (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
	return 0;
}
