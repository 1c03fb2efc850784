// SPDX-License-Identifier: Apache-2.0
/*
 * One ELF file under libdwfl: file offset -> virtual address (PT_LOAD),
 * then the inline chain and source line from DWARF, or the containing
 * symbol from .symtab/.dynsym when there is no DWARF for the address.
 *
 * Each module gets its own Dwfl so that the symbolizer can close one
 * without touching the others.  The file is reported with
 * dwfl_report_elf(base 0, add_p_vaddr) so an ET_DYN object sits at its
 * link-time addresses; the module bias is still applied everywhere in
 * case libdwfl ever places it elsewhere.
 */
#include "symbolize/elf_module.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/safe_open.h"
#include "lib/strpool.h"
#include "symbolize/buildid.h"
#include "symbolize/debuginfod.h"
#include "symbolize/debuglink.h"
#include "lib/elf_bounds.h"
#include "symbolize/libdw_guard.h"

/*
 * Backward steps when looking for the symbol containing an address; only
 * symbols nested in a huge one (asm blobs) make the walk long, and giving
 * up there reports "unresolved", never a wrong name.
 */
#define SYM_WALK_MAX 1024
/*
 * Debug sections read at most per file of a profiled process: read with
 * pread (never mmap, see find_elf_ours), libdw copies every .debug_*
 * section into memory when it opens the DWARF, and the symbolizer keeps
 * its modules open.  A file with more names its functions from its symbol
 * table only.
 */
#define SYM_DWARF_MAX (64u << 20)
/*
 * DWARF inflated into the heap at most per file of the server's store (its
 * files are mapped, but compressed sections are inflated by libdw): an
 * upload of a few MB of compressed zeros would otherwise take GBs.
 */
#define SYM_INFLATE_MAX (1ull << 30)
/*
 * CU address ranges indexed per file (24 bytes each).  A real binary has
 * one or a few per CU (libtorch_cuda: ~10^5); a crafted range list
 * encodes one in a few bytes, so without a cap a file's DWARF could make
 * the index hundreds of MB.  Ranges past it are not indexed (their
 * addresses fall back to the symbol table).
 */
#define SYM_CU_RANGES_MAX (1u << 20)

struct load_seg {
	uint64_t off, filesz, vaddr;
	int exec;
};

/* A CU's address range, for files without (complete) .debug_aranges. */
struct cu_range {
	uint64_t lo, hi; /* [lo, hi), DWARF addresses */
	Dwarf_Off die;	 /* offset of the CU DIE */
};

struct msym {
	uint64_t start, end; /* [start, end); size-0 symbols: end = start + 1 */
	const char *name;    /* in the ELF's string table */
	uint32_t pref;	     /* higher wins among equal starts */
};

struct elf_module {
	Dwfl *dwfl;
	Dwfl_Module *mod;
	GElf_Addr bias; /* main file's load bias inside dwfl */
	struct load_seg *segs;
	size_t nsegs;
	struct msym *syms;
	uint64_t *maxend; /* maxend[i] = max(syms[0..i].end) */
	size_t nsyms;
	int syms_loaded;
	struct cu_range *cus;
	size_t ncus;
	int cus_loaded;
	uint8_t bid[BUILD_ID_MAX];
	size_t bid_len;
	int main_has_dwarf; /* debuginfo lookups are then for the dwz file */
	int debug_found;
	int debuginfod_tried;
	int dwarf_too_big;  /* its DWARF is over SYM_DWARF_MAX: symbols only */
	int dwarf_checked;  /* dwarf_guard__init ran (on first use) */
	int dwarf_bad;	    /* and refused it: symbols only */
	int symtab_too_big; /* symbol tables past elf_bounds.h: DWARF only */
	int degraded_told;  /* elf_module__newly_degraded said so */
	int hostile;	    /* a profiled process's file (elf_module__open) */
	int in_getdwarf;    /* dwfl_module_getdwarf is running (find_debuginfo) */
	struct dwarf_guard guard;
	struct debuginfod *dbgd;
	Elf *pending_elf; /* until libdwfl takes them (find_elf_ours) */
	int pending_fd;
};

