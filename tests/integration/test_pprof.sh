# go tool pprof reads the pprof output and lists the hot function.
source "$(dirname "$0")/lib.sh"
require_bpf
command -v go >/dev/null || skip "go not installed"
"$STRATA" record -F 199 -o "$T/out.pb.gz" -- "$FIX/chain" 2
export HOME=${HOME:-$T} GOCACHE=$T/gocache GOPATH=$T/gopath GOFLAGS=-mod=mod
go tool pprof -top "$T/out.pb.gz" > "$T/top" 2> "$T/top.err" || { cat "$T/top.err"; fail "go tool pprof failed"; }
head -15 "$T/top"
# The first function row (highest flat) must be c.
first=$(awk '/flat%/ { getline; print $NF; exit }' "$T/top")
[ "$first" = "c" ] || fail "hottest function is '$first', want c"
