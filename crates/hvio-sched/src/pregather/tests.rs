//! Pregather's queueing and SPLA behaviour on hand-built scenarios.

use super::*;
use hvio_core::ms;
use hvio_core::{us, DeviceInfo, LinearSeek, Op, ParamValues};
use std::collections::HashSet;

/// Seek estimate of 1 ns per sector, capped at 15 ms; no rotation unless
/// `seek_adds_rotation` is asked for by a test (then 8 ms per revolution).
fn ctx(regions: &[(Sector, Sector)]) -> SchedContext {
    ctx_rev(regions, 0)
}

fn ctx_rev(regions: &[(Sector, Sector)], revolution: Nanos) -> SchedContext {
    SchedContext {
        streams: regions
            .iter()
            .enumerate()
            .map(|(i, &(s, l))| StreamInfo::new(i as u32, format!("vm{i}")).with_region(s, l))
            .collect(),
        device: DeviceInfo {
            capacity: 1 << 32,
            rotational: true,
            queue_depth: 1,
            seek: Arc::new(LinearSeek {
                ns_per_sector: 1.0,
                max: ms(15),
                revolution,
            }),
        },
    }
}

fn sched(regions: &[(Sector, Sector)], over: &[(&str, f64)]) -> Pregather {
    sched_on(&ctx(regions), over)
}

fn sched_on(c: &SchedContext, over: &[(&str, f64)]) -> Pregather {
    let o: ParamValues = over.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    let p = Params::resolve("scheduler pregather", PARAMS, &o).unwrap();
    Pregather::new(&p, c)
}

fn rd(id: u64, vm: u32, sector: Sector, at: Nanos) -> Request {
    Request::new(id, vm, Op::Read, sector, 8, at)
}

fn take(s: &mut Pregather, now: Nanos) -> Request {
    match s.dispatch(now) {
        Dispatch::Request(r) => r,
        other => panic!("expected a request at {now}, got {other:?}"),
    }
}

fn counter(s: &Pregather, name: &str) -> f64 {
    s.counters()
        .into_iter()
        .find(|(k, _)| k == name)
        .unwrap_or_else(|| panic!("no counter {name}"))
        .1
}

/// VM 0 reads sectors 0 and 8, arriving 1 ms apart; both are dispatched.
/// The second goes through the fine timer: zone 0 is the only zone (δ = 2),
/// unit [0, 2·B) with ST = 1 ms, and sector 8 is inside it.
fn warm_up(s: &mut Pregather) {
    s.insert(rd(0, 0, 0, 0), 0);
    s.insert(rd(1, 0, 8, ms(1)), ms(1));
    assert_eq!(take(s, ms(1)).id, 0);
    s.completed(&rd(0, 0, 0, 0), ms(2));
    assert_eq!(take(s, ms(2)).id, 1);
}

#[test]
fn fine_timer_waits_for_the_unit_then_gives_up() {
    let mut s = sched(&[(0, 100_000_000)], &[("zone_sectors", 1000.0)]);
    warm_up(&mut s);
    s.insert(rd(9, 0, 50_000_000, ms(2)), ms(2));
    s.completed(&rd(1, 0, 8, ms(1)), ms(3));
    // D0 = 2, D(zone 50000) = 1, δ = 1.5: the head is in unit [0, 2000) with
    // ST = 1 ms; PR (id 9) is outside it and its seek (15 ms) exceeds ST: wait.
    assert_eq!(s.dispatch(ms(3)), Dispatch::WaitUntil(ms(4) + 1));
    assert_eq!(counter(&s, "timers_fine"), 2.0);
    assert_eq!(counter(&s, "waits_started"), 1.0);
    // A request inside the unit arrives: dispatched, the wait succeeded.
    s.insert(rd(2, 0, 16, us(3500)), us(3500));
    assert_eq!(take(&mut s, us(3500)).id, 2);
    assert_eq!(counter(&s, "waits_succeeded"), 1.0);
    s.completed(&rd(2, 0, 16, us(3500)), us(4500));
    // ZT(Z0) = mean(1 ms, 0.5 ms): id 2 came 0.5 ms after id 1 completed
    // (Eq. 7 counted from the completion): wait until 4.5 + 0.75 ms.
    assert_eq!(s.dispatch(us(4500)), Dispatch::WaitUntil(us(5250) + 1));
    // Nothing came: the timer runs out and PR goes.
    assert_eq!(take(&mut s, us(5250) + 1).id, 9);
    assert_eq!(counter(&s, "waits_started"), 2.0);
    assert_eq!(counter(&s, "waits_timed_out"), 1.0);
    assert_eq!(counter(&s, "wait_success_ratio"), 0.5);
}

