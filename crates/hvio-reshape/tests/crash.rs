//! Every read returns the last write to its address, through any sequence of
//! writes (metadata and data, FUA or not), trims, flushes, cleanings and
//! crashes with recovery at any point. A crash keeps an arbitrary subset of
//! the sectors written since the last flush (and of the writes in flight);
//! after recovery a sector may hold its last durable value or any later
//! write to it, and nothing else: never an older value, never another
//! address's data, never log or checkpoint bytes.

mod common;

use common::{base_token, token, Model, Rng};
use hvio_core::{Op, RequestId};
use hvio_reshape::{ReshapeConfig, Victim};
use proptest::prelude::*;

const DISK: u64 = 64;

#[derive(Clone, Debug)]
enum GuestOp {
    Write {
        start: u64,
        sectors: u32,
        meta: bool,
        fua: bool,
    },
    Trim {
        start: u64,
        sectors: u32,
    },
    Flush,
}

#[derive(Clone, Debug)]
enum Step {
    Batch(Vec<GuestOp>),
    Read { start: u64, sectors: u32 },
    Complete(usize),
    Crash,
}

fn guest_op() -> impl Strategy<Value = GuestOp> {
    prop_oneof![
        8 => (0..DISK, 0u32..17, any::<bool>(), prop::bool::weighted(0.1)).prop_map(|(start, sectors, meta, fua)| {
            let sectors = sectors.min((DISK - start) as u32);
            GuestOp::Write { start, sectors, meta, fua }
        }),
        1 => (0..DISK, 0u32..17).prop_map(|(start, sectors)| GuestOp::Trim { start, sectors: sectors.min((DISK - start) as u32) }),
        1 => Just(GuestOp::Flush),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => prop::collection::vec(guest_op(), 1..5).prop_map(Step::Batch),
        2 => (0..DISK, 0u32..17).prop_map(|(start, sectors)| Step::Read { start, sectors: sectors.min((DISK - start) as u32) }),
        6 => (1usize..12).prop_map(Step::Complete),
        1 => Just(Step::Crash),
    ]
}

#[derive(Clone, Copy, Debug)]
struct Version {
    value: u64,
    write: RequestId,
    acked: bool,
    durable: bool,
}

struct Expect {
    history: Vec<Vec<Version>>,
    /// Per flush request, the writes acknowledged when it was submitted.
    flushes: std::collections::HashMap<RequestId, Vec<RequestId>>,
    fua: std::collections::HashSet<RequestId>,
    seen_done: usize,
}

impl Expect {
    fn new(base: bool) -> Self {
        let history = (0..DISK)
            .map(|s| {
                vec![Version {
                    value: if base { base_token(s) } else { 0 },
                    write: 0,
                    acked: true,
                    durable: true,
                }]
            })
            .collect();
        Expect {
            history,
            flushes: Default::default(),
            fua: Default::default(),
            seen_done: 0,
        }
    }

