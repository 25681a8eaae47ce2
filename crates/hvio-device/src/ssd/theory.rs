//! What the FTL should do in theory: the write amplification of greedy
//! cleaning under uniform random single-page writes at steady state.
//!
//! Desnoyers ("Analytic modeling of SSD write performance", SYSTOR 2012)
//! derives it for a drive of T physical and U logical pages, α = T/U: in
//! the limit of many pages per block the block greedy cleaning picks holds a
//! valid fraction u with u = e^{α(u − 1)}, that is
//! u = −W₀(−α e^{−α}) / α (W₀ the principal branch of Lambert's W), and each
//! page written by the host costs 1 / (1 − u) page programs. The same closed
//! form is Xiang and Kurkoski's (arXiv:1110.4245, 2.36 at 30 % spare). hvio
//! uses this large-block limit and no finite-block correction: the FTL's
//! greedy cleaning copies less than the limit with small blocks (−10 % at 64
//! pages, −2 % at 256; `examples/ssd_validate.rs`, docs/ssd-model.md).

use super::{GcPolicy, Pattern, Ssd, SsdParams};

/// The drive the model describes: one plane of 4 KiB pages, `gib` logical,
/// GC at its smallest reserve (2 blocks) with its own frontier, so that
/// nearly all spare flash holds invalid pages as the model assumes.
pub fn model_drive(over_provisioning: f64, gib: f64, pages_per_block: u32, policy: GcPolicy) -> SsdParams {
    SsdParams {
        capacity_gib: Some(gib),
        over_provisioning: Some(over_provisioning),
        channels: Some(1),
        chips_per_channel: Some(1),
        dies_per_chip: Some(1),
        planes_per_die: Some(1),
        page_kib: Some(4),
        pages_per_block: Some(pages_per_block),
        gc_threshold: Some(1e-9),
        separate_gc_frontier: Some(true),
        gc_policy: Some(policy),
        ..Default::default()
    }
}

/// Write amplification of uniform random page writes at steady state,
/// through the FTL alone: the drive filled in order, overwritten at random
/// for `warm` drive writes, then measured over `measure` more.
pub fn measured_random_write_amplification(d: &mut Ssd, warm: f64, measure: f64) -> f64 {
    let n = d.logical_pages();
    d.overwrite_untimed(Pattern::Sequential { n, start: 0 }, n);
    d.overwrite_untimed(Pattern::UniformRandom { n, seed: 1 }, (warm * n as f64) as u64);
    d.overwrite_untimed(Pattern::UniformRandom { n, seed: 2 }, (measure * n as f64) as u64)
        .write_amplification()
}

/// W₀(x) for x in [−1/e, 0]: Halley's iteration from a branch-point series.
fn lambert_w0(x: f64) -> f64 {
    let e = std::f64::consts::E;
    debug_assert!((-1.0 / e..=0.0).contains(&x));
    // Near −1/e, W ≈ −1 + p − p²/3 with p = √(2(1 + e·x)); elsewhere start from x.
    let p = (2.0 * (1.0 + e * x)).max(0.0).sqrt();
    let mut w = if p < 0.5 { -1.0 + p - p * p / 3.0 } else { x };
    for _ in 0..64 {
        let ew = w.exp();
        let f = w * ew - x;
        let d = ew * (w + 1.0);
        if d == 0.0 {
            break;
        }
        let step = f / (d - (w + 2.0) * f / (2.0 * w + 2.0));
        w -= step;
        if step.abs() <= 1e-15 * w.abs().max(1e-300) {
            break;
        }
    }
    w
}

/// Steady-state write amplification of greedy cleaning under uniform random
/// page writes, for spare flash `over_provisioning` = T/U − 1 (> 0).
pub fn greedy_write_amplification(over_provisioning: f64) -> f64 {
    let alpha = 1.0 + over_provisioning;
    let u = -lambert_w0(-alpha * (-alpha).exp()) / alpha;
    1.0 / (1.0 - u)
}

