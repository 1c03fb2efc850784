# A syscall-heavy workload shows kernel frames under its user frames.
source "$(dirname "$0")/lib.sh"
require_bpf
"$STRATA" record -F 199 -o "$T/out.folded" -- "$FIX/syscalls" 2
head -5 "$T/out.folded"
total=$(folded_sum "$T/out.folded" syscalls "")
# user frames down to do_reads, then read()'s kernel path, marked _[k].
kern=$(folded_sum "$T/out.folded" syscalls ';do_reads;.*_\[k\]')
sysread=$(folded_sum "$T/out.folded" syscalls ';do_reads;.*(ksys_read|vfs_read)_\[k\]')
assert_ratio "$kern" "$total" 50 "do_reads with kernel frames below it"
assert_ratio "$sysread" "$total" 30 "do_reads -> ksys_read/vfs_read in the kernel"
