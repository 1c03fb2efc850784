# --pid and --cgroup select only their processes; other load is not sampled.
source "$(dirname "$0")/lib.sh"
require_bpf
"$FIX/chain" 4 & target=$!
"$FIX/syscalls" 4 & other=$!
sleep 0.3
"$STRATA" record -F 199 -d 2 -p "$target" -o "$T/pid.folded"
chain=$(folded_sum "$T/pid.folded" chain "")
sys=$(folded_sum "$T/pid.folded" syscalls "")
[ "$chain" -gt 100 ] || fail "--pid: only $chain samples of the target"
[ "$sys" -eq 0 ] || fail "--pid: $sys samples of a non-target"
echo "ok: --pid $chain target samples, 0 others"
wait

mountpoint -q /sys/fs/cgroup && [ -e /sys/fs/cgroup/cgroup.procs ] || skip "no cgroup v2"
cg=/sys/fs/cgroup/strata-test-$$
mkdir "$cg"
trap 'rmdir "$cg" 2>/dev/null; rm -rf "$T"' EXIT
"$FIX/chain" 4 & target=$!
echo "$target" > "$cg/cgroup.procs"
"$FIX/syscalls" 4 & other=$!
sleep 0.3
"$STRATA" record -F 199 -d 2 --cgroup "$cg" -o "$T/cg.folded"
wait
chain=$(folded_sum "$T/cg.folded" chain "")
sys=$(folded_sum "$T/cg.folded" syscalls "")
[ "$chain" -gt 100 ] || fail "--cgroup: only $chain samples of the target"
[ "$sys" -eq 0 ] || fail "--cgroup: $sys samples of a non-target"
echo "ok: --cgroup $chain target samples, 0 others"
