// SPDX-License-Identifier: Apache-2.0
/* What an agent sends of a library for symbolization (uploader/elf_slim.c):
 * the file rebuilt from its ranges as the server stores it (a sparse file,
 * every kept byte at its offset) has the same build-id and names the same
 * functions at the same offsets.  The real NVIDIA library (libcublasLt,
 * over 512 MiB, most of it GPU code: never uploaded before) goes down to a
 * few percent.  Hostile and degenerate files are sent whole or not at all,
 * never read out of bounds. */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
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

#include "symbolize/buildid.h"
#include "symbolize/symbolize.h"
#include "uploader/elf_slim.h"

#define STANDIN "build/fixtures/libcudart.so"
#define CUBLASLT "/usr/local/cuda/lib64/libcublasLt.so.13"

/* The file offset of an exported function (its .dynsym value in the
 * PT_LOAD holding it), 0 when absent. */
static uint64_t func_offset(const char *path, const char *name)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	Elf *e;
	Elf_Scn *scn = NULL;
	uint64_t vaddr = 0, off = 0;
	size_t nph;

	assert_true(fd >= 0);
	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	assert_non_null(e);
	while (!vaddr && (scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM ||
		    !(d = elf_getdata(scn, NULL)))
			continue;
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym sym;
			const char *n;

			if (gelf_getsym(d, (int)i, &sym) && sym.st_value &&
			    GELF_ST_TYPE(sym.st_info) == STT_FUNC &&
			    (n = elf_strptr(e, sh.sh_link, sym.st_name)) && !strcmp(n, name)) {
				vaddr = sym.st_value;
				break;
			}
		}
	}
	assert_int_equal(elf_getphdrnum(e, &nph), 0);
	for (size_t i = 0; vaddr && i < nph; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD && vaddr >= ph.p_vaddr &&
		    vaddr < ph.p_vaddr + ph.p_filesz)
			off = vaddr - ph.p_vaddr + ph.p_offset;
	}
	elf_end(e);
	close(fd);
	return off;
}

/* The file as the server stores it: the ranges at their offsets, holes
 * elsewhere.  Its path (static buffer). */
static const char *rebuild(const char *path, const struct elf_slim *s)
{
	static char out[64];
	int in = open(path, O_RDONLY | O_CLOEXEC), fd;
	char *buf = malloc(1 << 20);

	snprintf(out, sizeof(out), "/tmp/strata-slim-XXXXXX");
	fd = mkstemp(out);
	assert_true(in >= 0 && fd >= 0 && buf);
	for (uint32_t i = 0; i < s->n; i++)
		for (uint64_t done = 0; done < s->r[i].len;) {
			size_t k = s->r[i].len - done < (1 << 20) ? s->r[i].len - done : (1 << 20);

			assert_int_equal(pread(in, buf, k, (off_t)(s->r[i].off + done)),
					 (ssize_t)k);
			assert_int_equal(pwrite(fd, buf, k, (off_t)(s->r[i].off + done)),
					 (ssize_t)k);
			done += k;
		}
	assert_int_equal(ftruncate(fd, (off_t)s->size), 0);
	free(buf);
	close(in);
	close(fd);
	return out;
}

static void ranges_sane(const struct elf_slim *s)
{
	uint64_t end = 0, kept = 0;

	for (uint32_t i = 0; i < s->n; i++) {
		assert_true(s->r[i].len > 0);
		assert_true(!i || s->r[i].off >= end);
		assert_true(s->r[i].off + s->r[i].len <= s->size);
		end = s->r[i].off + s->r[i].len;
		kept += s->r[i].len;
	}
	assert_int_equal(kept, s->kept);
}

/* Same build-id, same names for funcs on the rebuilt file. */
static void same_symbols(const char *path, const struct elf_slim *s, const char *const *funcs,
			 size_t nfuncs)
{
	const char *copy = rebuild(path, s);
	int cfd = open(copy, O_RDONLY | O_CLOEXEC);

	/* what is sent passes the server's check (lib/sparse_elf.h) */
	assert_true(cfd >= 0);
	assert_int_equal(sparse_elf_check(cfd, s->size, s->r, s->n), 0);
	close(cfd);
	uint8_t id[BUILD_ID_MAX], id2[BUILD_ID_MAX];
	struct symbolizer *a = symbolizer__new(NULL), *b = symbolizer__new(NULL);
	int n = build_id_read(path, -1, id, sizeof(id));

	assert_true(n > 0);
	assert_int_equal(build_id_read(copy, -1, id2, sizeof(id2)), n);
	assert_memory_equal(id, id2, (size_t)n);
	for (size_t i = 0; i < nfuncs; i++) {
		uint64_t off = func_offset(path, funcs[i]);
		struct sym_frame fa[SYM_MAX_INLINE], fb[SYM_MAX_INLINE];
		int na, nb;

		assert_true(off > 0);
		na = symbolizer__resolve(a, path, id, (size_t)n, off + 1, fa, SYM_MAX_INLINE);
		nb = symbolizer__resolve(b, copy, id, (size_t)n, off + 1, fb, SYM_MAX_INLINE);
		assert_true(na > 0);
		assert_int_equal(na, nb);
		assert_string_equal(fa[na - 1].func, fb[nb - 1].func);
		if (!strstr(fa[na - 1].func, funcs[i]))
			fail_msg("%s at %#llx named %s", funcs[i], (unsigned long long)off,
				 fa[na - 1].func);
	}
	symbolizer__free(a);
	symbolizer__free(b);
	unlink(copy);
}

