//! The immutable part of an HDD: geometry, seek curve, rotation, timings,
//! cache and queue parameters, and the pure timing functions built on them.

use super::geometry::{Geometry, Loc};
use super::seek::SeekTimes;
use hvio_core::{Nanos, SeekModel};

/// Controller overheads in ns, indexed `[kind][previous op]` with kind
/// 0 = read hit, 1 = read miss, 2 = write hit (buffered), 3 = write miss, and
/// previous op 0 = read, 1 = write.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Overheads(pub [[f64; 2]; 4]);

impl Overheads {
    /// Row of a read served from the cache.
    pub const READ_HIT: usize = 0;
    /// Row of a read from the media.
    pub const READ_MISS: usize = 1;
    /// Row of a write acknowledged from the buffer.
    pub const WRITE_HIT: usize = 2;
    /// Row of a write to the media.
    pub const WRITE_MISS: usize = 3;
}

/// Interface phases around the data transfer (DiskSim's disconnect /
/// reselect model), ns. The mechanism works while the drive is disconnected.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Phases {
    /// Before any data goes to or comes from the host.
    pub data_prep: f64,
    /// Reconnecting to send the data of a read miss.
    pub read_reconnect: f64,
    /// A read miss reconnects once this many sectors are in the buffer:
    /// a fraction of the request (`watermark_by_request`) or of a segment.
    pub read_watermark: f64,
    /// `read_watermark` is a fraction of the request, not of a segment.
    pub watermark_by_request: bool,
    /// After the last data: completion, [read, write].
    pub complete: [f64; 2],
    /// Write-through: from arrival until the mechanism may start (`None`: the write-miss overhead).
    pub write_mech_delay: Option<f64>,
    /// Write-through: from arrival until the data starts to move (`None`: write-miss overhead + data prep).
    pub write_data_delay: Option<f64>,
    /// Write-through: disconnecting after the data arrived.
    pub write_disconnect: f64,
    /// Write-through: reconnecting once the media write is done.
    pub write_reconnect: f64,
}

/// The drive's buffer cache.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CacheParams {
    /// Read segments (0 disables read caching and read-ahead).
    pub segments: usize,
    /// Sectors per segment.
    pub segment_sectors: u64,
    /// Most sectors read ahead past a request.
    pub read_ahead: u64,
    /// DiskSim's "Minimum read-ahead": after a read, the drive keeps
    /// prefetching at least this many sectors past it before it takes the
    /// next command or destages (0: any command stops the read-ahead).
    pub min_read_ahead: u64,
    /// Which reads `min_read_ahead` follows.
    pub read_ahead_policy: ReadAheadPolicy,
    /// Where the read-ahead after a read stops (DiskSim's `Buffer continuous read`).
    pub read_ahead_extent: ReadAheadExtent,
    /// The read-ahead may take the place of the read's own blocks in the
    /// segment: it goes on `read_ahead` sectors past the read, and the
    /// segment slides past the read's blocks to make room (DiskSim's
    /// `Read-ahead over requested` 1 or −1 with a `Maximum read-ahead` of 0;
    /// off: the segment holds the read and the read-ahead after it).
    pub read_ahead_over_request: bool,
    /// A read's blocks leave its segment once sent to the host, so a
    /// re-read of them misses (DiskSim's `Read-ahead over requested` = −1).
    pub drop_read_data: bool,
    /// A read miss also keeps the blocks of its first track that pass under
    /// the head while it waits for its first sector (DiskSim's `Read any
    /// free blocks`): a later read of them, just behind, is a hit.
    pub read_passing_blocks: bool,
    /// `ReadAheadPolicy::Adaptive`: a read continues a sequential run when it
    /// starts at most this many sectors past where an earlier read ended.
    pub sequential_gap: u64,
    /// Keep written data for later read hits.
    pub read_hits_on_write_data: bool,
    /// Write-back: acknowledge writes once buffered, destage later.
    pub write_back: bool,
    /// Sectors the write-back buffer holds.
    pub write_buffer_sectors: u64,
    /// Which dirty extent the drive writes next.
    pub destage: DestagePolicy,
    /// Age bound of `DestagePolicy::Sptf` and `Cscan`: data dirty this long is written
    /// next, wherever the head is, ns.
    pub destage_max_age: Nanos,
    /// `DestagePolicy::Sptf` and `Cscan` write at most this many sectors of a run per
    /// destage (the rest stays dirty and, being next under the head, usually
    /// follows at once): bounds how long a read waits and frees room as it goes.
    pub destage_chunk: u64,
    /// The drive starts destaging (below half a buffer of dirty data) only
    /// once no command has come or finished for this long, ns.
    pub destage_idle: Nanos,
    /// Destaged data stays in the write-back buffer's memory as clean
    /// extents that reads hit, evicted least recently used when writes need
    /// the room (the buffer's size bounds dirty and clean data together;
    /// dirty data is only ever destaged): a storage controller's cache is one
    /// memory, and a written line stays valid once flushed (DiskSim 4.0's
    /// `disksim_cachemem.c`). Off: a destaged run leaves the buffer.
    pub keep_destaged: bool,
}

