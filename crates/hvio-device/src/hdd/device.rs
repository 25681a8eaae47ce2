//! The running disk: queue, mechanism timeline, buffer cache, completions.

use super::geometry::Loc;
use super::model::{
    ceil, round_ns, to_f64, DestagePolicy, HddModel, HddSeek, Overheads, QueuePolicy, ReadAheadExtent, ReadAheadPolicy,
};
use crate::done::DoneQueue;
use hvio_core::{Completion, Device, DeviceInfo, Nanos, Op, Request};
use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
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
    /// Where the last host read held in this segment ended (`NO_READ`: none,
    /// e.g. written data): the next read of a sequential run starts there.
    read_end: u64,
    /// The read-ahead into this segment, stopped on its first track at this
    /// time, where it got to not yet worked out ([`Hdd::settle`]): `end`
    /// and `limit` are still those it had while under way (`limit` bounds
    /// what it read, so the span stays a superset for the hit scan).
    stopped: Option<(Prefetch, f64)>,
}

/// The read segments in the order they were last touched: a circular
/// doubly linked list over their indices through a head node (index
/// `segments`), least recently touched first.
#[derive(Debug, Clone)]
struct SegmentLru {
    /// Each node's previous and next (one pair, so a relink looks each
    /// node up once).
    links: Vec<[u32; 2]>,
}

impl SegmentLru {
    /// Segments `0..n` in index order.
    fn new(n: usize) -> SegmentLru {
        let len = n as u32 + 1;
        SegmentLru {
            links: (0..len).map(|i| [(i + len - 1) % len, (i + 1) % len]).collect(),
        }
    }

    /// The least recently touched segment (the head when there are none).
    fn first(&self) -> usize {
        self.links[self.links.len() - 1][1] as usize
    }

    /// Segment `i` becomes the most recently touched.
    fn make_last(&mut self, i: usize) {
        let head = self.links.len() - 1;
        let [p, n] = self.links[i];
        if n as usize == head {
            // Already the most recent (a stream's segment, touched again).
            return;
        }
        self.links[p as usize][1] = n;
        self.links[n as usize][0] = p;
        let last = self.links[head][0];
        self.links[last as usize][1] = i as u32;
        self.links[i] = [last, head as u32];
        self.links[head][0] = i as u32;
    }
}

/// A segment's range for the hit scan, `start..limit` as its start and
/// length (0 for an invalid or empty segment): block `a` is in it when
/// `a - start < len` in wrapping arithmetic, one comparison instead of three.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Span {
    start: u64,
    len: u64,
}

impl Span {
    #[inline(always)]
    fn of(s: &Segment) -> Span {
        if s.valid && s.limit > s.start {
            Span {
                start: s.start,
                len: s.limit - s.start,
            }
        } else {
            Span::default()
        }
    }

    #[inline(always)]
    fn holds(&self, a: u64) -> bool {
        a.wrapping_sub(self.start) < self.len
    }
}

/// The segments' spans in 32 bits for the hit scan of a block below
/// `u32::MAX` (every block of a disk under 2 TiB), sixteen segments a step
/// in four SSE2 vectors packed into one mask, where the 64-bit scan takes
/// one at a time (SSE2 has no 64-bit compare). A span that does not fit 32
/// bits stands for every block below `u32::MAX`: its segments come out as
/// candidates that the full span then settles ([`Hdd::holding`]).
#[derive(Debug, Clone, PartialEq, Eq)]
struct NarrowSpans {
    /// The spans four to a group, padded with empty spans to a whole
    /// number of steps of sixteen.
    groups: Vec<SpanGroup>,
}

/// Four spans of [`NarrowSpans`], side by side as the scan loads them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SpanGroup {
    /// Each span's start with its top bit flipped: `a` less it is `a -
    /// start` with its top bit flipped, what the signed compare needs,
    /// in one subtraction.
    start_biased: [u32; 4],
    /// Each span's length with its top bit flipped: the unsigned `a - start
    /// < len` is then the signed compare SSE2 has.
    len_biased: [u32; 4],
}

/// The top bit of a `u32`, flipped to compare unsigned values as signed ones.
const SIGN: u32 = 1 << 31;

/// Groups of four spans [`NarrowSpans::candidates`] takes a step.
const GROUPS_A_STEP: usize = 4;

impl NarrowSpans {
    /// `n` empty spans.
    fn new(n: usize) -> NarrowSpans {
        let empty = SpanGroup {
            start_biased: [SIGN; 4],
            len_biased: [SIGN; 4],
        };
        NarrowSpans {
            groups: vec![empty; n.div_ceil(4 * GROUPS_A_STEP) * GROUPS_A_STEP],
        }
    }

    /// Span `i` becomes `span`.
    #[inline]
    fn set(&mut self, i: usize, span: Span) {
        // (`start + len` is the segment's limit: no overflow.)
        let (start, len) = if span.start + span.len <= u32::MAX as u64 {
            (span.start as u32, span.len as u32)
        } else {
            (0, u32::MAX)
        };
        let g = &mut self.groups[i / 4];
        g.start_biased[i % 4] = start ^ SIGN;
        g.len_biased[i % 4] = len ^ SIGN;
    }

    /// Bit `i` for each span `64 * k + i` of the 64 from `64 * k` on that
    /// holds block `a`.
    #[inline]
    fn candidates(&self, k: usize, a: u32) -> u64 {
        let groups = &self.groups[16 * k..self.groups.len().min(16 * k + 16)];
        let mut mask = 0u64;
        for (q, step) in groups.chunks_exact(GROUPS_A_STEP).enumerate() {
            mask |= (Self::step_candidates(step, a) as u64) << (16 * q);
        }
        mask
    }

    /// Bit `i` for each span `i` of the sixteen of `step` that holds block `a`.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn step_candidates(step: &[SpanGroup], a: u32) -> u32 {
        use std::arch::x86_64::*;
        let step: &[SpanGroup; GROUPS_A_STEP] = step.try_into().expect("a step's groups");
        // SAFETY: SSE2 is part of x86_64, and each load reads one group's
        // four `u32`s.
        unsafe {
            let at = _mm_set1_epi32(a as i32);
            let holds = |g: &SpanGroup| {
                let s = _mm_loadu_si128(g.start_biased.as_ptr() as *const __m128i);
                let l = _mm_loadu_si128(g.len_biased.as_ptr() as *const __m128i);
                _mm_cmplt_epi32(_mm_sub_epi32(at, s), l)
            };
            // Each lane all ones or zeros: packed with signed saturation
            // they stay so, in span order, one byte each.
            let low = _mm_packs_epi32(holds(&step[0]), holds(&step[1]));
            let high = _mm_packs_epi32(holds(&step[2]), holds(&step[3]));
            _mm_movemask_epi8(_mm_packs_epi16(low, high)) as u32
        }
    }

    /// Bit `i` for each span `i` of the sixteen of `step` that holds block `a`.
    #[cfg(not(target_arch = "x86_64"))]
    fn step_candidates(step: &[SpanGroup], a: u32) -> u32 {
        let spans = step.iter().flat_map(|g| g.start_biased.iter().zip(&g.len_biased));
        spans.enumerate().fold(0, |mask, (i, (&s, &l))| {
            mask | (((a.wrapping_sub(s) as i32) < (l as i32)) as u32) << i
        })
    }
}

/// `Segment::read_end` of a segment no read has used.
const NO_READ: u64 = u64::MAX;

/// The read-ahead in progress: the head reads `lbn0..` from time `t0`.
#[derive(Debug, Clone, Copy)]
struct Prefetch {
    seg: usize,
    t0: f64,
    lbn0: u64,
    loc0: Loc,
}

/// A hit check's finding that the read-ahead anchored at `t0`, `lbn0` had
/// read up to block `b` at `t_b`, the head then on `last`: what
/// [`Hdd::reanchor`] to `b` walks for, which the hit's reanchoring takes
/// instead.
#[derive(Debug, Clone, Copy)]
struct ReachedAt {
    t0: f64,
    lbn0: u64,
    b: u64,
    t_b: f64,
    last: Loc,
}

/// A dirty run of the write-back buffer (keyed by its first block): `n`
/// blocks, waiting since `since` (when the oldest of them was buffered, or
/// when a destage last wrote the run's front part).
#[derive(Debug, Clone, Copy)]
struct Dirty {
    n: u64,
    since: Nanos,
}

/// Destaged blocks kept in the write-back buffer (`CacheParams::keep_destaged`),
/// keyed by first block: `n` clean blocks, last used at `stamp`.
#[derive(Debug, Clone, Copy)]
struct Clean {
    n: u64,
    stamp: u64,
}

/// SPTF destage examines this many dirty runs on each side of the head (by
/// block number), plus the oldest.
const DESTAGE_CANDIDATES: usize = 8;

/// The most cylinders a read-ahead may span for [`Hdd::prefetch_finished`]
/// to bound its walk (a longer one is walked).
const BOUNDED_SPAN: usize = 8;

/// `[d]`: the longest a read's move from one track to the next can take
/// when the two are at most `d` cylinders apart (a head switch, or a seek of
/// 1 to `d` cylinders: `HddModel::reposition` takes the larger of the two).
fn move_bounds(m: &HddModel) -> [f64; BOUNDED_SPAN + 1] {
    let mut b = [m.head_switch.max(0.0); BOUNDED_SPAN + 1];
    for d in 1..=BOUNDED_SPAN {
        let seek = if (d as u32) < m.geom.cylinders {
            m.seek_ns(0, d as u32)
        } else {
            0.0
        };
        b[d] = b[d - 1].max(seek);
    }
    b
}