/*
 * The main file, handed to libdwfl when it first needs it: our own Elf,
 * read with ELF_C_READ (pread into heap copies).  dwfl_report_elf would
 * mmap the file, and a profiled process truncating its own library while
 * we read it would kill us with SIGBUS.
 */
static int find_elf_ours(Dwfl_Module *mod, void **ud, const char *name, Dwarf_Addr base,
			 char **file_name, Elf **elfp)
{
	struct elf_module *m = *ud;
	int fd;

	if (!m || !m->pending_elf)
		return -1;
	*file_name = strdup(name);
	if (!*file_name)
		return -1;
	*elfp = m->pending_elf; /* libdwfl owns both from now on */
	fd = m->pending_fd;
	m->pending_elf = NULL;
	m->pending_fd = -1;
	return fd;
}

/* Whether DWARF of that size may be opened for m (see SYM_DWARF_MAX and
 * SYM_INFLATE_MAX). */
static int dwarf_fits(const struct elf_module *m, const struct elf_dwarf_bytes *b)
{
	return m->hostile ? b->total <= SYM_DWARF_MAX : b->inflated <= SYM_INFLATE_MAX;
}

/* Whether the debug file open on fd fits (libdw would read it next). */
static int debug_file_fits(const struct elf_module *m, int fd)
{
	struct elf_dwarf_bytes b;
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	int ok = e && elf_kind(e) == ELF_K_ELF;

	if (ok) {
		elf_dwarf_bytes(e, &b);
		ok = dwarf_fits(m, &b);
	}
	elf_end(e);
	return ok;
}

/*
 * Separate debug info, in order: /usr/lib/debug/.build-id/xx/yyyy.debug
 * (libdwfl), .gnu_debuglink next to the file, then debuginfod when the
 * symbolizer allows it.  Not dwfl_standard_find_debuginfo: it queries
 * debuginfod by itself whenever DEBUGINFOD_URLS is set.
 */
static int find_debuginfo(Dwfl_Module *mod, void **ud, const char *modname, Dwarf_Addr base,
			  const char *file_name, const char *debuglink, GElf_Word crc,
			  char **dbg_name)
{
	struct elf_module *m = *ud;
	int fd;

	fd = dwfl_build_id_find_debuginfo(mod, ud, modname, base, file_name, debuglink, crc,
					  dbg_name);
	/*
	 * When the main file has DWARF, or its debug file was already
	 * found, libdwfl is asking for the dwz alternate file: only the
	 * build-id lookup above knows how to find that one.
	 */
	if (!m || m->main_has_dwarf || m->debug_found)
		return fd;
	if (fd < 0 && file_name && debuglink)
		fd = debuglink_find(file_name, debuglink, crc, m->bid, m->bid_len, dbg_name);
	if (fd < 0 && m->dbgd && m->bid_len && !m->debuginfod_tried) {
		/* One query per module: libdwfl may ask twice (symtab, DWARF). */
		m->debuginfod_tried = 1;
		fd = debuginfod__find_debuginfo(m->dbgd, m->bid, m->bid_len, dbg_name);
	}
	if (fd < 0)
		return -1;
	if (!debug_file_fits(m, fd)) {
		/* Its symbols are still worth having (a stripped binary has only
		 * .dynsym); its DWARF is not to be opened.  Asked for the DWARF
		 * itself, libdwfl would read it at once: refused then. */
		m->dwarf_too_big = 1;
		if (m->in_getdwarf) {
			close(fd);
			free(*dbg_name);
			*dbg_name = NULL;
			return -1;
		}
	}
	m->debug_found = 1;
	return fd;
}

static const Dwfl_Callbacks callbacks = {
	.find_elf = find_elf_ours,
	.find_debuginfo = find_debuginfo,
	.section_address = dwfl_offline_section_address,
};

/* [lo, hi): where libdwfl places the file (base 0, add_p_vaddr: its
 * link-time addresses, as dwfl_report_elf would). */
static int load_range(Elf *elf, GElf_Addr *lo, GElf_Addr *hi)
{
	size_t phnum;
	int first = 1;

	if (elf_getphdrnum(elf, &phnum))
		return -ENOEXEC;
	*lo = *hi = 0;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (first) {
			*lo = ph.p_vaddr & -(ph.p_align ? ph.p_align : 1);
			first = 0;
		}
		if (ph.p_vaddr + ph.p_memsz > *hi)
			*hi = ph.p_vaddr + ph.p_memsz;
	}
	return first || *hi <= *lo ? -ENOEXEC : 0;
}

