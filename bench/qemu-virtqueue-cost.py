"""The CPU time QEMU's I/O thread spends per guest request, virtqueue
included, on this machine; with --fit, the share of it that a busy thread
pays, which is what `[[vm]] qemu_path`'s `guest_request_us` stands for
(docs/reshape.md, "QEMU's I/O path").

Usage: python3 bench/qemu-virtqueue-cost.py [--rounds 5] [--seconds 10]
           [--warm 3] [--jobs randwrite:4,randwrite:16,randwrite:64,write:4]
           [--iodepth 64] [--numjobs 8] [--vcpus 2] [--image-mib 1024]
           [--dir DIR] [--no-strace]
       python3 bench/qemu-virtqueue-cost.py --fit [--guests 2x8,1x1]
           [--rounds 5] [--seconds 10] [--warm 3] [--iodepth 64]

With --fit it measures what `guest_request_us` is: the per-request work of
a busy thread (see "The fit" at the end).

Boots the real-guest test kit (scripts/guest-image.sh: a Debian cloud
kernel, an initramfs with fio, Debian 12's QEMU) under TCG, with its disk a
virtio-blk device served by its own iothread:

    -name g,debug-threads=on -object iothread,id=io0,poll-max-ns=0
    -drive file=RAW,if=none,id=d0,format=raw,cache=none,aio=native
    -device virtio-blk-pci,drive=d0,iothread=io0

on a raw file written in full on the file system of DIR (default $TMPDIR or
/var/tmp). The thread named "IO io0" takes the guest's kick (an eventfd),
pops the virtqueue, submits through the block layer and linux-aio, takes the
completions, pushes the used ring and signals the guest notifier (an
eventfd): QEMU's whole per-request work for the disk. The guest's /init (an
overlay on the kit's initramfs) runs fio on /dev/vda for each job (O_DIRECT,
libaio, 4 KiB to 64 KiB, iodepth 64, numjobs N), ROUNDS times. After WARM
seconds of each job the thread's utime + stime (/proc/PID/task/TID/stat)
and the drive's request counts (QMP `query-blockstats`: the guest's
requests as virtio-blk took them) are read, and again SECONDS later, both
inside fio's run; CPU µs per request is the thread's CPU over the requests
between the two readings, the least of the rounds kept (other load on a
shared machine only adds). The main-loop thread's and the vCPU threads' CPU
per request are printed beside: under TCG the main loop injects the
interrupt the iothread's notifier eventfd asks for (KVM's irqfd does it in
the host kernel), and the vCPU thread emulates the guest; and requests per
iothread block (its voluntary context switches, from
/proc/PID/task/TID/status), the batching that the guest's speed sets.

In the same run, before the guest boots and again after, `qemu-img bench
-t none -i native -d 64` of the same QEMU version (Debian's qemu-utils of
the kit QEMU's version, fetched once with `apt-get download` into the kit's
directory), and before it the installed qemu-img, measure the block layer,
linux-aio and host kernel alone on the same file, as
bench/qemu-path-cost.sh does (writes, the step twice the size, a
one-request run's CPU taken off; the least of all rounds kept). The
difference, the iothread's µs per random write less the same-version
qemu-img's per write of the same size, is the share of the virtqueue,
virtio-blk's request handling and the notification, together with the
thread's blocks and wake-ups at this guest's rate (--fit separates them).

Then (unless --no-strace) a last random 4 KiB write job runs with
`strace -c` attached to the iothread alone for SECONDS, and once more to a
qemu-img bench run: system calls per request on each side, which shows the
batching (requests per io_submit, per kick, per notification). strace slows
what it traces, so these runs give counts, not CPU. Batching depends on how
fast the guest submits; a TCG guest is slower than a KVM one, so it is
reported with the guest's IOPS.

The guest has VCPUS vCPUs (default 2, as many as this machine has cores:
every TCG vCPU is a host thread) and virtio-blk one queue per vCPU; fio
runs NUMJOBS jobs (default 8, paper 001's, time-sharing the two vCPUs) of
IODEPTH each. A faster guest hands the iothread more requests per kick,
which spreads its wake-up, io_submit and notification over more requests:
the counts above are printed for that reason. Prints the load average
before and after. Not part of `make test`: about
(jobs × rounds + 1) × (SECONDS + WARM + 3) s of guest time plus the boot
and the qemu-img runs.

The fit (--fit). The iothread pays for its work on each request and, each
time it runs out of work, for blocking and being woken again (on this VM
the idle and the wake-up are exits to its hypervisor). How often it blocks
per request is set by the guest's speed, not by QEMU: a guest slower than
the thread leaves it idle between kicks. hvio's model (`[[vm]] qemu_path`)
charges `guest_request_us` per guest request while the thread works
through a pass and has no cost per wake-up, so the parameter is the work
of a thread that never blocks. --fit boots the guest once for each
configuration of --guests (VCPUSxNUMJOBS: 2 vCPUs × 8 fio jobs and
1 vCPU × 1 job by default, guests of different speeds), runs ROUNDS
rounds of random 4 KiB writes in each (no strace), and for every round
reads the iothread's CPU µs per request (y) and its blocks per request (x:
voluntary context switches over requests). A least-squares line over every
round, y = a + b × x, gives a (the CPU per request of a thread that never
blocks) and b (the CPU of one block and wake-up), with their standard
errors, the correlation and the range of x observed. The busy-thread
share is g = a − the same-version qemu-img's CPU µs per 4 KiB write (the
least of its rounds before and after the guests), printed as
`guest_request_us`. It assumes the cost is linear in blocks per request
and extrapolates it from the observed range to none: a is as good as that
line, and its standard error says how well the rounds pin it.
"""