#[test]
fn coarse_timer_holds_the_disk_for_the_served_vm() {
    let mut s = sched(&[(0, 1_000_000), (100_000_000, 1_000_000)], &[("zone_sectors", 1000.0)]);
    warm_up(&mut s);
    s.insert(rd(5, 1, 100_000_000, ms(2)), ms(2));
    s.completed(&rd(1, 0, 8, ms(1)), ms(3));
    // VM 0 has nothing pending; AvgD = 8 sectors < image and < distance to
    // VM 1's request: coarse timer of AvgT = 1 ms. VM 1's request is 15 ms of
    // seek away, more than AvgT: wait.
    assert_eq!(counter(&s, "timers_coarse"), 1.0);
    assert_eq!(s.dispatch(ms(3)), Dispatch::WaitUntil(ms(4) + 1));
    // VM 0's next request arrives: dispatched at once.
    s.insert(rd(2, 0, 16, us(3200)), us(3200));
    assert_eq!(take(&mut s, us(3200)).id, 2);
    assert_eq!(counter(&s, "waits_succeeded"), 1.0);
    s.completed(&rd(2, 0, 16, us(3200)), ms(4));
    // id 2 came 0.2 ms after id 1 completed: AvgT = 1 ms + (0.2 ms − 1 ms)/8 = 0.9 ms.
    assert_eq!(s.dispatch(ms(4)), Dispatch::WaitUntil(us(4900) + 1));
    // Timer over, VM 0 idle: its turn ends and VM 1 is served.
    assert_eq!(take(&mut s, us(4900) + 1).id, 5);
    assert_eq!(counter(&s, "slices"), 2.0);
    assert_eq!(counter(&s, "waits_timed_out"), 1.0);
    let slices = s.take_slices();
    assert_eq!(slices.len(), 1, "VM 1's slice has not ended");
    assert_eq!((slices[0].stream, slices[0].used), (0, us(4900) + 1 - ms(1)));
    assert!(s.take_slices().is_empty(), "taken once");
}

#[test]
fn a_deep_device_queue_keeps_the_slice_until_the_vms_requests_complete() {
    // Choice 17: the device takes several requests (NCQ). VM 0 has two in
    // the device and nothing queued; VM 1's request waits, as 2.6.18 CFQ
    // keeps an active queue with requests in the driver. Algorithm 1 runs
    // when VM 0's last one completes.
    let mut c = ctx(&[(0, 1_000_000), (100_000_000, 1_000_000)]);
    c.device.queue_depth = 4;
    let mut s = sched_on(&c, &[("zone_sectors", 1000.0)]);
    warm_up(&mut s);
    s.insert(rd(2, 0, 16, us(2100)), us(2100));
    assert_eq!(take(&mut s, us(2100)).id, 2);
    s.insert(rd(5, 1, 100_000_000, us(2200)), us(2200));
    assert_eq!(
        s.dispatch(us(2200)),
        Dispatch::Empty,
        "VM 0's slice holds while its requests are in the device"
    );
    s.completed(&rd(1, 0, 8, ms(1)), ms(3));
    assert_eq!(
        counter(&s, "timers_coarse"),
        0.0,
        "VM 0 still has a request in the device"
    );
    assert_eq!(s.dispatch(ms(3)), Dispatch::Empty);
    s.completed(&rd(2, 0, 16, us(2100)), us(3200));
    assert_eq!(counter(&s, "timers_coarse"), 1.0);
    assert!(matches!(s.dispatch(us(3200)), Dispatch::WaitUntil(_)));
    assert_eq!(counter(&s, "slices"), 1.0);
}

