#!/usr/bin/env bash
# bench/disksim-speed.sh — hvio's HDD replay against DiskSim 4.0's on the
# same validation trace, in one run on this machine (not part of `make test`;
# the DiskSim build takes 1–3 minutes on a busy 2-core machine).
#
# Builds DiskSim 4.0 from the source tree given (a copy of it, in a scratch
# folder: the tree itself is not touched), with the fixes it needs on a
# current 64-bit gcc (listed in bench/disksim-build.sh).
# Then replays DISK.trace on DISK.parv (default ibm18es; --disk again for
# more disks, --disk all for every NAME.parv of --data with a NAME.trace) in
# both, ROUNDS times each, interleaved, and prints the best rate of each and
# the ratio, and with several disks a table of them all. Both timed regions
# cover the same work: reading the trace and replaying it. DiskSim's rate is
# of its run's time minus that of the same run on a one-request trace
# (parameter loading, set-up, output); DiskSim reads the trace as it
# replays. hvio's is `hvio validate-disk --bench`'s replay speed (wall
# clock, best of its own replays, each reading and parsing the trace
# file), and its CPU rate that of its 101 replays: the process's CPU time
# minus that of the same command on the one-request trace (start-up,
# description loading, output), as for DiskSim. The machine is shared: the load
# average is printed before and after, and user + system CPU time per
# request is printed beside the wall clock rates, which other load disturbs
# much less.
#
# Usage: bench/disksim-speed.sh --disksim-src DIR [--disk NAME|all]...
#          [--data DIR] [--hvio BIN] [--rounds N]
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/disksim-build.sh

SRC=""
DISKS=()
DATA=../shared/data/hdd-validation
HVIO=target/release/hvio
ROUNDS=5
while [ $# -gt 0 ]; do
  case "$1" in
    --disksim-src) SRC=$2; shift 2 ;;
    --disk) DISKS+=("$2"); shift 2 ;;
    --data) DATA=$2; shift 2 ;;
    --hvio) HVIO=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "disksim-speed.sh: unknown argument \`$1\` (see --help)" >&2; exit 2 ;;
  esac
