"""Paper 004 (Meshram & Shrawankar) §4, Tables 1-3 and Fig. 4: HTBS against
NOOP and CFQ in a guest reading and writing 5-12 files at once.

The study (``experiments/htbs-paper004.study.toml``) runs every guest set-up
(its ``setup`` cases) for each operation and number of files; this module
sums each run up (per-file execution times, read/write rate, seek time) and
puts the paper's Tables 1-3 beside hvio's. The goal: HTBS with the lowest
seek time and the best execution time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from ..studies import Analysis, Table, number_text
from ..sweeps import StudyError, Sweep

OP, FILES, SETUP = "vm.*.job.*.rw", "vm.*.job", "setup"
PAPER_T1 = ["noop_s", "cfq_s", "htbs_s", "htbs_host_s"]
PAPER_BY_COUNT = ["noop", "cfq", "htbs"]
# The set-ups the goal checks compare.
COMPARED = ["noop", "cfq", "htbs"]


def check_paper(paper: dict[str, Any], where: Path) -> None:
    """The paper file has Table 1's 12 files in order and Tables 2-3 by file count."""
    t1 = paper.get("table1", [])
    if [r.get("file") for r in t1] != list(range(1, 13)):
        raise StudyError(f"{where}: table1 must have files 1..=12 in order")
    for key, cols in (("table1", PAPER_T1), ("table2", PAPER_BY_COUNT), ("table3", PAPER_BY_COUNT)):
        rows = paper.get(key, [])
        if not rows:
            raise StudyError(f"{where}: no [[{key}]] rows")
        for r in rows:
            missing = [c for c in cols + ["source"] if c not in r]
            if missing:
                raise StudyError(f"{where}: a [[{key}]] row lacks {', '.join(missing)}")
    if "table1_printed_average" not in paper:
        raise StudyError(f"{where}: no [table1_printed_average]")


def summarise(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per run: its set-up, operation, number of files, per-file
    MB and execution times, their mean, the rate (all bytes over first start to
    last end) and the host's seek time (summed and per request)."""
    rows = []
    for _, g in frame.groupby("run", sort=False):
        first = g.iloc[0]
        exec_s = g["exec_time_s"].tolist()
        mb = sum(r + w for r, w in zip(g["read_mb"].tolist(), g["write_mb"].tolist()))
        start = min(g["start_s"].tolist())
        end = max([0.0] + g["end_s"].tolist())
        rows.append(
            {
                "setup": first[SETUP],
                "file_mb": [r + w for r, w in zip(g["read_mb"].tolist(), g["write_mb"].tolist())],
                "op": first[OP],
                "files": int(first[FILES]),
                "exec_s": exec_s,
                # Summed in file order, as one would by hand.
                "avg_exec_s": sum(exec_s) / max(len(exec_s), 1),
                "rate_mb_s": mb / max(end - start, 1e-9),
                "seek_total_ms": float(first["host_mean_seek_ms"]) * int(first["host_requests"]),
                "seek_mean_ms": float(first["host_mean_seek_ms"]),
            }
        )
    return pd.DataFrame(rows)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def analyse(s: Sweep, paper: dict[str, Any], where: Path) -> Analysis:
    check_paper(paper, where)
    runs = summarise(s.frame)
    setups = s.study.matrix[SETUP]
    ops = s.study.matrix[OP]
    counts = s.study.matrix[FILES]
    by = {(r.setup, r.op, r.files): r for r in runs.itertuples(index=False)}

    # Table 1: per-file execution time, the most files read.
    n_all = counts[-1]
    t1 = paper["table1"]
    paper_cols = ["paper NOOP", "paper CFQ", "paper HTBS", "paper HTBS host"]
    rows = []
    for i in range(n_all):
        row: dict[str, Any] = {"file": i + 1, "KiB": None}
        for su in setups:
            r = by.get((su, "read", n_all))
            if r is not None:
                row["KiB"] = round(r.file_mb[i] * 1e6 / 1024)
            row[f"{su} s"] = r.exec_s[i] if r is not None else None
        row.update({c: t1[i][k] for c, k in zip(paper_cols, PAPER_T1)})
        rows.append(row)
    avg: dict[str, Any] = {"file": "average", "KiB": ""}
    for su in setups:
        r = by.get((su, "read", n_all))
        avg[f"{su} s"] = r.avg_exec_s if r is not None else None
    avg.update({c: sum(x[k] for x in t1) / 12.0 for c, k in zip(paper_cols, PAPER_T1)})
    rows.append(avg)
    table1 = Table(
        f"Table 1: execution time per file (s), {n_all} files read at once",
        pd.DataFrame(rows),
        digits={c: 3 for c in [f"{su} s" for su in setups] + paper_cols},
    )

    def by_count(title: str, value: str, digits: int, paper_rows: list[dict[str, Any]] | None) -> Table:
        out = []
        for op in ops:
            for n in counts:
                row: dict[str, Any] = {"files": n, "op": op}
                for su in setups:
                    r = by.get((su, op, n))
                    row[su] = getattr(r, value) if r is not None else None
                if paper_rows is not None:
                    p = next((p for p in paper_rows if p["files"] == n), None)
                    for c, k in zip(["paper NOOP", "paper CFQ", "paper HTBS"], PAPER_BY_COUNT):
                        row[c] = p[k] if p is not None else None
                out.append(row)
        df = pd.DataFrame(out)
        return Table(title, df, digits={c: digits for c in df.columns if c not in ("files", "op")})

    tables = [
        table1,
        by_count(
            "Table 2: read/write rate (MB/s; the paper's one read/write figure beside both)",
            "rate_mb_s",
            2,
            paper["table2"],
        ),
        by_count("Table 3: seek time (ms, summed over the run)", "seek_total_ms", 0, paper["table3"]),
        by_count("mean seek time per request (ms)", "seek_mean_ms", 3, None),
        by_count("Fig. 4: average execution time per file (s)", "avg_exec_s", 3, None),
    ]

    notes = []
    for what, value, unit in (
        ("seek time", "seek_total_ms", "ms"),
        ("execution time per file", "avg_exec_s", "s"),
    ):
        vals = [(su, _mean(runs[runs.setup == su][value].tolist())) for su in COMPARED if su in setups]
        best = min(vals, key=lambda x: x[1])[0] if vals else "-"
        listed = ", ".join(f"{su} {v:.3f} {unit}" for su, v in vals)
        notes.append(f"average {what} over all runs: {listed} — lowest: {best}")
    t3 = []
    for su in COMPARED:
        v = runs[(runs.setup == su) & (runs.op == "read") & (runs.files != 12)]["seek_total_ms"].tolist()
        if v:
            t3.append(f"{su} {_mean(v):.1f} ms")
    if t3:
        p3 = [_mean([r[k] for r in paper["table3"]]) for k in PAPER_BY_COUNT]
        notes.append(
            f"Table 3's average (reads of 5, 7, 10 files): {', '.join(t3)} — paper: "
            f"NOOP {p3[0]:.1f}, CFQ {p3[1]:.1f}, HTBS {p3[2]:.1f} ms"
        )
    printed = ", ".join(number_text(paper["table1_printed_average"][k]) for k in PAPER_T1)
    notes.append(
        f"paper Table 1's printed average row ({printed}) does not match its own columns; "
        "the averages above are the columns' means"
    )
    data = runs.to_dict(orient="records")
    return Analysis(tables=tables, notes=notes, data=data)
