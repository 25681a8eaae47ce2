//! Small shared pieces for schedulers: a sector-sorted queue with a FIFO of
//! deadlines beside it (the "sort_list + fifo_list" pair of Linux's
//! deadline, CFQ and AS).

use hvio_core::{Nanos, Request, RequestId, Sector};
use std::collections::{BTreeMap, VecDeque};

/// Key of a request in sector order; ties broken by id (arrival order).
pub type SortKey = (Sector, RequestId);

/// Most keys in one chunk of a [`SortedIndex`] (split in halves beyond).
const CHUNK: usize = 64;

/// Sort keys in order, each with a slot number: a list of sorted chunks of
/// at most [`CHUNK`] keys with the largest key of each chunk beside it. A
/// lookup is two binary searches (chunk, then position), an insertion or
/// removal moves at most a chunk's worth of 24-byte entries: cheaper and
/// more cache friendly than a B-tree both for the few dozen requests a
/// queue usually holds (one chunk: a sorted array) and for 100,000.
#[derive(Debug, Default, Clone)]
struct SortedIndex {
    chunks: Vec<Vec<(SortKey, u32)>>,
    /// `maxes[i]`: the last key of `chunks[i]` (chunks are never empty).
    maxes: Vec<SortKey>,
    /// The last chunk's buffer once emptied, for the next insertion (a
    /// queue that empties and refills allocates nothing).
    spare: Vec<(SortKey, u32)>,
}

impl SortedIndex {
    /// The chunk holding the first key at or after `key` (`chunks.len()` if none).
    #[inline]
    fn chunk_at_or_after(&self, key: SortKey) -> usize {
        self.maxes.partition_point(|m| *m < key)
    }

    /// The chunk holding the first key strictly after `key` (`chunks.len()` if none).
    #[inline]
    fn chunk_after(&self, key: SortKey) -> usize {
        self.maxes.partition_point(|m| *m <= key)
    }

    /// Adds `key` with slot `slot`; false (and nothing changed) if `key` is present.
    fn insert(&mut self, key: SortKey, slot: u32) -> bool {
        if self.chunks.is_empty() {
            let mut c = std::mem::take(&mut self.spare);
            if c.capacity() == 0 {
                c.reserve_exact(CHUNK + 1);
            }
            c.push((key, slot));
            self.chunks.push(c);
            self.maxes.push(key);
            return true;
        }
        let ci = self.chunk_at_or_after(key).min(self.chunks.len() - 1);
        let c = &mut self.chunks[ci];
        let pos = c.partition_point(|e| e.0 < key);
        if c.get(pos).is_some_and(|e| e.0 == key) {
            return false;
        }
        c.insert(pos, (key, slot));
        if pos + 1 == c.len() {
            self.maxes[ci] = key;
        }
        if c.len() > CHUNK {
            let mut tail = Vec::with_capacity(CHUNK + 1);
            tail.extend_from_slice(&c[CHUNK / 2..]);
            c.truncate(CHUNK / 2);
            self.maxes[ci] = c[CHUNK / 2 - 1].0;
            let max = tail[tail.len() - 1].0;
            self.chunks.insert(ci + 1, tail);
            self.maxes.insert(ci + 1, max);
        }
        true
    }

    /// Where `key` is: (chunk, position).
    #[inline]
    fn find(&self, key: SortKey) -> Option<(usize, usize)> {
        let ci = self.chunk_at_or_after(key);
        let c = self.chunks.get(ci)?;
        let pos = c.partition_point(|e| e.0 < key);
        (c[pos].0 == key).then_some((ci, pos))
    }

