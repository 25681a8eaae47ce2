//! Host-path stages: what a VM's requests pass through between its virtio
//! ring and the host scheduler (ARCHITECTURE.md's "host-path stage").
//!
//! Each VM has one [`HostPath`]: [`direct::Direct`] (QEMU/virtio straight
//! to the host's block layer) or [`blktap::Blktap`] (Xen's tapdisk2, paper
//! 000 §2.2's host). A stage receives the VM's guest requests as they leave
//! the ring, and sends host requests through [`PathCx`], which maps them
//! from image to physical sectors (a request across extents of a
//! fragmented image becomes a part per extent) and hands them to the host
//! scheduler. A
//! stage may hold requests (tapdisk's batch), merge them (several guest
//! requests completing with one host request), ask to be woken later, and
//! originate I/O of its own ([`PathCx::originate`]: cleaning, log records,
//! checkpoints), which goes through the host scheduler and shows in the
//! host's metrics and records like any other; the stage hears of its
//! completion in [`HostPath::done`]. A VM with `qemu_path` has QEMU's
//! event-loop threads ([`qemu::IoThreads`]) between its stage and the host
//! scheduler: what the stage sends waits for a thread's pass.

pub(crate) mod blktap;
pub(crate) mod direct;
pub(crate) mod qemu;
pub(crate) mod reshape;

use super::*;

/// A VM's host-path stage.
pub(crate) trait HostPath {
    /// Guest request `slot` left the VM's virtio ring and reached the host.
    fn arrive(&mut self, slot: u32, cx: &mut PathCx) -> Result<()>;
    /// The wake-up asked for with [`PathCx::wake_at`] is due.
    fn wake(&mut self, _cx: &mut PathCx) -> Result<()> {
        Ok(())
    }
    /// On a VM with `qemu_path`, a QEMU thread's pass begins: it pops the
    /// guest requests that reached the stage since the last pass began, and
    /// what the stage sends now is submitted at the pass's end.
    fn pass_begins(&mut self, _cx: &mut PathCx) -> Result<()> {
        Ok(())
    }
    /// Request `slot` is done at the host (every part of it): a guest
    /// request, just before its completion goes back up the ring, or I/O
    /// the stage originated (its slot is released after this returns).
    fn done(&mut self, slot: u32, cx: &mut PathCx) -> Result<()>;
    /// Requests the stage holds that have not been sent to the host
    /// (none at the end of a run).
    fn held(&self) -> usize;
    /// The stage's counters, summed over the VMs by the engine.
    fn counters(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }
    /// What address reshaping cost, for the stage that reshapes.
    fn reshape(&self) -> Option<ReshapeResult> {
        None
    }
    /// Another run begins on the stage as this one left it (rounds of a
    /// workload-dependent preconditioning): counters from zero, state kept.
    fn restart(&mut self) {}
}

/// A VM's stage and the map of its image.
pub(crate) struct VmPath {
    pub(crate) stage: Stage,
    pub(crate) map: ExtentMap,
    /// QEMU's event-loop threads, for a VM with `qemu_path`.
    pub(crate) qemu: Option<qemu::IoThreads>,
}

/// A VM's [`HostPath`]. The direct path is called without a trait
/// object: most runs take it, and its calls then inline into the engine's
/// (its `done` is nothing at all).
pub(crate) enum Stage {
    Direct(Direct),
    Other(Box<dyn HostPath>),
}

impl Stage {
    /// The stage, for calls off the hot path.
    pub(crate) fn as_dyn(&self) -> &dyn HostPath {
        match self {
            Stage::Direct(d) => d,
            Stage::Other(s) => s.as_ref(),
        }
    }

    /// [`HostPath::arrive`].
    #[inline]
    pub(crate) fn arrive(&mut self, slot: u32, cx: &mut PathCx) -> Result<()> {
        match self {
            Stage::Direct(d) => d.arrive(slot, cx),
            Stage::Other(s) => s.arrive(slot, cx),
        }
    }

    /// [`HostPath::wake`].
    pub(crate) fn wake(&mut self, cx: &mut PathCx) -> Result<()> {
        match self {
            Stage::Direct(d) => d.wake(cx),
            Stage::Other(s) => s.wake(cx),
        }
    }

