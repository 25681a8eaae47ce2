"""What the analyses of paper 000 (Pregather, Ling et al., IEEE TPDS 2015)
share: the disk and the guest models their notes name, and reading a run's
result (a host counter, a job's execution time).
"""

from __future__ import annotations

from typing import Any

MISSING = "—"

DISK = (
    "hvio's HDD model (7200 RPM, 1 TB: seek curve, rotation, zones, read-ahead cache; write cache off "
    'unless the guest model says "write cache on"; one command at a time unless it says "NCQ")'
)

# What each guest model of the studies (their `guests` cases) is, for the
# notes; a case not named here is shown by its name.
GUEST_LABELS = {
    "direct": "direct I/O guests (hvio's sysbench presets: 16 threads, 16 KiB, O_DIRECT)",
    "page-cache": "page-cache guests (sysbench defaults: buffered, fsync every 100 requests; "
    "read-ahead and write-back of a 1 GiB guest)",
    "one-stream": "one-stream guests (each sequential application one 44 KiB stream, one request in flight)",
    "page-cache+wc": "page-cache guests, drive write cache on",
    "page-cache+blktap": "page-cache guests through blktap2/tapdisk AIO (io_merge, dom0 elevator merges)",
    "page-cache+ncq": "page-cache guests, drive with NCQ (queue depth 32, SPTF), write cache off",
}


def guest_label(case: str) -> str:
    return GUEST_LABELS.get(case, case)


def counter(r: dict[str, Any], name: str) -> float:
    """A host counter of a run (0 when the scheduler does not report it)."""
    return next((v for k, v in r["host"]["counters"] if k == name), 0.0)


def exec_time(r: dict[str, Any] | None, vm: str, job: str) -> float | None:
    """Execution time of job ``job`` of VM ``vm`` (``None`` without the run or the job)."""
    if r is None:
        return None
    return next((j["exec_time_s"] for j in r["jobs"] if j["vm"] == vm and j["job"] == job), None)


def claim(paper: dict[str, Any], figure: str) -> str:
    """The paper's claim about ``figure`` (its ``[[claims]]``), as a note."""
    c = next(c for c in paper["claims"] if c["figure"] == figure)
    return f"paper, {figure}: {c['text']}"


def check_claims(paper: dict[str, Any], where: Any, figures: list[str]) -> None:
    from ..sweeps import StudyError

    for figure in figures:
        if not any(c.get("figure") == figure and "text" in c for c in paper.get("claims", [])):
            raise StudyError(f'{where}: no [[claims]] with figure = "{figure}" and its text')
