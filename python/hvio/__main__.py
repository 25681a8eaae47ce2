"""``python -m hvio run``: the main job of ``make run``.

Runs paper 000's four-VM scenario (embedded) under every registered host
scheduler, prints the per-VM comparison table, and writes JSON results and
figures under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from . import api, plots


def _table(results: list[api.Result]) -> pd.DataFrame:
    rows = []
    for r in results:
        row = {"scheduler": r.scheduler}
        for _, v in r.vms.iterrows():
            row[f"{v['vm']} MB/s"] = round(v["mb_per_s"], 2)
        row["total MB/s"] = round(r.total_mb_per_s, 2)
        row["zero seek %"] = round(100 * r.host["seek"]["zero_frac"], 1)
        row["idle-wait s"] = round(r.host["idle_pending_s"], 2)
        row["sim s"] = round(r.raw["sim_time_s"], 1)
        rows.append(row)
    return pd.DataFrame(rows).set_index("scheduler")


def _jobs(results: list[api.Result]) -> pd.DataFrame:
    frames = []
    for r in results:
        j = r.jobs[["vm", "job", "exec_time_s"]].copy()
        j["scheduler"] = r.scheduler
        frames.append(j)
    df = pd.concat(frames)
    return df.pivot_table(index=["vm", "job"], columns="scheduler", values="exec_time_s", sort=False)[
        [r.scheduler for r in results]
    ].round(2)


def run(out: Path, config: str | None, schedulers: list[str] | None) -> int:
    out.mkdir(parents=True, exist_ok=True)
    names = schedulers or api.schedulers()
    print(f"paper 000's four-VM scenario under {len(names)} host schedulers: {', '.join(names)}", flush=True)
    results = []
    for name in names:
        print(f"  simulating {name} ...", flush=True)
        results.extend(api.compare(config, [name]))
    with pd.option_context("display.width", 200, "display.max_columns", 50):
        print("\nPer-VM bandwidth (MB/s) by host scheduler")
        print(_table(results).to_string())
        print("\nJob execution time (s) by host scheduler")
        print(_jobs(results).to_string())
    tmp = out / "compare.json.tmp"
    tmp.write_text(json.dumps([r.raw for r in results], indent=1))
    tmp.rename(out / "compare.json")
    # The seed column names what reproduces each row (compare.json has it too).
    _table(results).assign(seed=[r.raw["seed"] for r in results]).to_csv(out / "compare.csv")
    plots.bandwidth_by_scheduler(results, out / "bandwidth_by_scheduler.png")
    plots.seek_distribution(results, out / "seek_distribution.png")
    for r in results:
        plots.throughput_over_time(r, out / f"throughput_{r.scheduler}.png")
    print(f"\nresults: {out / 'compare.json'}, {out / 'compare.csv'}; figures: {out}/*.png")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m hvio", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="paper 000's four VMs under every scheduler")
    r.add_argument("--out", type=Path, default=Path("out"))
    r.add_argument("--config", help="a config file instead of the embedded scenario")
    r.add_argument("--schedulers", help="comma-separated subset")
    e = sub.add_parser("reproduce", help="run a paper experiment by name")
    e.add_argument("name")
    e.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    try:
        if args.cmd == "run":
            names = args.schedulers.split(",") if args.schedulers else None
            return run(args.out, args.config, names)
        rep = api.reproduce(args.name, quick=args.quick)
        print(f"{rep.name}: seed {rep.seed}{', quick run' if rep.quick else ''}\n")
        for title, df in rep.tables.items():
            print(title)
            print(df.to_string(index=False))
            print()
        for n in rep.notes:
            print("note:", n)
        return 0
    except api._hvio.HvioError as e:
        print(f"hvio: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
