//! `hvio tune`: paper 002's Algorithm 1 (§IV.C) for an `hvio sim` config.
//!
//! The phases are the config's own (its jobs' `phase` names, see
//! [`crate::engine`]'s phases); a config without phases is one phase, the
//! whole run, and the search then picks the best single pair. The
//! candidate pairs are every host scheduler of a list with every guest
//! scheduler of another (by default the paper's four on both sides). A plan
//! is run as the config with `[[phase]]` steps that set the first phase's
//! pair at the start and switch only what changes at each later phase
//! (with the chosen policy); a run's time is the time to the end of its
//! last phase (the last job, without phases). The config's own `[[phase]]`
//! plan, if any, is left out of every run; the *default* is the config as
//! written without it. Runs are independent and go in parallel on rayon's
//! pool, each as `hvio sim` would run it, so the plan the search writes
//! ([`plan_config`]) gives, when run, the time it predicted.
//!
//! The plan written is the fastest run the search measured ([`Chosen`]):
//! Algorithm 1's plan unless a single pair of the profile, another plan its
//! walk ran, the brute force's optimum or the config as written was faster.
//! The paper's walk stops at the first candidate that does not help, so its
//! plan can be slower than a run it already made; writing it would hand the
//! user a slower config than one the search had measured.

use super::plan::PhaseConfig;
use super::search::{self, Comparison, Found, Outcome, Space};
use crate::config::Config;
use crate::error::{Result, SimError};
use crate::metrics::SimResult;
use hvio_sched::SwitchPolicy;
use serde::Serialize;

/// The paper's four schedulers, the default on both sides.
pub const PAPER_SCHEDULERS: [&str; 4] = ["cfq", "deadline", "anticipatory", "noop"];

/// The most plans `--brute-force` runs (`S^P`).
pub const BRUTE_FORCE_LIMIT: usize = 4096;

/// The name of the one phase of a config without phases.
pub const WHOLE_RUN: &str = "run";

/// What to search.
#[derive(Clone, Debug)]
pub struct TuneOptions {
    /// Host schedulers to try.
    pub hosts: Vec<String>,
    /// Guest schedulers to try (every VM runs the same one).
    pub guests: Vec<String>,
    /// Also run every one of the `S^P` plans.
    pub brute_force: bool,
    /// How the plan's switches treat queued requests.
    pub policy: SwitchPolicy,
}

impl Default for TuneOptions {
    fn default() -> Self {
        TuneOptions {
            hosts: PAPER_SCHEDULERS.iter().map(|s| s.to_string()).collect(),
            guests: PAPER_SCHEDULERS.iter().map(|s| s.to_string()).collect(),
            brute_force: false,
            policy: SwitchPolicy::Drain,
        }
    }
}

/// A (host, guest) scheduler pair.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Pair {
    /// The host scheduler.
    pub host: String,
    /// Every guest's scheduler.
    pub guest: String,
}

impl std::fmt::Display for Pair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "({}, {})", self.host, self.guest)
    }
}

/// Which measured run the written plan is: the fastest, on a tie the
/// first of this order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Chosen {
    /// Algorithm 1's plan.
    Algorithm1,
    /// A single pair of the profile.
    SinglePair,
    /// A plan Algorithm 1's walk ran before settling on another.
    WalkRun,
    /// The brute force's optimum.
    BruteForce,
    /// The config as written (its own schedulers, no plan).
    AsWritten,
}

impl Chosen {
    /// What the written plan is, in words.
    pub fn describe(self) -> &'static str {
        match self {
            Chosen::Algorithm1 => "Algorithm 1's plan",
            Chosen::SinglePair => "the profile's best single pair, faster than Algorithm 1's plan",
            Chosen::WalkRun => "a plan Algorithm 1's walk ran, faster than the plan it settled on",
            Chosen::BruteForce => "the brute force's optimum, faster than Algorithm 1's plan",
            Chosen::AsWritten => "the config as written, faster than every plan measured",
        }
    }
}

/// What the search found.
#[derive(Clone, Debug, Serialize)]
pub struct Tuned {
    /// The phases searched over, in order (`["run"]` for a config without).
    pub phases: Vec<String>,
    /// Whether they are the config's own phases.
    pub by_phase: bool,
    /// The pairs searched over.
    pub pairs: Vec<Pair>,
    /// The config as written (its own schedulers, no plan): seconds.
    pub default_s: f64,
    /// Profile, Algorithm 1 and (if asked) the brute force.
    pub comparison: Comparison,
    /// Which run the written plan is.
    pub chosen_from: Chosen,
    /// The written plan, a pair index per phase (`None`: the config as written).
    pub chosen: Option<Found>,
    /// The written plan as `[[phase]]` tables (none: the config as written).
    pub plan: Vec<PhaseConfig>,
    /// Simulated runs in all (the default, the profile, Algorithm 1, the brute force).
    pub runs: usize,
    /// The written plan's time: seconds.
    pub predicted_s: f64,
    /// How much shorter that is than the config as written, in percent.
    pub gain_over_default_pct: f64,
    /// How much shorter that is than the best single pair, in percent.
    pub gain_over_best_single_pct: f64,
}

