#!/usr/bin/env bash
# bench/disksim-keys.sh — which buffer/bus keys of a DiskSim disk
# description change DiskSim 4.0's own result on the validation traces
# (not part of `make test`; builds DiskSim, then about 100 replays of
# 1–2 s each).
#
# For each disk of DATA (default ../shared/data/hdd-validation) it replays
# DISK.trace on DISK.parv in DiskSim as described, then once with each key
# below set to each of its other values (everything else unchanged), and
# prints DiskSim's RMS demerit against the measured service times (DiskSim's
# own `rms` tool) and its simulated mean. A key whose every other value
# gives the described run's numbers cannot change a service time on that
# trace, in DiskSim itself. See docs/hdd-model.md, "The keys hvio ignores".
#
# Usage: bench/disksim-keys.sh --disksim-src DIR [--data DIR] [--disk NAME]
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/disksim-build.sh

SRC=""
DATA=../shared/data/hdd-validation
ONLY=""
while [ $# -gt 0 ]; do
  case "$1" in
    --disksim-src) SRC=$2; shift 2 ;;
    --data) DATA=$2; shift 2 ;;
    --disk) ONLY=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "disksim-keys.sh: unknown argument \`$1\` (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$SRC" ] || { echo "disksim-keys.sh: --disksim-src DIR is required (a DiskSim 4.0 source tree)" >&2; exit 1; }
WORK=$(mktemp -d /tmp/hvio-disksim-keys.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
echo "building DiskSim 4.0 from $SRC ..."
disksim_build "$SRC" "$WORK"
RUN=$WORK/run
disksim_run_dir "$DATA" "$SRC" "$RUN"
cd "$RUN"

# DiskSim's RMS demerit and simulated mean of DISK's replay, as "rms mean".
replay() {
  "$DISKSIM" "$1.parv" v.outv validate "$1.trace" 0 >/dev/null 2>&1 || { echo "failed -"; return; }
  local rms mean
  rms=$("$DISKSIM_RMS" v.outv v.outv -1 -1 1 | awk '/rms =/ {print $3}')
  mean=$(awk -F: '/^IOdriver Physical access time average/ {gsub(/[ \t]/, "", $2); print $2}' v.outv)
  echo "$rms $mean"
}

KEYS=(
  "Read directly to buffer|0 1"
  "Immed transfer partial hit|0 1"
  "Write hit stop prefetch|0 1"
  "Read any free blocks|0 1"
  "Buffer continuous read|1 2 3 4"
  "Low (write) water mark|0.000000 0.5 1.000000"
  "Immediate buffer read|0 1"
  "Immediate buffer write|0 1"
  "Read-ahead on idle hit|0 1"
  "Read-ahead over requested|-1 0 1"
  "Stop prefetch in sector|0 1"
  "Hold bus entire read xfer|0 1"
  "Use separate write segment|0 1"
  "Combine seq writes|0 1"
  "Fast write level|0 1 2"
)
printf '%-10s %-28s %9s %9s %10s %10s\n' disk key described changed "RMS ms" "mean ms"
for parv in "$RUN"/*.parv; do
  disk=$(basename "$parv" .parv)
  [ -z "$ONLY" ] || [ "$disk" = "$ONLY" ] || continue
  [ -f "$disk.trace" ] || continue
  # The disk's description: the .diskspecs its .parv sources.
  spec=$(awk '/^source/ {print $2}' "$disk.parv" | grep diskspecs | head -1)
  [ -n "$spec" ] && [ -f "$spec" ] || { echo "$disk: no .diskspecs sourced by $disk.parv" >&2; continue; }
  cp "$spec" "$spec.described"
  read -r rms mean <<<"$(replay "$disk")"
  printf '%-10s %-28s %9s %9s %10s %10s\n' "$disk" "(as described)" - - "$rms" "$mean"
  for entry in "${KEYS[@]}"; do
    key=${entry%%|*}
    # (sed's basic expressions: brackets, dots, stars, anchors and slashes
    # are special, parentheses are not.)
    qkey=$(printf '%s' "$key" | sed 's/[][\.*^$/]/\\&/g')
    cur=$(sed -n "s/^ *$qkey *= *\([^,]*\).*/\1/p" "$spec.described" | head -1)
    [ -n "$cur" ] || continue
    for v in ${entry#*|}; do
      [ "$v" = "$cur" ] && continue
      awk -v v="$v" -v c="$cur" 'BEGIN {exit !(v + 0 == c + 0)}' && continue
      sed "s/^\( *$qkey *= *\)[^,]*/\1$v/" "$spec.described" >"$spec"
      read -r rms2 mean2 <<<"$(replay "$disk")"
      mark=""
      [ "$rms2 $mean2" = "$rms $mean" ] && mark=" (same)"
      printf '%-10s %-28s %9s %9s %10s %10s%s\n' "$disk" "$key" "$cur" "$v" "$rms2" "$mean2" "$mark"
    done
  done
  cp "$spec.described" "$spec"
done
