//! CFQ, Completely Fair Queueing, as in Linux 4.x (`block/cfq-iosched.c`,
//! hierarchical build, `Documentation/block/cfq-iosched.txt`), with blkio
//! group scheduling.
//!
//! Registered twice:
//! - `cfq`: every stream in the root group, as Linux CFQ without cgroups;
//! - `blkio`: one group per stream weighted by [`StreamInfo::weight`]
//!   (the "Blkio" baseline of paper 003: CFQ with one cgroup per VM).
//!
//! Structure, following the kernel:
//! - One sync queue per stream (a VM at the host, a thread in a guest);
//!   async requests share one queue per group and priority. Each queue keeps
//!   its requests sector-sorted and in a FIFO ([`SortedFifo`]).
//! - Groups sit on a service tree ordered by `vdisktime`; each group has
//!   service trees per class (RT, BE, IDLE) and workload type (SYNC,
//!   SYNC_NOIDLE, ASYNC) holding its busy queues ordered by `rb_key`.
//! - Selection: leftmost group → RT before BE before IDLE → the workload whose
//!   first queue has the lowest key (kept until its workload slice ends) →
//!   that tree's first queue, which is served for its time slice.
//! - A slice is `base + base/5·(4−prio)`, shrunk with `low_latency` so that
//!   the group's queues fit into its share of `target_latency`, never below
//!   `2·slice_idle`; it starts at the queue's first completion.
//! - Idling: when the active sync queue empties, wait `slice_idle` for its
//!   next request if its idle window is on (off for seeky shallow queues and
//!   for think times above `slice_idle`) or it is the last queue of its tree;
//!   the last queue of a group waits `group_idle`.
//! - When a queue's service ends, its group's `vdisktime` grows by the disk
//!   time used scaled by `500/weight`, so groups get disk *time* in
//!   proportion to their weights.
//!
//! Slices over time ([`Scheduler::take_slices`]): one [`SliceGrant`] per
//! queue slice, logged when `__cfq_slice_expired` ends it. As in Linux the
//! slice starts at the queue's first completion after it became active
//! (`cfq_set_prio_slice` in `cfq_completed_request`); `start` is then, and
//! `used` what `cfq_cfqq_slice_usage` charges: the time from then to the
//! expiry, at most the allocated slice (idling after expiry is not in it).
//! A slice that ends at or before its first completion starts at selection
//! (`dispatch_start`) and uses the time since. `length` is the allocated
//! slice (`cfq_scaled_cfqq_slice`: prio, `low_latency` scaling by the
//! group's share of `target_latency`); one that ended before it was sized
//! reports the length it would have had then. A slice is a *queue's*: a
//! blkio group's service can span several queue slices, but at the host
//! every VM is one sync queue in its own group, so its queue slices are
//! the VM's. Sync queues report their stream; async queues report theirs
//! under `blkio` (one group per stream) and are left out under `cfq`
//! (shared by every stream of the root group). The `slices` counter counts
//! selections, so it exceeds the log by the active slice (and, under
//! `cfq`, the async queues' slices).
//!
//! Departures from Linux (see docs/schedulers.md): no cooperating-queue
//! merging (`cfq_close_cooperator`; streams are VMs whose queues never
//! share a process), `hw_tag` is taken from the device's queue depth rather
//! than estimated, the next request of a queue is chosen at dispatch time
//! from the head position (Linux caches it at insert), time is in ns not
//! jiffies, and the group hierarchy is flat (one level under the root).

use super::util::{elevator_next, key, mul_div, wake_at, SeekHistory, SortedFifo, ThinkTime};
use super::{SchedulerSpec, StreamAttr};
use hvio_core::{
    ms, Dispatch, IoClass, Nanos, ParamSpec, Params, Request, RequestId, SchedContext, Scheduler, Sector, SliceGrant,
    SliceLog, StreamId, StreamInfo,
};
use std::collections::{BTreeSet, HashMap};

/// The registry entry of `cfq` (no groups: every stream in the root group).
pub const SPEC_CFQ: SchedulerSpec = SchedulerSpec {
    name: "cfq",
    summary: "Linux CFQ 4.x: per-stream queues, time slices, idling; all streams in the root group",
    params: PARAMS,
    stream_attrs: &[],
    build: build_cfq,
};

/// The registry entry of `blkio` (CFQ with a group per stream, weights from the streams).
pub const SPEC_BLKIO: SchedulerSpec = SchedulerSpec {
    name: "blkio",
    summary: "Linux CFQ 4.x with blkio proportional weights: one group per stream (paper 003's Blkio)",
    params: PARAMS,
    stream_attrs: &[StreamAttr::weight(
        "blkio group weight (Linux 10..1000, default 500): disk time share",
    )],
    build: build_blkio,
};

/// CFQ's tunables (Linux `cfq-iosched.c`, sysfs names).
pub static PARAMS: &[ParamSpec] = &[
    ParamSpec::int("quantum", 8.0, "requests", 1.0, 1e6, "requests a queue may have in flight (quantum/2 normally, up to quantum early in a slice)"),
    ParamSpec::int("fifo_expire_sync", 125.0, "ms", 1.0, 1e7, "FIFO expiry of a sync request (checked once per slice)"),
    ParamSpec::int("fifo_expire_async", 250.0, "ms", 1.0, 1e7, "FIFO expiry of an async request (checked once per slice)"),
    ParamSpec::int("back_seek_max", 16384.0, "KiB", 0.0, 1e9, "longest backward seek preferred over a forward one"),
    ParamSpec::int("back_seek_penalty", 2.0, "ratio", 1.0, 1e6, "a backward seek counts this many times its distance"),
    ParamSpec::int("slice_sync", 100.0, "ms", 1.0, 1e7, "base time slice of a sync queue"),
    ParamSpec::int("slice_async", 40.0, "ms", 1.0, 1e7, "base time slice of an async queue"),
    ParamSpec::int("slice_async_rq", 2.0, "requests", 1.0, 1e6, "base dispatch count of an async slice (2·this·(8−prio))"),
    ParamSpec::int("slice_idle", 8.0, "ms", 0.0, 1e6, "idle wait for the active sync queue's next request (0 = never idle; forced to 0 on non-rotational devices unless set, as Linux >= 4.10 does at registration)"),
    ParamSpec::int("group_idle", 8.0, "ms", 0.0, 1e6, "idle wait for the last queue of a group"),
    ParamSpec::flag("low_latency", true, "scale slices so all busy queues fit into target_latency; ramp async depth"),
    ParamSpec::int("target_latency", 300.0, "ms", 1.0, 1e7, "the period in which every busy queue should get a slice"),
];

fn build_cfq(p: Params, ctx: &SchedContext) -> Box<dyn Scheduler> {
    Box::new(Cfq::new(&p, ctx, false))
}

fn build_blkio(p: Params, ctx: &SchedContext) -> Box<dyn Scheduler> {
    Box::new(Cfq::new(&p, ctx, true))
}

/// `CFQ_IDLE_DELAY`: how far behind the last group a newly busy group starts,
/// and the key offset of idle-class queues.
const IDLE_DELAY: Nanos = ms(200);
/// `CFQ_MIN_TT`: the shortest workload slice.
const MIN_TT: Nanos = ms(2);
/// `CFQQ_SEEK_THR`: farther than this (sectors) from the last request is a seek.
const SEEK_THR: Sector = 8 * 100;
/// `CFQQ_SECT_THR_NONROT`: on SSDs a request smaller than this is "seeky".
const SECT_THR_NONROT: u32 = 2 * 32;
/// `CFQQ_CLOSE_THR`: a request this close to the head may preempt an idling queue.
const CLOSE_THR: Sector = 8 * 1024;
/// `CFQ_HW_QUEUE_MIN`: a device taking this many requests has command queueing.
const HW_QUEUE_MIN: usize = 5;
/// Default blkio weight: the charge scale (`vdisktime += charge·500/weight`).
const WEIGHT_DEFAULT: u64 = 500;
/// One page: a request this large ends an idle wait at once.
const PAGE_BYTES: u64 = 4096;

/// Index of a queue in [`Cfq::queues`].
pub type QueueId = usize;
/// Index of a group in [`Cfq::groups`].
pub type GroupId = usize;

/// Workload class: index into a group's per-class state (Linux `wl_class_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WlClass {
    /// Best effort.
    Be = 0,
    /// Real time.
    Rt = 1,
    /// Idle.
    Idle = 2,
}

