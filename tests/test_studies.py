"""Paper experiments as studies: a study's cases, list lengths and quick
matrix; `hvio reproduce NAME` runs the study and its Python analysis and
prints the paper's numbers beside hvio's; a copied and edited study runs
with no rebuild; the paper files name the source of every number."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import hvio
import pytest
from hvio import studies
from hvio import sweeps as sw
from hvio.__main__ import main
from hvio.analysis import paper002, paper002_adaptive

ROOT = Path(__file__).resolve().parent.parent
EXPERIMENTS = ROOT / "experiments"

try:
    import tomllib
except ImportError:  # Python < 3.11
    import tomli as tomllib  # type: ignore[no-redef]


def study(tmp_path: Path, text: str) -> Path:
    (tmp_path / "base.toml").write_text((EXPERIMENTS / "small-two-vms.toml").read_text())
    p = tmp_path / "s.study.toml"
    p.write_text(f'[study]\nname = "s"\nbase = "base.toml"\n{text}')
    return p


def test_cases_set_their_keys_together_and_name_the_run(tmp_path):
    p = study(
        tmp_path,
        "[matrix]\nseed = [1, 2]\n[matrix.setup.cases]\n"
        'plain = { guest = "noop" }\n'
        'tuned = { scheduler = "bfq", guest = "deadline", "vm.b.weight" = 3 }\n',
    )
    runs = sw.plan(sw.load_study(p))
    assert [(r.params["seed"], r.params["setup"]) for r in runs] == [
        (s, c) for s in (1, 2) for c in ("plain", "tuned")
    ]
    tuned = runs[1].config
    assert tuned["host"]["scheduler"] == "bfq"
    assert [vm["guest_scheduler"] for vm in tuned["vm"]] == ["deadline", "deadline"]
    assert [vm.get("weight") for vm in tuned["vm"]] == [None, 3]
    assert runs[0].config["host"]["scheduler"] == "deadline"


def test_a_name_under_a_wildcard_sets_the_elements_that_have_it(tmp_path):
    base = (
        (EXPERIMENTS / "small-two-vms.toml").read_text().replace('rw = "read"', 'name = "seq"\nrw = "read"')
    )
    p = study(tmp_path, '[matrix]\n"vm.*.job.seq.iodepth" = 4\n')
    (tmp_path / "base.toml").write_text(base)
    (run,) = sw.plan(sw.load_study(p))
    assert [job.get("iodepth") for vm in run.config["vm"] for job in vm["job"]] == [None, 4]
    p = study(tmp_path, '[matrix]\n"vm.*.job.nope.iodepth" = 4\n')
    with pytest.raises(sw.StudyError, match="`vm.\\*.job.nope.iodepth`: no element 'nope'"):
        sw.plan(sw.load_study(p))


def test_a_quick_case_changes_only_the_keys_it_names_or_a_list_keeps_cases(tmp_path):
    p = study(
        tmp_path,
        '[matrix.setup.cases]\na = { guest = "noop", "vm.*.weight" = 2 }\nb = { guest = "cfq" }\n'
        '[quick.matrix.setup.cases]\na = { "vm.*.weight" = 5 }\n',
    )
    assert sw.load_study(p, quick=True).cases["setup"] == {
        "a": {"guest": "noop", "vm.*.weight": 5},
        "b": {"guest": "cfq"},
    }
    assert sw.load_study(p).cases["setup"]["a"]["vm.*.weight"] == 2
    p.write_text(
        p.read_text().replace(
            '[quick.matrix.setup.cases]\na = { "vm.*.weight" = 5 }', '[quick.matrix]\nsetup = ["b"]'
        )
    )
    assert sw.load_study(p, quick=True).matrix["setup"] == ["b"]
    assert sw.load_study(p).matrix["setup"] == ["a", "b"]


def test_a_number_for_an_array_of_tables_keeps_its_first_elements(tmp_path):
    p = study(tmp_path, '[matrix]\n"vm" = [1, 2]\n')
    runs = sw.plan(sw.load_study(p))
    assert [[vm["name"] for vm in r.config["vm"]] for r in runs] == [["a"], ["a", "b"]]
    p = study(tmp_path, '[matrix]\n"vm" = [3]\n')
    with pytest.raises(sw.StudyError, match=r"s.study.toml: `vm` = 3: keeps 1 to 2 elements"):
        sw.plan(sw.load_study(p))


def test_the_quick_matrix_replaces_or_adds_its_keys_for_a_quick_run(tmp_path):
    p = study(
        tmp_path, '[matrix]\nseed = [1, 2, 3]\nguest = ["noop"]\n[quick.matrix]\nseed = [7]\nmax_time_s = 5\n'
    )
    assert sw.load_study(p).matrix == {"seed": [1, 2, 3], "guest": ["noop"]}
    assert sw.load_study(p, quick=True).matrix == {"seed": [7], "guest": ["noop"], "max_time_s": [5]}


@pytest.mark.parametrize(
    "text,needle",
    [
        (
            '[matrix.setup.cases]\na = { guest = "noop" }\n[quick.matrix]\nsetup = ["b"]\n',
            "[quick.matrix] `setup`: ['b']: name cases of [matrix]",
        ),
        ("[matrix]\nsetup = { cases = {} }\n", "matrix key `setup`: cases are a table"),
        ("[matrix.setup.cases]\na = 3\n", "matrix key `setup`: case 'a' must be a table"),
        (
            '[matrix.setup.cases]\na = { scheduler = "nope" }\n',
            "matrix key `setup.a`: unknown scheduler 'nope'",
        ),
        ("[matrix]\nseed = [1]\n[quick]\nseed = 3\n", "[quick] holds one table"),
    ],
)
def test_a_bad_case_or_quick_table_names_the_study_and_the_key(tmp_path, text, needle):
    with pytest.raises(sw.StudyError) as e:
        sw.plan(sw.load_study(study(tmp_path, text)))
    assert str(tmp_path / "s.study.toml") in str(e.value) and needle in str(e.value)


def test_tables_render_numbers_with_their_columns_digits():
    t = {
        "title": "T",
        "columns": ["row", "a", "b"],
        "rows": [["x", 1.23456, None], ["longer", 10.0, 3]],
        "digits": [None, 2, None],
        "missing": "—",
    }
    assert (
        studies.render_table(t)
        == "T\nrow         a  b\n------  -----  -\nx        1.23  —\nlonger  10.00  3\n"
    )
    assert studies.number_text(10.0) == "10" and studies.number_text(8.2568) == "8.2568"
    # A format string: a signed percentage.
    assert studies.cell_text(9.87, "{:+.1f} %", "-") == "+9.9 %"
    assert studies.cell_text(-0.04, "{:+.1f} %", "-") == "-0.0 %"


def test_every_paper_study_names_its_analysis_and_every_number_its_source():
    listed = {name for name, _, _ in studies.experiments()}
    assert "htbs-paper004" in listed
    for name in listed:
        st = sw.load_study(EXPERIMENTS / f"{name}.study.toml")
        assert st.paper and st.title
        if st.reference is None:
            continue  # a figure without numbers (ishare-fig4)
        with st.reference.open("rb") as f:
            paper = tomllib.load(f)
        for key, rows in paper.items():
            for row in rows if isinstance(rows, list) else [rows]:
                assert row["source"].startswith("paper "), (name, key, row)


def test_htbs_paper004_paper_file_has_every_table_row_with_its_source():
    with (EXPERIMENTS / "htbs-paper004.paper.toml").open("rb") as f:
        p = tomllib.load(f)
    assert [r["file"] for r in p["table1"]] == list(range(1, 13))
    assert all(r["source"] == f"paper 004, Table 1, row {r['file']}" for r in p["table1"])
    assert [r["files"] for r in p["table3"]] == [5, 7, 10]
    assert all(r["source"].endswith(f"row {r['files']} files") for r in p["table2"] + p["table3"])


@pytest.fixture(scope="module")
def htbs_quick():
    return hvio.reproduce("htbs-paper004", quick=True)


def test_htbs_paper004_quick_has_htbs_below_noop_in_seek_and_execution_time(htbs_quick):
    runs = htbs_quick.data

    def mean(setup, key):
        v = [r[key] for r in runs if r["setup"] == setup]
        return sum(v) / len(v)

    assert mean("htbs", "seek_total_ms") < 0.5 * mean("noop", "seek_total_ms")
    assert mean("htbs", "avg_exec_s") < mean("noop", "avg_exec_s")
    t1 = htbs_quick.tables["Table 1: execution time per file (s), 12 files read at once"]
    assert len(t1) == 13, "12 files and the average"
    # Numeric cells are numbers: the file sizes, hvio's times, the paper's.
    assert list(t1["KiB"][:12]) == [577, 2389, 2481, 2929, 4033, 4961, 5441, 5457, 8593, 9185, 9201, 9777]
    assert t1["paper NOOP"][0] == pytest.approx(0.6567)
    assert all(isinstance(x, float) for x in t1["htbs s"])


def test_reproduce_prints_the_report_and_writes_its_json(tmp_path, capsys, monkeypatch, htbs_quick):
    monkeypatch.chdir(tmp_path)
    assert main(["reproduce", "htbs-paper004", "--quick"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("htbs-paper004 — HTBS vs NOOP vs CFQ")
    assert "\nseed 1, quick run\n" in out and out.endswith("report: out/htbs-paper004-quick.json\n")
    raw = json.loads((tmp_path / "out" / "htbs-paper004-quick.json").read_text())
    assert raw == json.loads(json.dumps(htbs_quick.raw))
    assert out == studies.render(raw) + "report: out/htbs-paper004-quick.json\n"


def test_a_copied_and_edited_study_runs_without_a_rebuild(tmp_path, capsys, monkeypatch):
    for f in ("htbs-paper004.toml", "htbs-paper004.paper.toml"):
        (tmp_path / f).write_text((EXPERIMENTS / f).read_text())
    text = (EXPERIMENTS / "htbs-paper004.study.toml").read_text()
    text = text.replace('name = "htbs-paper004"', 'name = "my-htbs"').replace(
        '"vm.*.job" = [5, 12]', '"vm.*.job" = [3, 12]'
    )
    (tmp_path / "my.study.toml").write_text(text)
    monkeypatch.chdir(tmp_path)
    assert main(["reproduce", "my.study.toml", "--quick", "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("my-htbs — ") and "report: out/my-htbs-quick.json" in out
    rows = [
        r
        for r in hvio.reproduce(str(tmp_path / "my.study.toml"), quick=True).tables[
            "mean seek time per request (ms)"
        ]["files"]
    ]
    assert rows == [3, 12]


def test_an_unknown_experiment_lists_the_known_ones(capsys):
    assert main(["reproduce", "no-such-experiment"]) == 1
    err = capsys.readouterr().err
    assert "unknown experiment 'no-such-experiment'" in err and "htbs-paper004" in err and "htbs-rates" in err


def test_pregather_table4_compares_the_schedulers_on_the_four_vms():
    r = hvio.reproduce("pregather-table4", quick=True)
    assert r.name == "pregather-table4"
    t = r.tables["Fig. 6(a): execution time per application (s), direct guests"]
    assert len(t) == 8, "two applications in each of four VMs"
    seek = r.tables["Table 4: distribution of seek distances (%), direct guests"]
    assert seek.iloc[0, 2] == 75.78, "the paper's zero-seek share sits beside hvio's"
    bw = r.tables["Fig. 6(b): bandwidth (MB/s), page-cache guests"]
    total = bw[bw["VM"] == "total (sum of VMs)"].iloc[0]
    assert total["Pregather"] > total["Deadline"], "Pregather beats Deadline"
    assert sum(1 for title in r.tables if title.startswith("Goals, ")) == 6, "one per guest model"
    blktap = r.tables["Table 4: distribution of seek distances (%), page-cache+blktap guests"]
    assert list(blktap["seek distance"][-2:]) == ["0, bio arrival order", "[± image], bio arrival order"]


def test_pregather_fig5_sweeps_the_zone_size():
    r = hvio.reproduce("pregather-fig5", quick=True)
    t = r.tables["Fig. 5: two sequential readers in one VM"]
    for guests in ("direct", "page-cache", "one-stream"):
        mine = t[(t["guests"] == guests) & (t["scheduler"] == "pregather")]
        assert list(mine["B (sectors)"]) == [10, 2000, 10000000], guests
        assert ((t["guests"] == guests) & (t["scheduler"] == "cfq")).any()
    # One-stream guests: one request in flight per reader; at B = 2000
    # Pregather waits for the stream it serves and nearly every wait succeeds.
    row = t[(t["guests"] == "one-stream") & (t["scheduler"] == "pregather") & (t["B (sectors)"] == 2000)]
    assert row["wait success %"].iloc[0] > 80.0


def test_pregather_table3_runs_seven_mixes():
    r = hvio.reproduce("pregather-table3", quick=True)
    times = r.tables[next(t for t in r.tables if t.startswith("Table 3: ") and t.endswith("O_DIRECT)"))]
    assert len(times) == 14
    assert times[times["application"] == "SR-M"]["paper Pregather"].tolist() == [26.92, 33.03]
    waits = r.tables["Pregather's waits for a future request, direct guests"]
    assert len(waits) == 8, "seven VMs and the total"
    assert waits["waits started"].iloc[-1] == sum(waits["waits started"].iloc[:-1])


def test_a_case_value_is_copied_into_each_run(tmp_path):
    p = study(
        tmp_path,
        '[matrix]\nmix.cases.one = { vm = [{ name = "x", job = [{ rw = "read", requests = 10 }] }] }\n'
        '"vm.*.job.*.iodepth" = [1, 4]\n',
    )
    runs = sw.plan(sw.load_study(p))
    assert [r.config["vm"][0]["job"][0]["iodepth"] for r in runs] == [1, 4]


def test_ishare_paper_file_covers_every_workload_and_scheduler():
    with (EXPERIMENTS / "ishare-tables.paper.toml").open("rb") as f:
        rows = tomllib.load(f)["bandwidth"]
    st = sw.load_study(EXPERIMENTS / "ishare-tables.study.toml")
    have = {(r["workload"], r["scheduler"]) for r in rows}
    assert have == {(w, s) for w in st.matrix["vm.*.job.*.preset"] for s in ("cfq", "blkio", "ishare")}
    # Table II's U-SW: Blkio 84.1 MB/s in total.
    usw = next(r for r in rows if r["workload"] == "U-SW" and r["scheduler"] == "blkio")
    assert (usw["vm1_kb_s"] + usw["vm2_kb_s"]) / 1000 == pytest.approx(84.051)


def test_ishare_tables_quick_prints_every_disk_with_its_goals():
    r = hvio.reproduce("ishare-tables", quick=True)
    for disk in ("write cache off", "controller write cache"):
        t = r.tables[f"{disk} — blkio: bandwidth, MB/s (paper: Table II, KB/s ÷ 1000)"]
        assert len(t) == 12 and t["paper total"].iloc[0] == pytest.approx(42.635)
        goals = r.tables[f"{disk} — goals"]
        assert set(goals["met"]) <= {"yes", "NO"} and len(goals) == 6 * 3 + 6
    # Overloaded, Blkio splits the disk 2:1 on the write-through disk (VM1:VM2 near 2).
    t = r.tables["write cache off — blkio: bandwidth, MB/s (paper: Table II, KB/s ÷ 1000)"]
    assert all(1.6 <= x <= 3.0 for x in t[t["workload"].str.startswith("O-")]["VM1:VM2"])


def test_ishare_fig4_runs_seven_phases_one_after_another():
    for quick, phase_s in ((False, 100), (True, 6)):
        runs = sw.plan(sw.load_study(EXPERIMENTS / "ishare-fig4.study.toml", quick=quick))
        assert len(runs) == 6, "three schedulers on two disks"
        for r in runs:
            for vm in r.config["vm"]:
                assert [(j["start_s"], j["runtime_s"]) for j in vm["job"]] == [
                    (i * phase_s, phase_s) for i in range(7)
                ]


def test_ishare_destage_idle_runs_every_workload_and_fig4_at_each_delay():
    from hvio.analysis.ishare_destage_idle import split_goal

    st = sw.load_study(EXPERIMENTS / "ishare-destage-idle.study.toml", quick=True)
    runs = sw.plan(st)
    assert len(runs) == 8 * 13 * 3
    fig4 = [r for r in runs if r.params["workload"] == "Fig. 4"]
    assert {r.config["disk"]["destage_idle_ms"] for r in fig4} == {0, 1, 2, 5, 10, 20, 50, 100}
    assert all(len(vm["job"]) == 7 and r.config["max_time_s"] == 84 for r in fig4 for vm in r.config["vm"])
    assert split_goal("U-SRW: iShare total ≥ 1.2× Blkio (1.71×)") == (
        "U-SRW: iShare total ≥ 1.2× Blkio",
        "1.71×",
    )
    assert split_goal("O-SR: iShare total within 5 % of Blkio (-4.6 %)") == (
        "O-SR: iShare total within 5 % of Blkio",
        "-4.6 %",
    )
    assert split_goal("no value") == ("no value", "")


def test_reproduce_caches_each_run_and_recomputes_only_what_changed(tmp_path, monkeypatch):
    for f in ("htbs-paper004.toml", "htbs-paper004.paper.toml"):
        (tmp_path / f).write_text((EXPERIMENTS / f).read_text())
    path = tmp_path / "c.study.toml"
    text = (
        (EXPERIMENTS / "htbs-paper004.study.toml")
        .read_text()
        .replace('"vm.*.job" = [5, 12]', '"vm.*.job" = [3]')
    )
    path.write_text(text)
    cache = tmp_path / "cache"

    def again(**kw: Any) -> tuple[dict[str, Any], dict[str, int]]:
        counts: dict[str, int] = {}
        raw = studies.reproduce(path, quick=True, workers=1, cache=cache, counts=counts, **kw)
        return raw, counts

    first, counts = again()
    runs = counts["computed"]
    assert runs == 7 and counts["cache"] == 0
    second, counts = again()
    assert counts == {"computed": 0, "cache": runs} and second == first
    # --no-cache computes every run again, and gives the same report.
    forced, counts = again(recompute=True)
    assert counts == {"computed": runs, "cache": 0} and forced == first
    # A changed config misses for the runs it changes only: `htbs@host` runs on its own params.
    host_case = '"htbs@host" = { scheduler = "htbs", "host.params" = { default_rate_iops = 1000000, bmax = '
    assert text.count(host_case + "256 } }") == 1
    path.write_text(text.replace(host_case + "256 } }", host_case + "128 } }"))
    _, counts = again()
    assert counts == {"computed": 1, "cache": runs - 1}
    # Another build of hvio misses every run.
    monkeypatch.setattr(sw, "build_identity", lambda: "another-build")
    _, counts = again()
    assert counts == {"computed": runs, "cache": 0}


def test_an_include_merges_a_file_under_the_including_tables_keys(tmp_path):
    (tmp_path / "guests.toml").write_text(
        '[cases.a]\nguest = "noop"\n[cases.b]\nguest = "deadline"\n[cases.c]\nguest = "cfq"\n'
    )
    (tmp_path / "common.toml").write_text('[matrix]\n"vm.*.virtio_depth" = [8, 16]\nseed = 1\n')
    (tmp_path / "base.toml").write_text((EXPERIMENTS / "small-two-vms.toml").read_text())
    p = tmp_path / "s.study.toml"
    p.write_text(
        'include = "common.toml"\n[study]\nbase = "base.toml"\n[matrix]\nseed = 2\n'
        '[matrix.g]\ninclude = "guests.toml"\nonly = ["c", "a"]\n[matrix.g.cases.a]\n"vm.0.weight" = 300\n'
    )
    st = sw.load_study(p)
    # The including file's keys win, in the included keys' places; `only` orders the cases.
    assert st.matrix == {"vm.*.virtio_depth": [8, 16], "seed": [2], "g": ["c", "a"]}
    assert st.cases["g"] == {"c": {"guest": "cfq"}, "a": {"guest": "noop", "vm.0.weight": 300}}


def test_an_include_cycle_or_missing_file_is_named_with_the_including_file_and_line(tmp_path):
    (tmp_path / "a.toml").write_text('# a\ninclude = "b.toml"\n')
    (tmp_path / "b.toml").write_text('\n\ninclude = ["gone.toml", "a.toml"]\n')
    p = study(tmp_path, '[matrix]\nseed = 1\n\ninclude = "a.toml"\n')
    with pytest.raises(sw.StudyError) as e:
        sw.load_study(p)
    assert f"{tmp_path / 'b.toml'}:3: include 'gone.toml': no such file ({tmp_path / 'gone.toml'})" in str(
        e.value
    )
    (tmp_path / "b.toml").write_text('\n\ninclude = ["a.toml"]\n')
    with pytest.raises(sw.StudyError) as e:
        sw.load_study(p)
    chain = " → ".join(str(tmp_path / f) for f in ("s.study.toml", "a.toml", "b.toml", "a.toml"))
    assert f"{tmp_path / 'b.toml'}:3: include 'a.toml': includes itself: {chain}" in str(e.value)


def test_the_paper_studies_fold_their_shared_cases_into_includes():
    for name, key, cases in (
        (
            "pregather-table4",
            "guests",
            ["direct", "page-cache", "one-stream", "page-cache+wc", "page-cache+blktap", "page-cache+ncq"],
        ),
        (
            "pregather-fig5",
            "guests",
            ["direct", "page-cache", "one-stream", "page-cache+blktap", "page-cache+ncq"],
        ),
        ("ishare-tables", "disk", ["write cache off", "controller write cache"]),
    ):
        st = sw.load_study(EXPERIMENTS / f"{name}.study.toml")
        assert st.matrix[key] == cases, name
    st = sw.load_study(EXPERIMENTS / "pregather-table4.study.toml", quick=True)
    assert st.cases["guests"]["one-stream"]["vm.*.barrier"] is True
    assert st.cases["guests"]["one-stream"]["vm.*.job.SR-M.requests"] == 364
    st = sw.load_study(EXPERIMENTS / "ishare-destage-idle.study.toml")
    assert st.matrix["disk.destage_idle_ms"] == [0, 1, 2, 5, 10, 20, 50, 100]
    assert st.matrix["disk.cache_segments"] == [64]


def test_a_list_of_names_keeps_those_elements_of_an_array_of_tables(tmp_path):
    p = study(tmp_path, '[matrix]\nvm = [["b"], ["b", "a"]]\n')
    runs = sw.plan(sw.load_study(p))
    assert [[v["name"] for v in r.config["vm"]] for r in runs] == [["b"], ["b", "a"]]
    p = study(tmp_path, '[matrix]\nvm = [["c"]]\n')
    with pytest.raises(sw.StudyError, match="no element named 'c'"):
        sw.plan(sw.load_study(p))


def stub_analysis(monkeypatch, source: str) -> None:
    """``hvio.analysis.analysis_stub``, a module of ``source``."""
    import sys
    import types

    module = types.ModuleType("hvio.analysis.analysis_stub")
    exec(source, module.__dict__)
    monkeypatch.setitem(sys.modules, "hvio.analysis.analysis_stub", module)


def test_a_stage_gets_its_matrix_from_the_stages_before_it(tmp_path, monkeypatch):
    p = study(
        tmp_path,
        'analysis = "analysis_stub"\n[matrix]\nseed = 1\n'
        '[[stage]]\nname = "first"\nmatrix = { scheduler = "noop", "vm.*.job.*.requests" = 200 }\n'
        '[[stage]]\nname = "second"\nfrom = "next_matrix"\nmatrix = { scheduler = ["deadline", "cfq"] }\n',
    )
    stub_analysis(
        monkeypatch,
        "def next_matrix(stages):\n"
        "    vm = stages['first'].results[0]['vms'][0]\n"
        "    return {'vm.*.job.*.requests': 2 * (vm['reads'] + vm['writes'])}\n",
    )
    done = sw.sweep_stages(p, out=tmp_path / "out", workers=1)
    assert list(done) == ["first", "second"]
    vm = done["first"].results[0]["vms"][0]
    assert vm["reads"] + vm["writes"] > 0
    second = done["second"]
    assert [r.config["vm"][0]["job"][0]["requests"] for r in second.runs] == [
        2 * (vm["reads"] + vm["writes"])
    ] * 2
    assert [r.params["scheduler"] for r in second.runs] == ["deadline", "cfq"]
    assert (tmp_path / "out" / "sweep" / "s" / "second" / "results.parquet").is_file()
    # A function that is not there is named with the stage.
    stub_analysis(monkeypatch, "")
    with pytest.raises(sw.StudyError, match="stage `second`: from 'next_matrix': no function"):
        sw.sweep_stages(p, out=None, workers=1)


def test_htbs_rates_quick_shares_in_proportion_and_protects_the_light_vm():
    r = hvio.reproduce("htbs-rates", quick=True, cache=None)
    shares = r.data["shares_htbs"]
    for s, want in zip(shares, [1, 2, 4]):
        got = s / sum(shares) / (want / 7.0)
        assert abs(got - 1.0) <= 0.15, (got, studies.render(r.raw))
    lat = r.data["light_mean_ms"]
    assert lat["htbs"] < 0.5 * lat["noop"], studies.render(r.raw)
    # The contracts come from the calibration run.
    assert r.data["rates"] == pytest.approx([0.1 * r.data["capacity_iops"] * s for s in (1, 2, 4)])


def test_pregather_overhead_quick_measures_memory_and_the_schedulers_own_time():
    r = hvio.reproduce("pregather-overhead", quick=True, cache=None)
    mem = r.tables["Memory: Pregather's prediction state per VM (four-VM run, page-cache guests)"]
    assert list(mem["VM"]) == ["vm1", "vm2", "vm3", "vm4", "all VMs"]
    assert 0 < mem["peak KiB"].iloc[-1] < 2148
    cpu = r.tables["CPU: scheduler time per request (closed-loop replay of Table 1's patterns)"]
    assert list(cpu["scheduler"]) == ["pregather", "cfq", "deadline", "noop"]
    assert list(cpu["requests"]) == [20000] * 4
    assert (cpu["dispatch calls"] >= cpu["requests"]).all() and (cpu["ns / request"] > 0).all()
    assert cpu["vs CFQ"].iloc[1] == 1.0
    assert "1.00×" in studies.render(r.raw)


def test_a_bench_scheduler_run_with_an_unknown_key_names_it(tmp_path):
    (tmp_path / "b.toml").write_text('requests = 10\nspeed = 2\n[host]\nscheduler = "cfq"\n')
    p = tmp_path / "b.study.toml"
    p.write_text('[study]\nname = "b"\nbase = "b.toml"\nkind = "bench-scheduler"\n[matrix]\nseed = 1\n')
    with pytest.raises(hvio.HvioError, match="unknown field `speed`"):
        sw.sweep(p, out=None, workers=1)


def test_a_small_copy_of_paper002_table1_runs_mapreduce_jobs_over_the_pairs(tmp_path):
    for f in ("paper002-cluster.toml", "paper002-pairs.toml", "paper002-table1.paper.toml"):
        (tmp_path / f).write_text((EXPERIMENTS / f).read_text())
    (tmp_path / "t.study.toml").write_text((EXPERIMENTS / "paper002-table1.study.toml").read_text())
    small_quick_cluster(tmp_path)
    r = hvio.reproduce(str(tmp_path / "t.study.toml"), quick=True, cache=None)
    t = r.tables["sort job time: hvio's simulated cluster beside the paper's testbed"]
    assert list(t["guest \\ host"]) == ["cfq", "deadline", "anticipatory", "noop"]
    assert (t["cfq hvio s"] > 0).all() and list(t["noop paper s"]) == [962, 927, 987, 915]
    assert any(n.startswith("goal ") and "(cfq, cfq) is not the best pair" in n for n in r.notes)
    assert r.notes[-1].startswith("cluster: 1 nodes x 2 VMs, 64 MiB of input per VM, 2 maps")
    assert len(r.data["pairs"]) == 16


def small_quick_cluster(tmp_path: Path) -> None:
    """A smaller --quick cluster for copies of paper 002's studies: 1 node × 2 VMs of 64 MiB."""
    quick = (EXPERIMENTS / "paper002-quick.toml").read_text()
    small = quick.replace('"cluster.nodes" = 2', '"cluster.nodes" = 1').replace('"128MiB"', '"64MiB"')
    assert small != quick
    (tmp_path / "paper002-quick.toml").write_text(small)


