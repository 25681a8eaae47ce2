//! A MapReduce job as a task-level state machine (paper 002's workload).
//!
//! Every VM of the cluster is a TaskTracker and a DataNode. The job tells
//! its runner what to do as [`Action`]s — a file-level read or write for a
//! VM's guest, CPU work on a VM's VCPU, bytes to send from one physical node
//! to another — and is told when each finished ([`Job::complete`]); it never
//! sees a disk, a scheduler or a clock of its own, so the same job runs on
//! any runner that can do those three things ([`super::cluster`] is one).
//!
//! - **Map** (one per HDFS block, on the VM that stores it, `map_slots` at a
//!   time): read the block in `io_chunk` pieces, spend CPU on each, collect
//!   the output into the sort buffer; at the spill threshold the buffer is
//!   spilled (sorted run, written in the background while the map goes on;
//!   the map blocks when the buffer is full); at the end the last spill, then
//!   the spills merged `io_sort_factor` at a time (reading each in turn,
//!   `io_chunk` at a time) into the map output, one partition per reducer.
//! - **Reduce** (one wave, `reduces_per_vm` per VM, started once
//!   `reduce_slowstart` of the maps are done): fetch every map's partition,
//!   `parallel_copies` at once — a read on the serving VM, a transfer when
//!   it is on another node, then kept in the shuffle buffer or, when over a
//!   quarter of it, written to disk; the buffer is written out as a segment
//!   when it reaches `shuffle_merge_percent`. With every map fetched (the
//!   shuffle done) the rest of the buffer goes to disk, the segments are
//!   merged down to `io_sort_factor`, and the last merge feeds the reduce:
//!   CPU per MiB, then the output written to HDFS — one replica on this VM,
//!   the next ones on the same VM slot of the following nodes, sent over the
//!   network, with `replica_window` chunks in flight.
//!
//! Files are deleted when Hadoop deletes them ([`Action::Delete`]): a map's
//! spills and intermediate merges once the merge pass reading them is done
//! (`MapTask.mergeParts` deletes the spills after the merge, `Merger` its
//! own intermediate files), a reducer's on-disk segments and intermediate
//! merges once the pass reading them is done (the last pass's inputs when
//! the reduce ends). Map outputs live until the job ends (the TaskTracker
//! removes them with the job's directory), so they are never deleted here.
//!
//! With a [`Heartbeat`] (Hadoop 0.19's, the presets' default) the
//! JobTracker is in the loop: a TaskTracker is handed a task only at a
//! heartbeat, one task per heartbeat, a map before a reduce; it heartbeats
//! every interval and at once when one of its tasks ends; the
//! TaskTracker learns of finished maps once per interval and its reducers
//! ask it once a second (every 5 s when they have nothing to do), so a
//! finished map's output is fetched seconds after the map ends. Without
//! one, tasks start the moment a slot is free and reducers fetch a map's
//! output the moment it ends.
//!
//! The job logs its progress ([`ProgressLog`]) and says when it enters the
//! shuffle and the reduce phase ([`Action::Entered`]), for plans that switch
//! schedulers at those boundaries.

use super::phases::{PhaseKind, ProgressLog};
use super::spec::{ClusterSpec, Heartbeat, JobSpec};
use crate::error::Result;
use hvio_core::time::Nanos;
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};

/// One operation the job asked for, until it is complete.
pub type OpId = u64;

/// A VM: its physical node and its place on the node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct VmId {
    /// The physical node.
    pub node: usize,
    /// The VM on it.
    pub vm: usize,
}

/// The files of a job, as the guest of the VM that holds them names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum FileKey {
    /// An HDFS block of the job's input, by map number.
    Input(u32),
    /// A map's `n`-th spill.
    Spill {
        /// The map task.
        map: u32,
        /// Which spill.
        n: u32,
    },
    /// A reducer's `n`-th on-disk shuffle segment.
    Segment {
        /// The reduce task.
        reduce: u32,
        /// Which segment.
        n: u32,
    },
    /// A map's (`reduce == false`) or a reducer's intermediate merge output.
    Merged {
        /// The task.
        task: u32,
        /// A reducer's (else a map's).
        reduce: bool,
        /// Which merge.
        n: u32,
    },
    /// A map's final output, partitioned by reducer.
    MapOutput(u32),
    /// A replica of a reducer's part of the job output.
    Output {
        /// The reduce task.
        reduce: u32,
        /// Which replica (0: on this node).
        replica: u32,
    },
    /// A file of a benchmark run on the same nodes outside a job (the
    /// switch-cost measurement's `dd` files).
    Plain(u32),
}

/// A read or a write of part of a file in a VM's guest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct FileOp {
    /// Its id, passed back at completion.
    pub id: OpId,
    /// The VM whose disk it is on.
    pub vm: VmId,
    /// The file.
    pub file: FileKey,
    /// The file's whole size, for the guest to lay it out at creation.
    pub file_size: u64,
    /// Byte offset in the file.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
    /// A write (else a read).
    pub write: bool,
    /// The guest thread doing it, unique in the job: map `m` is thread `m`
    /// (its HDFS reads, spills and merges), reducer `r` is `M + r` (its
    /// merges, reduce and output, and the DataNode writing its replicas),
    /// and the TaskTracker thread serving `r`'s fetches is `M + R + r`.
    pub thread: u32,
}