/// Which reads hold the mechanism for the minimum read-ahead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadAheadPolicy {
    /// Every read (a drive's firmware; DiskSim's "Minimum read-ahead").
    Drive,
    /// Only a read that continues a sequential run: it starts where an
    /// earlier read held in a segment ended (or within `sequential_gap`
    /// sectors past it), as a RAID controller's adaptive read-ahead starts
    /// reading ahead once the most recent reads were sequential. A random
    /// read gets no minimum (the drive still reads ahead until the next
    /// command), and a sequential miss refills its run's own segment.
    Adaptive,
}

/// Where the read-ahead after a read stops, besides `CacheParams::read_ahead`
/// and the segment's end: DiskSim 4.0's `Buffer continuous read` 3, 1, 2, 4
/// (`disk_initiate_seek` stops a background read-ahead that would switch
/// heads (1) or seek (2); `disk_buffer_get_max_readahead` sets scheme 4's target).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadAheadExtent {
    /// On to the end of the segment (3; the default disk).
    Segment,
    /// No further than the end of the track the read ended on (1).
    Track,
    /// No further than the end of the cylinder the read ended on (2).
    Cylinder,
    /// DiskSim's decreasing prefetch (4): to the end of the track holding
    /// the block after the read, and one track's worth further when the
    /// segment already began before that track (the reads are sequential);
    /// `CacheParams::read_ahead` does not apply.
    DecreasingPrefetch,
}

/// The order in which the write-back buffer is destaged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DestagePolicy {
    /// Oldest write first, merged only with the writes that arrived right
    /// after it and continue it (the simple buffer DiskSim models).
    Fifo,
    /// The dirty run (adjacent writes coalesced) with the shortest
    /// positioning time from the head, with an age bound (real drives).
    Sptf,
    /// The next dirty run by block number from where the last destage ended,
    /// wrapping to the lowest (CSCAN), with the same age bound and pieces: a
    /// storage controller's order, which sees block numbers, not the heads
    /// of the disks behind it (Gill & Modha, "WOW: Wise Ordering for
    /// Writes", FAST 2005, §2.2 and §3).
    Cscan,
}

/// How a drive with a queue depth > 1 orders its queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueuePolicy {
    /// First come, first served.
    Fcfs,
    /// Shortest positioning (seek + rotation) time first, with an age bound.
    Sptf,
}

/// Everything about a disk that does not change while it runs.
#[derive(Debug, Clone)]
pub struct HddModel {
    /// The disk's name (from its description).
    pub name: String,
    /// Zones, cylinders and the LBN mapping.
    pub geom: Geometry,
    /// Seek time by distance.
    pub seek: SeekTimes,
    /// One revolution, ns.
    pub rev: f64,
    /// Head switch time, ns.
    pub head_switch: f64,
    /// Added to writes whenever the arm moved or switched heads, ns. May be
    /// negative (DiskSim's `Add. write settling delay` < 0: the seek curve
    /// was measured on writes, reads settle longer); a write's positioning
    /// never goes below zero.
    pub write_settle: f64,
    /// A write's positioning lasts at least this long, even on the same
    /// track, unless it continues a write stream without a gap (DiskSim's
    /// `Minimum seek delay`, applied in `disk_initiate_seek` and its service
    /// time estimates to writes only), ns. 0 on the default disk.
    pub min_write_seek: f64,
    /// Controller overheads by command kind and previous op, ns.
    pub overheads: Overheads,
    /// Host interface time per sector for data moved from/to the buffer, ns.
    pub bus_per_sector: f64,
    /// Host interface time per sector for writes (reads use `bus_per_sector`), ns.
    pub bus_write_per_sector: f64,
    /// SCSI-style phases as DiskSim models them (all 0 for the default disk), ns.
    pub phases: Phases,
    /// The on-board cache.
    pub cache: CacheParams,
    /// Commands the drive accepts at once.
    pub queue_depth: usize,
    /// How it orders its queue.
    pub policy: QueuePolicy,
    /// SPTF age bound: a request queued this long is served next, ns.
    pub max_queue_wait: Nanos,
    /// Each zone's time for one sector to pass under the head, `rev / spt`
    /// ([`HddModel::sector_times`] of `geom` and `rev`): the same quotient
    /// the walk would divide out, looked up instead of divided on every
    /// request (a division's latency, where the transfer and the
    /// read-ahead's stop wait on it).
    pub(crate) sector_ns: Vec<f64>,
}

