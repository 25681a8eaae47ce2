//! The reshaper against hand-computed expectations: paper 001's Fig. 3
//! (four writes become one metadata and one data request) and Fig. 4 (data,
//! then TX start, entries and TX commit), split reads, trims, one cleaning
//! worked by hand, recovery that applies committed and discards uncommitted
//! transactions, checkpoints, and bad input.

mod common;

use common::{base_token, token, Model, Rng};
use hvio_core::Op;
use hvio_reshape::encoding::{decode_checkpoint, decode_tx, Entry, Mapping};
use hvio_reshape::{GuestSlice, IoKind, Payload, Region, ReshapeConfig, ReshapeError, Reshaper, Target};

/// 4 KiB blocks (8 sectors), 64 KiB segments (128 sectors), four segments
/// per region, no base: meta at sector 0, data at 512, log at 1024.
fn fig3_config() -> ReshapeConfig {
    ReshapeConfig {
        block_bytes: 4096,
        base: false,
        meta_region_bytes: 4 << 16,
        data_region_bytes: 4 << 16,
        segment_bytes: 1 << 16,
        log_bytes: 16 * 4096,
        commit_entries: 16,
        ..Default::default()
    }
}

#[test]
fn fig3_batch_issues_one_metadata_and_one_data_request_then_fig4_logs_it() {
    let layout = fig3_config().layout(1 << 20).unwrap();
    assert_eq!((layout.meta.start, layout.data.start, layout.log.start), (0, 512, 1024));
    let mut m = Model::new(layout);
    // Fig. 3: requests 1, 3, 4 are data (image blocks 41, 56, 43), 2 is metadata (24).
    let b = |blk: u64| blk * 8;
    let r1 = m.request(Op::Write, b(41), 8, false, false);
    let r2 = m.request(Op::Write, b(24), 8, true, false);
    let r3 = m.request(Op::Write, b(56), 8, false, false);
    let r4 = m.request(Op::Write, b(43), 8, false, false);
    m.submit(vec![r1, r2, r3, r4]);
    assert_eq!(m.issued.len(), 2, "{:?}", m.issued);
    let (meta, data) = (&m.issued[0], &m.issued[1]);
    assert_eq!(
        (meta.kind, meta.sector, meta.sectors),
        (IoKind::GuestWrite(Region::Meta), 0, 8)
    );
    assert_eq!(
        (data.kind, data.sector, data.sectors),
        (IoKind::GuestWrite(Region::Data), 512, 24)
    );
    let slice = |request, offset| GuestSlice {
        request,
        offset,
        sectors: 8,
    };
    assert_eq!(
        data.payload,
        Payload::Guest(vec![slice(r1.id, 0), slice(r3.id, 0), slice(r4.id, 0)])
    );
    assert!(m.done.is_empty(), "nothing is done before its data is written");
    assert_eq!((m.r.guest_outstanding(), m.r.io_outstanding()), (4, 2));
    m.settle_fifo();
    assert_eq!(m.done, vec![r1.id, r2.id, r3.id, r4.id]);
    let data_table: Vec<_> = m.r.table(Region::Data).iter().map(|e| (e.start, e.target)).collect();
    assert_eq!(
        data_table,
        vec![
            (b(41), Target::At(512)),
            (b(43), Target::At(528)),
            (b(56), Target::At(520))
        ]
    );
    // Nothing logged yet: the transaction commits at a flush (or when full).
    assert_eq!(m.issued.len(), 2);
    let f = m.request(Op::Flush, 0, 0, false, false);
    m.submit(vec![f]);
    assert_eq!(
        m.issued[2].kind,
        IoKind::Flush,
        "the data is made durable before the commit"
    );
    m.complete_at(0);
    let log = m.issued[3].clone();
    assert_eq!(
        (log.kind, log.sector, log.sectors, log.fua),
        (IoKind::Log, 1024, 8, true)
    );
    assert!(!m.done.contains(&f.id), "the flush waits for the commit");
    assert_eq!((m.r.guest_outstanding(), m.r.io_outstanding()), (1, 1));
    let Payload::Bytes(bytes) = &log.payload else {
        panic!("log bytes")
    };
    let at = |t| Mapping::Map(Target::At(t));
    assert_eq!(
        decode_tx(bytes, 1).unwrap(),
        vec![
            Entry {
                start: b(41),
                sectors: 8,
                mapping: at(512)
            },
            Entry {
                start: b(24),
                sectors: 8,
                mapping: at(0)
            },
            Entry {
                start: b(56),
                sectors: 8,
                mapping: at(520)
            },
            Entry {
                start: b(43),
                sectors: 8,
                mapping: at(528)
            },
        ]
    );
    // As the host scheduler sees them: the guest's data write is async, the
    // log write a synchronous FUA write.
    let (req, log_req) = (m.issued[1].request(7, 2, 1000), log.request(8, 2, 1000));
    assert_eq!(
        (req.id, req.stream, req.sector, req.sectors, req.arrival),
        (7, 2, 512, 24, 1000)
    );
    assert_eq!((req.op, req.sync, req.meta, req.fua), (Op::Write, false, false, false));
    assert_eq!(
        (log_req.sync, log_req.fua, m.issued[0].request(9, 2, 0).meta),
        (true, true, true)
    );
    m.complete_at(0);
    assert_eq!(m.done.last(), Some(&f.id));
    let s = m.r.stats();
    assert_eq!(
        (s.guest_write_ios, s.flushes, s.commits, s.log_bytes),
        ([1, 1], 1, 1, 4096)
    );
    // 16 KiB of guest data and one 4 KiB log block.
    assert_eq!(s.write_amplification(), 1.25);
    assert_eq!(m.r.durable_seq(), 1);
}

