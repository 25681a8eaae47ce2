"""Sweeps: a study's matrix of runs, on this machine's cores or a Dask cluster.

A study (``experiments/*.study.toml``) names base configs and a matrix:
host schedulers × guest schedulers × seeds × any config key over a list or
a range. :func:`plan` expands it into runs (the cartesian product, in the
order the matrix lists its keys), :func:`sweep` runs them and returns a
long-form DataFrame: one row per run × VM × job, every matrix key a column.

One simulation is one task: a thread here (the simulator releases the GIL,
so the threads run on every core at once) or a task on a Dask distributed
cluster (``cluster="tcp://HOST:8786"``), where a worker that dies has its
runs given to another. Every run is deterministic, so where it ran changes
nothing: the results are those of running the runs one by one.

A study file may ``include`` other files into any of its tables (shared
cases, a base's keys); a study in stages (``[[stage]]``) runs one sweep per
stage, a stage's matrix computed by the study's analysis from the stages
before it (:func:`sweep_stages`); a study's ``kind`` says what a run is: a
simulation, ``bench-scheduler`` (the host scheduler's own calls timed), or
one of paper 002's on its virtual Hadoop cluster: ``mapreduce`` (a job,
under one pair or a ``[[phase]]`` plan), ``mapreduce-tune`` (Algorithm 1
and the brute force over a job's two-phase plans), ``switch-cost`` (the
cost of every ordered switch between pairs, §IV.B).

Each result is cached under ``<out>/cache`` by a hash of (config, seed,
hvio build): the build is the compiled extension module's own hash, so a
rebuilt hvio whose code changed computes every run again, while a re-run of
the same build computes only the runs whose config changed. The
sweep writes ``<out>/sweep/<study>/results.parquet`` and each run's JSON
(``runs/NNNN.json``) with an index of what each run was (``runs.json``).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import importlib
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from itertools import product
from os import PathLike
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from . import _hvio

try:
    import tomllib
except ImportError:  # Python < 3.11
    import tomli as tomllib  # type: ignore[no-redef]

# Matrix keys with a meaning of their own; any other key is a dotted config path.
SCHEDULER, GUEST, SEED, BASE = "scheduler", "guest", "seed", "base"
# The key of any table of a study file that merges other files into it.
INCLUDE = "include"
# The key of a set of cases that every case of it sets first.
EACH = "each"
# The list of a study's stages, run one after another.
STAGE = "stage"
# What a study's runs are: simulations (`hvio.simulate` of each config),
# the scheduler's own cost in a closed loop (`bench-scheduler`), a
# MapReduce job on paper 002's virtual cluster (`mapreduce`), the search
# for its plan (`mapreduce-tune`) or the cost of switching pairs
# (`switch-cost`).
SIMULATE, BENCH_SCHEDULER, MAPREDUCE = "simulate", "bench-scheduler", "mapreduce"
MAPREDUCE_TUNE, SWITCH_COST = "mapreduce-tune", "switch-cost"
RUN_KINDS = (SIMULATE, BENCH_SCHEDULER, MAPREDUCE, MAPREDUCE_TUNE, SWITCH_COST)
# Each kind but a simulation: the extension module's function that runs one.
_RUNNERS = {
    BENCH_SCHEDULER: "bench_scheduler",
    MAPREDUCE: "mapreduce",
    MAPREDUCE_TUNE: "mapreduce_tune",
    SWITCH_COST: "switch_cost",
}
# Most runs one study may expand to: a typo'd range must not fill the disk.
MAX_RUNS = 1_000_000


class StudyError(_hvio.HvioError):
    """A study file that cannot be run: names the file and the key."""


@dataclass
class Study:
    """A study file: base configs, the matrix, what to keep; for a paper's
    experiment also its citation, its analysis module and its paper numbers."""

    path: Path
    name: str
    title: str
    bases: list[Path]
    matrix: dict[str, list[Any]]
    keep: dict[str, list[str]] = field(default_factory=dict)
    # Matrix keys whose values are named cases: key -> case name -> settings.
    cases: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    paper: str = ""
    analysis: str | None = None
    reference: Path | None = None
    # What each run is: a simulation, or another of RUN_KINDS.
    kind: str = "simulate"
    # Built with its [quick.matrix] applied.
    quick: bool = False
    # A study in stages: its stages, run in order (the study itself runs nothing).
    stages: list[Study] = field(default_factory=list)
    # A stage: its name, the analysis function that gives its matrix from
    # the stages before it, and its tables (to apply that matrix over).
    stage: str | None = None
    hook: str | None = None
    doc: dict[str, Any] | None = None


@dataclass
class Run:
    """One simulation of a sweep: its base, its matrix values, its config."""

    index: int
    base: Path
    params: dict[str, Any]
    config: dict[str, Any]
    key: str

    @property
    def origin(self) -> str:
        """The base config's path: errors name it, relative paths resolve against its folder."""
        return str(self.base)

    def config_json(self) -> str:
        return json.dumps(self.config, sort_keys=True)


