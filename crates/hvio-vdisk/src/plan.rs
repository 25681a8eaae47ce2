//! The daemon's switch plan: `[[phase]]` steps that switch the host
//! scheduler at a time since start, or when the control API asks (paper 002
//! §IV: no single scheduler is best for every phase of a job, so switch
//! between phases; its future work of doing it from the VMs' I/O status at
//! run time, §VII, is [`crate::online`]).
//!
//! ```toml
//! [[phase]]
//! name = "load"          # what the control API and /status call it (default: phase1, phase2, ...)
//! at_s = 0               # seconds since the daemon started: 0 is the scheduler it starts on
//! host = "anticipatory"
//!
//! [[phase]]
//! name = "shuffle"
//! at_s = 600
//! host = "cfq"
//! params = { slice_idle = 0 }
//! policy = "drain"       # how the switch treats queued requests (the default)
//! ```
//!
//! A step is checked by the simulator's plan check
//! ([`hvio_sim::tune::PhasePlan::check`]: an unknown scheduler or policy,
//! steps out of time order, two steps at the same time — the second would
//! come during the first's switch), then by what only the daemon has: the
//! scheduler's parameters, names, and the keys it refuses (`guest`: the
//! daemon runs no guest schedulers; `at`: it sees no job phases).

use hvio_core::{ConfigError, Nanos, ParamValues, NS_PER_S};
use hvio_sched::SwitchPolicy;
use serde::{Deserialize, Serialize};

/// A `[[phase]]` table as written (in `host.toml` or a `PUT /plan` body).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhaseTable {
    /// The step's name (default `phaseN`, N its place from 1).
    pub name: Option<String>,
    /// Seconds from the plan's start.
    pub at_s: Option<f64>,
    /// Refused with a reason: the daemon does not see a job's phases.
    pub at: Option<String>,
    /// The host scheduler to switch to.
    pub host: Option<String>,
    /// Refused with a reason: the daemon runs no guest schedulers.
    pub guest: Option<String>,
    /// Its tunables.
    #[serde(default)]
    pub params: ParamValues,
    /// Switch policy (`drain` by default).
    pub policy: Option<String>,
}

/// One checked step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    /// The step's name.
    pub name: String,
    /// Time from the plan's start (the daemon's start, or the `PUT /plan`).
    #[serde(skip)]
    pub at: Nanos,
    /// The host scheduler.
    pub host: String,
    /// Its tunables.
    pub params: ParamValues,
    /// Switch policy.
    #[serde(serialize_with = "policy_name")]
    pub policy: SwitchPolicy,
}

fn policy_name<S: serde::Serializer>(policy: &SwitchPolicy, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(policy.as_str())
}

fn context(i: usize) -> String {
    format!("[[phase]] #{}", i + 1)
}

/// The simulator's error for step `i` (it counts from 0, as `phase i`), in
/// the daemon's words (`[[phase]] #n`, from 1, as `[[vm]] #n`).
fn renamed(e: hvio_sim::SimError) -> ConfigError {
    match e {
        hvio_sim::SimError::Config(ConfigError::InvalidValue {
            context: c,
            key,
            value,
            reason,
        }) => {
            let context = c
                .strip_prefix("phase ")
                .and_then(|n| n.parse::<usize>().ok())
                .map(context)
                .unwrap_or(c);
            ConfigError::InvalidValue {
                context,
                key,
                value,
                reason,
            }
        }
        hvio_sim::SimError::Config(e) => e,
        e => ConfigError::Other(format!("[[phase]]: {e}")),
    }
}