    /// Removes `key`; returns its slot and the next key.
    fn remove(&mut self, key: SortKey) -> Option<(u32, Option<SortKey>)> {
        let (ci, pos) = self.find(key)?;
        let c = &mut self.chunks[ci];
        let (_, slot) = c.remove(pos);
        let next = c.get(pos).map(|e| e.0);
        let next = next.or_else(|| self.chunks.get(ci + 1).map(|d| d[0].0));
        let c = &mut self.chunks[ci];
        if c.is_empty() {
            let c = self.chunks.remove(ci);
            self.maxes.remove(ci);
            if self.chunks.is_empty() {
                self.spare = c;
            }
        } else {
            if pos == c.len() {
                self.maxes[ci] = c[pos - 1].0;
            }
            // Keep chunks from thinning out: merge a small one into its successor when both fit.
            let n = c.len();
            if n < CHUNK / 8 && self.chunks.get(ci + 1).is_some_and(|d| n + d.len() <= CHUNK / 2) {
                let next = self.chunks.remove(ci + 1);
                self.maxes.remove(ci + 1);
                self.chunks[ci].extend_from_slice(&next);
                self.maxes[ci] = next[next.len() - 1].0;
            }
        }
        Some((slot, next))
    }

    fn get(&self, key: SortKey) -> Option<u32> {
        self.find(key).map(|(ci, pos)| self.chunks[ci][pos].1)
    }

    fn at_or_after(&self, key: SortKey) -> Option<u32> {
        let c = self.chunks.get(self.chunk_at_or_after(key))?;
        Some(c[c.partition_point(|e| e.0 < key)].1)
    }

    fn after(&self, key: SortKey) -> Option<u32> {
        let c = self.chunks.get(self.chunk_after(key))?;
        Some(c[c.partition_point(|e| e.0 <= key)].1)
    }

    fn before(&self, key: SortKey) -> Option<u32> {
        let ci = self.chunk_at_or_after(key);
        if let Some(c) = self.chunks.get(ci) {
            let pos = c.partition_point(|e| e.0 < key);
            if pos > 0 {
                return Some(c[pos - 1].1);
            }
        }
        let c = self.chunks.get(ci.checked_sub(1)?)?;
        Some(c[c.len() - 1].1)
    }

    fn first(&self) -> Option<u32> {
        self.chunks.first().map(|c| c[0].1)
    }

    fn iter(&self) -> impl Iterator<Item = (SortKey, u32)> + '_ {
        self.chunks.iter().flatten().copied()
    }

    /// An index of keys given in increasing order, in chunks three quarters full.
    fn from_sorted(keys: impl Iterator<Item = (SortKey, u32)>) -> Self {
        let mut ix = SortedIndex::default();
        for e in keys {
            if ix.chunks.last().is_none_or(|c| c.len() >= CHUNK * 3 / 4) {
                ix.chunks.push(Vec::with_capacity(CHUNK + 1));
                ix.maxes.push(e.0);
            }
            let last = ix.chunks.len() - 1;
            ix.chunks[last].push(e);
            ix.maxes[last] = e.0;
        }
        ix
    }
}

/// A queued request: its deadline and its deque sequence number (`LATE`
/// if it is in `late`).
#[derive(Debug, Clone, Copy)]
struct Slot {
    rq: Request,
    deadline: Nanos,
    seq: u64,
}

/// Requests kept both in sector order and in FIFO (deadline) order.
///
/// Up to a few thousand requests (`SMALL_MAX`), the requests live in a slab
/// of slots (reused, so no allocation per request once warm) and the sector
/// order is a [`SortedIndex`] of their keys; a bigger queue moves to a
/// B-tree holding the requests (fewer cache misses at that size) and back
/// once it is small again. The FIFO is a deque sorted by deadline:
/// deadlines are mostly inserted in order (arrival time plus a fixed
/// expiry), so insertion is an O(1) push, and each request remembers its
/// place in it, so removal blanks it in O(1); blank places are dropped when
/// they reach the front. A deadline earlier than the last one pushed (a
/// queue mixing sync and async expiries) goes to a small B-tree beside the
/// deque; the FIFO head is the earlier of the two fronts.
#[derive(Debug, Default, Clone)]
pub struct SortedFifo {
    slots: Vec<Slot>,
    /// Slots not in use.
    free: Vec<u32>,
    by_sector: SortedIndex,
    /// The requests of a big queue (then `slots` and `by_sector` are empty).
    tree: Option<BTreeMap<SortKey, Slot>>,
    len: usize,
    /// Deque entry `seq − base`: (deadline, sort key), or blank once removed.
    fifo: VecDeque<Option<(Nanos, SortKey)>>,
    base: u64,
    /// The largest (deadline, id) pushed on the deque.
    last: Option<(Nanos, RequestId)>,
    /// Out-of-order entries: (deadline, id) → sort key.
    late: BTreeMap<(Nanos, RequestId), SortKey>,
}

