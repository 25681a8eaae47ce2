//! Paper 002's searches on its virtual Hadoop cluster, from a config: a
//! study's `kind = "mapreduce-tune"` and `kind = "switch-cost"` runs
//! (`hvio._hvio.mapreduce_tune` and `hvio._hvio.switch_cost` in Python).
//!
//! - [`tune()`] (§IV.C): one job ([`crate::mapreduce_run`]'s config) profiled
//!   under every candidate (host, guest) pair, then Algorithm 1's walk over
//!   two-phase plans (the map, then the shuffle and the reduce as one: the
//!   paper's split for a job whose shuffle is short), the switch as the job
//!   enters its shuffle, and, if asked, the brute force over every plan
//!   ([`crate::tune::search`]). Every plan run is reported with its phase
//!   times and the backlog its second pair inherited.
//! - [`switch_cost()`] (§IV.B): every VM of one node writing with `dd` at
//!   once, under each pair alone and switched halfway to each other pair:
//!   `Cost(a → b) = T_ab − ½ (T_a + T_b)` ([`crate::tune::switch_cost`]).
//!
//! Both run their batches of runs on rayon's pool; the model draws no
//! random numbers, so a search gives the same result on any number of cores.

use crate::error::{Result, SimError};
use crate::mapreduce::{node, NodeSpec, PhaseKind};
use crate::mapreduce_run::{job_spec, parse_as, simulate, two_phases_s, MapReduceRunConfig, PhaseBacklog};
use crate::pagecache::PageCacheConfig;
use crate::size::Size;
use crate::tune::workload::{Pair, BRUTE_FORCE_LIMIT, PAPER_SCHEDULERS};
use crate::tune::{self, Found, Outcome, Plan, Profile, Space};
use hvio_sched::SwitchPolicy;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Mutex;

fn paper_schedulers() -> Vec<String> {
    PAPER_SCHEDULERS.iter().map(|s| s.to_string()).collect()
}

/// The candidate pairs: every host of `hosts` with every guest of
/// `guests`, host-major (pair `h × |guests| + g`).
fn pairs(what: &str, hosts: &[String], guests: &[String]) -> Result<Vec<Pair>> {
    for (key, names) in [("hosts", hosts), ("guests", guests)] {
        if names.is_empty() {
            return Err(SimError::invalid(what, key, "[]", "name at least one scheduler"));
        }
        for (i, n) in names.iter().enumerate() {
            hvio_sched::spec(n).map_err(|e| SimError::invalid(what, key, n, e.to_string()))?;
            if names[..i].contains(n) {
                return Err(SimError::invalid(what, key, n, "named twice"));
            }
        }
    }
    Ok(hosts
        .iter()
        .flat_map(|h| {
            guests.iter().map(move |g| Pair {
                host: h.clone(),
                guest: g.clone(),
            })
        })
        .collect())
}

fn policy(what: &str, name: &Option<String>) -> Result<SwitchPolicy> {
    name.as_deref().map_or(Ok(SwitchPolicy::Drain), |p| {
        p.parse().map_err(|e: String| SimError::invalid(what, "policy", p, e))
    })
}

/// The `[tune]` table of a `mapreduce-tune` run.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TuneSettings {
    /// Host schedulers to try (default paper 002's four).
    #[serde(default = "paper_schedulers")]
    pub hosts: Vec<String>,
    /// Guest schedulers to try (default paper 002's four).
    #[serde(default = "paper_schedulers")]
    pub guests: Vec<String>,
    /// Also run every one of the `S²` two-phase plans.
    #[serde(default)]
    pub brute_force: bool,
    /// With `brute_force`: only when the cluster's input (every VM's) is at
    /// most this; a bigger job gets no brute force.
    #[serde(default)]
    pub brute_force_max_input: Option<Size>,
    /// How a switch treats queued requests (`drain`, `freeze`, `migrate`;
    /// default `drain`).
    #[serde(default)]
    pub policy: Option<String>,
}

