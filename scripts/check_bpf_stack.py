#!/usr/bin/env python3
"""Fails when a BPF object's worst call chain needs more than 512 bytes of
stack under the verifier of kernels before 6.13.

Before 6.13 the verifier (check_max_stack_depth in kernel/bpf/verifier.c)
adds up the stack of a program and of every subprogram and callback it can
reach on one path (a bpf-to-bpf call, or a function whose address is loaded
for a helper such as bpf_loop), each frame rounded up to 32 bytes (at least
1 byte first), and refuses the program when the sum passes MAX_BPF_STACK
(512): "combined stack size of N calls is M. Too large".  From 6.13 each
subprogram of a tracing program gets its own stack on x86-64, so the
development host accepts what 6.1 and 6.12 refuse; only a VM run would see
it.  This check runs on every build of a .bpf.o instead.

A function's stack depth is taken from its code, as the verifier sees it:
the deepest r10-relative access and the deepest stack address formed from
r10 (rX = r10; rX += -N), which is how clang passes stack buffers to
helpers.

Usage: scripts/check_bpf_stack.py OBJECT.bpf.o [-v]
"""
import os
import re
import subprocess
import sys

LIMIT = 512
ROUND = 32

objdump = os.environ.get("LLVM_OBJDUMP", "llvm-objdump")
obj = sys.argv[1]
verbose = "-v" in sys.argv[2:]
try:
    text = subprocess.run([objdump, "-dr", "--no-show-raw-insn", obj], check=True,
                          capture_output=True, text=True).stdout
except (OSError, subprocess.CalledProcessError) as e:
    sys.exit("check_bpf_stack: %s: %s" % (obj, e))

# Per section: functions (name -> first insn index), instructions, and the
# relocation of each instruction that has one.
section = None
funcs = {}        # (section, name) -> start insn
insns = {}        # section -> {idx: text}
relocs = {}       # section -> {idx: symbol}
last_idx = None
for line in text.splitlines():
    m = re.match(r"Disassembly of section (\S+):", line)
    if m:
        section = m.group(1)
        insns.setdefault(section, {})
        relocs.setdefault(section, {})
        continue
    m = re.match(r"([0-9a-f]+) <([^>]+)>:", line)
    if m and section:
        name = m.group(2)
        if not re.match(r"LBB\d+_\d+$", name):
            funcs[(section, name)] = int(m.group(1), 16) // 8
        continue
    m = re.match(r"\s+([0-9a-f]+):\s+R_BPF_\w+\s+(\S+)", line)
    if m and section:
        relocs[section][int(m.group(1), 16) // 8] = m.group(2)
        continue
    m = re.match(r"\s*(\d+):\t(.*)", line)
    if m and section:
        last_idx = int(m.group(1))
        insns[section][last_idx] = m.group(2).strip()

# Function extents and stack depths.
by_section = {}
for (sec, name), start in funcs.items():
    by_section.setdefault(sec, []).append((start, name))
extent = {}
for sec, lst in by_section.items():
    lst.sort()
    end_all = max(insns[sec]) + 2 if insns[sec] else 0
    for i, (start, name) in enumerate(lst):
        end = lst[i + 1][0] if i + 1 < len(lst) else end_all
        extent[(sec, name)] = (start, end)


def func_at(sec, idx):
    for (s, name), (a, b) in extent.items():
        if s == sec and a <= idx < b:
            return (s, name)
    return None


depth = {}
calls = {}
for key, (a, b) in extent.items():
    sec, _ = key
    deepest = 0
    fp_regs = set()
    out = set()
    for idx in range(a, b):
        ins = insns[sec].get(idx)
        if ins is None:
            continue
        for n in re.findall(r"r10 - (\d+)", ins):
            deepest = max(deepest, int(n))
        m = re.match(r"(r\d+) = r10$", ins)
        if m:
            fp_regs.add(m.group(1))
            continue
        m = re.match(r"(r\d+) \+= -(\d+)$", ins)
        if m and m.group(1) in fp_regs:
            deepest = max(deepest, int(m.group(2)))
            continue
        m = re.match(r"(r\d+) = ", ins)
        if m:
            fp_regs.discard(m.group(1))
        sym = relocs[sec].get(idx)
        target = None
        m = re.match(r"call (-?\d+)$", ins)
        if m and sym is not None:
            # a call to another section's or a global function: the
            # relocation names it (section symbol: imm + 1 insns in)
            imm = int(m.group(1))
            if (".text", sym) in extent:
                target = (".text", sym)
            elif sym in insns:
                target = func_at(sym, imm + 1)
        elif re.match(r"r\d+ = (\d+) ll$", ins) and sym is not None and sym in insns:
            # a function's address (bpf_loop and other callbacks)
            off = int(re.match(r"r\d+ = (\d+) ll$", ins).group(1))
            target = func_at(sym, off // 8)
        elif re.match(r"r\d+ = 0 ll$", ins) and sym is not None and (".text", sym) in extent:
            target = (".text", sym)
        if target is not None and target != key:
            out.add(target)
    depth[key] = deepest
    calls[key] = out

# Calls inside .text without relocation are pc-relative.
for key, (a, b) in extent.items():
    sec, _ = key
    for idx in range(a, b):
        ins = insns[sec].get(idx, "")
        m = re.match(r"call (-?\d+)$", ins)
        # helper calls have a positive id and no relocation, and a
        # relocation-less pseudo call would be pc-relative; clang emits a
        # relocation for every bpf-to-bpf call, so nothing is guessed here
        if m and idx not in relocs[sec] and int(m.group(1)) < 0:
            t = func_at(sec, idx + int(m.group(1)) + 1)
            if t and t != key:
                calls[key].add(t)


def frame(key):
    d = max(depth[key], 1)
    return (d + ROUND - 1) // ROUND * ROUND


def worst(key, seen=()):
    if key in seen:
        return 0, [key]  # recursion: the verifier refuses it anyway
    best, path = 0, []
    for t in calls[key]:
        d, p = worst(t, seen + (key,))
        if d > best:
            best, path = d, p
    return frame(key) + best, [key] + path


failed = False
for key in sorted(extent):
    sec, name = key
    if sec == ".text":
        continue  # subprograms: counted from the programs that reach them
    total, path = worst(key)
    chain = " -> ".join("%s(%d)" % (n, depth[(s, n)]) for s, n in path)
    if total > LIMIT:
        print("check_bpf_stack: %s: %s needs %d bytes of stack before 6.13 (> %d, frames "
              "rounded to %d): %s" % (obj, name, total, LIMIT, ROUND, chain), file=sys.stderr)
        failed = True
    elif verbose:
        print("%s: %d: %s" % (name, total, chain))
sys.exit(1 if failed else 0)
