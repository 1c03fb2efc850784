/* SPDX-License-Identifier: Apache-2.0 */
/* libbpf's own messages, routed into the one logging family (lib/log.h). */
#ifndef STRATA_AGENT_LOG_LIBBPF_H
#define STRATA_AGENT_LOG_LIBBPF_H

/* Routes libbpf's own messages here (its debug output only at LOG_DEBUG). */
void log_route_libbpf(void);

#endif /* STRATA_AGENT_LOG_LIBBPF_H */