# A mapreduce-tune or switch-cost study on a tiny cluster: 2 nodes × 1 VM,
# 32 MiB per VM in 16 MiB blocks, two candidate pairs of each side; without
# Hadoop's heartbeats, whose 5 s waits would decide so small a job's length.
TINY_TUNE = """[study]
name = "tiny"
base = "job.toml"
kind = "mapreduce-tune"
[matrix]
"tune.hosts" = [["cfq", "deadline"]]
"tune.guests" = [["cfq", "noop"]]
"tune.brute_force" = true
[matrix.scenario.cases]
"1 VM" = { "cluster.vms_per_node" = 1 }
"2 VMs" = { "cluster.vms_per_node" = 2 }
"""
TINY_JOB = """benchmark = "sort"
guest_scheduler = "cfq"
heartbeats = false
input_per_vm = "32MiB"
block = "16MiB"
[cluster]
nodes = 2
vms_per_node = 1
[host]
scheduler = "cfq"
"""


def test_a_mapreduce_tune_study_runs_algorithm1_and_the_brute_force_per_run(tmp_path):
    (tmp_path / "job.toml").write_text(TINY_JOB)
    (tmp_path / "t.study.toml").write_text(TINY_TUNE)
    s = sw.sweep(tmp_path / "t.study.toml", out=None)
    assert [r.params["scenario"] for r in s.runs] == ["1 VM", "2 VMs"]
    for r in s.results:
        assert [(p["host"], p["guest"]) for p in r["pairs"]] == [
            ("cfq", "cfq"),
            ("cfq", "noop"),
            ("deadline", "cfq"),
            ("deadline", "noop"),
        ]
        assert r["default"] == 0 and r["profile"]["runs"] == 4 and r["brute_force"]["runs"] == 16
        assert r["heuristic"]["runs"] <= 2 * 4, "Algorithm 1's bound: P x S runs beyond the profile"
        t = paper002.Tuned(r)
        best = t.found_s(t.brute)
        assert best <= t.found_s(t.heuristic) and best <= min(r["profile"]["total_s"])
        assert t.found_s(t.fastest) <= t.found_s(t.heuristic)
        assert len(r["plans"]) == 16, "every plan run is reported, once"
    frame = s.frame
    assert list(frame["scenario"]) == ["1 VM", "2 VMs"] and (frame["best_single"] >= 0).all()
    # The same study again gives the same results, byte for byte.
    again = sw.sweep(tmp_path / "t.study.toml", out=None, workers=1)
    assert json.dumps(again.results) == json.dumps(s.results)


