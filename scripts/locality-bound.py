#!/usr/bin/env python3
"""How many zero seeks a run's host requests allowed, against how many the
scheduler got (docs/pregather.md, "How much locality there was").

Usage:
    hvio sim experiments/paper000-four-vms.toml --scheduler pregather --records p.csv
    python3 scripts/locality-bound.py p.csv [window_ms ...]

A zero seek (btt's measure, paper 000 Table 4) needs two consecutive
dispatches whose sector ranges overlap or touch. Link every such pair of
requests; a group of k linked requests gives at most k - 1 zeros, whatever
the order. Counted over all the run's requests, that is the order-free bound
`hvio` reports as `zero_bound` ("0, most any order gives"). It ignores
time, so it also links a random read to a block written a minute earlier.

With a window W, two requests are linked only if they were in the system
at about the same time in this run: their spans [arrival, completion + W]
overlap. A scheduler that waits at most W for a request (Pregather's timers,
CFQ's slice_idle) cannot put two requests further apart than that next to
each other without holding one back, so the windowed bound is the locality
within reach. It is measured on the run's own arrival times, which the
scheduler shaped, so it is a diagnostic for one run rather than a proof
for every scheduler.

Prints the bound for each window (default: none, 1000, 200, 20 and 0 ms),
per VM and in all, next to the zeros the run's order got.
"""

import collections
import csv
import sys

MS = 1_000_000


def load(path):
    """The run's positioned requests (flushes have no sectors), in record order."""
    with open(path, newline="") as f:
        return [
            (
                int(r["sector"]),
                int(r["sector"]) + int(r["sectors"]),
                int(r["arrival_ns"]),
                int(r["done_ns"]),
                int(r["dispatch_ns"]),
                r["vm"],
            )
            for r in csv.DictReader(f)
            if r["op"] != "flush"
        ]


def bound(reqs, window_ns=None):
    """The most zero seeks per VM any order could give: {vm: (zeros, requests)}.

    A group's first request (by position) is the one that cannot follow a
    linked request; every other counts for its own VM.
    """
    n = len(reqs)
    parent = list(range(n))

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    by_start = sorted(range(n), key=lambda i: (reqs[i][0], i))
    for k, i in enumerate(by_start):
        s, e, arr, done, _, _ = reqs[i]
        for j in by_start[k + 1 :]:
            s2, _, arr2, done2, _, _ = reqs[j]
            if s2 > e:
                break
            if window_ns is None or (arr2 <= done + window_ns and arr <= done2 + window_ns):
                parent[find(i)] = find(j)
    first = {}
    per = collections.defaultdict(lambda: [0, 0])
    for i in by_start:
        root = find(i)
        vm = reqs[i][5]
        per[vm][1] += 1
        if root in first:
            per[vm][0] += 1
        else:
            first[root] = i
    return {vm: tuple(v) for vm, v in sorted(per.items())}


def achieved(reqs):
    """The zero seeks of the run's own dispatch order, per VM."""
    zeros = collections.Counter()
    last = None
    for s, e, *_rest, vm in sorted(reqs, key=lambda r: r[4]):
        if last is not None and (last[0] <= s <= last[1] or last[0] <= e <= last[1]):
            zeros[vm] += 1
        last = (s, e)
    return zeros


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    reqs = load(argv[1])
    if len(reqs) < 2:
        sys.exit(f"{argv[1]}: fewer than two positioned requests")
    windows = [float(w) for w in argv[2:]] or [None, 1000, 200, 20, 0]
    vms = sorted({r[5] for r in reqs})
    distances = len(reqs) - 1
    got = achieved(reqs)
    print("window ms  " + "  ".join(f"{vm:>8}" for vm in vms) + "       all")
    for w in windows:
        b = bound(reqs, None if w is None else int(w * MS))
        cells = [f"{b[vm][0]:>8}" for vm in vms]
        total = sum(z for z, _ in b.values())
        label = "any" if w is None else f"{w:g}"
        print(f"{label:>9}  " + "  ".join(cells) + f"  {100 * total / distances:7.2f} %")
    cells = [f"{got[vm]:>8}" for vm in vms]
    print(f"{'this run':>9}  " + "  ".join(cells) + f"  {100 * sum(got.values()) / distances:7.2f} %")
    cells = [f"{sum(1 for r in reqs if r[5] == vm):>8}" for vm in vms]
    print(f"{'requests':>9}  " + "  ".join(cells))


if __name__ == "__main__":
    main(sys.argv)
