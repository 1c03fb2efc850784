// SPDX-License-Identifier: Apache-2.0
/*
 * CFI -> compiled unwind table.
 *
 * 1. Read the FDE ranges of .eh_frame and .debug_frame (fde_ranges.c).
 * 2. Cut the text into segments at every FDE start and end: within one
 *    segment the set of FDEs covering a pc is constant, so libdw's choice of
 *    FDE is too (its .eh_frame_hdr binary search and its FDE tree both
 *    pick by range).  Uncovered segments become UNWIND_CFA_NONE rows.
 * 3. In a covered segment, ask libdw for the rule at pc
 *    (dwarf_cfi_addrframe; .eh_frame first, .debug_frame second), take the
 *    row's extent from dwarf_frame_info, clip it to the segment, translate
 *    it (frame_rule.c) and continue at its end.
 * 4. Rows are appended in pc order, adjacent identical rules merged.
 *
 * Bounds: libdw re-runs an FDE's program from its start on every query, so
 * a query costs up to the FDE's instruction bytes and a segment's cost
 * grows with the square of its rows.  Past UNWIND_TABLE_MAX_RANGE_ROWS the
 * rest of a segment is one UNSUPPORTED row (counted), and the sum of every
 * query's bound is capped, linearly in the CFI size (-E2BIG).  That bound
 * holds only if libdw runs no FDE the scan did not see: an .eh_frame_hdr
 * whose table points anywhere else makes the .eh_frame unusable here.
 * Total rows and FDEs are capped too (-E2BIG).
 */
#include "unwind/unwind_table.h"

#include <elf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "lib/elf_bounds.h"
#include "unwind/fde_ranges.h"
#include "unwind/frame_rule.h"

#ifndef SHT_X86_64_UNWIND
#define SHT_X86_64_UNWIND 0x70000001
#endif

/* Where a row came from, beyond its rules: rows of different origin are
 * kept apart so the stats (and a future row flag) stay exact. */
enum row_origin {
	ORIGIN_PLAIN = 0,
	ORIGIN_PLT = 1,
	ORIGIN_SIGNAL = 2,
};

struct builder {
	Elf *elf;
	Dwarf *dwarf;		/* .debug_frame's owner, or NULL */
	Dwarf_CFI *eh_cfi;	/* from dwarf_getcfi_elf: must be ended */
	Dwarf_CFI *debug_cfi;	/* owned by dwarf */
	struct fde_ranges fdes; /* both sections' ranges */
	struct unwind_table *t;
	size_t cap; /* rows allocated in t->rows */
	enum row_origin last_origin;
	uint64_t lo, hi; /* text covered */
	uint64_t work;	 /* sum of the queries' cost bounds */
	uint64_t budget; /* the most work allowed */
};

static void builder__release(struct builder *b)
{
	if (b->eh_cfi)
		dwarf_cfi_end(b->eh_cfi);
	if (b->dwarf)
		dwarf_end(b->dwarf);
	if (b->elf)
		elf_end(b->elf);
	fde_ranges__release(&b->fdes);
}

/* Appends the row starting at pc, merging it into an identical previous. */
static int builder__push(struct builder *b, uint64_t pc, const struct unwind_row *rule,
			 enum row_origin origin)
{
	struct unwind_table *t = b->t;
	struct unwind_row *r;

	if (++t->st.rows_raw > UNWIND_TABLE_MAX_ROWS)
		return -E2BIG;
	if (t->nrows && origin == b->last_origin &&
	    frame_rule__same_row(&t->rows[t->nrows - 1], rule))
		return 0;
	if (t->nrows == b->cap) {
		size_t cap = b->cap ? 2 * b->cap : 1024;

		if (cap > UNWIND_TABLE_MAX_ROWS)
			cap = UNWIND_TABLE_MAX_ROWS;
		r = realloc(t->rows, cap * sizeof(*r));
		if (!r)
			return -ENOMEM;
		t->rows = r;
		b->cap = cap;
	}
	r = &t->rows[t->nrows++];
	*r = *rule;
	r->pc = (__u32)pc; /* pc < hi <= UNWIND_TABLE_MAX_VADDR */
	b->last_origin = origin;
	if (origin == ORIGIN_PLT)
		t->st.plt_ranges++;
	else if (origin == ORIGIN_SIGNAL)
		t->st.signal_ranges++;
	return 0;
}

static int builder__push_type(struct builder *b, uint64_t pc, enum unwind_cfa type)
{
	struct unwind_row r = { .cfa_type = type };

	if (type == UNWIND_CFA_UNSUPPORTED)
		r.rbp_rule = r.ra_rule = UNWIND_REG_UNSUPPORTED;
	return builder__push(b, pc, &r, ORIGIN_PLAIN);
}

