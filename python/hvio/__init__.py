"""hvio: disk I/O scheduling for virtualized hosts.

The simulator, the schedulers and the device models are Rust (``hvio._hvio``
is the compiled glue); this package turns their results into pandas
DataFrames, figures and reports.

>>> import hvio
>>> r = hvio.simulate("experiments/paper000-four-vms.toml")
>>> r.vms[["vm", "mb_per_s"]]
"""

from __future__ import annotations

from ._hvio import HvioError
from .api import (
    Comparison,
    Report,
    Result,
    Tuned,
    compare,
    comparison,
    default_scenario,
    experiments,
    load_comparison,
    replay,
    reproduce,
    scheduler_table,
    schedulers,
    simulate,
    tune,
)
from .sweeps import Study, Sweep, load_study, plan, sweep

__all__ = [
    "Comparison",
    "HvioError",
    "Report",
    "Result",
    "Study",
    "Sweep",
    "Tuned",
    "compare",
    "comparison",
    "default_scenario",
    "experiments",
    "load_comparison",
    "load_study",
    "plan",
    "replay",
    "reproduce",
    "scheduler_table",
    "schedulers",
    "simulate",
    "sweep",
    "tune",
]
