//! Pregather (paper 000: Ling, Ibrahim, Wu, Jin, *Spatial Locality Aware Disk
//! Scheduling in Virtualized Environment*, IEEE TPDS 2015).
//!
//! A host-level, non-work-conserving scheduler that treats each stream as a
//! VM and, without looking inside it, predicts where the VM's next requests
//! will land and waits for them instead of seeking away:
//!
//! - [`vnavigator`]: one prediction model per VM (§3, Eq. 1–7, Lemma 1);
//! - [`spla`]: the spatial-locality-aware heuristic with its coarse and fine
//!   timers (§4.1, Algorithms 1–2), seek costs from the device's seek curve;
//! - [`timeslice`]: adaptive time slices from the RI and SI indicators
//!   (§4.2, Eq. 8);
//! - this module: per-VM sorted and EDF queues, round-robin service of VMs
//!   ordered by their distance to the head, deadlines (§4.3).
//!
//! # Reading the paper: choices where the text is garbled or silent
//!
//! Each is a named parameter (see [`PARAMS`]) or stated here.
//!
//! 1. **Prediction windows are wall-clock windows** of `window` ms, numbered
//!    from time 0; `T − T_r` in Eq. 1 counts whole windows, so densities
//!    decay by `λ` once per window. (The text says the windows divide "the
//!    allocated serving time of a VM"; it never says time outside a VM's
//!    slice stops counting, and Lemma 1's proof needs only window indices.)
//! 2. **`P(R)` is the first sector** of a request; a request counts in one
//!    zone only.
//! 3. **Eq. 7 averages the `m − 1` intervals between a zone's `m` accesses**
//!    (the printed recurrence starts from an undefined `R_j^0`). A zone with
//!    a single access has no interval, so a unit built on it predicts nothing
//!    and arms no fine timer. **An arrival that follows a completion in its
//!    zone counts its interval from that completion** (`interval_from_completion
//!    = 1`, default): the fine timer is armed at a completion (Algorithm 1)
//!    and `ST(U_i)` is compared with a seek (Algorithm 2), so the quantity
//!    that matters is how soon after the head leaves the zone its next request
//!    comes. Counted from the previous arrival (`= 0`, Eq. 7 literally), a
//!    stream with one request in flight measures the scheduler's own pacing:
//!    when Pregather alternates between two such streams, each zone's interval
//!    is two service times, longer than the seek between them, so Algorithm 2
//!    keeps choosing the seek and never waits (measured in `pregather-fig5`).
//!    With bursts of requests (several in flight) both clocks agree.
//! 4. **Faded zones are forgotten** once their density falls below
//!    `forget_density` (default 1/64: six windows without access at λ = 2).
//!    The paper keeps "the historical information of the accessed zones"; a
//!    zone this faded is below Eq. 4's cut-off (`D ≥ 1`) and can no longer be
//!    dense, so only its running mean interval is lost. This keeps memory
//!    proportional to the zones touched recently, not to the disk.
//! 5. **Algorithm 2's arrival branch under the fine timer dispatches the new
//!    request** (`newR`): the printed `dispatch_req = PR` contradicts the
//!    prose of §4.1 ("waits for a new request whose LBA belongs to SR(U_i)")
//!    and the coarse branch. Likewise the printed
//!    `SeekTime(P(newR), P(PR))` is read as the seek from the head,
//!    `SeekTime(P(LR), P(newR))`. hvio re-evaluates Algorithm 2 whenever the
//!    driver calls `dispatch` (on every arrival and completion), so `PR` is
//!    re-chosen as the closest pending request and, under the fine timer, any
//!    pending request of the VM inside the unit is accepted.
//! 6. **Eq. 8 never shrinks a slice because SI is high**: read literally,
//!    `TS⁰·(SI − 55 %)·10` gives a VM with SI = 56 % a 2 ms slice and one
//!    with SI = 54 % the full `TS⁰`, while the text says the slice "is
//!    increased with the growth of SI". With `si_slice_floor = 1` (default)
//!    the first case is `max(TS⁰, TS⁰·(SI − 55 %)·10)`; `si_slice_floor = 0`
//!    gives the literal formula.
//! 7. **`AvgD` and `AvgT`** (average LBA distance and arrival interval
//!    between consecutive requests of a VM) are decaying averages with weight
//!    `avg_weight` per sample (1/8, the weight of Linux AS's and CFQ's
//!    think-time and seek means), so they follow phase changes; the paper
//!    only says "average". **`SI`** is the fraction of zero seek distances
//!    (a dispatch starting exactly where the VM's previous dispatch ended)
//!    over the VM's last `si_window` dispatches.
//! 8. **Halving an idle slice** ("when the block layer does not have pending
//!    requests from a served VM and the time slice is not used up, the
//!    length of the time slice is reduced by half") is applied once per slice,
//!    by `empty_slice_factor`, when a dispatch leaves the served VM with
//!    nothing queued; Eq. 8 is re-evaluated after every dispatch (§4.3).
//! 9. **A slice starts when its VM is selected.** VMs are served round-robin:
//!    each backlogged VM once per round, the next one being the unserved VM
//!    whose closest pending request is nearest to the head (§4.3); a new round
//!    does not start with the VM just served when another is backlogged. A
//!    VM's turn ends when its slice is used, or when it has nothing pending
//!    and no coarse timer waits for it. When the coarse timer lets a request
//!    of another VM through (its seek is cheaper than waiting), that VM's
//!    slice begins.
//! 10. **Deadlines** are CFQ's FIFO expiries (sync 125 ms, async 250 ms), and
//!     so is the rule for honouring them: the served VM's expired EDF head is
//!     dispatched at once, at most `fifo_checks_per_slice` times per slice
//!     (1, as in CFQ's `cfq_check_fifo`; 0 = at every dispatch, the literal
//!     reading of §4.3). With slices of hundreds of ms, every request of a
//!     waiting VM has expired by the time its slice starts; checking at every
//!     dispatch would serve whole slices in FIFO order and never reach the
//!     SPLA heuristic. A pending request's deadline also ends a wait for it
//!     (Algorithm 2).
//! 11. **`P(LR)`**: the unit lookup of Algorithm 1 uses the completed
//!     request's first sector (footnote 6: "the LBA of a completed request is
//!     the position of disk head"); seek estimates and distances start from
//!     its end, where the head really is. A timer includes its last instant:
//!     with a deterministic think time equal to `ST`, the request arriving
//!     exactly at `ST` counts as in time (the driver is woken 1 ns later).
//!     Timers are armed only when nothing
//!     else is in flight (with a device queue deeper than 1 the scheduler stays
//!     work-conserving while requests are outstanding).
//! 12. **`SeekTime` in Algorithm 2 is a positioning time**: the device
//!     model's seek curve plus half a revolution (the mean rotational delay)
//!     for any move off the current position (`seek_adds_rotation = 1`). The
//!     heuristic weighs waiting against "the cost of disk seeking" (§4.1); on a
//!     rotating disk a request that does not continue where the head is pays
//!     the rotation as well as the seek, and a short seek alone (under a
//!     millisecond) would make almost every waiting interval look too long.
//!     `0` uses the seek curve alone.
//! 13. **RI > 1** cannot happen for a VM whose image is one contiguous region
//!     (every distance is smaller than the image); the case is implemented for
//!     images whose region is unknown and learnt from the requests' extent.
//! 14. **The served VM's "closest pending request" (`PR`) is the nearest in
//!     either direction** (the paper's word, and the default:
//!     `back_seek_penalty = 1` with an unlimited `back_seek_max`). CFQ's
//!     sorted-queue order (`cfq_choose_req`: the first request ahead of the
//!     head unless one behind by at most `back_seek_max` is closer at
//!     `back_seek_penalty`× its distance; C-LOOK wrap) is available with
//!     CFQ's values, 2 and 16384 KiB. Measured on `pregather-table3` and
//!     `-table4` (docs/pregather.md): with guests that follow sysbench
//!     through a page cache, nearest-first is fastest on 12 of 14 Table 3
//!     applications against 4 with CFQ's order, and at least as good in every
//!     other setup. (An earlier guest model, which fsynced only the file just
//!     written and flushed the drive cache on every fsync, favoured CFQ's
//!     order: nearest-first starved the guest's journal commits there.)
//!     Requests of other VMs, the VM order of a round, and the fine timer's
//!     unit lookup use plain distance.
//! 15. **Sync before async within the served VM** (`async_service = 1`,
//!     the default). §4.3 gives each VM a sorted queue "similar to CFQ".
//!     Linux 2.6.18's CFQ (`block/cfq-iosched.c`) never serves a queue's
//!     async requests ahead of its sync ones by position: `cfq_choose_req`
//!     returns the sync one of two candidates before it compares sectors.
//!     At a Xen host this matters because 2.6.18's O_DIRECT writes from
//!     tapdisk carry no sync flag (`WRITE_ODIRECT` came in 2.6.29), so all
//!     of a VM's writes are async there. With `async_service = 1` the served
//!     VM's `PR` is chosen among its sync requests while it has any, then
//!     among the rest. The fine timer's in-unit request, the EDF queue and
//!     the VM order do not look at the flag. `async_service = 0` is §4.3 as
//!     printed: one position order for both kinds.
//!     `async_service = 2` is CFQ's other half: `cfq_queue_pid` sends every
//!     process's async writes to one shared queue (`CFQ_KEY_ASYNC`). That
//!     queue takes part in the round like a VM, with a slice of
//!     `slice_async` (`cfq_slice_async`, 40 ms) ended after `slice_async_rq`
//!     dispatches (`cfq_prio_to_maxrq`: 16 at the default priority), and no
//!     timer is ever armed for it (`cfq_arm_slice_timer` only idles on
//!     `cfq_cfqq_class_sync` queues). The VMs' vNavigators and statistics
//!     still see their own writes. Measured in docs/pregather.md: mode 1 wins
//!     as many or more Table 3 rows than mode 0 in every guest setup and
//!     keeps the four-VM goals; mode 2 drops the blktap four-VM total to
//!     1.15× CFQ, below the 1.3× goal.
//! 16. **A run behind the head is entered at its top** (the default). With
//!     nearest first (choice 14), a head that comes from above to a run of
//!     contiguous pending requests (a guest's journal commits at the start of
//!     its image, sorted write-back) reaches the run's last request first and
//!     then serves the run downwards, each step a short backward seek.
//!     `back_to_run_start = 1` (a probe) takes such a run from its first
//!     request instead, as the one request a Linux elevator would have merged
//!     it into (hvio's host merges only on the blktap path). It raises the
//!     four-VM share of dispatches starting where the previous one ended
//!     from 39.8 % to 48.6 % (CFQ: 45.4 %; blktrace's btt already counts a
//!     run served downwards as zero seeks, 47.4 % by default) but makes
//!     no run faster: on a drive without write cache, with one request at a
//!     time, a zero-distance write waits nearly a whole revolution (the
//!     command overhead lets its sector pass), and a backward step of two
//!     requests a revolution less their transfer. It loses page-cache
//!     Table 3 rows (12 of 14 to 5) and is not the default (measured in
//!     docs/pregather.md).
//! 17. **A device queue deeper than one** (NCQ): the paper does not say
//!     how Pregather feeds one. Pregather is built into 2.6.18's CFQ, whose
//!     `cfq_select_queue` keeps the active queue while it has requests in
//!     the driver and dispatches nothing else meanwhile, and whose
//!     `cfq_completed_request` idles on the completion of the active queue's
//!     last one. hvio does the same: the served VM's slice does not end while
//!     its dispatched requests are in the device, and Algorithm 1 runs when
//!     the last of them completes, whatever other VMs still have there
//!     (before, it ran only when the device had nothing in flight, which on
//!     a deep queue kept under load is never, and the slice passed to the
//!     next VM as soon as the served one had nothing queued). At depth 1
//!     nothing changes: the device takes a request only when idle.