impl Tuned {
    /// The best single pair.
    pub fn best_single(&self) -> &Pair {
        &self.pairs[self.comparison.best_single]
    }

    /// A plan's pairs as the paper writes it: `load: (cfq, noop) -> update: (deadline, noop)`.
    pub fn describe(&self, plan: &[usize]) -> String {
        self.phases
            .iter()
            .zip(plan)
            .map(|(name, &p)| format!("{name}: {}", self.pairs[p]))
            .collect::<Vec<_>>()
            .join(" -> ")
    }
}

fn pct_under(value: f64, reference: f64) -> f64 {
    if reference > 0.0 {
        (reference - value) / reference * 100.0
    } else {
        0.0
    }
}

fn check_names(key: &str, names: &[String]) -> Result<()> {
    if names.is_empty() {
        return Err(SimError::invalid("tune", key, "(none)", "name at least one scheduler"));
    }
    for (i, n) in names.iter().enumerate() {
        hvio_sched::spec(n).map_err(|e| SimError::invalid("tune", key, n, e.to_string()))?;
        if names[..i].contains(n) {
            return Err(SimError::invalid("tune", key, n, "named twice"));
        }
    }
    Ok(())
}

/// `plan` (a pair index per phase) as `[[phase]]` tables: the first
/// phase's pair at the start, then at each phase what changes.
pub fn plan_tables(
    phases: &[String],
    by_phase: bool,
    pairs: &[Pair],
    plan: &[usize],
    policy: SwitchPolicy,
) -> Vec<PhaseConfig> {
    let policy = (policy != SwitchPolicy::Drain).then(|| policy.as_str().to_string());
    let mut tables = Vec::new();
    for (k, &p) in plan.iter().enumerate() {
        let pair = &pairs[p];
        let (host, guest) = match k.checked_sub(1).map(|j| &pairs[plan[j]]) {
            None => (Some(pair.host.clone()), Some(pair.guest.clone())),
            Some(before) => (
                (before.host != pair.host).then(|| pair.host.clone()),
                (before.guest != pair.guest).then(|| pair.guest.clone()),
            ),
        };
        if host.is_none() && guest.is_none() {
            continue;
        }
        let (at, at_s) = if by_phase {
            (Some(phases[k].clone()), None)
        } else {
            (None, Some(0.0))
        };
        tables.push(PhaseConfig {
            at,
            at_s,
            host,
            guest,
            policy: if k == 0 { None } else { policy.clone() },
        });
    }
    tables
}

/// The run's time in each of `phases` phases (the whole run's when the
/// config has none): seconds.
fn outcome(r: &SimResult, by_phase: bool, phases: usize) -> Result<Outcome> {
    if r.truncated {
        return Err(SimError::Other(
            "tune: a run hit max_time_s before every job finished; raise max_time_s".into(),
        ));
    }
    let phase_s: Vec<f64> = if by_phase {
        r.phases.iter().map(|p| p.duration_s).collect()
    } else {
        vec![r.jobs.iter().map(|j| j.end_s).fold(0.0, f64::max)]
    };
    if phase_s.len() != phases {
        return Err(SimError::Other(format!(
            "tune: a run went through {} of the {phases} phases",
            phase_s.len()
        )));
    }
    Ok(Outcome {
        phase_s,
        switch_s: vec![0.0; phases],
    })
}

