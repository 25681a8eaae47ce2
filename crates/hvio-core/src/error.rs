//! Configuration errors that name the key, the value and the place.

use thiserror::Error;

/// A bad configuration value: every variant names where it is and what is wrong.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum ConfigError {
    /// A key nobody knows. `context` says where (e.g. `scheduler cfq` or a file).
    #[error("{context}: unknown key `{key}`{} (known: {known})", crate::message::hint(key, known.split(", ")))]
    UnknownKey {
        context: String,
        key: String,
        known: String,
    },
    /// A known key with a value out of range or of the wrong kind.
    #[error("{context}: invalid value {value} for `{key}`: {reason}")]
    InvalidValue {
        context: String,
        key: String,
        value: String,
        reason: String,
    },
    /// A name (scheduler, device, preset) that does not exist.
    #[error("unknown {what} `{name}`{} (known: {known})", crate::message::hint(name, known.split(", ")))]
    UnknownName { what: String, name: String, known: String },
    /// Anything else, already phrased with its place.
    #[error("{0}")]
    Other(String),
}

impl ConfigError {
    pub fn invalid(
        context: impl Into<String>,
        key: impl Into<String>,
        value: impl ToString,
        reason: impl Into<String>,
    ) -> Self {
        ConfigError::InvalidValue {
            context: context.into(),
            key: key.into(),
            value: value.to_string(),
            reason: reason.into(),
        }
    }
}
