//! Kyber, after Linux `block/kyber-iosched.c` (5.x/6.x): a token-based
//! scheduler for fast multi-queue devices that keeps read and write
//! latencies near targets by limiting how many requests of each kind the
//! device holds.
//!
//! - Requests fall into four domains: READ, WRITE, DISCARD, OTHER (any
//!   other operation; a flush never gets here, as the scheduler driver
//!   sends flushes around every scheduler, so in a run OTHER stays empty);
//!   each domain has a FIFO and a token pool whose size (the domain depth)
//!   starts at {256, 128, 64, 16}. A request needs a token to
//!   be dispatched and gives it back on completion.
//! - Dispatch goes round the domains, taking up to a batch of
//!   {16, 8, 1, 1} requests from one domain before moving on.
//! - Completions record total latency (arrival → completion) and I/O latency
//!   (dispatch → completion) in 8-bucket histograms of width target/4 per
//!   domain. 100 ms after a completion (the timer), for each domain with
//!   500 samples or 1 s of history: if any domain's I/O-latency p90 is in a
//!   bucket beyond its target, the device is congested; then every domain's
//!   depth is scaled by `(p99 bucket + 1)/4` of its total latency, which
//!   throttles domains doing well and relaxes those doing badly (without
//!   congestion only the latter are scaled), within [1, initial depth].
//!
//! Note on what Kyber throttles: a domain that misses its own target is
//! given *more* depth (its p99 bucket is ≥ 4); the domains that meet theirs
//! are cut when some domain's device latency is bad. So when writes congest
//! the device and reads miss 2 ms, the write depth shrinks (as long as the
//! writes meet their own, larger, target).
//!
//! Departures (docs/schedulers.md): one software queue per domain instead
//! of per-CPU queues, no merging, no `async_depth` tag limit (75 % of the
//! scheduler tags for async requests); tokens are counts, not sbitmap bits.

use super::SchedulerSpec;
use hvio_core::{ms, s, Dispatch, Nanos, Op, ParamSpec, Params, Request, RequestId, SchedContext, Scheduler};
use std::collections::{HashMap, VecDeque};

/// The registry entry of `kyber`.
pub const SPEC: SchedulerSpec = SchedulerSpec {
    name: "kyber",
    summary: "Linux Kyber: per-domain token depths tuned to read/write latency targets",
    params: PARAMS,
    stream_attrs: &[],
    build,
};

/// Kyber's tunables (Linux `kyber-iosched.c`, sysfs names).
pub static PARAMS: &[ParamSpec] = &[
    ParamSpec::int("read_lat_nsec", 2_000_000.0, "ns", 1.0, 1e12, "read latency target"),
    ParamSpec::int("write_lat_nsec", 10_000_000.0, "ns", 1.0, 1e12, "write latency target"),
];

fn build(p: Params, _: &SchedContext) -> Box<dyn Scheduler> {
    Box::new(Kyber::new(&p))
}

/// The read domain.
pub const READ: usize = 0;
/// The write domain.
pub const WRITE: usize = 1;
/// The discard domain.
pub const DISCARD: usize = 2;
/// Every other operation.
pub const OTHER: usize = 3;
const DOMAINS: usize = 4;
const NAMES: [&str; DOMAINS] = ["read", "write", "discard", "other"];
/// `kyber_depth`: the largest (and initial) depth of each domain.
const MAX_DEPTH: [usize; DOMAINS] = [256, 128, 64, 16];
/// `kyber_batch_size`.
const BATCH: [usize; DOMAINS] = [16, 8, 1, 1];
/// The discard target (fixed in Linux: 5 s).
const DISCARD_TARGET: Nanos = s(5);
/// `KYBER_LATENCY_SHIFT`, `KYBER_GOOD_BUCKETS`, `KYBER_LATENCY_BUCKETS`.
const LATENCY_SHIFT: u32 = 2;
const GOOD_BUCKETS: usize = 1 << LATENCY_SHIFT;
const BUCKETS: usize = 2 << LATENCY_SHIFT;
const TOTAL: usize = 0;
const IO: usize = 1;
/// The timer runs this long after a completion.
const TIMER: Nanos = ms(100);
/// A percentile needs this many samples, or this long since the first.
const MIN_SAMPLES: u64 = 500;
const SAMPLE_WINDOW: Nanos = s(1);

