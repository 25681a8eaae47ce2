//! Small shared pieces for schedulers: a sector-sorted queue with a FIFO of
//! deadlines beside it (the "sort_list + fifo_list" pair of Linux's
//! deadline, CFQ and AS).

use hvio_core::{Nanos, Request, RequestId, Sector};
use std::collections::{BTreeMap, VecDeque};

/// Key of a request in sector order; ties broken by id (arrival order).
pub type SortKey = (Sector, RequestId);

/// Requests kept both in sector order and in FIFO (deadline) order.
///
/// The sector tree is a B-tree (O(log n)). The FIFO is a deque sorted by
/// deadline: deadlines are mostly inserted in order (arrival time plus a
/// fixed expiry), so insertion is an O(1) push, and each request remembers
/// its slot, so removal blanks it in O(1) without a second tree lookup;
/// blank slots are dropped when they reach the front. A deadline earlier
/// than the last one pushed (a queue mixing sync and async expiries) goes to
/// a small B-tree beside the deque; the FIFO head is the earlier of the two
/// fronts.
#[derive(Debug, Default, Clone)]
pub struct SortedFifo {
    /// Request, its deadline and its deque sequence number (`LATE` if it
    /// is in `late`).
    by_sector: BTreeMap<SortKey, (Request, Nanos, u64)>,
    /// Deque slot `seq − base`: (deadline, sort key), or blank once removed.
    fifo: VecDeque<Option<(Nanos, SortKey)>>,
    base: u64,
    /// The largest (deadline, id) pushed on the deque.
    last: Option<(Nanos, RequestId)>,
    /// Out-of-order entries: (deadline, id) → sort key.
    late: BTreeMap<(Nanos, RequestId), SortKey>,
}

const LATE: u64 = u64::MAX;

impl SortedFifo {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.by_sector.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_sector.is_empty()
    }

    /// Add `rq` with FIFO expiry time `deadline`.
    pub fn insert(&mut self, rq: Request, deadline: Nanos) {
        let key = (rq.sector, rq.id);
        let order = (deadline, rq.id);
        if self.last.is_some_and(|l| order < l) {
            self.late.insert(order, key);
            self.by_sector.insert(key, (rq, deadline, LATE));
        } else {
            let seq = self.base + self.fifo.len() as u64;
            self.fifo.push_back(Some((deadline, key)));
            self.last = Some(order);
            self.by_sector.insert(key, (rq, deadline, seq));
        }
    }

    /// Remove the request with sort key `key`.
    pub fn remove(&mut self, key: SortKey) -> Option<Request> {
        let (rq, deadline, seq) = self.by_sector.remove(&key)?;
        if seq == LATE {
            self.late.remove(&(deadline, rq.id));
        } else {
            if let Some(slot) = self.fifo.get_mut((seq - self.base) as usize) {
                *slot = None;
            }
            while let Some(None) = self.fifo.front() {
                self.fifo.pop_front();
                self.base += 1;
            }
        }
        if self.by_sector.is_empty() {
            self.last = None;
        }
        Some(rq)
    }

    /// The FIFO head: the request with the earliest deadline, and that deadline.
    pub fn fifo_head(&self) -> Option<(Nanos, &Request)> {
        let front = self
            .fifo
            .front()
            .and_then(|s| s.as_ref())
            .map(|&(dl, k)| ((dl, k.1), k));
        let late = self.late.iter().next().map(|(&o, &k)| (o, k));
        let (o, k) = match (front, late) {
            (Some(f), Some(l)) => f.min(l),
            (f, l) => f.or(l)?,
        };
        Some((o.0, &self.by_sector[&k].0))
    }

    /// The first request at or after `key` in sector order.
    pub fn at_or_after(&self, key: SortKey) -> Option<&Request> {
        self.by_sector.range(key..).next().map(|(_, r)| &r.0)
    }

    /// The first request strictly after `key` in sector order.
    pub fn after(&self, key: SortKey) -> Option<&Request> {
        use std::ops::Bound::{Excluded, Unbounded};
        self.by_sector
            .range((Excluded(key), Unbounded))
            .next()
            .map(|(_, r)| &r.0)
    }

    /// The last request strictly before `key` in sector order.
    pub fn before(&self, key: SortKey) -> Option<&Request> {
        self.by_sector.range(..key).next_back().map(|(_, r)| &r.0)
    }

    pub fn first(&self) -> Option<&Request> {
        self.by_sector.values().next().map(|r| &r.0)
    }

    pub fn get(&self, key: SortKey) -> Option<&Request> {
        self.by_sector.get(&key).map(|r| &r.0)
    }

    pub fn contains(&self, key: SortKey) -> bool {
        self.by_sector.contains_key(&key)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Request> {
        self.by_sector.values().map(|r| &r.0)
    }
}