impl From<IoClass> for WlClass {
    fn from(c: IoClass) -> Self {
        match c {
            IoClass::Rt => WlClass::Rt,
            IoClass::Be => WlClass::Be,
            IoClass::Idle => WlClass::Idle,
        }
    }
}

/// Workload type (Linux `wl_type_t`, in its order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WlType {
    /// Asynchronous (buffered writes).
    Async = 0,
    /// Synchronous, seeky: served without idling (`SYNC_NOIDLE_WORKLOAD`).
    SyncNoidle = 1,
    /// Synchronous, idled on.
    Sync = 2,
}

const TYPES: [WlType; 3] = [WlType::Async, WlType::SyncNoidle, WlType::Sync];

/// Busy queues of one class and type in one group, ordered by `rb_key`.
#[derive(Debug, Default, Clone)]
pub struct ServiceTree {
    /// (rb_key, insertion order, queue), ascending.
    pub queues: BTreeSet<(i64, u64, QueueId)>,
    /// The tree's think time (for group idling).
    pub ttime: ThinkTime,
}

impl ServiceTree {
    /// Busy queues on the tree.
    pub fn count(&self) -> usize {
        self.queues.len()
    }
    fn first(&self) -> Option<(i64, QueueId)> {
        self.queues.iter().next().map(|&(k, _, q)| (k, q))
    }
}

/// One CFQ queue: a stream's sync queue, or a group's async queue of one priority.
#[derive(Debug, Clone)]
pub struct CfqQueue {
    /// The group it belongs to.
    pub group: GroupId,
    /// The stream whose slices this queue's are (see [`Cfq::take_slices`]):
    /// a sync queue's own stream; an async queue's only under `blkio`,
    /// where its group is one stream's; `None` for `cfq`'s async queues,
    /// which all streams of the root group share.
    pub stream: Option<StreamId>,
    /// A sync queue (else the group's async queue).
    pub sync: bool,
    /// Its I/O class.
    pub class: WlClass,
    /// Its priority within the class, 0 (highest) to 7.
    pub prio: u8,
    /// Its queued requests, by sector and by deadline.
    pub rqs: SortedFifo,
    /// Requests dispatched and not completed.
    pub dispatched: u32,
    /// On its service tree (busy): the tree's (class, type) and key.
    tree: Option<(WlClass, WlType)>,
    rb_key: i64,
    rb_seq: u64,
    slice_start: Nanos,
    slice_end: Nanos,
    dispatch_start: Nanos,
    allocated_slice: Nanos,
    slice_resid: i64,
    slice_dispatch: u32,
    idle_window: bool,
    wait_request: bool,
    must_dispatch: bool,
    fifo_checked: bool,
    slice_new: bool,
    deep: bool,
    wait_busy: bool,
    seek: SeekHistory,
    /// The stream's think time (Linux keeps it in the io context).
    pub ttime: ThinkTime,
    meta_pending: u32,
}

impl CfqQueue {
    fn new(group: GroupId, stream: Option<StreamId>, sync: bool, class: WlClass, prio: u8, now: Nanos) -> Self {
        CfqQueue {
            group,
            stream,
            sync,
            class,
            prio: if class == WlClass::Idle { 7 } else { prio.min(7) },
            rqs: SortedFifo::new(),
            dispatched: 0,
            tree: None,
            rb_key: 0,
            rb_seq: 0,
            slice_start: 0,
            slice_end: 0,
            dispatch_start: 0,
            allocated_slice: 0,
            slice_resid: 0,
            slice_dispatch: 0,
            idle_window: sync && class != WlClass::Idle,
            wait_request: false,
            must_dispatch: false,
            fifo_checked: false,
            slice_new: true,
            deep: false,
            wait_busy: false,
            seek: SeekHistory::default(),
            ttime: ThinkTime::new(now),
            meta_pending: 0,
        }
    }

    /// `cfqq_type`.
    pub fn wl_type(&self) -> WlType {
        if !self.sync {
            WlType::Async
        } else if !self.idle_window {
            WlType::SyncNoidle
        } else {
            WlType::Sync
        }
    }

    /// Whether its recent requests are mostly seeks.
    pub fn seeky(&self) -> bool {
        self.seek.seeky()
    }
}

/// A blkio group: its weight, virtual disk time and service trees.
#[derive(Debug, Clone)]
pub struct CfqGroup {
    /// The blkio weight.
    pub weight: u64,
    /// Virtual disk time: disk time used, scaled by 500/weight.
    pub vdisktime: u64,
    on_tree: bool,
    /// Busy queues (on a service tree) of this group.
    pub nr_cfqq: usize,
    /// [class][type] trees; the idle class uses `[Idle][Async]` only.
    trees: [[ServiceTree; 3]; 3],
    /// Requests dispatched and not completed.
    pub dispatched: u32,
    ttime: ThinkTime,
    busy_queues_avg: [usize; 3],
    saved_wl_slice: Nanos,
    saved_wl_type: WlType,
    saved_wl_class: WlClass,
    async_queues: HashMap<(WlClass, u8), QueueId>,
}

impl CfqGroup {
    fn new(weight: u64, now: Nanos) -> Self {
        CfqGroup {
            weight: weight.max(1),
            vdisktime: 0,
            on_tree: false,
            nr_cfqq: 0,
            trees: Default::default(),
            dispatched: 0,
            ttime: ThinkTime::new(now),
            busy_queues_avg: [0; 3],
            saved_wl_slice: 0,
            saved_wl_type: WlType::SyncNoidle,
            saved_wl_class: WlClass::Be,
            async_queues: HashMap::new(),
        }
    }

    fn tree(&self, class: WlClass, t: WlType) -> &ServiceTree {
        let t = if class == WlClass::Idle { WlType::Async } else { t };
        &self.trees[class as usize][t as usize]
    }

    fn tree_mut(&mut self, class: WlClass, t: WlType) -> &mut ServiceTree {
        let t = if class == WlClass::Idle { WlType::Async } else { t };
        &mut self.trees[class as usize][t as usize]
    }

    /// `cfq_group_busy_queues_wl`.
    fn busy_in_class(&self, class: WlClass) -> usize {
        if class == WlClass::Idle {
            self.tree(WlClass::Idle, WlType::Async).count()
        } else {
            TYPES.iter().map(|&t| self.tree(class, t).count()).sum()
        }
    }

    /// `cfqg_busy_async_queues`.
    fn busy_async(&self) -> usize {
        self.tree(WlClass::Rt, WlType::Async).count() + self.tree(WlClass::Be, WlType::Async).count()
    }
}

/// Counters reported by [`Scheduler::counters`].
#[derive(Debug, Default, Clone, Copy)]
pub struct CfqStats {
    /// Slices started.
    pub slices: u64,
    /// Idle waits armed on a queue (`slice_idle`).
    pub idle_armed: u64,
    /// Idle waits armed on a group (`group_idle`).
    pub group_idle_armed: u64,
    /// Idle waits that ended with the awaited queue's request.
    pub idle_hits: u64,
    /// Queues preempted.
    pub preemptions: u64,
    /// Requests dispatched because their FIFO deadline passed.
    pub fifo_expired: u64,
}

/// The CFQ scheduler (both registry entries).
pub struct Cfq {
    name: &'static str,
    groups_enabled: bool,
    quantum: u32,
    fifo_expire: [Nanos; 2],
    back_max: Sector,
    back_penalty: u64,
    slice: [Nanos; 2],
    slice_async_rq: u32,
    slice_idle: Nanos,
    group_idle: Nanos,
    low_latency: bool,
    target_latency: Nanos,
    rotational: bool,
    hw_tag: bool,

    /// Every queue, indexed by [`QueueId`].
    pub queues: Vec<CfqQueue>,
    /// Every group, indexed by [`GroupId`].
    pub groups: Vec<CfqGroup>,
    sync_queue: HashMap<StreamId, QueueId>,
    stream_group: HashMap<StreamId, GroupId>,
    stream_weight: HashMap<StreamId, u64>,
    /// Groups by (vdisktime, id): the group service tree.
    group_tree: BTreeSet<(u64, GroupId)>,
    min_vdisktime: u64,
    total_weight: u64,

