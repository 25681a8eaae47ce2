//! iShare (paper 003, Wu et al., CCPE 2016, §4): proportional-share time
//! slices per VM, as Linux blkio (CFQ with one cgroup per VM) gives them,
//! plus DyIso, which ends a slice early when waiting for the served VM would
//! leave the disk idle while another VM has work.
//!
//! # How it schedules
//!
//! - **Per-VM queues and weights** (§4.2): each VM (stream) has a
//!   sector-sorted queue with a FIFO of expiry times beside it (CFQ's
//!   `sort_list` + `fifo`); within the served VM requests go out in C-LOOK
//!   order from the head, except that an expired FIFO head goes first
//!   (`fifo_expire_sync` / `fifo_expire_async`).
//! - **Proportional slices** (§4.2, as blkio): a VM's slice is
//!   `target_latency · w / Σw`, the sum over the *active* VMs (requests
//!   queued or in flight, or an arrival within the last `target_latency`).
//!   With weights 2:1 and the Linux default 300 ms that is 200 ms and 100 ms
//!   (the blkio `group_slice`; the paper states no other rule). A slice starts
//!   at the VM's first completion in it and is charged as Linux CFQ charges
//!   one (`cfq_cfqq_slice_usage`): the time since then, at most the slice;
//!   a slice that ends at or before its first completion is charged the
//!   time since the VM became the served VM. VMs are served in rounds, heaviest first;
//!   a round ends when every backlogged VM has had a slice.
//! - **Disk state** (§4.2): a VM is *backlogged* when it has pending
//!   (queued, not dispatched) requests. When every active VM is backlogged
//!   the disk is *overloaded*: slices are strict, and a served VM that runs
//!   dry keeps the disk for up to `group_idle` (Linux CFQ's group idling)
//!   while its slice lasts, exactly like blkio. Otherwise the disk is
//!   *underloaded* and DyIso decides whether the served VM's slice ends early.
//!   The time spent in each state and the number of state changes are
//!   counted.
//! - **DyIso** ([`dyiso`]: §4.1, Eq. 2–3, Algorithm 1): `await` (Eq. 2) is
//!   updated at every completion of the VM, `thinkt` (Eq. 3) at every
//!   arrival. When the served VM has nothing pending and slice left, the slice
//!   ends if `thinkt ≥ slice_rest` (Alg. 1 lines 9–10), or if another VM with
//!   pending requests has an `await` below `max_seektime` and not above the
//!   served VM's side of line 12 (lines 11–15; `max_seektime` is the device's
//!   full-stroke seek, [`hvio_core::SeekModel::max_seek_time`]). Otherwise the
//!   slice is kept and the disk idles as under blkio. While idling, iShare
//!   wakes at the moment `slice_rest` falls to `thinkt`.
//!
//!   Where the paper leaves room, hvio reads it as follows (each choice is
//!   tested, and the three flags restore the printed form):
//!   1. Eq. 2's interval for a request dispatched when its VM had nothing
//!      at the disk runs from its dispatch, and Eq. 3's from the VM's last
//!      completion when that came after its previous arrival, sampled only
//!      when the VM had nothing queued or in flight: `await` then
//!      estimates service time and `thinkt` the pause before the VM's next
//!      request, as §4.1 says they should, instead of absorbing the time a
//!      VM waited for other VMs' slices (which, fed back, starves it: its
//!      `thinkt` exceeds every `slice_rest`).
//!   2. The served VM's side of line 12 is `thinkt + await`, "the sum of
//!      the arrival time interval and service time of the next request from
//!      the current served VM", as §4.1 explains the line (`dyiso_gap`).
//!   3. The other VM's side is its service time when the disk switches to
//!      it, Eq. 1's `Tservice(R_j)`: the Eq. 2 average over its requests that
//!      followed another VM's at the disk, or, before there is one, `await`
//!      plus the device's seek estimate to its nearest request and half a
//!      revolution (`switch_cost`). A plain `await` of sequential reads says
//!      nothing of the seek between two images that every switch costs, and
//!      switching on it collapses sequential throughput. The served VM keeps
//!      the rest of its slice, so the disk comes back to it: the switch also
//!      costs what the served VM's requests lose after a switch (Eq. 2 over
//!      its requests that followed another VM's minus over those that
//!      followed its own; before there is one, the seek back and half a
//!      revolution), the locality §3.3.2 says the waiting time exploits.
//! - **The next VM** (§4.2): after a DyIso decision, a backlogged VM not yet
//!   served this round that wins line 12, closest to the head; otherwise the
//!   heaviest backlogged VM not yet served this round, or a new round.
//!   "Served" means "used its slice": a VM whose slice DyIso ended early keeps
//!   the rest of it for later in the round (its budget), and a round ends when
//!   no backlogged VM has slice left — otherwise the VM that happens to look
//!   faster takes the disk back with a fresh slice after every switch and
//!   the other starves.
//!
//! The weighted averages follow the printed Eq. 2–3 (history weighs 7/8, the
//! newest interval 1/8); the module [`dyiso`] explains why and how the
//! prose's opposite reading is one tunable away.
//!
//! Counters ([`Scheduler::counters`]): slice ends by reason
//! (`switch.slice_expired`, `switch.idle_timeout`, `switch.dyiso_thinkt`,
//! `switch.dyiso_await`), `rounds`, `state.changes`, seconds in each state
//! (`state.overloaded_s`, `state.underloaded_s`, `state.idle_s`) and each
//! VM's slice time (`slice_s.<vm>`).
//!
//! Slices over time ([`Scheduler::take_slices`]): one [`SliceGrant`] per
//! slice end, whatever the reason (the `switch.*` counters add up to
//! them). As under blkio (`cfq_set_prio_slice`), a slice starts at the VM's
//! first completion after it became the served VM; `start` is then and
//! `used` the time charged (to the end, at most the slice); a slice that
//! ends at or before its first completion starts when the VM became the
//! served VM and is charged the time since. `length` is the slice in force:
//! the VM's proportional slice of the round less what it used of it
//! earlier in the round (after DyIso ended a slice early). Summed per VM,
//! `used` is `slice_s.<vm>`.