/*
 * A PLT rule UNWIND_CFA_PLT cannot carry, as plain RSP rows: in each
 * 16-byte slot, CFA = RSP + base below the threshold and RSP + base + 8 from
 * it on.  (pc & 15) is the same for ELF and runtime addresses, as load
 * biases are page-aligned.
 */
static int builder__push_plt_split(struct builder *b, uint64_t pc, uint64_t end,
				   const struct frame_rule *fr)
{
	struct unwind_row hi_row = fr->row;
	int err;

	hi_row.cfa_off += 8;
	for (uint64_t slot = pc & ~15ULL; slot < end; slot += 16) {
		uint64_t a = pc > slot ? pc : slot, m = slot + fr->plt_thresh;
		uint64_t z = end < slot + 16 ? end : slot + 16;

		if (a < m && a < z) {
			err = builder__push(b, a, &fr->row, ORIGIN_PLT);
			if (err)
				return err;
		}
		if (m < a)
			m = a;
		if (m < z) {
			err = builder__push(b, m, &hi_row, ORIGIN_PLT);
			if (err)
				return err;
		}
	}
	return 0;
}

/* libdw's rule at pc, .eh_frame first; NULL when neither has one. */
static Dwarf_Frame *builder__frame(struct builder *b, uint64_t pc)
{
	Dwarf_Frame *f = NULL;

	if (b->eh_cfi && dwarf_cfi_addrframe(b->eh_cfi, pc, &f) == 0)
		return f;
	f = NULL;
	if (b->debug_cfi && dwarf_cfi_addrframe(b->debug_cfi, pc, &f) == 0)
		return f;
	return NULL;
}

/*
 * Rows for [s, e), a segment some FDE covers; cost bounds one libdw query
 * there (the largest instruction stream among the covering FDEs).
 */
static int builder__segment(struct builder *b, uint64_t s, uint64_t e, uint64_t cost)
{
	uint64_t pc = s;
	int err = 0;

	for (unsigned n = 0; pc < e && !err; n++) {
		struct frame_rule fr;
		Dwarf_Addr start, end;
		Dwarf_Frame *f;

		if (n == UNWIND_TABLE_MAX_RANGE_ROWS)
			return builder__push_type(b, pc, UNWIND_CFA_UNSUPPORTED);
		/* + a constant for the query itself (lookup, malloc). */
		b->work += cost + 64;
		if (b->work > b->budget)
			return -E2BIG;
		/* Covered per the FDE headers but libdw cannot evaluate the
		 * program (bad opcode, bad CIE): not "no CFI", unsupported. */
		f = builder__frame(b, pc);
		if (!f || dwarf_frame_info(f, &start, &end, NULL) < 0 || end <= pc) {
			free(f);
			return builder__push_type(b, pc, UNWIND_CFA_UNSUPPORTED);
		}
		if (end > e)
			end = e;
		frame_rule__translate(f, &fr);
		free(f);
		if (fr.plt_split)
			err = builder__push_plt_split(b, pc, end, &fr);
		else if (fr.signal)
			err = builder__push(b, pc, &fr.row, ORIGIN_SIGNAL);
		else
			err = builder__push(b, pc, &fr.row, fr.plt ? ORIGIN_PLT : ORIGIN_PLAIN);
		pc = end;
	}
	return err;
}

struct event {
	uint64_t pos;
	uint32_t idx; /* into b->fdes.v */
	bool start;
};

