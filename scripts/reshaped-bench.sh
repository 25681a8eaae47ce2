#!/usr/bin/env bash
# Reshaped image against a raw image, same daemon, same file system, one run:
# fio's nbd engine on `hvio serve` (4 KiB random writes at iodepth 32,
# 1 MiB sequential writes, 4 KiB random reads at iodepth 32), then the
# reshaped image's table memory per GiB mapped and its recovery time per
# GiB of log and checkpoints read. Prints each figure and the ratio
# reshaped / raw. Usage: scripts/reshaped-bench.sh [HVIO] [SECONDS]
# (default target/release/hvio, 15 s per job). Scratch: target/reshaped-bench.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
hvio=${1:-$here/target/release/hvio}
secs=${2:-15}
dir=$here/target/reshaped-bench
rm -rf "$dir"
mkdir -p "$dir"

echo "machine: $(nproc) cores; the images live on $(df -T "$dir" | awk 'NR==2 {print $1 " (" $2 ")"}')"
dev=$(basename "$(df "$dir" | awk 'NR==2 {print $1}')")
dev=${dev%%[0-9]*}
if [ -r "/sys/block/$dev/queue/rotational" ]; then
  echo "disk: /dev/$dev, rotational=$(cat /sys/block/$dev/queue/rotational)," \
    "vendor $(cat /sys/block/$dev/device/vendor 2>/dev/null || echo '?')," \
    "scheduler $(cat /sys/block/$dev/queue/scheduler)"
fi

conf() { # layout
  cat <<EOF
[store]
depth = 32
engine = "io_uring"
$( [ "$1" = raw ] && echo "path = \"$dir/raw.img\"" )
[scheduler]
name = "noop"
[nbd]
unix = "$dir/nbd.sock"
[log]
level = "warn"
[[vm]]
name = "vm1"
size = "1GiB"
$( [ "$1" = reshaped ] && printf 'layout = "reshaped"\nimage = "%s/vm1.rsi"\nreshape = { base = false, data_region_bytes = 2147483648, meta_region_bytes = 67108864, log_bytes = 67108864 }\n' "$dir" )
EOF
}

pid=
start() { # layout
  conf "$1" > "$dir/$1.toml"
  rm -f "$dir/nbd.sock"
  "$hvio" serve "$dir/$1.toml" & pid=$!
  for _ in $(seq 200); do [ -S "$dir/nbd.sock" ] && return; sleep 0.05; done
  echo "hvio serve did not start" >&2; exit 1
}
stop() { kill -TERM "$pid"; wait "$pid" || true; }

# fio job -> "IOPS MB/s" of its one direction (terse v3: read iops field 8,
# read bw KiB/s 7; write iops 49, write bw 48).
job() { # name rw bs iodepth
  fio --name="$1" --ioengine=nbd --uri="nbd+unix:///vm1?socket=$dir/nbd.sock" \
    --rw="$2" --bs="$3" --iodepth="$4" --size=1G --time_based --runtime="$secs" \
    --randrepeat=1 --output-format=terse |
    awk -F';' -v rw="$2" '/^3;/ { if (rw ~ /read/) print $8, $7 / 1024; else print $49, $48 / 1024 }'
}

declare -A R
for layout in raw reshaped; do
  start "$layout"
  # Fill the disk first so reads read written data and the image is in steady state.
  fio --name=fill --ioengine=nbd --uri="nbd+unix:///vm1?socket=$dir/nbd.sock" \
    --rw=write --bs=1M --iodepth=8 --size=1G --output-format=terse > /dev/null
  # Random writes last before the reads: the reads and the table then see
  # the random layout (sequential writes would merge the table back).
  R[$layout,seqwrite]=$(job seqwrite write 1M 8)
  R[$layout,randwrite]=$(job randwrite randwrite 4k 32)
  R[$layout,randread]=$(job randread randread 4k 32)
  if [ "$layout" = reshaped ]; then
    # The table after the random writes; a crash (kill -9) leaves the log to replay.
    kill -KILL "$pid"; wait "$pid" || true
    "$hvio" image info "$dir/vm1.rsi" > "$dir/info.txt"
  else
    stop
  fi
done

printf '%-34s %12s %12s %12s %12s %8s\n' job "raw IOPS" "raw MB/s" "rsh IOPS" "rsh MB/s" ratio
for j in randwrite seqwrite randread; do
  read -r ri rb <<< "${R[raw,$j]}"
  read -r si sb <<< "${R[reshaped,$j]}"
  name=$j
  case $j in
    randwrite) name="4 KiB random writes, iodepth 32";;
    seqwrite) name="1 MiB sequential writes, iodepth 8";;
    randread) name="4 KiB random reads, iodepth 32";;
  esac
  printf '%-34s %12.0f %12.1f %12.0f %12.1f %8.2f\n' "$name" "$ri" "$rb" "$si" "$sb" "$(echo "$si / $ri" | bc -l)"
done
mapped=$(awk '/^data +[0-9]/ {print $2}' "$dir/info.txt")
table=$(awk '/^table / {gsub(/\(/, "", $4); print $4}' "$dir/info.txt")
rec_ms=$(awk '/^recovery / {print $2}' "$dir/info.txt")
rec_bytes=$(awk '/^recovery / {gsub(/\(/, "", $4); print $4}' "$dir/info.txt")
echo "table memory: $table bytes for $mapped bytes mapped = $(echo "$table / 1048576 / ($mapped / 1073741824)" | bc -l | xargs printf '%.1f') MiB per GiB mapped"
echo "recovery after kill -9: $rec_ms ms reading $rec_bytes bytes of log and checkpoints = $(echo "$rec_ms / ($rec_bytes / 1073741824)" | bc -l | xargs printf '%.0f') ms per GiB"
grep -E '^(table|log|checkpoints|recovery)' "$dir/info.txt"
