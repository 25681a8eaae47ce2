#!/usr/bin/env python3
"""The host scheduler's time slices over time, per VM (docs/schedulers.md,
"Slices over time").

Usage:
    hvio sim experiments/paper000-four-vms.toml --scheduler cfq --json cfq.json
    python3 scripts/slice-table.py cfq.json [period_s] [until_s]

Reads `series.slices`, `slice_ms` and `slice_used_ms` of an `hvio sim`
JSON result (per VM and bucket: slices begun, their mean granted and mean
used length) and prints, for every `period_s` (default 10) up to `until_s`
(default 60), each VM's mean granted slice (ms) and the share of the
period its slices used the disk (%). A slice counts in the period it began
in, so a share may exceed what fits in the period when a long slice began
near its end. Standard library only.
"""

import json
import sys


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    path = argv[1]
    period = float(argv[2]) if len(argv) > 2 else 10.0
    until = float(argv[3]) if len(argv) > 3 else 60.0
    with open(path) as f:
        r = json.load(f)
    s = r["series"]
    if not s.get("slices"):
        sys.exit(f"{path}: scheduler {r['scheduler']} reports no slices")
    per = max(1, round(period / s["interval_s"]))
    buckets = min(len(s["slices"][0]), round(until / s["interval_s"]))
    vms = s["vms"]
    head = ["from s"] + [f"{v} ms" for v in vms] + [f"{v} %" for v in vms]
    print(f"{r['scheduler']}: mean granted slice and share of disk time per {period:g} s")
    print("  ".join(f"{h:>9}" for h in head))
    for b0 in range(0, buckets, per):
        granted, share = [], []
        for vm in range(len(vms)):
            rows = range(b0, min(b0 + per, buckets))
            n = sum(s["slices"][vm][b] for b in rows)
            g = sum(s["slices"][vm][b] * s["slice_ms"][vm][b] for b in rows)
            u = sum(s["slices"][vm][b] * s["slice_used_ms"][vm][b] for b in rows)
            granted.append(f"{g / n:.0f}" if n else "-")
            share.append(f"{100 * u / (len(rows) * s['interval_s'] * 1000):.0f}")
        cells = [f"{b0 * s['interval_s']:.0f}"] + granted + share
        print("  ".join(f"{c:>9}" for c in cells))


if __name__ == "__main__":
    main(sys.argv)
