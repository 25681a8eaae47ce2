//! The device's completions handed back up: through merge chains and split
//! parts to the requests each completes, to their VM's host-path stage,
//! then (`virt_latency` later) to the guest.

use super::*;

impl Engine {
    /// The device's event: take what it finished, then run the host again.
    pub(crate) fn device_advance(&mut self) -> Result<()> {
        let now = self.now;
        let mut done = std::mem::take(&mut self.completions);
        self.host.complete(now, &mut done);
        for c in &done {
            let slot = slot_of(c.rq.id);
            let s = &self.requests[slot];
            let vm = &self.vms[s.vm as usize];
            if let Some(w) = &mut self.records {
                w.write(&vm.layout.name, c, s.host_arrival, s.host_dispatch);
            }
            let t = c.done.max(now) + vm.latency;
            // Every request merged into this one completes with it.
            let mut next = slot;
            while next != NO_SLOT {
                let after = self.requests[next].chain;
                self.part_done(next, t)?;
                next = after;
            }
        }
        done.clear();
        self.completions = done;
        let (host, queue) = (&mut self.host, &mut self.queue);
        host.schedule_device(now, &mut |e| {
            if let HostEvent::Device(t) = e {
                queue.push(t, Ev::Device);
            }
        });
        self.host_kick();
        Ok(())
    }

    /// Host request `slot` is done: a part of a split request (which is
    /// done when its last part is), or a request of its own.
    #[inline]
    fn part_done(&mut self, slot: u32, t: Nanos) -> Result<()> {
        let Owner::Part { parent } = self.requests[slot].owner else {
            return self.request_done(slot, t);
        };
        self.requests.release(slot);
        let p = &mut self.requests[parent];
        p.parts -= 1;
        if p.parts > 0 {
            return Ok(());
        }
        // The split request and those merged into it before the split.
        let mut next = parent;
        while next != NO_SLOT {
            let after = self.requests[next].chain;
            self.request_done(next, t)?;
            next = after;
        }
        Ok(())
    }

    /// Request `slot` is done at the host: its stage hears of it; a guest
    /// request's completion reaches the guest at `t`, a stage's own I/O is
    /// released.
    #[inline]
    fn request_done(&mut self, slot: u32, t: Nanos) -> Result<()> {
        let vi = self.requests[slot].vm as usize;
        // The direct path has nothing to hear.
        if !matches!(self.paths[vi].stage, Stage::Direct(_)) {
            self.stage_done(vi, slot)?;
        }
        match self.requests[slot].owner {
            Owner::Guest { .. } => self.push(t, Ev::GuestDone { slot }),
            Owner::Stage { .. } => self.requests.release(slot),
            Owner::Part { .. } => {
                return Err(SimError::Other(format!(
                    "request {} is a part of a split part",
                    self.requests[slot].guest.id
                )))
            }
        }
        Ok(())
    }

    /// VM `vi`'s stage (not the direct path) hears that request `slot` is done.
    #[inline(never)]
    fn stage_done(&mut self, vi: usize, slot: u32) -> Result<()> {
        self.with_stage(vi, |stage, cx| stage.done(slot, cx))
    }
}
