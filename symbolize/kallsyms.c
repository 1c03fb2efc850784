// SPDX-License-Identifier: Apache-2.0
/*
 * Kernel symbols from /proc/kallsyms.
 *
 * kallsyms gives start addresses only, no sizes, so a function's extent
 * has to be inferred.  The rule (see ksyms__resolve):
 *
 *  - Text symbols (t T w W) name code.  Every other symbol (data, rodata,
 *    bss) and every end-of-region marker (_etext, _einittext,
 *    __*_text_end, __stop_*, ...) becomes a boundary: a function ends at
 *    the next entry of either kind, so an address past _etext, in data,
 *    or in the padding after a marker resolves to nothing.
 *  - Start markers (_stext, __*_text_start, __start_*, ...) label code
 *    that already has a real name; they are dropped.
 *  - Several names at one address: one is kept (global before local
 *    before weak, then first seen), so a lookup is deterministic.
 *  - The last symbol of a region (before the next module, or the very
 *    last one) has no known end: it covers at most KSYM_TAIL_MAX bytes.
 *    Past that the address is reported unresolved rather than misnamed.
 *  - Absolute symbols (a A) and zero addresses are ignored.  When every
 *    text symbol reads as zero, kptr_restrict is hiding addresses: the
 *    table is marked restricted and resolves nothing.
 */
#include "symbolize/symbolize.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Longest tail credited to a region's last function (see above). */
#define KSYM_TAIL_MAX 4096u
/* Distinct modules we index; more lines with new modules are an error. */
#define KSYM_MODULES_MAX 65535u

enum ksym_kind {
	KSYM_END = 0, /* boundary: nothing lives at or after it */
	KSYM_FUNC = 1,
};

struct ksym {
	uint64_t addr;
	uint32_t name; /* offset in ksyms.names */
	uint16_t mod;  /* index in ksyms.mods; 0 = vmlinux */
	uint8_t kind;  /* enum ksym_kind */
	uint8_t rank;  /* among names at one address: lower wins */
	uint32_t seq;  /* line number, to keep first-seen order */
};

struct ksyms {
	struct ksym *syms;
	size_t n;
	char *names;
	size_t names_len, names_cap;
	char **mods; /* mods[0] = NULL (vmlinux) */
	size_t nmods, mods_cap;
	int restricted;
};

static int has_prefix(const char *s, const char *p)
{
	return !strncmp(s, p, strlen(p));
}

static int has_suffix(const char *s, const char *x)
{
	size_t ls = strlen(s), lx = strlen(x);

	return ls >= lx && !strcmp(s + ls - lx, x);
}

/* 1: marks the end of a region, -1: marks a start, 0: a real name. */
static int marker(const char *name)
{
	static const char *const ends[] = {
		"_etext", "_einittext", "_end", "__init_end", "_edata",
	};
	static const char *const starts[] = {
		"_text", "_stext", "_sinittext", "__init_begin", "_sdata",
	};

	for (size_t i = 0; i < sizeof(ends) / sizeof(ends[0]); i++)
		if (!strcmp(name, ends[i]))
			return 1;
	for (size_t i = 0; i < sizeof(starts) / sizeof(starts[0]); i++)
		if (!strcmp(name, starts[i]))
			return -1;
	if (has_prefix(name, "__stop_") || has_prefix(name, "__end_") ||
	    has_suffix(name, "_text_end") || has_suffix(name, "_thunk_end"))
		return 1;
	if (has_prefix(name, "__start_") || has_suffix(name, "_text_start") ||
	    has_suffix(name, "_thunk_start"))
		return -1;
	return 0;
}

static int add_name(struct ksyms *k, const char *s, size_t len, uint32_t *off)
{
	if (k->names_len + len + 1 > k->names_cap) {
		size_t cap = k->names_cap ? k->names_cap : 1 << 20;
		char *tmp;

		while (cap < k->names_len + len + 1)
			cap *= 2;
		if (cap > UINT32_MAX)
			return -E2BIG;
		tmp = realloc(k->names, cap);
		if (!tmp)
			return -ENOMEM;
		k->names = tmp;
		k->names_cap = cap;
	}
	memcpy(k->names + k->names_len, s, len);
	k->names[k->names_len + len] = '\0';
	*off = (uint32_t)k->names_len;
	k->names_len += len + 1;
	return 0;
}

/* Index of module name (without brackets), adding it when new. */
static int module_index(struct ksyms *k, const char *s, size_t len, uint16_t *idx)
{
	/* Lines come grouped by module: the last one almost always hits. */
	for (size_t i = k->nmods; i-- > 1;) {
		if (strlen(k->mods[i]) == len && !memcmp(k->mods[i], s, len)) {
			*idx = (uint16_t)i;
			return 0;
		}
	}
	if (k->nmods > KSYM_MODULES_MAX)
		return -E2BIG;
	if (k->nmods == k->mods_cap) {
		size_t cap = k->mods_cap * 2;
		char **tmp = realloc(k->mods, cap * sizeof(*tmp));

		if (!tmp)
			return -ENOMEM;
		k->mods = tmp;
		k->mods_cap = cap;
	}
	k->mods[k->nmods] = strndup(s, len);
	if (!k->mods[k->nmods])
		return -ENOMEM;
	*idx = (uint16_t)k->nmods++;
	return 0;
}