static int load_segments(struct elf_module *m, Elf *elf)
{
	size_t phnum;

	if (elf_getphdrnum(elf, &phnum))
		return -ENOEXEC;
	m->segs = calloc(phnum ? phnum : 1, sizeof(*m->segs));
	if (!m->segs)
		return -ENOMEM;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD || ph.p_filesz == 0 ||
		    ph.p_offset + ph.p_filesz < ph.p_offset)
			continue;
		m->segs[m->nsegs++] = (struct load_seg){
			.off = ph.p_offset,
			.filesz = ph.p_filesz,
			.vaddr = ph.p_vaddr,
			.exec = !!(ph.p_flags & PF_X),
		};
	}
	return 0;
}

int elf_module__open(const char *path, const uint8_t *bid, size_t bid_len, struct debuginfod *dbgd,
		     int hostile, struct elf_module **out)
{
	struct elf_module *m = NULL;
	const unsigned char *bits;
	GElf_Addr bits_vaddr, lo, hi;
	struct elf_dwarf_bytes dwarf;
	struct stat st;
	GElf_Ehdr eh;
	void **ud;
	Elf *elf;
	int fd, err, n;

	*out = NULL;
	fd = safe_open(AT_FDCWD, path, 0, &st);
	if (fd < 0)
		return fd == -EINVAL ? -ENOEXEC : fd;
	m = calloc(1, sizeof(*m));
	if (!m) {
		err = -ENOMEM;
		goto err_close;
	}
	m->dbgd = dbgd;
	m->pending_fd = -1;
	m->hostile = hostile;
	elf_version(EV_CURRENT);
	/* a target's file: ELF_C_READ, never mmap (see find_elf_ours) */
	m->pending_elf = elf_begin(fd, hostile ? ELF_C_READ : ELF_C_READ_MMAP, NULL);
	/*
	 * Only what a process maps (ET_EXEC, ET_DYN): libdwfl applies an
	 * ET_REL file's relocations in place, which in a read-only mapping
	 * (the server's store) is a SIGSEGV - an uploaded relocatable file
	 * with program headers crashed the server (fuzz_elf_module).
	 */
	if (!m->pending_elf || elf_kind(m->pending_elf) != ELF_K_ELF ||
	    !gelf_getehdr(m->pending_elf, &eh) || (eh.e_type != ET_EXEC && eh.e_type != ET_DYN) ||
	    load_range(m->pending_elf, &lo, &hi)) {
		err = -ENOEXEC;
		goto err_close;
	}
	m->dwfl = dwfl_begin(&callbacks);
	if (!m->dwfl) {
		err = -ENOMEM;
		goto err_close;
	}
	dwfl_report_begin(m->dwfl);
	m->mod = dwfl_report_module(m->dwfl, path, lo, hi);
	if (!m->mod) {
		err = -ENOEXEC;
		goto err_close;
	}
	m->pending_fd = fd; /* with the Elf, libdwfl's once it asks */
	fd = -1;
	dwfl_report_end(m->dwfl, NULL, NULL);
	/* Lets find_elf and find_debuginfo reach this module. */
	dwfl_module_info(m->mod, &ud, NULL, NULL, NULL, NULL, NULL, NULL);
	*ud = m;

	elf = dwfl_module_getelf(m->mod, &m->bias);
	if (!elf) {
		err = -ENOEXEC;
		goto err_free;
	}
	n = dwfl_module_build_id(m->mod, &bits, &bits_vaddr);
	if (n > 0) {
		m->bid_len = (size_t)n < BUILD_ID_MAX ? (size_t)n : BUILD_ID_MAX;
		memcpy(m->bid, bits, m->bid_len);
	}
	/* A caller's id longer than BUILD_ID_MAX was truncated the same way. */
	if (bid && bid_len) {
		size_t want = bid_len < BUILD_ID_MAX ? bid_len : BUILD_ID_MAX;

		if (want != m->bid_len || memcmp(bid, m->bid, want)) {
			err = -ESTALE;
			goto err_free;
		}
	}
	elf_dwarf_bytes(elf, &dwarf);
	m->main_has_dwarf = dwarf.has_info;
	m->dwarf_too_big = !dwarf_fits(m, &dwarf);
	m->symtab_too_big = (hostile && !elf_symtabs_bounded(elf)) || !elf_debugdata_bounded(elf);
	err = load_segments(m, elf);
	if (err)
		goto err_free;
	*out = m;
	return 0;

err_close:
	if (fd >= 0)
		close(fd);
err_free:
	elf_module__free(m);
	return err;
}