static int cmp_event(const void *a, const void *b)
{
	const struct event *x = a, *y = b;

	return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/*
 * Sweeps the segments between consecutive FDE boundaries in [lo, hi),
 * keeping the set of FDEs that cover the current one: covered segments get
 * libdw's rows, the rest UNWIND_CFA_NONE.
 */
static int builder__sweep(struct builder *b)
{
	const struct fde_range *v = b->fdes.v;
	size_t n = b->fdes.n, ne = 0, nact = 0;
	uint32_t *act = NULL, *slot = NULL;
	struct event *ev;
	uint64_t cur = b->lo;
	int err = 0;

	ev = malloc((2 * n + 1) * sizeof(*ev));
	act = malloc((n + 1) * sizeof(*act));
	slot = malloc((n + 1) * sizeof(*slot));
	if (!ev || !act || !slot) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		if (v[i].lo >= v[i].hi)
			continue;
		ev[ne++] = (struct event){ v[i].lo, (uint32_t)i, true };
		ev[ne++] = (struct event){ v[i].hi, (uint32_t)i, false };
	}
	qsort(ev, ne, sizeof(*ev), cmp_event);

	for (size_t i = 0; i < ne && !err;) {
		uint64_t s = ev[i].pos, e, cost = 0;

		/* Apply every start and end at s; act[] is the covering set. */
		for (; i < ne && ev[i].pos == s; i++) {
			uint32_t k = ev[i].idx;

			if (ev[i].start) {
				slot[k] = (uint32_t)nact;
				act[nact++] = k;
			} else {
				act[slot[k]] = act[--nact];
				slot[act[slot[k]]] = slot[k];
			}
		}
		if (!nact || i == ne)
			continue;
		e = ev[i].pos;
		if (cur < s)
			err = builder__push_type(b, cur, UNWIND_CFA_NONE);
		if (!err && nact > UNWIND_TABLE_MAX_OVERLAP) {
			/* Real code has one FDE per pc, two with both sections. */
			err = builder__push_type(b, s, UNWIND_CFA_UNSUPPORTED);
		} else if (!err) {
			bool regs_ok = true;

			for (size_t k = 0; k < nact; k++) {
				if (v[act[k]].insn > cost)
					cost = v[act[k]].insn;
				regs_ok &= v[act[k]].regs_ok;
			}
			/* a program naming a register past the bound: libdw
			 * would allocate by its number at every query */
			err = regs_ok ? builder__segment(b, s, e, cost)
				      : builder__push_type(b, s, UNWIND_CFA_UNSUPPORTED);
		}
		cur = e;
	}
	if (!err && cur < b->hi)
		err = builder__push_type(b, cur, UNWIND_CFA_NONE);
out:
	free(ev);
	free(act);
	free(slot);
	return err;
}

/*
 * The executable text: the hull of the PF_X PT_LOAD segments.  A file
 * without any (a separate debug file) falls back to the FDE hull.
 */
static int builder__text(struct builder *b)
{
	size_t nph;

	b->lo = UINT64_MAX;
	b->hi = 0;
	if (elf_getphdrnum(b->elf, &nph))
		return -ENOEXEC;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(b->elf, (int)i, &ph))
			return -ENOEXEC;
		if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X) || !ph.p_memsz)
			continue;
		if (ph.p_vaddr + ph.p_memsz < ph.p_vaddr)
			return -ENOEXEC;
		if (ph.p_vaddr < b->lo)
			b->lo = ph.p_vaddr;
		if (ph.p_vaddr + ph.p_memsz > b->hi)
			b->hi = ph.p_vaddr + ph.p_memsz;
	}
	if (b->lo >= b->hi) {
		for (size_t i = 0; i < b->fdes.n; i++) {
			if (b->fdes.v[i].lo < b->lo)
				b->lo = b->fdes.v[i].lo;
			if (b->fdes.v[i].hi > b->hi)
				b->hi = b->fdes.v[i].hi;
		}
	}
	if (b->lo >= b->hi)
		return -ENODATA;
	if (b->hi > UNWIND_TABLE_MAX_VADDR)
		return -E2BIG;

	/* CFI outside the text describes nothing that runs: clip it. */
	size_t k = 0;

	for (size_t i = 0; i < b->fdes.n; i++) {
		struct fde_range r = b->fdes.v[i];

		if (r.lo < b->lo)
			r.lo = b->lo;
		if (r.hi > b->hi)
			r.hi = b->hi;
		if (r.lo < r.hi)
			b->fdes.v[k++] = r;
	}
	b->fdes.n = k;
	return k ? 0 : -ENODATA;
}

/* A CFI section's data, or NULL when absent or NOBITS (stripped debug file). */
static Elf_Data *section_data(Elf_Scn *scn, GElf_Shdr *sh)
{
	Elf_Data *d;

	if (!scn || sh->sh_type == SHT_NOBITS)
		return NULL;
	/* libdw reads .debug_frame decompressed; do it first so our scan and
	 * libdw's see the same bytes. */
	if ((sh->sh_flags & SHF_COMPRESSED) && elf_compress(scn, 0, 0) < 0)
		return NULL;
	d = elf_getdata(scn, NULL);
	return d && d->d_buf && d->d_size ? d : NULL;
}

/*
 * The sections dwarf_getcfi_elf would use: the first ".eh_frame" and the
 * last ".eh_frame_hdr" before it (libdw/dwarf_getcfi_elf.c getcfi_shdr),
 * and the first ".debug_frame".
 */
