#!/usr/bin/env bash
# bench/disksim-whatif.sh — a validation disk's demerit if its description
# said something else (a diagnostic, not part of `make test`: the numbers
# it prints are what-ifs, never inputs of the model).
#
# Copies DATA (default ../shared/data/hdd-validation) to a scratch folder,
# changes the copy as asked, and replays DISK.trace on DISK.parv in hvio
# (`hvio validate-disk`) and, with --disksim-src, in DiskSim 4.0 (its RMS
# demerit from its own `rms` tool and its simulated mean). Both read the
# changed copy as DiskSim does (hvio with `--as-described`; hvio's own
# DIXtrac seek-overhead correction is what `--seek-overhead 0.55` does
# here). Without changes it prints the disk as described.
#
#   KEY=VALUE            every `KEY = ...` line of the disk's files (DISK*) gets
#                        VALUE (an error when no line has KEY)
#   --seek-overhead MS   moves MS from every seek into the command: MS off
#                        every point of its `.seek` tables and `Single
#                        cylinder seek time`, MS onto the four `... miss
#                        over. after ...` overheads (see docs/hdd-model.md,
#                        "What is left of the Barracuda's error")
#
# Usage: bench/disksim-whatif.sh [--data DIR] [--hvio BIN] [--disksim-src DIR]
#                                [--seek-overhead MS] DISK [KEY=VALUE ...]
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/disksim-build.sh

DATA=../shared/data/hdd-validation
HVIO=target/release/hvio
SRC=""
SHIFT=""
DISK=""
SETS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --data) DATA=$2; shift 2 ;;
    --hvio) HVIO=$2; shift 2 ;;
    --disksim-src) SRC=$2; shift 2 ;;
    --seek-overhead) SHIFT=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *=*) SETS+=("$1"); shift ;;
    -*) echo "disksim-whatif.sh: unknown argument \`$1\` (see --help)" >&2; exit 2 ;;
    *) [ -z "$DISK" ] || { echo "disksim-whatif.sh: two disks, \`$DISK\` and \`$1\`" >&2; exit 2; }
       DISK=$1; shift ;;
  esac
done
[ -n "$DISK" ] || { echo "disksim-whatif.sh: which DISK? (see --help)" >&2; exit 2; }
[ -f "$DATA/$DISK.parv" ] && [ -f "$DATA/$DISK.trace" ] || { echo "disksim-whatif.sh: no $DATA/$DISK.parv and $DISK.trace" >&2; exit 1; }
[ -x "$HVIO" ] || { echo "disksim-whatif.sh: no hvio binary at $HVIO (make release, or --hvio BIN)" >&2; exit 1; }
if [ -n "$SHIFT" ] && ! [[ "$SHIFT" =~ ^[0-9]+(\.[0-9]+)?$ ]]; then
  echo "disksim-whatif.sh: --seek-overhead \`$SHIFT\`: expected milliseconds, e.g. 0.2" >&2; exit 2
fi
HVIO=$(cd "$(dirname "$HVIO")" && pwd)/$(basename "$HVIO")
DATA=$(cd "$DATA" && pwd)
[ -z "$SRC" ] || SRC=$(cd "$SRC" && pwd)
WORK=$(mktemp -d /tmp/hvio-disksim-whatif.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
RUN=$WORK/run
mkdir -p "$RUN"
cp "$DATA"/* "$RUN/"
chmod u+w "$RUN"/*
cd "$RUN"

for set in "${SETS[@]}"; do
  key=${set%%=*} value=${set#*=}
  n=$(KEY=$key VALUE=$value perl -ni -e '
      BEGIN { $n = 0 }
      $n++ if s/^(\s*\Q$ENV{KEY}\E\s*=\s*)[^,\s]+/$1$ENV{VALUE}/;
      print;
      END { open(my $f, ">>", "'"$WORK"'/count"); print $f "$n\n" }' ./"$DISK"* && awk '{s += $1} END {print s}' "$WORK/count")
  rm -f "$WORK/count"
  [ "$n" -gt 0 ] || { echo "disksim-whatif.sh: no \`$key = ...\` line in $DATA" >&2; exit 1; }
  echo "set $key = $value ($n line(s))"
done
if [ -n "$SHIFT" ]; then
  for f in ./"$DISK"*.seek; do
    [ -f "$f" ] || continue
    awk -v c="$SHIFT" -F, 'NR == 1 { print; next } NF == 2 { printf "%s,\t%.6f\n", $1, $2 - c; next } { print }' "$f" > "$WORK/seek" && mv "$WORK/seek" "$f"
  done
  SHIFT=$SHIFT perl -pi -e 's/^(\s*Single cylinder seek time\s*=\s*)([-0-9.]+)/$1 . sprintf("%.6f", $2 - $ENV{SHIFT})/e;
      s/^(\s*(?:Read|Write) miss over\. after (?:read|write)\s*=\s*)([-0-9.]+)/$1 . sprintf("%.6f", $2 + $ENV{SHIFT})/e' ./"$DISK"*
  echo "moved $SHIFT ms from every seek into the miss overheads"
fi

echo "hvio:    $("$HVIO" validate-disk "$DISK.parv" "$DISK.trace" --as-described 2>/dev/null | grep -E 'RMS demerit' | sed 's/^ *RMS demerit *//')"
if [ -n "$SRC" ]; then
  echo "building DiskSim 4.0 from $SRC ..."
  disksim_build "$SRC" "$WORK"
  cp "$SRC/valid/statdefs" "$RUN/"
  "$DISKSIM" "$DISK.parv" v.outv validate "$DISK.trace" 0 >/dev/null 2>&1 || { echo "DiskSim failed on $DISK" >&2; exit 1; }
  rms=$("$DISKSIM_RMS" v.outv v.outv -1 -1 1 | awk '/rms =/ {print $3}')
  mean=$(awk -F: '/^IOdriver Physical access time average/ {gsub(/[ \t]/, "", $2); print $2}' v.outv)
  echo "DiskSim: $rms ms, simulated mean $mean ms"
fi
