//! The anticipatory scheduler (AS) of Linux 2.6.18 (`block/as-iosched.c`,
//! `Documentation/block/as-iosched.txt`), the kernel of paper 000's CentOS 5
//! host. Where 2.6.32 differs (a write batch's first request and clock), hvio
//! follows 2.6.18; docs/schedulers.md lists the differences.
//!
//! Deadline-like structure: per direction (sync, async) a sector-sorted tree
//! and a FIFO with expiry times; requests go out in batches of one direction
//! along a one-way elevator that allows short backward seeks at twice their
//! cost. Read batches last `read_batch_expire` from the batch's first
//! completion; write batches last `write_batch_expire`, enforced through a
//! request count that tunes itself (halved after a batch that overran by
//! more than 3×, else decremented; doubled or incremented after one that
//! ended early). FIFOs are checked at most once per expiry interval.
//!
//! Anticipation: after dispatching a sync request of a stream, AS may keep
//! the disk idle for up to `antic_expire` after that request completes,
//! waiting for the same stream's next (probably nearby) request instead of
//! seeking away. It stops waiting when: the awaited stream submits; it has
//! requests queued or in flight; a sync request arrives that is *close* to
//! where the head is; the stream exited and rarely cooperates; its mean think
//! time exceeds `antic_expire`; or the timer runs out. Think time and seek
//! distance are per-stream fixed-point EWMAs, with process-wide means for
//! streams without history.
//!
//! Departures (docs/schedulers.md): no front merges, and back merges only
//! through `Scheduler::back_merge` (the simulator's opt-in blktap path),
//! streams never exit (a VM or guest thread lives for the whole
//! run, so the exit-probability rules never fire, though their estimates are
//! kept), and time is in ns rather than jiffies (HZ = 1000 equivalents).

use super::util::{key, wake_at, Queued, SortKey, SortedFifo, ThinkTime};
use super::SchedulerSpec;
use hvio_core::{ms, Dispatch, Nanos, ParamSpec, Params, Request, SchedContext, Scheduler, Sector, StreamId};
use rustc_hash::FxHashMap;
use std::collections::VecDeque;

/// The registry entry of `anticipatory`.
pub const SPEC: SchedulerSpec = SchedulerSpec {
    name: "anticipatory",
    summary:
        "Linux 2.6.18 anticipatory scheduler: read/write batches, FIFO expiry, anticipation of a stream's next read",
    params: PARAMS,
    stream_attrs: &[],
    build,
};

/// The anticipatory scheduler's tunables (Linux 2.6.18 `as-iosched.c`).
pub static PARAMS: &[ParamSpec] = &[
    ParamSpec::int(
        "read_expire",
        125.0,
        "ms",
        0.0,
        1e7,
        "FIFO expiry of a sync request (checked at most once per interval)",
    ),
    ParamSpec::int(
        "write_expire",
        250.0,
        "ms",
        0.0,
        1e7,
        "FIFO expiry of an async request (checked at most once per interval)",
    ),
    ParamSpec::int(
        "read_batch_expire",
        500.0,
        "ms",
        0.0,
        1e7,
        "length of a read batch when writes wait",
    ),
    ParamSpec::int(
        "write_batch_expire",
        125.0,
        "ms",
        0.0,
        1e7,
        "target length of a write batch (tunes the write batch count)",
    ),
    ParamSpec::int(
        "antic_expire",
        6.0,
        "ms",
        0.0,
        1e6,
        "longest anticipation wait after a sync request completes (0 = deadline-like)",
    ),
];

fn build(p: Params, _: &SchedContext) -> Box<dyn Scheduler> {
    Box::new(Anticipatory::new(&p))
}

const ASYNC: usize = 0;
const SYNC: usize = 1;
/// `MAX_THINKTIME`: think times are clamped below 20 ms.
const MAX_THINKTIME: Nanos = ms(20);
/// `MAXBACK`: the longest backward seek the elevator takes (sectors).
const MAXBACK: Sector = 1024 * 1024;
const BACK_PENALTY: u64 = 2;

/// The anticipation state machine (`enum anticipation_status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Antic {
    /// Not anticipating.
    Off,
    /// The awaited stream's last request has not completed yet.
    WaitReq,
    /// Its request completed: waiting (timer armed) for its next one.
    WaitNext,
    /// A candidate turned up or the wait timed out.
    Finished,
}

/// Per-stream history (`as_io_context`).
#[derive(Debug, Clone, Default)]
struct StreamCtx {
    nr_queued: u32,
    io_started: bool,
    io_running: bool,
    last_end_request: Nanos,
    ttime: ThinkTime,
    seek_samples: u64,
    seek_total: u64,
    seek_mean: Sector,
    last_request_pos: Sector,
}

