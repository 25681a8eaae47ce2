//! A switch plan: which (host, guest) scheduler pair runs from which point
//! of a job on (paper 002 §IV: one pair per phase).
//!
//! In a config each step is a `[[phase]]` table:
//!
//! ```toml
//! [[phase]]
//! at = "map"            # the job's start: the pair it begins with
//! host = "anticipatory"
//! guest = "deadline"
//!
//! [[phase]]
//! at = "shuffle"        # when the job enters its shuffle (the last map is done)
//! host = "cfq"          # the guest keeps its scheduler
//! policy = "drain"      # how the switch treats queued requests (the default)
//! ```
//!
//! A step happens at a phase or at a time (`at_s`, seconds from the start,
//! for any workload), and switches the host scheduler, every guest's, or
//! both, through the scheduler driver's run-time switch. The phases are the
//! MapReduce job's (`map`, `shuffle`, `reduce`, or `shuffle-reduce` for the
//! two run as one: [`PhasePlan::check`]) or, in an `hvio sim` config, the
//! names its jobs' `phase` keys give ([`PhasePlan::check_workload`]). Every
//! mistake a plan can hold before it runs is found here, naming the step,
//! the key and the value: an unknown scheduler, phase or policy, a step that
//! switches nothing or says both when and at what time, steps out of order,
//! and two steps at the same point (the second would come during the
//! first's switch).

use crate::error::{Result, SimError};
use crate::mapreduce::PhaseKind;
use hvio_core::time::{Nanos, NS_PER_S};
use hvio_sched::SwitchPolicy;
use serde::{Deserialize, Serialize};

/// A `[[phase]]` table as written.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhaseConfig {
    /// The phase the step is at.
    pub at: Option<String>,
    /// Or the time, s.
    pub at_s: Option<f64>,
    /// The host scheduler to switch to.
    pub host: Option<String>,
    /// Every guest's scheduler to switch to.
    pub guest: Option<String>,
    /// Switch policy (`drain` by default).
    pub policy: Option<String>,
}

/// When a step switches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum When {
    /// When the job enters this phase (`map`: its start).
    Phase(PhaseKind),
    /// When a config's workload enters its phase of this index (in the
    /// order the jobs' `phase` names first appear; 0: the start).
    Workload(usize),
    /// At this time from the start.
    Time(Nanos),
}

/// One checked step of a plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Step {
    /// When it is taken.
    pub when: When,
    /// The host scheduler, if switched.
    pub host: Option<String>,
    /// The guests' scheduler, if switched.
    pub guest: Option<String>,
    /// Switch policy.
    #[serde(serialize_with = "policy_name")]
    pub policy: SwitchPolicy,
}

fn policy_name<S: serde::Serializer>(policy: &SwitchPolicy, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(policy.as_str())
}

impl Step {
    /// Whether the step takes effect at the start (sets the first pair).
    pub fn at_start(&self) -> bool {
        matches!(
            self.when,
            When::Phase(PhaseKind::Map) | When::Workload(0) | When::Time(0)
        )
    }
}

/// A checked plan: steps in the order they happen.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PhasePlan {
    /// The steps in order.
    pub steps: Vec<Step>,
}

const PHASES: [PhaseKind; 4] = [
    PhaseKind::Map,
    PhaseKind::Shuffle,
    PhaseKind::Reduce,
    PhaseKind::ShuffleReduce,
];

/// Where a phase falls in a job: the shuffle and a merged shuffle-reduce
/// both begin when the last map is done.
fn rank(kind: PhaseKind) -> u8 {
    match kind {
        PhaseKind::Map => 0,
        PhaseKind::Shuffle | PhaseKind::ShuffleReduce => 1,
        PhaseKind::Reduce => 2,
    }
}

fn context(i: usize) -> String {
    format!("phase {i}")
}

