//! `hvio replay TRACE --scheduler X`: a block trace replayed under a host scheduler.

use crate::common::{check_not_dir, out, outln, write_atomic};
use crate::trace::ReadArgs;
use anyhow::{Context, Result};
use clap::Args;
use hvio_sim::replay::{parse_map, replay_trace, ReplayMode, TraceReplay};
use hvio_sim::{report, Config};
use std::path::PathBuf;

#[derive(Args)]
pub struct ReplayArgs {
    /// The trace (any format `hvio trace stats` reads).
    trace: PathBuf,
    #[command(flatten)]
    read: ReadArgs,
    /// Host scheduler (default: the config's, else deadline).
    #[arg(long)]
    scheduler: Option<String>,
    /// A simulation config for the disk, host and VMs (its jobs are ignored).
    /// Without it, each VM gets an image after the previous one on the default disk.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Map traced devices to VMs: `DEVICE=VM,...` (repeatable); DEVICE is a name as
    /// the trace gives it (blkparse `8,0`) or a prefix ending in `*`.
    /// Unmapped devices get a VM of their own, named after the device.
    #[arg(long)]
    map: Vec<String>,
    /// Map traced devices to N VMs by rule: the device's index (order of first appearance) modulo N.
    #[arg(long, conflicts_with = "map", allow_negative_numbers = true, value_parser = crate::common::positive::<usize>)]
    vms: Option<usize>,
    /// Image size of VMs created for the trace (e.g. 20GiB); offsets past it wrap.
    /// Default: the largest offset the VM's devices touch, rounded up to 1 MiB.
    #[arg(long)]
    image_size: Option<String>,
    /// Open loop: multiply the recorded gaps by this (0.5 = twice as fast).
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true, value_parser = crate::common::positive_number)]
    time_scale: f64,
    /// Closed loop instead: keep this many requests outstanding per VM.
    #[arg(long, allow_negative_numbers = true, value_parser = crate::common::positive::<u32>)]
    closed: Option<u32>,
    /// Where to write the JSON result.
    #[arg(long)]
    json: Option<PathBuf>,
}

pub fn replay_cmd(a: ReplayArgs) -> Result<()> {
    let read = a.read.options()?;
    let mut cfg = match &a.config {
        Some(p) => Config::from_file(p)?,
        // No config: what goes wrong is the trace's (its VMs, their images).
        None => Config::from_toml_str("", &a.trace.display().to_string())?,
    };
    if let Some(s) = &a.scheduler {
        hvio_sched::spec(s).map_err(|e| anyhow::anyhow!("--scheduler: {e}"))?;
        if *s != cfg.host.scheduler {
            cfg.host.params.clear();
        }
        cfg.host.scheduler = s.clone();
    }
    let how = TraceReplay {
        map: a
            .map
            .iter()
            .map(|m| parse_map(m))
            .collect::<Result<Vec<_>, _>>()?
            .concat(),
        vms: a.vms,
        image_size: a
            .image_size
            .as_deref()
            .map(hvio_sim::size::parse_size)
            .transpose()
            .map_err(anyhow::Error::msg)
            .context("--image-size")?,
        mode: match a.closed {
            Some(depth) => ReplayMode::Closed { depth },
            None => ReplayMode::Open {
                time_scale: a.time_scale,
            },
        },
    };
    if let Some(p) = &a.json {
        check_not_dir(p)?;
    }
    let json: Vec<_> = a.json.iter().map(|p| ("--json", p.as_path())).collect();
    cfg.check_outputs(&json, &[("trace", &a.trace)])?;
    let (result, skipped) = replay_trace(cfg, &a.trace, &read, &how)?;
    out!(
        "{}\n{}",
        report::vm_table(&result).render(),
        report::host_table(&result).render()
    );
    if result.truncated {
        outln!("warning: the replay hit max_time_s before the trace ended");
    }
    if skipped > 0 {
        outln!("skipped {skipped} bad records");
    }
    if let Some(p) = &a.json {
        write_atomic(p, &serde_json::to_string_pretty(&result)?)?;
        outln!("result: {}", p.display());
    }
    Ok(())
}
