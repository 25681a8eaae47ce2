//! The driver shared by the scheduler test suites (conformance, parameter
//! ranges): random arrivals from several streams against a device stub that
//! serves `depth` requests at once, each in a fixed time, with the
//! scheduler-interface invariants checked at every step.

#![allow(dead_code)]

use hvio_core::{DeviceInfo, Dispatch, Nanos, Op, Request, SchedContext, Scheduler, StreamInfo};
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

/// Drive `s` with the arrivals against the stub device; check the
/// invariants (each request dispatched exactly once, `WaitUntil` strictly
/// in the future and within `max_wait`, `queued()`/`has_work()` agree with
/// what went in and out, everything drains); return the dispatch order.
/// `changes`: `set_stream` calls (a VM's new weight or attributes, or a
/// stream not known before), each made just before arrival number `.0`.
pub fn drive_sched(
    name: &str,
    s: &mut dyn Scheduler,
    arrivals: &[Arrival],
    changes: &[(usize, StreamInfo)],
    stub: Stub,
) -> Vec<u64> {
    let mut now: Nanos = 0;
    let mut next_arrival = 0usize;
    let mut t_arrival: Nanos = arrivals.first().map(|a| a.gap_us * 1000).unwrap_or(0);
    let mut busy: Vec<(Nanos, Request)> = Vec::new();
    let mut wait_until: Option<Nanos> = None;
    let mut dispatched = Vec::new();
    let mut seen = HashSet::new();
    let mut inserted = 0usize;
    let mut steps = 0u64;
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
        if let Some(w) = wait_until {
            t = t.min(w);
        }
        if t == Nanos::MAX {
            break;
        }
        now = now.max(t);
        while let Some(i) = busy.iter().position(|b| b.0 <= now) {
            let (_, rq) = busy.remove(i);
            s.completed(&rq, now);
        }
        while next_arrival < arrivals.len() && t_arrival <= now {
            for (_, info) in changes.iter().filter(|c| c.0 == next_arrival) {
                s.set_stream(info);
            }
            let a = &arrivals[next_arrival];
            let (sector, sectors) = if a.op == Op::Flush {
                (0, 0)
            } else {
                (a.sector, a.sectors)
            };
            let rq = Request::new(next_arrival as u64, a.stream, a.op, sector, sectors, now)
                .with_sync(a.op != Op::Write || a.stream.is_multiple_of(2));
            s.insert(rq, now);
            inserted += 1;
            next_arrival += 1;
            if let Some(a) = arrivals.get(next_arrival) {
                t_arrival = now + a.gap_us * 1000;
            }
        }
        wait_until = None;
        while busy.len() < stub.depth {
            match s.dispatch(now) {
                Dispatch::Request(rq) => {
                    assert!(seen.insert(rq.id), "{name}: request {} dispatched twice", rq.id);
                    dispatched.push(rq.id);
                    busy.push((now + stub.service, rq));
                }
                Dispatch::WaitUntil(w) => {
                    assert!(w > now, "{name}: WaitUntil({w}) not in the future (now {now})");
                    assert!(w - now <= stub.max_wait, "{name}: WaitUntil {} ns ahead", w - now);
                    wait_until = Some(w);
                    break;
                }
                Dispatch::Empty => {
                    // With requests in flight a scheduler may hold the rest
                    // back (quantum, async depth, tokens) until one completes.
                    assert!(
                        !s.has_work() || !busy.is_empty(),
                        "{name}: Empty while has_work() and the device idle"
                    );
                    break;
                }
            }
        }
        assert_eq!(s.queued(), inserted - dispatched.len(), "{name}: queued() disagrees");
        assert_eq!(
            s.has_work(),
            s.queued() > 0,
            "{name}: has_work() disagrees with queued()"
        );
    }
    assert_eq!(
        dispatched.len(),
        arrivals.len(),
        "{name}: not every request was dispatched"
    );
    dispatched
}
