//! Zoned disk geometry: logical block numbers (LBNs) to cylinder, head and
//! physical sector, with the holes a real layout has (reserved space at a
//! zone's front, spare sectors and tracks, slipped defects).
//!
//! Each zone numbers its physical sectors (PBNs) track by track, cylinder by
//! cylinder (all surfaces of a cylinder before the next cylinder). Holes are
//! PBN ranges that hold no LBN; LBNs fill the remaining PBNs in order. A zone
//! without holes maps with two divisions; with holes, one binary search more.
//!
//! Tracks of a cylinder are taken surface 0 first unless the layout says
//! otherwise ([`SurfaceOrder`], DiskSim's `LBN-to-PBN mapping scheme`): some
//! drives reverse the surface order on every other cylinder so a cylinder
//! switch needs no head switch.

/// The order in which a cylinder's tracks are filled (DiskSim's
/// `LBN-to-PBN mapping scheme` 0, 1, 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SurfaceOrder {
    /// Surface 0 to the last on every cylinder.
    #[default]
    Normal,
    /// Reversed (last surface first) on the odd cylinders counted from the
    /// zone's first cylinder: a cylinder switch stays on the same surface.
    ReversedOddInZone,
    /// Reversed on the odd cylinders counted from cylinder 0.
    ReversedOddCylinder,
}

/// A range of physical sectors that holds no logical block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hole {
    /// First PBN of the hole (zone relative).
    pub pbn: u64,
    /// Length in sectors.
    pub len: u64,
}

#[derive(Debug, Clone)]
struct HoleIdx {
    pbn: u64,
    len: u64,
    /// Zone-relative LBN of the first block after the hole.
    lbn_after: u64,
    /// Hole sectors up to and including this hole.
    cum: u64,
}

/// A forward walk's place in a zone's hole table ([`Geometry::cursor`]):
/// the holes it has passed, so that each track of a long read or read-ahead
/// looks only at the holes it passes instead of searching the table three
/// times and locating the next track's first block (a DiskSim description's
/// spare sectors and slips make up to a few hundred holes in a zone).
#[derive(Debug, Clone, Copy)]
pub struct HoleCursor {
    zone: u32,
    /// Holes whose following LBN is at or before the walk's block.
    passed: usize,
}

/// One recording zone: a range of cylinders with the same sectors per track.
#[derive(Debug, Clone)]
pub struct Zone {
    /// First cylinder.
    pub first_cyl: u32,
    /// Last cylinder (inclusive).
    pub last_cyl: u32,
    /// Physical sectors per track.
    pub spt: u32,
    /// First LBN of the zone.
    pub first_lbn: u64,
    /// Logical blocks in the zone.
    pub lbns: u64,
    /// Angular offset of PBN 0, in sectors.
    pub offset: f64,
    /// Skew added per track switch within a cylinder, in sectors.
    pub track_skew: f64,
    /// Skew added per cylinder switch, in sectors.
    pub cyl_skew: f64,
    /// `spt`, to divide by.
    spt_div: Divisor,
    holes: Vec<HoleIdx>,
    /// `hole_hint[b]`: the holes whose following LBN is at or before the
    /// zone-relative LBN `b << hint_shift` (about one hole a bucket: the
    /// count for an LBN is a step or two on, where a binary search over
    /// the Barracuda's 40–213 holes a zone took six to eight).
    hole_hint: Vec<u32>,
    hint_shift: u32,
}

/// A fixed 32-bit divisor `d`, divided by with a multiplication: for every
/// 32-bit `n`, `n / d` is the high 64 bits of `n` times `⌈2^64 / d⌉`
/// (Lemire, Kaser and Kurz, "Faster remainder by direct computation",
/// 2019, Theorem 1: with 64 bits of fraction, at least 32 + log2 `d`, the
/// quotient is exact), the same quotient as a division's. Locating a block
/// divides its zone's physical sector by the sectors per track and the
/// track by the heads: a multiplication takes 3 or 4 cycles where a 32-bit
/// division takes 10 to 30.
#[derive(Debug, Clone, Copy)]
struct Divisor {
    d: u32,
    /// `⌈2^64 / d⌉`; 0 for `d` = 1, whose `2^64` does not fit.
    inverse: u64,
}

impl Divisor {
    fn new(d: u32) -> Divisor {
        let inverse = if d > 1 { u64::MAX / d as u64 + 1 } else { 0 };
        Divisor { d, inverse }
    }

    /// `(n / d, n % d)`.
    #[inline(always)]
    fn div_rem(self, n: u32) -> (u32, u32) {
        let q = if self.inverse == 0 {
            n
        } else {
            ((self.inverse as u128 * n as u128) >> 64) as u32
        };
        (q, n - q * self.d)
    }
}

/// A position on the platters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Loc {
    /// The zone.
    pub zone: u32,
    /// The cylinder.
    pub cyl: u32,
    /// The head (surface).
    pub head: u32,
    /// Physical sector on the track.
    pub sector: u32,
}

