#!/usr/bin/env bash
# bench/serve.sh — hvio serve against its peers on this machine, same run,
# same backing file (not part of `make test`; takes ~4 minutes).
#
#  1. NBD: 4 KiB random read and random write at iodepth 32, fio's nbd
#     engine over a unix socket: hvio serve (noop, then cfq and pregather if
#     registered) vs qemu-nbd --cache=none --aio=io_uring.
#  2. FUSE path: ext4 on `losetup --direct-io=on` over the export, fio libaio
#     direct 4 KiB randread/randwrite at iodepth 32 on a file in it:
#     hvio's FUSE export vs nbdkit (file plugin) -> nbdfuse.
#
# Prints absolute IOPS and the ratios. Needs root (FUSE, loop, mount).
# The machine is shared and noisy: every configuration runs ROUNDS times,
# interleaved with its peers, and the median is reported.
# Usage: bench/serve.sh [seconds per run, default 8] [rounds, default 3]
set -euo pipefail
cd "$(dirname "$0")/.."
RUNTIME=${1:-8}
ROUNDS=${2:-3}
SIZE_MB=2048

need() { command -v "$1" >/dev/null 2>&1; }
if ! need fio || ! need qemu-nbd || ! need nbdkit || ! need nbdfuse; then
  echo "installing fio qemu-utils nbdkit nbdfuse ..."
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq fio qemu-utils nbdkit nbdfuse libnbd-bin >/dev/null
fi

cargo build --release -q -p hvio-cli
HVIO=$PWD/target/release/hvio
SCHEDS=$($HVIO schedulers 2>/dev/null | awk '/ — /{print $1}' || true)

W=$(mktemp -d /tmp/hvio-bench.XXXXXX)
PIDS=()
LOOPS=()
MOUNTS=()
cleanup() {
  for m in "${MOUNTS[@]}"; do umount "$m" 2>/dev/null || true; done
  for l in "${LOOPS[@]}"; do losetup -d "$l" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  sleep 0.5
  for m in "$W"/fuse "$W"/nbdfuse; do umount "$m" 2>/dev/null || true; done
  rm -rf "$W"
}
trap cleanup EXIT

fallocate -l ${SIZE_MB}M "$W/disk.img"
# Write the whole file once so reads hit allocated blocks for every server.
dd if=/dev/urandom of="$W/disk.img" bs=1M count=$SIZE_MB conv=notrunc status=none

# iops JOBNAME RW [fio args...] -> prints the IOPS of the run
iops() {
  local rw=$1; shift
  fio --name=b --rw="$rw" --bs=4k --iodepth=32 --time_based --runtime="$RUNTIME" \
      --ramp_time=2 --output-format=json "$@" 2>/dev/null |
    python3 -c 'import json,sys; t=sys.stdin.read(); j=json.loads(t[t.index("{"):])["jobs"][0]; print(int(j["read"]["iops"]+j["write"]["iops"]))'
}

wait_sock() { for _ in $(seq 100); do [ -S "$1" ] && return 0; sleep 0.1; done; echo "no socket $1" >&2; return 1; }

hvio_conf() { # scheduler, extra tables
  cat > "$W/host.toml" <<EOF
[store]
path = "$W/disk.img"
create = false
depth = 32
engine = "io_uring"
rotational = false
[scheduler]
name = "$1"
[nbd]
unix = "$W/hvio.sock"
$2
[[vm]]
name = "vm1"
size = "${SIZE_MB}MiB"
EOF
}

start_hvio() { # scheduler [extra]
  hvio_conf "$1" "${2:-}"
  $HVIO serve --log-level warn "$W/host.toml" &
  HPID=$!
  PIDS+=("$HPID")
  wait_sock "$W/hvio.sock"
}
stop_hvio() { kill -TERM "$HPID"; wait "$HPID" || true; }

declare -A R   # label.rw -> space-separated IOPS of every round
add() { R[$1]="${R[$1]:-} $2"; }
median() { python3 -c "import statistics,sys; print(int(statistics.median(int(x) for x in sys.argv[1:])))" ${R[$1]}; }
nbd_pair() { # label uri
  add "$1.read" "$(iops randread --ioengine=nbd --uri="$2")"
  add "$1.write" "$(iops randwrite --ioengine=nbd --uri="$2")"
}
show() { # label
  printf '  %-22s randread %7d IOPS   randwrite %7d IOPS   (rounds: read%s; write%s)\n' "$1" \
    "$(median "$1.read")" "$(median "$1.write")" "${R[$1.read]}" "${R[$1.write]}"
}