pub mod dyiso;

use super::util::{key, SortedFifo};
use super::{SchedulerSpec, StreamAttr};
use dyiso::{await_wins, decide, Decision, Peer, TimeWeightedAvg, Weights};
use hvio_core::{
    Dispatch, Nanos, ParamSpec, Params, Request, SchedContext, Scheduler, Sector, SliceGrant, SliceLog, StreamId,
    StreamInfo, NS_PER_S, NS_PER_US,
};
use rustc_hash::FxHashMap;

/// The registry entry of `ishare`.
pub const SPEC: SchedulerSpec = SchedulerSpec {
    name: "ishare",
    summary: "iShare (paper 003): blkio-like weight-proportional VM slices; DyIso ends idle slices early when the disk is underloaded",
    params: PARAMS,
    stream_attrs: &[StreamAttr::weight(
        "proportional-share weight of the VM: its slice is target_latency·weight/Σweight",
    )],
    build,
};

static PARAMS: &[ParamSpec] = &[
    ParamSpec::int(
        "target_latency",
        300.0,
        "ms",
        1.0,
        1e6,
        "length of a round of slices; a VM's slice is target_latency·w/Σw (Linux CFQ cfq_target_latency = 300 ms, blkio group_slice)",
    ),
    ParamSpec::int(
        "group_idle",
        8.0,
        "ms",
        0.0,
        1e6,
        "longest wait for the served VM's next request when its slice is kept (Linux CFQ group_idle = 8 ms, the idling blkio applies to a VM's group)",
    ),
    ParamSpec::int(
        "fifo_expire_sync",
        125.0,
        "ms",
        1.0,
        1e7,
        "a sync request older than this goes before the sector order within its VM (Linux CFQ fifo_expire_sync = 125 ms)",
    ),
    ParamSpec::int(
        "fifo_expire_async",
        250.0,
        "ms",
        1.0,
        1e7,
        "the same for async requests (Linux CFQ fifo_expire_async = 250 ms)",
    ),
    ParamSpec::int(
        "quantum",
        8.0,
        "requests",
        1.0,
        4096.0,
        "most requests of the served VM in flight at once (Linux CFQ quantum = 8)",
    ),
    ParamSpec::flag(
        "dyiso",
        true,
        "run DyIso (paper 003 Alg. 1) in the underloaded state; 0 gives strict proportional slices always (blkio behaviour)",
    ),
    ParamSpec::flag(
        "dyiso_gap",
        true,
        "Alg. 1 line 12 compares VM_j.await with VM_n.thinkt + VM_n.await (the served VM's arrival interval plus service time, as §4.1 explains the line) instead of VM_n.await alone",
    ),
    ParamSpec::flag(
        "switch_cost",
        true,
        "Alg. 1 judges VM_j by its service time when switched to (Eq. 2 over its requests that followed another VM's at the disk; before any, await + the device's seek estimate + half a revolution) instead of its plain await",
    ),
    ParamSpec::real(
        "dyiso_a",
        0.875,
        "ratio",
        0.0,
        0.999,
        "Eq. 2–3 a: decay of the history; the newest interval weighs 1−a (paper 003 §4.1: a = 7/8)",
    ),
    ParamSpec::real(
        "dyiso_b",
        32.0,
        "weight",
        1e-6,
        1e9,
        "Eq. 2–3 b: weight of the newest interval before normalisation (paper 003 §4.1: b = 32)",
    ),
    ParamSpec::real(
        "dyiso_c",
        1024.0,
        "us",
        0.0,
        1e12,
        "Eq. 2–3 c: constant added to the weighted total, in µs·weight (paper 003 §4.1: c = 1024; 4 µs in steady state)",
    ),
];

