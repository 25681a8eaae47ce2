//! One MapReduce job on paper 002's virtual Hadoop cluster under one
//! (host, guest) scheduler pair, or a `[[phase]]` plan of pairs (§IV: a
//! switch as the job enters a phase), from a config: a study's
//! `kind = "mapreduce"` run (`hvio._hvio.mapreduce` in Python; the studies
//! `experiments/paper002-*.study.toml` sweep it over pairs, benchmarks and
//! input sizes). The cluster is [`crate::mapreduce`]'s: each node one HDD
//! (hvio's default disk model) with its own host scheduler, each guest with
//! the page cache a 1 GiB Hadoop VM has beside its four task JVMs
//! ([`node::hadoop_page_cache`]). The model draws no random numbers: the
//! seed changes nothing.

use crate::error::{Result, SimError};
use crate::mapreduce::{node, waves, Benchmark, ClusterRun, ClusterSpec, JobSpec, NodeSpec, PhaseKind};
use crate::size::Size;
use crate::tune::{PhaseConfig, PhasePlan, When};
use hvio_core::time::ns_to_s;
use serde::{Deserialize, Serialize};

/// A run: the job, its input, the cluster and the scheduler pair.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MapReduceRunConfig {
    /// `sort`, `wordcount` or `wordcount-no-combiner`, with the paper's
    /// sizes and Hadoop 0.19's defaults ([`JobSpec::preset`]).
    pub benchmark: Benchmark,
    /// HDFS input per data node (VM); default the preset's 512 MiB.
    #[serde(default)]
    pub input_per_vm: Option<Size>,
    /// The input per VM in map waves instead (Table II): this many blocks
    /// per map slot of every VM.
    #[serde(default)]
    pub input_waves: Option<f64>,
    /// `dfs.block.size` (one map per block); default the preset's 64 MiB.
    #[serde(default)]
    pub block: Option<Size>,
    /// Hadoop 0.19's JobTracker loop ([`crate::mapreduce::Heartbeat`]): a
    /// task starts at a heartbeat, reducers learn of a finished map through
    /// polls. `false`: tasks start and reducers learn at once.
    #[serde(default = "heartbeats_default")]
    pub heartbeats: bool,
    /// Nodes, VMs per node, network and guest RAM (paper 002's by default).
    #[serde(default)]
    pub cluster: ClusterSpec,
    /// Every node's host scheduler (as a config's `[host]`).
    pub host: MapReduceHost,
    /// Every guest's scheduler.
    pub guest_scheduler: String,
    /// A switch plan, as an `hvio sim` config's `[[phase]]` steps: a step
    /// `at = "map"` sets the pair the job starts with, one at `shuffle`,
    /// `reduce` or `shuffle-reduce` (the shuffle's start) switches the
    /// host, every guest or both as the job enters that phase.
    #[serde(default)]
    pub phase: Vec<PhaseConfig>,
    /// A `mapreduce-tune` run's search ([`crate::mapreduce_tune::tune`]):
    /// refused by a single run.
    #[serde(default)]
    pub tune: Option<crate::mapreduce_tune::TuneSettings>,
    /// Accepted so that a study's seed may be set; the model draws no random numbers.
    #[serde(default)]
    pub seed: Option<u64>,
}

fn heartbeats_default() -> bool {
    true
}

/// The `[host]` of a [`MapReduceRunConfig`].
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MapReduceHost {
    /// The host scheduler of every node.
    pub scheduler: String,
}

