//! A FLUSH taken on its own (`Reshaper::flush`) never waits for the
//! cleaner: with writes held for room and a victim's copy in flight, its
//! commit starts at once and it is done when that commit is, while the
//! same FLUSH submitted in a batch waits behind the held write. And a
//! cleaning job of several victims copies them one at a time and commits
//! once, after the last.

mod common;

use common::{token, Model, Rng};
use hvio_core::Op;
use hvio_reshape::{IoKind, Region, ReshapeConfig};

/// One-sector blocks, six data segments of eight sectors for a disk of
/// 24 sectors; cleaning starts under three free segments and one is kept
/// in reserve.
fn cleaning_model() -> Model {
    Model::new(cleaning_config().layout(24 * 512).unwrap())
}

fn cleaning_config() -> ReshapeConfig {
    ReshapeConfig {
        block_bytes: 512,
        base: false,
        meta_region_bytes: 3 * 4096,
        data_region_bytes: 6 * 4096,
        segment_bytes: 4096,
        log_bytes: 12 * 512,
        commit_entries: 8,
        clean_start: 0.5,
        clean_hard: 0.1,
        ..Default::default()
    }
}

/// Segments 0 to 2 full, an overwrite of six sectors of segment 0 done
/// (not committed), the cleaner reading segment 0's two valid sectors, and
/// an eight-sector write held: it has room for two.
fn busy_cleaner() -> (Model, u64) {
    let mut m = cleaning_model();
    let mut rng = Rng(7);
    let a = m.request(Op::Write, 0, 8, false, false);
    m.submit(vec![a]);
    let b = m.request(Op::Write, 8, 8, false, false);
    m.submit(vec![b]);
    let e = m.request(Op::Write, 16, 8, false, false);
    m.submit(vec![e]);
    m.settle(&mut rng);
    let c = m.request(Op::Write, 0, 6, false, false);
    m.submit(vec![c]);
    let w = m
        .inflight
        .iter()
        .position(|io| io.kind == IoKind::GuestWrite(Region::Data))
        .unwrap();
    m.complete_at(w);
    assert!(m.done.contains(&c.id));
    assert!(m.r.cleaning(Region::Data), "the cleaner copies segment 0");
    assert!(
        m.inflight.iter().all(|io| io.kind == IoKind::CleanRead(Region::Data)),
        "{:?}",
        m.inflight
    );
    let d = m.request(Op::Write, 8, 8, false, false);
    m.submit(vec![d]);
    assert!(m.r.guest_outstanding() > 0 && !m.done.contains(&d.id), "held for room");
    (m, d.id)
}

/// Complete the in-flight commit I/O (cache flush, then log write) only.
fn complete_commits(m: &mut Model) {
    while let Some(i) = m
        .inflight
        .iter()
        .position(|io| matches!(io.kind, IoKind::Flush | IoKind::Log | IoKind::Checkpoint))
    {
        m.complete_at(i);
    }
}

#[test]
fn a_flush_commits_at_once_while_the_cleaner_copies_and_writes_are_held() {
    let (mut m, held) = busy_cleaner();
    let f = m.request(Op::Flush, 0, 0, false, false);
    let waits = m.r.flush(f.id).unwrap();
    m.drain();
    assert_eq!(waits, Some(1), "it waits for the transaction holding the overwrite");
    assert_eq!(m.r.committing(), Some(1), "whose commit has started");
    assert!(m.inflight.iter().any(|io| io.kind == IoKind::Flush));
    complete_commits(&mut m);
    assert!(m.done.contains(&f.id), "done once its commit is");
    assert!(m.r.cleaning(Region::Data), "the copy is still in flight");
    assert!(!m.done.contains(&held), "the held write is not covered and still held");
    assert_eq!(m.r.durable_seq(), 1);
    // Nothing new: a second FLUSH is done at once.
    let g = m.request(Op::Flush, 0, 0, false, false);
    assert_eq!(m.r.flush(g.id).unwrap(), None);
    m.drain();
    assert!(m.done.contains(&g.id));
    m.settle(&mut Rng(3));
    assert!(m.done.contains(&held));
    assert!(m.r.verify().is_empty(), "{:?}", m.r.verify());
}

