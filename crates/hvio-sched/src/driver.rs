//! The one scheduler driver: a [`Scheduler`] with its [`SchedContext`], its
//! `WaitUntil` timer, its in-flight count and counters, and run-time
//! switching. Every loop that drives a scheduler (the simulated host and
//! guests, the replayer, the daemon, the bench, the test suites) goes
//! through it, so that they agree on what a wait, a completion and a switch
//! mean. Paper 002 (the meta-scheduler) switches schedulers mid-run through
//! [`Driver::switch_to`].
//!
//! The caller owns the device and the clock: it [`insert`](Driver::insert)s
//! arrivals, asks [`poll`](Driver::poll) for the next request while its
//! device can take one, reports [`completed`](Driver::completed) requests,
//! and calls `poll` again at the [`Next::Wait`] time it was given (or when a
//! request arrives or completes). Time is whatever the caller counts in:
//! simulated nanoseconds, or the monotonic clock's nanoseconds since start.
//!
//! # Waits
//!
//! A scheduler's `WaitUntil(t)` must be strictly in the future. One that is
//! not (a scheduler bug) is counted in [`DriverStats::past_waits`] (the
//! conformance suite asserts none) and moved to `now + resolution`, so the
//! caller always makes progress. The resolution is the clock's: 1 ns for
//! simulated time, where time is integer nanoseconds and a later event is
//! all that is needed; the daemon sets 1 µs, its timer slack
//! (`PR_SET_TIMERSLACK`), because a sooner wake-up cannot be honoured and
//! would only spin. A wait later than `now` is never shortened or lengthened.
//!
//! # Switching (`block/elevator.c`)
//!
//! Linux has switched elevators at run time in two ways, and hvio models
//! both, plus a third that Linux does not have:
//!
//! - [`SwitchPolicy::Drain`] — the legacy block layer (2.6.3x
//!   `elevator_switch` → `elv_quiesce_start`): set `QUEUE_FLAG_ELVSWITCH`,
//!   so requests allocated from then on carry no elevator data and bypass
//!   the elevator (`__elv_add_request` turns `ELEVATOR_INSERT_SORT` into
//!   `ELEVATOR_INSERT_BACK`: the tail of the dispatch list, FIFO, served
//!   before the elevator); force-dispatch everything the old elevator holds
//!   onto the dispatch list (`elv_drain_elevator`: `dispatch_fn(q, 1)` until
//!   empty — no idling); then `while (q->rq.elvpriv) { run queue; msleep(10);
//!   drain }`: wait until no request of the old elevator is queued or in
//!   flight, checking every 10 ms. Then swap (`elevator_exit` old, attach
//!   new) and clear the flag. Bypassed requests still on the dispatch list
//!   go first after the swap, and no elevator ever hears of their
//!   completion. hvio models exactly that: the forced drain is
//!   [`Scheduler::take_queued`] (oldest arrival first), the dispatch list is
//!   the driver's FIFO, and the swap happens at the first 10 ms tick
//!   ([`DRAIN_POLL`]) after the switch at which the old scheduler's last
//!   request has completed (at once if it had none). Cost: up to 10 ms with
//!   the old requests done and the new scheduler not yet in charge, every
//!   request arriving meanwhile served FIFO, and the old scheduler's queue
//!   served in arrival order without its idling.
//! - [`SwitchPolicy::Freeze`] — blk-mq (`elevator_switch` under
//!   `blk_mq_freeze_queue`): new submitters wait in `blk_queue_enter`; every
//!   request already entered (queued in the old scheduler or in flight)
//!   keeps `q_usage_counter` up until it completes, so the old scheduler
//!   serves its whole queue its own way (idling included); when the counter
//!   drops to zero (a wake-up, no polling) the elevator is swapped, the
//!   queue unfrozen, and the held requests enter the new scheduler. Cost:
//!   every arrival during the switch waits until the old queue and the
//!   device are empty. `hvio serve` uses this by default.
//! - [`SwitchPolicy::Migrate`] — hvio's own: the old scheduler hands its
//!   queued requests to the new one at once ([`Scheduler::take_queued`]),
//!   arrivals go to the new one, and the new one starts dispatching when
//!   the old one's requests in flight have completed (so each scheduler
//!   hears only of completions of requests it dispatched). Cost: the device
//!   drains its in-flight requests once (at most one service time at depth
//!   1). A scheduler that cannot hand over (`take_queued` → `None`) is
//!   switched with [`SwitchPolicy::Freeze`] instead; nothing is lost.
//!
//! Each finished switch leaves a [`SwitchReport`] with its cost: time from
//! request to swap, requests handed over, bypassed and held.
//!
//! # Flushes (`block/blk-flush.c`)
//!
//! No Linux elevator ever holds a cache flush. The legacy block layer
//! (2.6.37 to 4.x, `__elv_add_request` with `ELEVATOR_INSERT_FLUSH`) and
//! blk-mq (`blk_mq_submit_bio` → `blk_insert_flush`; the flush request is
//! allocated without `RQF_USE_SCHED` in 6.x) both hand it to
//! `blk_insert_flush`, which puts the flush on the queue's dispatch list
//! (`q->queue_head`; blk-mq's `hctx->dispatch`), served before the
//! elevator is asked for a request. The elevator never hears of it: not
//! its insertion, not its dispatch (`elv_activate_rq` only for
//! `REQ_SORTED` requests), not its completion (`elv_completed_request`
//! calls the elevator only for `REQ_SORTED` ones; blk-mq only for
//! `RQF_USE_SCHED` ones). The driver does the same for every scheduler: a
//! request with [`Op::Flush`] goes on its dispatch list, behind the flushes
//! already there (the legacy `list_add_tail`), and no scheduler is told of
//! it. During a `freeze` switch a flush waits with the other arrivals
//! (blk-mq's `blk_queue_enter` holds every submitter); during a `drain` it
//! is one of the bypassing arrivals.
//!
//! What hvio does not model of `blk-flush.c`, and why (docs/schedulers.md,
//! "Flushes"): its double buffering (one flush command in flight at a time,
//! C1; flushes that arrive meanwhile wait and then share one command), as a
//! shared command would complete several of the caller's requests at once,
//! which no caller of the driver can take yet; the sequencing of a write
//! that carries a flush (PREFLUSH, DATA, POSTFLUSH), as [`Request`] has no
//! such write (traces split it into a flush and a write); and the legacy
//! bypass of FUA writes (with a FUA-capable device, 2.6.37 to 6.4 send the
//! data of a FUA write straight to the dispatch list; 6.5 and later insert
//! it into the elevator like any write): FUA writes go to the scheduler,
//! as in 6.5 and later.