/// What a run measured.
#[derive(Clone, Debug, Serialize)]
pub struct MapReduceRunResult {
    /// The benchmark.
    pub benchmark: String,
    /// The host scheduler.
    pub host: String,
    /// The guests' scheduler.
    pub guest: String,
    /// Physical nodes.
    pub nodes: usize,
    /// VMs per node.
    pub vms_per_node: usize,
    /// HDFS input per VM, bytes.
    pub input_per_vm: u64,
    /// Bytes of one map wave per VM (a block per map slot).
    pub wave_bytes: u64,
    /// Map tasks of the job.
    pub maps: u64,
    /// Reduce tasks of the job.
    pub reducers: usize,
    /// The job's time, s.
    pub job_s: f64,
    /// Each phase's time (map, concurrent shuffle, the rest), s.
    pub phases_s: Vec<f64>,
    /// The shuffle after the last map, % of the job (Table II).
    pub non_concurrent_shuffle_pct: f64,
    /// Map waves the job ran: its blocks over the cluster's map slots.
    pub waves: f64,
    /// The map, then the shuffle and the reduce as one phase, s: the two
    /// phases paper 002's two-phase plans switch between.
    pub two_phases_s: Vec<f64>,
    /// The cluster's backlog (every node's) as the job entered each phase
    /// after the map, before any switch there: what the next pair of a
    /// plan inherits.
    pub backlogs: Vec<PhaseBacklog>,
    /// What the disks did in each phase (every node's together).
    pub disk: Vec<PhaseDisk>,
}

/// The disks in one phase of a run, every node's together: how busy, and
/// what the host scheduler sent them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PhaseDisk {
    /// The phase (`map`, `shuffle`, `reduce`).
    pub phase: &'static str,
    /// Its length, s.
    pub seconds: f64,
    /// The share of the phase the disks held a request, % (the nodes' mean).
    pub busy_pct: f64,
    /// Requests dispatched to the disks.
    pub requests: u64,
    /// Their mean size, KiB.
    pub mean_kib: f64,
    /// Reads among them, %.
    pub read_pct: f64,
    /// Requests that did not start where the one dispatched before ended, %.
    pub seek_pct: f64,
    /// The mean distance of those, MiB.
    pub mean_seek_mib: f64,
    /// Guest requests the host merged into a queued one, %.
    pub merged_pct: f64,
    /// The requests the host scheduler held beside the one it dispatched,
    /// on average.
    pub mean_host_queue: f64,
    /// MiB the guests' page caches read from the disks for the job's
    /// input, the maps' spills and merges, map outputs and the reducers'
    /// files ([`node::DiskTrace::cache_reads`]).
    pub cache_read_mib: [f64; 4],
}

impl PhaseDisk {
    fn new(phase: &'static str, nanos: u64, nodes: usize, t: node::DiskTrace) -> PhaseDisk {
        let share = |part: u64, whole: u64| {
            if whole == 0 {
                0.0
            } else {
                100.0 * part as f64 / whole as f64
            }
        };
        let per = |sum: f64, n: u64| if n == 0 { 0.0 } else { sum / n as f64 };
        PhaseDisk {
            phase,
            seconds: ns_to_s(nanos),
            busy_pct: share(t.busy_ns, nanos * nodes as u64),
            requests: t.requests,
            mean_kib: per(t.bytes as f64 / 1024.0, t.requests),
            read_pct: share(t.reads, t.requests),
            seek_pct: share(t.seeks, t.requests),
            mean_seek_mib: per(t.seek_sectors as f64 * 512.0 / (1 << 20) as f64, t.seeks),
            merged_pct: share(t.merged, t.guest_requests),
            mean_host_queue: per(t.queued_at_dispatch as f64, t.requests),
            cache_read_mib: t.cache_reads.map(|b| b as f64 / (1 << 20) as f64),
        }
    }
}

/// The backlog as the job entered a phase.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PhaseBacklog {
    /// The phase entered (`shuffle`, `reduce`).
    pub phase: &'static str,
    /// Bytes dirty in the guests' page caches, not yet under write-back.
    pub dirty_bytes: u64,
    /// Bytes under write-back.
    pub writeback_bytes: u64,
    /// Requests queued or in flight in the guest schedulers.
    pub guest_queued: usize,
    /// Requests queued or in flight in the host schedulers.
    pub host_queued: usize,
}

