// SPDX-License-Identifier: Apache-2.0
#include "uploader/uploader.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/hash.h"
#include "lib/log.h"
#include "lib/safe_open.h"
#include "lib/sparse_elf.h"
#include "uploader/elf_slim.h"

#define RESP_MAX 65536
#define REPLY_CTYPE "application/x-strata-reply"
#define MAX_MISSING 32
#define MAX_NOTED 8192
#define HEX_LEN 129
/* A symbol upload that failed (server or network) is tried again when the
 * server next asks, this long after, SYMBOL_TRIES times in all. */
#define SYMBOL_RETRY_MS (10 * 60 * 1000)
#define SYMBOL_TRIES 3
#define SYMBOL_BUDGET_MS (60 * 60 * 1000) /* max_symbol_uploads per this */

struct noted_file {
	char hex[HEX_LEN];
	char path[64];	   /* "/proc/self/fd/N" or a real path, truncated paths refused */
	dev_t dev;	   /* the file the path named when noted: an fd number */
	ino_t ino;	   /* can name another file by the time we upload */
	uint64_t retry_ms; /* a failed upload: not again before (mono ms) */
	uint32_t tries;	   /* uploads sent */
	int done;	   /* uploaded, refused for good or SYMBOL_TRIES: never again */
};

/* A symbol upload's body, read with pread as curl asks for it: never
 * mapped (a target may truncate its own file meanwhile: SIGBUS).  A sparse
 * ELF (uploader/elf_slim.h): head (header and range table), then each
 * range's bytes from the file. */
struct file_body {
	int fd;
	off_t off, size; /* in the body */
	int short_read;	 /* the file shrank or failed: the upload is aborted */
	uint8_t *head;	 /* SPARSE_ELF_HEAD + 16 bytes a range */
	size_t head_len;
	const struct elf_slim *slim;
	uint32_t ri;	   /* the range being sent */
	uint64_t in_range; /* of it, bytes sent */
};

struct uploader {
	struct uploader_opts o;
	char *url;
	char auth[4200]; /* "Authorization: Bearer ..." */
	char node[300];	 /* "X-Strata-Node: ..." */
	struct spool *spool;
	CURL *curl; /* the sender thread's only */

	pthread_t thread;
	int started;
	pthread_mutex_t lock;
	pthread_cond_t wake, idle;
	int stop;
	uint64_t spool_dropped_seen;

	struct noted_file *files; /* open addressing by hex hash, MAX_NOTED slots */
	uint32_t nfiles;
	uint64_t budget_start_ms; /* this hour's symbol uploads: since */
	uint32_t budget_used;

	struct uploader_stats st;
};

struct resp_buf {
	char data[RESP_MAX];
	size_t len;
	int truncated; /* more came than fits: a reply that does not decode */
	int binary;    /* the answer is a protobuf IngestReply */
};

static size_t on_body(char *ptr, size_t size, size_t n, void *ctx)
{
	struct resp_buf *r = ctx;
	size_t bytes = size * n, room = sizeof(r->data) - 1 - r->len;

	memcpy(r->data + r->len, ptr, bytes < room ? bytes : room);
	r->len += bytes < room ? bytes : room;
	r->truncated |= bytes > room;
	r->data[r->len] = 0;
	return bytes; /* the rest is read and ignored: answers are small */
}

static size_t read_body(char *buf, size_t size, size_t n, void *ctx)
{
	struct file_body *b = ctx;
	size_t want = size * n;
	uint64_t at;
	ssize_t r;

	if (b->off >= b->size)
		return 0;
	if ((off_t)want > b->size - b->off)
		want = (size_t)(b->size - b->off);
	if ((size_t)b->off < b->head_len) { /* the sparse head, from memory */
		if (want > b->head_len - (size_t)b->off)
			want = b->head_len - (size_t)b->off;
		memcpy(buf, b->head + b->off, want);
		b->off += (off_t)want;
		return want;
	}
	at = (uint64_t)b->off; /* the whole file */
	if (b->slim) {
		const struct sparse_range *rg = &b->slim->r[b->ri];

		if (want > rg->len - b->in_range)
			want = (size_t)(rg->len - b->in_range);
		at = rg->off + b->in_range;
	}
	do
		r = pread(b->fd, buf, want, (off_t)at);
	while (r < 0 && errno == EINTR);
	if (r <= 0) {
		b->short_read = 1;
		return CURL_READFUNC_ABORT;
	}
	b->off += r;
	if (b->slim && (b->in_range += (uint64_t)r) == b->slim->r[b->ri].len) {
		b->ri++;
		b->in_range = 0;
	}
	return (size_t)r;
}

