#!/usr/bin/env bash
# Install the Debian packages hvio's tests use (idempotent: installs only
# what is missing). Run as root; without root it only reports what is missing.
set -euo pipefail

# package:command-that-proves-it-is-installed
NEEDED=(
  "qemu-utils:qemu-io"      # hvio-vdisk NBD tests: qemu-io, qemu-img
  "fio:fio"                 # hvio-vdisk NBD and FUSE tests: fio --ioengine=nbd, --verify=crc32c; hvio-trace: fio is the job-file parser oracle
  "e2fsprogs:mkfs.ext4"     # hvio-vdisk FUSE test: mkfs.ext4, e2fsck
  "mount:losetup"           # hvio-vdisk FUSE test: losetup --direct-io=on (Debian ships it in `mount`, not `util-linux`)
  "mount:mount"             # hvio-vdisk FUSE test, read-only and ENOSPC tests: mount, umount (tmpfs, ext4)
  "libnbd-bin:nbdcopy"      # hvio-vdisk reshaped image clients: nbdcopy both ways
  "chromium:chromium"       # hvio report's test: headless Chromium opens the page, screenshots it, checks every figure drew
)

# promtool (the Prometheus exposition checker the metrics test runs) from
# Debian's prometheus package, unpacked under target/tools rather than
# installed: installing the package would also start a Prometheus server.
here=$(cd "$(dirname "$0")" && pwd)
tools=$here/../target/tools
if ! command -v promtool >/dev/null 2>&1 && [ ! -x "$tools/usr/bin/promtool" ]; then
  mkdir -p "$tools"
  if (cd "$tools" && apt-get download -q prometheus >/dev/null 2>&1); then
    dpkg -x "$tools"/prometheus_*.deb "$tools" && rm -f "$tools"/prometheus_*.deb
    echo "deps: promtool unpacked in target/tools/usr/bin"
  else
    echo "deps: cannot download Debian's prometheus package; the promtool check will skip" >&2
  fi
fi

missing=()
for entry in "${NEEDED[@]}"; do
  pkg=${entry%%:*}
  cmd=${entry#*:}
  command -v "$cmd" >/dev/null 2>&1 || missing+=("$pkg")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all test packages present"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "deps: missing ${missing[*]} (run as root to install); tests that need them will skip" >&2
  exit 0
fi

echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${missing[@]}"
