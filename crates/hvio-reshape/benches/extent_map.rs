//! Remap-table lookup and insert cost at 1k, 100k and 1M extents
//! (`cargo bench -p hvio-reshape --bench extent_map`). Paper 001 §III.C
//! chooses a red-black tree for its O(log n) search; this shows the B-tree of
//! extents grows the same way: the time per operation rises by a roughly
//! constant step per tenfold growth of the table, not tenfold.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use hvio_reshape::{ExtentMap, Target};
use std::hint::black_box;

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

/// A table of `n` 8-sector extents at even slots of a 16-sector grid, none
/// adjacent in the target space (so none merge): a fully fragmented table.
fn table(n: u64) -> ExtentMap {
    let mut m = ExtentMap::new();
    for i in 0..n {
        m.insert(i * 16, 8, Target::At(i * 32));
    }
    assert_eq!(m.len() as u64, n);
    m
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("extent_map");
    for n in [1_000u64, 100_000, 1_000_000] {
        let mut m = table(n);
        let mut s = 88172645463325252u64;
        g.bench_with_input(BenchmarkId::new("lookup", n), &n, |b, &n| {
            b.iter(|| {
                let at = (xorshift(&mut s) % n) * 16 + 4;
                black_box(m.lookup(at, 8))
            })
        });
        // Overwrite an existing extent with a new target: cut, merge checks, insert.
        g.bench_with_input(BenchmarkId::new("insert", n), &n, |b, &n| {
            b.iter(|| {
                let i = xorshift(&mut s) % n;
                black_box(m.insert(i * 16, 8, Target::At(i * 32 + (s & 1) * 8)))
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
