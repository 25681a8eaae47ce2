//! Result files written whole or not at all.
//!
//! Every file hvio writes as a result (JSON results, per-request records,
//! converted traces, validation CDFs) goes through [`AtomicFile`]: the bytes
//! go to a temporary file beside the target, renamed over it by
//! [`AtomicFile::commit`]. A run that fails (or an `AtomicFile` dropped
//! before its commit) leaves no temporary file and the previous result, if
//! any, as it was. A target that is not a regular file (`/dev/null`, a FIFO,
//! a terminal) is written in place: renaming over it would replace the
//! device node with a regular file.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// An output file being written; see the module doc.
pub struct AtomicFile {
    path: PathBuf,
    /// The temporary file, renamed to `path` by `commit` (None: in place).
    tmp: Option<PathBuf>,
    file: File,
}

impl AtomicFile {
    /// Opens `path` for writing, creating its missing parent directories.
    /// A directory is refused (`io::ErrorKind::IsADirectory`), and so is a
    /// path that can only name one: empty (a relative path resolved
    /// against nothing, the current directory) or ending in `/`. Errors are
    /// about `path`, never about the temporary file.
    pub fn create(path: &Path) -> io::Result<AtomicFile> {
        let names_a_dir = path.as_os_str().is_empty() || path.as_os_str().as_encoded_bytes().ends_with(b"/");
        let meta = std::fs::metadata(path).ok();
        if names_a_dir || meta.as_ref().is_some_and(|m| m.is_dir()) {
            return Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                "is a directory, not a file to write",
            ));
        }
        if let Some(meta) = meta {
            if !meta.is_file() {
                let file = std::fs::OpenOptions::new().write(true).open(path)?;
                return Ok(AtomicFile {
                    path: path.to_path_buf(),
                    tmp: None,
                    file,
                });
            }
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let mut name = path.file_name().unwrap_or_default().to_os_string();
        name.push(".tmp~");
        let tmp = path.with_file_name(name);
        let file = File::create(&tmp)?;
        Ok(AtomicFile {
            path: path.to_path_buf(),
            tmp: Some(tmp),
            file,
        })
    }

    /// The file as it will be named once committed.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Flushes and renames the temporary file over the target.
    pub fn commit(mut self) -> io::Result<()> {
        self.file.flush()?;
        if let Some(tmp) = self.tmp.take() {
            if let Err(e) = std::fs::rename(&tmp, &self.path) {
                let _ = std::fs::remove_file(&tmp);
                return Err(e);
            }
        }
        Ok(())
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl Drop for AtomicFile {
    /// Not committed: no temporary file is left behind.
    fn drop(&mut self) {
        if let Some(tmp) = self.tmp.take() {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

/// Writes `bytes` to `path` whole or not at all ([`AtomicFile`]).
pub fn write_whole(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut f = AtomicFile::create(path)?;
    f.write_all(bytes)?;
    f.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn committed_replaces_dropped_leaves_the_old_file_and_no_temporary() {
        let dir = std::env::temp_dir().join(format!("hvio-atomic-{}", std::process::id()));
        let path = dir.join("sub").join("r.csv");
        write_whole(&path, b"one").unwrap();
        let mut f = AtomicFile::create(&path).unwrap();
        f.write_all(b"half").unwrap();
        drop(f);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "one");
        write_whole(&path, b"two").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two");
        assert_eq!(
            std::fs::read_dir(dir.join("sub")).unwrap().count(),
            1,
            "a temporary file was left"
        );
        for d in [dir.clone(), dir.join("new/"), PathBuf::new()] {
            let e = AtomicFile::create(&d).err().expect("a directory");
            assert_eq!(e.kind(), io::ErrorKind::IsADirectory, "{}", d.display());
        }
        assert!(!dir.join("new").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