#[test]
fn the_same_flush_in_a_batch_waits_behind_the_held_write() {
    let (mut m, held) = busy_cleaner();
    let f = m.request(Op::Flush, 0, 0, false, false);
    m.submit(vec![f]);
    complete_commits(&mut m);
    assert!(
        !m.done.contains(&f.id),
        "held behind the write that waits for the cleaner"
    );
    m.settle(&mut Rng(3));
    assert!(m.done.contains(&f.id) && m.done.contains(&held));
}

/// The cleaner's I/O of a run, in issue order, as (kind, segment of the
/// data region) for cleaning and `Flush` for a commit's cache flush.
fn cleaning_and_commits(m: &Model) -> Vec<String> {
    let data = m.layout.data;
    let seg = |s: u64| (s - data.start) / m.layout.segment_sectors;
    m.issued
        .iter()
        .filter_map(|io| match io.kind {
            IoKind::CleanRead(_) => Some(format!("read {}", seg(io.sector))),
            IoKind::CleanWrite(_) => Some(format!("write {}", seg(io.sector))),
            IoKind::Flush => Some("commit".to_string()),
            _ => None,
        })
        .collect()
}

/// Three full data segments, then one batch overwriting two sectors of
/// each, every I/O completed in issue order: the data region falls under
/// `clean_start` and its cleaner runs.
fn overwritten(clean_victims: u32) -> Model {
    let cfg = ReshapeConfig {
        clean_victims,
        ..cleaning_config()
    };
    let mut m = Model::new(cfg.layout(24 * 512).unwrap());
    for start in [0, 8, 16] {
        let w = m.request(Op::Write, start, 8, false, false);
        m.submit(vec![w]);
        m.settle_fifo();
    }
    let batch = [0, 8, 16].map(|start| m.request(Op::Write, start, 2, false, false));
    m.submit(batch.to_vec());
    m.settle_fifo();
    m
}

/// A job of several victims copies them one after another (each copy's
/// reads only after the previous copy's writes) and commits once, after
/// the last; with one victim per job every copy is followed by its commit.
/// Here a job of up to three copies segments 0 and 1 (six valid sectors
/// each) into the cleaner's segments 4 and 5, then stops: segment 2's six
/// would not fit in the four sectors left, so its copy waits for the
/// commit that frees 0 and 1.
#[test]
fn a_job_copies_its_victims_one_after_another_and_commits_once() {
    let mut one = overwritten(1);
    let mut several = overwritten(3);
    let (s1, s3) = (one.r.stats(), several.r.stats());
    assert_eq!(
        cleaning_and_commits(&one),
        ["read 0", "write 4", "commit", "read 1", "write 4", "commit", "read 2", "write 5", "write 0", "commit"]
    );
    assert_eq!((s1.segments_cleaned, s1.cleaning_jobs, s1.commits), (3, 3, 3));
    assert_eq!(
        cleaning_and_commits(&several),
        ["read 0", "write 4", "read 1", "write 4", "commit", "read 2", "write 5", "write 0", "commit"]
    );
    assert_eq!((s3.segments_cleaned, s3.cleaning_jobs, s3.commits), (3, 2, 2));
    // Writes 1 to 3 filled the blocks, 4 to 6 overwrote their first two sectors.
    for m in [&mut one, &mut several] {
        assert!(m.r.verify().is_empty(), "{:?}", m.r.verify());
        for (k, start) in [0u64, 8, 16].into_iter().enumerate() {
            let want: Vec<u64> = (start..start + 8)
                .map(|s| token(if s < start + 2 { 4 } else { 1 } + k as u64, s))
                .collect();
            assert_eq!(m.read_now(start, 8, &mut Rng(1)), want, "block at {start}");
        }
    }
}
