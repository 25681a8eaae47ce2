//! The legacy deadline scheduler (Linux `block/deadline-iosched.c`).
//!
//! Per direction a sector-sorted tree and a FIFO by expiry. Requests are
//! dispatched in batches of up to `fifo_batch` in ascending sector order
//! (a one-way sweep, no wrap); between batches, reads are preferred unless
//! writes have been starved `writes_starved` times, and a batch starts at the
//! FIFO head when it has expired (or when the sweep has nothing ahead),
//! otherwise where the sweep left off. Deadlines are checked only between
//! batches, as in Linux.
//!
//! A flush never reaches it: the scheduler driver sends flushes around
//! every elevator, as Linux's `blk_insert_flush` does (`crate::driver`).

use super::util::{key, SortKey, SortedFifo};
use super::SchedulerSpec;
use hvio_core::{Dispatch, Nanos, ParamSpec, Params, Request, SchedContext, Scheduler};

/// The registry entry of `deadline`.
pub const SPEC: SchedulerSpec = SchedulerSpec {
    name: "deadline",
    summary: "Linux legacy deadline: sector-sorted batches, read/write FIFOs with expiry",
    params: PARAMS,
    stream_attrs: &[],
    build,
};

/// The legacy deadline tunables; mq-deadline shares them (plus its own).
pub(crate) const READ_EXPIRE: ParamSpec = ParamSpec::int(
    "read_expire",
    500.0,
    "ms",
    0.0,
    1e7,
    "deadline of a read after its arrival",
);
pub(crate) const WRITE_EXPIRE: ParamSpec = ParamSpec::int(
    "write_expire",
    5000.0,
    "ms",
    0.0,
    1e7,
    "deadline of a write after its arrival",
);
pub(crate) const WRITES_STARVED: ParamSpec = ParamSpec::int(
    "writes_starved",
    2.0,
    "count",
    0.0,
    1e6,
    "read batches that may pass pending writes before a write batch",
);
pub(crate) const FIFO_BATCH: ParamSpec = ParamSpec::int(
    "fifo_batch",
    16.0,
    "requests",
    1.0,
    1e6,
    "requests dispatched in one sector-ordered batch",
);
pub(crate) const FRONT_MERGES: ParamSpec = ParamSpec::flag(
    "front_merges",
    true,
    "accepted for Linux parity; hvio never front-merges (the simulator back-merges only on its opt-in [host.blktap] path)",
);

static PARAMS: &[ParamSpec] = &[READ_EXPIRE, WRITE_EXPIRE, WRITES_STARVED, FIFO_BATCH, FRONT_MERGES];

fn build(p: Params, _: &SchedContext) -> Box<dyn Scheduler> {
    Box::new(Deadline::new(&p))
}

const READ: usize = 0;
const WRITE: usize = 1;

/// The deadline scheduler (Linux `deadline-iosched.c`).
#[derive(Debug)]
pub struct Deadline {
    expire: [Nanos; 2],
    writes_starved: u64,
    fifo_batch: u64,
    queues: [SortedFifo; 2],
    /// Successor of the last dispatched request, per direction (Linux `next_rq`).
    next_rq: [Option<SortKey>; 2],
    batching: u64,
    starved: u64,
}

impl Deadline {
    /// A scheduler with tunables `p`.
    pub fn new(p: &Params) -> Self {
        Deadline {
            expire: [p.nanos("read_expire"), p.nanos("write_expire")],
            writes_starved: p.u64("writes_starved"),
            fifo_batch: p.u64("fifo_batch"),
            queues: [SortedFifo::new(), SortedFifo::new()],
            next_rq: [None, None],
            batching: 0,
            starved: 0,
        }
    }

    fn fifo_expired(&self, dir: usize, now: Nanos) -> bool {
        self.queues[dir].fifo_head().is_some_and(|(dl, _)| dl <= now)
    }

    fn move_request(&mut self, dir: usize, k: SortKey) -> Request {
        let (rq, next) = self.queues[dir].remove_next(k).expect("dispatching a queued request");
        self.next_rq = [None, None];
        self.next_rq[dir] = next;
        self.batching += 1;
        rq
    }
}

