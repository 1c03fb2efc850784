// SPDX-License-Identifier: Apache-2.0
/*
 * GNU build-id (NT_GNU_BUILD_ID) of an ELF file, read with libelf.
 *
 * The input is hostile (any file a traced process maps, or bytes uploaded
 * to the server), so every size comes from libelf's bounds-checked
 * accessors and note blobs are capped: a corrupt file yields -ENOEXEC,
 * never a crash or a huge allocation.
 */
#include "symbolize/buildid.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "lib/safe_open.h"

/*
 * Build-id notes are tiny; a larger note blob is not worth reading.  The
 * bound is for the whole file: libelf keeps every chunk it read until
 * elf_end, and a file of 1 MiB can list thousands of PT_NOTE headers, each
 * just under 1 MiB at another offset (GBs held at once).
 */
#define NOTE_BLOB_MAX (1u << 20)

/*
 * Scans one note blob.  Returns the id length copied (truncated to max),
 * 0 when the blob holds no (non-empty) build-id.
 */
static int scan_notes(Elf_Data *data, uint8_t *out, size_t max)
{
	size_t off = 0, name_off, desc_off;
	GElf_Nhdr nh;

	while (off < data->d_size) {
		size_t next = gelf_getnote(data, off, &nh, &name_off, &desc_off);

		/* 0 = malformed or end; gelf_getnote never moves backwards. */
		if (next == 0 || next <= off)
			break;
		off = next;
		if (nh.n_type != NT_GNU_BUILD_ID || nh.n_namesz != 4 || nh.n_descsz == 0)
			continue;
		if (memcmp((const char *)data->d_buf + name_off, "GNU", 4))
			continue;
		size_t len = nh.n_descsz < max ? nh.n_descsz : max;

		memcpy(out, (const char *)data->d_buf + desc_off, len);
		return (int)len;
	}
	return 0;
}

/* Takes n bytes of the file's note budget *left; false when over it. */
static bool within(size_t *left, uint64_t n)
{
	if (n > *left)
		return false;
	*left -= (size_t)n;
	return true;
}

/* PT_NOTE segments: what the loader maps, so they survive strip. */
static int from_phdrs(Elf *elf, uint8_t *out, size_t max, size_t *left)
{
	size_t phnum;

	if (elf_getphdrnum(elf, &phnum))
		return 0;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_NOTE)
			continue;
		if (ph.p_filesz == 0 || !within(left, ph.p_filesz))
			continue;
		/* elf_getdata_rawchunk checks the range against the file. */
		Elf_Data *d = elf_getdata_rawchunk(elf, (int64_t)ph.p_offset, ph.p_filesz,
						   ph.p_align == 8 ? ELF_T_NHDR8 : ELF_T_NHDR);
		int n = d ? scan_notes(d, out, max) : 0;

		if (n > 0)
			return n;
	}
	return 0;
}

/* SHT_NOTE sections: relocatable objects and debug files lack PT_NOTE. */
static int from_sections(Elf *elf, uint8_t *out, size_t max, size_t *left)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		if (sh.sh_size == 0 || (sh.sh_flags & SHF_COMPRESSED) || !within(left, sh.sh_size))
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		int n = d && d->d_buf ? scan_notes(d, out, max) : 0;

		if (n > 0)
			return n;
	}
	return 0;
}

int build_id_read(const char *path, int fd, uint8_t *out, size_t max)
{
	int own_fd = -1, err;
	Elf *elf = NULL;

	if (!out || max == 0 || (!path && fd < 0))
		return -EINVAL;
	if (max > BUILD_ID_MAX)
		max = BUILD_ID_MAX;
	if (path) {
		own_fd = safe_open(AT_FDCWD, path, 0, NULL);
		if (own_fd < 0) /* not a regular file: not an ELF file */
			return own_fd == -EINVAL ? -ENOEXEC : own_fd;
		fd = own_fd;
	}
	/* Idempotent; libelf refuses elf_begin until it has been called. */
	elf_version(EV_CURRENT);
	/*
	 * ELF_C_READ (pread on demand) rather than mmap: a file truncated
	 * under us then fails a read instead of raising SIGBUS.
	 */
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		err = -ENOEXEC;
		goto err_out;
	}
	GElf_Ehdr eh;

	if (!gelf_getehdr(elf, &eh)) {
		err = -ENOEXEC;
		goto err_out;
	}
	size_t left = NOTE_BLOB_MAX;

	err = from_phdrs(elf, out, max, &left);
	if (err == 0)
		err = from_sections(elf, out, max, &left);
err_out:
	elf_end(elf);
	if (own_fd >= 0)
		close(own_fd);
	return err;
}