    active: Option<QueueId>,
    serving_group: GroupId,
    serving_class: WlClass,
    serving_type: WlType,
    workload_expires: Nanos,
    idle_timer: Option<Nanos>,
    busy_queues: usize,
    busy_sync_queues: usize,
    rq_queued: usize,
    rq_in_driver: usize,
    rq_in_flight: [usize; 2],
    last_position: Sector,
    last_delayed_sync: Nanos,
    seq: u64,
    /// Its counters.
    pub stats: CfqStats,
    /// Ended queue slices, for [`Scheduler::take_slices`].
    slice_log: SliceLog,
}

impl Cfq {
    /// Build CFQ; `groups` = one blkio group per stream (else all in the root group).
    pub fn new(p: &Params, ctx: &SchedContext, groups: bool) -> Self {
        let rotational = ctx.device.rotational;
        let mut slice_idle = p.nanos("slice_idle");
        // Linux >= 4.10 `cfq_registered_queue`: "Default to IOPS mode with no
        // idling for SSDs" zeroes slice_idle when the queue registers; a
        // later sysfs write (here: `slice_idle` named in the parameters,
        // even as 8) sets it again. Kernels before 4.10 (2.6.32, 3.0) have
        // no such step: slice_idle stays 8 ms on a non-rotational device and
        // only the `nonrot && hw_tag` checks of `cfq_arm_slice_timer` and
        // `cfq_should_idle` stop the idling; setting it explicitly gives that.
        if !rotational && !p.is_set("slice_idle") {
            slice_idle = 0;
        }
        let mut cfq = Cfq {
            name: if groups { "blkio" } else { "cfq" },
            groups_enabled: groups,
            quantum: p.u64("quantum") as u32,
            fifo_expire: [p.nanos("fifo_expire_async"), p.nanos("fifo_expire_sync")],
            back_max: p.u64("back_seek_max") * 2,
            back_penalty: p.u64("back_seek_penalty"),
            slice: [p.nanos("slice_async"), p.nanos("slice_sync")],
            slice_async_rq: p.u64("slice_async_rq") as u32,
            slice_idle,
            group_idle: p.nanos("group_idle"),
            low_latency: p.flag("low_latency"),
            target_latency: p.nanos("target_latency"),
            rotational,
            hw_tag: ctx.device.queue_depth >= HW_QUEUE_MIN,
            queues: Vec::new(),
            groups: vec![CfqGroup::new(2 * WEIGHT_DEFAULT, 0)],
            sync_queue: HashMap::new(),
            stream_group: HashMap::new(),
            stream_weight: HashMap::new(),
            group_tree: BTreeSet::new(),
            min_vdisktime: 0,
            total_weight: 0,
            active: None,
            serving_group: 0,
            serving_class: WlClass::Be,
            serving_type: WlType::SyncNoidle,
            workload_expires: 0,
            idle_timer: None,
            busy_queues: 0,
            busy_sync_queues: 0,
            rq_queued: 0,
            rq_in_driver: 0,
            rq_in_flight: [0, 0],
            last_position: 0,
            // "assume sync ops weren't delayed in the last second"
            last_delayed_sync: 0,
            seq: 0,
            stats: CfqStats::default(),
            slice_log: SliceLog::default(),
        };
        for s in &ctx.streams {
            cfq.stream_weight.insert(s.id, s.weight as u64);
        }
        cfq
    }

    fn group_of(&mut self, stream: StreamId, now: Nanos) -> GroupId {
        if !self.groups_enabled {
            return 0;
        }
        if let Some(&g) = self.stream_group.get(&stream) {
            return g;
        }
        let w = self.stream_weight.get(&stream).copied().unwrap_or(WEIGHT_DEFAULT);
        self.groups.push(CfqGroup::new(w, now));
        let g = self.groups.len() - 1;
        self.stream_group.insert(stream, g);
        g
    }

    /// The queue a request belongs to, created on first use.
    fn queue_for(&mut self, rq: &Request, now: Nanos) -> QueueId {
        let class = WlClass::from(rq.class);
        if rq.sync {
            if let Some(&q) = self.sync_queue.get(&rq.stream) {
                return q;
            }
            let g = self.group_of(rq.stream, now);
            self.queues
                .push(CfqQueue::new(g, Some(rq.stream), true, class, rq.prio, now));
            let q = self.queues.len() - 1;
            self.sync_queue.insert(rq.stream, q);
            q
        } else {
            let g = self.group_of(rq.stream, now);
            let prio = if class == WlClass::Idle { 7 } else { rq.prio.min(7) };
            if let Some(&q) = self.groups[g].async_queues.get(&(class, prio)) {
                return q;
            }
            let owner = self.groups_enabled.then_some(rq.stream);
            self.queues.push(CfqQueue::new(g, owner, false, class, prio, now));
            let q = self.queues.len() - 1;
            self.groups[g].async_queues.insert((class, prio), q);
            q
        }
    }

    fn queue_of_inflight(&self, rq: &Request) -> Option<QueueId> {
        if rq.sync {
            self.sync_queue.get(&rq.stream).copied()
        } else {
            let g = if self.groups_enabled {
                *self.stream_group.get(&rq.stream)?
            } else {
                0
            };
            let class = WlClass::from(rq.class);
            let prio = if class == WlClass::Idle { 7 } else { rq.prio.min(7) };
            self.groups[g].async_queues.get(&(class, prio)).copied()
        }
    }

    // ---- slices ----

    /// `cfq_prio_slice`: `base + base/5·(4 − prio)`.
    fn prio_slice(&self, sync: bool, prio: u8) -> i64 {
        let base = self.slice[sync as usize] as i64;
        base + base / 5 * (4 - prio as i64)
    }

    /// `cfq_group_slice`: the group's share of `target_latency`.
    fn group_slice(&self, g: GroupId) -> Nanos {
        let total = self.total_weight.max(self.groups[g].weight);
        mul_div(self.target_latency, self.groups[g].weight, total)
    }

    /// `cfq_group_get_avg_queues`: a slowly decaying maximum of busy
    /// queues, stored in the group only when `commit`.
    fn group_avg_queues(&mut self, g: GroupId, class: WlClass, commit: bool) -> usize {
        let grp = &mut self.groups[g];
        let busy = grp.busy_in_class(class);
        let avg = grp.busy_queues_avg[class as usize];
        let (lo, hi) = (avg.min(busy), avg.max(busy));
        let next = (3 * hi + lo + 2) / 4;
        if commit {
            grp.busy_queues_avg[class as usize] = next;
        }
        next
    }

    /// `cfq_scaled_cfqq_slice`. `commit = false` only asks what it would
    /// be (for the slice log), leaving the decaying average of busy queues
    /// as it is, so that reporting never changes a decision.
    fn scaled_slice(&mut self, q: QueueId, commit: bool) -> Nanos {
        let (sync, prio, g, class) = {
            let cq = &self.queues[q];
            (cq.sync, cq.prio, cq.group, cq.class)
        };
        let mut slice = self.prio_slice(sync, prio).max(1) as u64;
        if self.low_latency {
            // Linux passes "is RT" as the class index here: BE and IDLE share.
            let cls = if class == WlClass::Rt { WlClass::Rt } else { WlClass::Be };
            let iq = self.group_avg_queues(g, cls, commit) as u64;
            let sync_slice = self.slice[1];
            let expect_latency = sync_slice.saturating_mul(iq);
            let group_slice = self.group_slice(g);
            if expect_latency > group_slice {
                let base_low = 2 * self.slice_idle;
                let low = mul_div(base_low, slice, sync_slice).min(slice);
                slice = mul_div(slice, group_slice, expect_latency).max(low);
            }
        }
        slice
    }

    fn slice_used(&self, q: QueueId, now: Nanos) -> bool {
        let cq = &self.queues[q];
        !cq.slice_new && now >= cq.slice_end
    }

    fn slice_used_soon(&self, q: QueueId, now: Nanos) -> bool {
        let cq = &self.queues[q];
        cq.slice_new || now + self.slice_idle.saturating_mul(cq.dispatched as u64) > cq.slice_end
    }

    // ---- service trees ----

