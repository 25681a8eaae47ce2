//! The remap table: an ordered map of extents from one address space to
//! another, with O(log n) lookup, insert and removal (paper 001 §III.C uses a
//! red-black tree; a B-tree of extents gives the same bound).
//!
//! Keys are the first sector of an extent; extents never overlap. Inserting
//! over existing extents cuts them (an overwrite, §III.B.2) and returns the
//! pieces that were replaced, so the caller can invalidate the space they
//! held. Neighbours that continue each other in both address spaces are
//! merged, so sequential writes keep the table small.

use hvio_core::Sector;
use std::collections::BTreeMap;

/// Where an extent of original addresses lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// At this transformed address (the first sector of the extent).
    At(Sector),
    /// Trimmed: reads return zeroes and no I/O is done.
    Zero,
}

impl Target {
    /// The target of the sector `offset` sectors into an extent.
    fn offset(self, offset: u64) -> Target {
        match self {
            Target::At(t) => Target::At(t + offset),
            Target::Zero => Target::Zero,
        }
    }
}

/// One extent: `sectors` sectors from `start` to `target`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    /// First original sector.
    pub start: Sector,
    /// Length in sectors.
    pub sectors: u64,
    /// Where it is mapped.
    pub target: Target,
}

impl Extent {
    /// One past the last original sector.
    pub fn end(&self) -> Sector {
        self.start + self.sectors
    }
}

/// A piece of a looked-up range: mapped to `target`, or a gap (`None`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    /// First original sector.
    pub start: Sector,
    /// Length in sectors.
    pub sectors: u64,
    /// Where it is mapped (None: a gap).
    pub target: Option<Target>,
}

/// Value stored per key: length and target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Run {
    sectors: u64,
    target: Target,
}

/// An ordered, non-overlapping extent map.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExtentMap {
    runs: BTreeMap<Sector, Run>,
}

/// Bytes one extent occupies as a key and value (B-tree node overhead excluded).
pub const EXTENT_PAYLOAD_BYTES: usize = std::mem::size_of::<(Sector, Run)>();

impl ExtentMap {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of extents.
    pub fn len(&self) -> usize {
        self.runs.len()
    }