impl PhaseBacklog {
    /// The node model's backlog `b` as the job entered `phase`.
    pub fn new(phase: &'static str, b: node::Backlog) -> PhaseBacklog {
        PhaseBacklog {
            phase,
            dirty_bytes: b.dirty_bytes,
            writeback_bytes: b.writeback_bytes,
            guest_queued: b.guest_queued,
            host_queued: b.host_queued,
        }
    }
}

/// Parse a [`MapReduceRunConfig`] from JSON; errors name `origin`.
pub fn parse(json: &str, origin: &str) -> Result<MapReduceRunConfig> {
    parse_as(json, origin, "mapreduce run")
}

/// A run kind's config from JSON; errors name `origin`, the kind (`what`)
/// and the key. The JSON is built from the user's TOML, so its own line and
/// column would point nowhere the user can look: the key's path does.
pub(crate) fn parse_as<T: serde::de::DeserializeOwned>(json: &str, origin: &str, what: &str) -> Result<T> {
    let mut de = serde_json::Deserializer::from_str(json);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let mut key = e.path().to_string();
        let inner = e.into_inner();
        // An unknown field's message names it already: the path's last
        // segment is that field, so only its parent is worth adding.
        if inner.to_string().starts_with("unknown field") {
            key = key.rsplit_once('.').map_or(".", |(parent, _)| parent).to_string();
        }
        let message = if key == "." {
            format!("{what}: {inner}")
        } else {
            format!("{what}: key `{key}`: {inner}")
        };
        SimError::Parse {
            origin: origin.to_string(),
            message,
        }
    })
}

/// The job `cfg` describes: its benchmark's preset with the config's
/// block and input, and the bytes of one map wave per VM.
pub(crate) fn job_spec(cfg: &MapReduceRunConfig) -> Result<(JobSpec, u64)> {
    let mut preset = JobSpec::preset(cfg.benchmark);
    if let Some(block) = cfg.block {
        if block.bytes() == 0 {
            return Err(SimError::Other("mapreduce run: block = 0: must be > 0".into()));
        }
        preset.block = block.bytes();
    }
    if !cfg.heartbeats {
        preset.heartbeat = None;
    }
    let wave = preset.block * preset.map_slots as u64;
    let input_per_vm = match (cfg.input_per_vm, cfg.input_waves) {
        (Some(_), Some(_)) => {
            return Err(SimError::Other(
                "mapreduce run: give input_per_vm or input_waves, not both".into(),
            ))
        }
        (Some(size), None) => size.bytes(),
        (None, Some(w)) if w.is_finite() && w > 0.0 => (w * wave as f64) as u64,
        (None, Some(w)) => {
            return Err(SimError::Other(format!(
                "mapreduce run: input_waves = {w}: must be a number > 0"
            )))
        }
        (None, None) => preset.input_per_vm,
    };
    Ok((JobSpec { input_per_vm, ..preset }, wave))
}

/// Run `spec` on `cluster` starting under (`host`, `guest`), switching as
/// `switches` say; the run and the backlog as it entered each phase.
pub(crate) fn simulate(
    spec: &JobSpec,
    cluster: &ClusterSpec,
    (host, guest): (&str, &str),
    switches: &[node::PhaseSwitch],
) -> Result<(ClusterRun, Vec<node::Backlog>, Vec<node::DiskTrace>)> {
    node::simulate_traced(
        spec,
        cluster,
        &NodeSpec::new(host, guest, cluster.vms_per_node).with_page_cache(node::hadoop_page_cache()),
        &toml::Table::new(),
        switches,
    )
}

/// The map and the shuffle+reduce of a run, s.
pub(crate) fn two_phases_s(run: &ClusterRun) -> Vec<f64> {
    run.phases
        .planned(u64::MAX)
        .iter()
        .map(|s| ns_to_s(s.duration()))
        .collect()
}

