// SPDX-License-Identifier: Apache-2.0
/*
 * The server's build-id store against forged and stale files:
 * a file is taken only for its exact id (a 1-byte note is no file for
 * every id starting with that byte), a stored file whose note is not its
 * id is dropped on first use and replaced by the next upload, and the
 * store stays within its bytes and files, evicting the least recently used
 * (an order that survives a restart).
 */
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
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/sparse_elf.h"
#include "server/buildid_store.h"
#include "tests/unit/test_util.h"

/* A minimal ELF64 whose only content is a GNU build-id note of id[0..n),
 * padded with zeros to size bytes (at least the headers). */
static uint8_t *make_elf(const uint8_t *id, size_t n, size_t size, size_t *len)
{
	size_t note = sizeof(Elf64_Ehdr) + sizeof(Elf64_Phdr);
	size_t desc = (n + 3) & ~3ul, need = note + sizeof(Elf64_Nhdr) + 4 + desc;
	uint8_t *f = calloc(1, size > need ? size : need);
	Elf64_Ehdr *eh = (Elf64_Ehdr *)f;
	Elf64_Phdr *ph = (Elf64_Phdr *)(f + sizeof(*eh));
	Elf64_Nhdr *nh = (Elf64_Nhdr *)(f + note);

	assert_non_null(f);
	elf64_header(eh, ET_DYN);
	eh->e_phoff = sizeof(*eh);
	eh->e_phentsize = sizeof(*ph);
	eh->e_phnum = 1;
	ph->p_type = PT_NOTE;
	ph->p_offset = note;
	ph->p_filesz = ph->p_memsz = sizeof(*nh) + 4 + desc;
	ph->p_align = 4;
	nh->n_namesz = 4;
	nh->n_descsz = (Elf64_Word)n;
	nh->n_type = NT_GNU_BUILD_ID;
	memcpy(f + note + sizeof(*nh), "GNU", 4);
	memcpy(f + note + sizeof(*nh) + 4, id, n);
	*len = size > need ? size : need;
	return f;
}

/* The 20-byte id whose bytes are all b, as hex. */
static void id20(uint8_t b, uint8_t id[20], char hex[41])
{
	memset(id, b, 20);
	for (int i = 0; i < 20; i++)
		snprintf(hex + 2 * i, 3, "%02x", b);
}

static int put(struct buildid_store *s, uint8_t b, size_t size)
{
	uint8_t id[20];
	char hex[41];
	size_t len;
	uint8_t *f;
	int err;

	id20(b, id, hex);
	f = make_elf(id, 20, size, &len);
	err = buildid_store__put(s, hex, f, len);
	free(f);
	return err;
}

static int have(struct buildid_store *s, uint8_t b)
{
	uint8_t id[20];
	char hex[41], path[256];

	id20(b, id, hex);
	return !buildid_store__path(s, hex, path, sizeof(path));
}

static char *tmpdir(void)
{
	char *d = strdup("/tmp/strata-bids-XXXXXX");

	assert_non_null(d);
	assert_non_null(mkdtemp(d));
	return d;
}

static void rmdir_all(char *d)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d);
	assert_int_equal(system(cmd), 0);
	free(d);
}

static void test_exact_id(void **state)
{
	char *dir = tmpdir();
	struct buildid_store *s = buildid_store__open(dir, 1 << 20, 0);
	const uint8_t one[1] = { 0xab }, two[2] = { 0xab, 0xab };
	uint8_t id[20];
	char hex[41], path[256];
	size_t len;
	uint8_t *f = make_elf(one, 1, 0, &len);
	struct buildid_store_stats st;

	assert_non_null(s);
	/* a 1-byte note claims a 20-byte id that starts with its byte: no */
	id20(0xab, id, hex);
	assert_int_equal(buildid_store__put(s, hex, f, len), -ENOEXEC);
	assert_int_equal(buildid_store__path(s, hex, path, sizeof(path)), -ENOENT);
	/* an id of one byte has no place in the store */
	assert_int_equal(buildid_store__put(s, "ab", f, len), -EINVAL);
	free(f);
	/* a 2-byte note: the file of its own id, of no longer one */
	f = make_elf(two, 2, 0, &len);
	assert_int_equal(buildid_store__put(s, hex, f, len), -ENOEXEC);
	assert_int_equal(buildid_store__put(s, "abab", f, len), 0);
	free(f);
	/* a 20-byte note does not serve its prefix either */
	f = make_elf(id, 20, 0, &len);
	assert_int_equal(buildid_store__put(s, "ababab", f, len), -ENOEXEC);
	assert_int_equal(buildid_store__put(s, hex, f, len), 0);
	assert_int_equal(buildid_store__path(s, hex, path, sizeof(path)), 0);
	buildid_store__stats(s, &st);
	assert_int_equal(st.files, 2);
	assert_int_equal(st.rejected, 3);
	free(f);
	buildid_store__free(s);
	rmdir_all(dir);
}