fn build(p: Params, ctx: &SchedContext) -> Box<dyn Scheduler> {
    Box::new(IShare::new(&p, ctx))
}

/// Why a served VM's slice ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SwitchReason {
    /// The slice ran out.
    SliceExpired,
    /// The VM ran dry and its next request did not come within `group_idle`.
    IdleTimeout,
    /// DyIso, Alg. 1 lines 9–10.
    DyIsoThinkt,
    /// DyIso, Alg. 1 lines 11–15.
    DyIsoAwait,
}

impl SwitchReason {
    const ALL: [SwitchReason; 4] = [
        Self::SliceExpired,
        Self::IdleTimeout,
        Self::DyIsoThinkt,
        Self::DyIsoAwait,
    ];

    /// The name in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SliceExpired => "slice_expired",
            Self::IdleTimeout => "idle_timeout",
            Self::DyIsoThinkt => "dyiso_thinkt",
            Self::DyIsoAwait => "dyiso_await",
        }
    }
}

/// The disk state of §4.2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskState {
    /// Nothing queued and nothing in flight.
    Idle,
    /// Some active VM has no pending request: DyIso applies.
    Underloaded,
    /// Every active VM has pending requests: strict proportional slices.
    Overloaded,
}

#[derive(Debug)]
struct Vm {
    id: StreamId,
    name: String,
    weight: u32,
    queue: SortedFifo,
    in_flight: usize,
    /// Eq. 2, updated at each completion.
    await_: TimeWeightedAvg,
    /// Eq. 3, updated at each arrival.
    thinkt: TimeWeightedAvg,
    /// Eq. 2 over the VM's requests that followed another VM's at the disk:
    /// its service time when the disk switches to it.
    switch_await: TimeWeightedAvg,
    /// Eq. 2 over the others: its service time while it keeps the disk.
    stay_await: TimeWeightedAvg,
    last_arrival: Option<Nanos>,
    last_completion: Option<Nanos>,
    /// The round whose slice the VM holds, the slice (its budget in that
    /// round) and how much of it the VM has used.
    round: Option<u64>,
    budget: Nanos,
    used: Nanos,
    /// Slice time charged to it over the run (see `expire`).
    slice_time: Nanos,
}

impl Vm {
    fn new(info: &StreamInfo) -> Self {
        Vm {
            id: info.id,
            name: info.name.clone(),
            weight: info.weight.max(1),
            queue: SortedFifo::new(),
            in_flight: 0,
            await_: TimeWeightedAvg::default(),
            thinkt: TimeWeightedAvg::default(),
            switch_await: TimeWeightedAvg::default(),
            stay_await: TimeWeightedAvg::default(),
            last_arrival: None,
            last_completion: None,
            round: None,
            budget: 0,
            used: 0,
            slice_time: 0,
        }
    }

    fn backlogged(&self) -> bool {
        !self.queue.is_empty()
    }
}