/// `x` truncated toward zero, for `x` in `0.0..9.0e15` (callers check):
/// one instruction on x86-64, where `as i64` adds the checks that saturate
/// out-of-range values and map NaN to 0, which cannot occur here.
#[inline(always)]
fn trunc_below_2_53(x: f64) -> f64 {
    debug_assert!((0.0..9.0e15).contains(&x), "{x}");
    // SAFETY: `x` is finite and below 2^53, so its truncation fits an `i64`.
    unsafe { x.to_int_unchecked::<i64>() as f64 }
}

/// The fractional part of a number (fast path for the non-negative values used here).
#[inline]
pub(crate) fn frac(x: f64) -> f64 {
    // Below 2^53 the signed conversion is exact and one instruction (the
    // unsigned one takes a dozen on x86-64); the result is the same.
    if (0.0..9.0e15).contains(&x) {
        x - trunc_below_2_53(x)
    } else {
        x - x.floor()
    }
}

/// `x.ceil()`, the same value, without the call to libm's `ceil` that
/// x86-64's baseline instruction set makes of it.
#[inline]
pub(crate) fn ceil(x: f64) -> f64 {
    if (0.0..9.0e15).contains(&x) {
        let t = trunc_below_2_53(x);
        if t < x {
            t + 1.0
        } else {
            x
        }
    } else {
        x.ceil()
    }
}

/// `x.round()` (halves away from zero), the same value, without the call
/// to libm's `round` that x86-64's baseline instruction set makes of it (a
/// validation replay rounds every request's gap).
#[inline]
pub(crate) fn round(x: f64) -> f64 {
    // Below 2^52 the truncation is exact through `i64`, and so is `x` less
    // it (under 1, within `x`'s precision) and the step up.
    if x > 0.0 && x < 4.5e15 {
        let t = trunc_below_2_53(x);
        if x - t >= 0.5 {
            t + 1.0
        } else {
            t
        }
    } else {
        x.round()
    }
}

/// `x as f64` for a time in ns or a count below 2^63 (every one the model
/// serves: 292 years), through the signed conversion: one instruction
/// where the unsigned one takes several on x86-64; the same value.
#[inline(always)]
pub(crate) fn to_f64(x: u64) -> f64 {
    debug_assert!(x < 1 << 63, "{x}");
    x as i64 as f64
}

/// Rounds a non-negative duration in ns to integer ns (negative and NaN
/// to 0, as `as` does). Through the signed conversion, a third of the
/// instructions of the unsigned one on x86-64: the same value below 2^63 ns
/// (292 years).
#[inline(always)]
pub(crate) fn round_ns(x: f64) -> Nanos {
    let y = x + 0.5;
    #[cfg(target_arch = "x86_64")]
    let r = {
        use std::arch::x86_64::{_mm_cvttsd_si64, _mm_set_sd};
        // `cvttsd2si` gives `i64::MIN` for NaN and for values out of range
        // either way, where `as` gives 0, `i64::MIN` and `i64::MAX`: below
        // `max(0)` only the values above the range differ, which take one
        // compare here where `as` checks both ends and NaN.
        // SAFETY: SSE2 is part of x86_64.
        let r = unsafe { _mm_cvttsd_si64(_mm_set_sd(y)) };
        if y >= 9_223_372_036_854_775_808.0 {
            i64::MAX
        } else {
            r
        }
    };
    #[cfg(not(target_arch = "x86_64"))]
    let r = y as i64;
    r.max(0) as Nanos
}

