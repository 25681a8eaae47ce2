//! Seek curves: time to move the arm a number of cylinders.

use std::sync::Arc;

/// A seek curve, in milliseconds as a function of the distance in cylinders.
#[derive(Debug, Clone, PartialEq)]
pub enum SeekCurve {
    /// Ruemmler–Wilkes two-regime form: `a1 + b1·√d` below `split`
    /// cylinders, `a2 + b2·d` from there on.
    TwoRegime {
        /// Distance (cylinders) where the second regime starts.
        split: f64,
        /// Constant of the first regime, ms.
        a1: f64,
        /// Factor of √d, ms.
        b1: f64,
        /// Constant of the second regime, ms.
        a2: f64,
        /// Factor of d, ms.
        b2: f64,
    },
    /// DiskSim's `hpl`/`hplplus10`: the two-regime form with an optional
    /// single-cylinder time and optional measured times for distances 1..=10.
    Hpl {
        /// Distance (cylinders) where the second regime starts.
        split: f64,
        /// Constant of the first regime, ms.
        a1: f64,
        /// Factor of √d, ms.
        b1: f64,
        /// Constant of the second regime, ms.
        a2: f64,
        /// Factor of d, ms.
        b2: f64,
        /// Single-cylinder seek time, ms, if given.
        single: Option<f64>,
        /// Measured times for distances 1 to 10, ms, if given.
        first_ten: Option<[f64; 10]>,
    },
    /// A measured table of (distance, ms), increasing distances, interpolated
    /// linearly between points and extrapolated from the last two.
    Table {
        /// Distances, cylinders.
        dist: Vec<f64>,
        /// Times, ms.
        ms: Vec<f64>,
    },
}

impl SeekCurve {
    /// Seek time in ms for `d` cylinders (0 for 0).
    #[inline]
    pub fn ms(&self, d: u32) -> f64 {
        if d == 0 {
            return 0.0;
        }
        let x = d as f64;
        match self {
            SeekCurve::TwoRegime { split, a1, b1, a2, b2 } => {
                if x < *split {
                    a1 + b1 * x.sqrt()
                } else {
                    a2 + b2 * x
                }
            }
            SeekCurve::Hpl {
                split,
                a1,
                b1,
                a2,
                b2,
                single,
                first_ten,
            } => {
                if let Some(t) = first_ten {
                    if d <= 10 {
                        return t[d as usize - 1];
                    }
                }
                if d == 1 {
                    if let Some(s) = single {
                        return *s;
                    }
                }
                if x < *split {
                    a1 + b1 * x.sqrt()
                } else {
                    a2 + b2 * x
                }
            }
            SeekCurve::Table { dist, ms } => {
                let n = dist.len();
                let i = dist.partition_point(|&p| p < x);
                if i < n && dist[i] == x {
                    return ms[i];
                }
                if n == 1 {
                    return ms[0];
                }
                // Interpolate between i-1 and i (or extrapolate at the ends).
                let (j0, j1) = if i == 0 {
                    (0, 1)
                } else if i >= n {
                    (n - 2, n - 1)
                } else {
                    (i - 1, i)
                };
                if i == 0 {
                    // Below the first point: scale linearly from (0, 0).
                    return ms[0] * x / dist[0];
                }
                let f = (x - dist[j0]) / (dist[j1] - dist[j0]);
                (ms[j0] + f * (ms[j1] - ms[j0])).max(0.0)
            }
        }
    }

    /// Checks that every seek over `1..cylinders` takes between 0 and
    /// `max_ms` ms (finite: a NaN or a negative time must never reach the
    /// engine). The curve is monotone between the distances tried (the
    /// ends, 1..=11, the split, the table's points), so they bound it.
    pub fn check_range(&self, cylinders: u32, max_ms: f64) -> Result<(), String> {
        let max_d = cylinders.saturating_sub(1);
        if max_d == 0 {
            return Ok(());
        }
        let mut at: Vec<f64> = (1..=11).map(f64::from).collect();
        at.push(max_d as f64);
        match self {
            SeekCurve::TwoRegime { split, .. } | SeekCurve::Hpl { split, .. } => at.push(*split),
            SeekCurve::Table { dist, .. } => at.extend(dist),
        }
        for x in at {
            for d in [x.floor() - 1.0, x.floor(), x.ceil()] {
                let d = d.clamp(1.0, max_d as f64) as u32;
                let t = self.ms(d);
                if !(t.is_finite() && (0.0..=max_ms).contains(&t)) {
                    return Err(format!(
                        "the seek curve gives {t} ms for {d} cylinders (must be between 0 and {max_ms} ms)"
                    ));
                }
            }
        }
        Ok(())
    }

    /// Checks the parameters; returns a description of the first problem.
    pub fn check(&self) -> Result<(), String> {
        match self {
            SeekCurve::TwoRegime { split, a1, b1, a2, b2 }
            | SeekCurve::Hpl {
                split, a1, b1, a2, b2, ..
            } => {
                for (k, v) in [("split", split), ("a1", a1), ("b1", b1), ("a2", a2), ("b2", b2)] {
                    if !v.is_finite() {
                        return Err(format!("seek parameter {k} = {v} is not finite"));
                    }
                }
                Ok(())
            }
            SeekCurve::Table { dist, ms } => {
                if dist.is_empty() || dist.len() != ms.len() {
                    return Err("seek table is empty".into());
                }
                for w in dist.windows(2) {
                    if w[1] <= w[0] {
                        return Err(format!("seek table distances not increasing at {} → {}", w[0], w[1]));
                    }
                }
                if let Some(d) = dist.iter().find(|d| !d.is_finite()) {
                    return Err(format!("seek table distance {d} is not a finite number"));
                }
                if dist[0] <= 0.0 {
                    return Err(format!("seek table distance {} must be positive", dist[0]));
                }
                if let Some(t) = ms.iter().find(|t| !(t.is_finite() && **t >= 0.0)) {
                    return Err(format!("seek table time {t} ms is not a non-negative number"));
                }
                Ok(())
            }
        }
    }
}

