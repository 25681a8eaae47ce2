#!/usr/bin/env bash
# bench/guest-request-cost.sh — the CPU time a guest spends per request on
# this machine: `[[vm]] guest_cpu`'s `request_us` (docs/reshape.md, "The
# guest's CPU").
#
# Runs fio as paper 001's guest ran it (4 KiB O_DIRECT writes through
# libaio, 64 in flight per thread, one thread per core, on files of the file
# system of DIR, default $TMPDIR or /var/tmp) for random and sequential
# writes, ROUNDS times each. The cost of a request is fio's user + system
# CPU time (wait4's rusage: the submission and reaping, the system calls,
# the file system, the block layer, the disk's driver, and the completion
# interrupts that arrive while fio runs) over its requests; the least of
# the rounds is kept (other load on a shared machine only adds).
#
# This machine is itself a virtual machine whose disk is virtio-blk
# (`/sys/block/*/device/vendor` 0x1af4), so the path measured is a guest's:
# what paper 001's VM ran for each request. What it may overstate: this
# VM's exits (the kick and the interrupt) cost what its hypervisor makes
# them cost, which for a nested or PVM guest is more than under bare-metal
# KVM.
#
# Usage: bench/guest-request-cost.sh [--dir DIR] [--rounds N] [--seconds S] [--jobs N]
set -euo pipefail

DIR=${TMPDIR:-/var/tmp}
ROUNDS=3
SECONDS_PER_RUN=5
JOBS=$(nproc)
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) DIR=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --seconds) SECONDS_PER_RUN=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "guest-request-cost.sh: unknown argument \`$1\` (see --help)" >&2; exit 2 ;;
  esac
done
die() { echo "guest-request-cost.sh: $*" >&2; exit 1; }
command -v fio >/dev/null || die "fio not found (Debian: apt-get install fio)"
command -v python3 >/dev/null || die "python3 not found"
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "--rounds must be a positive integer, not \`$ROUNDS\`"
[[ $SECONDS_PER_RUN =~ ^[1-9][0-9]*$ ]] || die "--seconds must be a positive integer, not \`$SECONDS_PER_RUN\`"
[[ $JOBS =~ ^[1-9][0-9]*$ ]] || die "--jobs must be a positive integer, not \`$JOBS\`"
[ -d "$DIR" ] || die "--dir \`$DIR\` is not a directory"

SCRATCH=$(mktemp -d "$DIR/hvio-guest-cost.XXXXXX")
trap 'rm -rf "$SCRATCH"' EXIT

echo "# $(fio --version)"
echo "# CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
echo "# file system of $DIR: $(df -T "$DIR" | awk 'NR==2 {print $2 " on " $1}')"
for v in /sys/block/*/device/vendor; do
  [ -f "$v" ] && echo "# $(basename "$(dirname "$(dirname "$v")")"): vendor $(cat "$v")"
done
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

# Files written out once, so no write meets an unwritten extent.
fio --name=lay --directory="$SCRATCH" --rw=write --bs=1M --direct=1 --size=128M \
  --numjobs="$JOBS" --output=/dev/null || die "fio could not lay out its files in $SCRATCH"

for RW in randwrite write; do
  python3 - "$SCRATCH" "$RW" "$JOBS" "$SECONDS_PER_RUN" "$ROUNDS" <<'PY' || die "fio $RW failed"
import json, resource, subprocess, sys
scratch, rw, jobs, seconds, rounds = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
best = None
for _ in range(rounds):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(
        ["fio", "--name=lay", f"--directory={scratch}", f"--rw={rw}", "--bs=4k", "--direct=1",
         "--ioengine=libaio", "--iodepth=64", f"--numjobs={jobs}", "--size=128M",
         f"--runtime={seconds}", "--time_based", "--group_reporting", "--output-format=json",
         f"--output={scratch}/out.json"],
        check=True,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    ios = json.load(open(f"{scratch}/out.json"))["jobs"][0]["write"]["total_ios"]
    us = cpu / ios * 1e6
    print(f"{rw} round: {us:.2f} µs a request ({cpu:.2f} CPU s, {ios} requests)")
    best = us if best is None else min(best, us)
print(f"{rw}: {best:.2f} µs of CPU a 4 KiB request (least of {rounds})")
PY
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
