//! The host side of a run, shared by the engine ([`crate::run`]) and the
//! trace replayer ([`crate::replay`]): the host scheduler (one stream per
//! VM), the device, and what the host measures of the requests it serves
//! (seek distances, service-time parts, per-VM requests, bytes and disk
//! time, time slices). ARCHITECTURE.md's "host scheduler → device" layers.
//!
//! Its callers own the clock: [`HostSide::kick`] dispatches while the device
//! accepts and reports, through a callback, each dispatch and each time it
//! needs to be woken (the device's next event, the scheduler's timer);
//! [`HostSide::complete`] takes the device's completions, counts them and
//! returns them to be handed back up.

use crate::config::{Config, VmLayout};
use crate::error::Result;
use crate::metrics::*;
use hvio_core::*;
use hvio_sched::{Driver, Next};

/// The host scheduler of `cfg`: one stream per VM, with its weight, its
/// image's span as the region, and its scheduler attributes.
pub(crate) fn build_host_scheduler(cfg: &Config, layouts: &[VmLayout], info: &DeviceInfo) -> Result<Driver> {
    let streams: Vec<StreamInfo> = cfg
        .vms
        .iter()
        .zip(layouts)
        .enumerate()
        .map(|(i, (vc, l))| {
            let (start, len) = l.span();
            let mut s = StreamInfo::new(i as StreamId, vc.name.clone())
                .with_weight(vc.weight)
                .with_region(start, len);
            s.attrs = vc.attrs.clone();
            s
        })
        .collect();
    Ok(Driver::build(
        &cfg.host.scheduler,
        &cfg.host.params,
        SchedContext {
            streams,
            device: info.clone(),
        },
    )?)
}

/// What [`HostSide::kick`] tells its caller.
pub(crate) enum HostEvent<'a> {
    /// This request went to the device.
    Dispatched(&'a Request),
    /// Wake the host at this time: the device's next event (completion).
    Device(Nanos),
    /// Wake the host at this time: the scheduler's timer.
    Timer(Nanos),
}

/// The host's counts of one VM (stream): bytes its host path was handed
/// (guest requests and the stage's own I/O), requests served, their bytes,
/// and the device time they took.
#[derive(Clone, Copy, Default)]
pub(crate) struct StreamCounts {
    pub offered: u64,
    /// Bytes of guest requests the stage completed itself, their data moved
    /// by its own I/O (address reshaping).
    pub stage_completed: u64,
    pub requests: u64,
    pub bytes: u64,
    pub disk_time: Nanos,
}

/// The host scheduler (through its driver, which keeps its pending
/// wake-up), the device, and the host's measurements.
pub(crate) struct HostSide {
    pub driver: Driver,
    pub device: Box<dyn Device>,
    /// The device event the caller was asked to schedule (earliest first).
    device_event_at: Option<Nanos>,
    /// Requests on the device: its `in_flight`, counted here as they are
    /// submitted and completed, so that the engine's check after every
    /// event of the host is not a call through the device's trait object.
    device_in_flight: usize,
    /// The device's `can_accept`, asked again only when its answer may
    /// have changed (after a submit, after an advance: nothing else changes
    /// the device), so that a kick while the device is busy (every
    /// arrival's, on a busy host) ends before its dispatch loop.
    device_accepts: bool,
    /// Seek distances in dispatch order (blktrace's D events).
    pub seek: SeekDistribution,
    /// Seek distances in the order requests reach the host (Q events),
    /// when asked for ([`HostSide::measure_queued`]).
    pub seek_queued: Option<SeekDistribution>,
    pub requests: u64,
    pub bytes: u64,
    pub busy: Nanos,
    sum_seek: Nanos,
    sum_rotation: Nanos,
    sum_transfer: Nanos,
    pub cache_hits: u64,
    pub streams: Vec<StreamCounts>,
    /// The host scheduler's time slices, by VM and bucket.
    pub slices: SliceSeries,
}

