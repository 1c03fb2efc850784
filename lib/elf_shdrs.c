// SPDX-License-Identifier: Apache-2.0
#include "lib/elf_shdrs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int elf_pread_all(int fd, void *buf, size_t n, uint64_t off)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EIO;
		got += (size_t)r;
	}
	return 0;
}

int elf_shdrs__walk(int fd, uint64_t size, Elf64_Ehdr *eh, uint64_t *shnum_out, elf_shdr_fn fn,
		    void *ctx)
{
	Elf64_Shdr *sh = NULL, first;
	char *names = NULL;
	uint64_t shnum, names_len = 0;
	uint32_t shstrndx;
	int err;

	if (size < sizeof(*eh) || elf_pread_all(fd, eh, sizeof(*eh), 0))
		return 1;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_ident[EI_DATA] != ELFDATA2LSB || !eh->e_shoff ||
	    eh->e_shentsize != sizeof(Elf64_Shdr) ||
	    (eh->e_phnum && eh->e_phentsize != sizeof(Elf64_Phdr)))
		return 1;
	/* extended numbering: the counts in the first section header */
	if (eh->e_shoff > size - sizeof(first) ||
	    elf_pread_all(fd, &first, sizeof(first), eh->e_shoff))
		return 1;
	shnum = eh->e_shnum ? eh->e_shnum : first.sh_size;
	shstrndx = eh->e_shstrndx == SHN_XINDEX ? first.sh_link : eh->e_shstrndx;
	if (!shnum || shnum > ELF_SHDRS_MAX || shnum * sizeof(*sh) > size - eh->e_shoff)
		return 1;
	*shnum_out = shnum;
	sh = malloc(shnum * sizeof(*sh));
	if (!sh)
		return -ENOMEM;
	err = elf_pread_all(fd, sh, shnum * sizeof(*sh), eh->e_shoff);
	if (err)
		goto out;
	if (shstrndx < shnum && sh[shstrndx].sh_type == SHT_STRTAB &&
	    sh[shstrndx].sh_size <= ELF_SHSTRTAB_MAX && sh[shstrndx].sh_offset <= size &&
	    sh[shstrndx].sh_size <= size - sh[shstrndx].sh_offset) {
		names_len = sh[shstrndx].sh_size;
		names = malloc(names_len + 1);
		if (!names) {
			err = -ENOMEM;
			goto out;
		}
		if (elf_pread_all(fd, names, names_len, sh[shstrndx].sh_offset))
			names_len = 0;
		names[names_len] = 0;
	}
	for (uint64_t i = 0; !err && i < shnum; i++)
		err = fn(ctx, &sh[i],
			 names && sh[i].sh_name < names_len ? names + sh[i].sh_name : NULL);
out:
	free(names);
	free(sh);
	return err;
}