    /// `cfq_service_tree_add`.
    fn service_tree_add(&mut self, q: QueueId, add_front: bool, now: Nanos) {
        let (g, class, wt) = {
            let cq = &self.queues[q];
            (cq.group, cq.class, cq.wl_type())
        };
        let st = self.groups[g].tree(class, wt);
        let rb_key: i64 = if class == WlClass::Idle {
            let last = st.queues.iter().next_back().filter(|e| e.2 != q).map(|e| e.0);
            IDLE_DELAY as i64 + last.unwrap_or(now as i64)
        } else if !add_front {
            let nr = self.groups[g].nr_cfqq.max(1) as i64;
            let offset =
                (nr - 1) * (self.prio_slice(true, 0) - self.prio_slice(self.queues[q].sync, self.queues[q].prio));
            let k = offset + now as i64 - self.queues[q].slice_resid;
            self.queues[q].slice_resid = 0;
            k
        } else {
            st.first().map(|(k, _)| k).unwrap_or(now as i64) - ms(1000) as i64
        };
        let cq = &self.queues[q];
        let was_on = cq.tree;
        if let Some((oc, ot)) = was_on {
            if rb_key == cq.rb_key && oc == class && ot == wt {
                return;
            }
            let entry = (cq.rb_key, cq.rb_seq, q);
            self.groups[g].tree_mut(oc, ot).queues.remove(&entry);
        }
        self.seq += 1;
        let seq = self.seq;
        let cq = &mut self.queues[q];
        cq.rb_key = rb_key;
        cq.rb_seq = seq;
        cq.tree = Some((class, wt));
        self.groups[g].tree_mut(class, wt).queues.insert((rb_key, seq, q));
        if was_on.is_none() {
            self.group_notify_queue_add(g);
        }
    }

    fn add_cfqq_rr(&mut self, q: QueueId, now: Nanos) {
        self.busy_queues += 1;
        if self.queues[q].sync {
            self.busy_sync_queues += 1;
        }
        self.service_tree_add(q, false, now);
    }

    fn del_cfqq_rr(&mut self, q: QueueId) {
        let cq = &mut self.queues[q];
        let Some((c, t)) = cq.tree.take() else { return };
        let (entry, g, sync) = ((cq.rb_key, cq.rb_seq, q), cq.group, cq.sync);
        self.groups[g].tree_mut(c, t).queues.remove(&entry);
        self.group_notify_queue_del(g);
        self.busy_queues -= 1;
        if sync {
            self.busy_sync_queues -= 1;
        }
    }

    /// `cfq_group_notify_queue_add`: a newly busy group starts behind the last one.
    fn group_notify_queue_add(&mut self, g: GroupId) {
        self.groups[g].nr_cfqq += 1;
        if self.groups[g].on_tree {
            return;
        }
        let vd = match self.group_tree.iter().next_back() {
            Some(&(last, _)) => last + IDLE_DELAY,
            None => self.min_vdisktime,
        };
        self.groups[g].vdisktime = vd;
        self.groups[g].on_tree = true;
        self.group_tree.insert((vd, g));
        self.total_weight += self.groups[g].weight;
    }

    fn group_notify_queue_del(&mut self, g: GroupId) {
        let grp = &mut self.groups[g];
        grp.nr_cfqq -= 1;
        if grp.nr_cfqq > 0 {
            return;
        }
        grp.on_tree = false;
        grp.saved_wl_slice = 0;
        self.group_tree.remove(&(grp.vdisktime, g));
        self.total_weight -= grp.weight;
    }

    /// `cfq_cfqq_slice_usage`: when the ending slice began and the disk
    /// time it used.
    fn slice_usage(&self, q: QueueId, now: Nanos) -> (Nanos, Nanos) {
        let cq = &self.queues[q];
        if cq.slice_start == 0 || cq.slice_start == now {
            // Expired before (or right at) its first completion: charge the
            // time since its first dispatch, so seeks are not free.
            (cq.dispatch_start, now.saturating_sub(cq.dispatch_start).max(1))
        } else {
            (
                cq.slice_start,
                now.saturating_sub(cq.slice_start).min(cq.allocated_slice),
            )
        }
    }

    /// `cfq_group_served`: charge the group `used` (disk time of the
    /// ending slice) and save its workload state.
    fn group_served(&mut self, q: QueueId, used: Nanos, now: Nanos) {
        let g = self.queues[q].group;
        let mut charge = used;
        let nr_sync = self.groups[g].nr_cfqq - self.groups[g].busy_async();
        if self.slice_idle == 0 && self.hw_tag {
            // IOPS mode: charge requests, one "ns" each, scaled as time.
            charge = self.queues[q].slice_dispatch as u64;
        } else if !self.queues[q].sync && nr_sync == 0 {
            charge = self.queues[q].allocated_slice;
        }
        let grp = &mut self.groups[g];
        let scaled = mul_div(charge, WEIGHT_DEFAULT, grp.weight);
        if grp.on_tree {
            self.group_tree.remove(&(grp.vdisktime, g));
            grp.vdisktime += scaled;
            self.group_tree.insert((grp.vdisktime, g));
        } else {
            grp.vdisktime += scaled;
        }
        if self.workload_expires > now {
            grp.saved_wl_slice = self.workload_expires - now;
            grp.saved_wl_type = self.serving_type;
            grp.saved_wl_class = self.serving_class;
        } else {
            grp.saved_wl_slice = 0;
        }
    }

    /// `__cfq_slice_expired`.
    fn slice_expired(&mut self, timed_out: bool, now: Nanos) {
        let Some(q) = self.active else { return };
        if self.queues[q].wait_request {
            self.idle_timer = None;
        }
        self.queues[q].wait_request = false;
        self.queues[q].wait_busy = false;
        // A slice not yet sized (it ends before its first completion) is
        // sized here: Linux does so for a timed-out queue's residual (and
        // then updates the busy-queue average); the slice log reports the
        // length it would have had either way.
        let granted = if self.queues[q].slice_new {
            self.scaled_slice(q, timed_out)
        } else {
            self.queues[q].allocated_slice
        };
        if timed_out {
            let resid = if self.queues[q].slice_new {
                granted as i64
            } else {
                self.queues[q].slice_end as i64 - now as i64
            };
            self.queues[q].slice_resid = resid;
        }
        let (start, used) = self.slice_usage(q, now);
        self.group_served(q, used, now);
        if let Some(stream) = self.queues[q].stream {
            let grant = SliceGrant {
                stream,
                start,
                length: granted,
                used,
            };
            self.slice_log.push(grant);
        }
        if self.queues[q].tree.is_some() && self.queues[q].rqs.is_empty() {
            self.del_cfqq_rr(q);
        }
        if self.queues[q].tree.is_some() {
            self.service_tree_add(q, false, now);
        }
        self.active = None;
    }

    fn set_active(&mut self, q: Option<QueueId>, now: Nanos) {
        if let Some(q) = q {
            let cq = &mut self.queues[q];
            cq.slice_start = 0;
            cq.dispatch_start = now;
            cq.allocated_slice = 0;
            cq.slice_end = 0;
            cq.slice_dispatch = 0;
            cq.wait_request = false;
            cq.must_dispatch = false;
            cq.fifo_checked = false;
            cq.slice_new = true;
            self.idle_timer = None;
            self.stats.slices += 1;
        }
        self.active = q;
    }

    // ---- idling ----

    fn thinktime_big(&self, t: &ThinkTime, group: bool) -> bool {
        t.valid() && t.mean > if group { self.group_idle } else { self.slice_idle }
    }

    fn queue_tree(&self, q: QueueId) -> &ServiceTree {
        let cq = &self.queues[q];
        let (c, t) = cq.tree.unwrap_or((cq.class, cq.wl_type()));
        self.groups[cq.group].tree(c, t)
    }

    /// `cfq_should_idle`.
    fn should_idle(&self, q: QueueId) -> bool {
        let cq = &self.queues[q];
        if self.slice_idle == 0 || cq.class == WlClass::Idle {
            return false;
        }
        if cq.idle_window && (self.rotational || !self.hw_tag) {
            return true;
        }
        let st = self.queue_tree(q);
        st.count() == 1 && cq.sync && !self.thinktime_big(&st.ttime, false)
    }

    /// `cfq_arm_slice_timer`: the active sync queue emptied; maybe wait for it.
    fn arm_slice_timer(&mut self, now: Nanos) {
        let Some(q) = self.active else { return };
        if !self.rotational && self.hw_tag {
            return;
        }
        let mut group_idle = false;
        if !self.should_idle(q) {
            if self.group_idle > 0 {
                group_idle = true;
            } else {
                return;
            }
        }
        let cq = &self.queues[q];
        if cq.dispatched > 0 {
            return;
        }
        // Do not idle past the end of the slice for a slow thinker.
        if cq.ttime.valid() && cq.slice_end.saturating_sub(now) < cq.ttime.mean {
            return;
        }
        if group_idle && self.groups[cq.group].nr_cfqq > 1 {
            return;
        }
        let sl = if group_idle { self.group_idle } else { self.slice_idle };
        if sl == 0 {
            return;
        }
        self.queues[q].wait_request = true;
        self.idle_timer = Some(now + sl);
        if group_idle {
            self.stats.group_idle_armed += 1;
        } else {
            self.stats.idle_armed += 1;
        }
    }