/// Counters for reports and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HddStats {
    /// Reads served.
    pub reads: u64,
    /// Writes served.
    pub writes: u64,
    /// Reads served from the cache.
    pub read_hits: u64,
    /// Reads served by the read-ahead stream already under way.
    pub stream_hits: u64,
    /// Writes acknowledged from the buffer.
    pub buffered_writes: u64,
    /// Buffered writes that had to wait for room in the buffer.
    pub buffer_waits: u64,
    /// Destage operations (buffered writes written to the media).
    pub destages: u64,
    /// Sectors written to the media by destages.
    pub destaged_sectors: u64,
    /// Destages forced by the age bound.
    pub aged_destages: u64,
    /// Reads that continued a sequential run (`ReadAheadPolicy::Adaptive` only).
    pub sequential_reads: u64,
    /// Reads served (at least in part) from destaged data kept clean in the
    /// write-back buffer (`keep_destaged` only).
    pub clean_hits: u64,
    /// Clean sectors evicted to make room for writes (`keep_destaged` only).
    pub clean_evicted_sectors: u64,
}

/// A simulated hard disk (see `docs/hdd-model.md`).
pub struct Hdd {
    m: Arc<HddModel>,
    seek: Arc<HddSeek>,
    /// [`move_bounds`] of the model.
    move_bound: [f64; BOUNDED_SPAN + 1],
    /// The most sectors a track of the disk has.
    max_spt: u64,
    /// The read watermark of a segment in whole sectors (`phases.read_watermark`
    /// of `cache.segment_sectors`, rounded up), what a read miss waits for
    /// before it reconnects unless the watermark is by request.
    segment_watermark: f64,
    head: Loc,
    head_lbn: u64,
    last_write: bool,
    mech_free: Nanos,
    pending: VecDeque<Request>,
    /// Where each pending request starts (located once, at submission; only
    /// a reordering queue needs it) and when it was submitted to the drive.
    pending_at: VecDeque<(Loc, Nanos)>,
    done: DoneQueue,
    in_flight: usize,
    segs: Vec<Segment>,
    /// Each segment's `start..limit` (`Span::of`) in 32 bits, kept beside
    /// `segs` for the scan every read of a block below `u32::MAX` makes
    /// (`spans_match` checks them in debug builds).
    narrow: NarrowSpans,
    /// The segments in the order they were last touched (a circular list
    /// through index `segs.len()`, its head): once every segment is valid,
    /// the least recently used, the victim, is the first, without a scan.
    lru: SegmentLru,
    /// Segments not valid: while there are any, the victim is one of them
    /// and is found by a scan.
    invalid_segs: usize,
    /// Segments whose stopped read-ahead is not worked out yet
    /// (`Segment::stopped`): while there are none, nothing is settled.
    unsettled: usize,
    prefetch: Option<Prefetch>,
    /// The last hit check's walk to a read's end, for the reanchoring after it.
    reached: Cell<Option<ReachedAt>>,
    /// The last block of the track on which the last read-ahead's limit
    /// was worked out (`read_ahead_end`, to a track's end) and its
    /// position: the block `prefetch_finished` locates when the read-ahead
    /// runs to that limit.
    track_last: Cell<Option<(u64, Loc)>>,
    /// Dirty runs by first block: disjoint and never adjacent (coalesced on insert).
    dirty: BTreeMap<u64, Dirty>,
    /// The same runs by age: (since, first block).
    dirty_age: BTreeSet<(Nanos, u64)>,
    /// FIFO destage only: the buffered writes in arrival order.
    arrivals: VecDeque<(u64, u64)>,
    /// Blocks in `dirty`.
    dirty_sectors: u64,
    /// The run the destage in progress (until `mech_free`) writes: still in the buffer.
    destaging: Option<(u64, u64)>,
    /// Where the last destage ended (`DestagePolicy::Cscan`'s sweep).
    destaged_to: u64,
    /// `keep_destaged`: destaged blocks still in the buffer, by first block
    /// (disjoint; never overlapping dirty blocks once their destage ended).
    clean: BTreeMap<u64, Clean>,
    /// The same extents by last use: (stamp, first block).
    clean_lru: BTreeSet<(u64, u64)>,
    /// Blocks in `clean`.
    clean_sectors: u64,
    clean_clock: u64,
    /// When the host last gave the drive a command or the drive last finished one.
    last_host: Nanos,
    /// The segment of the read just served, if it continued a sequential run
    /// (`ReadAheadPolicy::Adaptive`): the minimum read-ahead follows it.
    sequential: Option<usize>,
    clock: u64,
    stats: HddStats,
}

impl Hdd {
    /// A disk in its initial state (heads at cylinder 0, empty cache).
    pub fn new(model: HddModel) -> Hdd {
        let m = Arc::new(model);
        let depth = m.queue_depth.max(1);
        Hdd {
            seek: Arc::new(HddSeek::new(m.clone())),
            move_bound: move_bounds(&m),
            max_spt: m.geom.zones.iter().map(|z| z.spt as u64).max().unwrap_or(1),
            segment_watermark: ceil(m.phases.read_watermark * m.cache.segment_sectors as f64),
            head: m.geom.locate(0),
            head_lbn: 0,
            last_write: false,
            mech_free: 0,
            pending: VecDeque::with_capacity(depth + 1),
            pending_at: VecDeque::with_capacity(depth + 1),
            done: DoneQueue::with_capacity(depth + 1),
            in_flight: 0,
            segs: vec![Segment::default(); m.cache.segments],
            narrow: NarrowSpans::new(m.cache.segments),
            lru: SegmentLru::new(m.cache.segments),
            invalid_segs: m.cache.segments,
            unsettled: 0,
            prefetch: None,
            reached: Cell::new(None),
            track_last: Cell::new(None),
            dirty: BTreeMap::new(),
            dirty_age: BTreeSet::new(),
            arrivals: VecDeque::new(),
            dirty_sectors: 0,
            destaging: None,
            destaged_to: 0,
            clean: BTreeMap::new(),
            clean_lru: BTreeSet::new(),
            clean_sectors: 0,
            clean_clock: 0,
            last_host: 0,
            sequential: None,
            clock: 0,
            stats: HddStats::default(),
            m,
        }
    }

    /// The model's fixed parameters.
    pub fn model(&self) -> &HddModel {
        &self.m
    }

    /// The counters so far.
    pub fn stats(&self) -> HddStats {
        self.stats
    }

    /// Blocks dirty in the write-back buffer (not counting a run being destaged).
    pub fn dirty_sectors(&self) -> u64 {
        self.dirty_sectors
    }

    /// Destaged blocks kept clean in the write-back buffer (`keep_destaged`).
    pub fn clean_sectors(&self) -> u64 {
        self.clean_sectors
    }

    /// Blocks the write-back buffer's memory holds at `now`: dirty, being
    /// destaged and (`keep_destaged`) clean; never above `write_buffer_sectors`
    /// (a block rewritten while its destage is under way counts twice, as
    /// `fits` counts it).
    pub fn buffered_sectors(&self, now: Nanos) -> u64 {
        self.dirty_sectors + self.busy(now) + self.clean_sectors
    }

    /// Dirty runs in the write-back buffer (coalesced: disjoint, never adjacent).
    pub fn dirty_runs(&self) -> usize {
        self.dirty.len()
    }

    /// Block `lbn` is in the write-back buffer at `now`: dirty or being destaged?
    pub fn is_dirty(&self, lbn: u64, now: Nanos) -> bool {
        self.dirty_holds(lbn, lbn + 1)
            || self
                .destaging
                .is_some_and(|(s, n)| now < self.mech_free && (s..s + n).contains(&lbn))
    }

    /// The completion of the one request in flight, when the drive has
    /// nothing else to do (nothing queued, buffered or being destaged): what
    /// `advance` to its time hands over, and the drive's state after it,
    /// without asking `next_event` first. A closed-loop replay at depth 1
    /// (`validate::replay`) takes its completions so; `None`: use
    /// `next_event` and `advance`.
    pub fn take_lone_completion(&mut self) -> Option<Completion> {
        if self.in_flight != 1 || !self.nothing_waiting() {
            return None;
        }
        let c = self.done.take_only()?;
        // `advance(c.done)` with nothing waiting: the mechanism idles until then.
        self.mech_free = self.mech_free.max(c.done);
        self.in_flight = 0;
        Some(c)
    }

    /// Where prefetching has got to by time `t`, and the head position then.
    #[inline(always)]
    fn prefetch_progress(&self, p: &Prefetch, t: f64) -> (u64, Loc) {
        let limit = self.segs[p.seg].limit;
        if t <= p.t0 || p.lbn0 >= limit {
            return (p.lbn0, p.loc0);
        }
        // The bound on the walk's time `prefetch_finished` checks is at
        // least a revolution a track and twice that and a head switch a
        // move, and its first track holds at most the sectors from `loc0`
        // on, each further one a track's: no sooner can it be certain that
        // the read-ahead has finished.
        let elapsed = t - p.t0;
        if elapsed <= self.m.rev {
            // A request right after the read-ahead began (a closed loop's
            // next) mostly stops it on its first track.
            if let Some(reached) = self.m.stream_stops_on_first_track(p.t0, p.loc0, p.lbn0, limit, t) {
                return (reached, p.loc0);
            }
            return self.prefetch_walk(p, limit, t);
        }
        let min_moves = (limit - p.lbn0 + p.loc0.sector as u64 - 1) / self.m.geom.spt(p.loc0) as u64;
        if elapsed <= min_moves as f64 * (2.0 * self.m.rev + self.move_bound[0]) + self.m.rev {
            return self.prefetch_walk(p, limit, t);
        }
        if let Some(last) = self.prefetch_finished(p, limit, t) {
            #[cfg(debug_assertions)]
            {
                let ((_, walked), at) = self.m.stream(p.t0, p.loc0, p.lbn0, limit, false, t);
                assert_eq!(
                    (walked, at),
                    (limit, last),
                    "the walk has read the whole read-ahead by {t}"
                );
            }
            return (limit, last);
        }
        self.prefetch_walk(p, limit, t)
    }

