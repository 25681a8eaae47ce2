//! hvio's disk I/O schedulers behind the one [`Scheduler`] interface.
//!
//! Each scheduler is a module of a few hundred lines with its tunables in a
//! [`ParamSpec`] table under their Linux names, defaults and units. The
//! [`SCHEDULERS`] registry lists them all; [`build`] makes one by name with
//! checked parameter overrides. A scheduler serves at the host (streams =
//! VMs) or in a guest (streams = guest threads) unchanged.

pub mod anticipatory;
pub mod bench;
pub mod bfq;
pub mod cfq;
pub mod deadline;
pub mod htbs;
pub mod ishare;
pub mod kyber;
pub mod mq_deadline;
pub mod noop;
pub mod pregather;
#[cfg(test)]
pub(crate) mod testutil;
pub mod util;

use hvio_core::{ConfigError, ParamSpec, ParamValues, Params, SchedContext, Scheduler};

/// How to build one scheduler, and what it accepts.
pub struct SchedulerSpec {
    pub name: &'static str,
    /// One line: what it is and where it comes from.
    pub summary: &'static str,
    pub params: &'static [ParamSpec],
    /// Per-stream attributes it reads from [`hvio_core::StreamInfo`]
    /// (`weight` or names in `attrs`), with their meaning.
    pub stream_attrs: &'static [(&'static str, &'static str)],
    pub build: fn(Params, &SchedContext) -> Box<dyn Scheduler>,
}

/// Every scheduler hvio has, in the order reports list them.
pub static SCHEDULERS: &[SchedulerSpec] = &[
    noop::SPEC,
    deadline::SPEC,
    htbs::SPEC,
    pregather::SPEC,
    cfq::SPEC_CFQ,
    cfq::SPEC_BLKIO,
    ishare::SPEC,
    anticipatory::SPEC,
    mq_deadline::SPEC,
    bfq::SPEC,
    kyber::SPEC,
];

/// The spec of a scheduler by name.
pub fn spec(name: &str) -> Result<&'static SchedulerSpec, ConfigError> {
    SCHEDULERS
        .iter()
        .find(|s| s.name == name)
        .ok_or_else(|| ConfigError::UnknownName {
            what: "scheduler".into(),
            name: name.into(),
            known: names().join(", "),
        })
}

/// Names of every registered scheduler.
pub fn names() -> Vec<&'static str> {
    SCHEDULERS.iter().map(|s| s.name).collect()
}

/// Build scheduler `name` with parameter `overrides` (checked against its table).
pub fn build(name: &str, overrides: &ParamValues, ctx: &SchedContext) -> Result<Box<dyn Scheduler>, ConfigError> {
    let spec = spec(name)?;
    let params = Params::resolve(&format!("scheduler {name}"), spec.params, overrides)?;
    Ok((spec.build)(params, ctx))
}
