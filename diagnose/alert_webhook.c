// SPDX-License-Identifier: Apache-2.0
#include "diagnose/alert_webhook.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/json_str.h"

#define ALERT_NAME "StrataStraggler"

/* RFC 3339 in UTC with milliseconds; Alertmanager's zero time for 0. */
static void rfc3339(char *buf, size_t sz, int64_t ns)
{
	struct tm tm;
	time_t s;

	if (ns <= 0) {
		snprintf(buf, sz, "0001-01-01T00:00:00Z");
		return;
	}
	s = (time_t)(ns / 1000000000);
	gmtime_r(&s, &tm);
	size_t n = strftime(buf, sz, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + n, sz - n, ".%03dZ", (int)(ns / 1000000 % 1000));
}

/* Label values of one straggler, in sorted name order (as Alertmanager
 * sorts them for fingerprints). */
struct labels {
	char communicator[24], rank[16], pid[16];
	const char *job, *node, *severity;
};

static void labels_of(const struct straggler_rank *r, const char *severity, struct labels *l)
{
	snprintf(l->communicator, sizeof(l->communicator), "%016" PRIx64, r->communicator);
	snprintf(l->rank, sizeof(l->rank), "%u", r->rank);
	snprintf(l->pid, sizeof(l->pid), "%u", r->pid);
	l->job = r->job;
	l->node = r->node;
	l->severity = severity;
}

static void kv(FILE *f, const char *k, const char *v, int first)
{
	fputs(first ? "" : ", ", f);
	json_write_str(f, k);
	fputs(": ", f);
	json_write_str(f, v);
}

static void put_labels(FILE *f, const struct labels *l)
{
	fputc('{', f);
	kv(f, "alertname", ALERT_NAME, 1);
	kv(f, "communicator", l->communicator, 0);
	kv(f, "job", l->job, 0);
	kv(f, "node", l->node, 0);
	kv(f, "pid", l->pid, 0);
	kv(f, "rank", l->rank, 0);
	kv(f, "severity", l->severity, 0);
	fputc('}', f);
}

/* FNV-1a over name=value pairs: stable per alert identity. */
static uint64_t fingerprint_of(const char *const *parts, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < n; i++) {
		for (const char *p = parts[i]; *p; p++)
			h = (h ^ (unsigned char)*p) * 0x100000001b3ULL;
		h = (h ^ 0xff) * 0x100000001b3ULL; /* separator */
	}
	return h;
}

static uint64_t fingerprint(const struct labels *l)
{
	const char *parts[] = { "alertname", ALERT_NAME, "communicator", l->communicator,
				"job",	     l->job,	 "node",	 l->node,
				"pid",	     l->pid,	 "rank",	 l->rank };

	return fingerprint_of(parts, sizeof(parts) / sizeof(parts[0]));
}

static void put_alert(FILE *f, const struct straggler_transition *t,
		      const struct alert_webhook_opts *o)
{
	const struct straggler_rank *r = &t->r;
	bool firing = t->change == STRAGGLER_CONFIRM;
	char starts[40], ends[40], buf[512];
	struct labels l;

	labels_of(r, o->severity, &l);
	rfc3339(starts, sizeof(starts), r->since_ns ? r->since_ns : t->at_ns);
	rfc3339(ends, sizeof(ends), firing ? 0 : t->at_ns);
	fprintf(f, "{\"status\": \"%s\", \"labels\": ", firing ? "firing" : "resolved");
	put_labels(f, &l);
	fputs(", \"annotations\": {", f);
	if (firing)
		snprintf(buf, sizeof(buf),
			 "rank %u of job %s on %s (pid %u) is %.0f ms late to collectives of "
			 "communicator %s, %.0f%% of their period",
			 r->rank, r->job, r->node, r->pid, r->lag_seconds * 1e3, l.communicator,
			 100 * r->window_score);
	else
		snprintf(buf, sizeof(buf), "rank %u of job %s on %s is no longer a straggler%s",
			 r->rank, r->job, r->node, t->missing ? " (it stopped reporting)" : "");
	kv(f, "summary", buf, 1);
	snprintf(buf, sizeof(buf), "%.6f", r->lag_seconds);
	kv(f, "lag_seconds", buf, 0);
	snprintf(buf, sizeof(buf), "%.4f", r->score);
	kv(f, "score", buf, 0);
	snprintf(buf, sizeof(buf), "%.3f", r->last_fraction);
	kv(f, "last_fraction", buf, 0);
	fprintf(f, "}, \"startsAt\": \"%s\", \"endsAt\": \"%s\", \"generatorURL\": ", starts, ends);
	snprintf(buf, sizeof(buf), "%s/jobs/%s", o->external_url, r->job);
	json_write_str(f, buf);
	fprintf(f, ", \"fingerprint\": \"%016" PRIx64 "\"}", fingerprint(&l));
}

