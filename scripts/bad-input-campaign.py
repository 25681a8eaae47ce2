"""Bad-input campaign: a careful user's mistakes against every hvio subcommand.

Generates bad inputs for every subcommand and input format (simulator
configs, the daemon's config, fio job files, text traces of every format,
DiskSim disk descriptions and validation traces, command-line numbers,
outputs that name an input) and runs each case in a fresh directory. A case
passes when hvio

- exits with status 1 (not 0, not a panic's 101, not a signal),
- says where the fault is: its message names the file (and line or key), or
  the option, that the case broke,
- keeps the message short (at most ``MAX_MESSAGE`` bytes),
- ends within the timeout (no hang),
- leaves nothing behind (no new file or directory) and overwrites nothing
  (every input keeps its bytes).

Run ``make bad-input`` (every case, the release binary) or
``python3 scripts/bad-input-campaign.py --quick`` (one case in ``QUICK_EVERY`` of each group,
as ``tests/test_bad_input_campaign.py`` does in ``make test``). Exit status 0
when no case failed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRACE_DATA = ROOT / "crates" / "hvio-trace" / "tests" / "data"
DISK_DATA = ROOT.parent / "shared" / "data" / "hdd-validation"

MAX_MESSAGE = 2048
QUICK_EVERY = 7


@dataclass
class Case:
    """One bad input: the command, the files it needs, where the fault is."""

    group: str
    name: str
    args: list[str]
    files: dict[str, bytes] = field(default_factory=dict)
    #: The message must contain every one of these (the file, the option).
    must: list[str] = field(default_factory=list)
    #: ... and at least one of these, when given (a line, a key).
    any_of: list[str] = field(default_factory=list)


SIM = """seed = 1
max_time_s = 5.0
[disk]
model = "simple"
[host]
scheduler = "cfq"
[[vm]]
name = "a"
weight = 500
image_size = "1GiB"
virtio_depth = 64
[[vm.job]]
rw = "randread"
bs = "4KiB"
size = "1MiB"
iodepth = 2
numjobs = 1
requests = 50
thinktime_us = 10
"""

# (table header or "" for the top, key) of SIM, and values no key accepts.
SIM_KEYS = [
    ("", "seed"),
    ("", "max_time_s"),
    ("[[vm]]", "weight"),
    ("[[vm]]", "image_size"),
    ("[[vm]]", "virtio_depth"),
    ("[[vm.job]]", "rw"),
    ("[[vm.job]]", "bs"),
    ("[[vm.job]]", "size"),
    ("[[vm.job]]", "iodepth"),
    ("[[vm.job]]", "numjobs"),
    ("[[vm.job]]", "requests"),
    ("[[vm.job]]", "thinktime_us"),
]
BAD_VALUES = ["nan", "-1", '""', "1e300", "[1]", "{ a = 1 }", '"12 parsecs"']

HOST = """[store]
path = "s.img"
create = true
[scheduler]
name = "deadline"
params = { fifo_batch = 16 }
[log]
level = "info"
[[vm]]
name = "vm1"
size = "4MiB"
weight = 500
exports = []
"""

FIO = """[global]
rw=randread
bs=4k
size=1m
[db]
iodepth=8
numjobs=2
rwmixread=70
"""

MSR = b"128166372000000000,host,0,Read,4096,4096,100\n128166372000100000,host,0,Write,8192,4096,100\n"


def replace_key(text: str, table: str, key: str, value: str) -> str:
    """`text` with `key` (the first one after `table`) set to `value`."""
    lines = text.splitlines()
    start = lines.index(table) if table else 0
    for i in range(start, len(lines)):
        if lines[i].split("=")[0].strip() == key:
            lines[i] = f"{key} = {value}"
            return "\n".join(lines) + "\n"
    raise KeyError(key)


def typo(word: str) -> str:
    """The word with two different neighbouring letters swapped (a slip)."""
    i = next((i for i in range(1, len(word) - 1) if word[i] != word[i + 1]), None)
    return word + "x" if i is None else word[:i] + word[i + 1] + word[i] + word[i + 2 :]


def case(
    group: str, name: str, args: list[str], files: dict, must: list[str], any_of: list[str] | None = None
) -> Case:
    files = {k: v.encode() if isinstance(v, str) else v for k, v in files.items()}
    return Case(group, name, args, files, must, any_of or [])


def sim_cases() -> list[Case]:
    cases = []
    for cmd in ("sim", "compare"):
        extra = ["--schedulers", "noop"] if cmd == "compare" else []
        for table, key in SIM_KEYS:
            for v in BAD_VALUES:
                text = replace_key(SIM, table, key, v)
                cases.append(
                    case(
                        cmd,
                        f"{key}={v}",
                        [cmd, "c.toml", *extra],
                        {"c.toml": text},
                        ["c.toml"],
                        [key, "c.toml:"],
                    )
                )
            text = replace_key(SIM, table, key, "1").replace(f"{key} = 1", f"{typo(key)} = 1", 1)
            cases.append(
                case(
                    cmd, f"typo {typo(key)}", [cmd, "c.toml", *extra], {"c.toml": text}, ["c.toml", typo(key)]
                )
            )
    garbage = {
        "empty": b"",
        "binary": bytes(range(256)) * 4,
        "deep": b"x = " + b"[" * 5000 + b"\n",
        "long string": b'x = "' + b"a" * 500_000 + b"\n",
        "unknown table": b"[hots]\nscheduler = 'cfq'\n",
    }
    for name, data in garbage.items():
        cases.append(case("sim", name, ["sim", "c.toml"], {"c.toml": data}, ["c.toml"]))
    # Valid TOML, a bad value of 300 kB: quoted in a few hundred bytes.
    long = "x" * 300_000
    for name, text in {
        "long VM name": replace_key(SIM, "[[vm]]", "name", f'"{long}"').replace("weight = 500", "weight = 0"),
        "long guest scheduler": SIM.replace("weight = 500", f'weight = 500\nguest_scheduler = "{long}"'),
        "long host scheduler": SIM.replace('"cfq"', f'"{long}"'),
        "long rw": replace_key(SIM, "[[vm.job]]", "rw", f'"{long}"'),
    }.items():
        cases.append(case("sim", name, ["sim", "c.toml"], {"c.toml": text}, ["c.toml"]))
    cases.append(
        case(
            "sim",
            "long --scheduler",
            ["sim", "c.toml", "--scheduler", long[:100_000]],
            {"c.toml": SIM},
            ["--scheduler"],
        )
    )
    guest = SIM.replace("weight = 500", 'weight = 500\nguest_scheduler = "noopp"')
    tunable = SIM.replace('scheduler = "cfq"', 'scheduler = "cfq"\nparams = { slice_sycn = 3 }')
    cases += [
        case("sim", "/dev/zero", ["sim", "/dev/zero"], {}, ["/dev/zero", "64 MiB"]),
        case("sim", "missing", ["sim", "nope.toml"], {}, ["nope.toml"]),
        case("sim", "directory", ["sim", "."], {}, ["."]),
        case(
            "sim",
            "scheduler typo",
            ["sim", "c.toml", "--scheduler", "bfg"],
            {"c.toml": SIM},
            ["--scheduler", "bfg"],
        ),
        case("sim", "guest scheduler typo", ["sim", "c.toml"], {"c.toml": guest}, ["c.toml", "noopp"]),
        case("sim", "tunable typo", ["sim", "c.toml"], {"c.toml": tunable}, ["c.toml", "slice_sycn"]),
        case("sim", "--seed -1", ["sim", "c.toml", "--seed", "-1"], {"c.toml": SIM}, ["--seed", "-1"]),
        case(
            "sim",
            "--json is a directory",
            ["sim", "c.toml", "--json", "d"],
            {"c.toml": SIM, "d/keep": b"k"},
            ["d"],
        ),
        case(
            "compare",
            "--schedulers typo",
            ["compare", "c.toml", "--schedulers", "noop,fcq"],
            {"c.toml": SIM},
            ["--schedulers", "fcq"],
        ),
        case("compare", "--seeds 0", ["compare", "c.toml", "--seeds", "0"], {"c.toml": SIM}, ["--seeds"]),
        case("reproduce", "unknown experiment", ["reproduce", "paper0-nothing"], {}, ["paper0-nothing"]),
        case("reproduce", "--seed -1", ["reproduce", "x", "--seed", "-1"], {}, ["--seed"]),
        case("schedulers", "typo", ["schedulers", "kyebr"], {}, ["kyebr"]),
        case("bench", "--requests 0", ["bench", "--requests", "0"], {}, ["--requests"]),
    ]
    return cases


def output_cases() -> list[Case]:
    """Outputs that are an input: refused, the input untouched."""
    sim = {"c.toml": SIM}
    own = {"o.toml": SIM + '[output]\nrecords = "o.toml"\n'}
    trace = {"t.csv": MSR}
    both = {**sim, **trace}
    store_is_config = HOST.replace('path = "s.img"', 'path = "h.toml"')
    log_is_config = HOST.replace('level = "info"', 'level = "info"\nrequests = "./h.toml"')
    log_is_store = HOST.replace('level = "info"', 'level = "info"\nrequests = "sub/../s.img"')
    convert = ["trace", "convert", "t.csv", "--format", "msr", "--to", "iolog3"]
    cases = [
        case("outputs", "sim --json C", ["sim", "c.toml", "--json", "c.toml"], sim, ["--json", "c.toml"]),
        case("outputs", "sim --records C", ["sim", "c.toml", "--records", "c.toml"], sim, ["c.toml"]),
        case(
            "outputs",
            "sim --json = --records",
            ["sim", "c.toml", "--json", "r", "--records", "r"],
            sim,
            ["r"],
        ),
        case("outputs", "[output] records = C", ["sim", "o.toml"], own, ["o.toml"]),
        case(
            "outputs",
            "compare --json C",
            ["compare", "c.toml", "--schedulers", "noop", "--json", "c.toml"],
            sim,
            ["c.toml"],
        ),
        case(
            "outputs",
            "replay --json T",
            ["replay", "t.csv", "--format", "msr", "--json", "t.csv"],
            trace,
            ["t.csv"],
        ),
        case(
            "outputs",
            "replay --json C",
            ["replay", "t.csv", "--format", "msr", "--config", "c.toml", "--json", "./c.toml"],
            both,
            ["c.toml"],
        ),
        case("outputs", "convert -o T", [*convert, "-o", "t.csv"], trace, ["t.csv"]),
        case(
            "outputs",
            "serve [store] path = config",
            ["serve", "--check", "h.toml"],
            {"h.toml": store_is_config},
            ["h.toml"],
        ),
        case(
            "outputs",
            "serve [log] requests = config",
            ["serve", "--check", "h.toml"],
            {"h.toml": log_is_config},
            ["h.toml"],
        ),
        case(
            "outputs",
            "serve [log] requests = store",
            ["serve", "--check", "h.toml"],
            {"h.toml": log_is_store, "sub/k": b""},
            ["s.img"],
        ),
        # A failed convert leaves no directory behind.
        case(
            "outputs",
            "convert -o a/b/out, bad trace",
            [*convert, "-o", "a/b/out"],
            {"t.csv": MSR + b"x\n"},
            ["t.csv"],
        ),
    ]
    if DISK_DATA.is_dir():
        spec = str(DISK_DATA / "ibm18es.parv")
        vt = (DISK_DATA / "ibm18es.trace").read_bytes()
        vd = ["validate-disk", spec, "vd/cdf.csv", "--out", "vd"]
        cases.append(
            case("outputs", "validate-disk --out at the trace", vd, {"vd/cdf.csv": vt}, ["vd/cdf.csv"])
        )
    return cases


def serve_cases() -> list[Case]:
    cases = []
    edits = {
        "typo table": ("[store]", "[stor]"),
        "typo key": ("create = true", "craete = true"),
        "size 0": ('size = "4MiB"', 'size = "0"'),
        "size -1": ('size = "4MiB"', "size = -1"),
        "size text": ('size = "4MiB"', 'size = "four"'),
        "weight nan": ("weight = 500", "weight = nan"),
        "scheduler typo": ('name = "deadline"', 'name = "dedline"'),
        "tunable typo": ("fifo_batch = 16", "fifo_btach = 16"),
        "tunable nan": ("fifo_batch = 16", "fifo_batch = nan"),
        "log level": ('level = "info"', 'level = "loud"'),
        "emulator rpm": (
            'path = "s.img"\ncreate = true',
            'kind = "emulator"\n[store.device]\nmodel = "hdd"\nrpm = -5',
        ),
        "emulator typo": (
            'path = "s.img"\ncreate = true',
            'kind = "emulator"\n[store.device]\nmodel = "hdd"\nrmp = 5400',
        ),
        "no vm": ("[[vm]]", "[[vmm]]"),
        "deep": ("[log]", "x = " + "[" * 5000 + "\n[log]"),
        "long VM name": ('name = "vm1"\nsize = "4MiB"', 'name = "' + "v" * 300_000 + '"\nsize = "0"'),
    }
    for name, (old, new) in edits.items():
        text = HOST.replace(old, new, 1)
        if "emulator" in name:
            text = text.replace("exports = []", 'image = "vm1.img"\nexports = []')
        cases.append(case("serve", name, ["serve", "--check", "h.toml"], {"h.toml": text}, ["h.toml"]))
    cases += [
        case("serve", "/dev/zero", ["serve", "--check", "/dev/zero"], {}, ["/dev/zero", "64 MiB"]),
        case("serve", "binary", ["serve", "--check", "h.toml"], {"h.toml": bytes(range(256))}, ["h.toml"]),
        case("serve", "missing", ["serve", "--check", "nope.toml"], {}, ["nope.toml"]),
        case(
            "serve",
            "--log-level",
            ["serve", "--check", "h.toml", "--log-level", "loud"],
            {"h.toml": HOST},
            ["--log-level"],
        ),
    ]
    return cases


def fio_cases() -> list[Case]:
    edits = {
        "iodpeth=8": "iodpeth=8",
        "bz=8k": "bz=8k",
        "unknown word": "xyzzy",
        "bs=": "bs=",
        "bs=${UNSET}": "bs=${HVIO_CAMPAIGN_UNSET}",
        "bare include": "include",
        "missing include": "include nope.fio",
        "include /dev/zero": "include /dev/zero",
        "iodepth=0": "iodepth=0",
        "numjobs=-1": "numjobs=-1",
        "size=abc": "size=abc",
        "rw=backwards": "rw=backwards",
        "bssplit percentage": "bssplit=4k/x",
        "rwmixread=101": "rwmixread=101",
        "zipf:abc": "random_distribution=zipf:abc",
        "kb_base=999": "kb_base=999",
        "thinktime unit": "thinktime=5parsecs",
        "unterminated ${": "size=${HOME",
        "long typo": "nope=" + "x" * 100_000,
        "long rw": "rw=" + "x" * 300_000,
        "long bs": "bs=" + "1" * 300_000,
    }
    cases = []
    for name, line in edits.items():
        cases.append(
            case("trace fio", name, ["trace", "fio", "j.fio"], {"j.fio": FIO + line + "\n"}, ["j.fio:"])
        )
    cases += [
        case(
            "trace fio",
            "section unterminated",
            ["trace", "fio", "j.fio"],
            {"j.fio": b"[db\nrw=read\n"},
            ["j.fio:1"],
        ),
        case(
            "trace fio",
            "option outside a section",
            ["trace", "fio", "j.fio"],
            {"j.fio": b"rw=read\n[db]\n"},
            ["j.fio:1"],
        ),
        case("trace fio", "/dev/zero", ["trace", "fio", "/dev/zero"], {}, ["/dev/zero"]),
        case("trace fio", "binary", ["trace", "fio", "j.fio"], {"j.fio": b"[a]\n\xff\xfe\n"}, ["j.fio"]),
    ]
    return cases


# Sample file → (format, a word every request line has, the fields hvio
# reads from it). Other fields (host names, pids, hashes, fields past the
# format's own) are free text hvio does not read.
TRACE_FORMATS = {
    "alibaba.csv": ("alibaba", b",", [0, 1, 2, 3, 4]),
    "disksim.trace": ("disksim", b" ", [0, 1, 2, 3, 4]),
    "fin.spc": ("spc", b",", [0, 1, 2, 3, 4]),
    "fiu.txt": ("fiu", b"syslogd", [0, 3, 4, 5]),
    "job.iolog2": ("iolog2", b" read ", [1, 2, 3]),
    "job.iolog3": ("iolog3", b" read ", [0, 2, 3, 4]),
    "mqsim.trace": ("mqsim", b" ", [0, 1, 2, 3, 4]),
    "sda.blkparse": ("blkparse", b" Q ", [0, 3, 7, 9]),
    "tencent.csv": ("tencent", b",", [0, 1, 2, 3, 4]),
    "web.msr.csv": ("msr", b",", [0, 2, 3, 4, 5]),
}


def trace_cases() -> list[Case]:
    cases = []
    for sample, (fmt, marker, read) in TRACE_FORMATS.items():
        src = (TRACE_DATA / sample).read_bytes()
        lines = src.splitlines(keepends=True)
        stats = ["trace", "stats", "t", "--format", fmt]
        # The last request line, broken: each field hvio reads replaced in turn.
        last = max(i for i, line in enumerate(lines) if marker in line and not line.startswith(b"#"))
        sep = b"," if marker == b"," else None
        fields = lines[last].rstrip(b"\n").split(sep)
        for k in read:
            for bad in (b"zz", b"-99999999999999999999999", b"\xff" * 3):
                f = list(fields)
                f[k] = bad
                data = b"".join(lines[:last]) + (sep or b" ").join(f) + b"\n"
                cases.append(
                    case(
                        "trace stats",
                        f"{fmt} field {k} = {bad[:8]!r}",
                        stats,
                        {"t": data},
                        ["t"],
                        ["line", "record", "byte"],
                    )
                )
        huge = b"".join(lines[:last]) + b"1" * (2 << 20) + b"\n"
        cases.append(
            case("trace stats", f"{fmt} 2 MiB line", stats, {"t": huge}, ["t"], ["line", "record", "byte"])
        )
        if fmt != "blkparse":  # blkparse text holds summaries: other lines are skipped
            garbage = b"".join(lines[:last]) + b"zz zz zz zz\n"
            cases.append(
                case("replay", f"{fmt} garbage line", ["replay", "t", "--format", fmt], {"t": garbage}, ["t"])
            )
    replay = ["replay", "t", "--format", "msr"]
    many = b"".join(
        b"%d,h%d,0,Read,4096,4096,100\n" % (128166372000000000 + i * 1000, i) for i in range(1100)
    )
    cases += [
        case(
            "trace stats",
            "unknown --format",
            ["trace", "stats", "t", "--format", "msrr"],
            {"t": MSR},
            ["msrr"],
        ),
        case("trace stats", "--action X", ["trace", "stats", "t", "--action", "X"], {"t": MSR}, ["X"]),
        case(
            "trace stats",
            "--mqsim-time-unit-ns 0",
            ["trace", "stats", "t", "--mqsim-time-unit-ns", "0"],
            {"t": MSR},
            ["--mqsim-time-unit-ns"],
        ),
        case("trace stats", "/dev/zero", ["trace", "stats", "/dev/zero"], {}, ["/dev/zero"]),
        case(
            "trace convert",
            "unknown --to",
            ["trace", "convert", "t", "--format", "msr", "--to", "csv"],
            {"t": MSR},
            ["csv"],
        ),
        case("replay", "--map ===,", [*replay, "--map", "===,"], {"t": MSR}, ["--map"]),
        case("replay", "--map empty VM", [*replay, "--map", "host_0="], {"t": MSR}, ["--map"]),
        case(
            "replay", "--map unknown device", [*replay, "--map", "hots_0=a"], {"t": MSR}, ["--map", "hots_0"]
        ),
        case(
            "replay",
            "--map twice",
            [*replay, "--map", "host_0=a", "--map", "host_0=b"],
            {"t": MSR},
            ["--map", "host_0"],
        ),
        case("replay", "--vms 0", [*replay, "--vms", "0"], {"t": MSR}, ["--vms"]),
        case("replay", "--time-scale -1", [*replay, "--time-scale", "-1"], {"t": MSR}, ["--time-scale"]),
        case("replay", "--time-scale nan", [*replay, "--time-scale", "nan"], {"t": MSR}, ["--time-scale"]),
        case("replay", "--closed 0", [*replay, "--closed", "0"], {"t": MSR}, ["--closed"]),
        case("replay", "--image-size text", [*replay, "--image-size", "big"], {"t": MSR}, ["--image-size"]),
        case(
            "replay",
            "--scheduler typo",
            [*replay, "--scheduler", "kybre"],
            {"t": MSR},
            ["--scheduler", "kybre"],
        ),
        case("replay", "1100 devices", replay, {"t": many}, ["t:", "1100"]),
        case(
            "replay",
            "offset past the disk",
            replay,
            {"t": b"128166372000000000,h,0,Read,9000000000000000000,4096,1\n"},
            ["t:", "--image-size"],
        ),
    ]
    return cases


def disk_cases() -> list[Case]:
    if not DISK_DATA.is_dir():
        return []
    base = {
        f: (DISK_DATA / f).read_bytes()
        for f in ("ibm18es.parv", "ibm18es.diskspecs", "ibm18es.seek", "ibm18es.model")
    }
    trace = (DISK_DATA / "ibm18es.trace").read_bytes()
    model = base["ibm18es.model"].decode()
    validate = ["validate-disk", "ibm18es.parv", "v.trace"]
    edits = {
        "zones overlap": ("Last cylinder number = 377,", "Last cylinder number = 400,"),
        "slip nan": ("187771", "nan"),
        "slip -1": ("187771", "-1"),
        "slip -1e300": ("187771", "-1e300"),
        "slip past the zone": ("187771", "99999999"),
        "blocks per track 0": ("Blocks per track = 390,", "Blocks per track = 0,"),
        "last before first": ("Last cylinder number = 377,", "Last cylinder number = 1,"),
        "skew nan": ("Skew for track switch = 58.000000,", "Skew for track switch = nan,"),
        "defect nan": ("defects = []", "defects = [ nan, 5 ]"),
        "defect -1": ("defects = []", "defects = [ -1, 5 ]"),
        "defects unpaired": ("defects = []", "defects = [ 3 ]"),
    }
    cases = []
    for name, (old, new) in edits.items():
        assert old in model, old
        files = {**base, "ibm18es.model": model.replace(old, new, 1), "v.trace": trace}
        cases.append(case("validate-disk", name, validate, files, ["ibm18es.model:"]))
    lines = trace.splitlines(keepends=True)
    for name, bad in {
        "trace op": b"X Miss 1 8 1000 0\n",
        "trace fields": b"R Miss 1 8\n",
        "trace lbn -1": b"R Miss -1 8 1000 0\n",
        "trace nan": b"R Miss 1 8 nan 0\n",
    }.items():
        files = {**base, "v.trace": b"".join(lines[:10]) + bad}
        cases.append(case("validate-disk", name, validate, files, ["v.trace:11"]))
    cases += [
        case(
            "validate-disk",
            "--bench -1",
            [*validate, "--bench", "-1"],
            {**base, "v.trace": trace},
            ["--bench"],
        ),
        case(
            "validate-disk",
            "--disk unknown",
            [*validate, "--disk", "nosuch"],
            {**base, "v.trace": trace},
            ["nosuch"],
        ),
        case(
            "validate-disk",
            "spec /dev/zero",
            ["validate-disk", "/dev/zero", "v.trace"],
            {"v.trace": trace},
            ["/dev/zero"],
        ),
    ]
    return cases


def scheduler_cases(hvio: str) -> list[Case]:
    """Every scheduler's name and tunables, as `hvio schedulers` lists them,
    mistyped or set to a value out of range, in a simulator config and in
    the daemon's."""
    listing = subprocess.run([hvio, "schedulers"], capture_output=True, text=True, check=True).stdout
    tunables: dict[str, list[tuple[str, str]]] = {}
    for line in listing.splitlines():
        if " — " in line and not line.startswith(" "):
            name = line.split(" — ")[0]
            tunables[name] = []
        elif line.startswith("  ") and "[" in line and not line.strip().startswith("per-VM"):
            words = line.split()
            low, high = line.split("[", 1)[1].split("]")[0].split(" .. ")
            tunables[name].append((words[0], str(float(high) * 10 + 1)))
    cases = []
    for sched, params in tunables.items():
        sim = SIM.replace('scheduler = "cfq"', f'scheduler = "{sched}"')
        host = HOST.replace('name = "deadline"\nparams = { fifo_batch = 16 }', f'name = "{sched}"')
        cases.append(
            case(
                "schedulers",
                f"sim {typo(sched)}",
                ["sim", "c.toml"],
                {"c.toml": sim.replace(f'"{sched}"', f'"{typo(sched)}"')},
                ["c.toml:", typo(sched)],
            )
        )
        cases.append(
            case(
                "schedulers",
                f"serve {typo(sched)}",
                ["serve", "--check", "h.toml"],
                {"h.toml": host.replace(f'"{sched}"', f'"{typo(sched)}"')},
                ["h.toml", typo(sched)],
            )
        )
        for param, too_big in params:
            for label, key, value in (
                ("typo", typo(param), "1"),
                ("nan", param, "nan"),
                ("too big", param, too_big),
                ("-1e300", param, "-1e300"),
            ):
                text = sim.replace(
                    f'scheduler = "{sched}"', f'scheduler = "{sched}"\nparams = {{ {key} = {value} }}'
                )
                cases.append(
                    case(
                        "schedulers",
                        f"sim {sched} {label} {key}",
                        ["sim", "c.toml"],
                        {"c.toml": text},
                        ["c.toml:", key],
                    )
                )
                text = host.replace(f'name = "{sched}"', f'name = "{sched}"\nparams = {{ {key} = {value} }}')
                cases.append(
                    case(
                        "schedulers",
                        f"serve {sched} {label} {key}",
                        ["serve", "--check", "h.toml"],
                        {"h.toml": text},
                        ["h.toml", key],
                    )
                )
    return cases


