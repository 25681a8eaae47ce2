"""Paper experiments as studies: ``hvio reproduce NAME`` and ``hvio.reproduce(name)``.

A paper's experiment is three files under ``experiments/``: the study
(``NAME.study.toml``: its base configs and matrix, ``[quick.matrix]`` for the
scaled-down run, and in ``[study]`` its citation, ``analysis`` and
``reference``), the paper's numbers (``NAME.paper.toml``, each with the
table or figure and row it comes from) and an analysis module of
:mod:`hvio.analysis`, which takes the sweep's numeric DataFrame and the
paper's numbers and returns the tables (numeric cells are numbers), notes
and goal checks. This module runs the study, calls the analysis and renders
the report as text, as ``hvio reproduce`` prints it. A copied and edited
study runs with no rebuild: ``hvio reproduce path/to/copy.study.toml``.
"""

from __future__ import annotations

import importlib
import math
import os
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

import pandas as pd

from . import sweeps

try:
    import tomllib
except ImportError:  # Python < 3.11
    import tomli as tomllib  # type: ignore[no-redef]

# The repository's experiments, beside the package's source folder.
_REPO_EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


@dataclass
class Table:
    """A titled table of a report: a DataFrame whose numeric cells are
    numbers, the decimals each numeric column is shown with, and the text of
    a missing (``None`` or NaN) cell."""

    title: str
    frame: pd.DataFrame
    # Decimals of a column's numbers; "e2": scientific, 2 decimals; a
    # format string such as "{:+.1f} %" (a signed percentage): as it formats.
    digits: dict[str, int | str] = field(default_factory=dict)
    missing: str = "-"
    # What a column's numbers are printed with after them ("×").
    units: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        cols = [str(c) for c in self.frame.columns]
        rows = [[_plain(v) for v in row] for row in self.frame.itertuples(index=False, name=None)]
        return {
            "title": self.title,
            "columns": cols,
            "rows": rows,
            "digits": [self.digits.get(c) for c in cols],
            "missing": self.missing,
            **({"units": [self.units.get(c, "") for c in cols]} if self.units else {}),
        }


@dataclass
class Analysis:
    """What an analysis module returns: tables, notes (goals met or missed,
    and why) and free-form data for figures."""

    tables: list[Table]
    notes: list[str]
    data: Any = None


def _plain(v: Any) -> Any:
    """A cell as JSON: numpy numbers as Python's, NaN and NA as ``None``."""
    if v is None or v is pd.NA:
        return None
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def number_text(x: float) -> str:
    """A float as the shortest text that reads back as it, integers without
    a decimal point (``10``, ``8.2568``)."""
    if x.is_integer() and abs(x) < 1e16:
        return str(int(x))
    return repr(x)


def exponent_text(x: float, digits: int) -> str:
    """``x`` in scientific notation with ``digits`` decimals and a bare
    exponent (``1.23e4``, ``5.00e-7``)."""
    mantissa, exponent = f"{x:.{digits}e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def cell_text(v: Any, digits: int | str | None, missing: str) -> str:
    """A table cell as text: a number with its column's decimals, a missing one as ``missing``."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return missing
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(digits, str) and "{" in digits:
        return digits.format(v)
    if isinstance(digits, str):
        return exponent_text(v, int(digits.removeprefix("e")))
    if digits is not None:
        return f"{v:.{digits}f}"
    return str(v) if isinstance(v, int) else number_text(v)


def table_cells(t: dict[str, Any]) -> list[list[str]]:
    """A table's (as in a report's JSON) rows as text: each number with its
    column's decimals and unit, a missing cell as the table says."""
    cols = t["columns"]
    digits = t.get("digits") or [None] * len(cols)
    units = t.get("units") or [""] * len(cols)
    missing = t.get("missing", "-")

    def cell(v: Any, d: int | str | None, unit: str) -> str:
        text = cell_text(v, d, missing)
        number = isinstance(v, (int, float)) and not isinstance(v, bool) and not math.isnan(v)
        return text + unit if number else text

    return [[cell(v, d, u) for v, d, u in zip(r, digits, units)] for r in t["rows"]]


def render_table(t: dict[str, Any]) -> str:
    """A table (as in a report's JSON) as aligned text: the first column
    left, the others right, a rule under the headings."""
    cols = t["columns"]
    rows = table_cells(t)
    width = [len(c) for c in cols]
    for r in rows:
        width = [max(w, len(c)) for w, c in zip(width, r)]

    def line(cells: list[str]) -> str:
        parts = [cells[0].ljust(width[0])] + [c.rjust(w) for c, w in zip(cells[1:], width[1:])]
        return "  ".join(parts).rstrip()

    out = f"{t['title']}\n" if t["title"] else ""
    out += line(cols) + "\n" + "  ".join("-" * w for w in width) + "\n"
    return out + "".join(line(r) + "\n" for r in rows)


