//! The host scheduler's own cost (paper 000 §5.3, Fig. 12: what Pregather
//! costs against CFQ): the CPU time spent inside a scheduler's calls
//! (insert, dispatch decisions, completion) on a closed-loop replay of
//! paper 000's Table 1 access patterns, measured in this process with a
//! monotonic clock. It must be Rust: it times the scheduler's own calls,
//! which only a caller of [`hvio_sched::Driver`] sees. The study
//! `experiments/pregather-overhead.study.toml` runs it as its
//! `kind = "bench-scheduler"` runs (`hvio.bench_scheduler` in Python), and
//! its tables are Python's.

use crate::error::{Result, SimError};
use hvio_core::{Nanos, Op, ParamValues, Request, SchedContext, StreamInfo};
use hvio_sched::{Driver, Next};
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::time::{Duration, Instant};

/// What to measure: a host scheduler with its tunables, and how many
/// requests the closed loop completes.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CostConfig {
    /// The scheduler and its tunables (as a config's `[host]`).
    pub host: CostHost,
    /// Requests completed before the measurement stops.
    pub requests: u64,
    /// Accepted so that a study's seed may be set; the closed loop is the
    /// same for every seed (its addresses come from fixed generators).
    #[serde(default)]
    pub seed: Option<u64>,
}

/// The `[host]` of a [`CostConfig`].
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CostHost {
    /// The scheduler's name.
    pub scheduler: String,
    /// Its tunables by Linux name.
    #[serde(default)]
    pub params: ParamValues,
}

/// What one measurement found: the time inside the scheduler and what it did.
#[derive(Clone, Debug, Serialize)]
pub struct SchedulerCost {
    /// The scheduler measured.
    pub scheduler: String,
    /// Requests completed.
    pub requests: u64,
    /// Dispatch calls (`poll`) made.
    pub dispatch_calls: u64,
    /// Wall-clock nanoseconds spent inside the scheduler's calls.
    pub busy_ns: u64,
    /// The scheduler's counters at the end (`wait_success_ratio`, ...).
    pub counters: Vec<(String, f64)>,
}

/// One application: 16 threads, one request each in flight, 16 KiB requests.
#[derive(Clone, Copy)]
struct App {
    vm: u32,
    sequential: bool,
    write: bool,
    start: u64,
    len: u64,
    cursor: u64,
    rng: u64,
}

impl App {
    fn next(&mut self, id: u64, now: Nanos) -> Request {
        const SECTORS: u64 = 32;
        let off = if self.sequential {
            let o = self.cursor;
            self.cursor = (self.cursor + SECTORS) % self.len;
            o
        } else {
            self.rng = self
                .rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (self.rng >> 33) % (self.len / SECTORS) * SECTORS
        };
        let op = if self.write { Op::Write } else { Op::Read };
        Request::new(id, self.vm, op, self.start + off, SECTORS as u32, now).with_sync(true)
    }
}

/// Parse a [`CostConfig`] from JSON; errors name `origin`.
pub fn parse(json: &str, origin: &str) -> Result<CostConfig> {
    serde_json::from_str(json).map_err(|e| SimError::Parse {
        origin: origin.to_string(),
        message: format!("bench-scheduler run: {e}"),
    })
}

