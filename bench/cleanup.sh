# bench/cleanup.sh — sourced by the FUSE benchmarks: a scratch directory $W
# and an EXIT trap that unmounts the file systems in MOUNTS, detaches the loop
# devices in LOOPS, stops the processes in PIDS and unmounts the FUSE
# directories in FUSE_DIRS (left behind when a server is killed).
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