impl Scheduler for Deadline {
    fn name(&self) -> &'static str {
        "deadline"
    }

    fn insert(&mut self, rq: Request, now: Nanos) {
        let dir = rq.op.dir();
        self.queues[dir].insert(rq, now + self.expire[dir]);
    }

    /// `deadline_merge` with the generic back merge: the request grows in
    /// its direction's sort list and keeps its FIFO expiry.
    fn back_merge(&mut self, rq: &Request, max_sectors: u32, _now: Nanos) -> Option<hvio_core::RequestId> {
        self.queues[rq.op.dir()].back_merge(rq, max_sectors)
    }

    fn dispatch(&mut self, now: Nanos) -> Dispatch {
        // Continue the current batch in sector order.
        let cont = self.next_rq[WRITE]
            .map(|k| (WRITE, k))
            .or(self.next_rq[READ].map(|k| (READ, k)));
        if let Some((dir, k)) = cont {
            if self.batching < self.fifo_batch {
                return Dispatch::Request(self.move_request(dir, k));
            }
        }
        let reads = !self.queues[READ].is_empty();
        let writes = !self.queues[WRITE].is_empty();
        let dir = if reads
            && !(writes && {
                self.starved += 1;
                self.starved > self.writes_starved
            }) {
            READ
        } else if writes {
            self.starved = 0;
            WRITE
        } else {
            return Dispatch::Empty;
        };
        let k = if self.fifo_expired(dir, now) || self.next_rq[dir].is_none() {
            key(self.queues[dir].fifo_head().expect("non-empty direction").1)
        } else {
            self.next_rq[dir].expect("checked above")
        };
        self.batching = 0;
        Dispatch::Request(self.move_request(dir, k))
    }

    fn completed(&mut self, _rq: &Request, _now: Nanos) {}

    /// Legacy deadline has no `elevator_completed_req_fn`: its choices
    /// depend on what is queued and on the time of the dispatch only.
    fn acts_on_completions(&self) -> bool {
        false
    }

    fn has_work(&self) -> bool {
        !self.queues[READ].is_empty() || !self.queues[WRITE].is_empty()
    }

    fn queued(&self) -> usize {
        self.queues[READ].len() + self.queues[WRITE].len()
    }

    fn take_queued(&mut self, _now: Nanos) -> Option<Vec<Request>> {
        self.next_rq = [None, None];
        let mut all = self.queues[READ].take_all();
        all.extend(self.queues[WRITE].take_all());
        Some(all)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hvio_core::{DeviceInfo, Op};

    fn sched(over: &[(&str, f64)]) -> Box<dyn Scheduler> {
        crate::testutil::build("deadline", &[], over, DeviceInfo::test_disk(1 << 30))
    }

    fn take(s: &mut dyn Scheduler, now: Nanos) -> Request {
        match s.dispatch(now) {
            Dispatch::Request(r) => r,
            other => panic!("expected a request, got {other:?}"),
        }
    }

    #[test]
    fn batches_sweep_in_sector_order() {
        let mut s = sched(&[]);
        for (i, sec) in [500u64, 100, 300, 200, 400].iter().enumerate() {
            s.insert(Request::new(i as u64, 0, Op::Read, *sec, 8, 0), 0);
        }
        // First pick: FIFO head (nothing to continue), then ascending sweep.
        let order: Vec<u64> = (0..5).map(|_| take(s.as_mut(), 1).sector).collect();
        assert_eq!(order, vec![500, 100, 200, 300, 400]);
        assert_eq!(s.dispatch(1), Dispatch::Empty);
    }

    #[test]
    fn writes_get_a_batch_after_starving() {
        let mut s = sched(&[("fifo_batch", 1.0)]);
        for i in 0..10 {
            s.insert(Request::new(i, 0, Op::Read, 1000 + i * 8, 8, 0), 0);
        }
        s.insert(Request::new(100, 0, Op::Write, 50, 8, 0), 0);
        let ops: Vec<Op> = (0..4).map(|_| take(s.as_mut(), 1).op).collect();
        // Two read batches pass (writes_starved = 2), then the write.
        assert_eq!(ops, vec![Op::Read, Op::Read, Op::Write, Op::Read]);
    }

    #[test]
    fn expired_fifo_head_jumps_the_sweep() {
        let mut s = sched(&[("fifo_batch", 2.0)]);
        s.insert(Request::new(0, 0, Op::Read, 10, 8, 0), 0);
        s.insert(Request::new(1, 0, Op::Read, 900, 8, 1), 1);
        s.insert(Request::new(2, 0, Op::Read, 20, 8, 2), 2);
        s.insert(Request::new(3, 0, Op::Read, 30, 8, 3), 3);
        assert_eq!(take(s.as_mut(), 4).sector, 10);
        assert_eq!(take(s.as_mut(), 4).sector, 20);
        // Batch over; id 1 (sector 900) has expired by now: served next.
        assert_eq!(take(s.as_mut(), hvio_core::ms(600)).sector, 900);
    }
}