use crate::build;
use hvio_core::{
    ms, ConfigError, Dispatch, Nanos, Op, ParamValues, Request, RequestId, SchedContext, Scheduler, SliceGrant,
    StreamInfo,
};
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::str::FromStr;

/// How often the legacy block layer checks whether the old elevator has
/// drained during a switch (`msleep(10)` in `elv_quiesce_start`).
pub const DRAIN_POLL: Nanos = ms(10);

/// How a run-time switch treats the old scheduler's requests (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SwitchPolicy {
    /// Linux 2.6.3x: force the old queue out FIFO, bypass new arrivals,
    /// poll every 10 ms until the old requests completed, swap.
    Drain,
    /// blk-mq: hold new arrivals, let the old scheduler serve its queue,
    /// swap when it and the device are empty.
    Freeze,
    /// Hand the old queue to the new scheduler; it starts once the old
    /// requests in flight completed.
    Migrate,
}

impl SwitchPolicy {
    /// Every policy, in the order `as_str` names them in errors.
    pub const ALL: [SwitchPolicy; 3] = [SwitchPolicy::Drain, SwitchPolicy::Freeze, SwitchPolicy::Migrate];

    /// The policy's name in configs and the control API.
    pub fn as_str(self) -> &'static str {
        match self {
            SwitchPolicy::Drain => "drain",
            SwitchPolicy::Freeze => "freeze",
            SwitchPolicy::Migrate => "migrate",
        }
    }
}