/// What the job asks its runner to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Action {
    /// Read or write part of a file on a VM's disk.
    Io(FileOp),
    /// `work` nanoseconds of CPU on the VM's VCPU.
    Cpu {
        /// Its id.
        id: OpId,
        /// The VM.
        vm: VmId,
        /// CPU time, ns.
        work: Nanos,
    },
    /// `bytes` over the network from physical node `from` to node `to`.
    Send {
        /// Its id.
        id: OpId,
        /// The sending node.
        from: usize,
        /// The receiving node.
        to: usize,
        /// Bytes sent.
        bytes: u64,
    },
    /// The job entered a phase (shuffle: the last map is done; reduce: the
    /// last reducer has fetched everything). No completion follows.
    Entered(PhaseKind),
    /// A file on a VM's disk is deleted: its dirty pages need never be
    /// written and its blocks are free. No completion follows.
    Delete {
        /// The VM whose disk holds it.
        vm: VmId,
        /// The file.
        file: FileKey,
    },
    /// Complete `id` at time `at` (a heartbeat or a poll of Hadoop's
    /// JobTracker loop is due); nothing to do but wait.
    Wake {
        /// Its id.
        id: OpId,
        /// When, ns.
        at: Nanos,
    },
}

/// Bytes the job moved, by purpose.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct JobStats {
    /// HDFS input read by maps.
    pub input_read: u64,
    /// Map output spilled to local disk.
    pub spilled: u64,
    /// Spills read back by the maps' merges.
    pub map_merge_read: u64,
    /// Merged map output written.
    pub map_merge_written: u64,
    /// Map output read to serve reducers.
    pub shuffle_read: u64,
    /// Map output sent over the network.
    pub shuffle_sent: u64,
    /// Shuffle segments reducers wrote to disk.
    pub segments_written: u64,
    /// Segments read back by the reducers' merges.
    pub reduce_merge_read: u64,
    /// Merged segments written.
    pub reduce_merge_written: u64,
    /// Bytes reducers read for their final merge.
    pub reduce_read: u64,
    /// Job output written (every replica).
    pub output_written: u64,
    /// Output sent to replicas on other nodes.
    pub replica_sent: u64,
    /// Spills made.
    pub spills: u64,
    /// Bytes of files deleted (merged spills, segments, intermediate merges).
    pub deleted: u64,
}

/// A file on disk that a merge reads.
#[derive(Clone, Copy, Debug)]
struct Seg {
    file: FileKey,
    size: u64,
    read: u64,
}

/// A merge pass: each input read `io_chunk` at a time in turn; the bytes
/// read go to `output` (a file) or, in a reducer's last pass, to the reduce.
#[derive(Clone, Debug)]
struct Merge {
    inputs: Vec<Seg>,
    turn: usize,
    output: Option<(FileKey, u64)>,
    written: u64,
}

impl Seg {
    fn whole((file, size): (FileKey, u64)) -> Seg {
        Seg { file, size, read: 0 }
    }
}

impl Merge {
    /// Where the next `len` merged bytes go in the output file.
    fn write(&mut self, len: u64) -> ((FileKey, u64), u64) {
        let output = self.output.expect("a merge pass that writes has an output file");
        let offset = self.written;
        self.written += len;
        (output, offset)
    }

    fn new(inputs: Vec<Seg>, output: Option<FileKey>) -> Merge {
        let size = inputs.iter().map(|s| s.size).sum();
        Merge {
            inputs,
            turn: 0,
            output: output.map(|f| (f, size)),
            written: 0,
        }
    }

    /// The next piece to read: the file, its size, offset and length.
    fn next_read(&mut self, chunk: u64) -> Option<(FileKey, u64, u64, u64)> {
        let n = self.inputs.len();
        for k in 0..n {
            let i = (self.turn + k) % n;
            let seg = &mut self.inputs[i];
            if seg.read < seg.size {
                let len = chunk.min(seg.size - seg.read);
                let piece = (seg.file, seg.size, seg.read, len);
                seg.read += len;
                self.turn = i + 1;
                return Some(piece);
            }
        }
        None
    }
}

/// The next merge pass over a task's segments: all of them when at most
/// `factor` are left — the last pass, writing `last_output` (a reducer's
/// last pass has none: it feeds the reduce) — else the `factor` smallest
/// (Hadoop merges the smallest first) into an intermediate file. Returns
/// the pass and whether it is the last.
fn next_pass(
    segs: &mut Vec<Seg>,
    factor: usize,
    merges: &mut u32,
    task: u32,
    last_output: Option<FileKey>,
) -> (Merge, bool) {
    let reduce = last_output.is_none();
    let (inputs, output, last) = if segs.len() <= factor {
        (std::mem::take(segs), last_output, true)
    } else {
        segs.sort_by_key(|s| (s.size, s.file));
        let rest = segs.split_off(factor);
        (
            std::mem::replace(segs, rest),
            Some(FileKey::Merged {
                task,
                reduce,
                n: *merges,
            }),
            false,
        )
    };
    *merges += 1;
    (Merge::new(inputs, output), last)
}

#[derive(Debug)]
struct MapTask {
    vm: VmId,
    input: u64,
    /// Input bytes read (or being read).
    read: u64,
    reading: bool,
    collected: u64,
    spilling: u64,
    spills: Vec<Seg>,
    merges: u32,
    merge: Option<Merge>,
    output: Option<Seg>,
    done: bool,
}

