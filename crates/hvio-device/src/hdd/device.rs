//! The running disk: queue, mechanism timeline, buffer cache, completions.

use super::geometry::Loc;
use super::model::{round_ns, HddModel, HddSeek, Overheads, QueuePolicy};
use crate::done::DoneQueue;
use hvio_core::{Completion, Device, DeviceInfo, Nanos, Op, Request, ServiceBreakdown};
use std::collections::VecDeque;
use std::sync::Arc;

/// One read segment of the buffer: blocks `start..end` are held; when the
/// segment is being prefetched into, `end` is where prefetching began.
#[derive(Debug, Clone, Copy, Default)]
struct Segment {
    start: u64,
    end: u64,
    /// Prefetch target (exclusive).
    limit: u64,
    stamp: u64,
    valid: bool,
}

/// The read-ahead in progress: the head reads `lbn0..` from time `t0`.
#[derive(Debug, Clone, Copy)]
struct Prefetch {
    seg: usize,
    t0: f64,
    lbn0: u64,
    loc0: Loc,
}

/// A dirty extent of the write-back buffer.
#[derive(Debug, Clone, Copy)]
struct Dirty {
    lbn: u64,
    n: u64,
}

/// Counters for reports and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HddStats {
    pub reads: u64,
    pub writes: u64,
    pub read_hits: u64,
    /// Reads served by the read-ahead stream already under way.
    pub stream_hits: u64,
    pub buffered_writes: u64,
    pub destages: u64,
}

/// A simulated hard disk (see `docs/hdd-model.md`).
pub struct Hdd {
    m: Arc<HddModel>,
    seek: Arc<HddSeek>,
    head: Loc,
    head_lbn: u64,
    last_write: bool,
    mech_free: Nanos,
    pending: VecDeque<Request>,
    /// Where each pending request starts (located once, at submission).
    pending_at: VecDeque<Loc>,
    done: DoneQueue,
    in_flight: usize,
    segs: Vec<Segment>,
    prefetch: Option<Prefetch>,
    dirty: VecDeque<Dirty>,
    dirty_sectors: u64,
    clock: u64,
    stats: HddStats,
}

impl Hdd {
    pub fn new(model: HddModel) -> Hdd {
        let m = Arc::new(model);
        let depth = m.queue_depth.max(1);
        Hdd {
            seek: Arc::new(HddSeek::new(m.clone())),
            head: m.geom.locate(0),
            head_lbn: 0,
            last_write: false,
            mech_free: 0,
            pending: VecDeque::with_capacity(depth + 1),
            pending_at: VecDeque::with_capacity(depth + 1),
            done: DoneQueue::with_capacity(depth + 1),
            in_flight: 0,
            segs: vec![Segment::default(); m.cache.segments],
            prefetch: None,
            dirty: VecDeque::with_capacity(64),
            dirty_sectors: 0,
            clock: 0,
            stats: HddStats::default(),
            m,
        }
    }

    /// The model's fixed parameters.
    pub fn model(&self) -> &HddModel {
        &self.m
    }

    pub fn stats(&self) -> HddStats {
        self.stats
    }

    /// Where prefetching has got to by time `t`, and the head position then.
    fn prefetch_progress(&self, p: &Prefetch, t: f64) -> (u64, Loc) {
        let limit = self.segs[p.seg].limit;
        if t <= p.t0 || p.lbn0 >= limit {
            return (p.lbn0, p.loc0);
        }
        let ((_, lbn), loc) = self.m.stream(p.t0, p.loc0, p.lbn0, limit, false, t);
        (lbn, loc)
    }

    /// Stops any read-ahead at time `t`, keeping what it read; the head stays where it got to.
    fn stop_prefetch(&mut self, t: f64) {
        if let Some(p) = self.prefetch.take() {
            let (lbn, loc) = self.prefetch_progress(&p, t);
            let s = &mut self.segs[p.seg];
            s.end = lbn;
            s.limit = lbn;
            if lbn > p.lbn0 {
                self.head = loc;
            }
        }
    }