    fn acked_writes(&self) -> Vec<RequestId> {
        let mut out: Vec<RequestId> = self
            .history
            .iter()
            .flatten()
            .filter(|v| v.acked && v.write != 0)
            .map(|v| v.write)
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    fn mark(&mut self, writes: &[RequestId], durable: bool) {
        for h in &mut self.history {
            for v in h.iter_mut() {
                if writes.contains(&v.write) {
                    v.acked = true;
                    v.durable |= durable;
                }
            }
        }
    }

    /// Take note of requests completed since last time.
    fn absorb(&mut self, m: &Model) {
        for &id in &m.done[self.seen_done..] {
            if let Some(covered) = self.flushes.remove(&id) {
                self.mark(&covered, true);
            } else {
                let fua = self.fua.contains(&id);
                self.mark(&[id], fua);
            }
        }
        self.seen_done = m.done.len();
    }
}

/// A tiny image where cleaning and checkpoints happen all the time: 16
/// segments of 8 sectors per region and a log of 12 blocks; blocks of 512
/// bytes (every write is whole blocks) or 4 KiB (most writes are not).
fn config(base: bool, victim: Victim, block_bytes: u64, clean_victims: u32) -> ReshapeConfig {
    ReshapeConfig {
        block_bytes,
        base,
        meta_region_bytes: 16 * 4096,
        data_region_bytes: 16 * 4096,
        segment_bytes: 4096,
        log_bytes: 12 * block_bytes,
        image_bytes: 0,
        commit_entries: 4,
        checkpoint_at: 0.5,
        clean_start: 0.25,
        clean_hard: 0.1,
        victim,
        clean_victims,
    }
}

/// What a run went through, summed over its lives between crashes.
#[derive(Debug, Default)]
struct Coverage {
    crashes: u64,
    segments_cleaned: u64,
    cleaning_jobs: u64,
    checkpoints: u64,
    commits: u64,
    recovered_from_checkpoint: u64,
}

impl Coverage {
    fn add(&mut self, m: &Model) {
        let s = m.r.stats();
        self.segments_cleaned += s.segments_cleaned;
        self.cleaning_jobs += s.cleaning_jobs;
        self.checkpoints += s.checkpoints;
        self.commits += s.commits;
    }
}

fn run(
    steps: Vec<Step>,
    base: bool,
    victim: Victim,
    block_bytes: u64,
    clean_victims: u32,
    seed: u64,
) -> Result<Coverage, TestCaseError> {
    let mut cov = Coverage::default();
    let layout = config(base, victim, block_bytes, clean_victims)
        .layout(DISK * 512)
        .unwrap();
    let mut m = Model::new(layout);
    let mut rng = Rng(seed | 1);
    let mut ex = Expect::new(base);
    let mut reads: Vec<(RequestId, u64, Vec<Option<u64>>)> = Vec::new();
    for step in steps {
        match step {
            Step::Batch(ops) => {
                let mut batch = Vec::new();
                for op in ops {
                    match op {
                        GuestOp::Write {
                            start,
                            sectors,
                            meta,
                            fua,
                        } => {
                            let r = m.request(Op::Write, start, sectors, meta, fua);
                            for s in start..start + sectors as u64 {
                                ex.history[s as usize].push(Version {
                                    value: token(r.id, s),
                                    write: r.id,
                                    acked: false,
                                    durable: false,
                                });
                            }
                            if fua {
                                ex.fua.insert(r.id);
                            }
                            batch.push(r);
                        }
                        GuestOp::Trim { start, sectors } => {
                            let r = m.request(Op::Discard, start, sectors, false, false);
                            for s in start..start + sectors as u64 {
                                ex.history[s as usize].push(Version {
                                    value: 0,
                                    write: r.id,
                                    acked: false,
                                    durable: false,
                                });
                            }
                            batch.push(r);
                        }
                        GuestOp::Flush => {
                            let r = m.request(Op::Flush, 0, 0, false, false);
                            ex.flushes.insert(r.id, ex.acked_writes());
                            batch.push(r);
                        }
                    }
                }
                m.submit(batch);
            }
            Step::Read { start, sectors } => {
                // Expect the last value where every write is acknowledged.
                let want: Vec<Option<u64>> = (start..start + sectors as u64)
                    .map(|s| {
                        let h = &ex.history[s as usize];
                        h.iter().all(|v| v.acked).then(|| h.last().unwrap().value)
                    })
                    .collect();
                let r = m.request(Op::Read, start, sectors, false, false);
                m.submit(vec![r]);
                reads.push((r.id, start, want));
            }
            Step::Complete(n) => {
                for _ in 0..n {
                    m.step(&mut rng);
                }
            }
            Step::Crash => {
                cov.add(&m);
                cov.crashes += 1;
                let report = m.crash(&mut rng);
                cov.recovered_from_checkpoint += report.checkpoint_seq.is_some() as u64;
                let problems = m.r.verify();
                prop_assert!(problems.is_empty(), "invariants broken after recovery: {:?}", problems);
                ex.absorb(&m);
                reads.clear();
                check_after_crash(&mut m, &mut ex, &mut rng)?;
                continue;
            }
        }
        ex.absorb(&m);
        prop_assert!(m.failed.is_empty(), "requests failed: {:?}", m.failed);
        let problems = m.r.verify();
        prop_assert!(problems.is_empty(), "invariants broken: {:?}", problems);
        reads.retain(|(id, start, want)| {
            if !m.done.contains(id) {
                return true;
            }
            let got = m.read_bufs.remove(id).unwrap();
            for (k, (g, w)) in got.iter().zip(want).enumerate() {
                if let Some(w) = w {
                    assert_eq!(g, w, "read {id} of sector {}", start + k as u64);
                }
            }
            false
        });
    }
    m.settle(&mut rng);
    ex.absorb(&m);
    prop_assert_eq!(
        (m.r.guest_outstanding(), m.r.io_outstanding()),
        (0, 0),
        "nothing left once all I/O is done"
    );
    for (id, start, want) in reads {
        let got = m.read_bufs.remove(&id).unwrap();
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            if let Some(w) = w {
                prop_assert_eq!(g, w, "read {} of sector {}", id, start + k as u64);
            }
        }
    }
    let got = m.read_now(0, DISK as u32, &mut rng);
    for (s, g) in got.iter().enumerate() {
        prop_assert_eq!(*g, ex.history[s].last().unwrap().value, "final read of sector {}", s);
    }
    // And one more crash after everything settled and flushed.
    let f = m.request(Op::Flush, 0, 0, false, false);
    ex.flushes.insert(f.id, ex.acked_writes());
    m.submit(vec![f]);
    m.settle(&mut rng);
    ex.absorb(&m);
    cov.add(&m);
    m.crash(&mut rng);
    let got = m.read_now(0, DISK as u32, &mut rng);
    for (s, g) in got.iter().enumerate() {
        prop_assert_eq!(
            *g,
            ex.history[s].last().unwrap().value,
            "read of sector {} after a flush and a crash",
            s
        );
    }
    Ok(cov)
}