#[derive(Debug)]
struct ReduceTask {
    vm: VmId,
    started: bool,
    /// Index into the job's list of finished maps: the next to fetch.
    next_map: usize,
    /// How many of the job's finished maps this reducer knows of (with
    /// heartbeats: as its TaskTracker knew them at its last poll).
    known: usize,
    in_flight: usize,
    fetched: usize,
    mem: u64,
    mem_writing: u64,
    segs: Vec<Seg>,
    segments: u32,
    shuffle_done: bool,
    merges: u32,
    merge: Option<Merge>,
    final_pass: bool,
    reading: bool,
    output: u64,
    pending_out: u64,
    replicas_in_flight: usize,
    done: bool,
}

impl ReduceTask {
    fn new(vm: VmId) -> ReduceTask {
        ReduceTask {
            vm,
            started: false,
            next_map: 0,
            known: 0,
            in_flight: 0,
            fetched: 0,
            mem: 0,
            mem_writing: 0,
            segs: Vec::new(),
            segments: 0,
            shuffle_done: false,
            merges: 0,
            merge: None,
            final_pass: false,
            reading: false,
            output: 0,
            pending_out: 0,
            replicas_in_flight: 0,
            done: false,
        }
    }
}

/// What a completion continues.
#[derive(Clone, Copy, Debug)]
enum Next {
    MapRead {
        m: usize,
        len: u64,
    },
    MapCpu {
        m: usize,
        len: u64,
    },
    Spill {
        m: usize,
        seg: (FileKey, u64),
    },
    MapMergeRead {
        m: usize,
        len: u64,
    },
    MapMergeWrite {
        m: usize,
    },
    FetchRead {
        r: usize,
        m: usize,
        len: u64,
    },
    FetchSent {
        r: usize,
        len: u64,
    },
    FetchWrite {
        r: usize,
        seg: (FileKey, u64),
    },
    BufferWrite {
        r: usize,
        seg: (FileKey, u64),
    },
    ReduceMergeRead {
        r: usize,
        len: u64,
    },
    ReduceMergeWrite {
        r: usize,
    },
    ReduceRead {
        r: usize,
        len: u64,
    },
    ReduceCpu {
        r: usize,
        len: u64,
    },
    OutputLocal {
        r: usize,
    },
    ReplicaSent {
        r: usize,
        to: VmId,
        replica: u32,
        offset: u64,
        len: u64,
    },
    ReplicaWritten {
        r: usize,
    },
    /// TaskTracker `v`'s heartbeat number `seq` (stale if a heartbeat
    /// on a task's end moved it).
    Beat {
        v: usize,
        seq: u64,
    },
    /// TaskTracker `v` asks the JobTracker for map-completion events.
    EventFetch {
        v: usize,
    },
    /// Reducer `r` asks its TaskTracker for map-completion events.
    ReducePoll {
        r: usize,
    },
}

/// The JobTracker loop's state ([`Heartbeat`]).
struct Tracker {
    hb: Heartbeat,
    interval: Nanos,
    /// Per TaskTracker: the number of its heartbeat due next.
    beat_seq: Vec<u64>,
    /// Per TaskTracker: how many finished maps it knows of.
    known: Vec<usize>,
    /// Per TaskTracker: whether its event fetcher runs (from its first reduce).
    fetching: Vec<bool>,
    /// Per TaskTracker: reduces handed to it and reduces it finished.
    reduces_started: Vec<usize>,
    reduces_done: Vec<usize>,
}

/// A MapReduce job over a cluster; see the module doc.
pub struct Job {
    spec: JobSpec,
    cluster: ClusterSpec,
    maps: Vec<MapTask>,
    /// Per VM: its maps not yet started, in block order.
    queued: Vec<VecDeque<usize>>,
    running_maps: Vec<usize>,
    finished_maps: Vec<usize>,
    reduces: Vec<ReduceTask>,
    reduces_done: usize,
    shuffles_done: usize,
    waiting: BTreeMap<OpId, Next>,
    /// Timers of the JobTracker loop (not operations: not in `pending`).
    wakes: BTreeMap<OpId, Next>,
    tracker: Option<Tracker>,
    next_id: OpId,
    out: Vec<Action>,
    log: ProgressLog,
    stats: JobStats,
    started: bool,
    ended: bool,
}