    /// The read segment to refill: an invalid one or the least recently used.
    fn victim(&self) -> usize {
        // Invalid segments rank first (key 0), then by age; branch free.
        let key = |(i, s): (usize, &Segment)| ((s.stamp * s.valid as u64) << 6) | i as u64;
        (self.segs.iter().enumerate().map(key).min().unwrap_or(0) & 63) as usize
    }

    fn touch(&mut self, i: usize) {
        self.clock += 1;
        self.segs[i].stamp = self.clock;
    }

    /// Holds blocks `a..b` in the buffer at time `t` (dirty data counts)?
    fn cached(&self, a: u64, b: u64, t: f64) -> Option<usize> {
        // Branch-free first pass (random requests rarely match): segments whose
        // range, counting prefetch still to come, could hold `a..b`.
        let mut mask = 0u64;
        for (i, s) in self.segs.iter().enumerate() {
            let c = (s.valid as u64) & ((a >= s.start) as u64) & ((b <= s.limit) as u64);
            mask |= c << i;
        }
        while mask != 0 {
            let i = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            let end = match &self.prefetch {
                Some(p) if p.seg == i => self.prefetch_progress(p, t).0,
                _ => self.segs[i].end,
            };
            if b <= end {
                return Some(i);
            }
        }
        if !self.dirty.is_empty() && self.dirty.iter().any(|d| a >= d.lbn && b <= d.lbn + d.n) {
            return Some(usize::MAX);
        }
        None
    }

    /// Forgets buffered read data overlapping `a..b` (it is being overwritten).
    fn invalidate(&mut self, a: u64, b: u64) {
        if let Some(p) = self.prefetch {
            let s = self.segs[p.seg];
            if a < s.limit.max(s.end) && b > s.start {
                self.prefetch = None;
                let s = &mut self.segs[p.seg];
                s.end = s.end.min(a).max(s.start);
                s.limit = s.end;
            }
        }
        for s in &mut self.segs {
            if s.valid && a < s.end && b > s.start {
                if s.start < a {
                    s.end = a;
                    s.limit = a;
                } else {
                    s.valid = false;
                }
            }
        }
    }

    fn overhead(&self, kind: usize) -> f64 {
        self.m.overheads.0[kind][self.last_write as usize]
    }

