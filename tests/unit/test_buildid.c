// SPDX-License-Identifier: Apache-2.0
/* Unit tests: build-id notes, cross-checked against readelf -n. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/unit/test_util.h"

#include "symbolize/buildid.h"

/* Build-id of file as readelf prints it (lower-case hex), or "". */
static void readelf_build_id(const char *file, char *hex, size_t sz)
{
	char cmd[512], line[512];
	FILE *p;

	hex[0] = '\0';
	snprintf(cmd, sizeof(cmd), "readelf -n '%s' 2>/dev/null", file);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p)) {
		char *b = strstr(line, "Build ID: ");

		if (b && !hex[0]) {
			b += strlen("Build ID: ");
			b[strcspn(b, " \n")] = '\0';
			snprintf(hex, sz, "%s", b);
		}
	}
	pclose(p);
}

/* Writes len bytes to a new temporary file named into path. */
static char *write_tmp(char *path, size_t psz, const void *buf, size_t len)
{
	int fd;

	snprintf(path, psz, "/tmp/strata-test-buildid-XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, len), (ssize_t)len);
	close(fd);
	return path;
}

static void test_self_matches_readelf(void **state)
{
	char want[128], got[2 * BUILD_ID_MAX + 1], exe[4096];
	uint8_t id[BUILD_ID_MAX];
	ssize_t len;
	int n, fd;

	/* readelf's own /proc/self/exe would be readelf: pass our path. */
	len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	assert_true(len > 0);
	exe[len] = '\0';
	readelf_build_id(exe, want, sizeof(want));
	if (!want[0])
		skip(); /* linked without --build-id */
	n = build_id_read("/proc/self/exe", -1, id, sizeof(id));
	assert_true(n > 0);
	assert_string_equal(build_id_hex(id, (size_t)n, got, sizeof(got)), want);

	/* Same through an fd (path NULL); the fd stays usable. */
	fd = open("/proc/self/exe", O_RDONLY);
	assert_true(fd >= 0);
	memset(id, 0, sizeof(id));
	n = build_id_read(NULL, fd, id, sizeof(id));
	assert_true(n > 0);
	assert_string_equal(build_id_hex(id, (size_t)n, got, sizeof(got)), want);
	assert_int_equal(lseek(fd, 0, SEEK_CUR), 0);
	close(fd);
}

static void test_shared_library(void **state)
{
	static const char *const libs[] = {
		"/lib/x86_64-linux-gnu/libc.so.6",
		"/lib64/libc.so.6",
		"/usr/lib/x86_64-linux-gnu/libelf.so.1",
	};
	char want[128], got[2 * BUILD_ID_MAX + 1];
	uint8_t id[BUILD_ID_MAX];
	int tested = 0;

	for (size_t i = 0; i < sizeof(libs) / sizeof(libs[0]); i++) {
		if (access(libs[i], R_OK))
			continue;
		readelf_build_id(libs[i], want, sizeof(want));
		if (!want[0])
			continue;
		int n = build_id_read(libs[i], -1, id, sizeof(id));

		assert_true(n > 0);
		assert_string_equal(build_id_hex(id, (size_t)n, got, sizeof(got)), want);
		tested++;
	}
	if (!tested)
		skip();
}

static void test_short_buffer(void **state)
{
	uint8_t full[BUILD_ID_MAX], part[4];
	int n;

	n = build_id_read("/proc/self/exe", -1, full, sizeof(full));
	if (n <= 0)
		skip();
	assert_int_equal(build_id_read("/proc/self/exe", -1, part, 4), 4);
	assert_memory_equal(part, full, 4);
}

/*
 * A hand-made ELF64 with no program headers and one SHT_NOTE section,
 * so only the section path can find the id.  desc_len > 20 exercises
 * truncation.
 */
static size_t make_section_elf(uint8_t *buf, size_t sz, size_t desc_len, const char *owner,
			       uint32_t type)
{
	static const char shstr[] = "\0.note.gnu.build-id\0.shstrtab";
	size_t note_off = sizeof(Elf64_Ehdr), note_len, str_off, sh_off;
	Elf64_Ehdr *eh = (Elf64_Ehdr *)buf;
	Elf64_Nhdr *nh;
	Elf64_Shdr *sh;

	memset(buf, 0, sz);
	elf64_header(eh, ET_REL);
	eh->e_shentsize = sizeof(Elf64_Shdr);

	nh = (Elf64_Nhdr *)(buf + note_off);
	nh->n_namesz = (uint32_t)strlen(owner) + 1;
	nh->n_descsz = (uint32_t)desc_len;
	nh->n_type = type;
	memcpy(nh + 1, owner, strlen(owner) + 1);
	size_t name_pad = (nh->n_namesz + 3) & ~3u;

	for (size_t i = 0; i < desc_len; i++)
		((uint8_t *)(nh + 1))[name_pad + i] = (uint8_t)(0xa0 + i);
	note_len = sizeof(*nh) + name_pad + ((desc_len + 3) & ~(size_t)3);
	str_off = note_off + note_len;
	memcpy(buf + str_off, shstr, sizeof(shstr));
	sh_off = (str_off + sizeof(shstr) + 7) & ~(size_t)7;
	assert_true(sh_off + 3 * sizeof(Elf64_Shdr) <= sz);

	eh->e_shoff = sh_off;
	eh->e_shnum = 3;
	eh->e_shstrndx = 2;
	sh = (Elf64_Shdr *)(buf + sh_off);
	sh[1].sh_name = 1;
	sh[1].sh_type = SHT_NOTE;
	sh[1].sh_flags = SHF_ALLOC;
	sh[1].sh_offset = note_off;
	sh[1].sh_size = note_len;
	sh[1].sh_addralign = 4;
	sh[2].sh_name = 20;
	sh[2].sh_type = SHT_STRTAB;
	sh[2].sh_offset = str_off;
	sh[2].sh_size = sizeof(shstr);
	sh[2].sh_addralign = 1;
	return sh_off + 3 * sizeof(Elf64_Shdr);
}

static void test_section_notes(void **state)
{
	uint8_t buf[1024], id[BUILD_ID_MAX];
	char path[64], hex[2 * BUILD_ID_MAX + 1];
	size_t len;

	/* 8-byte id: returned as is. */
	len = make_section_elf(buf, sizeof(buf), 8, "GNU", NT_GNU_BUILD_ID);
	write_tmp(path, sizeof(path), buf, len);
	assert_int_equal(build_id_read(path, -1, id, sizeof(id)), 8);
	assert_string_equal(build_id_hex(id, 8, hex, sizeof(hex)), "a0a1a2a3a4a5a6a7");
	unlink(path);

	/* 32-byte id: truncated to BUILD_ID_MAX. */
	len = make_section_elf(buf, sizeof(buf), 32, "GNU", NT_GNU_BUILD_ID);
	write_tmp(path, sizeof(path), buf, len);
	assert_int_equal(build_id_read(path, -1, id, sizeof(id)), BUILD_ID_MAX);
	assert_int_equal(id[BUILD_ID_MAX - 1], 0xa0 + BUILD_ID_MAX - 1);
	unlink(path);

	/* Wrong owner or type: no build-id, not an error. */
	len = make_section_elf(buf, sizeof(buf), 20, "GNV", NT_GNU_BUILD_ID);
	write_tmp(path, sizeof(path), buf, len);
	assert_int_equal(build_id_read(path, -1, id, sizeof(id)), 0);
	unlink(path);
	len = make_section_elf(buf, sizeof(buf), 20, "GNU", NT_GNU_ABI_TAG);
	write_tmp(path, sizeof(path), buf, len);
	assert_int_equal(build_id_read(path, -1, id, sizeof(id)), 0);
	unlink(path);
}

/*
 * A file of 1.2 MiB listing 300 PT_NOTE segments, each just under 1 MiB
 * at its own offset, none with a build-id: each is within the bound for
 * one note blob, but libelf keeps every chunk it read until elf_end
 * (300 MiB at once; thousands of headers would OOM-kill the agent, which
 * reads this for any file a process maps executable).  The file's notes
 * are bounded together: memory stays flat.
 */
static void test_many_note_segments(void **state)
{
	const size_t nph = 300, size = (6u << 20) / 5, blob = (1u << 20) - 64;
	uint8_t *buf = calloc(1, size), id[BUILD_ID_MAX];
	Elf64_Ehdr *eh = (Elf64_Ehdr *)buf;
	Elf64_Phdr *ph = (Elf64_Phdr *)(buf + sizeof(*eh));
	struct rusage before, after;
	char path[64];

	assert_non_null(buf);
	elf64_header(eh, ET_DYN);
	eh->e_phoff = sizeof(*eh);
	eh->e_phentsize = sizeof(*ph);
	eh->e_phnum = (uint16_t)nph;
	for (size_t i = 0; i < nph; i++) {
		ph[i].p_type = PT_NOTE;
		ph[i].p_offset = 64 * 1024 + i * 4; /* zeros: empty notes */
		ph[i].p_filesz = blob;
		ph[i].p_align = 4;
	}
	write_tmp(path, sizeof(path), buf, size);
	getrusage(RUSAGE_SELF, &before);
	assert_int_equal(build_id_read(path, -1, id, sizeof(id)), 0);
	getrusage(RUSAGE_SELF, &after);
	assert_true(after.ru_maxrss - before.ru_maxrss < 64 * 1024); /* KiB */
	unlink(path);
	free(buf);
}

static void test_no_build_id(void **state)
{
	char path[64], cmd[256];
	uint8_t id[BUILD_ID_MAX];

	write_tmp(path, sizeof(path), "", 0);
	snprintf(cmd, sizeof(cmd),
		 "objcopy --remove-section .note.gnu.build-id /proc/self/exe %s 2>/dev/null", path);
	if (system(cmd) != 0) {
		unlink(path);
		skip();
	}
	assert_int_equal(build_id_read(path, -1, id, sizeof(id)), 0);
	unlink(path);
}

static void test_corrupt_files(void **state)
{
	uint8_t id[BUILD_ID_MAX], want[BUILD_ID_MAX], *self, junk[4096];
	size_t self_len, cuts[] = { 1, 4, 16, 63, 64, 65, 200, 1000, 4096 };
	char path[64];
	int wn, n;

	/* Empty file. */
	write_tmp(path, sizeof(path), "", 0);
	assert_int_equal(build_id_read(path, -1, id, sizeof(id)), -ENOEXEC);
	unlink(path);

	/* Random bytes (fixed seed: reproducible). */
	srand(12345);
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)rand();
	write_tmp(path, sizeof(path), junk, sizeof(junk));
	assert_int_equal(build_id_read(path, -1, id, sizeof(id)), -ENOEXEC);
	unlink(path);

	/* Our own binary cut short anywhere: error, none, or the right id. */
	self = read_all("/proc/self/exe", &self_len);
	wn = build_id_read("/proc/self/exe", -1, want, sizeof(want));
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		write_tmp(path, sizeof(path), self, cuts[i] < self_len ? cuts[i] : self_len);
		n = build_id_read(path, -1, id, sizeof(id));
		assert_true(n == -ENOEXEC || n == 0 || n == wn);
		if (n > 0)
			assert_memory_equal(id, want, (size_t)n);
		unlink(path);
	}
	/* Shorter than an ELF header. */
	write_tmp(path, sizeof(path), self, 63);
	assert_int_equal(build_id_read(path, -1, id, sizeof(id)), -ENOEXEC);
	unlink(path);

	/* Random damage to headers and notes must never crash. */
	size_t head = self_len < 8192 ? self_len : 8192;
	uint8_t *copy = malloc(head);

	assert_non_null(copy);
	for (int round = 0; round < 300; round++) {
		memcpy(copy, self, head);
		for (int k = 0; k < 8; k++)
			copy[(size_t)rand() % head] = (uint8_t)rand();
		write_tmp(path, sizeof(path), copy, head);
		n = build_id_read(path, -1, id, sizeof(id));
		assert_true(n >= -ENOEXEC && n <= BUILD_ID_MAX);
		unlink(path);
	}
	free(copy);
	free(self);
}