    /// `cfq_should_wait_busy`.
    fn should_wait_busy(&self, q: QueueId, now: Nanos) -> bool {
        let cq = &self.queues[q];
        if !cq.rqs.is_empty()
            || self.groups[cq.group].nr_cfqq > 1
            || self.thinktime_big(&self.groups[cq.group].ttime, true)
        {
            return false;
        }
        if self.slice_used(q, now) {
            return true;
        }
        let left = cq.slice_end.saturating_sub(now);
        (cq.ttime.valid() && left < cq.ttime.mean) || left <= ms(1)
    }

    /// `cfq_idle_slice_timer`, run at the timer's time `t`.
    fn idle_timer_fired(&mut self, t: Nanos) {
        self.idle_timer = None;
        if let Some(q) = self.active {
            if self.queues[q].must_dispatch {
                return;
            }
            if !self.slice_used(q, t) {
                if self.busy_queues == 0 || !self.queues[q].rqs.is_empty() {
                    return;
                }
                self.queues[q].deep = false;
            }
            self.queues[q].wait_request = false;
            self.slice_expired(false, t);
        }
    }

    /// Fire the idle timer if it is due by `now`, at its own time.
    fn run_timers(&mut self, now: Nanos) {
        if let Some(t) = self.idle_timer {
            if t <= now {
                self.idle_timer_fired(t);
            }
        }
    }

    // ---- selection ----

    /// `cfq_choose_wl_type`: the workload whose first queue has the lowest key.
    fn choose_wl_type(&self, g: GroupId, class: WlClass) -> WlType {
        let mut best = WlType::SyncNoidle;
        let mut lowest: Option<i64> = None;
        for t in TYPES {
            if let Some((k, _)) = self.groups[g].tree(class, t).first() {
                if lowest.is_none_or(|l| k < l) {
                    lowest = Some(k);
                    best = t;
                }
            }
        }
        best
    }

    /// `choose_wl_class_and_type`.
    fn choose_wl_class_and_type(&mut self, g: GroupId, now: Nanos) {
        let original = self.serving_class;
        let grp = &self.groups[g];
        self.serving_class = if grp.busy_in_class(WlClass::Rt) > 0 {
            WlClass::Rt
        } else if grp.busy_in_class(WlClass::Be) > 0 {
            WlClass::Be
        } else {
            self.serving_class = WlClass::Idle;
            self.workload_expires = now + 1;
            return;
        };
        if original == self.serving_class {
            let count = grp.tree(self.serving_class, self.serving_type).count();
            if count > 0 && now <= self.workload_expires {
                return;
            }
        }
        let class = self.serving_class;
        self.serving_type = self.choose_wl_type(g, class);
        let count = self.groups[g].tree(class, self.serving_type).count() as u64;
        let group_slice = self.group_slice(g);
        let busy = self.groups[g].busy_in_class(class);
        let denom = self.groups[g].busy_queues_avg[class as usize].max(busy).max(1) as u64;
        let mut slice = mul_div(group_slice, count, denom);
        if self.serving_type == WlType::Async {
            let tmp = mul_div(
                self.target_latency,
                self.groups[g].busy_async() as u64,
                self.busy_queues.max(1) as u64,
            );
            slice = mul_div(slice.min(tmp), self.slice[0], self.slice[1]);
        } else {
            slice = slice.max(2 * self.slice_idle);
        }
        // slice_async / slice_sync may scale the slice past u64 (Linux's
        // sysfs allows both from 1 ms to UINT_MAX ms): saturate, never expire.
        self.workload_expires = now.saturating_add(slice.max(MIN_TT));
    }

    /// `cfq_choose_cfqg`: the leftmost group, with its saved workload.
    fn choose_group(&mut self, now: Nanos) -> Option<GroupId> {
        let &(vd, g) = self.group_tree.iter().next()?;
        self.min_vdisktime = self.min_vdisktime.max(vd);
        self.serving_group = g;
        let grp = &self.groups[g];
        if grp.saved_wl_slice > 0 {
            self.workload_expires = now.saturating_add(grp.saved_wl_slice);
            self.serving_type = grp.saved_wl_type;
            self.serving_class = grp.saved_wl_class;
        } else {
            self.workload_expires = now.saturating_sub(1);
        }
        self.choose_wl_class_and_type(g, now);
        Some(g)
    }

    /// `cfq_select_queue`: keep the active queue, idle on it, or pick anew.
    /// `None` = keep the disk idle (or nothing to do).
    fn select_queue(&mut self, now: Nanos) -> Option<QueueId> {
        if let Some(q) = self.active {
            if self.rq_queued == 0 {
                return None;
            }
            let mut expire = false;
            let mut check_group_idle = false;
            if self.queues[q].wait_busy && !self.queues[q].rqs.is_empty() {
                expire = true;
            } else if self.slice_used(q, now) && !self.queues[q].must_dispatch {
                let cq = &self.queues[q];
                if self.groups[cq.group].nr_cfqq == 1 && cq.rqs.is_empty() && cq.dispatched > 0 && self.should_idle(q) {
                    return None;
                }
                check_group_idle = true;
            } else if !self.queues[q].rqs.is_empty() {
                return Some(q);
            } else {
                if self.idle_timer.is_some() {
                    return None;
                }
                let cq = &self.queues[q];
                // A deep seeky queue on a fast device: stop idling for it.
                if cq.seeky()
                    && cq.idle_window
                    && (cq.slice_new || cq.slice_end.saturating_sub(now) > now.saturating_sub(cq.slice_start))
                {
                    let cq = &mut self.queues[q];
                    cq.deep = false;
                    cq.idle_window = false;
                }
                if self.queues[q].dispatched > 0 && self.should_idle(q) {
                    return None;
                }
                check_group_idle = true;
            }
            if check_group_idle && !expire {
                let grp = &self.groups[self.queues[q].group];
                if self.group_idle > 0
                    && grp.nr_cfqq == 1
                    && grp.dispatched > 0
                    && !self.thinktime_big(&grp.ttime, true)
                {
                    return None;
                }
            }
            self.slice_expired(false, now);
        }
        let g = self.choose_group(now)?;
        let (c, t) = (self.serving_class, self.serving_type);
        let next = self.groups[g].tree(c, t).first().map(|(_, q)| q);
        self.set_active(next, now);
        next
    }

    /// `cfq_may_dispatch`: in-flight limits and sync/async separation.
    fn may_dispatch(&self, q: QueueId, now: Nanos) -> bool {
        let cq = &self.queues[q];
        if self.should_idle(q) && self.rq_in_flight[0] > 0 {
            return false;
        }
        if self.rq_in_flight[1] > 0 && !cq.sync {
            return false;
        }
        let idle_class = cq.class == WlClass::Idle;
        let mut max = if idle_class { 1 } else { (self.quantum / 2).max(1) };
        if cq.dispatched >= max {
            if idle_class {
                return false;
            }
            let promote_sync = cq.sync && self.busy_sync_queues == 1;
            if self.busy_queues > 1 && self.slice_used_soon(q, now) && !promote_sync {
                return false;
            }
            max = if self.busy_queues == 1 || promote_sync {
                u32::MAX
            } else {
                self.quantum
            };
        }
        if !cq.sync && self.low_latency {
            // Ramp async depth up with the time since a sync request was last delayed.
            let since = now.saturating_sub(self.last_delayed_sync);
            let mut depth = (since / self.slice[1]).min(u32::MAX as u64) as u32;
            if depth == 0 && cq.dispatched == 0 {
                depth = 1;
            }
            max = max.min(depth);
        }
        cq.dispatched < max
    }

