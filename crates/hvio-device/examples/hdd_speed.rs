//! Times the HDD model alone: `cargo run --release -p hvio-device --example hdd_speed [N] [CASE]`.
//! Reports CPU time per request (process CPU time, so other load on the machine matters less).

use hvio_device::hdd::speed::{run, SPEED_CASES};

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2_000_000);
    let only: Option<usize> = std::env::args().nth(2).and_then(|a| a.parse().ok());
    for (k, case) in SPEED_CASES.iter().enumerate() {
        if only.is_some_and(|o| o != k) {
            continue;
        }
        let s = run(case, n);
        println!(
            "{}: {n} requests, {:.0} ns/request CPU ({:.0} ns wall), {:.2} M requests/s CPU",
            case.name,
            s.cpu_ns,
            s.wall_ns,
            1e3 / s.cpu_ns
        );
    }
}