import argparse
import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")

# The guest's /init: the kit's own (scripts/guest-init.sh) up to its
# "HVIO-GUEST disk" line (busybox, the virtio modules, /dev/vda), then this:
# for each job of `hvio.vq_jobs` (RW:KIB,...) it prints "HVIO-GUEST job RW
# KIB start", runs fio for `hvio.vq_runtime` seconds and prints
# "HVIO-GUEST job RW KIB done ...".
GUEST_JOBS = r"""
jobs=""
runtime=10
depth=64
numjobs=1
for kv in $(cat /proc/cmdline); do
  case $kv in
    hvio.vq_jobs=*) jobs=${kv#*=} ;;
    hvio.vq_runtime=*) runtime=${kv#*=} ;;
    hvio.vq_depth=*) depth=${kv#*=} ;;
    hvio.vq_numjobs=*) numjobs=${kv#*=} ;;
  esac
done
sectors=$(cat /sys/block/vda/size)
queues=$(ls /sys/block/vda/mq | wc -l)
scheduler=$(tr ' ' '/' </sys/block/vda/queue/scheduler)
echo "HVIO-GUEST queues=$queues scheduler=$scheduler cpus=$(grep -c ^processor /proc/cpuinfo)"
share=$((sectors / 2 / numjobs))
for job in $(echo "$jobs" | tr ',' ' '); do
  rw=${job%:*}
  kib=${job#*:}
  echo "HVIO-GUEST job $rw $kib start"
  fio --name=j --filename=/dev/vda --direct=1 --ioengine=libaio --iodepth="$depth" \
    --numjobs="$numjobs" --group_reporting --size="${share}k" --offset_increment="${share}k" \
    --rw="$rw" --bs="${kib}k" --time_based --runtime="$runtime" --minimal >/tmp/fio.out 2>&1 ||
    { cat /tmp/fio.out; fail "fio $rw $kib"; }
  iops=$(cut -d';' -f49 /tmp/fio.out)
  echo "HVIO-GUEST job $rw $kib done iops=$iops runtime_ms=$(cut -d';' -f50 /tmp/fio.out)"
done
echo "HVIO-GUEST result ok"
poweroff -f
"""


def guest_init() -> str:
    """scripts/guest-init.sh's setup, up to its disk line, then the jobs."""
    kit_init = (ROOT / "scripts/guest-init.sh").read_text().splitlines(keepends=True)
    for n, line in enumerate(kit_init):
        if line.startswith('echo "HVIO-GUEST disk '):
            return "".join(kit_init[: n + 1]) + GUEST_JOBS
    die('scripts/guest-init.sh has no `echo "HVIO-GUEST disk ...` line to run the jobs after')
    raise AssertionError


