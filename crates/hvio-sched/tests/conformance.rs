//! The conformance suite every registered scheduler must pass, today's and
//! future ones: it iterates over `hvio_sched::SCHEDULERS`, so a new scheduler
//! is tested the moment it is registered.
//!
//! Properties: every inserted request is dispatched exactly once; no dispatch
//! when empty; `WaitUntil` is always strictly in the future and finite; the
//! scheduler drains when the device keeps completing; `queued()` and
//! `has_work()` agree with what was inserted and dispatched.

mod common;

use common::{arrival, ctx, drive_sched, Arrival, Checked, Stub, SwitchAt, CAPACITY};
use hvio_core::{Dispatch, Nanos, Op, ParamValues, Request, Scheduler};
use hvio_sched::{Driver, Next, SwitchError, SwitchPolicy};
use proptest::prelude::*;

/// A wait longer than this is treated as unbounded idling.
const MAX_WAIT: Nanos = 60_000_000_000;

/// Drive `name` (default tunables) with the arrivals against a device that
/// serves one request at a time in `service` ns, switching schedulers as
/// `switches` say; check the invariants; return dispatch order.
fn drive(name: &str, arrivals: &[Arrival], service: Nanos, switches: &[SwitchAt]) -> Vec<u64> {
    let ctx = ctx(4);
    let s = Checked::boxed(hvio_sched::build(name, &ParamValues::new(), &ctx).unwrap());
    let mut d = Driver::new(s, ctx);
    let stub = Stub {
        service,
        depth: 1,
        max_wait: MAX_WAIT,
        steps_per_request: 10_000,
    };
    drive_sched(name, &mut d, arrivals, &[], switches, stub)
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

/// A scheduler that records the requests it is told of and fails if one
/// is a flush.
struct Recorder {
    inner: Box<dyn Scheduler>,
    inserted: Vec<u64>,
    dispatched: Vec<u64>,
    completed: Vec<u64>,
}

impl Recorder {
    fn boxed(inner: Box<dyn Scheduler>) -> Box<Recorder> {
        Box::new(Recorder {
            inner,
            inserted: Vec::new(),
            dispatched: Vec::new(),
            completed: Vec::new(),
        })
    }

    fn saw(&self, hook: &str, rq: &Request) {
        assert!(
            rq.op != Op::Flush,
            "{} heard of flush {} ({hook})",
            self.inner.name(),
            rq.id
        );
    }
}

impl Scheduler for Recorder {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn insert(&mut self, rq: Request, now: Nanos) {
        self.saw("insert", &rq);
        self.inserted.push(rq.id);
        self.inner.insert(rq, now)
    }
    fn dispatch(&mut self, now: Nanos) -> Dispatch {
        let d = self.inner.dispatch(now);
        if let Dispatch::Request(rq) = &d {
            self.saw("dispatch", rq);
            self.dispatched.push(rq.id);
        }
        d
    }
    fn completed(&mut self, rq: &Request, now: Nanos) {
        self.saw("completed", rq);
        self.completed.push(rq.id);
        self.inner.completed(rq, now)
    }
    fn has_work(&self) -> bool {
        self.inner.has_work()
    }
    fn queued(&self) -> usize {
        self.inner.queued()
    }
    fn back_merge(&mut self, rq: &Request, max_sectors: u32, now: Nanos) -> Option<u64> {
        self.saw("back_merge", rq);
        self.inner.back_merge(rq, max_sectors, now)
    }
}

/// A flush goes around every scheduler, as Linux's `blk_insert_flush`
/// (`block/blk-flush.c`) puts it on the dispatch list, which the block
/// layer serves before it asks the elevator: with reads and writes of
/// four streams queued and one request in flight on a depth-1 device, two
/// flushes that arrive are the next two requests dispatched, in their
/// order of arrival; then the queued requests drain. The scheduler never
/// hears of a flush (insert, dispatch, completion or merge), as no Linux
/// elevator does, and hears of every other request's insertion and
/// completion.
#[test]
fn a_flush_goes_around_every_scheduler() {
    for spec in hvio_sched::SCHEDULERS {
        let name = spec.name;
        let ctx = ctx(4);
        let mut rec = Recorder::boxed(hvio_sched::build(name, &ParamValues::new(), &ctx).unwrap());
        let mut d = Driver::new(Box::new(rec.as_mut()), ctx);
        let queued: Vec<Request> = (0..12u64)
            .map(|i| {
                let op = if i % 3 == 0 { Op::Read } else { Op::Write };
                Request::new(i, (i % 4) as u32, op, 1000 + 64 * i, 8, 0).with_sync(op == Op::Read || i % 2 == 0)
            })
            .collect();
        for rq in &queued {
            d.insert(*rq, 0);
        }
        // One request in flight (a scheduler may first wait: let it).
        let mut now = 0;
        let first = loop {
            match d.poll(now) {
                Next::Request(rq) => break rq,
                Next::Wait { until, .. } => now = until,
                Next::Idle => panic!("{name}: idle with requests queued"),
            }
        };
        let flush = |id, stream| Request::new(id, stream, Op::Flush, 0, 0, now + 1).with_sync(true);
        d.insert(flush(100, 1), now + 1);
        d.insert(flush(101, 2), now + 1);
        assert_eq!(d.queued(), 11 + 2, "{name}: queued()");
        now += 2;
        d.completed(&first, now);
        let mut order = Vec::new();
        let mut in_flight = None;
        for _ in 0..100_000 {
            if let Some(rq) = in_flight.take() {
                now += 1_000;
                d.completed(&rq, now);
            }
            match d.poll(now) {
                Next::Request(rq) => {
                    order.push(rq.id);
                    in_flight = Some(rq);
                }
                Next::Wait { until, .. } => now = until,
                Next::Idle if d.has_work() => panic!("{name}: idle with requests queued"),
                Next::Idle => break,
            }
        }
        assert_eq!(
            order.get(..2),
            Some(&[100, 101][..]),
            "{name}: dispatch order {order:?}"
        );
        assert_eq!(order.len(), 2 + 11, "{name}: not everything dispatched");
        assert_eq!(d.stats().flushes, 2, "{name}");
        drop(d);
        let mut inserted = rec.inserted.clone();
        inserted.sort_unstable();
        assert_eq!(inserted, (0..12).collect::<Vec<_>>(), "{name}: insertions heard");
        let mut completed = rec.completed.clone();
        completed.sort_unstable();
        let mut dispatched = rec.dispatched.clone();
        dispatched.sort_unstable();
        assert_eq!(completed, dispatched, "{name}: completions heard");
    }
}

/// mq-deadline's write sweep keeps its position across a flush, as in
/// Linux, where the flush never reaches `dd_dispatch_request` and so never
/// moves `latest_pos`: after the write at sector 100 and a flush, the batch
/// continues at 300, not at 50 behind it (where a flush dispatched by the
/// scheduler itself, at sector 0, would restart the sweep).
#[test]
fn mq_deadline_sweeps_on_across_a_flush() {
    let mut d = Driver::build("mq-deadline", &ParamValues::new(), ctx(2)).unwrap();
    let write = |id, sector, at| Request::new(id, 0, Op::Write, sector, 8, at);
    d.insert(write(0, 100, 0), 0);
    d.insert(write(1, 300, 0), 0);
    let next = |d: &mut Driver, now| match d.poll(now) {
        Next::Request(rq) => {
            d.completed(&rq, now + 1);
            rq.sector
        }
        other => panic!("expected a request, got {other:?}"),
    };
    assert_eq!(next(&mut d, 1), 100);
    d.insert(Request::new(2, 1, Op::Flush, 0, 0, 3).with_sync(true), 3);
    d.insert(write(3, 50, 3), 3);
    assert_eq!(next(&mut d, 4), 0, "the flush first");
    assert_eq!(next(&mut d, 6), 300, "the sweep goes on from 100");
    assert_eq!(next(&mut d, 8), 50);
}

/// A scheduler that declares it does not act on completions
/// (`Scheduler::acts_on_completions` is false; the daemon then reports
/// completions late) dispatches the same requests at the same times
/// whether it hears of each completion at once or of none: 400 reads and
/// writes of four streams, arriving every 0-300 µs, on a device of depth 2
/// that serves each in 700 µs, polled every 100 µs. A scheduler that counts
/// requests in flight or idles after a completion would fail here, so
/// declaring `false` is checked, not trusted.
#[test]
fn a_scheduler_that_ignores_completions_decides_the_same_without_them() {
    let run = |name: &str, tell: bool| -> Vec<(u64, Nanos)> {
        let ctx = ctx(4);
        let mut s = hvio_sched::build(name, &ParamValues::new(), &ctx).unwrap();
        let mut rng: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            rng = rng
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            rng >> 33
        };
        let mut arrivals = Vec::new();
        let mut t = 0;
        for id in 0..400u64 {
            t += next() % 300_000;
            let op = if next() % 3 == 0 { Op::Write } else { Op::Read };
            let sector = (next() % (CAPACITY / 8 - 16)) * 8;
            arrivals.push(Request::new(id, (next() % 4) as u32, op, sector, 8, t));
        }
        let (mut order, mut busy, mut i) = (Vec::new(), Vec::<(Nanos, Request)>::new(), 0);
        let mut now = 0;
        while order.len() < arrivals.len() {
            assert!(now < 1_000_000_000_000, "{name}: no progress");
            while i < arrivals.len() && arrivals[i].arrival <= now {
                s.insert(arrivals[i], now);
                i += 1;
            }
            busy.retain(|(done, rq)| {
                let due = *done <= now;
                if due && tell {
                    s.completed(rq, *done);
                }
                !due
            });
            while busy.len() < 2 {
                match s.dispatch(now) {
                    Dispatch::Request(rq) => {
                        order.push((rq.id, now));
                        busy.push((now + 700_000, rq));
                    }
                    _ => break,
                }
            }
            now += 100_000;
        }
        order
    };
    let mut checked = Vec::new();
    for spec in hvio_sched::SCHEDULERS {
        let s = hvio_sched::build(spec.name, &ParamValues::new(), &ctx(4)).unwrap();
        if s.acts_on_completions() {
            continue;
        }
        assert_eq!(run(spec.name, true), run(spec.name, false), "{}", spec.name);
        checked.push(spec.name);
    }
    assert!(checked.contains(&"noop"), "noop acts on no completion: {checked:?}");
}