impl Job {
    /// The job for `spec` on `cluster`, its input blocks placed.
    pub fn new(spec: &JobSpec, cluster: &ClusterSpec) -> Result<Job> {
        spec.check(cluster)?;
        let vms = cluster.vms();
        let mut maps = Vec::new();
        let mut queued = vec![VecDeque::new(); vms];
        for (v, queue) in queued.iter_mut().enumerate() {
            let vm = VmId {
                node: v / cluster.vms_per_node,
                vm: v % cluster.vms_per_node,
            };
            let mut left = spec.input_per_vm;
            while left > 0 {
                let input = left.min(spec.block);
                left -= input;
                queue.push_back(maps.len());
                maps.push(MapTask {
                    vm,
                    input,
                    read: 0,
                    reading: false,
                    collected: 0,
                    spilling: 0,
                    spills: Vec::new(),
                    merges: 0,
                    merge: None,
                    output: None,
                    done: false,
                });
            }
        }
        let reduces = (0..vms * spec.reduces_per_vm)
            .map(|r| {
                let v = r / spec.reduces_per_vm;
                ReduceTask::new(VmId {
                    node: v / cluster.vms_per_node,
                    vm: v % cluster.vms_per_node,
                })
            })
            .collect();
        Ok(Job {
            spec: spec.clone(),
            cluster: cluster.clone(),
            maps,
            queued,
            running_maps: vec![0; vms],
            finished_maps: Vec::new(),
            reduces,
            reduces_done: 0,
            shuffles_done: 0,
            waiting: BTreeMap::new(),
            wakes: BTreeMap::new(),
            tracker: spec.heartbeat.clone().map(|hb| Tracker {
                interval: hb.interval(vms),
                hb,
                beat_seq: vec![0; vms],
                known: vec![0; vms],
                fetching: vec![false; vms],
                reduces_started: vec![0; vms],
                reduces_done: vec![0; vms],
            }),
            next_id: 0,
            out: Vec::new(),
            log: ProgressLog::default(),
            stats: JobStats::default(),
            started: false,
            ended: false,
        })
    }

    /// Map tasks.
    pub fn maps(&self) -> usize {
        self.maps.len()
    }

    /// Reduce tasks.
    pub fn reduces(&self) -> usize {
        self.reduces.len()
    }

    /// Whether every task has finished.
    pub fn done(&self) -> bool {
        self.ended
    }

    /// Operations asked for and not yet complete.
    pub fn pending(&self) -> usize {
        self.waiting.len()
    }

    /// When each map and shuffle finished.
    pub fn progress(&self) -> &ProgressLog {
        &self.log
    }

    /// Bytes moved so far.
    pub fn stats(&self) -> &JobStats {
        &self.stats
    }

    /// Start the job at `now`: the first maps on every VM.
    pub fn start(&mut self, now: Nanos) -> Vec<Action> {
        if !self.started {
            self.started = true;
            self.log.start = now;
            if let Some(t) = &self.tracker {
                // Each TaskTracker's first heartbeat, spread over one interval.
                let (interval, vms) = (t.interval, self.queued.len() as Nanos);
                for v in 0..self.queued.len() {
                    self.schedule_beat(v, now + interval * v as Nanos / vms);
                }
            } else {
                for v in 0..self.queued.len() {
                    self.launch_maps(v);
                }
                self.launch_reduces();
            }
            self.check_end(now);
        }
        std::mem::take(&mut self.out)
    }

    /// Operation `id` finished at `now`; returns what to do next. An unknown
    /// or repeated id is ignored.
    pub fn complete(&mut self, id: OpId, now: Nanos) -> Vec<Action> {
        if let Some(next) = self.waiting.remove(&id).or_else(|| self.wakes.remove(&id)) {
            self.proceed(next, now);
        }
        std::mem::take(&mut self.out)
    }

    fn ask(&mut self, next: Next) -> OpId {
        let id = self.next_id;
        self.next_id += 1;
        self.waiting.insert(id, next);
        id
    }

    fn io(&mut self, vm: VmId, file: (FileKey, u64), offset: u64, len: u64, write: bool, next: Next) {
        let thread = self.thread(&next);
        let id = self.ask(next);
        self.out.push(Action::Io(FileOp {
            id,
            vm,
            file: file.0,
            file_size: file.1,
            offset,
            len,
            write,
            thread,
        }));
    }

    /// The thread an operation belongs to (see [`FileOp::thread`]).
    fn thread(&self, next: &Next) -> u32 {
        let (maps, reduces) = (self.maps.len() as u32, self.reduces.len() as u32);
        match *next {
            Next::MapRead { m, .. }
            | Next::MapCpu { m, .. }
            | Next::Spill { m, .. }
            | Next::MapMergeRead { m, .. }
            | Next::MapMergeWrite { m } => m as u32,
            Next::FetchRead { r, .. } => maps + reduces + r as u32,
            Next::FetchSent { r, .. }
            | Next::FetchWrite { r, .. }
            | Next::BufferWrite { r, .. }
            | Next::ReduceMergeRead { r, .. }
            | Next::ReduceMergeWrite { r }
            | Next::ReduceRead { r, .. }
            | Next::ReduceCpu { r, .. }
            | Next::OutputLocal { r }
            | Next::ReplicaSent { r, .. }
            | Next::ReplicaWritten { r } => maps + r as u32,
            // Timers, never I/O.
            Next::Beat { .. } | Next::EventFetch { .. } | Next::ReducePoll { .. } => 0,
        }
    }

    /// Delete the files of `segs` on `vm`'s disk.
    fn delete(&mut self, vm: VmId, segs: &[Seg]) {
        for seg in segs {
            self.stats.deleted += seg.size;
            self.out.push(Action::Delete { vm, file: seg.file });
        }
    }

    fn cpu(&mut self, vm: VmId, work: Nanos, next: Next) {
        let id = self.ask(next);
        self.out.push(Action::Cpu { id, vm, work });
    }

    /// Complete `next` at `at`.
    fn wake(&mut self, at: Nanos, next: Next) {
        let id = self.next_id;
        self.next_id += 1;
        self.wakes.insert(id, next);
        self.out.push(Action::Wake { id, at });
    }

