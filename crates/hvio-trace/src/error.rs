//! Typed errors: every one names the file and where in it.

use std::fmt;

/// Where in an input a problem is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loc {
    /// A 1-based line of a text trace.
    Line(u64),
    /// A 0-based record of a binary trace and its byte offset.
    Record {
        /// The record's index.
        index: u64,
        /// Its first byte's offset.
        byte: u64,
    },
    /// The input as a whole.
    File,
}

impl fmt::Display for Loc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Loc::Line(l) => write!(f, "line {l}"),
            Loc::Record { index, byte } => write!(f, "record {index} (byte {byte})"),
            Loc::File => write!(f, "file"),
        }
    }
}

/// An error reading or writing a trace.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The input could not be read or the output written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// A record that does not parse. Skippable with `skip_bad`.
    #[error("{path}: {loc}: expected {expected}; found {found:?}")]
    Malformed {
        /// The file.
        path: String,
        /// Where in it.
        loc: Loc,
        /// What a record should look like there.
        expected: String,
        /// What is there instead.
        found: String,
    },
    /// A record whose time is before the previous one. Skippable with `skip_bad`.
    #[error(
        "{path}: {loc}: time goes backwards ({time} ns after {prev} ns); pass allow_unsorted to accept unsorted traces"
    )]
    NonMonotonic {
        /// The file.
        path: String,
        /// Where in it.
        loc: Loc,
        /// The previous record's time, ns.
        prev: u64,
        /// This record's time, ns.
        time: u64,
    },
    /// A binary record cut short at the end of the input.
    #[error("{path}: {loc}: truncated record: {got} of {need} bytes")]
    Truncated {
        /// The file.
        path: String,
        /// Where the record starts.
        loc: Loc,
        /// Bytes there are.
        got: usize,
        /// Bytes a record needs.
        need: usize,
    },
    /// The input is not of the format it was opened as.
    #[error("{path}: not a {format} trace: {what}")]
    BadMagic {
        /// The file.
        path: String,
        /// The format it was opened as.
        format: &'static str,
        /// What did not match.
        what: String,
    },
    /// The format could not be detected.
    #[error("{path}: cannot tell the trace format: {why}; name it explicitly (formats: {known})")]
    UnknownFormat {
        /// The file.
        path: String,
        /// What the detection saw.
        why: String,
        /// Every format's name.
        known: String,
    },
    /// A bad option or argument.
    #[error("{0}")]
    Usage(String),
}

impl TraceError {
    pub(crate) fn io(path: &str, source: std::io::Error) -> Self {
        TraceError::Io {
            path: path.to_string(),
            source,
        }
    }

    /// True for errors that `skip_bad` may count and skip.
    pub fn is_skippable(&self) -> bool {
        matches!(self, TraceError::Malformed { .. } | TraceError::NonMonotonic { .. })
    }
}

/// Shortens a bad record for an error message.
pub(crate) fn snippet(bytes: &[u8]) -> String {
    const MAX: usize = 120;
    let s = String::from_utf8_lossy(&bytes[..bytes.len().min(MAX)]).into_owned();
    if bytes.len() > MAX {
        format!("{s}...")
    } else {
        s
    }
}