    /// [`HostPath::pass_begins`].
    pub(crate) fn pass_begins(&mut self, cx: &mut PathCx) -> Result<()> {
        match self {
            Stage::Direct(d) => d.pass_begins(cx),
            Stage::Other(s) => s.pass_begins(cx),
        }
    }

    /// [`HostPath::done`].
    #[inline]
    pub(crate) fn done(&mut self, slot: u32, cx: &mut PathCx) -> Result<()> {
        match self {
            Stage::Direct(d) => d.done(slot, cx),
            Stage::Other(s) => s.done(slot, cx),
        }
    }
}

/// What a stage may do: see its requests, send host requests, merge, be
/// woken, originate I/O.
pub(crate) struct PathCx<'a> {
    pub(crate) now: Nanos,
    pub(crate) vm: usize,
    /// The VM's one-way virtualization latency (`virt_latency_us`).
    pub(crate) latency: Nanos,
    pub(crate) map: &'a ExtentMap,
    /// A buffer for the image map's extents.
    pub(crate) extents: &'a mut Vec<Extent>,
    pub(crate) requests: &'a mut Requests,
    pub(crate) host: &'a mut HostSide,
    pub(crate) queue: &'a mut EventQueue,
    /// The VM's QEMU threads, which what the stage sends waits for.
    pub(crate) qemu: Option<&'a mut qemu::IoThreads>,
}

impl PathCx<'_> {
    /// The host's view of request `slot`: the VM's stream, arriving now
    /// (still in image sectors: [`Self::send`] maps it).
    pub(crate) fn host_request(&self, slot: u32) -> Request {
        Request {
            stream: self.vm as StreamId,
            arrival: self.now,
            ..self.requests[slot].guest
        }
    }

    /// Map host request `rq` through the image map: `true` with it in
    /// physical sectors when one extent holds it, else `false`: it was
    /// split into a part per extent, each already sent to the host
    /// scheduler (the request completes when they all have).
    #[inline(always)]
    fn map(&mut self, rq: &mut Request) -> Result<bool> {
        if rq.op == Op::Flush {
            rq.sector = 0;
            return Ok(true);
        }
        if let Some(sector) = self.map.place(rq.sector, rq.sectors as u64, self.extents) {
            rq.sector = sector;
            return Ok(true);
        }
        self.split(rq)?;
        Ok(false)
    }

    /// Send `rq` to the host scheduler as a part per extent of
    /// `self.extents`.
    #[cold]
    #[inline(never)]
    fn split(&mut self, rq: &Request) -> Result<()> {
        let parent = slot_of(rq.id);
        self.requests[parent].parts = self.extents.len() as u32;
        for i in 0..self.extents.len() {
            let e = self.extents[i];
            let part = Request {
                sector: e.sector,
                sectors: e.sectors as u32,
                ..*rq
            };
            let slot = self
                .requests
                .alloc(Slot::new(self.vm, Owner::Part { parent }, part, self.now))?;
            let s = &mut self.requests[slot];
            s.host_arrival = self.now;
            let part = s.guest;
            self.host.queued(&part);
            self.host.insert(part, self.now);
        }
        Ok(())
    }

    /// Send host request `rq` (image sectors) through the image map to the
    /// host scheduler, and run it; on a VM with `qemu_path`, once a QEMU
    /// thread's pass has taken it.
    #[inline(always)]
    pub(crate) fn send(&mut self, rq: Request) -> Result<()> {
        if let Some(q) = self.qemu.as_deref_mut() {
            if q.sent(rq) {
                self.queue.push(self.now, Ev::QemuPass { vm: self.vm as u16 });
            }
            return Ok(());
        }
        self.submit(rq)?;
        self.kick();
        Ok(())
    }

    /// Host request `rq` (image sectors), arriving now, through the image
    /// map to the host scheduler (not yet run: [`Self::kick`]).
    #[inline(always)]
    pub(crate) fn submit(&mut self, mut rq: Request) -> Result<()> {
        rq.arrival = self.now;
        if self.map(&mut rq)? {
            self.host.queued(&rq);
            self.host.insert(rq, self.now);
        }
        Ok(())
    }

    /// As [`Self::send`], but first offer `rq`, when the map keeps it
    /// whole, to the host scheduler as a back merge (up to `max_sectors`)
    /// into a request it holds; merged, it completes with that request.
    pub(crate) fn send_merging(&mut self, mut rq: Request, max_sectors: u32) -> Result<bool> {
        if !self.map(&mut rq)? {
            self.kick();
            return Ok(false);
        }
        self.host.queued(&rq);
        if let Some(id) = self.host.driver.back_merge(&rq, max_sectors, self.now) {
            let tail = self.requests.chain_tail(slot_of(id));
            self.requests[tail].chain = slot_of(rq.id);
            return Ok(true);
        }
        self.host.insert(rq, self.now);
        self.kick();
        Ok(false)
    }

    /// Dispatch from the host scheduler while the device accepts.
    #[inline]
    pub(crate) fn kick(&mut self) {
        kick_host(self.host, self.requests, self.queue, self.now);
    }

    /// Complete guest request `slot` without a host request of its own:
    /// the stage moved its data in I/O it originated (split across extents
    /// of a remapped image, or placed in a merged write) or needs none.
    /// The completion reaches the guest the VM's latency later; its bytes
    /// count as served for end-of-run accounting.
    pub(crate) fn complete(&mut self, slot: u32) {
        self.host.streams[self.vm].stage_completed += self.requests[slot].guest.bytes();
        self.queue.push(self.now + self.latency, Ev::GuestDone { slot });
    }

    /// Wake the stage at `t` ([`HostPath::wake`]).
    pub(crate) fn wake_at(&mut self, t: Nanos) {
        self.queue.push(t, Ev::StageWake { vm: self.vm as u16 });
    }

    /// I/O of the stage's own, `rq` in image sectors, tagged `tag`: sent to
    /// the host now; [`HostPath::done`] hears of its completion.
    pub(crate) fn originate(&mut self, tag: u64, rq: Request) -> Result<u32> {
        let slot = self
            .requests
            .alloc(Slot::new(self.vm, Owner::Stage { tag }, rq, self.now))?;
        self.requests[slot].host_arrival = self.now;
        self.host.streams[self.vm].offered += rq.bytes();
        let rq = self.host_request(slot);
        self.send(rq)?;
        Ok(slot)
    }
}

