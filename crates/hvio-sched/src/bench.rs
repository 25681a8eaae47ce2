//! Per-request decision cost of a scheduler: insert + dispatch + complete,
//! with a given number of requests queued. Used by the criterion bench
//! (`cargo bench -p hvio-sched`) and by `hvio bench schedulers`.
//!
//! The workload: 8 streams with weights 100..800, random positions over a
//! 1 TiB disk, two reads (sync) for every write (async), 8..256 sectors,
//! one request at the device at a time, 100 µs of simulated service each.
//! Each step inserts one request and dispatches and completes one, so the
//! queue length stays at `queued`. A scheduler that asks to wait is called
//! again at the time it names (that wait counts in the cost).

use crate::driver::{Driver, Next};
use crate::SCHEDULERS;
use hvio_core::{us, DeviceInfo, Nanos, Op, ParamValues, Request, SchedContext, StreamInfo};
use std::time::Instant;

const STREAMS: u32 = 8;
const CAPACITY: u64 = 1 << 31;
const SERVICE: Nanos = us(100);

/// A scheduler kept at a fixed queue length.
pub struct DecisionBench {
    sched: Driver,
    now: Nanos,
    next_id: u64,
    rng: u64,
}

impl DecisionBench {
    /// Scheduler `name` with `queued` requests queued. Panics on an unknown
    /// name (callers iterate the registry).
    pub fn new(name: &str, queued: usize) -> Self {
        let ctx = SchedContext {
            streams: (0..STREAMS)
                .map(|i| StreamInfo::new(i, format!("vm{i}")).with_weight(100 * (i + 1)))
                .collect(),
            device: DeviceInfo::test_disk(CAPACITY),
        };
        let sched = Driver::build(name, &ParamValues::new(), ctx).unwrap_or_else(|e| panic!("{e}"));
        let mut b = DecisionBench {
            sched,
            now: 0,
            next_id: 0,
            rng: 0x2545_F491_4F6C_DD1D,
        };
        for _ in 0..queued {
            b.insert();
        }
        b
    }

    fn rand(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    fn insert(&mut self) {
        let r = self.rand();
        let stream = (r % STREAMS as u64) as u32;
        let op = if (r >> 8).is_multiple_of(3) {
            Op::Write
        } else {
            Op::Read
        };
        let sectors = 8 << ((r >> 16) % 6);
        let sector = (r >> 24) % (CAPACITY - 256);
        let rq = Request::new(self.next_id, stream, op, sector, sectors as u32, self.now).with_sync(op == Op::Read);
        self.next_id += 1;
        self.sched.insert(rq, self.now);
    }

    /// One decision: insert a request, dispatch one, complete it.
    pub fn step(&mut self) {
        self.insert();
        let rq = loop {
            match self.sched.poll(self.now) {
                Next::Request(rq) => break rq,
                Next::Wait { until, .. } => self.now = until,
                Next::Idle => unreachable!("the bench keeps requests queued"),
            }
        };
        self.now += SERVICE;
        self.sched.completed(&rq, self.now);
    }
}

/// CPU time of the calling thread in ns (`CLOCK_THREAD_CPUTIME_ID`), so
/// that a benchmark on a shared machine does not count time spent waiting
/// for a core.
#[cfg(unix)]
fn thread_cpu_ns() -> Option<u64> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    (rc == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

#[cfg(not(unix))]
fn thread_cpu_ns() -> Option<u64> {
    None
}

/// ns per decision (insert + dispatch + complete) for scheduler `name`
/// with `queued` requests queued, averaged over `n` decisions: thread CPU
/// time where the platform provides it, else wall-clock time.
pub fn bench_decisions(name: &str, queued: usize, n: usize) -> f64 {
    let mut b = DecisionBench::new(name, queued);
    // Warm up: let slices, budgets and estimates settle.
    for _ in 0..n.min(10_000) {
        b.step();
    }
    let cpu = thread_cpu_ns();
    let t = Instant::now();
    for _ in 0..n {
        b.step();
    }
    let ns = match (cpu, thread_cpu_ns()) {
        (Some(a), Some(z)) => z.saturating_sub(a) as f64,
        _ => t.elapsed().as_nanos() as f64,
    };
    ns / n.max(1) as f64
}

/// The queue lengths every scheduler is measured at.
pub const QUEUED: [usize; 2] = [1_000, 100_000];

/// The decision-cost goals of a scheduler (ns per decision at each of
/// [`QUEUED`], and the most the 100k figure may grow over the 1k one).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Goal {
    /// The most ns per decision at each of [`QUEUED`] (None: no goal).
    pub ns: [Option<f64>; 2],
    /// The most the 100k figure may be over the 1k one (None: no goal).
    pub growth: Option<f64>,
}

/// The goals hvio holds its schedulers to (docs/benchmarks.md): an SSD or
/// NVMe device asks for 100k+ decisions a second; the elevators' queues
/// are O(log n), so they grow at most 1.5× from 1k to 100k queued.
pub fn goal(name: &str) -> Goal {
    let both = |ns: f64| [Some(ns), Some(ns)];
    match name {
        "deadline" => Goal {
            ns: both(200.0),
            growth: None,
        },
        "pregather" | "htbs" => Goal {
            ns: [Some(600.0), Some(900.0)],
            growth: None,
        },
        "cfq" | "bfq" => Goal {
            ns: both(600.0),
            growth: None,
        },
        "anticipatory" => Goal {
            ns: both(600.0),
            growth: Some(1.5),
        },
        "mq-deadline" | "ishare" => Goal {
            ns: [None, None],
            growth: Some(1.5),
        },
        _ => Goal::default(),
    }
}

/// The table `hvio bench schedulers` prints: ns per decision for every
/// registered scheduler at 1,000 and 100,000 queued requests.
pub fn table(n: usize) -> String {
    let mut out = format!(
        "{:<14} {:>14} {:>14} {:>8}\n",
        "scheduler", "1k queued ns", "100k queued ns", "ratio"
    );
    for spec in SCHEDULERS {
        let small = bench_decisions(spec.name, 1_000, n);
        let large = bench_decisions(spec.name, 100_000, n);
        out.push_str(&format!(
            "{:<14} {:>14.0} {:>14.0} {:>8.2}\n",
            spec.name,
            small,
            large,
            large / small
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scheduler_benches() {
        for spec in SCHEDULERS {
            let ns = bench_decisions(spec.name, 100, 200);
            assert!(ns.is_finite() && ns > 0.0, "{}: {ns}", spec.name);
        }
    }
}