pub mod spla;
pub mod timeslice;
pub mod vnavigator;

use super::util::{back_mergeable, key, SortKey, SortedFifo};
use super::SchedulerSpec;
use hvio_core::{
    Dispatch, Nanos, ParamSpec, Params, Request, RequestId, SchedContext, Scheduler, Sector, SeekModel, SliceGrant,
    SliceLog, StreamId, StreamInfo,
};
use spla::{ArmInput, Timer};
use std::collections::BTreeSet;
use std::sync::Arc;
use timeslice::{Locality, SliceParams};
use vnavigator::{NavParams, VNavigator};

/// The registry entry of `pregather`.
pub const SPEC: SchedulerSpec = SchedulerSpec {
    name: "pregather",
    summary:
        "Pregather (paper 000): vNavigator zone-density prediction, SPLA coarse/fine timers, adaptive VM time slices",
    params: PARAMS,
    stream_attrs: &[],
    build,
};

/// Pregather's tunables with the paper's defaults.
pub static PARAMS: &[ParamSpec] = &[
    ParamSpec::int(
        "zone_sectors",
        2000.0,
        "sectors",
        1.0,
        1e12,
        "B: zone size of the vNavigator (§3, §5.1 picks 2000)",
    ),
    ParamSpec::real(
        "lambda",
        2.0,
        "ratio",
        1.000001,
        1e6,
        "λ > 1: density decay per prediction window (Eq. 1, §5.1)",
    ),
    ParamSpec::real(
        "window",
        20.0,
        "ms",
        0.001,
        1e6,
        "length of a prediction window (§5.1: 20 ms)",
    ),
    ParamSpec::real(
        "slice_initial",
        200.0,
        "ms",
        0.001,
        1e6,
        "TS⁰: the initial time slice of a VM (§4.2, §5.2)",
    ),
    ParamSpec::real(
        "si_threshold",
        0.55,
        "ratio",
        0.0,
        1.0,
        "SI above which a VM's slice grows (Eq. 8: 55 %)",
    ),
    ParamSpec::real(
        "si_scale",
        10.0,
        "ratio",
        0.0,
        1e3,
        "factor of Eq. 8's first case, TS⁰·(SI − threshold)·scale",
    ),
    ParamSpec::flag(
        "si_slice_floor",
        true,
        "Eq. 8's first case never goes below TS⁰ (module doc, choice 6)",
    ),
    ParamSpec::real(
        "empty_slice_factor",
        0.5,
        "ratio",
        0.001,
        1.0,
        "slice factor when the served VM runs out of requests with slice left (§4.2)",
    ),
    ParamSpec::int(
        "si_window",
        100.0,
        "requests",
        1.0,
        1e6,
        "dispatches of a VM over which SI is measured",
    ),
    ParamSpec::real(
        "avg_weight",
        0.125,
        "ratio",
        0.0001,
        1.0,
        "weight of a new sample in the AvgD and AvgT averages",
    ),
    ParamSpec::flag(
        "seek_adds_rotation",
        true,
        "SeekTime(P(LR), P(PR)) adds half a revolution to the seek curve for a non-zero move (module doc, choice 12)",
    ),
    ParamSpec::flag(
        "interval_from_completion",
        true,
        "ZT and AvgT count from the last completion when one followed the last arrival (module doc, choice 3)",
    ),
    ParamSpec::real(
        "forget_density",
        1.0 / 64.0,
        "ratio",
        1e-12,
        1.0,
        "zones whose density decays below this are forgotten",
    ),
    ParamSpec::int(
        "fifo_expire_sync",
        125.0,
        "ms",
        1.0,
        1e7,
        "deadline of a sync request (CFQ's, §4.3)",
    ),
    ParamSpec::int(
        "fifo_expire_async",
        250.0,
        "ms",
        1.0,
        1e7,
        "deadline of an async request (CFQ's, §4.3)",
    ),
    ParamSpec::int(
        "back_seek_max",
        1e9,
        "KiB",
        0.0,
        1e9,
        "longest backward move the served VM may make (default: no limit; CFQ's 16384; choice 14)",
    ),
    ParamSpec::int(
        "back_seek_penalty",
        1.0,
        "ratio",
        1.0,
        1e6,
        "a backward move counts this many times its distance (default 1: nearest first; CFQ's 2; choice 14)",
    ),
    ParamSpec::flag(
        "back_to_run_start",
        false,
        "probe: a PR behind the head is entered at the first request of the contiguous pending run ending at it, the request the host's elevator would have merged them into (choice 16)",
    ),
    ParamSpec::int(
        "fifo_checks_per_slice",
        1.0,
        "requests",
        0.0,
        1e6,
        "expired EDF heads served per slice (CFQ: 1; 0 = at every dispatch)",
    ),
    ParamSpec::int(
        "async_service",
        1.0,
        "mode",
        0.0,
        2.0,
        "async requests (choice 15): 0 = in the VM's queue like sync ones (§4.3); 1 = after the VM's sync ones (2.6.18 CFQ's cfq_choose_req); 2 = in one shared async queue with its own slice (CFQ's CFQ_KEY_ASYNC)",
    ),
    ParamSpec::int(
        "slice_async",
        40.0,
        "ms",
        1.0,
        1e6,
        "slice of the shared async queue (async_service = 2; CFQ's cfq_slice_async)",
    ),
    ParamSpec::int(
        "slice_async_rq",
        16.0,
        "requests",
        1.0,
        1e6,
        "dispatches per slice of the shared async queue (async_service = 2; 2.6.18 CFQ's cfq_prio_to_maxrq at the default priority)",
    ),
];

