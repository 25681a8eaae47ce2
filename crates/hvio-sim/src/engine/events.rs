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
    /// A pass of the VM's QEMU thread may begin (`qemu_path`).
    QemuPass {
        vm: u16,
    },
    /// A pass of the VM's QEMU thread ends: its host requests are submitted.
    QemuSubmit {
        vm: u16,
    },
    /// A job of this phase finished (see [`super::phases`]).
    PhaseJobDone {
        phase: u16,
    },
    /// A step of the `[[phase]]` plan is due (by time, or retried after an
    /// earlier switch).
    PlanStep {
        step: u16,
    },
}

impl Ev {
    /// Whether the event is the guest's alone: nothing it does reaches the
    /// host's scheduler or device (what it sends reaches the host later, at
    /// a `HostArrive`).
    #[inline]
    pub(crate) fn guest_only(&self) -> bool {
        matches!(
            self,
            Ev::ThreadIssue { .. }
                | Ev::GuestDone { .. }
                | Ev::GuestTimer { .. }
                | Ev::JournalTick { .. }
                | Ev::BufferedDone { .. }
                | Ev::Flusher { .. }
        )
    }
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
        o.key().cmp(&self.key())
    }
}

/// Events in (time, insertion) order.
///
/// A binary heap, beside FIFO lanes for the three kinds that make most of
/// a run's events and mostly come in time order: a request reaching the
/// host `virt_latency` after it left the ring, a completion reaching the
/// guest `virt_latency` after the device's, and the device's wake-ups (each
/// asked for at the device's next event, rarely earlier than one asked for
/// before). An event goes to its kind's lane when
/// it is not earlier than the lane's last (always, when every VM has the
/// same latency), else to the heap; every lane stays sorted by (time,
/// sequence), so taking the earliest of the heap's top and the lanes'
/// fronts gives exactly the heap's order, at O(1) for most events.
#[derive(Default)]
pub(crate) struct EventQueue {
    heap: BinaryHeap<Entry>,
    lanes: [VecDeque<Entry>; 3],
    seq: u64,
}

impl Entry {
    /// The entry's place in the order: (time, sequence) as one number.
    #[inline]
    fn key(&self) -> u128 {
        ((self.t as u128) << 64) | self.seq as u128
    }
}

impl EventQueue {
    #[inline]
    pub(crate) fn push(&mut self, t: Nanos, ev: Ev) {
        self.seq += 1;
        let e = Entry { t, seq: self.seq, ev };
        let lane = match ev {
            Ev::HostArrive { .. } => 0,
            Ev::GuestDone { .. } => 1,
            Ev::Device => 2,
            _ => return self.heap.push(e),
        };
        let lane = &mut self.lanes[lane];
        if lane.back().is_none_or(|last| last.t <= t) {
            lane.push_back(e);
        } else {
            self.heap.push(e);
        }
    }

    #[inline]
    pub(crate) fn pop(&mut self) -> Option<(Nanos, Ev)> {
        // Where the earliest is: 0 the heap, 1 + i lane i.
        let mut from = 0;
        let mut best = self.heap.peek().map_or(u128::MAX, Entry::key);
        for (i, lane) in self.lanes.iter().enumerate() {
            if let Some(e) = lane.front() {
                if e.key() < best {
                    best = e.key();
                    from = 1 + i;
                }
            }
        }
        let e = match from {
            0 => self.heap.pop(),
            i => self.lanes[i - 1].pop_front(),
        };
        e.map(|e| (e.t, e.ev))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// Events come out in (time, insertion) order, whichever of the heap
    /// and the lanes holds them, through the lanes' growth and wrap: checked
    /// against an ordered set, pushes and pops interleaved.
    #[test]
    fn events_come_out_in_time_then_insertion_order() {
        let mut q = EventQueue::default();
        let mut model = BTreeSet::new();
        let mut x: u64 = 7;
        let mut now = 0;
        for n in 0..20_000u32 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            // Mostly later than the lane's last, sometimes earlier (the heap).
            let t = now + (x >> 58);
            let ev = match (x >> 40) % 4 {
                0 => Ev::HostArrive { slot: n },
                1 => Ev::GuestDone { slot: n },
                2 => Ev::Device,
                _ => Ev::HostTimer,
            };
            q.push(t, ev);
            model.insert((t, n));
            // Pop less often than push for a while (the lanes grow), then more.
            if (x >> 20) % 8 < if n < 10_000 { 3 } else { 6 } {
                let (t, ev) = q.pop().expect("an event is queued");
                let want = model.pop_first().expect("the model has it too");
                let slot = match ev {
                    Ev::HostArrive { slot } | Ev::GuestDone { slot } => Some(slot),
                    _ => None,
                };
                assert_eq!(t, want.0);
                assert!(slot.is_none_or(|s| s == want.1), "{slot:?} against {want:?}");
                now = t;
            }
        }
        while let Some((t, _)) = q.pop() {
            assert_eq!(t, model.pop_first().expect("the model has it too").0);
        }
        assert!(model.is_empty());
    }
}