/// The blocks of one track ([`Geometry::track_blocks`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrackBlocks {
    /// Its first block ([`Geometry::track_start_lbn`]).
    pub first: u64,
    /// The first block after it ([`Geometry::track_end_lbn`]).
    pub end: u64,
    /// The physical sector of its last block, `end - 1`.
    pub last_sector: u32,
}

/// Errors building a geometry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeometryError(pub String);

impl Zone {
    /// A zone; `holes` are zone-relative PBN ranges (any order, may touch).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        first_cyl: u32,
        last_cyl: u32,
        spt: u32,
        heads: u32,
        offset: f64,
        track_skew: f64,
        cyl_skew: f64,
        mut holes: Vec<Hole>,
    ) -> Result<Zone, GeometryError> {
        if last_cyl < first_cyl || spt == 0 || heads == 0 {
            return Err(GeometryError(format!(
                "zone cylinders {first_cyl}..={last_cyl} with {spt} sectors per track is empty"
            )));
        }
        let pbns = (last_cyl - first_cyl + 1) as u64 * heads as u64 * spt as u64;
        if pbns > u32::MAX as u64 {
            return Err(GeometryError(format!(
                "zone cylinders {first_cyl}..={last_cyl} holds {pbns} sectors, more than 2^32: use more zones"
            )));
        }
        holes.retain(|h| h.len > 0);
        holes.sort_by_key(|h| h.pbn);
        // Merge overlapping or touching holes.
        let mut merged: Vec<Hole> = Vec::with_capacity(holes.len());
        for h in holes {
            if h.pbn >= pbns {
                return Err(GeometryError(format!(
                    "zone cylinders {first_cyl}..={last_cyl}: hole at physical sector {} beyond the zone's {pbns} sectors",
                    h.pbn
                )));
            }
            let end = (h.pbn + h.len).min(pbns);
            match merged.last_mut() {
                Some(m) if h.pbn <= m.pbn + m.len => m.len = m.len.max(end - m.pbn),
                _ => merged.push(Hole {
                    pbn: h.pbn,
                    len: end - h.pbn,
                }),
            }
        }
        let mut cum = 0;
        let holes: Vec<HoleIdx> = merged
            .iter()
            .map(|h| {
                let lbn_after = h.pbn - cum;
                cum += h.len;
                HoleIdx {
                    pbn: h.pbn,
                    len: h.len,
                    lbn_after,
                    cum,
                }
            })
            .collect();
        if cum >= pbns {
            return Err(GeometryError(format!(
                "zone cylinders {first_cyl}..={last_cyl}: no sectors left after {cum} reserved"
            )));
        }
        let lbns = pbns - cum;
        let (hole_hint, hint_shift) = if holes.is_empty() {
            (Vec::new(), 0)
        } else {
            let shift = 64 - (lbns / holes.len() as u64).leading_zeros();
            let hint = (0..=(lbns - 1) >> shift)
                .map(|b| holes.partition_point(|h| h.lbn_after <= b << shift) as u32)
                .collect();
            (hint, shift)
        };
        Ok(Zone {
            first_cyl,
            last_cyl,
            spt,
            spt_div: Divisor::new(spt),
            first_lbn: 0,
            lbns,
            offset,
            track_skew,
            cyl_skew,
            holes,
            hole_hint,
            hint_shift,
        })
    }

    /// The number of holes whose following LBN is at or before the
    /// zone-relative `lbn` (those before its PBN).
    #[inline]
    fn holes_before_lbn(&self, lbn: u64) -> usize {
        if self.hole_hint.is_empty() {
            return 0;
        }
        // The count is between this bucket's and the next one's: a search
        // over the holes between (a step or two; bounded if holes cluster).
        let b = ((lbn >> self.hint_shift) as usize).min(self.hole_hint.len() - 1);
        let lo = self.hole_hint[b] as usize;
        let hi = self.hole_hint.get(b + 1).map_or(self.holes.len(), |&h| h as usize);
        lo + self.holes[lo..hi].partition_point(|h| h.lbn_after <= lbn)
    }

    /// Zone-relative LBN to zone-relative PBN.
    #[inline]
    pub fn lbn_to_pbn(&self, lbn: u64) -> u64 {
        if self.holes.is_empty() {
            return lbn;
        }
        // Last hole whose following LBN is <= lbn.
        let k = self.holes_before_lbn(lbn);
        if k == 0 {
            lbn
        } else {
            lbn + self.holes[k - 1].cum
        }
    }

    /// For the zone-relative `lbn`: the holes before its sector
    /// ([`Self::holes_before_lbn`]) and its zone-relative PBN.
    #[inline]
    fn hole_place(&self, lbn: u64) -> (usize, u64) {
        let passed = self.holes_before_lbn(lbn);
        (passed, lbn + self.cum_before(passed))
    }

    /// Hole sectors before the first `passed` holes.
    #[inline]
    fn cum_before(&self, passed: usize) -> u64 {
        passed.checked_sub(1).map_or(0, |i| self.holes[i].cum)
    }

    /// The number of holes whose following LBN is at or before the
    /// zone-relative `lbn`, counted on from `passed` (at most that many).
    #[inline]
    fn pass_lbn(&self, mut passed: usize, lbn: u64) -> usize {
        while passed < self.holes.len() && self.holes[passed].lbn_after <= lbn {
            passed += 1;
        }
        passed
    }

    /// Number of LBNs on PBNs before `pbn` (zone relative): the LBN at `pbn`,
    /// or the next one if `pbn` is in a hole.
    #[inline]
    pub fn pbn_to_lbn_ceil(&self, pbn: u64) -> u64 {
        if self.holes.is_empty() {
            return pbn;
        }
        let k = self.holes.partition_point(|h| h.pbn <= pbn);
        if k == 0 {
            return pbn;
        }
        let h = &self.holes[k - 1];
        if pbn < h.pbn + h.len {
            h.lbn_after
        } else {
            pbn - h.cum
        }
    }

    /// [`Self::pbn_to_lbn_ceil`] of a PBN at or after every one of the first
    /// `passed` holes: the search goes on from them (a step or two for a
    /// walk's next sectors) instead of over the whole table.
    #[inline]
    fn pbn_to_lbn_ceil_from(&self, passed: usize, pbn: u64) -> u64 {
        let mut j = passed;
        while j < self.holes.len() && self.holes[j].pbn <= pbn {
            j += 1;
        }
        match j.checked_sub(1).map(|i| &self.holes[i]) {
            Some(h) if pbn < h.pbn + h.len => h.lbn_after,
            Some(h) => pbn - h.cum,
            None => pbn,
        }
    }

    /// Whether a zone-relative PBN holds a logical block.
    pub fn pbn_is_hole(&self, pbn: u64) -> bool {
        let k = self.holes.partition_point(|h| h.pbn <= pbn);
        k > 0 && pbn < self.holes[k - 1].pbn + self.holes[k - 1].len
    }

    /// Total reserved (hole) sectors.
    pub fn hole_sectors(&self) -> u64 {
        self.holes.last().map_or(0, |h| h.cum)
    }

    /// The holes, merged and sorted.
    pub fn holes(&self) -> impl Iterator<Item = Hole> + '_ {
        self.holes.iter().map(|h| Hole { pbn: h.pbn, len: h.len })
    }
}

