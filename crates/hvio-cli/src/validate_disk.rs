//! `hvio validate-disk`: replay a DiskSim validation trace on a DiskSim disk
//! description and compare with the real disk (see docs/hdd-model.md).

use crate::common::out;
use anyhow::Result;
use clap::Args;
use hvio_device::disksim::LoadOptions;
use hvio_device::validate::DisksimRuns;
use std::path::PathBuf;

#[derive(Args)]
pub struct ValidateDiskArgs {
    /// DiskSim 4.0 parameter file: a `.parv` (disk and buses) or a `.diskspecs`.
    #[arg(required_unless_present = "all")]
    spec: Option<PathBuf>,
    /// DiskSim validation trace (`R|W Hit|Miss LBN sectors service_us gap_us`).
    #[arg(required_unless_present = "all")]
    trace: Option<PathBuf>,
    /// Every disk of DIR instead: each NAME.trace replayed on NAME.parv (or
    /// NAME.diskspecs), one table row each.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["spec", "trace", "disk", "bench"])]
    all: Option<PathBuf>,
    /// Write both service-time CDFs to DIR/cdf.csv (with --all: DIR/NAME/cdf.csv).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// The `disksim_disk` block to use when the file has several.
    #[arg(long)]
    disk: Option<String>,
    /// Read the description exactly as DiskSim 4.0 does: no DIXtrac
    /// seek-overhead correction (see docs/hdd-model.md).
    #[arg(long, conflicts_with = "seek_overhead")]
    as_described: bool,
    /// Move MS instead of hvio's fitted constant from every time of a
    /// DIXtrac-extracted seek table (`Seek type = extracted`) into the read
    /// and write miss overheads.
    #[arg(long, value_name = "MS", allow_negative_numbers = true, value_parser = seek_overhead_ms)]
    seek_overhead: Option<f64>,
    /// DiskSim's own runs of the disks, DIR/NAME.outv (written by
    /// `bench/disksim-runs.sh`), for DiskSim's demerit and hvio's ratio to it
    /// [default: NAME.outv beside NAME.trace, where there is one].
    #[arg(long, value_name = "DIR")]
    disksim_out: Option<PathBuf>,
    /// Also time this many replays and report the best replay speed.
    #[arg(long, value_name = "N", default_value_t = 0, allow_negative_numbers = true, value_parser = crate::common::non_negative::<u32>)]
    bench: u32,
}

/// A time in ms between 0 and the HDD model's longest step.
fn seek_overhead_ms(s: &str) -> Result<f64, String> {
    let max = hvio_device::hdd::MAX_STEP_MS;
    s.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && (0.0..=max).contains(v))
        .ok_or_else(|| format!("`{s}`: expected milliseconds between 0 and {max}, e.g. 0.5"))
}

pub fn validate_disk(a: ValidateDiskArgs) -> Result<()> {
    let opts = match (a.as_described, a.seek_overhead) {
        (true, _) => LoadOptions::as_described(),
        (false, Some(ms)) => LoadOptions {
            dixtrac_seek_overhead_ms: ms,
        },
        (false, None) => LoadOptions::default(),
    };
    let disksim = match &a.disksim_out {
        Some(dir) => DisksimRuns::In(dir),
        None => DisksimRuns::BesideTrace,
    };
    let report = match (&a.all, &a.spec, &a.trace) {
        (Some(dir), _, _) => hvio_device::validate::run_all(dir, a.out.as_deref(), &opts, disksim)?,
        (None, Some(spec), Some(trace)) => hvio_device::validate::run_cli(
            spec,
            trace,
            a.out.as_deref(),
            a.disk.as_deref(),
            a.bench,
            &opts,
            disksim,
        )?,
        _ => anyhow::bail!("validate-disk needs SPEC and TRACE, or --all DIR"),
    };
    out!("{report}");
    Ok(())
}
