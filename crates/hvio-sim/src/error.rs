//! Errors of the simulator: every one names the file, key or value at fault.

use hvio_core::ConfigError;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum SimError {
    #[error("{origin}: {message}")]
    Parse { origin: String, message: String },
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("device: {0}")]
    Device(String),
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Other(String),
    /// An error in a config: the config's file name (and the line of the
    /// key at fault, when it is known) before the error.
    #[error("{origin}{}: {source}", line.map(|l| format!(":{l}")).unwrap_or_default())]
    In {
        origin: String,
        line: Option<usize>,
        #[source]
        source: Box<SimError>,
    },
}

impl SimError {
    pub fn invalid(context: &str, key: &str, value: impl ToString, reason: impl Into<String>) -> Self {
        SimError::Config(ConfigError::invalid(context, key, value, reason))
    }
}

pub type Result<T, E = SimError> = std::result::Result<T, E>;