def die(msg: str) -> None:
    print(f"qemu-virtqueue-cost: {msg}", file=sys.stderr)
    sys.exit(1)


def kit() -> dict[str, str]:
    """The guest kit scripts/guest-image.sh builds (or finds) under target/guest."""
    out = subprocess.run(
        ["bash", str(ROOT / "scripts/guest-image.sh"), str(ROOT / "target/guest")],
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        die(f"scripts/guest-image.sh could not build the guest kit: {out.stderr.strip()[-400:]}")
    return dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)


def qemu_env(k: dict[str, str]) -> dict[str, str]:
    return {**os.environ, "QEMU_MODULE_DIR": k["QEMU_MODULE_DIR"], "LD_LIBRARY_PATH": k["QEMU_LIB"]}


def same_version_qemu_img(k: dict[str, str]) -> Path:
    """Debian's qemu-img of the kit QEMU's own version, fetched once."""
    banner = subprocess.run([k["QEMU"], "--version"], env=qemu_env(k), capture_output=True, text=True).stdout
    m = re.search(r"\(Debian ([^)]+)\)", banner)
    if not m:
        die(f"cannot tell the Debian version of {k['QEMU']} from `{banner.splitlines()[0]}`")
    version = m.group(1)
    where = Path(k["KERNEL"]).parent / f"qemu-utils-{version.replace(':', '_')}"
    img = where / "usr/bin/qemu-img"
    if not img.exists():
        debs = Path(tempfile.mkdtemp(prefix="hvio-qemu-utils."))
        try:
            got = subprocess.run(
                ["apt-get", "download", "-q", f"qemu-utils={version}"],
                cwd=debs,
                capture_output=True,
                text=True,
            )
            found = list(debs.glob("qemu-utils_*.deb"))
            if got.returncode != 0 or not found:
                die(f"apt-get download qemu-utils={version} failed: {got.stderr.strip()[-300:]}")
            subprocess.run(["dpkg", "-x", str(found[0]), str(where)], check=True)
        finally:
            shutil.rmtree(debs)
    return img


def overlay_initrd(k: dict[str, str], scratch: Path) -> Path:
    """The kit's initramfs with this benchmark's /init laid over it (the
    kernel unpacks concatenated archives in order, later files winning)."""
    tree = scratch / "overlay"
    tree.mkdir()
    (tree / "init").write_text(guest_init())
    (tree / "init").chmod(0o755)
    busybox = Path(k["QEMU"]).parents[2] / "bin/busybox"
    cpio = subprocess.run(
        f"find . | '{busybox}' cpio -o -H newc", shell=True, cwd=tree, capture_output=True, check=True
    ).stdout
    out = scratch / "initrd.cpio"
    with open(out, "wb") as f:
        f.write(Path(k["INITRD"]).read_bytes())
        f.write(cpio)
    return out


def qemu_img_cpu(img: Path, image: Path, args: list[str]) -> float:
    """User + system CPU seconds of one qemu-img bench run (wait4's rusage)."""
    cmd = [str(img), "bench", "-f", "raw", "-t", "none", "-i", "native", "-d", "64", *args, str(image)]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        die(f"{' '.join(cmd)} failed")
    return ru.ru_utime + ru.ru_stime


