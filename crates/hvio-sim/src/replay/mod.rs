//! Trace replay: timestamped host-level requests driven straight into the host
//! scheduler and the device, for `hvio replay` (the trace readers live in
//! `hvio-trace`; this module only sees [`ReplayRequest`]s, so neither crate
//! depends on the other).
//!
//! Each request names a VM of the config and a position inside that VM's
//! image; the image map places it on the disk as in [`crate::run`] (a
//! request across an extent boundary of a fragmented image goes to the host
//! as one part per extent and completes with its last part).
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
use crate::host::{build_host_scheduler, HostSide, RunTotals, VmTotals};
use crate::metrics::*;
use hvio_core::*;
use std::collections::VecDeque;

mod trace_file;
pub use trace_file::{parse_map, replay_trace, TraceReplay};

/// One traced request, addressed inside its VM's image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplayRequest {
    /// Recorded time (any origin; only differences matter).
    pub time: Nanos,
    /// Index of the VM in the config.
    pub vm: usize,
    /// What it does.
    pub op: Op,
    /// First sector inside the VM's image (wrapped modulo the image size).
    pub sector: u64,
    /// Length in sectors.
    pub sectors: u32,
    /// Somebody waited for it.
    pub sync: bool,
    /// File-system metadata.
    pub meta: bool,
    /// Force unit access.
    pub fua: bool,
}

/// How requests are issued.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ReplayMode {
    /// At the recorded times, gaps scaled by `time_scale` (> 0).
    Open {
        /// Multiplies the recorded gaps.
        time_scale: f64,
    },
    /// `depth` outstanding requests per VM.
    Closed {
        /// Requests outstanding per VM.
        depth: u32,
    },
}

/// Per-VM look-ahead of the closed loop.
const LOOKAHEAD: usize = 4096;
const SLOT_BITS: u32 = 24;

/// The slot of request `id`.
fn slot_of(id: RequestId) -> u32 {
    (id & ((1 << SLOT_BITS) - 1)) as u32
}

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

/// A traced request in flight, or a part of one the image map split.
#[derive(Clone, Copy)]
struct Slot {
    vm: usize,
    arrival: Nanos,
    /// The traced request this is a part of (`NO_PARENT` for none).
    parent: u32,
    /// Parts still in flight, for a traced request split into several.
    parts: u32,
    op: Op,
    bytes: u64,
}

const NO_PARENT: u32 = u32::MAX;

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
    /// The image map's pieces of a request (a buffer).
    extents: Vec<Extent>,
}