def _values(path: Path | str, key: str, spec: Any) -> list[Any]:
    """A matrix entry: a list, one value, or a range table
    ``{from, to, step}`` (``to`` included) or ``{from, count, step}``."""
    where = f"{path}: matrix key `{key}`"
    if isinstance(spec, list):
        if not spec:
            raise StudyError(f"{where}: an empty list runs nothing; give at least one value")
        return spec
    if not isinstance(spec, dict):
        return [spec]
    unknown = set(spec) - {"from", "to", "step", "count"}
    if unknown:
        raise StudyError(
            f"{where}: unknown range key(s) {sorted(unknown)}; a range has from, to or count, step"
        )
    if "from" not in spec or ("to" in spec) == ("count" in spec):
        raise StudyError(f"{where}: a range is {{from, to, step}} or {{from, count, step}}")
    start, step = spec["from"], spec.get("step", 1)
    for k, v in (("from", start), ("step", step), ("to", spec.get("to", 0)), ("count", spec.get("count", 0))):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise StudyError(f"{where}: range `{k}` must be a number, got {v!r}")
    if step <= 0:
        raise StudyError(f"{where}: range step must be > 0, got {step}")
    if "count" in spec:
        count = spec["count"]
        if not isinstance(count, int) or count < 1:
            raise StudyError(f"{where}: range count must be an integer ≥ 1, got {count!r}")
    else:
        if spec["to"] < start:
            raise StudyError(f"{where}: range to ({spec['to']}) is below from ({start})")
        # Inclusive of `to`, with a tolerance so 0.1 steps reach it.
        count = int((spec["to"] - start) / step + 1e-9) + 1
    if count > MAX_RUNS:
        raise StudyError(f"{where}: range of {count} values; at most {MAX_RUNS}")
    ints = all(isinstance(x, int) for x in (start, step))
    return [start + i * step if ints else round(start + i * step, 12) for i in range(count)]


