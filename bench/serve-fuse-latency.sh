#!/usr/bin/env bash
# bench/serve-fuse-latency.sh — where a FUSE-path request's time goes: ext4 on
# `losetup --direct-io=on` over hvio's FUSE export file (noop, io_uring,
# `direct = false` like the peer) against nbdkit (file plugin) -> nbdfuse,
# fio libaio direct 4 KiB random I/O on a 512 MiB file in each ext4.
#
# For every run it prints IOPS, fio's completion latency (mean, p50, p99) and
# per request: the server's voluntary and involuntary context switches (all
# threads of its processes, including io_uring's iou-wrk workers), its CPU time
# (user + system) and fio's context switches; for hvio also its own
# arrival-to-completion latency (control API) and the voluntary context
# switches per request of each of its thread kinds. Runs alternate between the
# servers. The companion of bench/serve-latency.sh (NBD). Not part of
# `make test`. Needs root, fio, nbdkit, nbdfuse, curl (bench/serve.sh installs them).
# HVIO_BIN=PATH runs another hvio binary (A/B of two builds); HVIO_DIRECT=true
# exports with O_DIRECT. PERF=FILE records hvio's threads with `perf record -g` during its runs.
# Usage: bench/serve-fuse-latency.sh [seconds per run, default 5] [rounds, default 3] [rw, default randwrite] [iodepths, default "32"]
set -euo pipefail
cd "$(dirname "$0")/.."
RUNTIME=${1:-5}
ROUNDS=${2:-3}
RW=${3:-randwrite}
DEPTHS=${4:-32}
SIZE_MB=1024
HVIO_DIRECT=${HVIO_DIRECT:-false}

# The hvio of `make release` (profile-guided), or HVIO_BIN (an A/B of two builds).
if [ -z "${HVIO_BIN:-}" ]; then bash scripts/release-build.sh; fi
HVIO=${HVIO_BIN:-$PWD/target/release/hvio}
BENCH_TAG=hvio-flat
. bench/cleanup.sh
FUSE_DIRS=("$W"/fuse "$W"/nbdfuse)

fallocate -l ${SIZE_MB}M "$W/disk-hvio.img"
fallocate -l ${SIZE_MB}M "$W/disk-peer.img"
cat > "$W/host.toml" <<EOF
[store]
path = "$W/disk-hvio.img"
create = false
depth = 32
engine = "io_uring"
direct = $HVIO_DIRECT
rotational = false
[scheduler]
name = "noop"
[fuse]
mountpoint = "$W/fuse"
[control]
unix = "$W/control.sock"
[[vm]]
name = "vm1"
size = "${SIZE_MB}MiB"
EOF
$HVIO serve --log-level warn "$W/host.toml" &
HPID=$!; PIDS+=("$HPID")
nbdkit -U "$W/kit.sock" --exit-with-parent file "$W/disk-peer.img" &
KPID=$!; PIDS+=("$KPID")
wait_for "$W/kit.sock"
mkdir -p "$W/nbdfuse"
nbdfuse "$W/nbdfuse/disk" --unix "$W/kit.sock" &
NFPID=$!; PIDS+=("$NFPID")
fs_setup hvio "$W/fuse/vm1"
fs_setup peer "$W/nbdfuse/disk"

# ctxsw PIDS... -> "voluntary nonvoluntary" summed over every thread
ctxsw() {
  local p t
  for p in "$@"; do for t in /proc/$p/task/*; do cat "$t/status"; done; done 2>/dev/null |
    awk '/^voluntary_ctxt_switches/{v+=$2} /^nonvoluntary_ctxt_switches/{n+=$2} END{print v+0, n+0}'
}
# threads PID -> "kind:voluntary ..." per thread kind (digits stripped from the name)
threads() {
  local t
  for t in /proc/$1/task/*; do
    printf '%s %s\n' "$(tr -d '0-9 ' < "$t/comm")" "$(awk '/^voluntary_ctxt_switches/{print $2}' "$t/status")"
  done 2>/dev/null | awk '{v[$1]+=$2} END{for (k in v) printf "%s:%d ", k, v[k]}'
}
cpu() { local p t=0; for p in "$@"; do t=$((t + $(awk '{print $14+$15}' "/proc/$p/stat"))); done; echo $t; }

run() { # server iodepth
  local s=$1 qd=$2 pids c0 c1 t0 t1 th0="" th1="" srv=""
  if [ "$s" = hvio ]; then pids=$HPID; else pids="$KPID $NFPID"; fi
  c0=$(ctxsw $pids); t0=$(cpu $pids)
  [ "$s" = hvio ] && th0=$(threads "$HPID")
  if [ "$s" = hvio ] && [ -n "${PERF:-}" ]; then
    perf record -q -g -p "$HPID" -o "$PERF" -- sleep "$RUNTIME" >/dev/null 2>&1 &
  fi
  fio --name=l --rw="$RW" --bs=4k --iodepth="$qd" --time_based --runtime="$RUNTIME" \
    --filename="$W/fs-$s/f" --size=512M --ioengine=libaio --direct=1 --output-format=json > "$W/out.json" 2>/dev/null
  c1=$(ctxsw $pids); t1=$(cpu $pids)
  if [ "$s" = hvio ]; then
    th1=$(threads "$HPID")
    srv=$(curl -s --unix-socket "$W/control.sock" http://x/vms)
  fi
  python3 bench/latency-line.py "$OUT" "$s" "$qd" "$c0" "$c1" "$t0" "$t1" "$srv" "$th0" "$th1"
}

export OUT=$W/out.json
echo "== FUSE path request cost, 4 KiB $RW, ext4 on loop(direct-io) on the export, fio libaio direct, ${RUNTIME}s runs, $ROUNDS rounds, hvio direct = $HVIO_DIRECT; load: $(cut -d' ' -f1-3 /proc/loadavg) =="
for qd in $DEPTHS; do
  for round in $(seq "$ROUNDS"); do
    if [ $((round % 2)) = 1 ]; then order="peer hvio"; else order="hvio peer"; fi
    for s in $order; do run "$s" "$qd"; done
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
