//! The SSD model's flash translation layer, without time: the page map,
//! the write frontiers, garbage collection and trim (paper 001 §II.C: the
//! FTL whose copying under random writes address reshaping avoids).
//!
//! The device ([`super::Ssd`]) asks this layer where a page goes and what
//! garbage collection it cost, and turns that into channel and die time;
//! [`Ftl::write`] with a no-op cost sink is the untimed loop that
//! preconditions a drive (fill, then random overwrites) in a fraction of
//! the time the whole simulator would take.

use serde::Deserialize;
use std::collections::VecDeque;

/// An unmapped page, or a page holding no valid data.
pub(crate) const FREE: u32 = u32::MAX;

/// How garbage collection chooses the block to clean.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GcPolicy {
    /// The block with the fewest valid pages (lowest number on ties).
    #[default]
    Greedy,
    /// The block with the highest (1 − u) / 2u × age (Kawaguchi et al. 1995,
    /// after Rosenblum and Ousterhout's LFS cleaner): u its valid fraction, age
    /// the host page writes since it was filled. Each choice scans the plane.
    CostBenefit,
}

/// Counters: host and flash page writes (write amplification), GC work, trim.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SsdStats {
    /// Pages the host wrote.
    pub host_pages_written: u64,
    /// Valid pages garbage collection copied.
    pub gc_pages_moved: u64,
    /// Blocks erased.
    pub erases: u64,
    /// Pages read.
    pub pages_read: u64,
    /// Mapped pages unmapped by discard (trim).
    pub pages_trimmed: u64,
}

impl SsdStats {
    /// (host + GC page programs) / host page programs.
    pub fn write_amplification(&self) -> f64 {
        if self.host_pages_written == 0 {
            return 1.0;
        }
        (self.host_pages_written + self.gc_pages_moved) as f64 / self.host_pages_written as f64
    }

    /// The counts accumulated since `earlier` (a snapshot of the same drive).
    pub fn since(&self, earlier: &SsdStats) -> SsdStats {
        SsdStats {
            host_pages_written: self.host_pages_written - earlier.host_pages_written,
            gc_pages_moved: self.gc_pages_moved - earlier.gc_pages_moved,
            erases: self.erases - earlier.erases,
            pages_read: self.pages_read - earlier.pages_read,
            pages_trimmed: self.pages_trimmed - earlier.pages_trimmed,
        }
    }
}

/// Minimum of (key, index) over a plane's blocks, updated in O(log n): the
/// greedy victim (fewest valid pages, lowest block on ties) at the root.
#[derive(Clone)]
struct MinTree {
    size: usize,
    nodes: Vec<u64>,
}

impl MinTree {
    fn new(n: usize) -> Self {
        let size = n.next_power_of_two();
        MinTree {
            size,
            nodes: vec![u64::MAX; 2 * size],
        }
    }

    /// Block `i` (within the plane) now has `key` (`None`: not a candidate).
    fn set(&mut self, i: usize, key: Option<u32>) {
        let mut at = self.size + i;
        self.nodes[at] = key.map_or(u64::MAX, |k| (k as u64) << 32 | i as u64);
        while at > 1 {
            at /= 2;
            self.nodes[at] = self.nodes[2 * at].min(self.nodes[2 * at + 1]);
        }
    }

    /// (key, block within the plane) of the smallest key, if any block is a candidate.
    fn min(&self) -> Option<(u32, usize)> {
        let v = self.nodes[1];
        (v != u64::MAX).then_some(((v >> 32) as u32, (v & 0xffff_ffff) as usize))
    }
}

/// The block being programmed and its next page.
#[derive(Clone, Copy)]
struct Frontier {
    block: u32,
    next_page: u32,
}

#[derive(Clone)]
struct Plane {
    /// Erased blocks: taken from the back, returned at the front (oldest erased first).
    free: VecDeque<u32>,
    /// Where host writes go.
    host: Frontier,
    /// Where GC copies go, when the frontiers are separate (opened on first use).
    gc: Option<Frontier>,
    /// Full blocks that GC may clean, keyed by valid pages.
    candidates: MinTree,
}

/// Shape and policy of the FTL.
#[derive(Clone, Copy, PartialEq)]
pub(crate) struct FtlShape {
    pub planes: usize,
    pub blocks_per_plane: u32,
    pub pages_per_block: u32,
    pub lpns: u64,
    /// GC starts below this many free blocks in a plane.
    pub gc_start_free: usize,
    /// GC holds the host write below this many (at most `gc_start_free`).
    pub gc_hard_free: usize,
    pub policy: GcPolicy,
    pub separate_gc_frontier: bool,
    /// Die time of one GC page copy (read + program) and of one erase, ns.
    pub copy_ns: f64,
    pub erase_ns: f64,
}

