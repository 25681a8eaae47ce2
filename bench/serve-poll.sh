#!/usr/bin/env bash
# bench/serve-poll.sh — busy-polling A/B on the NBD export: two hvio servers
# (noop, io_uring engine; poll_max_us = 0 and = POLL_MAX_US) and qemu-nbd
# --cache=none --aio=io_uring, all running on the same backing file and
# measured in turn (order rotating every round), fio's nbd engine over a
# unix socket, 4 KiB random I/O.
#
# Each run prints IOPS, the server's CPU µs per request and the other load
# during it: CPUs busy with niced work (/proc/stat), i.e. other people's
# background jobs on a shared machine (0 = nobody else, 1 = one CPU
# taken), so quiet and loaded rounds can be told apart. At the end, the
# polling server's counters (control API). Not part of `make test`.
# Needs fio, qemu-nbd, curl (bench/serve.sh installs them).
# Usage: [HVIO_BIN=PATH] [POLL_MAX_US=512] [IODEPTH=32] bench/serve-poll.sh [seconds per run, default 5] [rounds, default 6] [rw, default randread]
set -euo pipefail
cd "$(dirname "$0")/.."
RUNTIME=${1:-5}
ROUNDS=${2:-6}
RW=${3:-randread}
IODEPTH=${IODEPTH:-32}
POLL_MAX_US=${POLL_MAX_US:-512}
SIZE_MB=2048

# The hvio of `make release` (profile-guided), or HVIO_BIN (an A/B of two builds).
if [ -z "${HVIO_BIN:-}" ]; then bash scripts/release-build.sh; fi
HVIO=${HVIO_BIN:-$PWD/target/release/hvio}
BENCH_TAG=hvio-poll
. bench/cleanup.sh
fallocate -l ${SIZE_MB}M "$W/disk.img"
dd if=/dev/urandom of="$W/disk.img" bs=1M count=$SIZE_MB conv=notrunc status=none
. bench/hvio-conf.sh

cputicks() { awk '{print $14+$15}' "/proc/$1/stat"; }
nicetime() { awk '/^cpu /{print $3}' /proc/stat; }
run() { # uri pid -> "IOPS CPU-µs-per-request n=other-load"
  local n0 c0 i
  n0=$(nicetime); c0=$(cputicks "$2")
  i=$(fio --name=b --rw="$RW" --bs=4k --iodepth="$IODEPTH" --time_based --runtime="$RUNTIME" --ramp_time=1 \
      --output-format=json --ioengine=nbd --uri="$1" 2>/dev/null |
    python3 -c 'import json,sys; t=sys.stdin.read(); j=json.loads(t[t.index("{"):])["jobs"][0]; print(int(j["read"]["iops"]+j["write"]["iops"]))')
  python3 -c "import os,sys; hz=os.sysconf('SC_CLK_TCK'); i=int(sys.argv[1]); print(i, round(int(sys.argv[2])*1e6/hz/max(1,i*($RUNTIME+1)),1), 'n=%.2f' % (int(sys.argv[3])/hz/($RUNTIME+1)))" \
    "$i" "$(( $(cputicks "$2") - c0 ))" "$(( $(nicetime) - n0 ))"
}

declare -A PID
for l in off on; do
  hvio_conf noop "" "poll_max_us = $([ $l = on ] && echo "$POLL_MAX_US" || echo 0)"
  sed -i "s|hvio.sock|$l.sock|; s|control.sock|$l-ctl.sock|" "$W/host.toml"
  mv "$W/host.toml" "$W/$l.toml"
  $HVIO serve --log-level warn "$W/$l.toml" &
  PID[$l]=$!; PIDS+=("$!")
  wait_sock "$W/$l.sock"
done
qemu-nbd --cache=none --aio=io_uring --shared=8 --persistent -f raw -k "$W/qemu.sock" "$W/disk.img" &
PID[qemu]=$!; PIDS+=("$!")
wait_sock "$W/qemu.sock"

echo "== $RW, iodepth $IODEPTH, ${RUNTIME}s runs: IOPS, server CPU µs/request, other load (niced CPUs); on = poll_max_us $POLL_MAX_US =="
LABELS=(off on qemu)
for r in $(seq "$ROUNDS"); do
  line="round $r (load $(cut -d' ' -f1 /proc/loadavg)):"
  for k in 0 1 2; do
    l=${LABELS[$(( (k + r - 1) % 3 ))]}
    if [ "$l" = qemu ]; then u="nbd+unix:///?socket=$W/qemu.sock"; else u="nbd+unix:///vm1?socket=$W/$l.sock"; fi
    line="$line | $l $(run "$u" "${PID[$l]}")"
  done
  echo "$line"
done
curl -s --unix-socket "$W/on-ctl.sock" http://x/status |
  python3 -c 'import json,sys; print("polling server: {poll_hits} of {waits} waits found work by polling, {sleeps} slept, {poll_s:.1f} s spinning, window {window_us:g} us".format(**json.load(sys.stdin)["poll"]))'
