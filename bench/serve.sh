#!/usr/bin/env bash
# bench/serve.sh — hvio serve against its peers on this machine, same run,
# same backing file (not part of `make test`; takes ~4 minutes).
#
#  1. NBD: 4 KiB random read and random write at iodepth 32, fio's nbd
#     engine over a unix socket: hvio serve (noop with the default
#     busy-polling and with poll_max_us = 0 (hvio-noop-nopoll), then cfq and
#     pregather if registered) vs qemu-nbd --cache=none --aio=io_uring; the
#     idle hvio server's CPU over 5 s.
#  2. FUSE path: ext4 on `losetup --direct-io=on` over the export, fio libaio
#     direct 4 KiB randread/randwrite at iodepth 32 on a file in it:
#     hvio's FUSE export vs nbdkit (file plugin) -> nbdfuse; hvio with the
#     peer's caching policy (buffered backing file) and with O_DIRECT.
#
# Prints absolute IOPS and the ratios. Needs root (FUSE, loop, mount).
# The machine is shared and noisy: every configuration runs ROUNDS times,
# interleaved with its peers, and the median is reported. Beside IOPS it
# prints the servers' CPU time per request (user + system time of the server
# processes over the run / requests), which other load disturbs much less.
# Usage: [HVIO_BIN=PATH] [BENCH_ONLY=nbd|fuse] [SIZE_MB=2048] bench/serve.sh [seconds per run, default 8] [rounds, default 3]
set -euo pipefail
cd "$(dirname "$0")/.."
RUNTIME=${1:-8}
ROUNDS=${2:-3}
SIZE_MB=${SIZE_MB:-2048}   # backing files (FUSE: three of them, fallocated)

need() { command -v "$1" >/dev/null 2>&1; }
if ! need fio || ! need qemu-nbd || ! need nbdkit || ! need nbdfuse || ! need curl; then
  echo "installing fio qemu-utils nbdkit nbdfuse curl ..."
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq fio qemu-utils nbdkit nbdfuse libnbd-bin curl >/dev/null
fi

# The hvio of `make release` (profile-guided), or HVIO_BIN (an A/B of two builds).
if [ -z "${HVIO_BIN:-}" ]; then bash scripts/release-build.sh; fi
HVIO=${HVIO_BIN:-$PWD/target/release/hvio}
SCHEDS=$($HVIO schedulers 2>/dev/null | awk '/ — /{print $1}' || true)

BENCH_TAG=hvio-bench
. bench/cleanup.sh
FUSE_DIRS=("$W"/fuse-cached "$W"/fuse-direct "$W"/nbdfuse)

RAMP=2
# cputicks PID... -> user+system clock ticks the processes used so far
cputicks() { local t=0 p; for p in "$@"; do t=$((t + $(awk '{print $14+$15}' "/proc/$p/stat" 2>/dev/null || echo 0))); done; echo $t; }
# CPU time spent at a nice level above 0 so far (ticks, all CPUs): other
# people's background jobs on a shared machine; the benchmark runs at 0.
nicetime() { awk '/^cpu /{print $3}' /proc/stat; }
# iops "SERVER PIDS" RW [fio args...] -> prints "IOPS CPU-microseconds-per-request other-load"
# (other-load: CPUs busy with niced work during the run, 0 = nobody else, 1 = one CPU taken)
iops() {
  local pids=$1 rw=$2; shift 2
  local c0 n0 out
  c0=$(cputicks $pids); n0=$(nicetime)
  out=$(fio --name=b --rw="$rw" --bs=4k --iodepth=32 --time_based --runtime="$RUNTIME" \
      --ramp_time=$RAMP --output-format=json "$@" 2>/dev/null |
    python3 -c 'import json,sys; t=sys.stdin.read(); j=json.loads(t[t.index("{"):])["jobs"][0]; print(int(j["read"]["iops"]+j["write"]["iops"]))')
  # CPU over ramp + run, requests estimated at the measured rate over both.
  python3 -c "import os,sys; i=int(sys.argv[1]); t=int(sys.argv[2]); hz=os.sysconf('SC_CLK_TCK'); print(i, round(t*1e6/hz/max(1,i*($RUNTIME+$RAMP)),1), round(int(sys.argv[3])/hz/($RUNTIME+$RAMP),2))" "$out" "$(( $(cputicks $pids) - c0 ))" "$(( $(nicetime) - n0 ))"
}

. bench/hvio-conf.sh

start_hvio() { # scheduler [extra tables] [extra [store] lines]
  hvio_conf "$1" "${2:-}" "${3:-}"
  $HVIO serve --log-level warn "$W/host.toml" &
  HPID=$!
  PIDS+=("$HPID")
  wait_sock "$W/hvio.sock"
}
stop_hvio() { kill -TERM "$HPID"; wait "$HPID" || true; }