    fn schedule_beat(&mut self, v: usize, due: Nanos) {
        let t = self.tracker.as_mut().expect("heartbeats are modelled");
        t.beat_seq[v] += 1;
        let seq = t.beat_seq[v];
        self.wake(due, Next::Beat { v, seq });
    }

    /// TaskTracker `v` heartbeats at `now`: the JobTracker hands it at most
    /// one task, a map before a reduce (`JobQueueTaskScheduler`), and the
    /// next heartbeat is due an interval later.
    fn beat(&mut self, v: usize, now: Nanos) {
        if self.ended {
            return;
        }
        let trackers = self.queued.len();
        let t = self.tracker.as_ref().expect("heartbeats are modelled");
        let (interval, reduces_started, reduces_done) = (t.interval, t.reduces_started[v], t.reduces_done[v]);
        let remaining_maps = self.maps.len() - self.finished_maps.len();
        let max_maps = self.spec.map_slots.min(remaining_maps.div_ceil(trackers));
        let remaining_reduces = self.reduces.len() - self.reduces_done;
        let max_reduces = self.spec.reduce_slots.min(remaining_reduces.div_ceil(trackers));
        let needed = (self.spec.reduce_slowstart * self.maps.len() as f64).ceil() as usize;
        if self.running_maps[v] < max_maps && !self.queued[v].is_empty() {
            let m = self.queued[v].pop_front().expect("checked above");
            self.running_maps[v] += 1;
            self.map_step(m, now);
        } else if self.finished_maps.len() >= needed
            && reduces_started < self.spec.reduces_per_vm
            && reduces_started - reduces_done < max_reduces
        {
            let r = v * self.spec.reduces_per_vm + reduces_started;
            let t = self.tracker.as_mut().expect("heartbeats are modelled");
            t.reduces_started[v] += 1;
            self.reduces[r].started = true;
            if !t.fetching[v] {
                // The TaskTracker's event fetcher starts with its first reduce.
                t.fetching[v] = true;
                self.proceed(Next::EventFetch { v }, now);
            }
            self.proceed(Next::ReducePoll { r }, now);
        }
        let t = self.tracker.as_ref().expect("heartbeats are modelled");
        if !self.queued[v].is_empty() || t.reduces_started[v] < self.spec.reduces_per_vm {
            self.schedule_beat(v, now + interval);
        }
    }

    fn send(&mut self, from: usize, to: usize, bytes: u64, next: Next) {
        let id = self.ask(next);
        self.out.push(Action::Send { id, from, to, bytes });
    }

    fn vm_index(&self, vm: VmId) -> usize {
        vm.node * self.cluster.vms_per_node + vm.vm
    }

    fn cpu_for(per_mib: Nanos, bytes: u64) -> Nanos {
        ((per_mib as u128 * bytes as u128) >> 20) as Nanos
    }

