//! The guest: its threads and jobs, journal, page cache, guest scheduler and virtio ring.

mod buffered;
mod jobs;

use super::*;
pub(crate) use jobs::*;

pub(crate) struct Vm {
    pub(crate) layout: VmLayout,
    /// The guest scheduler.
    pub(crate) sched: GuestSched,
    pub(crate) ring_depth: u32,
    pub(crate) ring_used: u32,
    pub(crate) latency: Nanos,
    /// When each vCPU is done with the requests it took (`guest_cpu`; empty
    /// without it).
    pub(crate) vcpu_free: Vec<Nanos>,
    /// The guest's CPU time per request (`guest_cpu.request_us`).
    pub(crate) guest_request_ns: Nanos,
    pub(crate) threads: Vec<Thread>,
    pub(crate) jobs: Vec<JobState>,
    pub(crate) journal_stream: StreamId,
    pub(crate) journal_sectors: u64,
    pub(crate) journal_cursor: u64,
    pub(crate) commit_every: Nanos,
    pub(crate) dirty: bool,
    /// fsync ends with a cache flush (the file system's `barrier` option).
    pub(crate) barrier: bool,
    /// The page cache, when a job is buffered.
    pub(crate) cache: Option<PageCache>,
    pub(crate) flusher_stream: StreamId,
    /// Flusher write-back requests: queued for submission, and in flight.
    pub(crate) wb_queue: VecDeque<Run>,
    pub(crate) wb_inflight: u32,
    /// Writers blocked above `dirty_ratio`.
    pub(crate) throttled: Vec<u32>,
    pub(crate) rng: JobRng,
    pub(crate) series_ops: Vec<u64>,
    pub(crate) series_bytes: Vec<u64>,
    /// The series' bucket the last operation fell in, and its time span
    /// [start, end): the next operation's bucket without a division.
    pub(crate) bucket: (usize, Nanos, Nanos),
}

impl Vm {
    pub(crate) fn active(&self) -> bool {
        self.jobs.iter().any(|j| j.end.is_none())
    }

    /// Count one application operation of thread `ti` (its job's counts and
    /// the VM's throughput series).
    #[inline]
    pub(crate) fn record_op(&mut self, ti: u32, read: bool, bytes: u64, latency: Nanos, now: Nanos, interval: Nanos) {
        let job = &mut self.jobs[self.threads[ti as usize].job as usize];
        job.outstanding -= 1;
        job.counts.record(read, bytes, latency);
        let (mut b, start, end) = self.bucket;
        if now < start || now >= end {
            b = self.enter_bucket(now, interval);
        }
        self.series_ops[b] += 1;
        self.series_bytes[b] += bytes;
    }

    /// The series' bucket of time `now`, made the current one (the series
    /// grown to hold it).
    #[cold]
    #[inline(never)]
    fn enter_bucket(&mut self, now: Nanos, interval: Nanos) -> usize {
        let b = (now / interval) as usize;
        if self.series_ops.len() <= b {
            self.series_ops.resize(b + 1, 0);
            self.series_bytes.resize(b + 1, 0);
        }
        let start = b as Nanos * interval;
        self.bucket = (b, start, start.saturating_add(interval));
        b
    }
}

/// A VM's guest scheduler: noop as a FIFO of request-table slots, or any
/// scheduler through its driver (which keeps its wake-up).
///
/// noop is a FIFO, and the driver serves flushes before it from its
/// dispatch list, as `blk_insert_flush` does (`hvio_sched::driver`,
/// "Flushes"); it never waits and nothing of it is reported. So when no
/// step of the plan switches the guests' schedulers, the engine keeps noop
/// as those two queues of slots: a request stays in its slot on its way to
/// the ring, neither copied into the scheduler and back nor passed through
/// the driver's checks and two calls through a trait object, and what
/// leaves for the ring, in which order, is the same.
// One per VM: a box for the driver would cost the other schedulers an
// indirection on every call and save a few hundred bytes a VM.
#[allow(clippy::large_enum_variant)]
pub(crate) enum GuestSched {
    Fifo(SlotFifo),
    Driver(Driver),
}

/// noop's queue and the driver's dispatch list (flushes), as slots.
#[derive(Default)]
pub(crate) struct SlotFifo {
    flushes: VecDeque<u32>,
    queue: VecDeque<u32>,
}

impl GuestSched {
    /// `driver`'s scheduler as the engine runs it: noop as a [`SlotFifo`]
    /// unless the run's plan switches the guests' schedulers (`switched`).
    pub(crate) fn new(driver: Driver, switched: bool) -> GuestSched {
        if driver.name() == hvio_sched::noop::SPEC.name && !switched && !driver.switching() {
            GuestSched::Fifo(SlotFifo::default())
        } else {
            GuestSched::Driver(driver)
        }
    }

    /// The scheduler's driver, for a switch (a FIFO is kept only when the
    /// plan switches no guest scheduler).
    pub(crate) fn driver_mut(&mut self) -> Option<&mut Driver> {
        match self {
            GuestSched::Fifo(_) => None,
            GuestSched::Driver(d) => Some(d),
        }
    }

