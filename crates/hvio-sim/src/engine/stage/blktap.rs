//! blktap2: tapdisk's ring slots, its `io_merge` and the dom0 elevator's back merges.

use super::*;
use crate::config::BlktapConfig;

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

/// A VM's tapdisk: which of its ring slots hold a request, the guest
/// requests taken from the ring since the last `io_submit`, and its merges.
pub(crate) struct Blktap {
    cfg: BlktapConfig,
    ring: Vec<bool>,
    batch: Vec<u32>,
    /// Guest requests joined by tapdisk's `io_merge`, and control blocks
    /// back-merged by the dom0 elevator.
    io_merges: u64,
    elevator_merges: u64,
}

impl Blktap {
    /// tapdisk for a VM whose ring has `depth` slots.
    pub(crate) fn new(cfg: BlktapConfig, depth: u32) -> Blktap {
        Blktap {
            cfg,
            ring: vec![false; depth as usize],
            batch: Vec::new(),
            io_merges: 0,
            elevator_merges: 0,
        }
    }

    /// tapdisk's O_DIRECT I/O for guest request `slot`: sync reads, writes
    /// as `sync_writes` says, no metadata flag.
    fn host_request(&self, slot: u32, cx: &PathCx) -> Request {
        let mut rq = cx.host_request(slot);
        if rq.op != Op::Flush {
            rq.sync = rq.op == Op::Read || (self.cfg.sync_writes && rq.op == Op::Write);
            rq.meta = false;
        }
        rq
    }

    /// One control block reaches the dom0 block layer: back-merged into a
    /// queued request of the VM, or queued; then the queue is run
    /// (`blk_run_address_space`).
    fn submit_iocb(&mut self, rq: Request, cx: &mut PathCx) -> Result<()> {
        if self.cfg.elevator_merge {
            if cx.send_merging(rq, self.cfg.max_sectors())? {
                self.elevator_merges += 1;
            }
            Ok(())
        } else {
            cx.send(rq)
        }
    }
}

impl HostPath for Blktap {
    /// The request takes the lowest free slot of tapdisk's ring
    /// (`blktap_ring_make_request`) and waits for the event loop's next
    /// pass, which takes everything on the ring.
    fn arrive(&mut self, slot: u32, cx: &mut PathCx) -> Result<()> {
        let free = self.ring.iter().position(|&b| !b).unwrap_or(self.ring.len());
        if free == self.ring.len() {
            self.ring.push(true);
        } else {
            self.ring[free] = true;
        }
        cx.requests[slot].stage_note = free as u32;
        if self.batch.is_empty() {
            cx.wake_at(cx.now);
        }
        self.batch.push(slot);
        Ok(())
    }

    /// One pass of tapdisk's event loop. The requests taken from the ring
    /// become control blocks in ring order; `io_merge` joins each to the
    /// one before when [`tap_joins`] allows; each resulting control block
    /// is submitted in turn, and the dom0 elevator back-merges it into a
    /// queued request or queues it.
    fn wake(&mut self, cx: &mut PathCx) -> Result<()> {
        let batch = std::mem::take(&mut self.batch);
        let max = self.cfg.max_sectors();
        let mut iocb: Option<(Request, u32)> = None; // (request, last slot of its chain)
        for slot in batch {
            let rq = self.host_request(slot, cx);
            if let Some((cur, last)) = &mut iocb {
                let prev = &cx.requests[*last];
                let buffers = tap_joins(prev.guest.sectors, prev.stage_note, cx.requests[slot].stage_note);
                if self.cfg.io_merge && buffers && hvio_sched::util::back_mergeable(cur, &rq, max) {
                    cur.sectors += rq.sectors;
                    self.io_merges += 1;
                    cx.requests[*last].chain = slot;
                    *last = slot;
                    continue;
                }
            }
            if let Some((cur, _)) = iocb.replace((rq, slot)) {
                self.submit_iocb(cur, cx)?;
            }
        }
        if let Some((cur, _)) = iocb {
            self.submit_iocb(cur, cx)?;
        }
        Ok(())
    }

    /// The request's ring slot is free again.
    fn done(&mut self, slot: u32, cx: &mut PathCx) -> Result<()> {
        if let Some(b) = self.ring.get_mut(cx.requests[slot].stage_note as usize) {
            *b = false;
        }
        Ok(())
    }

    fn held(&self) -> usize {
        self.batch.len()
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("blktap_io_merges", self.io_merges as f64),
            ("blktap_elevator_merges", self.elevator_merges as f64),
        ]
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