fn check_after_crash(m: &mut Model, ex: &mut Expect, rng: &mut Rng) -> Result<(), TestCaseError> {
    let got = m.read_now(0, DISK as u32, rng);
    for (s, g) in got.iter().enumerate() {
        let h = &ex.history[s];
        let last_durable = h.iter().rposition(|v| v.durable).unwrap();
        let allowed: Vec<u64> = h[last_durable..].iter().map(|v| v.value).collect();
        prop_assert!(
            allowed.contains(g),
            "sector {} read {:#x} after a crash; allowed {:x?} (history {:?})",
            s,
            g,
            allowed,
            h
        );
        ex.history[s] = vec![Version {
            value: *g,
            write: 0,
            acked: true,
            durable: true,
        }];
    }
    ex.flushes.clear();
    ex.seen_done = m.done.len();
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn reads_return_the_last_write_through_cleaning_and_crashes(
        steps in prop::collection::vec(step(), 1..80),
        base in any::<bool>(),
        cost_benefit in any::<bool>(),
        big_blocks in any::<bool>(),
        clean_victims in 1u32..=4,
        seed in any::<u64>(),
    ) {
        let victim = if cost_benefit { Victim::CostBenefit } else { Victim::Greedy };
        run(steps, base, victim, if big_blocks { 4096 } else { 512 }, clean_victims, seed)?;
    }
}

/// The property above is only as good as what its runs go through: a long
/// run from a fixed seed must clean, checkpoint, commit and crash many times,
/// and recover from checkpoints.
#[test]
fn a_long_run_cleans_checkpoints_and_recovers_many_times() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let steps = prop::collection::vec(step(), 3000)
        .new_tree(&mut runner)
        .unwrap()
        .current();
    for (base, victim, block, victims) in [
        (false, Victim::Greedy, 512, 1),
        (true, Victim::CostBenefit, 4096, 1),
        (false, Victim::Greedy, 512, 4),
        (true, Victim::CostBenefit, 4096, 4),
    ] {
        let cov = run(steps.clone(), base, victim, block, victims, 42).unwrap();
        eprintln!("base {base}, {victim:?}, {block}-byte blocks, {victims} victims per job: {cov:?}");
        if victims > 1 {
            assert!(
                cov.segments_cleaned > cov.cleaning_jobs,
                "jobs of several victims: {cov:?}"
            );
        }
        assert!(cov.crashes >= 100, "{cov:?}");
        assert!(cov.segments_cleaned >= 100, "{cov:?}");
        assert!(cov.checkpoints >= 20, "{cov:?}");
        assert!(cov.commits >= 100, "{cov:?}");
        assert!(cov.recovered_from_checkpoint >= 20, "{cov:?}");
    }
}
