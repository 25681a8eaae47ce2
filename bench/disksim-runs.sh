#!/usr/bin/env bash
# bench/disksim-runs.sh — DiskSim 4.0's own run of every validation disk,
# kept for `hvio validate-disk --disksim-out DIR` (not part of `make test`;
# builds DiskSim, then one replay of 0.1–0.5 s per disk).
#
# Builds DiskSim 4.0 from the source tree given (a copy of it, in a scratch
# folder; the fixes a current 64-bit gcc needs are in bench/disksim-build.sh),
# replays DISK.trace on DISK.parv for every NAME.parv of DATA (default
# ../shared/data/hdd-validation) with a NAME.trace (--disk NAME: that one
# only), and writes DiskSim's output of each run to OUT/NAME.outv. Then
# `hvio validate-disk --all DATA --disksim-out OUT` shows DiskSim's demerit
# and hvio's ratio to it for every disk, where DATA holds a `.outv` for
# some disks only.
#
# Usage: bench/disksim-runs.sh --disksim-src DIR --out DIR [--data DIR] [--disk NAME]
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/disksim-build.sh

SRC=""
OUT=""
DATA=../shared/data/hdd-validation
ONLY=""
while [ $# -gt 0 ]; do
  case "$1" in
    --disksim-src) SRC=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --data) DATA=$2; shift 2 ;;
    --disk) ONLY=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "disksim-runs.sh: unknown argument \`$1\` (see --help)" >&2; exit 2 ;;
  esac
done
die() { echo "disksim-runs.sh: $*" >&2; exit 1; }
[ -n "$SRC" ] || die "--disksim-src DIR is required (a DiskSim 4.0 source tree)"
[ -n "$OUT" ] || die "--out DIR is required (where NAME.outv goes)"
[ -d "$DATA" ] || die "$DATA: no such folder"
DISKS=()
for f in "$DATA"/*.parv; do
  [ -f "$f" ] || continue
  n=$(basename "$f" .parv)
  [ -z "$ONLY" ] || [ "$n" = "$ONLY" ] || continue
  [ -f "$DATA/$n.trace" ] && DISKS+=("$n")
done
[ ${#DISKS[@]} -gt 0 ] || die "$DATA: no ${ONLY:-NAME}.parv with a ${ONLY:-NAME}.trace"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

WORK=$(mktemp -d /tmp/hvio-disksim-runs.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
echo "building DiskSim 4.0 from $SRC ..."
disksim_build "$SRC" "$WORK"
RUN=$WORK/run
disksim_run_dir "$DATA" "$SRC" "$RUN"
cd "$RUN"
for DISK in "${DISKS[@]}"; do
  rm -f run.outv
  "$DISKSIM" "$DISK.parv" run.outv validate "$DISK.trace" 0 >/dev/null 2>&1 || die "DiskSim failed on $DISK"
  [ -s run.outv ] || die "DiskSim wrote no output for $DISK"
  rms=$("$DISKSIM_RMS" run.outv run.outv -1 -1 1 | awk '/rms =/ {print $3}')
  # Written whole, then renamed: a run cut short leaves no half file.
  cp run.outv "$OUT/.$DISK.outv.part"
  mv "$OUT/.$DISK.outv.part" "$OUT/$DISK.outv"
  echo "$DISK: $OUT/$DISK.outv (DiskSim's rms tool: ${rms:-?} ms)"
done