/// Counters reported by [`Scheduler::counters`].
#[derive(Debug, Default, Clone, Copy)]
pub struct AsStats {
    /// Anticipation waits begun.
    pub antic_started: u64,
    /// Waits ended by the awaited stream's own request.
    pub antic_success: u64,
    /// Waits ended by a close request of another stream.
    pub antic_close: u64,
    /// Waits that timed out (`antic_expire`).
    pub antic_timeouts: u64,
    /// Requests dispatched because their FIFO deadline passed.
    pub fifo_expired: u64,
    /// Batches begun, per direction (read, write).
    pub batches: [u64; 2],
}

/// The anticipatory scheduler (Linux 2.6.18's `as-iosched.c`).
pub struct Anticipatory {
    fifo_expire: [Nanos; 2],
    batch_expire: [Nanos; 2],
    antic_expire: Nanos,

    queues: [SortedFifo; 2],
    /// `next_arq`: the cached next request of each direction in elevator
    /// order, kept as 2.6.18 keeps it (set from the dispatched request's
    /// neighbours, then compared with each new arrival).
    next: [Option<NextRq>; 2],
    /// Requests moved to the dispatch queue outside `as_dispatch_request`
    /// (the alias of a new request at the same sector); the driver takes
    /// them first.
    dispatch_list: VecDeque<Request>,
    last_sector: [Sector; 2],
    streams: FxHashMap<StreamId, StreamCtx>,
    exit_prob: u64,
    exit_no_coop: u64,
    new_ttime_total: u64,
    new_ttime_mean: Nanos,
    new_seek_total: u64,
    new_seek_mean: Sector,

    current_batch_expires: Nanos,
    last_check_fifo: [Nanos; 2],
    changed_batch: bool,
    new_batch: bool,
    batch_dir: usize,
    /// Write requests a write batch may dispatch (`write_batch_count`).
    pub write_batch_count: u64,
    current_write_count: u64,
    write_batch_idled: bool,

    /// The anticipation state.
    pub antic: Antic,
    antic_start: Nanos,
    antic_timer: Option<Nanos>,
    /// The stream anticipated on: the one of the last dispatched sync request.
    io_context: Option<StreamId>,
    ioc_finished: bool,
    nr_dispatched: u32,
    /// Its counters.
    pub stats: AsStats,
}

impl Anticipatory {
    /// A scheduler with tunables `p`.
    pub fn new(p: &Params) -> Self {
        let batch_expire = [p.nanos("write_batch_expire"), p.nanos("read_batch_expire")];
        Anticipatory {
            fifo_expire: [p.nanos("write_expire"), p.nanos("read_expire")],
            batch_expire,
            antic_expire: p.nanos("antic_expire"),
            queues: [SortedFifo::new(), SortedFifo::new()],
            next: [None, None],
            dispatch_list: VecDeque::new(),
            last_sector: [0, 0],
            streams: FxHashMap::default(),
            exit_prob: 0,
            exit_no_coop: 0,
            new_ttime_total: 0,
            new_ttime_mean: 0,
            new_seek_total: 0,
            new_seek_mean: 0,
            current_batch_expires: batch_expire[SYNC],
            last_check_fifo: [0, 0],
            changed_batch: false,
            new_batch: false,
            batch_dir: SYNC,
            // One request per 10 ms (jiffies/10 in Linux), at least 2.
            write_batch_count: (batch_expire[ASYNC] / ms(10)).max(2),
            current_write_count: 0,
            write_batch_idled: false,
            antic: Antic::Off,
            antic_start: 0,
            antic_timer: None,
            io_context: None,
            ioc_finished: false,
            nr_dispatched: 0,
            stats: AsStats::default(),
        }
    }

    /// `as_antic_expired`.
    fn antic_expired(&self, now: Nanos) -> bool {
        now.abs_diff(self.antic_start) >= self.antic_expire
    }

    /// `as_antic_waitnext`: arm the timer from the completion of the awaited request.
    fn antic_waitnext(&mut self) {
        self.antic_timer = Some(self.antic_start + self.antic_expire);
        self.antic = Antic::WaitNext;
    }

    /// `as_antic_waitreq`.
    fn antic_waitreq(&mut self) {
        if self.antic == Antic::Off {
            self.stats.antic_started += 1;
            if self.io_context.is_none() || self.ioc_finished {
                self.antic_waitnext();
            } else {
                self.antic = Antic::WaitReq;
            }
        }
    }

    /// `as_antic_stop`.
    fn antic_stop(&mut self) {
        if matches!(self.antic, Antic::WaitReq | Antic::WaitNext) {
            self.antic_timer = None;
            self.antic = Antic::Finished;
        }
    }

