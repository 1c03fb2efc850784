#!/usr/bin/env bash
# The agent on the kernels GPU fleets run, each booted under qemu from
# Debian's own package (tests/vm/vm.sh): 6.1 LTS (Debian 12, Amazon Linux
# 2023, COS) and the newest 6.12.  In each, the same integration tests as
# on the host: strata record on a frame-pointer chain, a frame-pointer-less
# chain (hybrid unwinding) and Python; the GPU stand-in leak report; the
# agent -> server round trip.  The kernel features the agent probed, each
# test's result and the times are printed.  Skipped (exit 77, with the
# reason) where qemu or the kernel packages are missing (make deps).
# STRATA_VM_KERNELS (default "6.1 6.12") picks the kernels; STRATA_VM_TESTS
# the tests; STRATA_VM_TEST=0 leaves the VMs out of a run.  About 10
# minutes under emulation (TCG) for both kernels on 2 cores.
source "$(dirname "$0")/lib.sh"
[ -z "${STRATA_IN_VM:-}" ] || skip "already inside a test VM"
[ "${STRATA_VM_TEST:-1}" != 0 ] || skip "STRATA_VM_TEST=0"
kernels=${STRATA_VM_KERNELS:-6.1 6.12}
tests=${STRATA_VM_TESTS:-test_record_chain test_hybrid_unwind test_python_stacks test_gpu_leak test_server_e2e}
for b in "$STRATA" "$AGENT" build/strata-server "$FIX/chain" "$FIX/gpu_workload"; do
	[ -x "$ROOT/${b#"$ROOT/"}" ] || fail "$b not built (make all fixtures)"
done

found=()
for k in $kernels; do
	if why=$("$ROOT/tests/vm/vm.sh" find "$k" 2>&1); then
		found+=("$k")
	else
		echo "kernel $k: $why"
	fi
done
[ ${#found[@]} -gt 0 ] || skip "no test kernel: $why"
"$ROOT/tests/vm/vm.sh" accel "${found[0]}" | sed 's/^/accelerator: /'

set +e
start=$(date +%s)
failed=()
for k in "${found[@]}"; do
	# under build/: the guest sees /tmp as its own tmpfs
	out=$ROOT/build/vm/out-$k
	rm -rf "$out"
	mkdir -p "$out"
	t0=$(date +%s)
	# shellcheck disable=SC2086 # the test list is words
	"$ROOT/tests/vm/vm.sh" run "$k" "$out" "$ROOT/tests/vm/guest_suite.sh" "$out" $tests \
		2> "$out/vm.stderr"
	rc=$?
	echo "== kernel $k: $(grep -m1 'vm: booting' "$out/vm.stderr" | sed 's/^vm: booting //'), rc $rc, $(($(date +%s) - t0))s"
	cat "$out/guest.log" 2> /dev/null
	if [ "$rc" -ne 0 ]; then
		failed+=("$k")
		[ "$rc" -eq 125 ] && cat "$out/vm.stderr"
	fi
done
echo "total: $(($(date +%s) - start))s for kernels ${found[*]}"
[ ${#failed[@]} -eq 0 ] || fail "kernels ${failed[*]}"
echo "ok: ${found[*]}"