#[test]
fn a_cheap_seek_is_taken_instead_of_waiting() {
    // VM 1's request is 1000 sectors (1 µs) away: cheaper than AvgT.
    let mut s = sched(&[(0, 1_000), (1_000, 1_000)], &[("zone_sectors", 100.0)]);
    warm_up(&mut s);
    s.insert(rd(5, 1, 1_016, ms(2)), ms(2));
    s.completed(&rd(1, 0, 8, ms(1)), ms(3));
    // AvgD = 8 < distance 1000: coarse timer armed, but the seek is cheap.
    assert_eq!(counter(&s, "timers_coarse"), 1.0);
    assert_eq!(take(&mut s, ms(3)).id, 5);
    assert_eq!(counter(&s, "waits_started"), 0.0);
}

#[test]
fn a_seek_costs_half_a_revolution_more() {
    // As above on a disk with an 8 ms revolution: 1 µs of seek + 4 ms of
    // rotation exceed AvgT = 1 ms, so Pregather waits for VM 0.
    let regions = [(0, 1_000), (1_000, 1_000)];
    let run = |rotation: f64| {
        let mut s = sched_on(
            &ctx_rev(&regions, ms(8)),
            &[("zone_sectors", 100.0), ("seek_adds_rotation", rotation)],
        );
        warm_up(&mut s);
        s.insert(rd(5, 1, 1_016, ms(2)), ms(2));
        s.completed(&rd(1, 0, 8, ms(1)), ms(3));
        s.dispatch(ms(3))
    };
    assert_eq!(run(1.0), Dispatch::WaitUntil(ms(4) + 1));
    assert!(matches!(run(0.0), Dispatch::Request(r) if r.id == 5));
}

#[test]
fn an_expired_deadline_goes_first() {
    let mut s = sched(&[(0, 1_000_000)], &[]);
    s.insert(rd(0, 0, 5000, 0), 0);
    s.insert(rd(1, 0, 0, ms(200)), ms(200));
    // Head at 0: id 1 is nearer, but id 0's 125 ms deadline has passed.
    assert_eq!(take(&mut s, ms(200)).id, 0);
    assert_eq!(counter(&s, "deadline_dispatches"), 1.0);
}

#[test]
fn the_fifo_is_checked_once_per_slice_like_cfq() {
    let run = |checks: f64| {
        let mut s = sched(&[(0, 1_000_000)], &[("fifo_checks_per_slice", checks)]);
        for (id, sector) in [(0, 9000), (1, 5000), (2, 5008)] {
            s.insert(rd(id, 0, sector, 0), 0);
        }
        let mut order = Vec::new();
        let mut now = ms(200);
        while s.has_work() {
            let r = take(&mut s, now);
            now += us(100);
            s.completed(&r, now);
            order.push(r.id);
        }
        order
    };
    // All three expired at 125 ms. CFQ's rule: one expired head (id 0 at
    // 9000), then the nearest to the head: 5008 is nearer to 9008 than 5000.
    assert_eq!(run(1.0), vec![0, 2, 1]);
    // Literal §4.3: EDF order throughout (ties by id).
    assert_eq!(run(0.0), vec![0, 1, 2]);
}

#[test]
fn vms_are_served_round_robin_by_distance_to_the_head() {
    let regions = [(0, 1_000_000), (100_000_000, 1_000_000), (50_000_000, 1_000_000)];
    let mut s = sched(&regions, &[("slice_initial", 1.0), ("si_threshold", 1.0)]);
    let mut id = 0;
    for (vm, &(start, _)) in regions.iter().enumerate() {
        for i in 0..10 {
            s.insert(rd(id, vm as u32, start + 8 * i, 0), 0);
            id += 1;
        }
    }
    let mut order = Vec::new();
    let mut now = 0;
    while s.has_work() {
        now += us(300);
        match s.dispatch(now) {
            Dispatch::Request(r) => {
                if order.last() != Some(&r.stream) {
                    order.push(r.stream);
                }
                s.completed(&r, now + us(100));
            }
            Dispatch::WaitUntil(t) => now = t - us(300),
            Dispatch::Empty => unreachable!("has work"),
        }
    }
    // Head at 0: VM 0, then the nearer VM 2 (50 M), then VM 1 (100 M); the next
    // round does not restart with VM 1, the VM just served.
    assert_eq!(&order[..4], &[0, 2, 1, 2]);
}