/// The pair a plan starts with and its switches: a step at the map sets
/// the first pair; a step at `shuffle-reduce` is taken as the shuffle
/// begins (the job enters them at the same instant).
fn plan_switches(cfg: &MapReduceRunConfig) -> Result<((String, String), Vec<node::PhaseSwitch>)> {
    let plan = PhasePlan::check(&cfg.phase)?;
    let mut start = (cfg.host.scheduler.clone(), cfg.guest_scheduler.clone());
    let mut switches = Vec::new();
    for (i, step) in plan.steps.into_iter().enumerate() {
        let at = match step.when {
            When::Phase(PhaseKind::Map) => {
                start = (step.host.unwrap_or(start.0), step.guest.unwrap_or(start.1));
                continue;
            }
            When::Phase(PhaseKind::ShuffleReduce) => PhaseKind::Shuffle,
            When::Phase(kind) => kind,
            When::Time(_) | When::Workload(_) => {
                return Err(SimError::invalid(
                    &format!("phase {i}"),
                    "at_s",
                    "(a time)",
                    "a MapReduce run switches at a phase: map, shuffle, reduce, shuffle-reduce",
                ))
            }
        };
        switches.push(node::PhaseSwitch {
            at,
            host: step.host,
            guest: step.guest,
            policy: step.policy,
        });
    }
    Ok((start, switches))
}