/// How Pregather queues and serves async requests (`async_service`, choice 15).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AsyncService {
    /// One sorted queue per VM, sync and async mixed (§4.3 as printed).
    Mixed,
    /// The served VM's sync requests before its async ones (`cfq_choose_req`).
    SyncFirst,
    /// Every VM's async requests in one queue with its own slice (`CFQ_KEY_ASYNC`).
    SharedQueue,
}

/// The stream id of the shared async queue (`async_service = 2`).
pub const ASYNC_QUEUE: StreamId = StreamId::MAX;

fn build(p: Params, ctx: &SchedContext) -> Box<dyn Scheduler> {
    Box::new(Pregather::new(&p, ctx))
}

/// A VM's sorted queue and EDF queue (§4.3): its sync and its async
/// requests each in a [`SortedFifo`] of their own (sector order and
/// deadline order, O(log n) without a node per request). A request is in
/// one index only, so an arrival or a dispatch updates one; the few
/// questions about both kinds (the nearest request to the head, the EDF
/// head, a run) ask both and keep the answer in sector or deadline order.
#[derive(Debug, Default, Clone)]
struct VmQueue {
    /// The sync requests (choice 15).
    sync_rqs: SortedFifo,
    /// The other requests.
    async_rqs: SortedFifo,
}

