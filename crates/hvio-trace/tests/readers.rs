//! Every reader on small hand-written samples, detection, gzip, and bad input.

mod common;

use common::{blk, vscsi1, vscsi2};
use hvio_core::Op;
use hvio_trace::formats::blktrace::{MAGIC, TC_DISCARD, TC_FLUSH, TC_NOTIFY, TC_READ, TC_SHIFT, TC_SYNC, TC_WRITE};
use hvio_trace::{BlkAction, Format, Loc, ReadOptions, RecFlags, TraceError, TraceReader, TraceRecord};
use std::io::{Cursor, Write};
use std::path::PathBuf;

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

fn read_all(path: &PathBuf, opts: &ReadOptions) -> (Format, Vec<TraceRecord>, Vec<String>) {
    let mut r = TraceReader::open(path, opts).unwrap_or_else(|e| panic!("{e}"));
    let recs: Vec<TraceRecord> = r.by_ref().collect::<Result<_, _>>().unwrap_or_else(|e| panic!("{e}"));
    (r.format(), recs, r.devices().to_vec())
}

fn mem(bytes: Vec<u8>, opts: &ReadOptions) -> Result<Vec<TraceRecord>, TraceError> {
    TraceReader::from_reader("mem", Box::new(Cursor::new(bytes)), opts)?.collect()
}

#[test]
fn blkparse_default_output() {
    let (f, r, devs) = read_all(&data("sda.blkparse"), &ReadOptions::default());
    assert_eq!(f, Format::Blkparse);
    assert_eq!(r.len(), 7, "{r:#?}");
    assert_eq!(
        (r[0].op, r[0].sector, r[0].sectors, r[0].time),
        (Op::Write, 3417048, 8, 0)
    );
    assert!(r[0].flags.has(RecFlags::SYNC));
    assert_eq!(
        (r[1].op, r[1].sector, r[1].sectors, r[1].time),
        (Op::Read, 1000, 256, 150_000)
    );
    assert!(r[2].flags.has(RecFlags::READAHEAD));
    assert_eq!((r[3].op, r[3].sectors), (Op::Flush, 0));
    assert_eq!(r[4].op, Op::Write);
    assert!(r[4].flags.has(RecFlags::PREFLUSH) && r[4].flags.has(RecFlags::FUA));
    assert_eq!((r[5].op, r[5].sector, r[5].sectors), (Op::Discard, 2048, 2048));
    assert_eq!(devs[r[6].device as usize], "8,16");
    assert_eq!(devs[r[0].device as usize], "8,0");
}

/// blkparse output behind `#` comment lines (the column header some
/// front-ends print): the same requests, and every line that is not one
/// counted by reason.
#[test]
fn blkparse_with_comment_header_lines() {
    let (_, plain, _) = read_all(&data("sda.blkparse"), &ReadOptions::default());
    let mut text =
        b"#Maj,Mn CPU SeqNo        Time   PID Act RWBS Sector + Blocks [Process]\n# traced on sda\n".to_vec();
    text.extend(std::fs::read(data("sda.blkparse")).unwrap());
    let mut r = TraceReader::from_reader("mem", Box::new(Cursor::new(text)), &ReadOptions::default()).unwrap();
    assert_eq!(r.format(), Format::Blkparse);
    let recs: Vec<TraceRecord> = r.by_ref().collect::<Result<_, _>>().unwrap();
    assert_eq!(recs, plain);
    assert_eq!(
        r.skipped_lines(),
        vec![
            ("comment lines (#)".to_string(), 2),
            ("blkparse run-time lines (Input file ...)".to_string(), 2),
            ("summary lines".to_string(), 8),
            ("events other than Q".to_string(), 8),
        ]
    );
    // Without the header, the same minus the comments.
    let mut r = TraceReader::open(data("sda.blkparse"), &ReadOptions::default()).unwrap();
    assert_eq!(r.by_ref().count(), 7);
    assert_eq!(
        r.skipped_lines()[0],
        ("blkparse run-time lines (Input file ...)".to_string(), 2)
    );
    // Under `-a D`, the Q lines are the other events; no line is a D without data.
    let o = ReadOptions {
        blk_action: BlkAction::Issue,
        ..Default::default()
    };
    let mut r = TraceReader::open(data("sda.blkparse"), &o).unwrap();
    assert_eq!(r.by_ref().count(), 1);
    assert!(
        r.skipped_lines().contains(&("events other than D".to_string(), 14)),
        "{:?}",
        r.skipped_lines()
    );
}

