//! mq-deadline as in Linux 6.x (`block/mq-deadline.c`), with I/O priority
//! classes.
//!
//! Three priority levels (RT, BE, IDLE, from [`Request::class`]), each with
//! per direction a sector-sorted tree and a FIFO by expiry. Within a level
//! the legacy deadline algorithm runs: batches of up to `fifo_batch`
//! requests in ascending sector order starting at the first request at or
//! after the last dispatched position; between
//! batches reads are preferred unless writes were passed over
//! `writes_starved` times; a batch starts at the FIFO head when it has
//! expired (or when nothing lies ahead). Levels are served strictly in
//! order, and a lower level waits while a higher one has requests queued or
//! in flight, except that a BE or IDLE request older than
//! `prio_aging_expire` is dispatched first.
//!
//! A flush never reaches it: blk-mq sends flushes around the scheduler
//! (`blk_insert_flush`), and so does hvio's scheduler driver
//! (`crate::driver`). Linux's per-level at-head dispatch list
//! (`per_prio->dispatch`) holds requeued and at-head insertions, which hvio
//! never makes; it is left out.
//!
//! Departures (docs/schedulers.md): no merging: mq-deadline keeps
//! `Scheduler::back_merge`'s default, so it does not merge even on the
//! simulator's blktap path, where deadline, CFQ, AS and Pregather
//! back-merge (`front_merges` is kept for parity); no zoned-device write
//! locking; `async_depth` caps in-flight async and write requests at
//! dispatch instead of at tag allocation.

use super::util::{key, SortKey, SortedFifo};
use super::SchedulerSpec;
use hvio_core::{ms, Dispatch, IoClass, Nanos, Op, ParamSpec, Params, Request, SchedContext, Scheduler, Sector};

/// The registry entry of `mq-deadline`.
pub const SPEC: SchedulerSpec = SchedulerSpec {
    name: "mq-deadline",
    summary: "Linux 6.x mq-deadline: deadline batches per direction, RT/BE/IDLE priority levels with aging",
    params: PARAMS,
    stream_attrs: &[],
    build,
};

/// mq-deadline's tunables (Linux `mq-deadline.c`, sysfs names).
pub static PARAMS: &[ParamSpec] = &[
    crate::deadline::READ_EXPIRE,
    crate::deadline::WRITE_EXPIRE,
    crate::deadline::WRITES_STARVED,
    crate::deadline::FIFO_BATCH,
    crate::deadline::FRONT_MERGES,
    ParamSpec::int(
        "prio_aging_expire",
        10000.0,
        "ms",
        0.0,
        1e8,
        "a BE/IDLE request this old is served ahead of higher levels",
    ),
    ParamSpec::int(
        "async_depth",
        256.0,
        "requests",
        1.0,
        1e6,
        "most async and write requests in flight (Linux default: nr_requests)",
    ),
];

fn build(p: Params, _: &SchedContext) -> Box<dyn Scheduler> {
    Box::new(MqDeadline::new(&p))
}

const READ: usize = 0;
const WRITE: usize = 1;
const RT: usize = 0;
const BE: usize = 1;
const IDLE: usize = 2;

fn prio_of(rq: &Request) -> usize {
    match rq.class {
        IoClass::Rt => RT,
        IoClass::Be => BE,
        IoClass::Idle => IDLE,
    }
}

/// Requests the async depth limit applies to (`dd_limit_depth`): all but sync reads.
fn limited(rq: &Request) -> bool {
    !(rq.sync && rq.op == Op::Read)
}

/// One priority level (`struct dd_per_prio`).
#[derive(Debug, Default)]
struct PerPrio {
    queues: [SortedFifo; 2],
    latest_pos: [Sector; 2],
    inserted: u64,
    completed: u64,
}

impl PerPrio {
    /// `dd_queued`: inserted and not yet completed (queued or in flight).
    fn queued(&self) -> u64 {
        self.inserted - self.completed
    }
    /// `deadline_next_request`: the first request at or after the last position.
    fn next_request(&self, dir: usize) -> Option<SortKey> {
        self.queues[dir].at_or_after((self.latest_pos[dir], 0)).map(key)
    }
    fn fifo_head(&self, dir: usize) -> Option<(Nanos, SortKey)> {
        self.queues[dir].fifo_head().map(|(dl, r)| (dl, key(r)))
    }
}

/// Counters reported by [`Scheduler::counters`].
#[derive(Debug, Default, Clone, Copy)]
pub struct MqStats {
    /// Lower-priority requests dispatched because they aged past `prio_aging_expire`.
    pub aged: u64,
    /// Requests dispatched because their FIFO deadline passed.
    pub fifo_expired: u64,
    /// Batches begun.
    pub batches: u64,
}