impl Default for TuneSettings {
    fn default() -> Self {
        TuneSettings {
            hosts: paper_schedulers(),
            guests: paper_schedulers(),
            brute_force: false,
            brute_force_max_input: None,
            policy: None,
        }
    }
}

/// One plan a search ran.
#[derive(Clone, Debug, Serialize)]
pub struct PlanRun {
    /// Per phase, the index of its pair.
    pub plan: Plan,
    /// Each phase's time, s.
    pub phase_s: Vec<f64>,
    /// The job's time, s.
    pub total_s: f64,
    /// The cluster's backlog as the map ended, before the switch.
    pub backlog: PhaseBacklog,
}

/// What a `mapreduce-tune` run found.
#[derive(Clone, Debug, Serialize)]
pub struct MapReduceTuneResult {
    /// The benchmark.
    pub benchmark: String,
    /// Physical nodes.
    pub nodes: usize,
    /// VMs per node.
    pub vms_per_node: usize,
    /// HDFS input per VM, bytes.
    pub input_per_vm: u64,
    /// The candidate pairs, host-major.
    pub pairs: Vec<Pair>,
    /// The phases a plan gives a pair each.
    pub phases: Vec<&'static str>,
    /// The index of the config's own pair among `pairs`, if it is one.
    pub default: Option<usize>,
    /// Each single pair's times per phase.
    pub profile: Profile,
    /// The single pair with the shortest job.
    pub best_single: usize,
    /// Algorithm 1's plan ([`Found::runs`]: beyond the profile's).
    pub heuristic: Found,
    /// The fastest plan among every run of the profile and Algorithm 1.
    pub fastest_run: Found,
    /// The brute force's optimum, when it ran.
    pub brute_force: Option<Found>,
    /// Every plan run, in plan order.
    pub plans: Vec<PlanRun>,
}

/// Parse a `mapreduce-tune` run's config from JSON: a MapReduce run's
/// ([`MapReduceRunConfig`]: its `[host] scheduler` and `guest_scheduler`
/// are the pair the gains are measured against, when it is a candidate)
/// with the search's `[tune]` table; errors name `origin`.
pub fn parse_tune(json: &str, origin: &str) -> Result<MapReduceRunConfig> {
    parse_as(json, origin, "mapreduce-tune run")
}

/// Profile, Algorithm 1 and (as `[tune]` says) the brute force over the
/// two-phase plans of `job`.
pub fn tune(job: &MapReduceRunConfig) -> Result<MapReduceTuneResult> {
    let what = "mapreduce-tune";
    if !job.phase.is_empty() {
        return Err(SimError::invalid(
            what,
            "phase",
            "[[phase]]",
            "the search finds the plan: give the job without one",
        ));
    }
    let default_settings = TuneSettings::default();
    let settings = job.tune.as_ref().unwrap_or(&default_settings);
    let pairs = pairs(what, &settings.hosts, &settings.guests)?;
    let policy = policy(what, &settings.policy)?;
    let (spec, _) = job_spec(job)?;
    let cluster = &job.cluster;
    spec.check(cluster)?;
    let space = Space {
        pairs: pairs.len(),
        phases: 2,
    };
    let ran: Mutex<BTreeMap<Plan, PlanRun>> = Mutex::new(BTreeMap::new());
    // Start under the plan's first pair; as the job enters its shuffle,
    // switch what the second pair changes (the host, the guests or both).
    let eval = |plan: &[usize]| -> Result<Outcome> {
        let (from, to) = (&pairs[plan[0]], &pairs[plan[1]]);
        let switches: Vec<node::PhaseSwitch> = (plan[1] != plan[0])
            .then(|| node::PhaseSwitch {
                at: PhaseKind::Shuffle,
                host: (to.host != from.host).then(|| to.host.clone()),
                guest: (to.guest != from.guest).then(|| to.guest.clone()),
                policy,
            })
            .into_iter()
            .collect();
        let (run, backlogs, _) = simulate(&spec, cluster, (&from.host, &from.guest), &switches)?;
        let phase_s = two_phases_s(&run);
        let b = backlogs.first().copied().unwrap_or_default();
        let outcome = Outcome {
            phase_s: phase_s.clone(),
            switch_s: vec![0.0; 2],
        };
        let record = PlanRun {
            plan: plan.to_vec(),
            total_s: outcome.total_s(),
            phase_s,
            backlog: PhaseBacklog::new(PhaseKind::Shuffle.name(), b),
        };
        ran.lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(plan.to_vec(), record);
        Ok(outcome)
    };
    let profile = tune::profile(space, &eval)?;
    let walked = tune::algorithm1_walk(space, &profile, &eval)?;
    let input = spec.input_per_vm.saturating_mul(cluster.vms() as u64);
    let brute = settings.brute_force && settings.brute_force_max_input.is_none_or(|max| input <= max.bytes());
    let brute_force = if brute {
        Some(tune::brute_force(space, &eval, BRUTE_FORCE_LIMIT)?)
    } else {
        None
    };
    let default = pairs
        .iter()
        .position(|p| p.host == job.host.scheduler && p.guest == job.guest_scheduler);
    Ok(MapReduceTuneResult {
        benchmark: job.benchmark.name().into(),
        nodes: cluster.nodes,
        vms_per_node: cluster.vms_per_node,
        input_per_vm: spec.input_per_vm,
        pairs,
        phases: vec![PhaseKind::Map.name(), PhaseKind::ShuffleReduce.name()],
        default,
        best_single: profile.best_single(),
        profile,
        heuristic: walked.found,
        fastest_run: walked.fastest_run,
        brute_force,
        plans: ran
            .into_inner()
            .unwrap_or_else(|e| e.into_inner())
            .into_values()
            .collect(),
    })
}

