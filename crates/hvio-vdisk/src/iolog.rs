//! The request log: one line per request in fio's iolog v3 format, so a real
//! run can be replayed by fio (`--read_iolog`) or by hvio's simulator under
//! other schedulers.
//!
//! ```text
//! fio version 3 iolog
//! 0 vm1 add
//! 0 vm1 open
//! 1520 vm1 write 4096 4096
//! ```
//! Timestamps are microseconds since the log started (as fio's
//! `write_iolog` writes them); the file name is the VM's name; offsets are
//! bytes within that VM's disk.

use crate::io::IoKind;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

pub struct IoLog {
    out: BufWriter<File>,
    names: Vec<String>,
    failed: bool,
}

impl IoLog {
    /// Create `path` and write the header and one `add`/`open` pair per VM.
    pub fn create(path: &Path, names: &[String]) -> std::io::Result<IoLog> {
        let mut out = BufWriter::with_capacity(1 << 16, File::create(path)?);
        writeln!(out, "fio version 3 iolog")?;
        for n in names {
            writeln!(out, "0 {n} add")?;
        }
        for n in names {
            writeln!(out, "0 {n} open")?;
        }
        Ok(IoLog {
            out,
            names: names.to_vec(),
            failed: false,
        })
    }

    /// Record one request arriving `us` microseconds after the log started.
    pub fn record(&mut self, us: u64, vm: usize, kind: IoKind, offset: u64, len: u64) {
        if self.failed {
            return;
        }
        let action = match kind {
            IoKind::Read => "read",
            IoKind::Write | IoKind::WriteZeroes { .. } => "write",
            IoKind::Flush => "sync",
            IoKind::Trim => "trim",
        };
        let (offset, len) = if kind == IoKind::Flush { (0, 0) } else { (offset, len) };
        if let Err(e) = writeln!(self.out, "{us} {} {action} {offset} {len}", self.names[vm]) {
            tracing::error!(error = %e, "request log: write failed; logging stops");
            self.failed = true;
        }
    }

    /// Write the `close` lines and flush.
    pub fn finish(mut self, us: u64) -> std::io::Result<()> {
        for n in &self.names {
            writeln!(self.out, "{us} {n} close")?;
        }
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_v3() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log");
        let mut l = IoLog::create(&p, &["a".into(), "b".into()]).unwrap();
        l.record(15, 1, IoKind::Write, 4096, 512);
        l.record(20, 0, IoKind::Flush, 0, 0);
        l.finish(30).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(
            text,
            "fio version 3 iolog\n0 a add\n0 b add\n0 a open\n0 b open\n15 b write 4096 512\n20 a sync 0 0\n30 a close\n30 b close\n"
        );
    }
}