#[test]
fn blkparse_issue_and_complete_actions() {
    let o = ReadOptions {
        blk_action: BlkAction::Issue,
        ..Default::default()
    };
    let (_, r, _) = read_all(&data("sda.blkparse"), &o);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].time, 10_214);
    let o = ReadOptions {
        blk_action: BlkAction::Complete,
        ..Default::default()
    };
    let (_, r, _) = read_all(&data("sda.blkparse"), &o);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].time, 300_000);
}

#[test]
fn blkparse_custom_formats() {
    let text = "Q 8,0 1.000000100 WS 100 8 [fio one]\nC 8,0 1.5 W 100 8 [x]\nQ 8,0 2.000000000 R 200 16 [fio]\n";
    let o = ReadOptions {
        format: Some(Format::Blkparse),
        blkparse_format: Some("%a %D %T.%9t %d %S %n [%C]\\n".into()),
        ..Default::default()
    };
    let r = mem(text.into(), &o).unwrap();
    assert_eq!(r.len(), 2);
    assert_eq!(
        (r[0].time, r[0].op, r[0].sector, r[0].sectors),
        (1_000_000_100, Op::Write, 100, 8)
    );
    assert_eq!((r[1].time, r[1].op, r[1].sectors), (2_000_000_000, Op::Read, 16));
    // %N bytes, device by %M/%m, left-aligned widths.
    let o = ReadOptions {
        format: Some(Format::Blkparse),
        blkparse_format: Some("%-3M %-3m %T.%t %a %d %S %N\\n".into()),
        ..Default::default()
    };
    let r = mem("8   16  3.5 Q RS 64 4096\n".into(), &o).unwrap();
    assert_eq!((r[0].time, r[0].sector, r[0].sectors), (3_000_000_005, 64, 8));
    // -F Q,fmt: the other actions keep the default format.
    let o = ReadOptions {
        format: Some(Format::Blkparse),
        blkparse_format: Some("Q,%D %T.%t %a %d %S + %n\\n".into()),
        ..Default::default()
    };
    let text = "8,0 1.000000000 Q W 10 + 8\n  8,0    0        8     0.000300000     0  C  WS 3417048 + 8 [0]\n";
    let r = mem(text.into(), &o).unwrap();
    assert_eq!(r.len(), 1);
    // A format without the fields a request needs is refused up front.
    let o = ReadOptions {
        format: Some(Format::Blkparse),
        blkparse_format: Some("%a %S\\n".into()),
        ..Default::default()
    };
    assert!(matches!(
        TraceReader::from_reader("m", Box::new(Cursor::new(Vec::new())), &o),
        Err(TraceError::Usage(_))
    ));
}

