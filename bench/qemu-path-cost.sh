#!/usr/bin/env bash
# bench/qemu-path-cost.sh — the CPU time QEMU's block layer, linux-aio and the
# host kernel spend per request on this machine: the per-request and per-byte
# costs of `[[vm]] qemu_path` (docs/reshape.md, "QEMU's I/O path").
#
# Runs `qemu-img bench -t none -i native -d 64` (O_DIRECT, linux-aio, 64 in
# flight: QEMU's `cache=none,aio=native`, hvio's baseline QEMU; paper 001's
# QEMU 2.5 used libaio) on a raw file on the file system of DIR (default
# $TMPDIR or /var/tmp), for writes and reads of 4, 16, 64 and
# 256 KiB, ROUNDS times each. The step between requests is twice their size,
# so the host's block layer cannot merge neighbours: every request is one
# io_submit entry, one block-layer request and one completion. The cost of a
# request is the process's user + system CPU time (wait4's rusage) over the
# requests, after the CPU time of a one-request run (start-up, image open) is
# taken off; the least of the rounds is kept (other load on a shared machine
# only adds). Then per operation a least-squares line, CPU µs = per request +
# per KiB × size, which is what `qemu_path` takes as `request_us` and
# `byte_ns` (ns per byte = µs per KiB ÷ 1.024).
#
# What it does not see: the virtio ring (pop, push, guest notification),
# which qemu-img does not have; interrupt-context completion work the kernel
# accounts to whatever process it interrupted.
#
# Usage: bench/qemu-path-cost.sh [--dir DIR] [--rounds N] [--image-mib N]
set -euo pipefail

DIR=${TMPDIR:-/var/tmp}
ROUNDS=3
IMAGE_MIB=256
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) DIR=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --image-mib) IMAGE_MIB=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "qemu-path-cost.sh: unknown argument \`$1\` (see --help)" >&2; exit 2 ;;
  esac
done
die() { echo "qemu-path-cost.sh: $*" >&2; exit 1; }
command -v qemu-img >/dev/null || die "qemu-img not found (Debian: apt-get install qemu-utils)"
command -v python3 >/dev/null || die "python3 not found"
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "--rounds must be a positive integer, not \`$ROUNDS\`"
[[ $IMAGE_MIB =~ ^[1-9][0-9]*$ ]] || die "--image-mib must be a positive integer, not \`$IMAGE_MIB\`"
[ -d "$DIR" ] || die "--dir \`$DIR\` is not a directory"

SCRATCH=$(mktemp -d "$DIR/hvio-qemu-path.XXXXXX")
trap 'rm -rf "$SCRATCH"' EXIT
IMG=$SCRATCH/image.raw
# Written once in full, so no write meets an unwritten extent.
dd if=/dev/zero of="$IMG" bs=1M count="$IMAGE_MIB" oflag=direct status=none

echo "# $(qemu-img --version | head -1)"
echo "# CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
echo "# file system of $DIR: $(df -T "$DIR" | awk 'NR==2 {print $2 " on " $1}')"
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

# CPU seconds (user + system) of one qemu-img bench run, from wait4's rusage.
cpu_of() {
  python3 - "$IMG" "$@" <<'PY' || die "qemu-img bench ${*} failed"
import os, subprocess, sys
img, args = sys.argv[1], sys.argv[2:]
cmd = ["qemu-img", "bench", "-f", "raw", "-t", "none", "-i", "native", "-d", "64", *args, img]
p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
_, status, ru = os.wait4(p.pid, 0)
if os.waitstatus_to_exitcode(status) != 0:
    sys.exit(1)
print(f"{ru.ru_utime + ru.ru_stime:.6f}")
PY
}

startup=""
for _ in $(seq "$ROUNDS"); do
  s=$(cpu_of -w -c 1 -s 4096)
  startup=$(awk -v a="$startup" -v b="$s" 'BEGIN {print (a == "" || b < a) ? b : a}')
done
echo "# start-up CPU (a one-request run, least of $ROUNDS): $startup s"
printf '%-6s %8s %8s %14s\n' op size_KiB requests cpu_us_per_req
fits=""
for op in write read; do
  flag=""
  [ "$op" = write ] && flag=-w
  for kib in 4 16 64 256; do
    bytes=$((kib * 1024))
    # About 512 MiB of transfer per run, at most 100000 requests.
    count=$((512 * 1024 / kib))
    [ "$count" -gt 100000 ] && count=100000
    best=""
    for _ in $(seq "$ROUNDS"); do
      # shellcheck disable=SC2086
      c=$(cpu_of $flag -c "$count" -s "$bytes" -S $((2 * bytes)))
      best=$(awk -v a="$best" -v b="$c" 'BEGIN {print (a == "" || b < a) ? b : a}')
    done
    us=$(awk -v c="$best" -v s="$startup" -v n="$count" 'BEGIN {printf "%.3f", (c - s) / n * 1e6}')
    printf '%-6s %8d %8d %14s\n' "$op" "$kib" "$count" "$us"
    fits+="$op $kib $us"$'\n'
  done
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
# Least squares per operation: µs = a + b × KiB.
awk '
  NF == 3 { n[$1]++; sx[$1] += $2; sy[$1] += $3; sxx[$1] += $2 * $2; sxy[$1] += $2 * $3 }
  END {
    for (op in n) {
      b = (n[op] * sxy[op] - sx[op] * sy[op]) / (n[op] * sxx[op] - sx[op] * sx[op])
      a = (sy[op] - b * sx[op]) / n[op]
      printf "fit %-5s request_us = %.2f  per KiB = %.4f us (byte_ns = %.4f)\n", op, a, b, b / 1.024
    }
  }' <<<"$fits" | sort
