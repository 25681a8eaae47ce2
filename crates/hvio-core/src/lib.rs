//! Core types shared by every hvio layer.
//!
//! The one idea that holds hvio together (see `ARCHITECTURE.md`): a scheduler
//! never reads a clock and never does I/O. It is driven through the small
//! [`Scheduler`] interface, shaped like the Linux blk-mq elevator
//! (`insert_requests`, `dispatch_request`, `completed_request`, `has_work`),
//! with time passed in. The simulator drives it with simulated time and a
//! [`Device`] model; the daemon drives it with the monotonic clock and real I/O.
#![warn(missing_docs)]

pub mod device;
pub mod error;
pub mod input;
pub mod map;
pub mod message;
pub mod output;
pub mod params;
pub mod request;
pub mod sched;
pub mod time;

pub use device::{Completion, Device, DeviceInfo, LinearSeek, SeekModel, ServiceBreakdown};
pub use error::ConfigError;
pub use map::{Extent, ExtentMap, ImageMap};
pub use params::{ParamSpec, ParamValues, Params};
pub use request::{IoClass, Op, Request, RequestId, Sector, StreamId, SECTOR_BYTES};
pub use sched::{Dispatch, SchedContext, Scheduler, SliceGrant, SliceLog, StreamInfo, SLICE_LOG_MAX};
pub use time::{ms, ns_to_ms, ns_to_s, s, us, Nanos, NS_PER_MS, NS_PER_S, NS_PER_US};