/// The mq-deadline scheduler (Linux `mq-deadline.c`).
pub struct MqDeadline {
    expire: [Nanos; 2],
    writes_starved: u64,
    fifo_batch: u64,
    prio_aging_expire: Nanos,
    async_depth: usize,
    prios: [PerPrio; 3],
    last_dir: usize,
    batching: u64,
    starved: u64,
    async_in_flight: usize,
    queued: usize,
    /// Its counters.
    pub stats: MqStats,
}

impl MqDeadline {
    /// A scheduler with tunables `p`.
    pub fn new(p: &Params) -> Self {
        MqDeadline {
            expire: [p.nanos("read_expire"), p.nanos("write_expire")],
            writes_starved: p.u64("writes_starved"),
            fifo_batch: p.u64("fifo_batch"),
            prio_aging_expire: p.nanos("prio_aging_expire"),
            async_depth: p.u64("async_depth") as usize,
            prios: Default::default(),
            // `dd_init_sched`: the first dispatch continues a write "batch"
            // when a write is queued.
            last_dir: WRITE,
            batching: 0,
            starved: 0,
            async_in_flight: 0,
            queued: 0,
            stats: MqStats::default(),
        }
    }

    /// `__dd_dispatch_request` for level `prio`: the deadline algorithm, but
    /// only a request that arrived at or before `latest_start` may go.
    fn dispatch_prio(&mut self, prio: usize, latest_start: Nanos, now: Nanos) -> Option<Request> {
        let pp = &mut self.prios[prio];
        // A level with nothing queued has nothing to pick (and no state to
        // change); in the usual run two of the three are empty.
        if pp.queues[READ].is_empty() && pp.queues[WRITE].is_empty() {
            return None;
        }
        // Continue the batch in the last direction.
        let mut pick = (self.batching < self.fifo_batch)
            .then(|| pp.next_request(self.last_dir))
            .flatten()
            .map(|k| (self.last_dir, k));
        if pick.is_none() {
            let reads = !pp.queues[READ].is_empty();
            let writes = !pp.queues[WRITE].is_empty();
            let dir = if reads
                && !(writes && {
                    let s = self.starved;
                    self.starved += 1;
                    s >= self.writes_starved
                }) {
                READ
            } else if writes {
                self.starved = 0;
                WRITE
            } else {
                return None;
            };
            let (dl, head) = pp.fifo_head(dir).expect("direction has requests");
            // An expired FIFO head, or nothing ahead of the last position:
            // start from the FIFO head; else continue the sweep. The sweep's
            // next request is looked up only when the head has not expired
            // (in a big queue the lookup is a search of the index).
            let k = if dl <= now {
                self.stats.fifo_expired += 1;
                head
            } else {
                pp.next_request(dir).unwrap_or(head)
            };
            self.last_dir = dir;
            self.batching = 0;
            self.stats.batches += 1;
            pick = Some((dir, k));
        }
        let (dir, k) = pick.expect("picked above");
        let depth_full = self.async_in_flight >= self.async_depth;
        let may_go = |rq: &Request| rq.arrival <= latest_start && !(limited(rq) && depth_full);
        let rq = self.prios[prio].queues[dir].remove_if(k, may_go)?;
        self.batching += 1;
        Some(self.done(prio, rq))
    }

    fn done(&mut self, prio: usize, rq: Request) -> Request {
        self.prios[prio].latest_pos[rq.op.dir()] = rq.sector;
        if limited(&rq) {
            self.async_in_flight += 1;
        }
        self.queued -= 1;
        rq
    }
}

