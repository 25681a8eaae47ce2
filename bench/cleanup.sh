# bench/cleanup.sh — sourced by the FUSE benchmarks: a scratch directory $W
# and an EXIT trap that unmounts the file systems in MOUNTS, detaches the loop
# devices in LOOPS, stops the processes in PIDS and unmounts the FUSE
# directories in FUSE_DIRS (left behind when a server is killed); and the
# functions wait_for PATH and fs_setup NAME FILE (ext4 on a direct-I/O loop
# device over FILE, mounted at $W/fs-NAME with a 512 MiB file f written, both
# registered for the cleanup).
W=$(mktemp -d "/tmp/${BENCH_TAG:-hvio-bench}.XXXXXX")
PIDS=()
LOOPS=()
MOUNTS=()
FUSE_DIRS=()
cleanup() {
  for m in "${MOUNTS[@]}"; do umount "$m" 2>/dev/null || true; done
  for l in "${LOOPS[@]}"; do losetup -d "$l" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  sleep 0.5
  for m in "${FUSE_DIRS[@]}"; do umount "$m" 2>/dev/null || true; done
  rm -rf "$W"
}
trap cleanup EXIT

wait_for() { for _ in $(seq 100); do [ -e "$1" ] && return 0; sleep 0.1; done; echo "no $1" >&2; return 1; }
fs_setup() { # name file
  local dev
  wait_for "$2"
  dev=$(losetup --direct-io=on --show -f "$2"); LOOPS+=("$dev")
  mkfs.ext4 -q -F "$dev"
  mkdir -p "$W/fs-$1"; mount "$dev" "$W/fs-$1"; MOUNTS+=("$W/fs-$1")
  fio --name=prep --filename="$W/fs-$1/f" --size=512M --rw=write --bs=1M --direct=1 --ioengine=libaio --iodepth=4 >/dev/null 2>&1
}
