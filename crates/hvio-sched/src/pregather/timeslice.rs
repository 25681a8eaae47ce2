//! Adaptive time slices (paper 000, §4.2, Eq. 8) and the per-VM locality
//! statistics they and the SPLA heuristic read: `AvgD`, `AvgT`, `RI`, `SI`.

use hvio_core::{Nanos, Request, Sector};
use std::collections::VecDeque;

/// Eq. 8's tunables.
#[derive(Debug, Clone, Copy)]
pub struct SliceParams {
    /// `TS⁰`: the initial slice (§5.2: 200 ms).
    pub initial: Nanos,
    /// The SI threshold of Eq. 8 (55 %).
    pub si_threshold: f64,
    /// The factor of Eq. 8's first case (`× 10`).
    pub si_scale: f64,
    /// Never shorten a slice below `TS⁰` because SI > threshold (see the module doc of `pregather`).
    pub si_floor: bool,
}

/// Eq. 8: the slice of a VM from its regional (RI) and sub-regional (SI)
/// locality indicators.
pub fn slice_length(p: &SliceParams, ri: f64, si: f64) -> Nanos {
    let ts0 = p.initial as f64;
    let len = if ri > 1.0 {
        ts0 / 2.0
    } else if si > p.si_threshold {
        let grown = ts0 * (si - p.si_threshold) * p.si_scale;
        if p.si_floor {
            grown.max(ts0)
        } else {
            grown
        }
    } else {
        ts0
    };
    len.round() as Nanos
}

/// What Pregather tracks about one VM's requests (§4.3).
#[derive(Debug, Clone)]
pub struct Locality {
    /// Weight of a new sample in the decaying averages `AvgD`, `AvgT`.
    weight: f64,
    /// `AvgT` counts an arrival that follows a completion of the VM from that completion.
    from_completion: bool,
    last_completion: Option<Nanos>,
    avg_d: Option<f64>,
    avg_t: Option<f64>,
    last_arrival: Option<(Sector, Nanos)>,
    /// Lowest and highest sector seen (the image extent when it is not known).
    extent: Option<(Sector, Sector)>,
    /// Zero-seek flags of the last `si_window` dispatches, and how many are set.
    recent: VecDeque<bool>,
    zeros: usize,
    si_window: usize,
    last_dispatch_end: Option<Sector>,
}

impl Locality {
    /// No history yet: new samples weigh `weight` in `AvgD` and `AvgT`, the
    /// zero-seek share covers `si_window` dispatches, and `AvgT` counts from
    /// completions when `from_completion`.
    pub fn new(weight: f64, si_window: usize, from_completion: bool) -> Self {
        Locality {
            weight,
            from_completion,
            last_completion: None,
            avg_d: None,
            avg_t: None,
            last_arrival: None,
            extent: None,
            recent: VecDeque::with_capacity(si_window),
            zeros: 0,
            si_window: si_window.max(1),
            last_dispatch_end: None,
        }
    }

    fn blend(avg: &mut Option<f64>, x: f64, w: f64) {
        *avg = Some(match *avg {
            None => x,
            Some(a) => a + w * (x - a),
        });
    }

    /// A request arrived (§4.3: update AvgT, AvgD and so RI).
    pub fn arrived(&mut self, rq: &Request, now: Nanos) {
        if rq.sectors == 0 {
            return; // a flush has no position
        }
        if let Some((sector, at)) = self.last_arrival {
            let since = match self.last_completion {
                Some(c) if self.from_completion && c > at => c,
                _ => at,
            };
            Self::blend(&mut self.avg_d, sector.abs_diff(rq.sector) as f64, self.weight);
            Self::blend(&mut self.avg_t, now.saturating_sub(since) as f64, self.weight);
        }
        self.last_arrival = Some((rq.sector, now));
        self.extent = Some(match self.extent {
            None => (rq.sector, rq.end()),
            Some((lo, hi)) => (lo.min(rq.sector), hi.max(rq.end())),
        });
    }

    /// A request of this VM completed.
    pub fn completed(&mut self, now: Nanos) {
        self.last_completion = Some(now);
    }