/// The served VM and its slice.
#[derive(Debug, Clone, Copy)]
struct Active {
    vm: usize,
    slice: Nanos,
    /// Set at the VM's first completion in the slice.
    start: Option<Nanos>,
    /// When the VM became the served VM (Linux CFQ's `dispatch_start`).
    activated: Nanos,
}

impl Active {
    fn end(&self) -> Option<Nanos> {
        self.start.map(|s| s + self.slice)
    }
}

/// The shortest slice (Linux CFQ's `CFQ_MIN_TT`).
const MIN_SLICE: Nanos = 2_000_000;

/// The iShare scheduler (paper 003).
#[derive(Debug)]
pub struct IShare {
    target_latency: Nanos,
    group_idle: Nanos,
    fifo_expire: [Nanos; 2],
    quantum: usize,
    dyiso: bool,
    /// Add the served VM's `thinkt` to its side of Alg. 1 line 12.
    dyiso_gap: bool,
    /// Judge VM_j by the cost of switching to it (see `cost_us`).
    switch_cost: bool,
    w: Weights,
    /// Half a revolution: the expected rotational wait after a seek.
    half_rev_us: f64,
    device: hvio_core::DeviceInfo,
    max_seek_us: f64,
    vms: Vec<Vm>,
    /// Looked up at every hook: FxHash (a multiply per key) rather than
    /// SipHash, whose flooding resistance a VM's id does not need.
    index: FxHashMap<StreamId, usize>,
    /// Dispatch time of each request at the disk, and whether the request
    /// before it at the disk was another VM's (a switch's positioning).
    dispatched_at: FxHashMap<u64, (Nanos, bool)>,
    /// The VM whose request went to the disk last.
    last_vm: Option<usize>,
    active: Option<Active>,
    round: u64,
    head: Sector,
    queued: usize,
    state: DiskState,
    state_since: Nanos,
    state_time: [Nanos; 3],
    state_changes: u64,
    switches: [u64; 4],
    /// Ended slices, for [`Scheduler::take_slices`].
    slice_log: SliceLog,
}

impl IShare {
    /// A scheduler with tunables `p` for the streams and device of `ctx`.
    pub fn new(p: &Params, ctx: &SchedContext) -> Self {
        let mut s = IShare {
            target_latency: p.nanos("target_latency"),
            group_idle: p.nanos("group_idle"),
            fifo_expire: [p.nanos("fifo_expire_sync"), p.nanos("fifo_expire_async")],
            quantum: p.u64("quantum") as usize,
            dyiso: p.flag("dyiso"),
            dyiso_gap: p.flag("dyiso_gap"),
            switch_cost: p.flag("switch_cost"),
            half_rev_us: ctx.device.seek.revolution() as f64 / 2.0 / NS_PER_US as f64,
            device: ctx.device.clone(),
            w: Weights {
                a: p.get("dyiso_a"),
                b: p.get("dyiso_b"),
                c: p.get("dyiso_c"),
            },
            max_seek_us: ctx.device.seek.max_seek_time() as f64 / NS_PER_US as f64,
            vms: Vec::new(),
            index: FxHashMap::default(),
            dispatched_at: FxHashMap::default(),
            last_vm: None,
            active: None,
            round: 0,
            head: 0,
            queued: 0,
            state: DiskState::Idle,
            state_since: 0,
            state_time: [0; 3],
            state_changes: 0,
            switches: [0; 4],
            slice_log: SliceLog::default(),
        };
        for info in &ctx.streams {
            s.set_stream(info);
        }
        s
    }

    /// The current disk state (as of the last call into the scheduler).
    pub fn disk_state(&self) -> DiskState {
        self.state
    }

    /// How many slices ended for `reason`.
    pub fn switches(&self, reason: SwitchReason) -> u64 {
        self.switches[reason as usize]
    }

    /// The served VM's stream, if any.
    pub fn served(&self) -> Option<StreamId> {
        self.active.map(|a| self.vms[a.vm].id)
    }

    fn vm_index(&mut self, id: StreamId) -> usize {
        if let Some(&i) = self.index.get(&id) {
            return i;
        }
        // An unknown stream: default weight, named by its id.
        self.vms.push(Vm::new(&StreamInfo::new(id, format!("stream{id}"))));
        self.index.insert(id, self.vms.len() - 1);
        self.vms.len() - 1
    }