#[test]
fn column_formats() {
    let (f, r, devs) = read_all(&data("web.msr.csv"), &ReadOptions::default());
    assert_eq!(f, Format::Msr);
    assert_eq!(r.len(), 3);
    assert_eq!((r[0].op, r[0].sector, r[0].sectors), (Op::Read, 3154728960 / 512, 8));
    assert_eq!(r[0].latency, Some(316_000));
    assert_eq!(r[1].time - r[0].time, 1_000_000);
    assert_eq!(devs, ["web_0", "web_1"]);

    let (f, r, _) = read_all(&data("fin.spc"), &ReadOptions::default());
    assert_eq!(f, Format::Spc);
    assert_eq!((r[0].op, r[0].sector, r[0].sectors), (Op::Write, 303567, 7));
    assert_eq!((r[2].op, r[2].time), (Op::Read, 26_214_000));

    let (f, r, devs) = read_all(&data("alibaba.csv"), &ReadOptions::default());
    assert_eq!(f, Format::Alibaba);
    assert_eq!((r[1].op, r[1].sector, r[1].sectors), (Op::Read, 24, 16));
    assert_eq!(r[1].time - r[0].time, 140_000);
    assert_eq!(devs, ["419", "3"]);

    let (f, r, _) = read_all(&data("tencent.csv"), &ReadOptions::default());
    assert_eq!(f, Format::Tencent);
    assert_eq!((r[0].op, r[0].sector, r[0].sectors), (Op::Write, 1032, 8));
    assert_eq!(r[1].op, Op::Read);
    assert_eq!(r[2].time - r[0].time, 1_000_000_000);

    let (f, r, devs) = read_all(&data("fiu.txt"), &ReadOptions::default());
    assert_eq!(f, Format::Fiu);
    assert_eq!((r[0].op, r[0].sector, r[0].sectors), (Op::Write, 2135048, 8));
    assert_eq!(r[1].op, Op::Read);
    assert_eq!(devs, ["6,0"]);

    let (f, r, _) = read_all(&data("disksim.trace"), &ReadOptions::default());
    assert_eq!(f, Format::Disksim);
    assert_eq!((r[0].op, r[1].op, r[2].op), (Op::Read, Op::Write, Op::Read));
    assert_eq!((r[1].time, r[2].time), (1_500_000, 2_250_000));

    let (f, r, _) = read_all(&data("mqsim.trace"), &ReadOptions::default());
    assert_eq!(f, Format::Mqsim);
    assert_eq!((r[0].op, r[2].op, r[0].time), (Op::Write, Op::Read, 4_851_300));
    let o = ReadOptions {
        mqsim_time_unit_ns: 1000,
        ..Default::default()
    };
    let (_, r, _) = read_all(&data("mqsim.trace"), &o);
    assert_eq!(r[0].time, 4_851_300_000);
}

#[test]
fn fio_iologs() {
    let (f, r, devs) = read_all(&data("job.iolog2"), &ReadOptions::default());
    assert_eq!(f, Format::Iolog2);
    assert_eq!(
        r.iter().map(|x| x.op).collect::<Vec<_>>(),
        [Op::Write, Op::Read, Op::Discard, Op::Flush]
    );
    assert_eq!((r[0].time, r[1].time), (0, 1_500_000));
    assert_eq!((r[2].sector, r[2].sectors), (2048, 128));
    assert_eq!(devs, ["/dev/sdb"]);
    let (f, r, devs) = read_all(&data("job.iolog3"), &ReadOptions::default());
    assert_eq!(f, Format::Iolog3);
    assert_eq!(r.len(), 3);
    assert_eq!((r[0].time, r[1].time), (12_000, 40_000));
    assert_eq!(
        (r[2].sector, r[2].sectors),
        (1, 2),
        "a 1000-byte read at 512 covers sectors 1 and 2"
    );
    assert_eq!(devs, ["/dev/sdb", "/dev/sdc"]);
}

#[test]
fn gzip_input_is_read_directly() {
    let plain = std::fs::read(data("alibaba.csv")).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&plain).unwrap();
    let bytes = gz.finish().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("io_traces.csv.gz");
    std::fs::write(&p, &bytes).unwrap();
    let (f, r, _) = read_all(&p, &ReadOptions::default());
    assert_eq!(f, Format::Alibaba);
    assert_eq!(r.len(), 3);
}

const Q: u32 = 1;

#[test]
fn blktrace_binary_both_byte_orders() {
    for big in [false, true] {
        let mut out = Vec::new();
        blk(10, 100, 4096, Q | ((TC_READ | TC_SYNC) << TC_SHIFT), 0).encode(big, &mut out);
        // a notify (process name) event with a payload, skipped
        let mut n = blk(11, 0, 0, TC_NOTIFY << TC_SHIFT, 0);
        n.pdu_len = 5;
        n.encode(big, &mut out);
        out.extend_from_slice(b"fio\0\0");
        blk(12, 100, 4096, 7 | (TC_READ << TC_SHIFT), 0).encode(big, &mut out); // D: skipped
        blk(20, 300, 8192, Q | (TC_WRITE << TC_SHIFT), 0).encode(big, &mut out);
        blk(30, 0, 0, Q | ((TC_WRITE | TC_FLUSH) << TC_SHIFT), 0).encode(big, &mut out);
        blk(40, 500, 1 << 20, Q | ((TC_WRITE | TC_DISCARD) << TC_SHIFT), 0).encode(big, &mut out);
        let r = mem(out, &ReadOptions::default()).unwrap();
        assert_eq!(
            r.iter().map(|x| x.op).collect::<Vec<_>>(),
            [Op::Read, Op::Write, Op::Flush, Op::Discard],
            "big endian {big}"
        );
        assert_eq!((r[0].sector, r[0].sectors, r[0].time), (100, 8, 10));
        assert!(r[0].flags.has(RecFlags::SYNC));
        assert_eq!(r[3].sectors, 2048);
    }
}