    /// The queue's next request: the FIFO head if expired (checked once per
    /// slice), else the best by position from the head with backward seeks
    /// up to `back_seek_max` penalised (`cfq_choose_req`).
    fn next_request(&mut self, q: QueueId, now: Nanos) -> (Sector, RequestId) {
        let last = self.last_position;
        let cq = &mut self.queues[q];
        if !cq.fifo_checked {
            cq.fifo_checked = true;
            if let Some((dl, rq)) = cq.rqs.fifo_head() {
                if dl <= now {
                    self.stats.fifo_expired += 1;
                    return key(rq);
                }
            }
        }
        let pick = elevator_next(&cq.rqs, last, self.back_max, self.back_penalty, |f, b| {
            // Prefer sync, then metadata, as `cfq_choose_req` does.
            if f.sync != b.sync {
                Some(f.sync)
            } else if f.meta != b.meta {
                Some(f.meta)
            } else {
                None
            }
        });
        key(pick.expect("dispatching from a non-empty queue"))
    }

    /// `cfq_should_preempt`: may a request for queue `nq` take over the disk?
    fn should_preempt(&self, nq: QueueId, rq: &Request, now: Nanos) -> bool {
        let Some(aq) = self.active else { return false };
        let (new, act) = (&self.queues[nq], &self.queues[aq]);
        if new.class == WlClass::Idle {
            return false;
        }
        if act.class == WlClass::Idle {
            return true;
        }
        if act.class == WlClass::Rt && new.class != WlClass::Rt {
            return false;
        }
        if rq.sync && !act.sync {
            return true;
        }
        if new.group != act.group {
            return false;
        }
        if self.slice_used(aq, now) {
            return true;
        }
        if self.serving_type == WlType::SyncNoidle
            && new.wl_type() == WlType::SyncNoidle
            && self.queue_tree(nq).count() == 2
            && act.rqs.is_empty()
        {
            return true;
        }
        if rq.meta && act.meta_pending == 0 {
            return true;
        }
        if new.class == WlClass::Rt && act.class != WlClass::Rt {
            return true;
        }
        if act.rqs.is_empty() && !self.should_idle(aq) {
            return true;
        }
        if !act.wait_request {
            return false;
        }
        self.last_position.abs_diff(rq.sector) <= CLOSE_THR
    }

    /// `cfq_preempt_queue`: `nq` goes to the front and is served next.
    fn preempt(&mut self, nq: QueueId, now: Nanos) {
        self.stats.preemptions += 1;
        let old_type = self.active.map(|a| self.queues[a].wl_type());
        self.slice_expired(true, now);
        if old_type != Some(self.queues[nq].wl_type()) {
            let g = self.queues[nq].group;
            self.groups[g].saved_wl_slice = 0;
        }
        self.service_tree_add(nq, true, now);
        self.queues[nq].slice_end = 0;
        self.queues[nq].slice_new = true;
    }

    /// `cfq_update_idle_window`.
    fn update_idle_window(&mut self, q: QueueId) {
        let slice_idle = self.slice_idle;
        let cq = &mut self.queues[q];
        if !cq.sync || cq.class == WlClass::Idle {
            return;
        }
        if cq.rqs.len() >= 4 {
            cq.deep = true;
        }
        if slice_idle == 0 || (!cq.deep && cq.seeky()) {
            cq.idle_window = false;
        } else if cq.ttime.valid() {
            cq.idle_window = cq.ttime.mean <= slice_idle;
        }
    }

    /// The idle timer's time, if armed (for tests and reports).
    pub fn idle_timer(&self) -> Option<Nanos> {
        self.idle_timer
    }

    /// The active queue's stream-independent id, if any.
    pub fn active_queue(&self) -> Option<QueueId> {
        self.active
    }

    /// The group serving `stream` (blkio) or the root group (cfq).
    pub fn group_of_stream(&self, stream: StreamId) -> Option<GroupId> {
        if self.groups_enabled {
            self.stream_group.get(&stream).copied()
        } else {
            Some(0)
        }
    }
}

