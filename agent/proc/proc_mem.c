// SPDX-License-Identifier: Apache-2.0
#include "agent/proc/proc_mem.h"

#include <errno.h>
#include <sys/uio.h>

int proc_mem__read(uint32_t pid, uint64_t addr, void *buf, size_t n)
{
	struct iovec local = { .iov_base = buf, .iov_len = n };
	struct iovec remote = { .iov_base = (void *)(uintptr_t)addr, .iov_len = n };
	ssize_t got;

	if (!n)
		return 0;
	if (!addr)
		return -EFAULT;
	got = process_vm_readv((pid_t)pid, &local, 1, &remote, 1, 0);
	if (got < 0)
		return -errno;
	return (size_t)got == n ? 0 : -EFAULT;
}
