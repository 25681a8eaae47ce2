//! The hard-disk model: zoned geometry with skews and holes, a seek curve,
//! rotation tracked over time, a segmented read-ahead cache, an optional
//! write-back buffer and an optional reordering device queue.

mod device;
pub mod geometry;
mod model;
mod params;
pub mod seek;
pub mod speed;

pub use device::{Hdd, HddStats};
pub use geometry::{Geometry, GeometryError, Hole, Loc, SurfaceOrder, Zone};
pub(crate) use model::round;
pub use model::{
    Access, CacheParams, DestagePolicy, HddModel, HddSeek, Overheads, Phases, QueuePolicy, ReadAheadExtent,
    ReadAheadPolicy,
};
pub use params::{
    HddParams, SeekSpec, DEFAULT_CAPACITY, MAX_POLICY_MS, MAX_QUEUE_DEPTH, MAX_SECTORS_PER_TRACK, MAX_SEGMENTS,
    MAX_STEP_MS, MAX_SURFACES, MAX_ZONES,
};
pub use seek::{SeekCurve, SeekTimes};
