//! Completions scheduled but not yet delivered, in (time, id) order.

use hvio_core::{Completion, Nanos};
use std::collections::VecDeque;

/// A small ordered queue of future completions (preallocated: no allocation per request).
#[derive(Debug, Default)]
pub(crate) struct DoneQueue(VecDeque<Completion>);

impl DoneQueue {
    pub(crate) fn with_capacity(n: usize) -> Self {
        DoneQueue(VecDeque::with_capacity(n))
    }

    /// Adds a completion, keeping (done, id) order.
    #[inline(always)]
    pub(crate) fn push(&mut self, c: Completion) {
        // Almost always at the end: checked first, without a search, and in
        // line at the caller; the rare completion that goes before the last
        // is placed out of line.
        if self.0.back().is_none_or(|x| (x.done, x.rq.id) <= (c.done, c.rq.id)) {
            self.0.push_back(c);
        } else {
            self.insert(c);
        }
    }

    /// Adds a completion that goes before the last one, keeping (done, id) order.
    #[inline(never)]
    fn insert(&mut self, c: Completion) {
        let key = (c.done, c.rq.id);
        let at = self.0.partition_point(|x| (x.done, x.rq.id) <= key);
        self.0.insert(at, c);
    }

    /// The completion, when it is the only one.
    pub(crate) fn take_only(&mut self) -> Option<Completion> {
        if self.0.len() == 1 {
            self.0.pop_front()
        } else {
            None
        }
    }

    /// When the earliest completion is due.
    pub(crate) fn next(&self) -> Option<Nanos> {
        self.0.front().map(|c| c.done)
    }

    /// Moves every completion due by `now` to `out`; returns how many.
    pub(crate) fn drain_due(&mut self, now: Nanos, out: &mut Vec<Completion>) -> usize {
        let mut n = 0;
        while let Some(&c) = self.0.front().filter(|c| c.done <= now) {
            out.push(c);
            self.0.pop_front();
            n += 1;
        }
        n
    }
}
