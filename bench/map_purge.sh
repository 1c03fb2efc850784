#!/usr/bin/env bash
# What letting an exited GPU process's BPF entries go costs (the drain
# stalls that long): the walk that restarted at every delete against
# map_drain__delete_matching, on a map of gpu_allocs' size.  Needs root.
#   bench/map_purge.sh [MAX_ENTRIES [N...]]
set -euo pipefail
cd "$(dirname "$0")/.."
T=$(mktemp -d /tmp/strata-bench-purge.XXXXXX)
trap 'rm -rf "$T"' EXIT
cc -std=gnu11 -O2 -Wall -Wextra -D_GNU_SOURCE -I. -o "$T/map_purge" bench/map_purge.c \
	agent/core/map_drain.c -lbpf
"$T/map_purge" "$@"
