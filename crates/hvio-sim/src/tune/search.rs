//! Choosing a scheduler pair per phase (paper 002 §IV.C).
//!
//! A *plan* gives the index of the pair to run in each of a job's `P`
//! phases; two equal neighbours mean the pair is kept (no switch, the
//! paper's `0`), a change means a switch whose cost the evaluator charges.
//! The evaluator runs a plan and reports an [`Outcome`]: the time of each
//! phase and the cost of each switch.
//!
//! - [`profile`]: the job run once under each single pair (`S` runs), which
//!   gives every pair's time in every phase (the paper's Fig. 6).
//! - [`algorithm1`]: the paper's greedy walk. For phase `i`, with the phases
//!   before it fixed, the pairs are tried in the order of their profiled time
//!   in that phase, best first; the remaining phases run the single pair that
//!   was best over all of them together (the paper's `S_{i+1}`, "all the left
//!   phases as one integrated phase"), so that two candidates are compared on
//!   the same tail. The walk moves to the next pair while it makes the whole
//!   job faster and stops at the first that does not; then the phase is
//!   fixed. At most `S` new runs per phase, `P × S` in all.
//! - [`brute_force`]: every one of the `S^P` plans, for small `S` and `P`.
//! - [`algorithm1_walk`]: Algorithm 1, and the fastest plan among every run
//!   the profile and the walk made ([`Walked::fastest_run`]). The paper's
//!   walk stops at the first candidate that does not help and never looks
//!   back, so its plan can be slower than a single pair the profile already
//!   ran; the fastest run costs no run of its own.
//!
//! Runs are independent, so every batch (the profile, the brute force, the
//! two plans a step of the walk compares) runs on rayon's pool, one run per
//! core; results are taken in plan order, so the choice does not depend on
//! which run finishes first. Every plan is run at most once per search
//! (results are kept), and each [`Found`] says how many runs it needed.

use crate::error::{Result, SimError};
use rayon::prelude::*;
use serde::Serialize;
use std::collections::HashMap;
use std::sync::Mutex;

/// The pair to run in each phase, by index into the candidate pairs.
pub type Plan = Vec<usize>;

/// The size of a search: `pairs` candidate scheduler pairs, `phases` phases.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Space {
    /// Candidate scheduler pairs.
    pub pairs: usize,
    /// Phases.
    pub phases: usize,
}

/// What one run of a plan measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Outcome {
    /// Seconds spent in each phase.
    pub phase_s: Vec<f64>,
    /// Seconds spent switching into each phase: 0 for the first phase and
    /// wherever the plan keeps the pair.
    pub switch_s: Vec<f64>,
}

impl Outcome {
    /// The job's run time: every phase and every switch.
    pub fn total_s(&self) -> f64 {
        self.phase_s.iter().sum::<f64>() + self.switch_s.iter().sum::<f64>()
    }
}

/// Every pair's time in every phase, from one run per single pair.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Profile {
    /// `phase_s[p][s]`: seconds of phase `p` when the whole job runs pair `s`.
    pub phase_s: Vec<Vec<f64>>,
    /// `total_s[s]`: the whole job under pair `s`.
    pub total_s: Vec<f64>,
    /// Each single-pair run as the evaluator reported it.
    pub single: Vec<Outcome>,
    /// Runs made (one per pair).
    pub runs: usize,
}

impl Profile {
    /// The single pair with the shortest job (the lowest index on a tie).
    pub fn best_single(&self) -> usize {
        argmin(self.total_s.iter().copied())
    }

    /// The single pair best over phases `from..` taken together (the tail of
    /// Algorithm 1); `None` when there are no phases left.
    pub fn best_over(&self, from: usize) -> Option<usize> {
        let rest = &self.phase_s[from.min(self.phase_s.len())..];
        if rest.is_empty() {
            return None;
        }
        let pairs = rest[0].len();
        Some(argmin(
            (0..pairs).map(|s| rest.iter().map(|phase| phase[s]).sum::<f64>()),
        ))
    }

