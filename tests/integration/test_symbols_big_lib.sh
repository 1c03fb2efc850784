# The real NVIDIA library a training process spends time in is named at
# the server, however large: libcublasLt.so (~540 MB, most of it GPU code
# and kernel tables) is over the agent's 512 MiB upload bound, so before
# its frames stayed "file+0x..." for good.  The agent now sends what
# symbolization reads (headers, symbol tables, notes, .eh_frame: a few
# percent, uploader/elf_slim.c) as a sparse ELF; the server stores it with
# its holes at its offsets.  DaemonSet args, server defaults (token).
source "$(dirname "$0")/scenario_lib.sh"

LIB=$(ls /usr/local/cuda/lib64/libcublasLt.so.* 2> /dev/null | grep -E '\.so\.[0-9]+$' | head -1)
[ -n "$LIB" ] || skip "no CUDA toolkit (libcublasLt.so) on this machine"
size=$(stat -Lc %s "$LIB")
[ "$size" -gt $((512 << 20)) ] || echo "note: $LIB is $size bytes (not over the bound here)"

scenario_token
start_server "$PORT" --token-file "$T/token"
scenario_agent "$T/spool" biglib-node
wait_agent_ready "$T/agent.log"
"$FIX/big_lib_spin" "$LIB" 6 > "$T/spin.out" 2>&1 &
SPIN=$!
wait "$SPIN" || fail "big_lib_spin: $(cat "$T/spin.out")"

# its batch (a 10-s period), the server's ask, the upload; then the names
stored=
for _ in $(seq 60); do
	stored=$(find "$T/server.db.buildids" -type f -size +$((size / 1024 - 1))k 2> /dev/null | head -1)
	[ -n "$stored" ] && break
	sleep 1
done
[ -n "$stored" ] || fail "the library never reached the server: $(grep -E 'uploader|symbols' "$T/agent.log" | tail -3)"
disk=$(($(stat -c %b "$stored") * $(stat -c %B "$stored")))
echo "stored: $(stat -c %s "$stored") bytes, $disk on disk (the library: $size)"
[ "$(stat -c %s "$stored")" -eq "$size" ] || fail "stored at another size than the library's"
[ "$disk" -lt $((size / 10)) ] || fail "the loaded code and data were sent: $disk bytes on disk"
api "/api/v1/profile?format=folded&pid=$SPIN" > "$T/p.folded"
named=$(grep -c 'cublasLtGetStatusString' "$T/p.folded" || true)
unnamed=$(grep -Ec 'libcublasLt[^;]*\+0x' "$T/p.folded" || true)
echo "stacks naming cublasLtGetStatusString: $named; with unnamed libcublasLt frames: $unnamed"
[ "$named" -ge 1 ] || fail "no frame named in libcublasLt: $(head -5 "$T/p.folded")"
echo "ok: $LIB named at the server from $disk of its $size bytes"
