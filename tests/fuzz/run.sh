#!/usr/bin/env bash
# Builds the libFuzzer targets into build/fuzz/ and runs each for SECONDS
# (default 20), starting from the committed corpus (tests/fuzz/corpus/T/)
# and the seeds made here; what a run finds goes to build/fuzz/corpus/T/.
# --replay runs every input of both once instead (the regression check the
# suite makes: what hours of fuzzing found must still pass, under ASan and
# UBSan; in build/fuzz/replay/, apart from a campaign's binaries and
# corpora).  Exits non-zero when a target crashes; the reproducer is left in
# build/fuzz/crash-<target>-* (build/fuzz/replay/crash-* for a replay).
#   tests/fuzz/run.sh [SECONDS | --replay]
# To keep what a campaign found (only inputs that add coverage):
#   build/fuzz/fuzz_T -merge=1 tests/fuzz/corpus/T build/fuzz/corpus/T
set -eu

secs=${1:-20}
runs=-1
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$root/build/fuzz
work=$out # binaries, seeds, the corpora a campaign grows, logs
if [ "$secs" = --replay ]; then
	# Apart from any campaign's binaries and corpora (one may be running):
	# the committed corpora and fresh seeds only, every time the same.
	secs=0 runs=0 work=$out/replay
	rm -rf "$work"
fi
clang=${CLANG:-clang}
cflags="-std=gnu11 -g -O1 -Wall -Wextra -Werror -Wno-unused-parameter \
	-D_GNU_SOURCE -I$root -I$root/build/gen -I$root/build/bpf -fno-omit-frame-pointer \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined"
# What the layers' code needs from the system (the Makefile's LDLIBS).
libs="${FUZZ_LDLIBS:--lbpf -ldw -lelf -lz -lzstd -llzma -lprotobuf-c -lstdc++ -lpthread \
	-lsqlite3 -lmicrohttpd -lcurl -lm}"

