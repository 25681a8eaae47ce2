//! The vNavigator prediction model of Pregather (paper 000, §3): one per VM.
//!
//! The disk is cut into zones of `B` sectors (§3, `n = length(disk)/B`), time
//! into prediction windows of fixed length. Each zone a VM touches keeps its
//! temporal access-density `D(Z_j, T)` (Eq. 1–2), updated incrementally by
//! Lemma 1 (Eq. 3): `D(Z_j, T) = λ^-(T−T_r)·D(Z_j, T_r) + Δn`. The threshold
//! `δ(VM, T)` is the mean density of the zones with `D ≥ 1` (Eq. 4). A zone
//! with `D ≥ δ` starts a sub-region unit: the zone alone when its right
//! neighbour is dense too, else the zone and its sparser right neighbour
//! (Eq. 5). A unit's future access interval `ST(U_i)` is the running mean
//! access interval `ZT` of its dense zone (Eq. 6–7).
//!
//! Memory is proportional to the zones touched recently: zones live in a
//! sorted array keyed by zone index, and a zone whose density has decayed below
//! `forget_density` is dropped (its history no longer affects δ, and its mean
//! interval would describe a past access pattern).

use hvio_core::{Nanos, Sector};

/// The vNavigator's tunables (Table 2 of the paper).
#[derive(Debug, Clone, Copy)]
pub struct NavParams {
    /// `B`: zone size in sectors (§5.1 chooses 2000).
    pub zone_sectors: u64,
    /// `λ > 1`: the decay factor of Eq. 1 (§5.1 fixes it at 2).
    pub lambda: f64,
    /// Prediction-window length (§5.1: 20 ms).
    pub window: Nanos,
    /// Zones whose density falls below this are forgotten (hvio's bound on memory).
    pub forget_density: f64,
    /// Eq. 7's interval of an arrival that follows a completion in its zone
    /// counts from that completion, not from the previous arrival.
    pub interval_from_completion: bool,
}

#[derive(Debug, Clone, Copy)]
struct Zone {
    /// `D(Z_j, window)`.
    density: f64,
    /// The prediction window `density` refers to.
    window: u64,
    /// `m`: requests that accessed the zone since it was (re)created.
    accesses: u64,
    /// `T(R_j^m)`: arrival time of the last of them.
    last_arrival: Nanos,
    /// `ZT(Z_j, T(R_j^m))` in ns (Eq. 7); meaningful once `accesses ≥ 2`.
    mean_interval: f64,
    /// When a request of this zone last completed.
    last_completion: Option<Nanos>,
}

/// A sub-region unit `U_i` (Definition 4) and its future access interval (Definition 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unit {
    /// `SR(U_i)`: first sector of the unit.
    pub start: Sector,
    /// `SR(U_i)`: first sector after the unit.
    pub end: Sector,
    /// `ST(U_i)` (Eq. 6).
    pub interval: Nanos,
}

impl Unit {
    /// Whether `sector` lies in the unit.
    pub fn contains(&self, sector: Sector) -> bool {
        self.start <= sector && sector < self.end
    }
}

/// One VM's vNavigator.
#[derive(Debug, Clone)]
pub struct VNavigator {
    p: NavParams,
    /// The zones remembered, as (zone number, zone) sorted by number: a
    /// search is a bisection of one array, and the decay at each window one
    /// pass over it in zone order.
    zones: Vec<(u64, Zone)>,
    /// The current prediction window `T` (every stored density refers to it).
    window: u64,
    /// Σ D and count over zones with `D ≥ 1`, for Eq. 4, exact within a window.
    sum_dense: f64,
    n_dense: usize,
    /// Most zones remembered at once.
    peak_zones: usize,
}

impl VNavigator {
    /// A navigator with parameters `p`.
    pub fn new(p: NavParams) -> Self {
        VNavigator {
            p,
            zones: Vec::new(),
            window: 0,
            sum_dense: 0.0,
            n_dense: 0,
            peak_zones: 0,
        }
    }

    /// Its parameters.
    pub fn params(&self) -> &NavParams {
        &self.p
    }

    /// Where zone `j` is in `zones` (`Err`: where it would go).
    fn find(&self, j: u64) -> Result<usize, usize> {
        self.zones.binary_search_by_key(&j, |e| e.0)
    }

    fn zone(&self, j: u64) -> Option<&Zone> {
        self.find(j).ok().map(|i| &self.zones[i].1)
    }