static void test_errors(void **state)
{
	uint8_t id[BUILD_ID_MAX];

	assert_int_equal(build_id_read("/nonexistent/strata/file", -1, id, sizeof(id)), -ENOENT);
	assert_int_equal(build_id_read(NULL, -1, id, sizeof(id)), -EINVAL);
	assert_int_equal(build_id_read("/proc/self/exe", -1, NULL, 20), -EINVAL);
	assert_int_equal(build_id_read("/proc/self/exe", -1, id, 0), -EINVAL);
	/* A directory is not an ELF file. */
	assert_int_equal(build_id_read("/", -1, id, sizeof(id)), -ENOEXEC);
}

static void test_hex(void **state)
{
	const uint8_t id[] = { 0x00, 0x9f, 0xab, 0xff };
	char buf[16];

	assert_string_equal(build_id_hex(id, 4, buf, sizeof(buf)), "009fabff");
	/* Too small: whole bytes only, always terminated. */
	assert_string_equal(build_id_hex(id, 4, buf, 6), "009f");
	assert_string_equal(build_id_hex(id, 4, buf, 5), "009f");
	assert_string_equal(build_id_hex(id, 4, buf, 1), "");
	assert_string_equal(build_id_hex(id, 0, buf, sizeof(buf)), "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_self_matches_readelf),
		cmocka_unit_test(test_shared_library),
		cmocka_unit_test(test_short_buffer),
		cmocka_unit_test(test_section_notes),
		cmocka_unit_test(test_many_note_segments),
		cmocka_unit_test(test_no_build_id),
		cmocka_unit_test(test_corrupt_files),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_hex),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