echo "== NBD, 4 KiB random, iodepth 32, fio nbd engine, unix socket, ${RUNTIME}s per run, median of $ROUNDS =="
SCHED_RUN=(noop)
for s in cfq pregather; do
  if echo "$SCHEDS" | grep -qx "$s"; then SCHED_RUN+=("$s"); fi
done
for round in $(seq "$ROUNDS"); do
  qemu-nbd --cache=none --aio=io_uring --shared=8 --persistent -f raw -k "$W/qemu.sock" "$W/disk.img" &
  QPID=$!; PIDS+=("$QPID")
  wait_sock "$W/qemu.sock"
  nbd_pair qemu-nbd "nbd+unix:///?socket=$W/qemu.sock"
  kill "$QPID"; wait "$QPID" 2>/dev/null || true
  for s in "${SCHED_RUN[@]}"; do
    start_hvio "$s"
    nbd_pair "hvio-$s" "nbd+unix:///vm1?socket=$W/hvio.sock"
    stop_hvio
  done
done
show qemu-nbd
for s in "${SCHED_RUN[@]}"; do show "hvio-$s"; done

ratio() { python3 -c "print(f'{$(median "$1")/$(median "$2"):.2f}')"; }
echo
echo "ratios (NBD, medians):"
for rw in read write; do
  echo "  hvio-noop / qemu-nbd  rand$rw: $(ratio "hvio-noop.$rw" "qemu-nbd.$rw")x   (goal >= 1.2)"
  for s in "${SCHED_RUN[@]:1}"; do
    echo "  hvio-$s / hvio-noop  rand$rw: $(ratio "hvio-$s.$rw" "hvio-noop.$rw")x   (goal >= 0.90)"
  done
done

echo
echo "== FUSE path: ext4 on loop(direct-io=on) on the export, fio libaio direct 4 KiB, iodepth 32, median of $ROUNDS =="
fs_pair() { # label file-on-fuse
  local dev
  dev=$(losetup --direct-io=on --show -f "$2"); LOOPS+=("$dev")
  mkfs.ext4 -q -F "$dev"
  mkdir -p "$W/fs"; mount "$dev" "$W/fs"; MOUNTS+=("$W/fs")
  fio --name=prep --filename="$W/fs/f" --size=512M --rw=write --bs=1M --direct=1 --ioengine=libaio --iodepth=4 >/dev/null 2>&1
  for round in $(seq "$ROUNDS"); do
    add "$1.read" "$(iops randread --filename="$W/fs/f" --size=512M --ioengine=libaio --direct=1)"
    add "$1.write" "$(iops randwrite --filename="$W/fs/f" --size=512M --ioengine=libaio --direct=1)"
  done
  umount "$W/fs"; losetup -d "$dev"
  MOUNTS=(); LOOPS=()
  show "$1"
}

nbdkit -U "$W/kit.sock" --exit-with-parent file "$W/disk.img" &
PIDS+=("$!")
wait_sock "$W/kit.sock"
mkdir -p "$W/nbdfuse"
nbdfuse "$W/nbdfuse/disk" --unix "$W/kit.sock" &
NFPID=$!; PIDS+=("$NFPID")
for _ in $(seq 100); do [ -e "$W/nbdfuse/disk" ] && break; sleep 0.1; done
fs_pair nbdkit-nbdfuse "$W/nbdfuse/disk"
umount "$W/nbdfuse" 2>/dev/null || true

start_hvio noop "[fuse]
mountpoint = \"$W/fuse\""
for _ in $(seq 100); do [ -e "$W/fuse/vm1" ] && break; sleep 0.1; done
fs_pair hvio-fuse "$W/fuse/vm1"
stop_hvio

echo
echo "ratios (FUSE path, medians):"
for rw in read write; do
  echo "  hvio-fuse / nbdkit-nbdfuse  rand$rw: $(ratio "hvio-fuse.$rw" "nbdkit-nbdfuse.$rw")x   (goal >= 1.5)"
done
