//! Trace replay: timestamped host-level requests driven straight into the host
//! scheduler and the device, for `hvio replay` (the trace readers live in
//! `hvio-trace`; this module only sees [`ReplayRequest`]s, so neither crate
//! depends on the other).
//!
//! Each request names a VM of the config and a position inside that VM's
//! image; the image layout maps it to physical sectors as in [`crate::run`].
//! Two ways to drive the disk:
//! - **open loop**: each request arrives at its recorded time (relative to the
//!   first), with gaps multiplied by `time_scale` (0.5 = twice as fast);
//! - **closed loop**: each VM keeps `depth` requests outstanding, issuing its
//!   next traced request when one completes (recorded times are ignored). A
//!   bounded look-ahead per VM keeps memory constant.
//!
//! The guest layer of [`crate::run`] (guest scheduler, virtio ring, journal)
//! is not simulated: a block trace already is what the host saw. A request's
//! latency is from its arrival at the host scheduler to its completion.

use crate::config::{Config, VmLayout};
use crate::error::{Result, SimError};
use crate::host::{build_host_scheduler, HostSide};
use crate::metrics::*;
use hvio_core::*;
use std::collections::VecDeque;

/// One traced request, addressed inside its VM's image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplayRequest {
    /// Recorded time (any origin; only differences matter).
    pub time: Nanos,
    /// Index of the VM in the config.
    pub vm: usize,
    pub op: Op,
    /// First sector inside the VM's image (wrapped modulo the image size).
    pub sector: u64,
    pub sectors: u32,
    pub sync: bool,
    pub meta: bool,
    pub fua: bool,
}

/// How requests are issued.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ReplayMode {
    /// At the recorded times, gaps scaled by `time_scale` (> 0).
    Open { time_scale: f64 },
    /// `depth` outstanding requests per VM.
    Closed { depth: u32 },
}

/// Per-VM look-ahead of the closed loop.
const LOOKAHEAD: usize = 4096;
const SLOT_BITS: u32 = 24;

struct VmState {
    layout: VmLayout,
    weight: u32,
    counts: IoCount,
    outstanding: u32,
    pending: VecDeque<ReplayRequest>,
    first: Option<Nanos>,
    last: Nanos,
    wrapped: u64,
    series_ops: Vec<u64>,
    series_bytes: Vec<u64>,
}

#[derive(Clone, Copy)]
struct Slot {
    vm: usize,
    arrival: Nanos,
}

struct Replayer {
    now: Nanos,
    host: HostSide,
    vms: Vec<VmState>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    seq: u64,
    interval: Nanos,
    events: u64,
    done: Vec<Completion>,
}

impl Replayer {
    fn arrive(&mut self, r: ReplayRequest) -> Result<()> {
        let now = self.now;
        let vm = &mut self.vms[r.vm];
        let image = vm.layout.image_sectors.max(1);
        let mut sector = r.sector;
        if sector >= image || sector + r.sectors as u64 > image {
            vm.wrapped += 1;
            sector %= image;
        }
        let sectors = (r.sectors as u64).min(image - sector) as u32;
        let phys = if r.op == Op::Flush {
            0
        } else {
            vm.layout.map.map_sector(sector)
        };
        vm.outstanding += 1;
        vm.first.get_or_insert(now);
        let idx = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = Slot { vm: r.vm, arrival: now };
                i
            }
            None => {
                if self.slots.len() >= 1 << SLOT_BITS {
                    return Err(SimError::Other("replay: more than 16 M requests outstanding; the disk cannot keep up with the trace (try a larger time_scale)".into()));
                }
                self.slots.push(Slot { vm: r.vm, arrival: now });
                (self.slots.len() - 1) as u32
            }
        };
        self.seq += 1;
        let id = (self.seq << SLOT_BITS) | idx as u64;
        let mut rq = Request::new(id, r.vm as StreamId, r.op, phys, sectors, now)
            .with_sync(r.sync || r.op == Op::Read)
            .with_meta(r.meta);
        rq.fua = r.fua;
        self.host.insert(rq, now);
        Ok(())
    }

    fn host_kick(&mut self) {
        self.host.kick(self.now, &mut |_| {});
    }

    /// Completes what the device finished by now; returns the VMs that got a completion.
    fn complete(&mut self, touched: &mut Vec<usize>) {
        let now = self.now;
        let mut done = std::mem::take(&mut self.done);
        self.host.complete(now, &mut done);
        for c in done.drain(..) {
            let idx = (c.rq.id & ((1 << SLOT_BITS) - 1)) as u32;
            let s = self.slots[idx as usize];
            self.free.push(idx);
            let vm = &mut self.vms[s.vm];
            let bytes = c.rq.bytes();
            vm.outstanding -= 1;
            vm.last = vm.last.max(c.done);
            if matches!(c.rq.op, Op::Read | Op::Write) {
                vm.counts
                    .record(c.rq.op == Op::Read, bytes, c.done.saturating_sub(s.arrival));
                let b = (c.done / self.interval) as usize;
                if vm.series_ops.len() <= b {
                    vm.series_ops.resize(b + 1, 0);
                    vm.series_bytes.resize(b + 1, 0);
                }
                vm.series_ops[b] += 1;
                vm.series_bytes[b] += bytes;
            }
            touched.push(s.vm);
        }
        self.done = done;
    }
}