impl fmt::Display for SwitchPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SwitchPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        SwitchPolicy::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| format!("unknown switch policy `{s}` (known: drain, freeze, migrate)"))
    }
}

/// Why a switch was refused. The running scheduler is untouched.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum SwitchError {
    /// A switch was asked for while another is under way.
    #[error("a scheduler switch to `{to}` is already in progress")]
    InProgress {
        /// The scheduler being switched to.
        to: &'static str,
    },
    /// The new scheduler's tunables were refused.
    #[error(transparent)]
    Config(#[from] ConfigError),
}

/// What one finished switch cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwitchReport {
    /// The scheduler switched from.
    pub from: &'static str,
    /// The scheduler switched to.
    pub to: &'static str,
    /// The policy applied (a `migrate` from a scheduler that cannot hand
    /// over is applied as `freeze`).
    pub policy: SwitchPolicy,
    /// When the switch was asked for.
    pub requested: Nanos,
    /// When the new scheduler took over.
    pub swapped: Nanos,
    /// Requests taken from the old scheduler's queue: onto the dispatch
    /// list (`drain`) or into the new scheduler (`migrate`).
    pub handed_over: usize,
    /// Arrivals that bypassed both schedulers (`drain`).
    pub bypassed: usize,
    /// Arrivals held until the swap (`freeze`).
    pub held: usize,
}

impl SwitchReport {
    /// Time from the request to the swap.
    pub fn drain_time(&self) -> Nanos {
        self.swapped - self.requested
    }
}

/// What to do with the device next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Send this request to the device.
    Request(Request),
    /// Keep the device idle; poll again at `until` (or when a request
    /// arrives or completes). `new`: the timer changed, so an event-driven
    /// caller must schedule a wake-up (an unchanged one is already scheduled).
    Wait {
        /// When to call `poll` again.
        until: Nanos,
        /// Whether the wake-up time changed.
        new: bool,
    },
    /// Nothing to dispatch until a request arrives or completes.
    Idle,
}

/// The driver's own counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DriverStats {
    /// Requests inserted.
    pub inserted: u64,
    /// Requests dispatched.
    pub dispatched: u64,
    /// Requests completed.
    pub completed: u64,
    /// `WaitUntil` answers.
    pub waits: u64,
    /// `WaitUntil` answers not in the future (a scheduler bug; moved forward).
    pub past_waits: u64,
    /// Switches finished.
    pub switches: u64,
    /// Flushes sent around the scheduler (see "Flushes" in the module doc).
    pub flushes: u64,
}

struct Switch<S: ?Sized> {
    new: Box<S>,
    policy: SwitchPolicy,
    requested: Nanos,
    /// Requests of the old scheduler not yet completed (queued in it, on
    /// the dispatch list after a forced drain, or in flight); `drain` and
    /// `migrate` only (`freeze` asks the old scheduler).
    old_outstanding: usize,
    /// `drain`: the tick at which the swap happens, once `old_outstanding` is 0.
    swap_at: Option<Nanos>,
    /// `freeze`: arrivals waiting for the swap.
    held: VecDeque<(Request, Nanos)>,
    handed_over: usize,
    bypassed: usize,
}