#[test]
fn reads_split_across_regions_and_the_base_image_and_trims_read_zero() {
    let cfg = ReshapeConfig {
        base: true,
        ..fig3_config()
    };
    let layout = cfg.layout(1 << 20).unwrap();
    let (meta, data) = (layout.meta.start, layout.data.start);
    assert_eq!((meta, data), (2048, 2560));
    let mut m = Model::new(layout);
    let mut rng = Rng(7);
    let w = m.request(Op::Write, 0, 24, false, false);
    m.submit(vec![w]);
    m.settle(&mut rng);
    let w2 = m.request(Op::Write, 8, 8, true, false);
    m.submit(vec![w2]);
    m.settle(&mut rng);
    let before = m.issued.len();
    let got = m.read_now(0, 32, &mut rng);
    let reads: Vec<(u64, u64)> = m.issued[before..].iter().map(|io| (io.sector, io.sectors)).collect();
    assert_eq!(reads, vec![(data, 8), (meta, 8), (data + 16, 8), (24, 8)]);
    let want: Vec<u64> = (0..32)
        .map(|s| match s {
            0..8 | 16..24 => token(w.id, s),
            8..16 => token(w2.id, s),
            _ => base_token(s),
        })
        .collect();
    assert_eq!(got, want);
    // An empty trim completes and leaves the log decodable: a flush commits
    // and a crash recovers everything.
    let empty = m.request(Op::Discard, 40, 0, false, false);
    let f = m.request(Op::Flush, 0, 0, false, false);
    m.submit(vec![empty, f]);
    m.settle(&mut rng);
    assert!(m.done.contains(&empty.id) && m.done.contains(&f.id));
    let report = m.crash(&mut rng);
    assert_eq!(
        (report.transactions_replayed, report.table_extents),
        (1, 3),
        "{report:?}"
    );
    // An empty read inside a mapped extent completes at once, with no I/O
    // (not a zero-length read of the image).
    let before = m.issued.len();
    assert_eq!(m.read_now(10, 0, &mut rng), vec![]);
    assert_eq!(m.issued.len(), before);
    // A trim maps to zeroes: no I/O, and the base image no longer shows through.
    let t = m.request(Op::Discard, 4, 24, false, false);
    m.submit(vec![t]);
    m.settle(&mut rng);
    let before = m.issued.len();
    let got = m.read_now(8, 16, &mut rng);
    assert_eq!(got, vec![0; 16]);
    assert_eq!(m.issued.len(), before, "trimmed sectors are read without I/O");
}