    /// The read-ahead `p` has read up to block `b` (at most its segment's
    /// limit) by `t`: `prefetch_progress(p, t).0 >= b`, walking its tracks
    /// up to block `b`. The walk to `b` times each track before the one
    /// holding block `b - 1` as the walk to the limit does; on that one it
    /// runs to `b` where the walk to the limit runs to the track's end (or
    /// the limit), which ends no sooner: when the shorter run ends after
    /// `t`, both stop partway at the same sector. When it ends by `t`, the
    /// walk to the limit has read `b - 1` too, unless `t` is within its
    /// sums' rounding of that end; then (rarely) that walk is taken, to
    /// the end of `b - 1`'s track: a walk to any block from there times
    /// each track up to it as the walk to the limit does, and a track
    /// holds at most `max_spt` blocks. A walk found to reach `b` is the
    /// reanchoring's walk (`reanchor`), which it leaves for it.
    fn prefetch_reaches(&self, p: &Prefetch, b: u64, t: f64) -> bool {
        let limit = self.segs[p.seg].limit;
        let reaches = if b <= p.lbn0 {
            true
        } else if t <= p.t0 || p.lbn0 >= limit {
            false
        } else {
            let ((t_b, reached), last) = self.m.stream(p.t0, p.loc0, p.lbn0, b, false, t);
            if reached < b {
                false
            } else if t - t_b > 1.0 + 1e-12 * t.abs() {
                self.reached.set(Some(ReachedAt {
                    t0: p.t0,
                    lbn0: p.lbn0,
                    b,
                    t_b,
                    last,
                }));
                true
            } else {
                let far_enough = (b - 1).saturating_add(self.max_spt).min(limit);
                self.m.stream(p.t0, p.loc0, p.lbn0, far_enough, false, t).0 .1 >= b
            }
        };
        debug_assert_eq!(reaches, self.prefetch_progress(p, t).0 >= b);
        reaches
    }

    /// Where the read-ahead `p` into a segment up to `limit` has got to by
    /// `t`, walking its tracks.
    #[inline]
    fn prefetch_walk(&self, p: &Prefetch, limit: u64, t: f64) -> (u64, Loc) {
        let ((_, lbn), loc) = self.m.stream(p.t0, p.loc0, p.lbn0, limit, false, t);
        (lbn, loc)
    }

    /// The head's position on block `limit - 1` if the read-ahead `p` has
    /// certainly read up to `limit` by `t`, which is then what walking its
    /// tracks (`HddModel::stream`) returns: the head on the last block. A
    /// request that stops a read-ahead long finished, the common case when
    /// requests are ms apart, needs no walk. Certain means within a bound on
    /// the walk's time: each of its tracks takes at most a revolution to
    /// read and each move to the next at most the longest move of the span
    /// (`move_bounds`) and a revolution's wait, with a margin far above the
    /// rounding of the walk's sums. `None`: not certain (or the read-ahead
    /// leaves its zone or spans more than `BOUNDED_SPAN` cylinders), walk.
    #[inline(never)]
    fn prefetch_finished(&self, p: &Prefetch, limit: u64, t: f64) -> Option<Loc> {
        let g = &self.m.geom;
        let (rev, elapsed) = (self.m.rev, t - p.t0);
        if limit > g.capacity() {
            return None;
        }
        let last = match self.track_last.get() {
            Some((lbn, at)) if lbn == limit - 1 => {
                debug_assert_eq!(
                    at,
                    g.locate(lbn),
                    "the track's last block is where read_ahead_end found it"
                );
                at
            }
            _ => g.locate(limit - 1),
        };
        let span = last.cyl.checked_sub(p.loc0.cyl)? as usize;
        if last.zone != p.loc0.zone || span > BOUNDED_SPAN {
            return None;
        }
        let moves = g.track_in_zone(last).checked_sub(g.track_in_zone(p.loc0))? as f64;
        let bound = (moves + 1.0) * rev + moves * (self.move_bound[span] + rev);
        let margin = 1.0 + 1e-9 * bound + 1e-12 * t.abs();
        (elapsed > bound + margin).then_some(last)
    }

    /// Stops any read-ahead at time `t`, keeping what it read; the head stays where it got to.
    #[inline]
    fn stop_prefetch(&mut self, t: f64) {
        if let Some(p) = self.prefetch.take() {
            let limit = self.segs[p.seg].limit;
            // Stopped on its first track, on the head's track (what
            // `prefetch_progress` takes without a walk): where it got to is
            // worked out only if the segment is looked at before it is
            // refilled, which a random read's segment rarely is. The head
            // stays on the same track either way, and only its track counts
            // for the next move (`HddModel::reposition`).
            if t > p.t0
                && p.lbn0 < limit
                && t - p.t0 <= self.m.rev
                && (p.loc0.cyl, p.loc0.head) == (self.head.cyl, self.head.head)
                && self.m.stops_on_first_track(p.t0, p.loc0, p.lbn0, limit, t)
            {
                self.segs[p.seg].stopped = Some((p, t));
                self.unsettled += 1;
            } else {
                self.stop_prefetch_now(p, t);
            }
        }
    }

    /// Stops the read-ahead `p` at time `t` where it got to. Out of line:
    /// rarely needed at once, and its registers would weigh on every stop.
    #[inline(never)]
    fn stop_prefetch_now(&mut self, p: Prefetch, t: f64) {
        let (lbn, loc) = self.prefetch_progress(&p, t);
        let s = &mut self.segs[p.seg];
        s.end = lbn;
        s.limit = lbn;
        self.sync_span(p.seg);
        if lbn > p.lbn0 {
            self.head = loc;
        }
    }

    /// Segment `i`'s `end` and `limit`, its stopped read-ahead's progress
    /// worked out ([`Segment::stopped`]).
    #[inline]
    fn settled(&self, i: usize) -> (u64, u64) {
        let s = &self.segs[i];
        match s.stopped {
            Some((p, t)) => {
                let reached = self.m.stream_stops_on_first_track(p.t0, p.loc0, p.lbn0, s.limit, t);
                let reached = reached.expect("a lazily stopped read-ahead stops on its first track");
                debug_assert_eq!(reached, self.prefetch_progress(&p, t).0);
                (reached, reached)
            }
            None => (s.end, s.limit),
        }
    }

    /// Segment `i` takes in where its stopped read-ahead got to (what
    /// stopping it at once would have left).
    fn settle(&mut self, i: usize) {
        if self.segs[i].stopped.is_some() {
            let (end, limit) = self.settled(i);
            let s = &mut self.segs[i];
            (s.end, s.limit, s.stopped) = (end, limit, None);
            self.unsettled -= 1;
            self.sync_span(i);
        }
    }

    /// [`Self::settle`] of every segment.
    fn settle_all(&mut self) {
        self.settle_overlapping(0, u64::MAX);
    }

    /// [`Self::settle`] of the segments whose stopped read-ahead may have
    /// read a block of `a..b` (within its limit): a segment whose blocks
    /// are all outside `a..b` is left as it is.
    fn settle_overlapping(&mut self, a: u64, b: u64) {
        debug_assert_eq!(
            self.unsettled,
            self.segs.iter().filter(|s| s.stopped.is_some()).count(),
            "the count of lazily stopped segments"
        );
        if self.unsettled == 0 {
            return;
        }
        for i in 0..self.segs.len() {
            let s = &self.segs[i];
            if s.stopped.is_some() && a < s.limit && b > s.start {
                self.settle(i);
            }
        }
    }

    /// The read segment to refill: an invalid one or the least recently used.
    fn victim(&self) -> usize {
        if self.invalid_segs > 0 || self.segs.is_empty() {
            return self.victim_among(|_| true).unwrap_or(0);
        }
        // Every segment is valid, and each was touched when it became valid:
        // the least recently touched has the lowest stamp.
        let lru = self.lru.first();
        debug_assert_eq!(Some(lru), self.victim_among(|_| true));
        lru
    }

    /// `victim` among the segments no read has used (`None`: every one holds a stream).
    fn victim_without_run(&self) -> Option<usize> {
        self.victim_among(|s| !s.valid || s.read_end == NO_READ)
    }

    /// The segment to refill among those `eligible` says may go: invalid
    /// ones first (age 0), then by age, then by index.
    fn victim_among(&self, eligible: impl Fn(&Segment) -> bool) -> Option<usize> {
        // The first segment of the lowest age (a strict `<` keeps the lowest
        // index among equal ones; ages count touches, so none is `u64::MAX`).
        let (mut best, mut best_age) = (usize::MAX, u64::MAX);
        for (i, s) in self.segs.iter().enumerate() {
            let age = s.stamp * s.valid as u64;
            if age < best_age && eligible(s) {
                (best, best_age) = (i, age);
            }
        }
        (best != usize::MAX).then_some(best)
    }

    /// Segment `i` was used now: the most recently touched. In line (a
    /// clock, a stamp and a relink), where a call took as many
    /// instructions again.
    #[inline(always)]
    fn touch(&mut self, i: usize) {
        self.clock += 1;
        self.segs[i].stamp = self.clock;
        self.lru.make_last(i);
    }

    /// Refills segment `i` with `start..end` (prefetch target `limit`), touched now.
    #[inline]
    fn refill(&mut self, i: usize, start: u64, end: u64, limit: u64) {
        self.invalid_segs -= !self.segs[i].valid as usize;
        // (A stopped read-ahead's progress goes with the blocks.)
        self.unsettled -= self.segs[i].stopped.is_some() as usize;
        self.segs[i] = Segment {
            start,
            end,
            limit,
            stamp: 0,
            valid: true,
            read_end: NO_READ,
            stopped: None,
        };
        self.sync_span(i);
        self.touch(i);
    }