    fn proceed(&mut self, next: Next, now: Nanos) {
        match next {
            Next::MapRead { m, len } => {
                self.stats.input_read += len;
                let work = Self::cpu_for(self.spec.map_cpu_per_mib, len);
                self.cpu(self.maps[m].vm, work, Next::MapCpu { m, len });
            }
            Next::MapCpu { m, len } => {
                let task = &mut self.maps[m];
                task.reading = false;
                task.collected += (len as f64 * self.spec.map_output_ratio) as u64;
                self.map_step(m, now);
            }
            Next::Spill { m, seg } => {
                let task = &mut self.maps[m];
                task.spilling = 0;
                task.spills.push(Seg::whole(seg));
                self.map_step(m, now);
            }
            Next::MapMergeRead { m, len } => {
                self.stats.map_merge_read += len;
                let vm = self.maps[m].vm;
                let merge = self.maps[m].merge.as_mut().expect("a map merge is running");
                let (file, offset) = merge.write(len);
                self.stats.map_merge_written += len;
                self.io(vm, file, offset, len, true, Next::MapMergeWrite { m });
            }
            Next::MapMergeWrite { m } => self.map_merge_step(m, now),
            Next::FetchRead { r, m, len } => {
                self.stats.shuffle_read += len;
                let from = self.maps[m].vm.node;
                let to = self.reduces[r].vm.node;
                if from != to {
                    self.stats.shuffle_sent += len;
                    self.send(from, to, len, Next::FetchSent { r, len });
                } else {
                    self.fetch_arrived(r, len, now);
                }
            }
            Next::FetchSent { r, len } => self.fetch_arrived(r, len, now),
            Next::FetchWrite { r, seg } => {
                let task = &mut self.reduces[r];
                task.segs.push(Seg::whole(seg));
                task.in_flight -= 1;
                task.fetched += 1;
                self.reduce_step(r, now);
            }
            Next::BufferWrite { r, seg } => {
                let task = &mut self.reduces[r];
                task.segs.push(Seg::whole(seg));
                task.mem_writing = 0;
                self.reduce_step(r, now);
            }
            Next::ReduceMergeRead { r, len } => {
                self.stats.reduce_merge_read += len;
                let vm = self.reduces[r].vm;
                let merge = self.reduces[r].merge.as_mut().expect("a reduce merge is running");
                let (file, offset) = merge.write(len);
                self.stats.reduce_merge_written += len;
                self.io(vm, file, offset, len, true, Next::ReduceMergeWrite { r });
            }
            Next::ReduceMergeWrite { r } => {
                self.reduces[r].reading = false;
                self.reduce_step(r, now)
            }
            Next::ReduceRead { r, len } => {
                self.stats.reduce_read += len;
                let work = Self::cpu_for(self.spec.reduce_cpu_per_mib, len);
                self.cpu(self.reduces[r].vm, work, Next::ReduceCpu { r, len });
            }
            Next::ReduceCpu { r, len } => {
                let out = (len as f64 * self.spec.reduce_output_ratio) as u64;
                let task = &mut self.reduces[r];
                task.pending_out += out;
                task.reading = false;
                self.reduce_step(r, now);
            }
            Next::OutputLocal { r } => {
                self.reduces[r].reading = false;
                self.reduce_step(r, now);
            }
            Next::ReplicaSent {
                r,
                to,
                replica,
                offset,
                len,
            } => {
                let file = (
                    FileKey::Output {
                        reduce: r as u32,
                        replica,
                    },
                    self.reduces[r].output.max(offset + len),
                );
                self.io(to, file, offset, len, true, Next::ReplicaWritten { r });
            }
            Next::ReplicaWritten { r } => {
                self.reduces[r].replicas_in_flight -= 1;
                self.reduce_step(r, now);
            }
            Next::Beat { v, seq } => {
                let t = self.tracker.as_ref().expect("heartbeats are modelled");
                if t.beat_seq[v] == seq {
                    self.beat(v, now);
                }
            }
            Next::EventFetch { v } => {
                let finished = self.finished_maps.len();
                let t = self.tracker.as_mut().expect("heartbeats are modelled");
                t.known[v] = finished;
                if finished < self.maps.len() {
                    let at = now + t.interval;
                    self.wake(at, Next::EventFetch { v });
                }
            }
            Next::ReducePoll { r } => {
                let v = self.vm_index(self.reduces[r].vm);
                let t = self.tracker.as_ref().expect("heartbeats are modelled");
                let (known, hb) = (t.known[v], t.hb.clone());
                self.reduces[r].known = known;
                self.reduce_step(r, now);
                let task = &self.reduces[r];
                if !task.shuffle_done && !task.done {
                    // `ReduceCopier`: nothing in flight and nothing new to
                    // fetch, it sleeps before it asks again.
                    let idle = task.in_flight == 0 && task.next_map >= task.known;
                    let at = now + if idle { hb.reduce_idle } else { hb.reduce_poll };
                    self.wake(at, Next::ReducePoll { r });
                }
            }
        }
    }

    fn launch_maps(&mut self, v: usize) {
        while self.running_maps[v] < self.spec.map_slots {
            let Some(m) = self.queued[v].pop_front() else { break };
            self.running_maps[v] += 1;
            self.map_step(m, self.log.start);
        }
    }

    /// Move map `m` on as far as it can go without waiting.
    fn map_step(&mut self, m: usize, now: Nanos) {
        let threshold = self.spec.spill_threshold();
        let capacity = self.spec.buffer_capacity();
        let task = &mut self.maps[m];
        if task.done || task.merge.is_some() || task.reading {
            return;
        }
        if task.spilling == 0 && task.collected >= threshold {
            self.start_spill(m);
        }
        let task = &mut self.maps[m];
        if task.read < task.input {
            if task.spilling > 0 && task.collected + task.spilling >= capacity {
                // The buffer is full: wait for the spill.
                return;
            }
            let len = self.spec.io_chunk.min(task.input - task.read);
            let offset = task.read;
            task.read += len;
            task.reading = true;
            let (vm, file) = (task.vm, (FileKey::Input(m as u32), task.input));
            self.io(vm, file, offset, len, false, Next::MapRead { m, len });
            return;
        }
        if task.spilling > 0 {
            return;
        }
        if task.collected > 0 {
            self.start_spill(m);
            return;
        }
        self.map_merge_step(m, now);
    }

    fn start_spill(&mut self, m: usize) {
        let task = &mut self.maps[m];
        let collected = std::mem::take(&mut task.collected);
        task.spilling = collected;
        let size = ((collected as f64 * self.spec.combine_ratio) as u64).max(1);
        let file = (
            FileKey::Spill {
                map: m as u32,
                n: task.spills.len() as u32,
            },
            size,
        );
        self.stats.spilled += size;
        self.stats.spills += 1;
        let vm = task.vm;
        self.io(vm, file, 0, size, true, Next::Spill { m, seg: file });
    }

