//! PyO3 glue for the `hvio` Python package: no logic here. Every function
//! takes and returns plain strings (TOML/JSON); the Python side turns the
//! JSON into pandas DataFrames, plots and reports.

use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

create_exception!(
    _hvio,
    HvioError,
    PyValueError,
    "An hvio configuration or run error (names the key and value)."
);

fn err(e: impl std::fmt::Display) -> PyErr {
    HvioError::new_err(e.to_string())
}

/// A config from TOML text, or JSON when `origin` ends in `.json`; errors start with `origin`.
fn parse(text: &str, origin: &str) -> PyResult<hvio_sim::Config> {
    parse_as(text, origin, origin.ends_with(".json"))
}

/// A config from JSON text when `json`, else TOML; errors start with `origin`.
fn parse_as(text: &str, origin: &str, json: bool) -> PyResult<hvio_sim::Config> {
    if json {
        hvio_sim::Config::from_json_str(text, origin).map_err(err)
    } else {
        hvio_sim::Config::from_toml_str(text, origin).map_err(err)
    }
}

/// Another host scheduler than the config's (its `[host] params` dropped).
fn override_scheduler(cfg: &mut hvio_sim::Config, scheduler: Option<String>) -> PyResult<()> {
    if let Some(s) = scheduler {
        hvio_sched::spec(&s).map_err(|e| err(format!("scheduler={s:?}: {e}")))?;
        if s != cfg.host.scheduler {
            cfg.host.params.clear();
        }
        cfg.host.scheduler = s;
    }
    Ok(())
}

/// Simulate a config (TOML text, or JSON when `origin` ends in `.json` or
/// `json` is set: a sweep's run keeps its base file as origin, for relative
/// paths and errors), with the host scheduler and seed overridden when
/// given; JSON result.
#[pyfunction]
#[pyo3(signature = (text, origin, scheduler=None, seed=None, json=false))]
fn simulate(
    py: Python<'_>,
    text: &str,
    origin: &str,
    scheduler: Option<String>,
    seed: Option<u64>,
    json: bool,
) -> PyResult<String> {
    // All of it without the GIL (reading the config and writing the result
    // too): a sweep's threads run it at once.
    py.allow_threads(|| {
        let mut cfg = parse_as(text, origin, json || origin.ends_with(".json"))?;
        override_scheduler(&mut cfg, scheduler)?;
        if let Some(s) = seed {
            cfg.seed = s;
        }
        let r = hvio_sim::run(&cfg).map_err(err)?;
        serde_json::to_string(&r).map_err(err)
    })
}

/// The `schedulers=` list, checked: at least one, every name known.
fn scheduler_names(schedulers: &[String]) -> PyResult<Vec<&str>> {
    let names: Vec<&str> = schedulers.iter().map(String::as_str).collect();
    if names.is_empty() {
        return Err(err("schedulers=[]: name at least one scheduler"));
    }
    for n in &names {
        hvio_sched::spec(n).map_err(|e| err(format!("schedulers: {e}")))?;
    }
    Ok(names)
}

/// Run a config under each named host scheduler; JSON list of results.
#[pyfunction]
fn compare(py: Python<'_>, text: &str, origin: &str, schedulers: Vec<String>) -> PyResult<String> {
    let cfg = parse(text, origin)?;
    let names = scheduler_names(&schedulers)?;
    let r = py
        .allow_threads(|| hvio_sim::compare::compare(&cfg, &names))
        .map_err(err)?;
    serde_json::to_string(&r).map_err(err)
}

/// Compare host schedulers on a config with `seeds` seeds: per-VM and
/// per-scheduler figures, verdict, notes and every run (`hvio compare`'s JSON).
/// `progress(done, total)` is called as each run ends (a progress bar).
#[pyfunction]
#[pyo3(signature = (text, origin, schedulers, seeds, progress=None))]
fn comparison(
    py: Python<'_>,
    text: &str,
    origin: &str,
    schedulers: Vec<String>,
    seeds: u64,
    progress: Option<PyObject>,
) -> PyResult<String> {
    let cfg = parse(text, origin)?;
    let names = scheduler_names(&schedulers)?;
    if !(1..=hvio_sim::compare::MAX_SEEDS).contains(&seeds) {
        return Err(err(format!(
            "seeds={seeds}: must be 1..={}",
            hvio_sim::compare::MAX_SEEDS
        )));
    }
    let tick = |done: usize, total: usize| {
        if let Some(p) = &progress {
            Python::with_gil(|py| {
                // A failing progress callback must not fail the comparison.
                let _ = p.call1(py, (done, total));
            });
        }
    };
    let c = py
        .allow_threads(|| hvio_sim::compare::comparison_with_progress(&cfg, &names, seeds, &tick))
        .map_err(err)?;
    serde_json::to_string(&c).map_err(err)
}

