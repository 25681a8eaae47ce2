//! Property tests: write → read round trips, and readers never panic on any input.

use hvio_core::Op;
use hvio_trace::write::{BlkparseWriter, IologWriter};
use hvio_trace::{Format, ReadOptions, RecFlags, TraceReader, TraceRecord};
use proptest::prelude::*;
use std::io::Cursor;

fn arb_records(flags: bool) -> impl Strategy<Value = Vec<TraceRecord>> {
    prop::collection::vec(
        (0u64..5_000_000, 0u32..3, 0u8..4, 0u64..(1 << 40), 1u32..4096, 0u8..32),
        1..60,
    )
    .prop_map(move |v| {
        let mut t = 0;
        v.into_iter()
            .map(|(dt, dev, op, sector, sectors, f)| {
                t += dt * 1000;
                let op = [Op::Read, Op::Write, Op::Discard, Op::Flush][op as usize];
                let mut r = TraceRecord::new(t, dev, op, sector, sectors);
                if op == Op::Flush {
                    r.sector = 0;
                    r.sectors = 0;
                } else if flags {
                    r.flags = RecFlags(
                        f & !RecFlags::PREFLUSH
                            | if f & 1 == 1 && op == Op::Write {
                                RecFlags::PREFLUSH
                            } else {
                                0
                            },
                    );
                }
                r
            })
            .collect()
    })
}

fn read(bytes: Vec<u8>, format: Option<Format>) -> (Vec<TraceRecord>, Vec<String>) {
    let o = ReadOptions {
        format,
        ..Default::default()
    };
    let mut r = TraceReader::from_reader("mem", Box::new(Cursor::new(bytes)), &o).unwrap();
    let v: Vec<TraceRecord> = r.by_ref().collect::<Result<_, _>>().unwrap();
    (v, r.devices().to_vec())
}

/// Devices as the writer names them: ids are renumbered in order of first use.
fn canon(recs: &[TraceRecord], names: &[String]) -> Vec<(u64, String, Op, u64, u32, u8)> {
    recs.iter()
        .map(|r| {
            (
                r.time,
                names[r.device as usize].clone(),
                r.op,
                r.sector,
                r.sectors,
                r.flags.0,
            )
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn blkparse_text_round_trip(recs in arb_records(true)) {
        let names: Vec<String> = (0..3).map(|i| format!("8,{}", i * 16)).collect();
        let mut w = BlkparseWriter::new(Vec::new(), &names);
        for r in &recs { w.write(r).unwrap(); }
        let bytes = w.finish().unwrap();
        let (back, dn) = read(bytes, None);
        prop_assert_eq!(canon(&back, &dn), canon(&recs, &names));
    }

    #[test]
    fn iolog_v3_round_trip(recs in arb_records(false)) {
        let names: Vec<String> = (0..3).map(|i| format!("/dev/vd{}", (b'a' + i) as char)).collect();
        let mut w = IologWriter::new(Vec::new(), &names).unwrap();
        for r in &recs { w.write(r).unwrap(); }
        let bytes = w.finish().unwrap();
        let (back, dn) = read(bytes, None);
        let t0 = recs[0].time;
        let want: Vec<_> = recs.iter().map(|r| { let mut r = *r; r.time -= t0; r }).collect();
        prop_assert_eq!(canon(&back, &dn), canon(&want, &names));
    }

    #[test]
    fn text_readers_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400), f in 0usize..13) {
        let o = ReadOptions { format: Some(Format::ALL[f]), skip_bad: f % 2 == 0, ..Default::default() };
        if let Ok(r) = TraceReader::from_reader("fuzz", Box::new(Cursor::new(bytes)), &o) {
            for x in r.take(1000) { let _ = x; }
        }
    }

    #[test]
    fn mutated_lines_never_panic(line in "[0-9a-zA-Z,. +\\[\\]-]{0,80}", f in 0usize..13) {
        let o = ReadOptions { format: Some(Format::ALL[f]), skip_bad: true, allow_unsorted: true, ..Default::default() };
        let text = format!("{line}\n{line}\n");
        if let Ok(r) = TraceReader::from_reader("fuzz", Box::new(Cursor::new(text.into_bytes())), &o) {
            for x in r { let _ = x; }
        }
    }
}
