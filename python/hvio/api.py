"""The Python API: run simulations and experiments, get DataFrames back."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any, Union

import pandas as pd

from . import _hvio, studies

ConfigLike = Union[str, PathLike, dict]


# As hvio_sim::config::limits::MAX_CONFIG_BYTES: an endless file (/dev/zero) is an error.
_MAX_CONFIG_BYTES = 64 << 20


def _check_finite(value: Any, key: str) -> None:
    """JSON has no nan or inf: name the key that holds one (else the JSON
    parser would report a column of the JSON text)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise _hvio.HvioError(f"<dict>: invalid value {value} for `{key}`: must be a finite number")
    if isinstance(value, dict):
        for k, v in value.items():
            _check_finite(v, f"{key}.{k}" if key else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_finite(v, f"{key}[{i}]")


def _config_text(config: ConfigLike) -> tuple[str, str]:
    """(text, origin) for a path, a TOML string or a dict."""
    if isinstance(config, dict):
        _check_finite(config, "")
        return json.dumps(config), "<dict>.json"
    if isinstance(config, PathLike) or (isinstance(config, str) and "\n" not in config and "=" not in config):
        path = Path(config)
        with path.open("rb") as f:
            data = f.read(_MAX_CONFIG_BYTES + 1)
        if len(data) > _MAX_CONFIG_BYTES:
            raise _hvio.HvioError(f"{path}: larger than 64 MiB: not a config")
        try:
            return data.decode(), str(path)
        except UnicodeDecodeError as e:
            raise _hvio.HvioError(f"{path}: not a UTF-8 text file ({e.reason} at byte {e.start})") from None
    return str(config), "<string>"


def _flatten_latency(rows: list[dict]) -> list[dict]:
    out = []
    for r in rows:
        r = dict(r)
        for k, v in r.pop("latency", {}).items():
            r[f"latency_{k}"] = v
        out.append(r)
    return out


@dataclass
class Result:
    """One simulation run: per-VM, per-job and time-series DataFrames plus host metrics."""

    raw: dict[str, Any]
    vms: pd.DataFrame = field(init=False)
    jobs: pd.DataFrame = field(init=False)
    series: pd.DataFrame = field(init=False)

    def __post_init__(self) -> None:
        self.vms = pd.DataFrame(_flatten_latency(self.raw["vms"]))
        self.jobs = pd.DataFrame(_flatten_latency(self.raw["jobs"]))
        s = self.raw["series"]
        frames = []
        # Host time slices (Pregather, CFQ/Blkio, BFQ, iShare), by the
        # bucket they began in; only when the host scheduler has slices.
        slices = ("slices", "slice_ms", "slice_used_ms")
        for k, (name, iops, mbps) in enumerate(zip(s["vms"], s["iops"], s["mb_per_s"])):
            cols = {
                "vm": name,
                "time_s": [i * s["interval_s"] for i in range(len(iops))],
                "iops": iops,
                "mb_per_s": mbps,
            }
            if s.get("slices"):
                cols.update({c: s[c][k] for c in slices})
            frames.append(pd.DataFrame(cols))
        self.series = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    @property
    def scheduler(self) -> str:
        return self.raw["scheduler"]

    @property
    def host(self) -> dict[str, Any]:
        return self.raw["host"]

    @property
    def total_mb_per_s(self) -> float:
        return self.raw["total_mb_per_s"]

    def seek_table(self) -> pd.DataFrame:
        """Paper 000 Table 4's seek-distance buckets, as fractions."""
        s = self.host["seek"]
        return pd.DataFrame(
            {
                "bucket": ["0", "within ±image", "beyond image"],
                "fraction": [s["zero_frac"], s["within_image_frac"], s["beyond_image_frac"]],
            }
        )


def simulate(config: ConfigLike, *, scheduler: str | None = None, seed: int | None = None) -> Result:
    """Simulate a config (a path, a TOML string or a dict) and return a :class:`Result`.

    ``scheduler`` and ``seed`` override the config's. Bad input raises
    :class:`hvio.HvioError` naming the key and the value.
    """
    text, origin = _config_text(config)
    return Result(json.loads(_hvio.simulate(text, origin, scheduler, seed)))


def compare(config: ConfigLike | None = None, schedulers: list[str] | None = None) -> list[Result]:
    """Run a config (default: paper 000's four VMs) under several host schedulers (default: all)."""
    text, origin = (
        _config_text(config) if config is not None else (default_scenario(), "paper000-four-vms.toml")
    )
    names = schedulers if schedulers is not None else [s["name"] for s in schedulers_list()]
    return [Result(r) for r in json.loads(_hvio.compare(text, origin, names))]


def _spread(d: dict | None) -> tuple[float, float]:
    """(mean, sd) of a figure over seeds; JSON null (an infinite slowdown) is inf."""
    if d is None or d.get("mean") is None:
        return math.inf, 0.0
    return d["mean"], d.get("sd") or 0.0


@dataclass
class Comparison:
    """Host schedulers compared on one config (``hvio compare``'s JSON):
    per-scheduler and per-VM DataFrames (means over the seeds, ``*_sd`` their
    standard deviations), the verdict, notes and every run."""

    raw: dict[str, Any]
    schedulers: pd.DataFrame = field(init=False)
    vms: pd.DataFrame = field(init=False)

    def __post_init__(self) -> None:
        srows, vrows = [], []
        for s in self.raw["schedulers"]:
            starved = [v["vm"] for v in s["vms"] if v["starved"]]
            row = {"scheduler": s["scheduler"], "reads_weights": s["reads_weights"]}
            for k in ("total_mb_per_s", "jain", "worst_p99_ms"):
                row[k], row[f"{k}_sd"] = _spread(s[k])
            row.update(worst_p99_vm=s["worst_p99_vm"], starved=",".join(starved))
            srows.append(row)
            for v in s["vms"]:
                vrow = {
                    "scheduler": s["scheduler"],
                    "vm": v["vm"],
                    "weight": v["weight"],
                    "weight_share": v["weight_share"],
                }
                for k in (
                    "mb_per_s",
                    "iops",
                    "p50_ms",
                    "p99_ms",
                    "p999_ms",
                    "disk_share",
                    "alone_mb_per_s",
                    "slowdown",
                    "progress",
                ):
                    vrow[k], vrow[f"{k}_sd"] = _spread(v[k])
                vrow["starved"] = v["starved"]
                vrows.append(vrow)
        self.schedulers = pd.DataFrame(srows)
        self.vms = pd.DataFrame(vrows)

    @property
    def config(self) -> str:
        return self.raw["config"]

    @property
    def config_name(self) -> str:
        """The config's file name, for titles."""
        return Path(self.config).name

    @property
    def seeds(self) -> list[int]:
        return self.raw["seeds"]

    @property
    def seed_text(self) -> str:
        s = self.seeds
        return f"seed {s[0]}" if len(s) == 1 else f"seeds {s[0]}..{s[-1]}"

    @property
    def verdict(self) -> list[str]:
        return self.raw["verdict"]

    @property
    def notes(self) -> list[str]:
        return self.raw["notes"]

    @property
    def runs(self) -> list[Result]:
        """Every shared run, scheduler by scheduler, seed by seed."""
        return [Result(r) for r in self.raw["runs"]]

    @property
    def scheduler_names(self) -> list[str]:
        return list(self.schedulers["scheduler"])

    @property
    def vm_names(self) -> list[str]:
        return list(dict.fromkeys(self.vms["vm"]))


def comparison(
    config: ConfigLike | None = None,
    schedulers: list[str] | None = None,
    *,
    seeds: int = 1,
    progress: bool | None = None,
) -> Comparison:
    """Compare host schedulers on a config (default: paper 000's four VMs):
    per-VM MB/s, IOPS, latency percentiles, disk share against weight share
    and slowdown against running alone; per scheduler total, Jain's index,
    worst p99; a verdict. ``seeds`` runs each with that many seeds.
    ``progress`` shows a bar of the runs done with an ETA (default: when
    stderr is a terminal)."""
    from .sweeps import _progress

    text, origin = (
        _config_text(config) if config is not None else (default_scenario(), "paper000-four-vms.toml")
    )
    names = schedulers if schedulers is not None else [s["name"] for s in schedulers_list()]
    with _progress(None, "compare", progress) as bar:

        def tick(done: int, total: int) -> None:
            bar.total = total
            bar.update(done - bar.n)

        raw = _hvio.comparison(text, origin, names, seeds, tick if not bar.disable else None)
    return Comparison(json.loads(raw))


def load_comparison(path: str | PathLike) -> Comparison:
    """A comparison written by ``hvio compare --json``."""
    return Comparison(json.loads(Path(path).read_text()))


def schedulers_list() -> list[dict]:
    return json.loads(_hvio.schedulers())


def schedulers() -> list[str]:
    """Names of every registered scheduler."""
    return [s["name"] for s in schedulers_list()]


def scheduler_table() -> pd.DataFrame:
    """Every scheduler's parameters: name, default, unit, range, meaning."""
    rows = []
    for s in schedulers_list():
        for p in s["params"]:
            rows.append({"scheduler": s["name"], **p})
    return pd.DataFrame(rows)


def default_scenario() -> str:
    """The embedded default scenario (TOML text)."""
    return _hvio.default_scenario()


_PAPER_SCHEDULERS = ["cfq", "deadline", "anticipatory", "noop"]


@dataclass
class Tuned:
    """What :func:`tune` found over a config's phases (``hvio tune``): the
    plan it writes (the fastest run it measured: Algorithm 1's plan unless
    another run was faster, see :attr:`chosen_from`), its predicted time and
    gains, Algorithm 1's own plan, the profile and the runs."""

    raw: dict[str, Any]
    profile: pd.DataFrame = field(init=False)

    def __post_init__(self) -> None:
        c = self.raw["comparison"]
        rows = []
        for i, pair in enumerate(self.raw["pairs"]):
            row = {"host": pair["host"], "guest": pair["guest"]}
            for p, name in enumerate(self.raw["phases"]):
                row[name] = c["profile"]["phase_s"][p][i]
            row["total"] = c["profile"]["total_s"][i]
            rows.append(row)
        self.profile = pd.DataFrame(rows)

    def _pairs(self, plan: list[int]) -> list[tuple[str, str, str]]:
        return [
            (name, self.raw["pairs"][i]["host"], self.raw["pairs"][i]["guest"])
            for name, i in zip(self.raw["phases"], plan)
        ]

    @property
    def plan(self) -> list[tuple[str, str, str]]:
        """The plan written: (phase, host, guest) per phase; empty when the
        config as written was faster than every plan measured."""
        chosen = self.raw["chosen"]
        return self._pairs(chosen["plan"]) if chosen else []

    @property
    def chosen_from(self) -> str:
        """Which run :attr:`plan` is: ``algorithm1``, ``single-pair``,
        ``walk-run``, ``brute-force`` or ``as-written``."""
        return self.raw["chosen_from"]

    @property
    def algorithm1(self) -> list[tuple[str, str, str]]:
        """Algorithm 1's own plan: (phase, host, guest) per phase."""
        return self._pairs(self.raw["comparison"]["heuristic"]["plan"])

    @property
    def optimum(self) -> list[tuple[str, str, str]] | None:
        """The brute force's choice (``brute_force=True``), else None."""
        b = self.raw["comparison"]["brute_force"]
        return self._pairs(b["plan"]) if b else None

    @property
    def predicted_s(self) -> float:
        return self.raw["predicted_s"]

    @property
    def default_s(self) -> float:
        """The config as written (its own schedulers, no plan)."""
        return self.raw["default_s"]

    @property
    def gain_over_default_pct(self) -> float:
        return self.raw["gain_over_default_pct"]

    @property
    def gain_over_best_single_pct(self) -> float:
        return self.raw["gain_over_best_single_pct"]

    @property
    def runs(self) -> int:
        return self.raw["runs"]

    @property
    def config(self) -> str | None:
        """The config with the plan as ``[[phase]]`` tables (TOML input only):
        ``simulate(t.config)`` runs it in :attr:`predicted_s`."""
        return self.raw["plan_config"]


def tune(
    config: ConfigLike,
    *,
    hosts: list[str] | None = None,
    guests: list[str] | None = None,
    brute_force: bool = False,
    policy: str = "drain",
) -> Tuned:
    """Paper 002's Algorithm 1 over a config's phases (its jobs' ``phase``
    names; none: the whole run), for every pair of ``hosts`` x ``guests``
    (default: cfq, deadline, anticipatory, noop on both sides), in parallel
    on the machine's cores; ``brute_force`` also runs every plan."""
    text, origin = _config_text(config)
    hosts = hosts if hosts is not None else _PAPER_SCHEDULERS
    guests = guests if guests is not None else _PAPER_SCHEDULERS
    return Tuned(json.loads(_hvio.tune(text, origin, hosts, guests, brute_force, policy)))


@dataclass
class Report:
    """A reproduced experiment: its tables as DataFrames, notes and raw data."""

    raw: dict[str, Any]

    @property
    def name(self) -> str:
        return self.raw["name"]

    @property
    def seed(self) -> int:
        """The seed it ran with: ``reproduce(name, quick=quick, seed=seed)`` gives this report again."""
        return self.raw["seed"]

    @property
    def quick(self) -> bool:
        return self.raw["quick"]

    @property
    def tables(self) -> dict[str, pd.DataFrame]:
        return {t["title"]: pd.DataFrame(t["rows"], columns=t["columns"]) for t in self.raw["tables"]}

    @property
    def notes(self) -> list[str]:
        return self.raw["notes"]

    @property
    def data(self) -> Any:
        return self.raw["data"]


def experiments() -> pd.DataFrame:
    """The experiments ``reproduce`` knows: the studies with an analysis
    (``experiments/*.study.toml``), by name."""
    return pd.DataFrame(studies.experiments(), columns=["name", "title", "paper"])


def reproduce(
    name: str | PathLike,
    *,
    quick: bool = False,
    seed: int = 1,
    workers: int | None = None,
    cache: str | PathLike | None = "out/cache",
    recompute: bool = False,
    counts: dict[str, int] | None = None,
) -> Report:
    """Run a paper's experiment by name (``hvio.experiments()`` lists them) or
    a study file's path: its runs on every core (``workers`` threads), the
    paper's numbers beside hvio's. A study's runs are cached in ``cache``
    (``None``: not cached; ``recompute``: computed again), so a re-run
    computes only what changed; ``counts`` receives how many runs were
    ``computed`` and taken from the ``cache``."""
    if studies.find_study(str(name)) is not None:
        return Report(
            studies.reproduce(
                name, quick=quick, seed=seed, workers=workers, cache=cache, recompute=recompute, counts=counts
            )
        )
    known = ", ".join(e[0] for e in studies.experiments())
    raise _hvio.HvioError(f"unknown experiment {str(name)!r} (known: {known})")


def replay(
    trace: str | PathLike,
    config: ConfigLike | None = None,
    *,
    scheduler: str | None = None,
    format: str | None = None,
    map: str | None = None,
    vms: int | None = None,
    image_size: int | None = None,
    time_scale: float = 1.0,
    closed: int | None = None,
    skip_bad: bool = False,
) -> Result:
    """Replay a block trace (blkparse, blktrace, fio iolog, MSR, SPC, Alibaba,
    Tencent, FIU, DiskSim, MQSim, vSCSI; gzip or not) under a host scheduler.

    ``config`` gives the disk, host and VMs (optional); ``map`` maps traced
    devices to VMs (``"DEV=VM,prefix*=VM"``), ``vms`` maps them by rule (index
    modulo N); ``closed`` replays closed-loop at that per-VM depth, otherwise
    open loop at the recorded times scaled by ``time_scale``. See docs/traces.md.
    """
    text, origin = _config_text(config) if config is not None else ("", "replay.toml")
    raw = _hvio.replay(
        str(trace), text, origin, scheduler, format, map, vms, image_size, time_scale, closed, skip_bad
    )
    return Result(json.loads(raw))