impl Scheduler for Cfq {
    fn name(&self) -> &'static str {
        self.name
    }

    /// `cfq_insert_request` + `cfq_rq_enqueued`.
    /// `cfq_merge` and `cfq_allow_merge`: only into the stream's own
    /// queue (the sync queue of its process, or its group's async queue),
    /// which must already exist; think time and seek history are not
    /// sampled (Linux samples them in `cfq_rq_enqueued` only).
    fn back_merge(&mut self, rq: &Request, max_sectors: u32, _now: Nanos) -> Option<hvio_core::RequestId> {
        let q = self.queue_of_inflight(rq)?;
        self.queues.get_mut(q)?.rqs.back_merge(rq, max_sectors)
    }

    fn insert(&mut self, rq: Request, now: Nanos) {
        self.run_timers(now);
        let q = self.queue_for(&rq, now);
        if self.queues[q].tree.is_none() && self.active != Some(q) {
            // An idle queue takes the request's current priority (`cfq_init_prio_data`).
            let class = WlClass::from(rq.class);
            let cq = &mut self.queues[q];
            if rq.sync && cq.class != class {
                cq.idle_window = class != WlClass::Idle;
            }
            if rq.sync {
                cq.class = class;
                cq.prio = if class == WlClass::Idle { 7 } else { rq.prio.min(7) };
            }
        }
        let sync = rq.sync as usize;
        self.queues[q].rqs.insert(rq, now + self.fifo_expire[sync]);
        if self.queues[q].tree.is_none() {
            self.add_cfqq_rr(q, now);
        }
        self.rq_queued += 1;
        if rq.meta {
            self.queues[q].meta_pending += 1;
        }
        // Think time of the stream, its service tree and its group.
        let (g, qsync) = (self.queues[q].group, self.queues[q].sync);
        if qsync {
            let cap = 2 * self.slice_idle;
            self.queues[q].ttime.sample(now, cap);
            let cq = &self.queues[q];
            let (c, t) = cq.tree.unwrap_or((cq.class, cq.wl_type()));
            self.groups[g].tree_mut(c, t).ttime.sample(now, cap);
        }
        let gcap = 2 * self.group_idle;
        self.groups[g].ttime.sample(now, gcap);
        let rotational = self.rotational;
        self.queues[q].seek.record(&rq, rotational, SEEK_THR, SECT_THR_NONROT);
        self.update_idle_window(q);

        if self.active == Some(q) {
            if self.queues[q].wait_request {
                self.stats.idle_hits += 1;
                if rq.bytes() > PAGE_BYTES || self.busy_queues > 1 {
                    self.idle_timer = None;
                    self.queues[q].wait_request = false;
                } else {
                    self.queues[q].must_dispatch = true;
                }
            }
        } else if self.should_preempt(q, &rq, now) {
            self.preempt(q, now);
        }
    }

    fn dispatch(&mut self, now: Nanos) -> Dispatch {
        self.run_timers(now);
        if self.rq_queued == 0 {
            return Dispatch::Empty;
        }
        let fallback = self.slice_idle.max(ms(1));
        let Some(q) = self.select_queue(now) else {
            let slice_end = self.active.map(|a| self.queues[a].slice_end).filter(|&e| e > now);
            return Dispatch::WaitUntil(wake_at(now, self.idle_timer.or(slice_end), fallback));
        };
        if !self.may_dispatch(q, now) {
            return Dispatch::WaitUntil(wake_at(now, None, fallback));
        }
        let k = self.next_request(q, now);
        let rq = self.queues[q].rqs.remove(k).expect("chosen request is queued");
        self.rq_queued -= 1;
        let g = self.queues[q].group;
        let cq = &mut self.queues[q];
        if rq.meta {
            cq.meta_pending = cq.meta_pending.saturating_sub(1);
        }
        cq.dispatched += 1;
        cq.slice_dispatch += 1;
        cq.must_dispatch = false;
        let (sync, idle_class, prio, slice_dispatch) = (cq.sync, cq.class == WlClass::Idle, cq.prio, cq.slice_dispatch);
        self.groups[g].dispatched += 1;
        self.rq_in_flight[sync as usize] += 1;
        self.rq_in_driver += 1;
        self.last_position = rq.end();
        // An async queue ends its slice after its request quota; an idle-class
        // queue after one request, when others are waiting.
        let max_rq = 2 * self.slice_async_rq * (8 - prio as u32);
        if self.busy_queues > 1 && ((!sync && slice_dispatch >= max_rq) || idle_class) {
            self.queues[q].slice_end = now + 1;
            self.slice_expired(false, now);
        }
        Dispatch::Request(rq)
    }

    /// `cfq_completed_request`.
    fn completed(&mut self, rq: &Request, now: Nanos) {
        self.run_timers(now);
        let Some(q) = self.queue_of_inflight(rq) else { return };
        if self.queues[q].dispatched == 0 {
            return;
        }
        let g = self.queues[q].group;
        self.rq_in_driver = self.rq_in_driver.saturating_sub(1);
        self.queues[q].dispatched -= 1;
        self.groups[g].dispatched = self.groups[g].dispatched.saturating_sub(1);
        let qsync = self.queues[q].sync as usize;
        self.rq_in_flight[qsync] = self.rq_in_flight[qsync].saturating_sub(1);
        if rq.sync {
            self.queues[q].ttime.last_end = now;
            let cq = &self.queues[q];
            let (c, t) = cq.tree.unwrap_or((cq.class, cq.wl_type()));
            self.groups[g].tree_mut(c, t).ttime.last_end = now;
            if rq.arrival + self.fifo_expire[1] <= now {
                self.last_delayed_sync = now;
            }
        }
        self.groups[g].ttime.last_end = now;
        if self.active == Some(q) {
            let empty = self.queues[q].rqs.is_empty();
            if self.queues[q].slice_new {
                let slice = self.scaled_slice(q, true);
                let cq = &mut self.queues[q];
                cq.slice_start = now;
                cq.slice_end = now + slice;
                cq.allocated_slice = slice;
                cq.slice_new = false;
            }
            if self.should_wait_busy(q, now) {
                let extend = if self.slice_idle > 0 {
                    self.slice_idle
                } else {
                    self.group_idle
                };
                self.queues[q].slice_end = now + extend;
                self.queues[q].wait_busy = true;
            }
            if self.slice_used(q, now) || self.queues[q].class == WlClass::Idle {
                self.slice_expired(true, now);
            } else if rq.sync && empty {
                self.arm_slice_timer(now);
            }
        }
    }

    fn has_work(&self) -> bool {
        self.rq_queued > 0
    }

    fn queued(&self) -> usize {
        self.rq_queued
    }

    /// `cfq_forced_dispatch`: the active slice ends, then every busy queue
    /// gives up its requests and leaves its service tree.
    fn take_queued(&mut self, now: Nanos) -> Option<Vec<Request>> {
        self.slice_expired(false, now);
        let mut all = Vec::with_capacity(self.rq_queued);
        for q in 0..self.queues.len() {
            all.extend(self.queues[q].rqs.take_all());
            self.queues[q].meta_pending = 0;
            self.del_cfqq_rr(q);
        }
        self.rq_queued = 0;
        self.idle_timer = None;
        Some(all)
    }

    fn set_stream(&mut self, info: &StreamInfo) {
        let w = (info.weight as u64).max(1);
        self.stream_weight.insert(info.id, w);
        if let Some(&g) = self.stream_group.get(&info.id) {
            let grp = &mut self.groups[g];
            if grp.on_tree {
                self.total_weight = self.total_weight - grp.weight + w;
            }
            grp.weight = w;
        }
    }

    fn counters(&self) -> Vec<(String, f64)> {
        let s = &self.stats;
        vec![
            ("slices".into(), s.slices as f64),
            ("idle_armed".into(), s.idle_armed as f64),
            ("group_idle_armed".into(), s.group_idle_armed as f64),
            ("idle_hits".into(), s.idle_hits as f64),
            ("preemptions".into(), s.preemptions as f64),
            ("fifo_expired".into(), s.fifo_expired as f64),
        ]
    }

    fn take_slices(&mut self) -> Vec<SliceGrant> {
        self.slice_log.take()
    }

    fn logs_slices(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{fixed, run, Client, Pattern};
    use hvio_core::{DeviceInfo, ParamValues};

    fn ctx(weights: &[u32]) -> SchedContext {
        SchedContext {
            streams: weights
                .iter()
                .enumerate()
                .map(|(i, &w)| StreamInfo::new(i as u32, format!("vm{i}")).with_weight(w))
                .collect(),
            device: DeviceInfo::test_disk(1 << 30),
        }
    }

    fn build(name: &str, weights: &[u32]) -> Box<dyn Scheduler> {
        crate::build(name, &ParamValues::new(), &ctx(weights)).unwrap()
    }

    /// Tunables at the ends of their (Linux) ranges: the low-latency slice
    /// scaling (`2·slice_idle·slice/slice_sync`, `slice·group_slice/…`) and
    /// the async workload slice (`·slice_async/slice_sync`) overflowed u64
    /// (a debug-build panic); they now compute in 128 bits and saturate.
    #[test]
    fn extreme_slices_do_not_overflow() {
        let over: &[&[(&str, f64)]] = &[
            &[("slice_sync", 1e7)],
            &[("slice_sync", 1.0), ("slice_async", 1e7), ("target_latency", 1e7)],
            &[("slice_idle", 1e6), ("slice_sync", 1e7), ("target_latency", 1.0)],
        ];
        for name in ["cfq", "blkio"] {
            for o in over {
                let mut s = crate::testutil::build(name, &[1, 10_000, 500], o, DeviceInfo::test_disk(1 << 30));
                let clients = [
                    Client::new(0, Pattern::Random(1), 0).outstanding(2),
                    Client::new(1, Pattern::Sequential, 1 << 26).think(us(100)),
                    Client::new(2, Pattern::Random(2), 1 << 27).write(false).outstanding(4),
                ];
                let out = run(s.as_mut(), &clients, 2, &fixed(ms(1)), ms(3000));
                assert!(!out.dispatches.is_empty(), "{name} {o:?}: nothing dispatched");
            }
        }
    }

    /// Two streams, 2 ms per request, 0.5 ms think time, one request at a
    /// time each. A sequential stream gets an 8 ms idle wait each time it
    /// empties and its next request (0.5 ms later) ends the wait, so it keeps
    /// the disk for its whole slice.
    #[test]
    fn idles_slice_idle_for_a_sequential_stream() {
        let mut s = build("cfq", &[500, 500]);
        let clients = [
            Client::new(0, Pattern::Sequential, 0).think(us(500)),
            Client::new(1, Pattern::Sequential, 1 << 28).think(us(500)),
        ];
        let out = run(s.as_mut(), &clients, 1, &fixed(ms(2)), ms(2000));
        let idles: Vec<_> = out.waits.iter().filter(|(n, w)| w - n == ms(8)).collect();
        assert!(idles.len() > 100, "expected slice_idle waits, got {}", idles.len());
        // Every idle wait was ended by the idling stream's own request 0.5 ms later.
        for &&(n, _) in idles.iter().take(50) {
            let next = out
                .dispatches
                .iter()
                .find(|(t, _)| *t >= n)
                .expect("a dispatch after the wait");
            assert_eq!(next.0, n + us(500));
        }
        // Slices: a stream's requests come in long runs (100 ms / 2.5 ms ≈ 40).
        let switches = out
            .dispatches
            .windows(2)
            .filter(|w| w[0].1.stream != w[1].1.stream)
            .count();
        assert!(
            switches < out.dispatches.len() / 20,
            "{switches} switches in {} dispatches",
            out.dispatches.len()
        );
    }

    /// The same with two seeky streams: after the seek history marks them
    /// seeky (5 of 32 requests), CFQ never idles; the streams alternate.
    #[test]
    fn does_not_idle_for_seeky_streams() {
        let mut s = build("cfq", &[500, 500]);
        let clients = [
            Client::new(0, Pattern::Random(1), 0).think(us(500)),
            Client::new(1, Pattern::Random(2), 1 << 28).think(us(500)),
        ];
        let out = run(s.as_mut(), &clients, 1, &fixed(ms(2)), ms(2000));
        let late: Vec<_> = out.waits.iter().filter(|(n, _)| *n > ms(300)).collect();
        assert!(late.is_empty(), "seeky streams idled: {late:?}");
        let after: Vec<_> = out.dispatches.iter().filter(|(t, _)| *t > ms(300)).collect();
        let switches = after.windows(2).filter(|w| w[0].1.stream != w[1].1.stream).count();
        assert!(
            switches * 10 > after.len() * 9,
            "{switches} switches in {}",
            after.len()
        );
    }

    /// Disk time ratio stream 0 : stream 1, both overloaded (8 outstanding
    /// random reads each), 1 ms per request, 20 s.
    fn overloaded_split(name: &str, weights: &[u32]) -> f64 {
        let mut s = build(name, weights);
        let clients = [
            Client::new(0, Pattern::Random(7), 0).outstanding(8),
            Client::new(1, Pattern::Random(9), 1 << 28).outstanding(8),
        ];
        let out = run(s.as_mut(), &clients, 1, &fixed(ms(1)), s_(20));
        out.busy(0) / out.busy(1)
    }

    /// blkio: two overloaded groups of weights 1000 and 500 get disk time 2:1.
    /// Both queues get 100 ms slices (low_latency leaves a lone queue's slice
    /// alone); the 1000-weight group is charged 50 ms of vdisktime per slice,
    /// the other 100 ms, so the first is picked twice as often.
    #[test]
    fn blkio_weights_split_disk_time() {
        let ratio = overloaded_split("blkio", &[1000, 500]);
        eprintln!("blkio 1000/500: disk time ratio {ratio:.3}");
        assert!((1.8..=2.2).contains(&ratio), "disk time ratio {ratio}");
    }

    /// Plain cfq ignores weights: the same load splits evenly.
    #[test]
    fn cfq_without_groups_ignores_weights() {
        let ratio = overloaded_split("cfq", &[1000, 500]);
        assert!((0.9..=1.1).contains(&ratio), "disk time ratio {ratio}");
    }

    /// A sync request preempts an async active queue.
    #[test]
    fn sync_preempts_async() {
        let mut s = build("cfq", &[500, 500]);
        for i in 0..20 {
            s.insert(
                Request::new(i, 0, hvio_core::Op::Write, 1000 + i * 8, 8, 0).with_sync(false),
                0,
            );
        }
        let Dispatch::Request(first) = s.dispatch(0) else {
            panic!()
        };
        assert!(!first.sync);
        s.completed(&first, ms(1));
        s.insert(Request::new(100, 1, hvio_core::Op::Read, 1 << 20, 8, ms(1)), ms(1));
        let Dispatch::Request(next) = s.dispatch(ms(1)) else {
            panic!()
        };
        assert_eq!(next.id, 100, "the sync read goes first");
        assert_eq!(s.counters().iter().find(|c| c.0 == "preemptions").unwrap().1, 1.0);
    }

    /// How often the idle timer was armed (`idle_armed`: `slice_idle`
    /// waits) when two sequential streams (one request at a time, 0.5 ms
    /// think time, 2 ms per 32 KiB request: on a non-rotational device
    /// requests under 32 sectors count as seeky) share a device that is
    /// `rotational` with `depth` command slots, under `over`.
    fn idle_waits(rotational: bool, depth: usize, over: &[(&str, f64)]) -> usize {
        let mut dev = DeviceInfo::test_disk(1 << 30);
        dev.rotational = rotational;
        dev.queue_depth = depth;
        let mut s = crate::testutil::build("cfq", &[500, 500], over, dev);
        let seq = |stream, start| Client {
            sectors: 64,
            ..Client::new(stream, Pattern::Sequential, start).think(us(500))
        };
        let clients = [seq(0, 0), seq(1, 1 << 28)];
        run(s.as_mut(), &clients, depth, &fixed(ms(2)), ms(2000));
        crate::testutil::counter(s.as_ref(), "idle_armed") as usize
    }

    /// 2.6.32 / 3.0 semantics on a non-rotational disk with command queueing
    /// (Xen blkfront's `QUEUE_FLAG_VIRT` = `QUEUE_FLAG_NONROT`, 32 slots):
    /// `slice_idle = 8` set explicitly stays 8, yet `cfq_arm_slice_timer`
    /// returns at once on `nonrot && hw_tag`, so nothing idles; without
    /// queueing the same device idles. Unset, `slice_idle` is zeroed on
    /// any non-rotational device (Linux >= 4.10's registration).
    #[test]
    fn explicit_slice_idle_on_nonrot_idles_only_without_hw_tag() {
        let set = [("slice_idle", 8.0)];
        assert!(idle_waits(true, 32, &set) > 100, "rotational idles");
        assert_eq!(idle_waits(false, 32, &set), 0, "nonrot + hw_tag never idles");
        assert!(idle_waits(false, 1, &set) > 100, "nonrot without hw_tag idles");
        assert_eq!(idle_waits(false, 1, &[]), 0, "unset: zeroed on nonrot");
        assert!(idle_waits(true, 1, &[]) > 100, "unset: 8 ms on rotational");
    }

    /// One grant per queue slice, as it expires. Stream 0 (prio 4) has
    /// 100 reads queued, stream 1 (prio 0) one far away; each takes 2 ms.
    /// Stream 0 is selected at 0; its slice starts at its first completion
    /// (2 ms) and lasts 100 ms (two busy queues fit into target_latency
    /// unscaled), so it expires at the completion at 102 ms.
    /// - cfq: stream 1 is next. Its slice is 100 + 100/5·4 = 180 ms
    ///   (prio 0); it starts at its completion at 104 ms and ends after an
    ///   8 ms idle wait for a next request that never comes.
    /// - blkio: stream 1's group became busy second, so it starts
    ///   `CFQ_IDLE_DELAY` = 200 ms of vdisktime behind and stream 0's group
    ///   (charged 100 ms per slice) is served again: a slice from its first
    ///   completion at 104 ms, which runs dry at 200 ms, is stretched by
    ///   `wait_busy` to 208 ms and charged its 100 ms allocation, not 104.
    #[test]
    fn logs_one_grant_per_queue_slice() {
        use crate::testutil::{counter, insert_reads, serve_serially};
        let grant = |stream, start, length, used| SliceGrant {
            stream,
            start,
            length,
            used,
        };
        let cases = [
            (
                "cfq",
                ms(102),
                [grant(0, ms(2), ms(100), ms(100)), grant(1, ms(104), ms(180), ms(8))],
            ),
            (
                "blkio",
                ms(208),
                [grant(0, ms(2), ms(100), ms(100)), grant(0, ms(104), ms(100), ms(100))],
            ),
        ];
        for (name, switch, want) in cases {
            let mut s = build(name, &[500, 500]);
            insert_reads(s.as_mut(), 0, 0, 0, 100, 4);
            insert_reads(s.as_mut(), 1000, 1, 1 << 28, 1, 0);
            let served = serve_serially(s.as_mut(), 0, ms(300), ms(2));
            let first = served.iter().find(|(_, r)| r.stream == 1).map(|x| x.0);
            let g = s.take_slices();
            assert_eq!(g, want, "{name}");
            assert!(s.take_slices().is_empty(), "{name}: taken once");
            // The third slice (stream 0's under cfq, stream 1's under blkio) is running.
            assert_eq!(counter(s.as_ref(), "slices"), 3.0, "{name}");
            assert_eq!(first, Some(switch), "{name}");
        }
    }

    /// A shared async queue (`cfq`: one for every stream of the root
    /// group) is left out of the log; under `blkio` it is its stream's.
    /// Stream 0 has 40 async writes queued, stream 1 40 reads, 1 ms each;
    /// the writes go first. Under blkio an async slice (40 ms at prio 4)
    /// ends after its 2·2·(8−4) = 16 dispatches, charged from its first
    /// completion; the last one when the queue runs dry at 40 ms.
    #[test]
    fn async_slices_are_logged_only_for_their_own_group() {
        use crate::testutil::{counter, insert_reads, serve_serially};
        for name in ["cfq", "blkio"] {
            let mut s = build(name, &[500, 500]);
            for i in 0..40 {
                s.insert(
                    Request::new(i, 0, hvio_core::Op::Write, 1000 + i * 8, 8, 0).with_sync(false),
                    0,
                );
            }
            insert_reads(s.as_mut(), 100, 1, 1 << 28, 40, 4);
            let served = serve_serially(s.as_mut(), 0, ms(300), ms(1));
            assert_eq!(served.iter().position(|(_, r)| r.stream == 1), Some(40), "{name}");
            let g: Vec<_> = s
                .take_slices()
                .iter()
                .map(|g| (g.stream, g.start, g.length, g.used))
                .collect();
            if name == "cfq" {
                assert!(g.is_empty(), "{g:?}");
                // Three async slices (16 + 16 + 8 writes) and stream 1's running one.
                assert_eq!(counter(s.as_ref(), "slices"), 4.0);
            } else {
                let want = [
                    (0, ms(1), ms(40), ms(14)),
                    (0, ms(17), ms(40), ms(14)),
                    (0, ms(33), ms(40), ms(7)),
                ];
                assert_eq!(g, want);
            }
        }
    }

    fn s_(v: u64) -> Nanos {
        hvio_core::s(v)
    }

    fn us(v: u64) -> Nanos {
        hvio_core::us(v)
    }
}
