//! The presets at steady state: each drive (scaled to 32 GiB) preconditioned
//! (filled, then random 4 KiB overwrites until write amplification settles),
//! then random 4 KiB writes and sequential 128 KiB writes at the preset's
//! queue depth: throughput and write amplification, the gap address
//! reshaping exploits. Fresh-drive figures beside them, and the datasheets'
//! random 4 KiB write figures: Samsung publishes only the 850 PRO's maximum
//! (a fresh drive), Intel the P3700's at steady state, the figure its
//! preset's spare flash is derived from (`presets::p3700_over_provisioning`).
//!
//! `cargo run --release -p hvio-device --example ssd_presets [-- --gib N]`
//! (docs/ssd-model.md); `--gib 0` keeps each preset's real capacity.

use hvio_core::{Device, Nanos, Op, Request};
use hvio_device::ssd::presets::P3700_STEADY_RANDOM_WRITE_IOPS;
use hvio_device::ssd::{Precondition, Ssd, SsdParams, SsdPreset};

fn build(preset: SsdPreset, steady: bool, gib: Option<f64>) -> Ssd {
    SsdParams {
        preset: Some(preset),
        capacity_gib: gib,
        precondition: steady.then(Precondition::default),
        ..Default::default()
    }
    .build()
    .expect("a valid preset")
}

/// Closed loop at the drive's depth: (MB/s, IOPS, write amplification) of `n` requests from `next`.
fn run(d: &mut Ssd, n: u64, mut next: impl FnMut(u64) -> (u64, u32)) -> (f64, f64, f64) {
    let before = d.stats();
    let mut out = Vec::new();
    let (mut now, mut id, mut bytes, mut done): (Nanos, u64, u64, u64) = (0, 0, 0, 0);
    while done < n {
        while d.can_accept() && id < n {
            let (sector, len) = next(id);
            d.submit(Request::new(id, 0, Op::Write, sector, len, now), now);
            bytes += len as u64 * 512;
            id += 1;
        }
        now = d.next_event().expect("requests in flight");
        out.clear();
        d.advance(now, &mut out);
        done += out.len() as u64;
    }
    let s = now as f64 / 1e9;
    let wa = d.stats().since(&before).write_amplification();
    (bytes as f64 / 1e6 / s, n as f64 / s, wa)
}

/// The datasheet's random 4 KiB write figure for the drive in that state.
fn datasheet(preset: SsdPreset, steady: bool) -> String {
    match (preset, steady) {
        (SsdPreset::Samsung850Pro256, false) => "90000 (maximum)".into(),
        (SsdPreset::Samsung850Pro256, true) => "not published".into(),
        (SsdPreset::IntelP3700_400, false) => "not published".into(),
        (SsdPreset::IntelP3700_400, true) => format!("{P3700_STEADY_RANDOM_WRITE_IOPS:.0} (steady state)"),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let gib = match args.iter().position(|a| a == "--gib") {
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse::<f64>().ok())
            .expect("--gib takes a number"),
        None => 32.0,
    };
    let gib = (gib > 0.0).then_some(gib);
    println!(
        "{:<22} {:>6} {:>16} {:>8} {:>19} {:>8} {:>10} {:>14} {:>24}",
        format!("preset ({})", gib.map_or("real size".into(), |g| format!("{g} GiB"))),
        "state",
        "random 4K IOPS",
        "WA",
        "sequential MB/s",
        "WA",
        "settled",
        "precondition",
        "datasheet random 4K"
    );
    for preset in [SsdPreset::Samsung850Pro256, SsdPreset::IntelP3700_400] {
        for steady in [false, true] {
            let start = std::time::Instant::now();
            let mut d = build(preset, steady, gib);
            let built = start.elapsed();
            let cap = d.capacity();
            let report = d.precondition_report();
            let mut s = 0x9e37_79b9_7f4a_7c15u64;
            let (_, iops, wa_random) = run(&mut d, 400_000, |_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s % (cap / 8) * 8, 8)
            });
            let mut d = build(preset, steady, gib);
            let (mb_s, _, wa_seq) = run(&mut d, 40_000, |i| (i * 256 % cap, 256));
            println!(
                "{:<22} {:>6} {:>16.0} {:>8.2} {:>19.0} {:>8.2} {:>10} {:>13.1}s {:>24}",
                format!("{preset:?}"),
                if steady { "steady" } else { "fresh" },
                iops,
                wa_random,
                mb_s,
                wa_seq,
                report.map_or("-".to_string(), |r| format!(
                    "{} ({:.2})",
                    r.settled,
                    (r.fill_pages + r.random_pages) as f64 / r.fill_pages as f64
                )),
                built.as_secs_f64(),
                datasheet(preset, steady)
            );
        }
    }
}
