#!/usr/bin/env bash
# strata-server soak (issue 15): AGENTS simulated agents post a batch each
# every 10 s for MINUTES to a server with its defaults whose store is on a
# filesystem of its own (a loop-mounted ext4 image of SIZE_MB), retrying the
# same batch until acknowledged; the server is SIGKILLed twice and its disk
# filled once.  Every acknowledged batch must be stored exactly once
# (bench/server_soak.py, "result:" lines).  Needs root (mount).
#   bench/server_soak.sh [MINUTES (default 30)] [AGENTS (default 200)] [SIZE_MB (default 1024)]
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES=${1:-30} AGENTS=${2:-200} SIZE_MB=${3:-1024}
SERVER=$(readlink -f "${SERVER:-build/strata-server}")
[ -x build/fixtures/gen_batch ] && [ -x "$SERVER" ] || { echo "build first: make all fixtures" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "needs root (loop mount)" >&2; exit 1; }
T=$(mktemp -d /tmp/strata-soak.XXXXXX)
cleanup() {
	umount "$T/mnt" 2> /dev/null || true
	[ -n "${KEEP_T:-}" ] || rm -rf "$T"
}
trap cleanup EXIT
truncate -s "${SIZE_MB}M" "$T/disk.img"
mkfs.ext4 -q -F -m 0 "$T/disk.img"
mkdir -p "$T/mnt"
mount -o loop "$T/disk.img" "$T/mnt"
python3 bench/server_soak.py "$MINUTES" "$AGENTS" "$T" "$SERVER"
