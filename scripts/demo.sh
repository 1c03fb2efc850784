#!/usr/bin/env bash
# make demo: profile a small embedded workload (a CPU-bound call chain and a
# syscall-heavy reader, started by a shell) and write every output format;
# then the cluster story (scripts/demo_cluster.sh): server, agent, a
# simulated 4-rank job with one straggler, and the server's diagnosis.
set -euo pipefail
cd "$(dirname "$0")/.."
out=build/demo
mkdir -p "$out"
if [ "$(id -u)" -ne 0 ]; then
	echo "demo: BPF needs root (or CAP_BPF+CAP_PERFMON+CAP_SYS_PTRACE): run 'sudo make demo'" >&2
	exit 1
fi
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf 2>/dev/null || true
workload="build/fixtures/chain 3 & build/fixtures/syscalls 3; wait"
echo "demo: strata record -F 199 -- sh -c '$workload'"
build/strata record -F 199 -o "$out/profile.svg" -- sh -c "$workload"
build/strata record -F 99 -o "$out/profile.folded" -- sh -c "$workload" 2>/dev/null
echo
echo "demo: hottest stacks (folded):"
sort -t' ' -k2 -nr "$out/profile.folded" | head -5 | cut -c1-160
echo
echo "demo: results in $(pwd)/$out/"
echo "  profile.svg     interactive flamegraph: open it in a browser"
echo "  profile.folded  collapsed stacks (flamegraph.pl, speedscope); -o x.pb.gz / x.json"
echo "                  write pprof / documented JSON (docs/json-format.md)"
echo
scripts/demo_cluster.sh
