#!/usr/bin/env bash
# Runs inside the VM (tests/vm/vm.sh run KERNEL OUTDIR tests/vm/guest_suite.sh
# OUTDIR TEST...): each named integration test of tests/integration/ in
# turn, with its output in OUTDIR/TEST.log, then the kernel features the
# agent found (strata record -v) in OUTDIR/features.log.  Prints one line
# per test, "ok NAME (Ns)", "skip NAME: why", "FAIL NAME (rc=N, Ns)", or
# for a known limit of this kernel or of emulation (xfail_reason) "xfail" /
# "xpass"; a failure is run once more (both reported); exits 1 if any
# failed twice.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
out=$1
shift
cd "$ROOT" || exit 1
echo "guest: kernel $(uname -r), $(nproc) CPUs, $(awk '/MemTotal/ { print int($2 / 1024) " MiB" }' /proc/meminfo)"
build/strata record -v -F 49 -o /tmp/features.folded -- true 2>&1 | grep 'features:' > "$out/features.log"
sed 's/^/guest: /' "$out/features.log"
# Known limits, each with its reason: a failure there is reported as
# "xfail" (a pass as "xpass") and does not fail the suite.
path() { sed -n "s/.*features: $1: \([a-z_]*\).*/\1/p" "$out/features.log" | head -1; }
xfail_reason() {
	case $1 in
	test_gpu_leak)
		[ "$(path exit_mappings)" = kept_maps ] && [ "${STRATA_VM_ACCEL:-}" = tcg ] &&
			echo "under emulation the static runtime's calls can all come before the agent has built the process's unwind tables (the walk stops after the entry rule: cudaMalloc <- leaky_site), and without exit-time mappings (VMA iterator: 6.7) a stack whose maps were never read stays unresolved"
		;;
	test_server_e2e)
		[ "$(path exit_mappings)" = kept_maps ] && [ "${STRATA_VM_ACCEL:-}" = tcg ] &&
			echo "on 6.1 under emulation (4 of 4 runs): the job label is read from /proc at batch time and the 3-s chain has exited before the emulated agent's first read (proc_read_failed=78, quiet host), or (loaded host) the spool was not drained in the test's wait; passes on 6.12 and on the host. Fix: read labels at exec, as the maps are"
		;;
	test_hybrid_unwind)
		[ "${STRATA_VM_ACCEL:-}" = tcg ] &&
			echo "under emulation the CFI tables take seconds to build: the samples before them are frame-pointer guesses"
		;;
	esac
	return 0
}
failed=0
for t in "$@"; do
	start=$(date +%s)
	bash "tests/integration/$t.sh" > "$out/$t.log" 2>&1
	rc=$?
	first=
	why=$(xfail_reason "$t")
	# Emulation runs the guest 10-20x slower than the host, on a host that
	# may be busy: a failure gets one more run, and both are reported (a
	# kernel incompatibility, e.g. a program the verifier refuses, fails
	# both).
	if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ] && [ -z "$why" ]; then
		first="; first run rc=$rc: $(grep -m1 'FAIL' "$out/$t.log" | cut -c1-200)"
		mv "$out/$t.log" "$out/$t.first.log"
		bash "tests/integration/$t.sh" > "$out/$t.log" 2>&1
		rc=$?
	fi
	secs=$(($(date +%s) - start))
	case $rc in
	0) if [ -n "$why" ]; then echo "xpass $t (${secs}s)"; else echo "ok    $t (${secs}s$first)"; fi ;;
	77) echo "skip  $t: $(tail -1 "$out/$t.log")" ;;
	*) if [ -n "$why" ]; then
		echo "xfail $t (rc=$rc, ${secs}s): $why"
		tail -3 "$out/$t.log" | sed 's/^/      /'
		continue
	fi
		echo "FAIL  $t (rc=$rc, ${secs}s$first)"
		tail -15 "$out/$t.log" | sed 's/^/      /'
		failed=1
		;;
	esac
done
exit $failed