/// `kyber_sched_domain`.
pub fn domain_of(rq: &Request) -> usize {
    match rq.op {
        Op::Read => READ,
        Op::Write => WRITE,
        Op::Discard => DISCARD,
        Op::Flush => OTHER,
    }
}

/// Counters reported by [`Scheduler::counters`].
#[derive(Debug, Default, Clone, Copy)]
pub struct KyberStats {
    /// Timer windows that found a domain over its latency target.
    pub congested: u64,
    /// Domain depth changes.
    pub resizes: u64,
    /// Dispatches refused because a domain had no token.
    pub throttled: u64,
}

/// The Kyber scheduler (Linux `kyber-iosched.c`).
pub struct Kyber {
    targets: [Nanos; DOMAINS],
    fifos: [VecDeque<Request>; DOMAINS],
    depth: [usize; DOMAINS],
    tokens_used: [usize; DOMAINS],
    cur_domain: usize,
    batching: usize,
    /// [domain][total|io][bucket]
    buckets: [[[u64; BUCKETS]; 2]; DOMAINS],
    latency_timeout: [Option<Nanos>; DOMAINS],
    domain_p99: [Option<usize>; DOMAINS],
    timer: Option<Nanos>,
    dispatched_at: HashMap<RequestId, Nanos>,
    queued: usize,
    /// Its counters.
    pub stats: KyberStats,
}

impl Kyber {
    /// A scheduler with tunables `p`.
    pub fn new(p: &Params) -> Self {
        Kyber {
            targets: [p.nanos("read_lat_nsec"), p.nanos("write_lat_nsec"), DISCARD_TARGET, 0],
            fifos: Default::default(),
            depth: MAX_DEPTH,
            tokens_used: [0; DOMAINS],
            cur_domain: READ,
            batching: 0,
            buckets: [[[0; BUCKETS]; 2]; DOMAINS],
            latency_timeout: [None; DOMAINS],
            domain_p99: [None; DOMAINS],
            timer: None,
            dispatched_at: HashMap::new(),
            queued: 0,
            stats: KyberStats::default(),
        }
    }

    /// The current depth of a domain.
    pub fn depth(&self, domain: usize) -> usize {
        self.depth[domain]
    }

    /// `add_latency_sample`: bucket = (latency − 1) / (target/4), capped.
    fn add_sample(&mut self, domain: usize, kind: usize, latency: Nanos) {
        let bucket = if latency > 0 {
            let width = (self.targets[domain] >> LATENCY_SHIFT).max(1);
            (((latency - 1) / width) as usize).min(BUCKETS - 1)
        } else {
            0
        };
        self.buckets[domain][kind][bucket] += 1;
    }

    /// `calculate_percentile`: the bucket holding the percentile, once
    /// there are enough samples (500, or 1 s since the first); resets them.
    fn percentile(&mut self, domain: usize, kind: usize, pct: u64, now: Nanos) -> Option<usize> {
        let b = &mut self.buckets[domain][kind];
        let samples: u64 = b.iter().sum();
        if samples == 0 {
            return None;
        }
        let timeout = *self.latency_timeout[domain].get_or_insert(now + SAMPLE_WINDOW);
        if samples < MIN_SAMPLES && now < timeout {
            return None;
        }
        self.latency_timeout[domain] = None;
        let mut want = (samples * pct).div_ceil(100);
        let mut bucket = 0;
        while bucket < BUCKETS - 1 {
            if b[bucket] >= want {
                break;
            }
            want -= b[bucket];
            bucket += 1;
        }
        *b = [0; BUCKETS];
        Some(bucket)
    }