/// Run Algorithm 1 over `cfg`'s phases; `progress` is called after every
/// simulated run (from any thread).
pub fn tune(cfg: &Config, opts: &TuneOptions, progress: &(dyn Fn() + Sync)) -> Result<Tuned> {
    check_names("host", &opts.hosts)?;
    check_names("guest", &opts.guests)?;
    // The config's own plan is replaced, but a mistake in it is still one.
    cfg.plan().map_err(|e| cfg.locate(e))?;
    let names = cfg.workload_phases();
    let by_phase = !names.is_empty();
    let phases = if by_phase { names } else { vec![WHOLE_RUN.to_string()] };
    let pairs: Vec<Pair> = opts
        .hosts
        .iter()
        .flat_map(|h| {
            opts.guests.iter().map(move |g| Pair {
                host: h.clone(),
                guest: g.clone(),
            })
        })
        .collect();
    let space = Space {
        pairs: pairs.len(),
        phases: phases.len(),
    };
    if opts.brute_force {
        let plans = u32::try_from(space.phases)
            .ok()
            .and_then(|p| space.pairs.checked_pow(p))
            .filter(|&n| n <= BRUTE_FORCE_LIMIT);
        if plans.is_none() {
            return Err(SimError::invalid(
                "tune",
                "brute-force",
                format!("{} pairs ^ {} phases", space.pairs, space.phases),
                format!("more plans than the brute-force limit of {BRUTE_FORCE_LIMIT}: name fewer schedulers"),
            ));
        }
    }
    let mut base = cfg.clone();
    base.phases.clear();
    base.output.records = None;
    let run = |c: &Config| -> Result<SimResult> {
        let r = crate::run(c);
        progress();
        r
    };
    let eval = |plan: &[usize]| -> Result<Outcome> {
        let mut c = base.clone();
        c.phases = plan_tables(&phases, by_phase, &pairs, plan, opts.policy);
        outcome(&run(&c)?, by_phase, space.phases)
    };
    let (default, profile) = rayon::join(|| run(&base), || search::profile(space, &eval));
    let default_s = outcome(&default?, by_phase, space.phases)?.total_s();
    let profile = profile?;
    let search::Walked {
        found: heuristic,
        fastest_run,
    } = search::algorithm1_walk(space, &profile, &eval)?;
    let brute_force: Option<Found> = if opts.brute_force {
        Some(search::brute_force(space, &eval, BRUTE_FORCE_LIMIT)?)
    } else {
        None
    };
    let runs = 1 + profile.runs + heuristic.runs + brute_force.as_ref().map_or(0, |b| b.runs);
    let (chosen_from, chosen) = choose(&heuristic, &fastest_run, brute_force.as_ref(), default_s);
    let tables = chosen.as_ref().map_or_else(Vec::new, |c| {
        plan_tables(&phases, by_phase, &pairs, &c.plan, opts.policy)
    });
    let predicted_s = chosen.as_ref().map_or(default_s, |c| c.outcome.total_s());
    let comparison = Comparison {
        space,
        best_single: profile.best_single(),
        profile,
        heuristic,
        brute_force,
        fastest_run,
    };
    Ok(Tuned {
        predicted_s,
        gain_over_default_pct: pct_under(predicted_s, default_s),
        gain_over_best_single_pct: pct_under(predicted_s, comparison.profile.total_s[comparison.best_single]),
        comparison,
        chosen_from,
        chosen,
        phases,
        by_phase,
        pairs,
        default_s,
        plan: tables,
        runs,
    })
}

/// The fastest of the runs measured: Algorithm 1's plan, the fastest run of
/// the profile and the walk, the brute force's optimum, the config as
/// written (`default_s`); on a tie the first of these. `None`: as written.
fn choose(
    heuristic: &Found,
    fastest_run: &Found,
    brute_force: Option<&Found>,
    default_s: f64,
) -> (Chosen, Option<Found>) {
    let mut best = (Chosen::Algorithm1, heuristic);
    if fastest_run.outcome.total_s() < best.1.outcome.total_s() {
        let single = fastest_run.plan.windows(2).all(|w| w[0] == w[1]);
        best = (if single { Chosen::SinglePair } else { Chosen::WalkRun }, fastest_run);
    }
    if let Some(b) = brute_force.filter(|b| b.outcome.total_s() < best.1.outcome.total_s()) {
        best = (Chosen::BruteForce, b);
    }
    if default_s < best.1.outcome.total_s() {
        return (Chosen::AsWritten, None);
    }
    (best.0, Some(best.1.clone()))
}

