"""scripts/locality-bound.py: the most zero seeks a run's requests allowed,
in any order and within a time window, against the simulator's own bound."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import hvio

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("locality_bound", ROOT / "scripts" / "locality-bound.py")
lb = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lb)

MS = 1_000_000
HEADER = "vm,op,sector,sectors,meta,arrival_ns,dispatch_ns,start_ns,done_ns\n"


def write_records(path, rows):
    """rows: (vm, sector, sectors, arrival_ms, dispatch_ms, done_ms)."""
    lines = [f"{vm},read,{s},{n},0,{a * MS},{d * MS},{d * MS},{c * MS}\n" for vm, s, n, a, d, c in rows]
    path.write_text(HEADER + "".join(lines))


def test_bounds_by_window(tmp_path):
    p = tmp_path / "r.csv"
    write_records(
        p,
        [
            # a's stream of three, dispatched out of order, all present together
            ("a", 16, 8, 0, 1, 2),
            ("a", 0, 8, 0, 2, 3),
            ("a", 8, 8, 0, 3, 4),
            # b reads a block that touches a's stream a second later
            ("b", 24, 8, 1000, 1000, 1001),
            # b's lone request far away
            ("b", 10_000, 8, 0, 5, 6),
        ],
    )
    reqs = lb.load(p)
    # Any order: {0..32} is one group of four, 10000 alone: 5 - 2 = 3.
    assert lb.bound(reqs) == {"a": (2, 3), "b": (1, 2)}
    # Within 20 ms, b's late read is no longer linked to a's stream.
    assert lb.bound(reqs, 20 * MS) == {"a": (2, 3), "b": (0, 2)}
    # The run's own order got one zero: 0..8 after 16..24 is not a touch,
    # 8..16 after 0..8 is.
    assert sum(lb.achieved(reqs).values()) == 1


def test_simulator_reports_the_order_free_bound():
    cfg = (
        'seed = 1\nmax_time_s = 60\n[host]\nscheduler = "deadline"\n'
        '[[vm]]\nname = "seq"\n[[vm.job]]\nrw = "read"\nbs = "64KiB"\nsize = "8MiB"\n'
        '[[vm]]\nname = "rand"\n[[vm.job]]\nrw = "randread"\nbs = "4KiB"\nsize = "64MiB"\nrequests = 200\n'
    )
    # Off by default: its memory grows with the run.
    assert hvio.simulate(cfg).host["seek"]["zero_bound"] is None
    seek = hvio.simulate(cfg + "[output]\nlocality_bound = true\n").host["seek"]
    assert seek["zero"] <= seek["zero_bound"] <= seek["total"]
    # The sequential reader's 128 requests of 64 KiB form one group.
    assert seek["zero_bound"] >= 127
    assert abs(seek["zero_bound_frac"] - seek["zero_bound"] / seek["total"]) < 1e-12
