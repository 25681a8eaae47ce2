//! Image maps: where a VM's image sectors lie on the host's device
//! (ARCHITECTURE.md's "image map" layer, between a VM's host path and the
//! host scheduler). An image stored as several extents (a fragmented image
//! file, `fragments` and `fragment_gap` in a simulation config) maps a
//! request that crosses an extent boundary to several physical requests,
//! one per extent, as a file system splits a bio at an extent's end. The
//! simulator and the daemon map through the same [`ImageMap`], so the
//! address a scheduler sees is the address the device is given.

use crate::request::Sector;

/// A run of physical sectors: `sectors` from `sector`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    /// First physical sector.
    pub sector: Sector,
    /// Length in 512-byte sectors.
    pub sectors: u64,
}

/// Maps image sectors to physical sectors.
pub trait ImageMap {
    /// The physical sector holding image sector `sector`.
    fn map_sector(&self, sector: Sector) -> Sector;

    /// The physical extents holding image sectors `[sector, sector +
    /// sectors)`, in image order, appended to `out` (one for a range inside
    /// one extent; none for an empty range).
    fn map_range(&self, sector: Sector, sectors: u64, out: &mut Vec<Extent>);
}

/// An image stored as a list of physical extents, in image order. Sectors
/// past the last extent's end continue after it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtentMap {
    /// (first physical sector, sectors) of each extent.
    extents: Vec<(Sector, u64)>,
    /// The first image sector of each extent.
    starts: Vec<Sector>,
}

impl ExtentMap {
    /// The map of an image made of `extents`, (first physical sector,
    /// sectors) each, in image order; an empty list maps the image to
    /// sector 0 onwards.
    pub fn new(extents: Vec<(Sector, u64)>) -> ExtentMap {
        let extents = if extents.is_empty() { vec![(0, 0)] } else { extents };
        let mut starts = Vec::with_capacity(extents.len());
        let mut at = 0;
        for e in &extents {
            starts.push(at);
            at += e.1;
        }
        ExtentMap { extents, starts }
    }

    /// One extent of `sectors` from physical sector `first`.
    pub fn contiguous(first: Sector, sectors: u64) -> ExtentMap {
        ExtentMap::new(vec![(first, sectors)])
    }

    /// The extents, (first physical sector, sectors) each.
    pub fn extents(&self) -> &[(Sector, u64)] {
        &self.extents
    }

    /// The whole physical span, (first sector, sectors), from the first
    /// extent's start to the last one's end.
    pub fn span(&self) -> (Sector, u64) {
        let start = self.extents[0].0;
        let last = self.extents[self.extents.len() - 1];
        (start, last.0 + last.1 - start)
    }

    /// Where image sectors `[sector, sector + sectors)` lie: `Some` first
    /// physical sector when one extent holds them all (an empty range
    /// too), else `None` with each extent's piece in `out` (cleared
    /// first), in image order: the parts a request is split into.
    #[inline]
    pub fn place(&self, sector: Sector, sectors: u64, out: &mut Vec<Extent>) -> Option<Sector> {
        if self.extents.len() > 1 {
            out.clear();
            self.map_range(sector, sectors, out);
            if out.len() > 1 {
                return None;
            }
        }
        Some(self.map_sector(sector))
    }

    /// The extent holding image sector `sector` (the last for any past its end).
    #[inline]
    fn extent_of(&self, sector: Sector) -> usize {
        if self.extents.len() == 1 {
            return 0;
        }
        match self.starts.binary_search(&sector) {
            Ok(i) => i,
            Err(i) => i - 1,
        }
    }
}

impl ImageMap for ExtentMap {
    #[inline]
    fn map_sector(&self, sector: Sector) -> Sector {
        let i = self.extent_of(sector);
        self.extents[i].0 + (sector - self.starts[i])
    }

    fn map_range(&self, sector: Sector, sectors: u64, out: &mut Vec<Extent>) {
        let (mut at, mut left) = (sector, sectors);
        let mut i = self.extent_of(sector);
        while left > 0 {
            let within = at - self.starts[i];
            let last = i + 1 == self.extents.len();
            let n = if last {
                left
            } else {
                (self.extents[i].1 - within).min(left)
            };
            out.push(Extent {
                sector: self.extents[i].0 + within,
                sectors: n,
            });
            at += n;
            left -= n;
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(m: &ExtentMap, s: u64, n: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        m.map_range(s, n, &mut out);
        out.iter().map(|e| (e.sector, e.sectors)).collect()
    }

    #[test]
    fn a_contiguous_image_is_an_offset() {
        let m = ExtentMap::contiguous(1000, 64);
        assert_eq!(m.map_sector(0), 1000);
        assert_eq!(m.map_sector(63), 1063);
        assert_eq!(range(&m, 8, 16), vec![(1008, 16)]);
        // Past the end: onwards from the extent, never split.
        assert_eq!(range(&m, 60, 8), vec![(1060, 8)]);
        assert_eq!(m.span(), (1000, 64));
    }

    #[test]
    fn a_range_across_extents_is_split_at_each_boundary() {
        // Four extents of 100 sectors, 1000 apart.
        let m = ExtentMap::new((0..4).map(|f| (5000 + f * 1100, 100)).collect());
        assert_eq!(m.map_sector(99), 5099);
        assert_eq!(m.map_sector(100), 6100);
        assert_eq!(m.map_sector(399), 8399);
        assert_eq!(range(&m, 96, 8), vec![(5096, 4), (6100, 4)]);
        assert_eq!(range(&m, 100, 100), vec![(6100, 100)]);
        assert_eq!(
            range(&m, 50, 300),
            vec![(5050, 50), (6100, 100), (7200, 100), (8300, 50)]
        );
        assert_eq!(range(&m, 0, 0), vec![]);
        let mut parts = Vec::new();
        assert_eq!(m.place(96, 4, &mut parts), Some(5096));
        assert_eq!(m.place(100, 0, &mut parts), Some(6100));
        assert_eq!(m.place(96, 8, &mut parts), None);
        assert_eq!(
            parts,
            vec![
                Extent {
                    sector: 5096,
                    sectors: 4
                },
                Extent {
                    sector: 6100,
                    sectors: 4
                }
            ]
        );
        assert_eq!(ExtentMap::contiguous(1000, 64).place(60, 8, &mut parts), Some(1060));
        assert_eq!(m.span(), (5000, 3400));
        // Each part as long as the image sectors it holds.
        for s in [0u64, 37, 99, 100, 250] {
            for n in [1u64, 8, 64, 150] {
                if s + n <= 400 {
                    let parts = range(&m, s, n);
                    assert_eq!(parts.iter().map(|p| p.1).sum::<u64>(), n);
                    assert_eq!(parts[0].0, m.map_sector(s));
                }
            }
        }
    }
}