/// Replays `trace` under `cfg` (its disk, host scheduler and VMs; the VMs'
/// jobs are ignored) on the device its `[disk]` table describes.
pub fn replay<I, E>(cfg: &Config, trace: I, mode: ReplayMode) -> Result<SimResult>
where
    I: IntoIterator<Item = std::result::Result<ReplayRequest, E>>,
    E: std::fmt::Display,
{
    replay_with_device(
        cfg,
        crate::testing::device_from_table(&cfg.disk, &cfg.base_dir).map_err(|e| cfg.locate(e))?,
        trace,
        mode,
    )
}

/// [`replay`] on a given device.
pub fn replay_with_device<I, E>(cfg: &Config, device: Box<dyn Device>, trace: I, mode: ReplayMode) -> Result<SimResult>
where
    I: IntoIterator<Item = std::result::Result<ReplayRequest, E>>,
    E: std::fmt::Display,
{
    match mode {
        ReplayMode::Open { time_scale } if !(time_scale.is_finite() && time_scale > 0.0) => {
            return Err(SimError::invalid(
                "replay",
                "time_scale",
                time_scale,
                "must be positive",
            ));
        }
        ReplayMode::Closed { depth: 0 } => {
            return Err(SimError::invalid("replay", "closed", 0, "the depth must be at least 1"))
        }
        _ => {}
    }
    if let Some(vm) = cfg.vms.iter().find(|v| v.reshape.is_some()) {
        return Err(cfg.locate(SimError::invalid(
            &format!("vm \"{}\"", vm.name),
            "reshape",
            "{ ... }",
            "the replayer sends a trace's requests straight to the host: address reshaping runs in `hvio sim` only",
        )));
    }
    let info = device.info();
    let mut jobless = cfg.clone();
    for v in &mut jobless.vms {
        v.jobs.clear();
    }
    let layouts = jobless.layout(info.capacity).map_err(|e| cfg.locate(e))?;
    let host = build_host_scheduler(cfg, &layouts, &info).map_err(|e| cfg.locate(e))?;
    let image_sectors = layouts.iter().map(|l| l.image_sectors).max().unwrap_or(0);
    let interval_s = cfg.output.interval_s.unwrap_or(1.0);
    // Checked by `Config::layout`.
    let vms: Vec<VmState> = layouts
        .into_iter()
        .zip(&cfg.vms)
        .map(|(layout, vc)| VmState {
            layout,
            weight: vc.weight,
            counts: IoCount::default(),
            outstanding: 0,
            pending: VecDeque::new(),
            first: None,
            last: 0,
            wrapped: 0,
            series_ops: Vec::new(),
            series_bytes: Vec::new(),
        })
        .collect();
    let nvm = vms.len();
    let mut e = Replayer {
        now: 0,
        host: HostSide::new(cfg, host, device, image_sectors),
        vms,
        slots: Vec::new(),
        free: Vec::new(),
        seq: 0,
        interval: (interval_s * 1e9).round() as Nanos,
        events: 0,
        done: Vec::new(),
    };
    let max_time = (cfg.max_time_s * 1e9).round() as Nanos;
    let mut src = trace.into_iter();
    let mut pull = || -> Result<Option<ReplayRequest>> {
        match src.next() {
            None => Ok(None),
            Some(Ok(r)) if r.vm < nvm => Ok(Some(r)),
            Some(Ok(r)) => Err(SimError::Other(format!(
                "replay: request for VM index {} but the config has {nvm} VMs",
                r.vm
            ))),
            Some(Err(err)) => Err(SimError::Other(err.to_string())),
        }
    };
    let mut next = pull()?;
    let t0 = next.map(|r| r.time).unwrap_or(0);
    let mut held: Option<ReplayRequest> = None;
    let mut truncated = false;
    let mut touched = Vec::new();
    let arrival_of =
        |r: &ReplayRequest, scale: f64| -> Nanos { ((r.time.saturating_sub(t0)) as f64 * scale).round() as Nanos };
    loop {
        // Closed loop: read ahead into the VMs' queues, then top each VM up.
        if let ReplayMode::Closed { depth } = mode {
            loop {
                let r = match held.take().or(next.take()) {
                    Some(r) => r,
                    None => match pull()? {
                        Some(r) => r,
                        None => break,
                    },
                };
                if e.vms[r.vm].pending.len() >= LOOKAHEAD {
                    held = Some(r);
                    break;
                }
                e.vms[r.vm].pending.push_back(r);
            }
            for v in 0..nvm {
                while e.vms[v].outstanding < depth {
                    let Some(r) = e.vms[v].pending.pop_front() else { break };
                    e.arrive(r)?;
                }
            }
            e.host_kick();
        }
        let t_arr = match mode {
            ReplayMode::Open { time_scale } => next.as_ref().map(|r| arrival_of(r, time_scale)),
            ReplayMode::Closed { .. } => None,
        };
        let t_dev = e.host.device.next_event();
        let t = [t_arr, t_dev, e.host.timer_at()].into_iter().flatten().min();
        let Some(t) = t else { break };
        if t > max_time {
            truncated = true;
            break;
        }
        e.now = e.now.max(t);
        e.events += 1;
        if t_dev.is_some_and(|d| d <= e.now) {
            touched.clear();
            e.complete(&mut touched);
        }
        e.host.timer_due(e.now);
        if let ReplayMode::Open { time_scale } = mode {
            while let Some(r) = next {
                if arrival_of(&r, time_scale) > e.now {
                    break;
                }
                e.arrive(r)?;
                next = pull()?;
            }
        }
        e.host_kick();
    }
    Ok(finish(e, truncated, cfg.seed))
}