void elf_module__free(struct elf_module *m)
{
	if (!m)
		return;
	if (m->dwfl)
		dwfl_end(m->dwfl);
	elf_end(m->pending_elf); /* not taken by libdwfl */
	if (m->pending_fd >= 0)
		close(m->pending_fd);
	free(m->segs);
	free(m->syms);
	free(m->maxend);
	free(m->cus);
	free(m);
}

/* File offset -> address in dwfl's space; 0 when no PT_LOAD holds it. */
static int offset_to_addr(const struct elf_module *m, uint64_t off, Dwarf_Addr *addr)
{
	const struct load_seg *best = NULL;

	/* Segments may share a page at their edges: prefer the code one. */
	for (size_t i = 0; i < m->nsegs; i++) {
		const struct load_seg *s = &m->segs[i];

		if (off < s->off || off - s->off >= s->filesz)
			continue;
		if (!best || (s->exec && !best->exec))
			best = s;
	}
	if (!best)
		return 0;
	*addr = best->vaddr + (off - best->off) + m->bias;
	return 1;
}

static unsigned leading_underscores(const char *s)
{
	unsigned n = 0;

	while (s[n] == '_')
		n++;
	return n;
}

/*
 * Equal starts are aliases: order them worst first, so that walking back
 * meets the best first.  Same choice as perf: sized, then non-weak, then
 * global, then fewer leading underscores, then the longer name.
 */
static int cmp_msym(const void *a, const void *b)
{
	const struct msym *x = a, *y = b;
	unsigned ux, uy;
	size_t lx, ly;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if (x->pref != y->pref)
		return x->pref < y->pref ? -1 : 1;
	ux = leading_underscores(x->name);
	uy = leading_underscores(y->name);
	if (ux != uy)
		return ux > uy ? -1 : 1;
	lx = strlen(x->name);
	ly = strlen(y->name);
	if (lx != ly)
		return lx < ly ? -1 : 1;
	return strcmp(x->name, y->name);
}

static uint32_t sym_pref(const GElf_Sym *sym)
{
	unsigned bind = GELF_ST_BIND(sym->st_info);
	unsigned type = GELF_ST_TYPE(sym->st_info);

	return (sym->st_size ? 8u : 0u) + (bind != STB_WEAK ? 4u : 0u) +
	       (bind == STB_GLOBAL ? 2u : 0u) + (type == STT_FUNC || type == STT_GNU_IFUNC);
}

/* Sorted function symbols, built once: dwfl's own lookup is linear. */
static int load_symbols(struct elf_module *m)
{
	struct symstr_guard strs = { 0 };
	int total;

	if (m->syms_loaded || m->symtab_too_big)
		return 0;
	m->syms_loaded = 1;
	total = dwfl_module_getsymtab(m->mod);
	if (total <= 1)
		return 0;
	m->syms = calloc((size_t)total, sizeof(*m->syms));
	m->maxend = calloc((size_t)total, sizeof(*m->maxend));
	if (!m->syms || !m->maxend) {
		free(m->syms);
		free(m->maxend);
		m->syms = NULL;
		m->maxend = NULL;
		m->syms_loaded = 0; /* try again later */
		return -ENOMEM;
	}
	for (int i = 1; i < total; i++) {
		GElf_Sym sym;
		GElf_Addr addr;
		GElf_Word shndx;
		const char *name;
		unsigned type;
		Elf *elf = NULL;

		name = dwfl_module_getsym_info(m->mod, i, &sym, &addr, &shndx, &elf, NULL);
		name = symstr_guard__name(&strs, elf, name);
		if (!name || !*name || shndx == SHN_UNDEF || shndx == SHN_ABS)
			continue;
		type = GELF_ST_TYPE(sym.st_info);
		if (type != STT_FUNC && type != STT_GNU_IFUNC &&
		    !(type == STT_NOTYPE && sym.st_size))
			continue;
		uint64_t end = addr + (sym.st_size ? sym.st_size : 1);

		if (end <= addr)
			continue;
		m->syms[m->nsyms++] = (struct msym){
			.start = addr,
			.end = end,
			.name = name,
			.pref = sym_pref(&sym),
		};
	}
	qsort(m->syms, m->nsyms, sizeof(*m->syms), cmp_msym);
	for (size_t i = 0; i < m->nsyms; i++) {
		uint64_t prev = i ? m->maxend[i - 1] : 0;

		m->maxend[i] = m->syms[i].end > prev ? m->syms[i].end : prev;
	}
	return 0;
}

