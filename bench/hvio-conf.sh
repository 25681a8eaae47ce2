# bench/hvio-conf.sh — sourced by the NBD benchmarks: hvio_conf writes
# $W/host.toml (one VM of $SIZE_MB MiB on $W/disk.img, io_uring engine,
# NBD and control sockets in $W; extra [store] keys such as
# poll_max_us = 0); wait_sock waits for a unix socket.
wait_sock() { for _ in $(seq 100); do [ -S "$1" ] && return 0; sleep 0.1; done; echo "no socket $1" >&2; return 1; }

hvio_conf() { # scheduler, extra tables, extra [store] lines
  cat > "$W/host.toml" <<EOF
[store]
path = "$W/disk.img"
create = false
depth = 32
engine = "io_uring"
rotational = false
${3:-}
[scheduler]
name = "$1"
[nbd]
unix = "$W/hvio.sock"
[control]
unix = "$W/control.sock"
${2:-}
[[vm]]
name = "vm1"
size = "${SIZE_MB}MiB"
EOF
}