    /// Segment `i`'s span follows its new range.
    #[inline(always)]
    fn sync_span(&mut self, i: usize) {
        self.narrow.set(i, Span::of(&self.segs[i]));
    }

    /// Every segment's narrow span is its range (debug builds' check of
    /// `sync_span`'s callers).
    fn spans_match(&self) -> bool {
        let mut narrow = NarrowSpans::new(self.segs.len());
        for (i, s) in self.segs.iter().enumerate() {
            narrow.set(i, Span::of(s));
        }
        narrow == self.narrow
    }

    /// Holds blocks `a..b` in the buffer at time `t` (dirty data counts)?
    fn cached(&self, a: u64, b: u64, t: f64) -> Option<usize> {
        self.lookup(a, b, t).0
    }

    /// `cached`, and whether any segment's range (counting prefetch still
    /// to come) holds block `a`: when none does, nor does any after the
    /// read-ahead under way stops, so a miss has no partial hit to look for.
    #[inline(always)]
    fn lookup(&self, a: u64, b: u64, t: f64) -> (Option<usize>, bool) {
        debug_assert!(self.spans_match());
        // A random read mostly finds no segment that could hold its first
        // block and nothing in the write-back buffer: a scan without
        // branches, in line, and nothing else.
        let narrow = a < u32::MAX as u64;
        let first = if narrow { self.narrow.candidates(0, a as u32) } else { 0 };
        if narrow && first == 0 && self.segs.len() <= 64 && self.dirty.is_empty() && self.clean.is_empty() {
            return (None, false);
        }
        self.lookup_in_full(a, b, t, first)
    }

    /// [`Self::lookup`] segment by segment, and in the write-back buffer;
    /// `first`: the narrow scan's candidates among the first 64 segments
    /// (for a block below `u32::MAX`).
    #[inline(never)]
    fn lookup_in_full(&self, a: u64, b: u64, t: f64, first: u64) -> (Option<usize>, bool) {
        let mut holds_a = false;
        // A first pass over 64 segments at a time (random requests rarely
        // match), without branches: segments whose range could hold block
        // `a`; `holding` looks at those.
        for k in 0..self.segs.len().div_ceil(64) {
            let mask = if a >= u32::MAX as u64 {
                self.wide_candidates(k, a)
            } else if k == 0 {
                first
            } else {
                self.narrow.candidates(k, a as u32)
            };
            if mask != 0 {
                let (holds, held) = self.holding(64 * k, mask, a, b, t);
                holds_a |= holds;
                if held.is_some() {
                    return (held, true);
                }
            }
        }
        // Dirty data is a hit too. (A run being destaged is not looked at: the
        // mechanism serves nothing before the destage ends, and then the
        // run's blocks sit in a read segment, see `keep_written`, or with
        // `keep_destaged` in the buffer as clean data.)
        let dirty = if self.m.cache.keep_destaged {
            self.buffer_covers(a, b)
        } else {
            self.dirty_holds(a, b)
        };
        (dirty.then_some(usize::MAX), holds_a)
    }

    /// Bit `i` for each segment `64 * k + i` of the 64 from `64 * k` on
    /// whose span holds block `a`, one segment at a time.
    fn wide_candidates(&self, k: usize, a: u64) -> u64 {
        let segs = &self.segs[64 * k..self.segs.len().min(64 * k + 64)];
        segs.iter()
            .enumerate()
            .fold(0, |mask, (i, s)| mask | (Span::of(s).holds(a) as u64) << i)
    }

    /// Whether any of the segments `base + i` for each bit `i` of `mask`
    /// (candidates from a scan) holds block `a`, counting prefetch still to
    /// come, and the first of those that holds `a..b` at time `t`. Out of
    /// line: a random read's scan rarely gets here, and the read-ahead's
    /// progress it may ask for would weigh on every scan.
    #[inline(never)]
    fn holding(&self, base: usize, mut mask: u64, a: u64, b: u64, t: f64) -> (bool, Option<usize>) {
        let mut holds_a = false;
        while mask != 0 {
            let i = base + mask.trailing_zeros() as usize;
            mask &= mask - 1;
            // A candidate of a span wider than 32 bits may not hold `a`,
            // nor one whose stopped read-ahead did not get there.
            let (end, limit) = self.settled(i);
            let s = &self.segs[i];
            if !(s.valid && limit > s.start && a.wrapping_sub(s.start) < limit - s.start) {
                continue;
            }
            holds_a = true;
            if b > limit {
                continue;
            }
            let held = match &self.prefetch {
                Some(p) if p.seg == i => self.prefetch_reaches(p, b, t),
                _ => b <= end,
            };
            if held {
                return (true, Some(i));
            }
        }
        (holds_a, None)
    }

    /// `keep_destaged`: every block of `a..b` is in the write-back buffer,
    /// dirty or clean?
    fn buffer_covers(&self, a: u64, b: u64) -> bool {
        let mut at = a;
        while at < b {
            let d = self.dirty.range(..=at).next_back().map(|(&s, d)| s + d.n);
            let c = self.clean.range(..=at).next_back().map(|(&s, c)| s + c.n);
            match d.into_iter().chain(c).filter(|&e| e > at).max() {
                Some(e) => at = e,
                None => return false,
            }
        }
        true
    }

    /// Any block of `a..b` is held clean (`keep_destaged`)?
    fn clean_overlaps(&self, a: u64, b: u64) -> bool {
        matches!(self.clean.range(..b).next_back(), Some((&s, c)) if s + c.n > a)
    }

    fn take_clean(&mut self, s: u64) -> Clean {
        let c = self.clean.remove(&s).expect("a clean extent starts there");
        self.clean_lru.remove(&(c.stamp, s));
        self.clean_sectors -= c.n;
        c
    }

    fn put_clean(&mut self, s: u64, n: u64, stamp: u64) {
        self.clean.insert(s, Clean { n, stamp });
        self.clean_lru.insert((stamp, s));
        self.clean_sectors += n;
    }

    /// Marks the clean extents overlapping `a..b` most recently used (a read hit them).
    fn touch_clean(&mut self, a: u64, b: u64) {
        let hit: Vec<u64> = self
            .clean
            .range(..b)
            .rev()
            .take_while(|(&s, c)| s + c.n > a)
            .map(|(&s, _)| s)
            .collect();
        for s in hit {
            let c = self.take_clean(s);
            self.clean_clock += 1;
            self.put_clean(s, c.n, self.clean_clock);
        }
    }

    /// Forgets the clean copies of blocks `a..b` (rewritten, written through or discarded).
    fn drop_clean(&mut self, a: u64, b: u64) {
        if self.clean.is_empty() {
            return;
        }
        while let Some((&s, &c)) = self.clean.range(..b).next_back() {
            if s + c.n <= a {
                break;
            }
            self.take_clean(s);
            if s < a {
                self.put_clean(s, a - s, c.stamp);
            }
            if s + c.n > b {
                self.put_clean(b, s + c.n - b, c.stamp);
            }
        }
    }

    /// `keep_destaged`: blocks `a..b` were destaged; they stay in the buffer
    /// as clean data, except those written again meanwhile (dirty again).
    fn keep_clean(&mut self, a: u64, b: u64) {
        self.drop_clean(a, b);
        self.clean_clock += 1;
        let stamp = self.clean_clock;
        let mut at = a;
        while at < b {
            if let Some((&s, d)) = self.dirty.range(..=at).next_back() {
                if s + d.n > at {
                    at = (s + d.n).min(b);
                    continue;
                }
            }
            let next = self.dirty.range(at..b).next().map_or(b, |(&s, _)| s);
            self.put_clean(at, next - at, stamp);
            at = next;
        }
    }

    /// `keep_destaged`: evicts clean data, least recently used first, until
    /// the buffer's memory holds no more than its size at `t`.
    fn evict_clean(&mut self, t: Nanos) {
        let cap = self.m.cache.write_buffer_sectors;
        while self.buffered_sectors(t) > cap {
            let Some(&(_, s)) = self.clean_lru.first() else { break };
            let c = self.take_clean(s);
            self.stats.clean_evicted_sectors += c.n;
        }
    }

    /// All of blocks `a..b` are dirty in the write-back buffer?
    fn dirty_holds(&self, a: u64, b: u64) -> bool {
        if self.dirty.is_empty() {
            return false;
        }
        matches!(self.dirty.range(..=a).next_back(), Some((&s, d)) if b <= s + d.n)
    }

    /// Removes the dirty run starting at `s`.
    fn take_dirty(&mut self, s: u64) -> Dirty {
        let d = self.dirty.remove(&s).expect("a dirty run starts there");
        self.dirty_age.remove(&(d.since, s));
        self.dirty_sectors -= d.n;
        d
    }

    fn put_dirty(&mut self, s: u64, d: Dirty) {
        self.dirty.insert(s, d);
        self.dirty_age.insert((d.since, s));
        self.dirty_sectors += d.n;
    }

    /// Buffers blocks `a..b` as dirty at `now`, coalescing with the runs they
    /// overlap or touch (rewriting dirty blocks takes no more room).
    fn add_dirty(&mut self, a: u64, b: u64, now: Nanos) {
        let (mut start, mut end, mut since) = (a, b, now);
        while let Some((&s, d)) = self.dirty.range(..=end).next_back() {
            if s + d.n < start {
                break;
            }
            let d = self.take_dirty(s);
            start = start.min(s);
            end = end.max(s + d.n);
            since = since.min(d.since);
        }
        self.put_dirty(start, Dirty { n: end - start, since });
        if self.m.cache.destage == DestagePolicy::Fifo {
            self.arrivals.push_back((a, b - a));
        }
    }

