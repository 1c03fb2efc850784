// SPDX-License-Identifier: Apache-2.0
/*
 * Alertmanager webhook: the payload's fields and escaping (checked by a
 * JSON parser when python3 is there), and the sender against a local HTTP
 * receiver: the POST it gets, a 500 answer, nobody listening.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "diagnose/alert_webhook.h"

#define SEC 1000000000LL

static struct straggler_transition confirm(void)
{
	struct straggler_transition t = {
		.change = STRAGGLER_CONFIRM,
		.at_ns = 1700000030LL * SEC,
		.r = { .communicator = 0xabcdef,
		       .rank = 37,
		       .pid = 4242,
		       .lag_seconds = 0.18,
		       .score = 0.2,
		       .window_score = 0.18,
		       .last_fraction = 0.95,
		       .since_ns = 1700000000LL * SEC + 123456789,
		       .state = STRAGGLER_CONFIRMED },
	};

	snprintf(t.r.job, sizeof(t.r.job), "llama-70b");
	snprintf(t.r.node, sizeof(t.r.node), "node-12 \"rack\\3\"");
	return t;
}

/* 1 when python3 parses the text as JSON, 0 when it does not, -1 without python. */
static int json_valid(const char *text)
{
	FILE *p;

	if (system("command -v python3 >/dev/null 2>&1"))
		return -1;
	p = popen("python3 -c 'import json,sys; json.load(sys.stdin)'", "w");
	if (!p)
		return -1;
	fputs(text, p);
	return pclose(p) == 0;
}

static void payload_firing(void **state)
{
	struct straggler_transition t = confirm();
	struct alert_webhook_opts o = { .sz = sizeof(o), .external_url = "http://strata:8080" };
	char *json;
	size_t len;

	assert_int_equal(alert_webhook__build(&t, 1, &o, &json, &len), 0);
	assert_int_equal(strlen(json), len);
	assert_non_null(strstr(json, "\"version\": \"4\""));
	assert_non_null(strstr(json, "\"status\": \"firing\""));
	assert_non_null(strstr(json, "\"receiver\": \"strata\""));
	assert_non_null(strstr(json, "\"alertname\": \"StrataStraggler\""));
	assert_non_null(strstr(json, "\"rank\": \"37\""));
	assert_non_null(strstr(json, "\"communicator\": \"0000000000abcdef\""));
	assert_non_null(strstr(json, "\"node\": \"node-12 \\\"rack\\\\3\\\"\""));
	assert_non_null(strstr(json, "\"startsAt\": \"2023-11-14T22:13:20.123Z\""));
	assert_non_null(strstr(json, "\"endsAt\": \"0001-01-01T00:00:00Z\""));
	assert_non_null(strstr(json, "\"generatorURL\": \"http://strata:8080/jobs/llama-70b\""));
	assert_non_null(strstr(json, "is 180 ms late to collectives"));
	assert_non_null(strstr(json, "\"lag_seconds\": \"0.180000\""));
	assert_non_null(strstr(json, "\"groupKey\": \"{}:{alertname=\\\"StrataStraggler\\\", "
				     "job=\\\"llama-70b\\\"}\""));
	assert_int_not_equal(json_valid(json), 0);
	free(json);
}

static void payload_resolved_and_mixed(void **state)
{
	struct straggler_transition t[2] = { confirm(), confirm() };
	char *json, *fp1, *fp2;
	size_t len;

	t[0].change = STRAGGLER_CLEAR;
	t[0].missing = true;
	assert_int_equal(alert_webhook__build(t, 1, NULL, &json, &len), 0);
	assert_non_null(strstr(json, "\"status\": \"resolved\""));
	assert_non_null(strstr(json, "\"endsAt\": \"2023-11-14T22:13:50.000Z\""));
	assert_non_null(strstr(json, "stopped reporting"));
	fp1 = strdup(strstr(json, "\"fingerprint\""));
	free(json);
	/* One cleared, one confirmed: the group fires; same identity, same
	 * fingerprint whatever the status. */
	assert_int_equal(alert_webhook__build(t, 2, NULL, &json, &len), 0);
	assert_non_null(strstr(json, "\"truncatedAlerts\": 0, \"status\": \"firing\""));
	fp2 = strstr(json, "\"fingerprint\"");
	assert_memory_equal(fp1, fp2, 33); /* "fingerprint": "<16 hex>" */
	assert_int_not_equal(json_valid(json), 0);
	free(fp1);
	free(json);
	assert_int_equal(alert_webhook__build(t, 0, NULL, &json, &len), -EINVAL);
}

/* A one-shot HTTP receiver: reads one request, answers with status. */
struct receiver {
	int fd, port, status;
	char req[16384];
	size_t len;
};

static void *serve(void *arg)
{
	struct receiver *r = arg;
	int c = accept(r->fd, NULL, NULL);
	char resp[128];

	if (c < 0)
		return NULL;
	for (;;) {
		ssize_t n = read(c, r->req + r->len, sizeof(r->req) - 1 - r->len);
		char *hdr_end, *cl;

		if (n <= 0)
			break;
		r->len += (size_t)n;
		r->req[r->len] = '\0';
		hdr_end = strstr(r->req, "\r\n\r\n");
		cl = strcasestr(r->req, "Content-Length:");
		if (hdr_end && cl &&
		    r->len >= (size_t)(hdr_end + 4 - r->req) + (size_t)atol(cl + 15))
			break;
	}
	snprintf(resp, sizeof(resp), "HTTP/1.1 %d X\r\nContent-Length: 2\r\n\r\nok", r->status);
	if (write(c, resp, strlen(resp)) < 0)
		r->status = -1;
	close(c);
	return NULL;
}

static void start_receiver(struct receiver *r, pthread_t *th)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);

	r->fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(r->fd >= 0);
	assert_int_equal(bind(r->fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(r->fd, 1), 0);
	assert_int_equal(getsockname(r->fd, (struct sockaddr *)&a, &al), 0);
	r->port = ntohs(a.sin_port);
	assert_int_equal(pthread_create(th, NULL, serve, r), 0);
}

static void post_delivers(void **state)
{
	struct receiver *r = calloc(1, sizeof(*r));
	struct straggler_transition t = confirm();
	char url[64], *json;
	size_t len;
	long status;
	pthread_t th;

	r->status = 200;
	start_receiver(r, &th);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/hook", r->port);
	assert_int_equal(alert_webhook__build(&t, 1, NULL, &json, &len), 0);
	assert_int_equal(alert_webhook__post(url, json, len, 5000, &status), 0);
	assert_int_equal(status, 200);
	pthread_join(th, NULL);
	close(r->fd);
	assert_non_null(strstr(r->req, "POST /hook HTTP/1.1"));
	assert_non_null(strcasestr(r->req, "Content-Type: application/json"));
	assert_non_null(strstr(r->req, json)); /* the body, whole */

	/* The receiver fails: -EIO with its status. */
	memset(r, 0, sizeof(*r));
	r->status = 500;
	start_receiver(r, &th);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/hook", r->port);
	assert_int_equal(alert_webhook__post(url, json, len, 5000, &status), -EIO);
	assert_int_equal(status, 500);
	pthread_join(th, NULL);
	close(r->fd);

	/* Nobody listens (the port just closed). */
	assert_int_equal(alert_webhook__post(url, json, len, 5000, &status), -ECONNREFUSED);
	free(json);
	free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(payload_firing),
		cmocka_unit_test(payload_resolved_and_mixed),
		cmocka_unit_test(post_delivers),
	};
	int rc;

	curl_global_init(CURL_GLOBAL_DEFAULT);
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	curl_global_cleanup();
	return rc;
}