/// Check `[[phase]]` tables; the first mistake is the error, naming the
/// step (`[[phase]] #n`), the key and the value.
pub fn check(tables: &[PhaseTable]) -> Result<Vec<Step>, ConfigError> {
    for (i, t) in tables.iter().enumerate() {
        if let Some(g) = &t.guest {
            return Err(ConfigError::invalid(
                context(i),
                "guest",
                format!("\"{g}\""),
                "the daemon runs no guest schedulers (each VM's own kernel does): give `host` only",
            ));
        }
        if let Some(at) = &t.at {
            return Err(ConfigError::invalid(
                context(i),
                "at",
                format!("\"{at}\""),
                "the daemon does not see a job's phases: give `at_s` (seconds since start), or switch by the request mix with [online]",
            ));
        }
        if t.host.is_none() {
            return Err(ConfigError::invalid(
                context(i),
                "host",
                "(missing)",
                "every step names the host scheduler it switches to",
            ));
        }
    }
    let sim: Vec<hvio_sim::tune::PhaseConfig> = tables
        .iter()
        .map(|t| hvio_sim::tune::PhaseConfig {
            at_s: t.at_s,
            host: t.host.clone(),
            policy: t.policy.clone(),
            ..Default::default()
        })
        .collect();
    let plan = hvio_sim::tune::PhasePlan::check(&sim).map_err(renamed)?;
    let mut steps: Vec<Step> = Vec::with_capacity(tables.len());
    for (i, (t, s)) in tables.iter().zip(plan.steps).enumerate() {
        let host = s.host.expect("checked above: every step has a host");
        let spec = hvio_sched::spec(&host)?;
        hvio_core::Params::resolve(&format!("{} params of `{host}`", context(i)), spec.params, &t.params)?;
        let name = t.name.clone().unwrap_or_else(|| format!("phase{}", i + 1));
        if name.is_empty() || name.len() > 64 || !name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
            return Err(ConfigError::invalid(
                context(i),
                "name",
                format!("\"{name}\""),
                "use 1-64 characters of A-Z a-z 0-9 - _ .",
            ));
        }
        if let Some(j) = steps.iter().position(|s| s.name == name) {
            return Err(ConfigError::invalid(
                context(i),
                "name",
                format!("\"{name}\""),
                format!(
                    "is also the name of {}: the control API takes steps by name",
                    context(j)
                ),
            ));
        }
        let at = match s.when {
            hvio_sim::tune::When::Time(t) => t,
            hvio_sim::tune::When::Phase(_) | hvio_sim::tune::When::Workload(_) => {
                unreachable!("`at` is refused above")
            }
        };
        steps.push(Step {
            name,
            at,
            host,
            params: t.params.clone(),
            policy: s.policy,
        });
    }
    Ok(steps)
}

/// What started a switch: it is counted and logged under this.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// `PUT /scheduler`.
    Api,
    /// A plan step whose time came.
    PlanTime,
    /// A plan step taken by `POST /phase`.
    PlanApi,
    /// The online mode's classification of the request mix.
    Online,
}

impl Reason {
    /// Every reason, in the order metrics list them.
    pub const ALL: [Reason; 4] = [Reason::Api, Reason::PlanTime, Reason::PlanApi, Reason::Online];

    /// The name in `/status` and `/metrics`.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Api => "api",
            Reason::PlanTime => "plan_time",
            Reason::PlanApi => "plan_api",
            Reason::Online => "online",
        }
    }
}

/// One finished switch and what it cost (`GET /status` lists the last ones).
#[derive(Debug, Clone, Serialize)]
pub struct SwitchRecord {
    /// Why it happened.
    pub reason: Reason,
    /// The plan step or the online class it was for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// The online class it was for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// The scheduler switched from.
    pub from: String,
    /// The scheduler switched to.
    pub to: String,
    /// The policy applied.
    pub policy: String,
    /// Seconds since start when it was asked for, and when the new scheduler took over.
    pub requested_s: f64,
    /// When the new scheduler took over.
    pub swapped_s: f64,
    /// The cost: time from the request to the swap, and what happened to
    /// the requests in the way (see `PUT /scheduler`).
    pub drain_us: u64,
    /// Requests moved onto the dispatch list (`drain`) or into the new scheduler (`migrate`).
    pub handed_over: usize,
    /// Arrivals that bypassed both schedulers (`drain`).
    pub bypassed: usize,
    /// Arrivals held until the swap (`freeze`).
    pub held: usize,
}

/// A plan being run.
#[derive(Debug, Clone)]
pub struct Plan {
    steps: Vec<Step>,
    /// Engine time the plan's `at_s` count from.
    base: Nanos,
    /// The step last taken.
    current: Option<usize>,
    /// The step the clock takes next.
    next: usize,
    /// When each step was last taken, and its switch's cost once done.
    taken: Vec<Option<SwitchRecord>>,
}

impl Plan {
    /// Run `steps` with their times counted from `base`.
    pub fn new(steps: Vec<Step>, base: Nanos) -> Plan {
        let n = steps.len();
        Plan {
            steps,
            base,
            current: None,
            next: 0,
            taken: vec![None; n],
        }
    }

    /// Its steps in order.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// The step at time 0 (the scheduler to begin with), marked taken.
    pub fn take_start(&mut self) -> Option<&Step> {
        if self.next == 0 && self.steps.first().is_some_and(|s| s.at == 0) {
            self.current = Some(0);
            self.next = 1;
            return self.steps.first();
        }
        None
    }