    fn is_active(&self, vm: &Vm, now: Nanos) -> bool {
        vm.backlogged()
            || vm.in_flight > 0
            || vm
                .last_arrival
                .is_some_and(|t| now.saturating_sub(t) < self.target_latency)
    }

    fn classify(&self, now: Nanos) -> DiskState {
        if self.queued == 0 && self.vms.iter().all(|v| v.in_flight == 0) {
            return DiskState::Idle;
        }
        if self.vms.iter().filter(|v| self.is_active(v, now)).all(Vm::backlogged) {
            DiskState::Overloaded
        } else {
            DiskState::Underloaded
        }
    }

    /// Account the time since the last call to the old state; re-detect.
    fn note_state(&mut self, now: Nanos) {
        let since = self.state_since.min(now);
        self.state_time[self.state as usize] += now - since;
        self.state_since = now;
        let state = self.classify(now);
        if state != self.state {
            self.state_changes += 1;
            self.state = state;
        }
    }

    /// What Alg. 1 line 12 adds to the served VM's `await`.
    fn gap_us(&self, i: usize) -> f64 {
        if self.dyiso_gap {
            self.vms[i].thinkt.mean(&self.w).unwrap_or(0.0)
        } else {
            0.0
        }
    }

    /// What Alg. 1 reads as the served VM's `await`: with `switch_cost`, its
    /// service time while it keeps the disk (Eq. 1's `Tservice(R_i)`: its next
    /// request follows its own), else its `await`.
    fn served_await_us(&self, i: usize) -> Option<f64> {
        match self.vms[i].stay_await.mean(&self.w) {
            Some(a) if self.switch_cost => Some(a),
            _ => self.await_us(i),
        }
    }

    fn await_us(&self, i: usize) -> Option<f64> {
        self.vms[i].await_.mean(&self.w)
    }

    /// `target_latency · w / Σw` over the active VMs (and `i` itself).
    fn slice_for(&self, i: usize, now: Nanos) -> Nanos {
        let total: u64 = self
            .vms
            .iter()
            .enumerate()
            .filter(|&(j, v)| j == i || self.is_active(v, now))
            .map(|(_, v)| v.weight as u64)
            .sum();
        let slice = self.target_latency as u128 * self.vms[i].weight as u128 / total.max(1) as u128;
        // At least Linux CFQ's CFQ_MIN_TT (2 ms), the floor of a blkio
        // group's workload slice: weights 1:10000 with target_latency 1 ms
        // gave 100 ns slices, a wake-up every 100 ns while the disk works.
        (slice as Nanos).max(MIN_SLICE)
    }

    /// The VM's pending request nearest the head, and its distance: from
    /// one search of its queue's index, which holds the sectors (its
    /// requests' slots, a cache miss each in a big queue, are not read).
    fn nearest(&self, i: usize) -> Option<(Sector, Sector)> {
        let (before, after) = self.vms[i].queue.around_sectors(self.head);
        let after = after.map(|sector| (sector - self.head, sector));
        let before = before.map(|sector| (self.head - sector, sector));
        after.into_iter().chain(before).min()
    }

    /// Distance from the head to the VM's nearest pending request.
    fn distance(&self, i: usize) -> Sector {
        self.nearest(i).map_or(Sector::MAX, |n| n.0)
    }

    /// What Alg. 1 reads as `VM_j.await` for a VM that could take over: with
    /// `switch_cost`, its service time when the disk switches to it (Eq. 1's
    /// `Tservice(R_j)` from the current head); before it has been switched to,
    /// its `await` plus the device's estimate of the positioning (seek to its
    /// nearest request and half a revolution). Without, its `await`.
    fn cost_us(&self, j: usize) -> Option<f64> {
        let a = self.await_us(j)?;
        if !self.switch_cost {
            return Some(a);
        }
        if let Some(c) = self.vms[j].switch_await.mean(&self.w) {
            return Some(c);
        }
        Some(match self.nearest(j) {
            Some((0, _)) | None => a,
            Some((_, to)) => a + self.device.seek.seek_time(self.head, to) as f64 / NS_PER_US as f64 + self.half_rev_us,
        })
    }

