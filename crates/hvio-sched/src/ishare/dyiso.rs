//! DyIso, the dynamic isolation algorithm of paper 003 (§4.1): the per-VM
//! estimators of Eq. 2 (`await`) and Eq. 3 (`thinkt`) and the decision of
//! Algorithm 1. Pure functions and plain data, so each branch is testable
//! without a scheduler around it.
//!
//! # Which term weighs more (the paper disagrees with itself)
//!
//! Eq. 2 and 3 read `total_i = a·total_{i−1} + b·x_i`, `S_i = a·S_{i−1} + b`,
//! `mean = (total_i + c)/S_i` with a = 7/8, b = 32, c = 1024. In steady state
//! `S → b/(1−a) = 256`, so the newest interval carries weight `1 − a = 1/8`
//! and the history `7/8`: the formula is the Linux CFQ/AS think-time
//! estimator (`samples = (7·s + 256)/8`, `total = (7·t + 256·x)/8`) with the
//! history weighing more. The prose beside it says the opposite ("weight of
//! the latest time interval (i.e., a) is much greater than that of historical
//! one (i.e., b)"), which the numbers cannot mean either (b = 32 > a = 7/8).
//!
//! hvio follows **the formula**: `a` is the decay of the history, the newest
//! interval weighs `1 − a`. Reasons: it is the only reading that uses the
//! published numbers as printed; it is the estimator the paper's Linux 3.0
//! CFQ already used for think time; and a short-memory estimator would let
//! one long interval (a VM waiting out the other VM's slice) swing the
//! `await` comparison of Alg. 1 on every switch. The prose reading is one
//! tunable away: `dyiso_a = 0.125` gives the newest interval weight 7/8.
//!
//! # What the two sides of line 12 are
//!
//! §4.1 explains Alg. 1 line 12 (`VM_n.await ≥ VM_j.await`) as "the service
//! time of pending requests from other VMs is smaller than the sum of the
//! arrival time interval and service time of the next request from the
//! current served VM" — Eq. 1's condition for switching to pay. This module
//! takes both sides as numbers: [`decide`] and [`await_wins`] add
//! `served_gap_us` (the scheduler passes the served VM's `thinkt`, or 0 for
//! the printed form) to the served VM's `await`, and the scheduler passes as
//! each peer's `await` its estimated service time when switched to (see the
//! `ishare` module). With the printed comparison of two like estimates, two
//! VMs running the same workload toss a coin at every decision and the VM
//! whose average happens to be lower keeps the disk through its own idle
//! gaps.
//!
//! Intervals are measured in microseconds, so `c` = 1024 adds
//! `c·(1−a)/b` = 4 µs in steady state (32 µs after the first sample): a small
//! prior that keeps a VM with one lucky sample from looking free.

/// The weights a, b, c of Eq. 2 and 3.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Weights {
    /// Decay of the history (paper: 7/8).
    pub a: f64,
    /// Weight of the newest interval before normalisation (paper: 32).
    pub b: f64,
    /// Constant added to the weighted total (paper: 1024, here in µs·weight).
    pub c: f64,
}

impl Weights {
    /// The paper's values (§4.1 footnote).
    pub const PAPER: Weights = Weights {
        a: 0.875,
        b: 32.0,
        c: 1024.0,
    };
}

/// A time-weighted average of intervals (Eq. 2 for `await`, Eq. 3 for `thinkt`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TimeWeightedAvg {
    total: f64,
    samples: f64,
}

impl TimeWeightedAvg {
    /// Fold in the newest interval, in µs: `total = a·total + b·x`, `S = a·S + b`.
    pub fn update(&mut self, interval_us: f64, w: &Weights) {
        self.total = w.a * self.total + w.b * interval_us;
        self.samples = w.a * self.samples + w.b;
    }

    /// An average whose mean is exactly `mean_us` (for tests of the decisions).
    #[cfg(test)]
    pub(crate) fn fixed(mean_us: f64, w: &Weights) -> Self {
        TimeWeightedAvg {
            total: mean_us * w.b - w.c,
            samples: w.b,
        }
    }

    /// `(total + c)/S`, in µs; `None` before the first interval.
    pub fn mean(&self, w: &Weights) -> Option<f64> {
        (self.samples > 0.0).then(|| (self.total + w.c) / self.samples)
    }
}

/// What Algorithm 1 reads of another VM (`VM_j`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Peer {
    /// `VM_j.pending_requests`.
    pub pending: usize,
    /// `VM_j.await` in µs (`None`: never completed a request).
    pub await_us: Option<f64>,
}

/// What Algorithm 1 decided for the served VM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The served VM has pending requests or no slice left: Alg. 1 does not apply.
    NotApplicable,
    /// Keep the slice and wait for the served VM (line 16: the slice stays).
    Keep,
    /// Lines 9–10: `thinkt ≥ slice_rest`, the next request would come too late.
    EndThinkt,
    /// Lines 11–15: another VM with pending requests has `await` not above the
    /// served VM's and below `max_seektime`.
    EndAwait,
}

/// Lines 12–13 of Algorithm 1: may `VM_j` take over from the served VM on
/// the strength of its `await`? `VM_n.await + gap ≥ VM_j.await` (gap = the
/// served VM's `thinkt` under hvio's reading, 0 as printed) and
/// `VM_j.await < max_seektime`, both awaits known. (Pending requests are
/// checked by the caller.)
pub fn await_wins(
    served_await_us: Option<f64>,
    served_gap_us: f64,
    peer_await_us: Option<f64>,
    max_seek_us: f64,
) -> bool {
    match (served_await_us, peer_await_us) {
        (Some(n), Some(j)) => n + served_gap_us >= j && j < max_seek_us,
        _ => false,
    }
}

