#!/usr/bin/env bash
# bench/disksim-compare.sh — hvio's and DiskSim 4.0's service time for the
# same requests, side by side, by request class (not part of `make test`;
# builds DiskSim, then one DiskSim replay and one hvio replay per disk).
#
# For each disk of DATA (default ../shared/data/hdd-validation) it replays
# DISK.trace on DISK.parv in DiskSim with its trace of simulated requests
# turned on (the global `Output file for trace of I/O requests simulated`:
# each request's arrival; in a closed-loop replay a request's service time
# is the next arrival minus its own minus the recorded gap), then runs
# `hdd_errors DISK.parv DISK.trace TOP --disksim OUTTRACE --as-described`
# (the description as DiskSim reads it, without hvio's DIXtrac
# seek-overhead correction): per request
# class the measured, hvio's and DiskSim's means and demerits, and the
# demerit between hvio's and DiskSim's distributions (see
# docs/hdd-model.md, "Where the remaining error is").
#
# Usage: bench/disksim-compare.sh --disksim-src DIR [--data DIR] [--disk NAME] [--top N] [--keep DIR]
#   --keep DIR  leaves the DiskSim outputs (DISK.outtrace, DISK.outv) and
#               hvio's per-request CSV (DISK.csv) in DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/disksim-build.sh

SRC=""
DATA=../shared/data/hdd-validation
ONLY=""
TOP=15
KEEP=""
while [ $# -gt 0 ]; do
  case "$1" in
    --disksim-src) SRC=$2; shift 2 ;;
    --data) DATA=$2; shift 2 ;;
    --disk) ONLY=$2; shift 2 ;;
    --top) TOP=$2; shift 2 ;;
    --keep) KEEP=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "disksim-compare.sh: unknown argument \`$1\` (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$SRC" ] || { echo "disksim-compare.sh: --disksim-src DIR is required (a DiskSim 4.0 source tree)" >&2; exit 1; }
DATA=$(cd "$DATA" && pwd)
echo "building hdd_errors ..."
cargo build --release -q -p hvio-device --example hdd_errors
ERRORS=$PWD/target/release/examples/hdd_errors
WORK=$(mktemp -d /tmp/hvio-disksim-compare.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
echo "building DiskSim 4.0 from $SRC ..."
disksim_build "$SRC" "$WORK"
RUN=$WORK/run
disksim_run_dir "$DATA" "$SRC" "$RUN"
[ -z "$KEEP" ] || mkdir -p "$KEEP"
cd "$RUN"
for parv in "$RUN"/*.parv; do
  disk=$(basename "$parv" .parv)
  [ -z "$ONLY" ] || [ "$disk" = "$ONLY" ] || continue
  [ -f "$disk.trace" ] || continue
  # Turn on DiskSim's trace of simulated requests (in the global block; a
  # description that names one already, as atlas10k.parv does, gets ours).
  key='Output file for trace of I/O requests simulated'
  if grep -q "^[[:space:]]*$key" "$parv"; then
    sed -i "s|^\([[:space:]]*$key[[:space:]]*=[[:space:]]*\)[^,]*|\1$disk.outtrace|" "$parv"
  else
    # Before its `Stat definition file`, with a comma: whatever follows.
    grep -q '^[[:space:]]*Stat definition file' "$parv" || { echo "$disk: no \`Stat definition file\` line in $disk.parv" >&2; continue; }
    sed -i "s|^\([[:space:]]*\)Stat definition file|\1$key = $disk.outtrace,\n\1Stat definition file|" "$parv"
  fi
  "$DISKSIM" "$parv" "$disk.outv" validate "$disk.trace" 0 >/dev/null 2>&1 || { echo "$disk: DiskSim failed" >&2; continue; }
  echo
  echo "=== $disk"
  "$ERRORS" "$DATA/$disk.parv" "$DATA/$disk.trace" "$TOP" --disksim "$disk.outtrace" --dump "$disk.csv" --as-described
  [ -z "$KEEP" ] || cp "$disk.outtrace" "$disk.outv" "$disk.csv" "$KEEP/"
done
