//! Metadata or data, without touching the guest (paper 001 §III.A.1).
//!
//! The paper's checker runs in the guest: a modified ext4 flags its metadata
//! requests. The daemon cannot change the guest, so it reads the guest file
//! system's own layout from the disk and classes a write by the area it
//! falls in: the ext4 superblock (disk byte 1024) gives the block size, the
//! groups and the journal inode; the group descriptors give each group's
//! block bitmap, inode bitmap and inode table; groups holding a superblock
//! backup (all, or 0, 1 and powers of 3, 5 and 7 with `sparse_super`) start
//! with the superblock, the descriptors and the reserved descriptor blocks;
//! the journal inode's extents give the journal. Those areas are metadata;
//! everything else (file data, and directory and extent-tree blocks, which
//! need a walk of the file system to find) is data. A disk without an ext4
//! superblock is all data.
//!
//! The layout is kept up to date by watching writes: a shadow of the disk's
//! first [`HEAD_BYTES`] (superblock and descriptors) and of the journal
//! inode follows what the guest writes there, so a file system made after
//! the daemon started (mkfs on the export) is found as soon as its
//! superblock is written.

/// Bytes at the start of the disk that are shadowed (superblock and group
/// descriptors of a file system of up to 2 TiB with 4 KiB blocks).
pub const HEAD_BYTES: u64 = 1 << 20;
const SB_AT: usize = 1024;
const EXT4_MAGIC: u64 = 0xEF53;
const JOURNAL_INODE_BYTES: usize = 256;

fn u16_at(b: &[u8], at: usize) -> u64 {
    u16::from_le_bytes([b[at], b[at + 1]]) as u64
}
fn u32_at(b: &[u8], at: usize) -> u64 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes")) as u64
}

/// The classifier of one disk.
#[derive(Default)]
pub struct Ext4Classifier {
    head: Vec<u8>,
    /// Where the journal inode is (disk byte) and its bytes.
    journal_inode: Option<(u64, Vec<u8>)>,
    /// Metadata byte ranges, sorted, merged.
    meta: Vec<(u64, u64)>,
    /// Whether an ext4 superblock was found.
    pub found: bool,
}

impl Ext4Classifier {
    /// A classifier that has seen no superblock yet.
    pub fn new() -> Ext4Classifier {
        Ext4Classifier {
            head: vec![0; HEAD_BYTES as usize],
            ..Default::default()
        }
    }

    /// Whether a write of `len` bytes at `offset` is metadata: its first byte
    /// lies in a metadata area.
    pub fn is_meta(&self, offset: u64, _len: u64) -> bool {
        let i = self.meta.partition_point(|&(s, _)| s <= offset);
        i > 0 && offset < self.meta[i - 1].1
    }

    /// The guest wrote `data` at `offset` (or the daemon read it at start):
    /// update the shadows and, if they changed, the layout.
    pub fn observe(&mut self, offset: u64, data: &[u8]) {
        let end = offset + data.len() as u64;
        let mut changed = false;
        if offset < HEAD_BYTES {
            let to = end.min(HEAD_BYTES);
            let src = &data[..(to - offset) as usize];
            let dst = &mut self.head[offset as usize..to as usize];
            if dst != src {
                dst.copy_from_slice(src);
                changed = true;
            }
        }
        if let Some((at, bytes)) = &mut self.journal_inode {
            let (s, e) = (*at, *at + bytes.len() as u64);
            if offset < e && s < end {
                let from = offset.max(s);
                let to = end.min(e);
                bytes[(from - s) as usize..(to - s) as usize]
                    .copy_from_slice(&data[(from - offset) as usize..(to - offset) as usize]);
                changed = true;
            }
        }
        if changed {
            self.rebuild();
        }
    }

    /// Where the journal inode is, once the layout names it (the daemon reads
    /// it at start; then [`observe`](Self::observe) keeps it).
    pub fn journal_inode_at(&self) -> Option<(u64, usize)> {
        self.journal_inode.as_ref().map(|(at, b)| (*at, b.len()))
    }