/* s is the file whole (not an ELF we slim): sent as it is. */
static bool slim_whole(const struct elf_slim *s)
{
	return s->n == 1 && s->r[0].off == 0 && s->r[0].len == s->size;
}

/* The bytes of the upload of s (what --max-symbol-mb bounds at the server). */
static uint64_t body_len(const struct elf_slim *s)
{
	return slim_whole(s) ? s->size : SPARSE_ELF_HEAD + 16 * (uint64_t)s->n + s->kept;
}

/* The sparse head of s into b (wire-format.md "Sparse ELF upload");
 * -ENOMEM. */
static int sparse_head(struct file_body *b, const struct elf_slim *s)
{
	uint8_t *p;

	b->head_len = SPARSE_ELF_HEAD + 16 * (size_t)s->n;
	b->head = p = malloc(b->head_len);
	if (!p)
		return -ENOMEM;
	memcpy(p, SPARSE_ELF_MAGIC, 8);
	put_le64(p + 8, s->size);
	put_le32(p + 16, s->n);
	put_le32(p + 20, 0);
	for (uint32_t i = 0; i < s->n; i++) {
		put_le64(p + SPARSE_ELF_HEAD + 16 * i, s->r[i].off);
		put_le64(p + SPARSE_ELF_HEAD + 16 * i + 8, s->r[i].len);
	}
	b->slim = s;
	b->size = (off_t)(b->head_len + s->kept);
	return 0;
}

/* POSTs body (or, when body is NULL, len bytes read from file) to
 * URL+path.  Returns the HTTP status, or 0 when no answer came (connection
 * refused, timeout, TLS failure: *why says which). */
