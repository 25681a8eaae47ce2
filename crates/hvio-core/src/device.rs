//! The device interface shared by the simulator's models and the daemon's
//! emulator backend, and the seek-time estimate schedulers may consult.
//!
//! A device is event driven: the driver submits requests while
//! `in_flight() < queue_depth()`, asks when the next completion is due, and
//! collects completions at that time. This covers a depth-1 HDD, an NCQ disk
//! that reorders, a write-back cache that acknowledges early and an SSD with
//! parallel channels behind one interface.

use crate::request::{Request, Sector};
use crate::time::Nanos;
use std::fmt;
use std::sync::Arc;

/// Where the service time of one request went.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServiceBreakdown {
    /// Controller / command overhead.
    pub overhead: Nanos,
    /// Head movement to the target cylinder.
    pub seek: Nanos,
    /// Waiting for the target sector to come under the head.
    pub rotation: Nanos,
    /// Moving the data between medium and host.
    pub transfer: Nanos,
    /// Served (entirely) from the drive's cache.
    pub cache_hit: bool,
}

impl ServiceBreakdown {
    /// The whole service time: overhead, seek, rotation and transfer.
    pub fn total(&self) -> Nanos {
        self.overhead + self.seek + self.rotation + self.transfer
    }
}

/// A finished request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    /// The request as submitted.
    pub rq: Request,
    /// When the device started working on it (after any queueing inside the device).
    pub start: Nanos,
    /// When it completed.
    pub done: Nanos,
    /// Where its service time went.
    pub service: ServiceBreakdown,
}

/// Seek-time estimates a scheduler may use (Pregather §4.1, iShare's
/// `max_seektime`, HTBS's seek factor). Estimates only: no state changes.
pub trait SeekModel: Send + Sync {
    /// Estimated positioning time to move from `from` to `to` (seek only).
    fn seek_time(&self, from: Sector, to: Sector) -> Nanos;
    /// The longest seek (full stroke).
    fn max_seek_time(&self) -> Nanos;
    /// One revolution (0 for a solid-state device).
    fn revolution(&self) -> Nanos;
}

/// A seek estimate proportional to distance: `factor_ns_per_sector · |to − from|`,
/// capped at `max`. Used for tests and for non-rotational devices.
#[derive(Debug, Clone, Copy)]
pub struct LinearSeek {
    /// Seek time per sector of distance.
    pub ns_per_sector: f64,
    /// The longest seek (the cap).
    pub max: Nanos,
    /// One revolution (0 for a solid-state device).
    pub revolution: Nanos,
}

impl SeekModel for LinearSeek {
    fn seek_time(&self, from: Sector, to: Sector) -> Nanos {
        let d = from.abs_diff(to) as f64;
        ((d * self.ns_per_sector) as Nanos).min(self.max)
    }
    fn max_seek_time(&self) -> Nanos {
        self.max
    }
    fn revolution(&self) -> Nanos {
        self.revolution
    }
}

/// What a scheduler may know about its device.
#[derive(Clone)]
pub struct DeviceInfo {
    /// Size in 512-byte sectors.
    pub capacity: Sector,
    /// Seeks cost time (Linux `queue/rotational`): CFQ and BFQ idle only on these.
    pub rotational: bool,
    /// Requests the device accepts at once (NCQ depth; 1 = no device queueing).
    pub queue_depth: usize,
    /// Seek-time estimates for schedulers that weigh distance.
    pub seek: Arc<dyn SeekModel>,
}

impl fmt::Debug for DeviceInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceInfo")
            .field("capacity", &self.capacity)
            .field("rotational", &self.rotational)
            .field("queue_depth", &self.queue_depth)
            .field("max_seek_time", &self.seek.max_seek_time())
            .finish()
    }
}

impl DeviceInfo {
    /// A rotational device of `capacity` sectors with a linear seek estimate:
    /// handy for scheduler unit tests that need no device model.
    pub fn test_disk(capacity: Sector) -> Self {
        DeviceInfo {
            capacity,
            rotational: true,
            queue_depth: 1,
            seek: Arc::new(LinearSeek {
                ns_per_sector: 15.0e6 / capacity.max(1) as f64,
                max: 15_000_000,
                revolution: 8_333_333,
            }),
        }
    }
}

/// A block device: a model in the simulator, a timing emulator in the daemon.
pub trait Device: Send {
    /// What schedulers may know about the device.
    fn info(&self) -> DeviceInfo;
    /// Requests submitted and not yet completed.
    fn in_flight(&self) -> usize;
    /// Whether another request can be submitted now.
    fn can_accept(&self) -> bool;
    /// Submit a request at `now` (only when `can_accept()`).
    fn submit(&mut self, rq: Request, now: Nanos);
    /// When the next completion (or internal event) is due, if any.
    fn next_event(&self) -> Option<Nanos>;
    /// Advance to `now` and append every completion due by then, in completion order.
    fn advance(&mut self, now: Nanos, out: &mut Vec<Completion>);
    /// The head position after the last media access (for seek-distance metrics).
    fn head(&self) -> Sector;
    /// The model's own counters since the run began, by name (an SSD's
    /// FTL: page writes, garbage collection, write amplification). Default: none.
    fn counters(&self) -> Vec<(String, f64)> {
        Vec::new()
    }
    /// Begin another run on what the device holds now (workload-dependent
    /// preconditioning runs a workload on it round after round): the clock
    /// back at zero as if the device had sat idle until everything it
    /// accepted was done, its counters from zero, its content (an SSD's
    /// mapping and flash) kept. Only with nothing in flight. Returns
    /// whether the model can; by default it cannot.
    fn restart(&mut self) -> bool {
        false
    }
}
