/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What libdw and libdwfl trust and a hostile file breaks: elfutils before
 * 0.189 (Debian 12 ships 0.188) hands out DWARF strings and symbol names
 * without checking that they end inside their section, and strlen()s some
 * DWARF strings itself (comp_dir while reading a line table).  A file whose
 * .debug_line_str or .strtab does not end in NUL made the symbolizer read
 * past a heap buffer (found by fuzz_elf_module); mapped (the server's
 * store), a crafted upload could read past the end of the mapping.  These
 * checks run before the symbolizer uses a string: valid files pass them.
 */
#ifndef STRATA_LIBDW_GUARD_H
#define STRATA_LIBDW_GUARD_H

#include <elfutils/libdw.h>
#include <gelf.h>

/* The sections strings may point into (.debug_info, .debug_str,
 * .debug_line_str), of the file and of its dwz alternate. */
#define DWARF_GUARD_SPANS 6
struct dwarf_guard {
	const char *lo[DWARF_GUARD_SPANS], *hi[DWARF_GUARD_SPANS];
	int n;
};

/*
 * Checks dw and its alternate file (dwz), if any: every string section
 * (.debug_str, .debug_line_str) must end in NUL.  Returns 0 (g filled),
 * or -EBADMSG: the DWARF must not be used.
 */
int dwarf_guard__init(struct dwarf_guard *g, Dwarf *dw);

/*
 * dwarf_formstring(a), or NULL unless it lies in one of the sections
 * above and ends inside it.
 */
const char *dwarf_guard__formstring(const struct dwarf_guard *g, Dwarf_Attribute *a);

/*
 * Whether the strings libdw reads from a CU DIE while it reads the CU's
 * line table (DW_AT_comp_dir, DW_AT_name) are safe: call it before
 * dwarf_getsrc_die, dwarf_getsrcfiles or dwarf_getsrclines on that CU.
 */
int dwarf_guard__cu_ok(const struct dwarf_guard *g, Dwarf_Die *cu);

/* The string tables (SHT_STRTAB) of the ELF files symbols come from: the
 * file, its debug file, the minidebuginfo inside it. */
#define SYMSTR_ELFS 3
#define SYMSTR_TABLES 16 /* per file; names in others are not trusted */
struct symstr_guard {
	struct {
		Elf *elf;
		int n;
		const char *lo[SYMSTR_TABLES], *hi[SYMSTR_TABLES];
	} f[SYMSTR_ELFS];
	int nf;
};

/*
 * name, as dwfl_module_getsym_info returned it with elf (its Elf **elfp),
 * when it ends inside one of elf's string tables; NULL otherwise (a symbol
 * table without section headers, or past the limits above: the symbol is
 * left out).  g starts zeroed.
 */
const char *symstr_guard__name(struct symstr_guard *g, Elf *elf, const char *name);

#endif /* STRATA_LIBDW_GUARD_H */