/*
 * The symbol whose [start, end) holds addr, innermost and preferred
 * first; NULL otherwise - never the nearest symbol below.
 */
static const struct msym *find_symbol(const struct elf_module *m, uint64_t addr)
{
	size_t lo = 0, hi = m->nsyms;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (m->syms[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo, steps = 0; i-- > 0 && steps < SYM_WALK_MAX; steps++) {
		if (m->maxend[i] <= addr)
			break;
		if (m->syms[i].end > addr)
			return &m->syms[i];
	}
	return NULL;
}

/* Demangled and interned; NULL only on ENOMEM. */
static const char *intern_func(struct strpool *pool, const char *raw)
{
	char *dem = sym_demangle(raw);
	const char *r = strpool__intern(pool, dem ? dem : raw);

	free(dem);
	return r;
}

/*
 * Function name of a DIE, demangled when it is C++ and interned.  A C
 * linkage name is only an asm label ("__GI_qsort" for qsort): the source
 * name reads better there.  NULL when the DIE has no name or on ENOMEM
 * (*nomem set).
 */
static const char *die_func(const struct dwarf_guard *g, Dwarf_Die *die, struct strpool *pool,
			    int *nomem)
{
	Dwarf_Attribute a;
	const char *linkage = NULL, *name = NULL, *r;
	char *dem = NULL;

	if (dwarf_attr_integrate(die, DW_AT_linkage_name, &a) ||
	    dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a))
		linkage = dwarf_guard__formstring(g, &a);
	if (linkage)
		dem = sym_demangle(linkage);
	if (!dem && dwarf_attr_integrate(die, DW_AT_name, &a))
		name = dwarf_guard__formstring(g, &a);
	if (!dem && !name)
		name = linkage;
	if (!dem && !name)
		return NULL;
	r = strpool__intern(pool, dem ? dem : name);
	free(dem);
	*nomem = !r;
	return r;
}

/* Bounded frame list: when full, the last slot keeps the newest frame. */
struct frames {
	struct sym_frame *f;
	int n, cap;
};

static void frames_push(struct frames *fs, const struct sym_frame *fr)
{
	if (fs->n == fs->cap)
		fs->f[fs->cap - 1] = *fr;
	else
		fs->f[fs->n++] = *fr;
}

/* Where an inlined call was made: the location for the frame below it. */
static void call_site(const struct dwarf_guard *g, Dwarf_Die *inl, const char **file,
		      uint32_t *line)
{
	Dwarf_Attribute a;
	Dwarf_Word v;
	Dwarf_Die cu;
	Dwarf_Files *files;
	size_t nfiles;

	*file = NULL;
	*line = 0;
	if (dwarf_formudata(dwarf_attr(inl, DW_AT_call_line, &a), &v) == 0 && v <= UINT32_MAX)
		*line = (uint32_t)v;
	/* The file index refers to the line table of the DIE's own unit. */
	if (dwarf_formudata(dwarf_attr(inl, DW_AT_call_file, &a), &v) == 0 &&
	    dwarf_diecu(inl, &cu, NULL, NULL) && dwarf_guard__cu_ok(g, &cu) &&
	    dwarf_getsrcfiles(&cu, &files, &nfiles) == 0 && v < nfiles)
		*file = dwarf_filesrc(files, v, NULL, NULL);
}

