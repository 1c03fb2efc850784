# The agent works with exactly the capabilities the DaemonSet grants (read
# from deploy/kubernetes/base/agent-daemonset.yaml) and nothing else: uid 0
# whose bounding set holds only those, as in the pod.  A run without
# CAP_BPF must fail, showing that the restriction is real.
source "$(dirname "$0")/lib.sh"
require_bpf
command -v setpriv >/dev/null || skip "setpriv (util-linux) missing"
python3 -c 'import yaml' 2>/dev/null || skip "python3-yaml not installed (make deps)"
caps=$(python3 - "$ROOT/deploy/kubernetes/base/agent-daemonset.yaml" <<'PY'
import sys, yaml
for d in yaml.safe_load_all(open(sys.argv[1])):
    if d and d.get("kind") == "DaemonSet":
        c = d["spec"]["template"]["spec"]["containers"][0]
        print(",".join("+" + c.lower() for c in c["securityContext"]["capabilities"]["add"]))
PY
)
[ -n "$caps" ] || fail "no capabilities found in the DaemonSet"
echo "capabilities: $caps"

run_limited() { # $1: setpriv capability list, $2: output dir; sets $a
	mkdir -p "$2"
	setpriv --bounding-set=-all,"$1" --inh-caps=-all -- \
		"$AGENT" --output "$2" --period 1 --format folded -v > "$2.log" 2>&1 &
	a=$!
}

"$FIX/chain" 4 &
w=$!
run_limited "$caps" "$T/out"
sleep 3.5
kill -TERM "$a" 2>/dev/null
wait "$a" || { tail "$T/out.log"; fail "agent with $caps exited with $?"; }
wait "$w"
chain=$(cat "$T/out"/*.folded | folded_sum /dev/stdin chain ';main;a;b;c(;|$)')
[ "$chain" -gt 50 ] || { tail "$T/out.log"; fail "least-privilege agent saw only $chain chain samples"; }
echo "ok: agent limited to $caps: $chain chain samples"

nobpf=$(echo "$caps" | tr ',' '\n' | grep -vx '+bpf' | paste -sd,)
run_limited "$nobpf" "$T/nobpf"
for _ in $(seq 1 50); do kill -0 "$a" 2>/dev/null || break; sleep 0.1; done
kill -TERM "$a" 2>/dev/null && { wait "$a"; fail "agent without CAP_BPF kept running: setpriv did not restrict"; }
wait "$a" && fail "agent without CAP_BPF exited 0"
echo "ok: without CAP_BPF the agent refuses to start: $(grep -m1 -i 'fail\|denied\|not permitted' "$T/nobpf.log")"