    /// `kyber_timer_fn`, run at the timer's time.
    fn timer_fired(&mut self, t: Nanos) {
        self.timer = None;
        let mut bad = false;
        for d in 0..OTHER {
            if self.percentile(d, IO, 90, t).is_some_and(|p90| p90 >= GOOD_BUCKETS) {
                bad = true;
            }
        }
        if bad {
            self.stats.congested += 1;
        }
        for (d, &max_depth) in MAX_DEPTH.iter().enumerate().take(OTHER) {
            let mut p99 = self.percentile(d, TOTAL, 99, t);
            // Domains fill their windows at different times: remember a
            // p99 for the next congestion, and use it only once.
            if bad {
                if p99.is_none() {
                    p99 = self.domain_p99[d];
                }
                self.domain_p99[d] = None;
            } else if p99.is_some() {
                self.domain_p99[d] = p99;
            }
            let Some(p99) = p99 else { continue };
            if bad || p99 >= GOOD_BUCKETS {
                let depth = ((self.depth[d] * (p99 + 1)) >> LATENCY_SHIFT).clamp(1, max_depth);
                if depth != self.depth[d] {
                    self.stats.resizes += 1;
                    self.depth[d] = depth;
                }
            }
        }
    }

    fn run_timers(&mut self, now: Nanos) {
        if let Some(t) = self.timer {
            if t <= now {
                self.timer_fired(t);
            }
        }
    }

    /// `kyber_dispatch_cur_domain`: the head of the current domain, if it
    /// can get a token.
    fn dispatch_cur_domain(&mut self) -> Option<Request> {
        let d = self.cur_domain;
        if self.fifos[d].is_empty() {
            return None;
        }
        if self.tokens_used[d] >= self.depth[d] {
            self.stats.throttled += 1;
            return None;
        }
        self.tokens_used[d] += 1;
        self.batching += 1;
        self.fifos[d].pop_front()
    }
}

