//! Paper 000 (Pregather, Ling et al., IEEE TPDS 2015): `pregather-overhead`,
//! Pregather's model memory per VM and CPU time per scheduling decision
//! against CFQ (§5.3, Fig. 12), a measurement of the scheduler's own calls
//! that needs the engine's internals.
//!
//! Paper 000's other experiments (`pregather-fig5`, `pregather-table3`,
//! `pregather-table4`) are studies, `experiments/NAME.study.toml`, analysed
//! by hvio's Python package (`hvio.analysis`).

mod overhead;

use super::Experiment;
use crate::config::Config;
use crate::error::Result;
use crate::metrics::SimResult;

/// Paper 000 Fig. 12: Pregather's own cost in memory and CPU.
pub const OVERHEAD: Experiment = Experiment {
    name: "pregather-overhead",
    title: "Pregather's memory per VM and CPU time per scheduling decision vs CFQ",
    paper: "paper 000 §5.3, Fig. 12",
    run: overhead::run,
};

/// The disk of every run, as the reports name it.
const DISK: &str = "hvio's HDD model (7200 RPM, 1 TB: seek curve, rotation, zones, read-ahead cache; write cache off unless the guest model says \"write cache on\"; one command at a time unless it says \"NCQ\")";

/// The paper's disk: hvio's 7200 RPM 1 TB HDD model with its defaults.
fn disk() -> Result<Box<dyn hvio_core::Device>> {
    hvio_device::build_device(&hvio_device::DeviceConfig::default(), std::path::Path::new(""))
        .map_err(|e| crate::SimError::Device(e.to_string()))
}

/// Run `cfg` on its `[disk]` (the HDD model's defaults unless the guest
/// model set the write cache).
fn simulate(cfg: &Config) -> Result<SimResult> {
    if cfg.disk.is_empty() {
        crate::run_with_device(cfg, disk()?)
    } else {
        crate::run(cfg)
    }
}

/// Whether scheduler `name` is registered in this build.
fn available(name: &str) -> bool {
    hvio_sched::spec(name).is_ok()
}

/// Split `wanted` into registered schedulers and a note about the others.
fn registered<'a>(wanted: &[&'a str]) -> (Vec<&'a str>, Option<String>) {
    let (have, missing): (Vec<&str>, Vec<&str>) = wanted.iter().partition(|s| available(s));
    let note = (!missing.is_empty()).then(|| {
        format!(
            "not registered in this build, left out: {} (their columns show \"—\")",
            missing.join(", ")
        )
    });
    (have, note)
}

/// A host counter of a run (0 when the scheduler does not report it).
fn counter(r: &SimResult, name: &str) -> f64 {
    r.host.counters.iter().find(|(k, _)| k == name).map_or(0.0, |c| c.1)
}

fn pct(x: f64) -> String {
    format!("{:.2}", 100.0 * x)
}
