/* SPDX-License-Identifier: Apache-2.0 */
/*
 * How much of a symbol table the agent reads from a profiled process's
 * file.  libelf reads a section whole into the heap (ELF_C_READ), so a
 * file can make the agent allocate whatever its section headers claim: a
 * sparse file claiming a 512 MiB .symtab and a larger .strtab pushed the
 * agent toward its 1 GiB limit (an OOM kill stops profiling on the node).
 * Real tables are far smaller: libtorch_cuda.so's .dynsym is a few MB and
 * its .dynstr tens of MB.
 */
#ifndef STRATA_LIB_ELF_BOUNDS_H
#define STRATA_LIB_ELF_BOUNDS_H

#include <gelf.h>

#define ELF_SYMTAB_MAX (64ull << 20)  /* 2.8 M symbols */
#define ELF_STRTAB_MAX (128ull << 20) /* its names */
/* MiniDebugInfo (.gnu_debugdata: an xz-compressed ELF with a .symtab),
 * which libdwfl inflates whole into memory: compressed and inflated. */
#define ELF_DEBUGDATA_MAX (16ull << 20)
#define ELF_DEBUGDATA_INFLATED_MAX (64ull << 20)

/* CFI (.eh_frame, .debug_frame) the agent reads from a file, inflated:
 * libtorch_cuda.so's .eh_frame is tens of MB. */
#define ELF_CFI_MAX (256ull << 20)
/* Notes (USDT probes: a few KB in real files), all of a file's together. */
#define ELF_NOTES_MAX (16ull << 20)

/*
 * What reading a section (header sh, of e) costs: its size in the file,
 * or for a compressed one (SHF_COMPRESSED, or GNU ".zdebug_*" named name)
 * the larger of that and the size it inflates to, read from its header
 * alone (libelf allocates that much and inflates into it).  UINT64_MAX
 * when the header cannot be read.
 */
uint64_t elf_section_bytes(Elf *e, const GElf_Shdr *sh, const char *name);

/* What libdw's dwarf_begin_elf takes of a file: its .debug_* and .zdebug_*
 * sections, all of them read, the compressed ones inflated. */
struct elf_dwarf_bytes {
	uint64_t total;	   /* held in memory once read (or mapped) */
	uint64_t inflated; /* of which inflated into the heap */
	int has_info;	   /* a .debug_info: there is DWARF */
};
void elf_dwarf_bytes(Elf *e, struct elf_dwarf_bytes *out);

/* Whether every symbol table of e is within the bounds above (what
 * libdwfl reads whole into the heap from a file opened with ELF_C_READ). */
int elf_symtabs_bounded(Elf *e);

/*
 * The bounds above for the whole file, for a reader of every symbol table
 * in it (SHT_SYMTAB, SHT_DYNSYM with the string table each links to): libelf keeps each section it
 * read until elf_end, so a file of many tables, each within the bounds, would add up to GBs.  Takes
 * the table with header sh and its strings from *b (initialized to ELF_SYMTABS_BUDGET) and returns
 * 1, or 0 when they do not fit in what is left (nothing taken).
 */
struct elf_symtab_budget {
	uint64_t symtab, strtab;
};
#define ELF_SYMTABS_BUDGET ((struct elf_symtab_budget){ ELF_SYMTAB_MAX, ELF_STRTAB_MAX })
int elf_symtab_take(Elf *e, const GElf_Shdr *sh, struct elf_symtab_budget *b);

/*
 * Whether e's .gnu_debugdata, if any, is within the bounds above.  libdwfl
 * inflates it whole into the heap whether the file is read or mapped (an
 * xz bomb of a few KB inflates to GBs): it is inflated here once, into a
 * bounded buffer, to learn its size.
 */
int elf_debugdata_bounded(Elf *e);

#endif /* STRATA_LIB_ELF_BOUNDS_H */
