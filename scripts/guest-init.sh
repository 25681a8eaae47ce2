#!/bin/busybox sh
# /init of the real-guest test initramfs (scripts/guest-image.sh builds it).
# Tests the first virtio disk and reports on the serial console in lines
# that begin with "HVIO-GUEST", then powers off. The kernel command line
# sets what runs:
#   hvio.check_mib=N   write N MiB of random data at offset 0 with O_DIRECT,
#                      read it back, compare; print its sha256 so the host
#                      can check the same bytes in its backing store
#   hvio.fio_mib=N     fio over the next N MiB: random 4 KiB writes at
#                      iodepth 16 with verify=crc32c (every block read back
#                      and checked), then the same as random reads
#                      then write-zeroes (blkdiscard -z) of the next MiB,
#                      read back as zeros, and a discard of the MiB after
#   hvio.bench_s=N     instead, N seconds of 4 KiB random reads at iodepth 16
#                      over the whole disk (no check; for IOPS comparisons)
#   hvio.bench_warm_s=N  first the same job for N seconds, reported apart
#                      ("warm"): the guest's translated code, its page tables
#                      and the server's threads and caches warm up outside
#                      the measurement
# The last line is "HVIO-GUEST result ok" or "HVIO-GUEST result FAIL <why>".
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev

fail() {
  echo "HVIO-GUEST result FAIL $*"
  poweroff -f
}

check_mib=8
fio_mib=16
bench_s=0
bench_warm_s=0
for kv in $(cat /proc/cmdline); do
  case $kv in
    hvio.check_mib=*) check_mib=${kv#*=} ;;
    hvio.fio_mib=*) fio_mib=${kv#*=} ;;
    hvio.bench_s=*) bench_s=${kv#*=} ;;
    hvio.bench_warm_s=*) bench_warm_s=${kv#*=} ;;
  esac
done

for m in virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_blk; do
  insmod /lib/modules/$m.ko || fail "insmod $m"
done
n=0
while [ ! -b /dev/vda ]; do
  n=$((n + 1))
  [ $n -lt 100 ] || fail "no /dev/vda after 10 s"
  sleep 0.1
done
echo "HVIO-GUEST disk vda sectors=$(cat /sys/block/vda/size) rotational=$(cat /sys/block/vda/queue/rotational)"

if [ "$bench_s" -gt 0 ]; then
  if [ "$bench_warm_s" -gt 0 ]; then
    fio --name=warm --filename=/dev/vda --direct=1 --ioengine=libaio --iodepth=16 \
      --rw=randread --bs=4k --time_based --runtime="$bench_warm_s" --minimal >/tmp/fio.out 2>&1 ||
      { cat /tmp/fio.out; fail "fio warm-up"; }
    echo "HVIO-GUEST warm read_iops=$(cut -d';' -f8 /tmp/fio.out)"
  fi
  echo "HVIO-GUEST fio start"
  fio --name=bench --filename=/dev/vda --direct=1 --ioengine=libaio --iodepth=16 \
    --rw=randread --bs=4k --time_based --runtime="$bench_s" --minimal >/tmp/fio.out 2>&1 ||
    { cat /tmp/fio.out; fail "fio bench"; }
  echo "HVIO-GUEST fio read_iops=$(cut -d';' -f8 /tmp/fio.out)"
  echo "HVIO-GUEST result ok"
  poweroff -f
fi

# 1. Write, read back, compare; the host checks the same bytes.
dd if=/dev/urandom of=/tmp/pattern bs=1M count="$check_mib" 2>/dev/null || fail "dd urandom"
want=$(sha256sum /tmp/pattern | cut -d' ' -f1)
dd if=/tmp/pattern of=/dev/vda bs=1M oflag=direct conv=fsync 2>/dev/null || fail "dd write"
got=$(dd if=/dev/vda bs=1M count="$check_mib" iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1)
[ "$got" = "$want" ] || fail "read back sha256 $got, wrote $want"
echo "HVIO-GUEST check bytes=$((check_mib * 1048576)) sha256=$want"

# 2. fio: random writes verified by crc32c, then random reads, iodepth 16.
echo "HVIO-GUEST fio start"
fio --name=crc --filename=/dev/vda --direct=1 --ioengine=libaio --iodepth=16 \
  --offset="${check_mib}M" --size="${fio_mib}M" --bs=4k --rw=randwrite \
  --verify=crc32c --verify_fatal=1 --do_verify=1 --minimal >/tmp/fio.out 2>&1 ||
  { cat /tmp/fio.out; fail "fio verify"; }
fio --name=read --filename=/dev/vda --direct=1 --ioengine=libaio --iodepth=16 \
  --offset="${check_mib}M" --size="${fio_mib}M" --bs=4k --rw=randread --minimal >/tmp/fio2.out 2>&1 ||
  { cat /tmp/fio2.out; fail "fio read"; }
# 3. Write-zeroes over written data reads back zeros; a discard succeeds.
z=$((check_mib + fio_mib))
dd if=/tmp/pattern of=/dev/vda bs=1M seek="$z" count=2 oflag=direct conv=fsync,notrunc 2>/dev/null || fail "dd before zeroing"
/usr/sbin/blkdiscard -z -o $((z * 1048576)) -l 1048576 /dev/vda || fail "blkdiscard -z (write-zeroes)"
zeros=$(dd if=/dev/zero bs=1M count=1 2>/dev/null | sha256sum | cut -d' ' -f1)
got=$(dd if=/dev/vda bs=1M skip="$z" count=1 iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1)
[ "$got" = "$zeros" ] || fail "write-zeroes read back as something else"
if [ "$(cat /sys/block/vda/queue/discard_max_bytes)" != 0 ]; then
  /usr/sbin/blkdiscard -o $(((z + 1) * 1048576)) -l 1048576 /dev/vda || fail "blkdiscard (discard)"
fi
echo "HVIO-GUEST zeroes offset=$((z * 1048576)) bytes=1048576 discard_max=$(cat /sys/block/vda/queue/discard_max_bytes) serial=$(cat /sys/block/vda/serial 2>/dev/null)"

echo "HVIO-GUEST fio write_iops=$(cut -d';' -f49 /tmp/fio.out) verify_read_iops=$(cut -d';' -f8 /tmp/fio.out) read_iops=$(cut -d';' -f8 /tmp/fio2.out)"
echo "HVIO-GUEST result ok"
poweroff -f
