// SPDX-License-Identifier: Apache-2.0
#include "agent/proc/usdt.h"

#include "agent/proc/elf_addr.h"
#include "lib/elf_bounds.h"

#include <asm/ptrace.h>
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* ---- argument specs ------------------------------------------------------ */

/* x86-64 register names at every width, and where the full register is in
 * struct pt_regs.  The high-byte registers (%ah...) are left out on
 * purpose: their value is not at the register's offset. */
static const struct {
	const char *name;
	uint16_t off;
} regs[] = {
#define R(q, d, w, b, field)                                                            \
	{ q, offsetof(struct pt_regs, field) }, { d, offsetof(struct pt_regs, field) }, \
		{ w, offsetof(struct pt_regs, field) },                                 \
	{                                                                               \
		b, offsetof(struct pt_regs, field)                                      \
	}
	R("rax", "eax", "ax", "al", rax),	  R("rbx", "ebx", "bx", "bl", rbx),
	R("rcx", "ecx", "cx", "cl", rcx),	  R("rdx", "edx", "dx", "dl", rdx),
	R("rsi", "esi", "si", "sil", rsi),	  R("rdi", "edi", "di", "dil", rdi),
	R("rbp", "ebp", "bp", "bpl", rbp),	  R("rsp", "esp", "sp", "spl", rsp),
	R("r8", "r8d", "r8w", "r8b", r8),	  R("r9", "r9d", "r9w", "r9b", r9),
	R("r10", "r10d", "r10w", "r10b", r10),	  R("r11", "r11d", "r11w", "r11b", r11),
	R("r12", "r12d", "r12w", "r12b", r12),	  R("r13", "r13d", "r13w", "r13b", r13),
	R("r14", "r14d", "r14w", "r14b", r14),	  R("r15", "r15d", "r15w", "r15b", r15),
#undef R
	{ "rip", offsetof(struct pt_regs, rip) },
};

/* "%name" at *s: the register's pt_regs offset; *s moves past it. */
static int parse_reg(const char **s, uint16_t *off)
{
	const char *p = *s;
	size_t n = 0;

	if (*p++ != '%')
		return -EINVAL;
	while ((p[n] >= 'a' && p[n] <= 'z') || (p[n] >= '0' && p[n] <= '9'))
		n++;
	for (size_t i = 0; i < sizeof(regs) / sizeof(regs[0]); i++) {
		if (strlen(regs[i].name) == n && !strncmp(regs[i].name, p, n)) {
			*off = regs[i].off;
			*s = p + n;
			return 0;
		}
	}
	return -EINVAL;
}

/* A decimal or 0x number, maybe negative, at *s (within +-2^63). */
static int parse_num(const char **s, int64_t *v)
{
	const char *p = *s;
	bool neg = *p == '-';
	uint64_t x = 0;
	int base = 10, digits = 0;

	if (*p == '-' || *p == '+')
		p++;
	if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
		base = 16;
		p += 2;
	}
	for (;; p++, digits++) {
		int d;

		if (*p >= '0' && *p <= '9')
			d = *p - '0';
		else if (base == 16 && *p >= 'a' && *p <= 'f')
			d = *p - 'a' + 10;
		else if (base == 16 && *p >= 'A' && *p <= 'F')
			d = *p - 'A' + 10;
		else
			break;
		if (x > (UINT64_MAX - (uint64_t)d) / (uint64_t)base)
			return -EINVAL;
		x = x * (uint64_t)base + (uint64_t)d;
	}
	if (!digits || x > (uint64_t)INT64_MAX + neg)
		return -EINVAL;
	*v = neg ? (int64_t)(0 - x) : (int64_t)x;
	*s = p;
	return 0;
}

/* One "SIZE@OPERAND" at *s (no surrounding blanks). */
static int parse_arg(const char **s, struct usdt_arg_spec *a)
{
	const char *p = *s;
	int64_t size, v = 0;

	memset(a, 0, sizeof(*a));
	if (parse_num(&p, &size) || *p++ != '@')
		return -EINVAL; /* no size: the width would be a guess */
	if (size < 0) {
		a->is_signed = 1;
		size = -size;
	}
	if (size != 1 && size != 2 && size != 4 && size != 8)
		return -EINVAL;
	a->size = (uint8_t)size;
	if (*p == '$') { /* $imm */
		p++;
		if (parse_num(&p, &v))
			return -EINVAL;
		a->kind = USDT_ARG_CONST;
		a->val = v;
	} else if (*p == '%') { /* %reg */
		if (parse_reg(&p, &a->reg_off))
			return -EINVAL;
		a->kind = USDT_ARG_REG;
	} else { /* [disp](%reg): no index register, no symbol */
		if (*p != '(' && parse_num(&p, &v))
			return -EINVAL;
		if (*p++ != '(' || parse_reg(&p, &a->reg_off) || *p++ != ')')
			return -EINVAL;
		if (a->reg_off == offsetof(struct pt_regs, rip))
			return -EINVAL; /* rip-relative: relative to the next insn */
		a->kind = USDT_ARG_DEREF;
		a->val = v;
	}
	*s = p;
	return 0;
}

