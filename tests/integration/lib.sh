# Shared by the integration tests: sourced, not run.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
STRATA=$ROOT/build/strata
AGENT=$ROOT/build/strata-agent
FIX=$ROOT/build/fixtures
T=$(mktemp -d /tmp/strata-test.XXXXXX)
trap 'rm -rf "$T"' EXIT

skip() { echo "skipped: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

# Real BPF needs root (or CAP_BPF+CAP_PERFMON+CAP_SYS_PTRACE) and bpffs.
require_bpf() {
	[ "$(id -u)" -eq 0 ] || skip "needs root for BPF"
	mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf 2>/dev/null || true
	mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
	[ -e /sys/kernel/btf/vmlinux ] || skip "kernel has no BTF"
}

# Sum of counts of folded lines (for comm $2, or all when empty) in file $1
# matching the extended regex $3 (applied to the stack part).
# Waits until the strata-server on PORT (pid PID, log LOG) answers
# /healthz; fails naming it WHAT, with its log if it exited.
wait_healthz() {
	local port=$1 pid=$2 log=$3 what=$4
	for _ in $(seq 100); do
		curl -sf "http://127.0.0.1:$port/healthz" > /dev/null 2>&1 && return 0
		kill -0 "$pid" 2> /dev/null || { cat "$log"; fail "$what exited"; }
		sleep 0.1
	done
	fail "$what did not answer on port $port"
}

# Undelivered batches in an agent's spool directory. The spool also keeps
# nccl_comms.state (communicator identity across agent restarts), which is
# not a batch and stays.
spooled_batches() {
	find "$1" -maxdepth 1 -name '*.batch' 2> /dev/null | wc -l
}

folded_sum() {
	awk -v comm="$2" -v re="$3" '{
		n = $NF; sub(/ [0-9]+$/, "")
		split($0, f, ";")
		if (comm != "" && f[1] != comm) next
		if (re == "" || $0 ~ re) s += n
	} END { print s + 0 }' "$1"
}

# Asserts 100*num/den >= pct.
assert_ratio() {
	local num=$1 den=$2 pct=$3 what=$4
	[ "$den" -gt 0 ] || fail "$what: no samples at all"
	if [ $((100 * num)) -lt $((pct * den)) ]; then
		fail "$what: $num of $den samples ($((100 * num / den))%), want >= $pct%"
	fi
	echo "ok: $what: $num of $den samples ($((100 * num / den))%)"
}

# wait_agent_ready LOG [SECONDS]: until the agent writing LOG (-v or not)
# says it samples (its BPF programs and filter are in place), or fails.
# A fixed sleep is not enough: starting the agent takes over 2 s on a
# loaded 2-core machine, and calls made before it are not seen.
wait_agent_ready() {
	local log=$1 secs=${2:-60}
	for _ in $(seq $((secs * 10))); do
		grep -q 'agent: sampling at' "$log" 2> /dev/null && return 0
		sleep 0.1
	done
	fail "agent not ready after ${secs}s: $(tail -5 "$log")"
}
