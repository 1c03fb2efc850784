// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests: the unwind table compiler on hostile files: truncated and
 * corrupt ELF, mutated CFI, a lying .eh_frame_hdr.  Every one gets a clear
 * error or a table that keeps the invariants (check_shape), never a crash
 * (ASan/UBSan).  Fixtures are compiled at test time (unwind_test_util.h).
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dwarf.h>
#include <elfutils/libdw.h>

#include <cmocka.h>

#include "tests/unit/test_util.h"

#include "tests/unit/unwind_test_util.h"
#include "unwind/unwind_table.h"

/* Builds the table of len bytes of buf through a memfd. */
static int build_bytes(const void *buf, size_t len, struct unwind_table **t)
{
	int fd = memfd_create("unwind-test", MFD_CLOEXEC), err;

	assert_true(fd >= 0);
	if (len)
		assert_int_equal(write(fd, buf, len), (ssize_t)len);
	err = unwind_table__build(fd, t);
	close(fd);
	return err;
}

static void test_corrupt_files(void **state)
{
	struct fixtures *fx = *state;
	struct unwind_table *t = NULL;
	uint8_t junk[65536];
	size_t len, cuts[] = { 1, 16, 64, 1000, 4096 };
	uint8_t *elf;

	/* Empty and random. */
	assert_int_equal(build_bytes("", 0, &t), -ENOEXEC);
	assert_null(t);
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)mix64(i);
	assert_int_equal(build_bytes(junk, sizeof(junk), &t), -ENOEXEC);
	/* ELF magic in front of junk. */
	memcpy(junk, "\177ELF\2\1\1", 7);
	assert_int_equal(build_bytes(junk, sizeof(junk), &t), -ENOEXEC);

	/* Truncated: the section headers (at the end) are gone. */
	elf = read_all(fx->nofp, &len);
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		int err = build_bytes(elf, cuts[i], &t);

		assert_true(err == -ENOEXEC || err == -ENODATA);
	}
	{
		int err = build_bytes(elf, len / 2, &t);

		assert_true(err == -ENOEXEC || err == -ENODATA);
	}
	free(elf);
	/* Not a file at all. */
	assert_int_equal(unwind_table__build(-1, &t), -ENOEXEC);
	unwind_table__free(NULL);
	assert_null(unwind_table__find(NULL, 0));
}

/*
 * The CFI sections of a real file overwritten at random: every outcome must
 * be a clean error or a well-formed table, under ASan/UBSan.
 */
static void test_mutated_cfi(void **state)
{
	struct fixtures *fx = *state;
	const char *files[] = { fx->nofp, fx->dbg };
	unsigned ok = 0, failed = 0;

	elf_version(EV_CURRENT);
	for (size_t fi = 0; fi < 2; fi++) {
		uint64_t off[2] = { 0 }, size[2] = { 0 };
		size_t len, shstrndx;
		Elf_Scn *scn = NULL;
		uint8_t *orig, *buf;
		Elf *e;
		int fd = open(files[fi], O_RDONLY);

		assert_true(fd >= 0);
		e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
		assert_int_equal(elf_getshdrstrndx(e, &shstrndx), 0);
		while ((scn = elf_nextscn(e, scn))) {
			GElf_Shdr sh;
			const char *name;
			int k = -1;

			gelf_getshdr(scn, &sh);
			name = elf_strptr(e, shstrndx, sh.sh_name);
			if (name && !strcmp(name, ".eh_frame"))
				k = 0;
			else if (name &&
				 (!strcmp(name, ".debug_frame") || !strcmp(name, ".eh_frame_hdr")))
				k = 1;
			if (k >= 0 && sh.sh_type != SHT_NOBITS) {
				off[k] = sh.sh_offset;
				size[k] = sh.sh_size;
			}
		}
		elf_end(e);
		close(fd);
		orig = read_all(files[fi], &len);
		buf = malloc(len);
		assert_non_null(buf);
		for (uint64_t it = 0; it < 300; it++) {
			uint64_t h = mix64(it * 7919 + fi);
			int k = (int)(h & 1), err;
			struct unwind_table *t = NULL;

			if (!size[k])
				k ^= 1;
			memcpy(buf, orig, len);
			/* Flip a few bytes, or smear one run with a single value. */
			if (h & 2) {
				for (int j = 0; j < 1 + (int)((h >> 8) & 7); j++) {
					uint64_t r = mix64(h + (uint64_t)j);

					buf[off[k] + r % size[k]] ^= (uint8_t)(r >> 32) | 1;
				}
			} else {
				uint64_t at = (h >> 8) % size[k], n = (h >> 40) % 64;

				if (at + n > size[k])
					n = size[k] - at;
				memset(buf + off[k] + at, (int)(h >> 56), n);
			}
			err = build_bytes(buf, len, &t);
			if (!err) {
				check_shape(t);
				for (uint64_t pc = t->vaddr_lo; pc < t->vaddr_hi; pc += 7)
					assert_non_null(unwind_table__find(t, pc));
				unwind_table__free(t);
				ok++;
			} else {
				assert_true(err == -ENOEXEC || err == -ENODATA || err == -E2BIG);
				failed++;
			}
		}
		free(buf);
		free(orig);
	}
	print_message("  mutated CFI: %u tables, %u clean errors\n", ok, failed);
}

