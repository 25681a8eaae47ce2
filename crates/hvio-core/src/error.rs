//! Configuration errors that name the key, the value and the place.

use thiserror::Error;

/// A bad configuration value: every variant names where it is and what is wrong.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum ConfigError {
    /// A key nobody knows. `context` says where (e.g. `scheduler cfq` or a file).
    #[error("{context}: unknown key `{key}`{} (known: {known})", crate::message::hint(key, known.split(", ")))]
    UnknownKey {
        /// Where the key was found.
        context: String,
        /// The key as written.
        key: String,
        /// The keys that are known there, comma-separated.
        known: String,
    },
    /// A known key with a value out of range or of the wrong kind.
    #[error("{context}: invalid value {value} for `{key}`: {reason}")]
    InvalidValue {
        /// Where the value was found.
        context: String,
        /// The key it was given for.
        key: String,
        /// The value as written.
        value: String,
        /// Why it is refused.
        reason: String,
    },
    /// A name (scheduler, device, preset) that does not exist.
    #[error("unknown {what} `{name}`{} (known: {known})", crate::message::hint(name, known.split(", ")))]
    UnknownName {
        /// What kind of name (`scheduler`, `device`, `preset`, ...).
        what: String,
        /// The name as written.
        name: String,
        /// The names that exist, comma-separated.
        known: String,
    },
    /// Anything else, already phrased with its place.
    #[error("{0}")]
    Other(String),
}

impl ConfigError {
    /// A [`ConfigError::InvalidValue`] from its parts.
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
