// SPDX-License-Identifier: Apache-2.0
/*
 * The frameworks' USDT probes in GPU files (agent/proc/usdt.c reads the
 * notes): the sites the GPU layer understands, attached to gpu_usdt with
 * the site's semaphore as the uprobe reference counter and the site's spec
 * (event + argument locations, gpu_usdt_specs[cookie]).  Attached and
 * detached with the file's other probes; never shed by the duty cycle (a
 * missed free would turn into a leak).
 */
#include "agent/gpu/gpu_impl.h"

#include <errno.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "lib/log.h"
#include "gpu.skel.h"

/* (provider, name) -> the event, and the arguments it reads. */
static const struct {
	const char *provider, *name;
	uint32_t event, nargs;
} known[] = {
	{ "pytorch", "malloc", GPU_USDT_FW_MALLOC, 3 }, /* ptr, device, size[, stream] */
	{ "pytorch", "free", GPU_USDT_FW_FREE, 1 },	/* ptr */
};

struct scan_ctx {
	struct gpu *g;
	struct gpu_file *f;
};

/* A free gpu_usdt_specs key, taken; -1 when all are in use. */
static int spec_take(struct gpu *g)
{
	for (uint32_t w = 0; w < GPU_USDT_SPECS / 64; w++) {
		if (g->usdt_spec_used[w] == UINT64_MAX)
			continue;
		int b = __builtin_ctzll(~g->usdt_spec_used[w]);

		g->usdt_spec_used[w] |= 1ull << b;
		g->usdt_specs++;
		return (int)(w * 64 + (uint32_t)b);
	}
	return -1;
}

void gpu_usdt_release(struct gpu *g, struct gpu_file *f)
{
	for (uint32_t i = 0; i < f->nusdt; i++) {
		uint32_t id = f->usdt[i].spec_id;

		g->usdt_spec_used[id / 64] &= ~(1ull << (id % 64));
		g->usdt_specs--;
	}
	f->nusdt = 0;
}

static int on_probe(void *ctx, const struct usdt_probe *p)
{
	struct scan_ctx *c = ctx;
	struct gpu_usdt_site *s;
	int id;

	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
		if (strcmp(p->provider, known[i].provider) || strcmp(p->name, known[i].name))
			continue;
		if (p->nargs < known[i].nargs) {
			c->g->usdt.bad_args++; /* not the shape we read: never guessed */
			return 0;
		}
		if (c->f->nusdt >= GPU_FILE_USDT || (id = spec_take(c->g)) < 0) {
			c->g->usdt_dropped++;
			return 0;
		}
		s = &c->f->usdt[c->f->nusdt++];
		memset(s, 0, sizeof(*s));
		s->offset = p->offset;
		s->sem_offset = p->sem_offset;
		s->spec_id = (uint32_t)id;
		s->spec.event = known[i].event;
		s->spec.nargs = known[i].nargs;
		memcpy(s->spec.args, p->args, known[i].nargs * sizeof(p->args[0]));
		return 0;
	}
	return 0;
}

int gpu_usdt_scan(struct gpu *g, struct gpu_file *f)
{
	struct scan_ctx c = { g, f };

	f->nusdt = 0;
	return usdt_scan(f->mod->fd, on_probe, &c, &g->usdt);
}

void gpu_usdt_attach(struct gpu *g, struct gpu_file *f)
{
	int specs = bpf_map__fd(g->skel->maps.gpu_usdt_specs);

	for (uint32_t i = 0; i < f->nusdt; i++) {
		struct gpu_usdt_site *s = &f->usdt[i];
		LIBBPF_OPTS(bpf_uprobe_opts, o, .bpf_cookie = s->spec_id,
			    .ref_ctr_offset = s->sem_offset);

		if (s->link)
			continue;
		if (bpf_map_update_elem(specs, &s->spec_id, &s->spec, BPF_ANY)) {
			g->attach_failed++;
			continue;
		}
		s->link = bpf_program__attach_uprobe_opts(g->skel->progs.gpu_usdt, -1,
							  f->mod->open_path, s->offset, &o);
		if (!s->link) {
			g->attach_failed++;
			pr_warn("gpu: %s: USDT probe at %#llx: %s", f->mod->path,
				(unsigned long long)s->offset, strerror(errno));
			continue;
		}
		g->links++;
		g->link_objs++;
	}
}

void gpu_usdt_detach(struct gpu *g, struct gpu_file *f)
{
	for (uint32_t i = 0; i < f->nusdt; i++) {
		if (!f->usdt[i].link)
			continue;
		bpf_link__destroy(f->usdt[i].link);
		f->usdt[i].link = NULL;
		g->links--;
		g->link_objs--;
	}
}