done
die() { echo "disksim-speed.sh: $*" >&2; exit 1; }
[ -n "$SRC" ] || die "--disksim-src DIR is required (a DiskSim 4.0 source tree)"
[ ${#DISKS[@]} -gt 0 ] || DISKS=(ibm18es)
if [ "${DISKS[*]}" = all ]; then
  DISKS=()
  for f in "$DATA"/*.parv; do
    n=$(basename "$f" .parv)
    [ -f "$DATA/$n.trace" ] && DISKS+=("$n")
  done
  [ ${#DISKS[@]} -gt 0 ] || die "$DATA: no NAME.parv with a NAME.trace"
fi
for DISK in "${DISKS[@]}"; do
  [ -f "$DATA/$DISK.parv" ] || die "$DATA/$DISK.parv: no such disk description"
  [ -f "$DATA/$DISK.trace" ] || die "$DATA/$DISK.trace: no such trace"
done
[ -x "$HVIO" ] || die "$HVIO: not built (make release)"
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || die "--rounds $ROUNDS: expected a whole number ≥ 1"

WORK=$(mktemp -d /tmp/hvio-disksim-speed.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

# --- build DiskSim 4.0 ----------------------------------------------------
echo "building DiskSim 4.0 from $SRC ..."
disksim_build "$SRC" "$WORK"
RUN=$WORK/run
disksim_run_dir "$DATA" "$SRC" "$RUN"

# Wall, user and system seconds of one command, as "wall cpu".
timed() {
  local TIMEFORMAT='%R %U %S'
  { time "$@" >/dev/null 2>&1; } 2>&1 | awk '{printf "%s %.3f\n", $1, $2 + $3}'
}

# --- interleaved rounds, one disk at a time -----------------------------------
bench_disk() {
  local DISK=$1
  head -1 "$RUN/$DISK.trace" >"$RUN/one.trace"
  local REQUESTS
  REQUESTS=$(grep -c . "$RUN/$DISK.trace")
  best_full=""; best_full_cpu=""; best_one=""; best_one_cpu=""; best_hvio=0; best_hvio_cpu=""; best_hvio_one_cpu=""
  for r in $(seq "$ROUNDS"); do
    (cd "$RUN" && timed "$DISKSIM" "$DISK.parv" full.outv validate "$DISK.trace" 0) >"$WORK/t"
    read -r w c <"$WORK/t"
    [ -s "$RUN/full.outv" ] || die "DiskSim wrote no output for $DISK"
    best_full=$(awk -v a="$w" -v b="${best_full:-1e9}" 'BEGIN{print (a<b)?a:b}')
    best_full_cpu=$(awk -v a="$c" -v b="${best_full_cpu:-1e9}" 'BEGIN{print (a<b)?a:b}')
    (cd "$RUN" && timed "$DISKSIM" "$DISK.parv" one.outv validate one.trace 0) >"$WORK/t"
    read -r w c <"$WORK/t"
    best_one=$(awk -v a="$w" -v b="${best_one:-1e9}" 'BEGIN{print (a<b)?a:b}')
    best_one_cpu=$(awk -v a="$c" -v b="${best_one_cpu:-1e9}" 'BEGIN{print (a<b)?a:b}')
    # hvio: 100 replays timed inside the process (best of them), plus the CPU
    # time of the whole process (101 replays: the first one too) and, as for
    # DiskSim, of the same command on the one-request trace.
    TIMEFORMAT='%R %U %S'
    { time "$HVIO" validate-disk "$RUN/$DISK.parv" "$RUN/$DISK.trace" --bench 100 >"$WORK/h" 2>/dev/null; } 2>"$WORK/t"
    rate=$(awk '/replay speed/ {print $3}' "$WORK/h")
    [ -n "$rate" ] || die "hvio printed no replay speed"
    best_hvio=$(awk -v a="$rate" -v b="$best_hvio" 'BEGIN{print (a>b)?a:b}')
    c=$(awk '{printf "%.5f", $2 + $3}' "$WORK/t")
    best_hvio_cpu=$(awk -v a="$c" -v b="${best_hvio_cpu:-1e9}" 'BEGIN{print (a<b)?a:b}')
    timed "$HVIO" validate-disk "$RUN/$DISK.parv" "$RUN/one.trace" >"$WORK/t"
    read -r w c <"$WORK/t"
    best_hvio_one_cpu=$(awk -v a="$c" -v b="${best_hvio_one_cpu:-1e9}" 'BEGIN{print (a<b)?a:b}')
  done

  ds_mean=$(awk -F: '/^IOdriver Physical access time average/ {gsub(/[ \t]/, "", $2); print $2}' "$RUN/full.outv")
  hv_mean=$(awk '/simulated mean service time/ {print $5}' "$WORK/h")
  awk -v n="$REQUESTS" -v disk="$DISK" -v rounds="$ROUNDS" \
    -v full="$best_full" -v one="$best_one" -v fullc="$best_full_cpu" -v onec="$best_one_cpu" \
    -v hv="$best_hvio" -v hvc="$best_hvio_cpu" -v hvonec="$best_hvio_one_cpu" -v dsm="$ds_mean" -v hvm="$hv_mean" -v summary="$WORK/summary" 'BEGIN {
    ds = n / (full - one); dsc = (fullc - onec > 0) ? n / (fullc - onec) : 0;
    hvcr = (hvc - hvonec > 0) ? 101 * n / (hvc - hvonec) : 0;
    printf "trace %s.trace: %d requests replayed closed-loop (best of %d rounds)\n", disk, n, rounds;
    printf "  DiskSim 4.0 simulated mean  %s ms, hvio %s ms\n", dsm, hvm;
    printf "  DiskSim 4.0   %10.0f requests/s wall clock (run %.3f s - set-up %.3f s)", ds, full, one;
    if (dsc > 0) printf ", %.0f requests/CPU-s", dsc; printf "\n";
    printf "  hvio          %10.0f requests/s wall clock", hv;
    if (hvcr > 0) printf ", %.0f requests/CPU-s (101 replays, each reading the trace: %.3f s - set-up %.3f s)", hvcr, hvc, hvonec; printf "\n";
    printf "  ratio         %10.1fx wall clock", hv / ds;
    if (dsc > 0 && hvcr > 0) printf ", %.1fx CPU", hvcr / dsc; printf "\n";
    row = sprintf("%-12s %8d %17.0f %14.0f %10s %9.1fx", disk, n, dsc, hvcr,
                  (dsc > 0 && hvcr > 0) ? sprintf("%.1fx", hvcr / dsc) : "-", hv / ds);
    print row >> summary;
  }'
}

for DISK in "${DISKS[@]}"; do
  bench_disk "$DISK"
done
echo "load average after:  $(cut -d' ' -f1-3 /proc/loadavg)"
if [ ${#DISKS[@]} -gt 1 ]; then
  printf '%-12s %8s %17s %14s %10s %10s\n' disk requests "DiskSim req/CPU-s" "hvio req/CPU-s" "CPU ratio" "wall ratio"
  cat "$WORK/summary"
fi