/// The earlier of two optional keys or values (either may be missing).
fn earlier<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) | (None, x) => x,
    }
}

impl VmQueue {
    fn insert(&mut self, rq: Request, deadline: Nanos) {
        if rq.sync {
            self.sync_rqs.insert(rq, deadline);
        } else {
            self.async_rqs.insert(rq, deadline);
        }
    }

    fn remove(&mut self, k: SortKey) -> Request {
        self.sync_rqs
            .remove(k)
            .or_else(|| self.async_rqs.remove(k))
            .expect("dispatching a queued request")
    }

    fn get(&self, k: SortKey) -> Option<&Request> {
        self.sync_rqs.get(k).or_else(|| self.async_rqs.get(k))
    }

    fn is_empty(&self) -> bool {
        self.sync_rqs.is_empty() && self.async_rqs.is_empty()
    }

    fn has_sync(&self) -> bool {
        !self.sync_rqs.is_empty()
    }

    /// Remove every request, in sector order.
    fn take_all(&mut self) -> Vec<Request> {
        let mut all = self.sync_rqs.take_all();
        all.extend(self.async_rqs.take_all());
        all.sort_unstable_by_key(key);
        all
    }

    /// The keys of the last request before `k` and of the first at or
    /// after it, of either kind.
    fn around_keys(&self, k: SortKey) -> (Option<SortKey>, Option<SortKey>) {
        let (sb, sa) = self.sync_rqs.around_keys(k);
        let (ab, aa) = self.async_rqs.around_keys(k);
        (sb.max(ab), earlier(sa, aa))
    }

    /// Grow the queued request nearest below `rq` by `rq.sectors` when
    /// [`back_mergeable`] allows it; it keeps its key and deadline.
    fn back_merge(&mut self, rq: &Request, max_sectors: u32) -> Option<RequestId> {
        let below = (rq.sector, 0);
        let (sync_prev, async_prev) = (self.sync_rqs.around_keys(below).0, self.async_rqs.around_keys(below).0);
        match sync_prev.max(async_prev) {
            None => None,
            Some(_) if sync_prev > async_prev => self.sync_rqs.back_merge(rq, max_sectors),
            Some(_) => self.async_rqs.back_merge(rq, max_sectors),
        }
    }

    fn edf_head(&self) -> Option<(Nanos, SortKey)> {
        let head = |q: &SortedFifo| q.fifo_head().map(|(dl, rq)| (dl, rq.id, key(rq)));
        earlier(head(&self.sync_rqs), head(&self.async_rqs)).map(|(dl, _, k)| (dl, k))
    }

    fn deadline(&self, k: SortKey) -> Nanos {
        self.sync_rqs
            .deadline(k)
            .or_else(|| self.async_rqs.deadline(k))
            .expect("a queued request")
    }

    /// The pending request nearest to `head` with its first sector in
    /// `[lo, hi)`, and its distance (ties go forward).
    fn nearest_in(&self, lo: Sector, hi: Sector, head: Sector) -> Option<(SortKey, Sector)> {
        let split = head.clamp(lo, hi);
        let (back, fwd) = self.around_keys((split, 0));
        let fwd = fwd.filter(|k| k.0 < hi);
        let back = back.filter(|k| k.0 >= lo);
        match (fwd, back) {
            (Some(f), Some(b)) => {
                let (df, db) = (f.0.abs_diff(head), b.0.abs_diff(head));
                Some(if db < df { (b, db) } else { (f, df) })
            }
            (Some(k), None) | (None, Some(k)) => Some((k, k.0.abs_diff(head))),
            (None, None) => None,
        }
    }

    /// The first request of the run of pending requests that continue one
    /// another ([`back_mergeable`], size aside) and end with `key`, going no
    /// lower than `lo`; with `sync_only`, among the sync requests (choice 16).
    fn run_start(&self, k: SortKey, lo: Sector, sync_only: bool) -> SortKey {
        let mut cur = k;
        loop {
            let rq = self.get(cur).expect("a queued request");
            let prev = if sync_only {
                self.sync_rqs.around_keys((cur.0, 0)).0
            } else {
                self.around_keys((cur.0, 0)).0
            };
            match prev {
                Some(p) if p.0 >= lo && back_mergeable(self.get(p).expect("a queued request"), rq, u32::MAX) => cur = p,
                _ => return cur,
            }
        }
    }

    fn nearest(&self, head: Sector) -> Option<(SortKey, Sector)> {
        self.nearest_in(0, Sector::MAX, head)
    }

    /// The served VM's next request by position: the first at or after the
    /// head, unless one behind by at most `back_max` sectors is closer at
    /// `penalty`× its distance; with nothing ahead or close behind, the
    /// lowest (a C-LOOK wrap). Penalty 1 without a limit is nearest first
    /// (ties go forward); CFQ's values give its `cfq_choose_req`. With
    /// `sync_first`, only the sync requests compete while there are any
    /// (`cfq_choose_req`'s first test; choice 15).
    fn elevator(&self, head: Sector, back_max: Sector, penalty: u64, sync_first: bool) -> Option<SortKey> {
        if sync_first && self.has_sync() {
            let q = &self.sync_rqs;
            let (back, fwd) = q.around_keys((head, 0));
            return elevator_pick(fwd, back, || q.first_key(), head, back_max, penalty);
        }
        let (back, fwd) = self.around_keys((head, 0));
        let lowest = || earlier(self.sync_rqs.first_key(), self.async_rqs.first_key());
        elevator_pick(fwd, back, lowest, head, back_max, penalty)
    }
}