/* A file an older server stored under an id its note does not match (it
 * took prefixes) is dropped on first use; the next upload replaces it. */
static void test_replace_bad_file(void **state)
{
	char *dir = tmpdir();
	const uint8_t one[1] = { 0xcd };
	uint8_t id[20];
	char hex[41], path[512], sub[300];
	size_t len;
	uint8_t *f = make_elf(one, 1, 0, &len);
	struct buildid_store *s;
	struct buildid_store_stats st;
	FILE *out;

	id20(0xcd, id, hex);
	snprintf(sub, sizeof(sub), "%s/cd", dir);
	assert_int_equal(mkdir(sub, 0755), 0);
	snprintf(path, sizeof(path), "%s/%s", sub, hex + 2);
	out = fopen(path, "wb");
	assert_non_null(out);
	assert_int_equal(fwrite(f, 1, len, out), len);
	fclose(out);
	free(f);

	s = buildid_store__open(dir, 1 << 20, 0);
	assert_non_null(s);
	buildid_store__stats(s, &st);
	assert_int_equal(st.files, 1);
	assert_false(have(s, 0xcd)); /* checked on use: dropped */
	assert_int_equal(access(path, F_OK), -1);
	buildid_store__stats(s, &st);
	assert_int_equal(st.replaced, 1);
	assert_int_equal(st.files, 0);
	assert_int_equal(st.bytes, 0);
	assert_int_equal(put(s, 0xcd, 0), 0);
	assert_true(have(s, 0xcd));
	/* the first good upload wins: a second one keeps the first */
	assert_int_equal(put(s, 0xcd, 5000), 0);
	buildid_store__stats(s, &st);
	assert_int_equal(st.files, 1);
	assert_true(st.bytes < 5000);
	buildid_store__free(s);
	rmdir_all(dir);
}

/* 3 KB files in a 10 KB store: the least recently used goes for room;
 * a file larger than the whole store is refused. */
static void test_lru_bytes(void **state)
{
	char *dir = tmpdir();
	struct buildid_store *s = buildid_store__open(dir, 10000, 0);
	struct buildid_store_stats st;

	assert_non_null(s);
	assert_int_equal(put(s, 0x01, 3000), 0);
	assert_int_equal(put(s, 0x02, 3000), 0);
	assert_int_equal(put(s, 0x03, 3000), 0);
	assert_true(have(s, 0x01)); /* used: 02 is now the oldest */
	assert_int_equal(put(s, 0x04, 3000), 0);
	assert_true(have(s, 0x01));
	assert_false(have(s, 0x02));
	assert_true(have(s, 0x03));
	assert_true(have(s, 0x04));
	buildid_store__stats(s, &st);
	assert_int_equal(st.evicted, 1);
	assert_int_equal(st.files, 3);
	assert_int_equal(st.bytes, 9000);
	assert_int_equal(put(s, 0x05, 20000), -ENOSPC);
	buildid_store__stats(s, &st);
	assert_int_equal(st.refused_full, 1);
	assert_int_equal(st.bytes, 9000);
	buildid_store__free(s);
	rmdir_all(dir);
}

/* Uploads in progress take the store's bound as their bytes arrive (not
 * as declared), together at most half of it, and evict nothing: a stored
 * file makes room for its own size when it is committed. */