/// The whole disk's layout.
#[derive(Debug, Clone)]
pub struct Geometry {
    /// Recording surfaces.
    pub heads: u32,
    /// Cylinders.
    pub cylinders: u32,
    /// Zones in LBN order.
    pub zones: Vec<Zone>,
    zone_starts: Vec<u64>,
    /// `heads`, to divide by.
    heads_div: Divisor,
    surface_order: SurfaceOrder,
    /// `zone_hint[b]`: the zone holding LBN `b << hint_shift` (the search for
    /// an LBN's zone starts there: at most a step or two on).
    zone_hint: Vec<u32>,
    hint_shift: u32,
    capacity: u64,
}

/// Buckets of the zone hint table (at most).
const ZONE_HINTS: u64 = 1024;

impl Geometry {
    /// Lay out `zones` (in LBN order) on `heads` surfaces; assigns each zone's first LBN.
    pub fn new(heads: u32, cylinders: u32, mut zones: Vec<Zone>) -> Result<Geometry, GeometryError> {
        if zones.is_empty() {
            return Err(GeometryError("no zones".into()));
        }
        let mut lbn = 0;
        for z in &mut zones {
            if z.last_cyl >= cylinders {
                return Err(GeometryError(format!(
                    "zone cylinders {}..={} beyond the {cylinders} cylinders",
                    z.first_cyl, z.last_cyl
                )));
            }
            z.first_lbn = lbn;
            lbn += z.lbns;
        }
        let zone_starts: Vec<u64> = zones.iter().map(|z| z.first_lbn).collect();
        let hint_shift = 64 - (lbn / ZONE_HINTS).leading_zeros();
        let zone_hint = (0..=(lbn - 1) >> hint_shift)
            .map(|b| (zone_starts.partition_point(|&s| s <= b << hint_shift) - 1) as u32)
            .collect();
        Ok(Geometry {
            heads,
            cylinders,
            zones,
            zone_starts,
            heads_div: Divisor::new(heads),
            surface_order: SurfaceOrder::Normal,
            zone_hint,
            hint_shift,
            capacity: lbn,
        })
    }

    /// The same layout with a cylinder's tracks taken in `order`.
    pub fn with_surface_order(mut self, order: SurfaceOrder) -> Geometry {
        self.surface_order = order;
        self
    }

    /// How a cylinder's tracks are ordered.
    pub fn surface_order(&self) -> SurfaceOrder {
        self.surface_order
    }

    /// The surface holding a cylinder's `index`-th track, or (the mapping is
    /// its own inverse) the index of the track on surface `index`.
    #[inline]
    fn surface(&self, z: &Zone, cyl: u32, index: u32) -> u32 {
        let reversed = match self.surface_order {
            SurfaceOrder::Normal => false,
            SurfaceOrder::ReversedOddInZone => (cyl - z.first_cyl) % 2 == 1,
            SurfaceOrder::ReversedOddCylinder => cyl % 2 == 1,
        };
        if reversed {
            self.heads - 1 - index
        } else {
            index
        }
    }