/* Source line of addr in its CU; file NULL when unknown. */
static void src_line(Dwarf_Die *cu, Dwarf_Addr pc, const char **file, uint32_t *line)
{
	Dwarf_Line *ln = dwarf_getsrc_die(cu, pc);
	int l = 0;

	*file = NULL;
	*line = 0;
	if (!ln)
		return;
	*file = dwarf_linesrc(ln, NULL, NULL);
	if (dwarf_lineno(ln, &l) == 0 && l > 0)
		*line = (uint32_t)l;
}

static int cmp_cu_range(const void *a, const void *b)
{
	const struct cu_range *x = a, *y = b;

	if (x->lo != y->lo)
		return x->lo < y->lo ? -1 : 1;
	return x->hi < y->hi ? -1 : x->hi > y->hi;
}

/*
 * libdw finds a CU through .debug_aranges, which clang does not emit by
 * default and which may miss CUs (assembly): index CU ranges ourselves,
 * once, the first time libdw comes up empty.
 */
static int load_cu_index(struct elf_module *m, Dwarf *dw)
{
	Dwarf_CU *cu = NULL;
	Dwarf_Die cudie;
	uint8_t unit_type;
	size_t cap = 0;

	if (m->cus_loaded)
		return 0;
	m->cus_loaded = 1;
	while (m->ncus < SYM_CU_RANGES_MAX &&
	       dwarf_get_units(dw, cu, &cu, NULL, &unit_type, &cudie, NULL) == 0) {
		Dwarf_Addr base, lo, hi;
		ptrdiff_t o = 0;

		if (unit_type != DW_UT_compile)
			continue;
		while (m->ncus < SYM_CU_RANGES_MAX &&
		       (o = dwarf_ranges(&cudie, o, &base, &lo, &hi)) > 0) {
			if (hi <= lo)
				continue;
			if (m->ncus == cap) {
				size_t ncap = cap ? 2 * cap : 64;
				struct cu_range *t;

				t = realloc(m->cus, ncap * sizeof(*t));
				if (!t) {
					free(m->cus);
					m->cus = NULL;
					m->ncus = 0;
					m->cus_loaded = 0; /* try again later */
					return -ENOMEM;
				}
				m->cus = t;
				cap = ncap;
			}
			m->cus[m->ncus++] = (struct cu_range){
				.lo = lo,
				.hi = hi,
				.die = dwarf_dieoffset(&cudie),
			};
		}
	}
	if (m->ncus) /* qsort's base must not be NULL, even for 0 elements */
		qsort(m->cus, m->ncus, sizeof(*m->cus), cmp_cu_range);
	return 0;
}

/* Whether the module's DWARF may be used: checked once, on first use. */
static int dwarf_usable(struct elf_module *m)
{
	Dwarf_Addr bias;

	Dwarf *dw;

	if (m->dwarf_too_big)
		return 0;
	if (!m->dwarf_checked) {
		m->dwarf_checked = 1;
		/* The symbol table first: a debug file libdwfl finds for it
		 * keeps its symbols even when its DWARF is too big. */
		(void)load_symbols(m);
		if (m->dwarf_too_big)
			return 0;
		m->in_getdwarf = 1;
		dw = dwfl_module_getdwarf(m->mod, &bias);
		m->in_getdwarf = 0;
		m->dwarf_bad = dwarf_guard__init(&m->guard, dw) != 0;
	}
	return !m->dwarf_bad && !m->dwarf_too_big;
}

/*
 * The CU DIE holding addr (into *buf when not libdw's), or NULL; never one
 * whose line table libdw cannot read safely (dwarf_guard__cu_ok).
 */
