//! noop (Linux `block/noop-iosched.c`; blk-mq's "none"): one FIFO.
//!
//! Linux's noop moves one request at a time to the dispatch list, where
//! `elv_dispatch_sort` has nothing to sort it against when the device takes
//! one request at a time, so with a depth-1 device it is first come, first
//! served. No tunables.

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
    fn has_work(&self) -> bool {
        !self.fifo.is_empty()
    }
    fn queued(&self) -> usize {
        self.fifo.len()
    }
    fn take_queued(&mut self, _now: Nanos) -> Option<Vec<Request>> {
        Some(self.fifo.drain(..).collect())
    }
}