fn finish(mut e: Replayer, truncated: bool, seed: u64) -> SimResult {
    let now = e.now;
    let (mut first, mut last) = (Nanos::MAX, 0);
    let mut total = 0u64;
    let mut vms = Vec::new();
    let mut jobs = Vec::new();
    for v in &e.vms {
        let start = v.first.unwrap_or(0);
        let end = v.last.max(start);
        first = first.min(start);
        last = last.max(end);
        total += v.counts.bytes();
        vms.push(
            e.host
                .vm_result(vms.len(), &v.layout.name, v.weight, start, end, &v.counts),
        );
        jobs.push(JobResult::from_counts(
            &v.layout.name,
            "trace",
            1,
            start,
            end,
            !truncated,
            &v.counts,
        ));
    }
    let span = ns_to_s(last.saturating_sub(first.min(last))).max(1e-9);
    let interval_s = ns_to_s(e.interval);
    let names = e.vms.iter().map(|v| v.layout.name.clone()).collect();
    let ops: Vec<&[u64]> = e.vms.iter().map(|v| &v.series_ops[..]).collect();
    let bytes: Vec<&[u64]> = e.vms.iter().map(|v| &v.series_bytes[..]).collect();
    let series = e
        .host
        .series(e.interval, names, &ops, &bytes, |b| b as f64 / (1e6 * interval_s));
    let mut counters = e.host.driver.counters();
    let wrapped: u64 = e.vms.iter().map(|v| v.wrapped).sum();
    counters.push(("replay_wrapped_requests".into(), wrapped as f64));
    let host = e.host.result(now, 0, counters);
    SimResult {
        seed,
        scheduler: host.scheduler.clone(),
        sim_time_s: ns_to_s(now),
        truncated,
        events: e.events,
        max_outstanding: e.slots.len() as u64,
        total_mb_per_s: total as f64 / 1e6 / span,
        vms,
        jobs,
        host,
        series,
        phases: Vec::new(),
        switches: Vec::new(),
        reshape: None,
    }
}

