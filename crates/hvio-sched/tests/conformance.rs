//! The conformance suite every registered scheduler must pass, today's and
//! future ones: it iterates over `hvio_sched::SCHEDULERS`, so a new scheduler
//! is tested the moment it is registered.
//!
//! Properties: every inserted request is dispatched exactly once; no dispatch
//! when empty; `WaitUntil` is always strictly in the future and finite; the
//! scheduler drains when the device keeps completing; `queued()` and
//! `has_work()` agree with what was inserted and dispatched.

mod common;

use common::{arrival, ctx, drive_sched, Arrival, Stub, CAPACITY};
use hvio_core::{Dispatch, Nanos, Op, ParamValues, Request};
use proptest::prelude::*;

/// A wait longer than this is treated as unbounded idling.
const MAX_WAIT: Nanos = 60_000_000_000;

/// Drive `name` (default tunables) with the arrivals against a device that
/// serves one request at a time in `service` ns; check the invariants;
/// return dispatch order.
fn drive(name: &str, arrivals: &[Arrival], service: Nanos) -> Vec<u64> {
    let mut s = hvio_sched::build(name, &ParamValues::new(), &ctx(4)).unwrap();
    let stub = Stub {
        service,
        depth: 1,
        max_wait: MAX_WAIT,
        steps_per_request: 10_000,
    };
    drive_sched(name, s.as_mut(), arrivals, &[], stub)
}

#[test]
fn empty_scheduler_dispatches_nothing() {
    for spec in hvio_sched::SCHEDULERS {
        let mut s = hvio_sched::build(spec.name, &ParamValues::new(), &ctx(2)).unwrap();
        assert!(!s.has_work(), "{}", spec.name);
        assert_eq!(s.queued(), 0, "{}", spec.name);
        assert!(
            !matches!(s.dispatch(0), Dispatch::Request(_)),
            "{}: dispatched from empty",
            spec.name
        );
    }
}

#[test]
fn every_scheduler_has_a_documented_parameter_table() {
    for spec in hvio_sched::SCHEDULERS {
        for p in spec.params {
            assert!(!p.doc.is_empty() && !p.unit.is_empty(), "{}: {}", spec.name, p.name);
            assert!(
                p.min <= p.default && p.default <= p.max,
                "{}: {} default out of range",
                spec.name,
                p.name
            );
        }
        let mut bad = ParamValues::new();
        bad.insert("no_such_tunable".into(), 1.0);
        let err = hvio_sched::build(spec.name, &bad, &ctx(2))
            .err()
            .expect("unknown tunable must fail")
            .to_string();
        assert!(err.contains("no_such_tunable"), "{}: {err}", spec.name);
    }
}

#[test]
fn a_burst_drains_completely() {
    let arrivals: Vec<Arrival> = (0..2000)
        .map(|i| Arrival {
            gap_us: 0,
            stream: (i % 4) as u32,
            sector: (i * 7919 * 8) % (CAPACITY - 64),
            sectors: 8,
            op: if i % 3 == 0 { Op::Write } else { Op::Read },
        })
        .collect();
    for spec in hvio_sched::SCHEDULERS {
        drive(spec.name, &arrivals, 100_000);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]
    #[test]
    fn random_streams_dispatch_each_request_once(arrivals in prop::collection::vec(arrival(), 1..300), service in 10_000u64..20_000_000) {
        for spec in hvio_sched::SCHEDULERS {
            drive(spec.name, &arrivals, service);
        }
    }
}