fn scheduler(i: usize, key: &str, name: &Option<String>) -> Result<Option<String>> {
    match name {
        None => Ok(None),
        Some(name) => match hvio_sched::spec(name) {
            Ok(_) => Ok(Some(name.clone())),
            Err(_) => Err(SimError::invalid(
                &context(i),
                key,
                name,
                format!("no such scheduler (known: {})", hvio_sched::names().join(", ")),
            )),
        },
    }
}

/// The phases a plan may name: the MapReduce job's, or a workload's own.
#[derive(Clone, Copy)]
enum Vocabulary<'a> {
    MapReduce,
    Workload(&'a [String]),
}

impl Vocabulary<'_> {
    fn find(&self, at: &str) -> Option<When> {
        match self {
            Vocabulary::MapReduce => PHASES.into_iter().find(|k| k.name() == at).map(When::Phase),
            Vocabulary::Workload(names) => names.iter().position(|n| n == at).map(When::Workload),
        }
    }

    fn known(&self) -> String {
        match self {
            Vocabulary::MapReduce => PHASES.iter().map(|k| k.name()).collect::<Vec<_>>().join(", "),
            Vocabulary::Workload([]) => "none: no job of the config has a `phase`".to_string(),
            Vocabulary::Workload(names) => names.join(", "),
        }
    }

    /// The name of a step's phase, for messages.
    fn name(&self, when: &When) -> String {
        match (self, when) {
            (_, When::Phase(k)) => k.name().to_string(),
            (Vocabulary::Workload(names), When::Workload(i)) => names[*i].clone(),
            _ => String::new(),
        }
    }
}

/// Where a phase falls in its run: the MapReduce shuffle and a merged
/// shuffle-reduce both begin when the last map is done.
fn position(when: &When) -> Option<usize> {
    match when {
        When::Phase(k) => Some(rank(*k) as usize),
        When::Workload(i) => Some(*i),
        When::Time(_) => None,
    }
}

fn when(i: usize, step: &PhaseConfig, phases: Vocabulary<'_>) -> Result<When> {
    match (&step.at, step.at_s) {
        (Some(at), None) => phases.find(at).ok_or_else(|| {
            SimError::invalid(
                &context(i),
                "at",
                at,
                format!("no such phase (known: {})", phases.known()),
            )
        }),
        (None, Some(s)) if s.is_finite() && s >= 0.0 && s <= u64::MAX as f64 / NS_PER_S as f64 => {
            Ok(When::Time((s * NS_PER_S as f64).round() as Nanos))
        }
        (None, Some(s)) => Err(SimError::invalid(
            &context(i),
            "at_s",
            s,
            "a time in seconds, 0 or more",
        )),
        (Some(at), Some(_)) => Err(SimError::invalid(
            &context(i),
            "at",
            at,
            "give `at` (a phase) or `at_s` (a time), not both",
        )),
        (None, None) => Err(SimError::invalid(
            &context(i),
            "at",
            "(missing)",
            "every step says when: `at` (a phase) or `at_s` (seconds)",
        )),
    }
}

impl PhasePlan {
    /// Check `[[phase]]` tables of a plan for the MapReduce job; the first
    /// mistake is the error.
    pub fn check(tables: &[PhaseConfig]) -> Result<PhasePlan> {
        check_steps(tables, Vocabulary::MapReduce)
    }

    /// Check `[[phase]]` tables of a plan for a workload whose phases are
    /// `phases`, in their order; the first mistake is the error.
    pub fn check_workload(tables: &[PhaseConfig], phases: &[String]) -> Result<PhasePlan> {
        check_steps(tables, Vocabulary::Workload(phases))
    }

    /// The phase the plan switches at, in order (for a MapReduce plan by phases).
    pub fn phases(&self) -> Vec<PhaseKind> {
        self.steps
            .iter()
            .filter_map(|s| match s.when {
                When::Phase(k) => Some(k),
                When::Workload(_) | When::Time(_) => None,
            })
            .collect()
    }
}

