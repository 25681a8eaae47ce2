//! The device: its next event, and its completions handed back up.

use super::*;

impl Engine {
    pub(crate) fn schedule_device(&mut self) {
        if let Some(t) = self.device.next_event() {
            // A device may report an event already due: run it now. Remember
            // the time actually scheduled, so that event clears the mark.
            let t = t.max(self.now);
            if self.device_event_at.is_none_or(|at| t < at) {
                self.device_event_at = Some(t);
                self.push(t, Ev::Device);
            }
        }
    }

    pub(crate) fn device_advance(&mut self) {
        let now = self.now;
        let mut done = std::mem::take(&mut self.completions);
        self.device.advance(now, &mut done);
        for c in done.drain(..) {
            let slot = (c.rq.id & SLOT_MASK) as u32;
            self.host.completed(&c.rq, c.done);
            let s = self.slots[slot as usize];
            let vm = &mut self.vms[s.vm as usize];
            let dt = c.done.saturating_sub(c.start);
            vm.host_requests += 1;
            vm.host_bytes += c.rq.bytes();
            vm.disk_time += dt;
            self.host_requests += 1;
            self.host_bytes += c.rq.bytes();
            self.busy += dt;
            self.sum_seek += c.service.seek;
            self.sum_rotation += c.service.rotation;
            self.sum_transfer += c.service.transfer;
            self.cache_hits += c.service.cache_hit as u64;
            if let Some(w) = &mut self.records {
                w.write(&vm.layout.name, &c, s.host_arrival, s.host_dispatch);
            }
            let t = c.done.max(now) + vm.latency;
            // Every guest request merged into this one completes with it
            // and frees its tapdisk ring slot.
            let mut next = slot;
            while next != NO_SLOT {
                let m = self.slots[next as usize];
                if let Some(b) = self.vms[m.vm as usize].tap_ring.get_mut(m.tap_slot as usize) {
                    *b = false;
                }
                self.push(t, Ev::GuestDone { slot: next });
                next = m.chain;
            }
        }
        self.completions = done;
        // Only the event that was scheduled clears `device_event_at` (in
        // `run`): a stale, earlier one must not make us schedule duplicates.
        self.schedule_device();
        self.host_kick();
    }
}