struct cfi_sections {
	Elf_Scn *eh, *hdr, *dbg;
	GElf_Shdr eh_sh, hdr_sh, dbg_sh;
};

static int find_sections(Elf *elf, struct cfi_sections *cs)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	if (elf_getshdrstrndx(elf, &shstrndx))
		return -ENOEXEC;
	while ((scn = elf_nextscn(elf, scn))) {
		const char *name;
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh) || !(name = elf_strptr(elf, shstrndx, sh.sh_name)))
			continue;
		if (!cs->eh && !strcmp(name, ".eh_frame_hdr")) {
			cs->hdr = scn;
			cs->hdr_sh = sh;
		} else if (!cs->eh && !strcmp(name, ".eh_frame")) {
			cs->eh = scn;
			cs->eh_sh = sh;
		} else if (!cs->dbg && !strcmp(name, ".debug_frame")) {
			cs->dbg = scn;
			cs->dbg_sh = sh;
		}
	}
	return 0;
}

/* The .eh_frame's FDE ranges and libdw's view of it; 0 also when unusable. */
static int builder__open_eh(struct builder *b, const unsigned char *ident,
			    const struct cfi_sections *cs, Elf_Data *eh, size_t *refused)
{
	Elf_Data *hdr =
		cs->hdr && cs->hdr_sh.sh_size <= ELF_CFI_MAX ? elf_rawdata(cs->hdr, NULL) : NULL;
	int err;

	err = fde_ranges__scan(&b->fdes, ident, eh, true, cs->eh_sh.sh_addr, UNWIND_TABLE_MAX_FDES);
	if (err || !b->fdes.n)
		return err;
	/* libdw skips a header it cannot read (hdr NULL); one it would
	 * misread, or whose table leads to unscanned bytes, disqualifies the
	 * section: the work bound depends on it. */
	if (!cs->hdr || !hdr ||
	    fde_ranges__hdr_consistent(b->fdes.v, b->fdes.n, hdr, cs->hdr_sh.sh_addr,
				       cs->eh_sh.sh_addr))
		b->eh_cfi = dwarf_getcfi_elf(b->elf);
	/* Unusable: its ranges must not claim CFI no query will find. */
	if (!b->eh_cfi) {
		*refused += b->fdes.n;
		b->fdes.n = 0;
	}
	return 0;
}

/*
 * Whether libdw may open the file's DWARF for its .debug_frame:
 * dwarf_begin_elf reads every .debug_* section (inflating the compressed
 * ones), not only the CFI.
 */
static int dwarf_bounded(Elf *elf)
{
	struct elf_dwarf_bytes db;

	elf_dwarf_bytes(elf, &db);
	return db.total <= ELF_CFI_MAX;
}

/* Opens both CFI sources and reads their FDE ranges. */
static int builder__open_cfi(struct builder *b, const unsigned char *ident)
{
	struct cfi_sections cs = { 0 };
	Elf_Data *eh = NULL, *dbg = NULL;
	bool too_big = false;
	size_t refused = 0;
	int err;

	err = find_sections(b->elf, &cs);
	if (err)
		return err;
	/* libelf reads (and inflates) a section whole, to the size its header
	 * claims: a target's file must not make us allocate gigabytes.  A
	 * source past the bound is left out; the other one still serves. */
	if (cs.eh && elf_section_bytes(b->elf, &cs.eh_sh, ".eh_frame") > ELF_CFI_MAX)
		cs.eh = NULL, too_big = true;
	if (cs.dbg && elf_section_bytes(b->elf, &cs.dbg_sh, ".debug_frame") > ELF_CFI_MAX)
		cs.dbg = NULL, too_big = true;
	if (too_big && !cs.eh && !cs.dbg)
		return -E2BIG;
	/* Other types (NOBITS in a debug file, say) libdw refuses. */
	if (cs.eh && (cs.eh_sh.sh_type == SHT_PROGBITS || cs.eh_sh.sh_type == SHT_X86_64_UNWIND) &&
	    (eh = section_data(cs.eh, &cs.eh_sh)))
		b->t->st.cfi_bytes += eh->d_size;
	if (cs.dbg && (dbg = section_data(cs.dbg, &cs.dbg_sh)))
		b->t->st.cfi_bytes += dbg->d_size;
	if (!eh && !dbg)
		return -ENODATA;

	if (eh) {
		err = builder__open_eh(b, ident, &cs, eh, &refused);
		if (err)
			return err;
	}
	if (dbg) {
		size_t before = b->fdes.n;

		err = fde_ranges__scan(&b->fdes, ident, dbg, false, 0, 2 * UNWIND_TABLE_MAX_FDES);
		if (err)
			return err;
		if (b->fdes.n > before && dwarf_bounded(b->elf)) {
			b->dwarf = dwarf_begin_elf(b->elf, DWARF_C_READ, NULL);
			b->debug_cfi = b->dwarf ? dwarf_getcfi(b->dwarf) : NULL;
		}
		if (!b->debug_cfi) {
			refused += b->fdes.n - before;
			b->fdes.n = before;
		}
	}
	for (size_t i = 0; i < b->fdes.n; i++)
		b->t->st.fdes += b->fdes.v[i].lo < b->fdes.v[i].hi;
	b->t->st.bad_entries = b->fdes.bad;
	b->t->st.bad_regs = b->fdes.bad_regs;
	/* Each CIE's initial instructions run once per CFI in libdw. */
	b->budget = UNWIND_TABLE_WORK_BASE + UNWIND_TABLE_WORK_PER_BYTE * b->t->st.cfi_bytes;
	b->work = b->fdes.cie_insn;
	if (b->work > b->budget)
		return -E2BIG;
	if (!b->t->st.fdes)
		/* Sections full of junk are corrupt; empty ones are no CFI. */
		return b->fdes.bad || refused ? -ENOEXEC : -ENODATA;
	return 0;
}

