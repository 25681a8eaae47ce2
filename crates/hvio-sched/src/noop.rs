//! noop (Linux `block/noop-iosched.c`; blk-mq's "none"): one FIFO.
//!
//! Linux's noop moves one request at a time to the dispatch list, where
//! `elv_dispatch_sort` has nothing to sort it against when the device takes
//! one request at a time, so with a depth-1 device it is first come, first
//! served. No tunables. It has the block layer's generic back merge
//! (`elv_rqhash_find`, the hash of queued requests by end sector): a
//! request that continues a queued one grows it in place.

use super::SchedulerSpec;
use hvio_core::{Dispatch, Nanos, Params, Request, SchedContext, Scheduler};
use std::collections::VecDeque;

/// The registry entry of `noop`.
pub const SPEC: SchedulerSpec = SchedulerSpec {
    name: "noop",
    summary: "first come, first served (Linux noop / blk-mq none)",
    params: &[],
    stream_attrs: &[],
    build,
};

fn build(_: Params, _: &SchedContext) -> Box<dyn Scheduler> {
    Box::new(Noop::default())
}

/// The noop scheduler: FIFO with back merges.
#[derive(Debug, Default)]
pub struct Noop {
    fifo: VecDeque<Request>,
}

impl Scheduler for Noop {
    fn name(&self) -> &'static str {
        "noop"
    }
    fn insert(&mut self, rq: Request, _now: Nanos) {
        self.fifo.push_back(rq);
    }
    fn dispatch(&mut self, _now: Nanos) -> Dispatch {
        match self.fifo.pop_front() {
            Some(rq) => Dispatch::Request(rq),
            None => Dispatch::Empty,
        }
    }
    fn completed(&mut self, _rq: &Request, _now: Nanos) {}
    /// A FIFO: no count of requests in flight, no timers.
    fn acts_on_completions(&self) -> bool {
        false
    }
    fn has_work(&self) -> bool {
        !self.fifo.is_empty()
    }
    fn queued(&self) -> usize {
        self.fifo.len()
    }
    fn take_queued(&mut self, _now: Nanos) -> Option<Vec<Request>> {
        Some(self.fifo.drain(..).collect())
    }
    fn back_merge(&mut self, rq: &Request, max_sectors: u32, _now: Nanos) -> Option<hvio_core::RequestId> {
        // The newest queued request that ends where `rq` starts (the
        // hash finds one; the newest is the one a stream just queued).
        let prev = self.fifo.iter_mut().rev().find(|q| q.end() == rq.sector)?;
        if !crate::util::back_mergeable(prev, rq, max_sectors) {
            return None;
        }
        prev.sectors += rq.sectors;
        Some(prev.id)
    }
}
