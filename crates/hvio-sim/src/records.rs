//! Optional per-request records, streamed to CSV as they complete (never
//! held in memory): one line per host-level request. They go to a
//! temporary file beside the target, renamed over it when the run ends
//! well: a failed run leaves no half-written records (and the previous
//! file, if any, as it was). A target that is not a regular file
//! (`/dev/null`, a FIFO) is written in place. The last column is the run's
//! seed, so a records file names what reproduces it (with the config and
//! scheduler) and the records of several seeds concatenate cleanly.

use crate::error::{Result, SimError};
use hvio_core::Completion;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

pub const HEADER: &str =
    "vm,op,sector,sectors,meta,arrival_ns,dispatch_ns,start_ns,done_ns,overhead_ns,seek_ns,rotation_ns,transfer_ns,cache_hit,seed";

pub struct RecordWriter {
    path: PathBuf,
    /// The temporary file being written, renamed to `path` by `finish`
    /// (None: writing `path` in place).
    tmp: Option<PathBuf>,
    seed: u64,
    out: BufWriter<File>,
    error: Option<std::io::Error>,
}

impl RecordWriter {
    /// Create `path` for a run with `seed` and write the header.
    pub fn create(path: &Path, seed: u64) -> Result<RecordWriter> {
        let io = |source| SimError::Io {
            path: path.display().to_string(),
            source,
        };
        let meta = std::fs::metadata(path).ok();
        if meta.as_ref().is_some_and(|m| m.is_dir()) || path.as_os_str().to_string_lossy().ends_with('/') {
            return Err(SimError::invalid(
                "output",
                "records",
                path.display(),
                "is a directory, not a file to write",
            ));
        }
        let special = meta.is_some_and(|m| !m.is_file());
        let tmp = (!special).then(|| {
            let mut name = path.file_name().unwrap_or_default().to_os_string();
            name.push(".tmp~");
            path.with_file_name(name)
        });
        let file = match &tmp {
            Some(t) => {
                // As the JSON results: a missing directory is made. Errors
                // name the file asked for, not the temporary one.
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir).map_err(io)?;
                }
                File::create(t).map_err(io)?
            }
            None => std::fs::OpenOptions::new().write(true).open(path).map_err(io)?,
        };
        let mut w = RecordWriter {
            path: path.to_path_buf(),
            tmp,
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

    pub fn finish(mut self) -> Result<()> {
        let io = |source| SimError::Io {
            path: self.path.display().to_string(),
            source,
        };
        if let Some(e) = self.error.take() {
            return Err(io(e));
        }
        self.out.flush().map_err(io)?;
        if let Some(tmp) = self.tmp.take() {
            std::fs::rename(&tmp, &self.path).map_err(|source| {
                let _ = std::fs::remove_file(&tmp);
                io(source)
            })?;
        }
        Ok(())
    }
}

impl Drop for RecordWriter {
    /// A run that did not finish leaves no temporary file behind.
    fn drop(&mut self) {
        if let Some(tmp) = self.tmp.take() {
            let _ = std::fs::remove_file(tmp);
        }
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
        for d in [dir.clone(), dir.join("sub/")] {
            let e = RecordWriter::create(&d, 1).err().expect("a directory").to_string();
            assert!(e.contains("`records`") && e.contains("is a directory"), "{e}");
        }
        assert!(!dir.with_extension("tmp~").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