impl Replayer {
    /// Traced request `r` reaches the host scheduler now, mapped through
    /// its VM's image map as the engine maps a guest request: one host
    /// request, or one part per extent when it crosses an extent boundary
    /// (it completes when its last part has).
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
            Some(0)
        } else {
            vm.layout.map.place(sector, sectors as u64, &mut self.extents)
        };
        vm.outstanding += 1;
        vm.first.get_or_insert(now);
        let host_request = |id, sector, sectors| {
            let mut rq = Request::new(id, r.vm as StreamId, r.op, sector, sectors, now)
                .with_sync(r.sync || r.op == Op::Read)
                .with_meta(r.meta);
            rq.fua = r.fua;
            rq
        };
        let traced = Slot {
            vm: r.vm,
            arrival: now,
            parent: NO_PARENT,
            parts: 0,
            op: r.op,
            bytes: sectors as u64 * SECTOR_BYTES,
        };
        let id = self.alloc(traced)?;
        if let Some(phys) = phys {
            self.host.insert(host_request(id, phys, sectors), now);
            return Ok(());
        }
        let parent = slot_of(id);
        self.slots[parent as usize].parts = self.extents.len() as u32;
        for i in 0..self.extents.len() {
            let e = self.extents[i];
            let part = Slot {
                parent,
                bytes: e.sectors * SECTOR_BYTES,
                ..traced
            };
            let id = self.alloc(part)?;
            self.host.insert(host_request(id, e.sector, e.sectors as u32), now);
        }
        Ok(())
    }

    /// A place for `slot`; returns its request's id.
    fn alloc(&mut self, slot: Slot) -> Result<RequestId> {
        let idx = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = slot;
                i
            }
            None => {
                if self.slots.len() >= 1 << SLOT_BITS {
                    return Err(SimError::Other("replay: more than 16 M requests outstanding; the disk cannot keep up with the trace (try a larger time_scale)".into()));
                }
                self.slots.push(slot);
                (self.slots.len() - 1) as u32
            }
        };
        self.seq += 1;
        Ok((self.seq << SLOT_BITS) | idx as u64)
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
            let mut idx = slot_of(c.rq.id);
            let mut s = self.slots[idx as usize];
            if s.parent != NO_PARENT {
                // A part: the traced request is done with its last part.
                self.free.push(idx);
                idx = s.parent;
                let p = &mut self.slots[idx as usize];
                p.parts -= 1;
                if p.parts > 0 {
                    continue;
                }
                s = *p;
            }
            self.free.push(idx);
            let vm = &mut self.vms[s.vm];
            vm.outstanding -= 1;
            vm.last = vm.last.max(c.done);
            if matches!(s.op, Op::Read | Op::Write) {
                vm.counts
                    .record(s.op == Op::Read, s.bytes, c.done.saturating_sub(s.arrival));
                let b = (c.done / self.interval) as usize;
                if vm.series_ops.len() <= b {
                    vm.series_ops.resize(b + 1, 0);
                    vm.series_bytes.resize(b + 1, 0);
                }
                vm.series_ops[b] += 1;
                vm.series_bytes[b] += s.bytes;
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
        crate::testing::device_for_run(&cfg.disk, &cfg.base_dir, Some(cfg.seed)).map_err(|e| cfg.locate(e))?,
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
    if crate::engine::precondition::plan(cfg)
        .map_err(|e| cfg.locate(e))?
        .is_some()
    {
        return Err(cfg.locate(SimError::invalid(
            "disk",
            "precondition.workload",
            "{ ... }",
            "the replayer has no workload to repeat in rounds: workload-dependent preconditioning runs in `hvio sim` only",
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
        extents: Vec::new(),
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
    let mut jobs = Vec::new();
    let mut vms = Vec::new();
    for v in &e.vms {
        let start = v.first.unwrap_or(0);
        let end = v.last.max(start);
        jobs.push(JobResult::from_counts(
            &v.layout.name,
            "trace",
            1,
            start,
            end,
            !truncated,
            &v.counts,
        ));
        vms.push(VmTotals {
            name: &v.layout.name,
            weight: v.weight,
            start,
            end,
            counts: &v.counts,
            series_ops: &v.series_ops,
            series_bytes: &v.series_bytes,
        });
    }
    let wrapped: u64 = e.vms.iter().map(|v| v.wrapped).sum();
    let run = RunTotals {
        seed,
        now: e.now,
        truncated,
        events: e.events,
        max_outstanding: e.slots.len() as u64,
        interval: e.interval,
        idle_pending: 0,
    };
    let interval_s = ns_to_s(e.interval);
    e.host.run_result(
        run,
        &vms,
        jobs,
        |b| b as f64 / (1e6 * interval_s),
        vec![("replay_wrapped_requests".into(), wrapped as f64)],
    )
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

    #[test]
    fn a_workload_dependent_preconditioning_is_refused_by_name() {
        let text = "[disk]\nmodel = \"ssd\"\ncapacity_gib = 1\npages_per_block = 16\nprecondition = { workload = {} }\n[[vm]]\nname = \"a\"\nimage_size = \"64MiB\"\n";
        let c = Config::from_toml_str(text, "replay-test.toml").unwrap();
        let e = replay(&c, vec![rq(0, 0, 0)], ReplayMode::Open { time_scale: 1.0 })
            .unwrap_err()
            .to_string();
        assert!(e.contains("precondition.workload") && e.contains("hvio sim"), "{e}");
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

    /// A disk that notes where each request it is given lies.
    struct Noting {
        disk: crate::testing::SimpleDisk,
        seen: std::sync::Arc<std::sync::Mutex<Vec<(u64, u64)>>>,
    }

    impl Device for Noting {
        fn info(&self) -> DeviceInfo {
            self.disk.info()
        }
        fn in_flight(&self) -> usize {
            self.disk.in_flight()
        }
        fn can_accept(&self) -> bool {
            self.disk.can_accept()
        }
        fn submit(&mut self, rq: Request, now: Nanos) {
            self.seen.lock().unwrap().push((rq.sector, rq.sectors as u64));
            self.disk.submit(rq, now)
        }
        fn next_event(&self) -> Option<Nanos> {
            self.disk.next_event()
        }
        fn advance(&mut self, now: Nanos, out: &mut Vec<Completion>) {
            self.disk.advance(now, out)
        }
        fn head(&self) -> u64 {
            self.disk.head()
        }
    }

    #[test]
    fn a_request_across_a_fragment_boundary_is_split_at_it() {
        let capacity = 2_000_000_000;
        let text = "[[vm]]\nname = \"a\"\nimage_size = \"1GiB\"\nfragments = 4\nfragment_gap = \"64MiB\"\n";
        let c = Config::from_toml_str(text, "replay-test.toml").unwrap();
        let extents = c.layout(capacity).unwrap()[0].map.extents().to_vec();
        let per = extents[0].1;
        // Two reads inside an extent (one ending at its boundary), two across one.
        let trace = vec![
            rq(0, 0, 0),
            rq(1, 0, per - 4),
            rq(2, 0, 2 * per - 8),
            rq(3, 0, 3 * per - 2),
        ];
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let disk = Noting {
            disk: crate::testing::SimpleDisk::new(capacity),
            seen: seen.clone(),
        };
        let r = replay_with_device(&c, Box::new(disk), trace, ReplayMode::Closed { depth: 1 }).unwrap();
        let seen = seen.lock().unwrap().clone();
        let (e0, e1, e3) = (extents[0].0, extents[1].0, extents[3].0);
        assert_eq!(
            seen,
            vec![
                (e0, 8),
                (e0 + per - 4, 4),
                (e1, 4),
                (e1 + per - 8, 8),
                (extents[2].0 + per - 2, 2),
                (e3, 6)
            ]
        );
        // The trace's four reads, each counted once with all its bytes.
        assert_eq!((r.vms[0].reads, r.host.requests), (4, 6));
        assert_eq!(r.vms[0].mb, r.host.mb);
        assert_eq!(r.vms[0].mb, 4.0 * 8.0 * 512.0 / 1e6);
        assert_eq!(r.jobs[0].reads, 4);
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