static Dwarf_Die *find_cu(struct elf_module *m, Dwarf_Addr addr, Dwarf_Die *buf, Dwarf_Addr *dwbias)
{
	Dwarf_Die *cu;
	Dwarf *dw;
	size_t lo = 0, hi;
	uint64_t pc;

	if (!dwarf_usable(m))
		return NULL;
	cu = dwfl_module_addrdie(m->mod, addr, dwbias);
	if (cu)
		return dwarf_guard__cu_ok(&m->guard, cu) ? cu : NULL;
	dw = dwfl_module_getdwarf(m->mod, dwbias);
	if (!dw || load_cu_index(m, dw) || addr < *dwbias)
		return NULL;
	pc = addr - *dwbias;
	hi = m->ncus;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (m->cus[mid].lo <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* CUs do not overlap; a few steps back cover odd producers. */
	for (size_t i = lo, steps = 0; i-- > 0 && steps < 8; steps++) {
		if (m->cus[i].lo <= pc && pc < m->cus[i].hi) {
			cu = dwarf_offdie(dw, m->cus[i].die, buf);
			return cu && dwarf_guard__cu_ok(&m->guard, cu) ? cu : NULL;
		}
	}
	return NULL;
}

/*
 * DIEs visited at most per lookup looking for the scope that holds a pc,
 * and how deep: the walk descends only into what holds the pc, as libdw's
 * does, so a real CU costs its top-level DIEs and one path down.
 */
#define SCOPE_VISITS_MAX (1u << 20)
#define SCOPE_DEPTH_MAX 256

/* Tags whose DIEs can hold code ranges (libdw's list in
 * __libdw_visit_scopes). */
static int may_hold_scopes(int tag)
{
	switch (tag) {
	case DW_TAG_compile_unit:
	case DW_TAG_partial_unit:
	case DW_TAG_module:
	case DW_TAG_lexical_block:
	case DW_TAG_with_stmt:
	case DW_TAG_catch_block:
	case DW_TAG_try_block:
	case DW_TAG_entry_point:
	case DW_TAG_inlined_subroutine:
	case DW_TAG_subprogram:
	case DW_TAG_namespace:
	case DW_TAG_class_type:
	case DW_TAG_structure_type:
	case DW_TAG_union_type:
		return 1;
	}
	return 0;
}

/* Namespaces and types: no ranges of their own, but functions nested in
 * them (Rust, some C++ producers) have. */
static int is_container(int tag)
{
	return tag == DW_TAG_namespace || tag == DW_TAG_class_type ||
	       tag == DW_TAG_structure_type || tag == DW_TAG_union_type || tag == DW_TAG_module;
}

struct scope_walk {
	Dwarf_Addr pc;
	int containers; /* also descend into namespaces and types */
	unsigned visits;
	Dwarf_Die *out;
};

/*
 * The innermost DIE under parent whose ranges hold pc, into w->out: 1
 * found, 0 not.  Imported (dwz partial) units are searched where they are
 * imported.  This is what dwarf_getscopes finds first, without it: on a
 * corrupt abstract origin libdw 0.188 returns an error and leaks the array
 * it had made (found by fuzz_elf_module: 64 bytes per such lookup).
 */
static int innermost_scope(Dwarf_Die *parent, int depth, struct scope_walk *w)
{
	Dwarf_Die child, unit;
	Dwarf_Attribute a;

	if (depth >= SCOPE_DEPTH_MAX || dwarf_child(parent, &child) != 0)
		return 0;
	do {
		int tag = dwarf_tag(&child);

		if (++w->visits > SCOPE_VISITS_MAX)
			return 0;
		if (tag == DW_TAG_imported_unit) {
			if (dwarf_formref_die(dwarf_attr(&child, DW_AT_import, &a), &unit) &&
			    innermost_scope(&unit, depth + 1, w))
				return 1;
			continue;
		}
		if (!may_hold_scopes(tag))
			continue;
		if (dwarf_haspc(&child, w->pc) == 1) {
			*w->out = child;
			innermost_scope(&child, depth + 1, w);
			return 1;
		}
		if (w->containers && is_container(tag) && innermost_scope(&child, depth + 1, w))
			return 1;
	} while (dwarf_siblingof(&child, &child) == 0);
	return 0;
}

/* The innermost scope holding pc in cu: first as libdw looks (only into
 * what holds it), then through namespaces and types too. */
static int find_scope(Dwarf_Die *cu, Dwarf_Addr pc, Dwarf_Die *out)
{
	struct scope_walk w = { .pc = pc, .out = out };

	if (innermost_scope(cu, 0, &w))
		return 1;
	w.containers = 1;
	w.visits = 0;
	return innermost_scope(cu, 0, &w);
}

/* Inline chain from DWARF: 1 found, 0 no DWARF function here, -ENOMEM. */
static int dwarf_frames(struct elf_module *m, Dwarf_Addr addr, struct strpool *pool,
			struct frames *fs)
{
	Dwarf_Die *cu, *scopes = NULL, inner, cubuf;
	const char *file;
	Dwarf_Addr dwbias;
	uint32_t line;
	int ns, err = 0, outer = 0, nomem = 0;

	cu = find_cu(m, addr, &cubuf, &dwbias);
	if (!cu)
		return 0;
	/*
	 * The innermost scope holding the pc; the concrete chain of inlined
	 * calls around it comes from dwarf_getscopes_die.
	 */
	if (!find_scope(cu, addr - dwbias, &inner))
		return 0;
	ns = dwarf_getscopes_die(&inner, &scopes);
	if (ns <= 0) {
		free(scopes);
		return 0;
	}
	src_line(cu, addr - dwbias, &file, &line);
	for (int i = 0; i < ns && !outer; i++) {
		int tag = dwarf_tag(&scopes[i]);
		struct sym_frame fr = { 0 };

		if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram &&
		    tag != DW_TAG_entry_point)
			continue;
		outer = tag != DW_TAG_inlined_subroutine;
		fr.func = die_func(&m->guard, &scopes[i], pool, &nomem);
		if (!fr.func && !nomem) {
			const struct msym *s = NULL;

			if (outer && load_symbols(m) == 0)
				s = find_symbol(m, addr);
			fr.func = intern_func(pool, s ? s->name : "??");
		}
		fr.file = file ? strpool__intern(pool, file) : NULL;
		fr.line = line;
		fr.inlined = !outer;
		if (!fr.func || (file && !fr.file)) {
			err = -ENOMEM;
			break;
		}
		frames_push(fs, &fr);
		if (!outer)
			call_site(&m->guard, &scopes[i], &file, &line);
	}
	free(scopes);
	if (err)
		return err;
	if (fs->n == 0)
		return 0;
	/* A chain without its subprogram: the outermost seen is the real one. */
	fs->f[fs->n - 1].inlined = 0;
	return 1;
}