    /// The pairs of phase `p` from fastest to slowest (ties by index).
    pub fn order(&self, p: usize) -> Vec<usize> {
        let times = &self.phase_s[p];
        let mut order: Vec<usize> = (0..times.len()).collect();
        order.sort_by(|&a, &b| times[a].total_cmp(&times[b]).then(a.cmp(&b)));
        order
    }
}

/// A plan a search settled on.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Found {
    /// Per phase, the index of its pair.
    pub plan: Plan,
    /// What running it gave.
    pub outcome: Outcome,
    /// Runs this search made itself (Algorithm 1: beyond the profile).
    pub runs: usize,
}

impl Found {
    /// The plan as the paper writes it: the pair of the first phase, then
    /// for each later phase the pair switched to, or `None` (the paper's `0`)
    /// where the pair is kept.
    pub fn steps(&self) -> Vec<Option<usize>> {
        steps(&self.plan)
    }
}

/// A plan with kept pairs as `None` (see [`Found::steps`]).
pub fn steps(plan: &[usize]) -> Vec<Option<usize>> {
    plan.iter()
        .enumerate()
        .map(|(i, &s)| if i > 0 && plan[i - 1] == s { None } else { Some(s) })
        .collect()
}

/// Algorithm 1 beside the brute force and the best single pair.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    /// The search's size.
    pub space: Space,
    /// Each single pair's times per phase.
    pub profile: Profile,
    /// The single pair with the shortest run.
    pub best_single: usize,
    /// What Algorithm 1 found.
    pub heuristic: Found,
    /// `None` when `S^P` is over the brute-force limit.
    pub brute_force: Option<Found>,
    /// The fastest plan among every run of the profile and of Algorithm 1
    /// (see [`Walked::fastest_run`]).
    pub fastest_run: Found,
}

impl Comparison {
    /// How much longer the heuristic's job is than the optimum's, in percent.
    pub fn heuristic_gap_pct(&self) -> Option<f64> {
        self.brute_force
            .as_ref()
            .map(|best| pct_over(self.heuristic.outcome.total_s(), best.outcome.total_s()))
    }

    /// How much longer the fastest run's job is than the optimum's, in percent.
    pub fn fastest_run_gap_pct(&self) -> Option<f64> {
        self.brute_force
            .as_ref()
            .map(|best| pct_over(self.fastest_run.outcome.total_s(), best.outcome.total_s()))
    }

    /// How much shorter the heuristic's job is than the best single pair's, in percent.
    pub fn gain_over_best_single_pct(&self) -> f64 {
        pct_under(self.heuristic.outcome.total_s(), self.profile.total_s[self.best_single])
    }

    /// How much shorter the heuristic's job is than pair `reference`'s, in percent.
    pub fn gain_over_pct(&self, reference: usize) -> f64 {
        pct_under(self.heuristic.outcome.total_s(), self.profile.total_s[reference])
    }
}

fn pct_over(value: f64, reference: f64) -> f64 {
    if reference > 0.0 {
        (value - reference) / reference * 100.0
    } else {
        0.0
    }
}

fn pct_under(value: f64, reference: f64) -> f64 {
    if reference > 0.0 {
        (reference - value) / reference * 100.0
    } else {
        0.0
    }
}

fn argmin(values: impl Iterator<Item = f64>) -> usize {
    let mut best: Option<(usize, f64)> = None;
    for (i, v) in values.enumerate() {
        if best.is_none_or(|(_, b)| v < b) {
            best = Some((i, v));
        }
    }
    best.map_or(0, |(i, _)| i)
}

/// The runs of one search: each plan run once, its outcome kept.
struct Runs<'a, F> {
    space: Space,
    eval: &'a F,
    done: Mutex<HashMap<Plan, Outcome>>,
}

