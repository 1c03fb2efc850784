/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the cmocka unit tests (include after cmocka.h). */
#ifndef STRATA_TEST_UTIL_H
#define STRATA_TEST_UTIL_H

#include <elf.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Writes text to ROOT/PID/task/TID/NAME of a fake /proc tree, making its
 * directories.  Asserts on error. */
static inline void fake_task_file(const char *root, unsigned pid, unsigned tid, const char *name,
				  const char *text)
{
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "%s/%u", root, pid);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/%u/task", root, pid);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/%u/task/%u", root, pid, tid);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/%u/task/%u/%s", root, pid, tid, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

/* The whole file at path, malloc'd; its size in *len.  Asserts on error. */
static inline void *read_all(const char *path, size_t *len)
{
	struct stat st;
	void *buf;
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	buf = malloc((size_t)st.st_size);
	assert_non_null(buf);
	assert_int_equal(read(fd, buf, (size_t)st.st_size), st.st_size);
	close(fd);
	*len = (size_t)st.st_size;
	return buf;
}

/* An ELF64 header of type (ET_DYN, ET_REL...) for x86-64, little-endian:
 * identity, machine, version and header size set, the rest zero. */
static inline void elf64_header(Elf64_Ehdr *eh, uint16_t type)
{
	memset(eh, 0, sizeof(*eh));
	memcpy(eh->e_ident, ELFMAG, SELFMAG);
	eh->e_ident[EI_CLASS] = ELFCLASS64;
	eh->e_ident[EI_DATA] = ELFDATA2LSB;
	eh->e_ident[EI_VERSION] = EV_CURRENT;
	eh->e_type = type;
	eh->e_machine = EM_X86_64;
	eh->e_version = EV_CURRENT;
	eh->e_ehsize = sizeof(*eh);
}

/*
 * A hostile ELF64 at a new temporary file (its path into path[64]): n
 * sections of type type, each claiming size bytes of zeros (the file is
 * sparse), all at the same offset, linked to one small string table.
 * Each is within what a reader allows one section; together they are
 * n times that.  Returns an open fd (O_RDONLY); the file is unlinked.
 */
static inline int make_many_sections_elf(unsigned n, uint32_t type, uint64_t size)
{
	char path[] = "/tmp/strata-test-sections-XXXXXX";
	const uint64_t data = 1 << 20, strtab = 64; /* offsets */
	size_t shsz = (size_t)(n + 2) * sizeof(Elf64_Shdr);
	Elf64_Shdr *sh = calloc(1, shsz);
	Elf64_Ehdr eh = { .e_type = ET_DYN,
			  .e_machine = EM_X86_64,
			  .e_version = EV_CURRENT,
			  .e_ehsize = sizeof(Elf64_Ehdr),
			  .e_shoff = 4096,
			  .e_shentsize = sizeof(Elf64_Shdr),
			  .e_shnum = (uint16_t)(n + 2) };
	int fd = mkstemp(path), rd;

	assert_true(fd >= 0 && sh != NULL);
	elf64_header(&eh, ET_DYN);
	eh.e_shoff = 4096;
	eh.e_shentsize = sizeof(Elf64_Shdr);
	eh.e_shnum = (uint16_t)(n + 2);
	sh[1].sh_type = SHT_STRTAB; /* "\0": every name empty */
	sh[1].sh_offset = strtab;
	sh[1].sh_size = 1;
	for (unsigned i = 0; i < n; i++) {
		sh[2 + i].sh_type = type;
		sh[2 + i].sh_offset = data;
		sh[2 + i].sh_size = size;
		sh[2 + i].sh_link = 1;
		sh[2 + i].sh_addralign = 8;
		sh[2 + i].sh_entsize = type == SHT_NOTE ? 0 : sizeof(Elf64_Sym);
	}
	assert_int_equal(pwrite(fd, &eh, sizeof(eh), 0), (ssize_t)sizeof(eh));
	assert_int_equal(pwrite(fd, sh, shsz, 4096), (ssize_t)shsz);
	assert_int_equal(ftruncate(fd, (off_t)(data + size)), 0);
	free(sh);
	rd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(rd >= 0);
	close(fd);
	unlink(path);
	return rd;
}

#endif /* STRATA_TEST_UTIL_H */
