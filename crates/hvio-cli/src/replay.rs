//! `hvio replay TRACE --scheduler X`: a block trace replayed under a host scheduler.

use crate::common::write_atomic;
use crate::trace::ReadArgs;
use anyhow::{bail, Context, Result};
use clap::Args;
use hvio_core::Op;
use hvio_sim::replay::{replay, ReplayMode, ReplayRequest};
use hvio_sim::{report, Config};
use hvio_trace::{RecFlags, TraceReader};
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
    /// Map traced devices to VMs: `DEVICE=VM,...`; DEVICE may end in `*` (prefix).
    /// Unmapped devices get a VM of their own, named after the device.
    #[arg(long)]
    map: Option<String>,
    /// Map traced devices to N VMs by rule: the device's index (order of first appearance) modulo N.
    #[arg(long, conflicts_with = "map")]
    vms: Option<usize>,
    /// Image size of VMs created for the trace (e.g. 20GiB); offsets past it wrap.
    /// Default: the largest offset the VM's devices touch, rounded up to 1 MiB.
    #[arg(long)]
    image_size: Option<String>,
    /// Open loop: multiply the recorded gaps by this (0.5 = twice as fast).
    #[arg(long, default_value_t = 1.0)]
    time_scale: f64,
    /// Closed loop instead: keep this many requests outstanding per VM.
    #[arg(long)]
    closed: Option<u32>,
    /// Where to write the JSON result.
    #[arg(long)]
    json: Option<PathBuf>,
}

fn matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => pattern == name,
    }
}

pub fn replay_cmd(a: ReplayArgs) -> Result<()> {
    let opts = a.read.options()?;
    // Pass 1: the devices and the extent each one touches.
    let mut r = TraceReader::open(&a.trace, &opts)?;
    let mut max_end: Vec<u64> = Vec::new();
    for rec in r.by_ref() {
        let rec = rec?;
        let d = rec.device as usize;
        if max_end.len() <= d {
            max_end.resize(d + 1, 0);
        }
        max_end[d] = max_end[d].max(rec.end());
    }
    let devices = r.devices().to_vec();
    if devices.is_empty() {
        bail!("{}: the trace has no requests", a.trace.display());
    }
    // Device → VM name.
    let table: Vec<(String, String)> = match &a.map {
        Some(m) => m
            .split(',')
            .filter(|p| !p.trim().is_empty())
            .map(|p| {
                p.split_once('=')
                    .map(|(d, v)| (d.trim().to_string(), v.trim().to_string()))
                    .with_context(|| format!("--map entry {p:?} is not DEVICE=VM"))
            })
            .collect::<Result<_>>()?,
        None => Vec::new(),
    };
    let vm_of_dev: Vec<String> = devices
        .iter()
        .enumerate()
        .map(|(i, d)| match a.vms {
            Some(n) if n > 0 => format!("vm{}", i % n),
            _ => table
                .iter()
                .find(|(p, _)| matches(p, d))
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| d.clone()),
        })
        .collect();
    if a.vms == Some(0) {
        bail!("--vms must be at least 1");
    }
    let mut cfg = match &a.config {
        Some(p) => Config::from_file(p)?,
        None => Config::from_toml_str("", "replay")?,
    };
    let image_size = a
        .image_size
        .as_deref()
        .map(hvio_sim::size::parse_size)
        .transpose()
        .map_err(anyhow::Error::msg)
        .context("--image-size")?;
    // VMs the config lacks are created, sized to what the trace touches.
    let mut extra = String::new();
    let mut seen: Vec<String> = cfg.vms.iter().map(|v| v.name.clone()).collect();
    for (i, vm) in vm_of_dev.iter().enumerate() {
        if seen.contains(vm) {
            continue;
        }
        let need = vm_of_dev
            .iter()
            .zip(&max_end)
            .filter(|(v, _)| *v == vm)
            .map(|(_, e)| *e)
            .max()
            .unwrap_or(0)
            * 512;
        let _ = i;
        let size = image_size.unwrap_or_else(|| need.div_ceil(1 << 20).max(1) << 20);
        extra.push_str(&format!(
            "[[vm]]\nname = {}\nimage_size = {size}\njournal_size = 0\n",
            serde_json::to_string(vm)?
        ));
        seen.push(vm.clone());
    }
    if !extra.is_empty() {
        let more = Config::from_toml_str(&extra, "replay")?;
        cfg.vms.extend(more.vms);
    }
    if let Some(s) = &a.scheduler {
        if *s != cfg.host.scheduler {
            cfg.host.params.clear();
        }
        cfg.host.scheduler = s.clone();
    }
    let index: Vec<usize> = vm_of_dev
        .iter()
        .map(|v| cfg.vms.iter().position(|c| &c.name == v).expect("every VM was added"))
        .collect();
    let mode = match a.closed {
        Some(depth) => ReplayMode::Closed { depth },
        None => ReplayMode::Open {
            time_scale: a.time_scale,
        },
    };
    // Pass 2: replay.
    let reader = TraceReader::open(&a.trace, &opts)?;
    let requests = reader.map(|rec| {
        rec.map(|r| ReplayRequest {
            time: r.time,
            vm: index.get(r.device as usize).copied().unwrap_or(0),
            op: r.op,
            sector: if r.op == Op::Flush { 0 } else { r.sector },
            sectors: r.sectors,
            sync: r.flags.has(RecFlags::SYNC) || r.op == Op::Read,
            meta: r.flags.has(RecFlags::META),
            fua: r.flags.has(RecFlags::FUA),
        })
    });
    let result = replay(&cfg, requests, mode)?;
    print!(
        "{}\n{}",
        report::vm_table(&result).render(),
        report::host_table(&result).render()
    );
    if result.truncated {
        println!("warning: the replay hit max_time_s before the trace ended");
    }
    if let Some(p) = &a.json {
        write_atomic(p, &serde_json::to_string_pretty(&result)?)?;
        println!("result: {}", p.display());
    }
    Ok(())
}
