//! Per-request cost of the HDD model (`cargo bench -p hvio-device`).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use hvio_core::{Device, Op, Request};
use hvio_device::hdd::{Hdd, HddParams};
use std::hint::black_box;

/// Closed loop at the given depth: `n` requests from `next(i)`.
fn drive(d: &mut Hdd, n: u64, mut next: impl FnMut(u64) -> (Op, u64, u32)) -> u64 {
    let mut out = Vec::with_capacity(64);
    let mut now = 0;
    let mut id = 0;
    let mut done = 0;
    while done < n {
        while d.can_accept() {
            let (op, lbn, len) = next(id);
            d.submit(Request::new(id, 0, op, lbn, len, now), now);
            id += 1;
        }
        now = d.next_event().unwrap();
        out.clear();
        d.advance(now, &mut out);
        done += out.len() as u64;
    }
    now
}

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

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
                black_box(drive(&mut d, n, |_| {
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
            black_box(drive(&mut d, n, |i| (Op::Read, i * 256, 256)))
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