    /// The map's spills merged pass by pass into its output.
    fn map_merge_step(&mut self, m: usize, now: Nanos) {
        let chunk = self.spec.io_chunk;
        let factor = self.spec.io_sort_factor;
        let task = &mut self.maps[m];
        if let Some(merge) = task.merge.as_mut() {
            if let Some((file, size, offset, len)) = merge.next_read(chunk) {
                let vm = task.vm;
                self.io(vm, (file, size), offset, len, false, Next::MapMergeRead { m, len });
                return;
            }
            let merge = task.merge.take().expect("checked above");
            let vm = task.vm;
            self.delete(vm, &merge.inputs);
            let task = &mut self.maps[m];
            let (file, size) = merge.output.expect("a map merge writes a file");
            let seg = Seg { file, size, read: 0 };
            if matches!(file, FileKey::MapOutput(_)) {
                task.output = Some(seg);
                return self.map_done(m, now);
            }
            task.spills.push(seg);
        }
        let task = &mut self.maps[m];
        match task.spills.len() {
            0 => {
                task.output = Some(Seg {
                    file: FileKey::MapOutput(m as u32),
                    size: 0,
                    read: 0,
                });
                self.map_done(m, now)
            }
            // A single spill is the output as it is (Hadoop renames it).
            1 if task.merges == 0 => {
                task.output = task.spills.pop();
                self.map_done(m, now)
            }
            _ => {
                let (merge, _) = next_pass(
                    &mut task.spills,
                    factor,
                    &mut task.merges,
                    m as u32,
                    Some(FileKey::MapOutput(m as u32)),
                );
                task.merge = Some(merge);
                self.map_merge_step(m, now)
            }
        }
    }

    fn map_done(&mut self, m: usize, now: Nanos) {
        let task = &mut self.maps[m];
        task.done = true;
        let v = self.vm_index(self.maps[m].vm);
        self.running_maps[v] -= 1;
        self.finished_maps.push(m);
        self.log.maps_done.push(now);
        if self.finished_maps.len() == self.maps.len() {
            self.out.push(Action::Entered(PhaseKind::Shuffle));
        }
        if self.tracker.is_some() {
            // The TaskTracker heartbeats at once when a task ends; its
            // reducers learn of the map through their polls.
            self.beat(v, now);
            return self.check_end(now);
        }
        self.launch_maps(v);
        self.launch_reduces();
        for r in 0..self.reduces.len() {
            self.reduce_step(r, now);
        }
        self.check_end(now);
    }

    fn launch_reduces(&mut self) {
        let needed = (self.spec.reduce_slowstart * self.maps.len() as f64).ceil() as usize;
        if self.finished_maps.len() >= needed {
            for task in &mut self.reduces {
                task.started = true;
            }
        }
    }

    /// The partition of map `m`'s output that reducer `r` fetches.
    fn partition(&self, m: usize, r: usize) -> (Seg, u64, u64) {
        let out = self.maps[m].output.expect("a finished map has an output");
        let n = self.reduces.len() as u128;
        let start = (out.size as u128 * r as u128 / n) as u64;
        let end = (out.size as u128 * (r as u128 + 1) / n) as u64;
        (out, start, end - start)
    }

    fn fetch_arrived(&mut self, r: usize, len: u64, now: Nanos) {
        let buffer = self.spec.shuffle_buffer();
        let task = &mut self.reduces[r];
        if len > buffer / 4 || task.mem + task.mem_writing + len > buffer {
            self.write_segment(r, len, false);
            return;
        }
        task.mem += len;
        task.in_flight -= 1;
        task.fetched += 1;
        self.reduce_step(r, now);
    }

    /// Write the shuffle buffer out as a segment.
    fn write_buffer(&mut self, r: usize) {
        let task = &mut self.reduces[r];
        let len = std::mem::take(&mut task.mem);
        task.mem_writing = len;
        self.write_segment(r, len, true);
    }

    /// Write a segment of `len` bytes to reducer `r`'s disk: the shuffle
    /// buffer, or one fetched map output too big for it.
    fn write_segment(&mut self, r: usize, len: u64, from_buffer: bool) {
        let task = &mut self.reduces[r];
        let seg = (
            FileKey::Segment {
                reduce: r as u32,
                n: task.segments,
            },
            len,
        );
        task.segments += 1;
        self.stats.segments_written += len;
        let next = if from_buffer {
            Next::BufferWrite { r, seg }
        } else {
            Next::FetchWrite { r, seg }
        };
        let vm = task.vm;
        self.io(vm, seg, 0, len, true, next);
    }

    /// Move reducer `r` on as far as it can go without waiting.
    fn reduce_step(&mut self, r: usize, now: Nanos) {
        let maps = self.maps.len();
        let task = &self.reduces[r];
        if !task.started || task.done {
            return;
        }
        if !task.shuffle_done {
            self.fetch_more(r);
            let merge_at = (self.spec.shuffle_buffer() as f64 * self.spec.shuffle_merge_percent) as u64;
            let task = &self.reduces[r];
            if task.mem_writing == 0 && task.mem > 0 && task.mem >= merge_at {
                self.write_buffer(r);
            }
            let task = &mut self.reduces[r];
            if task.fetched == maps && task.in_flight == 0 {
                task.shuffle_done = true;
                self.shuffles_done += 1;
                self.log.shuffles_done.push(now);
                if self.shuffles_done == self.reduces.len() {
                    self.out.push(Action::Entered(PhaseKind::Reduce));
                }
            } else {
                return;
            }
        }
        let task = &self.reduces[r];
        if task.mem_writing > 0 {
            return;
        }
        if task.mem > 0 {
            // `mapred.job.reduce.input.buffer.percent` 0: nothing stays in memory.
            return self.write_buffer(r);
        }
        self.reduce_merge_step(r, now);
    }

