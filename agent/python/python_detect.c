// SPDX-License-Identifier: Apache-2.0
#include "agent/python/python_detect.h"

#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/elf_bounds.h"

#define MAX_SEGS 16

struct elf_syms {
	uint64_t runtime, eval, eval_size, eval_cold, eval_cold_size, version_addr;
	struct {
		uint64_t offset, vaddr, filesz, memsz;
	} seg[MAX_SEGS];
	int nseg;
};

int python_detect__version_from_name(const char *path, unsigned *major, unsigned *minor)
{
	const char *base = strrchr(path, '/'), *p;
	char *end;
	unsigned long mi;

	base = base ? base + 1 : path;
	if (!strncmp(base, "libpython", 9))
		p = base + 9;
	else if (!strncmp(base, "python", 6))
		p = base + 6;
	else
		return -ENOENT;
	if (strncmp(p, "3.", 2))
		return -ENOENT;
	mi = strtoul(p + 2, &end, 10);
	if (end == p + 2 || mi > 99)
		return -ENOENT;
	*major = 3;
	*minor = (unsigned)mi;
	/* ABI flags (PEP 3149): 'd' Py_DEBUG, 't' free-threaded (3.13+):
	 * layouts the offsets table does not describe. */
	if (*end == 'd' || *end == 't')
		return -ENOTSUP;
	if (*end && *end != '.' && *end != 'm')
		return -ENOENT;
	return 0;
}

/* Records the symbols we want from one symbol table. */
static void scan_symtab(Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh, struct elf_syms *s)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t n = sh->sh_entsize ? sh->sh_size / sh->sh_entsize : 0;

	for (size_t i = 0; data && i < n; i++) {
		GElf_Sym sym;
		const char *name;

		if (!gelf_getsym(data, (int)i, &sym) || sym.st_shndx == SHN_UNDEF || !sym.st_value)
			continue;
		name = elf_strptr(elf, sh->sh_link, sym.st_name);
		if (!name || (name[0] != '_' && name[0] != 'P'))
			continue;
		if (!strcmp(name, "_PyRuntime")) {
			s->runtime = sym.st_value;
		} else if (!strcmp(name, "_PyEval_EvalFrameDefault")) {
			s->eval = sym.st_value;
			s->eval_size = sym.st_size;
		} else if (!strcmp(name, "_PyEval_EvalFrameDefault.cold")) {
			s->eval_cold = sym.st_value;
			s->eval_cold_size = sym.st_size;
		} else if (!strcmp(name, "Py_Version")) {
			s->version_addr = sym.st_value;
		}
	}
}

static int read_elf(int fd, struct elf_syms *s)
{
	Elf *elf;
	Elf_Scn *scn = NULL;
	struct elf_symtab_budget budget = ELF_SYMTABS_BUDGET;
	size_t nph;

	memset(s, 0, sizeof(*s));
	elf_version(EV_CURRENT);
	/* ELF_C_READ (pread into bounded heap copies), never mmap: the file
	 * is a target's, which may truncate it while we read (SIGBUS) */
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf)
		return -ENOEXEC;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;

		if (gelf_getshdr(scn, &sh) &&
		    (sh.sh_type == SHT_DYNSYM || sh.sh_type == SHT_SYMTAB) &&
		    elf_symtab_take(elf, &sh, &budget))
			scan_symtab(elf, scn, &sh, s);
	}
	if (!elf_getphdrnum(elf, &nph)) {
		for (size_t i = 0; i < nph && s->nseg < MAX_SEGS; i++) {
			GElf_Phdr ph;

			if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
				continue;
			s->seg[s->nseg].offset = ph.p_offset;
			s->seg[s->nseg].vaddr = ph.p_vaddr;
			s->seg[s->nseg].filesz = ph.p_filesz;
			s->seg[s->nseg].memsz = ph.p_memsz;
			s->nseg++;
		}
	}
	elf_end(elf);
	return 0;
}

