//! §5.3 of paper 000 (Fig. 12): what Pregather costs. Memory: the peak size
//! of each VM's vNavigator during the four-VM run. CPU: the time the host
//! scheduler spends per request (insert, dispatch decisions, completion) on
//! a closed-loop replay of Table 1's access patterns, Pregather against CFQ,
//! Deadline and Noop, measured in this process with a monotonic clock.

use super::{counter, pct, registered, simulate, DISK};
use crate::config::Config;
use crate::experiments::{ExpOptions, Report};
use crate::report::{f, Table};
use crate::Result;
use hvio_core::{Nanos, Op, ParamValues, Request, SchedContext, StreamInfo};
use hvio_sched::{Driver, Next};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

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

/// Time spent inside the scheduler and what it did.
struct Cost {
    busy: Duration,
    requests: u64,
    dispatch_calls: u64,
    counters: Vec<(String, f64)>,
}

/// Closed loop: 4 VMs × 2 applications × 16 threads; the device serves a
/// request in 0.15 ms when it continues the previous one, else in 8 ms; a
/// thread issues its next request 40 µs after its completion.
fn replay(name: &str, requests: u64) -> Result<Cost> {
    const IMAGE: u64 = 25_165_824; // 12 GiB in sectors
    const BASE: u64 = 300_000_000;
    let streams = (0..4u32)
        .map(|v| StreamInfo::new(v, format!("vm{}", v + 1)).with_region(BASE + v as u64 * IMAGE, IMAGE))
        .collect();
    let device = super::disk()?.info();
    let ctx = SchedContext { streams, device };
    let mut s = Driver::build(name, &ParamValues::new(), ctx)?;
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
    let mut owner = std::collections::HashMap::new();
    for a in 0..apps.len() {
        for _ in 0..16 {
            arrivals.push(Reverse((0, next_id, a)));
            next_id += 1;
        }
    }
    let mut in_service: Option<(Nanos, Request)> = None;
    let mut last_end = 0;
    let (mut done, mut dispatch_calls) = (0u64, 0u64);
    while done < requests {
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
    Ok(Cost {
        busy,
        requests: done,
        dispatch_calls,
        counters: s.counters(),
    })
}

pub fn run(opts: &ExpOptions) -> Result<Report> {
    // Memory: the vNavigators during the four-VM run.
    let r = simulate(&scenario(opts)?)?;
    let mut mem = Table::new(
        "Memory: Pregather's prediction state per VM (four-VM run, page-cache guests)",
        &["VM", "zones at the end", "peak KiB", "KiB at the end", "paper"],
    );
    let mut total = 0.0;
    for v in &r.vms {
        let c = |k: &str| counter(&r, &format!("{k}.{}", v.vm));
        total += c("model_peak_bytes");
        mem.row(vec![
            v.vm.clone(),
            f(c("zones"), 0),
            f(c("model_peak_bytes") / 1024.0, 2),
            f(c("model_bytes") / 1024.0, 2),
            "—".into(),
        ]);
    }
    mem.row(vec![
        "all VMs".into(),
        "".into(),
        f(total / 1024.0, 2),
        "".into(),
        "< 2148 KiB more free memory used than CFQ".into(),
    ]);

    let n = if opts.quick { 20_000 } else { 300_000 };
    let (have, missing) = registered(&["pregather", "cfq", "deadline", "noop"]);
    let mut cpu = Table::new(
        "CPU: scheduler time per request (closed-loop replay of Table 1's patterns)",
        &[
            "scheduler",
            "requests",
            "dispatch calls",
            "ns / request",
            "ns / dispatch call",
            "vs CFQ",
            "wait success %",
        ],
    );
    let mut costs = Vec::new();
    for name in &have {
        costs.push((name.to_string(), replay(name, n)?));
    }
    let per = |c: &Cost| c.busy.as_nanos() as f64 / c.requests.max(1) as f64;
    let cfq = costs.iter().find(|c| c.0 == "cfq").map(|c| per(&c.1));
    for (name, c) in &costs {
        let success = c.counters.iter().find(|k| k.0 == "wait_success_ratio").map(|k| k.1);
        cpu.row(vec![
            name.clone(),
            c.requests.to_string(),
            c.dispatch_calls.to_string(),
            f(per(c), 0),
            f(c.busy.as_nanos() as f64 / c.dispatch_calls.max(1) as f64, 0),
            cfq.map_or("—".into(), |b| format!("{:.2}×", per(c) / b)),
            success.map_or("—".into(), pct),
        ]);
    }
    let mut notes = vec![
        format!("disk: {DISK} (its seek curve feeds Pregather's estimates)"),
        "paper, Fig. 12: the hypervisor's free memory falls by less than 2148 KB more under Pregather than under CFQ; its CPU utilisation peaks at 20 % against CFQ's 17 % (3 % more)".into(),
        "hvio measures the scheduler itself: the vNavigator's zone map (Pregather's only state beyond CFQ-like queues) and the CPU time spent in the scheduler's calls, a finer measure than the paper's whole-hypervisor utilisation; timings vary with the machine and its load".into(),
    ];
    notes.extend(missing);
    Ok(Report {
        tables: vec![mem, cpu],
        notes,
        data: serde_json::json!({
            "cpu_ns_per_request": costs.iter().map(|(n, c)| (n.clone(), per(c))).collect::<std::collections::BTreeMap<_, _>>(),
            "model_peak_bytes_total": total,
        }),
        ..Default::default()
    })
}

/// The four-VM scenario (`hvio_sim::DEFAULT_SCENARIO`) under Pregather:
/// sysbench's defaults through the guests' page cache (buffered, fsync
/// every 100 requests, ext3 without barriers), 10,000 requests of 16 KiB
/// per application (1,000 when quick).
fn scenario(opts: &ExpOptions) -> Result<Config> {
    let mut cfg = Config::from_toml_str(crate::DEFAULT_SCENARIO, "paper000-four-vms.toml")?;
    cfg.seed = opts.seed;
    cfg.host.scheduler = "pregather".into();
    cfg.host.params.clear();
    cfg.output.locality_bound = true;
    let requests: u64 = if opts.quick { 1000 } else { 10_000 };
    for vm in &mut cfg.vms {
        vm.barrier = false;
        for job in &mut vm.jobs {
            job.requests = Some(requests);
            job.direct = Some(false);
            job.fsync = Some(100);
        }
    }
    Ok(cfg)
}
