//! Files read whole, bounded: an endless input (`/dev/zero`, a huge file
//! given by mistake) is an error naming the file and the limit, not a hang
//! or an exhausted memory.

use std::io::Read;
use std::path::Path;

/// The largest configuration file hvio reads whole: room for the largest
/// config the limits allow, far below what would exhaust memory.
pub const MAX_CONFIG_BYTES: u64 = 64 << 20;

/// Why a text file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{file}: {source}")]
    /// The file could not be read.
    Io {
        /// The file as named by the user.
        file: String,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    #[error("{file}: larger than {} MiB: not a {what}", limit >> 20)]
    /// The file is larger than the limit for its kind.
    TooLarge {
        /// The file as named by the user.
        file: String,
        /// The limit in bytes.
        limit: u64,
        /// What the file should have been (`config`, `trace`, ...).
        what: &'static str,
    },
    #[error("{file}:{line}: byte {byte} is not UTF-8")]
    /// A byte that is not UTF-8.
    NotUtf8 {
        /// The file as named by the user.
        file: String,
        /// The line (from 1) the byte is on.
        line: usize,
        /// Its offset in the file, from 0.
        byte: usize,
    },
}

/// Reads `path` as UTF-8 text of at most `limit` bytes; `what` names the
/// kind of file in the too-large error ("config").
pub fn read_text(path: &Path, limit: u64, what: &'static str) -> Result<String, ReadError> {
    let file = path.display().to_string();
    let io = |source| ReadError::Io {
        file: file.clone(),
        source,
    };
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .map_err(io)?
        .take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(ReadError::TooLarge { file, limit, what });
    }
    String::from_utf8(bytes).map_err(|e| {
        let ok = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        ReadError::NotUtf8 {
            file: file.clone(),
            line: ok.iter().filter(|&&c| c == b'\n').count() + 1,
            byte: ok.len(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endless_file_stops_at_the_limit_and_bad_bytes_name_their_line() {
        let e = read_text(Path::new("/dev/zero"), 1 << 20, "config").unwrap_err();
        assert_eq!(e.to_string(), "/dev/zero: larger than 1 MiB: not a config");
        let p = std::env::temp_dir().join(format!("hvio-input-{}", std::process::id()));
        std::fs::write(&p, b"a\nb\xff\n").unwrap();
        let e = read_text(&p, 100, "config").unwrap_err();
        assert_eq!(e.to_string(), format!("{}:2: byte 3 is not UTF-8", p.display()));
        std::fs::write(&p, "ok").unwrap();
        assert_eq!(read_text(&p, 2, "config").unwrap(), "ok");
        std::fs::remove_file(&p).unwrap();
    }
}
