# unwind/python_offsets.c against the real structs: for every CPython whose
# headers are installed (Debian python3.11-dev, pyenv 3.10-3.13), a check
# program compiled with that version's internal headers compares each
# table offset with offsetof().  At least one version must be checkable.
source "$(dirname "$0")/lib.sh"
checked=0
for inc in /usr/include/python3.1[0-3] /root/.pyenv/versions/3.1[0-3].*/include/python3.1[0-3]; do
	[ -f "$inc/internal/pycore_runtime.h" ] || continue
	extra=
	[ -d "/usr/include/x86_64-linux-gnu/$(basename "$inc")" ] &&
		extra="-I/usr/include/x86_64-linux-gnu/$(basename "$inc")"
	cc -std=gnu11 -I"$ROOT" -I"$inc" $extra -o "$T/check" \
		"$ROOT/tests/integration/python_offsets_check.c" "$ROOT/unwind/python_offsets.c" ||
		fail "cannot build the check against $inc"
	echo "$inc:"
	"$T/check" || fail "offsets differ from $inc"
	checked=$((checked + 1))
done
[ "$checked" -gt 0 ] || skip "no CPython 3.10-3.13 internal headers installed"