#[test]
fn blktrace_per_cpu_files_merge_by_time() {
    let dir = tempfile::tempdir().unwrap();
    for cpu in 0..3u32 {
        let mut out = Vec::new();
        for k in 0..4u64 {
            let t = k * 30 + cpu as u64 * 10;
            blk(t, t, 512, Q | (TC_READ << TC_SHIFT), cpu).encode(false, &mut out);
        }
        std::fs::write(dir.path().join(format!("sdb.blktrace.{cpu}")), out).unwrap();
    }
    for name in ["sdb.blktrace.1", "sdb"] {
        let (f, r, devs) = read_all(&dir.path().join(name), &ReadOptions::default());
        assert_eq!(f, Format::Blktrace);
        let times: Vec<u64> = r.iter().map(|x| x.time).collect();
        assert_eq!(times, (0..12).map(|i| i * 10).collect::<Vec<_>>());
        assert_eq!(devs, ["8,16"]);
    }
}

#[test]
fn vscsi_versions() {
    let mut b = vscsi1(0x28, 4096, 10, 5);
    b.extend(vscsi1(0x12, 0, 0, 6)); // INQUIRY: no data
    b.extend(vscsi1(0x2a, 512, 20, 7));
    let r = mem(b, &ReadOptions::default()).unwrap();
    assert_eq!(r.len(), 2);
    assert_eq!((r[0].op, r[0].sector, r[0].sectors, r[0].time), (Op::Read, 10, 8, 5000));
    assert_eq!(r[1].op, Op::Write);
    let mut b = vscsi2(0x88, 8192, 1, 100, 250);
    b.extend(vscsi2(0x8a, 4096, 2, 101, 30));
    let r = mem(b, &ReadOptions::default()).unwrap();
    assert_eq!((r[0].op, r[0].sectors, r[0].latency), (Op::Read, 16, Some(250_000)));
    assert_eq!(r[1].op, Op::Write);
}

#[test]
fn malformed_line_names_file_line_and_expectation() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.csv");
    std::fs::write(&p, "419,W,8192,4096,1577808000000131\n419,X,1,1,1577808000000132\n419,R,-5,1,1577808000000133\n419,R,0,8,1577808000000134\n").unwrap();
    let o = ReadOptions {
        format: Some(Format::Alibaba),
        ..Default::default()
    };
    let mut r = TraceReader::open(&p, &o).unwrap();
    assert!(r.next().unwrap().is_ok());
    let e = r.next().unwrap().unwrap_err();
    match &e {
        TraceError::Malformed {
            path, loc, expected, ..
        } => {
            assert!(path.ends_with("bad.csv"));
            assert_eq!(*loc, Loc::Line(2));
            assert!(expected.contains("R or W"), "{expected}");
        }
        other => panic!("{other}"),
    }
    assert!(e.to_string().contains("bad.csv: line 2: expected R or W"), "{e}");
    assert!(r.next().is_none(), "the reader stops after an error");
    // --skip-bad: count and skip, including the negative offset.
    let o = ReadOptions {
        format: Some(Format::Alibaba),
        skip_bad: true,
        ..Default::default()
    };
    let mut r = TraceReader::open(&p, &o).unwrap();
    let n = r.by_ref().filter(|x| x.is_ok()).count();
    assert_eq!((n, r.skipped()), (2, 2));
}