static void opts_of(const struct alert_webhook_opts *opts, struct alert_webhook_opts *o)
{
	*o = (struct alert_webhook_opts){ .receiver = "strata",
					  .external_url = "",
					  .severity = "warning" };
	if (opts) {
		o->receiver = opts->receiver ? opts->receiver : o->receiver;
		o->external_url = opts->external_url ? opts->external_url : o->external_url;
		o->severity = opts->severity ? opts->severity : o->severity;
	}
}

/* The payload up to its alerts: grouped by job, as an Alertmanager route
 * "group_by: [alertname, job]" would (the first alert's job names it). */
static void payload_head(FILE *f, const char *alertname, const char *job, bool any_firing,
			 const char *severity, const struct alert_webhook_opts *o)
{
	char key[2 * DIAG_NAME_LEN + 64];

	snprintf(key, sizeof(key), "{}:{alertname=\"%s\", job=\"%s\"}", alertname, job);
	fputs("{\"version\": \"4\", \"groupKey\": ", f);
	json_write_str(f, key);
	fprintf(f, ", \"truncatedAlerts\": 0, \"status\": \"%s\", \"receiver\": ",
		any_firing ? "firing" : "resolved");
	json_write_str(f, o->receiver);
	fputs(", \"groupLabels\": {", f);
	kv(f, "alertname", alertname, 1);
	kv(f, "job", job, 0);
	fputs("}, \"commonLabels\": {", f);
	kv(f, "alertname", alertname, 1);
	kv(f, "job", job, 0);
	kv(f, "severity", severity, 0);
	fputs("}, \"commonAnnotations\": {}, \"externalURL\": ", f);
	json_write_str(f, o->external_url);
	fputs(", \"alerts\": [", f);
}

static int payload_end(FILE *f, char **json)
{
	fputs("]}", f);
	if (fclose(f)) {
		free(*json);
		*json = NULL;
		return -ENOMEM;
	}
	return 0;
}

int alert_webhook__build(const struct straggler_transition *tr, size_t n,
			 const struct alert_webhook_opts *opts, char **json, size_t *len)
{
	struct alert_webhook_opts o;
	bool any_firing = false;
	FILE *f;

	if (!tr || !n || !json || !len)
		return -EINVAL;
	opts_of(opts, &o);
	for (size_t i = 0; i < n; i++)
		any_firing |= tr[i].change == STRAGGLER_CONFIRM;
	f = open_memstream(json, len);
	if (!f)
		return -ENOMEM;
	payload_head(f, ALERT_NAME, tr[0].r.job, any_firing, o.severity, &o);
	for (size_t i = 0; i < n; i++) {
		if (i)
			fputs(", ", f);
		put_alert(f, &tr[i], &o);
	}
	return payload_end(f, json);
}

/* ---- NCCL hangs ------------------------------------------------------------------ */

static const char *hang_kind_name(uint32_t k)
{
	return k == HANG_STALLED ? "stalled" : k == HANG_MISMATCH ? "mismatch" : "missing";
}

/* "2 (n1 pid 102: exited)" for the summary. */
static void rank_words(FILE *f, const struct hang_rank *r)
{
	fprintf(f, "%d", r->rank);
	if (!r->known) {
		fputs(" (never seen)", f);
		return;
	}
	fprintf(f, " (%s pid %u", r->node, r->pid);
	if (r->exited_ns)
		fputs(": exited", f);
	else if (r->gpu_call[0])
		fprintf(f, ": in %s", r->gpu_call);
	else if (r->in_other)
		fprintf(f, ": in %s #%llu", r->other_op, (unsigned long long)r->other_seq);
	else if (r->op[0])
		fprintf(f, ": %s %llu B", r->op, (unsigned long long)r->bytes);
	else if (r->has_last)
		fprintf(f, ": last %s #%llu", r->last_op, (unsigned long long)r->last_seq);
	fputc(')', f);
}