#[test]
fn cleaning_copies_the_valid_sectors_of_the_emptiest_segment() {
    // One-sector blocks, 8-sector segments, four data segments: cleaning starts
    // under two free segments.
    let cfg = ReshapeConfig {
        block_bytes: 512,
        base: false,
        meta_region_bytes: 3 * 4096,
        data_region_bytes: 4 * 4096,
        segment_bytes: 4096,
        log_bytes: 12 * 512,
        commit_entries: 4,
        clean_start: 0.5,
        clean_hard: 0.25,
        ..Default::default()
    };
    let layout = cfg.layout(16 * 512).unwrap();
    let data = layout.data.start;
    let mut m = Model::new(layout);
    let mut rng = Rng(11);
    let a = m.request(Op::Write, 0, 8, false, false);
    m.submit(vec![a]);
    let b = m.request(Op::Write, 8, 8, false, false);
    m.submit(vec![b]);
    m.settle(&mut rng);
    assert_eq!(m.r.free_segments(Region::Data), 2);
    assert_eq!(m.r.stats().segments_cleaned, 0);
    // Overwrite 6 of segment 0's 8 sectors: it is left with 2 valid, segment 1
    // with 8; the overwrite takes segment 2, leaving one free: clean.
    let c = m.request(Op::Write, 0, 6, false, false);
    m.submit(vec![c]);
    m.settle(&mut rng);
    let cleaning: Vec<(IoKind, u64, u64)> = m
        .issued
        .iter()
        .filter(|io| matches!(io.kind, IoKind::CleanRead(_) | IoKind::CleanWrite(_)))
        .map(|io| (io.kind, io.sector, io.sectors))
        .collect();
    assert_eq!(
        cleaning,
        vec![
            (IoKind::CleanRead(Region::Data), data + 6, 2),
            (IoKind::CleanWrite(Region::Data), data + 24, 2),
        ]
    );
    let s = m.r.stats();
    assert_eq!(
        (s.segments_cleaned, s.clean_read_sectors, s.clean_write_sectors),
        (1, 2, 2)
    );
    let copy = m
        .issued
        .iter()
        .find(|io| matches!(io.kind, IoKind::CleanWrite(_)))
        .unwrap();
    assert_eq!(
        copy.request(1, 0, 0).class,
        hvio_core::IoClass::Idle,
        "cleaning is background work"
    );
    let t = m.r.table(Region::Data).lookup(6, 2);
    assert_eq!(t[0].target, Some(Target::At(data + 24)));
    // Segment 0 is free again once the commit recording the move is durable.
    assert_eq!(m.r.free_segments(Region::Data), 1);
    let got = m.read_now(0, 16, &mut rng);
    let want: Vec<u64> = (0..16)
        .map(|s| {
            token(
                if s < 6 {
                    c.id
                } else if s < 8 {
                    a.id
                } else {
                    b.id
                },
                s,
            )
        })
        .collect();
    assert_eq!(got, want);
}

