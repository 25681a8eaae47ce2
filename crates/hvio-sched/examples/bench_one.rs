//! Decision cost of one scheduler at one queue length, for profiling:
//! `cargo run --release -p hvio-sched --example bench_one -- NAME QUEUED [DECISIONS]`
//! (e.g. under `perf record`).

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let name = args.get(1).map_or("pregather", String::as_str);
    let queued = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let n = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(1_000_000);
    let ns = hvio_sched::bench::bench_decisions(name, queued, n);
    println!("{name} {queued} queued: {ns:.0} ns per decision");
}
