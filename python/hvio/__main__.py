"""``python -m hvio run``: the main job of ``make run``.

Compares the host schedulers on a config (default: paper 000's four-VM
scenario, embedded): prints the per-scheduler and per-VM tables of
``hvio compare`` and its verdict, and writes the comparison (JSON, CSV) and
its figures under ``--out``. ``python -m hvio figures JSON`` draws the
figures of a comparison written by ``hvio compare --json``;
``python -m hvio hdd-cdfs OUT --data DIR`` the service-time CDFs of every
disk written by ``hvio validate-disk --all DIR --out OUT``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import pandas as pd

from . import api, hdd_validation, htmlreport, plots, studies, sweeps


def _cell(mean: float, sd: float, digits: int, spread: bool) -> str:
    if not math.isfinite(mean):
        return "inf"
    return f"{mean:.{digits}f}±{sd:.{digits}f}" if spread else f"{mean:.{digits}f}"


def scheduler_table(c: api.Comparison) -> pd.DataFrame:
    """Per scheduler: total MB/s, fairness, the worst VM's p99, starved VMs."""
    sp = len(c.seeds) > 1
    rows = []
    for _, s in c.schedulers.iterrows():
        rows.append(
            {
                "scheduler": s["scheduler"],
                "total MB/s": _cell(s["total_mb_per_s"], s["total_mb_per_s_sd"], 2, sp),
                "fairness (Jain)": _cell(s["jain"], s["jain_sd"], 3, sp),
                "worst p99 ms": _cell(s["worst_p99_ms"], s["worst_p99_ms_sd"], 1, sp),
                "worst VM": s["worst_p99_vm"],
                "starved": s["starved"] or "-",
            }
        )
    return pd.DataFrame(rows).set_index("scheduler")


def vm_table(c: api.Comparison) -> pd.DataFrame:
    """Per scheduler and VM: throughput, latency, disk share against weight share, slowdown."""
    sp = len(c.seeds) > 1
    rows = []
    for _, v in c.vms.iterrows():
        rows.append(
            {
                "scheduler": v["scheduler"],
                "vm": v["vm"],
                "MB/s": _cell(v["mb_per_s"], v["mb_per_s_sd"], 2, sp),
                "IOPS": _cell(v["iops"], v["iops_sd"], 1, sp),
                "p50 ms": _cell(v["p50_ms"], v["p50_ms_sd"], 1, sp),
                "p99 ms": _cell(v["p99_ms"], v["p99_ms_sd"], 1, sp),
                "p99.9 ms": _cell(v["p999_ms"], v["p999_ms_sd"], 1, sp),
                "disk %": _cell(100 * v["disk_share"], 100 * v["disk_share_sd"], 1, sp),
                "weight %": f"{100 * v['weight_share']:.1f}",
                "alone MB/s": _cell(v["alone_mb_per_s"], v["alone_mb_per_s_sd"], 2, sp),
                "slowdown": _cell(v["slowdown"], v["slowdown_sd"], 1, sp) + "x",
            }
        )
    return pd.DataFrame(rows).set_index(["scheduler", "vm"])


def job_table(c: api.Comparison) -> pd.DataFrame | None:
    """Execution time (s) of every job that ends by size or request count,
    by scheduler (first seed); time-based jobs run their runtime under every
    scheduler and are left out. ``None`` when every job is time-based."""
    timed = {tuple(x) for x in c.raw["time_based"]}
    first = [r for r in c.runs if r.raw["seed"] == c.seeds[0]]
    frames = []
    for r in first:
        j = r.jobs[["vm", "job", "exec_time_s"]].copy()
        j["scheduler"] = r.scheduler
        frames.append(j[[(vm, job) not in timed for vm, job in zip(j["vm"], j["job"])]])
    df = pd.concat(frames)
    if df.empty:
        return None
    return df.pivot_table(index=["vm", "job"], columns="scheduler", values="exec_time_s", sort=False)[
        [r.scheduler for r in first]
    ].round(2)


def report(c: api.Comparison) -> str:
    """The comparison as text: the two tables, the notes and the verdict."""
    with pd.option_context("display.width", 250, "display.max_columns", 50):
        parts = [
            f"{c.config} by host scheduler ({c.seed_text})",
            scheduler_table(c).to_string(),
            "",
            "per VM; slowdown = MB/s alone on the disk / MB/s shared",
            vm_table(c).to_string(),
            "",
        ]
        jobs = job_table(c)
        if jobs is not None:
            parts += [f"job execution time (s) by host scheduler (seed {c.seeds[0]})", jobs.to_string(), ""]
    parts += [f"note: {n}" for n in c.notes]
    parts += ["", "verdict"] + [f"  {v}" for v in c.verdict]
    return "\n".join(parts)