/// `cfg`'s TOML text with its `[[phase]]` tables replaced by `plan`: a
/// config `hvio sim` runs. Needs the text the config was read from.
pub fn plan_config(cfg: &Config, plan: &[PhaseConfig]) -> Result<String> {
    let text = cfg.source_text.as_deref().ok_or_else(|| {
        SimError::Other("tune: the config was not read from TOML text, so it cannot be written with a plan".into())
    })?;
    let mut doc: toml_edit::DocumentMut = text
        .parse()
        .map_err(|e| SimError::Other(format!("tune: {}: {e}", cfg.origin)))?;
    doc.remove("phase");
    let mut tables = toml_edit::ArrayOfTables::new();
    for step in plan {
        let mut t = toml_edit::Table::new();
        if let Some(at) = &step.at {
            t.insert("at", toml_edit::value(at.as_str()));
        }
        if let Some(at_s) = step.at_s {
            t.insert("at_s", toml_edit::value(at_s));
        }
        for (key, v) in [("host", &step.host), ("guest", &step.guest), ("policy", &step.policy)] {
            if let Some(v) = v {
                t.insert(key, toml_edit::value(v.as_str()));
            }
        }
        tables.push(t);
    }
    let mut out = doc.to_string();
    if !out.ends_with('\n') {
        out.push('\n');
    }
    if plan.is_empty() {
        out.push_str("\n# `hvio tune` measured no plan faster than this config as written.\n");
        return Ok(out);
    }
    out.push_str(
        "\n# The plan `hvio tune` chose: the fastest it measured (paper 002's Algorithm 1 and the runs beside it).\n",
    );
    let mut plan_doc = toml_edit::DocumentMut::new();
    plan_doc.insert("phase", toml_edit::Item::ArrayOfTables(tables));
    out.push_str(&plan_doc.to_string());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs() -> Vec<Pair> {
        [("cfq", "cfq"), ("cfq", "noop"), ("deadline", "noop")]
            .iter()
            .map(|(h, g)| Pair {
                host: h.to_string(),
                guest: g.to_string(),
            })
            .collect()
    }

    #[test]
    fn a_plan_sets_the_first_pair_and_switches_only_what_changes() {
        let names = vec!["a".to_string(), "b".to_string(), "c".to_string()];
        let t = plan_tables(&names, true, &pairs(), &[0, 1, 2], SwitchPolicy::Drain);
        assert_eq!(t.len(), 3);
        assert_eq!(
            (t[0].host.as_deref(), t[0].guest.as_deref()),
            (Some("cfq"), Some("cfq"))
        );
        assert_eq!((t[1].host.as_deref(), t[1].guest.as_deref()), (None, Some("noop")));
        assert_eq!((t[2].host.as_deref(), t[2].guest.as_deref()), (Some("deadline"), None));
        assert_eq!(t[2].at.as_deref(), Some("c"));
        assert!(t.iter().all(|s| s.policy.is_none()));
        // A kept pair is no step; a policy other than drain is written.
        let t = plan_tables(&names, true, &pairs(), &[2, 2, 0], SwitchPolicy::Freeze);
        assert_eq!(t.len(), 2);
        assert_eq!(t[1].at.as_deref(), Some("c"));
        assert_eq!(t[1].policy.as_deref(), Some("freeze"));
        // Without phases: the pair at the start.
        let t = plan_tables(&["run".to_string()], false, &pairs(), &[1], SwitchPolicy::Drain);
        assert_eq!((t[0].at.as_deref(), t[0].at_s), (None, Some(0.0)));
        // Every table passes the plan's own checks.
        let t = plan_tables(&names, true, &pairs(), &[0, 1, 2], SwitchPolicy::Migrate);
        assert!(super::super::PhasePlan::check_workload(&t, &names).is_ok());
    }

    fn found(plan: &[usize], phase_s: &[f64]) -> Found {
        Found {
            plan: plan.to_vec(),
            outcome: Outcome {
                phase_s: phase_s.to_vec(),
                switch_s: vec![0.0; phase_s.len()],
            },
            runs: 0,
        }
    }

    #[test]
    fn the_written_plan_is_the_fastest_run_measured_and_says_which() {
        let heuristic = found(&[0, 1], &[10.0, 20.0]);
        // Algorithm 1's plan is the fastest: it is written (a tie keeps it).
        let (from, plan) = choose(&heuristic, &heuristic, None, 40.0);
        assert_eq!((from, plan.unwrap().plan), (Chosen::Algorithm1, vec![0, 1]));
        // A single pair of the profile was faster than the walk's plan.
        let single = found(&[2, 2], &[12.0, 16.0]);
        let (from, plan) = choose(&heuristic, &single, None, 40.0);
        assert_eq!((from, plan.unwrap().plan), (Chosen::SinglePair, vec![2, 2]));
        // A plan the walk tried on its way.
        let walked = found(&[1, 2], &[11.0, 16.0]);
        assert_eq!(choose(&heuristic, &walked, None, 40.0).0, Chosen::WalkRun);
        // The brute force's optimum beats both.
        let optimum = found(&[1, 0], &[11.0, 15.0]);
        let (from, plan) = choose(&heuristic, &single, Some(&optimum), 40.0);
        assert_eq!((from, plan.unwrap().plan), (Chosen::BruteForce, vec![1, 0]));
        // The config as written beat every plan: no plan is written.
        let (from, plan) = choose(&heuristic, &single, Some(&optimum), 25.0);
        assert_eq!((from, plan), (Chosen::AsWritten, None));
    }
}