/// A flush that arrives during a run-time switch: held with the other
/// arrivals by `freeze` (blk-mq's queue freeze holds every submitter),
/// sent ahead of the new scheduler by `migrate`, and among the bypassing
/// arrivals of `drain`; either way it is dispatched once, and no
/// scheduler hears of it.
#[test]
fn a_flush_during_a_switch_goes_around_both_schedulers() {
    for policy in SwitchPolicy::ALL {
        let ctx = ctx(2);
        let old = hvio_sched::build("cfq", &ParamValues::new(), &ctx).unwrap();
        let mut d: Driver = Driver::new(Recorder::boxed(old), ctx);
        for i in 0..4u64 {
            d.insert(Request::new(i, 0, Op::Write, 1000 + 64 * i, 8, 0), 0);
        }
        let Next::Request(first) = d.poll(0) else {
            panic!("cfq dispatches a queued write")
        };
        let new = Recorder::boxed(hvio_sched::build("noop", &ParamValues::new(), d.context()).unwrap());
        d.switch_to(new, policy, 1).unwrap();
        d.insert(Request::new(100, 1, Op::Flush, 0, 0, 2).with_sync(true), 2);
        let mut now = 3;
        let mut order = Vec::new();
        let mut in_flight = vec![first];
        for _ in 0..10_000 {
            if let Some(rq) = in_flight.pop() {
                now += 1_000_000;
                d.completed(&rq, now);
            }
            match d.poll(now) {
                Next::Request(rq) => {
                    order.push(rq.id);
                    in_flight.push(rq);
                }
                Next::Wait { until, .. } => now = until,
                Next::Idle if d.has_work() || d.switching() => now += 1_000_000,
                Next::Idle => break,
            }
        }
        assert!(!d.switching(), "{policy}: the switch finished");
        order.sort_unstable();
        let expected: Vec<u64> = [0, 1, 2, 3, 100].into_iter().filter(|&id| id != first.id).collect();
        assert_eq!(order, expected, "{policy}: each request dispatched once");
        assert_eq!(d.stats().flushes, 1, "{policy}");
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
        drive(spec.name, &arrivals, 100_000, &[]);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]
    #[test]
    fn random_streams_dispatch_each_request_once(arrivals in prop::collection::vec(arrival(), 1..300), service in 10_000u64..20_000_000) {
        for spec in hvio_sched::SCHEDULERS {
            drive(spec.name, &arrivals, service, &[]);
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
    let mut d = Driver::build(name, &ParamValues::new(), ctx(4)).unwrap();
    let service: Nanos = 1_000_000;
    let mut next_sector = CAPACITY / 2;
    let mut id = 0u64;
    let mut now: Nanos = 0;
    let mut busy: Option<(Nanos, Request)> = None;
    let mut lone_at: Option<Nanos> = None;
    let mut issue = |d: &mut Driver, now: Nanos, id: &mut u64| {
        let rq = Request::new(*id, 0, Op::Read, next_sector, 16, now);
        next_sector += 16;
        *id += 1;
        d.insert(rq, now);
    };
    for _ in 0..4 {
        issue(&mut d, 0, &mut id);
    }
    while now < 5_000_000_000 {
        if lone_at.is_none() && now >= 10_000_000 {
            d.insert(Request::new(u64::MAX, 1, Op::Read, 1024, 16, now), now);
            lone_at = Some(now);
        }
        if busy.is_none() {
            match d.poll(now) {
                Next::Request(rq) => {
                    if rq.id == u64::MAX {
                        return now - lone_at.unwrap();
                    }
                    busy = Some((now + service, rq));
                }
                Next::Wait { until, .. } => {
                    now = until;
                    continue;
                }
                Next::Idle => {}
            }
        }
        let (done, rq) = busy.take().expect("the sequential reader keeps the scheduler busy");
        now = done.max(now);
        d.completed(&rq, now);
        issue(&mut d, now, &mut id);
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

/// Switches at random moments (before arrival `at`) between random pairs
/// of registered schedulers, under every policy.
fn switches() -> impl Strategy<Value = Vec<SwitchAt>> {
    let n = hvio_sched::SCHEDULERS.len();
    prop::collection::vec(
        (
            0usize..300,
            0..n,
            prop_oneof![
                Just(SwitchPolicy::Drain),
                Just(SwitchPolicy::Freeze),
                Just(SwitchPolicy::Migrate)
            ],
        ),
        1..8,
    )
    .prop_map(|v| {
        v.into_iter()
            .map(|(at, to, policy)| SwitchAt {
                at,
                to: hvio_sched::SCHEDULERS[to].name,
                policy,
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, .. ProptestConfig::default() })]
    /// Every request is still dispatched exactly once, none is lost, none
    /// is dispatched while a switch holds it, each scheduler hears only of
    /// its own completions, and every switch finishes (see `drive_sched`).
    #[test]
    fn switches_at_random_moments_lose_nothing(
        first in 0..hvio_sched::SCHEDULERS.len(),
        arrivals in prop::collection::vec(arrival(), 1..300),
        service in 10_000u64..20_000_000,
        switches in switches(),
    ) {
        drive(hvio_sched::SCHEDULERS[first].name, &arrivals, service, &switches);
    }
}

/// A burst, then switches from every scheduler to every scheduler under
/// every policy, each in the middle of the burst.
#[test]
fn every_pair_switches_under_every_policy() {
    let arrivals: Vec<Arrival> = (0..200)
        .map(|i| Arrival {
            gap_us: if i % 50 == 0 { 20_000 } else { 100 },
            stream: (i % 4) as u32,
            sector: (i * 7919 * 8) % (CAPACITY - 64),
            sectors: 8,
            op: if i % 3 == 0 { Op::Write } else { Op::Read },
        })
        .collect();
    for from in hvio_sched::SCHEDULERS {
        for to in hvio_sched::SCHEDULERS {
            for policy in SwitchPolicy::ALL {
                let sw = [
                    SwitchAt {
                        at: 60,
                        to: to.name,
                        policy,
                    },
                    SwitchAt {
                        at: 61,
                        to: from.name,
                        policy,
                    },
                ];
                drive(from.name, &arrivals, 1_000_000, &sw);
            }
        }
    }
}

/// The legacy drain swaps on a 10 ms tick after the old requests are
/// done, bypassing arrivals meanwhile; freeze holds them; migrate hands the
/// queue over at once; a second switch during one is refused by type.
#[test]
fn each_policy_costs_what_linux_says() {
    let ctx = ctx(2);
    let setup = |policy| {
        let mut d = Driver::build("noop", &ParamValues::new(), ctx.clone()).unwrap();
        for i in 0..3 {
            d.insert(Request::new(i, 0, Op::Read, 1000 * i, 8, 0), 0);
        }
        let Next::Request(first) = d.poll(0) else {
            panic!("noop dispatches")
        };
        d.switch_by_name("deadline", &ParamValues::new(), policy, 1_000)
            .unwrap();
        let again = d.switch_by_name("cfq", &ParamValues::new(), policy, 1_000);
        assert_eq!(again, Err(SwitchError::InProgress { to: "deadline" }), "{policy}");
        d.insert(Request::new(9, 1, Op::Read, 50_000, 8, 2_000), 2_000);
        (d, first)
    };

    // drain: the two queued go out FIFO, then the bypassing one; the swap
    // waits for the tick after the last old request completes.
    let (mut d, first) = setup(SwitchPolicy::Drain);
    let mut order = Vec::new();
    d.completed(&first, 3_000);
    for t in [3_000, 4_000, 5_000] {
        let Next::Request(rq) = d.poll(t) else {
            panic!("drain dispatches the dispatch list")
        };
        order.push(rq.id);
        d.completed(&rq, t + 500);
    }
    assert_eq!(order, [1, 2, 9]);
    assert!(d.switching());
    assert_eq!(
        d.poll(6_000),
        Next::Wait {
            until: 1_000 + hvio_sched::DRAIN_POLL,
            new: true
        }
    );
    d.poll(1_000 + hvio_sched::DRAIN_POLL);
    let r = d.take_reports();
    assert_eq!(
        (r[0].from, r[0].to, r[0].handed_over, r[0].bypassed, r[0].held),
        ("noop", "deadline", 2, 1, 0)
    );
    assert_eq!(r[0].drain_time(), hvio_sched::DRAIN_POLL);

    // freeze: the old scheduler serves its queue; the arrival waits.
    let (mut d, first) = setup(SwitchPolicy::Freeze);
    d.completed(&first, 3_000);
    let mut order = Vec::new();
    for t in [3_000, 4_000] {
        let Next::Request(rq) = d.poll(t) else {
            panic!("the old scheduler serves")
        };
        order.push(rq.id);
        d.completed(&rq, t + 500);
    }
    let r = d.take_reports();
    assert_eq!(
        (r[0].handed_over, r[0].bypassed, r[0].held, r[0].swapped),
        (0, 0, 1, 4_500)
    );
    assert_eq!(d.name(), "deadline");
    let Next::Request(rq) = d.poll(5_000) else {
        panic!("the new scheduler serves")
    };
    assert_eq!((order, rq.id), (vec![1, 2], 9));

    // migrate: the new scheduler has the queue at once and starts when
    // the old request in flight completes.
    let (mut d, first) = setup(SwitchPolicy::Migrate);
    assert_eq!(d.scheduler().queued(), 0);
    assert_eq!(d.poll(2_500), Next::Idle, "the new scheduler waits for the device");
    d.completed(&first, 3_000);
    let r = d.take_reports();
    assert_eq!(
        (r[0].handed_over, r[0].bypassed, r[0].held, r[0].swapped),
        (2, 0, 0, 3_000)
    );
    assert_eq!((d.name(), d.queued()), ("deadline", 3));
}

/// A scheduler that cannot hand over its queue loses nothing: `migrate`
/// falls back to `freeze`, and `drain` lets it serve its queue.
#[test]
fn a_scheduler_without_take_queued_loses_nothing() {
    struct Plain(Box<dyn hvio_core::Scheduler>);
    impl hvio_core::Scheduler for Plain {
        fn name(&self) -> &'static str {
            "plain"
        }
        fn insert(&mut self, rq: Request, now: Nanos) {
            self.0.insert(rq, now)
        }
        fn dispatch(&mut self, now: Nanos) -> Dispatch {
            self.0.dispatch(now)
        }
        fn completed(&mut self, rq: &Request, now: Nanos) {
            self.0.completed(rq, now)
        }
        fn has_work(&self) -> bool {
            self.0.has_work()
        }
        fn queued(&self) -> usize {
            self.0.queued()
        }
    }
    for policy in SwitchPolicy::ALL {
        let ctx = ctx(2);
        let plain = Plain(hvio_sched::build("noop", &ParamValues::new(), &ctx).unwrap());
        let mut d: Driver = Driver::new(Box::new(plain), ctx);
        for i in 0..5 {
            d.insert(Request::new(i, 0, Op::Read, 100 * i, 8, 0), 0);
        }
        d.switch_by_name("deadline", &ParamValues::new(), policy, 0).unwrap();
        let mut got = Vec::new();
        let mut t = 1;
        while d.has_work() || d.switching() {
            match d.poll(t) {
                Next::Request(rq) => {
                    got.push(rq.id);
                    t += 1_000;
                    d.completed(&rq, t);
                }
                Next::Wait { until, .. } => t = until,
                Next::Idle => {
                    assert!(!d.has_work() && !d.switching(), "{policy}: idle with work at {t}");
                    break;
                }
            }
        }
        got.sort_unstable();
        assert_eq!(got, [0, 1, 2, 3, 4], "{policy}");
        let r = d.take_reports();
        let applied = if policy == SwitchPolicy::Migrate {
            SwitchPolicy::Freeze
        } else {
            policy
        };
        assert_eq!((r.len(), r[0].policy, r[0].handed_over), (1, applied, 0), "{policy}");
    }
}