    /// `as_antic_timeout`, run at the timer's time.
    fn antic_timeout(&mut self) {
        self.antic_timer = None;
        if matches!(self.antic, Antic::WaitReq | Antic::WaitNext) {
            self.antic = Antic::Finished;
            self.stats.antic_timeouts += 1;
            let samples = self
                .io_context
                .and_then(|s| self.streams.get(&s))
                .map_or(0, |c| c.ttime.samples);
            if samples == 0 {
                // The awaited stream, new, did not submit in time.
                self.exit_prob = (7 * self.exit_prob + 256) / 8;
            }
        }
    }

    fn run_timers(&mut self, now: Nanos) {
        if self.antic_timer.is_some_and(|t| t <= now) {
            self.antic_timeout();
        }
    }

    /// `as_update_iohist`: think time and seek distance of a new sync request.
    fn update_iohist(&mut self, stream: StreamId, rq: &Request, now: Nanos) {
        if !rq.sync {
            return;
        }
        let ctx = self.streams.entry(stream).or_default();
        if ctx.io_running || ctx.io_started {
            // Linux counts requests on the dispatch list too; the device
            // takes a dispatched request at once here, so only queued ones.
            let in_flight = ctx.nr_queued;
            let mut think = 0;
            if ctx.io_running && in_flight == 0 {
                think = now.saturating_sub(ctx.last_end_request).min(MAX_THINKTIME - 1);
            }
            // as_update_thinktime
            if ctx.ttime.samples == 0 {
                self.new_ttime_total = (7 * self.new_ttime_total + 256 * think) / 8;
                self.new_ttime_mean = self.new_ttime_total / 256;
                self.exit_prob = 7 * self.exit_prob / 8;
            }
            ctx.ttime.add(think);
            // as_update_seekdist
            let mut sdist = ctx.last_request_pos.abs_diff(rq.sector);
            if ctx.seek_samples == 0 {
                self.new_seek_total = (7 * self.new_seek_total + 256 * sdist) / 8;
                self.new_seek_mean = self.new_seek_total / 256;
            }
            // Keep odd far seeks (page-ins, fragments) from dominating.
            let clamp = if ctx.seek_samples <= 60 {
                2 * 1024 * 1024
            } else {
                2 * 1024 * 64
            };
            sdist = sdist.min(ctx.seek_mean * 4 + clamp);
            ctx.seek_samples = (7 * ctx.seek_samples + 256) / 8;
            ctx.seek_total = (7 * ctx.seek_total + 256 * sdist) / 8;
            ctx.seek_mean = (ctx.seek_total + ctx.seek_samples / 2) / ctx.seek_samples;
        }
        ctx.last_request_pos = rq.end();
        ctx.io_started = true;
    }

    /// `as_close_req`: is `rq` close to where the head is, given how long we
    /// have already waited (the longer, the farther counts as close)?
    fn close_req(&self, ctx: &StreamCtx, rq: &Request, now: Nanos) -> bool {
        let last = self.last_sector[self.batch_dir];
        let next = rq.sector;
        let delay_ms = if self.antic == Antic::Off || !self.ioc_finished {
            0
        } else {
            now.saturating_sub(self.antic_start) / ms(1)
        };
        let delta: Sector = if delay_ms == 0 {
            8192
        } else if delay_ms <= 20 && ms(delay_ms) <= self.antic_expire {
            8192 << delay_ms
        } else {
            return true;
        };
        if last <= next + delta / 2 && next <= last + delta {
            return true;
        }
        let s = last.abs_diff(next);
        if ctx.seek_samples == 0 {
            self.new_seek_mean > s
        } else {
            ctx.seek_mean > s
        }
    }

    /// `as_can_break_anticipation`: should the wait end, for `rq` (or none)?
    fn can_break_anticipation(&mut self, rq: Option<&Request>, now: Nanos) -> bool {
        let Some(ioc) = self.io_context else { return true };
        if rq.is_some_and(|r| r.stream == ioc) {
            if matches!(self.antic, Antic::WaitReq | Antic::WaitNext) {
                self.stats.antic_success += 1;
            }
            return true;
        }
        if self.ioc_finished && self.antic_expired(now) {
            return true;
        }
        let Some(ctx) = self.streams.get(&ioc) else {
            return false;
        };
        // Rule 2: more requests queued (Linux also counts its dispatch list,
        // which the device empties at once here).
        if ctx.nr_queued > 0 {
            return true;
        }
        if let Some(r) = rq.filter(|r| r.sync) {
            if self.close_req(ctx, r, now) {
                // A close request from another stream: count it toward the
                // awaited stream's history (cooperating streams).
                self.stats.antic_close += 1;
                let r = *r;
                self.update_iohist(ioc, &r, now);
                return true;
            }
        }
        // Streams never exit in hvio: the exit rules cannot fire.
        let ctx = &self.streams[&ioc];
        if ctx.ttime.samples == 0 {
            self.new_ttime_mean > self.antic_expire || self.exit_prob * self.exit_no_coop > 128 * 256
        } else {
            ctx.ttime.mean > self.antic_expire
        }
    }