def test_a_mapreduce_run_takes_a_phase_plan_and_refuses_a_search_table(tmp_path):
    (tmp_path / "job.toml").write_text(TINY_JOB)
    plan = '[[phase]]\nat = "shuffle"\nguest = "noop"\n'
    (tmp_path / "plan.toml").write_text(TINY_JOB + plan)
    (tmp_path / "t.study.toml").write_text(
        '[study]\nname = "p"\nbase = ["job.toml", "plan.toml"]\nkind = "mapreduce"\n[matrix]\nseed = 1\n'
    )
    single, switched = sw.sweep(tmp_path / "t.study.toml", out=None).results
    assert single["phases_s"][0] == switched["phases_s"][0], "the map runs under (cfq, cfq) in both"
    assert single["job_s"] != switched["job_s"]
    assert [b["phase"] for b in switched["backlogs"]] == ["shuffle", "reduce"]
    (tmp_path / "bad.toml").write_text(TINY_JOB + "[tune]\nbrute_force = true\n")
    (tmp_path / "b.study.toml").write_text(
        '[study]\nname = "b"\nbase = "bad.toml"\nkind = "mapreduce"\n[matrix]\nseed = 1\n'
    )
    with pytest.raises(hvio.HvioError, match="tune.*mapreduce-tune"):
        sw.sweep(tmp_path / "b.study.toml", out=None)