fn default_vms() -> usize {
    4
}

fn default_bytes() -> Size {
    Size(600 << 20)
}

fn default_block() -> Size {
    Size(1 << 20)
}

/// A `switch-cost` run: paper 002's `dd` benchmark on one node.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchCostConfig {
    /// Host schedulers (default paper 002's four).
    #[serde(default = "paper_schedulers")]
    pub hosts: Vec<String>,
    /// Guest schedulers (default paper 002's four).
    #[serde(default = "paper_schedulers")]
    pub guests: Vec<String>,
    /// VMs on the node, each running `dd` (default 4, the paper's).
    #[serde(default = "default_vms")]
    pub vms: usize,
    /// Bytes each VM writes (default 600 MiB, the paper's 600 MB).
    #[serde(default = "default_bytes")]
    pub bytes: Size,
    /// `dd`'s block size (default 1 MiB; the paper does not give it).
    #[serde(default = "default_block")]
    pub block: Size,
    /// Each guest's page cache (default a 1 GiB VM's, all of it `dd`'s);
    /// `dd` returns when its last block is in the cache.
    #[serde(default = "node::dd_page_cache")]
    pub page_cache: PageCacheConfig,
    /// Accepted so that a study's seed may be set; the model draws no random numbers.
    #[serde(default)]
    pub seed: Option<u64>,
}

/// What a `switch-cost` run measured.
#[derive(Clone, Debug, Serialize)]
pub struct SwitchCostResult {
    /// The pairs, host-major: `cost_s[a][b]` is from `pairs[a]` to `pairs[b]`.
    pub pairs: Vec<Pair>,
    /// VMs on the node.
    pub vms: usize,
    /// Bytes each VM wrote.
    pub bytes: u64,
    /// `dd`'s block size, bytes.
    pub block: u64,
    /// Each guest's page cache, bytes.
    pub page_cache_bytes: u64,
    /// The measurement: `alone_s`, `switched_s`, `cost_s`, `runs`.
    #[serde(flatten)]
    pub costs: tune::SwitchCosts,
}

/// Parse a [`SwitchCostConfig`] from JSON; errors name `origin`.
pub fn parse_switch_cost(json: &str, origin: &str) -> Result<SwitchCostConfig> {
    parse_as(json, origin, "switch-cost run")
}