/// Algorithm 1 (Dynamic Isolation) for the served VM `VM_n`.
///
/// A VM that has never completed a request has no `await` and is never
/// chosen by the `await` branch (the paper's example starts from known
/// values); a VM with no arrival interval yet has `thinkt` 0.
pub fn decide(
    served_pending: usize,
    slice_rest_us: f64,
    served_thinkt_us: Option<f64>,
    served_await_us: Option<f64>,
    served_gap_us: f64,
    peers: impl IntoIterator<Item = Peer>,
    max_seek_us: f64,
) -> Decision {
    // Line 8.
    if served_pending != 0 || slice_rest_us <= 0.0 {
        return Decision::NotApplicable;
    }
    // Lines 9–10.
    if served_thinkt_us.unwrap_or(0.0) >= slice_rest_us {
        return Decision::EndThinkt;
    }
    // Lines 11–15.
    if peers
        .into_iter()
        .any(|p| p.pending > 0 && await_wins(served_await_us, served_gap_us, p.await_us, max_seek_us))
    {
        return Decision::EndAwait;
    }
    Decision::Keep
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: Weights = Weights::PAPER;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn eq2_by_hand() {
        let mut avg = TimeWeightedAvg::default();
        assert_eq!(avg.mean(&W), None);
        avg.update(100.0, &W);
        // total = 32·100 = 3200, S = 32, mean = (3200 + 1024)/32 = 132.
        assert!(close(avg.mean(&W).unwrap(), 132.0));
        avg.update(300.0, &W);
        // total = 7/8·3200 + 32·300 = 12400, S = 7/8·32 + 32 = 60.
        assert!(close(avg.mean(&W).unwrap(), (12400.0 + 1024.0) / 60.0));
    }

    /// The chosen reading: the history weighs 7/8, the newest interval 1/8
    /// (plus the 4 µs steady-state prior c·(1−a)/b).
    #[test]
    fn history_weighs_seven_eighths() {
        let mut avg = TimeWeightedAvg::default();
        for _ in 0..400 {
            avg.update(100.0, &W);
        }
        assert!((avg.mean(&W).unwrap() - 104.0).abs() < 1e-6);
        avg.update(1000.0, &W);
        // 7/8·100 + 1/8·1000 + 4 = 216.5
        assert!((avg.mean(&W).unwrap() - 216.5).abs() < 1e-6);
        // The prose reading (newest weighs 7/8) is a = 1/8.
        let prose = Weights { a: 0.125, ..W };
        let mut p = TimeWeightedAvg::default();
        for _ in 0..400 {
            p.update(100.0, &prose);
        }
        p.update(1000.0, &prose);
        // 1/8·100 + 7/8·1000 + 1024·(7/8)/32 = 887.5 + 28
        assert!((p.mean(&prose).unwrap() - 915.5).abs() < 1e-6);
    }

    fn peer(pending: usize, await_us: f64) -> Peer {
        Peer {
            pending,
            await_us: Some(await_us),
        }
    }

    #[test]
    fn line8_only_when_empty_with_slice_left() {
        assert_eq!(
            decide(1, 5000.0, Some(1e9), Some(10.0), 0.0, [peer(1, 1.0)], 15000.0),
            Decision::NotApplicable
        );
        assert_eq!(
            decide(0, 0.0, Some(1e9), Some(10.0), 0.0, [peer(1, 1.0)], 15000.0),
            Decision::NotApplicable
        );
    }

    #[test]
    fn lines9_10_thinkt_at_least_slice_rest_ends() {
        assert_eq!(
            decide(0, 5000.0, Some(5000.0), Some(10.0), 0.0, [], 15000.0),
            Decision::EndThinkt
        );
        assert_eq!(
            decide(0, 5000.0, Some(4999.0), Some(10.0), 0.0, [], 15000.0),
            Decision::Keep
        );
        // Unknown thinkt counts as 0: never ends by this branch.
        assert_eq!(decide(0, 1.0, None, Some(10.0), 0.0, [], 15000.0), Decision::Keep);
    }

    #[test]
    fn lines11_15_await_branch() {
        let d = |peers: Vec<Peer>| decide(0, 50_000.0, Some(100.0), Some(800.0), 0.0, peers, 15_000.0);
        // Equal await ends the slice (≥ in line 12).
        assert_eq!(d(vec![peer(3, 800.0)]), Decision::EndAwait);
        // A slower peer does not.
        assert_eq!(d(vec![peer(3, 801.0)]), Decision::Keep);
        // A faster peer with nothing pending does not.
        assert_eq!(d(vec![peer(0, 10.0)]), Decision::Keep);
        // Any one qualifying peer is enough.
        assert_eq!(d(vec![peer(3, 900.0), peer(1, 20.0)]), Decision::EndAwait);
        // A peer without history does not qualify.
        assert_eq!(
            d(vec![Peer {
                pending: 5,
                await_us: None
            }]),
            Decision::Keep
        );
        // await must be below max_seektime even when the served VM is slower still.
        let slow = |pj: f64| decide(0, 50_000.0, Some(100.0), Some(40_000.0), 0.0, [peer(1, pj)], 15_000.0);
        assert_eq!(slow(15_000.0), Decision::Keep);
        assert_eq!(slow(14_999.0), Decision::EndAwait);
    }
}