/* ELF vaddr -> file offset (file-backed part of a segment), or -ENOENT. */
static int file_offset(const struct elf_syms *s, uint64_t vaddr, uint64_t *off)
{
	for (int i = 0; i < s->nseg; i++) {
		if (vaddr >= s->seg[i].vaddr && vaddr - s->seg[i].vaddr < s->seg[i].filesz) {
			*off = vaddr - s->seg[i].vaddr + s->seg[i].offset;
			return 0;
		}
	}
	return -ENOENT;
}

/* PY_VERSION_HEX from the file's Py_Version (3.11+), or 0. */
static uint32_t read_version(int fd, const struct elf_syms *s)
{
	uint64_t off;
	uint32_t v = 0;

	if (!s->version_addr || file_offset(s, s->version_addr, &off) ||
	    pread(fd, &v, sizeof(v), (off_t)off) != (ssize_t)sizeof(v))
		return 0;
	return v;
}

static void add_range(struct py_file *out, const struct elf_syms *s, uint64_t vaddr, uint64_t size)
{
	uint64_t off;

	if (!vaddr || !size || out->neval >= PY_EVAL_RANGES || file_offset(s, vaddr, &off))
		return;
	out->eval_lo[out->neval] = off;
	out->eval_hi[out->neval] = off + size;
	out->neval++;
}

int python_detect_file(const struct module *mod, struct py_file *out)
{
	struct elf_syms s;
	unsigned major, minor;
	uint32_t hex;
	int err = python_detect__version_from_name(mod->path, &major, &minor);

	memset(out, 0, sizeof(*out));
	out->mod = mod;
	out->major = major;
	out->minor = minor;
	if (err == -ENOTSUP)
		out->refused = true;
	if (err)
		return err;
	if (read_elf(mod->fd, &s) || !s.runtime)
		return -ENOENT;
	hex = read_version(mod->fd, &s);
	if (hex >> 24 == 3) {
		out->major = 3;
		out->minor = (hex >> 16) & 0xff;
	}
	out->runtime = s.runtime;
	add_range(out, &s, s.eval, s.eval_size);
	add_range(out, &s, s.eval_cold, s.eval_cold_size);
	for (int i = 0; i < s.nseg && i < PY_FILE_SEGS; i++) {
		out->seg[i].offset = s.seg[i].offset;
		out->seg[i].vaddr = s.seg[i].vaddr;
		out->seg[i].filesz = s.seg[i].filesz;
		out->nseg = i + 1;
	}
	return 0;
}

/* Load bias of the file from one of its mappings (ELF vaddr = addr - bias). */
static int bias_of(const struct py_file *f, const struct proc_mapping *m, uint64_t *bias)
{
	for (int i = 0; i < f->nseg; i++) {
		uint64_t off = f->seg[i].offset & ~0xfffULL;

		if (m->pgoff >= off && m->pgoff < f->seg[i].offset + f->seg[i].filesz) {
			*bias = m->start - m->pgoff + f->seg[i].offset - f->seg[i].vaddr;
			return 0;
		}
	}
	return -ENOENT;
}

int python_detect(const struct proc_mapping *maps, const struct py_file *const *files, size_t n,
		  struct py_found *out)
{
	const struct module *tried = NULL;
	int refused = 0;

	for (size_t i = 0; i < n; i++) {
		const struct proc_mapping *m = &maps[i];
		const struct py_file *f = files[i];
		uint64_t bias;

		if (!f || m->mod == tried)
			continue;
		if (f->refused) {
			if (!refused) {
				refused = 1; /* a debug or free-threaded build */
				memset(out, 0, sizeof(*out));
				out->major = f->major;
				out->minor = f->minor;
				out->mod = m->mod;
			}
			continue;
		}
		tried = m->mod;
		if (bias_of(f, m, &bias))
			continue;
		memset(out, 0, sizeof(*out));
		out->major = f->major;
		out->minor = f->minor;
		out->runtime = f->runtime + bias;
		out->mod = m->mod;
		out->neval = f->neval;
		memcpy(out->eval_lo, f->eval_lo, sizeof(out->eval_lo));
		memcpy(out->eval_hi, f->eval_hi, sizeof(out->eval_hi));
		return 0;
	}
	return refused ? -ENOTSUP : -ENOENT;
}
