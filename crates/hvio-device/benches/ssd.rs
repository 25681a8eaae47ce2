//! Per-request cost of the SSD model (`cargo bench -p hvio-device --bench ssd`):
//! random 4 KiB writes on a preconditioned drive (garbage collection in every
//! request's path), random reads, and sequential 128 KiB writes, on the
//! 850 PRO preset scaled to 32 GiB.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
mod common;

use common::{drive, xorshift};
use hvio_core::Op;
use hvio_device::ssd::{Precondition, Ssd, SsdParams, SsdPreset};
use std::hint::black_box;

/// `cargo bench` passes `--bench`; `cargo test --benches` (make test) runs each
/// benchmark once, unoptimised, so it gets a 1 GiB drive and short runs.
fn timed() -> bool {
    std::env::args().any(|a| a == "--bench")
}

fn preset(precondition: bool) -> Ssd {
    let (gib, pages_per_block) = if timed() { (32.0, None) } else { (1.0, Some(16)) };
    SsdParams {
        preset: Some(SsdPreset::Samsung850Pro256),
        capacity_gib: Some(gib),
        pages_per_block,
        precondition: precondition.then(|| Precondition {
            max_drive_writes: Some(2.0),
            ..Default::default()
        }),
        ..Default::default()
    }
    .build()
    .unwrap()
}

fn bench(c: &mut Criterion) {
    let n = if timed() { 100_000u64 } else { 1000 };
    let mut g = c.benchmark_group("ssd");
    g.throughput(Throughput::Elements(n));
    g.sample_size(10);
    // One preconditioned drive for the random runs: it stays at steady state, and time goes on across iterations.
    let mut steady = preset(true);
    eprintln!("preconditioned: {:?}", steady.precondition_report().unwrap());
    let cap = steady.capacity();
    let mut now = 0;
    let mut s = 88172645463325252u64;
    for (name, op) in [("random-write-4k-steady", Op::Write), ("random-read-4k", Op::Read)] {
        g.bench_function(name, |b| {
            b.iter(|| {
                now = drive(&mut steady, now, n, |_| (op, xorshift(&mut s) % (cap / 8) * 8, 8));
                black_box(now)
            })
        });
    }
    eprintln!(
        "write amplification over the random writes: {:.2}",
        steady.stats().write_amplification()
    );
    let mut fresh = preset(false);
    let mut now = 0;
    let mut next = 0u64;
    g.bench_function("sequential-write-128k", |b| {
        b.iter(|| {
            now = drive(&mut fresh, now, n, |_| {
                next += 256;
                (Op::Write, next % cap, 256)
            });
            black_box(now)
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
