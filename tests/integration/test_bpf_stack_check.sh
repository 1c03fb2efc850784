# The build's BPF stack check (scripts/check_bpf_stack.py): the shipped
# objects fit the 512 bytes that kernels before 6.13 allow a call chain, and
# an object over it is refused, the chain named (a 320-byte program calling a
# 160-byte subprogram that hands a 96-byte callback to bpf_loop: 576 bytes
# rounded).  The development host's verifier accepts such an object, so
# without this check only a VM run on 6.1/6.12 would see it.
source "$(dirname "$0")/lib.sh"
command -v clang > /dev/null && command -v llvm-objdump > /dev/null || skip "needs clang and llvm-objdump"
check=$ROOT/scripts/check_bpf_stack.py
objs=("$ROOT"/build/bpf/*.bpf.o)
[ -e "${objs[0]}" ] || fail "no build/bpf/*.bpf.o: make all"
for o in "${objs[@]}"; do
	"$check" "$o" -v > "$T/ok.txt" || fail "$(basename "$o") over the limit"
	echo "ok: $(basename "$o"), worst: $(sort -t: -k2 -n "$T/ok.txt" | tail -1)"
done
cat > "$T/over.bpf.c" <<'C'
typedef unsigned long long u64;
#define SEC(s) __attribute__((section(s), used))
static long (*bpf_loop)(unsigned int n, void *fn, void *ctx, u64 flags) = (void *)181;
static long (*probe_read)(void *dst, unsigned int size, const void *src) = (void *)4;
static __attribute__((noinline)) long cb(unsigned int i, void *ctx)
{
	volatile char b[96];
	probe_read((void *)b, sizeof(b), ctx);
	return b[i & 63];
}
static __attribute__((noinline)) long walk(void *ctx)
{
	volatile char b[160];
	probe_read((void *)b, sizeof(b), ctx);
	return bpf_loop(4, cb, ctx, 0) + b[7];
}
SEC("uprobe") int prog(void *ctx)
{
	volatile char b[320];
	probe_read((void *)b, sizeof(b), ctx);
	return walk(ctx) + b[3];
}
char LICENSE[] SEC("license") = "GPL";
C
clang -g -O2 -target bpf -mcpu=v3 -c "$T/over.bpf.c" -o "$T/over.bpf.o" || fail "cannot build the oversized object"
if "$check" "$T/over.bpf.o" 2> "$T/err"; then
	fail "the 576-byte chain was accepted"
fi
cat "$T/err"
grep -q 'prog needs 576 bytes' "$T/err" || fail "want 'prog needs 576 bytes'"
grep -q 'prog(320) -> walk(160) -> cb(96)' "$T/err" || fail "want the chain prog -> walk -> cb named"
echo "ok: a 576-byte chain is refused, its chain named"
