//! Workload-dependent preconditioning (`[disk] precondition.workload`), as
//! SNIA's Solid State Storage Performance Test Specification runs it: the
//! drive filled in order twice over (the device does that when it is
//! built), then the run's own workload repeated, round after round, on the
//! whole simulated system — guests, host-path stages (a reshaped image
//! keeps its tables, segments and cleaning from round to round), host
//! scheduler and device — until the rounds' throughput and the device's
//! write amplification are both at steady state over the measurement window
//! (`hvio_device::ssd::steady`), or the round cap is reached. Then the run
//! itself is measured on the system as the last round left it, with the
//! config's own seed; each round has a seed of its own, derived from it.
//! With `reshaped_image = "fresh"` a reshaped image is created anew for
//! each round and for the run (the drive still holds what it wrote).
//! The result reports every round (`precondition` in the JSON) and, in the
//! device's counters, the rounds run, the cap and whether it settled.

use super::*;
use hvio_device::ssd::steady::{ReshapedImage, SteadyState};

/// The seed stream of the rounds (a job's stream is its VM and job index, both from 1).
const ROUNDS_STREAM: u64 = u64::MAX;

/// The steady-state criterion of `cfg`'s drive, if it asks for
/// workload-dependent preconditioning. A `[disk]` table that does not
/// deserialise has no plan here: building the device reports its error.
pub(crate) fn plan(cfg: &Config) -> Result<Option<SteadyState>> {
    let Ok(hvio_device::DeviceConfig::Ssd(p)) = toml::Value::Table(cfg.disk.clone()).try_into() else {
        return Ok(None);
    };
    match p.precondition.and_then(|pc| pc.workload) {
        Some(w) => w
            .checked()
            .map(Some)
            .map_err(|e| SimError::Device(format!("[disk]: {e}"))),
        None => Ok(None),
    }
}

/// Run `cfg` on `device` after rounds of its own workload until `steady` holds.
pub(crate) fn run(cfg: &Config, mut device: Box<dyn Device>, steady: SteadyState) -> Result<SimResult> {
    let mut round_cfg = cfg.clone();
    // Rounds write no records: only the measured run is the config's output.
    round_cfg.output.records = None;
    let restart = |device: &mut Box<dyn Device>, stages: &mut Stages| {
        for s in stages.iter_mut().flatten() {
            s.restart();
        }
        if device.restart() {
            Ok(())
        } else {
            Err(SimError::invalid(
                "disk",
                "precondition.workload",
                "{...}",
                "this device model cannot run a workload in rounds",
            ))
        }
    };
    let mut stages: Stages = Vec::new();
    restart(&mut device, &mut stages)?;
    let mut rounds: Vec<PreconditionRound> = Vec::new();
    let mut settled = false;
    while rounds.len() < steady.max_rounds {
        round_cfg.seed = derive_seed(cfg.seed, ROUNDS_STREAM, rounds.len() as u64 + 1);
        let (r, d, s) = Engine::resuming(&round_cfg, device, stages)
            .map_err(|e| cfg.locate(e))?
            .run_keeping()?;
        if r.truncated {
            return Err(SimError::invalid(
                "disk",
                "precondition.workload",
                "{...}",
                format!(
                    "round {} reached max_time_s ({} s) before the workload ended: a round runs it to the end",
                    rounds.len() + 1,
                    cfg.max_time_s
                ),
            ));
        }
        let counter = |k: &str| r.host.device.iter().find(|(n, _)| n == k).map_or(0.0, |c| c.1);
        rounds.push(PreconditionRound {
            mb_per_s: r.total_mb_per_s,
            // A round that wrote nothing leaves the drive as it was: 1, not 0.
            device_write_amplification: if counter("ssd_host_pages_written") > 0.0 {
                counter("ssd_write_amplification")
            } else {
                1.0
            },
            host_write_amplification: r.reshape.as_ref().map(|x| x.stats.write_amplification()),
        });
        device = d;
        stages = match steady.reshaped_image {
            ReshapedImage::Kept => s,
            ReshapedImage::Fresh => Vec::new(),
        };
        restart(&mut device, &mut stages)?;
        let series = |f: fn(&PreconditionRound) -> f64| rounds.iter().map(f).collect::<Vec<_>>();
        if steady.holds(&series(|r| r.mb_per_s)) && steady.holds(&series(|r| r.device_write_amplification)) {
            settled = true;
            break;
        }
    }
    let mut result = Engine::resuming(cfg, device, stages)
        .map_err(|e| cfg.locate(e))?
        .run()?;
    result.host.device.extend([
        ("precondition_rounds".to_string(), rounds.len() as f64),
        ("precondition_max_rounds".to_string(), steady.max_rounds as f64),
        ("precondition_settled".to_string(), if settled { 1.0 } else { 0.0 }),
    ]);
    result.precondition = Some(PreconditionRounds {
        window: steady.window,
        max_rounds: steady.max_rounds,
        excursion: steady.excursion,
        slope: steady.slope,
        reshaped_image: match steady.reshaped_image {
            ReshapedImage::Kept => "kept",
            ReshapedImage::Fresh => "fresh",
        },
        settled,
        rounds,
    });
    Ok(result)
}
