//! The two callers of the reshaper drive the same state machine: the
//! simulator's host-path stage (`hvio-sim`, `engine/stage/reshape.rs`)
//! submits the requests of one instant as one batch, FLUSH included; the
//! daemon (`hvio-vdisk`, `reshaped.rs`) submits each request on its own and
//! hands a FLUSH to `Reshaper::flush`. One request at a time, both issue the
//! same I/O and leave the same tables, segments, statistics and answers.
//! With several requests per instant they differ where
//! `docs/reshaped-image.md` says: the stage's batch leaves as one write per
//! region (Fig. 3), the cleaner may start between the daemon's requests
//! rather than after the batch (so victims and copies land elsewhere), and
//! a FLUSH behind a write still in flight covers it in the stage (batch
//! order, as virtio) but not in the daemon (only answered writes, as NBD);
//! every sector still reads back the same.

mod common;

use common::{Model, Rng};
use hvio_core::{Op, Request};
use hvio_reshape::{Extent, Region, ReshapeConfig};

#[derive(Clone, Copy, PartialEq)]
enum Driver {
    /// `hvio-sim`'s stage: one batch per instant.
    Stage,
    /// `hvio serve`: one request at a time, FLUSH on its own.
    Daemon,
}

/// Two 32 KiB-segment regions small enough for the cleaner to run.
fn config() -> ReshapeConfig {
    ReshapeConfig {
        block_bytes: 4096,
        base: false,
        meta_region_bytes: 8 << 15,
        data_region_bytes: 16 << 15,
        segment_bytes: 1 << 15,
        log_bytes: 64 * 4096,
        commit_entries: 16,
        clean_start: 0.3,
        clean_hard: 0.1,
        ..Default::default()
    }
}

/// A guest request: operation, first sector, sectors, metadata, FUA.
type Rq = (Op, u64, u32, bool, bool);

/// Random instants of one to `most` requests over a 192 KiB disk: writes
/// (a third metadata, some FUA), trims, reads and FLUSHes.
fn instants(seed: u64, n: usize, most: usize) -> Vec<Vec<Rq>> {
    let mut rng = Rng(seed);
    (0..n)
        .map(|_| {
            (0..1 + rng.below(most))
                .map(|_| {
                    let (sector, sectors) = (8 * rng.below(48) as u64, 8 * (1 + rng.below(3)) as u32);
                    let sectors = sectors.min((384 - sector) as u32);
                    match rng.below(20) {
                        0..=12 => (Op::Write, sector, sectors, rng.below(3) == 0, rng.below(8) == 0),
                        13 => (Op::Discard, sector, sectors, false, false),
                        14..=16 => (Op::Read, sector, sectors, false, false),
                        _ => (Op::Flush, 0, 0, false, false),
                    }
                })
                .collect()
        })
        .collect()
}

/// Drive `instants` as `driver` does; after each instant, complete every
/// I/O in issue order (`settle`: false leaves the last instant's in flight).
fn drive(driver: Driver, instants: &[Vec<Rq>], settle: bool) -> Model {
    let mut m = Model::new(config().layout(384 * 512).unwrap());
    for (i, instant) in instants.iter().enumerate() {
        let batch: Vec<Request> = instant
            .iter()
            .map(|&(op, sector, sectors, meta, fua)| m.request(op, sector, sectors, meta, fua))
            .collect();
        match driver {
            Driver::Stage => m.submit(batch),
            Driver::Daemon => {
                for r in batch {
                    if r.op == Op::Flush {
                        m.requests.insert(r.id, r);
                        m.r.flush(r.id).unwrap();
                        m.drain();
                    } else {
                        m.submit(vec![r]);
                    }
                }
            }
        }
        if settle || i + 1 < instants.len() {
            m.settle_fifo();
        }
    }
    m
}

fn tables(m: &Model) -> [Vec<Extent>; 2] {
    [Region::Meta, Region::Data].map(|r| m.r.table(r).iter().collect())
}

fn answered(m: &Model) -> Vec<u64> {
    let mut a = m.done.clone();
    a.sort_unstable();
    a
}

#[test]
fn one_request_at_a_time_stage_and_daemon_are_the_same_machine() {
    for seed in 1..=20u64 {
        let seq = instants(seed, 400, 1);
        let (stage, daemon) = (drive(Driver::Stage, &seq, true), drive(Driver::Daemon, &seq, true));
        assert!(stage.r.stats().segments_cleaned > 0, "seed {seed}: the cleaner ran");
        assert!(
            stage.issued == daemon.issued,
            "seed {seed}: the same I/O in the same order"
        );
        assert!(tables(&stage) == tables(&daemon), "seed {seed}: the tables differ");
        for region in [Region::Meta, Region::Data] {
            assert_eq!(
                stage.r.free_segments(region),
                daemon.r.free_segments(region),
                "seed {seed}"
            );
        }
        assert_eq!(stage.r.stats(), daemon.r.stats(), "seed {seed}");
        assert_eq!(stage.r.durable_seq(), daemon.r.durable_seq(), "seed {seed}");
        assert_eq!(
            stage.done, daemon.done,
            "seed {seed}: the same answers in the same order"
        );
        assert!(daemon.r.verify().is_empty());
    }
}

#[test]
fn batches_place_differently_but_every_sector_reads_the_same() {
    let mut rng = Rng(5);
    let mut placed_elsewhere = 0;
    for seed in 1..=20u64 {
        let seq = instants(seed, 300, 4);
        let (mut stage, mut daemon) = (drive(Driver::Stage, &seq, true), drive(Driver::Daemon, &seq, true));
        assert!(stage.r.stats().segments_cleaned > 0, "seed {seed}: the cleaner ran");
        assert_eq!(
            answered(&stage),
            answered(&daemon),
            "seed {seed}: the same requests answered"
        );
        let (s, d) = (stage.r.stats(), daemon.r.stats());
        assert_eq!(s.guest_write_sectors, d.guest_write_sectors);
        assert!(
            s.guest_write_ios.iter().sum::<u64>() <= d.guest_write_ios.iter().sum::<u64>(),
            "seed {seed}: a batch's writes leave together"
        );
        assert_eq!(
            stage.read_now(0, 384, &mut rng),
            daemon.read_now(0, 384, &mut rng),
            "seed {seed}: what the disk reads back"
        );
        assert!(stage.r.verify().is_empty() && daemon.r.verify().is_empty());
        placed_elsewhere += usize::from(tables(&stage) != tables(&daemon));
    }
    assert!(placed_elsewhere > 0, "some runs place data differently");
}

/// With a write of the FLUSH's own instant still in flight, the stage's
/// FLUSH waits for it (batch order) and the daemon's does not (the write
/// was not answered when the FLUSH came).
#[test]
fn a_flush_behind_a_write_in_flight_covers_it_only_in_the_stage() {
    let seq = vec![vec![(Op::Write, 0, 8, false, false), (Op::Flush, 0, 0, false, false)]];
    let (stage, daemon) = (drive(Driver::Stage, &seq, false), drive(Driver::Daemon, &seq, false));
    let flush = 2;
    assert!(!stage.done.contains(&flush), "behind the write in its batch");
    assert!(daemon.done.contains(&flush), "nothing answered to cover");
}
