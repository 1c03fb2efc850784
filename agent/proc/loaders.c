// SPDX-License-Identifier: Apache-2.0
#include "agent/proc/loaders.h"

#include <errno.h>
#include <stdlib.h>

#include "agent/proc/proc_tracker.h"

int proc_loaders__add(struct proc_loaders *r, const struct proc_loader *l)
{
	if (r->n >= MODULE_LOADERS)
		return -ENOSPC;
	r->l[r->n] = *l;
	return r->n++;
}

void *proc_loaders__detect(struct proc_loaders *r, int id, struct module *mod)
{
	const struct proc_loader *l = &r->l[id];

	if (!mod || !l->detect)
		return NULL;
	if (!(mod->detected & (1u << id))) {
		mod->loaded[id] = l->detect(l->ctx, mod);
		mod->detected |= 1u << id;
	}
	return mod->loaded[id];
}

void proc_loaders__attach(struct proc_loaders *r, uint32_t tgid, uint64_t mm_id,
			  const struct proc_mapping *maps, size_t n)
{
	void **files = NULL;

	for (int id = 0; id < r->n; id++) {
		const struct proc_loader *l = &r->l[id];

		if (!l->attach)
			continue;
		if (l->detect && !files)
			files = calloc(n ? n : 1, sizeof(*files));
		if (l->detect && !files)
			continue; /* no memory: not now, the next read retries */
		for (size_t i = 0; l->detect && i < n; i++)
			files[i] = proc_loaders__detect(r, id, maps[i].mod);
		l->attach(l->ctx, tgid, mm_id, maps, l->detect ? files : NULL, n);
	}
	free(files);
}

void proc_loaders__detach(struct proc_loaders *r, uint64_t mm_id)
{
	for (int id = 0; id < r->n; id++)
		if (r->l[id].detach)
			r->l[id].detach(r->l[id].ctx, mm_id);
}

void proc_loaders__wanted(struct proc_loaders *r, const struct module *mod)
{
	for (int id = 0; id < r->n; id++)
		if (r->l[id].wanted)
			r->l[id].wanted(r->l[id].ctx, mod);
}

void proc_loaders__forget(struct proc_loaders *r, struct module *mod)
{
	for (int id = 0; id < r->n; id++) {
		void *answer = mod->detected & (1u << id) ? mod->loaded[id] : NULL;

		if (r->l[id].forget)
			r->l[id].forget(r->l[id].ctx, mod, answer);
		mod->loaded[id] = NULL;
	}
	mod->detected = 0;
}
