/* SPDX-License-Identifier: Apache-2.0 */
/*
 * strata-agent --server: glues a session to the wire.  It is the session's
 * sink: drained samples go to the batch builder (not the symbolizer), and
 * the GPU and scheduler layers' records with them; every period the batch
 * is finished, spooled and sent by the uploader.
 */
#ifndef STRATA_AGENT_SHIP_SHIPPER_H
#define STRATA_AGENT_SHIP_SHIPPER_H

#include "agent/core/session.h"
#include "uploader/uploader.h"

struct shipper_opts {
	size_t sz;
	struct uploader_opts upload;
	const char *node; /* NULL: hostname */
	uint32_t freq_hz;
};

struct shipper;

/* Becomes s's sink (agent/core/sink.h): samples, GPU and scheduler
 * records go into the period's batch.  NULL + errno. */
struct shipper *shipper__new(const struct shipper_opts *o, struct session *s);
/* Ends the period (session__end_window): one batch built, spooled and
 * queued.  0 or -errno. */
int shipper__period(struct shipper *sh, struct session *s);
/* Deep captures (agent/capture/capture_ctl.h), from the agent's loop:
 * starts and ends them on this agent's clock.  Returns the milliseconds
 * until the next start or end (the loop waits no longer). */
int shipper__tick(struct shipper *sh, struct session *s);
/* Ends every capture now (the agent stops; the last batch says so). */
void shipper__stop(struct shipper *sh, struct session *s);

/* Prints batch and upload counters to stderr. */
void shipper__report(struct shipper *sh);
/* Waits up to drain_ms for the spool to empty, then stops. */
void shipper__free(struct shipper *sh, uint32_t drain_ms);

#endif /* STRATA_AGENT_SHIP_SHIPPER_H */
