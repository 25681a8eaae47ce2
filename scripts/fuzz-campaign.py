#!/usr/bin/env python3
"""The fuzz campaign: every cargo-fuzz target for a budget of CPU time.

Builds both fuzz crates (`crates/hvio-vdisk/fuzz`, `crates/hvio-trace/fuzz`),
then runs each target from its committed seed corpus (`fuzz/seeds/TARGET`,
new inputs kept in the git-ignored `fuzz/corpus/TARGET`) until the fuzzer
process has used `--cpu-minutes` of CPU time (user + system, all threads, read
from /proc: libFuzzer's own `-max_total_time` counts wall time, which on a
shared machine is not the effort spent).

Resumable: SIGINT or SIGTERM stops the fuzzers, records what each used and
exits; every run appends a row to the ledger (`target/fuzz-campaign.tsv`
by default) keyed by the target's identity, a hash of its fuzz binary and its
seed corpus. A target whose rows for the current identity already add up to
the budget is skipped; one interrupted part-way resumes with what is left.
A changed binary or corpus starts that target again. A crash stops the
target; its input is kept under `fuzz/artifacts/TARGET` and named in the
ledger.

    python3 scripts/fuzz-campaign.py               # the whole campaign
    python3 scripts/fuzz-campaign.py --report      # the ledger as a table
    nice -n 19 python3 scripts/fuzz-campaign.py --targets msr,spc
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CRATES = [ROOT / "crates/hvio-trace/fuzz", ROOT / "crates/hvio-vdisk/fuzz"]
TRIPLE = "x86_64-unknown-linux-gnu"
COLUMNS = [
    "identity",
    "target",
    "cpu_s",
    "wall_s",
    "runs",
    "cov",
    "ft",
    "corpus",
    "crash",
    "commit",
    "finished_utc",
]
STATUS = re.compile(r"#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+) corp: (\d+)")
TICKS = os.sysconf("SC_CLK_TCK")
# Set by SIGINT/SIGTERM: the fuzzers stop, their rows are written, no target starts.
STOPPING = threading.Event()


def targets_of(crate: Path) -> list[str]:
    return sorted(p.stem for p in (crate / "fuzz_targets").glob("*.rs"))


def build(crate: Path) -> None:
    subprocess.run(
        ["cargo", "+nightly", "fuzz", "build", "-s", "none", "--release"],
        cwd=crate,
        check=True,
    )


def binary(crate: Path, target: str) -> Path:
    return crate / "target" / TRIPLE / "release" / target


def sha256_of(paths: list[Path]) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(p.name.encode())
        h.update(b"\0")
        h.update(p.read_bytes())
    return h.hexdigest()


def identity(crate: Path, target: str) -> str:
    seeds = sorted((crate / "seeds" / target).glob("*"))
    return sha256_of([binary(crate, target)])[:16] + "-" + sha256_of(seeds)[:12]


def commit() -> str:
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(["git", "diff", "--quiet", "HEAD"], cwd=ROOT).returncode != 0
    return head + ("-dirty" if dirty else "")


def read_ledger(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    return [dict(zip(COLUMNS, line.split("\t"))) for line in lines[1:] if line]


def append_ledger(path: Path, row: dict[str, str]) -> None:
    new = not path.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        if new:
            f.write("\t".join(COLUMNS) + "\n")
        f.write("\t".join(str(row[c]) for c in COLUMNS) + "\n")


def cpu_seconds(pid: int) -> float:
    """User + system time of a live process, all its threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def fuzz(crate: Path, target: str, budget_s: float, log: Path) -> dict[str, object]:
    corpus = crate / "corpus" / target
    seeds = crate / "seeds" / target
    artifacts = crate / "artifacts" / target
    for d in (corpus, artifacts):
        d.mkdir(parents=True, exist_ok=True)
    cmd = [
        str(binary(crate, target)),
        str(corpus),
        str(seeds),
        f"-artifact_prefix={artifacts}/",
        "-print_final_stats=1",
    ]
    start = time.monotonic()
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=crate)
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if STOPPING.is_set() or cpu_seconds(proc.pid) >= budget_s:
                proc.send_signal(signal.SIGINT)
                _, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(1)
        # wait4's usage is the process's whole CPU time, including what it used after the last poll.
        proc.returncode = os.waitstatus_to_exitcode(status)
        cpu = usage.ru_utime + usage.ru_stime
    text = log.read_text(errors="replace")
    runs = cov = ft = corp = 0
    for m in STATUS.finditer(text):
        runs, cov, ft, corp = (int(g) for g in m.groups())
    executed = re.search(r"stat::number_of_executed_units: (\d+)", text)
    runs = int(executed.group(1)) if executed else runs
    crash = re.search(r"Test unit written to (\S+)", text)
    return {
        "cpu_s": f"{cpu:.1f}",
        "wall_s": f"{time.monotonic() - start:.1f}",
        "runs": runs,
        "cov": cov,
        "ft": ft,
        "corpus": corp,
        "crash": crash.group(1) if crash else "-",
    }