    /// The step whose time has come by `now`, if any.
    pub fn due(&self, now: Nanos) -> Option<usize> {
        let s = self.steps.get(self.next)?;
        (self.base + s.at <= now).then_some(self.next)
    }

    /// When the clock takes its next step.
    pub fn wake(&self) -> Option<Nanos> {
        self.steps.get(self.next).map(|s| self.base + s.at)
    }

    /// The step named `name`, or an error naming it and the known ones.
    pub fn find(&self, name: &str) -> Result<usize, String> {
        self.steps.iter().position(|s| s.name == name).ok_or_else(|| {
            let known: Vec<&str> = self.steps.iter().map(|s| s.name.as_str()).collect();
            format!("`name`: no step \"{name}\" in the plan (known: {})", known.join(", "))
        })
    }

    /// The step the clock takes next, for `POST /phase` without a name.
    pub fn next_step(&self) -> Result<usize, String> {
        if self.next < self.steps.len() {
            Ok(self.next)
        } else {
            Err("the plan has no step left: name one (`{\"name\": ...}`) or load a plan (`PUT /plan`)".into())
        }
    }

    /// Step `i` was taken at `now`: by the clock (the next step follows it,
    /// even if its time has passed while this one waited), or by the
    /// control API (steps whose time has passed are passed over: the clock
    /// goes on with the first still to come).
    pub fn taken(&mut self, i: usize, now: Nanos, by_clock: bool) {
        self.current = Some(i);
        self.next = if by_clock {
            i + 1
        } else {
            (i + 1..self.steps.len())
                .find(|&j| self.base + self.steps[j].at > now)
                .unwrap_or(self.steps.len())
        };
    }

    /// Step `i`'s switch finished with `record`.
    pub fn record(&mut self, i: usize, record: SwitchRecord) {
        if let Some(t) = self.taken.get_mut(i) {
            *t = Some(record);
        }
    }

    /// What `GET /status` and `GET /plan` show.
    pub fn status(&self) -> PlanStatus {
        let secs = |t: Nanos| t as f64 / NS_PER_S as f64;
        PlanStatus {
            loaded_s: secs(self.base),
            current: self.current.map(|i| self.steps[i].name.clone()),
            next: self.steps.get(self.next).map(|s| s.name.clone()),
            next_at_s: self.wake().map(secs),
            steps: self
                .steps
                .iter()
                .zip(&self.taken)
                .map(|(s, t)| StepStatus {
                    step: s.clone(),
                    at_s: secs(s.at),
                    switch: t.clone(),
                })
                .collect(),
        }
    }
}

/// `GET /status`'s `plan`.
#[derive(Debug, Clone, Serialize)]
pub struct PlanStatus {
    /// Seconds since start when the plan was loaded (0: from the configuration).
    pub loaded_s: f64,
    /// The step taken last.
    pub current: Option<String>,
    /// The step the clock takes next.
    pub next: Option<String>,
    /// Seconds since start when the clock takes `next`.
    pub next_at_s: Option<f64>,
    /// Every step.
    pub steps: Vec<StepStatus>,
}

/// One step in `GET /status`.
#[derive(Debug, Clone, Serialize)]
pub struct StepStatus {
    /// The step.
    #[serde(flatten)]
    pub step: Step,
    /// Seconds from the plan's load.
    pub at_s: f64,
    /// The switch that took the step (last time), with its cost; none at
    /// the start step or for a step not taken.
    pub switch: Option<SwitchRecord>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tables(text: &str) -> Vec<PhaseTable> {
        #[derive(Deserialize)]
        struct Doc {
            phase: Vec<PhaseTable>,
        }
        toml::from_str::<Doc>(text).unwrap().phase
    }

    fn err(text: &str) -> String {
        check(&tables(text)).unwrap_err().to_string()
    }

    #[test]
    fn a_plan_reads_as_written() {
        let steps = check(&tables(
            r#"
            [[phase]]
            at_s = 0
            host = "anticipatory"
            [[phase]]
            name = "shuffle"
            at_s = 1.5
            host = "cfq"
            params = { slice_idle = 0 }
            policy = "freeze"
            "#,
        ))
        .unwrap();
        assert_eq!(steps[0].name, "phase1");
        assert_eq!(steps[0].policy, SwitchPolicy::Drain);
        assert_eq!(steps[1].at, 1_500_000_000);
        assert_eq!(steps[1].params["slice_idle"], 0.0);
        assert_eq!(steps[1].policy, SwitchPolicy::Freeze);
    }