    fn window_of(&self, t: Nanos) -> u64 {
        t / self.p.window.max(1)
    }

    /// `λ^-(windows)` (Eq. 1).
    fn decay(&self, windows: u64) -> f64 {
        self.p.lambda.powf(-(windows as f64))
    }

    /// Move to the prediction window of `now`: decay every zone by Lemma 1
    /// with `Δn = 0`, forget the faded ones and recompute Eq. 4's sums.
    fn advance(&mut self, now: Nanos) {
        let w = self.window_of(now);
        if w <= self.window {
            return;
        }
        let f = self.decay(w - self.window);
        let forget = self.p.forget_density;
        self.sum_dense = 0.0;
        self.n_dense = 0;
        let (mut sum, mut n) = (0.0, 0usize);
        self.zones.retain_mut(|(_, z)| {
            z.density *= f;
            z.window = w;
            if z.density >= 1.0 {
                sum += z.density;
                n += 1;
            }
            z.density >= forget
        });
        self.sum_dense = sum;
        self.n_dense = n;
        self.window = w;
    }

    /// A request of this VM arrived at `now` at `sector`: Lemma 1 with
    /// `Δn = 1` on its zone, and Eq. 7 on the zone's mean access interval.
    pub fn record(&mut self, sector: Sector, now: Nanos) {
        self.advance(now);
        let j = sector / self.p.zone_sectors;
        let w = self.window;
        // One search of the zone map per arrival, whether the zone is known or new.
        match self.find(j) {
            Ok(i) => {
                let z = &mut self.zones[i].1;
                let old = z.density;
                z.density += 1.0;
                if old >= 1.0 {
                    self.sum_dense += 1.0;
                } else if z.density >= 1.0 {
                    self.sum_dense += z.density;
                    self.n_dense += 1;
                }
                // Eq. 7 over the m−1 intervals between the zone's m accesses.
                let intervals = z.accesses as f64;
                let since = match z.last_completion {
                    Some(c) if self.p.interval_from_completion && c > z.last_arrival => c,
                    _ => z.last_arrival,
                };
                let gap = now.saturating_sub(since) as f64;
                z.mean_interval = (z.mean_interval * (intervals - 1.0).max(0.0) + gap) / intervals;
                z.accesses += 1;
                z.last_arrival = now;
            }
            Err(i) => {
                let zone = Zone {
                    density: 1.0,
                    window: w,
                    accesses: 1,
                    last_arrival: now,
                    mean_interval: 0.0,
                    last_completion: None,
                };
                self.zones.insert(i, (j, zone));
                self.sum_dense += 1.0;
                self.n_dense += 1;
                self.peak_zones = self.peak_zones.max(self.zones.len());
            }
        }
    }

    /// A request of this VM at `sector` completed at `now`.
    pub fn completed(&mut self, sector: Sector, now: Nanos) {
        if let Ok(i) = self.find(sector / self.p.zone_sectors) {
            self.zones[i].1.last_completion = Some(now);
        }
    }

    /// `D(Z_j, T)` of zone `j` at the window of `now` (0 for an untouched zone).
    pub fn density(&mut self, zone: u64, now: Nanos) -> f64 {
        self.advance(now);
        self.zone(zone).map_or(0.0, |z| z.density)
    }

    /// `δ(VM, T)` (Eq. 4); infinite when no zone has `D ≥ 1` (nothing is dense).
    pub fn threshold(&mut self, now: Nanos) -> f64 {
        self.advance(now);
        if self.n_dense == 0 {
            f64::INFINITY
        } else {
            self.sum_dense / self.n_dense as f64
        }
    }

    /// `ZT(Z_j)` of zone `j`, once it has had two accesses.
    pub fn zone_interval(&self, zone: u64) -> Option<Nanos> {
        self.zone(zone)
            .filter(|z| z.accesses >= 2)
            .map(|z| z.mean_interval.round() as Nanos)
    }