int usdt_args_parse(const char *s, struct usdt_arg_spec *out, int max)
{
	int n = 0;

	for (;;) {
		while (*s == ' ' || *s == '\t')
			s++;
		if (!*s)
			return n;
		if (n >= max)
			return -E2BIG;
		if (parse_arg(&s, &out[n]))
			return -EINVAL;
		if (*s && *s != ' ' && *s != '\t')
			return -EINVAL; /* trailing garbage after an operand */
		n++;
	}
}

/* ---- notes --------------------------------------------------------------- */

#define NT_STAPSDT 3

/* The address .stapsdt.base has in this file (0: none). */
static uint64_t stapsdt_base(Elf *e, size_t shstrndx)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		const char *name;

		if (!gelf_getshdr(scn, &sh))
			continue;
		name = elf_strptr(e, shstrndx, sh.sh_name);
		if (name && !strcmp(name, ".stapsdt.base"))
			return sh.sh_addr;
	}
	return 0;
}

/* A NUL-terminated string at desc[*pos] within len bytes; *pos moves past. */
static const char *take_str(const char *desc, size_t len, size_t *pos)
{
	const char *s = desc + *pos, *end;

	if (*pos >= len)
		return NULL;
	end = memchr(s, '\0', len - *pos);
	if (!end)
		return NULL;
	*pos += (size_t)(end - s) + 1;
	return s;
}

/* One note's descriptor: pc, base, semaphore, provider, name, args. */
static int read_note(Elf *e, uint64_t base, const char *desc, size_t len, struct usdt_probe *p,
		     struct usdt_stats *st)
{
	uint64_t pc, note_base, sem;
	size_t pos = 24;
	const char *prov, *name, *args;
	int n;

	if (len < 24) {
		st->malformed++;
		return -EINVAL;
	}
	memcpy(&pc, desc, 8);
	memcpy(&note_base, desc + 8, 8);
	memcpy(&sem, desc + 16, 8);
	prov = take_str(desc, len, &pos);
	name = prov ? take_str(desc, len, &pos) : NULL;
	args = name ? take_str(desc, len, &pos) : NULL;
	if (!args || !*prov || !*name || strlen(prov) >= USDT_NAME_MAX ||
	    strlen(name) >= USDT_NAME_MAX) {
		st->malformed++;
		return -EINVAL;
	}
	/* Prelinked or moved: addresses shift with .stapsdt.base. */
	if (base && note_base) {
		pc += base - note_base;
		if (sem)
			sem += base - note_base;
	}
	memset(p, 0, sizeof(*p));
	if (elf_vaddr_to_offset(e, pc, true, &p->offset) ||
	    (sem && elf_vaddr_to_offset(e, sem, false, &p->sem_offset))) {
		st->malformed++;
		return -EINVAL;
	}
	n = usdt_args_parse(args, p->args, USDT_MAX_ARGS);
	if (n < 0) {
		st->bad_args++;
		return -EINVAL;
	}
	p->nargs = (uint32_t)n;
	strcpy(p->provider, prov);
	strcpy(p->name, name);
	return 0;
}

static int scan_elf(Elf *e, usdt_probe_fn fn, void *ctx, struct usdt_stats *st)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	/* for the whole file: libelf keeps every section it read */
	uint64_t base, notes_left = ELF_NOTES_MAX, bytes;

	if (elf_kind(e) != ELF_K_ELF || gelf_getclass(e) != ELFCLASS64 ||
	    elf_getshdrstrndx(e, &shstrndx))
		return -ENOEXEC;
	base = stapsdt_base(e, shstrndx);
	while ((scn = elf_nextscn(e, scn))) {
		Elf_Data *d = NULL;
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		bytes = elf_section_bytes(e, &sh, NULL);
		if (bytes > notes_left) {
			st->malformed++; /* read whole by libelf: not for a target's claim */
			continue;
		}
		notes_left -= bytes;
		while ((d = elf_getdata(scn, d))) {
			size_t off = 0, name_off, desc_off;
			GElf_Nhdr nh;

			while ((off = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
				struct usdt_probe p;
				int err;

				if (nh.n_type != NT_STAPSDT || nh.n_namesz != 8 ||
				    memcmp((const char *)d->d_buf + name_off, "stapsdt", 8))
					continue;
				st->notes++;
				if (read_note(e, base, (const char *)d->d_buf + desc_off,
					      nh.n_descsz, &p, st))
					continue;
				err = fn(ctx, &p);
				if (err)
					return err;
			}
		}
	}
	return 0;
}

int usdt_scan(int fd, usdt_probe_fn fn, void *ctx, struct usdt_stats *st)
{
	Elf *e;
	int err;

	elf_version(EV_CURRENT);
	/* ELF_C_READ (pread into bounded heap copies), never mmap: the file
	 * is a target's, which may truncate it while we read (SIGBUS) */
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (!e)
		return -ENOEXEC;
	err = scan_elf(e, fn, ctx, st);
	elf_end(e);
	return err;
}

int usdt_scan_mem(const void *image, size_t size, usdt_probe_fn fn, void *ctx,
		  struct usdt_stats *st)
{
	Elf *e;
	int err;

	elf_version(EV_CURRENT);
	e = elf_memory((char *)image, size);
	if (!e)
		return -ENOEXEC;
	err = scan_elf(e, fn, ctx, st);
	elf_end(e);
	return err;
}