impl HostSide {
    /// A host of `sched` on `device` for `cfg`'s VMs, whose images end by
    /// sector `image_sectors` (the seek distributions' "within image" bound).
    pub fn new(cfg: &Config, driver: Driver, device: Box<dyn Device>, image_sectors: u64) -> HostSide {
        let interval_s = cfg.output.interval_s.unwrap_or(1.0);
        HostSide {
            driver,
            device_in_flight: device.in_flight(),
            device_accepts: device.can_accept(),
            device,
            device_event_at: None,
            seek: SeekDistribution::new(image_sectors).with_locality_bound(cfg.output.locality_bound),
            seek_queued: None,
            requests: 0,
            bytes: 0,
            busy: 0,
            sum_seek: 0,
            sum_rotation: 0,
            sum_transfer: 0,
            cache_hits: 0,
            streams: vec![StreamCounts::default(); cfg.vms.len()],
            slices: SliceSeries::new((interval_s * 1e9).round() as Nanos, cfg.vms.len()),
        }
    }

    /// Also measure seek distances in the order requests reach the host,
    /// for images ending by sector `image_sectors`.
    pub fn measure_queued(&mut self, image_sectors: u64) {
        self.seek_queued = Some(SeekDistribution::new(image_sectors));
    }

    /// Request `rq` reaches the host: counted in queue order (when
    /// measured), before it is inserted or merged.
    #[inline]
    pub fn queued(&mut self, rq: &Request) {
        if let Some(q) = &mut self.seek_queued {
            q.dispatched(rq);
        }
    }

    /// A request reaches the host scheduler.
    #[inline]
    pub fn insert(&mut self, rq: Request, now: Nanos) {
        self.driver.insert(rq, now);
    }

    /// Dispatch from the host scheduler while the device accepts.
    #[inline(always)]
    pub fn kick(&mut self, now: Nanos, on: &mut impl FnMut(HostEvent)) {
        self.slices.take_from(&mut self.driver);
        if self.device_accepts {
            self.dispatch(now, on);
        }
    }

    /// [`HostSide::kick`]'s loop, once the device accepts.
    #[inline(never)]
    fn dispatch(&mut self, now: Nanos, on: &mut impl FnMut(HostEvent)) {
        while self.device_accepts {
            match self.driver.poll(now) {
                Next::Request(rq) => {
                    self.seek.dispatched(&rq);
                    on(HostEvent::Dispatched(&rq));
                    self.device.submit(rq, now);
                    self.device_in_flight += 1;
                    self.device_accepts = self.device.can_accept();
                    self.schedule_device(now, on);
                }
                Next::Wait { until, new } => {
                    debug_assert!(
                        self.driver.stats().past_waits == 0,
                        "host scheduler asked to wait for the past"
                    );
                    if new {
                        on(HostEvent::Timer(until));
                    }
                    return;
                }
                Next::Idle => return,
            }
        }
    }

    /// Requests submitted to the device and not yet completed
    /// ([`Device::in_flight`]).
    #[inline]
    pub fn device_in_flight(&self) -> usize {
        debug_assert_eq!(self.device_in_flight, self.device.in_flight());
        debug_assert_eq!(self.device_accepts, self.device.can_accept());
        self.device_in_flight
    }

    /// Ask for a wake-up at the device's next event, unless one is due
    /// earlier. A device may report an event already due: run it now.
    /// Remember the time actually asked for, so that event clears the mark.
    #[inline(always)]
    pub fn schedule_device(&mut self, now: Nanos, on: &mut impl FnMut(HostEvent)) {
        if let Some(t) = self.device.next_event() {
            let t = t.max(now);
            if self.device_event_at.is_none_or(|at| t < at) {
                self.device_event_at = Some(t);
                on(HostEvent::Device(t));
            }
        }
    }

    /// The device wake-up asked for at `t` is running (a stale, earlier one
    /// must not clear the mark, or duplicates would be scheduled).
    pub fn device_due(&mut self, t: Nanos) {
        if self.device_event_at == Some(t) {
            self.device_event_at = None;
        }
    }

