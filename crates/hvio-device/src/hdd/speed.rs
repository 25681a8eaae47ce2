//! The HDD model's own cost per request, without a simulator around it: a
//! closed loop that keeps the drive's queue full and advances it from one
//! event to the next (`hvio bench schedulers`, the `hdd_speed` example).

use super::{Hdd, HddParams};
use hvio_core::{Device, Op, Request};

/// One workload of the speed loop.
#[derive(Debug, Clone, Copy)]
pub struct SpeedCase {
    /// What the case does, as `hdd_speed` prints it.
    pub name: &'static str,
    /// Device queue depth.
    pub depth: usize,
    /// 128 KiB requests one after another, else 4 KiB ones at random.
    pub sequential: bool,
    /// Writes with the drive's write cache on, else reads.
    pub write: bool,
}

/// The workloads `hdd_speed` prints, in its order; the first is the one
/// `hvio bench schedulers` reports.
pub const SPEED_CASES: [SpeedCase; 5] = [
    SpeedCase {
        name: "random 4 KiB reads, depth 1",
        depth: 1,
        sequential: false,
        write: false,
    },
    SpeedCase {
        name: "sequential 128 KiB reads, depth 1",
        depth: 1,
        sequential: true,
        write: false,
    },
    SpeedCase {
        name: "random 4 KiB reads, depth 8",
        depth: 8,
        sequential: false,
        write: false,
    },
    SpeedCase {
        name: "sequential 128 KiB writes, write cache, depth 1",
        depth: 1,
        sequential: true,
        write: true,
    },
    SpeedCase {
        name: "random 4 KiB writes, write cache, depth 1",
        depth: 1,
        sequential: false,
        write: true,
    },
];

/// CPU and wall-clock time per request of one run.
#[derive(Debug, Clone, Copy)]
pub struct Speed {
    /// Process CPU time per request, ns.
    pub cpu_ns: f64,
    /// Wall-clock time per request, ns.
    pub wall_ns: f64,
}

/// CPU seconds of this process (`/proc/self/stat`'s utime and stime, in
/// clock ticks of 10 ms), so other load on the machine matters less; 0
/// where there is no `/proc`.
fn cpu_seconds() -> f64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let f: Vec<&str> = s.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (tick(11) + tick(12)) / 100.0
}

/// Drives the default HDD through `n` requests of `case`.
pub fn run(case: &SpeedCase, n: u64) -> Speed {
    let mut d = Hdd::new(
        HddParams {
            queue_depth: Some(case.depth),
            write_cache: Some(case.write),
            ..Default::default()
        }
        .build()
        .expect("the default HDD builds"),
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
            let lbn = if case.sequential {
                (id * 256) % (cap - 256)
            } else {
                (s >> 8) % (cap - 64)
            };
            let op = if case.write { Op::Write } else { Op::Read };
            let len = if case.sequential { 256 } else { 8 };
            d.submit(Request::new(id, 0, op, lbn, len, now), now);
            id += 1;
        }
        now = d.next_event().expect("a busy drive has a next event");
        out.clear();
        d.advance(now, &mut out);
        done += out.len() as u64;
    }
    let per = |s: f64| s * 1e9 / n.max(1) as f64;
    Speed {
        cpu_ns: per(cpu_seconds() - c0),
        wall_ns: per(w0.elapsed().as_secs_f64()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_case_runs() {
        for case in &SPEED_CASES {
            let s = run(case, 2_000);
            assert!(s.wall_ns > 0.0 && s.cpu_ns >= 0.0, "{}: {s:?}", case.name);
        }
    }
}
