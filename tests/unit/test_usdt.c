// SPDX-License-Identifier: Apache-2.0
/*
 * USDT notes (agent/proc/usdt.c): argument specs as <sys/sdt.h> writes them
 * on x86-64 (sizes, signedness, registers of every width, displacements,
 * constants) and the ones it must refuse rather than guess; the notes of
 * the caching-allocator stand-in (build/fixtures/libc10_cuda.so: real
 * sys/sdt.h probes with semaphores); and a library whose one note has an
 * argument we do not understand: that probe skipped and counted, the
 * other one delivered.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <asm/ptrace.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "agent/proc/usdt.h"
#include "tests/unit/test_util.h"

#define OFF(r) offsetof(struct pt_regs, r)

static void args_of_every_shape(void **state)
{
	struct usdt_arg_spec a[USDT_MAX_ARGS];

	assert_int_equal(
		usdt_args_parse("-4@%edi 8@-16(%rbp) 8@%rax -1@$-3 2@0x10(%r12)", a, USDT_MAX_ARGS),
		5);
	assert_int_equal(a[0].kind, USDT_ARG_REG);
	assert_int_equal(a[0].reg_off, OFF(rdi));
	assert_int_equal(a[0].size, 4);
	assert_true(a[0].is_signed);
	assert_int_equal(a[1].kind, USDT_ARG_DEREF);
	assert_int_equal(a[1].reg_off, OFF(rbp));
	assert_int_equal(a[1].val, -16);
	assert_int_equal(a[1].size, 8);
	assert_false(a[1].is_signed);
	assert_int_equal(a[2].reg_off, OFF(rax));
	assert_int_equal(a[3].kind, USDT_ARG_CONST);
	assert_int_equal(a[3].val, -3);
	assert_int_equal(a[3].size, 1);
	assert_int_equal(a[4].kind, USDT_ARG_DEREF);
	assert_int_equal(a[4].reg_off, OFF(r12));
	assert_int_equal(a[4].val, 16);
	/* the low-byte and word names of the same registers */
	assert_int_equal(usdt_args_parse("1@%r12b 2@%si -1@%dil 4@%r9d 8@(%rsp)", a, 12), 5);
	assert_int_equal(a[0].reg_off, OFF(r12));
	assert_int_equal(a[1].reg_off, OFF(rsi));
	assert_int_equal(a[2].reg_off, OFF(rdi));
	assert_int_equal(a[3].reg_off, OFF(r9));
	assert_int_equal(a[4].kind, USDT_ARG_DEREF);
	assert_int_equal(a[4].val, 0);
	/* no arguments, and blanks around them */
	assert_int_equal(usdt_args_parse("", a, 12), 0);
	assert_int_equal(usdt_args_parse("  8@%rdx  ", a, 12), 1);
}

/* Specs a consumer would have to guess at: refused, never approximated. */
static void args_not_understood_are_refused(void **state)
{
	static const char *bad[] = {
		"8@(%rax,%rbx,8)", /* an index register */
		"8@foo+8(%rip)",   /* a symbol */
		"8@8(%rip)",	   /* %rip-relative: the next instruction's */
		"1@%ah",	   /* a high byte */
		"%rdi",		   /* no size */
		"3@%rdi",	   /* no such size */
		"8@%xmm0",	   /* not a general register */
		"8@%rdi,",	   /* trailing garbage */
		"8@",		   /* no operand */
		"8@$",		   /* no number */
		"8@$99999999999999999999",
		"8@-16(%rbp",	  /* unclosed */
		"8@%rdi 8@%nope", /* one bad of two */
	};
	struct usdt_arg_spec a[USDT_MAX_ARGS];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(usdt_args_parse(bad[i], a, USDT_MAX_ARGS), -EINVAL);
	assert_int_equal(usdt_args_parse("8@%rdi 8@%rsi 8@%rdx", a, 2), -E2BIG);
}

struct seen {
	struct usdt_probe p[8];
	int n;
};

static int collect(void *ctx, const struct usdt_probe *p)
{
	struct seen *s = ctx;

	if (s->n < 8)
		s->p[s->n++] = *p;
	return 0;
}

static const struct usdt_probe *find(const struct seen *s, const char *name)
{
	for (int i = 0; i < s->n; i++)
		if (!strcmp(s->p[i].name, name))
			return &s->p[i];
	return NULL;
}

/* The stand-in allocator: pytorch:malloc (4 arguments) and pytorch:free,
 * each with a semaphore, at file offsets inside the file. */