    /// A scheduler timer event for `t` runs: the pending wake-up, if it is
    /// due by `t`, is cleared (a stale, earlier event clears nothing).
    pub fn timer_due(&mut self, t: Nanos) {
        self.driver.timer_due(t);
    }

    /// The scheduler's pending wake-up.
    pub fn timer_at(&self) -> Option<Nanos> {
        self.driver.wake()
    }

    /// What the device finished by `now`, appended to `done`: each is
    /// reported to the scheduler and counted.
    #[inline]
    pub fn complete(&mut self, now: Nanos, done: &mut Vec<Completion>) {
        let first = done.len();
        self.device.advance(now, done);
        self.device_in_flight -= done.len() - first;
        self.device_accepts = self.device.can_accept();
        for c in &done[first..] {
            self.driver.completed(&c.rq, c.done);
            let dt = c.done.saturating_sub(c.start);
            let s = &mut self.streams[c.rq.stream as usize];
            s.requests += 1;
            s.bytes += c.rq.bytes();
            s.disk_time += dt;
            self.requests += 1;
            self.bytes += c.rq.bytes();
            self.busy += dt;
            self.sum_seek += c.service.seek;
            self.sum_rotation += c.service.rotation;
            self.sum_transfer += c.service.transfer;
            self.cache_hits += c.service.cache_hit as u64;
        }
    }

    /// The host's table at the end of a run at `now`: `idle_pending` is the
    /// time the device sat idle while the scheduler held requests;
    /// `counters` the scheduler's and the caller's own.
    pub fn result(&mut self, now: Nanos, idle_pending: Nanos, counters: Vec<(String, f64)>) -> HostResult {
        self.seek.finish();
        let n = self.requests.max(1) as f64;
        HostResult {
            scheduler: self.driver.name().to_string(),
            requests: self.requests,
            mb: self.bytes as f64 / 1e6,
            busy_s: ns_to_s(self.busy),
            idle_pending_s: ns_to_s(idle_pending),
            utilisation: ns_to_s(self.busy) / ns_to_s(now).max(1e-9),
            seek: self.seek.clone(),
            mean_seek_ms: ns_to_ms(self.sum_seek) / n,
            mean_rotation_ms: ns_to_ms(self.sum_rotation) / n,
            mean_transfer_ms: ns_to_ms(self.sum_transfer) / n,
            cache_hits: self.cache_hits,
            counters,
            device: self.device.counters(),
        }
    }

    /// The run's time series: each VM's operations and bytes per bucket
    /// (`ops`, `bytes`), as rates (`mb_per_s` turns a bucket's bytes into
    /// MB/s), with the scheduler's slices.
    fn series(
        &mut self,
        interval: Nanos,
        names: Vec<String>,
        ops: &[&[u64]],
        bytes: &[&[u64]],
        mb_per_s: impl Fn(u64) -> f64,
    ) -> TimeSeries {
        let interval_s = ns_to_s(interval);
        self.slices.take_from(&mut self.driver);
        let buckets = self.slices.buckets(ops.iter().map(|o| o.len()));
        let col = |v: &[u64], rate: &dyn Fn(u64) -> f64| -> Vec<f64> {
            (0..buckets).map(|b| rate(*v.get(b).unwrap_or(&0))).collect()
        };
        let mut series = TimeSeries {
            interval_s,
            vms: names,
            iops: ops.iter().map(|v| col(v, &|n| n as f64 / interval_s)).collect(),
            mb_per_s: bytes.iter().map(|v| col(v, &mb_per_s)).collect(),
            slices: Vec::new(),
            slice_ms: Vec::new(),
            slice_used_ms: Vec::new(),
        };
        self.slices.fill(&mut series, buckets);
        series
    }