static void test_standin(void **state)
{
	static const char *const funcs[] = { "cudaMalloc", "cudaFree", "cudaLaunchKernel" };
	struct elf_slim *s = malloc(sizeof(*s));
	struct stat st;
	int fd = open(STANDIN, O_RDONLY | O_CLOEXEC);

	(void)state;
	if (fd < 0) {
		free(s);
		skip(); /* make fixtures */
	}
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(elf_slim__ranges(fd, (uint64_t)st.st_size, s), 0);
	close(fd);
	ranges_sane(s);
	assert_true(s->kept <= s->size);
	same_symbols(STANDIN, s, funcs, 3);
	free(s);
}

static void test_real_nvidia_library(void **state)
{
	static const char *const funcs[] = { "cublasLtGetStatusString", "cublasLtGetVersion",
					     "cublasLtMatmul", "cublasLtCreate" };
	struct elf_slim *s = malloc(sizeof(*s));
	struct stat st;
	int fd = open(CUBLASLT, O_RDONLY | O_CLOEXEC);

	(void)state;
	if (fd < 0) {
		free(s);
		skip(); /* no CUDA toolkit on this machine */
	}
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(elf_slim__ranges(fd, (uint64_t)st.st_size, s), 0);
	close(fd);
	ranges_sane(s);
	print_message("%s: %llu bytes, %llu sent in %u ranges (%.1f%%)\n", CUBLASLT,
		      (unsigned long long)s->size, (unsigned long long)s->kept, s->n,
		      100.0 * (double)s->kept / (double)s->size);
	assert_true(s->size > (512ull << 20)); /* over the upload bound: never sent before */
	assert_true(s->kept < s->size / 10);
	same_symbols(CUBLASLT, s, funcs, 4);
	free(s);
}

/* memfd holding bytes[0..n). */
static int file_of(const void *bytes, size_t n)
{
	char path[] = "/tmp/strata-slim-in-XXXXXX";
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	unlink(path);
	assert_int_equal(write(fd, bytes, n), (ssize_t)n);
	return fd;
}

static void whole(const void *bytes, size_t n)
{
	struct elf_slim *s = malloc(sizeof(*s));
	int fd = file_of(bytes, n);

	assert_int_equal(elf_slim__ranges(fd, n, s), 0);
	assert_int_equal(s->n, 1);
	assert_int_equal(s->r[0].off, 0);
	assert_int_equal(s->r[0].len, n);
	close(fd);
	free(s);
}

static void test_hostile(void **state)
{
	Elf64_Ehdr eh = { 0 };
	static uint8_t big[1 << 16] __attribute__((aligned(8)));
	struct elf_slim *s = malloc(sizeof(*s));
	int fd;

	(void)state;
	whole("not an elf at all, just some text", 34);
	whole("\177ELF", 4); /* shorter than a header */
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS32; /* not one we read */
	whole(&eh, sizeof(eh));
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_shentsize = sizeof(Elf64_Shdr);
	eh.e_shoff = 1ull << 40; /* section headers past the end */
	eh.e_shnum = 3;
	whole(&eh, sizeof(eh));
	eh.e_shoff = sizeof(eh);
	eh.e_shnum = 60000; /* more than the file holds */
	whole(&eh, sizeof(eh));
	/* section headers in the file whose sections lie past its end or
	 * wrap around: clipped, never read */
	memcpy(big, &eh, sizeof(eh));
	((Elf64_Ehdr *)big)->e_shnum = 4;
	for (int i = 1; i < 4; i++) {
		Elf64_Shdr *sh = (Elf64_Shdr *)(big + sizeof(eh)) + i;

		sh->sh_type = SHT_SYMTAB;
		sh->sh_offset = i == 1 ? UINT64_MAX - 10 : i == 2 ? 100 : sizeof(big) - 8;
		sh->sh_size = i == 3 ? 1ull << 40 : 64;
	}
	fd = file_of(big, sizeof(big));
	assert_int_equal(elf_slim__ranges(fd, sizeof(big), s), 0);
	ranges_sane(s);
	assert_true(s->kept < sizeof(big));
	close(fd);
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_standin),
		cmocka_unit_test(test_real_nvidia_library),
		cmocka_unit_test(test_hostile),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