/// Paper 002's Algorithm 1 over a config's phases for every pair of
/// `hosts` x `guests` (`hvio tune`); JSON of what it found, with the config
/// carrying the plan under `plan_config` (null for a JSON config).
#[pyfunction]
#[pyo3(signature = (text, origin, hosts, guests, brute_force=false, policy="drain"))]
fn tune(
    py: Python<'_>,
    text: &str,
    origin: &str,
    hosts: Vec<String>,
    guests: Vec<String>,
    brute_force: bool,
    policy: &str,
) -> PyResult<String> {
    let cfg = parse(text, origin)?;
    let policy = policy
        .parse()
        .map_err(|_| err(format!("policy={policy:?}: one of drain, freeze, migrate")))?;
    let opts = hvio_sim::tune::workload::TuneOptions {
        hosts,
        guests,
        brute_force,
        policy,
    };
    let tuned = py
        .allow_threads(|| hvio_sim::tune::workload::tune(&cfg, &opts, &|| {}))
        .map_err(err)?;
    let plan_config = cfg
        .source_text
        .is_some()
        .then(|| hvio_sim::tune::workload::plan_config(&cfg, &tuned.plan))
        .transpose()
        .map_err(err)?;
    let mut json = serde_json::to_value(&tuned).map_err(err)?;
    json["plan_config"] = serde_json::json!(plan_config);
    serde_json::to_string(&json).map_err(err)
}

/// Replay a block trace (any format hvio-trace reads) under a config's disk,
/// host scheduler and VMs (`text` empty: defaults); JSON result. `map` is
/// `DEVICE=VM,...`; `closed` a per-VM depth (else open loop at `time_scale`).
#[pyfunction]
#[pyo3(signature = (path, text="", origin="replay.toml", scheduler=None, format=None, map=None, vms=None, image_size=None, time_scale=1.0, closed=None, skip_bad=false))]
#[allow(clippy::too_many_arguments)]
fn replay(
    py: Python<'_>,
    path: &str,
    text: &str,
    origin: &str,
    scheduler: Option<String>,
    format: Option<&str>,
    map: Option<&str>,
    vms: Option<usize>,
    image_size: Option<u64>,
    time_scale: f64,
    closed: Option<u32>,
    skip_bad: bool,
) -> PyResult<String> {
    use hvio_sim::replay::{parse_map, replay_trace, ReplayMode, TraceReplay};
    // No config text: no file to name in errors.
    let mut cfg = parse(text, if text.trim().is_empty() { "" } else { origin })?;
    override_scheduler(&mut cfg, scheduler)?;
    let read = hvio_trace::ReadOptions {
        format: format.map(str::parse).transpose().map_err(err)?,
        skip_bad,
        ..Default::default()
    };
    let how = TraceReplay {
        map: map.map(parse_map).transpose().map_err(err)?.unwrap_or_default(),
        vms,
        image_size,
        mode: match closed {
            Some(depth) => ReplayMode::Closed { depth },
            None => ReplayMode::Open { time_scale },
        },
    };
    let path = std::path::PathBuf::from(path);
    let (r, _) = py
        .allow_threads(|| replay_trace(cfg, &path, &read, &how))
        .map_err(err)?;
    serde_json::to_string(&r).map_err(err)
}

/// Time a host scheduler's own calls on the closed loop of
/// [`hvio_sim::sched_cost`] (a study's `kind = "bench-scheduler"` run): the
/// run's config as JSON (`host`, `requests`), `origin` named in errors;
/// JSON result. Without the GIL, as `simulate`.
#[pyfunction]
fn bench_scheduler(py: Python<'_>, text: &str, origin: &str) -> PyResult<String> {
    py.allow_threads(|| {
        let cfg = hvio_sim::sched_cost::parse(text, origin).map_err(err)?;
        let r = hvio_sim::sched_cost::measure(&cfg).map_err(err)?;
        serde_json::to_string(&r).map_err(err)
    })
}

