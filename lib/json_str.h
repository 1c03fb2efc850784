/* SPDX-License-Identifier: Apache-2.0 */
/* JSON string output shared by every JSON writer (profiles, reports, alerts). */
#ifndef STRATA_JSON_STR_H
#define STRATA_JSON_STR_H

#include <stdio.h>

/* Writes s as a JSON string (or null): always valid UTF-8, whatever s holds. */
void json_write_str(FILE *out, const char *s);

#endif /* STRATA_JSON_STR_H */