/// [`VmQueue::elevator`]'s choice between `fwd` (the first key at or after
/// `head`) and `back` (the last key before it); `lowest` is the wrap.
fn elevator_pick(
    fwd: Option<SortKey>,
    back: Option<SortKey>,
    lowest: impl FnOnce() -> Option<SortKey>,
    head: Sector,
    back_max: Sector,
    penalty: u64,
) -> Option<SortKey> {
    let back = back.filter(|b| b.0 + back_max >= head);
    match (fwd, back) {
        (Some(f), Some(b)) => Some(if (head - b.0).saturating_mul(penalty) < f.0 - head {
            b
        } else {
            f
        }),
        (Some(k), None) | (None, Some(k)) => Some(k),
        (None, None) => lowest(),
    }
}

/// The VMs (and the shared async queue) by stream id, in id order: the
/// order rounds, ties between VMs and counters follow. Every hook looks a
/// VM up several times, so ids below [`DIRECT_IDS`] find their VM through a
/// table, one load, where a search of an ordered map compares keys with
/// branches a processor cannot predict (VM ids come in random order).
#[derive(Debug, Default, Clone)]
struct VmTable {
    /// Ids in increasing order, with their VMs at the same places.
    ids: Vec<StreamId>,
    vms: Vec<Vm>,
    /// `place[id]`: one more than the id's place in `vms` (0: none), for
    /// ids below [`DIRECT_IDS`].
    place: Vec<u32>,
}

/// Stream ids below this are looked up through [`VmTable::place`]; others
/// (the shared async queue's) by a binary search.
const DIRECT_IDS: StreamId = 1 << 12;

impl VmTable {
    fn place_of(&self, id: StreamId) -> Option<usize> {
        match self.place.get(id as usize) {
            Some(&p) => (p as usize).checked_sub(1),
            None => self.ids.binary_search(&id).ok(),
        }
    }

    fn get(&self, id: &StreamId) -> Option<&Vm> {
        self.place_of(*id).map(|i| &self.vms[i])
    }

    fn get_mut(&mut self, id: &StreamId) -> Option<&mut Vm> {
        self.place_of(*id).map(|i| &mut self.vms[i])
    }

    fn contains_key(&self, id: &StreamId) -> bool {
        self.place_of(*id).is_some()
    }

    /// VM `id`, made by `new` if it is not there yet.
    fn get_or_insert_with(&mut self, id: StreamId, new: impl FnOnce() -> Vm) -> &mut Vm {
        let i = match self.place_of(id) {
            Some(i) => i,
            None => {
                let i = self.ids.partition_point(|&x| x < id);
                self.ids.insert(i, id);
                self.vms.insert(i, new());
                if id < DIRECT_IDS && self.place.len() <= id as usize {
                    self.place.resize(id as usize + 1, 0);
                }
                for (j, &x) in self.ids.iter().enumerate().skip(i) {
                    if let Some(p) = self.place.get_mut(x as usize) {
                        *p = j as u32 + 1;
                    }
                }
                i
            }
        };
        &mut self.vms[i]
    }

    /// (id, VM) in id order.
    fn iter(&self) -> impl Iterator<Item = (&StreamId, &Vm)> + '_ {
        self.ids.iter().zip(&self.vms)
    }

    fn values_mut(&mut self) -> impl Iterator<Item = &mut Vm> + '_ {
        self.vms.iter_mut()
    }
}

impl std::ops::Index<&StreamId> for VmTable {
    type Output = Vm;

    fn index(&self, id: &StreamId) -> &Vm {
        self.get(id).expect("a known VM")
    }
}

#[derive(Debug, Clone)]
struct Vm {
    name: String,
    region: Option<(Sector, Sector)>,
    queue: VmQueue,
    nav: VNavigator,
    loc: Locality,
    /// Slices granted so far and their lengths' sum (`slices.<vm>`,
    /// `slice_mean_ms.<vm>`); each slice itself goes to `slice_log`.
    slices: u64,
    granted: Nanos,
    /// Requests dispatched from this queue and not completed.
    in_flight: usize,
}

#[derive(Debug, Clone, Copy)]
struct Active {
    vm: StreamId,
    start: Nanos,
    len: Nanos,
    halved: bool,
    /// Expired EDF heads served in this slice.
    fifo_served: u64,
    /// Requests dispatched in this slice.
    dispatched: u64,
}

impl Active {
    fn end(&self) -> Nanos {
        self.start.saturating_add(self.len)
    }
}

#[derive(Debug, Default, Clone, Copy)]
struct Stats {
    waits_started: u64,
    waits_succeeded: u64,
    waits_timed_out: u64,
    waits_deadline: u64,
    waits_slice_end: u64,
    coarse_armed: u64,
    fine_armed: u64,
    deadline_dispatches: u64,
    dispatches: u64,
    slices: u64,
}

/// Why a request is dispatched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Why {
    /// No timer armed.
    Plain,
    /// It meets the armed timer's condition (Algorithm 2).
    Suitable,
    /// Its deadline has passed.
    Deadline,
}

/// The Pregather scheduler.
pub struct Pregather {
    nav: NavParams,
    slice: SliceParams,
    empty_factor: f64,
    si_window: usize,
    avg_weight: f64,
    /// FIFO expiry: [async, sync].
    expire: [Nanos; 2],
    /// Expired EDF heads a slice may serve (0 = unlimited).
    fifo_checks: u64,
    back_max: Sector,
    back_penalty: u64,
    /// A backward PR starts at its run's first request (choice 16).
    run_start: bool,
    /// Where async requests queue (choice 15).
    async_service: AsyncService,
    /// Slice and dispatch budget of the shared async queue.
    slice_async: Nanos,
    slice_async_rq: u64,
    seek: Arc<dyn SeekModel>,
    /// Add half a revolution to a non-zero seek estimate.
    seek_adds_rotation: bool,
    vms: VmTable,
    active: Option<Active>,
    /// VMs served in the current round.
    round: BTreeSet<StreamId>,
    last_served: Option<StreamId>,
    timer: Option<Timer>,
    /// A `WaitUntil` was returned for the armed timer.
    waiting: bool,
    /// Where the head is (or will be, once outstanding requests finish).
    head: Sector,
    in_flight: usize,
    queued: usize,
    stats: Stats,
    /// Ended slices not yet taken (the slice-over-time view of Fig. 7).
    slice_log: SliceLog,
}

