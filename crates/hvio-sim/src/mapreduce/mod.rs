//! A virtual Hadoop cluster's MapReduce job, the workload of paper 002.
//!
//! [`phases`] cuts a run into the paper's phases (§IV.A) from the job's
//! progress.

pub mod phases;

pub use phases::{waves, PhaseKind, Phases, ProgressLog, Span};
