//! The block request as a hypervisor's block layer sees it.
//!
//! A request carries what the host really sees: the stream it came from (a VM
//! at the host; a guest thread inside a guest), the physical position and
//! length in 512-byte sectors, the operation, the sync flag, the guest's
//! metadata flag (paper 001 propagates it), an I/O priority class and its
//! arrival time. Which guest thread issued a host request is *not* here: the
//! papers insist the host scheduler is transparent to guests.

use crate::time::Nanos;
use serde::{Deserialize, Serialize};

/// A position on a block device, in 512-byte sectors.
pub type Sector = u64;

/// Bytes per sector: all positions and lengths in hvio count 512-byte sectors.
pub const SECTOR_BYTES: u64 = 512;

/// Unique id of a request within one run (assigned by the driver).
pub type RequestId = u64;

/// The scheduling identity of a request: a VM at the host, a thread in a guest.
pub type StreamId = u32;

/// The operation of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// Read data from the device.
    Read,
    /// Write data to the device.
    Write,
    /// A cache flush: no data, no position.
    Flush,
    /// Discard / trim / write-zeroes without data.
    Discard,
}

impl Op {
    /// Whether it is a read.
    pub fn is_read(self) -> bool {
        self == Op::Read
    }
    /// Whether it is a write with data.
    pub fn is_write(self) -> bool {
        self == Op::Write
    }
    /// Index used by schedulers that keep per-direction structures:
    /// 0 = read, 1 = write (flush and discard are treated as writes).
    pub fn dir(self) -> usize {
        if self == Op::Read {
            0
        } else {
            1
        }
    }
    /// The lowercase name (`read`, `write`, `flush`, `discard`).
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Flush => "flush",
            Op::Discard => "discard",
        }
    }
}

/// Linux I/O priority classes (`ioprio_set(2)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum IoClass {
    /// Real time.
    Rt,
    /// Best effort (the default).
    #[default]
    Be,
    /// Idle.
    Idle,
}

/// One block request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// Unique among the requests in flight at one scheduler.
    pub id: RequestId,
    /// The stream (VM at the host, thread in a guest) it belongs to.
    pub stream: StreamId,
    /// First sector.
    pub sector: Sector,
    /// Length in 512-byte sectors (0 for a flush).
    pub sectors: u32,
    /// What it does.
    pub op: Op,
    /// Synchronous: somebody waits for it (reads, O_DIRECT/O_SYNC writes, fsync).
    pub sync: bool,
    /// File-system metadata or journal (the guest's REQ_META flag).
    pub meta: bool,
    /// Force unit access: complete only once on stable media.
    pub fua: bool,
    /// The I/O priority class (Linux `ioprio` class).
    pub class: IoClass,
    /// Priority level within the class, 0 (highest) to 7; 4 is the default.
    pub prio: u8,
    /// When the request reached the scheduler that holds it.
    pub arrival: Nanos,
}

impl Request {
    /// A request with the common defaults (best effort, level 4, not meta, no FUA).
    pub fn new(id: RequestId, stream: StreamId, op: Op, sector: Sector, sectors: u32, arrival: Nanos) -> Self {
        Request {
            id,
            stream,
            sector,
            sectors,
            op,
            sync: op == Op::Read,
            meta: false,
            fua: false,
            class: IoClass::Be,
            prio: 4,
            arrival,
        }
    }

    /// The first sector after the request.
    pub fn end(&self) -> Sector {
        self.sector + self.sectors as Sector
    }

    /// One past the last sector.
    pub fn bytes(&self) -> u64 {
        self.sectors as u64 * crate::SECTOR_BYTES
    }

    /// Length in bytes.
    pub fn is_read(&self) -> bool {
        self.op.is_read()
    }

    /// Whether it is a read.
    pub fn with_sync(mut self, sync: bool) -> Self {
        self.sync = sync;
        self
    }

    /// The same request marked synchronous or not.
    pub fn with_meta(mut self, meta: bool) -> Self {
        self.meta = meta;
        self
    }
}