impl Pregather {
    /// A scheduler with tunables `p` for the streams and device of `ctx`.
    pub fn new(p: &Params, ctx: &SchedContext) -> Self {
        let mut s = Pregather {
            nav: NavParams {
                zone_sectors: p.u64("zone_sectors"),
                lambda: p.get("lambda"),
                window: p.nanos("window").max(1),
                forget_density: p.get("forget_density"),
                interval_from_completion: p.flag("interval_from_completion"),
            },
            slice: SliceParams {
                initial: p.nanos("slice_initial").max(1),
                si_threshold: p.get("si_threshold"),
                si_scale: p.get("si_scale"),
                si_floor: p.flag("si_slice_floor"),
            },
            empty_factor: p.get("empty_slice_factor"),
            si_window: p.u64("si_window") as usize,
            avg_weight: p.get("avg_weight"),
            expire: [p.nanos("fifo_expire_async"), p.nanos("fifo_expire_sync")],
            fifo_checks: p.u64("fifo_checks_per_slice"),
            back_max: p.u64("back_seek_max").saturating_mul(2),
            back_penalty: p.u64("back_seek_penalty"),
            run_start: p.flag("back_to_run_start"),
            async_service: match p.u64("async_service") {
                0 => AsyncService::Mixed,
                1 => AsyncService::SyncFirst,
                _ => AsyncService::SharedQueue,
            },
            slice_async: p.nanos("slice_async").max(1),
            slice_async_rq: p.u64("slice_async_rq").max(1),
            seek: ctx.device.seek.clone(),
            seek_adds_rotation: p.flag("seek_adds_rotation"),
            vms: VmTable::default(),
            active: None,
            round: BTreeSet::new(),
            last_served: None,
            timer: None,
            waiting: false,
            head: 0,
            in_flight: 0,
            queued: 0,
            stats: Stats::default(),
            slice_log: SliceLog::default(),
        };
        for info in &ctx.streams {
            s.set_stream(info);
        }
        s
    }

    fn vm_mut(&mut self, id: StreamId) -> &mut Vm {
        let (nav, w, si) = (self.nav, self.avg_weight, self.si_window);
        let from_completion = nav.interval_from_completion;
        self.vms.get_or_insert_with(id, || Vm {
            name: if id == ASYNC_QUEUE {
                "async".to_string()
            } else {
                format!("stream{id}")
            },
            region: None,
            queue: VmQueue::default(),
            nav: VNavigator::new(nav),
            loc: Locality::new(w, si, from_completion),
            in_flight: 0,
            slices: 0,
            granted: 0,
        })
    }

    /// `size(VM_x)`: the image's length, or the extent its requests covered.
    fn image(vm: &Vm) -> Sector {
        vm.region.map_or_else(|| vm.loc.extent(), |(_, len)| len).max(1)
    }

    /// Eq. 8 for `vm`, times `empty_slice_factor` once halved.
    fn slice_for(&self, vm: StreamId, halved: bool) -> Nanos {
        if vm == ASYNC_QUEUE {
            return self.slice_async;
        }
        let v = &self.vms[&vm];
        let ts = timeslice::slice_length(&self.slice, v.loc.ri(Self::image(v)), v.loc.si());
        if halved {
            (ts as f64 * self.empty_factor).round() as Nanos
        } else {
            ts
        }
    }

    fn start_slice(&mut self, vm: StreamId, now: Nanos) {
        let len = self.slice_for(vm, false);
        self.active = Some(Active {
            vm,
            start: now,
            len,
            halved: false,
            fifo_served: 0,
            dispatched: 0,
        });
        self.round.insert(vm);
        self.stats.slices += 1;
    }

    fn end_slice(&mut self, now: Nanos) {
        if let Some(a) = self.active.take() {
            if self.waiting {
                self.stats.waits_slice_end += 1;
            }
            self.timer = None;
            self.waiting = false;
            let vm = self.vm_mut(a.vm);
            vm.slices += 1;
            vm.granted = vm.granted.saturating_add(a.len);
            let grant = SliceGrant {
                stream: a.vm,
                start: a.start,
                length: a.len,
                used: now.saturating_sub(a.start),
            };
            self.slice_log.push(grant);
            self.last_served = Some(a.vm);
        }
    }

    /// The next VM of the round: the unserved backlogged VM nearest to the head (§4.3).
    fn select_next(&mut self) -> Option<StreamId> {
        let head = self.head;
        // The nearest (distance, VM) that is unserved this round, that is
        // not the last served, and of all, in one pass.
        let (mut unserved, mut not_last, mut any) = (None, None, None);
        for (&id, v) in self.vms.iter() {
            let Some((_, d)) = v.queue.nearest(head) else { continue };
            let c = Some((d, id));
            if !self.round.contains(&id) && (unserved.is_none() || c < unserved) {
                unserved = c;
            }
            if Some(id) != self.last_served && (not_last.is_none() || c < not_last) {
                not_last = c;
            }
            if any.is_none() || c < any {
                any = c;
            }
        }
        if let Some((_, id)) = unserved {
            return Some(id);
        }
        self.round.clear();
        not_last.or(any).map(|(_, id)| id)
    }

    /// The pending request of another VM than `x` nearest to the head.
    fn nearest_other(&self, x: StreamId) -> Option<(StreamId, SortKey, Sector)> {
        self.vms
            .iter()
            .filter(|(&id, _)| id != x)
            .filter_map(|(&id, v)| v.queue.nearest(self.head).map(|(k, d)| (id, k, d)))
            .min_by_key(|&(id, _, d)| (d, id))
    }