impl<'a, F> Runs<'a, F>
where
    F: Fn(&[usize]) -> Result<Outcome> + Sync,
{
    fn new(space: Space, eval: &'a F) -> Self {
        Runs {
            space,
            eval,
            done: Mutex::new(HashMap::new()),
        }
    }

    fn known(&self, plan: &[usize]) -> Option<Outcome> {
        self.done.lock().unwrap_or_else(|e| e.into_inner()).get(plan).cloned()
    }

    fn keep(&self, plan: Plan, outcome: Outcome) {
        self.done
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(plan, outcome);
    }

    /// The outcomes of `plans`, in order, running in parallel those not run
    /// yet; returns them and how many runs that took.
    fn outcomes(&self, plans: &[Plan]) -> Result<(Vec<Outcome>, usize)> {
        let mut fresh: Vec<&Plan> = plans.iter().filter(|p| self.known(p).is_none()).collect();
        fresh.dedup();
        let ran: Vec<Outcome> = fresh.par_iter().map(|plan| self.run_one(plan)).collect::<Result<_>>()?;
        let runs = ran.len();
        for (plan, outcome) in fresh.into_iter().zip(ran) {
            self.keep(plan.clone(), outcome);
        }
        let outcomes = plans
            .iter()
            .map(|p| self.known(p).expect("every plan was run"))
            .collect();
        Ok((outcomes, runs))
    }

    fn run_one(&self, plan: &[usize]) -> Result<Outcome> {
        let outcome = (self.eval)(plan)?;
        check_outcome(self.space, plan, &outcome)?;
        Ok(outcome)
    }
}

fn check_outcome(space: Space, plan: &[usize], outcome: &Outcome) -> Result<()> {
    if outcome.phase_s.len() != space.phases || outcome.switch_s.len() != space.phases {
        return Err(SimError::Other(format!(
            "tune: the run of plan {plan:?} reported {} phase times and {} switch costs; the search has {} phases",
            outcome.phase_s.len(),
            outcome.switch_s.len(),
            space.phases
        )));
    }
    if let Some(bad) = outcome
        .phase_s
        .iter()
        .chain(&outcome.switch_s)
        .find(|t| !t.is_finite() || **t < 0.0)
    {
        return Err(SimError::Other(format!(
            "tune: the run of plan {plan:?} reported a time of {bad} s"
        )));
    }
    Ok(())
}

fn check_space(space: Space) -> Result<()> {
    if space.pairs == 0 {
        return Err(SimError::invalid(
            "tune",
            "pairs",
            0,
            "the search needs at least one scheduler pair",
        ));
    }
    if space.phases == 0 {
        return Err(SimError::invalid(
            "tune",
            "phases",
            0,
            "the search needs at least one phase",
        ));
    }
    Ok(())
}

/// Run the job once under each single pair (in parallel).
pub fn profile<F>(space: Space, eval: &F) -> Result<Profile>
where
    F: Fn(&[usize]) -> Result<Outcome> + Sync,
{
    let runs = Runs::new(space, eval);
    profile_with(&runs)
}

fn profile_with<F>(runs: &Runs<'_, F>) -> Result<Profile>
where
    F: Fn(&[usize]) -> Result<Outcome> + Sync,
{
    let space = runs.space;
    check_space(space)?;
    let plans: Vec<Plan> = (0..space.pairs).map(|s| vec![s; space.phases]).collect();
    let (outcomes, made) = runs.outcomes(&plans)?;
    let phase_s = (0..space.phases)
        .map(|p| outcomes.iter().map(|o| o.phase_s[p]).collect())
        .collect();
    let total_s = outcomes.iter().map(Outcome::total_s).collect();
    Ok(Profile {
        phase_s,
        total_s,
        single: outcomes,
        runs: made,
    })
}

/// The paper's Algorithm 1 over a [`Profile`] of the same evaluator. Its
/// profiling runs are not run again (nor counted in [`Found::runs`]).
pub fn algorithm1<F>(space: Space, profile: &Profile, eval: &F) -> Result<Found>
where
    F: Fn(&[usize]) -> Result<Outcome> + Sync,
{
    algorithm1_walk(space, profile, eval).map(|w| w.found)
}

/// What [`algorithm1_walk`] gives.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Walked {
    /// Algorithm 1's plan.
    pub found: Found,
    /// The fastest plan among the profile's runs and the walk's (the
    /// lowest plan on a tie); its `runs` is 0: it needed no run of its own.
    pub fastest_run: Found,
}

