// SPDX-License-Identifier: Apache-2.0
#include "agent/sched/sched_report.h"

#include <errno.h>
#include <inttypes.h>

#include "lib/enum_names.h"
#include "lib/json_str.h"

struct report {
	FILE *out;
	const struct ksyms *ks;
	int n; /* entries written in the current array */
};

static void sep(struct report *r)
{
	fputs(r->n++ ? ",\n    " : "\n    ", r->out);
}

static int put_thread(void *ctx, const struct strata_sched_key *k,
		      const struct strata_sched_thread *t)
{
	struct report *r = ctx;
	char comm[STRATA_COMM_LEN + 1] = { 0 };

	__builtin_memcpy(comm, t->comm, STRATA_COMM_LEN);
	sep(r);
	fprintf(r->out, "{\"tgid\": %u, \"tid\": %u, \"comm\": ", k->tgid, k->tid);
	json_write_str(r->out, comm);
	fprintf(r->out,
		", \"oncpu_ns\": %" PRIu64 ", \"runnable_ns\": %" PRIu64 ", \"switches\": %" PRIu64
		", \"offcpu_ns\": {",
		(uint64_t)t->oncpu_ns, (uint64_t)t->runnable_ns, (uint64_t)t->switches);
	for (int i = 0; i < STRATA_OFF_MAX; i++)
		fprintf(r->out, "%s\"%s\": %" PRIu64, i ? ", " : "", strata_offcpu_reason_name(i),
			(uint64_t)t->offcpu_ns[i]);
	fputs("}, \"time_ns\": {", r->out);
	for (int i = 0; i < STRATA_TIME_MAX; i++)
		fprintf(r->out, "%s\"%s\": %" PRIu64, i ? ", " : "", strata_time_cat_name(i),
			(uint64_t)t->time_ns[i]);
	fputs("}}", r->out);
	return 0;
}

static void put_frames(struct report *r, const uint64_t *ips, size_t n, bool kernel)
{
	fputc('[', r->out);
	for (size_t i = 0; i < n; i++) {
		const char *name =
			kernel && r->ks ? ksyms__resolve(r->ks, ips[i], NULL, NULL) : NULL;

		if (i)
			fputs(", ", r->out);
		if (name)
			json_write_str(r->out, name);
		else
			fprintf(r->out, "\"0x%" PRIx64 "\"", ips[i]);
	}
	fputc(']', r->out);
}

static int put_offcpu(void *ctx, const struct sched_offcpu *o)
{
	struct report *r = ctx;

	sep(r);
	fprintf(r->out,
		"{\"tgid\": %u, \"tid\": %u, \"reason\": \"%s\", \"layer\": %u, \"ns\": %" PRIu64
		", \"count\": %" PRIu64 ", \"kernel\": ",
		o->key->tgid, o->key->tid, strata_offcpu_reason_name(o->key->reason), o->key->layer,
		o->ns, o->count);
	put_frames(r, o->kern, o->n_kern, true);
	fputs(", \"user\": ", r->out);
	put_frames(r, o->user, o->n_user, false);
	fputc('}', r->out);
	return 0;
}

static int put_foreign(void *ctx, const struct strata_foreign_key *k,
		       const struct strata_foreign_val *v)
{
	struct report *r = ctx;
	char comm[STRATA_COMM_LEN + 1] = { 0 };

	__builtin_memcpy(comm, v->comm, STRATA_COMM_LEN);
	sep(r);
	fprintf(r->out, "{\"cpu\": %u, \"tgid\": %u, \"comm\": ", k->cpu, k->tgid);
	json_write_str(r->out, comm);
	fprintf(r->out, ", \"ns\": %" PRIu64 "}", (uint64_t)v->ns);
	return 0;
}

static int put_irq(void *ctx, uint32_t cpu, bool softirq, uint32_t vector, uint64_t ns)
{
	struct report *r = ctx;

	sep(r);
	fprintf(r->out, "{\"cpu\": %u, \"kind\": \"%s\", \"vector\": %u, \"ns\": %" PRIu64 "}", cpu,
		softirq ? "softirq" : "irq", vector, ns);
	return 0;
}

int sched_report__write(struct sched_collector *c, const struct ksyms *ks, FILE *out)
{
	struct report r = { .out = out, .ks = ks };
	uint64_t cnt[STRATA_SCHED_CNT_MAX];
	int err;

	fputs("{\n  \"threads\": [", out);
	err = sched_collector__threads(c, put_thread, &r);
	fputs("\n  ],\n  \"offcpu\": [", out);
	r.n = 0;
	if (err >= 0)
		err = sched_collector__drain_offcpu(c, put_offcpu, &r);
	fputs("\n  ],\n  \"foreign\": [", out);
	r.n = 0;
	if (err >= 0)
		err = sched_collector__foreign(c, false, put_foreign, &r);
	fputs("\n  ],\n  \"irq\": [", out);
	r.n = 0;
	if (err >= 0)
		err = sched_collector__irq(c, put_irq, &r);
	fputs("\n  ],\n  \"counters\": {", out);
	sched_collector__counters(c, cnt);
	for (int i = 0; i < STRATA_SCHED_CNT_MAX; i++)
		fprintf(out, "%s\"%s\": %" PRIu64, i ? ", " : "", strata_sched_counter_name(i),
			cnt[i]);
	fputs("}\n}\n", out);
	if (err < 0)
		return err;
	return ferror(out) ? -EIO : 0;
}

int sched_report__write_file(struct sched_collector *c, const struct ksyms *ks, const char *path)
{
	FILE *f = fopen(path, "we");
	int err;

	if (!f)
		return -errno;
	err = sched_report__write(c, ks, f);
	if (fclose(f) && !err)
		err = -errno;
	return err;
}