    fn rebuild(&mut self) {
        let sb = &self.head[SB_AT..SB_AT + 1024];
        self.meta.clear();
        self.found = u16_at(sb, 56) == EXT4_MAGIC;
        if !self.found {
            self.journal_inode = None;
            return;
        }
        let log_block = u32_at(sb, 24);
        if log_block > 6 {
            self.found = false;
            return;
        }
        let bs = 1024u64 << log_block;
        let blocks = u32_at(sb, 4) | (u32_at(sb, 0x150) << 32);
        let first_data = u32_at(sb, 20);
        let per_group = u32_at(sb, 32);
        let inodes_per_group = u32_at(sb, 40);
        let inode_size = u16_at(sb, 88).max(128);
        let incompat = u32_at(sb, 96);
        let ro_compat = u32_at(sb, 100);
        let desc_size = if incompat & 0x80 != 0 {
            u16_at(sb, 0xFE).max(32)
        } else {
            32
        };
        let reserved_gdt = u16_at(sb, 0xCE);
        if per_group == 0 || blocks <= first_data {
            self.found = false;
            return;
        }
        let groups = (blocks - first_data).div_ceil(per_group);
        let gdt_bytes = groups * desc_size;
        let gdt_at = (first_data + 1) * bs;
        let gdt_blocks = gdt_bytes.div_ceil(bs);
        let sparse = ro_compat & 1 != 0;
        let has_backup = |g: u64| {
            if !sparse || g <= 1 {
                return true;
            }
            [3u64, 5, 7].iter().any(|&p| {
                let mut x = g;
                while x.is_multiple_of(p) {
                    x /= p;
                }
                x == 1
            })
        };
        let mut meta = Vec::new();
        for g in 0..groups {
            let start = (first_data + g * per_group) * bs;
            if has_backup(g) {
                // Superblock (or its backup), descriptors, reserved descriptors.
                let from = if g == 0 { 0 } else { start };
                meta.push((from, start + (1 + gdt_blocks + reserved_gdt) * bs));
            }
            let d = gdt_at + g * desc_size;
            if d + desc_size > HEAD_BYTES {
                continue;
            }
            let d = &self.head[d as usize..(d + desc_size) as usize];
            let hi = |at: usize| if desc_size >= 64 { u32_at(d, at) << 32 } else { 0 };
            let block_bitmap = u32_at(d, 0) | hi(0x20);
            let inode_bitmap = u32_at(d, 4) | hi(0x24);
            let inode_table = u32_at(d, 8) | hi(0x28);
            for b in [block_bitmap, inode_bitmap] {
                if b > 0 && b < blocks {
                    meta.push((b * bs, (b + 1) * bs));
                }
            }
            if inode_table > 0 && inode_table < blocks {
                meta.push((inode_table * bs, inode_table * bs + inodes_per_group * inode_size));
            }
            if g == 0 && inode_table > 0 {
                // The journal inode (s_journal_inum, usually 8) of group 0.
                let inum = u32_at(sb, 0xE0);
                if inum >= 1 && inum <= inodes_per_group {
                    let at = inode_table * bs + (inum - 1) * inode_size;
                    let len = (inode_size as usize).min(JOURNAL_INODE_BYTES);
                    if self
                        .journal_inode
                        .as_ref()
                        .is_none_or(|(a, b)| *a != at || b.len() != len)
                    {
                        self.journal_inode = Some((at, vec![0; len]));
                    }
                }
            }
        }
        // The journal: the inode's extents (depth 0 only; a deeper tree's
        // leaves would need reading).
        if let Some((_, ino)) = &self.journal_inode {
            let flags = u32_at(ino, 32);
            let i_block = &ino[40..100];
            if flags & 0x80000 != 0 && u16_at(i_block, 0) == 0xF30A && u16_at(i_block, 6) == 0 {
                let n = u16_at(i_block, 2).min(4) as usize;
                for e in 0..n {
                    let x = &i_block[12 + 12 * e..24 + 12 * e];
                    let len = u16_at(x, 4) & 0x7FFF;
                    let start = (u16_at(x, 6) << 32) | u32_at(x, 8);
                    if len > 0 && start + len <= blocks {
                        meta.push((start * bs, (start + len) * bs));
                    }
                }
            }
        }
        meta.sort_unstable();
        for (s, e) in meta {
            match self.meta.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => self.meta.push((s, e)),
            }
        }
    }

    /// Metadata bytes the layout names.
    pub fn meta_bytes(&self) -> u64 {
        self.meta.iter().map(|(s, e)| e - s).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hand-made ext4 superblock and descriptor table: 4 KiB blocks, two
    /// groups of 32768 blocks, 64-byte descriptors, a journal of 1024 blocks.
    #[test]
    fn classes_by_the_areas_the_superblock_and_descriptors_name() {
        let mut c = Ext4Classifier::new();
        assert!(!c.is_meta(0, 4096), "no file system: all data");
        let mut sb = vec![0u8; 1024];
        sb[4..8].copy_from_slice(&65536u32.to_le_bytes()); // blocks
        sb[24..28].copy_from_slice(&2u32.to_le_bytes()); // 4 KiB
        sb[32..36].copy_from_slice(&32768u32.to_le_bytes());
        sb[40..44].copy_from_slice(&8192u32.to_le_bytes());
        sb[56..58].copy_from_slice(&(EXT4_MAGIC as u16).to_le_bytes());
        sb[88..90].copy_from_slice(&256u16.to_le_bytes());
        sb[96..100].copy_from_slice(&0x80u32.to_le_bytes()); // 64bit
        sb[100..104].copy_from_slice(&1u32.to_le_bytes()); // sparse_super
        sb[0xCE..0xD0].copy_from_slice(&15u16.to_le_bytes());
        sb[0xE0..0xE4].copy_from_slice(&8u32.to_le_bytes());
        sb[0xFE..0x100].copy_from_slice(&64u16.to_le_bytes());
        let mut gdt = vec![0u8; 128];
        for (g, (bb, ib, it)) in [(17u32, 33u32, 49u32), (18, 34, 561)].iter().enumerate() {
            let d = &mut gdt[g * 64..];
            d[0..4].copy_from_slice(&bb.to_le_bytes());
            d[4..8].copy_from_slice(&ib.to_le_bytes());
            d[8..12].copy_from_slice(&it.to_le_bytes());
        }
        c.observe(4096, &gdt);
        assert!(!c.found && !c.is_meta(17 * 4096, 4096), "descriptors alone say nothing");
        c.observe(1024, &sb);
        assert!(c.found);
        for (block, meta) in [
            (0, true),     // superblock
            (1, true),     // descriptors
            (16, true),    // reserved descriptors (1 + 1 + 15 blocks)
            (17, true),    // block bitmap, group 0
            (34, true),    // inode bitmap, group 1
            (49, true),    // inode table, group 0: 8192 × 256 B = 512 blocks
            (560, true),   // its last block
            (561, true),   // group 1's
            (1073, false), // after it
            (32768, true), // group 1's superblock backup
            (40000, false),
        ] {
            assert_eq!(c.is_meta(block * 4096, 4096), meta, "block {block}");
        }
        // The journal inode (inode 8 of group 0's table) with one extent.
        let (at, len) = c.journal_inode_at().unwrap();
        assert_eq!(at, 49 * 4096 + 7 * 256);
        let mut ino = vec![0u8; len];
        ino[32..36].copy_from_slice(&0x80000u32.to_le_bytes());
        let ib = &mut ino[40..];
        ib[0..2].copy_from_slice(&0xF30Au16.to_le_bytes());
        ib[2..4].copy_from_slice(&1u16.to_le_bytes());
        ib[16..18].copy_from_slice(&1024u16.to_le_bytes()); // length
        ib[20..24].copy_from_slice(&20000u32.to_le_bytes()); // start
        assert!(!c.is_meta(20000 * 4096, 4096));
        c.observe(at, &ino);
        assert!(c.is_meta(20000 * 4096, 4096) && c.is_meta(21023 * 4096, 4096));
        assert!(!c.is_meta(21024 * 4096, 4096));
        // Wiping the superblock: all data again.
        c.observe(1024, &[0u8; 1024]);
        assert!(!c.found && !c.is_meta(17 * 4096, 4096));
    }
}