/* Symbol table only (no DWARF for addr): one frame, line if known. */
static int symtab_frame(struct elf_module *m, Dwarf_Addr addr, struct strpool *pool,
			struct frames *fs)
{
	const struct msym *s;
	struct sym_frame fr = { 0 };
	Dwarf_Addr dwbias;
	Dwarf_Die *cu, cubuf;
	const char *file = NULL;
	int err;

	err = load_symbols(m);
	if (err)
		return err;
	s = find_symbol(m, addr);
	if (!s)
		return 0;
	fr.func = intern_func(pool, s->name);
	if (!fr.func)
		return -ENOMEM;
	/* Assembly often has a line table but no subprogram DIE. */
	cu = find_cu(m, addr, &cubuf, &dwbias);
	if (cu)
		src_line(cu, addr - dwbias, &file, &fr.line);
	if (file) {
		fr.file = strpool__intern(pool, file);
		if (!fr.file)
			return -ENOMEM;
	}
	frames_push(fs, &fr);
	return 1;
}

int elf_module__resolve(struct elf_module *m, uint64_t file_offset, struct strpool *pool,
			struct sym_frame *out, int max)
{
	struct frames fs = { .f = out, .n = 0, .cap = max };
	Dwarf_Addr addr;
	int r;

	if (!m || !pool || !out || max <= 0)
		return -EINVAL;
	if (!offset_to_addr(m, file_offset, &addr))
		return 0;
	r = dwarf_frames(m, addr, pool, &fs);
	if (r == 0) {
		fs.n = 0;
		r = symtab_frame(m, addr, pool, &fs);
	}
	return r < 0 ? r : fs.n;
}

int elf_module__newly_degraded(struct elf_module *m)
{
	if (m->degraded_told || !(m->dwarf_too_big || m->dwarf_bad || m->symtab_too_big))
		return 0;
	m->degraded_told = 1;
	return 1;
}