    /// The sub-region unit containing `sector` at the window of `now`, if any
    /// (Eq. 5), with `ST(U_i)` from its dense zone (Eq. 6). A unit whose dense
    /// zone has only one access has no interval yet and is not returned.
    pub fn unit_at(&mut self, sector: Sector, now: Nanos) -> Option<Unit> {
        let delta = self.threshold(now);
        let b = self.p.zone_sectors;
        let j = sector / b;
        // Zones j − 1, j and j + 1 from one search of the map (one per call,
        // not one per zone asked about).
        let mut near: [Option<&Zone>; 3] = [None; 3];
        let (lo, hi) = (j.saturating_sub(1), j.saturating_add(1));
        let first = self.zones.partition_point(|e| e.0 < lo);
        for (i, z) in self.zones[first..].iter().take_while(|e| e.0 <= hi) {
            near[(i + 1 - j) as usize] = Some(z);
        }
        let dense = |i: usize| near[i].is_some_and(|z| z.density >= delta);
        // `near[i]` is zone j − 1 + i.
        let d = if dense(1) {
            1
        } else if j > 0 && dense(0) {
            // Z_j is the sparser right neighbour of a dense Z_{j−1}.
            0
        } else {
            return None;
        };
        let width = if dense(d + 1) { 1 } else { 2 };
        let interval = near[d]
            .filter(|z| z.accesses >= 2)
            .map(|z| z.mean_interval.round() as Nanos)?;
        let dense_zone = if d == 1 { j } else { j - 1 };
        Some(Unit {
            start: dense_zone * b,
            end: (dense_zone + width) * b,
            interval,
        })
    }

    /// Zones currently remembered.
    pub fn zones(&self) -> usize {
        self.zones.len()
    }

    /// Bytes this model holds: the zone map's entries plus the struct.
    pub fn memory_bytes(&self) -> usize {
        Self::bytes_for(self.zones.len())
    }

    /// The most bytes this model held at once.
    pub fn peak_memory_bytes(&self) -> usize {
        Self::bytes_for(self.peak_zones)
    }