const LATE: u64 = u64::MAX;
/// A queue longer than this moves to the B-tree...
const SMALL_MAX: usize = 4096;
/// ...and back below this.
const SMALL_AGAIN: usize = 1024;

impl SortedFifo {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    fn rq(&self, slot: u32) -> &Request {
        &self.slots[slot as usize].rq
    }

    /// Add `rq` with FIFO expiry time `deadline` (a request with the key of
    /// one already queued replaces it).
    pub fn insert(&mut self, rq: Request, deadline: Nanos) {
        let key = (rq.sector, rq.id);
        let order = (deadline, rq.id);
        let late = self.last.is_some_and(|l| order < l);
        let seq = if late { LATE } else { self.base + self.fifo.len() as u64 };
        let entry = Slot { rq, deadline, seq };
        if let Some(tree) = &mut self.tree {
            match tree.entry(key) {
                std::collections::btree_map::Entry::Vacant(v) => {
                    v.insert(entry);
                }
                std::collections::btree_map::Entry::Occupied(_) => {
                    self.remove(key);
                    return self.insert(rq, deadline);
                }
            }
        } else {
            let slot = self.free.last().copied().unwrap_or(self.slots.len() as u32);
            if !self.by_sector.insert(key, slot) {
                self.remove(key);
                return self.insert(rq, deadline);
            }
            if self.free.pop().is_some() {
                self.slots[slot as usize] = entry;
            } else {
                self.slots.push(entry);
            }
        }
        if late {
            self.late.insert(order, key);
        } else {
            self.fifo.push_back(Some((deadline, key)));
            self.last = Some(order);
        }
        self.len += 1;
        if self.len > SMALL_MAX && self.tree.is_none() {
            let tree = self
                .by_sector
                .iter()
                .map(|(k, s)| (k, self.slots[s as usize]))
                .collect();
            self.tree = Some(tree);
            self.by_sector = SortedIndex::default();
            self.slots = Vec::new();
            self.free = Vec::new();
        }
    }

    /// Remove the request with sort key `key`.
    pub fn remove(&mut self, key: SortKey) -> Option<Request> {
        self.take(key, false).map(|(rq, _)| rq)
    }

    /// Remove the request with sort key `key`; also returns the key of the
    /// request after it in sector order (as [`SortedFifo::after`] would).
    pub fn remove_next(&mut self, key: SortKey) -> Option<(Request, Option<SortKey>)> {
        self.take(key, true)
    }

    /// Removes `key`; with `next`, also finds the key after it (free in a
    /// small queue, a second search in the tree).
    fn take(&mut self, key: SortKey, next: bool) -> Option<(Request, Option<SortKey>)> {
        let (Slot { rq, deadline, seq }, next) = if let Some(tree) = &mut self.tree {
            use std::ops::Bound::{Excluded, Unbounded};
            let e = tree.remove(&key)?;
            let after = next.then(|| tree.range((Excluded(key), Unbounded)).next().map(|(&k, _)| k));
            (e, after.flatten())
        } else {
            let (slot, next) = self.by_sector.remove(key)?;
            self.free.push(slot);
            (self.slots[slot as usize], next)
        };
        self.len -= 1;
        if seq == LATE {
            self.late.remove(&(deadline, rq.id));
        } else {
            if let Some(e) = self.fifo.get_mut((seq - self.base) as usize) {
                *e = None;
            }
            while let Some(None) = self.fifo.front() {
                self.fifo.pop_front();
                self.base += 1;
            }
        }
        if self.len == 0 {
            self.last = None;
        }
        if self.len < SMALL_AGAIN {
            if let Some(tree) = self.tree.take() {
                self.slots = tree.values().copied().collect();
                self.by_sector = SortedIndex::from_sorted(tree.keys().copied().zip(0..));
            }
        }
        Some((rq, next))
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
        Some((o.0, self.get(k).expect("FIFO entries are queued")))
    }

