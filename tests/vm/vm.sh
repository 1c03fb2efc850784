#!/usr/bin/env bash
# Boots one of the host's installed Debian kernels (/boot/vmlinuz-VERSION,
# from linux-image-* packages: `make deps`) under qemu and runs a script in
# it as root, on the host's own root filesystem:
#
#   tests/vm/vm.sh run KERNEL OUTDIR SCRIPT [ARGS...]
#   tests/vm/vm.sh find KERNEL    # prints the full version, or why not (rc 77)
#   tests/vm/vm.sh accel          # prints kvm or tcg and why
#
# KERNEL is a version prefix (6.1, 6.12) or a full version; the newest
# installed match is taken.  The guest sees the host's / read-only over 9p
# (so the build tree, the fixtures, python3 and the guest kernel's own
# /lib/modules are all there without copying), tmpfs on /tmp /run /var/tmp
# (HOME is /tmp/home), fresh bpffs, tracefs and debugfs, loopback up, and OUTDIR (an empty
# host directory; paths without spaces) read-write at the same path.
# SCRIPT must not be under those tmpfs folders.
# SCRIPT runs under bash inside; its output goes to OUTDIR/guest.log and its
# exit status to OUTDIR/guest.rc, the kernel console to OUTDIR/console.log;
# its environment has STRATA_IN_VM=1 and STRATA_VM_ACCEL (kvm or tcg).
# Exit status: the script's, or 125 when the VM gave none (boot failure,
# timeout: STRATA_VM_TIMEOUT seconds, default 900).
#
# The initramfs is built here, per kernel, into build/vm/: busybox-static
# and the kernel's virtio/9p modules (whatever of them the config builds as
# modules), with an /init that mounts the 9p root and chroots into it.
# Knobs: STRATA_VM_ACCEL=kvm|tcg (default: probed), STRATA_VM_MEM (MiB,
# default 2048), STRATA_VM_CPUS (default 2).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
VMDIR=$ROOT/build/vm
BUSYBOX=${STRATA_VM_BUSYBOX:-/bin/busybox}
QEMU=${STRATA_VM_QEMU:-qemu-system-x86_64}

die() { echo "vm: $*" >&2; exit 1; }
skip() { echo "$*" >&2; exit 77; }

# find KERNEL: the newest installed /boot/vmlinuz-KERNEL* with its modules
find_kernel() {
	local want=$1 v best=
	command -v "$QEMU" > /dev/null || skip "no $QEMU (make deps installs qemu-system-x86)"
	for f in /boot/vmlinuz-"$want"*; do
		[ -e "$f" ] || continue
		v=${f#/boot/vmlinuz-}
		# 6.1 must not match 6.12: the prefix ends at a dot, dash or plus
		case ${v#"$want"} in "" | [.+-]*) ;; *) continue ;; esac
		[ -d "/lib/modules/$v" ] || continue
		best=$(printf '%s\n%s\n' "$best" "$v" | sed '/^$/d' | sort -V | tail -1)
	done
	[ -n "$best" ] || skip "no kernel $want in /boot (make deps installs Debian's linux-image packages)"
	[ -r "/boot/vmlinuz-$best" ] || skip "/boot/vmlinuz-$best is not readable"
	echo "$best"
}

# The modules one must insmod, dependencies first, for MODULE names.
module_closure() {
	local kver=$1; shift
	local dep=/lib/modules/$kver/modules.dep
	declare -A seen=()
	visit() {
		local path=$1 d
		[ -n "${seen[$path]:-}" ] && return 0
		seen[$path]=1
		for d in $(awk -v m="$path:" '$1 == m { $1 = ""; print }' "$dep"); do # words
			visit "$d"
		done
		echo "$path"
	}
	local m path
	for m in "$@"; do
		path=$(awk -F: -v m="$m" '{ n = $1; sub(/.*\//, "", n); sub(/\.ko.*/, "", n); if (n == m) { print $1; exit } }' "$dep")
		[ -n "$path" ] || continue # built in
		visit "$path"
	done
}

build_initramfs() {
	local kver=$1 out
	out=$VMDIR/initramfs-$kver.cpio.gz
	# rebuilt when this script changes (it holds /init)
	if [ -s "$out" ] && [ "$out" -nt "${BASH_SOURCE[0]}" ]; then
		echo "$out"
		return
	fi
	{ [ -x "$BUSYBOX" ] && "$BUSYBOX" --list | grep -qx switch_root; } ||
		skip "no static busybox at $BUSYBOX (make deps installs busybox-static)"
	local d
	d=$(mktemp -d "$VMDIR/initramfs.XXXXXX")
	mkdir -p "$d"/{bin,dev,proc,sys,newroot,mod}
	cp "$BUSYBOX" "$d/bin/busybox"
	local m n=0
	: > "$d/modules"
	while read -r m; do
		[ -n "$m" ] || continue
		n=$((n + 1))
		case $m in
		*.xz) xz -dc "/lib/modules/$kver/$m" > "$d/mod/$n.ko" ;;
		*.zst) zstd -qdc "/lib/modules/$kver/$m" > "$d/mod/$n.ko" ;;
		*.gz) gzip -dc "/lib/modules/$kver/$m" > "$d/mod/$n.ko" ;;
		*) cp "/lib/modules/$kver/$m" "$d/mod/$n.ko" ;;
		esac
		echo "/mod/$n.ko $m" >> "$d/modules"
	done < <(module_closure "$kver" virtio_pci virtio_console 9pnet_virtio 9p)
	write_init > "$d/init"
	chmod 755 "$d/init"
	(cd "$d" && find . | cpio -o -H newc --quiet) | gzip -1 > "$out.tmp"
	mv "$out.tmp" "$out"
	rm -rf "$d"
	echo "$out"
}

