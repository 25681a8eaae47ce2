//! The virtual-disk daemon behind `hvio serve`.
//!
//! Each VM's disk is exported over NBD (unix socket or loopback TCP) and/or
//! as a file under a FUSE mount; every request goes through one host
//! scheduler from `hvio_sched` — the same code the simulator runs — driven by
//! the monotonic clock, to a backing file or block device (thread pool or
//! io_uring) or to an emulator that completes requests at the times an
//! `hvio_device` model says. A loopback HTTP control API lists the VMs,
//! switches the scheduler at run time, changes weights and serves
//! Prometheus metrics; an optional request log is written as fio iolog v3.
//!
//! Layout: [`config`] (host.toml) → [`store`] (backing files) →
//! [`backend`] / [`emulator`] (who does the I/O) ← [`engine`] (the scheduler
//! thread) ← [`nbd`] / [`vhost_user`] / [`fuse`] (exports); [`control`], [`stats`] and
//! [`faults`] (protocol rejections) for operations; [`plan`] switches the
//! scheduler by time or on the control API's word, [`online`] by the
//! request mix; [`daemon`] wires them and stops them in order.
#![warn(missing_docs)]

pub mod backend;
pub mod buf;
pub mod cli;
pub mod config;
pub mod control;
pub mod daemon;
pub mod emulator;
pub mod engine;
pub mod ext4meta;
pub mod faults;
pub mod fuse;
pub mod image;
pub mod io;
pub mod iolog;
pub mod nbd;
pub mod online;
pub mod plan;
pub mod poll;
pub mod reshaped;
pub mod stats;
pub mod store;
pub mod vhost_user;
pub mod volatile;

pub use config::Config;
pub use daemon::{run, start, Running, ServeError};
