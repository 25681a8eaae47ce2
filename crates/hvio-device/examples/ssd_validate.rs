//! The SSD model's write amplification against theory: uniform random 4 KiB
//! writes at steady state for over-provisioning from 7 % to 50 %, beside
//! Desnoyers's analytic model of greedy cleaning, and sequential overwrites;
//! then the gap's dependence on the block size.
//!
//! `cargo run --release -p hvio-device --example ssd_validate [-- --quick]`
//! (tables in docs/ssd-model.md). Every drive is one plane of 4 KiB pages
//! written through the FTL alone (no timing): filled in order, overwritten at
//! random for `warm` drive writes, then measured over `measure` more.

use hvio_device::ssd::theory::{greedy_write_amplification, measured_random_write_amplification, model_drive};
use hvio_device::ssd::{GcPolicy, Pattern, Ssd};

const OVER_PROVISIONING: [f64; 7] = [0.07, 0.10, 0.15, 0.20, 0.28, 0.35, 0.50];
const BLOCK_PAGES: [u32; 5] = [32, 64, 128, 256, 512];

struct Run {
    gib: f64,
    pages_per_block: u32,
    warm: f64,
    measure: f64,
}

impl Run {
    fn drive(&self, op: f64, policy: GcPolicy) -> Ssd {
        model_drive(op, self.gib, self.pages_per_block, policy)
            .build()
            .expect("a valid drive")
    }

    fn random(&self, op: f64, policy: GcPolicy) -> f64 {
        measured_random_write_amplification(&mut self.drive(op, policy), self.warm, self.measure)
    }

    /// Write amplification of a sequential overwrite of the whole drive, after random writes.
    fn sequential(&self, op: f64) -> f64 {
        let mut d = self.drive(op, GcPolicy::Greedy);
        let n = d.logical_pages();
        d.overwrite_untimed(Pattern::Sequential { n, start: 0 }, n);
        d.overwrite_untimed(Pattern::UniformRandom { n, seed: 1 }, 2 * n);
        // The first pass still cleans the random writes' blocks; the second is the steady state.
        d.overwrite_untimed(Pattern::Sequential { n, start: 0 }, n);
        d.overwrite_untimed(Pattern::Sequential { n, start: 0 }, n)
            .write_amplification()
    }
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (gib, warm, measure) = if quick { (0.5, 3.0, 2.0) } else { (4.0, 6.0, 3.0) };
    let run = Run {
        gib,
        pages_per_block: 256,
        warm,
        measure,
    };
    println!(
        "uniform random 4 KiB writes at steady state: one plane of {gib} GiB logical, {} pages per block, {warm} drive writes of warm-up, {measure} measured",
        run.pages_per_block
    );
    println!(
        "{:>5} {:>6} {:>10} {:>8} {:>7} {:>13} {:>11}",
        "OP", "alpha", "Desnoyers", "greedy", "error", "cost-benefit", "sequential"
    );
    for op in OVER_PROVISIONING {
        let theory = greedy_write_amplification(op);
        let greedy = run.random(op, GcPolicy::Greedy);
        println!(
            "{:>4.0}% {:>6.2} {:>10.3} {:>8.3} {:>+6.1}% {:>13.3} {:>11.3}",
            op * 100.0,
            1.0 + op,
            theory,
            greedy,
            (greedy / theory - 1.0) * 100.0,
            run.random(op, GcPolicy::CostBenefit),
            run.sequential(op)
        );
    }
    println!();
    // As many logical blocks as above, whatever their size.
    let blocks = gib * 262_144.0 / run.pages_per_block as f64;
    println!(
        "greedy at 7 % over-provisioning against the block size, {blocks} logical blocks (Desnoyers: the limit of large blocks)"
    );
    println!(
        "{:>15} {:>7} {:>10} {:>8} {:>7}",
        "pages per block", "GiB", "Desnoyers", "greedy", "error"
    );
    let theory = greedy_write_amplification(0.07);
    for ppb in BLOCK_PAGES {
        let run = Run {
            pages_per_block: ppb,
            gib: blocks * ppb as f64 / 262_144.0,
            ..run
        };
        let greedy = run.random(0.07, GcPolicy::Greedy);
        let gib = run.gib;
        println!(
            "{ppb:>15} {gib:>7} {theory:>10.3} {greedy:>8.3} {:>+6.1}%",
            (greedy / theory - 1.0) * 100.0
        );
    }
}
