#!/usr/bin/env bash
# The real-guest test kit: a QEMU that runs under TCG, a Debian cloud kernel
# and an initramfs whose /init tests the virtio disk (a write/read-back
# checksum, then fio with verify=crc32c at iodepth 16) and powers off.
#
# Usage: scripts/guest-image.sh [DIR]   (default target/guest)
#
# Everything comes from Debian packages fetched with `apt-get download` and
# unpacked with `dpkg -x` (no root, nothing installed): Debian 12's
# qemu-system-x86 cannot be installed beside a newer qemu-utils, and the
# tests need no system-wide QEMU. fio and its libraries are copied from the
# host (scripts/deps.sh installs fio). The result is cached: a second run
# with the same script does nothing. Prints the directory's files as
# KEY=PATH lines for the tests:
#   QEMU, QEMU_LIB, QEMU_MODULE_DIR, QEMU_FIRMWARE, KERNEL, INITRD, QSD
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../target/guest}
mkdir -p "$out"
out=$(cd "$out" && pwd)
stamp_want=$(cat "$0" "$here/guest-init.sh" | sha256sum | cut -d' ' -f1)

report() {
  local root=$out/root
  echo "QEMU=$root/usr/bin/qemu-system-x86_64"
  echo "QEMU_LIB=$root/usr/lib/x86_64-linux-gnu"
  echo "QEMU_MODULE_DIR=$root/usr/lib/x86_64-linux-gnu/qemu"
  echo "QEMU_FIRMWARE=$root/usr/share/qemu:$root/usr/share/seabios"
  echo "KERNEL=$out/vmlinuz"
  echo "INITRD=$out/initrd.cpio"
  echo "QSD=$root/usr/bin/qemu-storage-daemon"
}

# One builder at a time (parallel tests call this together).
exec 9>"$out/.lock"
flock 9
if [ "$(cat "$out/.stamp" 2>/dev/null)" = "$stamp_want" ]; then
  report
  exit 0
fi

for tool in apt-get apt-cache dpkg fio blkdiscard; do
  command -v "$tool" >/dev/null || { echo "guest-image: \`$tool\` is not installed" >&2; exit 2; }
done

rm -rf "$out/debs" "$out/root" "$out/initrd" "$out/initrd.cpio" "$out/vmlinuz" "$out/.stamp"
mkdir -p "$out/debs" "$out/root"
cd "$out/debs"

# A fresh machine may have no package lists yet.
if ! apt-cache show linux-image-cloud-amd64 >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
  apt-get update -qq
fi
# The kernel the cloud metapackage points at today, e.g. linux-image-6.1.0-53-cloud-amd64.
kernel=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null |
  awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
[ -n "$kernel" ] || { echo "guest-image: apt-cache knows no linux-image-cloud-amd64" >&2; exit 2; }

qemu_pkgs=(qemu-system-x86 qemu-system-common qemu-system-data seabios)
# The shared libraries QEMU links that the host lacks (one level of
# Depends: is all it needs).
libs=$(for p in "${qemu_pkgs[@]}"; do apt-cache depends "$p"; done |
  awk '/ Depends: lib/ {gsub(/[<>]/, "", $2); print $2}' | sort -u |
  while read -r p; do
    # The host's own (libc6, libglib2.0-0...) stay the host's.
    dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed' || echo "$p"
  done)
# shellcheck disable=SC2086
apt-get download -q "${qemu_pkgs[@]}" busybox-static "$kernel" $libs 2>&1 |
  grep -v '^W: Download is performed unsandboxed' >&2 || true
for deb in *.deb; do dpkg -x "$deb" "$out/root"; done

root=$out/root
missing=$(LD_LIBRARY_PATH=$root/usr/lib/x86_64-linux-gnu ldd "$root/usr/bin/qemu-system-x86_64" | grep 'not found' || true)
[ -z "$missing" ] || { echo "guest-image: QEMU still misses libraries:" >&2; echo "$missing" >&2; exit 2; }
kver=${kernel#linux-image-}
cp "$root/boot/vmlinuz-$kver" "$out/vmlinuz"
bb=$root/bin/busybox

# The initramfs: busybox, the virtio modules, fio and blkdiscard with their
# libraries, /init.
ir=$out/initrd
mkdir -p "$ir"/{bin,dev,proc,sys,tmp,lib/modules}
cp "$bb" "$ir/bin/busybox"
for m in virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_blk; do
  ko=$(find "$root/lib/modules/$kver" -name "$m.ko*" | head -n1)
  [ -n "$ko" ] || { echo "guest-image: $kernel has no $m module" >&2; exit 2; }
  case $ko in
    *.xz) xz -dc "$ko" >"$ir/lib/modules/$m.ko" ;;
    *.zst) zstd -qdc "$ko" >"$ir/lib/modules/$m.ko" ;;
    *) cp "$ko" "$ir/lib/modules/$m.ko" ;;
  esac
done
fio=$(command -v fio)
cp "$fio" "$ir/bin/fio"
ldd "$fio" | awk '/=> \// {print $3} /^\t\/lib/ {print $1}' | while read -r lib; do
  mkdir -p "$ir$(dirname "$lib")"
  cp -L "$lib" "$ir$lib"
done
# util-linux's blkdiscard (busybox's cannot zero-fill: -z is WRITE_ZEROES).
mkdir -p "$ir/usr/sbin"
cp "$(command -v blkdiscard)" "$ir/usr/sbin/blkdiscard"
ldd "$(command -v blkdiscard)" | awk '/=> \// {print $3}' | while read -r lib; do
  mkdir -p "$ir$(dirname "$lib")"
  cp -L "$lib" "$ir$lib"
done
cp "$here/guest-init.sh" "$ir/init"
chmod 755 "$ir/init"
(cd "$ir" && find . | "$bb" cpio -o -H newc >"$out/initrd.cpio" 2>/dev/null)
rm -rf "$ir" "$out/debs" "$root/boot" "$root/lib/modules"

echo "$stamp_want" >"$out/.stamp"
report