# /init: busybox sh, pid 1 in the guest.
write_init() {
	cat << 'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
arg() { tr ' ' '\n' < /proc/cmdline | sed -n "s/^strata\.$1=//p" | tail -1; }
halt() { sync; poweroff -f; sleep 10; }
while read -r ko name; do
	insmod "$ko" 2> /dev/null || echo "vm-init: insmod $name failed" > /dev/console
done < /modules
if [ "$(arg probe)" = 1 ]; then
	echo "strata-vm: probe ok" > /dev/console
	halt
fi
# read now: /proc moves into the new root below
out=$(arg out)
script=$(arg script)
accel=$(arg accel)
R=/newroot
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144,cache=loose hostroot $R ||
	{ echo "vm-init: cannot mount the host root over 9p" > /dev/console; halt; }
for d in proc sys dev; do mount --move /$d $R/$d; done
mount -t tmpfs -o mode=1777 tmp $R/tmp
mkdir -p $R/dev/shm $R/dev/pts
# what udev would make: bash's <(...) needs /dev/fd
ln -s /proc/self/fd $R/dev/fd
for i in 0:stdin 1:stdout 2:stderr; do ln -s /proc/self/fd/${i%%:*} $R/dev/${i#*:}; done
for d in run var/tmp dev/shm; do mount -t tmpfs tmp $R/$d; done
mkdir -p $R/tmp/home
mount -t devpts devpts $R/dev/pts 2> /dev/null
mount -t bpf bpf $R/sys/fs/bpf
mount -t tracefs tracefs $R/sys/kernel/tracing
mount -t debugfs debugfs $R/sys/kernel/debug
# OUTDIR under /tmp (say) is under a tmpfs now: its mount point is made there
mkdir -p $R$out 2> /dev/null
mount -t 9p -o trans=virtio,version=9p2000.L,rw,msize=262144 out $R$out ||
	{ echo "vm-init: cannot mount $out" > /dev/console; halt; }
ip link set lo up
hostname strata-vm
set -- $(cat $R$out/guest.args)
chroot $R /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	HOME=/tmp/home TERM=dumb LANG=C.UTF-8 STRATA_IN_VM=1 STRATA_VM_ACCEL=$accel \
	/bin/bash "$script" "$@" > $R$out/guest.log 2>&1
echo $? > $R$out/guest.rc
echo "strata-vm: script exited $(cat $R$out/guest.rc)" > /dev/console
umount $R$out
halt
INIT
}

# kvm when /dev/kvm can run a stock kernel, tcg otherwise; "ACCEL REASON"
choose_accel() {
	local kver=$1 initrd=$2
	case ${STRATA_VM_ACCEL:-} in
	kvm | tcg) echo "$STRATA_VM_ACCEL STRATA_VM_ACCEL"; return ;;
	esac
	if ! [ -r /dev/kvm ] || ! [ -w /dev/kvm ]; then
		echo "tcg no usable /dev/kvm"
		return
	fi
	# A PVM host's /dev/kvm runs only PVM-built guests: a stock kernel
	# hangs before its first console line.
	[ -d /sys/module/kvm_pvm ] && { echo "tcg /dev/kvm is kvm-pvm (PVM guests only)"; return; }
	local log
	log=$(mktemp)
	timeout 20 "$QEMU" -accel kvm -cpu host -m 256 -display none -monitor none \
		-serial "file:$log" -no-reboot -kernel "/boot/vmlinuz-$kver" -initrd "$initrd" \
		-append "console=ttyS0 quiet panic=-1 strata.probe=1" > /dev/null 2>&1 || true
	if grep -q 'strata-vm: probe ok' "$log"; then echo "kvm probe boot ok"; else echo "tcg kvm probe boot failed"; fi
	rm -f "$log"
}