    /// Logical blocks on the disk.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Index of the zone holding `lbn` (clamped to the last zone).
    #[inline]
    pub fn zone_of(&self, lbn: u64) -> usize {
        let b = ((lbn >> self.hint_shift) as usize).min(self.zone_hint.len() - 1);
        let mut z = self.zone_hint[b] as usize;
        while self.zone_starts.get(z + 1).is_some_and(|&s| s <= lbn) {
            z += 1;
        }
        z
    }

    /// Physical position of an LBN (LBNs past the end are clamped to the last block).
    #[inline]
    pub fn locate(&self, lbn: u64) -> Loc {
        let lbn = lbn.min(self.capacity - 1);
        let zi = self.zone_of(lbn);
        let z = &self.zones[zi];
        self.loc_of_pbn(zi, z.lbn_to_pbn(lbn - z.first_lbn))
    }

    /// The position of zone `zi`'s physical sector `pbn` (zone relative).
    #[inline]
    fn loc_of_pbn(&self, zi: usize, pbn: u64) -> Loc {
        let z = &self.zones[zi];
        // Zone-relative PBNs fit 32 bits (checked in `Zone::new`).
        let (track, sector) = z.spt_div.div_rem(pbn as u32);
        let (cyl_in_zone, mut head) = self.heads_div.div_rem(track);
        let cyl = z.first_cyl + cyl_in_zone;
        if self.surface_order != SurfaceOrder::Normal {
            head = self.surface(z, cyl, head);
        }
        Loc {
            zone: zi as u32,
            cyl,
            head,
            sector,
        }
    }

    /// The cylinder of an LBN.
    #[inline]
    pub fn cylinder_of(&self, lbn: u64) -> u32 {
        self.locate(lbn).cyl
    }

    /// The LBN at a physical position, or `None` if that sector is a hole.
    pub fn lbn_at(&self, loc: Loc) -> Option<u64> {
        let z = self.zones.get(loc.zone as usize)?;
        let pbn = self.pbn_of(z, loc);
        if z.pbn_is_hole(pbn) {
            return None;
        }
        Some(z.first_lbn + z.pbn_to_lbn_ceil(pbn))
    }

    #[inline]
    fn pbn_of(&self, z: &Zone, loc: Loc) -> u64 {
        let index = self.surface(z, loc.cyl, loc.head);
        ((loc.cyl - z.first_cyl) as u64 * self.heads as u64 + index as u64) * z.spt as u64 + loc.sector as u64
    }

    /// First LBN on the track holding `loc` (or after it, when the track
    /// holds none: all its sectors are holes).
    #[inline]
    pub fn track_start_lbn(&self, loc: Loc) -> u64 {
        let z = &self.zones[loc.zone as usize];
        z.first_lbn + z.pbn_to_lbn_ceil(self.pbn_of(z, loc) - loc.sector as u64)
    }

    /// The first LBN at or after physical position `loc` on its track (the
    /// next block when `loc` is a hole).
    #[inline]
    pub fn lbn_ceil_at(&self, loc: Loc) -> u64 {
        let z = &self.zones[loc.zone as usize];
        z.first_lbn + z.pbn_to_lbn_ceil(self.pbn_of(z, loc))
    }

    /// First LBN after the track holding `loc` (its logical end).
    #[inline]
    pub fn track_end_lbn(&self, loc: Loc) -> u64 {
        let z = &self.zones[loc.zone as usize];
        let pbn_next = self.pbn_of(z, loc) - loc.sector as u64 + z.spt as u64;
        z.first_lbn + z.pbn_to_lbn_ceil(pbn_next)
    }

    /// The physical sector on `loc`'s track of an LBN known to be on that track
    /// (`loc_lbn` is the LBN at `loc`).
    #[inline]
    pub fn sector_on_track(&self, loc: Loc, loc_lbn: u64, lbn: u64) -> u32 {
        let z = &self.zones[loc.zone as usize];
        if z.holes.is_empty() {
            return loc.sector + (lbn - loc_lbn) as u32;
        }
        z.spt_div.div_rem(z.lbn_to_pbn(lbn - z.first_lbn) as u32).1
    }

    /// The blocks from `lbn` (the LBN at `loc`) to the end of `loc`'s
    /// track, at most up to `end` (exclusive): the first LBN after them and
    /// the physical sector of the last (slipped sectors in between count).
    #[inline]
    pub fn track_run(&self, loc: Loc, lbn: u64, end: u64) -> (u64, u32) {
        let z = &self.zones[loc.zone as usize];
        if z.holes.is_empty() {
            // A track without holes holds consecutive blocks to its last
            // sector, whatever the surface order.
            let run_end = (lbn + (z.spt - loc.sector) as u64).min(end);
            return (run_end, loc.sector + (run_end - 1 - lbn) as u32);
        }
        let run_end = self.track_end_lbn(loc).min(end);
        let last = if run_end == lbn + 1 {
            loc.sector
        } else {
            self.sector_on_track(loc, lbn, run_end - 1)
        };
        (run_end, last)
    }

