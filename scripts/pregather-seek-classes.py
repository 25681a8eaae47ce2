#!/usr/bin/env python3
"""Classify a run's host dispatches by seek distance (docs/pregather.md,
"Why Pregather's zero-seek share is below CFQ's").

Usage:
    hvio sim experiments/paper000-four-vms.toml --scheduler pregather --records p.csv
    python3 scripts/pregather-seek-classes.py p.csv [window_ms]

The records (`hvio sim --records`) are sorted by dispatch time; a dispatch's
seek distance is from the end of the previous dispatch, whatever its VM (as
Table 4 counts it). Each non-zero dispatch falls in the first class that
fits:

- reversed: a request of the same VM ending exactly where this one starts
  was already queued and went later (a run of queued requests served
  downwards);
- continuation <= window: a request of the previous dispatch's VM starting
  where that dispatch ended was queued, or arrived within `window_ms`
  (default 20) of this dispatch;
- continuation later: such a request came, but later;
- none: no request ever continued the previous dispatch.

It also counts, for the zero-distance dispatches, how many were already
queued when the request before them completed (no idling needed).
"""

import collections
import csv
import sys


def load(path):
    recs = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if r["op"] == "flush":
                continue
            recs.append(
                {
                    "vm": r["vm"],
                    "kind": r["op"] + ("+meta" if r["meta"] == "1" else ""),
                    "sector": int(r["sector"]),
                    "sectors": int(r["sectors"]),
                    "arrival": int(r["arrival_ns"]),
                    "dispatch": int(r["dispatch_ns"]),
                    "done": int(r["done_ns"]),
                }
            )
    recs.sort(key=lambda r: (r["dispatch"], r["done"]))
    return recs


def main():
    if len(sys.argv) not in (2, 3) or sys.argv[1] in ("-h", "--help"):
        sys.exit(__doc__)
    try:
        recs = load(sys.argv[1])
        window = float(sys.argv[2]) * 1e6 if len(sys.argv) == 3 else 20e6
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"pregather-seek-classes: {sys.argv[1]}: {e}")
    ends = collections.defaultdict(list)
    starts = collections.defaultdict(list)
    for i, r in enumerate(recs):
        ends[(r["vm"], r["sector"] + r["sectors"])].append(i)
        starts[(r["vm"], r["sector"])].append(i)
    cols = ["dispatches", "zero", "reversed", "continuation <= window", "continuation later", "none"]
    by_vm = collections.defaultdict(collections.Counter)
    reversed_kinds = collections.Counter()
    zero_queued = collections.Counter()
    zero_idled = collections.Counter()
    for i in range(1, len(recs)):
        p, r = recs[i - 1], recs[i]
        c = by_vm[r["vm"]]
        c["dispatches"] += 1
        head = p["sector"] + p["sectors"]
        if r["sector"] == head:
            c["zero"] += 1
            if r["arrival"] <= p["done"]:
                zero_queued[(r["vm"], r["kind"])] += 1
            else:
                zero_idled[(r["vm"], r["kind"])] += 1
            continue
        if any(j > i and recs[j]["arrival"] <= r["dispatch"] for j in ends[(r["vm"], r["sector"])]):
            c["reversed"] += 1
            reversed_kinds[(r["vm"], r["kind"])] += 1
            continue
        later = [
            recs[j]["arrival"]
            for j in starts[(p["vm"], head)]
            if j > i and recs[j]["arrival"] >= p["arrival"]
        ]
        if later and min(later) <= r["dispatch"] + window:
            c["continuation <= window"] += 1
        elif later:
            c["continuation later"] += 1
        else:
            c["none"] += 1
    print("vm | " + " | ".join(cols))
    total = collections.Counter()
    for vm in sorted(by_vm):
        total.update(by_vm[vm])
        print(vm + " | " + " | ".join(str(by_vm[vm][k]) for k in cols))
    print("all | " + " | ".join(str(total[k]) for k in cols))
    n = max(total["dispatches"], 1)
    print(
        f"zero-seek share {100 * total['zero'] / n:.2f} %; reversed {100 * total['reversed'] / n:.2f} points"
    )
    print("reversed by VM and kind:", dict(sorted(reversed_kinds.items())))
    keys = sorted(set(zero_queued) | set(zero_idled))
    print("zero-distance dispatches: (queued at the previous completion, arrived after it)")
    for k in keys:
        print(f"  {k[0]} {k[1]}: {zero_queued[k]}, {zero_idled[k]}")


if __name__ == "__main__":
    main()
