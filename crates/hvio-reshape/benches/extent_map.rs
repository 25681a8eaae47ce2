//! Remap-table lookup and insert cost at 1k, 100k and 1M extents
//! (`cargo bench -p hvio-reshape --bench extent_map`). Paper 001 §III.C
//! chooses a red-black tree for its O(log n) search; this shows the B-tree of
//! extents grows the same way. After criterion's report it prints, per table
//! size, the time per operation divided by log2(n): roughly flat for
//! O(log n) (a tenfold larger table costs a constant step more, not tenfold;
//! cache misses on the larger tables add to the step).

use criterion::{BenchmarkId, Criterion};
use hvio_reshape::{ExtentMap, Target};
use std::hint::black_box;
use std::time::Instant;

const SIZES: [u64; 3] = [1_000, 100_000, 1_000_000];

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

fn lookup(m: &ExtentMap, n: u64, s: &mut u64) {
    let at = (xorshift(s) % n) * 16 + 4;
    black_box(m.lookup(at, 8));
}

/// Overwrite an existing extent with a new target: cut, merge checks, insert.
fn overwrite(m: &mut ExtentMap, n: u64, s: &mut u64) {
    let i = xorshift(s) % n;
    black_box(m.insert(i * 16, 8, Target::At(i * 32 + (*s & 1) * 8)));
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("extent_map");
    for n in SIZES {
        let mut m = table(n);
        let mut s = 88172645463325252u64;
        g.bench_with_input(BenchmarkId::new("lookup", n), &n, |b, &n| {
            b.iter(|| lookup(&m, n, &mut s))
        });
        g.bench_with_input(BenchmarkId::new("insert", n), &n, |b, &n| {
            b.iter(|| overwrite(&mut m, n, &mut s))
        });
    }
    g.finish();
}

/// Mean nanoseconds per call of `f` over `calls` calls.
fn per_call(calls: u32, mut f: impl FnMut()) -> f64 {
    let t = Instant::now();
    for _ in 0..calls {
        f();
    }
    t.elapsed().as_nanos() as f64 / calls as f64
}

fn growth() {
    println!("\nextent map growth (ns per operation, and divided by log2 n):");
    println!(
        "{:>9} {:>10} {:>12} {:>10} {:>12}",
        "extents", "lookup", "lookup/lg n", "insert", "insert/lg n"
    );
    for n in SIZES {
        let mut m = table(n);
        let mut s = 2463534242u64;
        let lg = (n as f64).log2();
        let look = per_call(1_000_000, || lookup(&m, n, &mut s));
        let ins = per_call(1_000_000, || overwrite(&mut m, n, &mut s));
        println!("{n:>9} {look:>10.1} {:>12.2} {ins:>10.1} {:>12.2}", look / lg, ins / lg);
    }
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c);
    c.final_summary();
    // `cargo test --benches` runs each benchmark once as a test, without
    // `--bench`: the timing loop is for `cargo bench` only.
    if std::env::args().any(|a| a == "--bench") {
        growth();
    }
}
