// SPDX-License-Identifier: Apache-2.0
/*
 * Communicators read from process memory (agent/gpu/nccl_comm.c): the
 * version found in ncclGetVersion's code (the stand-in and, when
 * /usr/local/cuda has it, the real libnccl.so.2), the release table, and a
 * struct ncclComm read from this very process: accepted only with both
 * magics, 0 <= rank < nranks <= 65536 and a known release; a pointer that
 * is not mapped is an error, never a fault.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "agent/gpu/gpu_elf.h"
#include "agent/gpu/nccl_comm.h"
#include "tests/unit/test_util.h"

#define REAL_NCCL "/usr/local/cuda/lib/libnccl.so.2"

static void decode_finds_the_store_through_rdi(void **state)
{
	/* 2.28.9's ncclGetVersion: test %rdi,%rdi; je; movl $0x5919,(%rdi) */
	static const uint8_t real[] = { 0x48, 0x85, 0xff, 0x74, 0x09, 0xc7, 0x07,
					0x19, 0x59, 0x00, 0x00, 0x31, 0xc0, 0xc3 };
	static const uint8_t none[] = { 0x48, 0x85, 0xff, 0x74, 0x09, 0x31, 0xc0, 0xc3 };
	uint8_t far[40] = { 0 };

	assert_int_equal(nccl_version_decode(real, sizeof(real)), 22809);
	assert_int_equal(nccl_version_decode(none, sizeof(none)), 0);
	assert_int_equal(nccl_version_decode(real, 8), 0); /* cut before the immediate */
	far[33] = 0xc7, far[34] = 0x07, far[35] = 1;	   /* past the first 32 bytes */
	assert_int_equal(nccl_version_decode(far, sizeof(far)), 0);
}

static void table_knows_2_28_9_only(void **state)
{
	const struct nccl_layout *l = nccl_layout__find(22809);

	assert_non_null(l);
	assert_int_equal(l->rank, 0x1044d0);
	assert_int_equal(l->nranks, 0x1044d4);
	assert_int_equal(l->start_magic, 0);
	assert_int_equal(l->end_magic, 0x108650);
	assert_null(nccl_layout__find(22808));
	assert_null(nccl_layout__find(0));
}

static uint32_t version_of(const char *path)
{
	struct gpu_elf_probes *p = calloc(1, sizeof(*p));
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	uint32_t v;

	assert_non_null(p);
	assert_true(fd >= 0);
	assert_int_equal(gpu_elf_scan(fd, p), 0);
	assert_true(p->n > 0);
	v = p->nccl_version;
	close(fd);
	free(p);
	return v;
}

/* The stand-in mimics 2.28.9, so the scenarios exercise the shipped row. */
static void stand_in_says_2_28_9(void **state)
{
	if (access("build/fixtures/libnccl.so", R_OK))
		skip(); /* make fixtures */
	assert_int_equal(version_of("build/fixtures/libnccl.so"), 22809);
}

static void real_library_says_2_28_9(void **state)
{
	if (access(REAL_NCCL, R_OK))
		skip();
	assert_int_equal(version_of(REAL_NCCL), 22809);
}

/* A fake struct ncclComm of 2.28.9 in this process. */
struct fake {
	uint8_t *mem;
	size_t len;
};

static void fake_set(struct fake *f, uint64_t start, uint64_t end, int32_t rank, int32_t n)
{
	memcpy(f->mem, &start, 8);
	memcpy(f->mem + 0x108650, &end, 8);
	memcpy(f->mem + 0x1044d0, &rank, 4);
	memcpy(f->mem + 0x1044d4, &n, 4);
}

static int fake_read(struct fake *f, uint32_t version, int32_t *rank, int32_t *n)
{
	return nccl_comm_read(getpid(), (uint64_t)(uintptr_t)f->mem, nccl_layout__find(version),
			      rank, n);
}

