#!/usr/bin/env bash
# The layering check run by `make lint`: reads the #include "..." lines of
# every tracked .c/.h in the product folders and fails on an include that
# the arrows below do not allow.  docs/architecture.md explains the layers.
#   scripts/check_layers.sh             list the violations; exit 1 if any
#   scripts/check_layers.sh --count     print only their number
#   scripts/check_layers.sh --link L..  the archives layers L.. link (all
#                                       layers without L), in link order: the
#                                       Makefile and tests/fuzz/run.sh use it,
#                                       so the linker enforces the same arrows
set -euo pipefail
cd "$(dirname "$0")/.."

# The allowed arrows, the one place they are written down: each product
# layer (a top-level folder) and the layers it may include besides itself.
#   proto: the generated *.pb-c.h headers of proto/*.proto
#   bpf:   the BPF ABI headers, generated *.skel.h and vmlinux.h
# BPF code (bpf/) may include a lib/ header only if that header has no
# #include of its own (it is compiled with the BPF target).
# tests/, bench/ and tests/fuzz/ may include any layer and are not checked.
declare -A ALLOWED=(
	[lib]="proto"
	[bpf]="lib"
	[symbolize]="lib proto"
	[unwind]="lib proto bpf"
	[uploader]="lib proto"
	[diagnose]="lib proto"
	[server]="lib proto symbolize unwind diagnose"
	[agent]="lib proto bpf symbolize unwind uploader"
)
LAYERS="${!ALLOWED[*]}"

# --link: each layer before the layers it uses (a static link resolves a
# symbol only from archives after its user); proto (in lib's archive) and
# bpf (headers) are no archives.
if [ "${1:-}" = --link ]; then
	shift
	declare -A seen=()
	order=()
	visit() {
		local l=$1 d
		case $l in proto | bpf) return ;; esac
		[ -n "${seen[$l]:-}" ] && return
		seen[$l]=1
		for d in ${ALLOWED[$l]}; do
			visit "$d"
		done
		order=("$l" "${order[@]}")
	}
	if [ $# -eq 0 ]; then
		read -ra all <<<"$LAYERS"
		set -- "${all[@]}"
	fi
	for l in "$@"; do
		[ -n "${ALLOWED[$l]+x}" ] || { echo "check_layers: no layer $l" >&2; exit 2; }
		visit "$l"
	done
	echo "${order[*]}"
	exit 0
fi

# The layer an include names ("" when it is a file the repo does not have).
layer_of_include() {
	local from_dir=$1 inc=$2
	case "$inc" in
	*.pb-c.h) echo proto ;;
	*.skel.h | vmlinux.h) echo bpf ;;
	*/*)
		local top=${inc%%/*}
		if [ -e "$inc" ] || [[ " $LAYERS tests bench " == *" $top "* ]]; then
			echo "$top"
		elif [ -e "$from_dir/$inc" ]; then
			echo "${from_dir%%/*}"
		fi
		;;
	*) [ -e "$from_dir/$inc" ] && echo "${from_dir%%/*}" ;;
	esac
}

count_only=0
[ "${1:-}" = --count ] && count_only=1
n=0
report() {
	n=$((n + 1))
	[ $count_only = 1 ] || echo "$1" >&2
}

while IFS= read -r file; do
	from=${file%%/*}
	allowed=" $from ${ALLOWED[$from]} "
	while IFS=: read -r line inc; do
		to=$(layer_of_include "$(dirname "$file")" "$inc")
		if [ -z "$to" ]; then
			report "$file:$line: includes \"$inc\", which is no file of the repo"
		elif [[ "$allowed" != *" $to "* ]]; then
			report "$file:$line: includes \"$inc\": $from may not include $to"
		elif [ "$from" = bpf ] && [ "$to" = lib ] && grep -q '^[[:space:]]*#[[:space:]]*include' "$inc"; then
			report "$file:$line: includes \"$inc\", which has includes of its own (BPF side)"
		fi
	done < <(awk '/^[ \t]*#[ \t]*include[ \t]*"/ {
		s = $0; sub(/^[^"]*"/, "", s); sub(/".*/, "", s); print FNR ":" s }' "$file")
done < <(for l in $LAYERS; do git ls-files -- "$l/*.c" "$l/*.h"; done)

if [ $count_only = 1 ]; then
	echo "$n"
elif [ $n -gt 0 ]; then
	echo "check_layers: $n include(s) against the allowed arrows (scripts/check_layers.sh)" >&2
fi
[ $n -eq 0 ]