impl Scheduler for Kyber {
    fn name(&self) -> &'static str {
        "kyber"
    }

    fn insert(&mut self, rq: Request, now: Nanos) {
        self.run_timers(now);
        self.fifos[domain_of(&rq)].push_back(rq);
        self.queued += 1;
    }

    /// `kyber_dispatch_request`: continue the batch, else go round the domains.
    fn dispatch(&mut self, now: Nanos) -> Dispatch {
        self.run_timers(now);
        if self.queued == 0 {
            return Dispatch::Empty;
        }
        let mut got = None;
        if self.batching < BATCH[self.cur_domain] {
            got = self.dispatch_cur_domain();
        }
        if got.is_none() {
            for _ in 0..DOMAINS {
                self.cur_domain = (self.cur_domain + 1) % DOMAINS;
                self.batching = 0;
                got = self.dispatch_cur_domain();
                if got.is_some() {
                    break;
                }
            }
        }
        match got {
            Some(rq) => {
                self.queued -= 1;
                self.dispatched_at.insert(rq.id, now);
                Dispatch::Request(rq)
            }
            // Every queued domain is out of tokens: a completion frees one.
            None => Dispatch::WaitUntil(self.timer.filter(|&t| t > now).unwrap_or(now + TIMER)),
        }
    }

    /// `kyber_completed_request` + `kyber_finish_request`.
    fn completed(&mut self, rq: &Request, now: Nanos) {
        self.run_timers(now);
        let Some(started) = self.dispatched_at.remove(&rq.id) else {
            return;
        };
        let d = domain_of(rq);
        self.tokens_used[d] = self.tokens_used[d].saturating_sub(1);
        if d == OTHER {
            return;
        }
        self.add_sample(d, TOTAL, now.saturating_sub(rq.arrival));
        self.add_sample(d, IO, now.saturating_sub(started));
        let t = now + TIMER;
        self.timer = Some(self.timer.map_or(t, |x| x.min(t)));
    }

    fn has_work(&self) -> bool {
        self.queued > 0
    }

    fn queued(&self) -> usize {
        self.queued
    }

    fn take_queued(&mut self, _now: Nanos) -> Option<Vec<Request>> {
        self.queued = 0;
        Some(self.fifos.iter_mut().flat_map(|f| f.drain(..)).collect())
    }

    fn counters(&self) -> Vec<(String, f64)> {
        let mut v: Vec<(String, f64)> = NAMES
            .iter()
            .zip(self.depth)
            .map(|(n, d)| (format!("depth_{n}"), d as f64))
            .collect();
        v.push(("congested".into(), self.stats.congested as f64));
        v.push(("resizes".into(), self.stats.resizes as f64));
        v.push(("throttled".into(), self.stats.throttled as f64));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{build, counter, run_loaded, Client, Pattern};
    use hvio_core::{us, DeviceInfo};

    fn kyber(over: &[(&str, f64)]) -> Box<dyn Scheduler> {
        let mut dev = DeviceInfo::test_disk(1 << 30);
        dev.rotational = false;
        dev.queue_depth = 64;
        build("kyber", &[], over, dev)
    }

    /// A device whose service time grows with its load (0.5 ms per request
    /// in it), 64 slots. 40 async writers keep the device full, so reads
    /// (2 ms target) see ~20 ms device latency: congestion. 10 s. The writes meet
    /// their 50 ms target, so each timer round scales the write depth by
    /// (p99 bucket + 1)/4 — it shrinks from 128 toward the few requests that
    /// keep reads near 2 ms — while the read domain, itself late, keeps its
    /// full depth. Read latency falls accordingly.
    #[test]
    fn shrinks_the_write_depth_when_reads_miss_their_target() {
        let mut s = kyber(&[("write_lat_nsec", 50e6)]);
        let mut clients: Vec<Client> = (0..40)
            .map(|i| Client::new(i, Pattern::Sequential, (i as u64) << 24).write(false))
            .collect();
        clients.push(Client::new(100, Pattern::Random(3), 1 << 29).outstanding(2));
        let load = |_: &Request, n: usize| us(500) * n as Nanos;
        let out = run_loaded(s.as_mut(), &clients, 64, &load, s_(10));
        let wd = counter(s.as_ref(), "depth_write");
        eprintln!("kyber: {:?}", s.counters());
        assert!(wd <= 8.0, "write depth {wd}, counters {:?}", s.counters());
        assert_eq!(counter(s.as_ref(), "depth_read"), 256.0);
        assert!(counter(s.as_ref(), "congested") > 0.0);
        // Late in the run reads are served in a few ms, not ~20 ms.
        let reads = &out.latency[&Op::Read];
        let tail = &reads[reads.len() * 3 / 4..];
        let mean = tail.iter().sum::<Nanos>() / tail.len() as Nanos;
        let head = &reads[..reads.len() / 10];
        let first = head.iter().sum::<Nanos>() / head.len().max(1) as Nanos;
        eprintln!(
            "kyber read latency: first 10 % {} us, last 25 % {} us",
            first / 1000,
            mean / 1000
        );
        assert!(mean < ms(6), "read latency {} us", mean / 1000);
    }

    /// A domain that misses its own target is not throttled: writes alone,
    /// 20 ms each against a 10 ms target, keep the full write depth.
    #[test]
    fn a_late_domain_keeps_its_depth() {
        let mut s = kyber(&[]);
        let clients: Vec<Client> = (0..8)
            .map(|i| {
                Client::new(i, Pattern::Sequential, (i as u64) << 24)
                    .write(false)
                    .outstanding(4)
            })
            .collect();
        let _ = run_loaded(s.as_mut(), &clients, 64, &|_, _| ms(20), s_(3));
        assert!(counter(s.as_ref(), "congested") > 0.0);
        assert_eq!(counter(s.as_ref(), "depth_write"), 128.0);
    }

    /// Tokens bound what each domain has at the device, and batches
    /// alternate the domains: 16 reads, then 8 writes.
    #[test]
    fn batches_alternate_domains() {
        let mut s = kyber(&[]);
        for i in 0..40 {
            s.insert(Request::new(i, 0, Op::Read, i * 8, 8, 0), 0);
            s.insert(Request::new(100 + i, 0, Op::Write, i * 8, 8, 0).with_sync(false), 0);
        }
        let ops: Vec<Op> = (0..24)
            .map(|_| match s.dispatch(0) {
                Dispatch::Request(r) => r.op,
                other => panic!("{other:?}"),
            })
            .collect();
        assert!(ops[..16].iter().all(|&o| o == Op::Read));
        assert!(ops[16..].iter().all(|&o| o == Op::Write));
    }

    fn s_(v: u64) -> Nanos {
        s(v)
    }
}
