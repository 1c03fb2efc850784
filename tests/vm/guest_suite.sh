#!/usr/bin/env bash
# Runs inside the VM (tests/vm/vm.sh run KERNEL OUTDIR tests/vm/guest_suite.sh
# OUTDIR TEST...): each named integration test of tests/integration/ in
# turn, with its output in OUTDIR/TEST.log, then the kernel features the
# agent found (strata record -v) in OUTDIR/features.log.  Prints one line
# per test, "ok NAME (Ns)", "skip NAME: why" or "FAIL NAME (rc=N, Ns)";
# exits 1 if any failed.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
out=$1
shift
cd "$ROOT" || exit 1
echo "guest: kernel $(uname -r), $(nproc) CPUs, $(awk '/MemTotal/ { print int($2 / 1024) " MiB" }' /proc/meminfo)"
build/strata record -v -F 49 -o /tmp/features.folded -- true 2>&1 | grep 'features:' > "$out/features.log"
sed 's/^/guest: /' "$out/features.log"
failed=0
for t in "$@"; do
	start=$(date +%s)
	bash "tests/integration/$t.sh" > "$out/$t.log" 2>&1
	rc=$?
	secs=$(($(date +%s) - start))
	case $rc in
	0) echo "ok    $t (${secs}s)" ;;
	77) echo "skip  $t: $(tail -1 "$out/$t.log")" ;;
	*)
		echo "FAIL  $t (rc=$rc, ${secs}s)"
		tail -15 "$out/$t.log" | sed 's/^/      /'
		failed=1
		;;
	esac
done
exit $failed