def qemu_img_costs(img: Path, image: Path, sizes: list[int], rounds: int) -> dict[int, float]:
    """CPU µs per write of each size: least of the rounds, less a one-request run."""
    startup = min(qemu_img_cpu(img, image, ["-w", "-c", "1", "-s", "4096"]) for _ in range(rounds))
    costs = {}
    for kib in sizes:
        size = kib * 1024
        count = min(100000, 512 * 1024 // kib)
        args = ["-w", "-c", str(count), "-s", str(size), "-S", str(2 * size)]
        best = min(qemu_img_cpu(img, image, args) for _ in range(rounds))
        costs[kib] = (best - startup) / count * 1e6
    return costs


def strace_counts(out: Path) -> dict[str, int]:
    """Calls per system call from an `strace -c` summary."""
    calls = {}
    for line in out.read_text().splitlines():
        f = line.split()
        if len(f) >= 5 and f[-1] != "total" and f[3].isdigit():
            calls[f[-1]] = int(f[3])
    return calls


def qemu_img_syscalls(img: Path, image: Path, scratch: Path) -> tuple[int, dict[str, int]]:
    count = 20000
    out = scratch / "qemu-img.strace"
    cmd = ["strace", "-c", "-f", "-o", str(out), str(img), "bench", "-f", "raw", "-t", "none", "-i", "native"]
    cmd += ["-d", "64", "-w", "-c", str(count), "-s", "4096", "-S", "8192", str(image)]
    subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
    return count, strace_counts(out)


class Qmp:
    """A minimal QMP client on QEMU's unix socket."""

    def __init__(self, path: Path):
        for _ in range(100):
            try:
                self.sock = socket.socket(socket.AF_UNIX)
                self.sock.connect(str(path))
                break
            except OSError:
                time.sleep(0.1)
        else:
            die(f"no QMP socket at {path}")
        self.file = self.sock.makefile("rw")
        json.loads(self.file.readline())  # the greeting
        self.call("qmp_capabilities")

    def call(self, cmd: str):
        self.file.write(json.dumps({"execute": cmd}) + "\n")
        self.file.flush()
        while True:
            reply = json.loads(self.file.readline())
            if "return" in reply:
                return reply["return"]
            if "error" in reply:
                die(f"QMP {cmd}: {reply['error']}")


def ticks(pid: int, tid: int) -> int:
    """utime + stime of one thread, in clock ticks."""
    stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[11]) + int(fields[12])


def sleeps(pid: int, tid: int) -> int:
    """How often one thread gave up the CPU to wait (voluntary context
    switches): for the iothread, its wake-ups."""
    for line in Path(f"/proc/{pid}/task/{tid}/status").read_text().splitlines():
        if line.startswith("voluntary_ctxt_switches:"):
            return int(line.split()[1])
    return 0


def on_cpu_ns(pid: int, tid: int) -> int:
    """The scheduler's run time of one thread (schedstat), in ns."""
    return int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])


def threads(pid: int) -> dict[int, str]:
    out = {}
    for t in Path(f"/proc/{pid}/task").iterdir():
        try:
            out[int(t.name)] = (t / "comm").read_text().strip()
        except OSError:
            pass
    return out