/// A scheduler, driven (see the module doc). `S` is any scheduler, an
/// owned one of any kind by default; a test may drive a borrowed one
/// (`Driver::new(Box::new(&mut sched), ctx)`) and inspect it afterwards.
pub struct Driver<S: Scheduler + ?Sized = dyn Scheduler> {
    sched: Box<S>,
    ctx: SchedContext,
    resolution: Nanos,
    /// The pending wake-up: the last `Wait` given and not yet due.
    wake: Option<Nanos>,
    in_flight: usize,
    /// The block layer's dispatch list: flushes, and requests
    /// force-drained from an old scheduler or bypassing it during a `drain`
    /// switch, served FIFO before any scheduler.
    dispatch_list: VecDeque<Request>,
    /// Requests on the dispatch list or in flight that no scheduler holds
    /// (it handed them over, or they bypassed it): nobody hears of their
    /// completion. `true`: the old scheduler's, counted in its switch's
    /// `old_outstanding`.
    unowned: HashMap<RequestId, bool>,
    switch: Option<Switch<S>>,
    reports: Vec<SwitchReport>,
    /// Slices the replaced schedulers ended and nobody took yet.
    retired_slices: Vec<SliceGrant>,
    /// Whether the scheduler in charge logs slices
    /// ([`Scheduler::logs_slices`]): [`Driver::take_slices_with`], called
    /// at every dispatch, asks only one that does.
    logs_slices: bool,
    stats: DriverStats,
}

impl Driver {
    /// Build scheduler `name` with `params` for `ctx` and drive it.
    pub fn build(name: &str, params: &ParamValues, ctx: SchedContext) -> Result<Self, ConfigError> {
        let sched = build(name, params, &ctx)?;
        Ok(Driver::new(sched, ctx))
    }

    /// [`Driver::switch_to`] scheduler `name` with `params`, built here (a
    /// bad name or parameter leaves the running scheduler alone).
    pub fn switch_by_name(
        &mut self,
        name: &str,
        params: &ParamValues,
        policy: SwitchPolicy,
        now: Nanos,
    ) -> Result<(), SwitchError> {
        if let Some(sw) = &self.switch {
            return Err(SwitchError::InProgress { to: sw.new.name() });
        }
        let new = build(name, params, &self.ctx)?;
        self.switch_to(new, policy, now)
    }
}

impl<S: Scheduler + ?Sized> Driver<S> {
    /// Drive `sched`, built for `ctx`, in simulated time (resolution 1 ns).
    pub fn new(sched: Box<S>, ctx: SchedContext) -> Self {
        Driver {
            logs_slices: sched.logs_slices(),
            sched,
            ctx,
            resolution: 1,
            wake: None,
            in_flight: 0,
            dispatch_list: VecDeque::new(),
            unowned: HashMap::new(),
            switch: None,
            reports: Vec::new(),
            retired_slices: Vec::new(),
            stats: DriverStats::default(),
        }
    }

    /// The shortest wait the caller's clock can honour (see the module doc).
    pub fn with_resolution(mut self, resolution: Nanos) -> Self {
        self.resolution = resolution.max(1);
        self
    }

    /// The scheduler in charge (the old one until a switch swaps).
    pub fn scheduler(&self) -> &S {
        &self.sched
    }

    /// The scheduler in charge, for calls the driver does not wrap.
    pub fn scheduler_mut(&mut self) -> &mut S {
        &mut self.sched
    }