    /// Where a forward walk over the blocks from `lbn` (at `loc`) starts:
    /// its place in the hole table of `loc`'s zone (one binary search).
    #[inline]
    pub fn cursor(&self, loc: Loc, lbn: u64) -> HoleCursor {
        let z = &self.zones[loc.zone as usize];
        HoleCursor {
            zone: loc.zone,
            passed: z.holes_before_lbn(lbn.saturating_sub(z.first_lbn)),
        }
    }

    /// [`Self::track_run`], for a zone with holes without searching its hole
    /// table: `cur` is the walk's place, at or before `lbn` (the LBN at `loc`),
    /// and moves on past the holes before `lbn`.
    #[inline]
    pub fn track_run_from(&self, loc: Loc, lbn: u64, end: u64, cur: &mut HoleCursor) -> (u64, u32) {
        let z = &self.zones[loc.zone as usize];
        if z.holes.is_empty() {
            return self.track_run(loc, lbn, end);
        }
        debug_assert_eq!(cur.zone, loc.zone);
        let rel = lbn - z.first_lbn;
        let p = z.pass_lbn(cur.passed, rel);
        cur.passed = p;
        let pbn = rel + z.cum_before(p);
        debug_assert_eq!(pbn, self.pbn_of(z, loc));
        let track_end = pbn - loc.sector as u64 + z.spt as u64;
        // Hole `p` is the first after `pbn`: when it is not on the rest of
        // the track (most tracks of a zone have none), the track's blocks
        // from `lbn` on are consecutive sectors, as on a track without holes.
        if z.holes.get(p).is_none_or(|h| h.pbn >= track_end) {
            let run_end = (lbn + (z.spt - loc.sector) as u64).min(end);
            return (run_end, loc.sector + (run_end - 1 - lbn) as u32);
        }
        // The track's logical end: `pbn_to_lbn_ceil` of its physical end,
        // searching on from the holes already passed (all before `pbn`).
        let end_rel = z.pbn_to_lbn_ceil_from(p, track_end);
        let run_end = (z.first_lbn + end_rel).min(end);
        let last = if run_end == lbn + 1 {
            loc.sector
        } else {
            // The last block's sector: its PBN less the track's first.
            let last_rel = run_end - 1 - z.first_lbn;
            (last_rel + z.cum_before(z.pass_lbn(p, last_rel)) - (track_end - z.spt as u64)) as u32
        };
        (run_end, last)
    }

    /// Whether the zone of `loc` has no holes: its tracks hold consecutive
    /// blocks, each from its first sector to its last.
    #[inline(always)]
    pub fn hole_free(&self, loc: Loc) -> bool {
        self.zones[loc.zone as usize].holes.is_empty()
    }

    /// The first block, the logical end and the last block's sector of the
    /// track holding `loc` (`lbn` the LBN at `loc`), found from `lbn`'s
    /// place in its zone's hole table (the hole hint): when no hole lies on
    /// the track after `lbn`, or before it, that side needs no search,
    /// where [`Self::track_start_lbn`] and [`Self::track_end_lbn`] each
    /// search the whole table and `locate(end - 1)` the hint again.
    #[inline]
    pub fn track_blocks(&self, loc: Loc, lbn: u64) -> TrackBlocks {
        let z = &self.zones[loc.zone as usize];
        let spt = z.spt as u64;
        let rel = lbn - z.first_lbn;
        let (passed, pbn) = z.hole_place(rel);
        debug_assert_eq!(pbn, self.pbn_of(z, loc));
        let track_start = pbn - loc.sector as u64;
        let track_end = track_start + spt;
        // Hole `passed` is the first after `lbn`'s sector: the blocks from
        // `lbn` to the track's end are consecutive unless it is on the track.
        let (end_rel, last_sector) = match z.holes.get(passed) {
            Some(h) if h.pbn < track_end => {
                let end_rel = z.pbn_to_lbn_ceil_from(passed, track_end);
                let last_rel = end_rel - 1;
                let last_pbn = last_rel + z.cum_before(z.pass_lbn(passed, last_rel));
                (end_rel, (last_pbn - track_start) as u32)
            }
            _ => (rel + (track_end - pbn), z.spt - 1),
        };
        // The hole before `lbn`'s sector, if any, ends at or before it: the
        // blocks from the track's first sector to `lbn` are consecutive
        // unless it ends after the track's start.
        let first_rel = match passed.checked_sub(1).map(|i| &z.holes[i]) {
            Some(h) if h.pbn + h.len > track_start => z.pbn_to_lbn_ceil(track_start),
            _ => rel - (pbn - track_start),
        };
        let blocks = TrackBlocks {
            first: z.first_lbn + first_rel,
            end: z.first_lbn + end_rel,
            last_sector,
        };
        debug_assert_eq!(
            (blocks.first, blocks.end, blocks.last_sector),
            (
                self.track_start_lbn(loc),
                self.track_end_lbn(loc),
                self.locate(blocks.end - 1).sector
            ),
            "the track's blocks are those the searches find"
        );
        blocks
    }

