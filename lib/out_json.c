// SPDX-License-Identifier: Apache-2.0
/*
 * JSON output: the model as it is (interned frames, merged samples), for
 * scripts and for the server's API.  The schema is documented in
 * docs/json-format.md; any change there bumps "version".
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "lib/json_str.h"
#include "lib/profile.h"

#define JSON_VERSION 1

static const char *json_bool(int v)
{
	return v ? "true" : "false";
}

int profile__write_json(const struct profile *p, FILE *out)
{
	const char **names;

	if (!p || !out)
		return -EINVAL;
	names = profile__display_names(p);
	if (!names)
		return -ENOMEM;

	fprintf(out,
		"{\n\"version\": %d,\n\"freq_hz\": %" PRIu32 ",\n\"start_ns\": %" PRIu64
		",\n\"end_ns\": %" PRIu64 ",\n\"total\": %" PRIu64 ",\n",
		JSON_VERSION, p->freq_hz, p->start_ns, p->end_ns, profile__total(p));
	fprintf(out,
		"\"drops\": {\"map_full\": %" PRIu64 ", \"stack_lost\": %" PRIu64
		", \"proc_unknown\": %" PRIu64 ", \"other\": %" PRIu64 "},\n",
		p->drops.map_full, p->drops.stack_lost, p->drops.proc_unknown, p->drops.other);

	fputs("\"frames\": [", out);
	for (uint32_t i = 0; i < p->nframes; i++) {
		const struct profile_frame *f = &p->frames[i];

		fputs(i ? ",\n{\"name\": " : "\n{\"name\": ", out);
		json_write_str(out, names[i]);
		fputs(", \"func\": ", out);
		json_write_str(out, f->func);
		fputs(", \"file\": ", out);
		json_write_str(out, f->file);
		fprintf(out, ", \"line\": %" PRIu32 ", \"module\": ", f->line);
		json_write_str(out, f->module);
		/* a string: kernel addresses exceed what a JSON number keeps
		 * exactly in most parsers (2^53) */
		fprintf(out,
			", \"addr\": \"0x%" PRIx64 "\", \"kernel\": %s"
			", \"inlined\": %s, \"unresolved\": %s, \"python\": %s}",
			f->addr, json_bool(f->flags & PROFILE_FRAME_KERNEL),
			json_bool(f->flags & PROFILE_FRAME_INLINED),
			json_bool(profile_frame__unresolved(f)),
			json_bool(f->flags & PROFILE_FRAME_PYTHON));
	}
	fputs(p->nframes ? "\n],\n" : "],\n", out);

	fputs("\"samples\": [", out);
	for (uint32_t i = 0; i < p->nsamples; i++) {
		const struct profile_sample *s = &p->samples[i];

		fprintf(out, "%s{\"pid\": %" PRIu32 ", \"tid\": %" PRIu32 ", \"comm\": ",
			i ? ",\n" : "\n", s->pid, s->tid);
		json_write_str(out, s->comm);
		fprintf(out, ", \"count\": %" PRIu64 ", \"frames\": [", s->count);
		for (uint32_t j = 0; j < s->nframes; j++)
			fprintf(out, j ? ", %" PRIu32 : "%" PRIu32, s->frames[j]);
		fputs("]}", out);
	}
	fputs(p->nsamples ? "\n]\n}\n" : "]\n}\n", out);
	free(names);
	return fflush(out) || ferror(out) ? -EIO : 0;
}