/* Section header index and file offset of name in the ELF bytes. */
static bool find_section(const uint8_t *buf, size_t len, const char *name, size_t *ndx,
			 uint64_t *off, uint64_t *size)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	bool found = false;
	Elf *e = elf_memory((char *)buf, len);

	assert_non_null(e);
	assert_int_equal(elf_getshdrstrndx(e, &shstrndx), 0);
	while (!found && (scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		const char *n;

		if (!gelf_getshdr(scn, &sh) || !(n = elf_strptr(e, shstrndx, sh.sh_name)))
			continue;
		if (!strcmp(n, name)) {
			*ndx = elf_ndxscn(scn);
			*off = sh.sh_offset;
			*size = sh.sh_size;
			found = true;
		}
	}
	elf_end(e);
	return found;
}

/*
 * An .eh_frame_hdr libdw would trust but that leads elsewhere than the
 * FDEs (or that libdw would read past) makes the .eh_frame unusable:
 * -ENOEXEC, as the fixture has no .debug_frame to fall back on.
 */
static void test_bad_eh_frame_hdr(void **state)
{
	struct fixtures *fx = *state;
	struct unwind_table *t = NULL;
	uint64_t off, size;
	size_t len, ndx;
	uint8_t *orig, *buf;
	Elf64_Ehdr *eh;
	uint32_t v;

	orig = read_all(fx->nofp, &len);
	buf = malloc(len);
	assert_non_null(buf);
	assert_true(find_section(orig, len, ".eh_frame_hdr", &ndx, &off, &size));
	assert_true(size >= 20);
	/* version 1, eh_frame_ptr pcrel|sdata4, count udata4, table datarel|sdata4 */
	assert_int_equal(orig[off], 1);
	assert_int_equal(orig[off + 3], DW_EH_PE_datarel | DW_EH_PE_sdata4);

	/* The intact file builds. */
	assert_int_equal(build_bytes(orig, len, &t), 0);
	unwind_table__free(t);

	/* Last entry's FDE pointer moved 4 bytes into its FDE. */
	memcpy(buf, orig, len);
	memcpy(&v, buf + off + size - 4, 4);
	v += 4;
	memcpy(buf + off + size - 4, &v, 4);
	assert_int_equal(build_bytes(buf, len, &t), -ENOEXEC);

	/* Last entry's initial location off by one. */
	memcpy(buf, orig, len);
	memcpy(&v, buf + off + size - 8, 4);
	v += 1;
	memcpy(buf + off + size - 8, &v, 4);
	assert_int_equal(build_bytes(buf, len, &t), -ENOEXEC);

	/* More entries than the section holds. */
	memcpy(buf, orig, len);
	v = 0x10000000;
	memcpy(buf + off + 8, &v, 4);
	assert_int_equal(build_bytes(buf, len, &t), -ENOEXEC);

	/* A header shorter than its fixed fields is refused; an empty one
	 * is no search table (libdw scans the section instead). */
	eh = (Elf64_Ehdr *)orig;
	for (uint64_t sz = 0; sz < 3; sz += 2) {
		Elf64_Shdr sh;
		uint64_t at = eh->e_shoff + ndx * eh->e_shentsize;

		memcpy(buf, orig, len);
		memcpy(&sh, buf + at, sizeof(sh));
		sh.sh_size = sz;
		memcpy(buf + at, &sh, sizeof(sh));
		assert_int_equal(build_bytes(buf, len, &t), sz ? -ENOEXEC : 0);
		unwind_table__free(t);
		t = NULL;
	}
	free(buf);
	free(orig);
}

