// SPDX-License-Identifier: Apache-2.0
/* Checks on a file's strings before libdw 0.188 or the symbolizer reads them (see the header). */
#include "symbolize/libdw_guard.h"

#include <dwarf.h>
#include <errno.h>
#include <gelf.h>
#include <string.h>

/*
 * One Elf: string sections must end in NUL; remembers where the sections
 * strings come from are (the first of each name: the one libdw uses).  The
 * Elf_Data is the one libdw took when it opened the file, already
 * decompressed (SHF_COMPRESSED, .zdebug_*).
 */
static int check_elf(struct dwarf_guard *g, Elf *elf)
{
	static const char *const names[] = { "debug_info", "debug_str", "debug_line_str" };
	Elf_Scn *scn = NULL;
	unsigned seen = 0;
	size_t shstrndx;

	if (!elf || elf_getshdrstrndx(elf, &shstrndx))
		return 0;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *name;
		Elf_Data *d;
		size_t k = 0;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name)
			continue;
		if (!strncmp(name, ".zdebug_", 8)) /* GNU-compressed: ".zdebug_x" */
			name += 2;
		else if (!strncmp(name, ".debug_", 7))
			name += 1;
		while (k < 3 && strcmp(name, names[k]))
			k++;
		if (k == 3)
			continue;
		d = elf_getdata(scn, NULL);
		if (!d || !d->d_buf || !d->d_size)
			continue;
		if (k > 0 && ((const char *)d->d_buf)[d->d_size - 1] != '\0')
			return -EBADMSG; /* a string section: valid ones end in NUL */
		if (!(seen & 1u << k) && g->n < DWARF_GUARD_SPANS) {
			g->lo[g->n] = d->d_buf;
			g->hi[g->n++] = (const char *)d->d_buf + d->d_size;
		}
		seen |= 1u << k;
	}
	return 0;
}

int dwarf_guard__init(struct dwarf_guard *g, Dwarf *dw)
{
	Dwarf *alt;

	memset(g, 0, sizeof(*g));
	if (!dw)
		return 0;
	if (check_elf(g, dwarf_getelf(dw)))
		return -EBADMSG;
	alt = dwarf_getalt(dw);
	return alt && alt != dw ? check_elf(g, dwarf_getelf(alt)) : 0;
}

const char *dwarf_guard__formstring(const struct dwarf_guard *g, Dwarf_Attribute *a)
{
	const char *s = dwarf_formstring(a);

	/*
	 * Whatever the form: the string must lie in a section strings come
	 * from and end inside it.  (libdw 0.188 can hand out a pointer just
	 * past a string section's end: found by fuzz_elf_module.)
	 */
	for (int i = 0; s && i < g->n; i++)
		if (s >= g->lo[i] && s < g->hi[i])
			return memchr(s, '\0', (size_t)(g->hi[i] - s)) ? s : NULL;
	return NULL;
}

int dwarf_guard__cu_ok(const struct dwarf_guard *g, Dwarf_Die *cu)
{
	static const unsigned attrs[] = { DW_AT_comp_dir, DW_AT_name };
	Dwarf_Attribute a;

	for (size_t i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++)
		if (dwarf_attr(cu, attrs[i], &a) && !dwarf_guard__formstring(g, &a))
			return 0;
	return 1;
}

/* Where elf's string tables are, read once per Elf (libdwfl's own Elf_Data). */
static void symstr_load(Elf *elf, int *n, const char **lo, const char **hi)
{
	Elf_Scn *scn = NULL;

	*n = 0;
	while (*n < SYMSTR_TABLES && (scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_STRTAB)
			continue;
		d = elf_getdata(scn, NULL);
		if (!d || !d->d_buf || !d->d_size)
			continue;
		lo[*n] = d->d_buf;
		hi[(*n)++] = (const char *)d->d_buf + d->d_size;
	}
}

const char *symstr_guard__name(struct symstr_guard *g, Elf *elf, const char *name)
{
	int i;

	if (!name || !elf)
		return NULL;
	for (i = 0; i < g->nf && g->f[i].elf != elf; i++)
		;
	if (i == g->nf) {
		if (g->nf == SYMSTR_ELFS)
			return NULL;
		g->f[i].elf = elf;
		symstr_load(elf, &g->f[i].n, g->f[i].lo, g->f[i].hi);
		g->nf++;
	}
	for (int t = 0; t < g->f[i].n; t++)
		if (name >= g->f[i].lo[t] && name < g->f[i].hi[t])
			return memchr(name, '\0', (size_t)(g->f[i].hi[t] - name)) ? name : NULL;
	return NULL;
}
