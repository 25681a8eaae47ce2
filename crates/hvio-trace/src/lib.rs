//! Trace and workload readers and writers.
//!
//! - [`TraceReader`]: streaming readers (constant memory) for blkparse text,
//!   blktrace binary, fio iologs, MSR Cambridge, SPC, Alibaba, Tencent CBS,
//!   FIU, DiskSim, MQSim and vSCSI traces, gzip or not, with format detection.
//! - [`fio`]: fio job files as workloads ([`fio::FioJob`]).
//! - [`mod@write`]: records out as blkparse text or fio iolog v3.
//! - [`stats`]: trace statistics.
//! - [`mutate`]: mutation operators for the robustness tests of every reader.
#![warn(missing_docs)]

pub mod error;
pub mod fio;
pub mod fio_options;
pub mod formats;
pub mod input;
pub mod mutate;
pub mod parse;
pub mod reader;
pub mod record;
pub mod stats;
pub mod write;

pub use error::{Loc, TraceError};
pub use reader::{BlkAction, Format, Prefetch, ReadOptions, TraceReader};
pub use record::{RecFlags, TraceRecord};
pub use stats::{trace_stats, TraceStats};
