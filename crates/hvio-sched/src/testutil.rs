//! A closed-loop driver for the schedulers' unit tests: each client keeps a
//! fixed number of requests outstanding (issuing the next one a think time
//! after a completion), and a device serves up to `depth` requests at once,
//! each for a time given by a service function. It records what the tests
//! check by hand: disk time per stream, dispatch order and every wait.

#![allow(dead_code)] // utilities used by some schedulers' tests only

use crate::driver::{Driver, Next};
use hvio_core::{DeviceInfo, Nanos, Op, ParamValues, Request, SchedContext, Scheduler, Sector, StreamId, StreamInfo};
use std::collections::HashMap;

#[derive(Debug, Clone, Copy)]
pub enum Pattern {
    Sequential,
    /// Uniform over the client's span, from this seed.
    Random(u64),
}

#[derive(Debug, Clone)]
pub struct Client {
    pub stream: StreamId,
    pub outstanding: usize,
    pub think: Nanos,
    pub pattern: Pattern,
    pub op: Op,
    pub sync: bool,
    pub sectors: u32,
    pub start: Sector,
    pub span: Sector,
    /// When the client issues its first requests.
    pub begin: Nanos,
}

impl Client {
    pub fn new(stream: StreamId, pattern: Pattern, start: Sector) -> Self {
        Client {
            stream,
            outstanding: 1,
            think: 0,
            pattern,
            op: Op::Read,
            sync: true,
            sectors: 16,
            start,
            span: 1 << 24,
            begin: 0,
        }
    }
    pub fn begin(mut self, t: Nanos) -> Self {
        self.begin = t;
        self
    }
    pub fn outstanding(mut self, n: usize) -> Self {
        self.outstanding = n;
        self
    }
    pub fn think(mut self, t: Nanos) -> Self {
        self.think = t;
        self
    }
    pub fn write(mut self, sync: bool) -> Self {
        self.op = Op::Write;
        self.sync = sync;
        self
    }
}

#[derive(Debug, Default)]
pub struct Outcome {
    /// Service time the device spent on each stream.
    pub busy: HashMap<StreamId, Nanos>,
    pub completed: HashMap<StreamId, u64>,
    pub sectors: HashMap<StreamId, u64>,
    /// (when, until) of every `WaitUntil`.
    pub waits: Vec<(Nanos, Nanos)>,
    pub dispatches: Vec<(Nanos, Request)>,
    /// Latencies (completion − arrival) by operation.
    pub latency: HashMap<Op, Vec<Nanos>>,
}

impl Outcome {
    pub fn busy(&self, s: StreamId) -> f64 {
        self.busy.get(&s).copied().unwrap_or(0) as f64
    }
    pub fn sectors(&self, s: StreamId) -> f64 {
        self.sectors.get(&s).copied().unwrap_or(0) as f64
    }
}

/// A device that takes `service` ns for every request.
pub fn fixed(service: Nanos) -> impl Fn(&Request) -> Nanos {
    move |_| service
}

struct Gen {
    next_seq: Sector,
    rng: u64,
}

/// Run `clients` against `s` until `until`; `service` gives each request's time.
pub fn run(
    s: &mut dyn Scheduler,
    clients: &[Client],
    depth: usize,
    service: &dyn Fn(&Request) -> Nanos,
    until: Nanos,
) -> Outcome {
    run_loaded(s, clients, depth, &|rq, _| service(rq), until)
}

