#!/usr/bin/env bash
# bench/serve-latency.sh — where an NBD request's time goes: hvio serve (noop,
# io_uring engine) against qemu-nbd --cache=none --aio=io_uring on the same
# backing file, fio's nbd engine over a unix socket, 4 KiB random I/O.
#
# For every run it prints IOPS, fio's completion latency (mean, p50, p99),
# and per request: the server's voluntary and involuntary context switches
# (all its threads, /proc/PID/task/*/status), its CPU time (user + system)
# and fio's context switches; for hvio also its own arrival-to-completion
# latency (p50/p99 from the control API), so the time a request spends
# outside the server can be read off. Runs alternate between the servers.
# Not part of `make test`. Needs fio, qemu-nbd, curl (bench/serve.sh installs them).
# Usage: [HVIO_BIN=PATH] bench/serve-latency.sh [seconds per run, default 5] [rounds, default 3] [rw, default randread] [iodepths, default "32 1"]
set -euo pipefail
cd "$(dirname "$0")/.."
RUNTIME=${1:-5}
ROUNDS=${2:-3}
RW=${3:-randread}
DEPTHS=${4:-32 1}
SIZE_MB=1024

# The hvio of `make release` (profile-guided), or HVIO_BIN (an A/B of two builds).
if [ -z "${HVIO_BIN:-}" ]; then bash scripts/release-build.sh; fi
HVIO=${HVIO_BIN:-$PWD/target/release/hvio}
W=$(mktemp -d /tmp/hvio-lat.XXXXXX)
P=
cleanup() { [ -n "$P" ] && kill "$P" 2>/dev/null; rm -rf "$W"; }
trap cleanup EXIT
fallocate -l ${SIZE_MB}M "$W/disk.img"
dd if=/dev/urandom of="$W/disk.img" bs=1M count=$SIZE_MB conv=notrunc status=none
. bench/hvio-conf.sh
hvio_conf noop

# ctxsw -> "voluntary nonvoluntary" summed over the server's threads
ctxsw() {
  local v=0 n=0 t
  for t in /proc/$P/task/*; do
    v=$((v + $(awk '/^voluntary_ctxt_switches/{print $2}' "$t/status")))
    n=$((n + $(awk '/^nonvoluntary_ctxt_switches/{print $2}' "$t/status")))
  done
  echo "$v $n"
}

run() { # server iodepth
  local s=$1 qd=$2 sock uri c0 c1 t0 t1 srv=""
  if [ "$s" = qemu-nbd ]; then
    sock=$W/qemu.sock; uri="nbd+unix:///?socket=$sock"
    qemu-nbd --cache=none --aio=io_uring --shared=8 --persistent -f raw -k "$sock" "$W/disk.img" &
  else
    sock=$W/hvio.sock; uri="nbd+unix:///vm1?socket=$sock"
    $HVIO serve --log-level warn "$W/host.toml" &
  fi
  P=$!
  wait_sock "$sock"
  sleep 0.2
  c0=$(ctxsw); t0=$(awk '{print $14+$15}' "/proc/$P/stat")
  fio --name=l --rw="$RW" --bs=4k --iodepth="$qd" --time_based --runtime="$RUNTIME" \
    --ioengine=nbd --uri="$uri" --output-format=json > "$W/out.json" 2>/dev/null
  c1=$(ctxsw); t1=$(awk '{print $14+$15}' "/proc/$P/stat")
  if [ "$s" = hvio ]; then
    srv=$(curl -s --unix-socket "$W/control.sock" http://x/vms)
  fi
  kill -TERM "$P"; wait "$P" 2>/dev/null || true; P=
  rm -f "$sock"
  python3 bench/latency-line.py "$OUT" "$s" "$qd" "$c0" "$c1" "$t0" "$t1" "$srv"
}

export OUT=$W/out.json
echo "== NBD request latency, 4 KiB $RW, fio nbd engine, unix socket, ${RUNTIME}s runs, $ROUNDS rounds; load: $(cut -d' ' -f1-3 /proc/loadavg) =="
for qd in $DEPTHS; do
  for round in $(seq "$ROUNDS"); do
    if [ $((round % 2)) = 1 ]; then order="qemu-nbd hvio"; else order="hvio qemu-nbd"; fi
    for s in $order; do run "$s" "$qd"; done
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