static long post(struct uploader *u, const char *path, const char *ctype, const char *encoding,
		 const void *body, size_t len, struct file_body *file, struct resp_buf *resp,
		 const char **why)
{
	char url[2048], ct[128], ce[128];
	struct curl_slist *h = NULL;
	long status = 0;
	CURLcode rc;

	snprintf(url, sizeof(url), "%s%s", u->url, path);
	snprintf(ct, sizeof(ct), "Content-Type: %s", ctype);
	h = curl_slist_append(h, ct);
	if (encoding) {
		snprintf(ce, sizeof(ce), "Content-Encoding: %s", encoding);
		h = curl_slist_append(h, ce);
	}
	if (u->auth[0])
		h = curl_slist_append(h, u->auth);
	h = curl_slist_append(h, "Accept: " REPLY_CTYPE ", application/json");
	if (u->node[0])
		h = curl_slist_append(h, u->node);
	h = curl_slist_append(h, "Expect:"); /* no 100-continue round trip */
	curl_easy_reset(u->curl);
	curl_easy_setopt(u->curl, CURLOPT_URL, url);
	curl_easy_setopt(u->curl, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(u->curl, CURLOPT_POST, 1L);
	if (body) {
		curl_easy_setopt(u->curl, CURLOPT_POSTFIELDS, body);
	} else {
		curl_easy_setopt(u->curl, CURLOPT_READFUNCTION, read_body);
		curl_easy_setopt(u->curl, CURLOPT_READDATA, file);
	}
	curl_easy_setopt(u->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	curl_easy_setopt(u->curl, CURLOPT_TIMEOUT_MS, (long)u->o.timeout_ms);
	curl_easy_setopt(u->curl, CURLOPT_CONNECTTIMEOUT_MS, (long)u->o.timeout_ms / 2);
	curl_easy_setopt(u->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(u->curl, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(u->curl, CURLOPT_WRITEDATA, resp);
	curl_easy_setopt(u->curl, CURLOPT_PROTOCOLS_STR, "http,https");
	if (u->o.ca_file)
		curl_easy_setopt(u->curl, CURLOPT_CAINFO, u->o.ca_file);
	resp->len = 0;
	resp->data[0] = 0;
	resp->truncated = resp->binary = 0;
	rc = curl_easy_perform(u->curl);
	if (rc == CURLE_OK) {
		char *ct = NULL;

		curl_easy_getinfo(u->curl, CURLINFO_RESPONSE_CODE, &status);
		curl_easy_getinfo(u->curl, CURLINFO_CONTENT_TYPE, &ct);
		resp->binary = ct && !strncmp(ct, REPLY_CTYPE, strlen(REPLY_CTYPE));
	} else
		*why = curl_easy_strerror(rc);
	curl_slist_free_all(h);
	return status;
}

static int hex_id_ok(const char *s, size_t len)
{
	int ok = len >= 2 && len < HEX_LEN && len % 2 == 0;

	for (size_t i = 0; ok && i < len; i++)
		ok = (s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f');
	return ok;
}

int uploader__parse_missing(const char *json, char (*ids)[HEX_LEN], int max)
{
	const char *p = strstr(json, "\"missing_build_ids\":[");
	int n = 0;

	if (!p)
		return 0;
	p += strlen("\"missing_build_ids\":[");
	while (*p && *p != ']' && n < max) {
		const char *q, *e;

		q = strchr(p, '"');
		if (!q)
			break;
		e = strchr(q + 1, '"');
		if (!e)
			break;
		size_t len = (size_t)(e - q - 1);

		if (hex_id_ok(q + 1, len)) {
			memcpy(ids[n], q + 1, len);
			ids[n++][len] = 0;
		}
		p = e + 1;
		while (*p == ',' || *p == ' ')
			p++;
	}
	return n;
}

int uploader__parse_reply(const uint8_t *buf, size_t len, char (*ids)[HEX_LEN], int max,
			  Strata__V1__IngestReply **reply)
{
	Strata__V1__IngestReply *r = strata__v1__ingest_reply__unpack(NULL, len, buf);
	int n = 0;

	*reply = r;
	for (size_t i = 0; r && i < r->n_missing_build_ids && n < max; i++) {
		const char *id = r->missing_build_ids[i];

		if (hex_id_ok(id, strlen(id)))
			snprintf(ids[n++], HEX_LEN, "%s", id);
	}
	return n;
}

/* The slot of hex in the noted-files table (free or matching); NULL full. */
static struct noted_file *file_slot(struct uploader *u, const char *hex)
{
	uint64_t h = hash_bytes(hex, strlen(hex), 0);

	for (uint32_t i = 0; i < MAX_NOTED; i++) {
		struct noted_file *f = &u->files[(h + i) % MAX_NOTED];

		if (!f->hex[0] || !strcmp(f->hex, hex))
			return f;
	}
	return NULL;
}

void uploader__note_file(void *ctx, const char *hex, const char *path)
{
	struct uploader *u = ctx;
	struct noted_file *f;
	struct stat st;

	if (strlen(hex) >= HEX_LEN || strlen(path) >= sizeof(f->path))
		return;
	/* which file the path names now (it is valid while the caller
	 * converts the frame that holds it) */
	if (stat(path, &st) || !S_ISREG(st.st_mode))
		return;
	pthread_mutex_lock(&u->lock);
	/* Kept below full, so lookups always end at a free slot.  Full (a
	 * month of new binaries), it starts again: the files still in use
	 * are noted again as batches name them, and an upload happens only
	 * for an id the server asks, so forgetting one sent costs nothing. */
	f = file_slot(u, hex);
	if (f && !f->hex[0] && u->nfiles >= MAX_NOTED - 1) {
		memset(u->files, 0, MAX_NOTED * sizeof(*u->files));
		u->nfiles = 0;
		u->st.symbols_noted_resets++;
		f = file_slot(u, hex);
	}
	if (f && !f->hex[0]) {
		snprintf(f->hex, sizeof(f->hex), "%s", hex);
		u->nfiles++;
	}
	if (f && !f->done) { /* the file as this batch names it (an fd may have closed) */
		snprintf(f->path, sizeof(f->path), "%s", path);
		f->dev = st.st_dev;
		f->ino = st.st_ino;
	}
	pthread_mutex_unlock(&u->lock);
}

static int permanent(long status)
{
	return status == 400 || status == 413 || status == 415 || status == 422;
}

static void upload_symbols(struct uploader *u, const char *hex)
{
	struct noted_file *f;
	char path[64], api[200];
	struct resp_buf *resp;
	struct file_body body;
	struct elf_slim *slim;
	const char *why = "";
	dev_t dev;
	ino_t ino;
	struct stat st;
	uint64_t now;
	long status;
	int fd;

	pthread_mutex_lock(&u->lock);
	f = file_slot(u, hex);
	now = mono_ms();
	if (now - u->budget_start_ms >= SYMBOL_BUDGET_MS) {
		u->budget_start_ms = now;
		u->budget_used = 0;
	}
	if (!f || !f->hex[0] || f->done || now < f->retry_ms ||
	    u->budget_used >= u->o.max_symbol_uploads) {
		if (!f || !f->hex[0] || (!f->done && now >= f->retry_ms))
			u->st.symbols_skipped++;
		pthread_mutex_unlock(&u->lock);
		return;
	}
	f->retry_ms = now + SYMBOL_RETRY_MS; /* until it is known how it went */
	snprintf(path, sizeof(path), "%s", f->path);
	dev = f->dev;
	ino = f->ino;
	pthread_mutex_unlock(&u->lock);

	/* a regular file (never blocks on a FIFO), and still the one noted:
	 * the fd number may have been closed and reused since; what the
	 * server needs of it (its loaded code and data left out: a CUDA
	 * library's GPU code is most of its GBs) within the bound */
	fd = safe_open(AT_FDCWD, path, 0, &st);
	slim = fd >= 0 ? malloc(sizeof(*slim)) : NULL;
	if (!slim || st.st_dev != dev || st.st_ino != ino || st.st_size == 0 ||
	    (uint64_t)st.st_size > SPARSE_ELF_MAX_SIZE ||
	    elf_slim__ranges(fd, (uint64_t)st.st_size, slim) ||
	    body_len(slim) > u->o.max_symbol_file) {
		if (fd >= 0)
			close(fd);
		free(slim);
		/* nothing sent: the hour's budget untouched; the file noted
		 * anew (its fd) by a later batch, tried when asked again */
		__atomic_fetch_add(&u->st.symbols_skipped, 1, __ATOMIC_RELAXED);
		return;
	}
	pthread_mutex_lock(&u->lock);
	u->budget_used++;
	f = file_slot(u, hex);
	if (f && f->hex[0])
		f->tries++;
	pthread_mutex_unlock(&u->lock);
	resp = malloc(sizeof(*resp));
	body = (struct file_body){ .fd = fd, .size = st.st_size }; /* whole */
	if (!resp || (!slim_whole(slim) && sparse_head(&body, slim))) {
		close(fd);
		free(slim);
		free(resp);
		__atomic_fetch_add(&u->st.symbols_failed, 1, __ATOMIC_RELAXED);
		return;
	}
	snprintf(api, sizeof(api), "/api/v1/symbols/%.128s", hex);
	status = post(u, api, body.slim ? SPARSE_ELF_CTYPE : "application/octet-stream", NULL, NULL,
		      (size_t)body.size, &body, resp, &why);
	/* a server from before sparse uploads stores the body as the file
	 * and finds no ELF in it (422; 415 from a stricter one): the file
	 * whole, once, when it fits */
	if (body.slim && (status == 415 || status == 422) &&
	    (uint64_t)st.st_size <= u->o.max_symbol_file) {
		free(body.head);
		body = (struct file_body){ .fd = fd, .size = st.st_size };
		status = post(u, api, "application/octet-stream", NULL, NULL, (size_t)body.size,
			      &body, resp, &why);
	}
	close(fd);
	free(body.head);
	free(slim);
	pthread_mutex_lock(&u->lock);
	f = file_slot(u, hex); /* the table may have started again */
	if (f && f->hex[0] &&
	    ((status / 100 == 2 && !body.short_read) || permanent(status) ||
	     f->tries >= SYMBOL_TRIES))
		f->done = 1; /* stored, refused for good (413: over the server's bound), or
			      * failed SYMBOL_TRIES times (a file too slow to send) */
	if (status / 100 == 2 && !body.short_read) {
		u->st.symbols_sent++;
	} else {
		u->st.symbols_failed++;
		pr_warn("uploader: symbols for %s: %s", hex,
			body.short_read ? "the file shrank while read"
			: status	? resp->data
					: why);
	}
	pthread_mutex_unlock(&u->lock);
	free(resp);
}

/* Delay before the next try: doubling, capped, "equal jitter". */
static uint32_t next_backoff(struct uploader *u)
{
	uint32_t b = u->st.backoff_ms ? u->st.backoff_ms * 2 : u->o.backoff_min_ms, r = 0;

	if (b > u->o.backoff_max_ms)
		b = u->o.backoff_max_ms;
	u->st.backoff_ms = b;
	if (getrandom(&r, sizeof(r), 0) != sizeof(r))
		r = (uint32_t)mono_ms();
	return b / 2 + r % (b / 2 + 1);
}

static void *sender(void *arg)
{
	struct uploader *u = arg;
	struct resp_buf *resp = malloc(sizeof(*resp));
	uint64_t not_before = 0;

	if (!resp)
		return NULL;
	pthread_mutex_lock(&u->lock);
	while (!u->stop) {
		uint64_t now = mono_ms(), seq;
		uint8_t *data = NULL;
		size_t len = 0;
		const char *why = "";
		long status;

		if (now < not_before || !spool__count(u->spool)) {
			struct timespec ts;
			uint64_t wait = now < not_before ? not_before - now : 1000;

			if (!spool__count(u->spool))
				pthread_cond_broadcast(&u->idle);
			ts = realtime_deadline(wait * 1000000);
			pthread_cond_timedwait(&u->wake, &u->lock, &ts);
			continue;
		}
		pthread_mutex_unlock(&u->lock);
		int rerr = spool__oldest(u->spool, &seq, &data, &len);

		if (rerr) {
			pthread_mutex_lock(&u->lock);
			if (rerr != -ENOENT) /* no memory, a file we may not read: not a spin */
				not_before = mono_ms() + u->o.backoff_min_ms;
			continue;
		}
		status = post(u, "/api/v1/batches", "application/x-strata-batch", "zstd", data, len,
			      NULL, resp, &why);
		free(data);
		pthread_mutex_lock(&u->lock);
		u->st.attempts++;
		u->st.last_status = (int)status;
		if (status / 100 == 2) {
			char ids[MAX_MISSING][HEX_LEN];
			Strata__V1__IngestReply *reply = NULL;
			int n, dup;

			if (resp->binary) {
				n = resp->truncated
					    ? 0
					    : uploader__parse_reply((const uint8_t *)resp->data,
								    resp->len, ids, MAX_MISSING,
								    &reply);
				dup = reply && reply->status && !strcmp(reply->status, "duplicate");
				if (!reply)
					u->st.replies_bad++;
			} else {
				n = uploader__parse_missing(resp->data, ids, MAX_MISSING);
				dup = strstr(resp->data, "\"duplicate\"") != NULL;
			}
			spool__remove(u->spool, seq);
			if (dup)
				u->st.duplicates++;
			else
				u->st.sent++;
			u->st.backoff_ms = 0;
			not_before = 0;
			pthread_mutex_unlock(&u->lock);
			if (reply && u->o.on_reply)
				u->o.on_reply(u->o.on_reply_ctx, reply);
			if (reply)
				strata__v1__ingest_reply__free_unpacked(reply, NULL);
			for (int i = 0; i < n; i++)
				upload_symbols(u, ids[i]);
			pthread_mutex_lock(&u->lock);
		} else if (permanent(status)) {
			spool__remove(u->spool, seq);
			u->st.rejected++;
			pr_warn("uploader: server refused batch %llu for good (HTTP %ld): %s",
				(unsigned long long)seq, status, resp->data);
		} else {
			u->st.failures++;
			not_before = mono_ms() + next_backoff(u);
			pr_info("uploader: %s: %s; retrying in about %u ms", u->url,
				status ? "server error" : why, u->st.backoff_ms);
		}
	}
	pthread_mutex_unlock(&u->lock);
	free(resp);
	return NULL;
}

/* "X-Strata-Node: NAME" as the batches name this node (batch_builder's
 * rule); none when the name could break the header. */
static void node_header(const char *node, char *out, size_t sz)
{
	char host[256] = "";

	if (!node) {
		if (gethostname(host, sizeof(host) - 1) || !host[0])
			snprintf(host, sizeof(host), "unknown");
		node = host;
	}
	out[0] = 0;
	for (const char *p = node; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return;
	snprintf(out, sz, "X-Strata-Node: %s", node);
}

static int read_token(const char *path, char *auth, size_t sz)
{
	char tok[4096];
	FILE *f = fopen(path, "r");
	size_t n;

	if (!f)
		return -errno;
	n = fread(tok, 1, sizeof(tok) - 1, f);
	fclose(f);
	tok[n] = 0;
	tok[strcspn(tok, "\r\n")] = 0;
	if (!tok[0])
		return -EINVAL;
	snprintf(auth, sz, "Authorization: Bearer %s", tok);
	return 0;
}

struct uploader *uploader__new(const struct uploader_opts *opts)
{
	struct uploader *u = calloc(1, sizeof(*u));
	int err = -ENOMEM, dir_err;

	if (!u)
		return NULL;
	u->o = *opts;
	if (!u->o.spool_max_bytes)
		u->o.spool_max_bytes = 256ull << 20;
	if (!u->o.timeout_ms)
		u->o.timeout_ms = 10000;
	if (!u->o.backoff_min_ms)
		u->o.backoff_min_ms = 500;
	if (!u->o.backoff_max_ms)
		u->o.backoff_max_ms = 60000;
	if (!u->o.max_symbol_file)
		u->o.max_symbol_file = 512ull << 20;
	if (!u->o.max_symbol_uploads)
		u->o.max_symbol_uploads = 1024;
	pthread_mutex_init(&u->lock, NULL);
	pthread_cond_init(&u->wake, NULL);
	pthread_cond_init(&u->idle, NULL);
	u->url = strdup(opts->url);
	u->files = calloc(MAX_NOTED, sizeof(*u->files));
	if (!u->url || !u->files)
		goto err_out;
	u->url[strcspn(u->url, "?#")] = 0;
	while (strlen(u->url) && u->url[strlen(u->url) - 1] == '/')
		u->url[strlen(u->url) - 1] = 0;
	if (strncmp(u->url, "http://", 7) && strncmp(u->url, "https://", 8)) {
		pr_warn("uploader: %s: want an http:// or https:// URL", u->url);
		err = -EINVAL;
		goto err_out;
	}
	node_header(opts->node, u->node, sizeof(u->node));
	if (opts->token_file && (err = read_token(opts->token_file, u->auth, sizeof(u->auth)))) {
		pr_warn("uploader: token file %s: %s", opts->token_file, strerror(-err));
		goto err_out;
	}
	u->spool = spool__open(opts->spool_dir, u->o.spool_max_bytes, &dir_err);
	if (!u->spool) {
		err = -errno;
		pr_warn("uploader: spool %s: %s", opts->spool_dir, strerror(errno));
		goto err_out;
	}
	if (dir_err)
		pr_warn("uploader: spool %s: %s; batches are held in memory until it can be "
			"written",
			opts->spool_dir, strerror(-dir_err));
	curl_global_init(CURL_GLOBAL_DEFAULT);
	u->curl = curl_easy_init();
	if (!u->curl)
		goto err_out;
	err = -pthread_create(&u->thread, NULL, sender, u);
	if (err)
		goto err_out;
	u->started = 1;
	return u;
err_out:
	uploader__free(u);
	errno = -err;
	return NULL;
}

void uploader__free(struct uploader *u)
{
	if (!u)
		return;
	if (u->started) {
		pthread_mutex_lock(&u->lock);
		u->stop = 1;
		pthread_cond_broadcast(&u->wake);
		pthread_mutex_unlock(&u->lock);
		pthread_join(u->thread, NULL);
	}
	if (u->curl)
		curl_easy_cleanup(u->curl);
	spool__free(u->spool);
	pthread_cond_destroy(&u->wake);
	pthread_cond_destroy(&u->idle);
	pthread_mutex_destroy(&u->lock);
	free(u->files);
	free(u->url);
	free(u);
}

int uploader__submit(struct uploader *u, const void *data, size_t len, uint64_t carried)
{
	int err = spool__put(u->spool, data, len, carried, NULL);

	pthread_mutex_lock(&u->lock);
	pthread_cond_broadcast(&u->wake);
	pthread_mutex_unlock(&u->lock);
	return err;
}

int uploader__drain(struct uploader *u, uint32_t timeout_ms)
{
	uint64_t deadline = mono_ms() + timeout_ms;
	int err = 0;

	pthread_mutex_lock(&u->lock);
	pthread_cond_broadcast(&u->wake);
	while (spool__count(u->spool)) {
		uint64_t now = mono_ms();
		struct timespec ts;

		if (now >= deadline) {
			err = -ETIMEDOUT;
			break;
		}
		ts = realtime_deadline(100 * 1000000);
		pthread_cond_timedwait(&u->idle, &u->lock, &ts);
	}
	pthread_mutex_unlock(&u->lock);
	return err;
}

uint64_t uploader__take_spool_dropped(struct uploader *u)
{
	struct spool_stats st;
	uint64_t d;

	spool__stats(u->spool, &st);
	pthread_mutex_lock(&u->lock);
	d = st.to_report - u->spool_dropped_seen;
	u->spool_dropped_seen = st.to_report;
	pthread_mutex_unlock(&u->lock);
	return d;
}

void uploader__stats(struct uploader *u, struct uploader_stats *st)
{
	pthread_mutex_lock(&u->lock);
	*st = u->st;
	pthread_mutex_unlock(&u->lock);
	spool__stats(u->spool, &st->spool);
}