/// Dispatch from the host scheduler while the device accepts, stamping
/// each dispatched request and scheduling the wake-ups the host asks for.
#[inline]
pub(crate) fn kick_host(host: &mut HostSide, requests: &mut Requests, queue: &mut EventQueue, now: Nanos) {
    host.kick(now, &mut |e| match e {
        HostEvent::Dispatched(rq) => requests[slot_of(rq.id)].host_dispatch = now,
        HostEvent::Device(t) => queue.push(t, Ev::Device),
        HostEvent::Timer(t) => queue.push(t, Ev::HostTimer),
    });
}

impl Engine {
    /// Run `f` on VM `vi`'s stage with its context.
    #[inline]
    pub(crate) fn with_stage<R>(&mut self, vi: usize, f: impl FnOnce(&mut Stage, &mut PathCx) -> R) -> R {
        let p = &mut self.paths[vi];
        let mut cx = PathCx {
            now: self.now,
            vm: vi,
            latency: self.vms[vi].latency,
            map: &p.map,
            extents: &mut self.extents,
            requests: &mut self.requests,
            host: &mut self.host,
            queue: &mut self.queue,
            qemu: p.qemu.as_mut(),
        };
        f(&mut p.stage, &mut cx)
    }

    /// Guest request `slot` reaches the host: to its VM's stage.
    pub(crate) fn host_arrive(&mut self, slot: u32) -> Result<()> {
        let s = &mut self.requests[slot];
        s.host_arrival = self.now;
        let vi = s.vm as usize;
        self.host.streams[vi].offered += s.guest.bytes();
        self.with_stage(vi, |stage, cx| stage.arrive(slot, cx))?;
        // After the stage: a pass asked for now comes after the stage's own
        // wake-up at this instant (the reshaping stage's batch).
        if let Some(q) = &mut self.paths[vi].qemu {
            if q.guest_arrived() {
                self.push(self.now, Ev::QemuPass { vm: vi as u16 });
            }
        }
        Ok(())
    }
}
