#!/usr/bin/env bash
# A soak of short real guests on hvio's vhost-user-blk export: the test
# real_guest::guest_on_vhost_user_two_queues_noop_switched_to_cfq (a TCG
# guest with two queues: checksummed writes read back, fio random writes
# with verify=crc32c at iodepth 16 while the scheduler is switched from
# noop to CFQ, write-zeroes and discard, the bytes checked in the backing
# file) run again and again, niced, one guest at a time, until SECONDS have
# passed. A guest that stops answering fails its run after
# HVIO_GUEST_TIMEOUT_S (120 here) with its console log and hvio's /status.
#
# Usage: scripts/vhost-soak.sh SECONDS [LOGDIR]   (default target/vhost-soak)
#
# Prints one line per guest and at the end the count of guests passed,
# stalled (the guest's result never came) and failed otherwise; each
# failed run's output is kept in LOGDIR.
set -euo pipefail

secs=${1:?usage: scripts/vhost-soak.sh SECONDS [LOGDIR]}
here=$(cd "$(dirname "$0")" && pwd)
logs=${2:-$here/../target/vhost-soak}
mkdir -p "$logs"
cd "$here/.."
bin=$(cargo test -p hvio-vdisk --release --test real_guest --no-run --message-format=json 2>/dev/null |
  sed -n 's/.*"executable":"\([^"]*real_guest[^"]*\)".*/\1/p' | tail -1)
[ -x "$bin" ] || { echo "vhost-soak: cannot build the real_guest test binary" >&2; exit 1; }
test=guest_on_vhost_user_two_queues_noop_switched_to_cfq
export HVIO_GUEST_TIMEOUT_S=${HVIO_GUEST_TIMEOUT_S:-120}
end=$((SECONDS + secs))
passed=0 stalled=0 failed=0 n=0
while [ "$SECONDS" -lt "$end" ]; do
  n=$((n + 1))
  start=$SECONDS
  if nice -n 10 "$bin" --exact "$test" --nocapture >"$logs/run.log" 2>&1 &&
    grep -q "test result: ok. 1 passed" "$logs/run.log"; then
    passed=$((passed + 1))
    verdict=passed
  elif grep -q "within [0-9]* s" "$logs/run.log"; then
    stalled=$((stalled + 1))
    verdict=STALLED
    cp "$logs/run.log" "$logs/stalled-$n.log"
  else
    failed=$((failed + 1))
    verdict=FAILED
    cp "$logs/run.log" "$logs/failed-$n.log"
  fi
  echo "guest $n: $verdict in $((SECONDS - start)) s (load average $(cut -d' ' -f1 /proc/loadavg))"
done
echo "vhost-soak: $n guests in $SECONDS s: $passed passed, $stalled stalled, $failed failed otherwise"
[ "$stalled" -eq 0 ] && [ "$failed" -eq 0 ]