    /// Whether it holds no extents.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// All extents in address order.
    pub fn iter(&self) -> impl Iterator<Item = Extent> + '_ {
        self.runs.iter().map(|(&start, r)| Extent {
            start,
            sectors: r.sectors,
            target: r.target,
        })
    }

    /// The extents overlapping `[start, start + sectors)`, clipped to it, with
    /// the gaps between them, in address order: the pieces cover the range.
    pub fn lookup(&self, start: Sector, sectors: u64) -> Vec<Piece> {
        let end = start + sectors;
        let mut pieces = Vec::new();
        if sectors == 0 {
            return pieces;
        }
        let mut at = start;
        let first = self
            .runs
            .range(..=start)
            .next_back()
            .filter(|(&s, r)| s + r.sectors > start)
            .map(|(&s, _)| s)
            .unwrap_or(start);
        for (&s, r) in self.runs.range(first..end) {
            if s > at {
                pieces.push(Piece {
                    start: at,
                    sectors: s - at,
                    target: None,
                });
                at = s;
            }
            let stop = (s + r.sectors).min(end);
            pieces.push(Piece {
                start: at,
                sectors: stop - at,
                target: Some(r.target.offset(at - s)),
            });
            at = stop;
        }
        if at < end {
            pieces.push(Piece {
                start: at,
                sectors: end - at,
                target: None,
            });
        }
        pieces
    }

    /// Remove `[start, start + sectors)`, returning the extents that were there.
    pub fn remove(&mut self, start: Sector, sectors: u64) -> Vec<Extent> {
        let end = start + sectors;
        let mut removed = Vec::new();
        if sectors == 0 {
            return removed;
        }
        // An extent that begins before `start` and reaches into the range.
        if let Some((&s, &r)) = self.runs.range(..start).next_back() {
            if s + r.sectors > start {
                let keep = start - s;
                let stop = (s + r.sectors).min(end);
                self.runs.insert(
                    s,
                    Run {
                        sectors: keep,
                        target: r.target,
                    },
                );
                removed.push(Extent {
                    start,
                    sectors: stop - start,
                    target: r.target.offset(keep),
                });
                self.keep_tail(s, r, end);
            }
        }
        let inside: Vec<Sector> = self.runs.range(start..end).map(|(&s, _)| s).collect();
        for s in inside {
            let r = self.runs.remove(&s).expect("key just listed");
            let stop = (s + r.sectors).min(end);
            removed.push(Extent {
                start: s,
                sectors: stop - s,
                target: r.target,
            });
            self.keep_tail(s, r, end);
        }
        removed
    }

    /// Put back the part of run `r` (at `s`) that lies past `end`, if any.
    fn keep_tail(&mut self, s: Sector, r: Run, end: Sector) {
        if s + r.sectors > end {
            self.runs.insert(
                end,
                Run {
                    sectors: s + r.sectors - end,
                    target: r.target.offset(end - s),
                },
            );
        }
    }

    /// Map `[start, start + sectors)` to `target`, returning what it replaced.
    pub fn insert(&mut self, start: Sector, sectors: u64, target: Target) -> Vec<Extent> {
        if sectors == 0 {
            return Vec::new();
        }
        let removed = self.remove(start, sectors);
        let mut start = start;
        let mut run = Run { sectors, target };
        // Merge with the extent just before if it continues into this one.
        if let Some((&s, &r)) = self.runs.range(..start).next_back() {
            if s + r.sectors == start && r.target.offset(r.sectors) == target {
                self.runs.remove(&s);
                start = s;
                run = Run {
                    sectors: r.sectors + sectors,
                    target: r.target,
                };
            }
        }
        // And with the one just after.
        let end = start + run.sectors;
        if let Some(&r) = self.runs.get(&end) {
            if run.target.offset(run.sectors) == r.target {
                self.runs.remove(&end);
                run.sectors += r.sectors;
            }
        }
        self.runs.insert(start, run);
        removed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ext(start: Sector, sectors: u64, target: Target) -> Extent {
        Extent { start, sectors, target }
    }

    #[test]
    fn overwrite_cuts_the_middle_of_an_extent() {
        let mut m = ExtentMap::new();
        m.insert(100, 40, Target::At(1000));
        let old = m.insert(110, 8, Target::At(5000));
        assert_eq!(old, vec![ext(110, 8, Target::At(1010))]);
        let all: Vec<Extent> = m.iter().collect();
        assert_eq!(
            all,
            vec![
                ext(100, 10, Target::At(1000)),
                ext(110, 8, Target::At(5000)),
                ext(118, 22, Target::At(1018)),
            ]
        );
    }

    #[test]
    fn lookup_splits_across_extents_and_gaps() {
        let mut m = ExtentMap::new();
        m.insert(8, 8, Target::At(800));
        m.insert(24, 8, Target::Zero);
        let p = m.lookup(4, 32);
        assert_eq!(
            p,
            vec![
                Piece {
                    start: 4,
                    sectors: 4,
                    target: None
                },
                Piece {
                    start: 8,
                    sectors: 8,
                    target: Some(Target::At(800))
                },
                Piece {
                    start: 16,
                    sectors: 8,
                    target: None
                },
                Piece {
                    start: 24,
                    sectors: 8,
                    target: Some(Target::Zero)
                },
                Piece {
                    start: 32,
                    sectors: 4,
                    target: None
                },
            ]
        );
        assert_eq!(m.lookup(10, 0), vec![], "an empty range has no pieces");
        assert_eq!(
            m.lookup(10, 2),
            vec![Piece {
                start: 10,
                sectors: 2,
                target: Some(Target::At(802))
            }]
        );
    }

    #[test]
    fn contiguous_inserts_merge_into_one_extent() {
        let mut m = ExtentMap::new();
        m.insert(0, 8, Target::At(100));
        m.insert(16, 8, Target::At(116));
        m.insert(8, 8, Target::At(108));
        assert_eq!(m.len(), 1);
        assert_eq!(m.iter().next(), Some(ext(0, 24, Target::At(100))));
        // Not contiguous in the target space: no merge.
        m.insert(24, 8, Target::At(500));
        assert_eq!(m.len(), 2);
    }

    #[test]
    fn remove_spanning_several_extents_returns_each_clipped() {
        let mut m = ExtentMap::new();
        m.insert(0, 10, Target::At(100));
        m.insert(10, 10, Target::At(300));
        m.insert(20, 10, Target::At(500));
        let gone = m.remove(5, 20);
        assert_eq!(
            gone,
            vec![
                ext(5, 5, Target::At(105)),
                ext(10, 10, Target::At(300)),
                ext(20, 5, Target::At(500)),
            ]
        );
        let left: Vec<Extent> = m.iter().collect();
        assert_eq!(left, vec![ext(0, 5, Target::At(100)), ext(25, 5, Target::At(505))]);
    }
}
