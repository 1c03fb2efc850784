/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Building diagnose/ inputs from the store: string arena, per-node clock
 * error bounds, folded stack names, and the layered differential findings
 * for one rank against its peers over a time range.
 */
#ifndef STRATA_SERVER_DIAG_INPUTS_H
#define STRATA_SERVER_DIAG_INPUTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "diagnose/differential.h"
#include "server/store.h"

/* Strings that must outlive a store callback (arena; freed at once). */
struct diag_strings;
struct diag_strings *diag_strings__new(void);
const char *diag_strings__add(struct diag_strings *s, const char *str); /* NULL: no memory */
void diag_strings__free(struct diag_strings *s);

/* node -> clock error bound and sampling frequency (bounded, 4096 nodes). */
struct diag_clocks;
struct diag_clocks *diag_clocks__new(void);
int diag_clocks__load(struct diag_clocks *c, struct store *st, const struct store_filter *f);
uint64_t diag_clocks__error(const struct diag_clocks *c, const char *node);
uint32_t diag_clocks__freq(const struct diag_clocks *c, const char *node); /* 49 unknown */
void diag_clocks__free(struct diag_clocks *c);

/* "root;...;leaf" from a stored stack (function, else module+offset). */
void diag_fold_stack(const struct store_stack *s, char *out, size_t size);

/* A Prometheus label value, quoted and escaped. */
void diag_prom_label(FILE *o, const char *v);

/*
 * Findings for rank of job over [from_ns, to_ns): every other rank of the
 * job is a peer.  Returns how many were written (<= max), -ENOENT when the
 * rank or its peers have no data, or -errno.
 */
int diag_findings(struct store *st, const char *job, int32_t rank, uint64_t from_ns, uint64_t to_ns,
		  struct diag_finding *out, size_t max);

#endif /* STRATA_SERVER_DIAG_INPUTS_H */
