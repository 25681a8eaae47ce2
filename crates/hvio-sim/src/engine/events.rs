//! The event queue: what can happen, ordered by (time, insertion sequence).

use super::*;

#[derive(Clone, Copy, Debug)]
pub(crate) enum Ev {
    /// A thread may issue (start, or after its think time).
    ThreadIssue {
        vm: u16,
        thread: u32,
    },
    /// A request leaves the guest ring and reaches the host scheduler.
    HostArrive {
        slot: u32,
    },
    /// A completion reaches the guest.
    GuestDone {
        slot: u32,
    },
    HostTimer,
    GuestTimer {
        vm: u16,
    },
    Device,
    JournalTick {
        vm: u16,
    },
    /// A buffered (page-cache) operation of a thread is done: its pages were
    /// there (or arrived) and were copied, or its write was copied in.
    BufferedDone {
        vm: u16,
        thread: u32,
    },
    /// The guest's periodic write-back (`dirty_writeback_centisecs`).
    Flusher {
        vm: u16,
    },
    /// The VM's host-path stage asked to be woken (blktap: tapdisk's
    /// event-loop pass submits the requests it took from the VM's ring).
    StageWake {
        vm: u16,
    },
    /// A job of this phase finished (see [`phases`](super::phases)).
    PhaseJobDone {
        phase: u16,
    },
    /// A step of the `[[phase]]` plan is due (by time, or retried after an
    /// earlier switch).
    PlanStep {
        step: u16,
    },
}

pub(crate) struct Entry {
    pub(crate) t: Nanos,
    pub(crate) seq: u64,
    pub(crate) ev: Ev,
}
impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        self.t == o.t && self.seq == o.seq
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    #[inline]
    fn cmp(&self, o: &Self) -> Ordering {
        // BinaryHeap is a max-heap: reverse for earliest (time, seq) first.
        // One 128-bit comparison: (t, seq) in lexicographic order.
        (((o.t as u128) << 64) | o.seq as u128).cmp(&(((self.t as u128) << 64) | self.seq as u128))
    }
}

/// Events in (time, insertion) order.
#[derive(Default)]
pub(crate) struct EventQueue {
    heap: BinaryHeap<Entry>,
    seq: u64,
}

impl EventQueue {
    #[inline]
    pub(crate) fn push(&mut self, t: Nanos, ev: Ev) {
        self.seq += 1;
        self.heap.push(Entry { t, seq: self.seq, ev });
    }

    #[inline]
    pub(crate) fn pop(&mut self) -> Option<(Nanos, Ev)> {
        self.heap.pop().map(|e| (e.t, e.ev))
    }
}