    /// Whether blocks `lbn..end` (`lbn` the LBN at `loc`, `end - lbn` at
    /// most the sectors from `loc` to its track's end) lie on consecutive
    /// sectors of `loc`'s track: the zone has no holes, or the first hole
    /// after block `lbn` starts at or past the run's last sector. Found
    /// from the zone's hole hint, where a walk over the run's track would
    /// also search the table for the track's logical end.
    #[inline(always)]
    pub fn run_is_consecutive(&self, loc: Loc, lbn: u64, end: u64) -> bool {
        let z = &self.zones[loc.zone as usize];
        if z.holes.is_empty() {
            return true;
        }
        // Hole `passed` is the first whose following block is past `lbn`:
        // the first hole after `lbn`'s sector.
        let (passed, pbn) = z.hole_place(lbn - z.first_lbn);
        debug_assert_eq!(pbn, self.pbn_of(z, loc));
        z.holes.get(passed).is_none_or(|h| h.pbn >= pbn + (end - lbn))
    }

    /// The first block at or after the sector `done` sectors past block
    /// `lbn` (at `loc`) of a forward walk whose cursor `cur` has passed the
    /// holes before `lbn` ([`Self::track_run_from`] moved it there):
    /// [`Self::lbn_ceil_at`] of that sector, without searching the hole table.
    #[inline]
    pub fn lbn_ceil_after(&self, loc: Loc, lbn: u64, done: u64, cur: &HoleCursor) -> u64 {
        let z = &self.zones[loc.zone as usize];
        if z.holes.is_empty() {
            return lbn + done;
        }
        debug_assert_eq!(cur.zone, loc.zone);
        z.first_lbn + z.pbn_to_lbn_ceil_from(cur.passed, self.pbn_of(z, loc) + done)
    }

    /// [`Self::locate`] of the next block of a forward walk (`cur` at or
    /// before it): within the walk's zone, without a search.
    #[inline]
    pub fn locate_from(&self, lbn: u64, cur: &mut HoleCursor) -> Loc {
        let zi = cur.zone as usize;
        let z = &self.zones[zi];
        if lbn < z.first_lbn || lbn - z.first_lbn >= z.lbns {
            let loc = self.locate(lbn);
            *cur = self.cursor(loc, lbn.min(self.capacity - 1));
            return loc;
        }
        let rel = lbn - z.first_lbn;
        cur.passed = z.pass_lbn(cur.passed, rel);
        self.loc_of_pbn(zi, rel + z.cum_before(cur.passed))
    }

    /// The position of the LBN after the one at `loc`, without a search when
    /// the zone has no holes (the common case); `None` otherwise.
    #[inline]
    pub fn next_loc(&self, loc: Loc) -> Option<Loc> {
        let z = &self.zones[loc.zone as usize];
        if !z.holes.is_empty() || self.surface_order != SurfaceOrder::Normal {
            return None;
        }
        let mut n = loc;
        n.sector += 1;
        if n.sector < z.spt {
            return Some(n);
        }
        n.sector = 0;
        n.head += 1;
        if n.head < self.heads {
            return Some(n);
        }
        n.head = 0;
        n.cyl += 1;
        (n.cyl <= z.last_cyl).then_some(n)
    }

    /// The index of `loc`'s track among its zone's tracks, in the order a
    /// forward walk over the zone's blocks reads them.
    #[inline]
    pub fn track_in_zone(&self, loc: Loc) -> u64 {
        let z = &self.zones[loc.zone as usize];
        (loc.cyl - z.first_cyl) as u64 * self.heads as u64 + self.surface(z, loc.cyl, loc.head) as u64
    }

    /// [`Self::locate`] of block `lbn`, the one after the block at `last`:
    /// without a search when the zone has no holes ([`Self::next_loc`]),
    /// and where it has, without finding the zone, and without dividing
    /// when the block is on the next sector of the same track.
    #[inline]
    pub fn locate_next(&self, last: Loc, lbn: u64) -> Loc {
        if let Some(next) = self.next_loc(last) {
            return next;
        }
        let z = &self.zones[last.zone as usize];
        let rel = lbn.wrapping_sub(z.first_lbn);
        if rel >= z.lbns {
            return self.locate(lbn);
        }
        let pbn = z.lbn_to_pbn(rel);
        if pbn == self.pbn_of(z, last) + 1 && last.sector + 1 < z.spt {
            return Loc {
                sector: last.sector + 1,
                ..last
            };
        }
        self.loc_of_pbn(last.zone as usize, pbn)
    }