#[test]
fn non_monotonic_time_is_an_error_unless_allowed() {
    let text = b"0,1,512,r,1.0\n0,2,512,r,0.5\n0,3,512,r,2.0\n".to_vec();
    let e = mem(text.clone(), &ReadOptions::default()).unwrap_err();
    assert!(matches!(e, TraceError::NonMonotonic { loc: Loc::Line(2), .. }), "{e}");
    let o = ReadOptions {
        skip_bad: true,
        ..Default::default()
    };
    assert_eq!(mem(text.clone(), &o).unwrap().len(), 2);
    let o = ReadOptions {
        allow_unsorted: true,
        ..Default::default()
    };
    assert_eq!(mem(text, &o).unwrap().len(), 3);
}

#[test]
fn binary_errors_are_clear() {
    let mut out = Vec::new();
    blk(1, 1, 512, Q | (TC_READ << TC_SHIFT), 0).encode(false, &mut out);
    out.extend_from_slice(&[0x07, 0x74, 0x61, 0x65, 1, 2, 3]);
    let e = mem(out, &ReadOptions::default()).unwrap_err();
    assert!(matches!(e, TraceError::Truncated { got: 7, need: 48, .. }), "{e}");
    let e = mem(
        vec![1u8; 100],
        &ReadOptions {
            format: Some(Format::Blktrace),
            ..Default::default()
        },
    )
    .unwrap_err();
    assert!(matches!(e, TraceError::BadMagic { .. }), "{e}");
    let mut out = Vec::new();
    let mut b = blk(1, 1, 512, Q, 0);
    b.magic = MAGIC | 6;
    b.encode(false, &mut out);
    let e = mem(out, &ReadOptions::default()).unwrap_err();
    assert!(e.to_string().contains("version"), "{e}");
    let mut b = vscsi1(0x28, 4096, 10, 5);
    b.extend(vscsi1(0x28, 4096, 10, 6));
    b.extend_from_slice(&[0; 10]);
    let e = mem(b, &ReadOptions::default()).unwrap_err();
    assert!(matches!(e, TraceError::Truncated { got: 10, need: 32, .. }), "{e}");
    let e = mem(vec![0xff; 64], &ReadOptions::default()).unwrap_err();
    assert!(matches!(e, TraceError::UnknownFormat { .. }), "{e}");
    let e = mem(b"hello world\n".to_vec(), &ReadOptions::default()).unwrap_err();
    assert!(e.to_string().contains("hello world"), "{e}");
}

#[test]
fn explicit_format_overrides_detection() {
    // DiskSim with integer times looks like MQSim; name it.
    let text = b"0 0 1000 8 1\n5 0 2000 8 0\n".to_vec();
    let r = mem(text.clone(), &ReadOptions::default()).unwrap();
    assert_eq!(r[1].time, 5, "integer times detect as MQSim (nanoseconds)");
    let r = mem(
        text,
        &ReadOptions {
            format: Some(Format::Disksim),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!((r[0].op, r[1].time), (Op::Read, 5_000_000));
    assert_eq!("VSCSI".parse::<Format>().unwrap(), Format::Vscsi1);
    assert!("nope".parse::<Format>().is_err());
}

#[test]
fn prefetch_yields_the_same_records_and_the_error() {
    let (_, direct, _) = read_all(&data("sda.blkparse"), &ReadOptions::default());
    let r = TraceReader::open(data("sda.blkparse"), &ReadOptions::default()).unwrap();
    let mut p = r.prefetch(3);
    let got: Vec<TraceRecord> = p.by_ref().map(|x| x.unwrap()).collect();
    assert_eq!(got, direct);
    let back = p.finish().unwrap();
    assert_eq!(back.devices(), ["8,0", "8,16"]);
    let bad = b"0,1,512,r,1.0\nbad line\n0,3,512,r,2.0\n".to_vec();
    let r = TraceReader::from_reader("m", Box::new(Cursor::new(bad)), &ReadOptions::default()).unwrap();
    let v: Vec<_> = r.prefetch(10).collect();
    assert_eq!(v.len(), 2);
    assert!(v[1].is_err());
}
