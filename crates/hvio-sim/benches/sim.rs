//! Criterion benchmark of the whole simulator: 4 VMs × 16 threads under
//! deadline (the scenario of `hvio bench sim`), on the small test disk and on
//! the default disk model. Reports time per run of 40,000 requests.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};

fn sim(c: &mut Criterion) {
    let mut g = c.benchmark_group("sim_4vm_x16");
    g.sample_size(10);
    for model in ["simple", "hdd"] {
        let cfg = hvio_sim::bench::scenario(10_000, model);
        g.throughput(Throughput::Elements(40_000));
        g.bench_function(model, |b| {
            b.iter(|| hvio_sim::run(&cfg).expect("benchmark scenario runs"))
        });
    }
    g.finish();
}

criterion_group!(benches, sim);
criterion_main!(benches);