def report(rows: list[dict[str, str]], budget_s: float, targets: list[str]) -> None:
    """The latest identity of each target: CPU so far, last coverage, crashes;
    the targets not run yet at the end."""
    latest: dict[str, dict[str, object]] = {}
    for r in rows:
        t = latest.get(r["target"])
        if t is None or t["identity"] != r["identity"]:
            t = latest[r["target"]] = {"identity": r["identity"], "cpu": 0.0, "runs": 0, "crashes": 0}
        t["cpu"] += float(r["cpu_s"])
        t["runs"] += int(r["runs"])
        t["crashes"] += r["crash"] != "-"
        t.update(cov=r["cov"], ft=r["ft"], corpus=r["corpus"], commit=r["commit"])
    print("| target | CPU min | runs | cov | ft | corpus | crashes | commit |")
    print("|---|---|---|---|---|---|---|---|")
    for name, t in sorted(latest.items()):
        mark = "" if t["cpu"] >= budget_s else " (short)"
        print(
            f"| `{name}` | {t['cpu'] / 60:.1f}{mark} | {t['runs']:,} | {t['cov']} | {t['ft']} "
            f"| {t['corpus']} | {t['crashes']} | {t['commit']} |"
        )
    for name in sorted(set(targets) - set(latest)):
        print(f"| `{name}` | not run | | | | | | |")
    done = sum(t["cpu"] >= budget_s for t in latest.values())
    total = len(set(targets) | set(latest))
    print(f"\n{done} of {total} targets ran at least {budget_s / 60:g} CPU-minutes")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cpu-minutes", type=float, default=10.0, help="CPU budget per target (default 10)")
    ap.add_argument("--targets", help="comma-separated targets (default: all of both fuzz crates)")
    ap.add_argument("--ledger", type=Path, default=ROOT / "target/fuzz-campaign.tsv")
    ap.add_argument("--jobs", type=int, default=1, help="targets fuzzed at once (default 1)")
    ap.add_argument("--no-build", action="store_true", help="use the fuzz binaries already built")
    ap.add_argument("--report", action="store_true", help="print the ledger as a table and stop")
    a = ap.parse_args()
    budget = a.cpu_minutes * 60
    plan = [(c, t) for c in CRATES for t in targets_of(c)]
    if a.report:
        report(read_ledger(a.ledger), budget, [t for _, t in plan])
        return 0
    if a.targets:
        wanted = a.targets.split(",")
        unknown = set(wanted) - {t for _, t in plan}
        if unknown:
            sys.exit(f"fuzz-campaign: no fuzz target named {', '.join(sorted(unknown))}")
        plan = [(c, t) for c, t in plan if t in wanted]
    for crate, target in plan:
        if not (crate / "seeds" / target).is_dir():
            sys.exit(f"fuzz-campaign: {target} has no seed corpus at {crate / 'seeds' / target}")
    logs = a.ledger.parent / "fuzz-campaign-logs"
    logs.mkdir(parents=True, exist_ok=True)
    lock, build_lock = threading.Lock(), threading.Lock()
    built: set[Path] = set()

    def one(crate: Path, target: str) -> bool:
        """Fuzzes one target for what is left of its budget; True when it crashed."""
        if STOPPING.is_set():
            return False
        # Each crate is built when its first target comes up, so fuzzing starts
        # while the other crate still builds.
        if crate not in built:
            with build_lock:
                if crate not in built and not a.no_build:
                    build(crate)
                built.add(crate)
        ident = identity(crate, target)
        with lock:
            rows = [r for r in read_ledger(a.ledger) if r["identity"] == ident and r["target"] == target]
        spent = sum(float(r["cpu_s"]) for r in rows)
        if any(r["crash"] != "-" for r in rows):
            print(f"{target}: crashed before ({rows[-1]['crash']}); fix it and rebuild", flush=True)
            return True
        if spent >= budget:
            print(f"{target}: done ({spent / 60:.1f} CPU-min for this build and corpus)", flush=True)
            return False
        print(f"{target}: fuzzing {(budget - spent) / 60:.1f} CPU-min more", flush=True)
        result = fuzz(crate, target, budget - spent, logs / f"{target}.log")
        row = {"identity": ident, "target": target, "commit": commit(), **result}
        row["finished_utc"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        with lock:
            append_ledger(a.ledger, row)
        print(
            f"{target}: {result['cpu_s']} CPU-s in {result['wall_s']} s, {result['runs']} runs, "
            f"cov {result['cov']}, crash {result['crash']}",
            flush=True,
        )
        return result["crash"] != "-"

    def stop(signum: int, _frame: object) -> None:
        print(f"fuzz-campaign: {signal.Signals(signum).name}: stopping the fuzzers", flush=True)
        STOPPING.set()

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    with ThreadPoolExecutor(max_workers=a.jobs) as pool:
        failed = sum(pool.map(lambda ct: one(*ct), plan))
    report(read_ledger(a.ledger), budget, [t for _, t in plan])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
