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
#ifndef STRATA_ELF_BOUNDS_H
#define STRATA_ELF_BOUNDS_H

#include <gelf.h>

#define ELF_SYMTAB_MAX (64ull << 20)  /* 2.8 M symbols */
#define ELF_STRTAB_MAX (128ull << 20) /* its names */
/* MiniDebugInfo (.gnu_debugdata: an xz-compressed ELF with a .symtab),
 * which libdwfl inflates whole into memory: compressed and inflated. */
#define ELF_DEBUGDATA_MAX (16ull << 20)
#define ELF_DEBUGDATA_INFLATED_MAX (64ull << 20)

/*
 * Whether the symbol table with header sh (SHT_SYMTAB or SHT_DYNSYM, in e)
 * and the string table it links to are within the bounds above.
 */
int elf_symtab_bounded(Elf *e, const GElf_Shdr *sh);

/* Whether every symbol table of e is within the bounds above (what
 * libdwfl reads whole into the heap from a file opened with ELF_C_READ). */
int elf_symtabs_bounded(Elf *e);

/*
 * Whether e's .gnu_debugdata, if any, is within the bounds above.  libdwfl
 * inflates it whole into the heap whether the file is read or mapped (an
 * xz bomb of a few KB inflates to GBs): it is inflated here once, into a
 * bounded buffer, to learn its size.
 */
int elf_debugdata_bounded(Elf *e);

#endif /* STRATA_ELF_BOUNDS_H */