impl Scheduler for MqDeadline {
    fn name(&self) -> &'static str {
        "mq-deadline"
    }

    fn insert(&mut self, rq: Request, now: Nanos) {
        let prio = prio_of(&rq);
        let pp = &mut self.prios[prio];
        pp.inserted += 1;
        self.queued += 1;
        let dir = rq.op.dir();
        pp.queues[dir].insert(rq, now + self.expire[dir]);
    }

    /// `dd_dispatch_request`.
    fn dispatch(&mut self, now: Nanos) -> Dispatch {
        if self.queued == 0 {
            return Dispatch::Empty;
        }
        // Aged BE and IDLE requests first (`dd_dispatch_prio_aged_requests`),
        // only while two levels or more have requests queued or in flight:
        // with one, there is nothing for it to age past, and Linux does not
        // try. The try is not free of effects: `__dd_dispatch_request`
        // chooses a direction and starts a batch before it refuses a request
        // younger than the aging limit, and that batch would then be
        // continued instead of the choice made afresh.
        let levels_queued = || self.prios.iter().filter(|pp| pp.queued() > 0).count();
        if let Some(latest) = now.checked_sub(self.prio_aging_expire).filter(|_| levels_queued() >= 2) {
            for prio in [BE, IDLE] {
                if self.prios[prio].queued() == 0 {
                    continue;
                }
                if let Some(rq) = self.dispatch_prio(prio, latest, now) {
                    self.stats.aged += 1;
                    return Dispatch::Request(rq);
                }
            }
        }
        // Then levels in order; a lower level waits while a higher one has
        // requests queued or in flight.
        for prio in [RT, BE, IDLE] {
            if let Some(rq) = self.dispatch_prio(prio, now, now) {
                return Dispatch::Request(rq);
            }
            if self.prios[prio].queued() > 0 {
                break;
            }
        }
        // Requests are queued behind in-flight ones of a higher level or the
        // async depth: a completion will call us again. The fallback wake-up
        // is at least 1 ms away (read_expire may be 0: polling every 1 ns
        // until the completion would stall the simulation).
        Dispatch::WaitUntil(now + self.expire[READ].max(ms(1)))
    }

    fn completed(&mut self, rq: &Request, _now: Nanos) {
        let pp = &mut self.prios[prio_of(rq)];
        if pp.completed < pp.inserted {
            pp.completed += 1;
        }
        if limited(rq) {
            self.async_in_flight = self.async_in_flight.saturating_sub(1);
        }
    }

    fn has_work(&self) -> bool {
        self.queued > 0
    }

    fn queued(&self) -> usize {
        self.queued
    }

    fn take_queued(&mut self, _now: Nanos) -> Option<Vec<Request>> {
        let mut all = Vec::with_capacity(self.queued);
        for pp in &mut self.prios {
            let before = all.len();
            for q in &mut pp.queues {
                all.extend(q.take_all());
            }
            // What is left of `dd_queued` is in flight.
            pp.inserted -= (all.len() - before) as u64;
        }
        self.queued = 0;
        Some(all)
    }

    fn counters(&self) -> Vec<(String, f64)> {
        vec![
            ("aged".into(), self.stats.aged as f64),
            ("fifo_expired".into(), self.stats.fifo_expired as f64),
            ("batches".into(), self.stats.batches as f64),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hvio_core::{ms, s, DeviceInfo};

    fn sched(over: &[(&str, f64)]) -> Box<dyn Scheduler> {
        crate::testutil::build("mq-deadline", &[], over, DeviceInfo::test_disk(1 << 30))
    }

    fn rq(id: u64, op: Op, sector: Sector, class: IoClass, now: Nanos) -> Request {
        let mut r = Request::new(id, 0, op, sector, 8, now);
        r.class = class;
        r
    }

    fn take(s: &mut dyn Scheduler, now: Nanos) -> Request {
        match s.dispatch(now) {
            Dispatch::Request(r) => r,
            other => panic!("expected a request, got {other:?}"),
        }
    }

    /// 6.x continues from the first request at or after the last dispatched
    /// position (initially sector 0), so a burst goes out in sector order
    /// (the legacy deadline starts this burst at its FIFO head instead).
    #[test]
    fn batches_sweep_from_the_last_position() {
        let mut s = sched(&[]);
        for (i, sec) in [500u64, 100, 300, 200, 400].iter().enumerate() {
            s.insert(rq(i as u64, Op::Read, *sec, IoClass::Be, 0), 0);
        }
        let order: Vec<u64> = (0..5).map(|_| take(s.as_mut(), 1).sector).collect();
        assert_eq!(order, vec![100, 200, 300, 400, 500]);
        assert_eq!(s.dispatch(1), Dispatch::Empty);
    }

    /// RT goes first; BE waits while RT has requests queued or in flight;
    /// IDLE waits for BE.
    #[test]
    fn priority_levels_are_strict() {
        let mut s = sched(&[]);
        s.insert(rq(0, Op::Read, 100, IoClass::Idle, 0), 0);
        s.insert(rq(1, Op::Read, 200, IoClass::Be, 0), 0);
        s.insert(rq(2, Op::Read, 300, IoClass::Rt, 0), 0);
        let a = take(s.as_mut(), 1);
        assert_eq!(a.class, IoClass::Rt);
        // The RT request is in flight: BE must wait.
        assert!(matches!(s.dispatch(1), Dispatch::WaitUntil(_)));
        s.completed(&a, 2);
        let b = take(s.as_mut(), 2);
        assert_eq!(b.class, IoClass::Be);
        assert!(matches!(s.dispatch(2), Dispatch::WaitUntil(_)));
        s.completed(&b, 3);
        assert_eq!(take(s.as_mut(), 3).class, IoClass::Idle);
    }

    /// Writes held back by `async_depth` with `read_expire` = 0 (both in
    /// their Linux ranges) wait for the completion with a wake-up at least
    /// 1 ms away, not a 1 ns poll that livelocked the driver.
    #[test]
    fn async_depth_wait_with_zero_read_expire_is_not_a_poll() {
        let mut s = sched(&[("read_expire", 0.0), ("async_depth", 1.0)]);
        s.insert(rq(0, Op::Write, 100, IoClass::Be, 0), 0);
        s.insert(rq(1, Op::Write, 200, IoClass::Be, 0), 0);
        let a = take(s.as_mut(), 1);
        let Dispatch::WaitUntil(w) = s.dispatch(1) else {
            panic!("the second write waits for the first")
        };
        assert!(w > ms(1), "wake-up {w} ns: a poll");
        s.completed(&a, 5);
        assert_eq!(take(s.as_mut(), 5).id, 1);
    }

    /// A BE request older than prio_aging_expire (10 s) passes RT traffic.
    #[test]
    fn aged_requests_pass_higher_levels() {
        let mut s = sched(&[]);
        s.insert(rq(0, Op::Read, 100, IoClass::Be, 0), 0);
        let mut id = 1;
        let mut now = 0;
        let mut served_be_at = None;
        while now < s_(12) {
            s.insert(rq(id, Op::Read, 1000 + id, IoClass::Rt, now), now);
            id += 1;
            let r = take(s.as_mut(), now);
            if r.class == IoClass::Be {
                served_be_at = Some(now);
                break;
            }
            now += ms(10);
            s.completed(&r, now);
        }
        assert_eq!(served_be_at, Some(s_(10)));
    }

    /// Writes get a batch after `writes_starved` (2) read batches pass them.
    /// With `fifo_batch` = 1 every dispatch after the first chooses a
    /// direction: the write waits for two reads, then goes.
    #[test]
    fn writes_get_a_batch_after_starving() {
        let mut s = sched(&[("fifo_batch", 1.0)]);
        for i in 0..10 {
            s.insert(rq(i, Op::Read, 1000 + i * 8, IoClass::Be, 0), 0);
        }
        assert_eq!(take(s.as_mut(), 1).op, Op::Read);
        s.insert(rq(100, Op::Write, 50, IoClass::Be, 1), 1);
        let ops: Vec<Op> = (0..4).map(|_| take(s.as_mut(), 1).op).collect();
        assert_eq!(ops, vec![Op::Read, Op::Read, Op::Write, Op::Read]);
    }

    /// `dd_init_sched` sets `last_dir` to `DD_WRITE`: with reads and a write
    /// queued, the first dispatch continues that direction from sector 0 and
    /// the write goes first.
    #[test]
    fn the_first_dispatch_continues_the_write_direction() {
        let mut s = sched(&[]);
        s.insert(rq(0, Op::Read, 100, IoClass::Be, 0), 0);
        s.insert(rq(1, Op::Read, 200, IoClass::Be, 0), 0);
        s.insert(rq(2, Op::Write, 50, IoClass::Be, 0), 0);
        assert_eq!(take(s.as_mut(), 1).op, Op::Write);
        assert_eq!(take(s.as_mut(), 1).sector, 100);
    }

    /// An expired read at the FIFO head starts the next batch.
    #[test]
    fn expired_fifo_head_jumps_the_sweep() {
        let mut s = sched(&[("fifo_batch", 2.0)]);
        s.insert(rq(0, Op::Read, 900, IoClass::Be, 0), 0);
        for i in 1..6 {
            s.insert(rq(i, Op::Read, 10 * i, IoClass::Be, 1), 1);
        }
        assert_eq!(take(s.as_mut(), 2).sector, 10);
        assert_eq!(take(s.as_mut(), 2).sector, 20);
        assert_eq!(take(s.as_mut(), ms(600)).sector, 900);
    }

    /// With one priority level queued there is no aged pass, as in Linux
    /// (`prio_cnt < 2`): past `prio_aging_expire` of run time an expired
    /// FIFO head still starts the batch. Trying the aged pass anyway chose
    /// the direction and started a batch at the head, refused the head (it
    /// arrived less than 10 s ago), and the normal pass then continued that
    /// batch along the sweep instead of serving the expired head.
    #[test]
    fn no_aged_pass_with_one_level_queued() {
        let mut s = sched(&[]);
        s.insert(rq(0, Op::Read, 900, IoClass::Be, s_(19)), s_(19));
        s.insert(rq(1, Op::Read, 10, IoClass::Be, s_(19) + ms(900)), s_(19) + ms(900));
        // The head's read_expire (500 ms) has passed: it goes first.
        assert_eq!(take(s.as_mut(), s_(20)).sector, 900);
        assert_eq!(take(s.as_mut(), s_(20)).sector, 10);
    }

    fn s_(v: u64) -> Nanos {
        s(v)
    }
}