    /// `as_can_anticipate`.
    fn can_anticipate(&mut self, rq: Option<&Request>, now: Nanos) -> bool {
        self.io_context.is_some() && self.antic != Antic::Finished && !self.can_break_anticipation(rq, now)
    }

    /// `update_write_batch`: tune the write batch count to `write_batch_expire`.
    fn update_write_batch(&mut self, now: Nanos) {
        let batch = self.batch_expire[ASYNC] as i64;
        let write_time = (now as i64 - self.current_batch_expires as i64 + batch).max(0);
        if write_time > batch && !self.write_batch_idled {
            if write_time > batch * 3 {
                self.write_batch_count /= 2;
            } else {
                self.write_batch_count = self.write_batch_count.saturating_sub(1);
            }
        } else if write_time < batch && self.current_write_count == 0 {
            if batch > write_time * 3 {
                self.write_batch_count *= 2;
            } else {
                self.write_batch_count += 1;
            }
        }
        self.write_batch_count = self.write_batch_count.clamp(1, 1 << 20);
    }

    /// `as_fifo_expired`, rate limited to one check per expiry interval.
    fn fifo_expired(&mut self, dir: usize, now: Nanos) -> bool {
        if now.abs_diff(self.last_check_fifo[dir]) < self.fifo_expire[dir] {
            return false;
        }
        self.last_check_fifo[dir] = now;
        self.queues[dir].fifo_head().is_some_and(|(dl, _)| now > dl)
    }

    fn batch_expired(&self, now: Nanos) -> bool {
        if self.changed_batch || self.new_batch {
            return false;
        }
        now > self.current_batch_expires || (self.batch_dir == ASYNC && self.current_write_count == 0)
    }

    /// `ad->next_arq[dir]`.
    fn next_rq(&self, dir: usize) -> Option<Request> {
        match self.next[dir]? {
            NextRq::Arrived(k) => self.queues[dir].get(k).copied(),
            NextRq::Neighbour(at) => Some(*self.queues[dir].request_at(at)),
        }
    }

    /// Take `rq` out of its sort tree and, as `as_find_next_arq` does, set
    /// the next request in elevator order: its successor in sector order
    /// (past the highest, the lowest), against its predecessor. The removal
    /// finds both, beside the place it removes from.
    fn remove_and_find_next(&mut self, rq: &Request) {
        let dir = rq.sync as usize;
        let q = &mut self.queues[dir];
        let (prev, _, succ) = q.remove_between(key(rq)).expect("dispatching a queued request");
        let next = succ.or_else(|| q.first_queued());
        self.next[dir] = choose_req(
            self.last_sector[dir],
            next.map(NextRq::Neighbour),
            prev.map(NextRq::Neighbour),
        );
        // Going backward (or wrapping to the first request), the slot of the
        // request chosen was not asked for by the removal.
        if let Some(NextRq::Neighbour(at)) = self.next[dir] {
            if Some(at) != succ {
                q.prefetch_request(at);
            }
        }
    }

    fn fifo_head(&self, dir: usize) -> Request {
        *self.queues[dir].fifo_head().expect("direction has requests").1
    }

    /// `as_move_to_dispatch`.
    fn move_to_dispatch(&mut self, rq: Request) -> Request {
        let dir = rq.sync as usize;
        self.antic_stop();
        self.antic = Antic::Off;
        self.last_sector[dir] = rq.end();
        if dir == SYNC {
            self.io_context = Some(rq.stream);
        } else {
            self.io_context = None;
            self.current_write_count = self.current_write_count.saturating_sub(1);
        }
        self.ioc_finished = false;
        self.remove_and_find_next(&rq);
        let ctx = self.streams.entry(rq.stream).or_default();
        ctx.nr_queued = ctx.nr_queued.saturating_sub(1);
        self.nr_dispatched += 1;
        rq
    }