/// As [`run`], with a service time that depends on the requests in the
/// device (including this one): a device that slows down under load.
pub fn run_loaded(
    s: &mut dyn Scheduler,
    clients: &[Client],
    depth: usize,
    service: &dyn Fn(&Request, usize) -> Nanos,
    until: Nanos,
) -> Outcome {
    let mut out = Outcome::default();
    let mut gens: Vec<Gen> = clients
        .iter()
        .map(|c| Gen {
            next_seq: c.start,
            rng: match c.pattern {
                Pattern::Random(seed) => seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
                Pattern::Sequential => 1,
            },
        })
        .collect();
    // (issue time, client)
    let mut pending: Vec<(Nanos, usize)> = clients
        .iter()
        .enumerate()
        .flat_map(|(i, c)| std::iter::repeat_n((c.begin, i), c.outstanding))
        .collect();
    let mut inflight: Vec<(Nanos, Request)> = Vec::new();
    let mut d = drive(s);
    let mut owner: HashMap<u64, usize> = HashMap::new();
    let mut id = 0u64;
    loop {
        let t = pending
            .iter()
            .map(|p| p.0)
            .chain(inflight.iter().map(|f| f.0))
            .chain(d.wake())
            .min();
        let Some(now) = t else { break };
        if now > until {
            break;
        }
        d.timer_due(now);
        inflight.sort_by_key(|f| f.0);
        while inflight.first().is_some_and(|f| f.0 <= now) {
            let (_, rq) = inflight.remove(0);
            d.completed(&rq, now);
            out.latency.entry(rq.op).or_default().push(now - rq.arrival);
            *out.completed.entry(rq.stream).or_default() += 1;
            *out.sectors.entry(rq.stream).or_default() += rq.sectors as u64;
            let c = owner.remove(&rq.id).expect("request of a client");
            pending.push((now + clients[c].think, c));
        }
        pending.sort();
        while pending.first().is_some_and(|p| p.0 <= now) {
            let (_, c) = pending.remove(0);
            let cl = &clients[c];
            let g = &mut gens[c];
            let sector = match cl.pattern {
                Pattern::Sequential => {
                    let s = g.next_seq;
                    g.next_seq += cl.sectors as Sector;
                    if g.next_seq >= cl.start + cl.span {
                        g.next_seq = cl.start;
                    }
                    s
                }
                Pattern::Random(_) => {
                    g.rng ^= g.rng << 13;
                    g.rng ^= g.rng >> 7;
                    g.rng ^= g.rng << 17;
                    cl.start + (g.rng % (cl.span / cl.sectors as Sector)) * cl.sectors as Sector
                }
            };
            let rq = Request::new(id, cl.stream, cl.op, sector, cl.sectors, now).with_sync(cl.sync);
            owner.insert(id, c);
            id += 1;
            d.insert(rq, now);
        }
        while inflight.len() < depth {
            match d.poll(now) {
                Next::Request(rq) => {
                    let d = service(&rq, inflight.len() + 1);
                    *out.busy.entry(rq.stream).or_default() += d;
                    out.dispatches.push((now, rq));
                    inflight.push((now + d, rq));
                }
                Next::Wait { until, .. } => {
                    assert_eq!(d.stats().past_waits, 0, "WaitUntil({until}) at {now}");
                    out.waits.push((now, until));
                    break;
                }
                Next::Idle => break,
            }
        }
    }
    out
}

/// A driver for scheduler `s`, borrowed (the test inspects it afterwards),
/// with an empty context: the tests here neither switch nor change streams.
fn drive(s: &mut dyn Scheduler) -> Driver<&mut dyn Scheduler> {
    let ctx = SchedContext {
        streams: Vec::new(),
        device: DeviceInfo::test_disk(1 << 31),
    };
    Driver::new(Box::new(s), ctx)
}

/// Build scheduler `name` for streams 0.. with `weights`, parameter
/// overrides `over`, on `device`.
pub fn build(name: &str, weights: &[u32], over: &[(&str, f64)], device: DeviceInfo) -> Box<dyn Scheduler> {
    let o: ParamValues = over.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    let ctx = SchedContext {
        streams: weights
            .iter()
            .enumerate()
            .map(|(i, &w)| StreamInfo::new(i as u32, format!("s{i}")).with_weight(w))
            .collect(),
        device,
    };
    crate::build(name, &o, &ctx).unwrap()
}

/// A scheduler counter by name (NaN if it has none).
pub fn counter(s: &dyn Scheduler, name: &str) -> f64 {
    s.counters()
        .iter()
        .find(|c| c.0 == name)
        .map(|c| c.1)
        .unwrap_or(f64::NAN)
}

/// Drive `s` by hand, one request at the device at a time, each taking
/// `service`, from `start` until `until` or until it has nothing to do
/// (requests are inserted by the caller beforehand): every dispatched
/// request with its dispatch time. A request completes just before the
/// dispatch that follows it.
pub fn serve_serially(s: &mut dyn Scheduler, start: Nanos, until: Nanos, service: Nanos) -> Vec<(Nanos, Request)> {
    let (mut t, mut out) = (start, Vec::new());
    let mut d = drive(s);
    while t < until {
        match d.poll(t) {
            Next::Request(rq) => {
                out.push((t, rq));
                t += service;
                d.completed(&rq, t);
            }
            Next::Wait { until, .. } => t = until,
            Next::Idle => break,
        }
    }
    out
}

/// `n` reads of 8 sectors by `stream` from `sector` on, ids from `id`,
/// all arriving at 0, inserted into `s`.
pub fn insert_reads(s: &mut dyn Scheduler, id: u64, stream: StreamId, sector: Sector, n: u64, prio: u8) {
    for i in 0..n {
        let mut rq = Request::new(id + i, stream, Op::Read, sector + 8 * i, 8, 0);
        rq.prio = prio;
        s.insert(rq, 0);
    }
}