    /// The name of the scheduler in charge (the new one during a switch).
    pub fn name(&self) -> &'static str {
        self.sched.name()
    }

    /// The context schedulers are built with.
    pub fn context(&self) -> &SchedContext {
        &self.ctx
    }

    /// The driver's counts so far.
    pub fn stats(&self) -> DriverStats {
        self.stats
    }

    /// The scheduler's counters (the one in charge).
    pub fn counters(&self) -> Vec<(String, f64)> {
        self.sched.counters()
    }

    /// The pending wake-up, if any.
    pub fn wake(&self) -> Option<Nanos> {
        self.wake
    }

    /// Whether the pending wake-up is due at `now`; if so it is cleared and
    /// the caller polls. A wake-up that a later `Wait` replaced is not due.
    pub fn timer_due(&mut self, now: Nanos) -> bool {
        if self.wake.is_some_and(|t| t <= now) {
            self.wake = None;
            true
        } else {
            false
        }
    }

    /// Requests dispatched and not completed.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Requests inserted and not yet dispatched (in a scheduler, on the
    /// dispatch list, or held by a switch).
    pub fn queued(&self) -> usize {
        let switching = self.switch.as_ref().map_or(0, |s| s.held.len() + s.new.queued());
        self.sched.queued() + self.dispatch_list.len() + switching
    }

    /// Whether anything waits to be dispatched.
    pub fn has_work(&self) -> bool {
        self.sched.has_work()
            || !self.dispatch_list.is_empty()
            || self
                .switch
                .as_ref()
                .is_some_and(|s| !s.held.is_empty() || s.new.has_work())
    }

    /// Whether a switch is in progress.
    pub fn switching(&self) -> bool {
        self.switch.is_some()
    }

    /// Where a request arriving now goes: a flush to the dispatch list
    /// (see "Flushes" in the module doc); during a switch, held (`freeze`),
    /// straight to the dispatch list (`drain`), or into the new scheduler
    /// (`migrate`); else into the scheduler.
    #[inline(always)]
    pub fn insert(&mut self, rq: Request, now: Nanos) {
        self.stats.inserted += 1;
        match &mut self.switch {
            None if rq.op != Op::Flush => self.sched.insert(rq, now),
            Some(sw) if sw.policy == SwitchPolicy::Freeze => sw.held.push_back((rq, now)),
            Some(sw) if sw.policy == SwitchPolicy::Drain => {
                sw.bypassed += 1;
                if rq.op == Op::Flush {
                    self.flush_around(rq);
                } else {
                    self.bypass(rq);
                }
            }
            Some(sw) if rq.op != Op::Flush => sw.new.insert(rq, now),
            _ => self.flush_around(rq),
        }
    }

    /// `blk_insert_flush`: the flush `rq` goes on the dispatch list, and no
    /// scheduler hears of it.
    #[inline(never)]
    fn flush_around(&mut self, rq: Request) {
        self.stats.flushes += 1;
        self.bypass(rq);
    }

    /// `rq` goes on the dispatch list, owned by no scheduler.
    fn bypass(&mut self, rq: Request) {
        self.unowned.insert(rq.id, false);
        self.dispatch_list.push_back(rq);
    }

    /// A request that arrived at `now` and waited outside the scheduler
    /// (held by a `freeze` switch, or re-queued after a failure) enters it,
    /// or the dispatch list if it is a flush.
    fn enter(&mut self, rq: Request, now: Nanos) {
        if rq.op == Op::Flush {
            self.flush_around(rq);
        } else {
            self.sched.insert(rq, now);
        }
    }

    /// The block layer's back merge into a queued request (see
    /// [`Scheduler::back_merge`]); none during a switch, and never of a
    /// flush (Linux's `blk_rq_merge_ok` refuses `REQ_NOMERGE_FLAGS`).
    pub fn back_merge(&mut self, rq: &Request, max_sectors: u32, now: Nanos) -> Option<RequestId> {
        if self.switch.is_some() || rq.op == Op::Flush {
            return None;
        }
        self.sched.back_merge(rq, max_sectors, now)
    }

    /// The device can take a request: the next one, or when to ask again,
    /// or nothing until a request arrives or completes.
    #[inline(always)]
    pub fn poll(&mut self, now: Nanos) -> Next {
        // No switch and no dispatch list: the scheduler decides (the hot path).
        if self.switch.is_none() && self.dispatch_list.is_empty() {
            let d = self.sched.dispatch(now);
            return self.answer(d, now);
        }
        // Out of line: merged into the hot path, the two ways to a
        // `Dispatch` made the compiler keep the request in pieces, copied
        // with overlapping moves that stall the loads after them.
        self.poll_slow(now)
    }

    #[inline(never)]
    fn poll_slow(&mut self, now: Nanos) -> Next {
        match self.poll_switching(now) {
            Ok(d) => self.answer(d, now),
            Err(next) => next,
        }
    }

    /// What the scheduler's `d` asks of the device.
    #[inline(always)]
    fn answer(&mut self, d: Dispatch, now: Nanos) -> Next {
        match d {
            Dispatch::Request(rq) => self.dispatched(rq),
            Dispatch::WaitUntil(t) => self.wait(t, now),
            Dispatch::Empty => Next::Idle,
        }
    }

    /// [`Driver::poll`] during a switch or with requests on the dispatch
    /// list: what to do, or the scheduler's answer to pass on.
    fn poll_switching(&mut self, now: Nanos) -> Result<Dispatch, Next> {
        self.try_swap(now);
        if let Some(rq) = self.dispatch_list.pop_front() {
            return Err(self.dispatched(rq));
        }
        Ok(match &self.switch {
            // The new scheduler waits for the old one's requests in flight.
            Some(sw) if sw.policy == SwitchPolicy::Migrate => return Err(Next::Idle),
            // The old scheduler is done; the swap waits for the next tick.
            Some(Switch { swap_at: Some(t), .. }) => Dispatch::WaitUntil(*t),
            _ => self.sched.dispatch(now),
        })
    }

    /// A `WaitUntil(t)` answered at `now` (see "Waits" in the module doc).
    fn wait(&mut self, t: Nanos, now: Nanos) -> Next {
        self.stats.waits += 1;
        if t <= now {
            self.stats.past_waits += 1;
        }
        let until = t.max(now + self.resolution);
        let new = self.wake != Some(until);
        self.wake = Some(until);
        Next::Wait { until, new }
    }

    #[inline(always)]
    fn dispatched(&mut self, rq: Request) -> Next {
        self.in_flight += 1;
        self.stats.dispatched += 1;
        Next::Request(rq)
    }

    /// A request [`poll`](Driver::poll) gave has completed at `now`; the
    /// scheduler that dispatched it hears of it.
    #[inline(always)]
    pub fn completed(&mut self, rq: &Request, now: Nanos) {
        self.in_flight = self.in_flight.saturating_sub(1);
        self.stats.completed += 1;
        if self.switch.is_none() && self.unowned.is_empty() {
            self.sched.completed(rq, now);
            return;
        }
        self.completed_switching(rq, now);
    }

    /// [`Driver::completed`] during a switch or with unowned requests out.
    fn completed_switching(&mut self, rq: &Request, now: Nanos) {
        let unowned = if self.unowned.is_empty() {
            None
        } else {
            self.unowned.remove(&rq.id)
        };
        if unowned == Some(false) {
            return;
        }
        match &mut self.switch {
            Some(sw) if sw.policy != SwitchPolicy::Freeze && sw.old_outstanding > 0 => {
                sw.old_outstanding -= 1;
                if unowned.is_none() {
                    self.sched.completed(rq, now);
                }
                if sw.old_outstanding == 0 && sw.policy == SwitchPolicy::Drain {
                    // The first `msleep(10)` tick that finds nothing left.
                    let ticks = (now - sw.requested).div_ceil(DRAIN_POLL).max(1);
                    sw.swap_at = Some(sw.requested + ticks * DRAIN_POLL);
                }
                self.try_swap(now);
            }
            _ => {
                self.sched.completed(rq, now);
                if self.switch.is_some() {
                    self.try_swap(now);
                }
            }
        }
    }

    /// A stream's attributes changed, or a new stream appeared: the
    /// context, the scheduler and any scheduler being switched to learn it.
    pub fn set_stream(&mut self, info: &StreamInfo) {
        match self.ctx.streams.iter_mut().find(|s| s.id == info.id) {
            Some(s) => *s = info.clone(),
            None => self.ctx.streams.push(info.clone()),
        }
        self.sched.set_stream(info);
        if let Some(sw) = &mut self.switch {
            sw.new.set_stream(info);
        }
    }

    /// Start switching to `new` (built for [`Driver::context`]) at `now`
    /// under `policy`. Refused while a switch is in progress.
    pub fn switch_to(&mut self, new: Box<S>, policy: SwitchPolicy, now: Nanos) -> Result<(), SwitchError> {
        if let Some(sw) = &self.switch {
            return Err(SwitchError::InProgress { to: sw.new.name() });
        }
        let mut sw = Switch {
            new,
            policy,
            requested: now,
            old_outstanding: 0,
            swap_at: None,
            held: VecDeque::new(),
            handed_over: 0,
            bypassed: 0,
        };
        if policy != SwitchPolicy::Freeze {
            // The old scheduler's requests in flight: not those that
            // bypassed an earlier switch (every request on the dispatch list
            // is one; an earlier old scheduler's have all completed).
            let in_flight = self.in_flight - (self.unowned.len() - self.dispatch_list.len());
            let queued = self.sched.queued();
            match self.sched.take_queued(now) {
                Some(mut taken) => {
                    assert_eq!(
                        taken.len(),
                        queued,
                        "{}: take_queued handed over {} of {queued} queued requests",
                        self.sched.name(),
                        taken.len()
                    );
                    taken.sort_by_key(|rq| (rq.arrival, rq.id));
                    sw.handed_over = taken.len();
                    if policy == SwitchPolicy::Drain {
                        sw.old_outstanding = in_flight + taken.len();
                        self.unowned.extend(taken.iter().map(|rq| (rq.id, true)));
                        self.dispatch_list.extend(taken);
                    } else {
                        sw.old_outstanding = in_flight;
                        for rq in taken {
                            sw.new.insert(rq, now);
                        }
                    }
                }
                None if policy == SwitchPolicy::Drain => {
                    // No forced drain: the old scheduler serves its queue.
                    sw.old_outstanding = in_flight + queued;
                }
                None => sw.policy = SwitchPolicy::Freeze,
            }
            if sw.old_outstanding == 0 && sw.policy == SwitchPolicy::Drain {
                sw.swap_at = Some(now);
            }
        }
        self.switch = Some(sw);
        self.try_swap(now);
        Ok(())
    }

    /// Swap if the switch in progress is done by `now`.
    fn try_swap(&mut self, now: Nanos) {
        let Some(sw) = &self.switch else { return };
        let done = match sw.policy {
            SwitchPolicy::Freeze => !self.sched.has_work() && self.in_flight == 0,
            SwitchPolicy::Migrate => sw.old_outstanding == 0,
            SwitchPolicy::Drain => sw.swap_at.is_some_and(|t| t <= now),
        };
        if !done {
            return;
        }
        let Some(sw) = self.switch.take() else { return };
        let mut old = std::mem::replace(&mut self.sched, sw.new);
        self.retired_slices.extend(old.take_slices());
        self.logs_slices = self.sched.logs_slices();
        let held = sw.held.len();
        for (rq, _) in sw.held {
            self.enter(rq, now);
        }
        self.stats.switches += 1;
        self.reports.push(SwitchReport {
            from: old.name(),
            to: self.sched.name(),
            policy: sw.policy,
            requested: sw.requested,
            swapped: now,
            handed_over: sw.handed_over,
            bypassed: sw.bypassed,
            held,
        });
    }

    /// The switches finished since the last call, oldest first.
    pub fn take_reports(&mut self) -> Vec<SwitchReport> {
        std::mem::take(&mut self.reports)
    }

    /// The slices that ended since the last call (see
    /// [`Scheduler::take_slices`]), those of replaced schedulers first.
    pub fn take_slices(&mut self) -> Vec<SliceGrant> {
        let mut out = std::mem::take(&mut self.retired_slices);
        out.extend(self.sched.take_slices());
        out
    }

    /// As [`Driver::take_slices`], each slice handed to `f` in the same
    /// order, without building a list: a caller taking slices at every
    /// dispatch (the simulator's host) pays little when there are none.
    #[inline(always)]
    pub fn take_slices_with(&mut self, mut f: impl FnMut(&SliceGrant)) {
        if !self.retired_slices.is_empty() {
            for g in self.retired_slices.drain(..) {
                f(&g);
            }
        }
        if self.logs_slices {
            for g in self.sched.take_slices() {
                f(&g);
            }
        }
    }

    /// The scheduler failed (it panicked): put `sched` in charge with
    /// `requeue` — every request inserted and not yet dispatched, which the
    /// caller knows — inserted at `now`. A switch in progress is abandoned
    /// (its new scheduler dropped); returns what it was switching to.
    /// Completions of requests in flight go to `sched`.
    pub fn replace(&mut self, sched: Box<S>, requeue: Vec<Request>, now: Nanos) -> Option<&'static str> {
        let abandoned = self.switch.take().map(|sw| sw.new.name());
        self.sched = sched;
        self.logs_slices = self.sched.logs_slices();
        self.dispatch_list.clear();
        self.unowned.clear();
        self.wake = None;
        for rq in requeue {
            self.enter(rq, now);
        }
        abandoned
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hvio_core::{DeviceInfo, Op};

    /// Asks to wait until a fixed time, whatever the time is.
    struct WaitsUntil(Nanos);

    impl Scheduler for WaitsUntil {
        fn name(&self) -> &'static str {
            "waits"
        }
        fn insert(&mut self, _: Request, _: Nanos) {}
        fn dispatch(&mut self, _: Nanos) -> Dispatch {
            Dispatch::WaitUntil(self.0)
        }
        fn completed(&mut self, _: &Request, _: Nanos) {}
        fn has_work(&self) -> bool {
            true
        }
        fn queued(&self) -> usize {
            1
        }
    }

    fn ctx() -> SchedContext {
        SchedContext {
            streams: vec![StreamInfo::new(0, "vm0")],
            device: DeviceInfo::test_disk(1 << 30),
        }
    }

    #[test]
    fn a_wait_not_in_the_future_is_counted_and_moved_by_the_resolution() {
        let mut d = Driver::new(Box::new(WaitsUntil(100)), ctx());
        assert_eq!(d.poll(50), Next::Wait { until: 100, new: true });
        assert_eq!(d.poll(60), Next::Wait { until: 100, new: false }, "the same timer");
        assert_eq!(d.stats().past_waits, 0);
        assert_eq!(d.poll(100), Next::Wait { until: 101, new: true });
        assert_eq!(d.stats().past_waits, 1);
        let mut d = Driver::new(Box::new(WaitsUntil(100)), ctx()).with_resolution(1_000);
        assert_eq!(
            d.poll(100),
            Next::Wait {
                until: 1_100,
                new: true
            }
        );
        assert_eq!(
            d.poll(200),
            Next::Wait {
                until: 1_200,
                new: true
            }
        );
        assert_eq!(d.stats().past_waits, 2);
    }

    #[test]
    fn a_wait_stands_until_due_and_a_replaced_one_is_not_due() {
        let mut d = Driver::new(Box::new(WaitsUntil(100)), ctx());
        d.poll(50);
        assert!(!d.timer_due(99));
        assert!(d.timer_due(100));
        assert!(!d.timer_due(100), "cleared once due");
        d.scheduler_mut().0 = 300;
        d.poll(150);
        assert!(!d.timer_due(200), "an event for an older timer finds nothing due");
        assert_eq!(d.wake(), Some(300));
    }

    #[test]
    fn a_failed_scheduler_is_replaced_with_the_requests_it_held() {
        let mut d = Driver::build("noop", &ParamValues::new(), ctx()).unwrap();
        let rq = |id| Request::new(id, 0, Op::Read, 8 * id, 8, 0);
        for id in 0..3 {
            d.insert(rq(id), 0);
        }
        let Next::Request(first) = d.poll(0) else {
            panic!("noop dispatches")
        };
        d.switch_by_name("deadline", &ParamValues::new(), SwitchPolicy::Freeze, 1)
            .unwrap();
        d.insert(rq(3), 2);
        let fallback = build("noop", &ParamValues::new(), &ctx()).unwrap();
        assert_eq!(d.replace(fallback, vec![rq(1), rq(2), rq(3)], 3), Some("deadline"));
        assert!(!d.switching());
        d.completed(&first, 4);
        let mut got = Vec::new();
        while let Next::Request(r) = d.poll(5) {
            got.push(r.id);
        }
        assert_eq!((got, d.in_flight()), (vec![1, 2, 3], 3));
    }
}