/// [`algorithm1`], and the fastest of every plan the profile and the walk ran.
pub fn algorithm1_walk<F>(space: Space, profile: &Profile, eval: &F) -> Result<Walked>
where
    F: Fn(&[usize]) -> Result<Outcome> + Sync,
{
    check_space(space)?;
    if profile.phase_s.len() != space.phases || profile.single.len() != space.pairs {
        return Err(SimError::Other(format!(
            "tune: the profile covers {} phases and {} pairs; the search has {} and {}",
            profile.phase_s.len(),
            profile.single.len(),
            space.phases,
            space.pairs
        )));
    }
    let runs = Runs::new(space, eval);
    for (s, outcome) in profile.single.iter().enumerate() {
        runs.keep(vec![s; space.phases], outcome.clone());
    }
    let found = walk(&runs, profile)?;
    let done = runs.done.into_inner().unwrap_or_else(|e| e.into_inner());
    let (plan, outcome) = done
        .into_iter()
        .min_by(|(a, x), (b, y)| x.total_s().total_cmp(&y.total_s()).then_with(|| a.cmp(b)))
        .expect("the profile ran every single pair");
    Ok(Walked {
        found,
        fastest_run: Found { plan, outcome, runs: 0 },
    })
}

fn walk<F>(runs: &Runs<'_, F>, profile: &Profile) -> Result<Found>
where
    F: Fn(&[usize]) -> Result<Outcome> + Sync,
{
    let space = runs.space;
    let mut fixed: Plan = Vec::with_capacity(space.phases);
    let mut made = 0;
    for phase in 0..space.phases {
        let tail = profile.best_over(phase + 1);
        let with = |s: usize| -> Plan {
            let mut plan = fixed.clone();
            plan.push(s);
            plan.extend(tail.map(|t| vec![t; space.phases - phase - 1]).unwrap_or_default());
            plan
        };
        let order = profile.order(phase);
        let mut j = 0;
        while j + 1 < order.len() {
            let (pair, n) = runs.outcomes(&[with(order[j]), with(order[j + 1])])?;
            made += n;
            if pair[0].total_s() > pair[1].total_s() {
                j += 1;
            } else {
                break;
            }
        }
        fixed.push(order[j]);
    }
    let (outcome, n) = runs.outcomes(std::slice::from_ref(&fixed))?;
    made += n;
    let outcome = outcome.into_iter().next().expect("one plan, one outcome");
    Ok(Found {
        plan: fixed,
        outcome,
        runs: made,
    })
}

/// The plan at position `index` of the `S^P` plans in lexicographic order.
fn nth_plan(space: Space, mut index: usize) -> Plan {
    let mut plan = vec![0; space.phases];
    for slot in plan.iter_mut().rev() {
        *slot = index % space.pairs;
        index /= space.pairs;
    }
    plan
}

/// Every one of the `S^P` plans (in parallel); the fastest, the first in
/// lexicographic order on a tie. Refused when `S^P` is over `limit`.
pub fn brute_force<F>(space: Space, eval: &F, limit: usize) -> Result<Found>
where
    F: Fn(&[usize]) -> Result<Outcome> + Sync,
{
    check_space(space)?;
    let count = u32::try_from(space.phases)
        .ok()
        .and_then(|p| space.pairs.checked_pow(p))
        .filter(|&n| n <= limit)
        .ok_or_else(|| {
            SimError::invalid(
                "tune",
                "phases",
                space.phases,
                format!(
                    "{} pairs over {} phases are more plans than the brute-force limit of {limit}",
                    space.pairs, space.phases
                ),
            )
        })?;
    let runs = Runs::new(space, eval);
    let outcomes: Vec<Outcome> = (0..count)
        .into_par_iter()
        .map(|i| runs.run_one(&nth_plan(space, i)))
        .collect::<Result<_>>()?;
    let best = argmin(outcomes.iter().map(Outcome::total_s));
    let outcome = outcomes.into_iter().nth(best).expect("argmin is in range");
    Ok(Found {
        plan: nth_plan(space, best),
        outcome,
        runs: count,
    })
}

/// Profile, Algorithm 1 and (when `S^P <= brute_force_limit`) the brute force.
pub fn compare<F>(space: Space, eval: &F, brute_force_limit: usize) -> Result<Comparison>
where
    F: Fn(&[usize]) -> Result<Outcome> + Sync,
{
    let profile = profile(space, eval)?;
    let Walked {
        found: heuristic,
        fastest_run,
    } = algorithm1_walk(space, &profile, eval)?;
    let within_limit = u32::try_from(space.phases)
        .ok()
        .and_then(|p| space.pairs.checked_pow(p))
        .is_some_and(|n| n <= brute_force_limit);
    let brute_force = if within_limit {
        Some(brute_force(space, eval, brute_force_limit)?)
    } else {
        None
    };
    Ok(Comparison {
        space,
        best_single: profile.best_single(),
        profile,
        heuristic,
        brute_force,
        fastest_run,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A hand-made job: `phase[p][s]` seconds for phase `p` under pair `s`,
    /// `switch[a][b]` seconds to switch from pair `a` to pair `b`.
    #[derive(Clone, Debug)]
    struct Table {
        phase: Vec<Vec<f64>>,
        switch: Vec<Vec<f64>>,
    }

    impl Table {
        fn space(&self) -> Space {
            Space {
                pairs: self.switch.len(),
                phases: self.phase.len(),
            }
        }

        fn run(&self, plan: &[usize]) -> Result<Outcome> {
            let phase_s = plan.iter().enumerate().map(|(p, &s)| self.phase[p][s]).collect();
            let switch_s = plan
                .iter()
                .enumerate()
                .map(|(p, &s)| {
                    if p > 0 && plan[p - 1] != s {
                        self.switch[plan[p - 1]][s]
                    } else {
                        0.0
                    }
                })
                .collect();
            Ok(Outcome { phase_s, switch_s })
        }

        fn transposed(&self) -> Table {
            let n = self.switch.len();
            let switch = (0..n).map(|a| (0..n).map(|b| self.switch[b][a]).collect()).collect();
            Table {
                phase: self.phase.clone(),
                switch,
            }
        }
    }

    /// Two phases, three pairs: pair 0 is best in phase 1, pair 1 in phase 2
    /// and over the whole job; switching 0 → 1 is cheap, 1 → 0 is not.
    fn cheap_forward_switch() -> Table {
        Table {
            phase: vec![vec![10.0, 12.0, 20.0], vec![30.0, 18.0, 25.0]],
            switch: vec![vec![0.0, 1.0, 5.0], vec![9.0, 0.0, 1.0], vec![5.0, 1.0, 0.0]],
        }
    }

    fn comparison(table: &Table) -> Comparison {
        let eval = |plan: &[usize]| table.run(plan);
        compare(table.space(), &eval, 10_000).unwrap()
    }

    #[test]
    fn walk_finds_the_optimum_when_switching_pays() {
        let c = comparison(&cheap_forward_switch());
        assert_eq!(c.best_single, 1);
        assert_eq!(c.profile.total_s, vec![40.0, 30.0, 45.0]);
        assert_eq!(c.heuristic.plan, vec![0, 1]);
        assert_eq!(c.heuristic.outcome.total_s(), 29.0);
        let best = c.brute_force.as_ref().unwrap();
        assert_eq!(best.plan, vec![0, 1]);
        assert_eq!(best.runs, 9);
        assert_eq!(c.heuristic_gap_pct(), Some(0.0));
        assert!((c.gain_over_best_single_pct() - 100.0 / 30.0).abs() < 1e-9);
        assert_eq!(c.heuristic.steps(), vec![Some(0), Some(1)]);
    }

    #[test]
    fn switch_costs_are_charged_by_direction() {
        // The same phase times with every switch cost reversed: 0 → 1 now
        // costs 9, and the best plan is to stay on pair 1 throughout.
        let c = comparison(&cheap_forward_switch().transposed());
        let best = c.brute_force.as_ref().unwrap();
        assert_eq!(best.plan, vec![1, 1]);
        assert_eq!(best.outcome.total_s(), 30.0);
        assert_eq!(c.heuristic.plan, vec![1, 1]);
        assert_eq!(c.heuristic.steps(), vec![Some(1), None]);
        assert_eq!(c.gain_over_best_single_pct(), 0.0);
    }

    #[test]
    fn walk_stops_at_the_first_pair_that_does_not_help() {
        // Phase 1 favours pair 0 by its profile; pair 2 is best in phase 2
        // and the tail. Trying pair 1 in phase 1 costs 30 (its switch to 2
        // is dear), worse than pair 0's 28, so the walk stops there and
        // never tries pair 2, which would run the whole job without a
        // switch in 27.
        let table = Table {
            phase: vec![vec![10.0, 11.0, 12.0], vec![30.0, 30.0, 15.0]],
            switch: vec![vec![0.0, 1.0, 3.0], vec![2.0, 0.0, 4.0], vec![2.0, 2.0, 0.0]],
        };
        let c = comparison(&table);
        assert_eq!(c.heuristic.plan, vec![0, 2]);
        assert_eq!(c.heuristic.outcome.total_s(), 28.0);
        let best = c.brute_force.as_ref().unwrap();
        assert_eq!(best.plan, vec![2, 2]);
        assert_eq!(best.outcome.total_s(), 27.0);
        let gap = c.heuristic_gap_pct().unwrap();
        assert!((gap - 100.0 / 27.0).abs() < 1e-9, "gap {gap}");
        // The profile already ran [2, 2]: the fastest run is the optimum.
        assert_eq!(c.fastest_run.plan, vec![2, 2]);
        assert_eq!(c.fastest_run_gap_pct(), Some(0.0));
        assert_eq!(c.fastest_run.runs, 0);
    }

    #[test]
    fn the_tail_is_the_pair_best_over_all_remaining_phases_together() {
        // Phase 2 alone favours pair 0, phases 2 and 3 together pair 1.
        let table = Table {
            phase: vec![vec![5.0, 5.0], vec![10.0, 11.0], vec![20.0, 10.0]],
            switch: vec![vec![0.0, 1.0], vec![1.0, 0.0]],
        };
        let tried = Mutex::new(Vec::new());
        let eval = |plan: &[usize]| {
            tried.lock().unwrap().push(plan.to_vec());
            table.run(plan)
        };
        let profile = profile(table.space(), &eval).unwrap();
        assert_eq!(profile.best_over(1), Some(1));
        assert_eq!(profile.best_over(2), Some(1));
        assert_eq!(profile.best_over(3), None);
        tried.lock().unwrap().clear();
        let found = algorithm1(table.space(), &profile, &eval).unwrap();
        let tried = tried.into_inner().unwrap();
        // Phase 1's candidates, pair 0 then pair 1 (a tie in the profile),
        // on the tail 1, 1; [1, 1, 1] was a profiling run and is not rerun.
        assert_eq!(tried[0], vec![0, 1, 1], "{tried:?}");
        assert!(tried.iter().all(|p| p[1..] != [0, 0]), "{tried:?}");
        // [0, 1, 1] pays a switch (27 s) that [1, 1, 1] does not (26 s).
        assert_eq!(found.plan, vec![1, 1, 1]);
        assert_eq!(found.outcome.total_s(), 26.0);
        assert!(found.runs <= 3 * 2);
    }

    #[test]
    fn a_run_of_the_wrong_shape_is_an_error_naming_the_plan() {
        let eval = |_: &[usize]| {
            Ok(Outcome {
                phase_s: vec![1.0],
                switch_s: vec![0.0],
            })
        };
        let err = profile(Space { pairs: 2, phases: 2 }, &eval).unwrap_err().to_string();
        assert!(err.contains("plan [0, 0]") || err.contains("plan [1, 1]"), "{err}");
        assert!(err.contains("1 phase times"), "{err}");
    }

    #[test]
    fn brute_force_over_the_limit_is_refused_before_any_run() {
        let eval = |_: &[usize]| -> Result<Outcome> { panic!("no run expected") };
        let err = brute_force(Space { pairs: 16, phases: 5 }, &eval, 65_536)
            .unwrap_err()
            .to_string();
        assert!(err.contains("phases") && err.contains("65536"), "{err}");
        let c = compare(
            Space { pairs: 2, phases: 1 },
            &|_: &[usize]| {
                Ok(Outcome {
                    phase_s: vec![1.0],
                    switch_s: vec![0.0],
                })
            },
            1,
        )
        .unwrap();
        assert!(c.brute_force.is_none());
    }

    #[test]
    fn an_empty_space_is_refused() {
        let eval = |_: &[usize]| -> Result<Outcome> { panic!("no run expected") };
        assert!(profile(Space { pairs: 0, phases: 2 }, &eval)
            .unwrap_err()
            .to_string()
            .contains("pairs"));
        assert!(profile(Space { pairs: 2, phases: 0 }, &eval)
            .unwrap_err()
            .to_string()
            .contains("phases"));
    }

    fn table_strategy() -> impl Strategy<Value = Table> {
        (1usize..=4, 1usize..=3).prop_flat_map(|(pairs, phases)| {
            (
                proptest::collection::vec(proptest::collection::vec(1u32..100, pairs), phases),
                proptest::collection::vec(proptest::collection::vec(0u32..20, pairs), pairs),
            )
                .prop_map(|(phase, switch)| Table {
                    phase: phase
                        .into_iter()
                        .map(|r| r.into_iter().map(f64::from).collect())
                        .collect(),
                    switch: switch
                        .into_iter()
                        .map(|r| r.into_iter().map(f64::from).collect())
                        .collect(),
                })
        })
    }

    proptest! {
        #[test]
        fn searches_keep_their_bounds(table in table_strategy()) {
            let space = table.space();
            let c = comparison(&table);
            let best = c.brute_force.clone().unwrap();
            prop_assert_eq!(c.profile.runs, space.pairs);
            prop_assert!(c.heuristic.runs <= space.phases * space.pairs, "{} runs", c.heuristic.runs);
            prop_assert_eq!(best.runs, space.pairs.pow(space.phases as u32));
            // The brute force is the optimum: no plan, single-pair or the
            // heuristic's, is faster.
            prop_assert!(best.outcome.total_s() <= c.heuristic.outcome.total_s());
            for total in &c.profile.total_s {
                prop_assert!(best.outcome.total_s() <= *total);
            }
            // The fastest run is never slower than Algorithm 1's plan or
            // any single pair, nor faster than the optimum.
            prop_assert!(c.fastest_run.outcome.total_s() <= c.heuristic.outcome.total_s());
            prop_assert!(c.fastest_run.outcome.total_s() <= c.profile.total_s[c.best_single]);
            prop_assert!(c.fastest_run.outcome.total_s() >= best.outcome.total_s());
            prop_assert_eq!(&c.fastest_run.outcome, &table.run(&c.fastest_run.plan).unwrap());
            // Each reported outcome is the evaluator's for its plan.
            prop_assert_eq!(&c.heuristic.outcome, &table.run(&c.heuristic.plan).unwrap());
            prop_assert_eq!(&best.outcome, &table.run(&best.plan).unwrap());
            // Same input, same answer.
            prop_assert_eq!(&c, &comparison(&table));
        }
    }
}