    /// What switching away from the served VM `n` costs it when the disk
    /// comes back (it keeps the rest of its slice, so the disk does come
    /// back): its service time after a switch minus its service time while
    /// it keeps the disk — the locality a switch destroys (§3.3.2: "the
    /// service time of read requests from the same VM is smaller than that
    /// of pending read request from other VMs"). Before `n` has been
    /// switched back to, the device's seek estimate from `j`'s nearest
    /// request back to the head plus half a revolution. Zero without
    /// `switch_cost`.
    fn return_cost_us(&self, n: usize, j: usize) -> f64 {
        if !self.switch_cost {
            return 0.0;
        }
        match (
            self.vms[n].switch_await.mean(&self.w),
            self.vms[n].stay_await.mean(&self.w),
        ) {
            (Some(back), Some(stay)) => (back - stay).max(0.0),
            _ => match self.nearest(j) {
                Some((0, _)) | None => 0.0,
                Some((_, from)) => {
                    self.device.seek.seek_time(from, self.head) as f64 / NS_PER_US as f64 + self.half_rev_us
                }
            },
        }
    }

    /// Alg. 1's `VM_j.await` when `n` is served: with `switch_cost`, the
    /// cost of the switch to `j` and back ([`Self::cost_us`] +
    /// [`Self::return_cost_us`]).
    fn peer_cost_us(&self, n: usize, j: usize) -> Option<f64> {
        self.cost_us(j).map(|c| c + self.return_cost_us(n, j))
    }

    /// Not yet served this round: the VM has slice left in it (a VM whose
    /// slice DyIso ended early keeps the rest for later in the round).
    fn unserved(&self, i: usize) -> bool {
        let vm = &self.vms[i];
        vm.round != Some(self.round) || vm.used < vm.budget
    }

    /// The heaviest backlogged VM not served this round (a new round when none is left).
    fn by_weight(&mut self) -> Option<usize> {
        let pick = |s: &Self| {
            (0..s.vms.len())
                .filter(|&i| s.vms[i].backlogged() && s.unserved(i))
                .max_by_key(|&i| (s.vms[i].weight, std::cmp::Reverse(i)))
        };
        if let Some(i) = pick(self) {
            return Some(i);
        }
        self.round += 1;
        pick(self)
    }

    /// §4.2: after DyIso ends `served`'s slice, a backlogged VM whose await is
    /// not above the served VM's, not served this round, closest to the head.
    fn by_dyiso(&self, served: usize) -> Option<usize> {
        let n_await = self.served_await_us(served);
        let gap = self.gap_us(served);
        (0..self.vms.len())
            .filter(|&j| {
                j != served
                    && self.vms[j].backlogged()
                    && self.unserved(j)
                    && await_wins(n_await, gap, self.peer_cost_us(served, j), self.max_seek_us)
            })
            .min_by_key(|&j| (self.distance(j), j))
    }

    fn expire(&mut self, reason: SwitchReason, now: Nanos) {
        if let Some(a) = self.active.take() {
            // Linux CFQ's charge (`cfq_cfqq_slice_usage`): the time since the
            // slice started at its first completion, at most the slice; a
            // slice that ends before or at its first completion is charged
            // the time since the VM became the served VM, at least 1 ns —
            // otherwise a VM whose slice DyIso ends at every first
            // completion would get its requests served without ever using
            // up its slice.
            let (start, charge) = match a.start {
                Some(s) if s < now => (s, (now - s).min(a.slice)),
                _ => (a.activated, now.saturating_sub(a.activated).max(1)),
            };
            let vm = &mut self.vms[a.vm];
            vm.slice_time += charge;
            vm.used += charge;
            self.switches[reason as usize] += 1;
            let grant = SliceGrant {
                stream: vm.id,
                start,
                length: a.slice,
                used: charge,
            };
            self.slice_log.push(grant);
        }
    }

    fn start_slice(&mut self, i: usize, now: Nanos) -> Active {
        if self.vms[i].round != Some(self.round) {
            let budget = self.slice_for(i, now);
            let vm = &mut self.vms[i];
            vm.round = Some(self.round);
            vm.budget = budget;
            vm.used = 0;
        }
        let vm = &self.vms[i];
        let a = Active {
            vm: i,
            slice: vm.budget.saturating_sub(vm.used).max(1),
            start: None,
            activated: now,
        };
        self.active = Some(a);
        a
    }