def test_a_switch_cost_study_measures_every_ordered_pair(tmp_path):
    (tmp_path / "dd.toml").write_text(
        'hosts = ["cfq"]\nguests = ["cfq", "noop"]\nvms = 2\nbytes = "8MiB"\n[page_cache]\nmemory = "4MiB"\n'
    )
    (tmp_path / "t.study.toml").write_text(
        '[study]\nname = "c"\nbase = "dd.toml"\nkind = "switch-cost"\n[matrix]\nseed = 1\n'
    )
    (r,) = sw.sweep(tmp_path / "t.study.toml", out=None).results
    assert r["runs"] == 2 + 4 and r["vms"] == 2 and r["page_cache_bytes"] == 4 << 20
    for a in range(2):
        for b in range(2):
            assert r["cost_s"][a][b] == r["switched_s"][a][b] - 0.5 * (r["alone_s"][a] + r["alone_s"][b])
    (tmp_path / "dd.toml").write_text('bytes = "8MiB"\nblocks = 3\n')
    with pytest.raises(hvio.HvioError, match="switch-cost run: unknown field `blocks`"):
        sw.sweep(tmp_path / "t.study.toml", out=None)


def test_paper002_phase_by_phase_shows_a_switching_plan_beside_its_pairs_single_runs():
    # A made-up search of two pairs: pair 1's phase 2 is fast in its own
    # run, slower after pair 0's map phase (it inherits 160 MiB of dirty
    # pages, where its own map leaves 100 MiB).
    def outcome(phase_s):
        return {"phase_s": phase_s, "switch_s": [0.0, 0.0]}

    def backlog(mib):
        return {"dirty_bytes": mib << 20, "writeback_bytes": 0, "guest_queued": 3, "host_queued": 1}

    found = {"plan": [0, 1], "outcome": outcome([10.0, 18.0]), "runs": 2}
    r = {
        "pairs": [{"host": "cfq", "guest": "cfq"}, {"host": "cfq", "guest": "deadline"}],
        "phases": ["map", "shuffle-reduce"],
        "profile": {
            "phase_s": [[10.0, 16.0], [20.0, 15.0]],
            "total_s": [30.0, 31.0],
            "single": [outcome([10.0, 20.0]), outcome([16.0, 15.0])],
            "runs": 2,
        },
        "best_single": 0,
        "heuristic": found,
        "fastest_run": {**found, "runs": 0},
        "brute_force": {**found, "runs": 4},
        "default": 0,
        "plans": [
            {"plan": [0, 0], "backlog": backlog(160)},
            {"plan": [0, 1], "backlog": backlog(160)},
            {"plan": [1, 1], "backlog": backlog(100)},
        ],
    }
    table, notes = paper002_adaptive.phase_by_phase(paper002.Tuned(r))
    # Algorithm 1's plan and the brute force's (the same), each beside its two pairs' single runs.
    assert len(table.frame) == 6 and len(notes) == 2
    assert list(table.frame["run"][:3]) == ["Algorithm 1's plan", "single pair", "single pair"]
    assert list(table.frame["dirty + write-back MiB"][:3]) == [160.0, 160.0, 100.0]
    assert "took 18.00 s, 15.00 s in (cfq, deadline)'s own run" in notes[0]
    assert "add up to 25.00 s, the plan ran 28.00 s" in notes[0]
    assert "160 MiB" in notes[0] and "100 MiB" in notes[0]