cd "$root"
# One target per tests/fuzz/fuzz_T.c.
targets=$(for f in tests/fuzz/fuzz_*.c; do f=${f##*/fuzz_}; echo "${f%.c}"; done)
for t in $targets; do mkdir -p "$work/corpus/$t"; done

# Every target links the fuzz build of the layer archives (`make fuzz`
# builds them: clang, coverage, ASan/UBSan), all of them in link order;
# the linker takes from them only what the target uses.
archives=()
for l in $(scripts/check_layers.sh --link); do
	a=$out/libstrata-$l.a
	[ -f "$a" ] || { echo "tests/fuzz/run.sh: $a missing: run make fuzz" >&2; exit 1; }
	archives+=("$a")
done
for t in $targets; do
	echo "  FUZZ-CC  $work/fuzz_$t"
	# shellcheck disable=SC2086
	$clang $cflags "tests/fuzz/fuzz_$t.c" "${archives[@]}" $libs -o "$work/fuzz_$t"
done

# Seeds: real batches, as sent (odd first byte) and as protobuf (even).
if [ -x build/fixtures/gen_batch ]; then
	for g in "--stacks 3 --depth 4 --ranks 2 --samples 50" "--gpu --stacks 2 --depth 3 --ranks 2 --samples 20"; do
		# shellcheck disable=SC2086
		build/fixtures/gen_batch write "$work/seed.zst" $g > /dev/null
		for t in batch_decode ingest; do # the same framing
			{ printf '\001'; cat "$work/seed.zst"; } > "$work/corpus/$t/seed-wire-${#g}"
			{ printf '\000'; zstd -dcq "$work/seed.zst"; } > "$work/corpus/$t/seed-pb-${#g}"
		done
	done
fi

# USDT seeds: a library with sys/sdt.h notes and semaphores; arg strings.
[ -r build/fixtures/libc10_cuda.so ] && cp build/fixtures/libc10_cuda.so "$work/corpus/usdt/seed-c10"
printf -- '-4@%%edi 8@-16(%%rbp) 8@%%rax -1@$-3' > "$work/corpus/usdt/seed-args"

# Request seeds: a route, filters, a login form, a build-id, a store URL.
printf '\000POST /api/v1/symbols/0011' > "$work/corpus/request/seed-route"
printf '\001from=1700000000&to=1700000100&rank=!3&pid=42&base.rank=3' > "$work/corpus/request/seed-filter"
printf '\002a=1&token=ab%%2Fc+d' > "$work/corpus/request/seed-form"
printf '\003abcdef0123' > "$work/corpus/request/seed-hex"
printf '\004clickhouse://u:p/w@d@h:8123/db' > "$work/corpus/request/seed-store"

# Seeds: small ELF files built here from our own sources (the corpus is
# committed, so no copies of system binaries): a tiny static executable, a
# shared object with debug info, a relocatable object and a PIE, all with
# build-ids; and real maps lines.  Re-seeding an existing corpus is harmless.
printf 'void _start(void) { for (;;) ; }\n' > "$work/tiny.c"
$clang -nostdlib -static -Wl,--build-id -o "$work/corpus/buildid/tiny" \
	"$work/tiny.c" 2>/dev/null || true
cat > "$work/unwind.c" <<'EOF'
long leaf(long x) { return x * 3 + 1; }
long mid(long n) { volatile long b[32]; for (long i = 0; i < 32; i++) b[i] = leaf(i + n); return b[n & 31]; }
long dyn(long n) { volatile char *p = __builtin_alloca(n + 8); p[n] = 1; return p[n] + mid(n); }
void _start(void) { for (long i = 0;; i++) dyn(i & 63); }
EOF
printf 'int main(int argc, char **argv) { return argc > 1 && argv[1][0]; }\n' > "$work/pie.c"
$clang -O2 -g -fPIC -shared -nostdlib -Wl,--build-id=sha1 \
	-o "$work/corpus/buildid/seed-dso" "$work/unwind.c" 2>/dev/null || true
$clang -O2 -g -c -o "$work/corpus/buildid/seed-obj" "$work/unwind.c" 2>/dev/null || true
$clang -O2 -fPIE -pie -Wl,--build-id=md5 -o "$work/corpus/buildid/seed-pie" \
	"$work/pie.c" 2>/dev/null || true
cp /proc/self/maps "$work/corpus/proc_maps/seed-self-maps"
printf '7f0000000000-7f0000001000 r-xp 00001000 fd:01 42  /a b/c.so (deleted)\n' \
	> "$work/corpus/proc_maps/seed-deleted"
# Unwind seeds: small static ELFs with .eh_frame (+hdr), with frame
# pointers, and with .debug_frame for the compiled code.
cp "$work/corpus/buildid/tiny" "$work/corpus/unwind_table/seed-tiny" 2>/dev/null || true
for v in "eh:-O2 -fomit-frame-pointer" "fp:-O1 -fno-omit-frame-pointer" \
	"dbg:-O2 -g -fno-asynchronous-unwind-tables"; do
	$clang ${v#*:} -nostdlib -static -Wl,--build-id=none \
		-o "$work/corpus/unwind_table/seed-${v%%:*}" "$work/unwind.c" 2>/dev/null || true
done

# Symbolizer seeds (byte 0: the mode, hostile pread or mapped): ELF files
# with DWARF, inline chains and C++ names to demangle, and one without.
cat > "$work/inline.cc" <<'EOF'
namespace ns { template <typename T> struct box { T v; };
static inline __attribute__((always_inline)) long leaf(long x) { return x * 7 + 3; }
template <typename T> __attribute__((noinline)) long twice(box<T> b) { return leaf(b.v) + leaf(b.v + 1); } }
extern "C" long entry(long n) { ns::box<long> b{n}; return ns::twice(b) + ns::twice(ns::box<int>{int(n)}); }
EOF
for v in "dwarf4:-gdwarf-4" "dwarf5:-gdwarf-5" "nodebug:-g0"; do
	if $clang -x c++ -O2 ${v#*:} -fPIC -shared -nostdlib -Wl,--build-id \
		-o "$work/sym.so" "$work/inline.cc" 2>/dev/null; then
		{ printf '\000'; cat "$work/sym.so"; } > "$work/corpus/elf_module/seed-${v%%:*}"
		{ printf '\001'; cat "$work/sym.so"; } > "$work/corpus/elf_module/seed-${v%%:*}-pread"
	fi
done
[ -f "$work/corpus/unwind_table/seed-dbg" ] &&
	{ printf '\001'; cat "$work/corpus/unwind_table/seed-dbg"; } > "$work/corpus/elf_module/seed-static"

# Sparse ELF seeds (byte 0 even: the server's reader, byte 1 its piece
# size; odd: the agent's elf_slim on an ELF): a body of two ranges of an
# 8-byte file, and the ELFs above.
printf '\000\007STRSPARS\010\000\000\000\000\000\000\000\002\000\000\000\000\000\000\000''\000\000\000\000\000\000\000\000\002\000\000\000\000\000\000\000''\005\000\000\000\000\000\000\000\003\000\000\000\000\000\000\000abxyz' \
	> "$work/corpus/sparse_elf/seed-body"
for f in "$work/sym.so" "$work/corpus/unwind_table/seed-dbg" build/fixtures/libcudart.so; do
	if [ -f "$f" ]; then
		{ printf '\001'; cat "$f"; } > "$work/corpus/sparse_elf/seed-$(basename "$f")"
	fi
done

# Text seeds (byte 0: the XML writer's limit): markup, entities, controls,
# invalid and overlong UTF-8, a surrogate, U+FFFE.
printf '\100<a href="x">&amp;\t\001\177\377\300\257\355\240\200\357\277\276\303\251' \
	> "$work/corpus/text/seed-markup"

# Python line-table seeds: a 3.10-format and a 3.11-format table.
printf '\000\000\010\004\001\014\001\012\003' > "$work/corpus/py_linetable/seed-310"
printf '\001\000\010\200\210\351\001\360\006\002\005\011' > "$work/corpus/py_linetable/seed-311"

# Reply seeds: the server's JSON answer, and its protobuf one (byte 0 even,
# the agent's clock at the answer, then an IngestReply asking for a
# build-id and ordering a 9-s capture of pid 77 at 100 Hz).
printf '\001{"status":"stored","missing_build_ids":["abcd","0011"],"captures":[]}' \
	> "$work/corpus/reply/seed-json"
printf '\000\000\000*6\376\234\227\027\012\006stored\042\004abcd*H\012\0400123456789abcdef0123456789abcdef\022\002j1\032\006\012\002n1\020M\040\200\224\223\216\347\237\347\313\027(\200\310\327\321\210\240\347\313\0270d8\001@\001' \
	> "$work/corpus/reply/seed-pb"

fail=0
for t in $targets; do
	# New inputs go to the first directory; the committed one is read only.
	dirs=("$work/corpus/$t")
	[ -d "tests/fuzz/corpus/$t" ] && dirs+=("tests/fuzz/corpus/$t")
	if [ "$runs" -eq 0 ]; then
		echo "  REPLAY   $t: $(find "${dirs[@]}" -type f | wc -l) inputs"
	else
		echo "  FUZZ     $t for ${secs}s"
	fi
	if ! "$work/fuzz_$t" -max_total_time="$secs" -runs="$runs" -timeout=10 \
		-max_len=65536 -rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$work/crash-$t-" "${dirs[@]}" \
		> "$work/$t.log" 2>&1; then
		echo "  FAILED   $t: see $work/$t.log" >&2
		tail -n 40 "$work/$t.log" >&2
		fail=1
	else
		grep -E 'stat::number_of_executed_units|cov:' "$work/$t.log" | tail -n 2
	fi
done
exit $fail