/// Spare flash (T/U − 1) at which greedy cleaning under uniform random page
/// writes reaches the steady-state write amplification `wa` (> 1): the
/// inverse of [`greedy_write_amplification`]. The victim's valid fraction is
/// u = 1 − 1/`wa`, and u = e^{α(u − 1)} gives α = ln u / (u − 1).
pub fn greedy_over_provisioning(wa: f64) -> f64 {
    let u = 1.0 - 1.0 / wa;
    u.ln() / (u - 1.0) - 1.0
}

/// A drive's flash timing as far as random single-page writes at steady
/// state see it: every host page costs `wa` programs, `wa − 1` reads of the
/// pages garbage collection copies, and `wa / pages_per_block` erases, all
/// on the page's die, and the dies work in parallel.
#[derive(Debug, Clone, Copy)]
pub struct DieTiming {
    /// Dies that program in parallel.
    pub dies: u32,
    /// Program time of one page, µs.
    pub program_us: f64,
    /// Read time of one page, µs.
    pub read_us: f64,
    /// Erase time of one block, ms.
    pub erase_ms: f64,
    /// Pages per erase block.
    pub pages_per_block: u32,
}

impl DieTiming {
    /// Die time one host page write costs at write amplification `wa`, µs.
    fn us_per_host_page(&self, wa: f64) -> f64 {
        wa * (self.program_us + self.erase_ms * 1000.0 / self.pages_per_block as f64) + (wa - 1.0) * self.read_us
    }

    /// Random single-page writes per second the dies sustain at write
    /// amplification `wa` (≥ 1), when nothing else (link, channels,
    /// commands) is the limit.
    pub fn random_write_iops(&self, wa: f64) -> f64 {
        self.dies as f64 * 1e6 / self.us_per_host_page(wa)
    }

    /// The write amplification at which the dies sustain `iops` random
    /// single-page writes per second: the inverse of
    /// [`DieTiming::random_write_iops`]; below 1 when `iops` is above what
    /// the dies can do even without copying.
    pub fn write_amplification_at(&self, iops: f64) -> f64 {
        let per_page = self.program_us + self.erase_ms * 1000.0 / self.pages_per_block as f64 + self.read_us;
        (self.dies as f64 * 1e6 / iops + self.read_us) / per_page
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lambert_w_solves_its_equation() {
        for x in [-0.367_879, -0.36, -0.3, -0.2, -0.1, -1e-6, 0.0] {
            let w = lambert_w0(x);
            assert!((w * w.exp() - x).abs() < 1e-12, "W({x}) = {w}");
            assert!(w >= -1.0);
        }
    }

    #[test]
    fn greedy_model_matches_the_published_point() {
        // Xiang and Kurkoski: 2.36 at an over-provisioning factor of 0.3.
        let a = greedy_write_amplification(0.3);
        assert!((a - 2.36).abs() < 0.005, "{a}");
        // More spare flash, less copying.
        assert!(greedy_write_amplification(0.07) > greedy_write_amplification(0.5));
        assert!(greedy_write_amplification(0.07) > 7.0);
    }

    #[test]
    fn spare_and_write_amplification_invert_each_other() {
        for op in [0.05, 0.074, 0.2, 0.246, 0.374, 0.5, 1.0] {
            let back = greedy_over_provisioning(greedy_write_amplification(op));
            assert!((back - op).abs() < 1e-9, "{op} -> {back}");
        }
    }

    #[test]
    fn die_timing_inverts_and_matches_a_hand_count() {
        let t = DieTiming {
            dies: 36,
            program_us: 137.0,
            read_us: 50.0,
            erase_ms: 3.8,
            pages_per_block: 512,
        };
        // Without copying a page costs a program and a 512th of an erase:
        // 36 dies / 144.42 µs.
        assert!((t.random_write_iops(1.0) - 36e6 / (137.0 + 3800.0 / 512.0)).abs() < 1e-6);
        for wa in [1.0, 2.07, 2.7, 8.8] {
            let back = t.write_amplification_at(t.random_write_iops(wa));
            assert!((back - wa).abs() < 1e-9, "{wa} -> {back}");
        }
    }
}
