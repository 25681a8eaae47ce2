//! Optional per-request records, streamed to CSV as they complete (never
//! held in memory): one line per host-level request.

use crate::error::{Result, SimError};
use hvio_core::Completion;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

pub const HEADER: &str =
    "vm,op,sector,sectors,meta,arrival_ns,dispatch_ns,start_ns,done_ns,overhead_ns,seek_ns,rotation_ns,transfer_ns,cache_hit";

pub struct RecordWriter {
    path: PathBuf,
    out: BufWriter<File>,
    error: Option<std::io::Error>,
}

impl RecordWriter {
    pub fn create(path: &Path) -> Result<RecordWriter> {
        let io = |source| SimError::Io {
            path: path.display().to_string(),
            source,
        };
        let mut out = BufWriter::with_capacity(1 << 16, File::create(path).map_err(io)?);
        writeln!(out, "{HEADER}").map_err(io)?;
        Ok(RecordWriter {
            path: path.to_path_buf(),
            out,
            error: None,
        })
    }

    /// Append one record; the first I/O error is kept and reported by `finish`.
    pub fn write(&mut self, vm: &str, c: &Completion, arrival: u64, dispatch: u64) {
        if self.error.is_some() {
            return;
        }
        let s = &c.service;
        if let Err(e) = writeln!(
            self.out,
            "{vm},{},{},{},{},{arrival},{dispatch},{},{},{},{},{},{},{}",
            c.rq.op.as_str(),
            c.rq.sector,
            c.rq.sectors,
            c.rq.meta as u8,
            c.start,
            c.done,
            s.overhead,
            s.seek,
            s.rotation,
            s.transfer,
            s.cache_hit as u8
        ) {
            self.error = Some(e);
        }
    }

    pub fn finish(mut self) -> Result<()> {
        let io = |source| SimError::Io {
            path: self.path.display().to_string(),
            source,
        };
        if let Some(e) = self.error.take() {
            return Err(io(e));
        }
        self.out.flush().map_err(io)
    }
}