    fn take(&mut self, vm: StreamId, key: SortKey, now: Nanos, why: Why) -> Dispatch {
        let v = self.vms.get_mut(&vm).expect("known VM");
        let rq = v.queue.remove(key);
        v.in_flight += 1;
        self.queued -= 1;
        self.in_flight += 1;
        self.stats.dispatches += 1;
        match why {
            Why::Suitable if self.waiting => self.stats.waits_succeeded += 1,
            Why::Deadline => {
                if self.waiting {
                    self.stats.waits_deadline += 1;
                }
                self.stats.deadline_dispatches += 1;
            }
            _ => {}
        }
        // Any dispatch turns the timers off (Algorithm 2).
        self.timer = None;
        self.waiting = false;
        if self.active.map(|a| a.vm) != Some(vm) {
            self.end_slice(now);
            self.start_slice(vm, now);
        }
        if rq.sectors > 0 {
            self.head = rq.end();
        }
        self.vm_mut(rq.stream).loc.dispatched(&rq);
        let empty = self.vms[&vm].queue.is_empty();
        // §4.2–4.3: re-evaluate Eq. 8; halve once when the VM has nothing left with slice to spare.
        let mut a = self.active.expect("a slice is active");
        a.dispatched += 1;
        if empty && !a.halved && now < a.end() && vm != ASYNC_QUEUE {
            a.halved = true;
        }
        a.len = self.slice_for(vm, a.halved);
        self.active = Some(a);
        Dispatch::Request(rq)
    }

    /// The queue `rq` waits in: its VM's, or the shared async queue (choice 15).
    fn queue_of(&self, rq: &Request) -> StreamId {
        if self.async_service == AsyncService::SharedQueue && !rq.sync {
            ASYNC_QUEUE
        } else {
            rq.stream
        }
    }

    /// `SeekTime(P(LR), to)` of Algorithm 2 (module doc, choice 12).
    fn positioning_time(&self, to: Sector) -> Nanos {
        let seek = self.seek.seek_time(self.head, to);
        if self.seek_adds_rotation && to != self.head {
            seek + self.seek.revolution() / 2
        } else {
            seek
        }
    }

    /// Where the head enters the pending request `key` of queue `vm`: a
    /// request behind the head is taken from the first request of its run
    /// (no lower than `lo`) when `back_to_run_start` is set (choice 16).
    fn entry(&self, vm: StreamId, key: SortKey, lo: Sector, sync_only: bool) -> SortKey {
        if self.run_start && key.0 < self.head {
            self.vms[&vm].queue.run_start(key, lo, sync_only)
        } else {
            key
        }
    }

    /// The slice length stream `id` would get now (Eq. 8).
    pub fn current_slice(&self, id: StreamId) -> Option<Nanos> {
        match self.active {
            Some(a) if a.vm == id => Some(a.len),
            _ => self.vms.contains_key(&id).then(|| self.slice_for(id, false)),
        }
    }

    /// Bytes of prediction state kept for stream `id` (its vNavigator).
    pub fn model_memory(&self, id: StreamId) -> usize {
        self.vms.get(&id).map_or(0, |v| v.nav.memory_bytes())
    }
}