    /// `as_dispatch_request`: `None` = keep the disk idle for now.
    fn dispatch_request(&mut self, now: Nanos) -> Option<Request> {
        let reads = !self.queues[SYNC].is_empty();
        let writes = !self.queues[ASYNC].is_empty();
        // An uncontended write batch cannot be timed.
        if self.batch_dir == ASYNC && !reads && (self.current_write_count == 0 || !writes) {
            self.write_batch_idled = true;
        }
        if !(reads || writes) || matches!(self.antic, Antic::WaitReq | Antic::WaitNext) || self.changed_batch {
            return None;
        }
        let mut pick: Option<Request> = None;
        let mut fifo_now = false;
        if !(reads && writes && self.batch_expired(now)) {
            // The batch goes on (or there is only one direction).
            let rq = self.next_rq(self.batch_dir);
            if self.batch_dir == SYNC && self.antic_expire > 0 {
                if self.fifo_expired(SYNC, now) {
                    fifo_now = true;
                } else if self.can_anticipate(rq.as_ref(), now) {
                    self.antic_waitreq();
                    return None;
                }
            }
            if !fifo_now {
                if let Some(rq) = rq {
                    if reads && !writes {
                        self.current_batch_expires = now + self.batch_expire[SYNC];
                    }
                    pick = Some(rq);
                }
            }
        }
        if pick.is_none() && !fifo_now {
            // Start a new batch: reads unless the last batch was reads and writes wait.
            if reads && !(writes && self.batch_dir == SYNC) {
                if self.batch_dir == ASYNC {
                    self.changed_batch = true;
                }
                self.batch_dir = SYNC;
                self.last_check_fifo[SYNC] = now;
                pick = Some(self.fifo_head(SYNC));
            } else {
                if self.batch_dir == SYNC {
                    self.changed_batch = true;
                    self.new_batch = false;
                }
                self.batch_dir = ASYNC;
                self.current_write_count = self.write_batch_count;
                self.write_batch_idled = false;
                // 2.6.18 starts a write batch in elevator order and leaves
                // the write FIFO's check clock alone (2.6.32: the FIFO head,
                // clock reset).
                pick = Some(self.next_rq(ASYNC).unwrap_or_else(|| self.fifo_head(ASYNC)));
            }
            self.stats.batches[self.batch_dir] += 1;
        }
        if fifo_now || self.fifo_expired(self.batch_dir, now) {
            self.stats.fifo_expired += 1;
            pick = Some(self.fifo_head(self.batch_dir));
        }
        if self.changed_batch {
            // The old batch drains before the new one starts.
            if self.nr_dispatched > 0 {
                return None;
            }
            if self.batch_dir == ASYNC {
                self.current_batch_expires = now + self.batch_expire[ASYNC];
            } else {
                self.new_batch = true;
            }
            self.changed_batch = false;
        }
        pick.map(|rq| self.move_to_dispatch(rq))
    }
}

/// Whether `rq` goes into the sort tree as a file-system request with data
/// (flushes are ordered by the block layer, outside the elevator).
fn sorted(rq: &Request) -> bool {
    matches!(rq.op, hvio_core::Op::Read | hvio_core::Op::Write) && rq.sectors > 0
}

/// `ad->next_arq[dir]`: a request that has just arrived (its key), or a
/// neighbour of the request dispatched last (its place in the queue, read
/// only when it is dispatched: in a big queue its slot is a cache miss,
/// asked for a decision before it is read). Either names a queued
/// request: every removal sets it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NextRq {
    Arrived(SortKey),
    Neighbour(Queued),
}

impl NextRq {
    fn sector(self) -> Sector {
        match self {
            NextRq::Arrived((sector, _)) => sector,
            NextRq::Neighbour(at) => at.sector,
        }
    }
}

/// `as_choose_req`: of two requests of one direction (by their sectors,
/// all it looks at; the same request twice is that request), the one the
/// one-way elevator from `last` prefers. Ahead of `last` costs its distance; behind
/// by at most `MAXBACK` costs twice its distance; further behind "wraps" and
/// loses to any non-wrapping request (two wrapping ones: the lower sector).
/// Equal costs go to the higher sector.
fn choose_req(last: Sector, r1: Option<NextRq>, r2: Option<NextRq>) -> Option<NextRq> {
    let (r1, r2) = match (r1, r2) {
        (None, r) | (r, None) => return r,
        (Some(a), Some(b)) if a == b => return Some(b),
        (Some(a), Some(b)) => (a, b),
    };
    // None = behind the head by more than MAXBACK (wraps).
    let cost = |s: Sector| {
        if s >= last {
            Some(s - last)
        } else if s + MAXBACK >= last {
            Some((last - s) * BACK_PENALTY)
        } else {
            None
        }
    };
    let (s1, s2) = (r1.sector(), r2.sector());
    Some(match (cost(s1), cost(s2)) {
        (Some(_), None) => r1,
        (None, Some(_)) => r2,
        (None, None) => {
            if s1 <= s2 {
                r1
            } else {
                r2
            }
        }
        (Some(d1), Some(d2)) if d1 != d2 => {
            if d1 < d2 {
                r1
            } else {
                r2
            }
        }
        _ => {
            if s1 >= s2 {
                r1
            } else {
                r2
            }
        }
    })
}