    /// Take the served VM's next request: an expired FIFO head, else C-LOOK from the head.
    fn take(&mut self, i: usize, now: Nanos) -> Request {
        let q = &self.vms[i].queue;
        let k = match q.fifo_head() {
            Some((deadline, rq)) if deadline <= now => key(rq),
            _ => key(q
                .at_or_after((self.head, 0))
                .or_else(|| q.first())
                .expect("a backlogged VM")),
        };
        let vm = &mut self.vms[i];
        let rq = vm.queue.remove(k).expect("a queued request");
        vm.in_flight += 1;
        self.queued -= 1;
        self.head = rq.end();
        let crossed = self.last_vm.is_some_and(|v| v != i);
        self.last_vm = Some(i);
        self.dispatched_at.insert(rq.id, (now, crossed));
        rq
    }

    /// Alg. 1 for the served VM `i` with `rest` of its slice left.
    fn run_dyiso(&self, i: usize, rest: Nanos) -> Decision {
        // Only VMs that may take over (not yet served this round, §4.2) count.
        let peers = (0..self.vms.len())
            .filter(|&j| j != i && self.unserved(j))
            .map(|j| Peer {
                pending: self.vms[j].queue.len(),
                await_us: self.peer_cost_us(i, j),
            });
        decide(
            self.vms[i].queue.len(),
            rest as f64 / NS_PER_US as f64,
            self.vms[i].thinkt.mean(&self.w),
            self.served_await_us(i),
            self.gap_us(i),
            peers,
            self.max_seek_us,
        )
    }
}