static void test_uploads_in_progress_evict_nothing(void **state)
{
	char *dir = tmpdir();
	struct buildid_store *s = buildid_store__open(dir, 10000, 0);
	struct buildid_store_stats st;
	struct buildid_upload *u[8], *v;
	static const uint8_t bytes[5000];
	uint8_t id[20];
	char hex[41];

	assert_non_null(s);
	for (uint8_t b = 1; b <= 3; b++)
		assert_int_equal(put(s, b, 3000), 0);
	/* declared, nothing sent: nothing held */
	for (int i = 0; i < 8; i++) {
		id20((uint8_t)(0x10 + i), id, hex);
		assert_int_equal(buildid_store__begin(s, hex, 5000, &u[i]), 0);
	}
	buildid_store__stats(s, &st);
	assert_int_equal(st.incoming, 0);
	/* sent: held, up to half the bound */
	assert_int_equal(buildid_upload__write(u[0], bytes, 5000), 0);
	assert_int_equal(buildid_upload__write(u[1], bytes, 1), -ENOSPC);
	/* one that could never fit: refused unread */
	id20(0x05, id, hex);
	assert_int_equal(buildid_store__begin(s, hex, 5001, &v), -ENOSPC);
	assert_true(have(s, 0x01) && have(s, 0x02) && have(s, 0x03));
	buildid_store__stats(s, &st);
	assert_int_equal(st.evicted, 0);
	assert_int_equal(st.incoming, 5000);
	for (int i = 0; i < 8; i++)
		buildid_upload__abort(u[i]);
	assert_int_equal(put(s, 0x06, 3000), 0); /* room for its own size */
	buildid_store__stats(s, &st);
	assert_int_equal(st.evicted, 1);
	assert_int_equal(st.incoming, 0);
	assert_int_equal(st.files, 3);
	assert_true(have(s, 0x06));
	buildid_store__free(s);
	rmdir_all(dir);
}

/* A bound on files; the order of use survives a restart (in the mtime),
 * and a lower bound at open evicts down to it. */
/* A 4 MiB file of 420 bytes sent: its headers (with a section table of
 * one more section, type, at 2 MiB, 1 MiB long, in a hole) and 100 bytes
 * at 512 KiB, as a sparse ELF body (lib/sparse_elf.h) into *blen bytes. */
static uint8_t *sparse_body(const uint8_t *id, uint32_t type, size_t *blen)
{
	size_t len;
	uint8_t *f = make_elf(id, 20, 1 << 20, &len), *b = malloc(SPARSE_ELF_HEAD + 32 + 420);
	Elf64_Ehdr *eh = (Elf64_Ehdr *)f;
	Elf64_Shdr *sh = (Elf64_Shdr *)(f + 192);

	assert_non_null(b);
	eh->e_shoff = 192;
	eh->e_shentsize = sizeof(*sh);
	eh->e_shnum = 2;
	sh[1].sh_type = type;
	sh[1].sh_flags = type == SHT_PROGBITS ? SHF_ALLOC | SHF_EXECINSTR : 0;
	sh[1].sh_offset = 2 << 20;
	sh[1].sh_size = 1 << 20;
	memset(f + (512 << 10), 0xab, 100);
	memcpy(b, SPARSE_ELF_MAGIC, 8);
	put_le64(b + 8, 4 << 20);
	put_le32(b + 16, 2);
	put_le32(b + 20, 0);
	put_le64(b + 24, 0);
	put_le64(b + 32, 320);
	put_le64(b + 40, 512 << 10);
	put_le64(b + 48, 100);
	memcpy(b + SPARSE_ELF_HEAD + 32, f, 320);
	memcpy(b + SPARSE_ELF_HEAD + 32 + 320, f + (512 << 10), 100);
	*blen = SPARSE_ELF_HEAD + 32 + 420;
	free(f);
	return b;
}

/* Begins a sparse upload of hex and writes body in pieces of 7 bytes. */
static struct buildid_upload *sparse_upload(struct buildid_store *s, const char *hex,
					    const uint8_t *body, size_t blen)
{
	struct buildid_upload *u;

	assert_int_equal(buildid_store__begin(s, hex, blen, &u), 0);
	assert_int_equal(buildid_upload__sparse(u), 0);
	for (size_t at = 0; at < blen; at += 7)
		assert_int_equal(buildid_upload__write(u, body + at, blen - at < 7 ? blen - at : 7),
				 0);
	return u;
}