/// Result of one media access.
#[derive(Debug, Clone, Copy, Default)]
pub struct Access {
    /// Seek time, ns.
    pub seek: f64,
    /// Rotational latency, ns.
    pub rotation: f64,
    /// Media transfer including track switches within the request.
    pub transfer: f64,
    /// Where the transfer begins: the first block's position.
    pub start: Loc,
    /// Head position after the access.
    pub end: Loc,
}

impl HddModel {
    /// [`HddModel::sector_ns`] of a geometry and a revolution time: each
    /// zone's `rev / spt`.
    pub(crate) fn sector_times(geom: &Geometry, rev: f64) -> Vec<f64> {
        geom.zones.iter().map(|z| rev / z.spt as f64).collect()
    }

    /// The time one sector of `loc`'s track takes to pass under the head,
    /// ns: `self.rev / self.geom.spt(loc) as f64`.
    #[inline(always)]
    pub fn sector_time(&self, loc: Loc) -> f64 {
        let t = self.sector_ns[loc.zone as usize];
        debug_assert_eq!(
            t.to_bits(),
            (self.rev / self.geom.spt(loc) as f64).to_bits(),
            "sector_ns follows rev and the geometry"
        );
        t
    }

    /// Seek time in ns between two cylinders (seek only, no head switch).
    #[inline]
    pub fn seek_ns(&self, from: u32, to: u32) -> f64 {
        // Every curve gives 0 for no distance: the next track of a stream,
        // or another surface of the cylinder, needs no look-up.
        if from == to {
            return 0.0;
        }
        self.seek.ns(from.abs_diff(to))
    }

    /// Positioning from `from` to the track of `to` (seek or head switch, the
    /// larger when both, plus write settle when anything moved), ns.
    #[inline]
    pub fn reposition(&self, from: Loc, to: Loc, write: bool) -> f64 {
        let mut t = self.seek_ns(from.cyl, to.cyl);
        if from.head != to.head && self.head_switch > t {
            t = self.head_switch;
        }
        if write && t > 0.0 {
            t = (t + self.write_settle).max(0.0);
        }
        t
    }

    /// Rotational wait at time `t` (ns) until sector `loc` comes under the head.
    #[inline]
    pub fn rot_wait(&self, t: f64, loc: Loc) -> f64 {
        let now = t / self.rev;
        let now = frac(now);
        let mut w = self.geom.angle(loc) - now;
        if w < 0.0 {
            w += 1.0;
        }
        // A stream continuing exactly where it left off must not lose a turn to
        // rounding (times are rounded to whole ns between commands): up to
        // 10 ns late is on time.
        if (1.0 - w) * self.rev < 10.0 {
            w = 0.0;
        }
        w * self.rev
    }

    /// Seek + rotation from head position `from` at time `t` to position
    /// `to`: an estimate for queue ordering (no state changes).
    #[inline]
    pub fn positioning(&self, from: Loc, t: f64, to: Loc, write: bool) -> f64 {
        let s = self.access_seek(from, t, to, write);
        s + self.rot_wait(t + s, to)
    }

    /// The positioning that starts a media access: [`Self::reposition`],
    /// and for a write at least `min_write_seek` unless the head is already
    /// at the first sector as it passes (a write stream going on without a
    /// gap, which DiskSim's `disk_check_hda` exempts).
    #[inline]
    fn access_seek(&self, from: Loc, t: f64, to: Loc, write: bool) -> f64 {
        let s = self.reposition(from, to, write);
        if write && s < self.min_write_seek && (s > 0.0 || self.rot_wait(t, to) > 0.0) {
            self.min_write_seek
        } else {
            s
        }
    }

    /// A media access of `n` sectors from `lbn`, the arm at `from` at time `t`.
    pub fn access(&self, from: Loc, t: f64, lbn: u64, n: u64, write: bool) -> Access {
        let to = self.geom.locate(lbn);
        let seek = self.access_seek(from, t, to, write);
        let rotation = self.rot_wait(t + seek, to);
        let start = t + seek + rotation;
        let end_lbn = lbn + n.max(1);
        let (end_t, end) = match self.stream_ends_on_first_track(start, to, lbn, end_lbn) {
            Some(ends) => ends,
            None => {
                let ((end_t, _), end) = self.stream(start, to, lbn, end_lbn, write, f64::INFINITY);
                (end_t, end)
            }
        };
        Access {
            seek,
            rotation,
            transfer: end_t - start,
            start: to,
            end,
        }
    }

