//! Per-request decision cost (insert + dispatch + complete) of every
//! registered scheduler with 1,000 and 100,000 requests queued.
//! `cargo bench -p hvio-sched`; the same driver backs `hvio bench schedulers`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use hvio_sched::bench::DecisionBench;
use std::time::Duration;

fn decisions(c: &mut Criterion) {
    let mut g = c.benchmark_group("decision");
    g.warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20);
    for spec in hvio_sched::SCHEDULERS {
        for queued in [1_000usize, 100_000] {
            let mut b = DecisionBench::new(spec.name, queued);
            g.bench_with_input(BenchmarkId::new(spec.name, queued), &queued, |bench, _| {
                bench.iter(|| b.step())
            });
        }
    }
    g.finish();
}

criterion_group!(benches, decisions);
criterion_main!(benches);
