// SPDX-License-Identifier: Apache-2.0
/* Bounds on the symbol tables read from profiled processes' files (see the header). */
#include "lib/elf_bounds.h"

#include <lzma.h>
#include <stdint.h>
#include <string.h>

int elf_symtab_take(Elf *e, const GElf_Shdr *sh, struct elf_symtab_budget *b)
{
	GElf_Shdr str;
	Elf_Scn *s = elf_getscn(e, sh->sh_link);
	uint64_t strings;

	if (!s || !gelf_getshdr(s, &str))
		return 0;
	strings = str.sh_type == SHT_NOBITS ? 0 : str.sh_size;
	if (sh->sh_size > b->symtab || strings > b->strtab)
		return 0;
	b->symtab -= sh->sh_size;
	b->strtab -= strings;
	return 1;
}

/*
 * Whether the xz stream in[0..n) inflates to at most max bytes.  A
 * corrupt stream counts what it inflated before the error, as libdwfl
 * would; one that needs more memory to decode than the bound is refused
 * (libdwfl would allow it 1 GiB).
 */
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
	return total <= max && r != LZMA_MEMLIMIT_ERROR && r != LZMA_MEM_ERROR;
}

/*
 * Whether MiniDebugInfo data[0..n) opens within the bounds: libdwfl takes
 * an ELF image as it is and inflates xz, but also gzip, bzip2, raw LZMA
 * and zstd.  Real MiniDebugInfo is xz: the other formats are refused
 * rather than measured.
 */
static int debugdata_within(const uint8_t *data, size_t n)
{
	static const uint8_t xz_magic[6] = { 0xfd, '7', 'z', 'X', 'Z', 0 };

	if (n >= SELFMAG && !memcmp(data, ELFMAG, SELFMAG))
		return 1; /* read as it is: the section's size bounds it */
	if (n >= sizeof(xz_magic) && !memcmp(data, xz_magic, sizeof(xz_magic)))
		return xz_within(data, n, ELF_DEBUGDATA_INFLATED_MAX);
	return 0;
}

int elf_symtabs_bounded(Elf *e)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;

		/* each on its own: libdwfl reads one symbol table (and the
		 * MiniDebugInfo's, bounded apart) */
		struct elf_symtab_budget one = ELF_SYMTABS_BUDGET;

		if (gelf_getshdr(scn, &sh) &&
		    (sh.sh_type == SHT_SYMTAB || sh.sh_type == SHT_DYNSYM) &&
		    !elf_symtab_take(e, &sh, &one))
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
		if (d && d->d_buf && !debugdata_within(d->d_buf, d->d_size))
			return 0;
	}
	return 1;
}

/* n bytes (at most 8) at p as an unsigned number in the given order. */
static uint64_t read_uint(const uint8_t *p, int n, int big_endian)
{
	uint64_t v = 0;

	for (int i = 0; i < n; i++)
		v |= (uint64_t)p[big_endian ? i : n - 1 - i] << (8 * (n - 1 - i));
	return v;
}

uint64_t elf_section_bytes(Elf *e, const GElf_Shdr *sh, const char *name)
{
	const unsigned char *ident = (const unsigned char *)elf_getident(e, NULL);
	int cls = gelf_getclass(e), be;
	const uint8_t *p;
	Elf_Data *d;
	uint64_t inflated;

	if (sh->sh_type == SHT_NOBITS)
		return 0;
	if (!(sh->sh_flags & SHF_COMPRESSED) && !(name && !strncmp(name, ".zdebug", 7)))
		return sh->sh_size;
	/*
	 * Only the header is read (libelf's getchdr and rawdata would read the
	 * whole section first: as many bytes as a sparse file claims).  The
	 * raw section is read too when it is inflated: the larger counts.
	 */
	if (!ident)
		return UINT64_MAX;
	be = ident[EI_DATA] == ELFDATA2MSB;
	if (sh->sh_flags & SHF_COMPRESSED) {
		/* Elf64_Chdr: type, reserved, size, align; Elf32: type, size, align */
		d = elf_getdata_rawchunk(e, (int64_t)sh->sh_offset, cls == ELFCLASS64 ? 24 : 12,
					 ELF_T_BYTE);
		if (!d || !d->d_buf)
			return UINT64_MAX;
		p = d->d_buf;
		inflated = cls == ELFCLASS64 ? read_uint(p + 8, 8, be) : read_uint(p + 4, 4, be);
	} else {
		/* GNU: "ZLIB", then the inflated size, 8 bytes big-endian */
		d = elf_getdata_rawchunk(e, (int64_t)sh->sh_offset, 12, ELF_T_BYTE);
		if (!d || !d->d_buf || memcmp(d->d_buf, "ZLIB", 4))
			return UINT64_MAX;
		inflated = read_uint((const uint8_t *)d->d_buf + 4, 8, 1);
	}
	return inflated > sh->sh_size ? inflated : sh->sh_size;
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
		n = elf_section_bytes(e, &sh, name);
		out->total = n > UINT64_MAX - out->total ? UINT64_MAX : out->total + n;
		if ((sh.sh_flags & SHF_COMPRESSED) || name[1] == 'z')
			out->inflated =
				n > UINT64_MAX - out->inflated ? UINT64_MAX : out->inflated + n;
		out->has_info |= !strcmp(name, ".debug_info") || !strcmp(name, ".zdebug_info");
	}
}