def all_cases(hvio: str) -> list[Case]:
    return (
        sim_cases()
        + scheduler_cases(hvio)
        + output_cases()
        + serve_cases()
        + fio_cases()
        + trace_cases()
        + disk_cases()
    )


def snapshot(d: Path) -> dict[str, bytes | None]:
    """Every path under d with its bytes (None for a directory)."""
    return {str(p.relative_to(d)): None if p.is_dir() else p.read_bytes() for p in sorted(d.rglob("*"))}


def run_case(hvio: str, c: Case, timeout: float) -> str | None:
    """None when the case passes, else what went wrong."""
    with tempfile.TemporaryDirectory(prefix="hvio-campaign-") as tmp:
        d = Path(tmp)
        for name, data in c.files.items():
            (d / name).parent.mkdir(parents=True, exist_ok=True)
            (d / name).write_bytes(data)
        before = snapshot(d)
        env = {k: v for k, v in os.environ.items() if k != "HVIO_CAMPAIGN_UNSET"}
        env["RUST_BACKTRACE"] = "0"
        try:
            r = subprocess.run([hvio, *c.args], cwd=d, capture_output=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            return f"no answer within {timeout:.0f} s"
        err = r.stderr.decode(errors="replace")
        after = snapshot(d)
        if b"panicked" in r.stderr or r.returncode == 101:
            return f"panic: {err[:300]}"
        if r.returncode != 1:
            return f"exit status {r.returncode}: {err[:300]}"
        missing = [m for m in c.must if m not in err]
        if missing or (c.any_of and not any(a in err for a in c.any_of)):
            return f"message does not name {missing or c.any_of}: {err[:300]}"
        if len(err) > MAX_MESSAGE:
            return f"message of {len(err)} bytes: {err[:200]}"
        if set(after) != set(before):
            return (
                f"left behind {sorted(set(after) - set(before))}, removed {sorted(set(before) - set(after))}"
            )
        changed = [n for n in before if before[n] != after[n]]
        if changed:
            return f"overwrote {changed}"
    return None


def default_hvio() -> str:
    for p in (ROOT / "target" / "release" / "hvio", ROOT / "target" / "debug" / "hvio"):
        if p.exists():
            return str(p)
    return shutil.which("hvio") or "hvio"


def run(hvio: str, quick: bool = False, timeout: float = 30.0, verbose: bool = False) -> tuple[dict, list]:
    """Runs the campaign: per group [cases, failed], and the failures."""
    if os.sep in hvio:
        hvio = str(Path(hvio).resolve())
    cases = all_cases(hvio)
    if quick:
        # One case in QUICK_EVERY of each group: every group is sampled.
        index: dict[str, int] = {}
        sample = []
        for c in cases:
            index[c.group] = index.get(c.group, -1) + 1
            if index[c.group] % QUICK_EVERY == 0:
                sample.append(c)
        cases = sample
    groups: dict[str, list[int]] = {}
    failures = []
    for c in cases:
        why = run_case(hvio, c, timeout)
        g = groups.setdefault(c.group, [0, 0])
        g[0] += 1
        if why:
            g[1] += 1
            failures.append((c, why))
        if verbose or why:
            print(
                f"{'FAIL' if why else 'ok  '} {c.group}: {c.name}" + (f": {why}" if why else ""), flush=True
            )
    return groups, failures


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hvio", default=default_hvio(), help="the hvio binary (default: target/release/hvio)")
    ap.add_argument("--quick", action="store_true", help=f"one case in {QUICK_EVERY} of each group")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds a case may take")
    ap.add_argument("--verbose", action="store_true", help="print every case")
    a = ap.parse_args(argv)
    t0 = time.monotonic()
    groups, failures = run(a.hvio, a.quick, a.timeout, a.verbose)
    print(f"{'group':<16} {'cases':>6} {'failed':>7}")
    for g, (n, f) in sorted(groups.items()):
        print(f"{g:<16} {n:>6} {f:>7}")
    total = sum(n for n, _ in groups.values())
    print(f"{'all':<16} {total:>6} {len(failures):>7}   ({time.monotonic() - t0:.0f} s, {a.hvio})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
