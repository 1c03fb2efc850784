/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Alertmanager-compatible webhook for straggler and NCCL hang
 * confirmations and clearings: the payload is Alertmanager's webhook format (version "4"), so
 * any receiver written for Alertmanager (chat bridges, incident tools)
 * takes strata's alerts unchanged; the sender POSTs it with libcurl.
 *
 * The sender uses libcurl's easy interface: the process calls
 * curl_global_init() once at start-up, before any thread sends.
 */
#ifndef STRATA_DIAGNOSE_ALERT_WEBHOOK_H
#define STRATA_DIAGNOSE_ALERT_WEBHOOK_H

#include <stddef.h>

#include "diagnose/hang.h"
#include "diagnose/straggler.h"

#define HANG_ALERT_NAME "StrataNcclHang"

struct alert_webhook_opts {
	size_t sz;
	const char *receiver;	  /* "receiver" field ("strata") */
	const char *external_url; /* strata-server's URL: links to the job page */
	const char *severity;	  /* "severity" label ("warning") */
};

/*
 * Builds one payload for transitions tr[0..n) (n >= 1): firing alerts for
 * confirmations, resolved ones for clearings; the group is firing while any
 * alert in it is.  *json is malloc'd and NUL-terminated.  0, -EINVAL or
 * -ENOMEM.
 */
int alert_webhook__build(const struct straggler_transition *tr, size_t n,
			 const struct alert_webhook_opts *o, char **json, size_t *len);

/*
 * The same for NCCL hangs (alertname StrataNcclHang, severity critical;
 * labels job, communicator, seq, kind): firing at a confirmation, resolved
 * when the hang ends.  A mismatch fires once (it has no end): receivers
 * resolve it after their own timeout.
 */
int alert_webhook__build_hangs(const struct hang_transition *tr, size_t n,
			       const struct alert_webhook_opts *o, char **json, size_t *len);

/*
 * POSTs body to url as application/json.  0 on a 2xx answer; -EIO on any
 * other status (*http_status says which), -ETIMEDOUT, -ECONNREFUSED or
 * -EHOSTUNREACH when it could not be delivered.
 */
int alert_webhook__post(const char *url, const char *body, size_t len, long timeout_ms,
			long *http_status);

#endif /* STRATA_DIAGNOSE_ALERT_WEBHOOK_H */
