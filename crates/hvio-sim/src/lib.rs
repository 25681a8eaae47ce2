//! hvio's deterministic discrete-event simulator of many VMs sharing one disk.
//!
//! [`Config`] describes the disk, the host scheduler and the VMs (image
//! layout, guest file system, guest scheduler, virtio ring, jobs); [`run`]
//! plays it and returns a [`SimResult`]. Same config and seed → byte-identical
//! results.
#![warn(missing_docs)]

pub mod bench;
pub mod compare;
pub mod config;
pub mod engine;
pub mod error;
pub mod fiojob;
pub(crate) mod host;
pub mod mapreduce;
pub mod mapreduce_run;
pub mod mapreduce_tune;
pub mod metrics;
pub mod pagecache;
pub mod records;
pub mod replay;
pub mod report;
pub mod sched_cost;
pub mod size;
pub mod testing;
pub mod tune;
pub mod workload;

pub use config::{Config, VmConfig};
pub use error::{Result, SimError};
pub use metrics::SimResult;
pub use workload::{InodeLock, JobConfig, Rw, Sharing};

/// Paper 000's four-VM mixed-application scenario (its Table 1), the default of `make run`.
pub const DEFAULT_SCENARIO: &str = include_str!("../../../experiments/paper000-four-vms.toml");

/// Run `cfg` on the device its `[disk]` section describes. Errors in the
/// config name its origin (file name) and, when known, the line.
pub fn run(cfg: &Config) -> Result<SimResult> {
    cfg.check_outputs(&[], &[])?;
    let device = testing::device_for_run(&cfg.disk, &cfg.base_dir, Some(cfg.seed)).map_err(|e| cfg.locate(e))?;
    run_with_device(cfg, device)
}

/// Run `cfg` on a given device (tests, custom models).
pub fn run_with_device(cfg: &Config, device: Box<dyn hvio_core::Device>) -> Result<SimResult> {
    match engine::precondition::plan(cfg).map_err(|e| cfg.locate(e))? {
        Some(steady) => engine::precondition::run(cfg, device, steady),
        None => engine::Engine::new(cfg, device).map_err(|e| cfg.locate(e))?.run(),
    }
}
