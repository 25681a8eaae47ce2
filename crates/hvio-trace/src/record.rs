//! The common record every reader yields.

use hvio_core::{Nanos, Op};
use serde::{Deserialize, Serialize};

/// The largest request end (sector + count) a reader yields: every byte of a
/// request has a 64-bit byte offset (writers print byte offsets).
pub const MAX_SECTOR_END: u64 = u64::MAX / hvio_core::SECTOR_BYTES;

/// Request flags carried by some formats (blktrace's RWBS, vSCSI commands).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RecFlags(pub u8);

impl RecFlags {
    /// Synchronous (`S` in RWBS).
    pub const SYNC: u8 = 1;
    /// File-system metadata (`M`).
    pub const META: u8 = 2;
    /// Force unit access (`F` after the op).
    pub const FUA: u8 = 4;
    /// Preceded by a cache flush (`F` before the op).
    pub const PREFLUSH: u8 = 8;
    /// Read-ahead (`A`).
    pub const READAHEAD: u8 = 16;

    /// Whether flag `bit` is set.
    pub fn has(self, bit: u8) -> bool {
        self.0 & bit != 0
    }
    /// Sets flag `bit`.
    pub fn set(&mut self, bit: u8) {
        self.0 |= bit;
    }
}

/// One traced block request.
///
/// Positions and lengths are in 512-byte sectors: byte offsets are rounded
/// down to a sector and byte lengths up (a request touching part of a sector
/// touches the sector). `time` is in nanoseconds on the trace's own clock
/// (trace start for blktrace/blkparse/fio/DiskSim/MQSim/SPC, the Unix epoch for
/// MSR, Alibaba and Tencent); replay and statistics use differences only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceRecord {
    /// When it was issued (ns on the trace's clock).
    pub time: Nanos,
    /// Dense index into the reader's device table ([`crate::TraceReader::devices`]).
    pub device: u32,
    /// What it does.
    pub op: Op,
    /// First sector.
    pub sector: u64,
    /// Length in 512-byte sectors.
    pub sectors: u32,
    /// Flags the format carries.
    pub flags: RecFlags,
    /// Response time recorded by the trace (MSR, vSCSI v2), if any.
    pub latency: Option<Nanos>,
}

impl TraceRecord {
    /// A record with no flags and no latency.
    pub fn new(time: Nanos, device: u32, op: Op, sector: u64, sectors: u32) -> Self {
        TraceRecord {
            time,
            device,
            op,
            sector,
            sectors,
            flags: RecFlags::default(),
            latency: None,
        }
    }

    /// Length in bytes.
    pub fn bytes(&self) -> u64 {
        self.sectors as u64 * hvio_core::SECTOR_BYTES
    }

    /// One past the last sector.
    pub fn end(&self) -> u64 {
        self.sector + self.sectors as u64
    }
}

/// Converts a byte range to (first sector, sector count), rounding outwards.
/// Errors on a length that does not fit 32-bit sector counts.
pub(crate) fn bytes_to_sectors(offset: u64, len: u64) -> Result<(u64, u32), &'static str> {
    let first = offset / 512;
    let end = offset.checked_add(len).ok_or("offset + length overflows")?;
    let last = end.div_ceil(512);
    let n = last - first;
    let n = if len == 0 { 0 } else { n };
    u32::try_from(n)
        .map(|n| (first, n))
        .map_err(|_| "request length over 2 TiB")
}