    /// Angular position (in revolutions, 0..1) where physical sector `loc.sector` begins.
    #[inline]
    pub fn angle(&self, loc: Loc) -> f64 {
        let z = &self.zones[loc.zone as usize];
        let cyl_rel = (loc.cyl - z.first_cyl) as f64;
        // Skew accumulates per track switch in the order the tracks are read.
        let index = self.surface(z, loc.cyl, loc.head);
        let switches = index as f64 + (self.heads as f64 - 1.0) * cyl_rel;
        let pos = z.offset + z.track_skew * switches + z.cyl_skew * cyl_rel + loc.sector as f64;
        let r = pos / z.spt as f64;
        crate::hdd::model::frac(r)
    }

    /// Sectors per track of the zone holding `loc`.
    #[inline]
    pub fn spt(&self, loc: Loc) -> u32 {
        self.zones[loc.zone as usize].spt
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The multiplication gives the division's quotient and remainder: at
    /// the ends of the range (the largest numerators, divisors 1, 2, powers
    /// of two, the largest) and for any numerator and divisor.
    #[test]
    fn a_divisor_divides_as_division_does() {
        let check = |n: u32, d: u32| assert_eq!(Divisor::new(d).div_rem(n), (n / d, n % d), "{n} / {d}");
        let ends = [
            0,
            1,
            2,
            3,
            7,
            8,
            9,
            255,
            256,
            257,
            u32::MAX / 2,
            u32::MAX / 2 + 1,
            u32::MAX - 1,
            u32::MAX,
        ];
        for d in ends.into_iter().filter(|&d| d > 0).chain((0..32).map(|k| 1 << k)) {
            for n in ends.into_iter().chain([d - 1, d, d.wrapping_add(1), d.wrapping_mul(3)]) {
                check(n, d);
            }
        }
        proptest::proptest!(proptest::prelude::ProptestConfig::with_cases(20_000), |(n: u32, d in 1u32..)| check(n, d));
        proptest::proptest!(|(n: u32, d in 1u32..5000)| check(n, d));
    }

    fn holey() -> Geometry {
        let z0 = Zone::new(
            0,
            9,
            10,
            2,
            0.0,
            1.0,
            2.0,
            vec![Hole { pbn: 0, len: 5 }, Hole { pbn: 17, len: 1 }],
        )
        .unwrap();
        let z1 = Zone::new(10, 19, 8, 2, 0.0, 1.0, 2.0, vec![Hole { pbn: 150, len: 10 }]).unwrap();
        Geometry::new(2, 20, vec![z0, z1]).unwrap()
    }

    #[test]
    fn holes_are_skipped() {
        let g = holey();
        assert_eq!(g.capacity(), 200 - 6 + 160 - 10);
        // LBN 0 is PBN 5.
        assert_eq!(
            g.locate(0),
            Loc {
                zone: 0,
                cyl: 0,
                head: 0,
                sector: 5
            }
        );
        // LBNs 0..=11 are PBNs 5..=16, LBN 12 skips the slip at 17.
        assert_eq!(g.locate(11).sector, 6);
        assert_eq!(g.locate(11).head, 1);
        assert_eq!(g.locate(12).sector, 8);
        assert_eq!(
            g.lbn_at(Loc {
                zone: 0,
                cyl: 0,
                head: 1,
                sector: 7
            }),
            None
        );
        // Track 0 ends at LBN 5; track 1 ends at LBN 5 + 9.
        assert_eq!(g.track_end_lbn(g.locate(0)), 5);
        assert_eq!(g.track_end_lbn(g.locate(5)), 14);
    }

    /// The hint table gives the zone a binary search over the zone starts
    /// gives, at every zone boundary and past the end, for the default disk
    /// and a small one (one bucket per block).
    #[test]
    fn zone_of_matches_a_search() {
        let disk = crate::HddParams::default().build().unwrap().geom;
        for g in [holey(), disk] {
            let search = |lbn: u64| g.zone_starts.partition_point(|&s| s <= lbn).saturating_sub(1);
            let mut probes = vec![0, 1, g.capacity() - 1, g.capacity(), g.capacity() + 12_345, u64::MAX];
            for &s in &g.zone_starts {
                probes.extend([s.saturating_sub(1), s, s + 1]);
            }
            probes.extend((0..1000u64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) % g.capacity()));
            for lbn in probes {
                assert_eq!(g.zone_of(lbn), search(lbn), "lbn {lbn}");
            }
        }
    }