def render(raw: dict[str, Any]) -> str:
    """A report (as ``hvio reproduce`` writes it in JSON) as the text it prints."""
    text = f"{raw['name']} — {raw['title']}\n({raw['paper']})\nseed {raw['seed']}"
    text += ", quick run\n\n" if raw["quick"] else "\n\n"
    text += "".join(render_table(t) + "\n" for t in raw["tables"])
    return text + "".join(f"note: {n}\n" for n in raw["notes"])


def _folders() -> list[Path]:
    folders = [Path("experiments")]
    if os.environ.get("HVIO_EXPERIMENTS"):
        folders.insert(0, Path(os.environ["HVIO_EXPERIMENTS"]))
    if _REPO_EXPERIMENTS.is_dir() and _REPO_EXPERIMENTS not in folders:
        folders.append(_REPO_EXPERIMENTS)
    return folders


def find_study(name: str) -> Path | None:
    """The study of experiment ``name``: a study file's path, or
    ``NAME.study.toml`` in ``$HVIO_EXPERIMENTS``, ``./experiments`` or the
    repository's ``experiments/``. ``None`` when there is none."""
    if name.endswith(".toml"):
        return Path(name) if Path(name).is_file() else None
    for folder in _folders():
        p = folder / f"{name}.study.toml"
        if p.is_file():
            return p
    return None


def experiments() -> list[tuple[str, str, str]]:
    """(name, title, paper) of every study with an analysis, by name."""
    seen: dict[str, tuple[str, str, str]] = {}
    for folder in _folders():
        for p in sorted(folder.glob("*.study.toml")):
            name = p.name.removesuffix(".study.toml")
            if name in seen:
                continue
            st = sweeps.load_study(p)
            if st.analysis:
                seen[name] = (st.name, st.title, st.paper)
    return [seen[k] for k in sorted(seen)]


def reproduce(
    name: str | PathLike,
    *,
    quick: bool = False,
    seed: int = 1,
    workers: int | None = None,
    progress: bool | None = None,
    cache: str | PathLike | None = "out/cache",
    recompute: bool = False,
    counts: dict[str, int] | None = None,
) -> dict[str, Any]:
    """Run a paper experiment's study with ``seed`` for every run and
    analyse it; the report as JSON-ready data (``render`` makes it text).

    Each run's result is cached in the folder ``cache`` under the key of a
    sweep's runs (config with its seed, the folder its paths resolve in,
    hvio's build: :func:`hvio.sweeps.run_key`), so a re-run computes only
    the runs whose config or build changed; ``recompute`` computes them all
    again (and refreshes the cache), ``cache=None`` keeps nothing.
    ``counts``, when given, receives the number of runs ``computed`` and
    taken from the ``cache`` (the report itself is the same either way)."""
    path = find_study(str(name))
    if path is None:
        raise sweeps.StudyError(f"experiment {name}: no study {name}.study.toml in {_where()}")
    st = sweeps.load_study(path, quick=quick)
    if not st.analysis:
        raise sweeps.StudyError(f"{path}: [study] needs `analysis` to be reproduced")
    try:
        module = importlib.import_module(f"hvio.analysis.{st.analysis}")
    except ModuleNotFoundError:
        raise sweeps.StudyError(
            f"{path}: [study] analysis {st.analysis!r}: no module hvio.analysis.{st.analysis}"
        ) from None
    paper: dict[str, Any] = {}
    if st.reference is not None:
        try:
            with st.reference.open("rb") as f:
                paper = tomllib.load(f)
        except tomllib.TOMLDecodeError as e:
            raise sweeps.StudyError(f"{st.reference}: not a TOML file: {e}") from None
    how: dict[str, Any] = dict(
        out=None, workers=workers, progress=progress, cache=not recompute, cache_dir=cache
    )
    # A study in stages is analysed with its sweeps by stage name, any other with its sweep.
    done: dict[str, sweeps.Sweep] | sweeps.Sweep
    if st.stages:
        done = sweeps.sweep_stages(st, matrix={sweeps.SEED: [seed]}, **how)
        ran = list(done.values())
    else:
        st.matrix[sweeps.SEED] = [seed]
        done = sweeps.sweep(st, **how)
        ran = [done]
    if counts is not None:
        for s in ran:
            counts["computed"] = counts.get("computed", 0) + s.computed
            counts["cache"] = counts.get("cache", 0) + len(s.runs) - s.computed
    a: Analysis = module.analyse(done, paper, st.reference)
    return {
        "name": st.name,
        "title": st.title,
        "paper": st.paper,
        "seed": seed,
        "quick": quick,
        "tables": [t.to_json() for t in a.tables],
        "notes": a.notes,
        "data": a.data,
    }


def _where() -> str:
    return ", ".join(str(f) for f in _folders())
