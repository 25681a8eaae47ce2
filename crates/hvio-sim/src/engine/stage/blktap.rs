//! blktap2: tapdisk's ring slots, its `io_merge` and the dom0 elevator's back merges.

use super::*;

/// Sectors of a full blkif request: `BLKIF_MAX_SEGMENTS_PER_REQUEST` (11)
/// pages, which fill one slot of tapdisk's ring buffer.
pub(crate) const TAP_SLOT_SECTORS: u32 = 11 * PAGE_SECTORS as u32;

/// Whether tapdisk's `io_merge` finds the buffer of a request in ring slot
/// `slot` contiguous with the one before it, of `prev_sectors` sectors in
/// slot `prev_slot` (`contiguous_buffers`): a slot's pages start at
/// `MMAP_VADDR(vstart, slot, 0)`, right after slot − 1's 11 pages, so only
/// a full previous request in the slot just below qualifies.
pub(crate) fn tap_joins(prev_sectors: u32, prev_slot: u32, slot: u32) -> bool {
    prev_sectors == TAP_SLOT_SECTORS && prev_slot.checked_add(1) == Some(slot)
}

impl Engine {
    /// blktap: one pass of tapdisk's event loop for VM `vi`. The requests
    /// taken from the ring become control blocks in ring order; `io_merge`
    /// joins each to the one before when [`tap_joins`] allows; each
    /// resulting control block is submitted in turn, and the dom0
    /// elevator back-merges it into a queued request or queues it.
    pub(crate) fn tapdisk_submit(&mut self, vi: usize) {
        let now = self.now;
        let Some(cfg) = self.blktap.clone() else {
            return;
        };
        let batch = std::mem::take(&mut self.vms[vi].tap_batch);
        let max = cfg.max_sectors();
        let mut iocb: Option<(Request, u32)> = None; // (request, last slot of its chain)
        for slot in batch {
            let rq = self.host_request(slot, now);
            if let Some((cur, last)) = &mut iocb {
                let prev = &self.slots[*last as usize];
                let buffers = tap_joins(prev.guest.sectors, prev.tap_slot, self.slots[slot as usize].tap_slot);
                if cfg.io_merge && buffers && hvio_sched::util::back_mergeable(cur, &rq, max) {
                    cur.sectors += rq.sectors;
                    self.io_merges += 1;
                    self.slots[*last as usize].chain = slot;
                    *last = slot;
                    continue;
                }
            }
            if let Some((cur, _)) = iocb.replace((rq, slot)) {
                self.submit_iocb(cur, &cfg, now);
            }
        }
        if let Some((cur, _)) = iocb {
            self.submit_iocb(cur, &cfg, now);
        }
    }

    /// One control block reaches the dom0 block layer: back-merged into a
    /// queued request of the VM, or queued; then the queue is run
    /// (`blk_run_address_space`).
    pub(crate) fn submit_iocb(&mut self, rq: Request, cfg: &crate::config::BlktapConfig, now: Nanos) {
        self.seek_queued.dispatched(&rq);
        if cfg.elevator_merge {
            if let Some(id) = self.host.back_merge(&rq, cfg.max_sectors(), now) {
                let mut tail = (id & SLOT_MASK) as u32;
                while self.slots[tail as usize].chain != NO_SLOT {
                    tail = self.slots[tail as usize].chain;
                }
                self.slots[tail as usize].chain = (rq.id & SLOT_MASK) as u32;
                self.elevator_merges += 1;
                return;
            }
        }
        self.host.insert(rq, now);
        self.host_kick();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tapdisk_buffers_join_only_after_a_full_request_in_the_slot_below() {
        assert_eq!(TAP_SLOT_SECTORS, 88);
        assert!(tap_joins(88, 0, 1));
        assert!(tap_joins(88, 30, 31));
        // A 40 KiB request leaves a page of its slot unused: a gap.
        assert!(!tap_joins(80, 0, 1));
        // The lowest free slot was not the next one.
        assert!(!tap_joins(88, 0, 2));
        assert!(!tap_joins(88, 1, 0));
        assert!(!tap_joins(88, u32::MAX, 0));
    }
}
