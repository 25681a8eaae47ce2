//! Errors of the simulator: every one names the file, key or value at fault.

use hvio_core::ConfigError;
use thiserror::Error;

/// An error of the simulator.
#[derive(Debug, Error)]
pub enum SimError {
    /// A config or trace that does not parse.
    #[error("{origin}: {message}")]
    Parse {
        /// The file or string it came from.
        origin: String,
        /// What is wrong.
        message: String,
    },
    /// A bad key or value.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A device model that could not be built.
    #[error("device: {0}")]
    Device(String),
    /// A file that could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// Anything else, already phrased with its place.
    #[error("{0}")]
    Other(String),
    /// An error in a config: the config's file name (and the line of the
    /// key at fault, when it is known) before the error.
    #[error("{origin}{}: {source}", line.map(|l| format!(":{l}")).unwrap_or_default())]
    In {
        /// The config's file name.
        origin: String,
        /// The line of the key at fault, when known.
        line: Option<usize>,
        /// The error.
        #[source]
        source: Box<SimError>,
    },
}

impl SimError {
    /// A [`ConfigError::InvalidValue`] as a simulator error.
    pub fn invalid(context: &str, key: &str, value: impl ToString, reason: impl Into<String>) -> Self {
        SimError::Config(ConfigError::invalid(context, key, value, reason))
    }
}

/// The simulator's result type.
pub type Result<T, E = SimError> = std::result::Result<T, E>;
