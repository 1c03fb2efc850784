# Three threads, each hot in its own function (spin_alpha/beta/gamma), each
# named after it: every thread's samples show its own Python stack
# (Thread.run -> run -> its spin function; 3.10 names have no class: no
# co_qualname) and never another's.  3.10
# finds thread states by pthread_self(), 3.11+ by native_thread_id.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
require_bpf
ran=0
for py in $(py_interpreters); do
	ran=$((ran + 1))
	out=$T/th-$ran.folded
	"$STRATA" record -F 199 -o "$out" -- "$py" "$PYFIX/py_threads.py" 2 2> "$T/err"
	for w in alpha beta gamma; do
		total=$(folded_sum "$out" "w_$w" "")
		own=$(py_frames_sum "$out" \
			"(Thread\.)?run \(threading\.py:[0-9]+\);run \(py_threads\.py:[0-9]+\);spin_$w \(py_threads\.py:[0-9]+\)\$" "w_$w")
		other=$(folded_sum "$out" "w_$w" "spin_(alpha|beta|gamma)" )
		if [ $((100 * own)) -lt $((90 * total)) ]; then
			echo "$py: w_$w's samples outside spin_$w (the most frequent 8), and strata's report:"
			grep "^w_$w;" "$out" | grep -v "spin_$w (" | awk '{print $NF, $0}' | sort -rn | head -8 | cut -c1-400
			cat "$T/err"
		fi
		assert_ratio "$own" "$total" 90 "$py: thread w_$w in spin_$w"
		[ "$other" -eq "$own" ] || fail "$py: w_$w has $((other - own)) samples in another spin function"
	done
done
[ "$ran" -gt 0 ] || skip "no CPython 3.10-3.13 here"