/// Page-mapped FTL state.
#[derive(Clone)]
pub(crate) struct Ftl {
    shape: FtlShape,
    l2p: Vec<u32>,
    p2l: Vec<u32>,
    valid: Vec<u32>,
    /// A full block that is neither a frontier, nor free, nor being cleaned.
    closed: Vec<bool>,
    /// Host page writes when the block was filled (cost-benefit's age).
    filled_at: Vec<u64>,
    planes: Vec<Plane>,
    next_plane: usize,
    pub(crate) stats: SsdStats,
}

impl Ftl {
    pub(crate) fn shape(&self) -> &FtlShape {
        &self.shape
    }

    /// Physical pages (the size of the reverse map).
    pub(crate) fn physical_pages(&self) -> usize {
        self.p2l.len()
    }

    pub(crate) fn new(shape: FtlShape) -> Self {
        let bpp = shape.blocks_per_plane;
        let blocks = shape.planes * bpp as usize;
        let planes = (0..shape.planes)
            .map(|p| {
                let base = p as u32 * bpp;
                Plane {
                    free: (base + 1..base + bpp).rev().collect(),
                    host: Frontier {
                        block: base,
                        next_page: 0,
                    },
                    gc: None,
                    candidates: MinTree::new(bpp as usize),
                }
            })
            .collect();
        Ftl {
            l2p: vec![FREE; shape.lpns as usize],
            p2l: vec![FREE; blocks * shape.pages_per_block as usize],
            valid: vec![0; blocks],
            closed: vec![false; blocks],
            filled_at: vec![0; blocks],
            planes,
            next_plane: 0,
            stats: SsdStats::default(),
            shape,
        }
    }

    fn block_changed(&mut self, b: u32) {
        if self.closed[b as usize] {
            let bpp = self.shape.blocks_per_plane;
            let key = self.valid[b as usize];
            self.planes[(b / bpp) as usize]
                .candidates
                .set((b % bpp) as usize, Some(key));
        }
    }

    fn invalidate(&mut self, lpn: u64) -> bool {
        let old = self.l2p[lpn as usize];
        if old == FREE {
            return false;
        }
        self.p2l[old as usize] = FREE;
        let b = old / self.shape.pages_per_block;
        self.valid[b as usize] -= 1;
        self.block_changed(b);
        self.l2p[lpn as usize] = FREE;
        true
    }

    /// Unmaps a logical page (trim); true if it held data.
    pub(crate) fn trim(&mut self, lpn: u64) -> bool {
        let hit = self.invalidate(lpn);
        self.stats.pages_trimmed += hit as u64;
        hit
    }

    /// The next free page of plane `p` on the host or GC frontier (opening a fresh block when needed).
    fn alloc(&mut self, p: usize, for_gc: bool) -> u32 {
        let ppb = self.shape.pages_per_block;
        let separate = for_gc && self.shape.separate_gc_frontier;
        let plane = &mut self.planes[p];
        if separate && plane.gc.is_none() {
            let block = plane.free.pop_back().expect("GC keeps free blocks");
            plane.gc = Some(Frontier { block, next_page: 0 });
        }
        let f = if separate {
            plane.gc.as_mut().expect("opened above")
        } else {
            &mut plane.host
        };
        let mut filled = None;
        if f.next_page == ppb {
            filled = Some(f.block);
            f.block = plane.free.pop_back().expect("GC keeps free blocks");
            f.next_page = 0;
        }
        let ppn = f.block * ppb + f.next_page;
        f.next_page += 1;
        if let Some(b) = filled {
            self.closed[b as usize] = true;
            self.filled_at[b as usize] = self.stats.host_pages_written;
            self.block_changed(b);
        }
        ppn
    }

    fn victim(&self, p: usize) -> Option<u32> {
        let ppb = self.shape.pages_per_block;
        let bpp = self.shape.blocks_per_plane;
        let base = p as u32 * bpp;
        let best = match self.shape.policy {
            GcPolicy::Greedy => self.planes[p].candidates.min().map(|(_, i)| base + i as u32),
            GcPolicy::CostBenefit => {
                let now = self.stats.host_pages_written;
                let mut best: Option<(f64, u32)> = None;
                for b in base..base + bpp {
                    let v = self.valid[b as usize];
                    if !self.closed[b as usize] || v >= ppb {
                        continue;
                    }
                    let u = v as f64 / ppb as f64;
                    let age = (now - self.filled_at[b as usize]) as f64 + 1.0;
                    let score = if v == 0 {
                        f64::INFINITY
                    } else {
                        (1.0 - u) / (2.0 * u) * age
                    };
                    if best.is_none_or(|(s, _)| score > s) {
                        best = Some((score, b));
                    }
                }
                best.map(|(_, b)| b)
            }
        };
        // Nothing to gain when every candidate is full of valid data (e.g. while the drive is first filled).
        best.filter(|&b| self.valid[b as usize] < ppb)
    }