declare -A R   # label.rw -> space-separated IOPS of every round
declare -A C   # label.rw -> space-separated CPU µs per request of every round
declare -A N   # label.rw -> space-separated other load (niced CPUs) of every round
add() { local r; read -r -a r <<<"$2"; R[$1]="${R[$1]:-} ${r[0]}"; C[$1]="${C[$1]:-} ${r[1]}"; N[$1]="${N[$1]:-} ${r[2]}"; }
median() { python3 -c "import statistics,sys; print(statistics.median(float(x) for x in sys.argv[1:]))" ${R[$1]}; }
cmedian() { python3 -c "import statistics,sys; print(statistics.median(float(x) for x in sys.argv[1:]))" ${C[$1]}; }
nbd_pair() { # label uri server-pids
  add "$1.read" "$(iops "$3" randread --ioengine=nbd --uri="$2")"
  add "$1.write" "$(iops "$3" randwrite --ioengine=nbd --uri="$2")"
}
show() { # label
  printf '  %-22s randread %7.0f IOPS %5.1f µs/req   randwrite %7.0f IOPS %5.1f µs/req\n' "$1" \
    "$(median "$1.read")" "$(cmedian "$1.read")" "$(median "$1.write")" "$(cmedian "$1.write")"
  printf '  %-22s   rounds: read%s; write%s; µs/req read%s; write%s\n' "" "${R[$1.read]}" "${R[$1.write]}" "${C[$1.read]}" "${C[$1.write]}"
  printf '  %-22s   other load (niced CPUs) read%s; write%s\n' "" "${N[$1.read]}" "${N[$1.write]}"
}
# The active scheduler's counters (control API), e.g. Pregather's waits.
counters() { curl -s --unix-socket "$W/control.sock" http://x/status |
  python3 -c 'import json,sys; print(" ".join(f"{k}={v:g}" for k,v in json.load(sys.stdin)["counters"] if not "." in k))'; }
# The engine's busy-polling counters (control API).
pollstat() { curl -s --unix-socket "$W/control.sock" http://x/status |
  python3 -c 'import json,sys; print("window {window_us:g} of max {max_us:g} us; {poll_hits} of {waits} waits found work by polling, {sleeps} slept; {poll_s:.2f} s spinning".format(**json.load(sys.stdin)["poll"]))'; }

ratio() { python3 -c "print(f'{$(median "$1")/$(median "$2"):.2f}')"; }
cratio() { python3 -c "print(f'{$(cmedian "$1")/$(cmedian "$2"):.2f}')"; }
nbd_section() {
# Write the whole file once so reads hit allocated blocks for every server.
fallocate -l ${SIZE_MB}M "$W/disk.img"
dd if=/dev/urandom of="$W/disk.img" bs=1M count=$SIZE_MB conv=notrunc status=none
echo "== NBD, 4 KiB random, iodepth 32, fio nbd engine, unix socket, ${RUNTIME}s per run, median of $ROUNDS =="
SCHED_RUN=(noop)
for s in cfq pregather; do
  if echo "$SCHEDS" | grep -qx "$s"; then SCHED_RUN+=("$s"); fi
done
# Each round starts with a different configuration (the order rotates), so
# none always runs right after another's writes.
CONFIGS=(qemu-nbd noop-nopoll "${SCHED_RUN[@]}")
for round in $(seq "$ROUNDS"); do
  n=${#CONFIGS[@]}
  for k in $(seq 0 $((n - 1))); do
    s=${CONFIGS[$(( (k + round - 1) % n ))]}
    if [ "$s" = qemu-nbd ]; then
      qemu-nbd --cache=none --aio=io_uring --shared=8 --persistent -f raw -k "$W/qemu.sock" "$W/disk.img" &
      QPID=$!; PIDS+=("$QPID")
      wait_sock "$W/qemu.sock"
      nbd_pair qemu-nbd "nbd+unix:///?socket=$W/qemu.sock" "$QPID"
      kill "$QPID"; wait "$QPID" 2>/dev/null || true
      continue
    fi
    if [ "$s" = noop-nopoll ]; then
      start_hvio noop "" "poll_max_us = 0"
    else
      start_hvio "$s"
    fi
    nbd_pair "hvio-$s" "nbd+unix:///vm1?socket=$W/hvio.sock" "$HPID"
    case $s in
      noop) echo "  round $round, noop polling: $(pollstat)" ;;
      noop-nopoll) ;;
      *) echo "  round $round, $s counters: $(counters)" ;;
    esac
    if [ "$round" = 1 ] && [ "$s" = noop ]; then
      # Idle cost: no client for 5 s (clock ticks of user + system time).
      sleep 1; c0=$(cputicks "$HPID"); sleep 5
      echo "  idle hvio (polling on, no client): $(( $(cputicks "$HPID") - c0 )) ticks of CPU in 5 s ($(getconf CLK_TCK) ticks = 1 s)"
    fi
    stop_hvio
  done
done
show qemu-nbd
show hvio-noop-nopoll
for s in "${SCHED_RUN[@]}"; do show "hvio-$s"; done