    /// Blocks `a..b` are no longer dirty (written through, destaged or
    /// discarded); whether any of them was.
    fn clean(&mut self, a: u64, b: u64) -> bool {
        if self.dirty.is_empty() {
            return false;
        }
        let mut any = false;
        while let Some((&s, d)) = self.dirty.range_mut(..b).next_back() {
            let Dirty { n, since } = *d;
            if s + n <= a {
                break;
            }
            any = true;
            if s < a {
                // The front part stays dirty, under the same first block and
                // age: its entries stay, shortened.
                d.n = a - s;
                self.dirty_sectors -= s + n - a;
            } else {
                self.take_dirty(s);
            }
            if s + n > b {
                self.put_dirty(b, Dirty { n: s + n - b, since });
            }
            // The runs are disjoint: those before one that starts at or
            // before `a` end before `a`.
            if s <= a {
                break;
            }
        }
        any
    }

    /// Forgets buffered read data overlapping `a..b` (it is being overwritten).
    fn invalidate(&mut self, a: u64, b: u64) {
        // (Only segments holding a block of `a..b` change below.)
        self.settle_overlapping(a, b);
        if let Some(p) = self.prefetch {
            let s = self.segs[p.seg];
            if a < s.limit.max(s.end) && b > s.start {
                self.prefetch = None;
                let s = &mut self.segs[p.seg];
                s.end = s.end.min(a).max(s.start);
                s.limit = s.end;
                self.sync_span(p.seg);
            }
        }
        let mut changed = false;
        for s in &mut self.segs {
            if s.valid && a < s.end && b > s.start {
                if s.start < a {
                    s.end = a;
                    s.limit = a;
                } else {
                    s.valid = false;
                    self.invalid_segs += 1;
                }
                changed = true;
            }
        }
        if changed {
            for i in 0..self.segs.len() {
                self.sync_span(i);
            }
        }
    }

    fn overhead(&self, kind: usize) -> f64 {
        self.m.overheads.0[kind][self.last_write as usize]
    }

    /// NCQ: how long before `t` the drive had the command submitted at
    /// `sub`. A drive with a queue depth > 1 takes queued commands in (the
    /// command overhead, and for a write its data into the buffer) while the
    /// mechanism serves earlier ones, so that much of a command's overhead is
    /// off the mechanism's path: a contiguous write queued early enough
    /// starts on the next sector instead of a revolution later. 0 at depth 1,
    /// where a command reaches the drive only once the last one completed.
    fn taken_in(&self, sub: Nanos, t: f64) -> f64 {
        if self.m.queue_depth <= 1 {
            return 0.0;
        }
        (t - sub as f64).max(0.0)
    }

    /// Starts `rq`, submitted at `sub`, on the mechanism at `t`; returns
    /// its service's parts (overhead, seek, rotation, transfer, ns) and
    /// whether the cache served it, for [`write_completion`].
    fn serve(&mut self, rq: Request, sub: Nanos, t: Nanos) -> ([f64; 4], bool) {
        let tf = to_f64(t);
        // The part of the command overhead already done (NCQ), ns.
        let lead = self.taken_in(sub, tf);
        let n = (rq.sectors as u64).max(1);
        let (a, b) = (rq.sector, rq.sector + n);
        let mut sb = [0.0f64; 4]; // overhead, seek, rotation, transfer
        let mut hit = false;
        // `self.m.phases` is read where each field is used: a copy of the
        // whole struct here was kept on the stack across the calls below.
        match rq.op {
            Op::Read => {
                self.stats.reads += 1;
                let xr = self.m.bus_per_sector;
                let run = self.sequential_run(a);
                if run.is_some() {
                    self.stats.sequential_reads += 1;
                }
                let (held, holds_a) = self.lookup(a, b, tf);
                if let Some(i) = held {
                    // Full hit: data goes straight from the buffer.
                    hit = true;
                    self.stats.read_hits += 1;
                    if i != usize::MAX {
                        self.settle(i);
                        self.touch(i);
                        self.extend_prefetch(i, a, b);
                        self.reanchor(i, b);
                        self.read_ended(i, b, run);
                    } else {
                        if self.m.cache.keep_destaged && self.clean_overlaps(a, b) {
                            self.stats.clean_hits += 1;
                            self.touch_clean(a, b);
                        }
                        if let Some(r) = run {
                            // Served from the write-back buffer: the run goes on all the same
                            // (the stream table sees addresses, not where the data was).
                            self.touch(r);
                            self.read_ended(r, b, run);
                        }
                    }
                    let oh = self.overhead(Overheads::READ_HIT);
                    sb[0] = (oh - lead).max(0.0) + self.m.phases.data_prep + self.m.phases.complete[0];
                    sb[3] = n as f64 * xr;
                } else if let Some(p) = self.stream_target(a) {
                    // The read-ahead under way will bring the data.
                    self.stats.stream_hits += 1;
                    self.touch(p.seg);
                    self.extend_prefetch(p.seg, a, b);
                    let t_b = self.reanchor(p.seg, b);
                    self.read_ended(p.seg, b, run);
                    let oh = self.overhead(Overheads::READ_HIT);
                    let oh = (oh - lead).max(0.0) + self.m.phases.data_prep;
                    let bus_end = (tf + oh + n as f64 * xr).max(t_b + xr);
                    sb[0] = oh + self.m.phases.complete[0];
                    sb[3] = bus_end - tf - oh;
                } else {
                    self.stop_prefetch(tf);
                    let oh = self.overhead(Overheads::READ_MISS);
                    let oh = (oh - lead).max(0.0);
                    // Partial hit: only the part not in the buffer comes off
                    // the media. (Stopping the read-ahead only shrank its
                    // segment, so no segment holds `a` now unless `holds_a`.)
                    let seg = if holds_a {
                        self.settle_all();
                        self.segs
                            .iter()
                            .rposition(|s| s.valid && a >= s.start && a < s.end && s.end < b)
                    } else {
                        debug_assert!(!self.segs.iter().any(|s| s.valid && a >= s.start && a < s.end));
                        None
                    };
                    let from = seg.map_or(a, |i| self.segs[i].end);
                    let acc = self.m.access(self.head, tf + oh, from, b - from, false);
                    let media_start = tf + oh + acc.seek + acc.rotation;
                    let t_end = media_start + acc.transfer;
                    // Data flows to the host as it comes off the media, at the bus rate.
                    // The drive reconnects once the buffer holds the watermark's worth (at least a sector).
                    let media_n = to_f64(b - from);
                    let mark = if self.m.phases.watermark_by_request {
                        ceil(self.m.phases.read_watermark * n as f64)
                    } else {
                        self.segment_watermark
                    };
                    let ready = mark.clamp(1.0, media_n) / media_n * acc.transfer;
                    let bus_start = media_start + ready + self.m.phases.read_reconnect + self.m.phases.data_prep;
                    let bus_end = (bus_start + n as f64 * xr).max(t_end + xr);
                    sb = [
                        oh + self.m.phases.complete[0],
                        acc.seek,
                        acc.rotation,
                        bus_end - media_start,
                    ];
                    self.head = acc.end;
                    self.head_lbn = b;
                    // A run's next read refills the run's own segment.
                    if let Some(i) = self.fill_segment(seg.or(run), a, b, t_end, run.is_some()) {
                        if seg.or(run).is_none() && self.m.cache.read_passing_blocks {
                            self.keep_passing(i, acc.start, acc.rotation);
                        }
                        self.read_ended(i, b, run);
                    }
                }
            }
            Op::Write => {
                self.stats.writes += 1;
                self.stop_prefetch(tf);
                self.invalidate(a, b);
                // Written through: the buffer's copy of these blocks is clean.
                self.clean(a, b);
                self.drop_clean(a, b);
                let oh = self.overhead(Overheads::WRITE_MISS);
                let mech = self.m.phases.write_mech_delay.unwrap_or(oh);
                // Under NCQ a queued write's data may be in before the mechanism is free.
                let mech = (mech - lead).max(0.0);
                let mut acc = self.m.access(self.head, tf + mech, a, n, true);
                let mut media_start = tf + mech + acc.seek + acc.rotation;
                let xw = self.m.bus_write_per_sector;
                let bus_start = tf - lead + self.m.phases.write_data_delay.unwrap_or(oh + self.m.phases.data_prep);
                let bus_end = bus_start + n as f64 * xw;
                // The media can only write what has arrived: when the host
                // interface is slower than the media, the write starts late
                // enough not to overtake the data, whole revolutions later.
                let sector_t = acc.transfer / n as f64;
                let need = bus_start + xw + (n - 1) as f64 * (xw - sector_t).max(0.0);
                if media_start < need {
                    let turns = ceil((need - media_start) / self.m.rev);
                    acc.rotation += turns * self.m.rev;
                    media_start += turns * self.m.rev;
                }
                let t_end = media_start + acc.transfer;
                let done = t_end.max(bus_end + self.m.phases.write_disconnect)
                    + self.m.phases.write_reconnect
                    + self.m.phases.complete[1];
                sb = [mech, acc.seek, acc.rotation, done - media_start];
                self.head = acc.end;
                self.head_lbn = b;
                self.keep_written(a, b);
            }
            Op::Flush | Op::Discard => {
                if rq.op == Op::Discard {
                    self.invalidate(a, b);
                    self.clean(a, b);
                    self.drop_clean(a, b);
                }
                sb[0] = self.overhead(Overheads::WRITE_HIT);
            }
        }
        self.last_write = rq.op == Op::Write;
        (sb, hit)
    }

