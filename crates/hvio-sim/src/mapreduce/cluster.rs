//! Running a [`Job`] over several physical nodes.
//!
//! Each node is a [`NodeIo`]: something that takes the file-level reads and
//! writes of its VMs (guest page cache, file layout, guest and host
//! schedulers, disk), says when its next event is, and steps to a time
//! reporting what completed. The runner steps every node, the network and
//! the VCPUs in time order — always to the earliest next event of any of
//! them — and hands completions to the job in time order (ties by
//! operation), so a run is deterministic. The network is each node's NIC,
//! one link each way of `network_bytes_per_s`, shared fairly by the
//! transfers on it; a VM's one VCPU is shared fairly by its tasks.
//!
//! At each phase boundary the job reports, `on_phase` is called with the
//! nodes, so a plan can switch their schedulers there.

use super::job::{Action, FileKey, FileOp, Job, JobStats, OpId, VmId};
use super::phases::{PhaseKind, Phases, ProgressLog};
use super::share::Shared;
use super::spec::ClusterSpec;
use crate::error::{Result, SimError};
use hvio_core::time::{Nanos, NS_PER_S};
use serde::Serialize;
use std::collections::BTreeSet;

/// One physical node as the runner drives it.
pub trait NodeIo {
    /// Start `op` of one of this node's VMs at `now`.
    fn submit(&mut self, now: Nanos, op: FileOp) -> Result<()>;
    /// `file` of VM `vm` on this node is deleted at `now`.
    fn delete(&mut self, now: Nanos, vm: VmId, file: FileKey);
    /// The time of this node's next event, if it has one.
    fn next_event(&self) -> Option<Nanos>;
    /// Step to `until`; the operations completed by then, with their times.
    fn advance(&mut self, until: Nanos) -> Vec<(OpId, Nanos)>;
}

/// What a run of a job produced.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ClusterRun {
    /// When each map and shuffle finished.
    pub progress: ProgressLog,
    /// The job's phases (§IV.A).
    pub phases: Phases,
    /// When the job entered each phase after the first.
    pub boundaries: Vec<(PhaseKind, Nanos)>,
    /// The bytes the job had moved as it entered each phase of
    /// `boundaries`: the work a plan's next pair finds done.
    pub entered_with: Vec<JobStats>,
    /// Bytes the job moved, by purpose.
    pub stats: JobStats,
}

/// Run `job` from time 0 on `nodes` (one per physical node of `cluster`).
pub fn run<N: NodeIo>(
    job: &mut Job,
    nodes: &mut [N],
    cluster: &ClusterSpec,
    mut on_phase: impl FnMut(PhaseKind, Nanos, &mut [N]) -> Result<()>,
) -> Result<ClusterRun> {
    if nodes.len() != cluster.nodes {
        return Err(SimError::invalid(
            "mapreduce",
            "nodes",
            cluster.nodes,
            format!("the runner was given {} node models", nodes.len()),
        ));
    }
    let link = cluster.network_bytes_per_s as f64 / NS_PER_S as f64;
    let mut fabric = Fabric {
        // Resource 2n is node n's uplink, 2n + 1 its downlink.
        network: Shared::new(vec![link; 2 * cluster.nodes]),
        vcpus: Shared::new(vec![1.0; cluster.vms()]),
        vms_per_node: cluster.vms_per_node,
        timers: BTreeSet::new(),
        boundaries: Vec::new(),
        entered_with: Vec::new(),
    };
    let mut now = 0;
    let first = job.start(now);
    fabric.dispatch(first, now, nodes, job, &mut on_phase)?;
    while !job.done() {
        let next = nodes
            .iter()
            .filter_map(|n| n.next_event())
            .chain(fabric.network.next_done())
            .chain(fabric.vcpus.next_done())
            .chain(fabric.timers.first().map(|&(at, _)| at))
            .min();
        let Some(t) = next else {
            return Err(SimError::Other(format!(
                "mapreduce: the job stalled at {now} ns with {} operations pending and no event to come",
                job.pending()
            )));
        };
        now = t.max(now);
        let mut done: Vec<(Nanos, OpId)> = Vec::new();
        done.extend(fabric.network.advance(now).into_iter().map(|id| (now, id)));
        done.extend(fabric.vcpus.advance(now).into_iter().map(|id| (now, id)));
        while let Some(&(at, id)) = fabric.timers.first().filter(|&&(at, _)| at <= now) {
            fabric.timers.pop_first();
            done.push((at, id));
        }
        for node in nodes.iter_mut() {
            done.extend(node.advance(now).into_iter().map(|(id, at)| (at, id)));
        }
        done.sort_unstable();
        for (at, id) in done {
            let actions = job.complete(id, at);
            fabric.dispatch(actions, now, nodes, job, &mut on_phase)?;
        }
    }
    let progress = job.progress().clone();
    let phases = Phases::from_log(&progress)?;
    Ok(ClusterRun {
        progress,
        phases,
        boundaries: fabric.boundaries,
        entered_with: fabric.entered_with,
        stats: job.stats().clone(),
    })
}