    #[test]
    fn errors_name_the_step_key_and_value() {
        for (text, want) in [
            ("[[phase]]\nat_s = 0\nhost = \"fifo\"", ["[[phase]] #1", "host", "fifo"]),
            (
                "[[phase]]\nat_s = 5\nhost = \"cfq\"\n[[phase]]\nat_s = 2\nhost = \"noop\"",
                ["[[phase]] #2", "at_s", "time order"],
            ),
            (
                "[[phase]]\nat_s = 5\nhost = \"cfq\"\n[[phase]]\nat_s = 5\nhost = \"noop\"",
                ["[[phase]] #2", "at_s", "during it"],
            ),
            (
                "[[phase]]\nat_s = 0\nhost = \"cfq\"\nguest = \"noop\"",
                ["#1", "guest", "no guest schedulers"],
            ),
            ("[[phase]]\nat = \"shuffle\"\nhost = \"cfq\"", ["#1", "at", "at_s"]),
            ("[[phase]]\nat_s = 0\nguest = \"noop\"", ["#1", "guest", "noop"]),
            ("[[phase]]\nat_s = 1", ["#1", "host", "missing"]),
            ("[[phase]]\nhost = \"cfq\"", ["#1", "at", "every step says when"]),
            ("[[phase]]\nat_s = -1\nhost = \"cfq\"", ["#1", "at_s", "-1"]),
            (
                "[[phase]]\nat_s = 0\nhost = \"cfq\"\npolicy = \"wait\"",
                ["#1", "policy", "wait"],
            ),
            (
                "[[phase]]\nat_s = 0\nhost = \"cfq\"\nparams = { quantum = 0 }",
                ["[[phase]] #1 params of `cfq`", "quantum", "0"],
            ),
            (
                "[[phase]]\nat_s = 0\nhost = \"cfq\"\nparams = { quantom = 4 }",
                ["[[phase]] #1 params of `cfq`", "quantom", "quantum"],
            ),
            (
                "[[phase]]\nname = \"a\"\nat_s = 0\nhost = \"cfq\"\n[[phase]]\nname = \"a\"\nat_s = 1\nhost = \"noop\"",
                ["#2", "name", "\"a\""],
            ),
            (
                "[[phase]]\nname = \"a b\"\nat_s = 0\nhost = \"cfq\"",
                ["#1", "name", "\"a b\""],
            ),
        ] {
            let e = err(text);
            for w in want {
                assert!(e.contains(w), "{text}\n→ {e}\n(missing {w})");
            }
        }
    }

    fn step(name: &str, at_s: u64) -> Step {
        Step {
            name: name.into(),
            at: at_s * NS_PER_S,
            host: "noop".into(),
            params: ParamValues::new(),
            policy: SwitchPolicy::Drain,
        }
    }

    #[test]
    fn the_clock_and_the_api_take_steps() {
        let mut p = Plan::new(vec![step("a", 0), step("b", 10), step("c", 20), step("d", 30)], 0);
        assert_eq!(p.take_start().map(|s| s.name.as_str()), Some("a"));
        assert_eq!(p.due(9 * NS_PER_S), None);
        assert_eq!(p.wake(), Some(10 * NS_PER_S));
        assert_eq!(p.due(10 * NS_PER_S), Some(1));
        // Taken late by the clock: the next step still follows.
        p.taken(1, 25 * NS_PER_S, true);
        assert_eq!(p.due(25 * NS_PER_S), Some(2));
        // The API jumps back to `b` at 25 s: `c` (20 s) is passed over, `d` comes at 30 s.
        p.taken(p.find("b").unwrap(), 25 * NS_PER_S, false);
        assert_eq!(p.due(26 * NS_PER_S), None);
        assert_eq!(p.next_step(), Ok(3));
        assert_eq!(p.status().current.as_deref(), Some("b"));
        assert!(p.find("z").unwrap_err().contains("a, b, c, d"));
        p.taken(3, 31 * NS_PER_S, true);
        assert!(p.next_step().is_err());
        assert_eq!(p.wake(), None);
        // A plan loaded later counts from its load.
        let mut late = Plan::new(vec![step("x", 0), step("y", 5)], 100 * NS_PER_S);
        assert!(late.take_start().is_some());
        assert_eq!(late.due(104 * NS_PER_S), None);
        assert_eq!(late.due(105 * NS_PER_S), Some(1));
    }
}
