//! The scheduling core: one host scheduler for every export, driven by the
//! monotonic clock.
//!
//! A single thread owns the scheduler, through the [`Driver`] every hvio loop
//! uses, on the monotonic clock. Exports send it jobs tagged with their VM
//! (the scheduler's stream); it inserts them, dispatches up to the device
//! depth to the backend, serves the driver's wake-ups with a timer (the
//! channel's receive deadline), and feeds completions back. A run-time
//! switch goes through the driver under the policy asked for; the default,
//! `freeze` (blk-mq's), holds new arrivals while the old scheduler drains
//! its queue and the device, then swaps and gives them to the new one.

use crate::faults::Faults;
use crate::io::{IoJob, IoKind, IoResult};
use crate::iolog::IoLog;
use crate::nbd::ring::RingConn;
use crate::online::{Online, Watcher};
use crate::plan::{Plan, PlanStatus, Reason, Step, SwitchRecord};
use crate::poll::{AdaptivePoll, PollConfig};
use crate::reshaped::{ReshapedDisk, Shape};
use crate::stats::{render_prometheus, Status, VmStats, VmStatus};
use crate::store::Store;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use hvio_core::{us, DeviceInfo, Nanos, Op, ParamValues, Request, SchedContext, Scheduler, StreamInfo};
use hvio_sched::{Driver, Next, SwitchPolicy, SwitchReport};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::os::fd::{AsRawFd, FromRawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// A request the scheduler released to the backend.
pub struct Dispatched {
    /// The engine's id of the request.
    pub id: u64,
    /// The request as the scheduler saw it.
    pub rq: Request,
    /// What to do.
    pub job: IoJob,
}

/// Where dispatched requests go. A backend completes each job (calling its
/// `done`) and then sends [`Msg::Done`] through the notifier it was built with.
pub trait Backend: Send {
    /// Start `d`; its completion comes back as [`Msg::Done`].
    fn submit(&mut self, d: Dispatched);
    /// Stop worker threads (called once nothing is in flight).
    fn stop(&mut self);
    /// A backend that completes requests on the engine thread (io_uring):
    /// the engine sleeps in it instead of on its channel.
    fn poller(&mut self) -> Option<&mut dyn Poller> {
        None
    }
    /// Where the backend's threads leave completions the engine need not
    /// be woken for (see [`Completions`]), if it does.
    fn completions(&self) -> Option<Arc<Completions>> {
        None
    }
}

/// Completions a backend's threads leave for the engine thread instead of
/// waking it with a [`Msg::Done`] each.
///
/// A completion only matters at once to a scheduler that acts on it
/// ([`Scheduler::acts_on_completions`]), or to one with requests waiting
/// to dispatch, a switch to drain for, or a shutdown. Under a scheduler
/// that does not act on completions (noop, deadline), with nothing
/// waiting, it changes no decision, and the
/// engine takes it when it next wakes (for the next request, a control
/// request) or before it answers `/status`, with the time it completed. The
/// engine thread allows this (`Completions::defer`) only in that state,
/// and takes what was left each time it stops allowing it before it
/// sleeps; a thread that left a completion just as the engine stopped
/// allowing it wakes the engine itself ([`Msg::Wake`]). On the vhost-user
/// path that is one wake-up of the engine thread less per request (the
/// worker answers the guest itself).
#[derive(Default)]
pub struct Completions {
    defer: AtomicBool,
    left: std::sync::Mutex<Vec<(u64, IoResult, Instant)>>,
}

impl Completions {
    /// Job `id` finished with `result`: left for the engine if it allows
    /// that now, else sent to it as [`Msg::Done`].
    pub fn done(&self, id: u64, result: IoResult, notify: &Sender<Msg>) {
        if self.defer.load(Ordering::SeqCst) {
            self.left
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((id, result, Instant::now()));
            // The engine may have stopped allowing it and taken the rest
            // before this one came: then it must be woken for it.
            if !self.defer.load(Ordering::SeqCst) {
                let _ = notify.send(Msg::Wake);
            }
            return;
        }
        let _ = notify.send(Msg::Done { id, result });
    }

    fn take(&self) -> Vec<(u64, IoResult, Instant)> {
        std::mem::take(&mut *self.left.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// A backend the engine thread drives itself (see [`Backend::poller`]).
/// Finished requests are answered and sent to the engine as [`Msg::Done`].
pub trait Poller {
    /// Hand everything `submit` queued to the kernel and answer what has finished, without sleeping.
    fn poll(&mut self);
    /// Like `poll`, but sleep until a completion, a [`Waker`] signal or `deadline`.
    fn wait(&mut self, deadline: Option<Instant>);
    /// Whether a completion is waiting to be taken by `poll`, checked
    /// without a system call (the engine spins on it before it sleeps);
    /// entries queued since the last `poll` are submitted first.
    fn ready(&mut self) -> bool;
    /// Whether NBD connections are served from this thread: only then does
    /// the engine busy-poll. On the FUSE path the requests come from hvio's
    /// own `/dev/fuse` threads (and the loop device and file system above),
    /// which need the CPU a spin would take (measured: 0.7-0.8x the IOPS).
    fn serves_connections(&self) -> bool;
    /// What senders signal when the engine may be asleep in `wait`.
    fn waker(&self) -> Arc<Waker>;
    /// Serve an NBD connection from this thread: its requests come back as
    /// [`Msg::Submit`], its replies leave through the same ring.
    fn adopt(&mut self, conn: RingConn);
    /// Server shutdown: adopted connections take no more requests (those
    /// read are answered), and connections adopted later neither.
    fn stop_reading(&mut self);
    /// Server shutdown, after a grace period: give up on connections whose
    /// clients do not take their replies (their requests still complete).
    fn abort_connections(&mut self);
}

/// An eventfd that wakes an engine sleeping in its [`Poller`]; senders
/// signal it only when the engine said it was going to sleep, so a busy
/// engine costs them no system call.
pub struct Waker {
    efd: std::os::fd::OwnedFd,
    sleeping: AtomicBool,
}

impl Waker {
    /// A new waker (an eventfd).
    pub fn new() -> std::io::Result<Waker> {
        // SAFETY: plain syscall; the descriptor is owned below.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor nobody else owns.
        Ok(Waker {
            efd: unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) },
            sleeping: AtomicBool::new(false),
        })
    }

    /// Its file descriptor.
    pub fn fd(&self) -> i32 {
        self.efd.as_raw_fd()
    }

    /// Make the eventfd readable.
    pub fn signal(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a valid u64 to our eventfd.
        unsafe { libc::write(self.fd(), &one as *const u64 as *const libc::c_void, 8) };
    }

    /// After a message was sent: wake the engine if it is (about to be) asleep.
    fn wake(&self) {
        // Pairs with the engine's fence between announcing sleep and checking its channel.
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.sleeping.swap(false, Ordering::SeqCst) {
            self.signal();
        }
    }
}

/// Control requests (from the HTTP API or tests).
pub enum Control {
    /// Build `name` with `params` and switch to it under `policy`; the
    /// reply comes when the new scheduler has taken over, with what the
    /// switch cost.
    Switch {
        /// The scheduler to switch to.
        name: String,
        /// Its tunables.
        params: ParamValues,
        /// The switch policy.
        policy: SwitchPolicy,
        /// Answered with the switch's report.
        reply: oneshot::Sender<Result<SwitchReport, String>>,
    },
    /// Change a VM's weight and/or attributes (`Scheduler::set_stream`).
    SetStream {
        /// The VM.
        vm: String,
        /// Its new weight.
        weight: Option<u32>,
        /// Its new scheduler attributes.
        attrs: BTreeMap<String, f64>,
        /// Answered when done.
        reply: oneshot::Sender<Result<(), String>>,
    },
    /// Take the plan step named (or the next one) now: a switch as
    /// `Switch`, answered with the step's name once swapped.
    Phase {
        /// The step (None: the next).
        name: Option<String>,
        /// Answered with the step's name and its switch.
        reply: oneshot::Sender<Result<(String, SwitchReport), String>>,
    },
    /// Run `steps` as the plan from now (an empty list: no plan); a step at
    /// time 0 is taken at once.
    LoadPlan {
        /// The steps.
        steps: Vec<Step>,
        /// Answered with the plan's status.
        reply: oneshot::Sender<Result<PlanStatus, String>>,
    },
    /// Answered with the daemon's status.
    Status(oneshot::Sender<Status>),
    /// Answered with the Prometheus exposition.
    Metrics(oneshot::Sender<String>),
}

/// What the engine thread receives.
pub enum Msg {
    /// A request from an export.
    Submit(IoJob),
    /// A job of a reshaped image's own (see [`crate::reshaped`]), presented
    /// to the scheduler as `shape` says.
    Stage(IoJob, Shape),
    /// A backend left completions in its [`Completions`] after the engine
    /// stopped allowing it: take them.
    Wake,
    /// A backend finished a job.
    Done {
        /// The job's id.
        id: u64,
        /// Its result.
        result: IoResult,
    },
    /// A control request.
    Control(Control),
    /// An NBD connection past its handshake, for a backend that drives sockets.
    Adopt(Box<RingConn>),
    /// Adopted connections stop reading requests (shutdown).
    StopReading,
    /// Adopted connections close now, replies owed or not.
    AbortConnections,
    /// Finish everything queued and in flight, sync the store, stop.
    Shutdown(oneshot::Sender<IoResult>),
}

/// A cheap, cloneable handle to the engine thread.
#[derive(Clone)]
pub struct EngineHandle {
    tx: Sender<Msg>,
    waker: Option<Arc<Waker>>,
    /// The exports' protocol rejections, reported with the engine's status.
    pub faults: Arc<Faults>,
}

impl EngineHandle {
    fn send(&self, m: Msg) -> Result<(), crossbeam_channel::SendError<Msg>> {
        self.tx.send(m)?;
        if let Some(w) = &self.waker {
            w.wake();
        }
        Ok(())
    }

    /// Queue `job`; its `done` is called once it completes (or fails).
    pub fn submit(&self, job: IoJob) {
        if let Err(e) = self.send(Msg::Submit(job)) {
            if let Msg::Submit(job) = e.0 {
                job.finish(Err(libc::ESHUTDOWN));
            }
        }
    }

    /// Whether the engine thread serves NBD connections itself (the io_uring
    /// engine): then [`EngineHandle::adopt`] them after their handshake.
    pub fn drives_sockets(&self) -> bool {
        self.waker.is_some()
    }

    /// Hand a connection to the engine thread (see [`Poller::adopt`]).
    pub fn adopt(&self, conn: RingConn) {
        let _ = self.send(Msg::Adopt(Box::new(conn)));
    }

    /// Adopted connections stop taking requests (see [`Poller::stop_reading`]).
    pub fn stop_reading(&self) {
        let _ = self.send(Msg::StopReading);
    }

    /// Adopted connections give up on clients that do not read (see [`Poller::abort_connections`]).
    pub fn abort_connections(&self) {
        let _ = self.send(Msg::AbortConnections);
    }

    /// Sends `c`; false if the engine has stopped.
    pub fn control(&self, c: Control) -> bool {
        self.send(Msg::Control(c)).is_ok()
    }

    /// Queue a reshaped image's job (see [`Msg::Stage`]).
    pub(crate) fn submit_stage(&self, job: IoJob, shape: Shape) {
        if let Err(e) = self.send(Msg::Stage(job, shape)) {
            if let Msg::Stage(job, _) = e.0 {
                job.finish(Err(libc::ESHUTDOWN));
            }
        }
    }

    /// Drain, sync and stop the engine; waits for it.
    pub fn shutdown(&self) -> IoResult {
        let (tx, rx) = oneshot::channel();
        if self.send(Msg::Shutdown(tx)).is_err() {
            return Ok(());
        }
        rx.blocking_recv().unwrap_or(Ok(()))
    }
}

/// Everything the engine needs to start.
pub struct EngineSetup {
    /// The backing store.
    pub store: Arc<Store>,
    /// The host scheduler.
    pub scheduler: String,
    /// Its tunables.
    pub params: ParamValues,
    /// The VMs as streams.
    pub streams: Vec<StreamInfo>,
    /// What the scheduler may know of the device.
    pub device: DeviceInfo,
    /// Requests at the backend at once.
    pub depth: usize,
    /// The request log, if any.
    pub iolog: Option<IoLog>,
    /// Busy-polling before sleeping (engines with a [`Poller`] only).
    pub poll: PollConfig,
    /// The switch plan (`[[phase]]`); a step at time 0 replaces `scheduler`.
    pub plan: Vec<Step>,
    /// The online mode (`[online]`).
    pub online: Option<Online>,
    /// Per VM: its reshaped image, if its layout is `reshaped`.
    pub images: Vec<Option<Arc<ReshapedDisk>>>,
}

/// Who is told when a switch is done.
type SwitchReply = oneshot::Sender<Result<SwitchReport, String>>;
/// What `POST /phase` is answered with: the step's name and the switch's cost.
type PhaseReply = oneshot::Sender<Result<(String, SwitchReport), String>>;

/// A switch the driver has in progress.
struct PendingSwitch {
    name: String,
    params: ParamValues,
    reason: Reason,
    /// The plan step it takes.
    step: Option<usize>,
    /// The online class it is for.
    class: Option<usize>,
    reply: Reply,
}

enum Reply {
    None,
    Switch(SwitchReply),
    Phase(PhaseReply),
}

impl Reply {
    fn send(self, r: Result<(String, SwitchReport), String>) {
        match self {
            Reply::None => {}
            Reply::Switch(tx) => {
                let _ = tx.send(r.map(|(_, report)| report));
            }
            Reply::Phase(tx) => {
                let _ = tx.send(r);
            }
        }
    }
}

/// How many finished switches `GET /status` lists (the newest).
const SWITCH_LOG: usize = 64;

struct Inflight {
    rq: Request,
    vm: usize,
    kind: IoKind,
    len: u64,
}

struct Engine {
    store: Arc<Store>,
    sched: Driver,
    sched_name: String,
    params: ParamValues,
    backend: Box<dyn Backend>,
    depth: usize,
    epoch: Instant,
    next_id: u64,
    /// Jobs given to the driver and not yet dispatched (queued, held or
    /// bypassing during a switch).
    waiting: HashMap<u64, (Request, IoJob)>,
    inflight: HashMap<u64, Inflight>,
    switching: Option<PendingSwitch>,
    shutdown: Option<oneshot::Sender<IoResult>>,
    stats: Vec<VmStats>,
    dispatched: u64,
    backend_errors: u64,
    switches: u64,
    switches_by: BTreeMap<Reason, u64>,
    /// The newest finished switches and their costs.
    switch_log: VecDeque<SwitchRecord>,
    plan: Option<Plan>,
    online: Option<Watcher>,
    /// Times a scheduler panicked and noop took over.
    sched_failures: u64,
    iolog: Option<IoLog>,
    poll: AdaptivePoll,
    faults: Arc<Faults>,
    images: Vec<Option<Arc<ReshapedDisk>>>,
    /// The backend's completions left without a message, if it leaves any.
    completions: Option<Arc<Completions>>,
}

/// Start the engine thread with `backend` (built with the notifier that
/// [`channel`] returned).
pub fn spawn(
    setup: EngineSetup,
    tx: Sender<Msg>,
    rx: Receiver<Msg>,
    backend: Box<dyn Backend>,
) -> Result<(EngineHandle, std::thread::JoinHandle<()>), String> {
    let ctx = SchedContext {
        streams: setup.streams.clone(),
        device: setup.device.clone(),
    };
    let mut setup = setup;
    if let Some(first) = setup.plan.first().filter(|s| s.at == 0) {
        setup.scheduler = first.host.clone();
        setup.params = first.params.clone();
    }
    let sched = hvio_sched::build(&setup.scheduler, &setup.params, &ctx).map_err(|e| e.to_string())?;
    spawn_with(setup, sched, tx, rx, backend)
}

/// [`spawn`] with a scheduler already built (named `setup.scheduler`).
pub(crate) fn spawn_with(
    setup: EngineSetup,
    sched: Box<dyn Scheduler>,
    tx: Sender<Msg>,
    rx: Receiver<Msg>,
    backend: Box<dyn Backend>,
) -> Result<(EngineHandle, std::thread::JoinHandle<()>), String> {
    let ctx = SchedContext {
        streams: setup.streams,
        device: setup.device,
    };
    let n = ctx.streams.len();
    let plan = (!setup.plan.is_empty()).then(|| {
        let mut p = Plan::new(setup.plan, 0);
        p.take_start();
        p
    });
    let mut backend = backend;
    let waker = backend.poller().map(|p| p.waker());
    let completions = backend.completions();
    let faults = Arc::new(Faults::default());
    let mut engine = Engine {
        store: setup.store,
        // WaitUntil deadlines are kept to the thread's timer slack (see `run`).
        sched: Driver::new(sched, ctx).with_resolution(us(1)),
        sched_name: setup.scheduler,
        params: setup.params,
        backend,
        depth: setup.depth.max(1),
        epoch: Instant::now(),
        next_id: 1,
        waiting: HashMap::new(),
        inflight: HashMap::new(),
        switching: None,
        shutdown: None,
        stats: (0..n).map(|_| VmStats::new()).collect(),
        dispatched: 0,
        backend_errors: 0,
        switches: 0,
        switches_by: BTreeMap::new(),
        switch_log: VecDeque::new(),
        plan,
        online: setup.online.map(|o| Watcher::new(o, 0)),
        sched_failures: 0,
        iolog: setup.iolog,
        poll: AdaptivePoll::new(if waker.is_some() { setup.poll } else { PollConfig::OFF }),
        faults: faults.clone(),
        images: setup.images,
        completions,
    };
    let handle = std::thread::Builder::new()
        .name("hvio-sched".into())
        .spawn(move || engine.run(rx))
        .map_err(|e| format!("cannot start the scheduler thread: {e}"))?;
    Ok((EngineHandle { tx, waker, faults }, handle))
}

/// The engine's message channel: hand the sender to the backend as its notifier.
pub fn channel() -> (Sender<Msg>, Receiver<Msg>) {
    crossbeam_channel::unbounded()
}

/// Receive from `rx`, sleeping until a message comes or `deadline` passes.
///
/// `Receiver::recv` and `recv_deadline` spin and then call `sched_yield` up
/// to four times before they sleep; on a loaded machine each yield hands the
/// core to another process for a time slice, and a message that arrives
/// meanwhile waits for it (no wake-up is sent to a thread that has not gone
/// to sleep). A request crosses such a wait at every thread it passes, so the
/// engine and its workers receive through a `Select`, which sleeps at once.
pub(crate) fn recv_sleeping<T>(rx: &Receiver<T>, deadline: Option<Instant>) -> Result<T, RecvTimeoutError> {
    let mut sel = crossbeam_channel::Select::new();
    sel.recv(rx);
    let op = match deadline {
        Some(at) => sel.select_deadline(at).map_err(|_| RecvTimeoutError::Timeout)?,
        None => sel.select(),
    };
    op.recv(rx).map_err(|_| RecvTimeoutError::Disconnected)
}

impl Engine {
    fn now(&self) -> Nanos {
        self.epoch.elapsed().as_nanos() as Nanos + 1
    }

    fn run(&mut self, rx: Receiver<Msg>) {
        // WaitUntil deadlines are the scheduler's timers: ask the kernel for
        // microsecond wake-ups instead of the default 50 µs timer slack.
        // SAFETY: plain prctl on the calling thread.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1_000 as libc::c_ulong) };
        let waker = self.backend.poller().map(|p| p.waker());
        loop {
            let now = self.now();
            let mut progress = self.take_completions() > 0
                || self.take_messages(&rx) > 0
                || self.sched.timer_due(now)
                || self.tick(now);
            if !progress {
                let deadline = self
                    .wake()
                    .map(|t| self.epoch + Duration::from_nanos(t.saturating_sub(1)));
                match (self.backend.poller(), &waker) {
                    (Some(p), Some(w)) => {
                        // Completions come back as messages: loop to take them.
                        // First spin for the adaptive window (see `poll.rs`),
                        // while the ring serves NBD connections.
                        let start = Instant::now();
                        let worth_it = p.serves_connections();
                        if self
                            .poll
                            .spin(start, deadline, worth_it, || !rx.is_empty() || p.ready())
                        {
                            p.poll();
                            continue;
                        }
                        w.sleeping.store(true, Ordering::SeqCst);
                        std::sync::atomic::fence(Ordering::SeqCst);
                        if rx.is_empty() {
                            p.wait(deadline);
                        } else {
                            p.poll();
                        }
                        w.sleeping.store(false, Ordering::SeqCst);
                        self.poll.slept(start);
                        continue;
                    }
                    _ => {
                        if !self.allow_deferred_completions() && self.take_completions() > 0 {
                            // Left just before the engine stopped allowing it.
                            self.pump();
                            continue;
                        }
                        match recv_sleeping(&rx, deadline) {
                            Ok(m) => {
                                self.handle(m);
                                self.take_messages(&rx);
                            }
                            Err(RecvTimeoutError::Timeout) => {}
                            Err(RecvTimeoutError::Disconnected) => break,
                        }
                        progress = true;
                    }
                }
            }
            debug_assert!(progress);
            self.pump();
            if let Some(p) = self.backend.poller() {
                p.poll();
            }
            if self.shutdown.is_some() && self.idle() {
                let r = self.store.sync_all();
                if r.is_ok() {
                    for img in self.images.iter().flatten() {
                        img.mark_clean();
                    }
                }
                self.backend.stop();
                if let Some(log) = self.iolog.take() {
                    if let Err(e) = log.finish() {
                        tracing::error!(error = %e, "request log: final write failed");
                    }
                }
                if let Some(tx) = self.shutdown.take() {
                    let _ = tx.send(r);
                }
                tracing::info!(dispatched = self.dispatched, "scheduler stopped");
                return;
            }
        }
        self.backend.stop();
    }

    /// Let the backend leave completions without a message while nothing
    /// needs one at once (see [`Completions`]); whether it may.
    fn allow_deferred_completions(&self) -> bool {
        let Some(c) = &self.completions else { return false };
        let allow = !self.sched.scheduler().acts_on_completions()
            && self.waiting.is_empty()
            && !self.switch_in_progress()
            && self.plan.is_none()
            && self.online.is_none()
            && self.shutdown.is_none();
        c.defer.store(allow, Ordering::SeqCst);
        allow
    }

    /// Take the completions the backend left; how many.
    fn take_completions(&mut self) -> usize {
        let Some(c) = &self.completions else { return 0 };
        let left = c.take();
        let n = left.len();
        for (id, result, at) in left {
            let now = at.saturating_duration_since(self.epoch).as_nanos() as Nanos + 1;
            self.done(id, result, now);
        }
        n
    }

    /// Handle what is already waiting (at most a batch, so dispatching is not starved).
    fn take_messages(&mut self, rx: &Receiver<Msg>) -> usize {
        let mut n = 0;
        while n < 256 {
            match rx.try_recv() {
                Ok(m) => {
                    self.handle(m);
                    n += 1;
                }
                Err(_) => break,
            }
        }
        n
    }

    /// Whether a switch is in progress (asked for and not yet swapped).
    fn switch_in_progress(&self) -> bool {
        self.switching.is_some() || self.sched.switching()
    }

    /// Take the plan's step if its time has come (not during another
    /// switch: it waits for that one to finish). Whether a switch began.
    fn tick(&mut self, now: Nanos) -> bool {
        if let Some(w) = self.online.as_mut() {
            w.roll(now);
        }
        if self.switch_in_progress() || self.shutdown.is_some() {
            return false;
        }
        if let Some(c) = self.online.as_ref().and_then(Watcher::due) {
            return self.take_class(c, now);
        }
        let Some(i) = self.plan.as_ref().and_then(|p| p.due(now)) else {
            return false;
        };
        self.take_step(i, Reason::PlanTime, Reply::None, now)
    }

    /// The earliest of the scheduler's timer and the plan's next step
    /// (which waits while a switch is in progress: the completions that
    /// end it wake the engine).
    fn wake(&self) -> Option<Nanos> {
        let plan = if self.switch_in_progress() {
            None
        } else {
            self.plan.as_ref().and_then(|p| p.wake())
        };
        let window = self.online.as_ref().map(Watcher::window_end);
        [self.sched.wake(), plan, window].into_iter().flatten().min()
    }

    /// Switch to online class `c`'s scheduler (unless it runs already).
    /// Whether a switch began.
    fn take_class(&mut self, c: usize, now: Nanos) -> bool {
        let Some(w) = self.online.as_mut() else { return false };
        let class = w.class(c).clone();
        let policy = w.config().policy;
        if class.host == self.sched_name && class.params == self.params {
            w.switched(c);
            tracing::info!(class = %class.name, scheduler = %class.host, "online: new class, its scheduler runs already");
            return false;
        }
        let pending = PendingSwitch {
            name: class.host.clone(),
            params: class.params.clone(),
            reason: Reason::Online,
            step: None,
            class: Some(c),
            reply: Reply::None,
        };
        let began = self.start_switch(pending, policy, now);
        if let Some(w) = self.online.as_mut() {
            // A refused switch is not retried every loop: the class waits for its windows again.
            w.switched(c);
        }
        tracing::info!(class = %class.name, scheduler = %class.host, began, "online: new class");
        began
    }

    /// Tell the online mode how many requests are outstanding from `now`.
    fn track_depth(&mut self, now: Nanos) {
        if let Some(w) = self.online.as_mut() {
            w.outstanding(now, self.waiting.len() + self.inflight.len());
        }
    }

    /// Switch to plan step `i` now. Whether the switch began (if not, `reply` has the error).
    fn take_step(&mut self, i: usize, reason: Reason, reply: Reply, now: Nanos) -> bool {
        let Some(plan) = self.plan.as_mut() else {
            reply.send(Err("no plan is loaded".into()));
            return false;
        };
        let step = plan.steps()[i].clone();
        let by_clock = reason == Reason::PlanTime;
        let pending = PendingSwitch {
            name: step.host.clone(),
            params: step.params.clone(),
            reason,
            step: Some(i),
            class: None,
            reply,
        };
        if self.start_switch(pending, step.policy, now) {
            if let Some(plan) = self.plan.as_mut() {
                plan.taken(i, now, by_clock);
            }
            tracing::info!(step = %step.name, scheduler = %step.host, reason = reason.as_str(), "plan step taken");
            true
        } else {
            tracing::warn!(step = %step.name, scheduler = %step.host, "plan step not taken: its switch was refused");
            false
        }
    }

    /// Ask the driver to switch as `pending` says. Whether it began; if
    /// not, whoever asked has the error and the old scheduler runs on.
    fn start_switch(&mut self, pending: PendingSwitch, policy: SwitchPolicy, now: Nanos) -> bool {
        if let Some(p) = &self.switching {
            let msg = format!(
                "a switch to `{}` is in progress: nothing changed, `{}` serves on",
                p.name, self.sched_name
            );
            pending.reply.send(Err(msg));
            return false;
        }
        // Build first: a bad name or parameter leaves the old scheduler running.
        let (queued, inflight) = (self.sched.queued(), self.inflight.len());
        let (name, params) = (pending.name.clone(), pending.params.clone());
        match self.sched_call("switch", |s| s.switch_by_name(&name, &params, policy, now)) {
            Some(Ok(())) => {
                tracing::info!(to = %name, %policy, queued, inflight, reason = pending.reason.as_str(), "scheduler switch started");
                self.switching = Some(pending);
                // A switch with nothing to drain is already done.
                self.finish_switches();
                true
            }
            Some(Err(e)) => {
                pending.reply.send(Err(e.to_string()));
                false
            }
            None => {
                pending.reply.send(Err(format!(
                    "the running scheduler failed while the switch to `{name}` began: replaced by noop"
                )));
                false
            }
        }
    }

    fn idle(&self) -> bool {
        self.waiting.is_empty()
            && self.inflight.is_empty()
            && !self.sched.switching()
            && self.images.iter().flatten().all(|i| i.quiet())
    }

    fn handle(&mut self, m: Msg) {
        match m {
            Msg::Submit(job) => {
                let now = self.now();
                if let Some(log) = &mut self.iolog {
                    log.record(now, job.vm, job.kind, job.offset, job.len, job.fua);
                }
                match self.images.get(job.vm) {
                    Some(Some(img)) => img.clone().submit(job),
                    _ => self.insert(job, now, None),
                }
            }
            Msg::Stage(job, shape) => {
                let now = self.now();
                self.insert(job, now, Some(shape));
            }
            Msg::Wake => {
                self.take_completions();
            }
            Msg::Done { id, result } => {
                let now = self.now();
                self.done(id, result, now);
            }
            Msg::Control(c) => self.control(c),
            Msg::Adopt(conn) => {
                if let Some(p) = self.backend.poller() {
                    p.adopt(*conn);
                }
            }
            Msg::StopReading => {
                if let Some(p) = self.backend.poller() {
                    p.stop_reading();
                }
            }
            Msg::AbortConnections => {
                if let Some(p) = self.backend.poller() {
                    p.abort_connections();
                }
            }
            Msg::Shutdown(tx) => {
                for img in self.images.iter().flatten() {
                    img.close();
                }
                self.shutdown = Some(tx);
            }
        }
    }

    fn insert(&mut self, job: IoJob, arrival: Nanos, shape: Option<Shape>) {
        let vm = job.vm;
        if vm >= self.store.disks.len() {
            job.finish(Err(libc::EINVAL));
            return;
        }
        let disk = &self.store.disks[vm];
        let id = self.next_id;
        self.next_id += 1;
        let op = match job.kind {
            IoKind::Read => Op::Read,
            IoKind::Write => Op::Write,
            IoKind::Flush => Op::Flush,
            IoKind::Trim | IoKind::WriteZeroes { .. } => Op::Discard,
        };
        let (sector, sectors) = disk.sectors(job.kind, job.offset, job.len);
        let mut rq = Request::new(id, vm as u32, op, sector, sectors, arrival);
        // A VM's direct I/O is synchronous from the host's point of view.
        rq.sync = true;
        rq.fua = job.fua;
        if let Some(sh) = shape {
            rq.sync = sh.sync;
            rq.meta = sh.meta;
            rq.class = sh.class;
        }
        self.stats[vm].queued += 1;
        self.waiting.insert(id, (rq, job));
        if let Some(w) = self.online.as_mut() {
            w.arrival(rq.stream, op, sector, sectors);
        }
        self.track_depth(arrival);
        self.sched_call("insert", |s| s.insert(rq, arrival));
    }

    /// Call the scheduler. A panic in it (a scheduler bug, e.g. on a weight,
    /// attribute or parameter it does not handle) must not take every VM's
    /// disk down with the thread: the scheduler is replaced by noop, every
    /// request it held is inserted there, and the daemon serves on.
    fn sched_call<R>(&mut self, what: &'static str, f: impl FnOnce(&mut Driver) -> R) -> Option<R> {
        let sched = &mut self.sched;
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(sched))) {
            Ok(r) => Some(r),
            Err(payload) => {
                let why = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "(no message)".into());
                self.fall_back_to_noop(what, &why);
                None
            }
        }
    }

    fn fall_back_to_noop(&mut self, what: &str, why: &str) {
        tracing::error!(
            scheduler = %self.sched_name,
            call = what,
            panic = why,
            waiting = self.waiting.len(),
            "the scheduler panicked: replaced by noop, its requests re-inserted; please report this bug"
        );
        self.sched_failures += 1;
        let noop =
            hvio_sched::build("noop", &ParamValues::new(), self.sched.context()).expect("noop takes no parameters");
        self.sched_name = "noop".into();
        self.params = ParamValues::new();
        let mut rqs: Vec<Request> = self.waiting.values().map(|(rq, _)| *rq).collect();
        rqs.sort_by_key(|rq| rq.id);
        let now = self.now();
        self.sched.replace(noop, rqs, now);
        if let Some(p) = self.switching.take() {
            p.reply.send(Err(format!(
                "the running scheduler failed during the switch to `{}`: replaced by noop",
                p.name
            )));
        }
    }

    fn pump(&mut self) {
        while self.inflight.len() < self.depth {
            let now = self.now();
            let Some(next) = self.sched_call("dispatch", |s| s.poll(now)) else {
                continue; // the fallback scheduler has every waiting request
            };
            match next {
                Next::Request(rq) => {
                    let Some((_, job)) = self.waiting.remove(&rq.id) else {
                        tracing::error!(id = rq.id, scheduler = %self.sched_name, "scheduler dispatched an unknown request");
                        continue;
                    };
                    let vm = job.vm;
                    self.stats[vm].queued = self.stats[vm].queued.saturating_sub(1);
                    self.stats[vm].inflight += 1;
                    self.inflight.insert(
                        rq.id,
                        Inflight {
                            rq,
                            vm,
                            kind: job.kind,
                            len: job.len,
                        },
                    );
                    self.dispatched += 1;
                    self.backend.submit(Dispatched { id: rq.id, rq, job });
                }
                Next::Wait { .. } | Next::Idle => break,
            }
        }
        self.finish_switches();
    }

    /// Job `id` completed at `now`.
    fn done(&mut self, id: u64, result: IoResult, now: Nanos) {
        let Some(f) = self.inflight.remove(&id) else {
            tracing::error!(id, "completion for a request not in flight");
            return;
        };
        self.track_depth(now);
        self.sched_call("completed", |s| s.completed(&f.rq, now));
        let s = &mut self.stats[f.vm];
        s.inflight = s.inflight.saturating_sub(1);
        s.complete(f.kind, f.len, now.saturating_sub(f.rq.arrival), result.is_ok(), now);
        if let Err(e) = result {
            self.backend_errors += 1;
            let vm = &self.store.disks[f.vm].name;
            let err = std::io::Error::from_raw_os_error(e);
            match e {
                libc::EINVAL | libc::EPERM => {
                    tracing::debug!(vm = %vm, op = f.kind.name(), sector = f.rq.sector, error = %err, "request failed")
                }
                _ => tracing::warn!(vm = %vm, op = f.kind.name(), sector = f.rq.sector, error = %err, "backend error"),
            }
        }
    }

    /// Tell whoever asked for a switch the driver finished.
    fn finish_switches(&mut self) {
        for report in self.sched.take_reports() {
            tracing::info!(
                from = report.from,
                to = report.to,
                policy = %report.policy,
                drain_us = report.drain_time() / 1_000,
                handed_over = report.handed_over,
                bypassed = report.bypassed,
                held = report.held,
                "scheduler switched"
            );
            self.switches += 1;
            if let Some(p) = self.switching.take() {
                let secs = |t: Nanos| t as f64 / 1e9;
                let step = p
                    .step
                    .and_then(|i| self.plan.as_ref().map(|plan| plan.steps()[i].name.clone()));
                let class = p
                    .class
                    .and_then(|c| self.online.as_ref().map(|w| w.class(c).name.clone()));
                let record = SwitchRecord {
                    reason: p.reason,
                    step: step.clone(),
                    class,
                    from: self.sched_name.clone(),
                    to: p.name.clone(),
                    policy: report.policy.as_str().into(),
                    requested_s: secs(report.requested),
                    swapped_s: secs(report.swapped),
                    drain_us: report.drain_time() / 1_000,
                    handed_over: report.handed_over,
                    bypassed: report.bypassed,
                    held: report.held,
                };
                *self.switches_by.entry(p.reason).or_default() += 1;
                if let (Some(i), Some(plan)) = (p.step, self.plan.as_mut()) {
                    plan.record(i, record.clone());
                }
                if self.switch_log.len() == SWITCH_LOG {
                    self.switch_log.pop_front();
                }
                self.switch_log.push_back(record);
                self.sched_name = p.name;
                self.params = p.params;
                p.reply.send(Ok((step.unwrap_or_default(), report)));
            }
        }
    }

    fn control(&mut self, c: Control) {
        // Every completion counted before a status or a switch.
        self.take_completions();
        match c {
            Control::Switch {
                name,
                params,
                policy,
                reply,
            } => {
                let now = self.now();
                let pending = PendingSwitch {
                    name,
                    params,
                    reason: Reason::Api,
                    step: None,
                    class: None,
                    reply: Reply::Switch(reply),
                };
                self.start_switch(pending, policy, now);
            }
            Control::Phase { name, reply } => {
                let now = self.now();
                let found = match &self.plan {
                    None => Err("no plan is loaded: give [[phase]] steps in the configuration or `PUT /plan`".into()),
                    Some(plan) => match &name {
                        Some(n) => plan.find(n),
                        None => plan.next_step(),
                    },
                };
                match found {
                    Ok(i) => {
                        self.take_step(i, Reason::PlanApi, Reply::Phase(reply), now);
                    }
                    Err(e) => {
                        let _ = reply.send(Err(e));
                    }
                }
            }
            Control::LoadPlan { steps, reply } => {
                if self.online.is_some() {
                    let _ = reply.send(Err(
                        "the online mode ([online]) switches this daemon's scheduler: a plan would fight it".into(),
                    ));
                    return;
                }
                if let Some(p) = &self.switching {
                    let _ = reply.send(Err(format!(
                        "a switch to `{}` is in progress: the plan was not loaded, `{}` serves on",
                        p.name, self.sched_name
                    )));
                    return;
                }
                let now = self.now();
                if steps.is_empty() {
                    self.plan = None;
                    tracing::info!("plan cleared");
                } else {
                    let starts_now = steps[0].at == 0;
                    self.plan = Some(Plan::new(steps, now));
                    tracing::info!("plan loaded");
                    if starts_now {
                        self.take_step(0, Reason::PlanApi, Reply::None, now);
                    }
                }
                let _ = reply.send(Ok(self.plan.as_ref().map(Plan::status).unwrap_or_else(|| PlanStatus {
                    loaded_s: now as f64 / 1e9,
                    current: None,
                    next: None,
                    next_at_s: None,
                    steps: Vec::new(),
                })));
            }
            Control::SetStream {
                vm,
                weight,
                attrs,
                reply,
            } => {
                let Some(i) = self.sched.context().streams.iter().position(|s| s.name == vm) else {
                    let _ = reply.send(Err(format!("unknown VM `{vm}`")));
                    return;
                };
                if let Some(w) = weight {
                    if !(1..=10_000).contains(&w) {
                        let _ = reply.send(Err(format!("weight {w} for VM `{vm}`: must be between 1 and 10000")));
                        return;
                    }
                }
                for (k, &v) in &attrs {
                    if let Err(reason) = hvio_sched::check_stream_attr(k, v) {
                        let _ = reply.send(Err(format!("VM `{vm}`: invalid value {v:?} for `attrs.{k}`: {reason}")));
                        return;
                    }
                }
                let mut info = self.sched.context().streams[i].clone();
                if let Some(w) = weight {
                    info.weight = w;
                }
                info.attrs.extend(attrs);
                if self.sched_call("set_stream", |s| s.set_stream(&info)).is_none() {
                    let _ = reply.send(Err(format!(
                        "the scheduler failed on this change for VM `{vm}` and was replaced by noop (see the log)"
                    )));
                    return;
                }
                tracing::info!(vm = %vm, weight = info.weight, "stream changed");
                let _ = reply.send(Ok(()));
            }
            Control::Status(tx) => {
                let _ = tx.send(self.status());
            }
            Control::Metrics(tx) => {
                let st = self.status();
                let mut text = render_prometheus(&st, &self.stats, self.dispatched, self.backend_errors);
                let images: Vec<&ReshapedDisk> = self.images.iter().flatten().map(|i| &**i).collect();
                crate::reshaped::prometheus(&images, &mut text);
                let _ = tx.send(text);
            }
        }
    }

    fn status(&mut self) -> Status {
        let now = self.now();
        let vms = self
            .stats
            .iter_mut()
            .zip(&self.sched.context().streams)
            .zip(&self.store.disks)
            .enumerate()
            .map(|(vm, ((engine_st, si), d))| {
                engine_st.refresh(now);
                // A reshaped VM's counts are its guest's requests; the image
                // file's (what was scheduled) go under `image_file`.
                let image = self.images.get(vm).and_then(Option::as_ref);
                let guest = image.map(|img| img.guest_stats());
                let image_file = image.map(|img| img.file_status(engine_st));
                let st = guest.as_ref().unwrap_or(engine_st);
                let r = &st.ops[0];
                let w = &st.ops[1];
                VmStatus {
                    name: d.name.clone(),
                    size: d.size,
                    weight: si.weight,
                    attrs: si.attrs.clone(),
                    reads: r.count,
                    writes: w.count,
                    flushes: st.ops[2].count,
                    discards: st.ops[3].count,
                    errors: st.ops.iter().map(|o| o.errors).sum(),
                    bytes_read: r.bytes,
                    bytes_written: w.bytes,
                    iops: st.iops,
                    mb_per_s: st.bytes_per_s / 1e6,
                    queued: engine_st.queued,
                    inflight: engine_st.inflight,
                    read_p50_us: r.lat_us.value_at_quantile(0.5),
                    read_p99_us: r.lat_us.value_at_quantile(0.99),
                    write_p50_us: w.lat_us.value_at_quantile(0.5),
                    write_p99_us: w.lat_us.value_at_quantile(0.99),
                    image_file,
                }
            })
            .collect();
        Status {
            scheduler: self.sched_name.clone(),
            params: self.params.clone(),
            depth: self.depth,
            inflight: self.inflight.len(),
            queued: self.sched.queued(),
            switches: self.switches,
            switches_by_reason: Reason::ALL
                .iter()
                .map(|r| (r.as_str().to_string(), self.switches_by.get(r).copied().unwrap_or(0)))
                .collect(),
            switch_log: self.switch_log.iter().cloned().collect(),
            plan: self.plan.as_ref().map(Plan::status),
            online: self.online.as_ref().map(Watcher::status),
            scheduler_failures: self.sched_failures,
            uptime_s: now as f64 / 1e9,
            counters: self.sched.counters(),
            poll: self.poll.stats(),
            rejections: self.faults.counts().into_iter().collect(),
            vms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::AlignedBuf;
    use hvio_core::{Dispatch, SECTOR_BYTES};

    /// noop that panics on its third insert, as a scheduler bug would.
    struct Buggy {
        inner: Box<dyn Scheduler>,
        inserts: usize,
    }

    impl Scheduler for Buggy {
        fn name(&self) -> &'static str {
            "buggy"
        }
        fn insert(&mut self, rq: Request, now: Nanos) {
            self.inserts += 1;
            assert!(self.inserts != 3, "buggy scheduler: third insert");
            self.inner.insert(rq, now)
        }
        fn dispatch(&mut self, now: Nanos) -> Dispatch {
            self.inner.dispatch(now)
        }
        fn completed(&mut self, rq: &Request, now: Nanos) {
            self.inner.completed(rq, now)
        }
        fn has_work(&self) -> bool {
            self.inner.has_work()
        }
        fn queued(&self) -> usize {
            self.inner.queued()
        }
    }

    /// An engine on a thread pool of 2 over a 1 MiB file, running the
    /// scheduler `sched` builds (named `name`) at `depth`.
    fn engine_with(
        name: &str,
        depth: usize,
        sched: impl FnOnce(&SchedContext) -> Box<dyn Scheduler>,
    ) -> (EngineHandle, std::thread::JoinHandle<()>, Arc<Store>, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let text = format!(
            "[store]\npath = \"{}/disk.img\"\n[[vm]]\nname = \"vm1\"\nsize = \"1MiB\"\n",
            dir.path().display()
        );
        let cfg = crate::Config::from_toml_str(&text, "test.toml").unwrap();
        let store = Arc::new(Store::open(&cfg).unwrap());
        let streams = vec![StreamInfo::new(0, "vm1")];
        let device = DeviceInfo {
            capacity: store.capacity() / SECTOR_BYTES,
            rotational: false,
            queue_depth: 4,
            seek: Arc::new(hvio_core::LinearSeek {
                ns_per_sector: 0.0,
                max: 0,
                revolution: 0,
            }),
        };
        let ctx = SchedContext {
            streams: streams.clone(),
            device: device.clone(),
        };
        let (tx, rx) = channel();
        let backend = Box::new(crate::backend::ThreadPool::new(store.clone(), 2, tx.clone()).unwrap());
        let setup = EngineSetup {
            store: store.clone(),
            scheduler: name.into(),
            params: ParamValues::new(),
            streams,
            device,
            depth,
            iolog: None,
            poll: PollConfig::OFF,
            plan: Vec::new(),
            online: None,
            images: Vec::new(),
        };
        let (engine, thread) = spawn_with(setup, sched(&ctx), tx, rx, backend).unwrap();
        (engine, thread, store, dir)
    }

    /// Write block i with bytes i + 1, for i in 0..n; every answer.
    fn write_blocks(engine: &EngineHandle, n: u64) -> Vec<(u64, IoResult)> {
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        for i in 0..n {
            let done_tx = done_tx.clone();
            engine.submit(IoJob {
                vm: 0,
                kind: IoKind::Write,
                offset: i * 4096,
                len: 4096,
                fua: false,
                buf: AlignedBuf::from_slice(&[i as u8 + 1; 4096]),
                done: Box::new(move |r, _| {
                    let _ = done_tx.send((i, r));
                }),
            });
        }
        let mut got: Vec<(u64, IoResult)> = (0..n)
            .map(|_| {
                done_rx
                    .recv_timeout(Duration::from_secs(20))
                    .expect("a request was lost")
            })
            .collect();
        got.sort_by_key(|x| x.0);
        got
    }

    fn status(engine: &EngineHandle) -> Status {
        let (stx, srx) = oneshot::channel();
        assert!(engine.control(Control::Status(stx)));
        srx.blocking_recv().unwrap()
    }

    #[test]
    fn a_panicking_scheduler_is_replaced_and_no_request_is_lost() {
        // Depth 1: when the third insert panics, requests are waiting in the scheduler.
        let (engine, thread, store, _dir) = engine_with("buggy", 1, |ctx| {
            Box::new(Buggy {
                inner: hvio_sched::build("noop", &ParamValues::new(), ctx).unwrap(),
                inserts: 0,
            })
        });
        let got = write_blocks(&engine, 10);
        assert!(got.iter().all(|(_, r)| r.is_ok()), "{got:?}");
        let st = status(&engine);
        assert_eq!((st.scheduler.as_str(), st.scheduler_failures), ("noop", 1));
        for i in 0..10u64 {
            let mut b = AlignedBuf::zeroed(4096);
            store.execute(0, IoKind::Read, i * 4096, 4096, false, &mut b).unwrap();
            assert_eq!(b.as_slice()[0], i as u8 + 1);
        }
        engine.shutdown().unwrap();
        thread.join().unwrap();
    }

    /// Under noop the thread pool leaves completions without waking the
    /// engine (see `Completions`): `/status` still counts every one, and
    /// nothing is in flight once all are answered. Without the engine
    /// taking them before a status, the writes counted stay short (the
    /// engine sleeps with them left).
    #[test]
    fn noop_status_counts_the_completions_left_without_a_message() {
        let (engine, thread, _store, _dir) = engine_with("noop", 32, |ctx| {
            hvio_sched::build("noop", &ParamValues::new(), ctx).unwrap()
        });
        for round in 1..=5u64 {
            let got = write_blocks(&engine, 40);
            assert!(got.iter().all(|(_, r)| r.is_ok()), "{got:?}");
            // A worker answers before it tells the engine: let the last
            // finish that, and the engine go to sleep.
            std::thread::sleep(Duration::from_millis(200));
            let st = status(&engine);
            assert_eq!(
                (st.vms[0].writes, st.vms[0].inflight),
                (40 * round, 0),
                "round {round}: /status's writes and requests in flight"
            );
        }
        engine.shutdown().unwrap();
        thread.join().unwrap();
    }
}
