// SPDX-License-Identifier: Apache-2.0
#include "agent/proc/elf_addr.h"

#include <errno.h>

int elf_vaddr_to_offset(Elf *e, uint64_t vaddr, bool exec_only, uint64_t *off)
{
	size_t n;

	if (elf_getphdrnum(e, &n))
		return -ENOEXEC;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD ||
		    (exec_only && !(ph.p_flags & PF_X)))
			continue;
		if (vaddr >= ph.p_vaddr && vaddr - ph.p_vaddr < ph.p_filesz) {
			*off = vaddr - ph.p_vaddr + ph.p_offset;
			return 0;
		}
	}
	return -ENOENT;
}