/// Every ordered pair's switch cost: `dd` under each pair alone, then
/// started under each and switched halfway (with drain, host and guests
/// both re-assigned, as the paper does) to each.
pub fn switch_cost(cfg: &SwitchCostConfig) -> Result<SwitchCostResult> {
    let what = "switch-cost";
    let pairs = pairs(what, &cfg.hosts, &cfg.guests)?;
    if cfg.vms == 0 {
        return Err(SimError::invalid(what, "vms", 0, "needs at least one VM"));
    }
    if cfg.bytes.bytes() == 0 || cfg.block.bytes() == 0 {
        let key = if cfg.bytes.bytes() == 0 { "bytes" } else { "block" };
        return Err(SimError::invalid(what, key, 0, "must be > 0"));
    }
    let disk = toml::Table::new();
    let run = |r: tune::CostRun| {
        let from = &pairs[r.from];
        node::dd_time(
            &NodeSpec::new(&from.host, &from.guest, cfg.vms).with_page_cache(cfg.page_cache.clone()),
            &disk,
            cfg.bytes.bytes(),
            cfg.block.bytes(),
            r.switch
                .map(|(to, at)| ((pairs[to].host.as_str(), pairs[to].guest.as_str()), at)),
        )
    };
    let costs = tune::switch_cost::measure(pairs.len(), &run)?;
    Ok(SwitchCostResult {
        vms: cfg.vms,
        bytes: cfg.bytes.bytes(),
        block: cfg.block.bytes(),
        page_cache_bytes: cfg.page_cache.memory.bytes(),
        pairs,
        costs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tests' cluster: 2 nodes × 1 VM, 32 MiB per VM in 16 MiB blocks
    /// (two maps per VM, one wave), so that a debug build runs it in seconds.
    const TINY: &str = r#""benchmark": "sort", "input_per_vm": "32MiB", "block": "16MiB",
        "cluster": {"nodes": 2, "vms_per_node": 1}, "host": {"scheduler": "cfq"}, "guest_scheduler": "cfq""#;

    #[test]
    fn algorithm1_stays_within_its_bound_and_the_brute_force_is_the_optimum() {
        let json = format!(
            r#"{{{TINY}, "tune": {{"hosts": ["cfq", "deadline"], "guests": ["cfq", "noop"], "brute_force": true}}}}"#
        );
        let r = tune(&parse_tune(&json, "t").unwrap()).unwrap();
        assert_eq!(r.pairs.len(), 4);
        assert_eq!(r.default, Some(0));
        assert_eq!(r.profile.runs, 4);
        assert!(r.heuristic.runs <= 2 * 4, "{} runs", r.heuristic.runs);
        let brute = r.brute_force.as_ref().unwrap();
        assert_eq!(brute.runs, 16);
        assert_eq!(r.plans.len(), 16, "every plan, once each");
        let (best, found) = (brute.outcome.total_s(), r.heuristic.outcome.total_s());
        assert!(best <= found && best <= r.fastest_run.outcome.total_s());
        assert!(r.profile.total_s.iter().all(|&t| best <= t));
        assert!(r.fastest_run.outcome.total_s() <= found);
        // Each plan's reported time is the simulator's for it: a
        // `mapreduce` run of the plan as [[phase]] steps (the second
        // switching what changes) gives it again.
        for plan in [&r.heuristic.plan, &brute.plan] {
            let (a, b) = (&r.pairs[plan[0]], &r.pairs[plan[1]]);
            let mut switch = Vec::new();
            if a.host != b.host {
                switch.push(format!(r#""host": "{}""#, b.host));
            }
            if a.guest != b.guest {
                switch.push(format!(r#""guest": "{}""#, b.guest));
            }
            let mut steps = format!(r#"{{"at": "map", "host": "{}", "guest": "{}"}}"#, a.host, a.guest);
            if !switch.is_empty() {
                steps += &format!(r#", {{"at": "shuffle", {}}}"#, switch.join(", "));
            }
            let again = format!(r#"{{{TINY}, "phase": [{steps}]}}"#);
            let run = crate::mapreduce_run::run(&crate::mapreduce_run::parse(&again, "t").unwrap()).unwrap();
            let want = r.plans.iter().find(|p| &p.plan == plan).unwrap().total_s;
            assert!(
                (run.two_phases_s.iter().sum::<f64>() - want).abs() < 1e-6,
                "{run:?} {want}"
            );
        }
    }

    #[test]
    fn the_brute_force_is_skipped_over_its_input_bound_and_bad_settings_are_named() {
        let json = format!(
            r#"{{{TINY}, "tune": {{"hosts": ["cfq"], "guests": ["cfq", "noop"], "brute_force": true, "brute_force_max_input": "32MiB"}}}}"#
        );
        let r = tune(&parse_tune(&json, "t").unwrap()).unwrap();
        assert!(r.brute_force.is_none(), "64 MiB of input is over 32 MiB");
        let bad = |tune_table: &str| {
            let json = format!(r#"{{{TINY}, "tune": {tune_table}}}"#);
            tune(&parse_tune(&json, "t").unwrap()).unwrap_err().to_string()
        };
        assert!(bad(r#"{"hosts": ["bogus"]}"#).contains("bogus"));
        assert!(bad(r#"{"guests": []}"#).contains("guests"));
        assert!(bad(r#"{"policy": "later"}"#).contains("later"));
        let e = parse_tune(&format!(r#"{{{TINY}, "tune": {{"limit": 3}}}}"#), "t").unwrap_err();
        assert!(e.to_string().contains("limit"), "{e}");
    }

    #[test]
    fn a_plan_switches_at_the_shuffle_and_a_timed_step_is_refused() {
        // Without heartbeats: in this tiny job the reducers' polls, not the
        // disks, set when the job ends, so a guest switch would change nothing.
        let plan = |steps: &str| format!(r#"{{{TINY}, "heartbeats": false, "phase": [{steps}]}}"#);
        let run = |json: &str| crate::mapreduce_run::run(&crate::mapreduce_run::parse(json, "t").unwrap());
        let single = run(&plan("")).unwrap();
        assert_eq!(
            format!("{single:?}"),
            format!("{:?}", run(&plan("")).unwrap()),
            "deterministic"
        );
        let switched = run(&plan(r#"{"at": "shuffle", "guest": "noop"}"#)).unwrap();
        assert_eq!(single.phases_s[0], switched.phases_s[0], "the same map phase");
        assert_ne!(single.job_s, switched.job_s);
        assert_eq!(switched.backlogs[0].phase, "shuffle");
        let e = run(&plan(r#"{"at_s": 1.0, "host": "noop"}"#)).unwrap_err();
        assert!(e.to_string().contains("at_s"), "{e}");
    }

    #[test]
    fn a_switch_cost_is_measured_for_every_ordered_pair() {
        let json = r#"{"hosts": ["cfq"], "guests": ["cfq", "noop"], "vms": 2, "bytes": "8MiB",
            "page_cache": {"memory": "4MiB"}}"#;
        let r = switch_cost(&parse_switch_cost(json, "t").unwrap()).unwrap();
        assert_eq!((r.pairs.len(), r.costs.runs, r.vms), (2, 6, 2));
        assert_eq!(r.page_cache_bytes, 4 << 20);
        for a in 0..2 {
            for b in 0..2 {
                let want = r.costs.switched_s[a][b] - 0.5 * (r.costs.alone_s[a] + r.costs.alone_s[b]);
                assert_eq!(r.costs.cost_s[a][b], want);
            }
        }
        let e = switch_cost(&parse_switch_cost(r#"{"vms": 0}"#, "t").unwrap()).unwrap_err();
        assert!(e.to_string().contains("vms"), "{e}");
        let e = parse_switch_cost(r#"{"bytes": "lots"}"#, "t").unwrap_err();
        assert!(e.to_string().starts_with("t: switch-cost run:"), "{e}");
    }
}
