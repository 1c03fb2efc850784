// SPDX-License-Identifier: Apache-2.0
/*
 * debuginfod client, loaded with dlopen so that it stays optional at run
 * time (and at build time: the few prototypes are declared here rather
 * than taken from <elfutils/debuginfod.h>).
 *
 * "Fail fast": libdebuginfod waits DEBUGINFOD_TIMEOUT (90 s by default)
 * for a silent server.  A progress callback aborts a request that has no
 * answer (no known download size) after CONNECT_BUDGET_NS, and any
 * failure other than "not found" suspends queries for BACKOFF_NS, so a
 * dead network costs one short wait per BACKOFF_NS, not one per binary.
 */
#include "symbolize/debuginfod.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>

#include "lib/clock.h"

#define NSEC 1000000000ull
#define CONNECT_BUDGET_NS (5 * NSEC) /* no answer from any server yet */
#define TRANSFER_BUDGET_NS (300 * NSEC)
#define BACKOFF_NS (60 * NSEC)
#define DEBUGINFOD_SO "libdebuginfod.so.1"

/* ABI of libdebuginfod.so.1 (elfutils debuginfod.h). */
typedef struct debuginfod_client debuginfod_client;
typedef int (*dbgd_progressfn_t)(debuginfod_client *c, long a, long b);

struct dbgd_api {
	debuginfod_client *(*begin)(void);
	void (*end)(debuginfod_client *c);
	int (*find_debuginfo)(debuginfod_client *c, const unsigned char *id, int len, char **path);
	int (*find_executable)(debuginfod_client *c, const unsigned char *id, int len, char **path);
	void (*set_progressfn)(debuginfod_client *c, dbgd_progressfn_t fn);
	void (*set_user_data)(debuginfod_client *c, void *data);
	void *(*get_user_data)(debuginfod_client *c);
};

struct debuginfod {
	void *so;
	int load_failed;
	struct dbgd_api api;
	debuginfod_client *client;
	uint64_t started_ns; /* of the request in flight */
	uint64_t backoff_until_ns;
	struct debuginfod_stats st;
};

/*
 * Called by libdebuginfod about once a second while a request runs.
 * The client has no pointer back to us except its user data, and the
 * getter for that lives in the library: find it through the (already
 * loaded) library handle instead of keeping a global.
 */
static int progress(debuginfod_client *c, long a, long total)
{
	void *(*get_ud)(debuginfod_client *);
	struct debuginfod *d;
	void *so;
	uint64_t spent;

	so = dlopen(DEBUGINFOD_SO, RTLD_LAZY | RTLD_NOLOAD);
	if (!so)
		return 0;
	*(void **)&get_ud = dlsym(so, "debuginfod_get_user_data");
	d = get_ud ? get_ud(c) : NULL;
	dlclose(so);
	if (!d)
		return 0;
	spent = mono_ns() - d->started_ns;
	/*
	 * a is a loop counter until a server answers, bytes afterwards, so
	 * only total (the size, once a server has sent its headers) tells
	 * "answering" from "silent".  Non-zero aborts the request.
	 */
	(void)a;
	return (total <= 0 && spent > CONNECT_BUDGET_NS) || spent > TRANSFER_BUDGET_NS;
}

static int load(struct debuginfod *d)
{
	if (d->client)
		return 0;
	if (d->load_failed)
		return -ENOSYS;
	/*
	 * RTLD_NODELETE: libcurl and its TLS library register exit-time
	 * handlers and keep global state; unloading them with dlclose is
	 * unsafe (and makes LeakSanitizer report their globals as leaks).
	 */
	d->so = dlopen(DEBUGINFOD_SO, RTLD_LAZY | RTLD_LOCAL | RTLD_NODELETE);
	if (!d->so)
		goto err_out;
	/* POSIX's blessed way of turning dlsym's void * into a function. */
	*(void **)&d->api.begin = dlsym(d->so, "debuginfod_begin");
	*(void **)&d->api.end = dlsym(d->so, "debuginfod_end");
	*(void **)&d->api.find_debuginfo = dlsym(d->so, "debuginfod_find_debuginfo");
	*(void **)&d->api.find_executable = dlsym(d->so, "debuginfod_find_executable");
	*(void **)&d->api.set_progressfn = dlsym(d->so, "debuginfod_set_progressfn");
	*(void **)&d->api.set_user_data = dlsym(d->so, "debuginfod_set_user_data");
	if (!d->api.begin || !d->api.end || !d->api.find_debuginfo)
		goto err_out;
	d->client = d->api.begin();
	if (!d->client)
		goto err_out;
	/* Without these (very old library) requests just run unbounded. */
	if (d->api.set_progressfn && d->api.set_user_data) {
		d->api.set_user_data(d->client, d);
		d->api.set_progressfn(d->client, progress);
	}
	return 0;

err_out:
	if (d->so)
		dlclose(d->so);
	d->so = NULL;
	d->load_failed = 1;
	return -ENOSYS;
}

struct debuginfod *debuginfod__new(void)
{
	/* Nothing is loaded until the first query needs it. */
	return calloc(1, sizeof(struct debuginfod));
}

void debuginfod__free(struct debuginfod *d)
{
	if (!d)
		return;
	if (d->client)
		d->api.end(d->client);
	if (d->so)
		dlclose(d->so);
	free(d);
}

typedef int (*find_fn)(debuginfod_client *c, const unsigned char *id, int len, char **path);

/* One query of either kind: the same URL check, back-off and counting. */
static int find(struct debuginfod *d, int executable, const uint8_t *id, size_t len, char **path)
{
	const char *urls = getenv("DEBUGINFOD_URLS");
	uint64_t now;
	find_fn fn;
	int fd;

	if (!d || !id || len == 0 || len > 64 || !path)
		return -EINVAL;
	*path = NULL;
	if (!urls || !*urls) {
		d->st.skipped++;
		return -ENOSYS;
	}
	now = mono_ns();
	if (now < d->backoff_until_ns) {
		d->st.skipped++;
		return -EAGAIN;
	}
	fn = load(d) ? NULL : executable ? d->api.find_executable : d->api.find_debuginfo;
	if (!fn) {
		d->st.skipped++;
		return -ENOSYS;
	}
	d->st.queries++;
	d->started_ns = now;
	fd = fn(d->client, id, (int)len, path);
	if (fd < 0) {
		d->st.failed++;
		free(*path);
		*path = NULL;
		/* "Not found" is an answer; anything else means trouble. */
		if (fd != -ENOENT)
			d->backoff_until_ns = mono_ns() + BACKOFF_NS;
		return fd;
	}
	d->st.found++;
	return fd;
}

int debuginfod__find_debuginfo(struct debuginfod *d, const uint8_t *id, size_t len, char **path)
{
	return find(d, 0, id, len, path);
}

int debuginfod__find_executable(struct debuginfod *d, const uint8_t *id, size_t len, char **path)
{
	return find(d, 1, id, len, path);
}

void debuginfod__stats(const struct debuginfod *d, struct debuginfod_stats *st)
{
	if (!st)
		return;
	if (!d) {
		*st = (struct debuginfod_stats){ 0 };
		return;
	}
	*st = d->st;
}
