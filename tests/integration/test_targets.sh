# --pid and --cgroup select only their processes; other load is not sampled.
# The workloads run until stopped: strata's start (BPF load and verify, the
# first tables) took more than a fixed 4-s workload on a loaded machine.
source "$(dirname "$0")/lib.sh"
require_bpf
"$FIX/chain" 600 & target=$!
"$FIX/syscalls" 600 & other=$!
trap 'kill "$target" "$other" 2> /dev/null || true; rm -rf "$T"' EXIT
sleep 0.3
"$STRATA" record -F 199 -d 2 -p "$target" -o "$T/pid.folded"
kill "$target" "$other"
chain=$(folded_sum "$T/pid.folded" chain "")
sys=$(folded_sum "$T/pid.folded" syscalls "")
[ "$chain" -gt 100 ] || fail "--pid: only $chain samples of the target"
[ "$sys" -eq 0 ] || fail "--pid: $sys samples of a non-target"
echo "ok: --pid $chain target samples, 0 others"
wait

# cgroup v2 may be at /sys/fs/cgroup, /sys/fs/cgroup/unified (hybrid), or
# not mounted at all: then mount one for the test.
cg2=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
if [ -z "$cg2" ]; then
	mkdir -p "$T/cgroup2" && mount -t cgroup2 none "$T/cgroup2" || skip "cannot mount cgroup v2"
	cg2=$T/cgroup2
fi
cg=$cg2/strata-test-$$
mkdir "$cg"
trap 'kill "$target" "$other" 2> /dev/null || true; rmdir "$cg" 2>/dev/null || true; umount "$T/cgroup2" 2>/dev/null || true; rm -rf "$T"' EXIT
"$FIX/chain" 600 & target=$!
echo "$target" > "$cg/cgroup.procs"
"$FIX/syscalls" 600 & other=$!
sleep 0.3
"$STRATA" record -F 199 -d 2 --cgroup "$cg" -o "$T/cg.folded"
kill "$target" "$other"
wait
chain=$(folded_sum "$T/cg.folded" chain "")
sys=$(folded_sum "$T/cg.folded" syscalls "")
[ "$chain" -gt 100 ] || fail "--cgroup: only $chain samples of the target"
[ "$sys" -eq 0 ] || fail "--cgroup: $sys samples of a non-target"
echo "ok: --cgroup $chain target samples, 0 others"
