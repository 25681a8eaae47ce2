//! Times the HDD model alone: `cargo run --release -p hvio-device --example hdd_speed [N]`.
//! Reports CPU time per request (process CPU time, so other load on the machine matters less).

use hvio_core::{Device, Op, Request};
use hvio_device::hdd::{Hdd, HddParams};

fn cpu_seconds() -> f64 {
    // /proc/self/stat fields 14 and 15: utime and stime in clock ticks.
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let f: Vec<&str> = s.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (tick(11) + tick(12)) / 100.0
}

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2_000_000);
    let only: Option<usize> = std::env::args().nth(2).and_then(|a| a.parse().ok());
    for (k, (name, depth, seq, write)) in [
        ("random 4 KiB reads, depth 1", 1usize, false, false),
        ("sequential 128 KiB reads, depth 1", 1, true, false),
        ("random 4 KiB reads, depth 8", 8, false, false),
        ("sequential 128 KiB writes, write cache, depth 1", 1, true, true),
        ("random 4 KiB writes, write cache, depth 1", 1, false, true),
    ]
    .into_iter()
    .enumerate()
    {
        if only.is_some_and(|o| o != k) {
            continue;
        }
        let mut d = Hdd::new(
            HddParams {
                queue_depth: Some(depth),
                write_cache: Some(write),
                ..Default::default()
            }
            .build()
            .unwrap(),
        );
        let cap = d.model().geom.capacity();
        let mut s = 88172645463325252u64;
        let mut out = Vec::with_capacity(64);
        let (mut now, mut id, mut done) = (0, 0u64, 0u64);
        let c0 = cpu_seconds();
        let w0 = std::time::Instant::now();
        while done < n {
            while d.can_accept() {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                let lbn = if seq {
                    (id * 256) % (cap - 256)
                } else {
                    (s >> 8) % (cap - 64)
                };
                let op = if write { Op::Write } else { Op::Read };
                d.submit(Request::new(id, 0, op, lbn, if seq { 256 } else { 8 }, now), now);
                id += 1;
            }
            now = d.next_event().unwrap();
            out.clear();
            d.advance(now, &mut out);
            done += out.len() as u64;
        }
        let cpu = cpu_seconds() - c0;
        let wall = w0.elapsed().as_secs_f64();
        println!(
            "{name}: {n} requests, {:.0} ns/request CPU ({:.0} ns wall), {:.2} M requests/s CPU",
            cpu * 1e9 / n as f64,
            wall * 1e9 / n as f64,
            n as f64 / cpu / 1e6
        );
    }
}