/// Run one MapReduce job on the virtual cluster ([`hvio_sim::mapreduce_run`],
/// a study's `kind = "mapreduce"` run): the run's config as JSON, `origin`
/// named in errors; JSON result. Without the GIL, as `simulate`.
#[pyfunction]
fn mapreduce(py: Python<'_>, text: &str, origin: &str) -> PyResult<String> {
    py.allow_threads(|| {
        let cfg = hvio_sim::mapreduce_run::parse(text, origin).map_err(err)?;
        let r = hvio_sim::mapreduce_run::run(&cfg).map_err(err)?;
        serde_json::to_string(&r).map_err(err)
    })
}

/// Paper 002's Algorithm 1 and brute force over a MapReduce job's
/// two-phase plans ([`hvio_sim::mapreduce_tune::tune`], a study's
/// `kind = "mapreduce-tune"` run): the run's config as JSON; JSON result.
/// Without the GIL, as `simulate`.
#[pyfunction]
fn mapreduce_tune(py: Python<'_>, text: &str, origin: &str) -> PyResult<String> {
    py.allow_threads(|| {
        let cfg = hvio_sim::mapreduce_tune::parse_tune(text, origin).map_err(err)?;
        let r = hvio_sim::mapreduce_tune::tune(&cfg).map_err(err)?;
        serde_json::to_string(&r).map_err(err)
    })
}

/// Paper 002's switch cost of every ordered pair
/// ([`hvio_sim::mapreduce_tune::switch_cost`], a study's
/// `kind = "switch-cost"` run): the run's config as JSON; JSON result.
/// Without the GIL, as `simulate`.
#[pyfunction]
fn switch_cost(py: Python<'_>, text: &str, origin: &str) -> PyResult<String> {
    py.allow_threads(|| {
        let cfg = hvio_sim::mapreduce_tune::parse_switch_cost(text, origin).map_err(err)?;
        let r = hvio_sim::mapreduce_tune::switch_cost(&cfg).map_err(err)?;
        serde_json::to_string(&r).map_err(err)
    })
}

/// Every scheduler with its parameter table, as JSON.
#[pyfunction]
fn schedulers() -> PyResult<String> {
    let list: Vec<serde_json::Value> = hvio_sched::SCHEDULERS
        .iter()
        .map(|s| {
            serde_json::json!({
                "name": s.name,
                "summary": s.summary,
                "params": s.params.iter().map(|p| serde_json::json!({
                    "name": p.name, "default": p.default, "unit": p.unit,
                    "min": p.min, "max": p.max, "doc": p.doc,
                })).collect::<Vec<_>>(),
                "stream_attrs": s.stream_attrs.iter().map(|a| serde_json::json!({"name": a.name, "doc": a.doc, "min": a.range.map(|r| r.0), "max": a.range.map(|r| r.1)})).collect::<Vec<_>>(),
            })
        })
        .collect();
    serde_json::to_string(&list).map_err(err)
}

/// hvio's version: part of a sweep's cache key.
#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// The embedded default scenario (paper 000's four VMs), as TOML text.
#[pyfunction]
fn default_scenario() -> &'static str {
    hvio_sim::DEFAULT_SCENARIO
}

#[pymodule]
fn _hvio(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("HvioError", m.py().get_type::<HvioError>())?;
    m.add_function(wrap_pyfunction!(simulate, m)?)?;
    m.add_function(wrap_pyfunction!(replay, m)?)?;
    m.add_function(wrap_pyfunction!(compare, m)?)?;
    m.add_function(wrap_pyfunction!(tune, m)?)?;
    m.add_function(wrap_pyfunction!(comparison, m)?)?;
    m.add_function(wrap_pyfunction!(bench_scheduler, m)?)?;
    m.add_function(wrap_pyfunction!(mapreduce, m)?)?;
    m.add_function(wrap_pyfunction!(mapreduce_tune, m)?)?;
    m.add_function(wrap_pyfunction!(switch_cost, m)?)?;
    m.add_function(wrap_pyfunction!(schedulers, m)?)?;
    m.add_function(wrap_pyfunction!(default_scenario, m)?)?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    Ok(())
}
