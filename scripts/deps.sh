#!/usr/bin/env bash
# Installs the Debian packages strata needs to build, test and benchmark.
# Idempotent, and quiet when everything is already there.
set -euo pipefail
pkgs=(make gcc clang llvm pkg-config libbpf-dev bpftool libelf-dev libdw-dev liblzma-dev
      libdebuginfod-dev libunwind-dev zlib1g-dev libzstd-dev
      libcurl4-openssl-dev protobuf-c-compiler libprotobuf-c-dev
      libmicrohttpd-dev libsqlite3-dev libcmocka-dev libclang-rt-14-dev
      libxml2-utils python3 golang-go linux-perf bpftrace)
# deploy/ manifest checks (python3-yaml); ClickHouse store tests run a
# private clickhouse-server (Debian's 18.16; no system service is used).
pkgs+=(python3-yaml clickhouse-server)
# Python frames: the PyTorch test workload and the 3.11 headers
# the offsets table is checked against.
pkgs+=(python3-torch python3.11-dev)
# USDT: the caching-allocator stand-in (libc10_cuda.so) has real sys/sdt.h probes.
pkgs+=(systemtap-sdt-dev)
# Diagnosis: promtool checks deploy/prometheus rules.
pkgs+=(prometheus)
# Real peers on loopback (tests/integration/test_peer_*.sh): elfutils'
# debuginfod serving a stripped binary's debug info, and Alertmanager
# receiving the straggler alert from Prometheus (skipped without them).
pkgs+=(debuginfod prometheus-alertmanager)
# strata-server: the server tests drive it with these CLIs.
pkgs+=(curl zstd sqlite3)
# The VM kernel test (tests/vm/): qemu, a static busybox for its initramfs,
# and Debian's own kernels booted in it: 6.1 (bookworm's linux-image-amd64)
# and the newest 6.12 (bookworm's linux-image-6.12-amd64).  Only the kernel
# packages this release's archive carries are asked for (checked after
# apt-get update).
pkgs+=(qemu-system-x86 busybox-static)
kernels=(linux-image-amd64 linux-image-6.12-amd64)
pkgs+=("${kernels[@]}")
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "deps: installing ${missing[*]}"
SUDO=; [ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
have=()
for p in "${missing[@]}"; do
	if [[ " ${kernels[*]} " == *" $p "* ]] && ! apt-cache show "$p" > /dev/null 2>&1; then
		echo "deps: $p is not in this release's archive: the VM test skips that kernel"
		continue
	fi
	have+=("$p")
done
missing=("${have[@]}")
[ ${#missing[@]} -eq 0 ] && exit 0
# INITRD=No: the kernels are booted only by tests/vm/ with its own
# initramfs; Debian's (a minute each to build) would go unused.
$SUDO env INITRD=No apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
