//! Functions shared by subcommands.

use anyhow::{Context, Result};
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

/// Write `text` to `path` whole or not at all, creating the parent
/// directory (`hvio_core::output::write_whole`: a temporary file renamed
/// over it; a special file such as `/dev/null` is written in place).
pub fn write_atomic(path: &Path, text: &str) -> Result<()> {
    check_not_dir(path)?;
    hvio_core::output::write_whole(path, text.as_bytes()).with_context(|| format!("writing {}", path.display()))
}

/// Fail early, before a long run, when a result would be written onto a
/// directory.
pub fn check_not_dir(path: &Path) -> Result<()> {
    if path.is_dir() {
        anyhow::bail!("{} is a directory, not a file to write", path.display());
    }
    Ok(())
}

/// clap value parser: an integer ≥ 0 (`--seed`). With
/// `allow_negative_numbers`, `--seed -1` reaches it and is refused in
/// words ("must be a non-negative integer, got -1") instead of clap's
/// "unexpected argument '-1' found".
pub fn non_negative<T: std::str::FromStr>(s: &str) -> Result<T, String> {
    s.parse()
        .map_err(|_| format!("must be a non-negative integer, got {}", hvio_core::message::shorten(s)))
}

/// clap value parser: an integer ≥ 1 (`--vms`, `--closed`).
pub fn positive<T: std::str::FromStr + PartialOrd + Default>(s: &str) -> Result<T, String> {
    s.parse()
        .ok()
        .filter(|v| *v > T::default())
        .ok_or_else(|| format!("must be a positive integer, got {}", hvio_core::message::shorten(s)))
}

/// A progress bar on stderr: the runs done of `total`, the time so far and
/// an ETA. Hidden when stderr is not a terminal (a pipe, a file, CI logs).
pub fn progress_bar(total: u64) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::with_draw_target(Some(total), indicatif::ProgressDrawTarget::stderr());
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} runs, {elapsed} so far, ETA {eta}")
            .expect("a valid template"),
    );
    bar
}

/// clap value parser: a finite number > 0 (`--time-scale`).
pub fn positive_number(s: &str) -> Result<f64, String> {
    s.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v > 0.0)
        .ok_or_else(|| format!("must be a positive number, got {}", hvio_core::message::shorten(s)))
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
        assert_eq!(
            std::fs::read_dir(file.parent().unwrap()).unwrap().count(),
            1,
            "a temporary file was left"
        );

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