def test_a_quick_list_of_cases_may_name_cases_the_full_run_leaves_out(tmp_path):
    p = study(
        tmp_path,
        '[matrix.n]\nonly = ["two"]\n[matrix.n.cases]\none = { "vm.*.virtio_depth" = 1 }\n'
        'two = { "vm.*.virtio_depth" = 2 }\n[quick.matrix]\nn = ["one"]\n',
    )
    assert [r.params["n"] for r in sw.plan(sw.load_study(p))] == ["two"]
    assert [r.params["n"] for r in sw.plan(sw.load_study(p, quick=True))] == ["one"]


def test_each_sets_keys_of_every_case_before_the_cases_own_and_quick_changes_it(tmp_path):
    p = study(
        tmp_path,
        '[matrix.n.each]\n"vm.*.virtio_depth" = 8\nmax_time_s = 5\n'
        '[matrix.n.cases]\nplain = {}\ndeep = { "vm.*.virtio_depth" = 32 }\n'
        "[quick.matrix.n.each]\nmax_time_s = 1\n",
    )
    for quick, max_time in ((False, 5), (True, 1)):
        runs = sw.plan(sw.load_study(p, quick=quick))
        assert [[vm["virtio_depth"] for vm in r.config["vm"]] for r in runs] == [[8, 8], [32, 32]]
        assert [r.config["max_time_s"] for r in runs] == [max_time, max_time]
    bad = study(tmp_path, "[matrix.n]\neach = 3\n[matrix.n.cases]\na = { seed = 1 }\n")
    with pytest.raises(sw.StudyError, match="matrix key `n`: `each` is a table"):
        sw.load_study(bad)