/// The sort key of a request.
pub fn key(rq: &Request) -> SortKey {
    (rq.sector, rq.id)
}

/// The think-time estimate CFQ, AS and BFQ share: a fixed-point EWMA with
/// weight 7/8 on history (`samples = (7s+256)/8`, `total = (7t+256x)/8`,
/// `mean = (total+128)/samples`), the gap between the end of a stream's last
/// request and the arrival of its next one, each sample clamped to `cap`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ThinkTime {
    /// When the stream's last request completed.
    pub last_end: Nanos,
    pub samples: u64,
    pub total: u64,
    pub mean: Nanos,
}

impl ThinkTime {
    pub fn new(now: Nanos) -> Self {
        ThinkTime {
            last_end: now,
            ..Self::default()
        }
    }

    /// A request arrives at `now`: record the think time since `last_end`.
    pub fn sample(&mut self, now: Nanos, cap: Nanos) {
        self.add(now.saturating_sub(self.last_end).min(cap));
    }

    /// Fold one think-time sample into the average.
    pub fn add(&mut self, elapsed: Nanos) {
        self.samples = (7 * self.samples + 256) / 8;
        self.total = (7 * self.total + 256 * elapsed) / 8;
        self.mean = (self.total + 128) / self.samples;
    }

    /// Linux's `sample_valid`: enough history to trust the mean (> 80, i.e.
    /// after three samples).
    pub fn valid(&self) -> bool {
        self.samples > 80
    }
}

/// The last 32 requests' seekiness as a bitmap (CFQ's and BFQ's
/// `seek_history`): a request is a seek when it starts farther than
/// `threshold` sectors from where the stream's previous request ended (on a
/// non-rotational device: when it is smaller than `small` sectors).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SeekHistory {
    pub bits: u32,
    /// End of the previous request (0 = none yet, as in Linux).
    pub last_pos: Sector,
}

impl SeekHistory {
    pub fn record(&mut self, rq: &Request, rotational: bool, threshold: Sector, small: u32) {
        let dist = if self.last_pos != 0 {
            self.last_pos.abs_diff(rq.sector)
        } else {
            0
        };
        let seek = if rotational {
            dist > threshold
        } else {
            rq.sectors < small
        };
        self.bits = (self.bits << 1) | seek as u32;
        self.last_pos = rq.end();
    }

    /// More than 4 of the last 32 requests were seeks.
    pub fn seeky(&self) -> bool {
        self.bits.count_ones() > 32 / 8
    }
}

/// A wake-up time for `Dispatch::WaitUntil`: `t` if it is in the future,
/// else `now + fallback` (at least 1 ns later). Used when a scheduler waits
/// for in-flight requests to complete and has no timer of its own: the
/// driver calls it again on the completion anyway.
pub fn wake_at(now: Nanos, t: Option<Nanos>, fallback: Nanos) -> Nanos {
    match t {
        Some(t) if t > now => t,
        _ => now + fallback.max(1),
    }
}