/// What the runner shares between the nodes: the network and the VCPUs.
struct Fabric {
    network: Shared,
    vcpus: Shared,
    vms_per_node: usize,
    /// The job's timers ([`Action::Wake`]), by time.
    timers: BTreeSet<(Nanos, OpId)>,
    boundaries: Vec<(PhaseKind, Nanos)>,
    entered_with: Vec<JobStats>,
}

impl Fabric {
    fn dispatch<N: NodeIo>(
        &mut self,
        actions: Vec<Action>,
        now: Nanos,
        nodes: &mut [N],
        job: &Job,
        on_phase: &mut impl FnMut(PhaseKind, Nanos, &mut [N]) -> Result<()>,
    ) -> Result<()> {
        for action in actions {
            match action {
                Action::Io(op) => nodes[op.vm.node].submit(now, op)?,
                Action::Delete { vm, file } => nodes[vm.node].delete(now, vm, file),
                Action::Cpu { id, vm, work } => self.vcpus.add(id, vec![vm.node * self.vms_per_node + vm.vm], work),
                Action::Send { id, from, to, bytes } => self.network.add(id, vec![2 * from, 2 * to + 1], bytes),
                Action::Wake { id, at } => {
                    self.timers.insert((at.max(now), id));
                }
                Action::Entered(kind) => {
                    self.boundaries.push((kind, now));
                    self.entered_with.push(job.stats().clone());
                    on_phase(kind, now, nodes)?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::job::{FileKey, VmId};
    use super::super::spec::{Benchmark, JobSpec};
    use super::*;
    use hvio_core::time::ms;
    use std::collections::{BTreeMap, VecDeque};

    /// A test node: one disk serving its VMs' operations first come first
    /// served at `bytes_per_ns`, with `seek` added whenever an operation is
    /// not where the previous one ended. Counts bytes by file kind.
    struct FifoDisk {
        bytes_per_ns: f64,
        seek: Nanos,
        queue: VecDeque<FileOp>,
        busy: Option<(FileOp, Nanos)>,
        head: Option<(VmId, FileKey, u64)>,
        now: Nanos,
        bytes: BTreeMap<&'static str, u64>,
        switches: Vec<(PhaseKind, Nanos)>,
        /// Files deleted, and any operation on one after its deletion.
        deleted: std::collections::BTreeSet<(VmId, FileKey)>,
        after_delete: Vec<FileOp>,
        /// Every operation: submitted and completed at.
        log: Vec<(FileOp, Nanos, Nanos)>,
        submitted: BTreeMap<OpId, Nanos>,
    }

    impl FifoDisk {
        fn new() -> FifoDisk {
            FifoDisk {
                bytes_per_ns: 0.1,
                seek: ms(5),
                queue: VecDeque::new(),
                busy: None,
                head: None,
                now: 0,
                bytes: BTreeMap::new(),
                switches: Vec::new(),
                deleted: std::collections::BTreeSet::new(),
                after_delete: Vec::new(),
                log: Vec::new(),
                submitted: BTreeMap::new(),
            }
        }

        fn start_next(&mut self) {
            if self.busy.is_some() {
                return;
            }
            let Some(op) = self.queue.pop_front() else { return };
            let contiguous = self.head == Some((op.vm, op.file, op.offset));
            let service = (op.len as f64 / self.bytes_per_ns).ceil() as Nanos + if contiguous { 0 } else { self.seek };
            self.head = Some((op.vm, op.file, op.offset + op.len));
            self.busy = Some((op, self.now + service));
        }
    }

    fn kind(file: FileKey, write: bool) -> &'static str {
        match (file, write) {
            (FileKey::Input(_), _) => "input",
            (FileKey::Spill { .. }, true) => "spill-write",
            (FileKey::Merged { reduce: false, .. } | FileKey::MapOutput(_), true) => "map-merge-write",
            (FileKey::Spill { .. } | FileKey::Merged { reduce: false, .. } | FileKey::MapOutput(_), false) => {
                "map-read"
            }
            (FileKey::Segment { .. } | FileKey::Merged { reduce: true, .. }, true) => "reduce-write",
            (FileKey::Segment { .. } | FileKey::Merged { reduce: true, .. }, false) => "reduce-read",
            (FileKey::Output { .. }, _) => "output",
            (FileKey::Plain(_), _) => "plain",
        }
    }

    impl NodeIo for FifoDisk {
        fn submit(&mut self, now: Nanos, op: FileOp) -> Result<()> {
            self.now = self.now.max(now);
            *self.bytes.entry(kind(op.file, op.write)).or_default() += op.len;
            if self.deleted.contains(&(op.vm, op.file)) {
                self.after_delete.push(op);
            }
            self.submitted.insert(op.id, now);
            self.queue.push_back(op);
            self.start_next();
            Ok(())
        }

        fn delete(&mut self, _now: Nanos, vm: VmId, file: FileKey) {
            assert!(self.deleted.insert((vm, file)), "{file:?} of {vm:?} deleted twice");
        }

        fn next_event(&self) -> Option<Nanos> {
            self.busy.map(|(_, at)| at)
        }

        fn advance(&mut self, until: Nanos) -> Vec<(OpId, Nanos)> {
            let mut done = Vec::new();
            while let Some((op, at)) = self.busy {
                if at > until {
                    break;
                }
                self.now = at;
                self.busy = None;
                let submitted = self.submitted.remove(&op.id).unwrap_or(0);
                self.log.push((op, submitted, at));
                done.push((op.id, at));
                self.start_next();
            }
            self.now = self.now.max(until);
            done
        }
    }

    const MIB: u64 = 1 << 20;

    fn small(benchmark: Benchmark) -> (JobSpec, ClusterSpec) {
        let spec = JobSpec {
            input_per_vm: 128 * MIB,
            ..JobSpec::preset(benchmark)
        };
        let cluster = ClusterSpec {
            nodes: 2,
            vms_per_node: 2,
            ..ClusterSpec::default()
        };
        (spec, cluster)
    }

    fn run_on_disks(spec: &JobSpec, cluster: &ClusterSpec) -> (ClusterRun, Vec<FifoDisk>) {
        let mut job = Job::new(spec, cluster).unwrap();
        let mut nodes: Vec<FifoDisk> = (0..cluster.nodes).map(|_| FifoDisk::new()).collect();
        let run = run(&mut job, &mut nodes, cluster, |kind, at, nodes| {
            for n in nodes.iter_mut() {
                n.switches.push((kind, at));
            }
            Ok(())
        })
        .unwrap();
        assert!(job.done());
        assert_eq!(job.pending(), 0, "every operation completed");
        (run, nodes)
    }

    fn total(nodes: &[FifoDisk], what: &str) -> u64 {
        nodes.iter().map(|n| n.bytes.get(what).copied().unwrap_or(0)).sum()
    }

    #[test]
    fn sort_moves_every_byte_where_hadoop_would() {
        let (spec, cluster) = small(Benchmark::Sort);
        let (run, nodes) = run_on_disks(&spec, &cluster);
        let input = spec.input_per_vm * cluster.vms() as u64;
        let s = &run.stats;
        // Every block read once; sort's map output is its input, spilled once.
        assert_eq!(s.input_read, input);
        assert_eq!(total(&nodes, "input"), input);
        assert_eq!(s.spilled, input);
        // 64 MiB blocks against a ~25 MiB spill threshold: several spills
        // per map, merged once (fewer than io.sort.factor of them).
        assert_eq!(s.spills, 8 * 3);
        assert_eq!(s.map_merge_read, s.spilled);
        assert_eq!(s.map_merge_written, s.spilled);
        assert_eq!(total(&nodes, "map-merge-write"), s.spilled);
        // Every partition fetched once: the reads on the serving disks sum
        // to the map output; half the reducers are on the other node.
        assert_eq!(s.shuffle_read, s.spilled);
        assert!(s.shuffle_sent > 0 && s.shuffle_sent < s.shuffle_read);
        // The reduce reads all its input from disk and writes 2 replicas of
        // the output (sort: output = input), the second on the other node.
        assert_eq!(s.reduce_read, s.shuffle_read);
        assert_eq!(total(&nodes, "output"), 2 * s.reduce_read);
        assert_eq!(s.replica_sent, s.reduce_read);
        // Phases in order, each boundary reported once, to every node.
        let spans = run.phases.spans;
        assert!(spans[0].end > spans[0].start && spans[1].end >= spans[1].start && spans[2].end > spans[2].start);
        assert_eq!(run.progress.maps_done.len(), 8);
        assert_eq!(run.progress.shuffles_done.len(), 8);
        assert_eq!(
            run.boundaries,
            vec![
                (PhaseKind::Shuffle, spans[1].start),
                (PhaseKind::Reduce, spans[2].start)
            ]
        );
        assert_eq!(nodes[1].switches, run.boundaries);
    }

    #[test]
    fn merged_spills_and_segments_are_deleted_and_never_touched_again() {
        // Wordcount without its combiner: spills merged in two passes.
        let (spec, cluster) = small(Benchmark::WordcountNoCombiner);
        let (run, nodes) = run_on_disks(&spec, &cluster);
        let s = &run.stats;
        assert!(nodes.iter().all(|n| n.after_delete.is_empty()));
        let deleted: Vec<FileKey> = nodes.iter().flat_map(|n| n.deleted.iter().map(|(_, f)| *f)).collect();
        let count = |pred: fn(&FileKey) -> bool| deleted.iter().filter(|f| pred(f)).count() as u64;
        // Every spill (each merged), every segment and intermediate merge;
        // no input, map output or job output.
        assert_eq!(count(|f| matches!(f, FileKey::Spill { .. })), s.spills);
        assert!(count(|f| matches!(f, FileKey::Merged { reduce: false, .. })) > 0);
        assert!(count(|f| matches!(f, FileKey::Segment { .. })) > 0);
        assert_eq!(
            count(|f| matches!(f, FileKey::Input(_) | FileKey::MapOutput(_) | FileKey::Output { .. })),
            0
        );
        // Bytes: every spill and intermediate merge of the maps (what their
        // merges wrote, less the map outputs, is what they read beyond the
        // spills) and every segment and intermediate merge of the reducers.
        assert_eq!(
            s.deleted,
            s.spilled + (s.map_merge_read - s.spilled) + s.segments_written + s.reduce_merge_written
        );
    }

    #[test]
    fn wordcount_without_combiner_spills_and_shuffles_more_than_with_it() {
        let (nc, cluster) = small(Benchmark::WordcountNoCombiner);
        let (c, _) = small(Benchmark::Wordcount);
        let (without, _) = run_on_disks(&nc, &cluster);
        let (with, _) = run_on_disks(&c, &cluster);
        let input = nc.input_per_vm * cluster.vms() as u64;
        // 1.7 × the input collected; 12-byte records spill every ~3 MiB,
        // so more spills than io.sort.factor: an intermediate merge pass.
        // (Each 1 MiB chunk's output is rounded down to a whole byte.)
        assert!(without.stats.spilled.abs_diff(input * 17 / 10) <= input / MIB);
        assert!(
            without.stats.map_merge_read > without.stats.spilled,
            "more than one merge pass"
        );
        assert!(with.stats.spilled * 10 < without.stats.spilled);
        assert!(with.stats.shuffle_read * 10 < without.stats.shuffle_read);
    }

    #[test]
    fn big_map_outputs_go_to_the_reducer_s_disk() {
        // 16 maps, one spill each; one reducer per VM: 16 MiB partitions,
        // over a quarter of a 40 MiB heap's 28 MiB shuffle buffer, so each
        // is written to disk as it arrives; 16 segments are more than
        // io.sort.factor, so the reducer merges before it reduces.
        let (spec, cluster) = small(Benchmark::Sort);
        let spec = JobSpec {
            input_per_vm: 256 * MIB,
            reduces_per_vm: 1,
            io_sort: 400 * MIB,
            task_heap: 40 * MIB,
            ..spec
        };
        let (run, nodes) = run_on_disks(&spec, &cluster);
        let s = &run.stats;
        assert_eq!(s.spills, 16);
        assert_eq!(s.segments_written, s.shuffle_read);
        assert!(s.reduce_merge_written > 0);
        assert_eq!(s.reduce_merge_written, s.reduce_merge_read);
        assert_eq!(
            total(&nodes, "reduce-write"),
            s.segments_written + s.reduce_merge_written
        );
    }

    #[test]
    fn a_slower_network_makes_a_longer_job_and_one_node_sends_nothing() {
        let (spec, cluster) = small(Benchmark::Sort);
        let (fast, _) = run_on_disks(&spec, &cluster);
        let slow_cluster = ClusterSpec {
            network_bytes_per_s: 5_000_000,
            ..cluster.clone()
        };
        let (slow, _) = run_on_disks(&spec, &slow_cluster);
        assert!(slow.phases.job() > fast.phases.job());
        let one = ClusterSpec {
            nodes: 1,
            vms_per_node: 4,
            ..cluster
        };
        let (alone, _) = run_on_disks(&spec, &one);
        assert_eq!(alone.stats.shuffle_sent + alone.stats.replica_sent, 0);
    }

    #[test]
    fn reducers_started_late_leave_more_shuffle_after_the_maps() {
        // Hadoop 0.19 starts reducers with the job, so they fetch while maps
        // run; held back until every map is done, all the shuffle is Ph2.
        let (spec, cluster) = small(Benchmark::Sort);
        let (early, _) = run_on_disks(&spec, &cluster);
        let late_spec = JobSpec {
            reduce_slowstart: 1.0,
            ..spec
        };
        let (late, _) = run_on_disks(&late_spec, &cluster);
        assert!(
            late.phases.non_concurrent_shuffle_pct() > early.phases.non_concurrent_shuffle_pct(),
            "{} vs {}",
            late.phases.non_concurrent_shuffle_pct(),
            early.phases.non_concurrent_shuffle_pct()
        );
        assert!(late.phases.spans[1].duration() > early.phases.spans[1].duration());
    }

    /// An I/O action as (VM index, file, offset).
    type IoAt = (usize, FileKey, u64);

    /// The actions' I/O and timers (id, at).
    fn split(actions: &[Action], vms_per_node: usize) -> (Vec<IoAt>, Vec<(OpId, Nanos)>) {
        let mut io = Vec::new();
        let mut wakes = Vec::new();
        for a in actions {
            match *a {
                Action::Io(op) => io.push((op.vm.node * vms_per_node + op.vm.vm, op.file, op.offset)),
                Action::Wake { id, at } => wakes.push((id, at)),
                _ => {}
            }
        }
        (io, wakes)
    }

    #[test]
    fn a_tasktracker_is_handed_one_task_per_heartbeat_a_map_first() {
        // Hadoop 0.19: 4 TaskTrackers heartbeat every 5 s, spread over the
        // interval; each heartbeat hands out one task.
        let (spec, cluster) = small(Benchmark::Sort);
        let hb = spec.heartbeat.clone().expect("the presets model Hadoop's heartbeats");
        let interval = hb.interval(cluster.vms());
        assert_eq!(interval, ms(5000));
        let mut job = Job::new(&spec, &cluster).unwrap();
        let (io, first) = split(&job.start(0), cluster.vms_per_node);
        assert!(io.is_empty());
        let mut at: Vec<Nanos> = first.iter().map(|w| w.1).collect();
        at.sort_unstable();
        assert_eq!(at, vec![0, ms(1250), ms(2500), ms(3750)]);
        // At 0 only TaskTracker 0 heartbeats: one map, its first read.
        let beat0 = first.iter().find(|w| w.1 == 0).unwrap().0;
        let (io, wakes) = split(&job.complete(beat0, 0), cluster.vms_per_node);
        assert_eq!(io, vec![(0, FileKey::Input(0), 0)]);
        assert_eq!(wakes.iter().map(|w| w.1).collect::<Vec<_>>(), vec![ms(5000)]);
        // TaskTracker 1's first heartbeat: one map of its own.
        let beat1 = first.iter().find(|w| w.1 == ms(1250)).unwrap().0;
        let (io, _) = split(&job.complete(beat1, ms(1250)), cluster.vms_per_node);
        assert_eq!(io, vec![(1, FileKey::Input(2), 0)]);
        // TaskTracker 0's second: its second map (a map before a reduce).
        let beat0 = wakes[0].0;
        let (io, next) = split(&job.complete(beat0, ms(5000)), cluster.vms_per_node);
        assert_eq!(io, vec![(0, FileKey::Input(1), 0)]);
        // Its third, with both map slots busy: a reduce, which asks its
        // TaskTracker for finished maps (none yet) and fetches nothing.
        let beat0 = next.iter().find(|w| w.1 == ms(10_000)).unwrap().0;
        let (io, next) = split(&job.complete(beat0, ms(10_000)), cluster.vms_per_node);
        assert!(io.is_empty(), "{io:?}");
        // The reducer, idle, asks again 5 s later; the TaskTracker's event
        // fetch comes every interval; the next heartbeat an interval on.
        let mut at: Vec<Nanos> = next.iter().map(|w| w.1).collect();
        at.sort_unstable();
        assert_eq!(at, vec![ms(15_000); 3]);
    }

    /// When each map's output was complete and when each of its partitions
    /// was first fetched, from a run on test disks that log every operation.
    fn fetch_lags(spec: &JobSpec, cluster: &ClusterSpec) -> Vec<Nanos> {
        let (_, nodes) = run_on_disks(spec, cluster);
        let mut done: BTreeMap<FileKey, Nanos> = BTreeMap::new();
        let mut fetched: BTreeMap<(FileKey, u64), Nanos> = BTreeMap::new();
        for n in &nodes {
            for &(op, submitted, completed) in &n.log {
                match (op.file, op.write) {
                    (FileKey::MapOutput(_), true) => {
                        let t = done.entry(op.file).or_insert(0);
                        *t = (*t).max(completed);
                    }
                    (FileKey::MapOutput(_), false) => {
                        fetched.entry((op.file, op.offset)).or_insert(submitted);
                    }
                    _ => {}
                }
            }
        }
        fetched.iter().map(|((file, _), &at)| at - done[file]).collect()
    }

    #[test]
    fn a_finished_map_is_fetched_only_after_its_reducers_poll() {
        // Sort (three spills per map, merged into its output): without
        // heartbeats, the first fetch of a partition starts when the map
        // ends or when one of the reducer's copiers frees; with them, the
        // reducer's TaskTracker learns of the map at its next event fetch
        // (up to 5 s later) and the reducer at its next poll.
        let (spec, cluster) = small(Benchmark::Sort);
        let with = fetch_lags(&spec, &cluster);
        let without = fetch_lags(
            &JobSpec {
                heartbeat: None,
                ..spec.clone()
            },
            &cluster,
        );
        let mean = |v: &[Nanos]| v.iter().sum::<Nanos>() / v.len() as Nanos;
        assert_eq!(with.len(), without.len());
        assert!(
            mean(&with) > mean(&without) + ms(1000),
            "{} vs {}",
            mean(&with),
            mean(&without)
        );
        // No fetch waits longer than an interval for the TaskTracker, the
        // idle reducer's sleep and a poll, plus the disk's queue.
        assert!(
            with.iter().all(|&lag| lag <= ms(5000 + 5000 + 1000) + ms(2000)),
            "{with:?}"
        );
    }

    #[test]
    fn with_heartbeats_the_shuffle_after_the_last_map_is_a_smaller_share_of_a_longer_job() {
        // Table II's direction: the JobTracker loop adds seconds after the
        // last map whatever the job's length.
        let (spec, cluster) = small(Benchmark::Sort);
        let share = |waves: u64| {
            let spec = JobSpec {
                input_per_vm: waves * 2 * spec.block,
                ..spec.clone()
            };
            run_on_disks(&spec, &cluster).0.phases.non_concurrent_shuffle_pct()
        };
        let (one, four) = (share(1), share(4));
        assert!(one > four, "{one} % at 1 wave, {four} % at 4");
    }

    #[test]
    fn the_same_job_twice_is_the_same_run() {
        let (spec, cluster) = small(Benchmark::WordcountNoCombiner);
        assert_eq!(run_on_disks(&spec, &cluster).0, run_on_disks(&spec, &cluster).0);
    }

    #[test]
    fn a_runner_with_the_wrong_number_of_nodes_is_refused() {
        let (spec, cluster) = small(Benchmark::Sort);
        let mut job = Job::new(&spec, &cluster).unwrap();
        let mut nodes = vec![FifoDisk::new()];
        let err = run(&mut job, &mut nodes, &cluster, |_, _, _| Ok(()))
            .unwrap_err()
            .to_string();
        assert!(err.contains("nodes") && err.contains("1 node models"), "{err}");
    }
}