    /// Cleans one block of plane `p`; its die time, or `None` with nothing to clean.
    fn clean_one(&mut self, p: usize) -> Option<f64> {
        let v = self.victim(p)?;
        let bpp = self.shape.blocks_per_plane;
        self.closed[v as usize] = false;
        self.planes[p].candidates.set((v % bpp) as usize, None);
        let ppb = self.shape.pages_per_block;
        let mut cost = 0.0;
        let first = v * ppb;
        for ppn in first..first + ppb {
            let lpn = self.p2l[ppn as usize];
            if lpn != FREE {
                let new = self.alloc(p, true);
                self.p2l[ppn as usize] = FREE;
                self.p2l[new as usize] = lpn;
                self.l2p[lpn as usize] = new;
                self.valid[(new / ppb) as usize] += 1;
                self.stats.gc_pages_moved += 1;
                cost += self.shape.copy_ns;
            }
        }
        self.valid[v as usize] = 0;
        self.planes[p].free.push_front(v);
        self.stats.erases += 1;
        Some(cost + self.shape.erase_ns)
    }

    /// Cleans plane `p` until it has `target` free blocks or nothing to clean; the die time.
    fn clean_until(&mut self, p: usize, target: usize) -> f64 {
        let mut cost = 0.0;
        while self.planes[p].free.len() < target {
            match self.clean_one(p) {
                Some(c) => cost += c,
                None => break,
            }
        }
        cost
    }

    /// Writes logical page `lpn` on the next plane in striping order that can
    /// take it; returns that plane. `gc(plane, die_ns, foreground)` is told
    /// the garbage collection done on the way: foreground below the hard
    /// threshold (the write waits), background (one block per write) between
    /// the hard and the start threshold.
    pub(crate) fn write(&mut self, lpn: u64, mut gc: impl FnMut(usize, f64, bool)) -> usize {
        self.invalidate(lpn);
        let n = self.planes.len();
        let mut p = self.next_plane;
        for k in 0..n {
            p = (self.next_plane + k) % n;
            let free = self.planes[p].free.len();
            if free < self.shape.gc_hard_free {
                let cost = self.clean_until(p, self.shape.gc_hard_free);
                if cost > 0.0 {
                    gc(p, cost, true);
                }
            } else if free < self.shape.gc_start_free {
                if let Some(cost) = self.clean_one(p) {
                    gc(p, cost, false);
                }
            }
            let pl = &self.planes[p];
            if pl.host.next_page < self.shape.pages_per_block || !pl.free.is_empty() {
                break;
            }
        }
        self.next_plane = (p + 1) % n;
        let ppn = self.alloc(p, false);
        self.p2l[ppn as usize] = lpn as u32;
        self.l2p[lpn as usize] = ppn;
        self.valid[(ppn / self.shape.pages_per_block) as usize] += 1;
        self.stats.host_pages_written += 1;
        p
    }

    /// The physical page of `lpn`, if mapped.
    pub(crate) fn lookup(&self, lpn: u64) -> Option<u32> {
        let ppn = self.l2p[lpn as usize];
        (ppn != FREE).then_some(ppn)
    }

