#!/usr/bin/env bash
# bench/disksim-seek-overhead.sh — the fit of hvio's one DiskSim-path
# constant, `DIXTRAC_SEEK_OVERHEAD_MS` (crates/hvio-device/src/disksim/load.rs),
# and its leave-one-out check (not part of `make test`; docs/hdd-model.md,
# "The DIXtrac seek-overhead correction").
#
# For every c of the grid (0 to MAX ms by STEP) it runs
# `hvio validate-disk --all DATA --seek-overhead c` and prints each disk's
# demerit as % of its measured mean. The disks fitted on are those the
# correction applies to (a DIXtrac-extracted seek table; hvio names them
# under its table). Then:
#   fitted c        the c with the lowest sum of their % (ties: the smaller c)
#   leave-one-out   for each of them, the c with the lowest sum of the
#                   others' %, and this disk's % at that c: its result with
#                   nothing tuned on it.
#
# Usage: bench/disksim-seek-overhead.sh [--data DIR] [--hvio BIN] [--step MS] [--max MS]
set -euo pipefail
cd "$(dirname "$0")/.."

DATA=../shared/data/hdd-validation
HVIO=target/release/hvio
STEP=0.05
MAX=1.0
while [ $# -gt 0 ]; do
  case "$1" in
    --data) DATA=$2; shift 2 ;;
    --hvio) HVIO=$2; shift 2 ;;
    --step) STEP=$2; shift 2 ;;
    --max) MAX=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "disksim-seek-overhead.sh: unknown argument \`$1\` (see --help)" >&2; exit 2 ;;
  esac
done
for v in "$STEP" "$MAX"; do
  [[ "$v" =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "disksim-seek-overhead.sh: \`$v\`: expected milliseconds, e.g. 0.05" >&2; exit 2; }
done
[ -d "$DATA" ] || { echo "disksim-seek-overhead.sh: no folder $DATA" >&2; exit 1; }
[ -x "$HVIO" ] || { echo "disksim-seek-overhead.sh: no hvio binary at $HVIO (make release, or --hvio BIN)" >&2; exit 1; }

ROWS=$(mktemp /tmp/hvio-seek-overhead.XXXXXX)
trap 'rm -f "$ROWS"' EXIT
for c in $(LC_ALL=C seq -f %.2f 0 "$STEP" "$MAX"); do
  "$HVIO" validate-disk --all "$DATA" --seek-overhead "$c" |
    awk -v c="$c" '
      NR == 1 { next }
      /^DIXtrac seek overhead/ { sub(/.*miss overheads: /, ""); sub(/ \(--as-described.*/, ""); n = split($0, d, ", "); for (i = 1; i <= n; i++) print c, "fitted", d[i]; next }
      { print c, "row", $1, $5 }' >> "$ROWS"
done

awk '
  $2 == "fitted" { fit[$3] = 1; next }
  $2 == "row" { pct[$1, $3] = $4; if (!($1 in seen)) { seen[$1] = 1; cs[++nc] = $1 }; if (!($3 in known)) { known[$3] = 1; ds[++nd] = $3 } }
  END {
    for (j = 1; j <= nd; j++) if (ds[j] in fit) fd[++nf] = ds[j]
    if (nf == 0) { print "no disk with a DIXtrac-extracted seek table in the folder" > "/dev/stderr"; exit 1 }
    printf "%-6s", "c ms"
    for (j = 1; j <= nd; j++) printf " %10s", ds[j] ((ds[j] in fit) ? "*" : "")
    printf " %10s\n", "sum*"
    best = ""
    for (i = 1; i <= nc; i++) {
      c = cs[i]; s = 0
      printf "%-6s", c
      for (j = 1; j <= nd; j++) printf " %10.2f", pct[c, ds[j]]
      for (j = 1; j <= nf; j++) s += pct[c, fd[j]]
      printf " %10.2f\n", s
      if (best == "" || s < bs - 1e-9) { best = c; bs = s }
    }
    printf "(%% of the measured mean; * fitted on: a DIXtrac-extracted seek table)\n"
    printf "fitted c: %s ms (sum of the %d disks %.2f)\n", best, nf, bs
    printf "leave-one-out:\n%-12s %12s %16s %12s\n", "disk", "as described", "c on the others", "at that c"
    for (k = 1; k <= nf; k++) {
      x = fd[k]; b = ""
      for (i = 1; i <= nc; i++) {
        c = cs[i]; s = 0
        for (j = 1; j <= nf; j++) if (fd[j] != x) s += pct[c, fd[j]]
        if (b == "" || s < bb - 1e-9) { b = c; bb = s }
      }
      printf "%-12s %11.2f%% %13s ms %11.2f%%\n", x, pct[cs[1], x], b, pct[b, x]
    }
  }' "$ROWS"