#[test]
fn recovery_applies_committed_and_discards_uncommitted_transactions() {
    let layout = fig3_config().layout(1 << 20).unwrap();
    let mut m = Model::new(layout);
    let mut rng = Rng(3);
    let w1 = m.request(Op::Write, 0, 8, false, false);
    let f1 = m.request(Op::Flush, 0, 0, false, false);
    m.submit(vec![w1, f1]);
    m.settle_fifo();
    assert!(m.done.contains(&f1.id));
    // A second write and flush: the data and the cache flush complete, the
    // commit write does not.
    let w2 = m.request(Op::Write, 0, 8, false, false);
    let f2 = m.request(Op::Flush, 0, 0, false, false);
    m.submit(vec![w2, f2]);
    m.complete_at(0); // data
    m.complete_at(0); // cache flush
    assert_eq!(m.inflight.len(), 1);
    assert_eq!(m.inflight[0].kind, IoKind::Log);
    m.inflight.clear();
    let report = m.crash(&mut rng);
    assert_eq!((report.checkpoint_seq, report.transactions_replayed), (None, 1));
    assert!(report.log_end.is_some());
    assert_eq!(m.read_now(0, 1, &mut rng), vec![token(w1.id, 0)]);
    // The same again with the commit written: applied.
    let w3 = m.request(Op::Write, 0, 8, false, false);
    let f3 = m.request(Op::Flush, 0, 0, false, false);
    m.submit(vec![w3, f3]);
    m.settle_fifo();
    let report = m.crash(&mut rng);
    assert_eq!(report.transactions_replayed, 2);
    assert_eq!(report.table_extents, 1);
    assert_eq!(
        m.read_now(0, 8, &mut rng),
        (0..8).map(|s| token(w3.id, s)).collect::<Vec<_>>()
    );
}

#[test]
fn checkpoints_bound_the_log_and_recovery_starts_from_the_newest() {
    // A log of four one-block transactions: the second commit past half is a checkpoint.
    let cfg = ReshapeConfig {
        log_bytes: 4 * 4096,
        commit_entries: 16,
        ..fig3_config()
    };
    let layout = cfg.layout(1 << 20).unwrap();
    let slots = layout.checkpoints;
    let mut m = Model::new(layout);
    let mut rng = Rng(5);
    let mut last = Vec::new();
    for i in 0..10u64 {
        let w = m.request(Op::Write, i * 8, 8, false, false);
        let f = m.request(Op::Flush, 0, 0, false, false);
        m.submit(vec![w, f]);
        m.settle_fifo();
        last.push(w.id);
    }
    let kinds: Vec<IoKind> = m
        .issued
        .iter()
        .filter(|io| io.kind != IoKind::GuestWrite(Region::Data))
        .map(|io| io.kind)
        .collect();
    let logs = kinds.iter().filter(|k| **k == IoKind::Log).count();
    let checkpoints: Vec<_> = m.issued.iter().filter(|io| io.kind == IoKind::Checkpoint).collect();
    assert_eq!(logs + checkpoints.len(), 10);
    assert!(checkpoints.len() >= 3, "{kinds:?}");
    // Slots alternate.
    assert_eq!(checkpoints[0].sector, slots[0].start);
    assert_eq!(checkpoints[1].sector, slots[1].start);
    let Payload::Bytes(bytes) = &checkpoints[0].payload else {
        panic!()
    };
    let c = decode_checkpoint(bytes).unwrap();
    assert_eq!(c.entries.len(), 1, "ten sequential writes merge into one extent");
    let report = m.crash(&mut rng);
    assert!(report.checkpoint_seq.is_some());
    let got = m.read_now(0, 80, &mut rng);
    assert_eq!(
        got,
        (0..80).map(|s| token(last[(s / 8) as usize], s)).collect::<Vec<_>>()
    );
}