impl Scheduler for Pregather {
    fn name(&self) -> &'static str {
        "pregather"
    }

    fn insert(&mut self, rq: Request, now: Nanos) {
        let deadline = now + self.expire[rq.sync as usize];
        let q = self.queue_of(&rq);
        self.vm_mut(q).queue.insert(rq, deadline);
        // §4.3: on arrival update AvgT, AvgD (RI) and the vNavigator (of
        // the request's VM, whichever queue it waits in).
        let v = self.vm_mut(rq.stream);
        v.loc.arrived(&rq, now);
        if rq.sectors > 0 {
            v.nav.record(rq.sector, now);
        }
        self.queued += 1;
    }

    /// The generic back merge into the VM's sorted queue. Like any Linux
    /// elevator's merged bio, it is not an arrival: AvgT, AvgD and the
    /// vNavigator do not see it.
    fn back_merge(&mut self, rq: &Request, max_sectors: u32, _now: Nanos) -> Option<RequestId> {
        let q = self.queue_of(rq);
        self.vms.get_mut(&q)?.queue.back_merge(rq, max_sectors)
    }

    fn dispatch(&mut self, now: Nanos) -> Dispatch {
        // CFQ expires its async queue after `slice_async_rq` dispatches.
        let budget = self.slice_async_rq;
        if self
            .active
            .is_some_and(|a| now >= a.end() || (a.vm == ASYNC_QUEUE && a.dispatched >= budget))
        {
            self.end_slice(now);
        }
        // A timer covers its last instant: a request arriving exactly `ST`
        // (or `AvgT`) after the completion is in time (choice 11).
        if self.timer.is_some_and(|t| now > t.until()) {
            if self.waiting {
                self.stats.waits_timed_out += 1;
            }
            self.timer = None;
            self.waiting = false;
        }
        if self.queued == 0 {
            return Dispatch::Empty;
        }
        // The served VM's turn is over once it has nothing pending and no
        // coarse timer waits for its next request. While its dispatched
        // requests are still in the device (a queue depth > 1), the slice
        // waits for them: Algorithm 1 runs when the last completes (2.6.18
        // CFQ's `cfq_select_queue` keeps an active queue with requests in
        // the driver and dispatches nothing meanwhile; choice 17).
        if let Some(a) = self.active {
            let v = &self.vms[&a.vm];
            if v.queue.is_empty() && !matches!(self.timer, Some(Timer::Coarse { .. })) {
                if v.in_flight > 0 && a.vm != ASYNC_QUEUE {
                    return Dispatch::Empty;
                }
                self.end_slice(now);
            }
        }
        if self.active.is_none() {
            let next = self.select_next().expect("queued > 0");
            self.start_slice(next, now);
        }
        let a = self.active.expect("a slice is active");
        let x = a.vm;
        let q = &self.vms[&x].queue;
        // §4.3: an expired deadline at the head of the served VM's EDF queue goes at once.
        if self.fifo_checks == 0 || a.fifo_served < self.fifo_checks {
            if let Some((dl, key)) = q.edf_head() {
                if dl <= now {
                    if let Some(act) = self.active.as_mut() {
                        act.fifo_served += 1;
                    }
                    return self.take(x, key, now, Why::Deadline);
                }
            }
        }
        // PR: the served VM's request closest to the head (choice 14), else
        // the nearest other VM's.
        let sync_first = self.async_service == AsyncService::SyncFirst;
        let (pr_vm, pr) = match q.elevator(self.head, self.back_max, self.back_penalty, sync_first) {
            Some(k) => (x, self.entry(x, k, 0, sync_first && q.has_sync())),
            None => {
                let (id, k, _) = self.nearest_other(x).expect("queued > 0");
                (id, self.entry(id, k, 0, false))
            }
        };
        let Some(timer) = self.timer else {
            return self.take(pr_vm, pr, now, Why::Plain);
        };
        // Algorithm 2.
        let seek = self.positioning_time(pr.0);
        if spla::suitable(&timer, pr_vm == x, pr.0, seek) {
            return self.take(pr_vm, pr, now, Why::Suitable);
        }
        if let Timer::Fine { unit, .. } = timer {
            if let Some((k, _)) = self.vms[&x].queue.nearest_in(unit.start, unit.end, self.head) {
                let k = self.entry(x, k, unit.start, false);
                return self.take(x, k, now, Why::Suitable);
            }
        }
        let pr_deadline = self.vms[&pr_vm].queue.deadline(pr);
        if pr_deadline <= now {
            return self.take(pr_vm, pr, now, Why::Deadline);
        }
        if !self.waiting {
            self.waiting = true;
            self.stats.waits_started += 1;
        }
        Dispatch::WaitUntil((timer.until() + 1).min(pr_deadline).min(a.end()))
    }

    fn completed(&mut self, rq: &Request, now: Nanos) {
        self.in_flight = self.in_flight.saturating_sub(1);
        let q = self.queue_of(rq);
        if let Some(v) = self.vms.get_mut(&q) {
            v.in_flight = v.in_flight.saturating_sub(1);
        }
        if rq.sectors > 0 {
            if let Some(v) = self.vms.get_mut(&rq.stream) {
                v.nav.completed(rq.sector, now);
                v.loc.completed(now);
            }
        }
        if self.in_flight == 0 && rq.sectors > 0 {
            self.head = rq.end();
        }
        let Some(a) = self.active else { return };
        // CFQ never idles on its async queue (`cfq_arm_slice_timer`). With a
        // queue depth > 1, Algorithm 1 waits for the served VM's last
        // request in the device, whatever other VMs still have there (choice 17).
        if q != a.vm || a.vm == ASYNC_QUEUE || self.vms[&a.vm].in_flight > 0 {
            return;
        }
        // Algorithm 1. Only its coarse branch (the served VM has nothing
        // pending) compares AvgD with the nearest other VM's request, so the
        // other VMs' queues are searched only then, not at every completion.
        let vm_pending = !self.vms[&a.vm].queue.is_empty();
        let neighbour_distance = if vm_pending {
            None
        } else {
            self.nearest_other(a.vm).map(|(_, _, d)| d)
        };
        let v = self.vms.get_mut(&a.vm).expect("active VM is known");
        let unit = if vm_pending {
            v.nav.unit_at(rq.sector, now)
        } else {
            None
        };
        let input = ArmInput {
            now,
            vm_pending,
            avg_d: v.loc.avg_distance(),
            avg_t: v.loc.avg_interval(),
            image: Self::image(v),
            neighbour_distance,
            unit,
        };
        self.timer = spla::arm(&input);
        self.waiting = false;
        match self.timer {
            Some(Timer::Coarse { .. }) => self.stats.coarse_armed += 1,
            Some(Timer::Fine { .. }) => self.stats.fine_armed += 1,
            None => {}
        }
    }

    fn has_work(&self) -> bool {
        self.queued > 0
    }

    fn queued(&self) -> usize {
        self.queued
    }

    /// The slice in progress ends; every VM's queue is emptied.
    fn take_queued(&mut self, now: Nanos) -> Option<Vec<Request>> {
        self.end_slice(now);
        let all: Vec<Request> = self.vms.values_mut().flat_map(|v| v.queue.take_all()).collect();
        self.queued = 0;
        Some(all)
    }

    fn set_stream(&mut self, info: &StreamInfo) {
        let v = self.vm_mut(info.id);
        v.name = info.name.clone();
        v.region = info.region;
    }

    fn take_slices(&mut self) -> Vec<SliceGrant> {
        self.slice_log.take()
    }

    fn logs_slices(&self) -> bool {
        true
    }

    fn counters(&self) -> Vec<(String, f64)> {
        let s = &self.stats;
        let ratio = if s.waits_started == 0 {
            0.0
        } else {
            s.waits_succeeded as f64 / s.waits_started as f64
        };
        let mut out: Vec<(String, f64)> = [
            ("waits_started", s.waits_started as f64),
            ("waits_succeeded", s.waits_succeeded as f64),
            ("wait_success_ratio", ratio),
            ("waits_timed_out", s.waits_timed_out as f64),
            ("waits_deadline", s.waits_deadline as f64),
            ("waits_slice_end", s.waits_slice_end as f64),
            ("timers_coarse", s.coarse_armed as f64),
            ("timers_fine", s.fine_armed as f64),
            ("deadline_dispatches", s.deadline_dispatches as f64),
            ("dispatches", s.dispatches as f64),
            ("slices", s.slices as f64),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let ms = |n: Nanos| n as f64 / 1e6;
        for (&id, v) in self.vms.iter() {
            let n = &v.name;
            let mean = if v.slices == 0 {
                0.0
            } else {
                ms(v.granted) / v.slices as f64
            };
            out.push((format!("slice_ms.{n}"), ms(self.current_slice(id).unwrap_or(0))));
            out.push((format!("slice_mean_ms.{n}"), mean));
            out.push((format!("slices.{n}"), v.slices as f64));
            out.push((format!("ri.{n}"), v.loc.ri(Self::image(v))));
            out.push((format!("si.{n}"), v.loc.si()));
            out.push((format!("zones.{n}"), v.nav.zones() as f64));
            out.push((format!("model_bytes.{n}"), v.nav.memory_bytes() as f64));
            out.push((format!("model_peak_bytes.{n}"), v.nav.peak_memory_bytes() as f64));
        }
        out
    }
}

#[cfg(test)]
mod tests;
