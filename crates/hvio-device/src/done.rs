//! Completions scheduled but not yet delivered, in (time, id) order.

use hvio_core::{Completion, Nanos, Op, Request, ServiceBreakdown};

/// A small ordered queue of future completions: a ring of slots
/// (preallocated: no allocation per request) into which a completion is
/// built in place ([`DoneQueue::push_with`]), where a queue taking it by
/// value would have it built on the stack and copied in.
#[derive(Debug)]
pub(crate) struct DoneQueue {
    /// The ring: a power of two long; the queued completions are the `len`
    /// slots from `head` on, wrapping; the others hold old values.
    slots: Vec<Completion>,
    head: usize,
    len: usize,
}

/// What an unused slot holds.
const VACANT: Completion = Completion {
    rq: Request {
        id: 0,
        stream: 0,
        sector: 0,
        sectors: 0,
        op: Op::Read,
        sync: false,
        meta: false,
        fua: false,
        class: hvio_core::IoClass::Be,
        prio: 0,
        arrival: 0,
    },
    start: 0,
    done: 0,
    service: ServiceBreakdown {
        overhead: 0,
        seek: 0,
        rotation: 0,
        transfer: 0,
        cache_hit: false,
    },
};

impl Default for DoneQueue {
    fn default() -> Self {
        DoneQueue::with_capacity(0)
    }
}

impl DoneQueue {
    pub(crate) fn with_capacity(n: usize) -> Self {
        DoneQueue {
            slots: vec![VACANT; n.max(1).next_power_of_two()],
            head: 0,
            len: 0,
        }
    }

    /// The slot of the `i`-th queued completion.
    #[inline(always)]
    fn at(&self, i: usize) -> usize {
        (self.head + i) & (self.slots.len() - 1)
    }

    /// Adds a completion, keeping (done, id) order.
    #[inline(always)]
    pub(crate) fn push(&mut self, c: Completion) {
        self.push_with(|slot| *slot = c);
    }

    /// Adds the completion `build` writes into its slot, keeping (done, id)
    /// order; returns it.
    #[inline(always)]
    pub(crate) fn push_with(&mut self, build: impl FnOnce(&mut Completion)) -> &Completion {
        if self.len == self.slots.len() {
            self.grow();
        }
        let back = self.at(self.len);
        build(&mut self.slots[back]);
        self.len += 1;
        // Almost always at the end: checked without a search, in line at
        // the caller; the rare completion that goes before the last is moved
        // into place out of line.
        if self.len > 1 {
            let (c, last) = (&self.slots[back], &self.slots[self.at(self.len - 2)]);
            if (last.done, last.rq.id) > (c.done, c.rq.id) {
                return self.sift_last();
            }
        }
        &self.slots[back]
    }

    /// Doubles the ring, keeping the queued completions in order.
    #[inline(never)]
    fn grow(&mut self) {
        let cap = self.slots.len();
        let mut slots = Vec::with_capacity(2 * cap);
        slots.extend((0..self.len).map(|i| self.slots[self.at(i)]));
        slots.resize(2 * cap, VACANT);
        self.slots = slots;
        self.head = 0;
    }

    /// Moves the last completion back to its place in (done, id) order;
    /// returns it.
    #[inline(never)]
    fn sift_last(&mut self) -> &Completion {
        let c = self.slots[self.at(self.len - 1)];
        let key = (c.done, c.rq.id);
        let mut i = self.len - 1;
        while i > 0 {
            let prev = self.slots[self.at(i - 1)];
            if (prev.done, prev.rq.id) <= key {
                break;
            }
            let to = self.at(i);
            self.slots[to] = prev;
            i -= 1;
        }
        let to = self.at(i);
        self.slots[to] = c;
        &self.slots[to]
    }

    /// The completion, when it is the only one.
    pub(crate) fn take_only(&mut self) -> Option<Completion> {
        if self.len != 1 {
            return None;
        }
        let c = self.slots[self.head];
        self.head = self.at(1);
        self.len = 0;
        Some(c)
    }

    /// When the earliest completion is due.
    #[inline]
    pub(crate) fn next(&self) -> Option<Nanos> {
        (self.len > 0).then(|| self.slots[self.head].done)
    }

    /// Moves every completion due by `now` to `out`; returns how many.
    #[inline]
    pub(crate) fn drain_due(&mut self, now: Nanos, out: &mut Vec<Completion>) -> usize {
        let mut n = 0;
        while n < self.len {
            let c = &self.slots[self.at(n)];
            if c.done > now {
                break;
            }
            // From its slot straight into `out` (a `push` of `*c` copies it
            // through the stack first).
            out.extend_from_slice(std::slice::from_ref(c));
            n += 1;
        }
        self.head = self.at(n);
        self.len -= n;
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done_at(id: u64, done: Nanos) -> Completion {
        Completion {
            rq: Request { id, ..VACANT.rq },
            done,
            ..VACANT
        }
    }

    /// Completions come out in (done, id) order whatever order they went
    /// in, across the ring's growth and its wrapping, and only once due.
    #[test]
    fn hands_over_in_time_order() {
        let mut q = DoneQueue::with_capacity(2);
        let mut s = 0x9E37_79B9_7F4A_7C15u64;
        let mut queued: Vec<(Nanos, u64)> = Vec::new();
        let mut now = 0;
        for id in 0..5_000u64 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            // Mostly after the last, sometimes before it, sometimes a tie.
            let done = now + s % 1_000 + if id % 3 == 0 { 0 } else { 5_000 };
            let c = *q.push_with(|slot| *slot = done_at(id, done));
            assert_eq!((c.done, c.rq.id), (done, id));
            queued.push((done, id));
            queued.sort();
            if id % 4 == 3 {
                now += 2_000;
                let mut out = Vec::new();
                let n = q.drain_due(now, &mut out);
                let due: Vec<_> = queued.iter().take_while(|&&(d, _)| d <= now).copied().collect();
                queued.drain(..due.len());
                assert_eq!(n, due.len());
                assert_eq!(out.iter().map(|c| (c.done, c.rq.id)).collect::<Vec<_>>(), due);
                assert_eq!(q.next(), queued.first().map(|&(d, _)| d));
            }
        }
        assert!(q.slots.len() > 2, "the ring grew");
    }
}