/* Stored with its holes at its size, counted by what it takes on disk
 * (also after a restart); refused when cut short, malformed, or with a
 * hole where a section the symbolizer reads (a symbol table) claims to be. */
static void test_sparse_upload(void **state)
{
	char *dir = tmpdir(), hex[41], path[512];
	struct buildid_store *s = buildid_store__open(dir, 1 << 20, 0);
	struct buildid_store_stats st;
	struct buildid_upload *u;
	uint8_t id[20], *body;
	size_t blen;
	struct stat sb;

	(void)state;
	id20(0x31, id, hex);
	body = sparse_body(id, SHT_PROGBITS, &blen); /* code: may be a hole */
	assert_int_equal(buildid_store__commit(sparse_upload(s, hex, body, blen)), 0);
	free(body);
	assert_int_equal(buildid_store__path(s, hex, path, sizeof(path)), 0);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_size, 4 << 20);
	assert_true(sb.st_blocks * 512 < (64 << 10)); /* holes */
	buildid_store__stats(s, &st);
	assert_true(st.bytes >= 420 && st.bytes < (64 << 10));

	/* a symbol table in a hole: gigabytes of zeros for the symbolizer */
	id20(0x32, id, hex);
	body = sparse_body(id, SHT_SYMTAB, &blen);
	assert_int_equal(buildid_store__commit(sparse_upload(s, hex, body, blen)), -EBADMSG);
	/* cut short: refused at the end; malformed: refused as it comes */
	assert_int_equal(buildid_store__begin(s, hex, blen, &u), 0);
	assert_int_equal(buildid_upload__sparse(u), 0);
	assert_int_equal(buildid_upload__write(u, body, blen - 1), 0);
	assert_int_equal(buildid_store__commit(u), -EBADMSG);
	assert_int_equal(buildid_store__begin(s, hex, blen, &u), 0);
	assert_int_equal(buildid_upload__sparse(u), 0);
	body[0] = 'X';
	assert_int_equal(buildid_upload__write(u, body, blen), -EBADMSG);
	buildid_upload__abort(u);
	free(body);
	buildid_store__free(s);

	/* a restart counts what the file takes on disk, not its size */
	s = buildid_store__open(dir, 1 << 20, 0);
	buildid_store__stats(s, &st);
	assert_int_equal(st.files, 1);
	assert_true(st.bytes < (64 << 10));
	buildid_store__free(s);
	rmdir_all(dir);
}

static void test_lru_files_restart(void **state)
{
	char *dir = tmpdir();
	struct buildid_store *s = buildid_store__open(dir, 1 << 20, 3);
	struct buildid_store_stats st;
	char path[256];
	uint8_t id[20];
	char hex[41];

	assert_non_null(s);
	for (uint8_t b = 0x10; b < 0x14; b++)
		assert_int_equal(put(s, b, 0), 0);
	buildid_store__stats(s, &st);
	assert_int_equal(st.files, 3);
	assert_false(have(s, 0x10));
	buildid_store__free(s);

	/* last used long ago, as the mtime says: 0x12 oldest, then 0x11 */
	for (uint8_t b = 0x11; b < 0x14; b++) {
		struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT },
					  { .tv_sec = b == 0x12	  ? 1000
						      : b == 0x11 ? 2000
								  : 3000 } };

		id20(b, id, hex);
		snprintf(path, sizeof(path), "%s/%.2s/%s", dir, hex, hex + 2);
		assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
	}
	s = buildid_store__open(dir, 1 << 20, 2);
	assert_non_null(s);
	buildid_store__stats(s, &st);
	assert_int_equal(st.files, 2);
	assert_false(have(s, 0x12));
	assert_true(have(s, 0x11));
	assert_true(have(s, 0x13));
	buildid_store__free(s);
	rmdir_all(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exact_id),
		cmocka_unit_test(test_replace_bad_file),
		cmocka_unit_test(test_lru_bytes),
		cmocka_unit_test(test_uploads_in_progress_evict_nothing),
		cmocka_unit_test(test_sparse_upload),
		cmocka_unit_test(test_lru_files_restart),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