/// Run the job of `cfg` on its cluster.
pub fn run(cfg: &MapReduceRunConfig) -> Result<MapReduceRunResult> {
    if cfg.tune.is_some() {
        return Err(SimError::invalid(
            "mapreduce run",
            "tune",
            "[tune]",
            "a search's settings: run it as kind = \"mapreduce-tune\"",
        ));
    }
    let (spec, wave) = job_spec(cfg)?;
    let cluster = &cfg.cluster;
    let ((host, guest), switches) = plan_switches(cfg)?;
    let (r, backlogs, traces) = simulate(&spec, cluster, (&host, &guest), &switches)?;
    let mut edges: Vec<(&'static str, u64)> = vec![("map", r.progress.start)];
    edges.extend(r.boundaries.iter().map(|(kind, at)| (kind.name(), *at)));
    let disk = edges
        .iter()
        .zip(edges.iter().skip(1).map(|e| e.1).chain([r.progress.end]))
        .zip(traces)
        .map(|(((phase, from), to), t)| PhaseDisk::new(phase, to - from, cluster.nodes, t))
        .collect();
    let backlogs = r
        .boundaries
        .iter()
        .map(|(kind, _)| kind.name())
        .zip(backlogs)
        .map(|(phase, b)| PhaseBacklog::new(phase, b))
        .collect();
    Ok(MapReduceRunResult {
        benchmark: cfg.benchmark.name().into(),
        host,
        guest,
        nodes: cluster.nodes,
        vms_per_node: cluster.vms_per_node,
        input_per_vm: spec.input_per_vm,
        wave_bytes: wave,
        maps: spec.maps_per_vm() * cluster.vms() as u64,
        reducers: spec.reduces_per_vm * cluster.vms(),
        job_s: ns_to_s(r.phases.job()),
        phases_s: r.phases.spans.iter().map(|s| ns_to_s(s.duration())).collect(),
        non_concurrent_shuffle_pct: r.phases.non_concurrent_shuffle_pct(),
        waves: waves(
            r.progress.maps_done.len() as u64,
            cluster.vms() as u64,
            spec.map_slots as u64,
        ),
        two_phases_s: two_phases_s(&r),
        backlogs,
        disk,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run on a 2-node cluster of one VM each with 16 MiB blocks (two
    /// maps per VM per wave): a sixteenth of `--quick`'s data per node, so
    /// that a debug build runs it in seconds.
    /// Without Hadoop's heartbeats: at this size their 5 s waits, not the
    /// data, would decide the job's length.
    fn tiny(benchmark: &str, pair: (&str, &str), input: &str) -> MapReduceRunResult {
        let json = format!(
            r#"{{"benchmark": "{benchmark}", {input}, "block": "16MiB", "cluster": {{"nodes": 2, "vms_per_node": 1}}, "heartbeats": false,
                "host": {{"scheduler": "{}"}}, "guest_scheduler": "{}"}}"#,
            pair.0, pair.1
        );
        run(&parse(&json, "tiny").unwrap()).unwrap()
    }

    #[test]
    fn fig2_sort_takes_longer_than_wordcount() {
        let job = |b: &str, pair| tiny(b, pair, r#""input_per_vm": "32MiB""#).job_s;
        let cfq = ("cfq", "cfq");
        let (wordcount, sort) = (job("wordcount", cfq), job("sort", cfq));
        // Sort moves its whole input through every stage. (Wordcount
        // without its combiner spills 1.7 times its input, but at 32 MiB
        // per VM its spills stay in the guests' page caches until they are
        // merged and deleted, and it spends less CPU per MiB than with the
        // combiner: here it is not slower. The stages' bytes are in
        // `cluster`'s tests.)
        assert!(sort > wordcount, "{sort} {wordcount}");
    }

    #[test]
    fn table2_the_shuffle_after_the_last_map_shrinks_with_more_waves() {
        let one = tiny("sort", ("cfq", "cfq"), r#""input_waves": 1"#);
        let three = tiny("sort", ("cfq", "cfq"), r#""input_waves": 3"#);
        assert_eq!((one.maps, three.maps), (4, 12));
        assert_eq!((one.waves, three.waves), (1.0, 3.0));
        assert!(three.job_s > one.job_s);
        // Table II: 29.5 % at one wave, 5.3 % at three.
        assert!(
            one.non_concurrent_shuffle_pct > three.non_concurrent_shuffle_pct,
            "{one:?} {three:?}"
        );
        assert!(three.non_concurrent_shuffle_pct > 0.0, "{three:?}");
    }

    #[test]
    fn a_small_sort_runs_and_bad_runs_name_what_is_wrong() {
        let json = r#"{"benchmark": "sort", "input_per_vm": "64MiB", "cluster": {"nodes": 1, "vms_per_node": 2},
            "host": {"scheduler": "deadline"}, "guest_scheduler": "noop", "seed": 1}"#;
        let r = run(&parse(json, "t").unwrap()).unwrap();
        assert_eq!((r.maps, r.nodes, r.vms_per_node), (2, 1, 2));
        assert!(r.job_s > 0.0 && r.phases_s.len() == 3, "{r:?}");
        assert!((r.waves - 0.5).abs() < 1e-9, "{r:?}");
        let e = parse(
            r#"{"benchmark": "grep", "host": {"scheduler": "cfq"}, "guest_scheduler": "cfq"}"#,
            "t",
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("t: mapreduce run: key `benchmark`: unknown variant `grep`"),
            "{e}"
        );
        // A value of the wrong type names its key, however deep it sits.
        let e = parse(
            r#"{"benchmark": "sort", "heartbeats": "yes", "host": {"scheduler": "cfq"}, "guest_scheduler": "cfq"}"#,
            "t",
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("t: mapreduce run: key `heartbeats`: invalid type"),
            "{e}"
        );
        let e = parse(
            r#"{"benchmark": "sort", "cluster": {"nodes": "four"}, "host": {"scheduler": "cfq"}, "guest_scheduler": "cfq"}"#,
            "t",
        )
        .unwrap_err();
        assert!(e.to_string().contains("key `cluster.nodes`"), "{e}");
        // An unknown field names itself; the path says where it sits.
        let e = parse(r#"{"benchmark": "sort", "speed": 2}"#, "t").unwrap_err();
        assert!(
            e.to_string().starts_with("t: mapreduce run: unknown field `speed`"),
            "{e}"
        );
        let e = parse(r#"{"benchmark": "sort", "cluster": {"nodez": 1}}"#, "t").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("t: mapreduce run: key `cluster`: unknown field `nodez`"),
            "{e}"
        );
        let both = r#"{"benchmark": "sort", "input_per_vm": 1, "input_waves": 1,
            "host": {"scheduler": "cfq"}, "guest_scheduler": "cfq"}"#;
        let e = run(&parse(both, "t").unwrap()).unwrap_err();
        assert!(e.to_string().contains("not both"), "{e}");
    }
}