static void read_checks_magic_rank_and_version(void **state)
{
	struct fake f = { .len = 0x108660 };
	int32_t rank = -7, n = -7;

	f.mem = calloc(1, f.len);
	assert_non_null(f.mem);
	fake_set(&f, NCCL_MAGIC, NCCL_MAGIC, 2, 4);
	assert_int_equal(fake_read(&f, 22809, &rank, &n), NCCL_READ_OK);
	assert_int_equal(rank, 2);
	assert_int_equal(n, 4);

	rank = n = -7;
	assert_int_equal(fake_read(&f, 22900, &rank, &n), NCCL_READ_NO_LAYOUT);
	fake_set(&f, 0, NCCL_MAGIC, 2, 4); /* destroyed, or not a communicator */
	assert_int_equal(fake_read(&f, 22809, &rank, &n), NCCL_READ_BAD_MAGIC);
	fake_set(&f, NCCL_MAGIC, NCCL_MAGIC ^ 1, 2, 4); /* another release's layout */
	assert_int_equal(fake_read(&f, 22809, &rank, &n), NCCL_READ_BAD_MAGIC);
	fake_set(&f, NCCL_MAGIC, NCCL_MAGIC, 4, 4);
	assert_int_equal(fake_read(&f, 22809, &rank, &n), NCCL_READ_BAD_RANK);
	fake_set(&f, NCCL_MAGIC, NCCL_MAGIC, -1, 4);
	assert_int_equal(fake_read(&f, 22809, &rank, &n), NCCL_READ_BAD_RANK);
	fake_set(&f, NCCL_MAGIC, NCCL_MAGIC, 0, 0);
	assert_int_equal(fake_read(&f, 22809, &rank, &n), NCCL_READ_BAD_RANK);
	fake_set(&f, NCCL_MAGIC, NCCL_MAGIC, 0, 65537);
	assert_int_equal(fake_read(&f, 22809, &rank, &n), NCCL_READ_BAD_RANK);
	assert_int_equal(rank, -7); /* nothing written on failure */
	assert_int_equal(n, -7);
	free(f.mem);
}

static void read_of_a_bad_pointer_is_an_error(void **state)
{
	const struct nccl_layout *l = nccl_layout__find(22809);
	size_t len = 0x200000;
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int32_t rank, n;

	assert_true(m != MAP_FAILED);
	munmap(m, len);
	assert_int_equal(nccl_comm_read(getpid(), (uint64_t)(uintptr_t)m, l, &rank, &n),
			 NCCL_READ_FAULT);
	assert_int_equal(nccl_comm_read(getpid(), 0, l, &rank, &n), NCCL_READ_FAULT);
	assert_int_equal(nccl_comm_read(getpid(), UINT64_MAX - 16, l, &rank, &n), NCCL_READ_FAULT);
	assert_int_equal(nccl_comm_read(getpid(), 1ULL << 62, l, &rank, &n), NCCL_READ_FAULT);
}

/* Eight 60-MiB symbol tables: each within ELF_SYMTAB_MAX, together 480
 * MiB that libelf would hold at once; one is read, the rest skipped. */
static void many_symbol_tables_bounded_together(void **state)
{
	int fd = make_many_sections_elf(8, SHT_DYNSYM, 60u << 20);
	struct gpu_elf_probes *p = calloc(1, sizeof(*p));
	struct rusage before, after;

	assert_non_null(p);
	getrusage(RUSAGE_SELF, &before);
	assert_int_equal(gpu_elf_scan(fd, p), 0);
	getrusage(RUSAGE_SELF, &after);
	assert_int_equal(p->n, 0);
	assert_true(after.ru_maxrss - before.ru_maxrss < 128 * 1024); /* KiB */
	close(fd);
	free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(decode_finds_the_store_through_rdi),
		cmocka_unit_test(table_knows_2_28_9_only),
		cmocka_unit_test(stand_in_says_2_28_9),
		cmocka_unit_test(real_library_says_2_28_9),
		cmocka_unit_test(read_checks_magic_rank_and_version),
		cmocka_unit_test(many_symbol_tables_bounded_together),
		cmocka_unit_test(read_of_a_bad_pointer_is_an_error),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
