//! The driver shared by the scheduler test suites (conformance, parameter
//! ranges): random arrivals from several streams against a device stub that
//! serves `depth` requests at once, each in a fixed time, with the
//! scheduler-interface invariants checked at every step.

#![allow(dead_code)]

use hvio_core::{DeviceInfo, Dispatch, Nanos, Op, Request, SchedContext, Scheduler, SliceGrant, StreamInfo};
use hvio_sched::{Driver, Next, SwitchError, SwitchPolicy};
use proptest::prelude::*;
use std::collections::HashSet;

pub const CAPACITY: u64 = 1 << 31;

/// `streams` VMs with weights 100, 200, ... and equal regions of the test disk.
pub fn ctx(streams: u32) -> SchedContext {
    let weights: Vec<u32> = (0..streams).map(|i| 100 * (i + 1)).collect();
    ctx_with(&weights, true)
}

/// One stream per weight, equal regions, a rotational or solid-state test disk.
pub fn ctx_with(weights: &[u32], rotational: bool) -> SchedContext {
    let region = CAPACITY / weights.len().max(1) as u64;
    let mut device = DeviceInfo::test_disk(CAPACITY);
    device.rotational = rotational;
    if !rotational {
        // As the SSD model reports: no seek, no revolution.
        device.seek = std::sync::Arc::new(hvio_core::LinearSeek {
            ns_per_sector: 0.0,
            max: 0,
            revolution: 0,
        });
    }
    SchedContext {
        streams: weights
            .iter()
            .enumerate()
            .map(|(i, &w)| {
                StreamInfo::new(i as u32, format!("vm{i}"))
                    .with_weight(w)
                    .with_region(i as u64 * region, region)
            })
            .collect(),
        device,
    }
}

#[derive(Debug, Clone)]
pub struct Arrival {
    pub gap_us: u64,
    pub stream: u32,
    pub sector: u64,
    pub sectors: u32,
    pub op: Op,
}

pub fn arrival() -> impl Strategy<Value = Arrival> {
    (
        0u64..5_000,
        0u32..4,
        0u64..CAPACITY - 256,
        1u32..256,
        prop_oneof![4 => Just(Op::Read), 3 => Just(Op::Write), 1 => Just(Op::Flush)],
    )
        .prop_map(|(gap_us, stream, sector, sectors, op)| Arrival {
            gap_us,
            stream,
            sector,
            sectors,
            op,
        })
}

/// How the stub device behaves and what the driver tolerates.
#[derive(Debug, Clone, Copy)]
pub struct Stub {
    /// Service time of every request.
    pub service: Nanos,
    /// Requests the device holds at once.
    pub depth: usize,
    /// The longest `WaitUntil` ahead of now accepted (longer = unbounded idling).
    pub max_wait: Nanos,
    /// Most driver steps (arrivals, completions, wake-ups) per request: a
    /// scheduler that wakes every few nanoseconds while the disk works
    /// would make a simulation run forever.
    pub steps_per_request: u64,
}

/// A run-time switch to scheduler `to`, made just before arrival number `at`.
#[derive(Debug, Clone)]
pub struct SwitchAt {
    pub at: usize,
    pub to: &'static str,
    pub policy: SwitchPolicy,
}

/// A scheduler that checks it only hears of completions of requests it
/// dispatched (a switch must route each completion to its scheduler).
pub struct Checked {
    inner: Box<dyn Scheduler>,
    mine: HashSet<u64>,
}

impl Checked {
    pub fn boxed(inner: Box<dyn Scheduler>) -> Box<dyn Scheduler> {
        Box::new(Checked {
            inner,
            mine: HashSet::new(),
        })
    }
}

impl Checked {
    /// A scheduler that says it logs no slices has none to take (the
    /// simulator's host does not ask it).
    fn no_unannounced_slices(&mut self) {
        if !self.inner.logs_slices() {
            assert!(
                self.inner.take_slices().is_empty(),
                "{}: ended slices but logs_slices() is false",
                self.inner.name()
            );
        }
    }
}