def write_csv(c: api.Comparison, path: Path) -> None:
    """One row per scheduler and VM; the last column names the seeds that reproduce it."""
    df = c.vms.merge(
        c.schedulers[["scheduler", "total_mb_per_s", "jain", "worst_p99_ms"]], on="scheduler", how="left"
    )
    df["seed"] = " ".join(str(s) for s in c.seeds)
    tmp = path.with_name(path.name + ".tmp")
    df.to_csv(tmp, index=False)
    tmp.rename(path)


def run(out: Path, config: str | None, schedulers: list[str] | None, seeds: int = 1) -> int:
    out.mkdir(parents=True, exist_ok=True)
    names = schedulers or api.schedulers()
    what = config if config else "paper 000's four-VM scenario (embedded)"
    print(f"{what} under {len(names)} host schedulers: {', '.join(names)}", flush=True)
    c = api.comparison(config, names, seeds=seeds)
    print(report(c))
    tmp = out / "compare.json.tmp"
    tmp.write_text(json.dumps(c.raw, indent=1))
    tmp.rename(out / "compare.json")
    write_csv(c, out / "compare.csv")
    plots.comparison_figures(c, out)
    page, _ = htmlreport.write(out)
    print(f"\nresults: {out / 'compare.json'}, {out / 'compare.csv'}; figures: {out}/*.png; report: {page}")
    return 0


def figures(json_path: Path, out: Path, fmt: str) -> int:
    c = api.load_comparison(json_path)
    for p in plots.comparison_figures(c, out, fmt):
        print(p)
    return 0


def sweep(study: Path, out: Path, cluster: str | None, workers: int | None, cache: bool) -> int:
    st = sweeps.load_study(study)
    where = f"the Dask cluster at {cluster}" if cluster else f"{workers or os.cpu_count()} local worker(s)"
    how = dict(out=out, cluster=cluster, workers=workers, cache=cache)
    if st.stages:
        # Each stage's runs are known once the stages before it have run.
        print(f"{st.name}: {len(st.stages)} stages on {where}", flush=True)
        done = sweeps.sweep_stages(st, **how)
    else:
        print(f"{st.name}: {len(sweeps.plan(st))} runs on {where}", flush=True)
        done = {"": sweeps.sweep(st, **how)}
    for name, s in done.items():
        if name:
            print(f"\nstage {name}: {len(s.runs)} runs")
        if s.study.kind == sweeps.SIMULATE:
            with pd.option_context("display.width", 250, "display.max_columns", 50, "display.max_rows", 500):
                print(sweeps.summary(s).round(2).to_string())
        print(
            f"\n{s.computed} run(s) computed in {s.seconds:.1f} s, {len(s.runs) - s.computed} from the cache"
        )
        assert s.out is not None
        print(f"results: {s.out / 'results.parquet'}; each run's JSON: {s.out / 'runs'}/")
    return 0


def reproduce_command(args: argparse.Namespace) -> int:
    """``hvio reproduce``: the report as text on stdout, as JSON in a file."""
    if args.list or args.name is None:
        listed = api.experiments()
        for e in listed.itertuples(index=False):
            print(f"{e.name:<22} {e.title} ({e.paper})")
        if args.name is None and not args.list:
            raise ValueError("name an experiment (see the list above)")
        return 0
    if args.seed < 0:
        raise ValueError(f"--seed {args.seed}: must be ≥ 0")
    if args.workers is not None and args.workers < 1:
        raise ValueError(f"--workers {args.workers}: must be ≥ 1")
    started = time.perf_counter()
    cpu_started = time.process_time()
    load = os.getloadavg()[0]
    counts: dict[str, int] = {}
    rep = api.reproduce(
        args.name,
        quick=args.quick,
        seed=args.seed,
        workers=args.workers,
        cache=args.out / "cache",
        recompute=args.no_cache,
        counts=counts,
    )
    json_path = args.json
    if json_path is None:
        suffix = ("-quick" if args.quick else "") + (f"-seed{args.seed}" if args.seed != 1 else "")
        json_path = args.out / f"{rep.name}{suffix}.json"
    if json_path.is_dir():
        raise ValueError(f"--json {json_path}: is a folder; name a file")
    json_path.parent.mkdir(parents=True, exist_ok=True)
    sweeps._write_whole(json_path, json.dumps(rep.raw, indent=2, ensure_ascii=False))
    sys.stdout.write(studies.render(rep.raw))
    # Run time on stderr: the report itself stays the same on every run. The
    # CPU time (user + system, every thread of this process) and the load
    # average say how much of the wall time was this run's own work.
    print(
        f"run time: {time.perf_counter() - started:.1f} s wall, "
        f"{time.process_time() - cpu_started:.1f} s CPU, load average {load:.2f} at the start",
        file=sys.stderr,
    )
    if counts:
        print(f"runs: {counts['computed']} computed, {counts['cache']} from the cache", file=sys.stderr)
    print(f"report: {json_path}")
    return 0


class StdoutWriteError(Exception):
    """A write to standard output failed (a full disk, a closed pipe)."""


