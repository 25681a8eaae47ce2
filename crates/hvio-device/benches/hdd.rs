//! Per-request cost of the HDD model (`cargo bench -p hvio-device`).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
mod common;

use common::{drive, xorshift};
use hvio_core::Op;
use hvio_device::hdd::{Hdd, HddParams};
use std::hint::black_box;

fn bench(c: &mut Criterion) {
    let n = 100_000u64;
    let mut g = c.benchmark_group("hdd");
    g.throughput(Throughput::Elements(n));
    for (name, depth, mix) in [
        ("random-read-qd1", 1usize, false),
        ("random-rw-qd1", 1, true),
        ("random-read-qd4", 4, false),
    ] {
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut d = Hdd::new(
                    HddParams {
                        queue_depth: Some(depth),
                        ..Default::default()
                    }
                    .build()
                    .unwrap(),
                );
                let cap = d.model().geom.capacity();
                let mut s = 88172645463325252u64;
                black_box(drive(&mut d, 0, n, |_| {
                    let r = xorshift(&mut s);
                    let op = if mix && r.is_multiple_of(3) {
                        Op::Write
                    } else {
                        Op::Read
                    };
                    (op, (r >> 8) % (cap - 64), 8)
                }))
            })
        });
    }
    g.bench_function("sequential-read-qd1", |b| {
        b.iter(|| {
            let mut d = Hdd::new(HddParams::default().build().unwrap());
            black_box(drive(&mut d, 0, n, |i| (Op::Read, i * 256, 256)))
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