    fn fetch_more(&mut self, r: usize) {
        let known = if self.tracker.is_some() {
            self.reduces[r].known
        } else {
            self.finished_maps.len()
        };
        while self.reduces[r].in_flight < self.spec.parallel_copies && self.reduces[r].next_map < known {
            let m = self.finished_maps[self.reduces[r].next_map];
            self.reduces[r].next_map += 1;
            let (out, offset, len) = self.partition(m, r);
            if len == 0 {
                self.reduces[r].fetched += 1;
                continue;
            }
            self.reduces[r].in_flight += 1;
            let vm = self.maps[m].vm;
            self.io(
                vm,
                (out.file, out.size),
                offset,
                len,
                false,
                Next::FetchRead { r, m, len },
            );
        }
    }

    /// After the shuffle: merge passes down to `io_sort_factor` segments,
    /// then the last pass feeding the reduce and its output.
    fn reduce_merge_step(&mut self, r: usize, now: Nanos) {
        let chunk = self.spec.io_chunk;
        let factor = self.spec.io_sort_factor;
        let task = &mut self.reduces[r];
        let vm = task.vm;
        if task.reading {
            return;
        }
        if task.final_pass {
            return self.reduce_output_step(r, now);
        }
        if let Some(merge) = task.merge.as_mut() {
            if let Some((file, size, offset, len)) = merge.next_read(chunk) {
                task.reading = true;
                self.io(vm, (file, size), offset, len, false, Next::ReduceMergeRead { r, len });
                return;
            }
            let merge = task.merge.take().expect("checked above");
            self.delete(vm, &merge.inputs);
            let task = &mut self.reduces[r];
            let (file, size) = merge.output.expect("an intermediate merge writes a file");
            task.segs.push(Seg { file, size, read: 0 });
        }
        let task = &mut self.reduces[r];
        let (merge, last) = next_pass(&mut task.segs, factor, &mut task.merges, r as u32, None);
        task.merge = Some(merge);
        if last {
            let size: u64 = task.merge.iter().flat_map(|m| &m.inputs).map(|s| s.size).sum();
            task.output = (size as f64 * self.spec.reduce_output_ratio) as u64;
            task.final_pass = true;
            return self.reduce_output_step(r, now);
        }
        self.reduce_merge_step(r, now)
    }

    /// The reduce: read a piece of the merged input, compute, write the
    /// output locally and send it to the other replicas.
    fn reduce_output_step(&mut self, r: usize, now: Nanos) {
        let chunk = self.spec.io_chunk;
        let task = &mut self.reduces[r];
        let vm = task.vm;
        if task.reading {
            return;
        }
        let merge = task.merge.as_mut().expect("the last pass is running");
        let input_left = merge.inputs.iter().any(|s| s.read < s.size);
        let flush = task.pending_out >= chunk || (!input_left && task.pending_out > 0);
        if flush {
            if task.replicas_in_flight >= self.spec.replica_window * (self.spec.replication - 1)
                && self.spec.replication > 1
            {
                return;
            }
            let len = task.pending_out.min(chunk);
            task.pending_out -= len;
            let offset = merge.written;
            merge.written += len;
            task.reading = true;
            let size = task.output.max(offset + len);
            self.stats.output_written += len * self.spec.replication as u64;
            self.io(
                vm,
                (
                    FileKey::Output {
                        reduce: r as u32,
                        replica: 0,
                    },
                    size,
                ),
                offset,
                len,
                true,
                Next::OutputLocal { r },
            );
            for replica in 1..self.spec.replication {
                let to = self.replica_vm(vm, replica);
                self.reduces[r].replicas_in_flight += 1;
                let next = Next::ReplicaSent {
                    r,
                    to,
                    replica: replica as u32,
                    offset,
                    len,
                };
                if to.node != vm.node {
                    self.stats.replica_sent += len;
                    self.send(vm.node, to.node, len, next);
                } else {
                    self.proceed(next, now);
                }
            }
            return;
        }
        if let Some((file, size, offset, len)) = merge.next_read(chunk) {
            task.reading = true;
            self.io(vm, (file, size), offset, len, false, Next::ReduceRead { r, len });
            return;
        }
        if task.replicas_in_flight > 0 {
            return;
        }
        task.done = true;
        let inputs = std::mem::take(&mut merge.inputs);
        self.delete(vm, &inputs);
        self.reduces_done += 1;
        if self.tracker.is_some() {
            let v = self.vm_index(vm);
            self.tracker.as_mut().expect("checked above").reduces_done[v] += 1;
            self.check_end(now);
            return self.beat(v, now);
        }
        self.check_end(now);
    }

    /// Where replica `k` (k ≥ 1) of a VM's output goes: the same VM slot on
    /// the k-th next node, or the k-th next VM of a one-node cluster.
    fn replica_vm(&self, vm: VmId, k: usize) -> VmId {
        let nodes = self.cluster.nodes;
        if nodes > 1 {
            VmId {
                node: (vm.node + k) % nodes,
                vm: vm.vm,
            }
        } else {
            VmId {
                node: vm.node,
                vm: (vm.vm + k) % self.cluster.vms_per_node,
            }
        }
    }

    fn check_end(&mut self, now: Nanos) {
        if self.ended || !self.started {
            return;
        }
        if self.finished_maps.len() == self.maps.len() && self.reduces_done == self.reduces.len() {
            if self.reduces.is_empty() {
                self.out.push(Action::Entered(PhaseKind::Reduce));
            }
            self.ended = true;
            self.log.end = now;
        }
    }
}
