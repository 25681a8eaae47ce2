//! Resources shared fairly by whatever uses them at the moment: each
//! physical node's NIC (a link each way) and each VM's VCPU.
//!
//! A flow (a transfer, a burst of CPU work) uses one or two resources and
//! moves at its fair share of the scarcer one: capacity over the number of
//! flows on it. Rates change only when a flow starts or ends, so the next
//! completion is known exactly; times are whole nanoseconds, rounded up.

use hvio_core::time::Nanos;
use std::collections::BTreeMap;

struct Flow {
    resources: Vec<usize>,
    left: f64,
}

/// Resources and the flows on them; a flow moves at its fair share of the scarcer of its resources.
pub struct Shared {
    /// Units per nanosecond.
    capacity: Vec<f64>,
    flows: BTreeMap<u64, Flow>,
    now: Nanos,
}

impl Shared {
    /// Resources of `capacity` units per nanosecond each, no flows.
    pub fn new(capacity: Vec<f64>) -> Shared {
        Shared {
            capacity,
            flows: BTreeMap::new(),
            now: 0,
        }
    }

    /// Whether a flow is under way.
    pub fn busy(&self) -> bool {
        !self.flows.is_empty()
    }

    fn users(&self) -> Vec<usize> {
        let mut users = vec![0; self.capacity.len()];
        for flow in self.flows.values() {
            for &r in &flow.resources {
                users[r] += 1;
            }
        }
        users
    }

    fn rate(&self, flow: &Flow, users: &[usize]) -> f64 {
        flow.resources
            .iter()
            .map(|&r| self.capacity[r] / users[r] as f64)
            .fold(f64::INFINITY, f64::min)
    }

    fn finish_at(&self, flow: &Flow, users: &[usize]) -> Nanos {
        self.now + (flow.left / self.rate(flow, users)).ceil() as Nanos
    }

    /// Start flow `id` at the current time: `amount` units over `resources`.
    pub fn add(&mut self, id: u64, resources: Vec<usize>, amount: u64) {
        self.flows.insert(
            id,
            Flow {
                resources,
                left: amount as f64,
            },
        );
    }

    /// When the next flow finishes at today's rates.
    pub fn next_done(&self) -> Option<Nanos> {
        let users = self.users();
        self.flows.values().map(|f| self.finish_at(f, &users)).min()
    }

    /// Move to `to` (not past [`Shared::next_done`]); returns the flows
    /// finished by then, in id order.
    pub fn advance(&mut self, to: Nanos) -> Vec<u64> {
        let to = to.max(self.now);
        let users = self.users();
        let elapsed = (to - self.now) as f64;
        let mut done = Vec::new();
        let finishing: Vec<(u64, bool, f64)> = self
            .flows
            .iter()
            .map(|(&id, f)| (id, self.finish_at(f, &users) <= to, self.rate(f, &users) * elapsed))
            .collect();
        for (id, finished, moved) in finishing {
            if finished {
                self.flows.remove(&id);
                done.push(id);
            } else if let Some(flow) = self.flows.get_mut(&id) {
                flow.left = (flow.left - moved).max(0.0);
            }
        }
        self.now = to;
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flows_share_the_scarcer_resource() {
        // Two resources of 1 unit/ns; flow 1 uses both, flow 2 only the first.
        let mut shared = Shared::new(vec![1.0, 1.0]);
        shared.add(1, vec![0, 1], 100);
        shared.add(2, vec![0], 50);
        // Both at half of resource 0: flow 2 is done at 100 ns...
        assert_eq!(shared.next_done(), Some(100));
        assert_eq!(shared.advance(100), vec![2]);
        // ...flow 1 has 50 left, now at full speed.
        assert_eq!(shared.next_done(), Some(150));
        assert_eq!(shared.advance(150), vec![1]);
        assert!(!shared.busy());
        assert_eq!(shared.next_done(), None);
    }

    #[test]
    fn an_empty_flow_is_done_at_once() {
        let mut shared = Shared::new(vec![2.0]);
        shared.advance(10);
        shared.add(7, vec![0], 0);
        assert_eq!(shared.next_done(), Some(10));
        assert_eq!(shared.advance(10), vec![7]);
    }
}
