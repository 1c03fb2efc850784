// SPDX-License-Identifier: Apache-2.0
#include "agent/gpu/gpu_elf.h"

#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <string.h>
#include <unistd.h>

#include "agent/gpu/gpu_names.h"
#include "agent/gpu/nccl_comm.h"
#include "agent/proc/elf_addr.h"
#include "lib/elf_bounds.h"

static void add_probe(struct gpu_elf_probes *out, uint32_t api, uint64_t off)
{
	for (size_t i = 0; i < out->n; i++)
		if (out->p[i].offset == off)
			return; /* an alias or the same symbol in both tables */
	if (out->n >= GPU_ELF_MAX_PROBES) {
		out->dropped++;
		return;
	}
	out->p[out->n].api = api;
	out->p[out->n].offset = off;
	out->n++;
}

/* The release of the NCCL in this file, from ncclGetVersion's first bytes. */
static void nccl_version(int fd, uint64_t off, struct gpu_elf_probes *out)
{
	uint8_t code[32];
	ssize_t n = pread(fd, code, sizeof(code), (off_t)off);

	if (n > 0 && !out->nccl_version)
		out->nccl_version = nccl_version_decode(code, (size_t)n);
}

static void scan_symtab(int fd, Elf *e, Elf_Scn *scn, const GElf_Shdr *sh,
			struct gpu_elf_probes *out)
{
	Elf_Data *d = elf_getdata(scn, NULL);
	size_t n = sh->sh_entsize ? sh->sh_size / sh->sh_entsize : 0;

	for (size_t i = 0; d && i < n; i++) {
		GElf_Sym sym;
		const char *name;
		uint64_t off;
		int api;

		if (!gelf_getsym(d, (int)i, &sym) || sym.st_shndx == SHN_UNDEF || !sym.st_value)
			continue;
		if (GELF_ST_TYPE(sym.st_info) != STT_FUNC)
			continue;
		name = elf_strptr(e, sh->sh_link, sym.st_name);
		if (name && !strcmp(name, "_dl_debug_state") &&
		    !elf_vaddr_to_offset(e, sym.st_value, true, &off))
			out->dl_notify = off;
		if (!name || (name[0] != 'c' && name[0] != 'n' && name[0] != 'p'))
			continue;
		if ((!strcmp(name, "ncclGetVersion") || !strcmp(name, "pncclGetVersion")) &&
		    !elf_vaddr_to_offset(e, sym.st_value, true, &off))
			nccl_version(fd, off, out);
		api = gpu_api_of_symbol(name);
		if (api < 0 || elf_vaddr_to_offset(e, sym.st_value, true, &off))
			continue;
		add_probe(out, (uint32_t)api, off);
	}
}

int gpu_elf_scan(int fd, struct gpu_elf_probes *out)
{
	struct elf_symtab_budget budget = ELF_SYMTABS_BUDGET;
	Elf_Scn *scn = NULL;
	Elf *e;

	out->n = out->dropped = 0;
	out->nccl_version = 0;
	out->dl_notify = 0;
	elf_version(EV_CURRENT);
	/* ELF_C_READ (pread into bounded heap copies), never mmap: the file
	 * is a target's, which may truncate it while we read (SIGBUS) */
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (!e)
		return -ENOEXEC;
	if (elf_kind(e) != ELF_K_ELF) {
		elf_end(e);
		return -ENOEXEC;
	}
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;

		if (gelf_getshdr(scn, &sh) &&
		    (sh.sh_type == SHT_DYNSYM || sh.sh_type == SHT_SYMTAB) &&
		    elf_symtab_take(e, &sh, &budget))
			scan_symtab(fd, e, scn, &sh, out);
	}
	elf_end(e);
	return 0;
}