cmd=${1:-}
case $cmd in
find) find_kernel "$2" ;;
accel)
	kver=$(find_kernel "${2:-6.1}")
	mkdir -p "$VMDIR"
	choose_accel "$kver" "$(build_initramfs "$kver")"
	;;
run)
	[ $# -ge 4 ] || die "usage: $0 run KERNEL OUTDIR SCRIPT [ARGS...]"
	kver=$(find_kernel "$2")
	out=$(cd "$3" && pwd) script=$(cd "$(dirname "$4")" && pwd)/$(basename "$4")
	shift 4
	for a in "$out" "$script" "$@"; do
		case $a in *[[:space:]]*) die "paths and arguments must not contain spaces: '$a'" ;; esac
	done
	case $script in /tmp/* | /run/* | /var/tmp/*) die "$script: the guest has a fresh tmpfs there" ;; esac
	mkdir -p "$VMDIR"
	initrd=$(build_initramfs "$kver")
	read -r accel why < <(choose_accel "$kver" "$initrd")
	echo "$*" > "$out/guest.args"
	rm -f "$out/guest.rc" "$out/guest.log"
	cpu=max
	[ "$accel" = kvm ] && cpu=host
	echo "vm: booting $kver ($accel: $why), ${STRATA_VM_CPUS:-2} CPUs, ${STRATA_VM_MEM:-2048} MiB" >&2
	start=$(date +%s%N)
	timeout "${STRATA_VM_TIMEOUT:-900}" "$QEMU" -accel "$accel" -cpu "$cpu" \
		-smp "${STRATA_VM_CPUS:-2}" -m "${STRATA_VM_MEM:-2048}" \
		-display none -monitor none -serial "file:$out/console.log" -no-reboot \
		-kernel "/boot/vmlinuz-$kver" -initrd "$initrd" \
		-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
		-virtfs "local,path=$out,mount_tag=out,security_model=none,multidevs=remap" \
		-device virtio-rng-pci \
		-append "console=ttyS0 quiet panic=-1 strata.out=$out strata.script=$script strata.accel=$accel" \
		> "$out/qemu.log" 2>&1 || echo "vm: qemu exited $? (see $out/qemu.log)" >&2
	ms=$((($(date +%s%N) - start) / 1000000))
	printf 'vm: %s ran %d.%03ds\n' "$kver" $((ms / 1000)) $((ms % 1000)) >&2
	[ -s "$out/guest.rc" ] || { tail -20 "$out/console.log" >&2; exit 125; }
	exit "$(cat "$out/guest.rc")"
	;;
*) die "usage: $0 run KERNEL OUTDIR SCRIPT [ARGS...] | find KERNEL | accel [KERNEL]" ;;
esac
