# Binaries the host cannot see by path are still symbolized: one deleted
# while it runs, and one that exists only inside a private mount namespace
# (as in a container).  The agent opens them through /proc/PID/map_files.
source "$(dirname "$0")/lib.sh"
require_bpf
command -v unshare >/dev/null || skip "unshare (util-linux) missing"

cp "$FIX/chain" "$T/chain-deleted"
"$T/chain-deleted" 3 & pid=$!
sleep 0.2
rm "$T/chain-deleted"
"$STRATA" record -F 199 -d 2 -p "$pid" -o "$T/deleted.folded"
wait
total=$(folded_sum "$T/deleted.folded" chain-deleted "")
full=$(folded_sum "$T/deleted.folded" chain-deleted ';main;a;b;c(;|$)')
assert_ratio "$full" "$total" 90 "deleted binary symbolized"

# A mount namespace with a tmpfs only it can see, holding the binary.
unshare -m --propagation private sh -c "
	mkdir -p /mnt/strata-ns && mount -t tmpfs none /mnt/strata-ns &&
	cp '$FIX/chain' /mnt/strata-ns/chain-ns && exec /mnt/strata-ns/chain-ns 3" & pid=$!
sleep 0.5
[ ! -e /mnt/strata-ns/chain-ns ] || skip "mount namespace not private"
"$STRATA" record -F 199 -d 2 -p "$pid" -o "$T/ns.folded"
wait
total=$(folded_sum "$T/ns.folded" chain-ns "")
full=$(folded_sum "$T/ns.folded" chain-ns ';main;a;b;c(;|$)')
assert_ratio "$full" "$total" 90 "binary inside a private mount namespace symbolized"