    /// A forward walk with a cursor finds every track's run, every block at
    /// or after a sector of it and every next block where the searches find
    /// them, from every starting block, over zone boundaries and in every
    /// surface order.
    #[test]
    fn cursor_walk_matches_the_searches() {
        for order in [
            SurfaceOrder::Normal,
            SurfaceOrder::ReversedOddInZone,
            SurfaceOrder::ReversedOddCylinder,
        ] {
            let g = holey().with_surface_order(order);
            for start in 0..g.capacity() {
                let (mut lbn, mut loc) = (start, g.locate(start));
                let mut cur = g.cursor(loc, lbn);
                while lbn < g.capacity() {
                    let end = (start + 40).max(lbn + 1).min(g.capacity());
                    assert_eq!(
                        g.track_run_from(loc, lbn, end, &mut cur),
                        g.track_run(loc, lbn, end),
                        "{order:?} {lbn}"
                    );
                    for done in 0..(g.spt(loc) - loc.sector) as u64 {
                        let at = Loc {
                            sector: loc.sector + done as u32,
                            ..loc
                        };
                        assert_eq!(
                            g.lbn_ceil_after(loc, lbn, done, &cur),
                            g.lbn_ceil_at(at),
                            "{order:?} {lbn} + {done}"
                        );
                    }
                    lbn = g.track_run(loc, lbn, g.capacity()).0;
                    if lbn < g.capacity() {
                        loc = g.locate_from(lbn, &mut cur);
                        assert_eq!(loc, g.locate(lbn), "{order:?} {lbn}");
                    }
                }
            }
        }
    }

    /// The hole hint gives the count a binary search over the holes gives,
    /// for every block of zones with few and with many holes.
    #[test]
    fn hole_hint_matches_a_search() {
        let many: Vec<Hole> = (0..300)
            .map(|i| Hole {
                pbn: i * 37 + i % 5,
                len: 1 + i % 3,
            })
            .collect();
        for holes in [
            vec![Hole { pbn: 0, len: 5 }],
            vec![Hole { pbn: 17, len: 1 }, Hole { pbn: 150, len: 10 }],
            many,
        ] {
            let z = Zone::new(0, 99, 120, 2, 0.0, 0.0, 0.0, holes).unwrap();
            for lbn in 0..z.lbns + 3 {
                let search = z.holes.partition_point(|h| h.lbn_after <= lbn);
                assert_eq!(z.holes_before_lbn(lbn), search, "lbn {lbn}");
            }
        }
    }

    #[test]
    fn round_trip_every_block() {
        let g = holey();
        for lbn in 0..g.capacity() {
            let loc = g.locate(lbn);
            assert_eq!(g.lbn_at(loc), Some(lbn), "lbn {lbn} at {loc:?}");
        }
    }

    /// A track's blocks found from one block's place in the hole table are
    /// those the searches find, from every block of tracks with holes at
    /// their start, middle and end, whole tracks of holes between, and
    /// surfaces reversed on odd cylinders.
    #[test]
    fn track_blocks_match_the_searches() {
        let z0 = Zone::new(
            0,
            9,
            10,
            3,
            0.0,
            1.0,
            2.0,
            vec![
                Hole { pbn: 0, len: 5 },
                Hole { pbn: 17, len: 1 },
                Hole { pbn: 29, len: 3 },
                Hole { pbn: 44, len: 12 },
                Hole { pbn: 70, len: 30 },
            ],
        )
        .unwrap();
        let z1 = Zone::new(10, 19, 8, 3, 0.0, 1.0, 2.0, vec![Hole { pbn: 150, len: 10 }]).unwrap();
        let z2 = Zone::new(20, 24, 7, 3, 0.0, 1.0, 2.0, vec![]).unwrap();
        for order in [SurfaceOrder::Normal, SurfaceOrder::ReversedOddInZone] {
            let g = Geometry::new(3, 25, vec![z0.clone(), z1.clone(), z2.clone()])
                .unwrap()
                .with_surface_order(order);
            for lbn in 0..g.capacity() {
                let loc = g.locate(lbn);
                let t = g.track_blocks(loc, lbn);
                assert_eq!(t.first, g.track_start_lbn(loc), "{order:?} lbn {lbn}");
                assert_eq!(t.end, g.track_end_lbn(loc), "{order:?} lbn {lbn}");
                let last = g.locate(t.end - 1);
                assert_eq!(
                    (last.cyl, last.head, last.sector),
                    (loc.cyl, loc.head, t.last_sector),
                    "{order:?} lbn {lbn}"
                );
            }
        }
    }

    /// The block after a block is where `locate` puts it, for every block
    /// in every surface order, on a disk with holes and one without.
    #[test]
    fn locate_next_matches_locate() {
        let plain = Geometry::new(2, 20, vec![Zone::new(0, 19, 10, 2, 0.0, 1.0, 2.0, vec![]).unwrap()]).unwrap();
        for g in [holey(), plain] {
            for order in [
                SurfaceOrder::Normal,
                SurfaceOrder::ReversedOddInZone,
                SurfaceOrder::ReversedOddCylinder,
            ] {
                let g = g.clone().with_surface_order(order);
                for lbn in 1..g.capacity() {
                    assert_eq!(g.locate_next(g.locate(lbn - 1), lbn), g.locate(lbn), "{order:?} {lbn}");
                }
            }
        }
    }

    #[test]
    fn angle_includes_skews() {
        let g = holey();
        let a = g.angle(Loc {
            zone: 0,
            cyl: 1,
            head: 1,
            sector: 3,
        });
        // offset 0 + track skew 1 × (1 + 1) + cyl skew 2 × 1 + 3 = 7 sectors of 10.
        assert!((a - 0.7).abs() < 1e-12);
    }
}
