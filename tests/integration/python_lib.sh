# Shared by the Python integration tests (sourced after lib.sh).
PYFIX=$ROOT/tests/fixtures

# The CPython interpreters to exercise that exist here: Debian's 3.11 and
# pyenv's 3.10-3.13 builds.  Absent ones are reported and left out.
py_interpreters() {
	local p
	for p in /usr/bin/python3.11 /root/.pyenv/versions/3.10.*/bin/python3.10 \
		/root/.pyenv/versions/3.11.*/bin/python3.11 /root/.pyenv/versions/3.12.*/bin/python3.12 \
		/root/.pyenv/versions/3.13.*/bin/python3.13; do
		if [ -x "$p" ]; then echo "$p"; else echo "absent: $p" >&2; fi
	done
}

# Line number in fixture file $1 of the line carrying marker $2.
py_marker_line() {
	grep -n "$2" "$1" | cut -d: -f1
}

# Sum of counts of folded lines in $1 (of comm $3 when given) whose Python
# frames alone ("name (file.py:N)" frames, root first, joined by ";") match
# the extended regex $2.  Native frames between them (3.10 calls through C
# for every Python call) are left out of the match.
py_frames_sum() {
	awk -v re="$2" -v comm="${3:-}" '{
		n = $NF; sub(/ [0-9]+$/, "")
		k = split($0, f, ";"); seq = ""
		if (comm != "" && f[1] != comm) next
		for (i = 2; i <= k; i++)
			if (f[i] ~ /\(.*\.py:[0-9]+\)$/ || f[i] ~ /\(<frozen [^>]*>:[0-9]+\)$/)
				seq = seq (seq == "" ? "" : ";") f[i]
		if (seq ~ re) s += n
	} END { print s + 0 }' "$1"
}
