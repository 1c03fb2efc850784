/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The address ranges of the FDEs in one raw CFI section (.eh_frame or
 * .debug_frame), read with dwarf_next_cfi.  The table compiler needs them
 * to know where CFI starts and stops: libdw only answers "which rule holds
 * at this pc", and stepping byte by byte through gaps would be unbounded.
 */
#ifndef STRATA_UNWIND_FDE_RANGES_H
#define STRATA_UNWIND_FDE_RANGES_H

#include <libelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fde_range {
	uint64_t lo, hi; /* [lo, hi); lo == hi for an empty FDE (kept so the
			  * .eh_frame_hdr check knows it) */
	uint64_t off;	 /* the entry's offset in its section */
	uint64_t insn;	 /* its instruction bytes: the most one libdw query
			  * of a pc in the range executes */
	/* its CIE's and its own programs decode and name no register above
	 * FDE_MAX_DWARF_REG: libdw sizes a query's register array by the
	 * highest number a program names (16 bytes each, zeroed), so one
	 * naming register 2^26 made every query allocate 1 GiB */
	bool regs_ok;
};

/* x86-64 DWARF registers end below 130 (k7 is 125). */
#define FDE_MAX_DWARF_REG 255

struct fde_ranges {
	struct fde_range *v;
	size_t n, cap;
	size_t bad;	   /* CIE/FDE entries skipped as malformed */
	size_t bad_regs;   /* FDEs whose programs name a register past the bound */
	uint64_t cie_insn; /* CIE instruction bytes libdw may run (once per
			    * CIE; counted per change of CIE, an upper bound) */
};

/*
 * Appends the range of every FDE in data, a CFI section loaded at vaddr
 * (.eh_frame when eh, else .debug_frame, whose pointers libdw reads as if
 * loaded at 0).  Pointer encodings are decoded the way libdw decodes them,
 * so the ranges are exactly those dwarf_cfi_addrframe will match.
 * Returns 0, -ENOMEM, or -E2BIG when more than max ranges accumulate.
 */
int fde_ranges__scan(struct fde_ranges *r, const unsigned char *e_ident, Elf_Data *data, bool eh,
		     uint64_t vaddr, size_t max);

/*
 * Whether an .eh_frame_hdr search table (hdr, loaded at hdr_vaddr) only
 * leads libdw to FDEs in v[0..n) (the scan of the .eh_frame at eh_vaddr,
 * in section order), at their own initial locations.  libdw trusts the
 * table: an entry pointing elsewhere would make it run bytes the scan
 * never bounded.  True also when libdw would not use the table at all.
 */
bool fde_ranges__hdr_consistent(const struct fde_range *v, size_t n, Elf_Data *hdr,
				uint64_t hdr_vaddr, uint64_t eh_vaddr);

void fde_ranges__release(struct fde_ranges *r);

#endif /* STRATA_UNWIND_FDE_RANGES_H */
