//! Steady state as SNIA's Solid State Storage Performance Test Specification
//! (PTS, version 2.0.2, 2020, §2.1 "Steady State" and "Measurement Window",
//! and each test's preconditioning step) defines it: after a
//! workload-independent preconditioning (the drive written in order twice
//! over), the test's own workload runs in rounds, and the drive is at
//! steady state once, over a measurement window of the last five rounds,
//! the tracked variable's range is at most 20 % of its average (data
//! excursion) and the best linear fit through it changes by at most 10 % of
//! the average across the window (slope excursion). A test stops at round
//! 25 if it has not settled by then, and says so.
//!
//! This module holds the criterion and its keys
//! (`[disk] precondition.workload`); the simulator runs the rounds, since a
//! round is the whole simulated system running the workload.

use crate::DeviceError;
use serde::Deserialize;

/// `precondition.workload = { ... }`: the rounds and the steady-state
/// criterion, each key defaulting to the PTS's value.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadRounds {
    /// Rounds in the measurement window (PTS: 5).
    pub window: Option<u32>,
    /// Most rounds before giving up on steady state (PTS: 25); the run is
    /// then measured on the drive as the last round left it, and reported
    /// as not settled.
    pub max_rounds: Option<u32>,
    /// Largest range of a tracked variable over the window, as a fraction
    /// of its average there (PTS: 0.20).
    pub excursion: Option<f64>,
    /// Largest change of the best linear fit across the window, as a
    /// fraction of the average (PTS: 0.10).
    pub slope: Option<f64>,
    /// A reshaped image (`[[vm]] reshape`) between rounds: `"kept"` (the
    /// default: the image goes on from round to round, its tables, segments
    /// and cleaning included, as one image in use) or `"fresh"` (each round,
    /// and the measured run, on a freshly created image at the same place
    /// of the drive, as when the image file is created anew before each
    /// run; the drive keeps what earlier rounds wrote).
    pub reshaped_image: Option<ReshapedImage>,
}

/// What becomes of a reshaped image between rounds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReshapedImage {
    /// The image goes on from round to round.
    #[default]
    Kept,
    /// Each round starts on a freshly created image.
    Fresh,
}

/// Most rounds a config may ask for.
pub const MAX_ROUNDS: u32 = 1000;

/// The criterion with its defaults filled in and checked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SteadyState {
    /// Rounds in the measurement window.
    pub window: usize,
    /// Most rounds.
    pub max_rounds: usize,
    /// Largest range over the window, a fraction of the average.
    pub excursion: f64,
    /// Largest change of the linear fit across the window, a fraction of the average.
    pub slope: f64,
    /// A reshaped image between rounds.
    pub reshaped_image: ReshapedImage,
}

impl WorkloadRounds {
    /// The criterion, or an error naming the key out of range.
    pub fn checked(&self) -> Result<SteadyState, DeviceError> {
        let window = self.window.unwrap_or(5);
        if !(2..=MAX_ROUNDS).contains(&window) {
            return Err(DeviceError::param(
                "precondition.workload.window",
                window,
                format!("must be between 2 and {MAX_ROUNDS} rounds (a slope needs two)"),
            ));
        }
        let max_rounds = self.max_rounds.unwrap_or(25);
        if !(window..=MAX_ROUNDS).contains(&max_rounds) {
            return Err(DeviceError::param(
                "precondition.workload.max_rounds",
                max_rounds,
                format!("must be at least the window ({window}) and at most {MAX_ROUNDS}"),
            ));
        }
        let fraction = |key: &str, v: f64| {
            if v.is_finite() && v > 0.0 && v <= 1.0 {
                Ok(v)
            } else {
                Err(DeviceError::param(key, v, "must be a fraction above 0 and at most 1"))
            }
        };
        Ok(SteadyState {
            window: window as usize,
            max_rounds: max_rounds as usize,
            excursion: fraction("precondition.workload.excursion", self.excursion.unwrap_or(0.20))?,
            slope: fraction("precondition.workload.slope", self.slope.unwrap_or(0.10))?,
            reshaped_image: self.reshaped_image.unwrap_or_default(),
        })
    }
}

impl SteadyState {
    /// Whether the last `window` values of `ys` (one per round) are at
    /// steady state: their range within `excursion` × their average, and
    /// the least-squares line through them rising or falling across the
    /// window by at most `slope` × the average. False with fewer rounds
    /// than the window, or an average of zero.
    pub fn holds(&self, ys: &[f64]) -> bool {
        if ys.len() < self.window {
            return false;
        }
        let w = &ys[ys.len() - self.window..];
        let n = w.len() as f64;
        let mean = w.iter().sum::<f64>() / n;
        if !(mean.is_finite() && mean > 0.0) {
            return false;
        }
        let (lo, hi) = w.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &y| {
            (lo.min(y), hi.max(y))
        });
        // Least squares over x = 0..n-1: the fit's values at the window's
        // ends differ by slope × (n - 1).
        let xm = (n - 1.0) / 2.0;
        let (sxy, sxx) = w.iter().enumerate().fold((0.0, 0.0), |(sxy, sxx), (i, &y)| {
            let dx = i as f64 - xm;
            (sxy + dx * (y - mean), sxx + dx * dx)
        });
        let fit_change = (sxy / sxx * (n - 1.0)).abs();
        hi - lo <= self.excursion * mean && fit_change <= self.slope * mean
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pts() -> SteadyState {
        WorkloadRounds::default().checked().unwrap()
    }

    #[test]
    fn the_defaults_are_the_pts() {
        assert_eq!(
            pts(),
            SteadyState {
                window: 5,
                max_rounds: 25,
                excursion: 0.20,
                slope: 0.10,
                reshaped_image: ReshapedImage::Kept,
            }
        );
    }

    #[test]
    fn flat_rounds_are_steady_and_a_trend_or_a_spike_is_not() {
        let s = pts();
        assert!(s.holds(&[500.0, 100.0, 101.0, 99.0, 100.0, 100.5]));
        assert!(!s.holds(&[100.0, 100.0, 100.0, 100.0]), "fewer rounds than the window");
        // Range 8 % but a steady fall: the fit drops 8 % of the mean per
        // window... within 10 %; a fall of 3 % a round (12 % across) is not.
        assert!(s.holds(&[104.0, 102.0, 100.0, 98.0, 96.0]));
        assert!(!s.holds(&[106.0, 103.0, 100.0, 97.0, 94.0]));
        // Flat fit, but one round 25 % off the others: range too wide.
        assert!(!s.holds(&[100.0, 100.0, 125.0, 100.0, 100.0]));
        assert!(!s.holds(&[0.0; 5]));
    }

    #[test]
    fn keys_out_of_range_name_themselves() {
        let bad = |w: WorkloadRounds, key: &str| {
            let e = w.checked().unwrap_err().to_string();
            assert!(e.contains(key), "{e}");
        };
        bad(
            WorkloadRounds {
                window: Some(1),
                ..Default::default()
            },
            "precondition.workload.window",
        );
        bad(
            WorkloadRounds {
                max_rounds: Some(3),
                ..Default::default()
            },
            "precondition.workload.max_rounds",
        );
        bad(
            WorkloadRounds {
                excursion: Some(0.0),
                ..Default::default()
            },
            "precondition.workload.excursion",
        );
        bad(
            WorkloadRounds {
                slope: Some(f64::NAN),
                ..Default::default()
            },
            "precondition.workload.slope",
        );
    }
}