/* Parses "ADDR TYPE NAME[\t[MODULE]]"; 1 = kept, 0 = skipped, -errno. */
static int parse_line(struct ksyms *k, char *line, struct ksym *out, int *text_seen,
		      int *text_nonzero)
{
	char *end, type, *name, *rest, sep;
	unsigned long long addr;
	size_t nlen;
	int err;

	line[strcspn(line, "\n")] = '\0';
	errno = 0;
	addr = strtoull(line, &end, 16);
	if (errno || end == line || *end != ' ')
		return 0;
	type = end[1];
	if (!type || end[2] != ' ')
		return 0;
	name = end + 3;
	nlen = strcspn(name, " \t");
	if (nlen == 0)
		return 0;
	rest = name + nlen;
	sep = *rest;
	name[nlen] = '\0';
	out->mod = 0;
	if (sep) {
		/* "\t[module]" after the name; bpf uses "[bpf]" too. */
		rest += 1 + strspn(rest + 1, " \t");
		if (*rest == '[') {
			size_t mlen = strcspn(rest + 1, "]");

			err = module_index(k, rest + 1, mlen, &out->mod);
			if (err)
				return err;
		}
	}

	switch (type) {
	case 'T':
	case 't':
	case 'W':
	case 'w':
		*text_seen = 1;
		if (addr)
			*text_nonzero = 1;
		switch (marker(name)) {
		case -1:
			return 0;
		case 1:
			out->kind = KSYM_END;
			break;
		default:
			out->kind = KSYM_FUNC;
		}
		out->rank = type == 'T' ? 0 : type == 't' ? 1 : 2;
		break;
	case 'a':
	case 'A':
	case 'U':
	case 'u':
		return 0;
	default:
		/* Data of any kind: only a boundary. */
		out->kind = KSYM_END;
		out->rank = 3;
		break;
	}
	if (!addr)
		return 0;
	out->addr = addr;
	err = add_name(k, name, nlen, &out->name);
	return err ? err : 1;
}

static int cmp_ksym(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	/* Functions first at one address, best rank first, then file order. */
	if (x->kind != y->kind)
		return x->kind > y->kind ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

struct ksyms *ksyms__load(const char *path)
{
	size_t cap = 0, linecap = 0;
	int err = 0, text_seen = 0, text_nonzero = 0;
	struct ksyms *k;
	char *line = NULL;
	uint32_t seq = 0;
	FILE *f;

	k = calloc(1, sizeof(*k));
	if (!k)
		return NULL;
	k->mods_cap = 16;
	k->mods = calloc(k->mods_cap, sizeof(*k->mods));
	if (!k->mods) {
		err = -ENOMEM;
		goto err_free;
	}
	k->nmods = 1; /* index 0: vmlinux */
	f = fopen(path ? path : "/proc/kallsyms", "re");
	if (!f) {
		err = -errno;
		goto err_free;
	}
	while (getline(&line, &linecap, f) > 0) {
		struct ksym s = { .seq = seq++ };

		if (k->n == cap) {
			size_t ncap = cap ? cap * 2 : 4096;
			struct ksym *tmp = realloc(k->syms, ncap * sizeof(*tmp));

			if (!tmp) {
				err = -ENOMEM;
				goto err_close;
			}
			k->syms = tmp;
			cap = ncap;
		}
		err = parse_line(k, line, &s, &text_seen, &text_nonzero);
		if (err < 0)
			goto err_close;
		if (err == 1)
			k->syms[k->n++] = s;
	}
	err = 0;
	if (ferror(f))
		err = -EIO;
err_close:
	fclose(f);
	free(line);
	if (err)
		goto err_free;

	k->restricted = text_seen && !text_nonzero;
	qsort(k->syms, k->n, sizeof(*k->syms), cmp_ksym);
	/* Keep one entry per address: the sort put the winner first. */
	size_t w = 0;

	for (size_t r = 0; r < k->n; r++) {
		if (w && k->syms[w - 1].addr == k->syms[r].addr)
			continue;
		k->syms[w++] = k->syms[r];
	}
	k->n = w;
	return k;

err_free:
	ksyms__free(k);
	errno = -err;
	return NULL;
}

void ksyms__free(struct ksyms *k)
{
	if (!k)
		return;
	for (size_t i = 1; i < k->nmods; i++)
		free(k->mods[i]);
	free(k->mods);
	free(k->syms);
	free(k->names);
	free(k);
}

int ksyms__restricted(const struct ksyms *k)
{
	return k ? k->restricted : 1;
}

size_t ksyms__count(const struct ksyms *k)
{
	size_t n = 0;

	if (!k || k->restricted)
		return 0;
	for (size_t i = 0; i < k->n; i++)
		n += k->syms[i].kind == KSYM_FUNC;
	return n;
}

const char *ksyms__resolve(const struct ksyms *k, uint64_t addr, const char **module,
			   uint64_t *sym_start)
{
	size_t lo = 0, hi;
	const struct ksym *s;

	if (module)
		*module = NULL;
	if (sym_start)
		*sym_start = 0;
	if (!k || k->restricted || k->n == 0)
		return NULL;
	/* Last entry with addr <= target. */
	hi = k->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (k->syms[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	s = &k->syms[lo - 1];
	if (s->kind != KSYM_FUNC)
		return NULL;
	/* Region's last function: no known end, so credit only a tail. */
	if (lo == k->n || k->syms[lo].mod != s->mod) {
		if (addr - s->addr >= KSYM_TAIL_MAX)
			return NULL;
	}
	if (module)
		*module = k->mods[s->mod];
	if (sym_start)
		*sym_start = s->addr;
	return k->names + s->name;
}