/*
 * A .debug_frame of a few hundred KB that inflates to 300 MiB (zeros):
 * libelf allocates and inflates whatever the compression header claims,
 * and dwarf_begin_elf does the same for every .debug_* section.  Left
 * out before anything is inflated (the .eh_frame serves); memory stays
 * flat.
 */
/* Builds the table of the file at path; *grew_kib: how much the process's
 * peak RSS rose meanwhile. */
static int build_file(const char *path, struct unwind_table **t, long *grew_kib)
{
	struct rusage before, after;
	int fd = open(path, O_RDONLY | O_CLOEXEC), err;

	assert_true(fd >= 0);
	getrusage(RUSAGE_SELF, &before);
	err = unwind_table__build(fd, t);
	getrusage(RUSAGE_SELF, &after);
	close(fd);
	*grew_kib = after.ru_maxrss - before.ru_maxrss;
	return err;
}

static void test_inflate_bomb(void **state)
{
	struct fixtures *fx = *state;
	struct unwind_table *t = NULL;
	char cmd[2048], path[192];
	long grew;
	int err;

	snprintf(path, sizeof(path), "%s/bomb", fx->dir);
	snprintf(cmd, sizeof(cmd),
		 "set -e; head -c 314572800 /dev/zero > %s.zero;"
		 "objcopy --remove-section .debug_frame --add-section .debug_frame=%s.zero"
		 " --compress-debug-sections=zlib '%s' %s; rm -f %s.zero",
		 path, path, fx->nofp, path, path);
	if (system(cmd) != 0)
		skip(); /* no objcopy */
	err = build_file(path, &t, &grew);
	unlink(path);
	/* the bomb is left out; the file's .eh_frame still makes the table */
	assert_int_equal(err, 0);
	assert_non_null(t);
	unwind_table__free(t);
	assert_true(grew < 64 * 1024); /* KiB */
}

/*
 * A CFA program that names a huge register number: libdw sizes the
 * register array of every query by it (16 bytes a register, zeroed), so
 * register 2^26 made each query of that range allocate 1 GiB (a fuzzing
 * find: 1.3 GB and 9 s from a 7 KB file a traced process could map).  The
 * range is UNSUPPORTED without asking libdw; the rest of the file's CFI
 * still makes rows.
 */
static void test_huge_register_number(void **state)
{
	struct fixtures *fx = *state;
	static const char src[] = "__asm__(\".globl _start\\n_start:\\n.cfi_startproc\\n"
				  ".cfi_undefined 67108864\\nnop\\nnop\\n.cfi_endproc\\n"
				  ".globl g\\ng:\\n.cfi_startproc\\nret\\n.cfi_endproc\");\n";
	struct unwind_table *t = NULL;
	char path[192];
	long grew;
	int err;

	if (compile(fx->dir, "hugereg", src, "c", "cc -nostdlib -static -no-pie", path,
		    sizeof(path)))
		skip(); /* the assembler refused the register */
	err = build_file(path, &t, &grew);
	assert_int_equal(err, 0);
	check_shape(t);
	assert_int_equal(t->st.bad_regs, 1);
	assert_true(t->st.unsupported_ranges >= 1);
	assert_int_equal(unwind_table__find(t, t->vaddr_lo)->cfa_type, UNWIND_CFA_UNSUPPORTED);
	assert_true(grew < 64 * 1024); /* KiB */
	unwind_table__free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_corrupt_files),	     cmocka_unit_test(test_mutated_cfi),
		cmocka_unit_test(test_bad_eh_frame_hdr),     cmocka_unit_test(test_inflate_bomb),
		cmocka_unit_test(test_huge_register_number),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