    /// Blocks `a..b` were written to the media: keep them for read hits, if the drive does.
    fn keep_written(&mut self, a: u64, b: u64) {
        if !self.m.cache.read_hits_on_write_data || self.segs.is_empty() {
            return;
        }
        let victim = match self.m.cache.read_ahead_policy {
            ReadAheadPolicy::Drive => Some(self.victim()),
            // The segments are the controller's stream table: written data
            // takes none that a read uses (else, with as many streams as
            // segments, each destage ends the least recently served stream).
            ReadAheadPolicy::Adaptive => self.victim_without_run(),
        };
        if let Some(i) = victim {
            self.refill(i, a.max(b.saturating_sub(self.m.cache.segment_sectors)), b, b);
        }
    }

    /// `CacheParams::read_passing_blocks`: a media read starting at the
    /// block at `from` waited `wait` ns on its track; the blocks of the
    /// track that passed under the head meanwhile, up to that block, join
    /// segment `i` (within the segment's size: they do not take the
    /// read-ahead's room).
    fn keep_passing(&mut self, i: usize, from: Loc, wait: f64) {
        let g = &self.m.geom;
        let mut at = from;
        // Whole sectors that passed under the head, back to the track's first.
        let passed = (wait / (self.m.rev / g.spt(at) as f64)) as u64;
        at.sector -= passed.min(at.sector as u64) as u32;
        let first = g.lbn_ceil_at(at);
        let seg_sectors = self.m.cache.segment_sectors;
        let s = &mut self.segs[i];
        let lo = first.max(s.limit.saturating_sub(seg_sectors));
        if lo < s.start {
            s.start = lo;
            self.sync_span(i);
        }
    }

    /// `ReadAheadPolicy::Adaptive`: the segment whose last read ended where
    /// a read starting at `a` continues it (at most `sequential_gap` before).
    fn sequential_run(&self, a: u64) -> Option<usize> {
        let c = &self.m.cache;
        if c.read_ahead_policy != ReadAheadPolicy::Adaptive {
            return None;
        }
        self.segs
            .iter()
            .position(|s| s.valid && s.read_end != NO_READ && s.read_end <= a && a - s.read_end <= c.sequential_gap)
    }

