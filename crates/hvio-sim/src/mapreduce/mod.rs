//! A virtual Hadoop cluster's MapReduce job, the workload of paper 002.
//!
//! - [`spec`]: the job and the cluster, with the paper's three benchmarks
//!   as presets and Hadoop's defaults where the paper is silent;
//! - [`job`]: the job as a task-level state machine that asks for
//!   file-level I/O on a VM's guest, CPU and network transfers, and is told
//!   when each is done;
//! - [`cluster`]: the runner that steps several physical nodes, the network
//!   and the VCPUs in time order (fair sharing from [`share`]);
//! - [`node`]: a physical node of guest and host schedulers (switchable at
//!   run time) and a disk model, for the runner;
//! - [`phases`]: the paper's phases (§IV.A) from the job's progress.

pub mod cluster;
pub mod job;
pub mod node;
pub mod phases;
pub mod share;
pub mod spec;

pub use cluster::{run, ClusterRun, NodeIo};
pub use job::{Action, FileKey, FileOp, Job, JobStats, OpId, VmId};
pub use node::{HostNode, NodeSpec};
pub use phases::{waves, PhaseKind, Phases, ProgressLog, Span};
pub use spec::{Benchmark, ClusterSpec, Heartbeat, JobSpec};
