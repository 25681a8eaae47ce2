//! `hvio sweep STUDY` and `hvio report`: the commands whose engine is hvio's
//! Python package (`python3 -m hvio sweep|report`, and `reproduce` for the
//! experiments that are studies): the Dask client, the Parquet writer, the
//! analysis and the HTML page live there, and every run
//! in them is this simulator through the extension module. These commands
//! hand their arguments over, as `hvio compare --figures` does.

use anyhow::{Context, Result};
use clap::Args;
use std::ffi::OsString;
use std::path::PathBuf;

#[derive(Args)]
pub struct SweepArgs {
    /// The study file (experiments/*.study.toml).
    study: PathBuf,
    /// Cache under OUT/cache; results (Parquet, each run's JSON) under OUT/sweep/STUDY.
    #[arg(long, default_value = "out")]
    out: PathBuf,
    /// Run on the Dask distributed cluster whose scheduler is here (tcp://HOST:8786).
    #[arg(long)]
    cluster: Option<String>,
    /// Local worker threads (default: every core; 1 runs the runs one by one).
    #[arg(long, allow_negative_numbers = true, value_parser = crate::common::positive::<u64>)]
    workers: Option<u64>,
    /// Compute every run again instead of reusing cached results.
    #[arg(long)]
    no_cache: bool,
}

pub fn sweep(a: SweepArgs) -> Result<()> {
    let mut args: Vec<OsString> = vec![a.study.into(), "--out".into(), a.out.into()];
    if let Some(c) = a.cluster {
        args.extend(["--cluster".into(), c.into()]);
    }
    if let Some(w) = a.workers {
        args.extend(["--workers".into(), w.to_string().into()]);
    }
    if a.no_cache {
        args.push("--no-cache".into());
    }
    python_hvio("sweep", args)
}

#[derive(Args)]
pub struct ReportArgs {
    /// The folder of results to report on (what `make run`, `hvio compare`,
    /// `hvio sweep` and `hvio reproduce` wrote).
    #[arg(long, default_value = "out")]
    out: PathBuf,
    /// The page to write (default: OUT/report.html).
    #[arg(long)]
    html: Option<PathBuf>,
}

pub fn report(a: ReportArgs) -> Result<()> {
    let mut args: Vec<OsString> = vec!["--out".into(), a.out.into()];
    if let Some(h) = a.html {
        args.extend(["--html".into(), h.into()]);
    }
    python_hvio("report", args)
}

/// The Python that runs hvio's package: `HVIO_PYTHON` if set; else the
/// project's `.venv/bin/python` (what `make run` sets up) when this binary
/// was built in that project (`target/<profile>/hvio`) or the current
/// directory holds one; else `python3` from the `PATH`.
pub fn python() -> OsString {
    if let Some(p) = std::env::var_os("HVIO_PYTHON") {
        return p;
    }
    let venv = |dir: &std::path::Path| dir.join(".venv/bin/python");
    let from_build = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent()?.parent()?.parent().map(venv));
    let from_cwd = Some(venv(std::path::Path::new(".")));
    from_build
        .into_iter()
        .chain(from_cwd)
        .find(|p| p.is_file())
        .map_or_else(|| "python3".into(), |p| p.into_os_string())
}

/// Run `PYTHON -m hvio COMMAND ARGS` ([`python`]) and end with its exit
/// status: it has said on stderr why it failed.
pub fn python_hvio(command: &str, args: Vec<OsString>) -> Result<()> {
    let python = python();
    let status = std::process::Command::new(&python)
        .args(["-m", "hvio", command])
        .args(args)
        .status()
        .with_context(|| {
            format!(
                "cannot run {} (set HVIO_PYTHON to the Python that has hvio installed, e.g. .venv/bin/python)",
                python.to_string_lossy()
            )
        })?;
    if !status.success() {
        std::process::exit(status.code().unwrap_or(1));
    }
    Ok(())
}
