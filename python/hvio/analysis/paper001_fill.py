"""Beyond paper 001, whose image never filled: random 4 KiB writes as the
reshaped image's data region fills, baseline against reshaped QEMU, with
the write amplification of reshaping's cleaner, of the drive, and of both
together (end to end), by utilisation of the data region; and the
utilisation at which reshaping stops paying.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from ..studies import Analysis, Table
from ..sweeps import Sweep
from .paper001 import PCT, by_system, capacity, drive_state, gain, points, rounds_note, size_bytes

COLUMNS = [
    "utilisation",
    "baseline MB/s",
    "reshaped MB/s",
    "reshaped vs baseline",
    "baseline device WA",
    "reshaped host WA",
    "reshaped device WA",
    "reshaped end-to-end WA",
]
DIGITS: dict[str, int | str] = {
    "utilisation": 2,
    "baseline MB/s": 1,
    "reshaped MB/s": 1,
    "reshaped vs baseline": PCT,
    "baseline device WA": 2,
    "reshaped host WA": 3,
    "reshaped device WA": 2,
    "reshaped end-to-end WA": 2,
}


def analyse(s: Sweep, paper: dict[str, Any], where: Path | None) -> Analysis:
    p = points(s)
    reshaped_run = next(r for r in s.runs if "reshape" in r.config["vm"][0])
    rc = reshaped_run.config
    reshape = rc["vm"][0]["reshape"]
    region = size_bytes(reshape["data_region_bytes"])
    segment = size_bytes(reshape["segment_bytes"])
    job = rc["vm"][0]["job"][0]
    rows, data, stops = [], [], None
    for case in s.study.matrix["utilisation"]:
        sys = by_system(p, utilisation=case)
        base, resh = sys["baseline QEMU"], sys["reshaped QEMU"]
        # The data set's share of the data region, from the run's config.
        run = s.runs[int(resh["run"])]
        u = size_bytes(run.config["vm"][0]["job"][0]["size"]) / region
        end_to_end = resh["host_wa"] * resh["device_wa"]
        if stops is None and resh["mb_per_s"] <= base["mb_per_s"]:
            stops = u
        rows.append(
            [
                u,
                base["mb_per_s"],
                resh["mb_per_s"],
                gain(resh["mb_per_s"], base["mb_per_s"]),
                base["device_wa"],
                resh["host_wa"],
                resh["device_wa"],
                end_to_end,
            ]
        )
        data.append(
            {
                "utilisation": u,
                "baseline": {"mb_per_s": base["mb_per_s"], "device_wa": base["device_wa"]},
                "reshaped": {
                    "mb_per_s": resh["mb_per_s"],
                    "host_wa": resh["host_wa"],
                    "device_wa": resh["device_wa"],
                    "end_to_end_wa": end_to_end,
                },
            }
        )
    verdict = (
        f"reshaping stops paying at utilisation {stops:.2f} of the data region"
        if stops is not None
        else f"reshaping still pays at utilisation {rows[-1][0]:.2f} of the data region, the highest measured"
    )
    notes = [
        f"scale: a data region of {region // segment} segments of {segment >> 20} MiB; "
        f"{job['numjobs']} threads at iodepth {job['iodepth']} write {size_bytes(job['io_size']) // region} "
        "× the region's size at random over a data set of utilisation × the region; the drive "
        f"({rc['disk']['preset']} scaled to {capacity(rc)} GiB) {drive_state(rc)}; bandwidth and write "
        "amplification over the whole run, the image's first fill included",
        verdict,
    ]
    note = rounds_note(p)
    if note:
        notes.append(note)
    table = Table(
        "random 4 KiB writes as the reshaped image fills, SATA SSD (850 PRO preset), host noop",
        pd.DataFrame(rows, columns=COLUMNS),
        DIGITS,
    )
    return Analysis(tables=[table], notes=notes, data=data)