class Guest:
    """The TCG guest, its console read line by line, its QMP socket."""

    def __init__(self, k, initrd: Path, image: Path, scratch: Path, args, jobs: list[str]):
        runtime = args.warm + args.seconds + 3
        append = (
            "console=ttyS0 panic=-1 quiet no_timer_check "
            f"hvio.vq_jobs={','.join(jobs)} hvio.vq_runtime={runtime} "
            f"hvio.vq_depth={args.iodepth} hvio.vq_numjobs={args.numjobs}"
        )
        cmd = [k["QEMU"]]
        for d in k["QEMU_FIRMWARE"].split(":"):
            cmd += ["-L", d]
        qmp = scratch / "qmp.sock"
        cmd += ["-name", "g,debug-threads=on", "-accel", "tcg", "-m", "512", "-smp", str(args.vcpus)]
        cmd += ["-nographic", "-no-reboot", "-net", "none", "-qmp", f"unix:{qmp},server=on,wait=off"]
        cmd += ["-kernel", k["KERNEL"], "-initrd", str(initrd), "-append", append]
        cmd += ["-object", "iothread,id=io0,poll-max-ns=0"]
        cmd += ["-drive", f"file={image},if=none,id=d0,format=raw,cache=none,aio=native"]
        cmd += ["-device", "virtio-blk-pci,drive=d0,iothread=io0"]
        self.proc = subprocess.Popen(
            cmd,
            env=qemu_env(k),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.console: list[str] = []
        self.jobs_done = 0
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.deadline = time.monotonic() + 300 + len(jobs) * (runtime + 30)
        self.qmp = Qmp(qmp)
        names = threads(self.proc.pid)
        io = [t for t, n in names.items() if n == "IO io0"]
        if not io:
            self.fail(f"no thread named `IO io0` among {sorted(names.values())}")
        self.iothread = io[0]
        self.vcpus = [t for t, n in names.items() if n.startswith("CPU ")]

    def _read(self):
        for line in self.proc.stdout:
            line = line.rstrip("\r\n")
            self.console.append(line)
            if "HVIO-GUEST job " in line and " done " in line:
                self.jobs_done += 1
            self.lines.put(line)
        self.lines.put(None)

    def fail(self, why: str):
        self.stop()
        tail = "\n".join(self.console[-40:])
        die(f"guest: {why}\n---- console (last lines) ----\n{tail}")

    def expect(self, what: str) -> str:
        want = f"HVIO-GUEST {what}"
        while True:
            try:
                line = self.lines.get(timeout=max(1.0, self.deadline - time.monotonic()))
            except queue.Empty:
                self.fail(f"no `{want}` in time")
            if line is None:
                self.fail(f"QEMU exited before `{want}`")
            line = line[line.find("HVIO-GUEST") :] if "HVIO-GUEST" in line else line
            if line.startswith(want):
                return line[len(want) :].strip()
            if "HVIO-GUEST result FAIL" in line or "Kernel panic" in line:
                self.fail(f"reported `{line}`")

    def sample(self) -> dict:
        stats = self.qmp.call("query-blockstats")
        d0 = next((s["stats"] for s in stats if s.get("device") == "d0"), None)
        if d0 is None:
            self.fail("query-blockstats has no device d0")
        pid = self.proc.pid
        return {
            "t": time.monotonic(),
            "io": ticks(pid, self.iothread),
            "io_ns": on_cpu_ns(pid, self.iothread),
            "io_sleeps": sleeps(pid, self.iothread),
            "main": ticks(pid, pid),
            "vcpu": sum(ticks(pid, t) for t in self.vcpus),
            "wr_ops": d0["wr_operations"],
            "wr_bytes": d0["wr_bytes"],
            "wr_merged": d0.get("wr_merged", 0),
            "jobs_done": self.jobs_done,
        }

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def boot(k, initrd: Path, image: Path, scratch: Path, args, jobs: list[str]) -> "Guest":
    """Boots the guest for `jobs` and checks the iothread serves its disk."""
    guest = Guest(k, initrd, image, scratch, args, jobs)
    disk = guest.expect("disk") + " queues=" + guest.expect("queues=")
    # virtio-blk falls back to the vCPU thread when it cannot set up the
    # iothread's notifiers: then "IO io0" would measure nothing.
    fallback = [line for line in guest.console if "Fallback to userspace" in line or "failed to set" in line]
    if fallback:
        guest.fail(f"QEMU did not start the iothread's dataplane: {fallback[0]}")
    print(
        f"# guest: {args.vcpus} vCPU, fio numjobs {args.numjobs} × iodepth {args.iodepth}, "
        f"O_DIRECT, libaio; {disk}"
    )
    return guest


def measure(guest: "Guest", timed: list[str], args) -> list[tuple[str, dict]]:
    """One row per job of `timed`: the iothread's and the other threads'
    CPU per request between two readings inside the job's run."""
    rows = []
    for job in timed:
        rw, kib = job.split(":")
        guest.expect(f"job {rw} {kib} start")
        time.sleep(args.warm)
        a = guest.sample()
        time.sleep(args.seconds)
        b = guest.sample()
        done = guest.expect(f"job {rw} {kib} done")
        if b["jobs_done"] != a["jobs_done"]:
            guest.fail(f"the guest's output ran ahead of the measurement of {job}")
        reqs = b["wr_ops"] - a["wr_ops"]
        if reqs <= 0:
            guest.fail(f"no write requests reached QEMU during {job}")
        row = {
            "reqs": reqs,
            "iops": reqs / (b["t"] - a["t"]),
            "kib": (b["wr_bytes"] - a["wr_bytes"]) / reqs / 1024,
            "merged": b["wr_merged"] - a["wr_merged"],
            "io_us": (b["io"] - a["io"]) / CLK_TCK / reqs * 1e6,
            "io_sched_us": (b["io_ns"] - a["io_ns"]) / 1e3 / reqs,
            "per_wake": reqs / max(1, b["io_sleeps"] - a["io_sleeps"]),
            "main_us": (b["main"] - a["main"]) / CLK_TCK / reqs * 1e6,
            "vcpu_us": (b["vcpu"] - a["vcpu"]) / CLK_TCK / reqs * 1e6,
            "fio": done,
        }
        print(
            f"# {rw} {kib} KiB: {reqs} requests, {row['iops']:.0f} IOPS, iothread {row['io_us']:.2f} µs"
            f" ({row['io_sched_us']:.2f} on-CPU by schedstat), "
            f"main loop {row['main_us']:.2f} µs per request, "
            f"{row['per_wake']:.1f} requests per iothread wake-up",
            flush=True,
        )
        rows.append((job, row))
    return rows


def least_squares(xs: list[float], ys: list[float]) -> dict[str, float]:
    """y = a + b × x by least squares, with the standard errors of a and b
    (residuals over n − 2 degrees of freedom) and the correlation."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    if sxx == 0:
        die("every round blocked equally often per request: no line can be fitted")
    b = sxy / sxx
    a = my - b * mx
    s2 = sum((y - a - b * x) ** 2 for x, y in zip(xs, ys)) / (n - 2) if n > 2 else float("nan")
    return {
        "a": a,
        "b": b,
        "se_a": (s2 * (1 / n + mx * mx / sxx)) ** 0.5,
        "se_b": (s2 / sxx) ** 0.5,
        "r": sxy / (sxx * syy) ** 0.5 if syy > 0 else float("nan"),
    }


def report_fit(points: list[tuple[int, int, dict]], img_us: float) -> None:
    """Every round's point, the line through them and the busy thread's share."""
    print()
    print("Every round of random 4 KiB writes (the iothread's CPU per request and its blocks per request):")
    print()
    print("| guest | IOPS | requests | iothread µs per request | blocks per request | requests per block |")
    print("|---|---:|---:|---:|---:|---:|")
    xs, ys = [], []
    for vcpus, numjobs, r in points:
        x = 1 / r["per_wake"]
        xs.append(x)
        ys.append(r["io_us"])
        print(
            f"| {vcpus} vCPU, {numjobs} fio job{'s' if numjobs > 1 else ''} "
            f"| {r['iops']:.0f} | {r['reqs']} | {r['io_us']:.2f} "
            f"| {x:.3f} | {r['per_wake']:.2f} |"
        )
    fit = least_squares(xs, ys)
    g = fit["a"] - img_us
    print()
    print(f"fit over {len(xs)} rounds: iothread µs per request = a + b × blocks per request")
    print(f"  a = {fit['a']:.2f} ± {fit['se_a']:.2f} µs (a thread that never blocks)")
    print(f"  b = {fit['b']:.2f} ± {fit['se_b']:.2f} µs per block (blocking and being woken)")
    print(f"  correlation {fit['r']:.3f}; blocks per request observed {min(xs):.3f} to {max(xs):.3f}")
    print(f"  same-version qemu-img µs per 4 KiB write (least before and after): {img_us:.2f}")
    print(f"guest_request_us = g = a - qemu-img = {fit['a']:.2f} - {img_us:.2f} = {g:.2f}", end="")
    print(" (≤ 0: use 0)" if g <= 0 else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5, help="rounds of every job (least CPU kept)")
    ap.add_argument("--seconds", type=int, default=10, help="measured seconds of each job")
    ap.add_argument("--warm", type=int, default=3, help="seconds of each job before the measurement")
    ap.add_argument(
        "--jobs",
        help="fio RW:KIB,... (default randwrite:4,randwrite:16,randwrite:64,write:4; --fit: randwrite:4)",
    )
    ap.add_argument("--iodepth", type=int, default=64)
    ap.add_argument("--numjobs", type=int, default=8)
    ap.add_argument("--vcpus", type=int, default=2)
    ap.add_argument("--image-mib", type=int, default=1024)
    ap.add_argument("--dir", default=os.environ.get("TMPDIR", "/var/tmp"))
    ap.add_argument("--no-strace", action="store_true", help="skip the system-call counts")
    ap.add_argument(
        "--fit",
        action="store_true",
        help="fit the iothread's µs per request against its blocks per request over the --guests",
    )
    ap.add_argument(
        "--guests",
        default="2x8,1x1",
        help="with --fit: the guests, VCPUSxNUMJOBS,... (each booted once, ROUNDS rounds)",
    )
    args = ap.parse_args()
    if args.fit and args.jobs is not None:
        die("--fit runs random 4 KiB writes only; drop --jobs")
    if args.jobs is None:
        args.jobs = "randwrite:4" if args.fit else "randwrite:4,randwrite:16,randwrite:64,write:4"
    guests = []
    for g in args.guests.split(","):
        vcpus, _, numjobs = g.partition("x")
        if not (vcpus.isdigit() and numjobs.isdigit() and int(vcpus) >= 1 and int(numjobs) >= 1):
            die(f"--guests: `{g}` is not VCPUSxNUMJOBS with both positive integers")
        guests.append((int(vcpus), int(numjobs)))
    if args.fit and len(guests) < 2:
        die(f"--fit needs at least two guests of different speeds, not `{args.guests}`")
    for name in ("rounds", "seconds", "warm", "iodepth", "numjobs", "vcpus", "image_mib"):
        if getattr(args, name) < 1 and not (name == "warm" and getattr(args, name) == 0):
            die(f"--{name.replace('_', '-')} must be a positive integer, not `{getattr(args, name)}`")
    jobs = []
    for job in args.jobs.split(","):
        rw, _, kib = job.partition(":")
        if rw not in ("randwrite", "write") or not kib.isdigit() or int(kib) < 1:
            die(f"--jobs: `{job}` is not RW:KIB with RW randwrite or write and KIB a positive integer")
        jobs.append((rw, int(kib)))
    if not Path(args.dir).is_dir():
        die(f"--dir `{args.dir}` is not a directory")
    if args.fit:
        args.no_strace = True
    if not args.no_strace and not shutil.which("strace"):
        die("strace not found (Debian: apt-get install strace), or pass --no-strace")

    k = kit()
    img_same = same_version_qemu_img(k)
    img_host = shutil.which("qemu-img")
    scratch = Path(tempfile.mkdtemp(prefix="hvio-qemu-vq.", dir=args.dir))
    guest = None
    try:
        image = scratch / "image.raw"
        # Written once in full, so no write meets an unwritten extent.
        subprocess.run(
            [
                "dd",
                "if=/dev/zero",
                f"of={image}",
                "bs=1M",
                f"count={args.image_mib}",
                "oflag=direct",
                "status=none",
            ],
            check=True,
        )
        initrd = overlay_initrd(k, scratch)
        banner = subprocess.run(
            [k["QEMU"], "--version"], env=qemu_env(k), capture_output=True, text=True
        ).stdout
        print(f"# guest QEMU: {banner.splitlines()[0]} (TCG)")
        print(f"# CPU: {cpu_model()}, {os.cpu_count()} cores; kernel {os.uname().release}")
        fs = (
            subprocess.run(["df", "-T", str(scratch)], capture_output=True, text=True)
            .stdout.splitlines()[1]
            .split()
        )
        print(
            f"# file system of {args.dir}: {fs[1]} on {fs[0]}; "
            f"image {args.image_mib} MiB raw, written in full"
        )
        print(f"# load average before: {loadavg()}")

        sizes = sorted({kib for rw, kib in jobs if rw == "randwrite"} | {4})
        imgs = [("same", img_same)]
        if img_host:
            imgs.append(("host", Path(img_host)))
        img_cost = {}
        for which, img in imgs:
            version = subprocess.run(
                [str(img), "--version"], capture_output=True, text=True
            ).stdout.splitlines()[0]
            img_cost[which] = qemu_img_costs(img, image, sizes, args.rounds)
            per = ", ".join(f"{kib} KiB {us:.2f}" for kib, us in img_cost[which].items())
            print(f"# {version}: writes, CPU µs per request (least of {args.rounds}): {per}")

        timed = [f"{rw}:{kib}" for _ in range(args.rounds) for rw, kib in jobs]
        if args.fit:
            points = []
            for vcpus, numjobs in guests:
                gargs = argparse.Namespace(**{**vars(args), "vcpus": vcpus, "numjobs": numjobs})
                guest = boot(k, initrd, image, scratch, gargs, timed)
                points += [(vcpus, numjobs, row) for _, row in measure(guest, timed, gargs)]
                guest.expect("result ok")
                guest.proc.wait(timeout=60)
                guest = None
            after = qemu_img_costs(img_same, image, [4], args.rounds)
            print(f"# the same-version qemu-img again after the guests: 4 KiB {after[4]:.2f}")
            print(f"# load average after: {loadavg()}")
            report_fit(points, min(img_cost["same"][4], after[4]))
            return
        traced = [] if args.no_strace else ["randwrite:4"]
        guest = boot(k, initrd, image, scratch, args, timed + traced)
        best: dict[tuple[str, int], dict] = {}
        for job, row in measure(guest, timed, args):
            rw, kib = job.split(":")
            key = (rw, int(kib))
            if key not in best or row["io_us"] < best[key]["io_us"]:
                best[key] = row

        calls = None
        if traced:
            guest.expect("job randwrite 4 start")
            time.sleep(args.warm)
            out = scratch / "iothread.strace"
            a = guest.sample()
            tracer = subprocess.Popen(["strace", "-c", "-q", "-o", str(out), "-p", str(guest.iothread)])
            time.sleep(args.seconds)
            tracer.send_signal(signal.SIGINT)
            tracer.wait()
            b = guest.sample()
            guest.expect("job randwrite 4 done")
            calls = (b["wr_ops"] - a["wr_ops"], strace_counts(out))
        guest.expect("result ok")
        guest.proc.wait(timeout=60)
        guest = None
        after = qemu_img_costs(img_same, image, sizes, args.rounds)
        img_cost["same"] = {kib: min(us, after[kib]) for kib, us in img_cost["same"].items()}
        per = ", ".join(f"{kib} KiB {us:.2f}" for kib, us in after.items())
        print(f"# the same-version qemu-img again after the guest: {per}")

        print(f"# load average after: {loadavg()}")
        print()
        print(
            "The iothread's CPU per guest request (least of the rounds), beside qemu-img bench's per write:"
        )
        print()
        print(
            "| fio job | requests measured | IOPS | KiB per request | iothread µs | qemu-img µs (same QEMU)",
            end="",
        )
        print(" | difference: virtqueue + notification µs | main loop µs | vCPU µs | requests per wake-up |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for (rw, kib), r in sorted(best.items()):
            same = img_cost["same"].get(kib) if rw == "randwrite" else None
            cols = [
                f"{rw} {kib} KiB",
                f"{r['reqs']}",
                f"{r['iops']:.0f}",
                f"{r['kib']:.1f}",
                f"{r['io_us']:.2f}",
            ]
            cols += [
                f"{same:.2f}" if same is not None else "",
                f"{r['io_us'] - same:.2f}" if same is not None else "",
            ]
            cols += [f"{r['main_us']:.2f}", f"{r['vcpu_us']:.1f}", f"{r['per_wake']:.1f}"]
            print("| " + " | ".join(cols) + " |")
        if calls:
            reqs, counts = calls
            print()
            print(f"System calls per request, `strace -c` on the iothread over {reqs} random 4 KiB writes:")
            print("  " + per_request(counts, reqs))
            n, img_counts = qemu_img_syscalls(img_same, image, scratch)
            print(f"and on qemu-img bench (same QEMU, all its threads) over {n} 4 KiB writes:")
            print("  " + per_request(img_counts, n))
            print(
                f"The iothread took {reqs / max(1, counts.get('ppoll', 0)):.1f} requests "
                "per wake-up (ppoll), "
                f"{reqs / max(1, counts.get('io_submit', 0)):.1f} per io_submit and "
                f"{reqs / max(1, counts.get('write', 0)):.1f} per guest notification (eventfd write)."
            )
        rw4 = best.get(("randwrite", 4))
        if rw4:
            g = rw4["io_us"] - img_cost["same"][4]
            print()
            print(
                f"iothread less qemu-img, random 4 KiB writes at this guest's rate: "
                f"{rw4['io_us']:.2f} - {img_cost['same'][4]:.2f} = {g:.2f} µs "
                "(blocking and waking included; --fit gives a busy thread's share)"
            )
    finally:
        if guest is not None:
            guest.stop()
        shutil.rmtree(scratch, ignore_errors=True)


def per_request(counts: dict[str, int], reqs: int) -> str:
    """System calls per request, the most frequent first, those under 0.001 left out."""
    rows = sorted(((c / reqs, n) for n, c in counts.items() if c / reqs >= 0.001), reverse=True)
    return ", ".join(f"{n} {per:.3f}" for per, n in rows)


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


if __name__ == "__main__":
    main()