    /// Starts `rq` on the mechanism at `t`; returns its completion.
    fn serve(&mut self, rq: Request, t: Nanos) -> Completion {
        let tf = t as f64;
        let n = (rq.sectors as u64).max(1);
        let (a, b) = (rq.sector, rq.sector + n);
        let mut sb = [0.0f64; 4]; // overhead, seek, rotation, transfer
        let mut hit = false;
        let ph = self.m.phases;
        match rq.op {
            Op::Read => {
                self.stats.reads += 1;
                let xr = self.m.bus_per_sector;
                if let Some(i) = self.cached(a, b, tf) {
                    // Full hit: data goes straight from the buffer.
                    hit = true;
                    self.stats.read_hits += 1;
                    if i != usize::MAX {
                        self.touch(i);
                        self.extend_prefetch(i, a, b);
                        self.reanchor(i, b);
                    }
                    sb[0] = self.overhead(Overheads::READ_HIT) + ph.data_prep + ph.complete[0];
                    sb[3] = n as f64 * xr;
                } else if let Some(p) = self.stream_target(a) {
                    // The read-ahead under way will bring the data.
                    self.stats.stream_hits += 1;
                    self.touch(p.seg);
                    self.extend_prefetch(p.seg, a, b);
                    let t_b = self.reanchor(p.seg, b);
                    let oh = self.overhead(Overheads::READ_HIT) + ph.data_prep;
                    let bus_end = (tf + oh + n as f64 * xr).max(t_b + xr);
                    sb[0] = oh + ph.complete[0];
                    sb[3] = bus_end - tf - oh;
                } else {
                    self.stop_prefetch(tf);
                    let oh = self.overhead(Overheads::READ_MISS);
                    // Partial hit: only the part not in the buffer comes off the media.
                    let mut mask = 0u64;
                    for (i, s) in self.segs.iter().enumerate() {
                        let c =
                            (s.valid as u64) & ((a >= s.start) as u64) & ((a < s.end) as u64) & ((s.end < b) as u64);
                        mask |= c << i;
                    }
                    let seg = (mask != 0).then(|| 63 - mask.leading_zeros() as usize);
                    let from = seg.map_or(a, |i| self.segs[i].end);
                    let acc = self.m.access(self.head, tf + oh, from, b - from, false);
                    let media_start = tf + oh + acc.seek + acc.rotation;
                    let t_end = media_start + acc.transfer;
                    // Data flows to the host as it comes off the media, at the bus rate.
                    // The drive reconnects once the buffer holds the watermark's worth (at least a sector).
                    let media_n = (b - from) as f64;
                    let mark = if ph.watermark_by_request {
                        ph.read_watermark * n as f64
                    } else {
                        ph.read_watermark * self.m.cache.segment_sectors as f64
                    };
                    let ready = mark.ceil().clamp(1.0, media_n) / media_n * acc.transfer;
                    let bus_start = media_start + ready + ph.read_reconnect + ph.data_prep;
                    let bus_end = (bus_start + n as f64 * xr).max(t_end + xr);
                    sb = [oh + ph.complete[0], acc.seek, acc.rotation, bus_end - media_start];
                    self.head = acc.end;
                    self.head_lbn = b;
                    self.fill_segment(seg, a, b, t_end);
                }
            }
            Op::Write => {
                self.stats.writes += 1;
                self.stop_prefetch(tf);
                self.invalidate(a, b);
                let oh = self.overhead(Overheads::WRITE_MISS);
                let mech = ph.write_mech_delay.unwrap_or(oh);
                let mut acc = self.m.access(self.head, tf + mech, a, n, true);
                let mut media_start = tf + mech + acc.seek + acc.rotation;
                let xw = self.m.bus_write_per_sector;
                let bus_start = tf + ph.write_data_delay.unwrap_or(oh + ph.data_prep);
                let bus_end = bus_start + n as f64 * xw;
                // The media can only write what has arrived: when the host
                // interface is slower than the media, the write starts late
                // enough not to overtake the data, whole revolutions later.
                let sector_t = acc.transfer / n as f64;
                let need = bus_start + xw + (n - 1) as f64 * (xw - sector_t).max(0.0);
                if media_start < need {
                    let turns = ((need - media_start) / self.m.rev).ceil();
                    acc.rotation += turns * self.m.rev;
                    media_start += turns * self.m.rev;
                }
                let t_end = media_start + acc.transfer;
                let done = t_end.max(bus_end + ph.write_disconnect) + ph.write_reconnect + ph.complete[1];
                sb = [mech, acc.seek, acc.rotation, done - media_start];
                self.head = acc.end;
                self.head_lbn = b;
                if self.m.cache.read_hits_on_write_data && !self.segs.is_empty() {
                    let i = self.victim();
                    self.segs[i] = Segment {
                        start: a,
                        end: b,
                        limit: b,
                        stamp: 0,
                        valid: true,
                    };
                    self.touch(i);
                }
            }
            Op::Flush | Op::Discard => {
                if rq.op == Op::Discard {
                    self.invalidate(a, b);
                }
                sb[0] = self.overhead(Overheads::WRITE_HIT);
            }
        }
        self.last_write = rq.op == Op::Write;
        completion(rq, t, sb, hit)
    }

    /// The read-ahead under way, if it covers (or is about to reach) `a`.
    fn stream_target(&self, a: u64) -> Option<Prefetch> {
        let p = self.prefetch?;
        let s = &self.segs[p.seg];
        if a < s.start || a >= s.limit.max(p.lbn0 + 1) {
            return None;
        }
        Some(p)
    }

    /// The host consumed `a..b` of segment `i`: if it is being prefetched
    /// into, keep reading ahead of the host (the segment is a ring buffer).
    fn extend_prefetch(&mut self, i: usize, a: u64, b: u64) {
        if self.prefetch.is_some_and(|p| p.seg == i) {
            let c = &self.m.cache;
            let until = (b + c.read_ahead)
                .min(b.max(a + c.segment_sectors))
                .min(self.m.geom.capacity());
            let s = &mut self.segs[i];
            if until > s.limit {
                s.limit = until;
                s.start = s.start.max(until.saturating_sub(c.segment_sectors));
            }
        }
    }

