//! The cleaner's write amplification under uniform random 4 KiB writes
//! against the analytic model of greedy cleaning, with its log traffic and
//! remap memory (`hvio_reshape::model`).
//!
//! `cargo run --release -p hvio-reshape --example cleaning [-- --quick]`

use hvio_reshape::model::{greedy_wa, uniform_random};
use hvio_reshape::{ReshapeConfig, Victim};

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let region: u64 = if quick { 64 << 20 } else { 256 << 20 };
    let segment: u64 = if quick { 512 << 10 } else { 1 << 20 };
    let base = ReshapeConfig::default();
    println!(
        "data region {} MiB, {} KiB segments, clean_start {}, clean_hard {}; uniform random 4 KiB writes",
        region >> 20,
        segment >> 10,
        base.clean_start,
        base.clean_hard
    );
    println!(
        "{:>5} {:>6} {:>12} {:>8} {:>8} {:>9} {:>9} {:>13} {:>12}",
        "util", "alpha", "victim", "WA", "model", "vs model", "log B/4K", "table/GiB wr", "table/GiB map"
    );
    for util in [0.5, 0.6, 0.7, 0.8, 0.9, 0.95] {
        for victim in [Victim::Greedy, Victim::CostBenefit] {
            let cfg = ReshapeConfig {
                base: false,
                meta_region_bytes: 3 * segment,
                data_region_bytes: region,
                segment_bytes: segment,
                log_bytes: 64 << 20,
                victim,
                ..base.clone()
            };
            let alpha = 1.0 / util;
            let label = format!("{victim:?}");
            match uniform_random(&cfg, util, 0x9E3779B97F4A7C15) {
                Ok(run) => {
                    let model = greedy_wa(alpha);
                    let mib = (1 << 20) as f64;
                    println!(
                        "{util:>5.2} {alpha:>6.3} {label:>12} {:>8.3} {model:>8.3} {:>+8.1}% {:>9.1} {:>9.2} MiB {:>8.2} MiB",
                        run.write_amplification,
                        (run.write_amplification / model - 1.0) * 100.0,
                        run.log_bytes_per_write,
                        run.table_bytes_per_gib_written / mib,
                        run.table_bytes_per_gib_mapped / mib,
                    );
                }
                Err(e) => println!("{util:>5.2} {alpha:>6.3} {label:>12} {e}"),
            }
        }
    }
}