#[test]
fn bad_requests_and_newer_images_are_refused_naming_what_is_wrong() {
    let layout = fig3_config().layout(1 << 20).unwrap();
    let mut r = Reshaper::new(layout.clone());
    let mut ok = hvio_core::Request::new(1, 0, Op::Write, 0, 8, 0);
    ok.meta = true;
    let past = hvio_core::Request::new(2, 0, Op::Write, 2044, 8, 0);
    let e = r.submit(&[ok, past]).unwrap_err();
    assert_eq!(
        e,
        ReshapeError::PastEnd {
            request: 2,
            sector: 2044,
            end: 2052,
            disk: 2048
        }
    );
    assert_eq!(
        e.to_string(),
        "request 2: sectors 2044..2052 are past the end of the disk (2048 sectors)"
    );
    assert_eq!(r.poll(), None, "a refused batch changes nothing");
    let wild = hvio_core::Request::new(4, 0, Op::Read, u64::MAX - 2, 8, 0);
    assert!(matches!(
        r.submit(&[wild]),
        Err(ReshapeError::PastEnd { request: 4, .. })
    ));
    let huge = hvio_core::Request::new(3, 0, Op::Write, 0, 2048, 0);
    assert!(matches!(
        r.submit(&[huge]),
        Err(ReshapeError::TooLarge { request: 3, .. })
    ));
    assert!(matches!(r.complete(99), Err(ReshapeError::UnknownIo(99))));

    let block = 4096;
    let mut ck = hvio_reshape::encoding::encode_checkpoint(1, 0, &[], block);
    ck[4] = 9;
    let slot = vec![0u8; (layout.checkpoints[1].sectors * 512) as usize];
    let log = vec![0u8; (layout.log.sectors * 512) as usize];
    let e = Reshaper::recover(layout.clone(), [&ck, &slot], &log).unwrap_err();
    assert_eq!(
        e.to_string(),
        "checkpoint slot 0: format version 9 is newer than this hvio's (1)"
    );
    let e = Reshaper::recover(layout.clone(), [&slot, &slot], &log[..4096]).unwrap_err();
    assert!(e.to_string().contains("log area"), "{e}");
    // A committed transaction whose entry points into the log area itself.
    let stray = Entry {
        start: 0,
        sectors: 8,
        mapping: Mapping::Map(Target::At(layout.log.start)),
    };
    let tx = hvio_reshape::encoding::encode_tx(1, &[stray], block);
    let mut bad_log = log.clone();
    bad_log[..tx.len()].copy_from_slice(&tx);
    let e = Reshaper::recover(layout.clone(), [&slot, &slot], &bad_log).unwrap_err();
    assert_eq!(
        e.to_string(),
        "log transaction 1 entry 0: image sectors 1024..1032 are outside the metadata and data regions"
    );
    // A malformed entry under a good checksum is corruption, not the end of the log.
    let empty = Entry {
        start: 0,
        sectors: 0,
        mapping: Mapping::Unmap,
    };
    let tx = hvio_reshape::encoding::encode_tx(1, &[empty], block);
    bad_log[..tx.len()].copy_from_slice(&tx);
    let e = Reshaper::recover(layout, [&slot, &slot], &bad_log).unwrap_err();
    assert_eq!(
        e.to_string(),
        "log transaction 1 at block 0: entry 0 is malformed (zero length)"
    );
}

#[test]
fn table_memory_is_counted_per_gib_written() {
    let cfg = ReshapeConfig {
        data_region_bytes: 16 << 16,
        ..fig3_config()
    };
    let layout = cfg.layout(1 << 20).unwrap();
    let mut m = Model::new(layout);
    let mut rng = Rng(9);
    // 64 scattered 4 KiB writes: 64 extents, none adjacent.
    for i in 0..64u64 {
        let w = m.request(Op::Write, (i * 5 % 256) * 8, 8, false, false);
        m.submit(vec![w]);
        m.settle(&mut rng);
    }
    assert!(m.failed.is_empty());
    let extents = m.r.table_extents();
    assert_eq!(extents, 64);
    let bytes = m.r.table_bytes();
    assert_eq!(bytes % extents as u64, 0);
    let per_gib = m.r.table_bytes_per_gib_written();
    // 64 × 4 KiB = 1/4096 GiB written.
    assert_eq!(per_gib, bytes as f64 * 4096.0);
}

#[test]
fn the_same_requests_and_completion_order_give_the_same_io() {
    let run = || {
        let cfg = ReshapeConfig {
            data_region_bytes: 8 << 16,
            ..fig3_config()
        };
        let mut m = Model::new(cfg.layout(1 << 20).unwrap());
        let mut rng = Rng(1234);
        for _ in 0..400 {
            let x = rng.next();
            let start = (x % 250) * 8;
            let op = if x.is_multiple_of(11) { Op::Flush } else { Op::Write };
            let len = if op == Op::Flush {
                0
            } else {
                8 * (1 + (x >> 20) % 4) as u32
            };
            let r = m.request(op, start.min(2048 - 32), len, x.is_multiple_of(3), false);
            m.submit(vec![r]);
            for _ in 0..(x >> 40) % 4 {
                m.step(&mut rng);
            }
        }
        m.settle(&mut rng);
        assert!(m.r.stats().segments_cleaned > 0);
        (m.issued, m.done, m.r.stats().clone())
    };
    assert_eq!(run(), run());
}