    /// The time and head position at the end of a transfer from `lbn` (at
    /// `loc`, under the head at time `t`) up to `end` that ends on `loc`'s
    /// track with no hole among its sectors (most short requests): the walk's
    /// first and only step (`self.stream(t, loc, lbn, end, _,
    /// f64::INFINITY)`), the same sums, in line. Besides the call, this
    /// spares the caller reading back at once, in one piece, the head
    /// position the walk returns stored field by field, which the
    /// processor cannot forward from the stores. `None`: walk.
    #[inline(always)]
    fn stream_ends_on_first_track(&self, t: f64, loc: Loc, lbn: u64, end: u64) -> Option<(f64, Loc)> {
        let g = &self.geom;
        let end = end.min(g.capacity());
        if end <= lbn || end - lbn > (g.spt(loc) - loc.sector) as u64 || !g.run_is_consecutive(loc, lbn, end) {
            return None;
        }
        let last_sector = loc.sector + (end - 1 - lbn) as u32;
        let sector_t = self.sector_time(loc);
        let t_end = t + (last_sector - loc.sector + 1) as f64 * sector_t;
        let last = Loc {
            sector: last_sector,
            ..loc
        };
        debug_assert_eq!(
            self.stream(t, loc, lbn, end, false, f64::INFINITY),
            ((t_end, end), last),
            "a transfer on its first track is the walk's"
        );
        Some((t_end, last))
    }

    /// `self.stream(t, loc, lbn, end, false, stop).0 .1` (the first block
    /// not yet read) when the stop comes before the end of the walk's first
    /// track in a zone without holes: the walk's first step, the same sums,
    /// without the walk. `None`: walk. (In a zone with holes, finding
    /// whether one lies on the track costs about what the walk's first step
    /// saves.)
    #[inline(always)]
    pub fn stream_stops_on_first_track(&self, t: f64, loc: Loc, lbn: u64, end: u64, stop: f64) -> Option<u64> {
        if !self.stops_on_first_track(t, loc, lbn, end, stop) {
            return None;
        }
        let g = &self.geom;
        let rest = (g.spt(loc) - loc.sector) as u64;
        let run_end = (lbn + rest).min(end.min(g.capacity()));
        let sector_t = self.sector_time(loc);
        // Less than the run's sectors (the run ends after `stop`), where the
        // signed conversion gives what `stream`'s `.max(0.0) as u64` does
        // in fewer instructions.
        let done = (((stop - t) / sector_t) as i64).max(0) as u64;
        let reached = if done > 0 { (lbn + done).min(run_end) } else { lbn };
        debug_assert_eq!(
            self.stream(t, loc, lbn, end, false, stop),
            ((stop, reached), loc),
            "the first track's stop is the walk's"
        );
        Some(reached)
    }

    /// Whether [`Self::stream_stops_on_first_track`] answers (`Some`): the
    /// zone has no holes and the stop comes before the walk's first run
    /// ends, without working out where it got to.
    #[inline(always)]
    pub fn stops_on_first_track(&self, t: f64, loc: Loc, lbn: u64, end: u64, stop: f64) -> bool {
        let g = &self.geom;
        if !g.hole_free(loc) {
            return false;
        }
        let rest = (g.spt(loc) - loc.sector) as u64;
        let run_end = (lbn + rest).min(end.min(g.capacity()));
        // `stream`'s physical sectors of the run (its last sector less the
        // first, plus one: a `u32`, converted as such).
        t + ((run_end - lbn) as u32) as f64 * self.sector_time(loc) > stop
    }

    /// Reads (or writes) sequentially from `lbn` (at `loc`, under the head at
    /// time `t`) up to `end` (exclusive), switching tracks as needed, but stops
    /// at time `stop`. Returns ((time, first LBN not yet transferred), head).
    pub fn stream(
        &self,
        mut t: f64,
        mut loc: Loc,
        mut lbn: u64,
        end: u64,
        write: bool,
        stop: f64,
    ) -> ((f64, u64), Loc) {
        let g = &self.geom;
        let end = end.min(g.capacity());
        let mut cur = g.cursor(loc, lbn);
        loop {
            let (run_end, last_sector) = g.track_run_from(loc, lbn, end, &mut cur);
            let sector_t = self.sector_time(loc);
            // Physical sectors passed, including slipped ones in between.
            let phys = (last_sector - loc.sector + 1) as f64;
            let t_run = t + phys * sector_t;
            if t_run > stop {
                // Partway through this track.
                let done = ((stop - t) / sector_t).max(0.0) as u64;
                let mut reached = lbn;
                if done > 0 {
                    reached = g.lbn_ceil_after(loc, lbn, done, &cur).min(run_end);
                }
                return ((stop, reached), loc);
            }
            t = t_run;
            lbn = run_end;
            let mut last = loc;
            last.sector = last_sector;
            if lbn >= end {
                return ((t, lbn), last);
            }
            let next = g.next_loc(last).unwrap_or_else(|| g.locate_from(lbn, &mut cur));
            t += self.reposition(loc, next, write);
            if t > stop {
                return ((stop, lbn), loc);
            }
            t += self.rot_wait(t, next);
            if t > stop {
                return ((stop, lbn), next);
            }
            loc = next;
        }
    }
}