fn check_steps(tables: &[PhaseConfig], phases: Vocabulary<'_>) -> Result<PhasePlan> {
    let mut steps: Vec<Step> = Vec::with_capacity(tables.len());
    for (i, table) in tables.iter().enumerate() {
        let when = when(i, table, phases)?;
        let host = scheduler(i, "host", &table.host)?;
        let guest = scheduler(i, "guest", &table.guest)?;
        if host.is_none() && guest.is_none() {
            return Err(SimError::invalid(
                &context(i),
                "host",
                "(missing)",
                "the step switches nothing: give `host`, `guest` or both",
            ));
        }
        let policy = match &table.policy {
            None => SwitchPolicy::Drain,
            Some(p) => p.parse().map_err(|_| {
                let known: Vec<&str> = SwitchPolicy::ALL.iter().map(|p| p.as_str()).collect();
                SimError::invalid(
                    &context(i),
                    "policy",
                    p,
                    format!("no such policy (known: {})", known.join(", ")),
                )
            })?,
        };
        if let Some(prev) = steps.last() {
            check_order(i, &prev.when, &when, table, phases)?;
        }
        steps.push(Step {
            when,
            host,
            guest,
            policy,
        });
    }
    let merged = steps.iter().any(|s| s.when == When::Phase(PhaseKind::ShuffleReduce));
    if let Some(i) = steps
        .iter()
        .position(|s| matches!(s.when, When::Phase(PhaseKind::Reduce)))
        .filter(|_| merged)
    {
        return Err(SimError::invalid(
            &context(i),
            "at",
            "reduce",
            "the plan runs the shuffle and the reduce as one phase (`shuffle-reduce`): there is no reduce boundary",
        ));
    }
    Ok(PhasePlan { steps })
}