    /// Whether a switch is in progress.
    pub(crate) fn switching(&self) -> bool {
        match self {
            GuestSched::Fifo(_) => false,
            GuestSched::Driver(d) => d.switching(),
        }
    }

    /// The scheduler's wake-up at `t` is due (noop never asks for one).
    pub(crate) fn timer_due(&mut self, t: Nanos) {
        if let GuestSched::Driver(d) = self {
            d.timer_due(t);
        }
    }

    /// Request `rq` completed at `now` (noop does nothing with it).
    #[inline]
    pub(crate) fn completed(&mut self, rq: &Request, now: Nanos) {
        if let GuestSched::Driver(d) = self {
            d.completed(rq, now);
        }
    }
}

/// A guest scheduler's error, placed in its VM: a bad `guest_params` key
/// or value, or an unknown `guest_scheduler`.
pub(crate) fn guest_scheduler_error(vm: &str, scheduler: &str, e: ConfigError) -> SimError {
    let context = format!("vm \"{vm}\" guest_params (scheduler {scheduler})");
    SimError::Config(match e {
        ConfigError::InvalidValue { key, value, reason, .. } => ConfigError::InvalidValue {
            context,
            key,
            value,
            reason,
        },
        ConfigError::UnknownKey { key, known, .. } => ConfigError::UnknownKey { context, key, known },
        ConfigError::UnknownName { what, name, known } => ConfigError::invalid(
            format!("vm \"{vm}\""),
            "guest_scheduler",
            format!("\"{name}\""),
            format!(
                "unknown {what}{} (known: {known})",
                hvio_core::message::hint(&name, known.split(", "))
            ),
        ),
        ConfigError::Other(m) => ConfigError::Other(format!("vm \"{vm}\" guest_scheduler {scheduler}: {m}")),
    })
}

impl Vm {
    /// When a request leaving the guest scheduler at `now` is in the ring:
    /// at once without `guest_cpu`, else once the vCPU free first (the
    /// lowest-numbered of equals) has spent the request's CPU time on it.
    #[inline]
    fn submitted(&mut self, now: Nanos) -> Nanos {
        let Some((vcpu, &free)) = self.vcpu_free.iter().enumerate().min_by_key(|&(_, &t)| t) else {
            return now;
        };
        let done = free.max(now) + self.guest_request_ns;
        self.vcpu_free[vcpu] = done;
        done
    }
}

impl Engine {
    /// Hand a request to the guest scheduler.
    pub(crate) fn submit_guest(&mut self, vi: usize, thread: u32, kind: Kind, rq: Request, now: Nanos) -> Result<()> {
        self.submit_guest_at(vi, thread, kind, rq, now, now)
    }

    /// [`Self::submit_guest`] for a request the application issued at `issued`
    /// (its latency counts from then).
    ///
    /// Always inlined: called, it took the request its caller had just
    /// written field by field through memory and copied it into the table
    /// with 16-byte loads, each spanning several of those stores, which the
    /// store buffer cannot forward, and stalled until they reached the cache.
    #[inline(always)]
    pub(crate) fn submit_guest_at(
        &mut self,
        vi: usize,
        thread: u32,
        kind: Kind,
        rq: Request,
        issued: Nanos,
        now: Nanos,
    ) -> Result<()> {
        let flush = rq.op == Op::Flush;
        let slot = self
            .requests
            .alloc(Slot::new(vi, Owner::Guest { thread, kind }, rq, issued))?;
        match &mut self.vms[vi].sched {
            GuestSched::Fifo(f) if flush => f.flushes.push_back(slot),
            GuestSched::Fifo(f) => f.queue.push_back(slot),
            GuestSched::Driver(d) => d.insert(self.requests[slot].guest, now),
        }
        Ok(())
    }

    /// Move requests from the guest scheduler into the ring while it has room.
    pub(crate) fn guest_kick(&mut self, vi: usize) {
        let now = self.now;
        loop {
            let vm = &mut self.vms[vi];
            if vm.ring_used >= vm.ring_depth {
                return;
            }
            let slot = match &mut vm.sched {
                GuestSched::Fifo(f) => match f.flushes.pop_front().or_else(|| f.queue.pop_front()) {
                    Some(slot) => slot,
                    None => return,
                },
                GuestSched::Driver(d) => match d.poll(now) {
                    Next::Request(rq) => {
                        let slot = slot_of(rq.id);
                        self.requests[slot].guest = rq;
                        slot
                    }
                    Next::Wait { until, new } => {
                        debug_assert!(d.stats().past_waits == 0, "guest scheduler asked to wait for the past");
                        if new {
                            self.queue.push(until, Ev::GuestTimer { vm: vi as u16 });
                        }
                        return;
                    }
                    Next::Idle => return,
                },
            };
            vm.ring_used += 1;
            let t = vm.submitted(now) + vm.latency;
            self.queue.push(t, Ev::HostArrive { slot });
        }
    }
}