#[test]
fn slice_lengths_follow_eq8_and_halve_when_idle() {
    let mut s = sched(&[(0, 1_000_000)], &[]);
    assert_eq!(s.current_slice(0), Some(ms(200)));
    // A sequential VM: SI → 100 % over the dispatches: slice TS⁰·(1 − 0.55)·10 = 900 ms.
    let mut now = 0;
    for i in 0..20 {
        s.insert(rd(i, 0, 8 * i, now), now);
    }
    for _ in 0..19 {
        let r = take(&mut s, now);
        now += us(100);
        s.completed(&r, now);
    }
    assert_eq!(s.current_slice(0), Some(ms(900)));
    // The last request leaves the VM idle with slice left: halved.
    take(&mut s, now);
    assert_eq!(s.current_slice(0), Some(ms(450)));
    assert_eq!(counter(&s, "slice_ms.vm0"), 450.0);
    assert_eq!(counter(&s, "si.vm0"), 1.0);
}

#[test]
fn model_memory_follows_touched_zones_not_disk_size() {
    let mut s = sched(&[(0, 1 << 40)], &[]);
    for i in 0..10u64 {
        s.insert(rd(i, 0, i * 1_000_000_000, 0), 0);
    }
    assert_eq!(counter(&s, "zones.vm0"), 10.0);
    assert!(s.model_memory(0) < 1024, "{} bytes", s.model_memory(0));
    // Unknown streams are served with defaults.
    s.insert(rd(99, 7, 42, 0), 0);
    assert_eq!(s.queued(), 11);
}

#[test]
fn registered_and_buildable() {
    let b = crate::build("pregather", &ParamValues::new(), &ctx(&[(0, 1000)])).unwrap();
    assert_eq!(b.name(), "pregather");
    let mut bad = ParamValues::new();
    bad.insert("lambda".into(), 1.0);
    let e = crate::build("pregather", &bad, &ctx(&[(0, 1000)]))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("lambda"), "{e}");
}

#[test]
fn the_served_vm_goes_nearest_first_or_in_cfqs_elevator_order() {
    // The head ends at 10_008 after the first request; pending 9_990 (18
    // behind) and 10_030 (22 ahead). Nearest first (the default) goes back;
    // CFQ's rule makes behind cost 2 × 18 = 36 > 22, so forward.
    let order = |over: &[(&str, f64)], ahead: Sector| {
        let mut s = sched(&[(0, 1 << 30)], over);
        s.insert(rd(0, 0, 10_000, 0), 0);
        assert_eq!(take(&mut s, 0).id, 0);
        s.completed(&rd(0, 0, 10_000, 0), us(100));
        s.insert(rd(1, 0, 9_990, us(100)), us(100));
        s.insert(rd(2, 0, ahead, us(100)), us(100));
        take(&mut s, us(100)).id
    };
    assert_eq!(order(&[], 10_030), 1);
    assert_eq!(
        order(&[("back_seek_penalty", 2.0), ("back_seek_max", 16384.0)], 10_030),
        2
    );
    // A request far ahead still beats one behind by more than back_seek_max (1 KiB = 2 sectors).
    assert_eq!(order(&[("back_seek_max", 1.0), ("back_seek_penalty", 1.0)], 10_040), 2);
}

fn wr(id: u64, vm: u32, sector: Sector, at: Nanos) -> Request {
    Request::new(id, vm, Op::Write, sector, 8, at)
}

/// The head is above a run of contiguous pending writes (a guest's journal
/// commits at the start of its image) and a far read ahead. Nearest first
/// (the default) reaches the run at its top; entered there, every further
/// step is a backward seek. With `back_to_run_start` (choice 16, a probe)
/// the run is taken from its first request, as the one request a Linux
/// elevator would have merged it into, and each next step is a zero seek.
#[test]
fn a_run_behind_the_head_is_served_from_its_start() {
    let order = |over: &[(&str, f64)]| {
        let mut s = sched(&[(0, 1 << 30)], over);
        s.insert(rd(0, 0, 5_000, 0), 0);
        assert_eq!(take(&mut s, 0).id, 0);
        for (i, sector) in [1_000, 1_008, 1_016, 1_024].into_iter().enumerate() {
            s.insert(wr(1 + i as u64, 0, sector, us(10)).with_sync(true), us(10));
        }
        // A lone write just below the run's start: not part of the run.
        s.insert(wr(5, 0, 900, us(10)).with_sync(true), us(10));
        s.insert(rd(6, 0, 900_000, us(10)), us(10));
        (0..6).map(|i| take(&mut s, us(20 + i)).sector).collect::<Vec<_>>()
    };
    assert_eq!(order(&[]), vec![1_024, 1_016, 1_008, 1_000, 900, 900_000]);
    assert_eq!(
        order(&[("back_to_run_start", 1.0)]),
        vec![1_000, 1_008, 1_016, 1_024, 900, 900_000]
    );
}