impl Scheduler for Anticipatory {
    fn name(&self) -> &'static str {
        "anticipatory"
    }

    /// `as_add_request` + `as_update_rq`.
    fn insert(&mut self, rq: Request, now: Nanos) {
        self.run_timers(now);
        self.update_iohist(rq.stream, &rq, now);
        self.streams.entry(rq.stream).or_default().nr_queued += 1;
        let dir = rq.sync as usize;
        let deadline = now + self.fifo_expire[dir];
        // `as_add_arq_rb`: a queued request at the same sector (an alias)
        // goes to the dispatch queue at once. The sector is compared on the
        // index's sectors (the request itself is read only for an alias),
        // and the search that finds none is the insertion's.
        if sorted(&rq) {
            while let Some(alias) = self.queues[dir].insert_unless_alias(rq, deadline, sorted) {
                let alias = self.move_to_dispatch(alias);
                self.dispatch_list.push_back(alias);
            }
        } else {
            self.queues[dir].insert(rq, deadline);
        }
        // `as_update_arq`: keep the next-request cache up to date.
        self.next[dir] = choose_req(self.last_sector[dir], Some(NextRq::Arrived(key(&rq))), self.next[dir]);
        if matches!(self.antic, Antic::WaitReq | Antic::WaitNext) && self.can_break_anticipation(Some(&rq), now) {
            self.antic_stop();
        }
    }

    /// The generic back merge into the sync or async sort list; like
    /// `as_merged_request`, it leaves the I/O history and counts alone.
    fn back_merge(&mut self, rq: &Request, max_sectors: u32, _now: Nanos) -> Option<hvio_core::RequestId> {
        self.queues[rq.sync as usize].back_merge(rq, max_sectors)
    }

    fn dispatch(&mut self, now: Nanos) -> Dispatch {
        self.run_timers(now);
        if let Some(rq) = self.dispatch_list.pop_front() {
            return Dispatch::Request(rq);
        }
        if !self.has_work() {
            return Dispatch::Empty;
        }
        match self.dispatch_request(now) {
            Some(rq) => Dispatch::Request(rq),
            None => Dispatch::WaitUntil(wake_at(now, self.antic_timer, self.antic_expire.max(ms(1)))),
        }
    }

    /// `as_completed_request`.
    fn completed(&mut self, rq: &Request, now: Nanos) {
        self.run_timers(now);
        if self.nr_dispatched == 0 {
            return;
        }
        let ctx = self.streams.entry(rq.stream).or_default();
        if rq.sync {
            ctx.io_running = true;
            ctx.last_end_request = now;
        }
        if self.changed_batch && self.nr_dispatched == 1 {
            // 2.6.18 does not restart the batch clock here (2.6.32 does):
            // a write batch that waited for reads to drain keeps the old
            // expiry.
            self.changed_batch = false;
            if self.batch_dir == SYNC {
                self.new_batch = true;
            }
        }
        self.nr_dispatched -= 1;
        // A batch's clock starts when its first request is serviced.
        if self.new_batch && self.batch_dir == rq.sync as usize {
            self.update_write_batch(now);
            self.current_batch_expires = now + self.batch_expire[SYNC];
            self.new_batch = false;
        }
        if self.io_context == Some(rq.stream) {
            self.antic_start = now;
            self.ioc_finished = true;
            if self.antic == Antic::WaitReq {
                self.antic_waitnext();
            }
        }
    }

    fn has_work(&self) -> bool {
        !self.queues[SYNC].is_empty() || !self.queues[ASYNC].is_empty() || !self.dispatch_list.is_empty()
    }

    fn queued(&self) -> usize {
        self.queues[SYNC].len() + self.queues[ASYNC].len() + self.dispatch_list.len()
    }

    fn take_queued(&mut self, _now: Nanos) -> Option<Vec<Request>> {
        self.antic_stop();
        // Aliases on the dispatch list were counted as dispatched.
        let mut all: Vec<Request> = self.dispatch_list.drain(..).collect();
        self.nr_dispatched = self.nr_dispatched.saturating_sub(all.len() as u32);
        for q in &mut self.queues {
            all.extend(q.take_all());
        }
        for ctx in self.streams.values_mut() {
            ctx.nr_queued = 0;
        }
        self.next = [None, None];
        Some(all)
    }

    fn counters(&self) -> Vec<(String, f64)> {
        let s = &self.stats;
        vec![
            ("antic_started".into(), s.antic_started as f64),
            ("antic_success".into(), s.antic_success as f64),
            ("antic_close".into(), s.antic_close as f64),
            ("antic_timeouts".into(), s.antic_timeouts as f64),
            ("fifo_expired".into(), s.fifo_expired as f64),
            ("read_batches".into(), s.batches[SYNC] as f64),
            ("write_batches".into(), s.batches[ASYNC] as f64),
            ("write_batch_count".into(), self.write_batch_count as f64),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{fixed, run, Client, Pattern};
    use hvio_core::{DeviceInfo, Op, ParamValues, StreamInfo};

    fn sched() -> Box<dyn Scheduler> {
        let ctx = SchedContext {
            streams: (0..4).map(|i| StreamInfo::new(i, format!("s{i}"))).collect(),
            device: DeviceInfo::test_disk(1 << 30),
        };
        crate::build("anticipatory", &ParamValues::new(), &ctx).unwrap()
    }

    fn read(id: u64, stream: StreamId, sector: Sector, now: Nanos) -> Request {
        Request::new(id, stream, Op::Read, sector, 16, now)
    }

    fn take(s: &mut dyn Scheduler, now: Nanos) -> Request {
        match s.dispatch(now) {
            Dispatch::Request(r) => r,
            other => panic!("expected a request at {now}, got {other:?}"),
        }
    }

    /// After stream 0's read completes at 2 ms, a far read of stream 1 does
    /// not end the wait: AS holds the disk until 2 + 6 ms. A far read of
    /// another stream at 3 ms changes nothing; a read 84 sectors past the
    /// head at 4 ms is *close* (within 8192 << 2 sectors after 2 ms of
    /// waiting) and goes out at once.
    #[test]
    fn anticipates_and_breaks_for_a_close_request() {
        let mut s = sched();
        s.insert(read(0, 0, 1_000_000, 0), 0);
        assert_eq!(take(s.as_mut(), 0).id, 0);
        let a = read(0, 0, 1_000_000, 0);
        s.completed(&a, ms(2));
        s.insert(read(1, 1, 50_000_000, ms(2)), ms(2));
        assert_eq!(s.dispatch(ms(2)), Dispatch::WaitUntil(ms(8)));
        s.insert(read(2, 2, 90_000_000, ms(3)), ms(3));
        assert_eq!(s.dispatch(ms(3)), Dispatch::WaitUntil(ms(8)));
        s.insert(read(3, 3, 1_000_100, ms(4)), ms(4));
        assert_eq!(take(s.as_mut(), ms(4)).id, 3);
        let c = s.counters();
        assert_eq!(c.iter().find(|x| x.0 == "antic_close").unwrap().1, 1.0);
    }

    /// The timer ends an unrewarded wait: at 8 ms the far read goes.
    #[test]
    fn anticipation_times_out() {
        let mut s = sched();
        s.insert(read(0, 0, 1_000_000, 0), 0);
        let a = take(s.as_mut(), 0);
        s.completed(&a, ms(2));
        s.insert(read(1, 1, 50_000_000, ms(2)), ms(2));
        assert_eq!(s.dispatch(ms(2)), Dispatch::WaitUntil(ms(8)));
        assert_eq!(take(s.as_mut(), ms(8)).id, 1);
    }

    fn build_with(over: &[(&str, f64)]) -> Box<dyn Scheduler> {
        let mut o = ParamValues::new();
        for (k, v) in over {
            o.insert(k.to_string(), *v);
        }
        let ctx = SchedContext {
            streams: vec![],
            device: DeviceInfo::test_disk(1 << 30),
        };
        crate::build("anticipatory", &o, &ctx).unwrap()
    }

    /// A sequential reader (1 ms think time) against a seeky reader with 4
    /// requests queued, 2 ms per request, 5 s. AS waits for the sequential
    /// reader after each of its reads (think time 1 ms < antic_expire) and
    /// the wait pays off: it gets most of the disk. Each read FIFO check
    /// (at most every read_expire = 125 ms) lets the seeky reader in, and the
    /// one-way sweep then serves its requests ahead of the head. Without
    /// anticipation the sequential reader gets one request per sweep.
    #[test]
    fn anticipates_a_sequential_reader() {
        let clients = [
            Client::new(0, Pattern::Sequential, 0).think(ms(1)),
            Client::new(1, Pattern::Random(3), 1 << 28).outstanding(4),
        ];
        let mut s = build_with(&[]);
        let out = run(s.as_mut(), &clients, 1, &fixed(ms(2)), hvio_core::s(5));
        let c = s.counters();
        let get = |n: &str| c.iter().find(|x| x.0 == n).unwrap().1;
        assert!(get("antic_success") > 1000.0, "{c:?}");
        assert!(out.waits.iter().all(|(n, w)| w - n <= ms(6)));
        let (seq, seeky) = (out.completed[&0] as f64, out.completed[&1] as f64);
        assert!(seq > 5.0 * seeky, "sequential {seq}, seeky {seeky}");
        assert!(seeky >= 40.0, "seeky reader starved: {seeky}");

        let mut s = build_with(&[("antic_expire", 0.0)]);
        let out = run(s.as_mut(), &clients, 1, &fixed(ms(2)), hvio_core::s(5));
        let (seq, seeky) = (out.completed[&0] as f64, out.completed[&1] as f64);
        assert!(
            seq < 2.0 * seeky,
            "without anticipation: sequential {seq}, seeky {seeky}"
        );
    }

    /// With antic_expire = 0 AS never waits (deadline-like).
    #[test]
    fn no_anticipation_when_disabled() {
        let mut s = build_with(&[("antic_expire", 0.0)]);
        s.insert(read(0, 0, 1_000_000, 0), 0);
        let a = take(s.as_mut(), 0);
        s.completed(&a, ms(2));
        s.insert(read(1, 1, 50_000_000, ms(2)), ms(2));
        assert_eq!(take(s.as_mut(), ms(2)).id, 1);
    }

    fn write(id: u64, sector: Sector) -> Request {
        Request::new(id, 0, Op::Write, sector, 16, 0).with_sync(false)
    }

    /// 2.6.18 starts a write batch with the elevator's next write
    /// (`next_arq[REQ_ASYNC]`, from where the last write ended: sector 0
    /// here), not with the write FIFO's head as 2.6.32 does.
    #[test]
    fn a_write_batch_starts_in_elevator_order() {
        let mut s = sched();
        s.insert(write(0, 5_000_000), 0);
        s.insert(write(1, 1_000), 0);
        assert_eq!(take(s.as_mut(), 0).id, 1);
        assert_eq!(take(s.as_mut(), 0).id, 0);
    }

    /// A read batch expires while a read is in flight: the switch to writes
    /// waits for it (changed_batch). When it completes, 2.6.18 clears
    /// changed_batch without restarting the batch clock, so the write batch
    /// is already expired and the waiting read goes first (2.6.32 sets a
    /// fresh write_batch_expire here and would send the write).
    #[test]
    fn a_drained_batch_change_keeps_the_old_clock() {
        let mut s = sched();
        let r0 = read(0, 0, 1_000_000, 0);
        s.insert(r0, 0);
        assert_eq!(take(s.as_mut(), 0).id, 0);
        s.insert(write(1, 2_000_000), ms(600));
        s.insert(read(2, 0, 3_000_000, ms(600)), ms(600));
        assert!(matches!(s.dispatch(ms(600)), Dispatch::WaitUntil(_)));
        s.completed(&r0, ms(610));
        assert_eq!(take(s.as_mut(), ms(610)).id, 2);
    }

    /// `as_add_arq_rb`: a new request at the sector of a queued one (an
    /// alias) sends the queued one to the dispatch queue at once, ahead of
    /// the elevator's choice (the read at 3,000,000, forward of the head).
    #[test]
    fn an_alias_goes_out_at_once() {
        let mut s = sched();
        let r0 = read(0, 0, 2_000_000, 0);
        s.insert(r0, 0);
        assert_eq!(take(s.as_mut(), 0).id, 0);
        s.completed(&r0, ms(5));
        s.insert(read(1, 0, 1_000, ms(5)), ms(5));
        s.insert(read(2, 0, 3_000_000, ms(5)), ms(5));
        s.insert(read(3, 0, 1_000, ms(5)), ms(5));
        let order: Vec<u64> = (0..3).map(|_| take(s.as_mut(), ms(5)).id).collect();
        assert_eq!(order, vec![1, 3, 2]);
    }

    /// `as_find_next_arq`: after a request, the next one is chosen between
    /// its successor in sector order and its predecessor. A request starting
    /// inside the dispatched one (1,016 within 1,000..1,064) is its
    /// successor and goes next, though one at 1,070 lies just ahead of
    /// where the dispatched request ended.
    #[test]
    fn the_next_request_is_the_dispatched_ones_neighbour() {
        let mut s = sched();
        s.insert(Request::new(0, 0, Op::Read, 1_000, 64, 0), 0);
        s.insert(read(1, 0, 1_016, 0), 0);
        s.insert(read(2, 0, 1_070, 0), 0);
        let order: Vec<u64> = (0..3).map(|_| take(s.as_mut(), 0).id).collect();
        assert_eq!(order, vec![0, 1, 2]);
    }

    /// Writes get batches between reads, and the write batch count tunes
    /// itself: batches that end before `write_batch_expire` grow it.
    #[test]
    fn write_batches_alternate_and_self_tune() {
        let mut s = sched();
        let clients = [
            Client::new(0, Pattern::Random(5), 0).outstanding(4),
            Client::new(1, Pattern::Sequential, 1 << 28).outstanding(2).write(false),
        ];
        let out = run(s.as_mut(), &clients, 1, &fixed(ms(1)), hvio_core::s(3));
        let c = s.counters();
        let get = |n: &str| c.iter().find(|x| x.0 == n).unwrap().1;
        assert!(get("write_batches") > 3.0 && get("read_batches") > 3.0, "{c:?}");
        // 1 ms writes fill a 125 ms write batch target with far more than the
        // initial 12 requests: the count grows.
        assert!(get("write_batch_count") > 24.0, "{c:?}");
        assert!(out.completed[&1] > 100, "writes starved: {:?}", out.completed);
    }
}
