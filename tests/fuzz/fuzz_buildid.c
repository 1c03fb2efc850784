// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target: build_id_read() on arbitrary bytes, passed as an fd
 * (a memfd), the way the agent reads files of traced processes.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "symbolize/buildid.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* One memfd for the whole run: harness state, not library state. */
	static int fd = -1;
	uint8_t id[BUILD_ID_MAX];
	char hex[2 * BUILD_ID_MAX + 1];
	int n;

	if (fd < 0) {
		fd = memfd_create("fuzz_buildid", MFD_CLOEXEC);
		if (fd < 0)
			__builtin_trap();
	}
	if (ftruncate(fd, 0) || (size && pwrite(fd, data, size, 0) != (ssize_t)size))
		__builtin_trap();

	n = build_id_read(NULL, fd, id, sizeof(id));
	/* With an fd, the only failure is "not (valid) ELF". */
	if (n > BUILD_ID_MAX || (n < 0 && n != -ENOEXEC))
		__builtin_trap();
	if (n > 0)
		build_id_hex(id, (size_t)n, hex, sizeof(hex));
	/* A short output buffer must be respected too. */
	n = build_id_read(NULL, fd, id, 3);
	if (n > 3)
		__builtin_trap();
	return 0;
}
