// SPDX-License-Identifier: Apache-2.0
/* Bounds on the symbol tables read from profiled processes' files (see the header). */
#include "lib/elf_bounds.h"

#include <lzma.h>
#include <stdint.h>
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

uint64_t elf_section_bytes(Elf_Scn *scn, const GElf_Shdr *sh, const char *name)
{
	if (sh->sh_type == SHT_NOBITS)
		return 0;
	if (sh->sh_flags & SHF_COMPRESSED) {
		GElf_Chdr ch;

		return gelf_getchdr(scn, &ch) ? ch.ch_size : UINT64_MAX;
	}
	if (name && !strncmp(name, ".zdebug", 7)) {
		/* "ZLIB", then the inflated size, 8 bytes big-endian; libelf
		 * reads the raw section whole to show us those: bounded */
		Elf_Data *d;
		uint64_t n = 0;

		if (sh->sh_size > ELF_CFI_MAX || !(d = elf_rawdata(scn, NULL)) || d->d_size < 12 ||
		    memcmp(d->d_buf, "ZLIB", 4))
			return UINT64_MAX;
		for (int i = 4; i < 12; i++)
			n = n << 8 | ((const uint8_t *)d->d_buf)[i];
		return n;
	}
	return sh->sh_size;
}

void elf_dwarf_bytes(Elf *e, struct elf_dwarf_bytes *out)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	memset(out, 0, sizeof(*out));
	if (elf_getshdrstrndx(e, &shstrndx))
		return;
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		const char *name;
		uint64_t n;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
			continue;
		name = elf_strptr(e, shstrndx, sh.sh_name);
		if (!name || (strncmp(name, ".debug_", 7) && strncmp(name, ".zdebug_", 8)))
			continue;
		n = elf_section_bytes(scn, &sh, name);
		out->total = n > UINT64_MAX - out->total ? UINT64_MAX : out->total + n;
		if ((sh.sh_flags & SHF_COMPRESSED) || name[1] == 'z')
			out->inflated =
				n > UINT64_MAX - out->inflated ? UINT64_MAX : out->inflated + n;
		out->has_info |= !strcmp(name, ".debug_info") || !strcmp(name, ".zdebug_info");
	}
}