    fn bytes_for(zones: usize) -> usize {
        // An estimate: a zone's key and value and one word of overhead (the
        // sorted array's spare capacity, as it grows by doubling).
        std::mem::size_of::<Self>() + zones * (std::mem::size_of::<u64>() + std::mem::size_of::<Zone>() + 8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hvio_core::ms;

    fn nav(b: u64) -> VNavigator {
        VNavigator::new(NavParams {
            zone_sectors: b,
            lambda: 2.0,
            window: ms(20),
            forget_density: 1.0 / 64.0,
            interval_from_completion: true,
        })
    }

    /// Eq. 1–2 evaluated directly: Σ λ^-(T − T_r) over the zone's requests.
    fn direct(history: &[(Sector, Nanos)], zone: u64, b: u64, now: Nanos, lambda: f64, window: Nanos) -> f64 {
        let t = now / window;
        history
            .iter()
            .filter(|(s, _)| s / b == zone)
            .map(|(_, at)| lambda.powf(-((t - at / window) as f64)))
            .sum()
    }

    #[test]
    fn density_decays_by_lambda_per_window() {
        let mut n = nav(100);
        for _ in 0..4 {
            n.record(10, ms(1));
        }
        assert_eq!(n.density(0, ms(19)), 4.0);
        assert_eq!(n.density(0, ms(20)), 2.0);
        assert_eq!(n.density(0, ms(45)), 1.0);
        // A request in window 2: λ^-0 · 1 added (Lemma 1 with Δn = 1).
        n.record(50, ms(45));
        assert_eq!(n.density(0, ms(59)), 2.0);
        assert_eq!(n.density(0, ms(60)), 1.0);
    }

    #[test]
    fn lemma1_matches_the_direct_formula() {
        let b = 64;
        let mut n = nav(b);
        let mut hist = Vec::new();
        // A deterministic pseudo-random history over 6 zones and 15 windows.
        let mut x: u64 = 12345;
        let mut t: Nanos = 0;
        for _ in 0..400 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            t += (x >> 33) % ms(1);
            let sector = ((x >> 20) % 6) * b + (x >> 50) % b;
            n.record(sector, t);
            hist.push((sector, t));
            if hist.len() % 37 == 0 {
                for zone in 0..6 {
                    let want = direct(&hist, zone, b, t, 2.0, ms(20));
                    let got = n.density(zone, t);
                    if want >= 1.0 / 64.0 {
                        assert!(
                            (got - want).abs() < 1e-9 * want.max(1.0),
                            "zone {zone} at {t}: {got} vs {want}"
                        );
                    }
                }
            }
        }
        assert!(t > ms(100), "the history spans several windows");
    }

    #[test]
    fn threshold_and_units_on_a_constructed_history() {
        let mut n = nav(100);
        // Window 0: zone 0 four times (2 ms apart), zone 1 once.
        for i in 0..4 {
            n.record(10 + i, ms(2 * i));
        }
        n.record(150, ms(9));
        // Window 1: zone 5 twice, 4 ms apart.
        n.record(520, ms(21));
        n.record(530, ms(25));
        // At window 1: D0 = 4/2 = 2, D1 = 1/2, D5 = 2. δ = mean of {2, 2} = 2 (Eq. 4).
        assert_eq!(n.density(1, ms(30)), 0.5);
        assert_eq!(n.threshold(ms(30)), 2.0);
        // Zone 0 is dense and zone 1 sparser: unit (Z0, Z1), ST = ZT(Z0) = 2 ms (Eq. 5–7).
        let u = n.unit_at(150, ms(30)).unwrap();
        assert_eq!((u.start, u.end, u.interval), (0, 200, ms(2)));
        assert_eq!(n.unit_at(5, ms(30)), Some(u));
        // Zone 5 dense, zone 6 untouched: unit (Z5, Z6), ST = 4 ms.
        let u5 = n.unit_at(610, ms(30)).unwrap();
        assert_eq!((u5.start, u5.end, u5.interval), (500, 700, ms(4)));
        // Zone 3 is nobody's unit.
        assert_eq!(n.unit_at(350, ms(30)), None);
        // Two adjacent dense zones: each its own one-zone unit. Zone 1 gets two
        // more requests (D1 = 2.5), zone 0 one more (D0 = 3):
        // δ = (3 + 2.5 + 2)/3 = 2.5, so zone 5 (D5 = 2) drops out.
        n.record(120, ms(31));
        n.record(121, ms(32));
        n.record(11, ms(33));
        assert_eq!(n.threshold(ms(34)), 2.5);
        let u0 = n.unit_at(10, ms(34)).unwrap();
        assert_eq!((u0.start, u0.end), (0, 100));
        let u1 = n.unit_at(120, ms(34)).unwrap();
        // ZT(Z1): intervals 22 ms and 1 ms.
        assert_eq!((u1.start, u1.end, u1.interval), (100, 300, 11_500_000));
        assert_eq!(n.unit_at(520, ms(34)), None);
    }

    #[test]
    fn faded_zones_are_forgotten() {
        let mut n = nav(100);
        n.record(0, 0);
        n.record(1000, 0);
        assert_eq!(n.zones(), 2);
        // 2^-6 = 1/64 is kept, 2^-7 is not.
        n.density(0, ms(120));
        assert_eq!(n.zones(), 2);
        n.density(0, ms(140));
        assert_eq!(n.zones(), 0);
        assert_eq!(n.threshold(ms(140)), f64::INFINITY);
        assert!(n.memory_bytes() < 200);
        assert!(n.peak_memory_bytes() > n.memory_bytes(), "the peak remembers two zones");
    }

    #[test]
    fn intervals_count_from_the_last_completion() {
        let mut n = nav(100);
        n.record(0, 0);
        n.record(8, ms(1));
        // A burst: arrival to arrival, 1 ms.
        assert_eq!(n.zone_interval(0), Some(ms(1)));
        // Served at 10 ms; the next request comes 40 µs later: interval 40 µs.
        n.completed(8, ms(10));
        n.record(16, ms(10) + 40_000);
        assert_eq!(n.zone_interval(0), Some((ms(1) + 40_000) / 2));
        // Literal Eq. 7: arrival to arrival, 9.04 ms.
        let mut lit = VNavigator::new(NavParams {
            interval_from_completion: false,
            ..*n.params()
        });
        lit.record(0, 0);
        lit.record(8, ms(1));
        lit.completed(8, ms(10));
        lit.record(16, ms(10) + 40_000);
        assert_eq!(lit.zone_interval(0), Some((ms(1) + ms(9) + 40_000) / 2));
    }

    #[test]
    fn a_single_access_gives_no_interval() {
        let mut n = nav(100);
        n.record(0, 0);
        assert_eq!(n.threshold(1), 1.0);
        assert_eq!(n.unit_at(0, 1), None, "ZT needs two accesses");
        n.record(1, ms(3));
        assert_eq!(n.zone_interval(0), Some(ms(3)));
        n.record(2, ms(4));
        assert_eq!(n.zone_interval(0), Some(ms(2)), "mean of 3 ms and 1 ms (Eq. 7)");
    }
}
