// SPDX-License-Identifier: Apache-2.0
/*
 * FDE address ranges of a raw CFI section.
 *
 * dwarf_next_cfi splits the section into CIEs and FDEs but leaves an FDE's
 * initial_location/address_range encoded with its CIE's 'R' pointer
 * encoding.  The decoding below follows libdw's own (cie.c intern_new_cie,
 * encoded-value.h read_encoded_value): pc-relative pointers are relative to
 * the section's load address, datarel/textrel/funcrel bases are 0.  Using
 * the same rules matters more than the DWARF spec's letter here: a range
 * that libdw would decode differently is a range dwarf_cfi_addrframe
 * would never match.
 *
 * Input is hostile: every read is bounded by the section end, and a
 * malformed entry is skipped and counted like libdw skips it.
 */
#include "unwind/fde_ranges.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct cfi_sec {
	const uint8_t *buf, *end;
	uint64_t vaddr; /* base of DW_EH_PE_pcrel */
};

/* Little-endian reads: the caller only accepts x86-64 files. */
static uint64_t load_le(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* LEB128 of at most 10 bytes; false when it runs past end. */
static bool read_leb(const uint8_t **pp, const uint8_t *end, bool sign, uint64_t *out)
{
	const uint8_t *p = *pp;
	uint64_t v = 0;
	unsigned shift = 0;
	uint8_t b;

	do {
		if (p >= end || shift >= 70)
			return false;
		b = *p++;
		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
	} while (b & 0x80);
	if (sign && shift < 64 && (b & 0x40))
		v |= ~0ULL << shift;
	*pp = p;
	*out = v;
	return true;
}

/* libdw's encoded_value_size: 0 for omit, unknown, or an unterminated LEB. */
static size_t encoded_size(uint8_t enc, const uint8_t *p, const uint8_t *end)
{
	if (enc == DW_EH_PE_omit)
		return 0;
	switch (enc & 0x07) {
	case DW_EH_PE_udata2:
		return 2;
	case DW_EH_PE_udata4:
		return 4;
	case DW_EH_PE_udata8:
	case DW_EH_PE_absptr:
		return 8;
	case DW_EH_PE_uleb128:
		for (const uint8_t *q = p; q && q < end;)
			if (!(*q++ & 0x80))
				return (size_t)(q - p);
		return 0;
	default:
		return 0;
	}
}

/*
 * libdw's read_encoded_value; false on a bad encoding or a short read.
 * datarel is the DW_EH_PE_datarel base: 0 in .eh_frame (libdw's choice),
 * the header's address in .eh_frame_hdr.
 */
static bool read_encoded_base(const struct cfi_sec *s, uint8_t enc, const uint8_t **pp,
			      uint64_t datarel, uint64_t *out)
{
	const uint8_t *p = *pp;
	uint64_t base = 0, v;
	size_t n;

	switch (enc & 0x70) {
	case DW_EH_PE_absptr:
	case DW_EH_PE_textrel:
	case DW_EH_PE_funcrel:
		break;
	case DW_EH_PE_datarel:
		base = datarel;
		break;
	case DW_EH_PE_pcrel:
		base = s->vaddr + (uint64_t)(p - s->buf);
		break;
	case DW_EH_PE_aligned: {
		uint64_t mis;

		n = encoded_size(enc, p, s->end);
		if (!n || (n & (n - 1)))
			return false;
		mis = (s->vaddr + (uint64_t)(p - s->buf)) & (n - 1);
		if (mis) {
			if ((uint64_t)(s->end - p) < n - mis)
				return false;
			p += n - mis;
		}
		break;
	}
	default:
		return false;
	}

	switch (enc & 0x0f) {
	case DW_EH_PE_udata2:
	case DW_EH_PE_sdata2:
		if (s->end - p < 2)
			return false;
		v = load_le(p, 2);
		if ((enc & 0x0f) == DW_EH_PE_sdata2)
			v = (uint64_t)(int64_t)(int16_t)v;
		p += 2;
		break;
	case DW_EH_PE_udata4:
	case DW_EH_PE_sdata4:
		if (s->end - p < 4)
			return false;
		v = load_le(p, 4);
		if ((enc & 0x0f) == DW_EH_PE_sdata4)
			v = (uint64_t)(int64_t)(int32_t)v;
		p += 4;
		break;
	case DW_EH_PE_udata8:
	case DW_EH_PE_sdata8:
	case DW_EH_PE_absptr:
		if (s->end - p < 8)
			return false;
		v = load_le(p, 8);
		p += 8;
		break;
	case DW_EH_PE_uleb128:
	case DW_EH_PE_sleb128:
		if (!read_leb(&p, s->end, (enc & 0x0f) == DW_EH_PE_sleb128, &v))
			return false;
		break;
	default:
		return false;
	}
	v += base;

	if (enc & DW_EH_PE_indirect) {
		/* A pointer to the value, inside this section (libdw's rule). */
		if (v < s->vaddr || v - s->vaddr > (uint64_t)(s->end - s->buf) ||
		    (uint64_t)(s->end - s->buf) - (v - s->vaddr) < 8)
			return false;
		v = load_le(s->buf + (v - s->vaddr), 8);
	}
	*pp = p;
	*out = v;
	return true;
}

/*
 * The FDE pointer encoding of a CIE (its 'R' augmentation), as libdw's
 * intern_new_cie reads it; DW_EH_PE_absptr without one.  False when the
 * augmentation data runs past the CIE.
 */
static bool cie_fde_encoding(const Dwarf_CIE *cie, const uint8_t *cie_end, uint8_t *enc)
{
	const uint8_t *d = cie->augmentation_data;
	bool sized = false;

	*enc = DW_EH_PE_absptr;
	for (const char *ap = cie->augmentation; ap && *ap; ap++) {
		uint8_t e;
		size_t n;

		switch (*ap) {
		case 'z':
			sized = true;
			continue;
		case 'S':
			continue;
		case 'L':
		case 'R':
			if (!d || d >= cie_end)
				return false;
			e = *d++;
			if (*ap == 'R')
				*enc = e;
			continue;
		case 'P':
			if (!d || d >= cie_end)
				return false;
			e = *d++;
			n = encoded_size(e, d, cie_end);
			if ((size_t)(cie_end - d) < n)
				return false;
			d += n;
			continue;
		default:
			if (sized)
				continue;
		}
		break;
	}
	return true;
}

/* Reads a ULEB register number; false past FDE_MAX_DWARF_REG or the end. */
static bool read_reg(const uint8_t **p, const uint8_t *end)
{
	uint64_t reg;

	return read_leb(p, end, false, &reg) && reg <= FDE_MAX_DWARF_REG;
}

static bool skip(const uint8_t **p, const uint8_t *end, uint64_t n)
{
	if ((uint64_t)(end - *p) < n)
		return false;
	*p += n;
	return true;
}

/*
 * Whether a CFA program [p, end) decodes to the end and names no register
 * above FDE_MAX_DWARF_REG (what libdw's execute_cfi would size its
 * register array by).  setloc: the size of DW_CFA_set_loc's operand.  An
 * opcode libdw does not know makes it fail the query anyway: false.
 */
static bool insn_regs_ok(const uint8_t *p, const uint8_t *end, size_t setloc)
{
	uint64_t v;

	while (p < end) {
		uint8_t op = *p++;

		if (op & 0xc0) { /* advance_loc, offset (ULEB), restore: register < 64 */
			if ((op & 0xc0) == 0x80 && !read_leb(&p, end, false, &v))
				return false;
			continue;
		}
		switch (op) {
		case 0x00: /* nop */
		case 0x0a: /* remember_state */
		case 0x0b: /* restore_state */
		case 0x2d: /* GNU_window_save */
			break;
		case 0x01: /* set_loc */
			if (!setloc || !skip(&p, end, setloc))
				return false;
			break;
		case 0x02: /* advance_loc1, 2, 4, MIPS_advance_loc8 */
		case 0x03:
		case 0x04:
		case 0x1d:
			if (!skip(&p, end, op == 0x02 ? 1 : op == 0x03 ? 2 : op == 0x04 ? 4 : 8))
				return false;
			break;
		case 0x06: /* restore_extended, undefined, same_value, def_cfa_register */
		case 0x07:
		case 0x08:
		case 0x0d:
			if (!read_reg(&p, end))
				return false;
			break;
		case 0x05: /* offset_extended, def_cfa, val_offset, GNU_negative_offset_extended */
		case 0x0c:
		case 0x14:
		case 0x2f:
			if (!read_reg(&p, end) || !read_leb(&p, end, false, &v))
				return false;
			break;
		case 0x11: /* offset_extended_sf, def_cfa_sf, val_offset_sf */
		case 0x12:
		case 0x15:
			if (!read_reg(&p, end) || !read_leb(&p, end, true, &v))
				return false;
			break;
		case 0x09: /* register */
			if (!read_reg(&p, end) || !read_reg(&p, end))
				return false;
			break;
		case 0x0e: /* def_cfa_offset, GNU_args_size */
		case 0x2e:
			if (!read_leb(&p, end, false, &v))
				return false;
			break;
		case 0x13: /* def_cfa_offset_sf */
			if (!read_leb(&p, end, true, &v))
				return false;
			break;
		case 0x0f: /* def_cfa_expression: a block */
			if (!read_leb(&p, end, false, &v) || !skip(&p, end, v))
				return false;
			break;
		case 0x10: /* expression, val_expression: a register and a block */
		case 0x16:
			if (!read_reg(&p, end) || !read_leb(&p, end, false, &v) ||
			    !skip(&p, end, v))
				return false;
			break;
		default:
			return false;
		}
	}
	return true;
}

/* An FDE's own program: after its range and, with a 'z' CIE, its
 * augmentation data. */
static bool fde_regs_ok(const Dwarf_CIE *cie, const uint8_t *p, const uint8_t *end, size_t setloc)
{
	uint64_t n;

	if (cie->augmentation && cie->augmentation[0] == 'z' &&
	    (!read_leb(&p, end, false, &n) || !skip(&p, end, n)))
		return false;
	return insn_regs_ok(p, end, setloc);
}

static int ranges__push(struct fde_ranges *r, const struct fde_range *fr, size_t max)
{
	if (r->n == r->cap) {
		size_t cap = r->cap ? 2 * r->cap : 256;
		struct fde_range *v;

		if (r->n >= max)
			return -E2BIG;
		if (cap > max)
			cap = max;
		v = realloc(r->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		r->v = v;
		r->cap = cap;
	}
	r->v[r->n++] = *fr;
	return 0;
}

int fde_ranges__scan(struct fde_ranges *r, const unsigned char *e_ident, Elf_Data *data, bool eh,
		     uint64_t vaddr, size_t max)
{
	struct cfi_sec s = { data->d_buf, (const uint8_t *)data->d_buf + data->d_size, vaddr };
	Dwarf_Off off = 0, cie_off = (Dwarf_Off)-1;
	uint8_t enc = DW_EH_PE_absptr;
	bool cie_ok = false, cie_regs_ok = false;
	Dwarf_CIE cie = { 0 };

	if (!data->d_buf)
		return 0;
	/* Each entry is at least 9 bytes and offsets only grow: bounded. */
	while (off < data->d_size) {
		struct fde_range fr = { .off = off };
		Dwarf_CFI_Entry e;
		Dwarf_Off next = off;
		const uint8_t *p;
		uint64_t len;
		int rc, err;

		rc = dwarf_next_cfi(e_ident, data, eh, off, &next, &e);
		if (rc > 0)
			break;
		if (rc < 0) {
			r->bad++;
			if (next <= off)
				break; /* could not size the entry: nothing after it is reliable */
			off = next;
			continue;
		}
		if (next <= off)
			break;
		off = next;
		if (dwarf_cfi_cie_p(&e))
			continue;

		/* FDEs of one CIE are usually adjacent: remember the last. */
		if (e.fde.CIE_pointer != cie_off) {
			Dwarf_CFI_Entry c;
			Dwarf_Off cnext = e.fde.CIE_pointer;

			cie_off = e.fde.CIE_pointer;
			cie_ok = dwarf_next_cfi(e_ident, data, eh, cie_off, &cnext, &c) == 0 &&
				 dwarf_cfi_cie_p(&c) &&
				 cie_fde_encoding(&c.cie, c.cie.initial_instructions_end, &enc);
			if (cie_ok) {
				cie = c.cie;
				r->cie_insn += (uint64_t)(c.cie.initial_instructions_end -
							  c.cie.initial_instructions);
				cie_regs_ok = c.cie.return_address_register <= FDE_MAX_DWARF_REG &&
					      insn_regs_ok(c.cie.initial_instructions,
							   c.cie.initial_instructions_end,
							   eh ? encoded_size(enc, NULL, NULL) : 8);
			}
		}
		p = e.fde.start;
		if (!cie_ok || !read_encoded_base(&s, enc, &p, 0, &fr.lo) ||
		    !read_encoded_base(&s, enc & 0x0f, &p, 0, &len)) {
			r->bad++;
			continue;
		}
		/* Empty or wrapping ranges cover nothing (libdw ignores them). */
		fr.hi = fr.lo + len > fr.lo ? fr.lo + len : fr.lo;
		fr.insn = (uint64_t)(e.fde.end - e.fde.start);
		fr.regs_ok = cie_regs_ok && fde_regs_ok(&cie, p, e.fde.end,
							eh ? encoded_size(enc, NULL, NULL) : 8);
		r->bad_regs += !fr.regs_ok;
		err = ranges__push(r, &fr, max);
		if (err)
			return err;
	}
	return 0;
}

/* The entry at section offset off, by binary search (v is in offset order). */
static const struct fde_range *range_at(const struct fde_range *v, size_t n, uint64_t off)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v[mid].off == off)
			return &v[mid];
		if (v[mid].off < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

bool fde_ranges__hdr_consistent(const struct fde_range *v, size_t n, Elf_Data *hdr,
				uint64_t hdr_vaddr, uint64_t eh_vaddr)
{
	const uint8_t *h, *end;
	uint8_t ptr_enc, count_enc, table_enc;
	uint64_t frame, count;
	struct cfi_sec s;
	size_t esz;

	/* Each early "true" below is a header libdw itself refuses or a
	 * table it does not use (libdw/dwarf_getcfi_elf.c parse_eh_frame_hdr). */
	/* An empty header is no table; one shorter than its fixed fields
	 * libdw refuses (older versions read past it): never pass it on. */
	if (!hdr || !hdr->d_size)
		return true;
	if (!hdr->d_buf || hdr->d_size < 4)
		return false;
	h = hdr->d_buf;
	end = h + hdr->d_size;
	s = (struct cfi_sec){ h, end, hdr_vaddr };
	if (h[0] != 1 || h[1] == DW_EH_PE_omit)
		return true;
	ptr_enc = h[1];
	count_enc = h[2];
	table_enc = h[3];
	h += 4;
	if (!read_encoded_base(&s, ptr_enc, &h, hdr_vaddr, &frame))
		return true;
	if (count_enc == DW_EH_PE_omit || !read_encoded_base(&s, count_enc, &h, hdr_vaddr, &count))
		return true;
	if (!count || table_enc == DW_EH_PE_omit ||
	    (table_enc & ~DW_EH_PE_signed) == DW_EH_PE_uleb128)
		return true;
	if (frame != eh_vaddr)
		return true;
	esz = encoded_size(table_enc, NULL, NULL);
	if (!esz)
		return true;
	/* A count the table cannot hold would have libdw read past it. */
	if (count > (uint64_t)(end - h) / (2 * esz))
		return false;
	/* libdw decodes table entries relative to the table's own start. */
	s = (struct cfi_sec){ h, end, hdr_vaddr };
	for (uint64_t i = 0; i < count; i++) {
		const struct fde_range *fr;
		uint64_t loc, addr;

		if (!read_encoded_base(&s, table_enc, &h, hdr_vaddr, &loc) ||
		    !read_encoded_base(&s, table_enc, &h, hdr_vaddr, &addr))
			return false;
		fr = addr >= eh_vaddr ? range_at(v, n, addr - eh_vaddr) : NULL;
		if (!fr || fr->lo != loc)
			return false;
	}
	return true;
}

void fde_ranges__release(struct fde_ranges *r)
{
	if (!r)
		return;
	free(r->v);
	memset(r, 0, sizeof(*r));
}
