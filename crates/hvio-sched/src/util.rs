//! Small shared pieces for schedulers: a sector-sorted queue with a FIFO of
//! deadlines beside it (the "sort_list + fifo_list" pair of Linux's
//! deadline, CFQ and AS).

use hvio_core::{Nanos, Request, RequestId, Sector};
use std::collections::{BTreeMap, HashMap};

/// Key of a request in sector order; ties broken by id (arrival order).
pub type SortKey = (Sector, RequestId);

/// Requests kept both in sector order and in FIFO (deadline) order.
/// Every operation is O(log n).
#[derive(Debug, Default, Clone)]
pub struct SortedFifo {
    by_sector: BTreeMap<SortKey, Request>,
    /// (deadline, id) → sort key.
    by_deadline: BTreeMap<(Nanos, RequestId), SortKey>,
    deadline_of: HashMap<RequestId, Nanos>,
}

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
        self.by_sector.insert(key, rq);
        self.by_deadline.insert((deadline, rq.id), key);
        self.deadline_of.insert(rq.id, deadline);
    }

    /// Remove the request with sort key `key`.
    pub fn remove(&mut self, key: SortKey) -> Option<Request> {
        let rq = self.by_sector.remove(&key)?;
        let dl = self.deadline_of.remove(&rq.id).expect("deadline kept for every request");
        self.by_deadline.remove(&(dl, rq.id));
        Some(rq)
    }

    /// The FIFO head: the request with the earliest deadline, and that deadline.
    pub fn fifo_head(&self) -> Option<(Nanos, &Request)> {
        self.by_deadline.iter().next().map(|(&(dl, _), key)| (dl, &self.by_sector[key]))
    }

    /// The first request at or after `key` in sector order.
    pub fn at_or_after(&self, key: SortKey) -> Option<&Request> {
        self.by_sector.range(key..).next().map(|(_, r)| r)
    }

    /// The first request strictly after `key` in sector order.
    pub fn after(&self, key: SortKey) -> Option<&Request> {
        use std::ops::Bound::{Excluded, Unbounded};
        self.by_sector.range((Excluded(key), Unbounded)).next().map(|(_, r)| r)
    }

    /// The last request strictly before `key` in sector order.
    pub fn before(&self, key: SortKey) -> Option<&Request> {
        self.by_sector.range(..key).next_back().map(|(_, r)| r)
    }

    pub fn first(&self) -> Option<&Request> {
        self.by_sector.values().next()
    }

    pub fn get(&self, key: SortKey) -> Option<&Request> {
        self.by_sector.get(&key)
    }

    pub fn contains(&self, key: SortKey) -> bool {
        self.by_sector.contains_key(&key)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Request> {
        self.by_sector.values()
    }
}

/// The sort key of a request.
pub fn key(rq: &Request) -> SortKey {
    (rq.sector, rq.id)
}
