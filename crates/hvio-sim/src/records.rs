//! Optional per-request records, streamed to CSV as they complete (never
//! held in memory): one line per host-level request. They go through
//! `hvio_core::output::AtomicFile`, renamed over the target when the run
//! ends well: a failed run leaves no half-written records (and the previous
//! file, if any, as it was). A target that is not a regular file
//! (`/dev/null`, a FIFO) is written in place. The last column is the run's
//! seed, so a records file names what reproduces it (with the config and
//! scheduler) and the records of several seeds concatenate cleanly.

use crate::error::{Result, SimError};
use hvio_core::output::AtomicFile;
use hvio_core::Completion;
use std::io::{BufWriter, Write};
use std::path::Path;

/// The CSV header line.
pub const HEADER: &str =
    "vm,op,sector,sectors,meta,arrival_ns,dispatch_ns,start_ns,done_ns,overhead_ns,seek_ns,rotation_ns,transfer_ns,cache_hit,seed";

/// Streams per-request records to a CSV file.
pub struct RecordWriter {
    seed: u64,
    out: BufWriter<AtomicFile>,
    error: Option<std::io::Error>,
}

impl RecordWriter {
    /// Create `path` for a run with `seed` and write the header.
    pub fn create(path: &Path, seed: u64) -> Result<RecordWriter> {
        let io = |source| SimError::Io {
            path: path.display().to_string(),
            source,
        };
        // A directory (`AtomicFile` also counts an empty path, which is what
        // `records = ""` resolves to in a config named without a directory,
        // and one ending in `/`) is a bad value of the key, refused before
        // the run.
        let file = AtomicFile::create(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::IsADirectory => SimError::invalid(
                "output",
                "records",
                if path.as_os_str().is_empty() {
                    "\"\"".to_string()
                } else {
                    path.display().to_string()
                },
                e.to_string(),
            ),
            _ => io(e),
        })?;
        let mut w = RecordWriter {
            seed,
            out: BufWriter::with_capacity(1 << 16, file),
            error: None,
        };
        writeln!(w.out, "{HEADER}").map_err(io)?;
        Ok(w)
    }

    /// Append one record; the first I/O error is kept and reported by `finish`.
    pub fn write(&mut self, vm: &str, c: &Completion, arrival: u64, dispatch: u64) {
        if self.error.is_some() {
            return;
        }
        let s = &c.service;
        if let Err(e) = writeln!(
            self.out,
            "{vm},{},{},{},{},{arrival},{dispatch},{},{},{},{},{},{},{},{}",
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
            s.cache_hit as u8,
            self.seed
        ) {
            self.error = Some(e);
        }
    }

    /// Flushes and renames the file over its target; the first write error, if any.
    pub fn finish(mut self) -> Result<()> {
        let path = self.out.get_ref().path().display().to_string();
        let io = |source| SimError::Io {
            path: path.clone(),
            source,
        };
        if let Some(e) = self.error.take() {
            return Err(io(e));
        }
        self.out
            .into_inner()
            .map_err(|e| io(e.into_error()))?
            .commit()
            .map_err(io)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unfinished_run_leaves_the_previous_records_and_no_temporary_file() {
        let dir = std::env::temp_dir().join(format!("hvio-records-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("r.csv");
        std::fs::write(&path, "previous run\n").unwrap();
        let w = RecordWriter::create(&path, 1).unwrap();
        drop(w); // the run failed before `finish`
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "previous run\n");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "a temporary file was left");

        let w = RecordWriter::create(&path, 1).unwrap();
        w.finish().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), format!("{HEADER}\n"));
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);

        // A missing directory is made.
        let deep = dir.join("a/b/r.csv");
        RecordWriter::create(&deep, 1).unwrap().finish().unwrap();
        assert!(deep.is_file());
        std::fs::remove_dir_all(dir.join("a")).unwrap();

        // A directory (`records = ""` names the config's own) is refused
        // up front, not written beside it and renamed onto it at the end.
        for d in [dir.clone(), dir.join("sub/"), std::path::PathBuf::new()] {
            let e = RecordWriter::create(&d, 1).err().expect("a directory").to_string();
            assert!(e.contains("`records`") && e.contains("is a directory"), "{e}");
        }
        assert!(!dir.with_extension("tmp~").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