fn check_order(i: usize, prev: &When, next: &When, table: &PhaseConfig, phases: Vocabulary<'_>) -> Result<()> {
    match (position(prev), position(next)) {
        (Some(a), Some(b)) if b <= a => {
            let before = phases.name(prev);
            let reason = if a == b {
                format!("the step before already switches when the job enters `{before}`: a second switch there would come during the first")
            } else {
                format!("comes before `{before}`, the phase of the step before: steps go in the job's order")
            };
            return Err(SimError::invalid(&context(i), "at", phases.name(next), reason));
        }
        _ => {}
    }
    match (prev, next) {
        (When::Time(a), When::Time(b)) if b <= a => {
            let value = table.at_s.unwrap_or_default();
            let reason = if a == b {
                "the step before switches at the same time: this switch would come during it".to_string()
            } else {
                format!(
                    "earlier than the step before ({} s): steps go in time order",
                    *a as f64 / NS_PER_S as f64
                )
            };
            Err(SimError::invalid(&context(i), "at_s", value, reason))
        }
        (When::Phase(_) | When::Workload(_), When::Time(_)) | (When::Time(_), When::Phase(_) | When::Workload(_)) => {
            Err(SimError::invalid(
                &context(i),
                if matches!(next, When::Time(_)) { "at_s" } else { "at" },
                table
                    .at
                    .clone()
                    .unwrap_or_else(|| table.at_s.unwrap_or_default().to_string()),
                "a plan switches at phases or at times, not both (their order is not known before the run)",
            ))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(at: &str, host: Option<&str>, guest: Option<&str>) -> PhaseConfig {
        PhaseConfig {
            at: Some(at.into()),
            host: host.map(Into::into),
            guest: guest.map(Into::into),
            ..PhaseConfig::default()
        }
    }

    fn timed(at_s: f64, host: &str) -> PhaseConfig {
        PhaseConfig {
            at_s: Some(at_s),
            host: Some(host.into()),
            ..PhaseConfig::default()
        }
    }

    fn err(tables: &[PhaseConfig]) -> String {
        PhasePlan::check(tables).unwrap_err().to_string()
    }

    #[test]
    fn a_plan_by_phases_reads_as_written() {
        let toml = r#"
            [[phase]]
            at = "map"
            host = "anticipatory"
            guest = "deadline"
            [[phase]]
            at = "shuffle-reduce"
            host = "cfq"
            policy = "migrate"
        "#;
        #[derive(Deserialize)]
        struct Doc {
            phase: Vec<PhaseConfig>,
        }
        let doc: Doc = toml::from_str(toml).unwrap();
        let plan = PhasePlan::check(&doc.phase).unwrap();
        assert_eq!(plan.phases(), vec![PhaseKind::Map, PhaseKind::ShuffleReduce]);
        assert!(plan.steps[0].at_start());
        assert_eq!(plan.steps[0].policy, SwitchPolicy::Drain);
        assert_eq!(plan.steps[1].guest, None);
        assert_eq!(plan.steps[1].policy, SwitchPolicy::Migrate);
        let timed = PhasePlan::check(&[timed(0.0, "noop"), timed(1.5, "cfq")]).unwrap();
        assert_eq!(timed.steps[1].when, When::Time(1_500_000_000));
        assert!(timed.steps[0].at_start());
    }

    #[test]
    fn unknown_names_are_errors_naming_step_key_and_value() {
        let e = err(&[step("map", Some("cfq"), None), step("shuffle", Some("fifo"), None)]);
        assert!(
            e.contains("phase 1") && e.contains("host") && e.contains("fifo") && e.contains("deadline"),
            "{e}"
        );
        let e = err(&[step("map", None, Some("as"))]);
        assert!(e.contains("phase 0") && e.contains("guest") && e.contains("as"), "{e}");
        let e = err(&[step("sort", Some("cfq"), None)]);
        assert!(
            e.contains("at") && e.contains("sort") && e.contains("shuffle-reduce"),
            "{e}"
        );
        let e = err(&[PhaseConfig {
            policy: Some("wait".into()),
            ..step("map", Some("cfq"), None)
        }]);
        assert!(
            e.contains("policy") && e.contains("wait") && e.contains("migrate"),
            "{e}"
        );
    }

    #[test]
    fn steps_out_of_order_or_at_the_same_point_are_errors() {
        let e = err(&[step("reduce", Some("cfq"), None), step("shuffle", Some("noop"), None)]);
        assert!(
            e.contains("phase 1") && e.contains("shuffle") && e.contains("job's order"),
            "{e}"
        );
        let e = err(&[step("shuffle", Some("cfq"), None), step("shuffle", None, Some("noop"))]);
        assert!(e.contains("during the first"), "{e}");
        let e = err(&[
            step("shuffle", Some("cfq"), None),
            step("shuffle-reduce", Some("noop"), None),
        ]);
        assert!(e.contains("during the first"), "{e}");
        let e = err(&[
            step("shuffle-reduce", Some("cfq"), None),
            step("reduce", Some("noop"), None),
        ]);
        assert!(e.contains("no reduce boundary"), "{e}");
        let e = err(&[timed(10.0, "cfq"), timed(5.0, "noop")]);
        assert!(e.contains("at_s") && e.contains('5') && e.contains("time order"), "{e}");
        let e = err(&[timed(10.0, "cfq"), timed(10.0, "noop")]);
        assert!(e.contains("during it"), "{e}");
        let e = err(&[step("map", Some("cfq"), None), timed(10.0, "noop")]);
        assert!(e.contains("not both"), "{e}");
    }

    #[test]
    fn a_step_must_say_when_and_what() {
        assert!(err(&[PhaseConfig {
            host: Some("cfq".into()),
            ..PhaseConfig::default()
        }])
        .contains("every step says when"));
        let both = PhaseConfig {
            at_s: Some(1.0),
            ..step("map", Some("cfq"), None)
        };
        assert!(err(&[both]).contains("not both"));
        assert!(err(&[step("map", None, None)]).contains("switches nothing"));
        assert!(err(&[timed(-1.0, "cfq")]).contains("at_s"));
        assert!(err(&[timed(f64::NAN, "cfq")]).contains("at_s"));
        assert!(PhasePlan::check(&[]).unwrap().steps.is_empty());
    }
}
