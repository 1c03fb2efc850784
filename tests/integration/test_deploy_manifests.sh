# deploy/: every manifest parses and keeps the fields that matter (agent
# capabilities exactly the five it needs, nothing privileged, hostPID, the
# mounts, ports/probes/Secrets consistent, the ClickHouse overlay's patch
# applies), flags exist in the binaries' --help, and the systemd units
# pass `systemd-analyze verify` with a bounded exposure score.
source "$(dirname "$0")/lib.sh"
python3 -c 'import yaml' 2>/dev/null || skip "python3-yaml not installed (make deps)"
python3 "$ROOT/tests/integration/deploy_check.py" "$ROOT" "$ROOT/build" || fail "manifest checks"

command -v systemd-analyze >/dev/null || { echo "systemd-analyze missing: units not verified"; exit 0; }
# verify wants ExecStart binaries to exist: point them at the build (or at
# /bin/true where a binary is not built in this tree yet).
for unit in strata-agent strata-server; do
	bin=$ROOT/build/$unit
	[ -x "$bin" ] || bin=/bin/true
	sed "s|/usr/bin/$unit|$bin|" "$ROOT/deploy/systemd/$unit.service" > "$T/$unit.service"
done
systemd-analyze verify --man=no "$T"/strata-agent.service "$T"/strata-server.service > "$T/verify" 2>&1 ||
	{ cat "$T/verify"; fail "systemd-analyze verify"; }
[ -s "$T/verify" ] && { cat "$T/verify"; fail "systemd-analyze verify printed warnings"; }
echo "ok: systemd-analyze verify"

# Exposure (0 = locked down, 10 = unconfined).  The agent keeps five
# capabilities and the whole /proc, so it cannot score as low as the server.
exposure() {
	systemd-analyze security --offline=true "$1" 2>/dev/null |
		sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p'
}
check_exposure() {
	local unit=$1 max=$2 got
	got=$(exposure "$T/$unit.service")
	[ -n "$got" ] || { echo "systemd-analyze security --offline unsupported: $unit not scored"; return; }
	awk -v g="$got" -v m="$max" 'BEGIN { exit !(g <= m) }' || fail "$unit exposure $got > $max"
	echo "ok: $unit exposure $got (<= $max)"
}
check_exposure strata-agent 3.5
check_exposure strata-server 2.0