/// Closed loop: 4 VMs × 2 applications × 16 threads; the device serves a
/// request in 0.15 ms when it continues the previous one, else in 8 ms; a
/// thread issues its next request 40 µs after its completion. The device
/// the scheduler is told of is hvio's HDD model with its defaults.
pub fn measure(cfg: &CostConfig) -> Result<SchedulerCost> {
    const IMAGE: u64 = 25_165_824; // 12 GiB in sectors
    const BASE: u64 = 300_000_000;
    let streams = (0..4u32)
        .map(|v| StreamInfo::new(v, format!("vm{}", v + 1)).with_region(BASE + v as u64 * IMAGE, IMAGE))
        .collect();
    let device = hvio_device::build_device(&hvio_device::DeviceConfig::default(), std::path::Path::new(""))
        .map_err(|e| SimError::Device(e.to_string()))?
        .info();
    let ctx = SchedContext { streams, device };
    let name = cfg.host.scheduler.as_str();
    let mut s = Driver::build(name, &cfg.host.params, ctx)?;
    // Table 1: VM1 SR-M + SR-S, VM2 SW-M + SW-S, VM3 SR-M + RRW, VM4 RR + RW.
    let kinds = [
        (true, false),
        (true, false),
        (true, true),
        (true, true),
        (true, false),
        (false, false),
        (false, false),
        (false, true),
    ];
    let mut apps: Vec<App> = kinds
        .iter()
        .enumerate()
        .map(|(i, &(sequential, write))| {
            let vm = (i / 2) as u32;
            App {
                vm,
                sequential,
                write,
                start: BASE + vm as u64 * IMAGE + 262_144 + (i % 2) as u64 * 2_097_152,
                len: 2_097_152,
                cursor: 0,
                rng: 0x9E37_79B9_7F4A_7C15 ^ i as u64,
            }
        })
        .collect();
    let mut busy = Duration::ZERO;
    let mut timed = |f: &mut dyn FnMut()| {
        let t0 = Instant::now();
        f();
        busy += t0.elapsed();
    };
    let mut now: Nanos = 0;
    let mut next_id = 0u64;
    // (time, id, app) of pending arrivals.
    let mut arrivals: BinaryHeap<Reverse<(Nanos, u64, usize)>> = BinaryHeap::new();
    let mut owner = HashMap::new();
    for a in 0..apps.len() {
        for _ in 0..16 {
            arrivals.push(Reverse((0, next_id, a)));
            next_id += 1;
        }
    }
    let mut in_service: Option<(Nanos, Request)> = None;
    let mut last_end = 0;
    let (mut done, mut dispatch_calls) = (0u64, 0u64);
    while done < cfg.requests {
        let next_arrival = arrivals.peek().map(|a| a.0 .0);
        let t = [in_service.map(|x| x.0), s.wake(), next_arrival]
            .into_iter()
            .flatten()
            .min();
        let Some(t) = t else { break };
        now = now.max(t);
        s.timer_due(now);
        if let Some((at, rq)) = in_service {
            if at <= now {
                timed(&mut || s.completed(&rq, now));
                in_service = None;
                done += 1;
                let a: usize = owner.remove(&rq.id).unwrap_or(0);
                arrivals.push(Reverse((now + 40_000, next_id, a)));
                next_id += 1;
            }
        }
        while let Some(&Reverse((at, id, a))) = arrivals.peek() {
            if at > now {
                break;
            }
            arrivals.pop();
            let rq = apps[a].next(id, now);
            owner.insert(id, a);
            timed(&mut || s.insert(rq, now));
        }
        if in_service.is_none() {
            let mut d = Next::Idle;
            timed(&mut || d = s.poll(now));
            dispatch_calls += 1;
            match d {
                Next::Request(rq) => {
                    let service = if rq.sector == last_end { 150_000 } else { 8_000_000 };
                    last_end = rq.end();
                    in_service = Some((now + service, rq));
                }
                Next::Wait { .. } | Next::Idle => {}
            }
        }
    }
    Ok(SchedulerCost {
        scheduler: name.to_string(),
        requests: done,
        dispatch_calls,
        busy_ns: u64::try_from(busy.as_nanos()).unwrap_or(u64::MAX),
        counters: s.counters(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cost(json: &str) -> Result<SchedulerCost> {
        measure(&parse(json, "t")?)
    }

    #[test]
    fn the_closed_loop_completes_the_requests_asked_for_the_same_way_each_time() {
        let json = r#"{"host": {"scheduler": "cfq"}, "requests": 2000, "seed": 3}"#;
        let (a, b) = (cost(json).unwrap(), cost(json).unwrap());
        assert_eq!(a.requests, 2000);
        assert!(a.dispatch_calls >= a.requests, "{a:?}");
        assert_eq!((a.dispatch_calls, &a.counters), (b.dispatch_calls, &b.counters));
        assert!(a.busy_ns > 0);
    }

    #[test]
    fn a_bad_run_names_its_origin_and_the_field() {
        let e = cost(r#"{"host": {"scheduler": "cfq"}, "requests": 10, "speed": 1}"#).unwrap_err();
        assert!(
            e.to_string().contains("t: bench-scheduler run: unknown field `speed`"),
            "{e}"
        );
        let e = cost(r#"{"host": {"scheduler": "nope"}, "requests": 10}"#).unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
    }
}
