/* SPDX-License-Identifier: Apache-2.0 */
/* One logging family; messages name their subsystem ("sampler: ..."). */
#ifndef STRATA_LOG_H
#define STRATA_LOG_H

enum log_level { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };

/* Set once at start-up, before any thread exists. */
void log_set_level(enum log_level lvl);
int log_enabled(enum log_level lvl);
void log_msg(enum log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define pr_err(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define pr_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define pr_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define pr_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

#endif /* STRATA_LOG_H */