/// The served VM has an async write right at the head and a sync read far
/// away; `mode` is `async_service`.
fn first_after_write_and_read(mode: f64) -> Vec<u64> {
    let mut s = sched(&[(0, 1 << 30)], &[("async_service", mode)]);
    s.insert(rd(0, 0, 1000, 0), 0);
    assert_eq!(take(&mut s, 0).id, 0);
    s.completed(&rd(0, 0, 1000, 0), us(100));
    s.insert(wr(1, 0, 1008, us(100)), us(100));
    s.insert(rd(2, 0, 900_000, us(100)), us(100));
    let served = crate::testutil::serve_serially(&mut s, us(100), Nanos::MAX, us(100));
    assert!(!s.has_work());
    served.iter().map(|(_, r)| r.id).collect()
}

#[test]
fn sync_first_serves_the_vms_reads_before_its_async_writes() {
    // §4.3 as printed: the write continues where the head is.
    assert_eq!(first_after_write_and_read(0.0), vec![1, 2]);
    // cfq_choose_req: a sync request beats an async one whatever the distance.
    assert_eq!(first_after_write_and_read(1.0), vec![2, 1]);
    // A sync write counts as sync.
    let mut s = sched(&[(0, 1 << 30)], &[("async_service", 1.0)]);
    s.insert(wr(1, 0, 500_000, 0).with_sync(true), 0);
    s.insert(wr(2, 0, 8, 0), 0);
    assert_eq!(take(&mut s, 0).id, 1);
}

#[test]
fn the_shared_async_queue_has_its_own_budgeted_slice_and_no_timers() {
    let regions = [(0, 1 << 20), (1 << 30, 1 << 20)];
    let mut s = sched(&regions, &[("async_service", 2.0), ("slice_async_rq", 3.0)]);
    // Async writes of both VMs share one queue; VM 0's read waits in VM 0's.
    for i in 0..4 {
        s.insert(wr(i, 0, 8 * i, 0), 0);
        s.insert(wr(10 + i, 1, (1 << 30) + 8 * i, 0), 0);
    }
    s.insert(rd(20, 0, 100_000, 0), 0);
    assert_eq!(counter(&s, "zones.async"), 0.0);
    let served = crate::testutil::serve_serially(&mut s, 0, Nanos::MAX, us(100));
    assert!(!s.has_work());
    let order: Vec<u64> = served.iter().map(|(_, r)| r.id).collect();
    // Head at 0: the async queue's nearest request (VM 0's write at 0) is
    // nearer than VM 0's read; its slice ends after 3 dispatches. Then VM 0's
    // read (VM 1 has nothing of its own), then the async queue again, which
    // goes nearest first from the read's end: VM 0's last write, then VM 1's,
    // three per slice.
    assert_eq!(order, vec![0, 1, 2, 20, 3, 10, 11, 12, 13]);
    // Four slices: async (0, 1, 2), VM 0 (20), async (3, 10, 11), async
    // (12, 13; still running, so not yet in the async queue's history).
    assert_eq!(counter(&s, "slices"), 4.0);
    assert_eq!(counter(&s, "slices.async"), 2.0);
    // No timer is armed after an async completion; the read armed none either
    // (VM 0 had nothing else pending and no history).
    assert_eq!(counter(&s, "timers_coarse") + counter(&s, "timers_fine"), 0.0);
    // The VMs' models still see their writes.
    assert!(counter(&s, "zones.vm1") >= 1.0);
}

#[test]
fn the_shared_async_queue_back_merges_async_writes() {
    let mut s = sched(&[(0, 1 << 20)], &[("async_service", 2.0)]);
    s.insert(wr(1, 0, 0, 0), 0);
    assert_eq!(s.back_merge(&wr(2, 0, 8, 0), 1024, 0), Some(1));
    // A read is sync: it waits in the VM's queue and merges with nothing there.
    assert_eq!(s.back_merge(&rd(3, 0, 16, 0), 1024, 0), None);
    assert_eq!(take(&mut s, 0).sectors, 16);
}