#[test]
fn a_lost_checkpoint_falls_back_to_the_other_slot_and_the_log() {
    let cfg = ReshapeConfig {
        log_bytes: 4 * 4096,
        commit_entries: 16,
        ..fig3_config()
    };
    let mut m = Model::new(cfg.layout(1 << 20).unwrap());
    let mut rng = Rng(13);
    let mut written = Vec::new();
    let mut checkpoints = 0;
    for i in 0..40u64 {
        let w = m.request(Op::Write, i * 8, 8, false, false);
        let f = m.request(Op::Flush, 0, 0, false, false);
        m.submit(vec![w, f]);
        if let Some(ck) = m.run_until(|io| io.kind == IoKind::Checkpoint) {
            checkpoints += 1;
            if checkpoints == 2 {
                // The second checkpoint (slot 1) never reaches the disk. (A
                // torn one is refused by its checksum: the encoding's tests.)
                m.tear(ck, 0);
                let report = m.power_cut();
                let Payload::Bytes(first) = &m
                    .issued
                    .iter()
                    .find(|io| io.kind == IoKind::Checkpoint)
                    .unwrap()
                    .payload
                else {
                    panic!()
                };
                let first_seq = decode_checkpoint(first).unwrap().seq;
                assert_eq!(report.checkpoint_seq, Some(first_seq), "{report:?}");
                assert!(report.transactions_replayed > 0, "{report:?}");
                // Every write whose flush completed reads back; the last one
                // (its flush was waiting on the torn checkpoint) may or may not.
                let got = m.read_now(0, (i * 8) as u32, &mut rng);
                let want: Vec<u64> = (0..i * 8).map(|s| token(written[(s / 8) as usize], s)).collect();
                assert_eq!(got, want);
                assert!(m.r.verify().is_empty(), "{:?}", m.r.verify());
                return;
            }
        }
        m.settle_fifo();
        assert!(m.done.contains(&f.id));
        written.push(w.id);
    }
    panic!("only {checkpoints} checkpoints in 40 flushes");
}

#[test]
fn a_crash_in_the_middle_of_cleaning_loses_nothing_flushed() {
    let cfg = ReshapeConfig {
        block_bytes: 512,
        base: false,
        meta_region_bytes: 3 * 4096,
        data_region_bytes: 6 * 4096,
        segment_bytes: 4096,
        log_bytes: 12 * 512,
        commit_entries: 4,
        clean_start: 0.5,
        clean_hard: 0.2,
        ..Default::default()
    };
    let mut m = Model::new(cfg.layout(16 * 512).unwrap());
    let mut rng = Rng(17);
    let mut last = [0u64; 16];
    for round in 0..40u64 {
        let start = (round * 5) % 14;
        let w = m.request(Op::Write, start, 2, false, false);
        let f = m.request(Op::Flush, 0, 0, false, false);
        m.submit(vec![w, f]);
        if let Some(c) = m.run_until(|io| matches!(io.kind, IoKind::CleanWrite(_))) {
            let half = m.inflight[c].sectors / 2;
            m.tear(c, half);
            m.power_cut();
            // This round's write may or may not have survived; every earlier one did.
            let got = m.read_now(0, 16, &mut rng);
            for s in 0..16u64 {
                let this = (start..start + 2).contains(&s) && got[s as usize] == token(w.id, s);
                assert!(
                    this || got[s as usize] == last[s as usize],
                    "sector {s}: {:#x}",
                    got[s as usize]
                );
            }
            assert!(m.r.verify().is_empty(), "{:?}", m.r.verify());
            return;
        }
        m.settle_fifo();
        for s in start..start + 2 {
            last[s as usize] = token(w.id, s);
        }
    }
    panic!("no cleaning in 40 rounds");
}