class _GuardedStdout:
    """Standard output whose write errors are told apart from the command's
    own file errors, so that the message can say it was stdout that failed."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as e:
            raise StdoutWriteError(e.strerror or str(e)) from e

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as e:
            raise StdoutWriteError(e.strerror or str(e)) from e

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _stdout_failed(e: StdoutWriteError) -> int:
    print(f"hvio: error: writing to stdout: {e}", file=sys.stderr)
    # What is still buffered would fail again when the interpreter exits and
    # print a traceback: send it to /dev/null instead.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.__stdout__.fileno())
    return 1


def main(argv: list[str] | None = None) -> int:
    guarded = not isinstance(sys.stdout, _GuardedStdout)
    if guarded:
        sys.stdout = _GuardedStdout(sys.stdout)
    try:
        code = _main(argv)
        sys.stdout.flush()
        return code
    except StdoutWriteError as e:
        return _stdout_failed(e)
    finally:
        if guarded and isinstance(sys.stdout, _GuardedStdout):
            sys.stdout = sys.stdout._stream


def _main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m hvio", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="compare every scheduler on a config (default: paper 000's four VMs)")
    r.add_argument("--out", type=Path, default=Path("out"))
    r.add_argument("--config", help="a config file instead of the embedded scenario")
    r.add_argument("--schedulers", help="comma-separated subset")
    r.add_argument("--seeds", type=int, default=1, help="runs per scheduler, seeds from the config's on")
    f = sub.add_parser("figures", help="the figures of a comparison written by `hvio compare --json`")
    f.add_argument("json", type=Path)
    f.add_argument("--out", type=Path, default=Path("out"))
    f.add_argument("--format", default="png", help="png, svg, svgz, pdf or eps")
    d = sub.add_parser("hdd-cdfs", help="CDF figures of `hvio validate-disk --all DIR --out OUT`, per disk")
    d.add_argument("out", type=Path, help="the --out folder of validate-disk --all (holds NAME/cdf.csv)")
    d.add_argument("--data", type=Path, help="the disks' folder: DiskSim's CDF is drawn where NAME.outv is")
    d.add_argument("--disksim-out", type=Path, help="DiskSim's runs (NAME.outv by bench/disksim-runs.sh)")
    d.add_argument("--figure", type=Path, help="the combined figure (default OUT/cdfs.png)")
    e = sub.add_parser("reproduce", help="run a paper experiment by name (or its study file's path)")
    e.add_argument("name", nargs="?", help="an experiment's name, or the path of a study file")
    e.add_argument("--quick", action="store_true", help="the scaled-down run ([quick.matrix])")
    e.add_argument("--seed", type=int, default=1, help="the seed of every run (default 1)")
    e.add_argument("--json", type=Path, help="the JSON report (default out/NAME[-quick][-seedN].json)")
    e.add_argument("--workers", type=int, help="local threads (default: every core; 1: one by one)")
    e.add_argument("--out", type=Path, default=Path("out"), help="the cache of the runs' results: OUT/cache")
    e.add_argument("--no-cache", action="store_true", help="compute every run again (and refresh the cache)")
    e.add_argument("--list", action="store_true", help="list the experiments")
    w = sub.add_parser("sweep", help="run a study's matrix on every core or a Dask cluster")
    w.add_argument("study", type=Path, help="a study file (experiments/*.study.toml)")
    w.add_argument(
        "--out", type=Path, default=Path("out"), help="cache under OUT/cache, results under OUT/sweep"
    )
    w.add_argument("--cluster", help="a Dask scheduler's address (tcp://HOST:8786) to run on")
    w.add_argument("--workers", type=int, help="local threads (default: every core; 1: one by one)")
    w.add_argument("--no-cache", action="store_true", help="compute every run again")
    h = sub.add_parser("report", help="one HTML page of every result under --out")
    h.add_argument("--out", type=Path, default=Path("out"), help="the results to report on")
    h.add_argument("--html", type=Path, help="the page to write (default: OUT/report.html)")
    args = p.parse_args(argv)
    try:
        if args.cmd == "report":
            path, n = htmlreport.write(args.out, args.html)
            print(f"report: {path} ({n} figures)")
            return 0
        if args.cmd == "sweep":
            if args.workers is not None and args.workers < 1:
                raise ValueError(f"--workers {args.workers}: must be ≥ 1")
            return sweep(args.study, args.out, args.cluster, args.workers, not args.no_cache)
        if args.cmd == "run":
            names = args.schedulers.split(",") if args.schedulers else None
            return run(args.out, args.config, names, args.seeds)
        if args.cmd == "figures":
            return figures(args.json, args.out, args.format)
        if args.cmd == "hdd-cdfs":
            figure = args.figure or args.out / "cdfs.png"
            runs = {"data_dir": args.data, "disksim_out": args.disksim_out}
            for path in hdd_validation.plot_disks(args.out, figure, **runs):
                print(path)
            return 0
        return reproduce_command(args)
    except api._hvio.HvioError as e:
        print(f"hvio: error: {e}", file=sys.stderr)
        return 1
    except (OSError, ValueError, KeyError) as e:
        print(f"hvio: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