/// How a trace file is mapped onto VMs and driven: see [`replay_trace`].
#[derive(Clone, Debug)]
pub struct TraceReplay {
    /// `(device pattern, VM name)`: a pattern is a device name or a prefix ending in `*`.
    pub map: Vec<(String, String)>,
    /// Map by rule instead: device index (order of first appearance) modulo this many VMs `vm0`…
    pub vms: Option<usize>,
    /// Image size in bytes of the VMs created for the trace (default: what its devices touch).
    pub image_size: Option<u64>,
    pub mode: ReplayMode,
}

impl Default for TraceReplay {
    fn default() -> Self {
        TraceReplay {
            map: Vec::new(),
            vms: None,
            image_size: None,
            mode: ReplayMode::Open { time_scale: 1.0 },
        }
    }
}

/// Parses `DEVICE=VM,...` into a map. DEVICE is a device name as the trace
/// names it (blkparse's `maj,min` too: `8,0=db,8,16=web`) or a prefix
/// ending in `*`; neither side may be empty, nor hold `=`.
pub fn parse_map(text: &str) -> Result<Vec<(String, String)>> {
    let bad =
        |entry: &str, why: &str| SimError::Other(format!("--map {:?}: {why}", hvio_core::message::shorten(entry)));
    let mut out = Vec::new();
    let mut major: Option<&str> = None;
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    for (i, part) in parts.iter().enumerate() {
        if part.is_empty() && major.is_none() {
            continue;
        }
        // A bare number is the major of a blkparse `maj,min` device.
        if !part.contains('=')
            && !part.is_empty()
            && part.bytes().all(|b| b.is_ascii_digit())
            && major.is_none()
            && i + 1 < parts.len()
        {
            major = Some(part);
            continue;
        }
        let entry = match major.take() {
            Some(m) => format!("{m},{part}"),
            None => part.to_string(),
        };
        let Some((dev, vm)) = entry.split_once('=') else {
            return Err(bad(&entry, "is not DEVICE=VM"));
        };
        let (dev, vm) = (dev.trim(), vm.trim());
        if dev.is_empty() || dev == "*" {
            return Err(bad(
                &entry,
                "names no device (DEVICE=VM, DEVICE a name or a prefix ending in *)",
            ));
        }
        if vm.is_empty() {
            return Err(bad(&entry, "names no VM (DEVICE=VM)"));
        }
        if vm.contains('=') {
            return Err(bad(
                &entry,
                "is not DEVICE=VM (one `=` per entry, entries separated by commas)",
            ));
        }
        if dev.trim_end_matches('*').contains('*') {
            return Err(bad(&entry, "`*` may only end a device prefix"));
        }
        out.push((dev.to_string(), vm.to_string()));
    }
    Ok(out)
}

/// A map every entry of which names a traced device (or a prefix of one),
/// each device pattern once.
fn check_map(map: &[(String, String)], devices: &[String], trace: &std::path::Path) -> Result<()> {
    for (i, (dev, vm)) in map.iter().enumerate() {
        if let Some((_, first)) = map[..i].iter().find(|(d, _)| d == dev) {
            return Err(SimError::Other(format!(
                "--map {dev}={vm}: device {dev} is mapped twice (also to {first})"
            )));
        }
        if !devices.iter().any(|d| pattern_matches(dev, d)) {
            let known = devices.iter().map(String::as_str).collect::<Vec<_>>();
            let mut list = known.iter().take(8).copied().collect::<Vec<_>>().join(" ");
            if known.len() > 8 {
                list.push_str(&format!(" … ({} in all)", known.len()));
            }
            return Err(SimError::Other(format!(
                "--map {dev}={vm}: {} has no device {dev}{} (its devices: {list})",
                trace.display(),
                hvio_core::message::hint(dev, known.iter().copied())
            )));
        }
    }
    Ok(())
}

fn pattern_matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => pattern == name,
    }
}