impl Scheduler for IShare {
    fn name(&self) -> &'static str {
        "ishare"
    }

    fn insert(&mut self, rq: Request, now: Nanos) {
        let i = self.vm_index(rq.stream);
        let vm = &mut self.vms[i];
        // Eq. 3: the interval since the VM's previous arrival, or since its
        // last completion when that came later (until then the VM was
        // waiting for its own requests, not thinking) — sampled only when
        // the VM had nothing queued or in flight: an arrival behind pending
        // requests (a guest sending its next thread's request while the
        // previous one waits at the host) is no pause the disk would idle
        // through, which is all Alg. 1 uses `thinkt` for.
        if vm.queue.is_empty() && vm.in_flight == 0 {
            if let Some(from) = vm.last_arrival.max(vm.last_completion) {
                vm.thinkt
                    .update(now.saturating_sub(from) as f64 / NS_PER_US as f64, &self.w);
            }
        }
        vm.last_arrival = Some(now);
        let expire = self.fifo_expire[if rq.sync { 0 } else { 1 }];
        vm.queue.insert(rq, now.saturating_add(expire));
        self.queued += 1;
        self.note_state(now);
    }

    fn dispatch(&mut self, now: Nanos) -> Dispatch {
        self.note_state(now);
        if self.queued == 0 {
            return Dispatch::Empty;
        }
        // Each pass either returns or ends the served VM's slice; a VM is only
        // chosen when backlogged, so the second pass at the latest returns.
        loop {
            let a = match self.active {
                Some(a) => a,
                None => {
                    let i = self.by_weight().expect("queued > 0 means a backlogged VM");
                    self.start_slice(i, now)
                }
            };
            let end = a.end().unwrap_or(now + a.slice);
            if now >= end {
                self.expire(SwitchReason::SliceExpired, now);
                continue;
            }
            let vm = &self.vms[a.vm];
            if vm.backlogged() {
                if vm.in_flight >= self.quantum {
                    return Dispatch::WaitUntil(end);
                }
                return Dispatch::Request(self.take(a.vm, now));
            }
            if vm.in_flight > 0 {
                // Decide when its requests complete (the paper's t3 in Fig. 3).
                return Dispatch::WaitUntil(end);
            }
            // The served VM has run dry with slice left.
            if self.dyiso && self.state == DiskState::Underloaded {
                let reason = match self.run_dyiso(a.vm, end - now) {
                    Decision::EndThinkt => Some(SwitchReason::DyIsoThinkt),
                    Decision::EndAwait => Some(SwitchReason::DyIsoAwait),
                    Decision::Keep | Decision::NotApplicable => None,
                };
                if let Some(reason) = reason {
                    self.expire(reason, now);
                    let next = self
                        .by_dyiso(a.vm)
                        .or_else(|| self.by_weight())
                        .expect("a backlogged VM");
                    self.start_slice(next, now);
                    continue;
                }
            }
            // Keep the slice: idle for the served VM as blkio does.
            let idle_end = end.min(
                self.vms[a.vm]
                    .last_completion
                    .unwrap_or(now)
                    .saturating_add(self.group_idle),
            );
            if now >= idle_end {
                self.expire(SwitchReason::IdleTimeout, now);
                continue;
            }
            let mut wake = idle_end;
            if self.dyiso {
                if let Some(th) = self.vms[a.vm].thinkt.mean(&self.w) {
                    // Wake when slice_rest falls to thinkt (Alg. 1 line 9 turns true).
                    let t = end.saturating_sub((th * NS_PER_US as f64).ceil() as Nanos);
                    if t > now {
                        wake = wake.min(t);
                    }
                }
            }
            return Dispatch::WaitUntil(wake);
        }
    }

    fn completed(&mut self, rq: &Request, now: Nanos) {
        let i = self.vm_index(rq.stream);
        let dispatched = self.dispatched_at.remove(&rq.id);
        let vm = &mut self.vms[i];
        vm.in_flight = vm.in_flight.saturating_sub(1);
        // Eq. 2: the interval since the VM's previous completion, or since
        // this request's dispatch when the VM had nothing at the disk before.
        if let Some(from) = vm.last_completion.max(dispatched.map(|d| d.0)) {
            let interval = now.saturating_sub(from) as f64 / NS_PER_US as f64;
            vm.await_.update(interval, &self.w);
            // The same average over requests that followed another VM's at
            // the disk, and over those that did not.
            if dispatched.is_some_and(|d| d.1) {
                vm.switch_await.update(interval, &self.w);
            } else {
                vm.stay_await.update(interval, &self.w);
            }
        }
        vm.last_completion = Some(now);
        // The slice starts at the served VM's first completion (as CFQ's):
        // the seek that brought the head to it is not charged to it.
        if let Some(a) = self.active.as_mut() {
            if a.vm == i {
                a.start.get_or_insert(now);
            }
        }
        self.note_state(now);
    }

    fn has_work(&self) -> bool {
        self.queued > 0
    }

    fn queued(&self) -> usize {
        self.queued
    }

    /// The slice in progress ends (as a VM that ran dry); every VM's queue is emptied.
    fn take_queued(&mut self, now: Nanos) -> Option<Vec<Request>> {
        self.expire(SwitchReason::IdleTimeout, now);
        let all: Vec<Request> = self.vms.iter_mut().flat_map(|v| v.queue.take_all()).collect();
        self.queued = 0;
        Some(all)
    }

    fn set_stream(&mut self, info: &StreamInfo) {
        match self.index.get(&info.id) {
            Some(&i) => {
                self.vms[i].weight = info.weight.max(1);
                self.vms[i].name = info.name.clone();
            }
            None => {
                self.vms.push(Vm::new(info));
                self.index.insert(info.id, self.vms.len() - 1);
            }
        }
    }

    fn counters(&self) -> Vec<(String, f64)> {
        let mut out: Vec<(String, f64)> = SwitchReason::ALL
            .iter()
            .map(|&r| (format!("switch.{}", r.as_str()), self.switches[r as usize] as f64))
            .collect();
        out.push(("rounds".into(), self.round as f64));
        out.push(("state.changes".into(), self.state_changes as f64));
        let secs = |t: Nanos| t as f64 / NS_PER_S as f64;
        for (name, st) in [
            ("idle", DiskState::Idle),
            ("underloaded", DiskState::Underloaded),
            ("overloaded", DiskState::Overloaded),
        ] {
            out.push((format!("state.{name}_s"), secs(self.state_time[st as usize])));
        }
        for vm in &self.vms {
            out.push((format!("slice_s.{}", vm.name), secs(vm.slice_time)));
        }
        out
    }

    fn take_slices(&mut self) -> Vec<SliceGrant> {
        self.slice_log.take()
    }

    fn logs_slices(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests;