    /// The first request at or after `key` in sector order.
    pub fn at_or_after(&self, key: SortKey) -> Option<&Request> {
        match &self.tree {
            Some(t) => t.range(key..).next().map(|(_, e)| &e.rq),
            None => self.by_sector.at_or_after(key).map(|s| self.rq(s)),
        }
    }

    /// The first request strictly after `key` in sector order.
    pub fn after(&self, key: SortKey) -> Option<&Request> {
        use std::ops::Bound::{Excluded, Unbounded};
        match &self.tree {
            Some(t) => t.range((Excluded(key), Unbounded)).next().map(|(_, e)| &e.rq),
            None => self.by_sector.after(key).map(|s| self.rq(s)),
        }
    }

    /// The last request strictly before `key` in sector order.
    pub fn before(&self, key: SortKey) -> Option<&Request> {
        match &self.tree {
            Some(t) => t.range(..key).next_back().map(|(_, e)| &e.rq),
            None => self.by_sector.before(key).map(|s| self.rq(s)),
        }
    }

    pub fn first(&self) -> Option<&Request> {
        match &self.tree {
            Some(t) => t.values().next().map(|e| &e.rq),
            None => self.by_sector.first().map(|s| self.rq(s)),
        }
    }

    pub fn get(&self, key: SortKey) -> Option<&Request> {
        match &self.tree {
            Some(t) => t.get(&key).map(|e| &e.rq),
            None => self.by_sector.get(key).map(|s| self.rq(s)),
        }
    }

    pub fn contains(&self, key: SortKey) -> bool {
        self.get(key).is_some()
    }

    fn get_mut(&mut self, key: SortKey) -> Option<&mut Request> {
        match &mut self.tree {
            Some(t) => t.get_mut(&key).map(|e| &mut e.rq),
            None => {
                let s = self.by_sector.get(key)?;
                Some(&mut self.slots[s as usize].rq)
            }
        }
    }

    /// The block layer's back merge into this queue (see
    /// [`hvio_core::Scheduler::back_merge`]): the queued request nearest
    /// below `rq` grows by `rq.sectors` when [`back_mergeable`] allows it.
    /// It keeps its sort key and FIFO deadline. Returns its id.
    pub fn back_merge(&mut self, rq: &Request, max_sectors: u32) -> Option<RequestId> {
        let prev = *self.before((rq.sector, 0))?;
        if !back_mergeable(&prev, rq, max_sectors) {
            return None;
        }
        let q = self.get_mut(key(&prev))?;
        q.sectors += rq.sectors;
        Some(q.id)
    }

    pub fn iter(&self) -> Box<dyn Iterator<Item = &Request> + '_> {
        match &self.tree {
            Some(t) => Box::new(t.values().map(|e| &e.rq)),
            None => Box::new(self.by_sector.iter().map(|(_, s)| self.rq(s))),
        }
    }
}