/// Replays a trace file: a first pass finds the traced devices and the extent
/// each touches; each device is mapped to a VM (`how.map`, else `how.vms`,
/// else a VM per device named after it); VMs `cfg` lacks are added with
/// images sized to their devices' extent (or `how.image_size`); the second
/// pass streams the records (parsed on a reader thread) into [`replay`].
/// Returns the result and the number of bad records skipped.
pub fn replay_trace(
    mut cfg: Config,
    path: &std::path::Path,
    read: &hvio_trace::ReadOptions,
    how: &TraceReplay,
) -> Result<(SimResult, u64)> {
    let terr = |e: hvio_trace::TraceError| SimError::Other(e.to_string());
    let mut r = hvio_trace::TraceReader::open(path, read).map_err(terr)?;
    let mut max_end: Vec<u64> = Vec::new();
    for rec in r.by_ref() {
        let rec = rec.map_err(terr)?;
        let d = rec.device as usize;
        if max_end.len() <= d {
            max_end.resize(d + 1, 0);
        }
        max_end[d] = max_end[d].max(rec.end());
    }
    let devices = r.devices().to_vec();
    let skipped = r.skipped();
    if devices.is_empty() {
        return Err(SimError::Other(format!(
            "{}: the trace has no requests",
            path.display()
        )));
    }
    if how.vms == Some(0) {
        return Err(SimError::Other("--vms 0: must be at least 1".into()));
    }
    check_map(&how.map, &devices, path)?;
    let vm_of_dev: Vec<String> = devices
        .iter()
        .enumerate()
        .map(|(i, d)| match how.vms {
            Some(n) => format!("vm{}", i % n),
            None => how
                .map
                .iter()
                .find(|(p, _)| pattern_matches(p, d))
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| d.clone()),
        })
        .collect();
    let mut extra = String::new();
    let mut made: Vec<String> = Vec::new();
    let mut names: Vec<String> = cfg.vms.iter().map(|v| v.name.clone()).collect();
    for vm in &vm_of_dev {
        if names.contains(vm) {
            continue;
        }
        let need = vm_of_dev
            .iter()
            .zip(&max_end)
            .filter(|(v, _)| *v == vm)
            .map(|(_, e)| *e)
            .max()
            .unwrap_or(0)
            * SECTOR_BYTES;
        let size = how.image_size.unwrap_or_else(|| need.div_ceil(1 << 20).max(1) << 20);
        let quoted = serde_json::to_string(vm).map_err(|e| SimError::Other(e.to_string()))?;
        extra.push_str(&format!(
            "[[vm]]\nname = {quoted}\nimage_size = \"{size}\"\njournal_size = 0\n"
        ));
        names.push(vm.clone());
        made.push(vm.clone());
    }
    if names.len() > crate::config::limits::MAX_VMS {
        return Err(SimError::Other(format!(
            "{}: its {} devices make {} VMs, more than {}; map them onto fewer with --vms N or --map",
            path.display(),
            devices.len(),
            names.len(),
            crate::config::limits::MAX_VMS
        )));
    }
    if !extra.is_empty() {
        // VMs made for the trace: their errors are the trace's.
        let origin = path.display().to_string();
        cfg.vms.extend(Config::from_toml_str(&extra, &origin)?.vms);
    }
    let index: Vec<usize> = vm_of_dev
        .iter()
        .map(|v| names.iter().position(|n| n == v).unwrap_or(0))
        .collect();
    let reader = hvio_trace::TraceReader::open(path, read).map_err(terr)?.prefetch(4096);
    let requests = reader.map(|rec| {
        rec.map(|r| ReplayRequest {
            time: r.time,
            vm: index.get(r.device as usize).copied().unwrap_or(0),
            op: r.op,
            sector: if r.op == Op::Flush { 0 } else { r.sector },
            sectors: r.sectors,
            sync: r.flags.has(hvio_trace::RecFlags::SYNC) || r.op == Op::Read,
            meta: r.flags.has(hvio_trace::RecFlags::META),
            fua: r.flags.has(hvio_trace::RecFlags::FUA),
        })
    });
    let result = replay(&cfg, requests, how.mode).map_err(|e| image_error(e, &made, path))?;
    Ok((result, skipped))
}