echo
echo "ratios (NBD, medians):"
for rw in read write; do
  echo "  hvio-noop / qemu-nbd  rand$rw: $(ratio "hvio-noop.$rw" "qemu-nbd.$rw")x IOPS   (goal >= 1.2; CPU per request $(cratio "hvio-noop.$rw" "qemu-nbd.$rw")x)"
  echo "  hvio-noop-nopoll / qemu-nbd  rand$rw: $(ratio "hvio-noop-nopoll.$rw" "qemu-nbd.$rw")x IOPS   (busy-polling off; CPU per request $(cratio "hvio-noop-nopoll.$rw" "qemu-nbd.$rw")x)"
  for s in "${SCHED_RUN[@]:1}"; do
    echo "  hvio-$s / hvio-noop  rand$rw: $(ratio "hvio-$s.$rw" "hvio-noop.$rw")x IOPS   (goal >= 0.90; CPU per request $(cratio "hvio-$s.$rw" "hvio-noop.$rw")x)"
  done
done

}

fuse_section() {
echo
echo "== FUSE path: ext4 on loop(direct-io=on) on the export, fio libaio direct 4 KiB, iodepth 32, median of $ROUNDS =="
fs_round() { # label name server-pids
  add "$1.read" "$(iops "$3" randread --filename="$W/fs-$2/f" --size=512M --ioengine=libaio --direct=1)"
  add "$1.write" "$(iops "$3" randwrite --filename="$W/fs-$2/f" --size=512M --ioengine=libaio --direct=1)"
}

# nbdkit 1.32's file plugin reads and writes through the host page cache
# (it has no O_DIRECT), so the like-for-like hvio export is `direct = false`
# (hvio-fuse); hvio-fuse-direct is the stricter O_DIRECT configuration the
# NBD comparison with qemu-nbd --cache=none uses. All three are mounted side
# by side over their own backing files and their rounds interleaved.
fuse_conf() { # name direct
  cat > "$W/fuse-$1.toml" <<EOF
[store]
path = "$W/disk-$1.img"
create = false
depth = 32
engine = "io_uring"
direct = $2
rotational = false
[scheduler]
name = "noop"
[fuse]
mountpoint = "$W/fuse-$1"
[[vm]]
name = "vm1"
size = "${SIZE_MB}MiB"
EOF
}
declare -A FPID
for name in cached direct; do
  fallocate -l ${SIZE_MB}M "$W/disk-$name.img"   # as disk2.img below: allocated, unwritten
  fuse_conf "$name" "$([ "$name" = direct ] && echo true || echo false)"
  $HVIO serve --log-level warn "$W/fuse-$name.toml" &
  FPID[$name]=$!; PIDS+=("$!")
done
fallocate -l ${SIZE_MB}M "$W/disk2.img"
nbdkit -U "$W/kit.sock" --exit-with-parent file "$W/disk2.img" &
KPID=$!; PIDS+=("$KPID")
wait_sock "$W/kit.sock"
mkdir -p "$W/nbdfuse"
nbdfuse "$W/nbdfuse/disk" --unix "$W/kit.sock" &
NFPID=$!; PIDS+=("$NFPID")
fs_setup kit "$W/nbdfuse/disk"
fs_setup cached "$W/fuse-cached/vm1"
fs_setup direct "$W/fuse-direct/vm1"
for round in $(seq "$ROUNDS"); do
  for k in 0 1 2; do   # rotating order, as above
    case $(( (k + round - 1) % 3 )) in
      0) fs_round nbdkit-nbdfuse kit "$KPID $NFPID" ;;
      1) fs_round hvio-fuse cached "${FPID[cached]}" ;;
      2) fs_round hvio-fuse-direct direct "${FPID[direct]}" ;;
    esac
  done
done
for m in "${MOUNTS[@]}"; do umount "$m"; done
for l in "${LOOPS[@]}"; do losetup -d "$l"; done
MOUNTS=(); LOOPS=()
for name in cached direct; do kill -TERM "${FPID[$name]}"; wait "${FPID[$name]}" || true; done
umount "$W/nbdfuse" 2>/dev/null || true
show nbdkit-nbdfuse
show hvio-fuse
show hvio-fuse-direct

echo
echo "ratios (FUSE path, medians):"
for rw in read write; do
  echo "  hvio-fuse / nbdkit-nbdfuse  rand$rw: $(ratio "hvio-fuse.$rw" "nbdkit-nbdfuse.$rw")x IOPS   (goal >= 1.5; CPU per request $(cratio "hvio-fuse.$rw" "nbdkit-nbdfuse.$rw")x)"
  echo "  hvio-fuse-direct / nbdkit-nbdfuse  rand$rw: $(ratio "hvio-fuse-direct.$rw" "nbdkit-nbdfuse.$rw")x IOPS   (O_DIRECT against the page cache; CPU per request $(cratio "hvio-fuse-direct.$rw" "nbdkit-nbdfuse.$rw")x)"
done
}

case "${BENCH_ONLY:-}" in
  nbd) nbd_section ;;
  fuse) fuse_section ;;
  *) nbd_section; fuse_section ;;
esac
