//! hvio's disk I/O schedulers behind the one [`Scheduler`] interface.
//!
//! Each scheduler is a module of a few hundred lines with its tunables in a
//! [`ParamSpec`] table under their Linux names, defaults and units. The
//! [`SCHEDULERS`] registry lists them all; [`build`] makes one by name with
//! checked parameter overrides. A scheduler serves at the host (streams =
//! VMs) or in a guest (streams = guest threads) unchanged.
#![warn(missing_docs)]

pub mod anticipatory;
pub mod bench;
pub mod bfq;
pub mod cfq;
pub mod deadline;
pub mod driver;
pub mod htbs;
pub mod ishare;
pub mod kyber;
pub mod mq_deadline;
pub mod noop;
pub mod pregather;
#[cfg(test)]
pub(crate) mod testutil;
pub mod util;

pub use driver::{Driver, DriverStats, Next, SwitchError, SwitchPolicy, SwitchReport, DRAIN_POLL};

use hvio_core::{ConfigError, ParamSpec, ParamValues, Params, SchedContext, Scheduler};

/// How to build one scheduler, and what it accepts.
pub struct SchedulerSpec {
    /// The name configs and the CLI use.
    pub name: &'static str,
    /// One line: what it is and where it comes from.
    pub summary: &'static str,
    /// Its tunables, with Linux names and units.
    pub params: &'static [ParamSpec],
    /// Per-stream attributes it reads from [`hvio_core::StreamInfo`]
    /// (`weight` or names in `attrs`), with their meaning and range.
    pub stream_attrs: &'static [StreamAttr],
    /// Builds it from checked tunables and its context.
    pub build: fn(Params, &SchedContext) -> Box<dyn Scheduler>,
}

/// One per-stream attribute a scheduler reads.
pub struct StreamAttr {
    /// The attribute's name.
    pub name: &'static str,
    /// What it means and its range.
    pub doc: &'static str,
    /// `None`: the stream's `weight` (checked by whoever sets it);
    /// `Some((min, max))`: a key of `attrs` and its accepted values.
    pub range: Option<(f64, f64)>,
}

impl StreamAttr {
    /// The stream's `weight`.
    pub const fn weight(doc: &'static str) -> Self {
        StreamAttr {
            name: "weight",
            doc,
            range: None,
        }
    }

    /// A key of `attrs` accepted within `min..=max`.
    pub const fn attr(name: &'static str, min: f64, max: f64, doc: &'static str) -> Self {
        StreamAttr {
            name,
            doc,
            range: Some((min, max)),
        }
    }
}

/// Check one per-stream attribute (`[[vm]] attrs`, `PUT /vms/NAME`) before
/// any scheduler sees it, so a bad one is an error rather than a default
/// counted at run time. One config runs under every scheduler (`hvio
/// compare`, a switch in `hvio serve`), so the check does not depend on the
/// scheduler in use: the name must be read by some registered scheduler and
/// the value must be within the range of every scheduler that reads it.
/// The error is the reason, to follow "invalid value V for `attrs.NAME`: ".
pub fn check_stream_attr(name: &str, value: f64) -> Result<(), String> {
    if !value.is_finite() {
        return Err("must be a finite number".into());
    }
    let mut known = Vec::new();
    let mut found = false;
    for spec in SCHEDULERS {
        for a in spec.stream_attrs {
            let Some((min, max)) = a.range else { continue };
            if !known.contains(&a.name) {
                known.push(a.name);
            }
            if a.name == name {
                found = true;
                if !(min..=max).contains(&value) {
                    return Err(format!("scheduler {} accepts {min}..={max}", spec.name));
                }
            }
        }
    }
    if found {
        Ok(())
    } else if name == "weight" {
        Err("the weight is the VM's `weight` key, not an attribute".into())
    } else {
        Err(format!(
            "no scheduler reads this attribute (known: {})",
            known.join(", ")
        ))
    }
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