    /// A request of this VM was dispatched (§4.3: update SI from the seek
    /// distance to the VM's previous dispatch).
    pub fn dispatched(&mut self, rq: &Request) {
        if rq.sectors == 0 {
            return;
        }
        if let Some(end) = self.last_dispatch_end {
            let zero = rq.sector == end;
            if self.recent.len() == self.si_window && self.recent.pop_front() == Some(true) {
                self.zeros -= 1;
            }
            self.recent.push_back(zero);
            self.zeros += zero as usize;
        }
        self.last_dispatch_end = Some(rq.end());
    }

    /// `AvgD(VM_x)` in sectors.
    pub fn avg_distance(&self) -> Option<f64> {
        self.avg_d
    }

    /// `AvgT(VM_x)` in ns.
    pub fn avg_interval(&self) -> Option<Nanos> {
        self.avg_t.map(|t| t.round() as Nanos)
    }

    /// Sectors between the lowest and highest sector seen.
    pub fn extent(&self) -> Sector {
        self.extent.map_or(0, |(lo, hi)| hi - lo)
    }

    /// `RI_x = AvgD(VM_x) / Sizeof(VM_x)` (§4.2); 0 before two arrivals.
    pub fn ri(&self, image: Sector) -> f64 {
        self.avg_d.map_or(0.0, |d| d / image.max(1) as f64)
    }

    /// `SI_x`: the fraction of zero seek distances among the VM's last dispatches.
    pub fn si(&self) -> f64 {
        if self.recent.is_empty() {
            0.0
        } else {
            self.zeros as f64 / self.recent.len() as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hvio_core::{ms, Op};

    const P: SliceParams = SliceParams {
        initial: 200_000_000,
        si_threshold: 0.55,
        si_scale: 10.0,
        si_floor: true,
    };

    #[test]
    fn eq8_cases() {
        // RI > 1: TS⁰/2.
        assert_eq!(slice_length(&P, 1.5, 0.9), ms(100));
        // RI ≤ 1, SI ≤ 55 %: TS⁰.
        assert_eq!(slice_length(&P, 0.3, 0.55), ms(200));
        assert_eq!(slice_length(&P, 0.0, 0.0), ms(200));
        // RI ≤ 1, SI > 55 %: TS⁰ (SI − 55 %) × 10.
        assert_eq!(slice_length(&P, 0.3, 0.75), ms(400));
        assert_eq!(slice_length(&P, 1.0, 1.0), ms(900));
        // Between 55 % and 65 % the literal formula shrinks the slice; the floor keeps TS⁰.
        assert_eq!(slice_length(&P, 0.3, 0.60), ms(200));
        let literal = SliceParams { si_floor: false, ..P };
        assert_eq!(slice_length(&literal, 0.3, 0.60), ms(100));
    }

    #[test]
    fn ri_and_si_follow_the_requests() {
        let mut l = Locality::new(0.5, 4, true);
        let r = |s: u64| Request::new(0, 0, Op::Read, s, 8, 0);
        l.arrived(&r(1000), 0);
        assert_eq!(l.avg_distance(), None);
        l.arrived(&r(3000), ms(2));
        l.arrived(&r(2000), ms(6));
        // AvgD: 2000, then 2000 + 0.5 (1000 − 2000) = 1500; AvgT: 2 ms then 3 ms.
        assert_eq!(l.avg_distance(), Some(1500.0));
        assert_eq!(l.avg_interval(), Some(ms(3)));
        assert_eq!(l.extent(), 2008);
        // An arrival 1 ms after a completion at 9 ms counts 1 ms, not 4 ms:
        // AvgT = 3 ms + 0.5 (1 ms − 3 ms) = 2 ms.
        l.completed(ms(9));
        l.arrived(&r(2008), ms(10));
        assert_eq!(l.avg_interval(), Some(ms(2)));
        assert_eq!(l.ri(3000), (1500.0 + 0.5 * (8.0 - 1500.0)) / 3000.0);
        // Dispatches: 0 → 8 (zero), 8 → 100 (not), 108 → 108 (zero), 116 (zero).
        for s in [0, 8, 100, 108, 116] {
            l.dispatched(&r(s));
        }
        assert_eq!(l.si(), 0.75);
        // The window keeps the last 4: drop the first zero, add a seek.
        l.dispatched(&r(5000));
        assert_eq!(l.si(), 0.5);
    }
}