/// Measured tables up to this many cylinders are looked up per distance
/// ([`SeekTimes`]; 2 MiB of times at most).
const MAX_LOOKUP_CYLINDERS: u32 = 1 << 18;

/// Other curves up to this many cylinders are looked up per distance too
/// (128 KiB of times at most; the HP C2247's formula over its 2,051
/// cylinders: 20 instructions a request fewer in its validation replay);
/// larger disks, the default disk's 228,700 cylinders among them, compute
/// each seek rather than look it up at random in a table of megabytes.
const MAX_LOOKUP_FORMULA_CYLINDERS: u32 = 1 << 14;

/// A disk's seek curve with what a seek costs to look up: for a measured
/// table (a search and an interpolation per seek, a tenth of a validation
/// replay's time) and for a formula on a small disk, the time of every
/// distance the disk has, computed once by [`SeekCurve::ms`] (the same
/// values, bit for bit); a formula on a larger disk is computed at each
/// seek (a square root at most).
#[derive(Clone, PartialEq)]
pub struct SeekTimes {
    curve: SeekCurve,
    /// `curve.ms(d) * 1e6` at index `d` (empty: computed at each seek).
    ns: Arc<[f64]>,
}

impl SeekTimes {
    /// `curve` on a disk of `cylinders` cylinders.
    pub fn new(curve: SeekCurve, cylinders: u32) -> SeekTimes {
        let ns = match curve {
            SeekCurve::Table { .. } if cylinders <= MAX_LOOKUP_CYLINDERS => {
                (0..cylinders).map(|d| curve.ms(d) * 1e6).collect()
            }
            _ if cylinders <= MAX_LOOKUP_FORMULA_CYLINDERS => (0..cylinders).map(|d| curve.ms(d) * 1e6).collect(),
            _ => Arc::from([]),
        };
        SeekTimes { curve, ns }
    }

    /// The curve.
    pub fn curve(&self) -> &SeekCurve {
        &self.curve
    }

    /// Seek time in ns for `d` cylinders: `curve().ms(d) * 1e6`.
    #[inline]
    pub fn ns(&self, d: u32) -> f64 {
        match self.ns.get(d as usize) {
            Some(&t) => t,
            None => self.curve.ms(d) * 1e6,
        }
    }
}

impl std::fmt::Debug for SeekTimes {
    /// The curve's (the times follow from it).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.curve.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_regime() {
        let c = SeekCurve::TwoRegime {
            split: 100.0,
            a1: 1.0,
            b1: 0.5,
            a2: 4.0,
            b2: 0.01,
        };
        assert_eq!(c.ms(0), 0.0);
        assert!((c.ms(4) - 2.0).abs() < 1e-12);
        assert!((c.ms(200) - 6.0).abs() < 1e-12);
    }

    #[test]
    fn hpl_first_ten() {
        let mut ten = [0.0; 10];
        for (i, t) in ten.iter_mut().enumerate() {
            *t = i as f64 + 1.0;
        }
        let c = SeekCurve::Hpl {
            split: 300.0,
            a1: 3.81,
            b1: 0.33,
            a2: 7.75,
            b2: 0.0059,
            single: Some(0.2),
            first_ten: Some(ten),
        };
        assert_eq!(c.ms(1), 1.0);
        assert_eq!(c.ms(10), 10.0);
        assert!((c.ms(100) - (3.81 + 3.3)).abs() < 1e-12);
        assert!((c.ms(1000) - (7.75 + 5.9)).abs() < 1e-12);
    }

    #[test]
    fn looked_up_times_are_the_computed_ones() {
        let table = SeekCurve::Table {
            dist: vec![1.0, 7.0, 100.0, 1000.0],
            ms: vec![1.1, 2.3, 4.7, 9.9],
        };
        let two = SeekCurve::TwoRegime {
            split: 400.0,
            a1: 0.7,
            b1: 0.04,
            a2: 5.0,
            b2: 4e-5,
        };
        // A formula is looked up on a small disk and computed on a large one.
        for (curve, cylinders) in [(table, 3000), (two.clone(), 3000), (two, 100_000)] {
            let times = SeekTimes::new(curve.clone(), cylinders);
            for d in (0..5000).chain(cylinders - 2..cylinders + 2) {
                assert_eq!(times.ns(d).to_bits(), (curve.ms(d) * 1e6).to_bits(), "{d}");
            }
            assert_eq!(format!("{times:?}"), format!("{curve:?}"));
        }
    }

    #[test]
    fn table_interpolates() {
        let c = SeekCurve::Table {
            dist: vec![1.0, 10.0, 100.0],
            ms: vec![1.0, 2.0, 5.0],
        };
        assert_eq!(c.ms(1), 1.0);
        assert!((c.ms(55) - 3.5).abs() < 1e-12);
        assert!((c.ms(200) - (5.0 + 100.0 / 90.0 * 3.0)).abs() < 1e-12);
        assert!(c.check().is_ok());
        assert!(SeekCurve::Table {
            dist: vec![2.0, 1.0],
            ms: vec![1.0, 1.0]
        }
        .check()
        .is_err());
    }
}
