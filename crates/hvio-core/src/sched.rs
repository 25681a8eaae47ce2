//! The scheduler interface, shaped like the Linux blk-mq elevator
//! (`block/elevator.h`: `insert_requests`, `dispatch_request`,
//! `completed_request`, `has_work`), with time passed in and no I/O.
//!
//! A scheduler may serve at the host (streams = VMs) or inside a guest
//! (streams = guest threads); it learns its streams and the device through
//! [`SchedContext`] when it is built, and may meet unknown streams later (it
//! must then treat them with default attributes).

use crate::device::DeviceInfo;
use crate::request::{Request, Sector, StreamId};
use crate::time::Nanos;
use std::collections::BTreeMap;

/// What the scheduler wants the device to do next.
///
/// `repr(u8)`: the tag in a byte of its own, before the request. Left to
/// the compiler, the tag is a spare value of one of the request's bytes,
/// and a scheduler writes its answer in pieces around that byte that the
/// caller's next 16-byte load spans: a load the store buffer cannot
/// forward, a stall on every dispatch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Dispatch {
    /// Send this request to the device now.
    Request(Request),
    /// Keep the device idle (anticipation, slice idling, Pregather's timers):
    /// call `dispatch` again at this time, or earlier if a request arrives or
    /// completes. Always strictly in the future and finite.
    WaitUntil(Nanos),
    /// Nothing to dispatch.
    Empty,
}

/// One time slice a slice-based scheduler granted a stream, reported when it
/// ended (paper 000's per-VM slice lengths over time, Fig. 7 and §4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SliceGrant {
    /// The stream the slice was granted to.
    pub stream: StreamId,
    /// When the slice began.
    pub start: Nanos,
    /// The slice length in force when it ended (it may have been shortened).
    pub length: Nanos,
    /// Time the stream actually held the device.
    pub used: Nanos,
}

/// How many ended slices a scheduler keeps for [`Scheduler::take_slices`]
/// before it drops the oldest: a caller that never reads them (the daemon)
/// costs bounded memory.
pub const SLICE_LOG_MAX: usize = 4096;

/// A scheduler's log of ended slices, for [`Scheduler::take_slices`]: at
/// most [`SLICE_LOG_MAX`] unread, the oldest dropped first.
#[derive(Debug, Clone, Default)]
pub struct SliceLog(std::collections::VecDeque<SliceGrant>);

impl SliceLog {
    /// A slice ended.
    pub fn push(&mut self, grant: SliceGrant) {
        if self.0.len() >= SLICE_LOG_MAX {
            self.0.pop_front();
        }
        self.0.push_back(grant);
    }

    /// The slices logged since the last call, oldest first.
    pub fn take(&mut self) -> Vec<SliceGrant> {
        self.0.drain(..).collect()
    }
}

/// What a scheduler knows about one stream (a VM at the host, a thread in a guest).
#[derive(Debug, Clone, PartialEq)]
pub struct StreamInfo {
    /// The stream's identifier, as requests carry it.
    pub id: StreamId,
    /// A name for reports (the VM's or thread's).
    pub name: String,
    /// Proportional-share weight (blkio: 10..1000, default 500; BFQ: 1..1000).
    /// Only ratios matter to hvio's schedulers.
    pub weight: u32,
    /// The region of the device this stream's data lives in (a VM's image),
    /// as (first sector, length in sectors), when known.
    pub region: Option<(Sector, Sector)>,
    /// Scheduler-specific attributes by name (e.g. HTBS `rate_iops`, `burst`).
    pub attrs: BTreeMap<String, f64>,
}

impl StreamInfo {
    /// The weight a stream has when none is given (blkio's default).
    pub const DEFAULT_WEIGHT: u32 = 500;

    /// A stream with the default weight, no region and no attributes.
    pub fn new(id: StreamId, name: impl Into<String>) -> Self {
        StreamInfo {
            id,
            name: name.into(),
            weight: Self::DEFAULT_WEIGHT,
            region: None,
            attrs: BTreeMap::new(),
        }
    }

    /// The same stream with weight `weight`.
    pub fn with_weight(mut self, weight: u32) -> Self {
        self.weight = weight;
        self
    }

    /// The same stream with its data at `len` sectors from `start`.
    pub fn with_region(mut self, start: Sector, len: Sector) -> Self {
        self.region = Some((start, len));
        self
    }

    /// Scheduler attribute `name`, if given.
    pub fn attr(&self, name: &str) -> Option<f64> {
        self.attrs.get(name).copied()
    }
}

/// Everything a scheduler is told when it is built.
#[derive(Debug, Clone)]
pub struct SchedContext {
    /// The streams known in advance (more may appear later).
    pub streams: Vec<StreamInfo>,
    /// The device it schedules for: capacity, rotational, seek estimates.
    pub device: DeviceInfo,
}

impl SchedContext {
    /// The stream `id`, if known.
    pub fn stream(&self, id: StreamId) -> Option<&StreamInfo> {
        self.streams.iter().find(|s| s.id == id)
    }
}

/// A disk I/O scheduler. Never reads a clock, never does I/O.
pub trait Scheduler: Send {
    /// The registry name (`noop`, `deadline`, `cfq`, ...).
    fn name(&self) -> &'static str;

    /// A request arrives at `now`.
    fn insert(&mut self, rq: Request, now: Nanos);

    /// The device can take a request: return one, ask to be called again at a
    /// later time, or say there is nothing.
    fn dispatch(&mut self, now: Nanos) -> Dispatch;

