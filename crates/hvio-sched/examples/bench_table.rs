//! Print the per-request decision cost table (ns per insert + dispatch +
//! complete) for every registered scheduler:
//! `cargo run --release -p hvio-sched --example bench_table [decisions]`.

fn main() {
    let n = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(200_000);
    print!("{}", hvio_sched::bench::table(n));
}
