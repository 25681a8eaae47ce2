//! The block layer's back merge (`Scheduler::back_merge`) in the host
//! schedulers that implement it: a contiguous request of the same stream,
//! direction and sync flag grows the queued one, up to `max_sectors`.

use hvio_core::{Op, Request, SchedContext, StreamInfo};
use hvio_sched::{Driver, Next};

fn ctx() -> SchedContext {
    SchedContext {
        streams: vec![StreamInfo::new(0, "vm0"), StreamInfo::new(1, "vm1")],
        device: hvio_core::DeviceInfo::test_disk(1 << 30),
    }
}

/// Dispatch until a request comes out (non-work-conserving schedulers may
/// ask to wait first).
fn next(s: &mut dyn hvio_core::Scheduler, mut now: u64) -> Request {
    let mut d = Driver::new(Box::new(s), ctx());
    for _ in 0..100 {
        match d.poll(now) {
            Next::Request(rq) => return rq,
            Next::Wait { until, .. } => now = until,
            Next::Idle => panic!("{}: nothing to dispatch", d.name()),
        }
    }
    panic!("{}: no request after 100 waits", d.name())
}

#[test]
fn contiguous_requests_grow_the_queued_one() {
    for name in ["noop", "deadline", "cfq", "anticipatory", "pregather"] {
        let mut s = hvio_sched::build(name, &Default::default(), &ctx()).unwrap();
        // Keep the device busy with one request so the next ones queue.
        s.insert(Request::new(1, 0, Op::Read, 0, 8, 0).with_sync(true), 0);
        let first = next(s.as_mut(), 0);
        assert_eq!(first.id, 1, "{name}");
        let a = Request::new(2, 0, Op::Read, 1000, 88, 10).with_sync(true);
        s.insert(a, 10);
        let queued = s.queued();
        // Contiguous, same stream, direction and sync flag: merged.
        let b = Request::new(3, 0, Op::Read, 1088, 88, 20).with_sync(true);
        assert_eq!(s.back_merge(&b, 1024, 20), Some(2), "{name}");
        assert_eq!(s.queued(), queued, "{name}: a merge adds no request");
        // Not contiguous, another direction, or too long: not merged.
        let gap = Request::new(4, 0, Op::Read, 1184, 8, 30).with_sync(true);
        assert_eq!(s.back_merge(&gap, 1024, 30), None, "{name}");
        let write = Request::new(5, 0, Op::Write, 1176, 8, 30).with_sync(true);
        assert_eq!(s.back_merge(&write, 1024, 30), None, "{name}");
        let long = Request::new(6, 0, Op::Read, 1176, 900, 30).with_sync(true);
        assert_eq!(s.back_merge(&long, 1024, 30), None, "{name}");
        let unsynced = Request::new(7, 0, Op::Read, 1176, 8, 30).with_sync(false);
        assert_eq!(s.back_merge(&unsynced, 1024, 30), None, "{name}");
        s.completed(&first, 1_000_000);
        let rq = next(s.as_mut(), 1_000_000);
        assert_eq!((rq.id, rq.sector, rq.sectors), (2, 1000, 176), "{name}");
        assert!(!s.has_work(), "{name}");
    }
}

#[test]
fn cfq_and_pregather_merge_only_within_the_stream() {
    for name in ["cfq", "pregather"] {
        let mut s = hvio_sched::build(name, &Default::default(), &ctx()).unwrap();
        s.insert(Request::new(1, 0, Op::Read, 1000, 88, 0).with_sync(true), 0);
        let other = Request::new(2, 1, Op::Read, 1088, 88, 10).with_sync(true);
        assert_eq!(s.back_merge(&other, 1024, 10), None, "{name}");
    }
}

#[test]
fn schedulers_without_merging_keep_the_default() {
    let mut s = hvio_sched::build("kyber", &Default::default(), &ctx()).unwrap();
    s.insert(Request::new(1, 0, Op::Read, 1000, 88, 0), 0);
    let b = Request::new(2, 0, Op::Read, 1088, 88, 10);
    assert_eq!(s.back_merge(&b, 1024, 10), None);
}

#[test]
fn a_merged_bio_is_not_an_arrival_for_pregather() {
    // A request ending just past Pregather's zone 0 (B = 2000 sectors), and
    // a bio in zone 1 merged onto it: the vNavigator still knows one zone
    // (Linux elevators see merged bios only through the merge hooks).
    let mut s = hvio_sched::build("pregather", &Default::default(), &ctx()).unwrap();
    s.insert(Request::new(1, 0, Op::Read, 1950, 88, 0).with_sync(true), 0);
    let zones = |s: &dyn hvio_core::Scheduler| s.counters().into_iter().find(|(k, _)| k == "zones.vm0").map(|c| c.1);
    assert_eq!(zones(s.as_ref()), Some(1.0));
    let b = Request::new(2, 0, Op::Read, 2038, 88, 10).with_sync(true);
    assert_eq!(s.back_merge(&b, 1024, 10), Some(1));
    assert_eq!(zones(s.as_ref()), Some(1.0));
    // The same bio inserted as a request is an arrival in zone 1.
    s.insert(Request::new(3, 0, Op::Read, 2126, 8, 20).with_sync(true), 20);
    assert_eq!(zones(s.as_ref()), Some(2.0));
}