def test_reproduce_lists_every_experiment_as_a_study(capsys):
    assert main(["reproduce", "--list"]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert {"paper002-adaptive", "paper002-fig5", "paper002-fig7", "paper002-table1"} <= set(names)
    assert names == sorted(names)


def test_an_unknown_run_kind_is_named(tmp_path):
    p = study(tmp_path, 'kind = "hadoop"\n[matrix]\nseed = 1\n')
    with pytest.raises(
        sw.StudyError, match="kind 'hadoop': a run is one of simulate, bench-scheduler, mapreduce"
    ):
        sw.load_study(p)


def test_hvio_sweep_runs_a_study_in_stages_each_under_its_own_folder(tmp_path, capsys):
    assert main(["sweep", str(EXPERIMENTS / "htbs-rates.study.toml"), "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("htbs-rates: 2 stages on ")
    assert "stage calibration: 1 runs" in out and "stage rates: 6 runs" in out
    for stage in ("calibration", "rates"):
        assert (tmp_path / "sweep" / "htbs-rates" / stage / "results.parquet").is_file()
    # The second stage's matrix holds the rates the first stage's run sized.
    runs = json.loads((tmp_path / "sweep" / "htbs-rates" / "rates" / "runs.json").read_text())["runs"]
    assert all(r["params"]["vm.vm1x1.attrs.rate_iops"] > 0 for r in runs)
