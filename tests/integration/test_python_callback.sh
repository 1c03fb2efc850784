# Python -> C -> Python: sorted(key=key) called from sorter.  The samples in
# key show sorter, then native frames of the sort (not Python), then key.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
require_bpf
ran=0
for py in $(py_interpreters); do
	ran=$((ran + 1))
	out=$T/cb-$ran.folded
	"$STRATA" record -F 199 -o "$out" -- "$py" "$PYFIX/py_callback.py" 2 2> "$T/err"
	inkey=$(folded_sum "$out" "" ";key \(py_callback\.py:[0-9]+\)")
	# One or more frames between sorter and key, none of them Python.
	between=$(folded_sum "$out" "" \
		';sorter \(py_callback\.py:[0-9]+\)(;[^;(]+(\([^;]*\))?)+;key \(py_callback\.py:[0-9]+\)')
	native=$(awk '{ sub(/ [0-9]+$/, "") } /;key \(py_callback/ {
		sub(/.*;sorter \(py_callback\.py:[0-9]+\);/, ""); sub(/;key \(py_callback.*/, "")
		print }' "$out" | grep -c -E 'sort|python3|Vectorcall' || true)
	assert_ratio "$between" "$inkey" 90 "$py: sorter;<native frames>;key"
	[ "$native" -gt 0 ] || fail "$py: no sort / interpreter native frames between sorter and key"
	# The frames strictly between sorter and key (none when the native
	# unwind of a sample was cut short: key then follows sorter directly).
	if awk '/;key \(py_callback/ { sub(/ [0-9]+$/, "")
		sub(/.*;sorter \(py_callback\.py:[0-9]+\)/, ""); sub(/;key \(py_callback.*/, "")
		print }' "$out" | grep -q '\.py:'; then
		fail "$py: a Python frame between sorter and key"
	fi
done
[ "$ran" -gt 0 ] || skip "no CPython 3.10-3.13 here"