/// Whether `rq` may be appended to the queued request `prev`
/// (`elv_rq_merge_ok` and `ll_back_merge_fn`): both reads or both writes
/// (not flushes or discards), the same sync flag (CFQ's
/// `cfq_allow_merge`), neither FUA, `prev` ends where `rq` starts, and the
/// sum fits `max_sectors` (the queue's `max_sectors_kb`).
pub fn back_mergeable(prev: &Request, rq: &Request, max_sectors: u32) -> bool {
    matches!(rq.op, hvio_core::Op::Read | hvio_core::Op::Write)
        && prev.op == rq.op
        && prev.sync == rq.sync
        && !prev.fua
        && !rq.fua
        && rq.sectors > 0
        && prev.end() == rq.sector
        && prev.sectors as u64 + rq.sectors as u64 <= max_sectors as u64
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

    /// A queue that grows past `SMALL_MAX` (to the B-tree) and shrinks below
    /// `SMALL_AGAIN` (back) answers every query as the model does throughout.
    #[test]
    fn big_queue_moves_to_the_tree_and_back() {
        let mut q = SortedFifo::new();
        let mut model: BTreeMap<SortKey, Nanos> = BTreeMap::new();
        let mut rng = 12345u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let check = |q: &SortedFifo, model: &BTreeMap<SortKey, Nanos>, probe: SortKey| {
            assert_eq!(q.len(), model.len());
            if probe.0.is_multiple_of(16) {
                let head = model.iter().map(|(k, &d)| (d, k.1)).min();
                assert_eq!(q.fifo_head().map(|(d, r)| (d, r.id)), head);
            }
            assert_eq!(q.at_or_after(probe).map(key), model.range(probe..).next().map(|e| *e.0));
            assert_eq!(q.before(probe).map(key), model.range(..probe).next_back().map(|e| *e.0));
            assert_eq!(q.first().map(key), model.keys().next().copied());
        };
        let mut id = 0;
        for round in 0..2 {
            while model.len() < SMALL_MAX + 100 {
                let r = next();
                let (sector, dl) = (r % 100_000, (id + r % 3 * 1000) / 4);
                q.insert(Request::new(id, 0, Op::Read, sector, 8, 0), dl);
                model.insert((sector, id), dl);
                id += 1;
                check(&q, &model, (next() % 100_000, 0));
            }
            assert!(q.tree.is_some(), "round {round}");
            while model.len() > SMALL_AGAIN / 2 {
                let probe = (next() % 100_000, 0);
                let k = *model.range(probe..).next().or(model.iter().next()).unwrap().0;
                let want_next = model
                    .range((std::ops::Bound::Excluded(k), std::ops::Bound::Unbounded))
                    .next()
                    .map(|e| *e.0);
                assert_eq!(q.remove_next(k).map(|(r, n)| (r.id, n)), Some((k.1, want_next)));
                model.remove(&k);
                check(&q, &model, probe);
            }
            assert!(q.tree.is_none(), "round {round}");
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

#[cfg(test)]
mod sorted_index_tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Against a B-tree, over enough keys to split and merge chunks: every
        /// ordered query (at or after, after, before, first, get) and the order.
        #[test]
        fn matches_a_btree(ops in prop::collection::vec((0u8..3, 0u64..600, any::<prop::sample::Index>()), 1..3000)) {
            let mut ix = SortedIndex::default();
            let mut model: BTreeMap<SortKey, u32> = BTreeMap::new();
            for (n, (op, sector, pick)) in ops.into_iter().enumerate() {
                let key = (sector, n as u64 % 7);
                if op > 0 || model.is_empty() {
                    if let std::collections::btree_map::Entry::Vacant(e) = model.entry(key) {
                        e.insert(n as u32);
                        ix.insert(key, n as u32);
                    }
                } else {
                    let k = *model.keys().nth(pick.index(model.len())).unwrap();
                    prop_assert_eq!(ix.remove(k).map(|r| r.0), model.remove(&k));
                }
                let probe = (sector, 3);
                prop_assert_eq!(ix.at_or_after(probe), model.range(probe..).next().map(|e| *e.1));
                prop_assert_eq!(ix.after(probe), model.range((std::ops::Bound::Excluded(probe), std::ops::Bound::Unbounded)).next().map(|e| *e.1));
                prop_assert_eq!(ix.before(probe), model.range(..probe).next_back().map(|e| *e.1));
                prop_assert_eq!(ix.get(probe), model.get(&probe).copied());
                prop_assert_eq!(ix.first(), model.values().next().copied());
                prop_assert!(ix.chunks.iter().all(|c| !c.is_empty() && c.len() <= CHUNK));
            }
            prop_assert_eq!(ix.iter().map(|e| e.1).collect::<Vec<_>>(), model.values().copied().collect::<Vec<_>>());
            let rebuilt = SortedIndex::from_sorted(ix.iter());
            prop_assert_eq!(rebuilt.iter().collect::<Vec<_>>(), ix.iter().collect::<Vec<_>>());
            prop_assert_eq!(rebuilt.maxes.clone(), rebuilt.chunks.iter().map(|c| c[c.len() - 1].0).collect::<Vec<_>>());
        }
    }
}