impl Scheduler for Checked {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn insert(&mut self, rq: Request, now: Nanos) {
        self.inner.insert(rq, now)
    }
    fn dispatch(&mut self, now: Nanos) -> Dispatch {
        let d = self.inner.dispatch(now);
        if let Dispatch::Request(rq) = d {
            self.mine.insert(rq.id);
        }
        self.no_unannounced_slices();
        d
    }
    fn completed(&mut self, rq: &Request, now: Nanos) {
        assert!(
            self.mine.remove(&rq.id),
            "{}: told of the completion of request {}, which it did not dispatch",
            self.name(),
            rq.id
        );
        self.inner.completed(rq, now);
        self.no_unannounced_slices();
    }
    fn take_slices(&mut self) -> Vec<SliceGrant> {
        self.inner.take_slices()
    }
    fn logs_slices(&self) -> bool {
        self.inner.logs_slices()
    }
    fn has_work(&self) -> bool {
        self.inner.has_work()
    }
    fn queued(&self) -> usize {
        self.inner.queued()
    }
    fn set_stream(&mut self, info: &StreamInfo) {
        self.inner.set_stream(info)
    }
    fn take_queued(&mut self, now: Nanos) -> Option<Vec<Request>> {
        self.inner.take_queued(now)
    }
}

/// Drive `d` with the arrivals against the stub device; check the
/// invariants (each request dispatched exactly once, `WaitUntil` strictly
/// in the future and within `max_wait`, `queued()`/`has_work()` agree with
/// what went in and out, everything drains); return the dispatch order.
/// `changes`: `set_stream` calls (a VM's new weight or attributes, or a
/// stream not known before), each made just before arrival number `.0`.
/// `switches`: run-time switches; one asked for while another is in
/// progress must be refused. With switches, also: no request held by a
/// switch (arriving during a `freeze` or `migrate` switch, or handed to
/// the new scheduler by `migrate`) is dispatched before the swap, every
/// switch finishes, and each scheduler hears only of completions of
/// requests it dispatched.
pub fn drive_sched(
    name: &str,
    d: &mut Driver,
    arrivals: &[Arrival],
    changes: &[(usize, StreamInfo)],
    switches: &[SwitchAt],
    stub: Stub,
) -> Vec<u64> {
    let mut now: Nanos = 0;
    let mut next_arrival = 0usize;
    let mut t_arrival: Nanos = arrivals.first().map(|a| a.gap_us * 1000).unwrap_or(0);
    let mut busy: Vec<(Nanos, Request)> = Vec::new();
    let mut dispatched = Vec::new();
    let mut seen = HashSet::new();
    let mut inserted = 0usize;
    let mut steps = 0u64;
    // Requests a switch in progress holds, and those that bypass a drain.
    let mut held: HashSet<u64> = HashSet::new();
    let mut bypassing: HashSet<u64> = HashSet::new();
    let (mut started, mut refused) = (0usize, 0usize);
    let mut policy = None;
    loop {
        steps += 1;
        assert!(
            steps <= stub.steps_per_request * (arrivals.len() as u64 + 1),
            "{name}: no progress ({steps} steps for {} requests)",
            arrivals.len()
        );
        // The next event: an arrival, a completion, or a wait expiry.
        let mut t = Nanos::MAX;
        if next_arrival < arrivals.len() {
            t = t.min(t_arrival);
        }
        if let Some(c) = busy.iter().map(|b| b.0).min() {
            t = t.min(c);
        }
        if let Some(w) = d.wake() {
            t = t.min(w);
        }
        if t == Nanos::MAX {
            break;
        }
        now = now.max(t);
        d.timer_due(now);
        while let Some(i) = busy.iter().position(|b| b.0 <= now) {
            let (_, rq) = busy.remove(i);
            d.completed(&rq, now);
        }
        while next_arrival < arrivals.len() && t_arrival <= now {
            for (_, info) in changes.iter().filter(|c| c.0 == next_arrival) {
                d.set_stream(info);
            }
            for sw in switches.iter().filter(|s| s.at == next_arrival) {
                let to = hvio_sched::build(sw.to, &Default::default(), d.context()).unwrap();
                match d.switch_to(Checked::boxed(to), sw.policy, now) {
                    Ok(()) => {
                        started += 1;
                        policy = Some(sw.policy);
                        // The switch before this one has swapped: what it
                        // held went to its new scheduler.
                        held.clear();
                        // A scheduler that cannot hand its queue over
                        // (`take_queued` is `None`) still holds it: the
                        // driver falls back to freeze and it serves them.
                        let handed_over = d.scheduler().queued() == 0;
                        if d.switching() && sw.policy == SwitchPolicy::Migrate && handed_over {
                            // Everything queued went to the new scheduler
                            // (except flushes and requests bypassing an
                            // earlier drain, on the dispatch list).
                            let pending =
                                (0..inserted as u64).filter(|id| !seen.contains(id) && !bypassing.contains(id));
                            held.extend(pending);
                        }
                    }
                    Err(SwitchError::InProgress { .. }) => {
                        assert!(d.switching(), "{name}: switch refused with none in progress");
                        refused += 1;
                    }
                    Err(e) => panic!("{name}: {e}"),
                }
            }
            let a = &arrivals[next_arrival];
            let (sector, sectors) = if a.op == Op::Flush {
                (0, 0)
            } else {
                (a.sector, a.sectors)
            };
            let id = next_arrival as u64;
            let rq = Request::new(id, a.stream, a.op, sector, sectors, now)
                .with_sync(a.op != Op::Write || a.stream.is_multiple_of(2));
            // A flush goes around every scheduler (held only by a freeze);
            // during a drain, every arrival does.
            let freezing = d.switching() && policy == Some(SwitchPolicy::Freeze);
            if (a.op == Op::Flush && !freezing) || (d.switching() && policy == Some(SwitchPolicy::Drain)) {
                bypassing.insert(id);
            } else if d.switching() {
                held.insert(id);
            }
            d.insert(rq, now);
            inserted += 1;
            next_arrival += 1;
            if let Some(a) = arrivals.get(next_arrival) {
                t_arrival = now + a.gap_us * 1000;
            }
        }
        if !d.switching() {
            held.clear();
        }
        while busy.len() < stub.depth {
            match d.poll(now) {
                Next::Request(rq) => {
                    assert!(seen.insert(rq.id), "{name}: request {} dispatched twice", rq.id);
                    assert!(
                        !d.switching() || !held.contains(&rq.id),
                        "{name}: request {} dispatched while a switch held it",
                        rq.id
                    );
                    dispatched.push(rq.id);
                    busy.push((now + stub.service, rq));
                }
                Next::Wait { until, .. } => {
                    assert_eq!(
                        d.stats().past_waits,
                        0,
                        "{name}: WaitUntil not in the future (now {now})"
                    );
                    assert!(
                        until - now <= stub.max_wait,
                        "{name}: WaitUntil {} ns ahead",
                        until - now
                    );
                    break;
                }
                Next::Idle => {
                    // With requests in flight a scheduler may hold the rest
                    // back (quantum, async depth, tokens) until one completes.
                    assert!(
                        !d.has_work() || !busy.is_empty(),
                        "{name}: Empty while has_work() and the device idle"
                    );
                    break;
                }
            }
        }
        if !d.switching() {
            held.clear();
        }
        assert_eq!(d.queued(), inserted - dispatched.len(), "{name}: queued() disagrees");
        assert_eq!(
            d.has_work(),
            d.queued() > 0,
            "{name}: has_work() disagrees with queued()"
        );
        assert_eq!(d.in_flight(), busy.len(), "{name}: in_flight() disagrees");
    }
    assert_eq!(
        dispatched.len(),
        arrivals.len(),
        "{name}: not every request was dispatched"
    );
    assert!(!d.switching(), "{name}: a switch never finished");
    let reports = d.take_reports();
    assert_eq!(
        reports.len(),
        started,
        "{name}: switches started and finished differ ({refused} refused)"
    );
    if let Some(last) = reports.last() {
        assert_eq!(
            d.name(),
            last.to,
            "{name}: the last switch's scheduler is not in charge"
        );
    }
    dispatched
}