/// An image that does not fit, of a VM made for the trace, said in the
/// trace's terms: the user wrote no `image_size`.
fn image_error(e: SimError, made: &[String], trace: &std::path::Path) -> SimError {
    let inner = match &e {
        SimError::In { source, .. } => source.as_ref(),
        other => other,
    };
    if let SimError::Config(hvio_core::ConfigError::InvalidValue {
        context, key, value, ..
    }) = inner
    {
        if let Some(vm) = made.iter().find(|v| *context == format!("vm {v:?}")) {
            if key == "image_size" {
                return SimError::Other(format!(
                    "{}: device {vm} needs an image of {value} bytes (its largest offset), more than the disk holds; \
                     wrap its offsets with --image-size SIZE, or give --config a larger [disk]",
                    trace.display()
                ));
            }
        }
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(sched: &str) -> Config {
        Config::from_toml_str(
            &format!("[host]\nscheduler = \"{sched}\"\n[[vm]]\nname = \"a\"\nimage_size = \"1GiB\"\n[[vm]]\nname = \"b\"\nimage_size = \"1GiB\"\n"),
            "replay-test.toml",
        )
        .unwrap()
    }

    fn rq(time: Nanos, vm: usize, sector: u64) -> std::result::Result<ReplayRequest, String> {
        Ok(ReplayRequest {
            time,
            vm,
            op: Op::Read,
            sector,
            sectors: 8,
            sync: true,
            meta: false,
            fua: false,
        })
    }

    #[test]
    fn open_loop_replays_every_request_at_its_time() {
        let trace: Vec<_> = (0..100).map(|i| rq(i * 50_000_000, (i % 2) as usize, i * 8)).collect();
        let r = replay(&cfg("noop"), trace.clone(), ReplayMode::Open { time_scale: 1.0 }).unwrap();
        assert_eq!(r.host.requests, 100);
        assert_eq!(r.vms[0].reads + r.vms[1].reads, 100);
        // Requests 50 ms apart on an idle disk: the run lasts the trace's span.
        assert!(r.sim_time_s >= 4.95 && r.sim_time_s < 5.1, "{}", r.sim_time_s);
        let fast = replay(&cfg("noop"), trace, ReplayMode::Open { time_scale: 0.1 }).unwrap();
        assert!(fast.sim_time_s < 0.6, "{}", fast.sim_time_s);
    }

    #[test]
    fn closed_loop_keeps_the_disk_busy_and_ignores_times() {
        let trace: Vec<_> = (0..200)
            .map(|i| rq(i * 1_000_000_000, (i % 2) as usize, (i * 7919 % 1000) * 1024))
            .collect();
        for sched in ["noop", "deadline"] {
            let r = replay(&cfg(sched), trace.clone(), ReplayMode::Closed { depth: 4 }).unwrap();
            assert_eq!(r.host.requests, 200, "{sched}");
            assert!(r.sim_time_s < 10.0, "{sched}: {}", r.sim_time_s);
            assert!(r.host.utilisation > 0.9, "{sched}: {}", r.host.utilisation);
        }
    }

    #[test]
    fn offsets_past_the_image_wrap_and_errors_propagate() {
        let trace = vec![rq(0, 0, u64::MAX / 2), rq(1, 1, 10)];
        let r = replay(&cfg("noop"), trace, ReplayMode::Open { time_scale: 1.0 }).unwrap();
        assert!(r
            .host
            .counters
            .iter()
            .any(|(k, v)| k == "replay_wrapped_requests" && *v == 1.0));
        let bad = vec![rq(0, 5, 0)];
        assert!(replay(&cfg("noop"), bad, ReplayMode::Open { time_scale: 1.0 }).is_err());
        let err: Vec<std::result::Result<ReplayRequest, String>> =
            vec![rq(0, 0, 0), Err("trace.csv: line 2: expected R or W".into())];
        let e = replay(&cfg("noop"), err, ReplayMode::Open { time_scale: 1.0 }).unwrap_err();
        assert!(e.to_string().contains("line 2"));
        assert!(replay(
            &cfg("noop"),
            Vec::<std::result::Result<ReplayRequest, String>>::new(),
            ReplayMode::Closed { depth: 0 }
        )
        .is_err());
    }
}
