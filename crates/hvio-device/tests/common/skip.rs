//! A test that cannot run here says so: loudly on stderr (seen with
//! `--nocapture` or when the test fails) and, when `HVIO_SKIP_LOG` names a
//! file, as one line appended to it, which `make test` counts and prints.

use std::io::Write;

/// Records that the running test skips, and why; the caller then returns.
pub fn skipped(reason: &str) {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("?");
    eprintln!("\n!!!!!!!! SKIPPED: {reason} !!!!!!!!\n");
    if let Some(log) = std::env::var_os("HVIO_SKIP_LOG") {
        // One short write per line, appended: lines from parallel tests and
        // test binaries do not interleave.
        let line = format!("{test}: {reason}\n");
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&log);
        if let Err(e) = f.as_mut().map(|f| f.write_all(line.as_bytes())) {
            eprintln!("(could not append to HVIO_SKIP_LOG {}: {e})", log.to_string_lossy());
        }
    }
}