static void caching_allocator_notes(void **state)
{
	struct usdt_stats st = { 0 };
	struct seen s = { .n = 0 };
	const struct usdt_probe *m, *f;
	off_t size;
	int fd = open("build/fixtures/libc10_cuda.so", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		skip(); /* make fixtures */
	size = lseek(fd, 0, SEEK_END);
	assert_int_equal(usdt_scan(fd, collect, &s, &st), 0);
	close(fd);
	assert_int_equal(st.bad_args, 0);
	assert_int_equal(st.malformed, 0);
	m = find(&s, "malloc");
	f = find(&s, "free");
	assert_non_null(m);
	assert_non_null(f);
	assert_string_equal(m->provider, "pytorch");
	assert_int_equal(m->nargs, 4);
	assert_int_equal(f->nargs, 1);
	assert_int_equal(f->args[0].size, 8);
	assert_true(m->sem_offset && f->sem_offset && m->sem_offset != f->sem_offset);
	assert_true(m->offset && m->offset < (uint64_t)size && f->offset < (uint64_t)size);
	assert_true(m->sem_offset < (uint64_t)size);
}

/* A library with one probe whose argument we cannot read and one good
 * probe (notes written by hand, as a toolchain might). */
static void bad_note_skipped_and_counted(void **state)
{
	char dir[] = "/tmp/strata-usdt.XXXXXX", cmd[2048], so[512];
	struct usdt_stats st = { 0 };
	struct seen s = { .n = 0 };
	FILE *f;
	int fd;

	assert_non_null(mkdtemp(dir));
	snprintf(so, sizeof(so), "%s/note.c", dir);
	f = fopen(so, "w");
	assert_non_null(f);
	/* sys/sdt.h's note layout: pc, base, semaphore, provider, name, args */
	fputs("#define NOTE(label, name, args) \\\n"
	      "  __asm__ volatile(\"990: nop\\n\" \\\n"
	      "  \".pushsection .note.stapsdt,\\\"?\\\",\\\"note\\\"\\n\" \\\n"
	      "  \".balign 4\\n .4byte 992f-991f, 994f-993f, 3\\n\" \\\n"
	      "  \"991: .asciz \\\"stapsdt\\\"\\n992: .balign 4\\n\" \\\n"
	      "  \"993: .8byte 990b\\n .8byte _.stapsdt.base\\n .8byte 0\\n\" \\\n"
	      "  \".asciz \\\"demo\\\"\\n .asciz \\\"\" name \"\\\"\\n\" \\\n"
	      "  \".asciz \\\"\" args \"\\\"\\n994: .balign 4\\n .popsection\\n\")\n"
	      "__asm__(\".pushsection .stapsdt.base,\\\"aG\\\",\\\"progbits\\\",.stapsdt.base,"
	      "comdat\\n.weak _.stapsdt.base\\n.hidden _.stapsdt.base\\n_.stapsdt.base: "
	      ".space 1\\n.popsection\");\n"
	      "void good(long x) { NOTE(1, \"good\", \"8@%rdi\"); }\n"
	      "void bad(long x) { NOTE(2, \"bad\", \"8@(%rdi,%rsi,8)\"); }\n",
	      f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "cc -O1 -shared -fPIC -o %s/libnote.so %s", dir, so);
	assert_int_equal(system(cmd), 0);
	snprintf(so, sizeof(so), "%s/libnote.so", dir);
	fd = open(so, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(usdt_scan(fd, collect, &s, &st), 0);
	close(fd);
	assert_int_equal(st.notes, 2);
	assert_int_equal(st.bad_args, 1); /* skipped and counted */
	assert_int_equal(s.n, 1);
	assert_string_equal(s.p[0].name, "good");
	assert_int_equal(s.p[0].sem_offset, 0);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

/* Not ELF, or ELF without notes: no probes, no crash. */
static void not_elf(void **state)
{
	static const char junk[] = "\x7f"
				   "ELF garbage";
	struct usdt_stats st = { 0 };
	struct seen s = { .n = 0 };

	assert_int_equal(usdt_scan_mem(junk, sizeof(junk), collect, &s, &st), -ENOEXEC);
	assert_int_equal(s.n, 0);
}

/* Eight 15-MiB note sections: each within ELF_NOTES_MAX, together 120
 * MiB that libelf would hold at once; the file's notes are bounded
 * together (the rest skipped and counted). */
static void many_note_sections_bounded_together(void **state)
{
	int fd = make_many_sections_elf(8, SHT_NOTE, 15u << 20);
	struct usdt_stats st = { 0 };
	struct seen s = { .n = 0 };
	struct rusage before, after;

	getrusage(RUSAGE_SELF, &before);
	assert_int_equal(usdt_scan(fd, collect, &s, &st), 0);
	assert_int_equal(s.n, 0);
	getrusage(RUSAGE_SELF, &after);
	assert_int_equal(st.malformed, 7);
	assert_true(after.ru_maxrss - before.ru_maxrss < 48 * 1024); /* KiB */
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(args_of_every_shape),
		cmocka_unit_test(args_not_understood_are_refused),
		cmocka_unit_test(caching_allocator_notes),
		cmocka_unit_test(bad_note_skipped_and_counted),
		cmocka_unit_test(not_elf),
		cmocka_unit_test(many_note_sections_bounded_together),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
