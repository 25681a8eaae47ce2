//! Address reshaping for flash storage under virtual machines (paper 001,
//! Kim, Eom and Son, IEEE Access 2018), written sans I/O: no file, no clock.
//!
//! The simulator drives it as a host-path stage and the daemon as an image
//! format; both give it guest requests and completions and perform the I/O it
//! asks for. The parts, by the paper's sections:
//!
//! - [`extent_map`]: the remap tables (§III.A.2, §III.C), one per region;
//! - [`config`]: the metadata and data regions, segments, the log area and
//!   the checkpoint slots, validated;
//! - [`encoding`]: the on-disk log transactions and checkpoints (§III.B.3);
//! - [`reshaper`]: the metadata/data checker and sequentializer (§III.A,
//!   §III.B.1, Fig. 2–3), cleaning (§III.B.2), write-ahead logging and
//!   recovery (§III.B.3, Fig. 4), and the statistics of their cost;
//! - [`model`]: the cleaner's write amplification against the analytic
//!   model of greedy cleaning.
//!
//! `docs/reshape.md` describes the model and the choices where the paper is
//! silent.
#![warn(missing_docs)]

pub mod config;
pub mod encoding;
pub mod extent_map;
pub mod model;
pub mod reshaper;

pub use config::{Area, Layout, ReshapeConfig, Victim};
pub use extent_map::{Extent, ExtentMap, Piece, Target};
pub use reshaper::{
    CopySlice, Event, GuestSlice, Io, IoId, IoKind, Payload, RecoveryError, RecoveryReport, Region, ReshapeError,
    Reshaper, Stats,
};