    /// The run's result at `now`, as the engine and the replayer both
    /// report it: a row per VM (`vms`, in stream order) with the host's
    /// counts of its stream, `jobs` as given, the total MB/s over the span
    /// from the first VM's start to the last one's end, the time series
    /// (`mb_per_s` turns a bucket's bytes into MB/s, each caller's formula
    /// kept), and the host's table with the scheduler's counters followed
    /// by `extra_counters` (no phases, switches or reshaping: the engine adds its own).
    pub fn run_result(
        &mut self,
        run: RunTotals,
        vms: &[VmTotals],
        jobs: Vec<JobResult>,
        mb_per_s: impl Fn(u64) -> f64,
        extra_counters: Vec<(String, f64)>,
    ) -> SimResult {
        let (mut first, mut last) = (Nanos::MAX, 0);
        let mut total_bytes = 0u64;
        let mut rows = Vec::with_capacity(vms.len());
        for (vm, v) in vms.iter().enumerate() {
            first = first.min(v.start);
            last = last.max(v.end);
            total_bytes += v.counts.bytes();
            rows.push(self.vm_result(vm, v));
        }
        let span = ns_to_s(last.saturating_sub(first.min(last))).max(1e-9);
        let names = vms.iter().map(|v| v.name.to_string()).collect();
        let ops: Vec<&[u64]> = vms.iter().map(|v| v.series_ops).collect();
        let bytes: Vec<&[u64]> = vms.iter().map(|v| v.series_bytes).collect();
        let series = self.series(run.interval, names, &ops, &bytes, mb_per_s);
        let mut counters = self.driver.counters();
        counters.extend(extra_counters);
        let host = self.result(run.now, run.idle_pending, counters);
        SimResult {
            seed: run.seed,
            scheduler: host.scheduler.clone(),
            sim_time_s: ns_to_s(run.now),
            truncated: run.truncated,
            events: run.events,
            max_outstanding: run.max_outstanding,
            total_mb_per_s: total_bytes as f64 / 1e6 / span,
            vms: rows,
            jobs,
            host,
            series,
            phases: Vec::new(),
            switches: Vec::new(),
            reshape: None,
            precondition: None,
        }
    }

    /// A VM's row: its application's counts over `[start, end)` and the
    /// host's counts of its stream `vm`.
    fn vm_result(&self, vm: usize, v: &VmTotals) -> VmResult {
        let dur = ns_to_s(v.end.saturating_sub(v.start)).max(1e-9);
        let s = &self.streams[vm];
        let counts = v.counts;
        VmResult {
            vm: v.name.to_string(),
            weight: v.weight,
            active_s: ns_to_s(v.end.saturating_sub(v.start)),
            reads: counts.reads,
            writes: counts.writes,
            mb: counts.bytes() as f64 / 1e6,
            iops: counts.ops() as f64 / dur,
            mb_per_s: counts.bytes() as f64 / 1e6 / dur,
            latency: counts.latency.summary(),
            host_requests: s.requests,
            host_mb: s.bytes as f64 / 1e6,
            disk_time_s: ns_to_s(s.disk_time),
            reshape: None,
        }
    }
}

/// A run's figures besides the host's and the VMs' (see
/// [`HostSide::run_result`]).
pub(crate) struct RunTotals {
    pub seed: u64,
    /// The simulated time the run ended at.
    pub now: Nanos,
    pub truncated: bool,
    pub events: u64,
    /// Requests in flight at most (the request table's size).
    pub max_outstanding: u64,
    /// The time series' bucket.
    pub interval: Nanos,
    /// The time the device sat idle while the scheduler held requests.
    pub idle_pending: Nanos,
}

/// A VM's application I/O over a run (see [`HostSide::run_result`]).
pub(crate) struct VmTotals<'a> {
    pub name: &'a str,
    pub weight: u32,
    /// When the VM's I/O started and ended.
    pub start: Nanos,
    pub end: Nanos,
    pub counts: &'a IoCount,
    /// Operations and bytes per time-series bucket.
    pub series_ops: &'a [u64],
    pub series_bytes: &'a [u64],
}
