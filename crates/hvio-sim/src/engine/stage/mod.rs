//! The host path between a VM's virtio ring and the host scheduler: direct, or through blktap.

pub(crate) mod blktap;

use super::*;

impl Engine {
    pub(crate) fn host_arrive(&mut self, slot: u32) {
        let now = self.now;
        let s = &mut self.slots[slot as usize];
        s.host_arrival = now;
        let vi = s.vm as usize;
        if self.blktap.is_some() {
            // blktap: the request takes the lowest free slot of tapdisk's
            // ring (`blktap_ring_make_request`) and waits for the event
            // loop's next pass, which takes everything on the ring.
            let vm = &mut self.vms[vi];
            let free = vm.tap_ring.iter().position(|&b| !b).unwrap_or(vm.tap_ring.len());
            if free == vm.tap_ring.len() {
                vm.tap_ring.push(true);
            } else {
                vm.tap_ring[free] = true;
            }
            self.slots[slot as usize].tap_slot = free as u32;
            if vm.tap_batch.is_empty() {
                self.push(now, Ev::TapdiskSubmit { vm: vi as u16 });
            }
            self.vms[vi].tap_batch.push(slot);
            return;
        }
        let rq = self.host_request(slot, now);
        self.host.insert(rq, now);
        self.host_kick();
    }

    /// The host's view of guest request `slot`: physical sectors, the VM's
    /// stream; through blktap, tapdisk's O_DIRECT I/O (sync reads, writes
    /// as `sync_writes` says, no metadata flag).
    pub(crate) fn host_request(&self, slot: u32, now: Nanos) -> Request {
        let s = &self.slots[slot as usize];
        let vm = &self.vms[s.vm as usize];
        let g = s.guest;
        let sector = if g.op == Op::Flush { 0 } else { vm.layout.map(g.sector) };
        let mut rq = Request {
            stream: s.vm as StreamId,
            sector,
            arrival: now,
            ..g
        };
        if let Some(b) = &self.blktap {
            if g.op != Op::Flush {
                rq.sync = g.op == Op::Read || (b.sync_writes && g.op == Op::Write);
                rq.meta = false;
            }
        }
        rq
    }
}
