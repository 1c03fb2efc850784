#!/usr/bin/env bash
# Unwind-table memory and build time (the unwinder's memory benchmark).
# Per file (libc, libstdc++, python3.11, and libtorch_cpu.so when Debian's
# python3-torch is installed): CFI size (.eh_frame + .debug_frame), rows,
# table size (16 bytes a row), table bytes per MiB of CFI, best-of-RUNS
# build time.  Then the same for every executable file a running python3
# process maps (with `import torch` when it imports), with the total: what
# the agent builds for one training process.  Prints markdown tables.
#   [PYTHON=/usr/bin/python3] bench/unwind_tables.sh [RUNS (default 3)]
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-3}
T=$(mktemp -d /tmp/strata-bench-unwind.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$T"' EXIT

# The table compiler as the agent links it: the unwind layer's archive
# and what it may use (scripts/check_layers.sh --link unwind).
archives=()
for l in $(scripts/check_layers.sh --link unwind); do
	archives+=("build/libstrata-$l.a")
done
make -s --no-print-directory "${archives[@]}"
cc -std=gnu11 -O2 -g -Wall -Wextra -D_GNU_SOURCE -I. -Ibuild/gen -o "$T/unwind_tables" \
	bench/unwind_tables.c "${archives[@]}" \
	$(pkg-config --libs libdw libelf 2>/dev/null || echo -ldw -lelf)

files=()
for f in /lib/x86_64-linux-gnu/libc.so.6 /usr/lib/x86_64-linux-gnu/libstdc++.so.6 \
	/usr/bin/python3.11; do
	[ -r "$f" ] && files+=("$(readlink -f "$f")")
done
torch=$(dpkg -L python3-torch 2>/dev/null | grep '/libtorch_cpu\.so' | head -n1 || true)
[ -n "$torch" ] && files+=("$torch")

echo "### Per file (best of $RUNS builds)"
echo
"$T/unwind_tables" -H -r "$RUNS" "${files[@]}"
[ -n "$torch" ] || echo "(python3-torch is not installed: no libtorch_cpu.so row)"

# Debian's interpreter: the one python3-torch installs into.
py=${PYTHON:-/usr/bin/python3}
[ -x "$py" ] || py=python3
imp="import time"
label="$py process"
if [ -n "$torch" ] && "$py" -c 'import torch' 2>/dev/null; then
	imp="import torch, time"
	label="$py process with torch"
fi
"$py" -c "$imp; print('ready', flush=True); time.sleep(120)" > "$T/py.out" &
pid=$!
for _ in $(seq 1 600); do
	grep -q ready "$T/py.out" 2>/dev/null && break
	sleep 0.1
done
grep -q ready "$T/py.out" || { echo "bench: python3 did not start"; exit 1; }
# Executable file mappings, each file once.
mapfile -t maps < <(awk '$2 ~ /x/ && $6 ~ /^\// { print $6 }' "/proc/$pid/maps" | sort -u)
kill "$pid" 2>/dev/null || true

echo
echo "### Every executable file of a $label (one build each)"
echo
"$T/unwind_tables" -H -r 1 -t "$label" "${maps[@]}"
