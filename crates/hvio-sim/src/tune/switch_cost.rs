//! The cost of switching from one scheduler pair to another, measured as
//! paper 002 does (§IV.B): a benchmark (the paper's: `dd` writing 600 MB of
//! zeros in each of four VMs at once) run under pair `a` alone (`T_a`),
//! under `b` alone (`T_b`), and starting under `a` with a switch to `b`
//! partway (`T_ab`):
//!
//! `Cost(a → b) = T_ab − ½ (T_a + T_b)`
//!
//! for every ordered pair, including `a → a`: a switch to the pair already
//! running still goes through the switch (the paper found it is not free).
//! The switch happens halfway through `T_a` (the paper does not say when;
//! halfway weighs both pairs alike, which the ½ of the formula assumes).
//! The `S` single runs go first, then the `S²` switched ones; each batch
//! runs in parallel on rayon's pool.

use crate::error::{Result, SimError};
use hvio_core::time::{ns_to_s, Nanos};
use rayon::prelude::*;
use serde::Serialize;

/// One run of the benchmark: start under pair `from`; with `switch`, switch
/// to pair `switch.0` at time `switch.1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct CostRun {
    /// The pair it starts under.
    pub from: usize,
    /// The pair switched to, and when.
    pub switch: Option<(usize, Nanos)>,
}

/// Every ordered pair's switch cost.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SwitchCosts {
    /// `alone_s[a]`: the benchmark under pair `a` throughout.
    pub alone_s: Vec<f64>,
    /// `switched_s[a][b]`: starting under `a`, switched to `b` halfway.
    pub switched_s: Vec<Vec<f64>>,
    /// `cost_s[a][b]`: `switched_s[a][b] − ½ (alone_s[a] + alone_s[b])`.
    pub cost_s: Vec<Vec<f64>>,
    /// Runs made: `S + S²`.
    pub runs: usize,
}

impl SwitchCosts {
    /// The largest `|cost(a → b) − cost(b → a)|` and its pair.
    pub fn asymmetry(&self) -> (f64, usize, usize) {
        let n = self.cost_s.len();
        let mut worst = (0.0, 0, 0);
        for a in 0..n {
            for b in a + 1..n {
                let d = (self.cost_s[a][b] - self.cost_s[b][a]).abs();
                if d > worst.0 {
                    worst = (d, a, b);
                }
            }
        }
        worst
    }

    /// The cost of switching each pair to itself.
    pub fn to_self(&self) -> Vec<f64> {
        (0..self.cost_s.len()).map(|a| self.cost_s[a][a]).collect()
    }
}

/// Measure every ordered pair of `pairs` pairs; `run` runs the benchmark
/// and returns its time in nanoseconds.
pub fn measure<F>(pairs: usize, run: &F) -> Result<SwitchCosts>
where
    F: Fn(CostRun) -> Result<Nanos> + Sync,
{
    if pairs == 0 {
        return Err(SimError::invalid(
            "switch cost",
            "pairs",
            0,
            "needs at least one scheduler pair",
        ));
    }
    let alone: Vec<Nanos> = (0..pairs)
        .into_par_iter()
        .map(|from| run(CostRun { from, switch: None }))
        .collect::<Result<_>>()?;
    let switched: Vec<Nanos> = (0..pairs * pairs)
        .into_par_iter()
        .map(|k| {
            let (from, to) = (k / pairs, k % pairs);
            run(CostRun {
                from,
                switch: Some((to, alone[from] / 2)),
            })
        })
        .collect::<Result<_>>()?;
    let alone_s: Vec<f64> = alone.iter().map(|&t| ns_to_s(t)).collect();
    let switched_s: Vec<Vec<f64>> = switched
        .chunks(pairs)
        .map(|row| row.iter().map(|&t| ns_to_s(t)).collect())
        .collect();
    let cost_s = (0..pairs)
        .map(|a| {
            (0..pairs)
                .map(|b| switched_s[a][b] - 0.5 * (alone_s[a] + alone_s[b]))
                .collect()
        })
        .collect();
    Ok(SwitchCosts {
        alone_s,
        switched_s,
        cost_s,
        runs: pairs + pairs * pairs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use hvio_core::time::s;
    use std::sync::Mutex;

    /// A made-up benchmark: pair `p` writes at `rate[p]` MB/s; a switch
    /// stalls for `stall[from][to]` seconds. 600 MB in all.
    fn model(rate: &[f64], stall: &[Vec<f64>]) -> impl Fn(CostRun) -> Result<Nanos> + Sync {
        let (rate, stall) = (rate.to_vec(), stall.to_vec());
        move |r: CostRun| {
            let total_s = match r.switch {
                None => 600.0 / rate[r.from],
                Some((to, at)) => {
                    let done = ns_to_s(at) * rate[r.from];
                    ns_to_s(at) + stall[r.from][to] + (600.0 - done) / rate[to]
                }
            };
            Ok((total_s * 1e9).round() as Nanos)
        }
    }

    #[test]
    fn the_cost_is_the_stall_when_the_switch_is_halfway() {
        // Halfway through T_a under a, the rest under b: for equal rates the
        // formula leaves exactly the stall, whatever its direction.
        let stall = vec![vec![2.0, 4.0], vec![9.0, 1.0]];
        let costs = measure(2, &model(&[60.0, 60.0], &stall)).unwrap();
        for (a, row) in stall.iter().enumerate() {
            for (b, want) in row.iter().enumerate() {
                assert!(
                    (costs.cost_s[a][b] - want).abs() < 1e-6,
                    "{a}->{b}: {}",
                    costs.cost_s[a][b]
                );
            }
        }
        assert_eq!(costs.runs, 6);
        let (gap, a, b) = costs.asymmetry();
        assert!((gap - 5.0).abs() < 1e-6 && (a, b) == (0, 1));
        assert!((costs.to_self()[0] - 2.0).abs() < 1e-6);
    }

    #[test]
    fn every_ordered_pair_is_run_once_switching_halfway() {
        let seen = Mutex::new(Vec::new());
        let run = |r: CostRun| {
            seen.lock().unwrap().push(r);
            Ok(s(10 + r.from as u64))
        };
        let costs = measure(3, &run).unwrap();
        let mut seen = seen.into_inner().unwrap();
        seen.sort_by_key(|r| (r.switch.is_some(), r.from, r.switch));
        assert_eq!(seen.len(), 3 + 9);
        assert_eq!(seen[0], CostRun { from: 0, switch: None });
        // From pair 2 (10 + 2 = 12 s alone) to pair 1, at 6 s.
        assert!(seen.contains(&CostRun {
            from: 2,
            switch: Some((1, s(6)))
        }));
        assert_eq!(costs.switched_s[2][1], 12.0);
        assert_eq!(costs.cost_s[2][1], 12.0 - 0.5 * (12.0 + 11.0));
    }

    #[test]
    fn a_failed_run_fails_the_measurement() {
        let run = |r: CostRun| {
            if r.switch == Some((1, s(5))) {
                Err(SimError::Other("boom".into()))
            } else {
                Ok(s(10))
            }
        };
        assert_eq!(measure(2, &run).unwrap_err().to_string(), "boom");
        assert!(measure(0, &run).is_err());
    }
}