    /// A request dispatched earlier has completed at `now`.
    fn completed(&mut self, rq: &Request, now: Nanos);

    /// Whether any request is queued in the scheduler.
    fn has_work(&self) -> bool;

    /// Requests inserted and not yet dispatched.
    fn queued(&self) -> usize;

    /// A stream's attributes changed at run time (e.g. its weight), or a new
    /// stream was announced. Default: ignored.
    fn set_stream(&mut self, _info: &StreamInfo) {}

    /// Scheduler-specific counters (waits, slice switches by reason, ...),
    /// by name, for reports.
    fn counters(&self) -> Vec<(String, f64)> {
        Vec::new()
    }

    /// The time slices that ended since the last call, oldest first (at
    /// most [`SLICE_LOG_MAX`]; older ones are dropped). Default: none, for
    /// schedulers without slices.
    fn take_slices(&mut self) -> Vec<SliceGrant> {
        Vec::new()
    }

    /// Whether a completion can change what this scheduler dispatches or
    /// when: `true` for a scheduler that counts requests in flight, idles
    /// or anticipates after a completion, measures service times, or runs
    /// timers from `completed`. `false` declares that [`Scheduler::completed`]
    /// changes nothing the scheduler will decide, so a caller with nothing
    /// waiting to dispatch may report completions late, in a batch, with
    /// the times they happened (the daemon's vhost-user engine then skips
    /// a wake-up per request). Default: `true`, the safe answer; only a
    /// scheduler whose `completed` does nothing may say `false`.
    fn acts_on_completions(&self) -> bool {
        true
    }

    /// Whether [`Scheduler::take_slices`] can return any slice: `true` for
    /// a scheduler that logs them. A caller that takes slices at every
    /// dispatch (the simulator's host) asks only schedulers that do.
    /// Default: `false`, as the default `take_slices` has none; a scheduler
    /// overriding one overrides both (the conformance suite checks it).
    fn logs_slices(&self) -> bool {
        false
    }

    /// Hand over every queued request (inserted, not yet dispatched), in
    /// any order, and forget them: afterwards `queued()` is 0 and
    /// `has_work()` false, and the scheduler still takes `completed` for
    /// its requests in flight (and new requests, as after dispatching its
    /// last one). A run-time switch uses it (`block/elevator.c`'s forced
    /// `elv_drain_elevator`, or handing the queue to the next scheduler).
    /// Default: `None`, "cannot": the switch then lets this scheduler serve
    /// its queue itself, so nothing is lost.
    fn take_queued(&mut self, _now: Nanos) -> Option<Vec<Request>> {
        None
    }

    /// The block layer's back merge (`elv_merge` → `ELEVATOR_BACK_MERGE`,
    /// `bio_attach_to_rq`): if a queued, not yet dispatched request of
    /// `rq.stream` with the same direction and sync flag ends where `rq`
    /// starts, and the two together are at most `max_sectors` long, grow
    /// that request by `rq.sectors` in place (it keeps its place, arrival
    /// and deadline) and return its id; `rq` is then never inserted.
    /// Default: no merging (`None`). Only the simulator's opt-in host path
    /// (`[host.blktap] elevator_merge`) calls it.
    fn back_merge(&mut self, _rq: &Request, _max_sectors: u32, _now: Nanos) -> Option<crate::request::RequestId> {
        None
    }
}

/// A borrowed scheduler is driven like an owned one (a test drives a
/// scheduler it inspects afterwards).
impl<S: Scheduler + ?Sized> Scheduler for &mut S {
    fn name(&self) -> &'static str {
        (**self).name()
    }
    fn insert(&mut self, rq: Request, now: Nanos) {
        (**self).insert(rq, now)
    }
    fn dispatch(&mut self, now: Nanos) -> Dispatch {
        (**self).dispatch(now)
    }
    fn completed(&mut self, rq: &Request, now: Nanos) {
        (**self).completed(rq, now)
    }
    fn has_work(&self) -> bool {
        (**self).has_work()
    }
    fn queued(&self) -> usize {
        (**self).queued()
    }
    fn set_stream(&mut self, info: &StreamInfo) {
        (**self).set_stream(info)
    }
    fn counters(&self) -> Vec<(String, f64)> {
        (**self).counters()
    }
    fn take_slices(&mut self) -> Vec<SliceGrant> {
        (**self).take_slices()
    }
    fn logs_slices(&self) -> bool {
        (**self).logs_slices()
    }
    fn acts_on_completions(&self) -> bool {
        (**self).acts_on_completions()
    }
    fn take_queued(&mut self, now: Nanos) -> Option<Vec<Request>> {
        (**self).take_queued(now)
    }
    fn back_merge(&mut self, rq: &Request, max_sectors: u32, now: Nanos) -> Option<crate::request::RequestId> {
        (**self).back_merge(rq, max_sectors, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slice_log_keeps_the_newest() {
        let mut log = SliceLog::default();
        for i in 0..(SLICE_LOG_MAX as u64 + 10) {
            log.push(SliceGrant {
                stream: 0,
                start: i,
                length: 1,
                used: 1,
            });
        }
        let taken = log.take();
        assert_eq!(taken.len(), SLICE_LOG_MAX);
        assert_eq!(taken.first().map(|g| g.start), Some(10));
        assert_eq!(taken.last().map(|g| g.start), Some(SLICE_LOG_MAX as u64 + 9));
        assert!(log.take().is_empty(), "taken once");
    }
}
