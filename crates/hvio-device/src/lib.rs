//! Device models for the simulator and the daemon's emulator backend.
//!
//! - [`hdd`]: a hard disk (zones, skews, seek curve, rotation, segmented
//!   read-ahead cache, optional write-back cache, optional NCQ reordering).
//! - [`disksim`]: DiskSim 4.0 disk descriptions mapped onto the HDD model;
//!   [`validate`]: replaying DiskSim validation traces (the demerit figure).
//! - [`ssd`]: a flash SSD (page-mapped FTL, greedy or cost-benefit GC, trim,
//!   write buffer, preconditioning, channel/die parallelism, presets).
//!
//! Build one from a config with [`build_device`].
#![warn(missing_docs)]

pub mod disksim;
mod done;
pub mod hdd;
pub mod ssd;
pub mod validate;

use hvio_core::Device;
use serde::Deserialize;
use std::path::Path;
use thiserror::Error;

pub use hdd::{Hdd, HddModel, HddParams};

/// Errors building a device.
#[derive(Debug, Error)]
pub enum DeviceError {
    /// A parameter with a bad value.
    #[error("device parameter `{key}` = {value}: {reason}")]
    Param {
        /// The parameter.
        key: String,
        /// The value given.
        value: String,
        /// Why it is refused.
        reason: String,
    },
    /// A DiskSim disk description that could not be read or mapped.
    #[error(transparent)]
    Spec(#[from] disksim::SpecError),
    /// A file that could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
}

impl DeviceError {
    /// A [`DeviceError::Param`] from its parts.
    pub fn param(key: impl Into<String>, value: impl ToString, reason: impl Into<String>) -> Self {
        DeviceError::Param {
            key: key.into(),
            value: value.to_string(),
            reason: reason.into(),
        }
    }
}

/// Which device to simulate (the `[disk]` table of a simulation config).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "model", rename_all = "lowercase")]
#[allow(clippy::large_enum_variant)] // built once per run; boxing would only complicate configs
pub enum DeviceConfig {
    /// The built-in 7200 RPM 1 TB disk, with optional overrides.
    Hdd(HddParams),
    /// A DiskSim 4.0 disk description (`.parv` or `.diskspecs`).
    Disksim(DisksimConfig),
    /// A flash SSD (page-mapped FTL), from a preset or the defaults, with optional overrides.
    Ssd(ssd::SsdParams),
}

/// `model = "disksim"`: a DiskSim disk description.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DisksimConfig {
    /// The parameter file (relative to the config's directory).
    pub spec: std::path::PathBuf,
    /// Which `disksim_disk` block, when the file has several.
    pub disk: Option<String>,
    /// Commands the drive accepts at once (default: the spec's `Max queue length`).
    pub queue_depth: Option<usize>,
    /// Moved from every time of a DIXtrac-extracted seek table into the
    /// miss overheads, ms (default [`disksim::DIXTRAC_SEEK_OVERHEAD_MS`];
    /// 0: the description as DiskSim reads it).
    pub dixtrac_seek_overhead_ms: Option<f64>,
}

impl Default for DeviceConfig {
    fn default() -> Self {
        DeviceConfig::Hdd(HddParams::default())
    }
}

/// Builds the device a config describes; relative paths resolve against `base_dir`.
pub fn build_device(cfg: &DeviceConfig, base_dir: &Path) -> Result<Box<dyn Device>, DeviceError> {
    match cfg {
        DeviceConfig::Ssd(p) => Ok(Box::new(p.build()?)),
        _ => Ok(Box::new(Hdd::new(build_hdd_model(cfg, base_dir)?))),
    }
}

/// The HDD model a config describes (see [`build_device`]).
pub fn build_hdd_model(cfg: &DeviceConfig, base_dir: &Path) -> Result<HddModel, DeviceError> {
    match cfg {
        DeviceConfig::Hdd(p) => p.build(),
        DeviceConfig::Disksim(d) => {
            let mut opts = disksim::LoadOptions::default();
            if let Some(c) = d.dixtrac_seek_overhead_ms {
                if !(c.is_finite() && (0.0..=hdd::MAX_STEP_MS).contains(&c)) {
                    return Err(DeviceError::param(
                        "dixtrac_seek_overhead_ms",
                        c,
                        format!("must be between 0 and {} ms", hdd::MAX_STEP_MS),
                    ));
                }
                opts.dixtrac_seek_overhead_ms = c;
            }
            let mut m = disksim::load_disk_with(&base_dir.join(&d.spec), d.disk.as_deref(), &opts)?.model;
            if let Some(q) = d.queue_depth {
                if q == 0 || q as u64 > hdd::MAX_QUEUE_DEPTH {
                    return Err(DeviceError::param(
                        "queue_depth",
                        q,
                        format!("must be between 1 and {}", hdd::MAX_QUEUE_DEPTH),
                    ));
                }
                m.queue_depth = q;
                m.policy = hdd::QueuePolicy::Sptf;
            }
            Ok(m)
        }
        DeviceConfig::Ssd(_) => Err(DeviceError::param("model", "ssd", "not a hard disk")),
    }
}
