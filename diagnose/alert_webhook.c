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

/* FNV-1a over name=value pairs: stable per straggler identity. */
static uint64_t fingerprint(const struct labels *l)
{
	const char *parts[] = { "alertname", ALERT_NAME, "communicator", l->communicator,
				"job",	     l->job,	 "node",	 l->node,
				"pid",	     l->pid,	 "rank",	 l->rank };
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
		for (const char *p = parts[i]; *p; p++)
			h = (h ^ (unsigned char)*p) * 0x100000001b3ULL;
		h = (h ^ 0xff) * 0x100000001b3ULL; /* separator */
	}
	return h;
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

int alert_webhook__build(const struct straggler_transition *tr, size_t n,
			 const struct alert_webhook_opts *opts, char **json, size_t *len)
{
	struct alert_webhook_opts o = { .receiver = "strata",
					.external_url = "",
					.severity = "warning" };
	bool any_firing = false;
	char key[2 * DIAG_NAME_LEN + 64];
	FILE *f;

	if (!tr || !n || !json || !len)
		return -EINVAL;
	if (opts) {
		o.receiver = opts->receiver ? opts->receiver : o.receiver;
		o.external_url = opts->external_url ? opts->external_url : o.external_url;
		o.severity = opts->severity ? opts->severity : o.severity;
	}
	for (size_t i = 0; i < n; i++)
		any_firing |= tr[i].change == STRAGGLER_CONFIRM;
	f = open_memstream(json, len);
	if (!f)
		return -ENOMEM;
	/* Grouped by job, as an Alertmanager route "group_by: [alertname, job]"
	 * would: the first transition's job names the group. */
	snprintf(key, sizeof(key), "{}:{alertname=\"%s\", job=\"%s\"}", ALERT_NAME, tr[0].r.job);
	fputs("{\"version\": \"4\", \"groupKey\": ", f);
	json_write_str(f, key);
	fprintf(f, ", \"truncatedAlerts\": 0, \"status\": \"%s\", \"receiver\": ",
		any_firing ? "firing" : "resolved");
	json_write_str(f, o.receiver);
	fputs(", \"groupLabels\": {", f);
	kv(f, "alertname", ALERT_NAME, 1);
	kv(f, "job", tr[0].r.job, 0);
	fputs("}, \"commonLabels\": {", f);
	kv(f, "alertname", ALERT_NAME, 1);
	kv(f, "job", tr[0].r.job, 0);
	kv(f, "severity", o.severity, 0);
	fputs("}, \"commonAnnotations\": {}, \"externalURL\": ", f);
	json_write_str(f, o.external_url);
	fputs(", \"alerts\": [", f);
	for (size_t i = 0; i < n; i++) {
		if (i)
			fputs(", ", f);
		put_alert(f, &tr[i], &o);
	}
	fputs("]}", f);
	if (fclose(f)) {
		free(*json);
		*json = NULL;
		return -ENOMEM;
	}
	return 0;
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