    /// A read ending at `b` was served from or into segment `i`; `run`: it
    /// continued a sequential run (the minimum read-ahead follows it).
    fn read_ended(&mut self, i: usize, b: u64, run: Option<usize>) {
        self.segs[i].read_end = b;
        if self.m.cache.drop_read_data {
            // The read's blocks were sent: they leave the segment.
            let s = &mut self.segs[i];
            s.start = s.start.max(b);
            self.sync_span(i);
        }
        if run.is_some() {
            self.sequential = Some(i);
        }
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

    /// Where the read-ahead after a read of `a..b` may go, held in a segment
    /// that starts at `seg_start` (before the segment's own bound). In line
    /// for a read-ahead to the segment's end (the default disk's), the
    /// others out of line ([`Self::read_ahead_end_on_media`]).
    #[inline(always)]
    fn read_ahead_end(&self, seg_start: u64, a: u64, b: u64) -> u64 {
        let c = &self.m.cache;
        if c.read_ahead_extent == ReadAheadExtent::Segment {
            return b.saturating_add(c.read_ahead);
        }
        self.read_ahead_end_on_media(seg_start, a, b)
    }

    /// [`Self::read_ahead_end`], whatever the extent.
    #[inline(never)]
    fn read_ahead_end_on_media(&self, seg_start: u64, a: u64, b: u64) -> u64 {
        let c = &self.m.cache;
        let g = &self.m.geom;
        let ahead = b.saturating_add(c.read_ahead);
        match c.read_ahead_extent {
            ReadAheadExtent::Segment => ahead,
            // The read-ahead never switches heads (or, for a cylinder, never
            // seeks): it ends with the track (cylinder) the read ended on.
            ReadAheadExtent::Track if b > 0 => ahead.min(g.track_end_lbn(g.locate(b - 1))),
            ReadAheadExtent::Cylinder if b > 0 => {
                let cyl = g.cylinder_of(b - 1);
                let mut end = g.track_end_lbn(g.locate(b - 1));
                while end < g.capacity() && end < ahead {
                    let next = g.locate(end);
                    if next.cyl != cyl {
                        break;
                    }
                    end = g.track_end_lbn(next);
                }
                ahead.min(end)
            }
            ReadAheadExtent::Track | ReadAheadExtent::Cylinder => ahead,
            ReadAheadExtent::DecreasingPrefetch => {
                if b >= g.capacity() {
                    return b;
                }
                let loc = g.locate(b);
                let track = g.track_blocks(loc, b);
                let last = Loc {
                    sector: track.last_sector,
                    ..loc
                };
                self.track_last.set(Some((track.end - 1, last)));
                if seg_start < track.first {
                    // (DiskSim counts the sectors of the read's first track.)
                    track.end + g.spt(g.locate(a)) as u64
                } else {
                    track.end
                }
            }
        }
    }

    /// The host consumed `a..b` of segment `i`: if it is being prefetched
    /// into, keep reading ahead of the host (the segment is a ring buffer).
    fn extend_prefetch(&mut self, i: usize, a: u64, b: u64) {
        if self.prefetch.is_some_and(|p| p.seg == i) {
            let c = &self.m.cache;
            let until = self
                .read_ahead_end(self.segs[i].start, a, b)
                .min(b.max(a.saturating_add(c.segment_sectors)))
                .min(self.m.geom.capacity());
            let s = &mut self.segs[i];
            if until > s.limit {
                s.limit = until;
                s.start = s.start.max(until.saturating_sub(c.segment_sectors));
                self.sync_span(i);
            }
        }
    }

    /// When the read-ahead under way (into segment `seg`, if given) has read
    /// `min_read_ahead` sectors past block `b` (or its segment's limit): the
    /// mechanism is not free before (0 when there is no such read-ahead or no minimum).
    fn min_read_ahead_until(&self, b: u64, seg: Option<usize>) -> Nanos {
        let m = self.m.cache.min_read_ahead;
        let Some(p) = self.prefetch.filter(|p| m > 0 && seg.is_none_or(|i| i == p.seg)) else {
            return 0;
        };
        let target = b.saturating_add(m).min(self.segs[p.seg].limit);
        if target <= p.lbn0 {
            return 0;
        }
        let ((t, _), _) = self.m.stream(p.t0, p.loc0, p.lbn0, target, false, f64::INFINITY);
        ceil(t) as Nanos
    }

    /// Moves the read-ahead's reference point forward to block `b` (keeping
    /// its timing exactly), so later progress queries walk only new tracks.
    /// Returns when block `b - 1` has been read.
    #[inline(always)]
    fn reanchor(&mut self, seg: usize, b: u64) -> f64 {
        let Some(p) = self.prefetch.filter(|p| p.seg == seg) else {
            return 0.0;
        };
        if b <= p.lbn0 {
            return p.t0;
        }
        // A hit whose check walked to `b` finds its walk there.
        let (t_b, last) = match self.reached.take() {
            Some(r) if (r.t0, r.lbn0, r.b) == (p.t0, p.lbn0, b) => {
                debug_assert_eq!(
                    ((r.t_b, b), r.last),
                    self.m.stream(p.t0, p.loc0, p.lbn0, b, false, f64::INFINITY),
                    "the hit check's walk is the reanchoring's"
                );
                (r.t_b, r.last)
            }
            _ => {
                let ((t_b, _), last) = self.m.stream(p.t0, p.loc0, p.lbn0, b, false, f64::INFINITY);
                (t_b, last)
            }
        };
        if b < self.m.geom.capacity() {
            let (t0, loc0) = self.continue_at(t_b, last, b);
            self.prefetch = Some(Prefetch { seg, t0, lbn0: b, loc0 });
        }
        t_b
    }

    /// When the head, having read up to `last` at `t`, is ready to read `lbn`.
    fn continue_at(&self, t: f64, last: Loc, lbn: u64) -> (f64, Loc) {
        let g = &self.m.geom;
        let loc = g.locate_next(last, lbn);
        let mv = self.m.reposition(last, loc, false);
        (t + mv + self.m.rot_wait(t + mv, loc), loc)
    }

    /// After a media read of `a..b` ending at `t_end`: hold it in a segment
    /// (`reuse`, else the victim) and read ahead. `run`: the read continues
    /// a sequential run, whose segment is a ring buffer (its oldest blocks
    /// make room for the read-ahead). Returns the segment.
    fn fill_segment(&mut self, reuse: Option<usize>, a: u64, b: u64, t_end: f64, run: bool) -> Option<usize> {
        if self.segs.is_empty() {
            return None;
        }
        let i = reuse.unwrap_or_else(|| self.victim());
        if reuse.is_some() {
            self.settle(i);
        }
        // A reused segment keeps its blocks when they reach `a` (a partial
        // hit, or a run's next read right after them); else it starts over.
        let start = if reuse.is_none() || self.segs[i].end < a {
            a
        } else if run {
            let room = b
                .saturating_add(self.m.cache.read_ahead)
                .saturating_sub(self.m.cache.segment_sectors)
                .min(a);
            self.segs[i].start.max(room)
        } else {
            self.segs[i].start.max(b.saturating_sub(self.m.cache.segment_sectors))
        };
        // Saturating: read-ahead and segment sizes are user input.
        let ahead = self.read_ahead_end(start, a, b);
        // The read's blocks may give way to the read-ahead (the segment
        // slides at once, as it does under a host consuming a stream).
        let start = if self.m.cache.read_ahead_over_request {
            start.max(ahead.saturating_sub(self.m.cache.segment_sectors)).min(b)
        } else {
            start
        };
        let limit = ahead
            .min(start.saturating_add(self.m.cache.segment_sectors))
            .max(b)
            .min(self.m.geom.capacity());
        self.refill(i, start, b, limit);
        if limit > b {
            let (t0, loc0) = self.continue_at(t_end, self.head, b);
            self.prefetch = Some(Prefetch {
                seg: i,
                t0,
                lbn0: b,
                loc0,
            });
        }
        Some(i)
    }

    /// The dirty run to destage next at `t`, as (first block, blocks).
    fn destage_choice(&mut self, t: Nanos) -> Option<(u64, u64)> {
        if self.m.cache.destage == DestagePolicy::Fifo {
            // The oldest write, merged with the writes after it that continue it.
            while let Some((a, mut n)) = self.arrivals.pop_front() {
                while let Some(&(a2, n2)) = self.arrivals.front() {
                    if a2 != a + n {
                        break;
                    }
                    n += n2;
                    self.arrivals.pop_front();
                }
                // Skip what later writes through (or discards) already cleaned.
                if self.clean(a, a + n) {
                    return Some((a, n));
                }
            }
            return None;
        }
        let &(since, oldest) = self.dirty_age.first()?;
        let s = if t.saturating_sub(since) >= self.m.cache.destage_max_age {
            self.stats.aged_destages += 1;
            oldest
        } else if self.m.cache.destage == DestagePolicy::Cscan {
            // The sweep goes on from where the last destage ended.
            let next = self.dirty.range(self.destaged_to..).next();
            next.or_else(|| self.dirty.iter().next())
                .map(|(&s, _)| s)
                .unwrap_or(oldest)
        } else {
            // Shortest positioning time from the head among the runs nearest
            // it by block number and the oldest.
            let tf = to_f64(t);
            let h = self.head_lbn;
            let after = self.dirty.range(h..).take(DESTAGE_CANDIDATES);
            let before = self.dirty.range(..h).rev().take(DESTAGE_CANDIDATES);
            let mut best = (f64::INFINITY, oldest);
            for s in after.chain(before).map(|(&s, _)| s).chain([oldest]) {
                let cost = self.m.positioning(self.head, tf, self.m.geom.locate(s), true);
                if cost < best.0 {
                    best = (cost, s);
                }
            }
            best.1
        };
        let d = self.take_dirty(s);
        // A long run goes in pieces: reads get in between, room frees as it goes.
        let chunk = self.m.cache.destage_chunk.max(1);
        if d.n > chunk {
            // The rest is being served: its wait (for the age bound) starts again.
            self.put_dirty(
                s + chunk,
                Dirty {
                    n: d.n - chunk,
                    since: t,
                },
            );
            return Some((s, chunk));
        }
        Some((s, d.n))
    }

    /// Writes the next dirty run to the media at `t` (see [`DestagePolicy`]).
    fn destage(&mut self, t: Nanos) {
        let Some((lbn, n)) = self.destage_choice(t) else { return };
        self.stats.destages += 1;
        self.stats.destaged_sectors += n;
        self.stop_prefetch(to_f64(t));
        let acc = self.m.access(self.head, to_f64(t), lbn, n, true);
        self.head = acc.end;
        self.head_lbn = lbn + n;
        self.destaged_to = lbn + n;
        self.last_write = true;
        if !self.m.cache.keep_destaged {
            // (With `keep_destaged` the run stays in the buffer once written: `run_mech`.)
            self.keep_written(lbn, lbn + n);
        }
        self.mech_free = t + round_ns(acc.seek + acc.rotation + acc.transfer);
        self.destaging = Some((lbn, n));
    }

    /// When the idle mechanism may start destaging (`Nanos::MAX`: nothing to
    /// destage): once the host has left it alone for `destage_idle`, at once
    /// when the buffer is half full, and when the oldest run is due by age.
    fn destage_ready(&self) -> Nanos {
        let Some(&(since, _)) = self.dirty_age.first() else {
            return Nanos::MAX;
        };
        let c = &self.m.cache;
        if 2 * self.dirty_sectors >= c.write_buffer_sectors {
            return self.last_host;
        }
        let aged = since.saturating_add(c.destage_max_age);
        (self.last_host + c.destage_idle).min(aged.max(self.last_host))
    }

    /// `rq` goes to the write-back buffer (rather than the media) if there is room?
    fn bufferable(&self, rq: &Request) -> bool {
        let c = &self.m.cache;
        rq.op == Op::Write && c.write_back && !rq.fua && rq.sectors > 0 && rq.sectors as u64 <= c.write_buffer_sectors
    }

    /// Blocks of the destage under way at `t` (still in the buffer).
    fn busy(&self, t: Nanos) -> u64 {
        match self.destaging {
            Some((_, k)) if self.mech_free > t => k,
            _ => 0,
        }
    }

    /// Room for `n` more dirty blocks at `t` (the run being destaged still
    /// takes room; clean data, with `keep_destaged`, makes room by eviction)?
    fn fits(&self, n: u64, t: Nanos) -> bool {
        self.dirty_sectors + self.busy(t) + n <= self.m.cache.write_buffer_sectors
    }

    /// Takes `rq` into the write-back buffer at `t`: acknowledged once its data is in.
    fn buffer_write(&mut self, rq: Request, t: Nanos) {
        let n = rq.sectors as u64;
        self.stats.writes += 1;
        self.stats.buffered_writes += 1;
        // A controller's cache (`ReadAheadPolicy::Adaptive`) takes the write
        // into the blocks it holds: the dirty copy serves reads of them, and
        // the segment keeps the rest (the read-ahead past the written blocks).
        if self.m.cache.read_ahead_policy == ReadAheadPolicy::Drive {
            self.invalidate(rq.sector, rq.sector + n);
        }
        let ph = &self.m.phases;
        let oh = self.overhead(Overheads::WRITE_HIT) + ph.data_prep + ph.complete[1];
        let bus = n as f64 * self.m.bus_write_per_sector;
        // The written blocks are dirty now; clean data (`keep_destaged`, else
        // there is none) makes room.
        self.drop_clean(rq.sector, rq.sector + n);
        self.add_dirty(rq.sector, rq.sector + n, t);
        self.evict_clean(t);
        self.last_write = true;
        self.done
            .push_with(|slot| write_completion(slot, &rq, t, [oh, 0.0, 0.0, bus], true));
    }

    /// Buffers, in arrival order, the queued writes that waited for room and now fit.
    fn admit_waiting(&mut self, t: Nanos) {
        let mut i = 0;
        while i < self.pending.len() {
            let rq = self.pending[i];
            if rq.arrival <= t && self.bufferable(&rq) {
                if !self.fits(rq.sectors as u64, t) {
                    return;
                }
                self.take_pending(i);
                self.buffer_write(rq, t);
            } else {
                i += 1;
            }
        }
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
        let tf = to_f64(t);
        // The head is where the read-ahead under way has got to by `t`.
        let head = match &self.prefetch {
            Some(p) => match self.prefetch_progress(p, tf) {
                (lbn, loc) if lbn > p.lbn0 => loc,
                _ => self.head,
            },
            None => self.head,
        };
        let mut best = (f64::INFINITY, first);
        for (i, (r, &(at, _))) in self.pending.iter().zip(&self.pending_at).enumerate() {
            if r.arrival > t {
                continue;
            }
            let n = (r.sectors as u64).max(1);
            let cost = if self.bufferable(r) {
                // Waits for room in the buffer: reads go first.
                f64::MAX
            } else if !matches!(r.op, Op::Read | Op::Write)
                || (r.op == Op::Read && self.cached(r.sector, r.sector + n, tf).is_some())
            {
                0.0
            } else if let Some(p) = self.stream_target(r.sector).filter(|_| r.op == Op::Read) {
                // The read-ahead under way brings it: the time until it reaches it.
                if r.sector <= p.lbn0 {
                    0.0
                } else {
                    let ((t_a, _), _) = self.m.stream(p.t0, p.loc0, p.lbn0, r.sector, false, f64::INFINITY);
                    (t_a - tf).max(0.0)
                }
            } else {
                self.m.positioning(head, tf, at, r.op == Op::Write)
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
            // Whatever the mechanism did has finished by `t`.
            if let Some((s, n)) = self.destaging.take() {
                if self.m.cache.keep_destaged {
                    self.keep_clean(s, s + n);
                }
            }
            if self.m.cache.write_back && !self.pending.is_empty() {
                self.admit_waiting(t);
            }
            if let Some(i) = self.pick(t) {
                let rq = self.pending[i];
                // A flush waits for the buffer to drain; a write for room in it.
                if (rq.op == Op::Flush || self.bufferable(&rq)) && !self.dirty.is_empty() {
                    self.destage(t);
                    continue;
                }
                let (_, sub) = self.take_pending(i);
                self.start(rq, sub, t);
            } else {
                let ready = self.destage_ready();
                if ready <= t {
                    self.destage(t);
                    continue;
                }
                // Idle until a request arrives or the buffer is due a destage.
                let arrival = self.pending.iter().map(|r| r.arrival).min().unwrap_or(Nanos::MAX);
                let next = arrival.min(ready);
                if next > now {
                    if next == Nanos::MAX {
                        // Nothing to do: nothing can start before `now`.
                        self.mech_free = now;
                    }
                    break;
                }
                self.mech_free = next;
            }
        }
    }

    /// Serves `rq`, submitted at `sub`, on the mechanism from `t`: the
    /// mechanism is busy until it is done (and, after a read, has read
    /// ahead its minimum), and its completion is queued.
    #[inline]
    fn start(&mut self, rq: Request, sub: Nanos, t: Nanos) {
        let (parts, hit) = self.serve(rq, sub, t);
        // Built in its slot of the queue: built here and copied in, it
        // would be read back at once in pieces the processor cannot forward
        // from the stores that wrote it.
        let done = self
            .done
            .push_with(|slot| write_completion(slot, &rq, t, parts, hit))
            .done;
        self.mech_free = done;
        if rq.op == Op::Read {
            let b = rq.sector + rq.sectors as u64;
            let until = match self.m.cache.read_ahead_policy {
                ReadAheadPolicy::Drive => self.min_read_ahead_until(b, None),
                // Only a read continuing a sequential run reads ahead first.
                ReadAheadPolicy::Adaptive => self
                    .sequential
                    .take()
                    .map_or(0, |i| self.min_read_ahead_until(b, Some(i))),
            };
            self.mech_free = self.mech_free.max(until);
        }
        self.last_host = done;
    }

    /// Nothing queued, buffered or destaging: the mechanism has nothing to
    /// start or finish.
    #[inline]
    fn nothing_waiting(&self) -> bool {
        self.pending.is_empty() && self.destaging.is_none() && self.dirty.is_empty()
    }

    /// Removes the `i`-th pending request (the front, at depth 1, without
    /// shifting the queue) and returns its position and submission time.
    fn take_pending(&mut self, i: usize) -> (Loc, Nanos) {
        let at = if i == 0 {
            self.pending.pop_front();
            self.pending_at.pop_front()
        } else {
            self.pending.remove(i);
            self.pending_at.remove(i)
        };
        at.expect("pending_at parallels pending")
    }
}

/// Writes the completion of `rq`, started at `t`, into `slot`: its parts
/// add up exactly (each part rounded on the running total). Field by field:
/// assigned as one value, padding and all, the completion is put together
/// on the stack and read back at once in pieces of other sizes and places
/// than the stores that wrote them, which the processor cannot forward.
#[inline(always)]
fn write_completion(slot: &mut Completion, rq: &Request, t: Nanos, parts: [f64; 4], cache_hit: bool) {
    let mut acc = to_f64(t);
    let mut prev = t;
    let mut out = [0 as Nanos; 4];
    for (o, p) in out.iter_mut().zip(parts) {
        acc += p;
        let r = round_ns(acc);
        *o = r - prev;
        prev = r;
    }
    slot.rq = *rq;
    slot.start = t;
    slot.done = prev;
    let s = &mut slot.service;
    s.overhead = out[0];
    s.seek = out[1];
    s.rotation = out[2];
    s.transfer = out[3];
    s.cache_hit = cache_hit;
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
        self.last_host = self.last_host.max(now);
        // Buffered at once when there is room and no earlier write waits for it.
        if self.bufferable(&rq) && self.fits(rq.sectors as u64, now) && !self.pending.iter().any(|r| self.bufferable(r))
        {
            self.buffer_write(rq, now);
        } else if self.nothing_waiting() && self.mech_free <= now && rq.arrival <= now && !self.bufferable(&rq) {
            // An idle drive with nothing buffered starts the request at once,
            // when it arrived or the mechanism came free: what `run_mech`
            // does with it as the only one queued, without the queue.
            self.start(rq, now, self.mech_free.max(rq.arrival));
            if self.mech_free <= now {
                self.run_mech(now);
            }
            return;
        } else {
            if self.bufferable(&rq) {
                self.stats.buffer_waits += 1;
            }
            self.pending.push_back(rq);
            // Only a reordering queue needs positions up front.
            let at = if self.m.queue_depth > 1 {
                self.m.geom.locate(rq.sector)
            } else {
                Loc::default()
            };
            self.pending_at.push_back((at, now));
        }
        self.run_mech(now);
    }

    fn next_event(&self) -> Option<Nanos> {
        let mech = if !self.pending.is_empty() {
            Some(self.mech_free)
        } else if !self.dirty.is_empty() {
            Some(self.mech_free.max(self.destage_ready()))
        } else {
            None
        };
        match (self.done.next(), mech) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn advance(&mut self, now: Nanos, out: &mut Vec<Completion>) {
        if self.nothing_waiting() {
            // Nothing to start or finish: the mechanism idles until `now`,
            // as `run_mech` would find after a pass over its checks.
            self.mech_free = self.mech_free.max(now);
        } else {
            self.run_mech(now);
        }
        self.in_flight -= self.done.drain_due(now, out);
    }

    fn head(&self) -> u64 {
        self.head_lbn
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HddParams;

    /// A read-ahead stopped on its first track by a read elsewhere is left
    /// unworked in its segment, and a later read of the blocks after the
    /// first finds what it read: `settled` works it out as stopping it at
    /// once does (debug builds check it against `prefetch_progress`), and
    /// the blocks it got to are hits.
    #[test]
    fn a_lazily_stopped_read_ahead_serves_what_it_read() {
        let mut d = Hdd::new(HddParams::default().build().unwrap());
        let cap = d.model().geom.capacity();
        let (mut now, mut id, mut out) = (0, 0, Vec::new());
        let mut read = |d: &mut Hdd, lbn: u64, sectors: u32, at: Nanos| {
            d.submit(Request::new(id, 0, Op::Read, lbn, sectors, at), at);
            id += 1;
            let done = d.next_event().expect("a read in flight");
            out.clear();
            d.advance(done, &mut out);
            assert_eq!(out.len(), 1);
            (done, out[0].service.cache_hit)
        };
        let mut s = 0x9E37_79B9_7F4A_7C15u64;
        let (mut lazily, mut hits) = (0, 0);
        for _ in 0..1_000 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let a = (s >> 8) % (cap - 1_000);
            (now, _) = read(&mut d, a, 8, now);
            let seg = d.prefetch.expect("a miss reads ahead").seg;
            // Half a millisecond later, a read elsewhere stops it.
            (now, _) = read(&mut d, (a + cap / 2) % (cap - 1_000), 8, now + 500_000);
            lazily += d.segs[seg].stopped.is_some() as u32;
            let hit;
            (now, hit) = read(&mut d, a + 8, 2, now);
            hits += hit as u32;
        }
        assert!(lazily > 800, "{lazily}");
        assert!(hits > 800, "{hits}");
    }

    /// Cleaning blocks leaves dirty exactly the blocks written and not
    /// cleaned since, says whether any was dirty, keeps the count of dirty
    /// blocks and the runs by age in step with the runs, and a run's
    /// pieces keep its age: random writes and cleanings of blocks 0..200.
    #[test]
    fn cleaning_keeps_the_dirty_runs_in_step() {
        let mut d = Hdd::new(HddParams::default().build().unwrap());
        let mut dirty = [false; 200];
        let mut s = 0x9E37_79B9_7F4A_7C15u64;
        for now in 0..5_000 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let a = (s >> 8) % 190;
            let b = (a + 1 + (s >> 20) % 30).min(200);
            let range = a as usize..b as usize;
            if s.is_multiple_of(3) {
                d.add_dirty(a, b, now);
                dirty[range].fill(true);
            } else {
                let before = d.dirty.clone();
                let was = dirty[range.clone()].iter().any(|&x| x);
                assert_eq!(d.clean(a, b), was, "{now}: clean {a}..{b}");
                dirty[range].fill(false);
                for (&k, run) in &d.dirty {
                    let (&from, whole) = before.range(..=k).next_back().expect("a piece of a run");
                    assert!(k + run.n <= from + whole.n, "{now}: {k} within {from}");
                    assert_eq!(run.since, whole.since, "{now}: {k} keeps its run's age");
                }
            }
            let held: Vec<bool> = (0..200).map(|x| d.dirty_holds(x, x + 1)).collect();
            assert_eq!(held, dirty, "{now}");
            assert_eq!(d.dirty_sectors, dirty.iter().filter(|&&x| x).count() as u64, "{now}");
            let by_age: BTreeSet<(Nanos, u64)> = d.dirty.iter().map(|(&k, r)| (r.since, k)).collect();
            assert_eq!(d.dirty_age, by_age, "{now}");
        }
    }

    /// The 32-bit scan's candidates are the segments whose span holds the
    /// block, for spans that fit 32 bits; a span that does not fit is a
    /// candidate for every block (its segment is then checked in full).
    #[test]
    fn narrow_scan_finds_the_spans_that_hold_a_block() {
        let n = 70; // two chunks of 64, the last step padded
        let mut narrow = NarrowSpans::new(n);
        let mut spans = vec![Span::default(); n];
        let mut s = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        for round in 0..2_000 {
            let i = (next() % n as u64) as usize;
            let start = match round % 4 {
                0 => next() % 4096,
                1 => u32::MAX as u64 - next() % 4096,
                2 => next() % (1 << 40),
                _ => next() % (1 << 33),
            };
            let len = if round % 7 == 0 { 0 } else { next() % 2048 };
            spans[i] = Span { start, len };
            narrow.set(i, spans[i]);
            let a = match round % 3 {
                0 => spans[i].start + next() % (spans[i].len + 2),
                1 => next() % 4096,
                _ => u32::MAX as u64 - 1 - next() % 4096,
            };
            if a >= u32::MAX as u64 {
                continue;
            }
            for k in 0..n.div_ceil(64) {
                let got = narrow.candidates(k, a as u32);
                // The padding past the last segment holds nothing.
                let segments = n - 64 * k;
                if segments < 64 {
                    assert_eq!(got >> segments, 0, "round {round}, block {a}");
                }
                for (j, sp) in spans.iter().enumerate().skip(64 * k).take(64) {
                    let fits = sp.start + sp.len <= u32::MAX as u64;
                    let want = if fits { sp.holds(a) } else { true };
                    assert_eq!(
                        got >> (j - 64 * k) & 1 == 1,
                        want,
                        "round {round}, segment {j}, block {a}"
                    );
                }
            }
        }
    }
}