/// The seek estimate schedulers consult (`DeviceInfo::seek`).
#[derive(Debug, Clone)]
pub struct HddSeek {
    model: std::sync::Arc<HddModel>,
    max: Nanos,
}

impl HddSeek {
    /// Seek estimates from `model`.
    pub fn new(model: std::sync::Arc<HddModel>) -> Self {
        let max = (model.seek_ns(0, model.geom.cylinders - 1)).round() as Nanos;
        HddSeek { model, max }
    }
}

impl SeekModel for HddSeek {
    fn seek_time(&self, from: u64, to: u64) -> Nanos {
        let g = &self.model.geom;
        round_ns(self.model.seek_ns(g.cylinder_of(from), g.cylinder_of(to)))
    }
    fn max_seek_time(&self) -> Nanos {
        self.max
    }
    fn revolution(&self) -> Nanos {
        self.model.rev.round() as Nanos
    }
}

#[cfg(test)]
mod tests {
    use super::{round, round_ns, HddModel, Loc};

    /// The default disk (whose zones mostly have no holes) and 50,000 walks'
    /// starts spread over it: (index, block, its position, time).
    fn default_disk_walks() -> (HddModel, impl Iterator<Item = (u64, u64, Loc, f64)>) {
        let m = crate::HddParams::default().build().unwrap();
        let (cap, geom) = (m.geom.capacity(), m.geom.clone());
        let walks = (0..50_000u64).map(move |i| {
            let lbn = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) % cap;
            (i, lbn, geom.locate(lbn), i as f64 * 1234.567)
        });
        (m, walks)
    }

    /// Where a walk stopped on its first track got to, taken without the
    /// walk, is the walk's answer, for stops before, on and past the
    /// track's end.
    #[test]
    fn first_track_stop_is_the_walks() {
        let (m, walks) = default_disk_walks();
        let cap = m.geom.capacity();
        let mut taken = 0;
        for (i, lbn, loc, t) in walks {
            let end = (lbn + 1 + i % 700).min(cap);
            let stop = t + (i % 97) as f64 * m.rev / 80.0 - 3.0;
            if let Some(reached) = m.stream_stops_on_first_track(t, loc, lbn, end, stop) {
                taken += 1;
                assert_eq!(m.stream(t, loc, lbn, end, false, stop), ((stop, reached), loc), "{i}");
            } else if m.geom.hole_free(loc) {
                // Declined only where the walk reads the whole first track.
                let track_end = lbn + (m.geom.spt(loc) - loc.sector) as u64;
                assert!(
                    m.stream(t, loc, lbn, end, false, stop).0 .1 >= track_end.min(end),
                    "{i}"
                );
            }
        }
        assert!(taken > 3_000, "{taken}");
    }

    /// A transfer taken in line as ending on its first track is the
    /// walk's, for transfers ending before, on and past the track's end,
    /// and is declined only where the walk goes on to another track or
    /// passes a hole: `walks` of `m`, each transfer up to `max_len`
    /// blocks; returns how many were taken in line.
    fn check_first_track_transfers(
        m: &HddModel,
        walks: impl Iterator<Item = (u64, u64, Loc, f64)>,
        max_len: u64,
    ) -> usize {
        let cap = m.geom.capacity();
        let mut taken = 0;
        for (i, lbn, loc, t) in walks {
            let end = lbn + 1 + i % max_len;
            let walk = m.stream(t, loc, lbn, end, false, f64::INFINITY);
            match m.stream_ends_on_first_track(t, loc, lbn, end) {
                Some((t_end, last)) => {
                    taken += 1;
                    assert_eq!(((t_end, end.min(cap)), last), walk, "{i}");
                }
                None => {
                    let (_, last) = walk;
                    let moved = (last.cyl, last.head) != (loc.cyl, loc.head);
                    // On the same track, a hole makes the run span more sectors than blocks.
                    assert!(
                        moved || (last.sector - loc.sector) as u64 != end.min(cap) - 1 - lbn,
                        "{i}"
                    );
                }
            }
        }
        taken
    }

    #[test]
    fn first_track_transfer_is_the_walks() {
        let (m, walks) = default_disk_walks();
        let taken = check_first_track_transfers(&m, walks, 2_000);
        assert!(taken > 10_000, "{taken}");
    }

    /// The same in zones with holes (a hole every few dozen sectors, of 1
    /// to 3 sectors, and a zone's spare sectors at its end): a run with no
    /// hole among its sectors is taken in line, one with a hole is walked.
    #[test]
    fn first_track_transfer_with_holes_is_the_walks() {
        use crate::hdd::geometry::{Geometry, Hole, Zone};
        let mut m = crate::HddParams::default().build().unwrap();
        let heads = 4;
        let zones = [(0, 49, 37u32), (50, 99, 29)]
            .iter()
            .map(|&(first, last, spt)| {
                let pbns = (last - first + 1) as u64 * heads as u64 * spt as u64;
                let mut holes: Vec<Hole> = (0..pbns / 23)
                    .map(|k| Hole {
                        pbn: k * 23 + k % 7,
                        len: 1 + k % 3,
                    })
                    .collect();
                holes.push(Hole {
                    pbn: pbns - 2 * spt as u64,
                    len: 2 * spt as u64,
                });
                Zone::new(first, last, spt, heads, 3.0, 5.0, 9.0, holes).unwrap()
            })
            .collect();
        m.geom = Geometry::new(heads, 100, zones).unwrap();
        m.sector_ns = HddModel::sector_times(&m.geom, m.rev);
        let (cap, geom) = (m.geom.capacity(), m.geom.clone());
        let walks = (0..20_000u64).map(move |i| {
            let lbn = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) % cap;
            (i, lbn, geom.locate(lbn), i as f64 * 1234.567)
        });
        let taken = check_first_track_transfers(&m, walks, 40);
        assert!(taken > 3_000, "{taken}");
    }

    /// `round` is `f64::round` to the bit: at and beside halves,
    /// at the ends of its fast path, for signed zeros, negatives and
    /// non-finite values.
    #[test]
    fn round_is_f64_round() {
        let mut xs = vec![
            0.0,
            -0.0,
            0.49999999999999994,
            0.5,
            1.5,
            2.5,
            -2.5,
            1e-300,
            4.5e15 - 0.5,
            4.5e15,
            4503599627370495.5,
            1e300,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
        ];
        for i in 0..200_000u64 {
            let x = i as f64 * 0.25;
            xs.extend([
                x,
                f64::from_bits(x.to_bits() + 1),
                f64::from_bits(x.to_bits().saturating_sub(1)),
            ]);
            xs.push(i.wrapping_mul(0x9E37_79B9_7F4A_7C15) as f64 / 1e4);
        }
        for x in xs {
            assert_eq!(round(x).to_bits(), x.round().to_bits(), "{x:e}");
        }
    }

    /// `round_ns` is `((x + 0.5) as i64).max(0)` for every kind of value:
    /// within the range, at and past both its ends, NaN and infinities.
    #[test]
    fn round_ns_is_the_saturating_conversion() {
        let two_63 = 9_223_372_036_854_775_808.0f64;
        let mut xs = vec![
            0.0,
            -0.0,
            0.49999999999999994,
            0.5,
            -0.5,
            -0.6,
            1.5,
            2.5,
            1e300,
            -1e300,
            two_63,
            -two_63,
            f64::from_bits(two_63.to_bits() - 1),
            f64::from_bits(two_63.to_bits() + 1),
            f64::from_bits((-two_63).to_bits() - 1),
            f64::from_bits((-two_63).to_bits() + 1),
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
        ];
        for i in 0..100_000u64 {
            let x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) as f64 / 1e3;
            xs.extend([x, -x, i as f64 * 0.25 - 0.5]);
        }
        for x in xs {
            assert_eq!(round_ns(x), ((x + 0.5) as i64).max(0) as u64, "{x:e}");
        }
    }
}
