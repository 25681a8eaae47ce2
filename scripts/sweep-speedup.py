"""Time a sweep on every core against the same runs one by one.

Runs a study (default: experiments/paper000-schedulers.study.toml, 100
runs) twice without the cache: one worker thread, then one per core; checks
the two give byte-identical results and prints both times, the CPU time
each used, the ratio and the machine's load average (it may be shared).

    .venv/bin/python scripts/sweep-speedup.py [STUDY] [--workers N]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from hvio import sweeps as sw

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "study", nargs="?", type=Path, default=ROOT / "experiments" / "paper000-schedulers.study.toml"
    )
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    a = p.parse_args()
    study = sw.load_study(a.study)
    n = len(sw.plan(study))  # also hashes the extension module once (the cache key), outside the timings
    print(
        f"{study.name}: {n} runs; {os.cpu_count()} cores; load average before {os.getloadavg()}", flush=True
    )
    t, cpu = time.perf_counter(), time.process_time()
    one = sw.sweep(study, out=None, workers=1, progress=False)
    serial, serial_cpu = time.perf_counter() - t, time.process_time() - cpu
    print(
        f"one by one: {serial:7.1f} s, {serial_cpu:.1f} s of CPU (load average {os.getloadavg()})", flush=True
    )
    t, cpu = time.perf_counter(), time.process_time()
    many = sw.sweep(study, out=None, workers=a.workers, progress=False)
    parallel, parallel_cpu = time.perf_counter() - t, time.process_time() - cpu
    print(
        f"{a.workers} workers: {parallel:7.1f} s, {parallel_cpu:.1f} s of CPU "
        f"(load average {os.getloadavg()})",
        flush=True,
    )
    same = [json.dumps(r) for r in one.results] == [json.dumps(r) for r in many.results]
    # CPU seconds per wall second: the cores the process got. With the cores
    # free, two workers get about 2; on a shared machine the kernel's
    # autogroup gives this session one share however many threads it runs.
    print(
        f"cores used: {serial_cpu / serial:.2f} one by one, {parallel_cpu / parallel:.2f} "
        f"on {a.workers} workers (autogroup scheduling {_autogroup()})"
    )
    print(
        f"speed-up: {serial / parallel:.2f}x wall clock, CPU time {parallel_cpu / serial_cpu:.2f}x; "
        f"load average after {os.getloadavg()}; results identical: {'yes' if same else 'NO'}"
    )
    return 0 if same else 1


def _autogroup() -> str:
    try:
        on = Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip() == "1"
    except OSError:
        return "unknown"
    return "on" if on else "off"


if __name__ == "__main__":
    sys.exit(main())