/* Counts what the finished table holds, by rule. */
static void table__count(struct unwind_table *t)
{
	for (uint32_t i = 0; i < t->nrows; i++) {
		const struct unwind_row *r = &t->rows[i];

		if (r->cfa_type == UNWIND_CFA_UNSUPPORTED ||
		    r->rbp_rule == UNWIND_REG_UNSUPPORTED || r->ra_rule == UNWIND_REG_UNSUPPORTED)
			t->st.unsupported_ranges++;
		if (r->flags & UNWIND_ROW_FP_EXACT)
			t->st.fp_exact_ranges++;
	}
	t->st.rows = t->nrows;
}

int unwind_table__build(int fd, struct unwind_table **out)
{
	struct builder b = { 0 };
	const unsigned char *ident;
	GElf_Ehdr eh;
	int err;

	*out = NULL;
	b.t = calloc(1, sizeof(*b.t));
	if (!b.t)
		return -ENOMEM;
	/* Idempotent; libelf refuses elf_begin until it has been called. */
	elf_version(EV_CURRENT);
	/* ELF_C_READ (pread into bounded heap copies), never mmap: the file
	 * is a target's, which may truncate it while we read (SIGBUS) */
	b.elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!b.elf || elf_kind(b.elf) != ELF_K_ELF || !gelf_getehdr(b.elf, &eh) ||
	    !(ident = (const unsigned char *)elf_getident(b.elf, NULL))) {
		err = -ENOEXEC;
		goto err_out;
	}
	/* Rows encode x86-64 registers; relocatable objects have no final
	 * addresses. */
	if (ident[EI_CLASS] != ELFCLASS64 || ident[EI_DATA] != ELFDATA2LSB ||
	    eh.e_machine != EM_X86_64 || (eh.e_type != ET_EXEC && eh.e_type != ET_DYN)) {
		err = -ENOEXEC;
		goto err_out;
	}
	err = builder__open_cfi(&b, ident);
	if (err)
		goto err_out;
	err = builder__text(&b);
	if (err)
		goto err_out;
	b.t->vaddr_lo = b.lo;
	b.t->vaddr_hi = b.hi;
	err = builder__sweep(&b);
	if (err)
		goto err_out;

	table__count(b.t);
	b.t->st.work = b.work;
	if (b.t->nrows < b.cap) {
		struct unwind_row *r = realloc(b.t->rows, b.t->nrows * sizeof(*r));

		if (r) /* shrinking failed: keep the larger block */
			b.t->rows = r;
	}
	builder__release(&b);
	*out = b.t;
	return 0;

err_out:
	builder__release(&b);
	unwind_table__free(b.t);
	return err;
}

void unwind_table__free(struct unwind_table *t)
{
	if (!t)
		return;
	free(t->rows);
	free(t);
}

const struct unwind_row *unwind_table__find(const struct unwind_table *t, uint64_t vaddr)
{
	uint32_t lo = 0, hi;

	if (!t || !t->nrows || vaddr < t->vaddr_lo || vaddr >= t->vaddr_hi)
		return NULL;
	/* The last row with pc <= vaddr; rows[0].pc == vaddr_lo. */
	hi = t->nrows;
	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (t->rows[mid].pc <= vaddr)
			lo = mid;
		else
			hi = mid;
	}
	return &t->rows[lo];
}
