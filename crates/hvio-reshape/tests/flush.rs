//! A FLUSH taken on its own (`Reshaper::flush`) never waits for the
//! cleaner: with writes held for room and a victim's copy in flight, its
//! commit starts at once and it is done when that commit is, while the
//! same FLUSH submitted in a batch waits behind the held write.

mod common;

use common::{Model, Rng};
use hvio_core::Op;
use hvio_reshape::{IoKind, Region, ReshapeConfig};

/// One-sector blocks, six data segments of eight sectors for a disk of
/// 24 sectors; cleaning starts under three free segments and one is kept
/// in reserve.
fn cleaning_model() -> Model {
    let cfg = ReshapeConfig {
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
    };
    Model::new(cfg.layout(24 * 512).unwrap())
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
