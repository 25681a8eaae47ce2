"""Load on `hvio serve`: many exports, several connections each, mixed
random I/O with verification, for a bounded time on loopback.

Usage: python3 bench/serve-load.py [--hvio target/release/hvio] [--exports 8]
           [--conns 4] [--seconds 60] [--scheduler cfq] [--dir DIR]

Each export (a 64 MiB VM disk) gets one fio process with `--conns` jobs,
each its own NBD connection over the unix socket and its own quarter of the
disk: 4 KiB random reads and writes (70/30), iodepth 8, `verify=crc32c`
with `verify_backlog` (every written block read back and checked during the
run, and what is left at the end). Prints, per VM, fio's IOPS and p99
completion latency and hvio's own p99 (`/vms`), the daemon's resident memory
(RSS) when the load has started and at the end, and the errors. Exits 1 on
any fio error or verify failure, a daemon that died, or RSS that grew by
more than `--rss-growth-mib` (default 64) between those two samples.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def get(port: int, path: str):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
        return json.loads(r.read())


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def config(d: Path, n: int, sched: str, port: int) -> str:
    vms = "".join(f'[[vm]]\nname = "vm{i}"\nsize = "64MiB"\n' for i in range(n))
    return (
        f'[store]\npath = "{d}/disk.img"\ndepth = 32\n[scheduler]\nname = "{sched}"\n'
        f'[nbd]\nunix = "{d}/nbd.sock"\n[control]\nhttp = "127.0.0.1:{port}"\n{vms}'
    )


def fio_cmd(sock: Path, vm: str, conns: int, seconds: int, out: Path) -> list[str]:
    return [
        "fio",
        "--name=load",
        "--ioengine=nbd",
        f"--uri=nbd+unix:///{vm}?socket={sock}",
        f"--numjobs={conns}",
        "--size=16M",
        "--offset_increment=16M",
        "--rw=randrw",
        "--rwmixread=70",
        "--bs=4k",
        "--iodepth=8",
        "--verify=crc32c",
        "--verify_backlog=256",
        "--verify_fatal=1",
        "--time_based",
        f"--runtime={seconds}",
        "--group_reporting",
        "--output-format=json",
        f"--output={out}",
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hvio", default=str(ROOT / "target" / "release" / "hvio"))
    ap.add_argument("--exports", type=int, default=8)
    ap.add_argument("--conns", type=int, default=4)
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--scheduler", default="cfq")
    ap.add_argument("--rss-growth-mib", type=float, default=64.0)
    ap.add_argument("--dir", help="working directory (default: a new temporary one, removed after)")
    a = ap.parse_args()
    if shutil.which("fio") is None:
        print("serve-load: fio is not installed (scripts/deps.sh installs it)", file=sys.stderr)
        return 2
    d = Path(a.dir) if a.dir else Path(tempfile.mkdtemp(prefix="hvio-load-"))
    d.mkdir(parents=True, exist_ok=True)
    port = free_port()
    (d / "host.toml").write_text(config(d, a.exports, a.scheduler, port))
    log = open(d / "serve.log", "w")
    srv = subprocess.Popen([a.hvio, "serve", str(d / "host.toml")], stderr=log, stdout=log)
    failures: list[str] = []
    try:
        for _ in range(200):
            if (d / "nbd.sock").exists():
                break
            if srv.poll() is not None:
                print((d / "serve.log").read_text(), file=sys.stderr)
                return 1
            time.sleep(0.05)
        fios = []
        for i in range(a.exports):
            out = d / f"vm{i}.json"
            cmd = fio_cmd(d / "nbd.sock", f"vm{i}", a.conns, a.seconds, out)
            # In the work directory: fio leaves its verify state files there.
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=d)
            fios.append((f"vm{i}", out, p))
        # The first sample after the warm-up (every connection open, the
        # buffers grown): growth after it is what the load costs over time.
        time.sleep(max(2.0, a.seconds / 4))
        rss_start = rss_kib(srv.pid)
        t0 = time.monotonic()
        print(
            f"{a.exports} exports x {a.conns} connections, 4 KiB randrw 70/30, iodepth 8, "
            f"verify=crc32c, {a.seconds} s, scheduler {a.scheduler}"
        )
        print(f"daemon RSS at the start: {rss_start / 1024:.1f} MiB")
        results = {}
        for vm, out, p in fios:
            text = p.communicate(timeout=a.seconds + 120)[0].decode(errors="replace")
            if p.returncode != 0:
                failures.append(f"{vm}: fio exited {p.returncode}: {text[-2000:]}")
                continue
            results[vm] = json.loads(out.read_text())["jobs"][0]
        rss_end = rss_kib(srv.pid)
        elapsed = time.monotonic() - t0
        if srv.poll() is not None:
            failures.append(f"the daemon exited with {srv.returncode}")
            vms = {}
        else:
            vms = {v["name"]: v for v in get(port, "/vms")}
        print(f"{'vm':6} {'IOPS':>8} {'fio p99 read':>13} {'fio p99 write':>14} {'hvio p99 r/w':>15} errors")
        total_errors = 0
        for vm in sorted(results, key=lambda v: int(v[2:])):
            j = results[vm]
            errors = j["error"]
            total_errors += errors
            if errors:
                failures.append(f"{vm}: fio reports error {errors}")
            iops = j["read"]["iops"] + j["write"]["iops"]
            p99 = [j[k]["clat_ns"]["percentile"].get("99.000000", 0) / 1e3 for k in ("read", "write")]
            h = vms.get(vm, {})
            hvio_p99 = f"{h.get('read_p99_us', 0)}/{h.get('write_p99_us', 0)} us"
            if h.get("errors", 0):
                failures.append(f"{vm}: hvio counted {h['errors']} failed requests")
            errs = errors + h.get("errors", 0)
            print(f"{vm:6} {iops:8.0f} {p99[0]:10.0f} us {p99[1]:11.0f} us {hvio_p99:>15} {errs}")
        growth = (rss_end - rss_start) / 1024
        print(f"daemon RSS at the end ({elapsed:.0f} s later): {rss_end / 1024:.1f} MiB ({growth:+.1f} MiB)")
        if growth > a.rss_growth_mib:
            failures.append(f"RSS grew by {growth:.1f} MiB (limit {a.rss_growth_mib})")
    finally:
        if srv.poll() is None:
            srv.send_signal(signal.SIGTERM)
            try:
                srv.wait(timeout=30)
            except subprocess.TimeoutExpired:
                srv.kill()
        log.close()
        if not a.dir:
            shutil.rmtree(d, ignore_errors=True)
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        return 1
    print("ok: no errors, every verified block read back as written")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("LC_ALL", "C")
    sys.exit(main())
