//! Device models for the simulator and the daemon's emulator backend.
//!
//! - [`hdd`]: a hard disk (zones, skews, seek curve, rotation, segmented
//!   read-ahead cache, optional write-back cache, optional NCQ reordering).
//!
//! Build one from a config with [`build_device`].

pub mod hdd;

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
    Param { key: String, value: String, reason: String },
    /// A file that could not be read.
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl DeviceError {
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
pub enum DeviceConfig {
    /// The built-in 7200 RPM 1 TB disk, with optional overrides.
    Hdd(HddParams),
}

impl Default for DeviceConfig {
    fn default() -> Self {
        DeviceConfig::Hdd(HddParams::default())
    }
}

/// Builds the device a config describes; relative paths resolve against `base_dir`.
pub fn build_device(cfg: &DeviceConfig, _base_dir: &Path) -> Result<Box<dyn Device>, DeviceError> {
    match cfg {
        DeviceConfig::Hdd(p) => Ok(Box::new(Hdd::new(p.build()?))),
    }
}