def _cases(path: Path | str, key: str, spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A matrix entry ``{cases = {NAME = {KEY = VALUE, ...}, ...}}``: each
    case a named set of matrix keys run together."""
    where = f"{path}: matrix key `{key}`"
    cases = spec["cases"]
    if set(spec) - {"cases", "only", EACH} or not isinstance(cases, dict) or not cases:
        raise StudyError(
            f"{where}: cases are a table {{cases = {{NAME = {{KEY = VALUE, ...}}, ...}}}}"
            " with, optionally, only = [NAME, ...] and each = {KEY = VALUE, ...}"
        )
    each = _each(path, key, spec)
    if "only" in spec:
        # The cases to run, in this order (of those an included file defines, say).
        only = spec["only"]
        if not isinstance(only, list) or not only or not all(isinstance(n, str) for n in only):
            raise StudyError(f"{where}: `only` lists the names of the cases to run")
        unknown = [n for n in only if n not in cases]
        if unknown:
            raise StudyError(f"{where}: `only` names {unknown}, not cases of it (cases: {list(cases)})")
        cases = {n: cases[n] for n in only}
    for name, settings in cases.items():
        if not isinstance(settings, dict):
            raise StudyError(f"{where}: case {name!r} must be a table of keys and values")
        if BASE in settings:
            raise StudyError(f"{where}: case {name!r}: list the base configs in [study] base")
    # The keys every case has come first, so that a case's own apply over them.
    return {name: {**each, **settings} for name, settings in cases.items()}


def _each(path: Path | str, key: str, spec: dict[str, Any]) -> dict[str, Any]:
    """A set of cases' ``each``: the keys every case of it sets, before its own."""
    each = spec.get(EACH, {})
    if not isinstance(each, dict) or BASE in each:
        raise StudyError(
            f"{path}: matrix key `{key}`: `each` is a table of the keys every case sets {{KEY = VALUE, ...}}"
        )
    return each


def _merge(into: dict[str, Any], over: dict[str, Any]) -> None:
    """Merge ``over`` into ``into``: tables merge key by key, any other value
    of ``over`` replaces ``into``'s. A key keeps its place in ``into``; new
    keys come after (the order of a matrix is the order of its runs)."""
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(into.get(k), dict):
            _merge(into[k], v)
        else:
            into[k] = v


def _include_line(text: str, name: str) -> int:
    """The line of ``text`` whose ``include`` names ``name`` (1-based; 0 if none does)."""
    for number, line in enumerate(text.splitlines(), 1):
        if "include" in line and (f'"{name}"' in line or f"'{name}'" in line):
            return number
    return 0


def _resolve_includes(node: Any, path: Path, text: str, chain: list[Path]) -> Any:
    """``node`` (a table of the file ``path``, whose text is ``text``) with
    every ``include = "FILE"`` (or a list of files) in it or its tables
    replaced by the files' tables, merged in order, under the table's own
    keys (which win). Arrays are left as they are."""
    if not isinstance(node, dict):
        return node
    files = node.pop(INCLUDE, None)
    for k, v in node.items():
        node[k] = _resolve_includes(v, path, text, chain)
    if files is None:
        return node
    if isinstance(files, str):
        files = [files]
    if not isinstance(files, list) or not files or not all(isinstance(f, str) for f in files):
        raise StudyError(f"{path}: `include` must name a file (relative to {path.name}) or a list of them")
    merged: dict[str, Any] = {}
    for name in files:
        where = f"{path}:{_include_line(text, name)}: include {name!r}"
        target = path.parent / name
        if target.resolve() in [c.resolve() for c in chain]:
            cycle = " → ".join(str(c) for c in chain + [target])
            raise StudyError(f"{where}: includes itself: {cycle}")
        if not target.is_file():
            raise StudyError(f"{where}: no such file ({target})")
        _merge(merged, _read_study_file(target, chain + [target]))
    _merge(merged, node)
    return merged


def _read_study_file(path: Path, chain: list[Path]) -> dict[str, Any]:
    """A study file (or a file it includes) as a table, its includes resolved."""
    try:
        text = path.read_text()
    except OSError as e:
        raise StudyError(f"{path}: cannot read the study: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise StudyError(f"{path}: not a TOML file: {e}") from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise StudyError(f"{path}: not a TOML file: {e}") from None
    return _resolve_includes(doc, path, text, chain)


def load_study(path: str | PathLike, *, quick: bool = False) -> Study:
    """Read a study file; errors name the file and the key. ``quick``
    applies its ``[quick.matrix]`` entries over ``[matrix]`` (the
    scaled-down run of ``hvio reproduce --quick``). Any table of the file
    may say ``include = "FILE"`` (or a list): FILE's tables (a path relative
    to the including file, itself with includes) are merged under the
    table's own keys, which win. A study in stages (``[[stage]]``) has its
    stages in ``Study.stages``: see :func:`sweep_stages`."""
    path = Path(path)
    doc = _read_study_file(path, [path])
    stages = doc.pop(STAGE, None)
    if stages is None:
        return _study(path, doc, quick)
    if not isinstance(stages, list) or not stages or not all(isinstance(x, dict) for x in stages):
        raise StudyError(f"{path}: [[stage]] is a list of tables, each with its name and matrix")
    top = _study(path, doc, quick, staged=True)
    seen = set()
    for i, raw in enumerate(stages):
        name = raw.get("name")
        if not isinstance(name, str) or not name or name in seen:
            raise StudyError(f'{path}: [[stage]] {i + 1} needs a name of its own (`name = "..."`)')
        seen.add(name)
        unknown = set(raw) - {"name", "base", "kind", "matrix", "quick", "keep", "from"}
        if unknown:
            raise StudyError(
                f"{path}: stage `{name}`: unknown key(s) {sorted(unknown)};"
                " a stage has name, base, kind, matrix, quick, keep, from"
            )
        hook = raw.get("from")
        if hook is not None and (not isinstance(hook, str) or not hook.isidentifier() or not top.analysis):
            raise StudyError(
                f"{path}: stage `{name}`: `from` names a function of the study's analysis module"
                " ([study] analysis) that returns the stage's matrix from the stages before it"
            )
        sub = copy.deepcopy({k: v for k, v in doc.items() if k != "study"})
        head = dict(doc.get("study", {}))
        head["name"] = f"{top.name}/{name}"
        for k in ("base", "kind"):
            if k in raw:
                head[k] = raw[k]
        sub["study"] = head
        _merge(sub.setdefault("matrix", {}), raw.get("matrix", {}))
        _merge(sub.setdefault("quick", {}), raw.get("quick", {}))
        if "keep" in raw:
            sub["keep"] = raw["keep"]
        st = _study(path, sub, quick, where=f"stage `{name}`")
        st.stage, st.hook, st.doc = name, hook, sub
        top.stages.append(st)
    return top


def _study(
    path: Path,
    doc: dict[str, Any],
    quick: bool,
    *,
    staged: bool = False,
    where: str = "",
    extra: dict[str, Any] | None = None,
) -> Study:
    """A study (or one of its stages) from its file's tables; ``extra``:
    matrix entries set over the file's (a stage's ``from`` function's)."""
    # Errors name the file, and the stage they are in.
    here = f"{path}: {where}" if where else str(path)
    unknown = set(doc) - {"study", "matrix", "keep", "quick"}
    if unknown:
        raise StudyError(
            f"{here}: unknown table(s) {sorted(unknown)}; a study has [study], [matrix], [keep], [quick]"
        )
    head = doc.get("study", {})
    unknown = set(head) - {"name", "title", "base", "paper", "analysis", "reference", "kind"}
    if unknown:
        raise StudyError(f"{here}: unknown key(s) in [study]: {sorted(unknown)}")
    bases = head.get("base")
    if isinstance(bases, str):
        bases = [bases]
    if staged and bases is None:
        bases = []  # each stage names its own
    elif not bases or not all(isinstance(b, str) for b in bases):
        raise StudyError(f"{here}: [study] base must name one config file or a list of them")
    base_paths = []
    for b in bases:
        p = path.parent / b
        if not p.is_file():
            raise StudyError(f"{here}: [study] base {b!r}: no such config file ({p})")
        base_paths.append(p)
    entries = dict(doc.get("matrix", {}))
    quick_table = doc.get("quick", {})
    if set(quick_table) - {"matrix"} or not isinstance(quick_table.get("matrix", {}), dict):
        raise StudyError(
            f"{here}: [quick] holds one table, [quick.matrix]: the matrix keys a quick run changes"
        )
    for k, v in quick_table.get("matrix", {}).items():
        was = entries.get(k)
        if isinstance(v, list) and isinstance(was, dict) and "cases" in was:
            # A list of case names keeps those cases (any of [matrix]'s, not
            # only those its `only` runs).
            unknown = [name for name in v if name not in was["cases"]]
            if unknown or not v:
                raise StudyError(f"{here}: [quick.matrix] `{k}`: {unknown or v!r}: name cases of [matrix]")
            v = {**({EACH: was[EACH]} if EACH in was else {}), "cases": {n: was["cases"][n] for n in v}}
        elif isinstance(v, dict) and {"cases", EACH} & set(v) and isinstance(was, dict) and "cases" in was:
            # Cases named here change some of their keys, and `each` some
            # of the keys every case has; the others stay.
            merged = {name: dict(c) for name, c in was["cases"].items()}
            for name, c in v.get("cases", {}).items():
                if name not in merged or not isinstance(c, dict):
                    raise StudyError(f"{here}: [quick.matrix] `{k}`: {name!r} is not a case of [matrix]")
                merged[name].update(c)
            each = {**_each(here, k, was), **_each(here, k, v)}
            v = {**was, "cases": merged, **({EACH: each} if each else {})}
        if quick:
            entries[k] = v
    if extra:
        # Computed entries first: the file's keys (cases that keep some VMs,
        # say) apply over them; a key the file has too is replaced in place.
        entries = {**{k: v for k, v in extra.items() if k not in entries}, **entries}
        entries.update({k: v for k, v in extra.items() if k in entries})
    cases = {k: _cases(here, k, v) for k, v in entries.items() if isinstance(v, dict) and "cases" in v}
    matrix = {k: list(cases[k]) if k in cases else _values(here, k, v) for k, v in entries.items()}
    if BASE in matrix:
        raise StudyError(f"{here}: matrix key `base`: list the base configs in [study] base")
    keep = doc.get("keep", {})
    for k, v in keep.items():
        if k not in ("job", "vm", "host") or not isinstance(v, list):
            raise StudyError(f"{here}: [keep] {k}: give job, vm or host = [column names]")
    reference = head.get("reference")
    if reference is not None:
        if not isinstance(reference, str) or not (path.parent / reference).is_file():
            raise StudyError(f"{here}: [study] reference {reference!r}: no such file beside the study")
        reference = path.parent / reference
    kind = head.get("kind", SIMULATE)
    if kind not in RUN_KINDS:
        raise StudyError(f"{here}: kind {kind!r}: a run is one of {', '.join(RUN_KINDS)}")
    analysis = head.get("analysis")
    if analysis is not None and not (isinstance(analysis, str) and analysis.isidentifier()):
        raise StudyError(f"{here}: [study] analysis {analysis!r}: name a module of hvio.analysis")
    return Study(
        path=path,
        name=head.get("name", path.name.removesuffix(".toml").removesuffix(".study")),
        title=head.get("title", ""),
        bases=base_paths,
        matrix=matrix,
        keep=keep,
        cases=cases,
        paper=head.get("paper", ""),
        analysis=analysis,
        reference=reference,
        kind=kind,
        quick=quick,
    )


def _read_base(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise StudyError(f"{path}: not a TOML file: {e}") from None


def _set(config: dict[str, Any], key: str, value: Any, where: str, missed: list[str]) -> int:
    """Set dotted config key ``key`` (``host.params.quantum``,
    ``vm.0.weight``, ``vm.vm2.weight``, ``vm.*.virtio_depth``,
    ``vm.*.job.*.iodepth``) in ``config``; ``*`` is every element. Under a
    ``*``, a name sets the elements that have it (``vm.*.job.SR-M.bs``: the
    job SR-M of every VM that has one) and may set none in this run (it
    must set some in one run of the study: :func:`plan` checks); otherwise
    a name no element has is an error. The number of values set."""

    def walk(node: Any, parts: list[str]) -> int:
        head, rest = parts[0], parts[1:]
        if isinstance(node, list):
            if head == "*":
                targets = node
            elif head.isdigit() and int(head) < len(node):
                targets = [node[int(head)]]
            else:
                targets = [x for x in node if isinstance(x, dict) and x.get("name") == head]
                if not targets:
                    missed.append(f"no element {head!r} (an index below {len(node)}, a name, or *)")
                    return 0
            if not rest:
                raise StudyError(f"{where}: `{key}`: names a whole list element, not a key")
            return sum(walk(t, rest) for t in targets)
        if not isinstance(node, dict):
            raise StudyError(f"{where}: `{key}`: {head!r} is inside a value, not a table")
        if not rest:
            if isinstance(node.get(head), list) and isinstance(value, int) and not isinstance(value, bool):
                # A number for an array of tables keeps its first N elements.
                if not 1 <= value <= len(node[head]):
                    raise StudyError(f"{where}: `{key}` = {value}: keeps 1 to {len(node[head])} elements")
                node[head] = node[head][:value]
            elif _names(value) and _tables(node.get(head)):
                # A list of names keeps the elements with those names, in that order.
                named = {x.get("name"): x for x in node[head] if isinstance(x, dict)}
                unknown = [n for n in value if n not in named]
                if unknown:
                    raise StudyError(
                        f"{where}: `{key}`: no element named {unknown[0]!r} (names: {list(named)})"
                    )
                node[head] = [named[n] for n in value]
            else:
                # A copy: a later key of this run may change inside it, and
                # the next run sets the same value again.
                node[head] = copy.deepcopy(value)
            return 1
        # Arrays of tables take their TOML name: `vm` is the `[[vm]]` list.
        return walk(node.setdefault(head, {}), rest)

    count = walk(config, key.split("."))
    if count == 0 and "*" not in key.split("."):
        raise StudyError(f"{where}: `{key}`: {missed[0]}")
    return count


def _names(value: Any) -> bool:
    """A non-empty list of names (strings)."""
    return isinstance(value, list) and bool(value) and all(isinstance(x, str) for x in value)


def _tables(value: Any) -> bool:
    """An array of tables."""
    return isinstance(value, list) and bool(value) and all(isinstance(x, dict) for x in value)


def _settings(study: Study, params: dict[str, Any]) -> dict[str, Any]:
    """A run's matrix values with each case replaced by the keys it sets."""
    out: dict[str, Any] = {}
    for k, v in params.items():
        if k in study.cases:
            out.update(study.cases[k][v])
        else:
            out[k] = v
    return out


def _apply(
    config: dict[str, Any], params: dict[str, Any], where: str, hits: dict[str, list[Any]] | None = None
) -> dict[str, Any]:
    """``config`` with the run's settings; ``hits`` counts, per dotted key,
    the values set and the first element missed."""
    c = copy.deepcopy(config)
    if SCHEDULER in params:
        host = c.setdefault("host", {})
        # As `hvio compare`: the config's [host] params are its own scheduler's.
        if host.get("scheduler", "noop") != params[SCHEDULER]:
            host.pop("params", None)
        host["scheduler"] = params[SCHEDULER]
    if GUEST in params:
        for vm in c.get("vm", []):
            vm["guest_scheduler"] = params[GUEST]
    if SEED in params:
        c["seed"] = params[SEED]
    for k, v in params.items():
        if k not in (SCHEDULER, GUEST, SEED):
            missed: list[str] = []
            count = _set(c, k, v, where, missed)
            if hits is not None:
                h = hits.setdefault(k, [0, None])
                h[0] += count
                h[1] = h[1] or (missed[0] if missed else None)
    return c


@functools.cache
def build_identity() -> str:
    """The identity of the simulator that computes the runs: hvio's version and
    a hash of the compiled extension module's bytes. The package version alone
    would not do: a rebuild with changed code keeps it, and would be served
    the old build's results."""
    h = hashlib.sha256()
    with open(_hvio.__file__, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return f"{_hvio.version()}+{h.hexdigest()[:16]}"


def run_key(config: dict[str, Any], base: Path) -> str:
    """The cache key of one run: a hash of its config (seed included), the
    folder its relative paths resolve in, and the build (:func:`build_identity`)."""
    ident = {"config": config, "dir": str(base.resolve().parent), "hvio": build_identity()}
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()


def plan(study: Study) -> list[Run]:
    """Every run of the study's matrix, base by base, in the matrix's order."""
    keys = list(study.matrix)
    combos = 1
    for v in study.matrix.values():
        combos *= len(v)
    if combos * len(study.bases) > MAX_RUNS:
        raise StudyError(
            f"{study.path}: the matrix expands to {combos * len(study.bases)} runs; at most {MAX_RUNS}"
        )
    wanted = [(SCHEDULER, s) for s in study.matrix.get(SCHEDULER, [])] + [
        (f"{k}.{name}", c[SCHEDULER])
        for k, cs in study.cases.items()
        for name, c in cs.items()
        if SCHEDULER in c
    ]
    if wanted:
        known = set(_schedulers())
        for key, s in wanted:
            if s not in known:
                names = ", ".join(sorted(known))
                raise StudyError(
                    f"{study.path}: matrix key `{key}`: unknown scheduler {s!r} (known: {names})"
                )
    runs = []
    hits: dict[str, list[Any]] = {}
    for base in study.bases:
        config = _read_base(base)
        for values in product(*(study.matrix[k] for k in keys)):
            params = dict(zip(keys, values))
            c = _apply(config, _settings(study, params), f"{study.path}", hits)
            runs.append(Run(index=len(runs), base=base, params=params, config=c, key=run_key(c, base)))
    for k, (count, missed) in hits.items():
        if count == 0:
            raise StudyError(f"{study.path}: `{k}`: {missed or 'sets nothing'} in any run")
    return runs


def _schedulers() -> list[str]:
    return [s["name"] for s in json.loads(_hvio.schedulers())]


def run_one(config_json: str, origin: str, kind: str = SIMULATE) -> str:
    """Run one run's config (simulate it; for ``kind`` = ``"bench-scheduler"``
    time its host scheduler, for ``"mapreduce"`` run its job on the virtual
    cluster, for ``"mapreduce-tune"`` search its plan, for ``"switch-cost"``
    measure every switch); its result as JSON text.
    A plain function of strings, so a Dask worker can run it."""
    if kind in _RUNNERS:
        return getattr(_hvio, _RUNNERS[kind])(config_json, origin)
    return _hvio.simulate(config_json, origin, json=True)


def _write_whole(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


class _Cache:
    """Results by run key, one JSON file each, written whole or not at all."""

    def __init__(self, root: Path | None):
        self.root = root

    def path(self, key: str) -> Path:
        assert self.root is not None
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> str | None:
        if self.root is None:
            return None
        try:
            return self.path(key).read_text()
        except OSError:
            return None

    def put(self, key: str, text: str) -> None:
        if self.root is None:
            return
        p = self.path(key)
        p.parent.mkdir(parents=True, exist_ok=True)
        _write_whole(p, text)


def _progress(total: int | None, desc: str, show: bool | None):
    """A tqdm bar (count, rate, ETA) on stderr when it is a terminal
    (``show`` None), or as ``show`` says."""
    from tqdm import tqdm

    disable = not sys.stderr.isatty() if show is None else not show
    return tqdm(total=total, desc=desc, unit="run", disable=disable, file=sys.stderr)


def _failed(r: Run, e: Exception) -> _hvio.HvioError:
    what = ", ".join(f"{k} = {v!r}" for k, v in r.params.items())
    return _hvio.HvioError(f"run {r.index} ({what}): {e}")


def _result(r: Run, get: Callable[[], str]) -> str:
    try:
        return get()
    except _hvio.HvioError as e:
        raise _failed(r, e) from None


def _run_local(todo: list[Run], workers: int, done: Callable[[Run, str], None], kind: str) -> None:
    if workers <= 1:
        for r in todo:
            done(r, _result(r, lambda r=r: run_one(r.config_json(), r.origin, kind)))
        return
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(run_one, r.config_json(), r.origin, kind): r for r in todo}
        try:
            for f in as_completed(futures):
                done(futures[f], _result(futures[f], f.result))
        except BaseException:
            for f in futures:
                f.cancel()
            raise


def _run_cluster(todo: list[Run], address: str, done: Callable[[Run, str], None], kind: str) -> None:
    try:
        from dask.distributed import Client
        from dask.distributed import as_completed as dask_completed
    except ImportError:
        raise _hvio.HvioError(
            f"--cluster {address}: needs dask.distributed (pip install 'dask[distributed]')"
        ) from None
    try:
        client = Client(address, timeout="20s")
    except (OSError, TimeoutError) as e:
        raise _hvio.HvioError(f"--cluster {address}: cannot reach the Dask scheduler: {e}") from None
    with client:
        futures = client.map(
            run_one,
            [r.config_json() for r in todo],
            [r.origin for r in todo],
            [kind] * len(todo),
            key=[f"hvio-run-{r.key}" for r in todo],
            pure=False,
        )
        by_key = {f.key: r for f, r in zip(futures, todo)}
        for f in dask_completed(futures):
            done(by_key[f.key], _result(by_key[f.key], f.result))


@dataclass
class Sweep:
    """A finished sweep: its runs, their results, the long-form table."""

    study: Study
    runs: list[Run]
    results: list[dict[str, Any]]
    computed: int
    seconds: float
    out: Path | None = None

    @property
    def frame(self) -> pd.DataFrame:
        return long_form(self.study, self.runs, self.results)


def _flat(d: dict[str, Any], prefix: str, keep: list[str] | None) -> dict[str, Any]:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            for k2, v2 in v.items():
                if isinstance(v2, (int, float, str, bool)):
                    out[f"{prefix}{k}_{k2}"] = v2
        elif isinstance(v, (int, float, str, bool)):
            out[f"{prefix}{k}"] = v
    if keep is not None:
        want = {f"{prefix}{k}" for k in keep}
        out = {k: v for k, v in out.items() if k in want}
    return out


def long_form(study: Study, runs: list[Run], results: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per run × VM × job: the run's matrix values, the job's figures,
    its VM's (``vm_*``) and the host's (``host_*``)."""
    rows = []
    keep = study.keep
    if study.kind in _RUNNERS:
        # One row per run: its matrix values and what the run measured.
        for run, res in zip(runs, results):
            row = {"run": run.index, "key": run.key[:16], **run.params}
            row.update({k: v for k, v in res.items() if isinstance(v, (int, float, str, bool))})
            row.update({f"counter_{k}": v for k, v in res.get("counters", [])})
            rows.append(row)
        return pd.DataFrame(rows)
    for run, res in zip(runs, results):
        head = {"run": run.index, "key": run.key[:16]}
        if len(study.bases) > 1:
            head["base"] = run.base.name
        head.update({k: v for k, v in run.params.items()})
        head.setdefault(SCHEDULER, res["scheduler"])
        head.setdefault(SEED, res["seed"])
        head.update(
            total_mb_per_s=res["total_mb_per_s"], sim_time_s=res["sim_time_s"], truncated=res["truncated"]
        )
        host = _flat({k: v for k, v in res["host"].items() if k != "scheduler"}, "host_", keep.get("host"))
        vms = {
            v["vm"]: _flat({k: x for k, x in v.items() if k != "vm"}, "vm_", keep.get("vm"))
            for v in res["vms"]
        }
        for j in res["jobs"]:
            job = _flat({k: x for k, x in j.items() if k not in ("vm", "job")}, "", keep.get("job"))
            rows.append({**head, "vm": j["vm"], "job": j["job"], **job, **vms.get(j["vm"], {}), **host})
    return pd.DataFrame(rows)


def sweep(
    study: str | PathLike | Study,
    *,
    out: str | PathLike | None = "out",
    cluster: str | None = None,
    workers: int | None = None,
    cache: bool = True,
    progress: bool | None = None,
    cache_dir: str | PathLike | None = None,
) -> Sweep:
    """Run a study's matrix and return a :class:`Sweep` (``.frame`` is the long-form table).

    ``workers`` threads run locally (default: every core; 1 runs the runs one
    by one); ``cluster`` sends the runs to that Dask scheduler instead.
    With ``out``, results are cached under ``out/cache`` and written under
    ``out/sweep/<study>/``; ``cache_dir`` caches there instead (with no
    ``out``, nothing else is written); ``cache=False`` computes every run
    again. ``progress`` shows a bar (default: when stderr is a terminal).
    """
    st = study if isinstance(study, Study) else load_study(study)
    if st.stages:
        raise StudyError(f"{st.path}: a study in stages runs with sweep_stages()")
    runs = plan(st)
    if st.kind == BENCH_SCHEDULER:
        # A timing measures this machine now: never taken from a cache, and
        # one at a time, so that no run of it competes with another.
        cache, cache_dir, workers = False, None, 1
    out_dir = Path(out) if out is not None else None
    if cache_dir is None and out_dir is not None:
        cache_dir = out_dir / "cache"
    store = _Cache(Path(cache_dir) if cache_dir is not None else None)
    texts: dict[int, str] = {}
    if cache:
        for r in runs:
            t = store.get(r.key)
            if t is not None:
                texts[r.index] = t
    # Runs with the same config (the same key) are computed once.
    todo, seen = [], set()
    for r in runs:
        if r.index not in texts and r.key not in seen:
            seen.add(r.key)
            todo.append(r)
    started = time.perf_counter()
    bar = _progress(len(todo), st.name, progress)
    by_key: dict[str, str] = {}
    # Each result is parsed as it arrives, while the other workers simulate.
    parsed: dict[str, dict[str, Any]] = {}

    def done(r: Run, text: str) -> None:
        by_key[r.key] = text
        parsed[r.key] = json.loads(text)
        store.put(r.key, text)
        bar.update(1)

    try:
        if cluster:
            _run_cluster(todo, cluster, done, st.kind)
        else:
            _run_local(todo, workers if workers is not None else (os.cpu_count() or 1), done, st.kind)
    finally:
        bar.close()
    seconds = time.perf_counter() - started
    for r in runs:
        if r.index not in texts:
            texts[r.index] = by_key[r.key]
    # A run whose config another run shares gets a result object of its own.
    results = [parsed.pop(r.key) if r.key in parsed else json.loads(texts[r.index]) for r in runs]
    s = Sweep(study=st, runs=runs, results=results, computed=len(todo), seconds=seconds)
    if out_dir is not None:
        s.out = write(s, out_dir / "sweep" / st.name, texts)
    return s


def stage_matrix(study: Study, stage: Study, done: dict[str, Sweep]) -> Study:
    """``stage`` with the matrix its ``from`` function gives from the stages
    ``done`` before it: ``analysis.FUNCTION(done)`` returns matrix entries
    (as a study file writes them: a value, a list, a range, cases), set over
    the stage's own."""
    if stage.hook is None:
        return stage
    module = importlib.import_module(f"hvio.analysis.{study.analysis}")
    fn = getattr(module, stage.hook, None)
    if not callable(fn):
        raise StudyError(
            f"{study.path}: stage `{stage.stage}`: from {stage.hook!r}: no function"
            f" hvio.analysis.{study.analysis}.{stage.hook}"
        )
    extra = fn(done)
    if not isinstance(extra, dict) or not all(isinstance(k, str) for k in extra):
        raise StudyError(
            f"{study.path}: stage `{stage.stage}`: {stage.hook}() must return matrix entries {{key: values}}"
        )
    assert stage.doc is not None
    where = f"stage `{stage.stage}` (matrix from {stage.hook}())"
    built = _study(study.path, stage.doc, stage.quick, where=where, extra=extra)
    built.stage, built.hook, built.doc = stage.stage, stage.hook, stage.doc
    return built


def sweep_stages(
    study: str | PathLike | Study, *, matrix: dict[str, list[Any]] | None = None, **kw: Any
) -> dict[str, Sweep]:
    """Run a study's stages one after another, each a :func:`sweep` (same
    keywords; results under ``out/sweep/<study>/<stage>/``); a stage with
    ``from = "FUNCTION"`` gets its matrix from ``FUNCTION`` of the study's
    analysis module, given the stages before it (a calibration run, say,
    whose results size the next runs). ``matrix`` sets keys of every
    stage's matrix (``{"seed": [1]}``). The sweeps by stage name, in order."""
    st = study if isinstance(study, Study) else load_study(study)
    if not st.stages:
        raise StudyError(f"{st.path}: no [[stage]]: run it with sweep()")
    done: dict[str, Sweep] = {}
    for stage in st.stages:
        stage = stage_matrix(st, stage, done)
        stage.matrix.update(matrix or {})
        done[stage.stage or stage.name] = sweep(stage, **kw)
    return done


def write(s: Sweep, where: Path, texts: dict[int, str]) -> Path:
    """``results.parquet``, ``runs/NNNN.json`` and ``runs.json`` under ``where``."""
    (where / "runs").mkdir(parents=True, exist_ok=True)
    index = []
    for r in s.runs:
        name = f"runs/{r.index:04d}.json"
        _write_whole(where / name, texts[r.index])
        index.append({"run": r.index, "key": r.key, "base": str(r.base), "params": r.params, "result": name})
    meta = {
        "study": str(s.study.path),
        "name": s.study.name,
        "hvio": _hvio.version(),
        "build": build_identity(),
        "runs": index,
    }
    _write_whole(where / "runs.json", json.dumps(meta, indent=1))
    tmp = where / ".results.parquet.tmp"
    s.frame.to_parquet(tmp, index=False)
    tmp.replace(where / "results.parquet")
    return where


def summary(s: Sweep) -> pd.DataFrame:
    """Total MB/s by the matrix's keys other than the seed: mean, sd and the
    number of runs (seeds) behind each."""
    runs = pd.DataFrame(
        [{**({"base": r.base.name} if len(s.study.bases) > 1 else {}), **r.params} for r in s.runs]
    )
    runs["total_mb_per_s"] = [res["total_mb_per_s"] for res in s.results]
    keys = [k for k in runs.columns if k not in (SEED, "total_mb_per_s")]
    if not keys:
        return runs["total_mb_per_s"].agg(["mean", "std", "count"]).to_frame().T
    g = runs.groupby(keys, sort=False)["total_mb_per_s"]
    return g.agg(["mean", "std", "count"]).rename(
        columns={"mean": "total MB/s", "std": "sd", "count": "runs"}
    )