    pub(crate) fn plane_of_ppn(&self, ppn: u32) -> usize {
        (ppn / self.shape.pages_per_block / self.shape.blocks_per_plane) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    impl Ftl {
        /// Every invariant of the map, the counts, the free lists and the victim trees.
        fn check(&self) {
            let ppb = self.shape.pages_per_block;
            let bpp = self.shape.blocks_per_plane;
            for (lpn, &ppn) in self.l2p.iter().enumerate() {
                if ppn != FREE {
                    assert_eq!(self.p2l[ppn as usize], lpn as u32, "reverse map of page {lpn}");
                }
            }
            let mut mapped = 0;
            for b in 0..self.valid.len() {
                let first = b * ppb as usize;
                let live = self.p2l[first..first + ppb as usize]
                    .iter()
                    .filter(|&&l| l != FREE)
                    .inspect(|&&l| assert_eq!(self.l2p[l as usize] / ppb, b as u32))
                    .count();
                assert_eq!(self.valid[b], live as u32, "valid count of block {b}");
                mapped += live;
            }
            assert_eq!(mapped, self.l2p.iter().filter(|&&p| p != FREE).count());
            for (p, plane) in self.planes.iter().enumerate() {
                let base = p as u32 * bpp;
                let open: Vec<u32> = std::iter::once(plane.host.block)
                    .chain(plane.gc.map(|f| f.block))
                    .collect();
                for &b in plane.free.iter() {
                    assert!(b >= base && b < base + bpp);
                    assert_eq!(self.valid[b as usize], 0, "free block {b} holds data");
                    assert!(!self.closed[b as usize] && !open.contains(&b));
                }
                for b in base..base + bpp {
                    let candidate = self.closed[b as usize];
                    assert!(!(candidate && (open.contains(&b) || plane.free.contains(&b))));
                    let leaf = plane.candidates.nodes[plane.candidates.size + (b - base) as usize];
                    let want = if candidate {
                        (self.valid[b as usize] as u64) << 32 | (b - base) as u64
                    } else {
                        u64::MAX
                    };
                    assert_eq!(leaf, want, "victim tree leaf of block {b}");
                }
                // Every block is free, open or closed: none is lost.
                let closed = (base..base + bpp).filter(|&b| self.closed[b as usize]).count();
                assert_eq!(
                    closed + plane.free.len() + open.len(),
                    bpp as usize,
                    "blocks of plane {p}"
                );
            }
        }
    }

    fn ftl(planes: usize, ppb: u32, lpns: u64, spare: u32, policy: GcPolicy, separate: bool, hard: usize) -> Ftl {
        let logical_blocks = lpns.div_ceil(planes as u64 * ppb as u64) as u32;
        Ftl::new(FtlShape {
            planes,
            blocks_per_plane: logical_blocks + spare,
            pages_per_block: ppb,
            lpns,
            gc_start_free: 3,
            gc_hard_free: hard,
            policy,
            separate_gc_frontier: separate,
            copy_ns: 1.0,
            erase_ns: 1.0,
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Any mix of writes and trims, under either policy, frontier layout and
        /// threshold pair: the maps agree, counts match, no block is lost, and
        /// exactly the pages written and not trimmed since are mapped.
        #[test]
        fn the_map_survives_any_writes_and_trims(
            planes in 1usize..4,
            ppb in 2u32..9,
            lpns in 8u64..96,
            spare in 5u32..8,
            cost_benefit in any::<bool>(),
            separate in any::<bool>(),
            hard in 2usize..4,
            ops in proptest::collection::vec((any::<bool>(), 0u64..96), 1..600),
        ) {
            let policy = if cost_benefit { GcPolicy::CostBenefit } else { GcPolicy::Greedy };
            let mut f = ftl(planes, ppb, lpns, spare, policy, separate, hard);
            let mut written = vec![false; lpns as usize];
            for (i, (trim, lpn)) in ops.into_iter().enumerate() {
                let lpn = lpn % lpns;
                if trim {
                    f.trim(lpn);
                    written[lpn as usize] = false;
                } else {
                    f.write(lpn, |_, _, _| {});
                    written[lpn as usize] = true;
                }
                if i.is_multiple_of(16) {
                    f.check();
                }
            }
            f.check();
            for (lpn, &w) in written.iter().enumerate() {
                prop_assert_eq!(f.lookup(lpn as u64).is_some(), w, "page {}", lpn);
            }
            let s = f.stats;
            prop_assert!(s.gc_pages_moved <= s.erases * ppb as u64);
        }
    }

    #[test]
    fn garbage_collection_keeps_the_map_under_every_option() {
        for (policy, separate, hard) in [
            (GcPolicy::Greedy, false, 3),
            (GcPolicy::Greedy, true, 2),
            (GcPolicy::CostBenefit, false, 2),
            (GcPolicy::CostBenefit, true, 3),
        ] {
            let mut f = ftl(2, 4, 64, 6, policy, separate, hard);
            let mut s = 0x2545_f491_4f6c_dd1du64;
            for i in 0..4000u32 {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                if s.is_multiple_of(7) {
                    f.trim(s % 64);
                } else {
                    f.write((s >> 8) % 64, |_, _, _| {});
                }
                if i.is_multiple_of(50) {
                    f.check();
                }
            }
            f.check();
            assert!(
                f.stats.erases > 100 && f.stats.gc_pages_moved > 0,
                "{policy:?}: {:?}",
                f.stats
            );
        }
    }
}