    /// Moves the read-ahead's reference point forward to block `b` (keeping
    /// its timing exactly), so later progress queries walk only new tracks.
    /// Returns when block `b - 1` has been read.
    fn reanchor(&mut self, seg: usize, b: u64) -> f64 {
        let Some(p) = self.prefetch.filter(|p| p.seg == seg) else {
            return 0.0;
        };
        if b <= p.lbn0 {
            return p.t0;
        }
        let ((t_b, _), last) = self.m.stream(p.t0, p.loc0, p.lbn0, b, false, f64::INFINITY);
        if b < self.m.geom.capacity() {
            let (t0, loc0) = self.continue_at(t_b, last, b);
            self.prefetch = Some(Prefetch { seg, t0, lbn0: b, loc0 });
        }
        t_b
    }

    /// When the head, having read up to `last` at `t`, is ready to read `lbn`.
    fn continue_at(&self, t: f64, last: Loc, lbn: u64) -> (f64, Loc) {
        let g = &self.m.geom;
        let loc = g.next_loc(last).unwrap_or_else(|| g.locate(lbn));
        let mv = self.m.reposition(last, loc, false);
        (t + mv + self.m.rot_wait(t + mv, loc), loc)
    }

    /// After a media read of `a..b` ending at `t_end`: hold it in a segment and read ahead.
    fn fill_segment(&mut self, reuse: Option<usize>, a: u64, b: u64, t_end: f64) {
        if self.segs.is_empty() {
            return;
        }
        let c = self.m.cache;
        let i = reuse.unwrap_or_else(|| self.victim());
        let start = if reuse.is_some() {
            self.segs[i].start.max(b.saturating_sub(c.segment_sectors))
        } else {
            a
        };
        let limit = (b + c.read_ahead)
            .min(start + c.segment_sectors)
            .max(b)
            .min(self.m.geom.capacity());
        self.segs[i] = Segment {
            start,
            end: b,
            limit,
            stamp: 0,
            valid: true,
        };
        self.touch(i);
        if limit > b {
            let (t0, loc0) = self.continue_at(t_end, self.head, b);
            self.prefetch = Some(Prefetch {
                seg: i,
                t0,
                lbn0: b,
                loc0,
            });
        }
    }

    /// Writes the oldest dirty extents (merged when contiguous) to the media at `t`.
    fn destage(&mut self, t: Nanos) {
        let Some(mut d) = self.dirty.pop_front() else { return };
        while let Some(next) = self.dirty.front() {
            if next.lbn == d.lbn + d.n {
                d.n += next.n;
                self.dirty.pop_front();
            } else {
                break;
            }
        }
        self.dirty_sectors -= d.n;
        self.stats.destages += 1;
        self.stop_prefetch(t as f64);
        let acc = self.m.access(self.head, t as f64, d.lbn, d.n, true);
        self.head = acc.end;
        self.head_lbn = d.lbn + d.n;
        self.last_write = true;
        self.mech_free = t + round_ns(acc.seek + acc.rotation + acc.transfer);
    }

    /// Picks the next pending request that has arrived by `t`.
    fn pick(&self, t: Nanos) -> Option<usize> {
        let first = self.pending.iter().position(|r| r.arrival <= t)?;
        if self.m.policy == QueuePolicy::Fcfs || self.pending.len() == 1 {
            return Some(first);
        }
        if t.saturating_sub(self.pending[first].arrival) >= self.m.max_queue_wait {
            return Some(first);
        }
        let tf = t as f64;
        let mut best = (f64::INFINITY, first);
        for (i, (r, &at)) in self.pending.iter().zip(&self.pending_at).enumerate() {
            if r.arrival > t {
                continue;
            }
            let n = (r.sectors as u64).max(1);
            let cost = if !matches!(r.op, Op::Read | Op::Write)
                || (r.op == Op::Read && self.cached(r.sector, r.sector + n, tf).is_some())
            {
                0.0
            } else {
                self.m.positioning(self.head, tf, at, r.op == Op::Write)
            };
            if cost < best.0 {
                best = (cost, i);
            }
        }
        Some(best.1)
    }