/// Every `async_service` mode dispatches each request exactly once, waits
/// only into the future, and drains: a pseudo-random mix of sync and async
/// reads, writes and flushes from three VMs on a 1 ms-per-request disk.
#[test]
fn every_async_service_mode_drains_a_random_mix() {
    for mode in [0.0, 1.0, 2.0] {
        let regions = [(0, 1 << 24), (1 << 24, 1 << 24), (1 << 25, 1 << 24)];
        let mut s = sched(&regions, &[("async_service", mode), ("slice_async_rq", 4.0)]);
        let mut x: u64 = 12345;
        let mut next = || {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            x >> 33
        };
        let (mut now, mut in_flight, mut done) = (0, None::<(Nanos, Request)>, HashSet::new());
        let mut arrivals: Vec<Request> = (0..400u64)
            .map(|id| {
                let vm = (next() % 3) as u32;
                let op = match next() % 8 {
                    0..=3 => Op::Read,
                    4..=6 => Op::Write,
                    _ => Op::Flush,
                };
                let (sector, len) = if op == Op::Flush {
                    (0, 0)
                } else {
                    (regions[vm as usize].0 + next() % 100_000 * 8, 8)
                };
                let at = id * 700 * 1000 + next() % 500_000;
                Request::new(id, vm, op, sector, len, at).with_sync(op != Op::Write || next() % 2 == 0)
            })
            .collect();
        arrivals.sort_by_key(|r| (r.arrival, r.id));
        let mut pending = arrivals.into_iter().peekable();
        let mut d = crate::driver::Driver::new(Box::new(&mut s), ctx(&regions));
        for _ in 0..1_000_000 {
            let t = [pending.peek().map(|r| r.arrival), in_flight.map(|(c, _)| c), d.wake()]
                .into_iter()
                .flatten()
                .min();
            let Some(t) = t else { break };
            now = now.max(t);
            d.timer_due(now);
            if let Some((c, rq)) = in_flight {
                if c <= now {
                    d.completed(&rq, now);
                    in_flight = None;
                }
            }
            while pending.peek().is_some_and(|r| r.arrival <= now) {
                let rq = pending.next().unwrap();
                d.insert(rq, now);
            }
            if in_flight.is_none() {
                match d.poll(now) {
                    crate::driver::Next::Request(rq) => {
                        assert!(done.insert(rq.id), "mode {mode}: {} twice", rq.id);
                        in_flight = Some((now + ms(1), rq));
                    }
                    crate::driver::Next::Wait { .. } => {
                        assert_eq!(d.stats().past_waits, 0, "mode {mode}: wait into the past");
                    }
                    crate::driver::Next::Idle => assert!(!d.has_work(), "mode {mode}"),
                }
            }
        }
        drop(d);
        assert_eq!(done.len(), 400, "mode {mode}: not drained");
        assert_eq!(s.queued(), 0);
    }
}

/// The VM table finds every VM by id, small or not (the shared async
/// queue's is `u32::MAX`), whatever order they were added in, and lists
/// them in id order.
#[test]
fn the_vm_table_finds_vms_and_lists_them_in_id_order() {
    let s = sched(&[(0, 100)], &[]);
    let mut t = VmTable::default();
    let ids = [7u32, 2, ASYNC_QUEUE, 0, 5000, 3, DIRECT_IDS, 1];
    for (n, &id) in ids.iter().enumerate() {
        let mut vm = s.vms[&0].clone();
        vm.slices = id as u64;
        t.get_or_insert_with(id, || vm);
        // Already there: not made again.
        t.get_or_insert_with(id, || panic!("VM {id} made twice"));
        for &seen in &ids[..=n] {
            assert_eq!(t.get(&seen).map(|v| v.slices), Some(seen as u64));
        }
        for unseen in [4u32, 6, 4999, ASYNC_QUEUE - 1] {
            assert!(!t.contains_key(&unseen));
        }
        let listed: Vec<StreamId> = t
            .iter()
            .map(|(&id, v)| {
                assert_eq!(v.slices, id as u64);
                id
            })
            .collect();
        let mut want = ids[..=n].to_vec();
        want.sort_unstable();
        assert_eq!(listed, want);
    }
}
