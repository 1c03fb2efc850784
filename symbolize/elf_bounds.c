// SPDX-License-Identifier: Apache-2.0
/* Bounds on the symbol tables read from profiled processes' files (see the header). */
#include "symbolize/elf_bounds.h"

#include <lzma.h>
#include <string.h>

int elf_symtab_bounded(Elf *e, const GElf_Shdr *sh)
{
	GElf_Shdr str;
	Elf_Scn *s;

	if (sh->sh_size > ELF_SYMTAB_MAX)
		return 0;
	s = elf_getscn(e, sh->sh_link);
	if (!s || !gelf_getshdr(s, &str))
		return 0;
	return str.sh_type == SHT_NOBITS || str.sh_size <= ELF_STRTAB_MAX;
}

/* Whether the xz stream in[0..n) inflates to at most max bytes (a corrupt
 * stream counts what it inflated before the error, as libdwfl would). */
static int xz_within(const uint8_t *in, size_t n, uint64_t max)
{
	lzma_stream z = LZMA_STREAM_INIT;
	uint8_t out[64 << 10];
	uint64_t total = 0;
	lzma_ret r = LZMA_OK;

	if (lzma_stream_decoder(&z, 128u << 20, 0) != LZMA_OK)
		return 0;
	z.next_in = in;
	z.avail_in = n;
	while (r == LZMA_OK && total <= max) {
		z.next_out = out;
		z.avail_out = sizeof(out);
		r = lzma_code(&z, LZMA_FINISH);
		total += sizeof(out) - z.avail_out;
	}
	lzma_end(&z);
	return total <= max;
}

int elf_symtabs_bounded(Elf *e)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;

		if (gelf_getshdr(scn, &sh) &&
		    (sh.sh_type == SHT_SYMTAB || sh.sh_type == SHT_DYNSYM) &&
		    !elf_symtab_bounded(e, &sh))
			return 0;
	}
	return 1;
}

int elf_debugdata_bounded(Elf *e)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	if (elf_getshdrstrndx(e, &shstrndx))
		return 1; /* no section names: libdwfl finds no .gnu_debugdata */
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		const char *name;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
			continue;
		name = elf_strptr(e, shstrndx, sh.sh_name);
		if (!name || strcmp(name, ".gnu_debugdata"))
			continue;
		if (sh.sh_size > ELF_DEBUGDATA_MAX)
			return 0;
		d = elf_rawdata(scn, NULL);
		if (d && d->d_buf && !xz_within(d->d_buf, d->d_size, ELF_DEBUGDATA_INFLATED_MAX))
			return 0;
	}
	return 1;
}