    /// Runs the mechanism's timeline up to `now`: starts queued requests and destages.
    fn run_mech(&mut self, now: Nanos) {
        while self.mech_free <= now {
            let t = self.mech_free;
            if let Some(i) = self.pick(t) {
                let rq = self.pending[i];
                if rq.op == Op::Flush && !self.dirty.is_empty() {
                    self.destage(t);
                    continue;
                }
                self.pending.remove(i);
                self.pending_at.remove(i);
                let c = self.serve(rq, t);
                self.mech_free = c.done;
                self.push_done(c);
            } else if !self.dirty.is_empty() {
                self.destage(t);
            } else if let Some(a) = self.pending.iter().map(|r| r.arrival).min() {
                if a > now {
                    break;
                }
                self.mech_free = a;
            } else {
                break;
            }
        }
    }

    fn push_done(&mut self, c: Completion) {
        self.done.push(c);
    }
}

/// A completion whose parts add up exactly (each part rounded on the running total).
fn completion(rq: Request, t: Nanos, parts: [f64; 4], cache_hit: bool) -> Completion {
    let mut acc = t as f64;
    let mut prev = t;
    let mut out = [0 as Nanos; 4];
    for (o, p) in out.iter_mut().zip(parts) {
        acc += p;
        let r = round_ns(acc);
        *o = r - prev;
        prev = r;
    }
    Completion {
        rq,
        start: t,
        done: prev,
        service: ServiceBreakdown {
            overhead: out[0],
            seek: out[1],
            rotation: out[2],
            transfer: out[3],
            cache_hit,
        },
    }
}

impl Device for Hdd {
    fn info(&self) -> DeviceInfo {
        DeviceInfo {
            capacity: self.m.geom.capacity(),
            rotational: true,
            queue_depth: self.m.queue_depth,
            seek: self.seek.clone(),
        }
    }

    fn in_flight(&self) -> usize {
        self.in_flight
    }

    fn can_accept(&self) -> bool {
        self.in_flight < self.m.queue_depth
    }

    fn submit(&mut self, rq: Request, now: Nanos) {
        self.in_flight += 1;
        let c = &self.m.cache;
        let n = rq.sectors as u64;
        if rq.op == Op::Write && c.write_back && !rq.fua && n > 0 && self.dirty_sectors + n <= c.write_buffer_sectors {
            // Accepted into the write buffer: acknowledged now, written later.
            self.stats.writes += 1;
            self.stats.buffered_writes += 1;
            self.invalidate(rq.sector, rq.sector + n);
            let ph = &self.m.phases;
            let oh = self.overhead(Overheads::WRITE_HIT) + ph.data_prep + ph.complete[1];
            let bus = n as f64 * self.m.bus_write_per_sector;
            self.dirty.push_back(Dirty { lbn: rq.sector, n });
            self.dirty_sectors += n;
            self.last_write = true;
            let c = completion(rq, now, [oh, 0.0, 0.0, bus], true);
            self.push_done(c);
        } else {
            self.pending.push_back(rq);
            // Only a reordering queue needs positions up front.
            let at = if self.m.queue_depth > 1 {
                self.m.geom.locate(rq.sector)
            } else {
                Loc::default()
            };
            self.pending_at.push_back(at);
        }
        self.run_mech(now);
    }

    fn next_event(&self) -> Option<Nanos> {
        let mech = if !self.pending.is_empty() || !self.dirty.is_empty() {
            Some(self.mech_free)
        } else {
            None
        };
        match (self.done.next(), mech) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn advance(&mut self, now: Nanos, out: &mut Vec<Completion>) {
        self.run_mech(now);
        self.in_flight -= self.done.drain_due(now, out);
    }

    fn head(&self) -> u64 {
        self.head_lbn
    }
}
