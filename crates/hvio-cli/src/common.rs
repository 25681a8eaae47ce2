//! Helpers shared by subcommands.

use anyhow::{Context, Result};
use std::io::Write;
use std::path::Path;

/// `print!` that returns an error (stdout on a full disk, `> /dev/full`)
/// from the enclosing function instead of panicking. A closed pipe still
/// ends the process quietly (see `main`).
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        write!(std::io::stdout().lock(), $($arg)*).map_err(|e| anyhow::anyhow!("writing to stdout: {e}"))?
    }};
}

/// `println!` as [`out!`]: stdout is line-buffered, so a failed write shows
/// at the newline.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*).map_err(|e| anyhow::anyhow!("writing to stdout: {e}"))?
    }};
}

/// `eprintln!` that never panics: a full or closed stderr loses the line
/// (there is nowhere left to say so).
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

pub(crate) use {errln, out, outln};

/// Write `text` to `path` atomically (temporary file, then rename), creating
/// the parent directory: a failed run never leaves a half-written result.
///
/// A path that names something other than a regular file (`/dev/null`, a
/// FIFO, a terminal) is written in place: renaming over it would replace
/// the device node with a regular file.
pub fn write_atomic(path: &Path, text: &str) -> Result<()> {
    if let Ok(meta) = std::fs::metadata(path) {
        check_not_dir(path)?;
        if !meta.is_file() {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .with_context(|| format!("opening {}", path.display()))?;
            return f
                .write_all(text.as_bytes())
                .with_context(|| format!("writing {}", path.display()));
        }
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let tmp = path.with_extension("tmp~");
    {
        let mut f = std::fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        f.write_all(text.as_bytes())
            .with_context(|| format!("writing {}", tmp.display()))?;
    }
    std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))?;
    Ok(())
}

/// Fail early, before a long run, when a result would be written onto a
/// directory.
pub fn check_not_dir(path: &Path) -> Result<()> {
    if path.is_dir() {
        anyhow::bail!("{} is a directory, not a file to write", path.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileTypeExt;

    #[test]
    fn writes_regular_files_atomically_and_special_files_in_place() {
        let dir = std::env::temp_dir().join(format!("hvio-write-atomic-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("sub").join("r.json");
        write_atomic(&file, "one").unwrap();
        write_atomic(&file, "two").unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "two");
        assert!(!file.with_extension("tmp~").exists());

        // A FIFO stands in for /dev/null: it must still be a FIFO afterwards.
        let fifo = dir.join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.map(|s| s.success()).unwrap_or(false) {
            let reader = {
                let fifo = fifo.clone();
                std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
            };
            write_atomic(&fifo, "through the pipe").unwrap();
            assert_eq!(reader.join().unwrap(), "through the pipe");
            assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
        }
        let err = write_atomic(&dir, "x").unwrap_err().to_string();
        assert!(err.contains("is a directory"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