/// What each scheduler promises about waiting: the longest a lone read,
/// far behind a stream that keeps the elevator busy with sequential reads
/// right ahead of the head, may wait (arrival to dispatch) on a device that
/// serves each request in 1 ms. A scheduler listed in neither table is
/// skipped with a note (so a new scheduler lands before its promise is
/// written down); add it to one of them.
///
/// - noop, kyber: FIFO (kyber: within the read domain), so only the 4
///   requests ahead of it.
/// - deadline / mq-deadline: `read_expire` (500 ms) plus the batch in
///   progress (`fifo_batch` = 16 requests).
/// - anticipatory: the read FIFO is checked at most once per `read_expire`
///   (125 ms), so an expired read waits at most two intervals.
/// - bfq: the in-service queue is expired after at most `timeout_sync`
///   (125 ms); the new, eligible queue (weight-raised) is served next.
/// - cfq / blkio: the other stream's queue keeps its slice (100 ms, sliced
///   within `target_latency` = 300 ms); the lone read's queue is next.
const WAIT_BOUNDS: &[(&str, Nanos, &str)] = &[
    ("noop", 10_000_000, "FIFO order"),
    ("kyber", 10_000_000, "FIFO order within the read domain"),
    (
        "htbs",
        22_000_000,
        "older start tag served after bmax (20) requests of 1 ms",
    ),
    ("deadline", 520_000_000, "read_expire + one fifo_batch"),
    (
        "pregather",
        905_000_000,
        "the served VM's slice, at most TS⁰·(100 % − 55 %)·10 = 900 ms (Eq. 8)",
    ),
    ("mq-deadline", 520_000_000, "read_expire + one fifo_batch"),
    ("ishare", 300_000_000, "the served VM's slice, at most target_latency"),
    (
        "bfq",
        150_000_000,
        "the in-service queue keeps the disk at most timeout_sync (125 ms)",
    ),
    ("cfq", 300_000_000, "one slice of each busy queue within target_latency"),
    (
        "blkio",
        300_000_000,
        "one slice of each busy group within target_latency",
    ),
    (
        "anticipatory",
        260_000_000,
        "read FIFO checked at least every read_expire: 2 x 125 ms",
    ),
];

/// Schedulers that promise nothing the wait-bound test can check, and why.
const NO_WAIT_BOUND: &[(&str, &str)] = &[];

/// Drive a sequential reader (4 outstanding) on stream 0 and, at 10 ms, one
/// read on stream 1 far below the head; return the lone read's wait.
fn lone_read_wait(name: &str) -> Nanos {
    let mut s = hvio_sched::build(name, &ParamValues::new(), &ctx(4)).unwrap();
    let service: Nanos = 1_000_000;
    let mut next_sector = CAPACITY / 2;
    let mut id = 0u64;
    let mut now: Nanos = 0;
    let mut busy: Option<(Nanos, Request)> = None;
    let mut lone_at: Option<Nanos> = None;
    let mut issue = |s: &mut Box<dyn hvio_core::Scheduler>, now: Nanos, id: &mut u64| {
        let rq = Request::new(*id, 0, Op::Read, next_sector, 16, now);
        next_sector += 16;
        *id += 1;
        s.insert(rq, now);
    };
    for _ in 0..4 {
        issue(&mut s, 0, &mut id);
    }
    while now < 5_000_000_000 {
        if lone_at.is_none() && now >= 10_000_000 {
            s.insert(Request::new(u64::MAX, 1, Op::Read, 1024, 16, now), now);
            lone_at = Some(now);
        }
        if busy.is_none() {
            match s.dispatch(now) {
                Dispatch::Request(rq) => {
                    if rq.id == u64::MAX {
                        return now - lone_at.unwrap();
                    }
                    busy = Some((now + service, rq));
                }
                Dispatch::WaitUntil(w) => {
                    now = w;
                    continue;
                }
                Dispatch::Empty => {}
            }
        }
        let (done, rq) = busy.take().expect("the sequential reader keeps the scheduler busy");
        now = done.max(now);
        s.completed(&rq, now);
        issue(&mut s, now, &mut id);
    }
    panic!("{name}: the lone read was never dispatched")
}

#[test]
fn wait_bounds_are_honoured_where_promised() {
    for spec in hvio_sched::SCHEDULERS {
        let Some(&(_, bound, why)) = WAIT_BOUNDS.iter().find(|b| b.0 == spec.name) else {
            if !NO_WAIT_BOUND.iter().any(|b| b.0 == spec.name) {
                eprintln!("{}: no wait bound listed in WAIT_BOUNDS or NO_WAIT_BOUND", spec.name);
            }
            continue;
        };
        let wait = lone_read_wait(spec.name);
        eprintln!("{}: lone read waited {} us", spec.name, wait / 1000);
        assert!(
            wait <= bound,
            "{}: lone read waited {} ms, promised ≤ {} ms ({why})",
            spec.name,
            wait / 1_000_000,
            bound / 1_000_000
        );
    }
}