static void hang_summary(const struct hang_report *h, char **buf, size_t *len)
{
	FILE *f = open_memstream(buf, len);

	if (!f)
		return;
	if (h->kind == HANG_MISMATCH)
		fprintf(f,
			"job %s, communicator %016" PRIx64 ", collective #%llu: %s of %llu B on"
			" most ranks, something else on",
			h->job, h->comm_hash, (unsigned long long)h->seq, h->op,
			(unsigned long long)h->bytes);
	else
		fprintf(f,
			"job %s hangs in %s #%llu of communicator %016" PRIx64
			": %u of %d ranks wait%s",
			h->job, h->op, (unsigned long long)h->seq, h->comm_hash, h->nwaiting,
			h->nranks, h->nmissing ? " for" : " (every rank)");
	const struct hang_rank *list = h->kind == HANG_MISMATCH ? h->mismatched : h->missing;
	uint32_t n = h->kind == HANG_MISMATCH ? h->nmismatched : h->nmissing;

	for (uint32_t i = 0; i < n && i < HANG_MAX_LISTED; i++) {
		fputs(i ? ", " : " rank ", f);
		rank_words(f, &list[i]);
	}
	if (n > HANG_MAX_LISTED)
		fprintf(f, " and %u more", n - HANG_MAX_LISTED);
	fclose(f);
}

static void put_hang(FILE *f, const struct hang_transition *t, const struct alert_webhook_opts *o)
{
	const struct hang_report *h = &t->h;
	bool firing = t->change == HANG_CONFIRM;
	char starts[40], ends[40], comm[24], seq[24], buf[512], *summary = NULL;
	size_t slen = 0;
	const char *parts[8];

	snprintf(comm, sizeof(comm), "%016" PRIx64, h->comm_hash);
	snprintf(seq, sizeof(seq), "%llu", (unsigned long long)h->seq);
	parts[0] = "alertname", parts[1] = HANG_ALERT_NAME, parts[2] = "communicator";
	parts[3] = comm, parts[4] = "job", parts[5] = h->job, parts[6] = "seq", parts[7] = seq;
	rfc3339(starts, sizeof(starts), h->decided_ns);
	rfc3339(ends, sizeof(ends), firing ? 0 : h->until_ns);
	fprintf(f, "{\"status\": \"%s\", \"labels\": {", firing ? "firing" : "resolved");
	kv(f, "alertname", HANG_ALERT_NAME, 1);
	kv(f, "communicator", comm, 0);
	kv(f, "job", h->job, 0);
	kv(f, "kind", hang_kind_name(h->kind), 0);
	kv(f, "seq", seq, 0);
	kv(f, "severity", "critical", 0);
	fputs("}, \"annotations\": {", f);
	hang_summary(h, &summary, &slen);
	kv(f, "summary", summary ? summary : "", 1);
	free(summary);
	snprintf(buf, sizeof(buf), "%.3f", h->threshold_s);
	kv(f, "threshold_seconds", buf, 0);
	fprintf(f, "}, \"startsAt\": \"%s\", \"endsAt\": \"%s\", \"generatorURL\": ", starts, ends);
	snprintf(buf, sizeof(buf), "%s/jobs/%s", o->external_url, h->job);
	json_write_str(f, buf);
	fprintf(f, ", \"fingerprint\": \"%016" PRIx64 "\"}", fingerprint_of(parts, 8));
}

int alert_webhook__build_hangs(const struct hang_transition *tr, size_t n,
			       const struct alert_webhook_opts *opts, char **json, size_t *len)
{
	struct alert_webhook_opts o;
	bool any_firing = false;
	FILE *f;

	if (!tr || !n || !json || !len)
		return -EINVAL;
	opts_of(opts, &o);
	for (size_t i = 0; i < n; i++)
		any_firing |= tr[i].change == HANG_CONFIRM;
	f = open_memstream(json, len);
	if (!f)
		return -ENOMEM;
	payload_head(f, HANG_ALERT_NAME, tr[0].h.job, any_firing, "critical", &o);
	for (size_t i = 0; i < n; i++) {
		if (i)
			fputs(", ", f);
		put_hang(f, &tr[i], &o);
	}
	return payload_end(f, json);
}

static size_t discard(char *ptr, size_t size, size_t nmemb, void *ud)
{
	return size * nmemb; /* the receiver's answer body is not needed */
}

int alert_webhook__post(const char *url, const char *body, size_t len, long timeout_ms,
			long *http_status)
{
	struct curl_slist *hdr = NULL;
	CURL *c = curl_easy_init();
	CURLcode rc;
	int err = 0;

	*http_status = 0;
	if (!c)
		return -ENOMEM;
	hdr = curl_slist_append(hdr, "Content-Type: application/json");
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "strata-alerts/1");
	rc = curl_easy_perform(c);
	if (rc == CURLE_OPERATION_TIMEDOUT)
		err = -ETIMEDOUT;
	else if (rc == CURLE_COULDNT_CONNECT)
		err = -ECONNREFUSED;
	else if (rc != CURLE_OK)
		err = -EHOSTUNREACH;
	else {
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, http_status);
		if (*http_status < 200 || *http_status > 299)
			err = -EIO;
	}
	curl_slist_free_all(hdr);
	curl_easy_cleanup(c);
	return err;
}