/// The one-way elevator with short, penalised backward seeks that AS's and
/// CFQ's `choose_req` implement: from `last` (where the previous request of
/// this queue ended), take the nearest request ahead, unless one behind by at
/// most `back_max` sectors costs less at `penalty`× its distance; when every
/// request lies further behind, wrap to the lowest sector. `prefer` may
/// decide between the forward and the backward candidate first
/// (`Some(true)` = forward), as CFQ prefers sync and metadata requests.
pub fn elevator_next(
    q: &SortedFifo,
    last: Sector,
    back_max: Sector,
    penalty: u64,
    prefer: impl Fn(&Request, &Request) -> Option<bool>,
) -> Option<&Request> {
    let fwd = q.at_or_after((last, 0));
    let back = q.before((last, 0)).filter(|r| r.sector + back_max >= last);
    match (fwd, back) {
        (Some(f), Some(b)) => {
            let forward = prefer(f, b).unwrap_or_else(|| (last - b.sector) * penalty >= f.sector - last);
            Some(if forward { f } else { b })
        }
        (Some(f), None) => Some(f),
        (None, Some(b)) => Some(b),
        (None, None) => q.first(),
    }
}

#[cfg(test)]
mod sorted_fifo_tests {
    use super::*;
    use hvio_core::Op;
    use proptest::prelude::*;

    proptest! {
        /// Against a plain model: any mix of inserts (deadlines in or out of
        /// order) and removals keeps the FIFO head the earliest (deadline, id)
        /// and the sector order intact.
        #[test]
        fn matches_a_model(ops in prop::collection::vec((any::<bool>(), 0u64..64, 0u64..1000, any::<prop::sample::Index>()), 1..200)) {
            let mut q = SortedFifo::new();
            let mut model: Vec<(Nanos, RequestId, Sector)> = Vec::new();
            for (id, (ins, sector, dl, pick)) in ops.into_iter().enumerate() {
                let id = id as u64;
                if ins || model.is_empty() {
                    q.insert(Request::new(id, 0, Op::Read, sector, 8, 0), dl);
                    model.push((dl, id, sector));
                } else {
                    let (_, rid, sec) = model.remove(pick.index(model.len()));
                    prop_assert_eq!(q.remove((sec, rid)).map(|r| r.id), Some(rid));
                }
                let want = model.iter().min_by_key(|m| (m.0, m.1)).map(|m| (m.0, m.1));
                prop_assert_eq!(q.fifo_head().map(|(d, r)| (d, r.id)), want);
                prop_assert_eq!(q.len(), model.len());
                let first = model.iter().min_by_key(|m| (m.2, m.1)).map(|m| m.1);
                prop_assert_eq!(q.first().map(|r| r.id), first);
            }
        }
    }

    #[test]
    fn fifo_front_skips_removed_requests_and_keeps_deadline_order() {
        let mut q = SortedFifo::new();
        for (id, sector, dl) in [(1u64, 300u64, 10u64), (2, 100, 20), (3, 200, 30)] {
            q.insert(Request::new(id, 0, Op::Read, sector, 8, 0), dl);
        }
        // Out of order deadline goes to its place.
        q.insert(Request::new(4, 0, Op::Read, 50, 8, 0), 15);
        assert_eq!(q.fifo_head().map(|(d, r)| (d, r.id)), Some((10, 1)));
        q.remove((100, 2)).unwrap();
        assert_eq!(q.fifo_head().map(|(d, r)| (d, r.id)), Some((10, 1)));
        q.remove((300, 1)).unwrap();
        assert_eq!(q.fifo_head().map(|(d, r)| (d, r.id)), Some((15, 4)));
        q.remove((50, 4)).unwrap();
        // Request 2's stale entry was dropped on the way.
        assert_eq!(q.fifo_head().map(|(d, r)| (d, r.id)), Some((30, 3)));
        assert_eq!(q.first().map(|r| r.id), Some(3));
        q.remove((200, 3)).unwrap();
        assert!(q.fifo_head().is_none() && q.is_empty());
    }
}
