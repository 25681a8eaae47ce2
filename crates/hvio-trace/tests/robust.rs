//! Robustness of every trace reader and of the fio job-file parser: valid
//! samples broken by the mutations of [`hvio_trace::mutate`] (bit flips,
//! truncation, duplicated and swapped lines, numbers past 2^63/2^64, 1e308,
//! -1, NaN, empty fields, CRLF, a BOM, bytes that are not UTF-8) must give
//! records or an error naming the input and the line (text) or the record and
//! byte offset (binary): never a panic, an abort or a hang. Whatever is read is
//! also run through the statistics and both writers, and what the writers
//! write must read back.
//!
//! `cargo test -p hvio-trace --test robust` runs a few seconds' worth; the long
//! run is `HVIO_FUZZ_CASES=20000 cargo test -p hvio-trace --test robust -- --ignored`
//! (cases per sample; debug build, so overflow checks are on).

mod common;

use common::{blk, vscsi1, vscsi2};
use hvio_trace::formats::blktrace::{TC_DISCARD, TC_FLUSH, TC_NOTIFY, TC_READ, TC_SHIFT, TC_SYNC, TC_WRITE};
use hvio_trace::stats::StatsBuilder;
use hvio_trace::write::{BlkparseWriter, IologWriter};
use hvio_trace::{mutate, Format, Loc, ReadOptions, TraceError, TraceReader};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use std::io::{Cursor, Write};
use std::path::PathBuf;

fn data(name: &str) -> Vec<u8> {
    std::fs::read(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)).unwrap()
}

fn blktrace_sample(big: bool) -> Vec<u8> {
    let mut out = Vec::new();
    blk(10, 100, 4096, 1 | ((TC_READ | TC_SYNC) << TC_SHIFT), 0).encode(big, &mut out);
    let mut n = blk(11, 0, 0, TC_NOTIFY << TC_SHIFT, 0);
    n.pdu_len = 5;
    n.encode(big, &mut out);
    out.extend_from_slice(b"fio\0\0");
    blk(20, 300, 8192, 1 | (TC_WRITE << TC_SHIFT), 0).encode(big, &mut out);
    blk(30, 0, 0, 1 | ((TC_WRITE | TC_FLUSH) << TC_SHIFT), 0).encode(big, &mut out);
    blk(40, 500, 1 << 20, 1 | ((TC_WRITE | TC_DISCARD) << TC_SHIFT), 0).encode(big, &mut out);
    out
}

fn vscsi_sample(version: u8) -> Vec<u8> {
    let mut v = Vec::new();
    for (cmd, len, lbn, ts) in [
        (0x28u16, 4096u32, 10u64, 5u64),
        (0x12, 0, 0, 6),
        (0x2a, 512, 20, 7),
        (0x35, 0, 0, 9),
    ] {
        v.extend(if version == 1 {
            vscsi1(cmd, len, lbn, ts)
        } else {
            vscsi2(cmd, len, lbn, ts, ts * 3)
        });
    }
    v
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

/// One valid input: its name (as errors must show it), bytes and read options.
struct Sample {
    name: &'static str,
    bytes: Vec<u8>,
    opts: ReadOptions,
}

fn sample(name: &'static str, format: Format, bytes: Vec<u8>) -> Sample {
    Sample {
        name,
        bytes,
        opts: ReadOptions {
            format: Some(format),
            ..Default::default()
        },
    }
}

fn samples() -> Vec<Sample> {
    let mut custom = sample(
        "custom.blkparse",
        Format::Blkparse,
        b"Q 8,0 1.000000100 WS 100 8 [fio one]\nC 8,0 1.5 W 100 8 [x]\nQ 8,0 2.000000000 R 200 16 [fio]\n".to_vec(),
    );
    custom.opts.blkparse_format = Some("%a %D %T.%9t %d %S %n [%C]\\n".into());
    let mut bytes_fmt = sample(
        "bytes.blkparse",
        Format::Blkparse,
        b"8   16  3.5 Q RS 64 4096\n8 16 4.25 Q W 72 512\n".to_vec(),
    );
    bytes_fmt.opts.blkparse_format = Some("%-3M %-3m %T.%t %a %d %S %N\\n".into());
    let mut mq = sample("us.mqsim", Format::Mqsim, data("mqsim.trace"));
    mq.opts.mqsim_time_unit_ns = 1000;
    vec![
        sample("sda.blkparse", Format::Blkparse, data("sda.blkparse")),
        custom,
        bytes_fmt,
        sample("le.blktrace.0", Format::Blktrace, blktrace_sample(false)),
        sample("be.blktrace.0", Format::Blktrace, blktrace_sample(true)),
        sample("job.iolog2", Format::Iolog2, data("job.iolog2")),
        sample("job.iolog3", Format::Iolog3, data("job.iolog3")),
        sample("web.msr.csv", Format::Msr, data("web.msr.csv")),
        sample("web.msr.csv.gz", Format::Msr, gzip(&data("web.msr.csv"))),
        sample("fin.spc", Format::Spc, data("fin.spc")),
        sample("alibaba.csv", Format::Alibaba, data("alibaba.csv")),
        sample("tencent.csv", Format::Tencent, data("tencent.csv")),
        sample("fiu.txt", Format::Fiu, data("fiu.txt")),
        sample("disksim.trace", Format::Disksim, data("disksim.trace")),
        sample("mqsim.trace", Format::Mqsim, data("mqsim.trace")),
        mq,
        sample("v1.vscsi", Format::Vscsi1, vscsi_sample(1)),
        sample("v2.vscsi", Format::Vscsi2, vscsi_sample(2)),
    ]
}

/// An error must name the input, and where in it when it is about a record.
fn check_err(name: &str, e: &TraceError) -> Result<(), String> {
    let msg = e.to_string();
    if !msg.starts_with(&format!("{name}: ")) {
        return Err(format!("error does not start with the input's name {name:?}: {msg}"));
    }
    match e {
        TraceError::Malformed { loc, .. }
        | TraceError::NonMonotonic { loc, .. }
        | TraceError::Truncated { loc, .. } => {
            if *loc == Loc::File {
                return Err(format!("error about a record names no line or byte: {msg}"));
            }
        }
        TraceError::BadMagic { what, .. } => {
            if !what.contains("byte ") {
                return Err(format!("bad magic without a byte offset: {msg}"));
            }
        }
        TraceError::Io { .. } => {
            if !msg.contains("byte ") {
                return Err(format!("read error without a byte offset: {msg}"));
            }
        }
        TraceError::UnknownFormat { .. } => {}
        TraceError::Usage(_) => return Err(format!("a usage error from input data: {msg}")),
    }
    Ok(())
}

/// Reads `bytes` every way (given format and detection, stopping at and
/// skipping bad records), runs the records through stats and both writers,
/// and reads the writers' output back.
fn exercise(name: &str, bytes: &[u8], base: &ReadOptions) -> Result<(), String> {
    for detect in [false, true] {
        for skip_bad in [false, true] {
            let opts = ReadOptions {
                format: if detect { None } else { base.format },
                skip_bad,
                allow_unsorted: skip_bad,
                ..base.clone()
            };
            let mut r = match TraceReader::from_reader(name, Box::new(Cursor::new(bytes.to_vec())), &opts) {
                Ok(r) => r,
                Err(e) => {
                    check_err(name, &e)?;
                    continue;
                }
            };
            let mut stats = StatsBuilder::default();
            let mut bp = BlkparseWriter::new(Vec::new(), &[]);
            let mut io = IologWriter::new(Vec::new(), &[]).unwrap();
            let mut n = 0;
            while let Some(x) = r.next() {
                match x {
                    Ok(rec) => {
                        n += 1;
                        if n > 100_000 {
                            return Err("more records than bytes: a loop?".into());
                        }
                        stats.add(&rec);
                        bp.set_devices(r.devices());
                        bp.write(&rec).unwrap();
                        io.set_devices(r.devices());
                        io.write(&rec).unwrap();
                    }
                    Err(e) => {
                        check_err(name, &e)?;
                        if r.next().is_some() {
                            return Err(format!("records after the error {e}"));
                        }
                        break;
                    }
                }
            }
            let s = stats.finish(name, r.format().name(), r.devices(), r.skipped());
            let _ = s.to_string();
            serde_json::to_string(&s).map_err(|e| format!("stats to JSON: {e}"))?;
            for (fmt, out) in [
                (Format::Blkparse, bp.finish().unwrap()),
                (Format::Iolog3, io.finish().unwrap()),
            ] {
                let o = ReadOptions {
                    format: Some(fmt),
                    allow_unsorted: true,
                    ..Default::default()
                };
                let back = TraceReader::from_reader("written", Box::new(Cursor::new(out.clone())), &o)
                    .map_err(|e| format!("{fmt} output does not open: {e}"))?;
                for x in back {
                    x.map_err(|e| {
                        format!(
                            "{fmt} output does not read back: {e}\n{}",
                            String::from_utf8_lossy(&out)
                        )
                    })?;
                }
            }
        }
    }
    Ok(())
}

/// Up to four mutations in a row.
fn mutations() -> impl Strategy<Value = Vec<(u8, u64, u64)>> {
    prop::collection::vec((0..mutate::KINDS, any::<u64>(), any::<u64>()), 1..=4)
}

fn fuzz_samples(cases: u32) {
    for s in samples() {
        let mut runner = TestRunner::new(Config {
            cases,
            failure_persistence: None,
            ..Config::default()
        });
        let res = runner.run(&mutations(), |muts| {
            let mut b = s.bytes.clone();
            for &(k, a, c) in &muts {
                mutate::apply(&mut b, k, a, c);
            }
            exercise(s.name, &b, &s.opts)
                .map_err(|m| TestCaseError::fail(format!("{m}\ninput: {:?}", String::from_utf8_lossy(&b))))
        });
        if let Err(e) = res {
            panic!("{}: {e}", s.name);
        }
    }
}

#[test]
fn samples_read_cleanly() {
    for s in samples() {
        exercise(s.name, &s.bytes, &s.opts).unwrap_or_else(|e| panic!("{}: {e}", s.name));
        let r = TraceReader::from_reader(s.name, Box::new(Cursor::new(s.bytes.clone())), &s.opts).unwrap();
        let n = r.inspect(|x| assert!(x.is_ok(), "{x:?}")).count();
        assert!(n > 0, "{}: no records", s.name);
    }
}

#[test]
fn every_truncation_of_every_sample() {
    for s in samples() {
        for len in 0..s.bytes.len() {
            exercise(s.name, &s.bytes[..len], &s.opts).unwrap_or_else(|e| panic!("{} cut at {len}: {e}", s.name));
        }
    }
}

#[test]
fn mutated_samples() {
    fuzz_samples(mutate::cases(24));
}

#[test]
#[ignore = "long: HVIO_FUZZ_CASES=20000 cargo test -p hvio-trace --test robust -- --ignored"]
fn mutated_samples_long() {
    fuzz_samples(mutate::cases(5000));
}

#[test]
fn overlong_line_is_skipped_with_skip_bad_not_retried_forever() {
    let mut text = vec![b'7'; 3 * hvio_trace::input::MAX_LINE];
    text.extend_from_slice(b"\n0,303567,3584,w,0.5\n");
    let t2 = text.clone();
    let (n, skipped) = mutate::within(60, move || {
        let o = ReadOptions {
            format: Some(Format::Spc),
            skip_bad: true,
            ..Default::default()
        };
        let mut r = TraceReader::from_reader("long.spc", Box::new(Cursor::new(t2)), &o).unwrap();
        let n = r.by_ref().inspect(|x| assert!(x.is_ok(), "{x:?}")).count();
        (n, r.skipped())
    });
    assert_eq!((n, skipped), (1, 1));
    let o = ReadOptions {
        format: Some(Format::Spc),
        ..Default::default()
    };
    let e = TraceReader::from_reader("long.spc", Box::new(Cursor::new(text)), &o)
        .unwrap()
        .next()
        .unwrap()
        .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("long.spc: line 1: expected text lines shorter"),
        "{e}"
    );
}

// ---- fio job files ----

const JOB: &str = "; a job file with most of what hvio reads\n[global]\nioengine=libaio\ndirect=1\nkb_base=1024\nsize=${HVIO_ROBUST_SIZE}\nruntime=30s\ntime_based\n\n[seq-read]\nrw=read\nbs=128k\niodepth=8\nnumjobs=2\noffset=10%\n\n[mixed]\nrw=randrw:8\nrwmixread=70\nbssplit=4k/50:64k/30:1m,8k\nrandom_distribution=zipf:1.2\nthinktime=250us\nrate_iops=100,50\nfsync=4\nstartdelay=2\nfilename=/dev/vdb\nnrfiles=3\n";

/// A job file's error names the file and a line (`FILE:LINE: option: message`).
fn check_fio_err(dir: &std::path::Path, e: &hvio_trace::fio::FioError) -> Result<(), String> {
    let msg = e.to_string();
    let named = msg.starts_with(&format!("{}/", dir.display()));
    let rest = msg.split_once(".fio:").map(|x| x.1).unwrap_or("");
    let line = rest
        .split(':')
        .next()
        .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
    if named && line {
        Ok(())
    } else {
        Err(format!("fio error without file and line: {msg}"))
    }
}

fn exercise_fio(dir: &std::path::Path, bytes: &[u8]) -> Result<(), String> {
    let p = dir.join("job.fio");
    std::fs::write(&p, bytes).unwrap();
    match hvio_trace::fio::parse_job_file(&p) {
        Ok(f) => {
            serde_json::to_string(&f).map_err(|e| e.to_string())?;
            for w in &f.warnings {
                let _ = w.to_string();
            }
            Ok(())
        }
        Err(e) => check_fio_err(dir, &e),
    }
}

fn fuzz_fio(cases: u32) {
    std::env::set_var("HVIO_ROBUST_SIZE", "64m");
    let dir = tempfile::tempdir().unwrap();
    // An include that exists, and one that includes itself.
    std::fs::write(dir.path().join("inc.fio"), "bs=8k\n").unwrap();
    std::fs::write(dir.path().join("self.fio"), "include self.fio\n").unwrap();
    let job = format!("{JOB}include inc.fio\n[third]\ninclude self.fio\n");
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&mutations(), |muts| {
            let mut b = job.clone().into_bytes();
            for &(k, a, c) in &muts {
                mutate::apply(&mut b, k, a, c);
            }
            exercise_fio(dir.path(), &b)
                .map_err(|m| TestCaseError::fail(format!("{m}\ninput: {:?}", String::from_utf8_lossy(&b))))
        })
        .unwrap();
}

#[test]
fn job_file_sample_parses() {
    std::env::set_var("HVIO_ROBUST_SIZE", "64m");
    let f = hvio_trace::fio::parse_job_str(JOB, "job.fio").unwrap();
    assert_eq!(f.jobs.len(), 2);
}

#[test]
fn mutated_job_files() {
    fuzz_fio(mutate::cases(48));
}

#[test]
#[ignore = "long: HVIO_FUZZ_CASES=20000 cargo test -p hvio-trace --test robust -- --ignored"]
fn mutated_job_files_long() {
    fuzz_fio(mutate::cases(5000));
}

#[test]
fn every_truncation_of_the_job_file() {
    std::env::set_var("HVIO_ROBUST_SIZE", "64m");
    let dir = tempfile::tempdir().unwrap();
    for len in 0..JOB.len() {
        exercise_fio(dir.path(), &JOB.as_bytes()[..len]).unwrap_or_else(|e| panic!("cut at {len}: {e}"));
    }
}

// ---- regressions: one per bug found ----

/// A request at sector 2^64-1 made `trace stats` overflow computing its end
/// and `trace convert --to iolog3` overflow computing its byte offset.
#[test]
fn huge_sector_is_a_line_error_not_an_overflow() {
    let text = b"0,18446744073709551615,4096,r,0.5\n0,100,4096,r,0.6\n".to_vec();
    let o = ReadOptions {
        format: Some(Format::Spc),
        ..Default::default()
    };
    let mut r = TraceReader::from_reader("big.spc", Box::new(Cursor::new(text.clone())), &o).unwrap();
    let e = hvio_trace::trace_stats(&mut r).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("big.spc: line 1: expected a request that ends within 2^64 bytes"),
        "{e}"
    );
    let o = ReadOptions { skip_bad: true, ..o };
    let mut r = TraceReader::from_reader("big.spc", Box::new(Cursor::new(text)), &o).unwrap();
    let s = hvio_trace::trace_stats(&mut r).unwrap();
    assert_eq!((s.requests, s.skipped_bad), (1, 1));
    // The largest request that is read still writes as an iolog.
    let last = hvio_trace::record::MAX_SECTOR_END - 8;
    let text = format!("0,{last},4096,r,0.5\n");
    let r = TraceReader::from_reader("edge.spc", Box::new(Cursor::new(text.into_bytes())), &o).unwrap();
    let mut w = IologWriter::new(Vec::new(), &[]).unwrap();
    for x in r {
        w.write(&x.unwrap()).unwrap();
    }
    let out = String::from_utf8(w.finish().unwrap()).unwrap();
    assert!(out.contains(&format!("read {} 4096", last * 512)), "{out}");
}

/// A corrupt or cut gzip stream was reported without saying where.
#[test]
fn corrupt_gzip_names_the_byte() {
    let mut gz = gzip(&data("web.msr.csv"));
    gz.truncate(gz.len() / 2);
    let o = ReadOptions {
        format: Some(Format::Msr),
        ..Default::default()
    };
    let r = TraceReader::from_reader("cut.csv.gz", Box::new(Cursor::new(gz)), &o).unwrap();
    let e = r.filter_map(|x| x.err()).next().expect("an error");
    assert!(
        e.to_string()
            .starts_with("cut.csv.gz: reading gzip data after decompressed byte "),
        "{e}"
    );
}

/// A blktrace file that does not start with the magic: now says at which byte.
#[test]
fn blktrace_bad_first_magic_names_the_byte() {
    let o = ReadOptions {
        format: Some(Format::Blktrace),
        ..Default::default()
    };
    let r = TraceReader::from_reader("x.blktrace.0", Box::new(Cursor::new(vec![0x41; 48])), &o).unwrap();
    let e = r.filter_map(|x| x.err()).next().unwrap();
    assert!(
        e.to_string().contains("record 0 (byte 0): first word 0x41414141"),
        "{e}"
    );
}

/// A 350 MB job file `bssplit=4k/100:4k/100:...` (50 million entries)
/// overflowed the u32 sum of the percentages (`trace fio` panicked). The sum
/// is u64 now, and a job file over 16 MiB is refused before parsing.
#[test]
fn huge_bssplit_job_file_is_refused_not_overflowed() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("big.fio");
    let list = vec!["4k/100"; 2_500_000].join(":");
    std::fs::write(&p, format!("[j]\nbssplit={list}\n")).unwrap();
    let e = hvio_trace::fio::parse_job_file(&p).unwrap_err();
    assert!(
        e.to_string().ends_with("big.fio: larger than 16 MiB: not a job file"),
        "{e}"
    );
}

/// `random_distribution=zipf:nan` (or inf, or a negative theta) was accepted.
#[test]
fn zipf_theta_must_be_a_positive_number() {
    for v in ["nan", "inf", "-1", "0"] {
        let e = hvio_trace::fio::parse_job_str(&format!("[j]\nrandom_distribution=zipf:{v}\n"), "z.fio").unwrap_err();
        assert!(
            e.to_string().starts_with("z.fio:2: random_distribution: zipf theta"),
            "{v}: {e}"
        );
    }
    assert!(hvio_trace::fio::parse_job_str("[j]\nrandom_distribution=zipf:0.8\n", "z.fio").is_ok());
}

/// `include /dev/zero` read forever (until out of memory).
#[test]
fn include_of_an_endless_file_ends() {
    let e = mutate::within(120, || {
        hvio_trace::fio::parse_job_str("[j]\ninclude /dev/zero\n", "z.fio").unwrap_err()
    });
    assert!(
        e.to_string()
            .starts_with("z.fio:2: include: cannot read /dev/zero: larger than 16 MiB"),
        "{e}"
    );
}

/// A file that includes another ten times, which includes another ten times, ...: 10^14 reads.
#[test]
fn exponential_includes_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..14 {
        std::fs::write(
            dir.path().join(format!("l{i}.fio")),
            format!("include l{}.fio\n", i + 1).repeat(10),
        )
        .unwrap();
    }
    std::fs::write(dir.path().join("l14.fio"), "bs=4k\n").unwrap();
    let top = dir.path().join("top.fio");
    std::fs::write(&top, "[j]\ninclude l0.fio\n").unwrap();
    let e = mutate::within(60, move || hvio_trace::fio::parse_job_file(&top).unwrap_err());
    assert!(e.to_string().contains("include: more than 1024 includes in all"), "{e}");
}

/// A job file with a byte that is not UTF-8 gave "stream did not contain valid UTF-8" without a line.
#[test]
fn non_utf8_job_file_names_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.fio");
    std::fs::write(&p, b"[j]\nrw=read\nname=caf\xe9\n").unwrap();
    let e = hvio_trace::fio::parse_job_file(&p).unwrap_err();
    assert!(e.to_string().ends_with("bad.fio:3: text: byte 20 is not UTF-8"), "{e}");
}

/// A UTF-8 byte-order mark made the first section "an option outside of a [section]".
#[test]
fn job_file_with_a_bom_reads() {
    let f = hvio_trace::fio::parse_job_str("\u{feff}[j]\nrw=write\n", "bom.fio").unwrap();
    assert_eq!(f.jobs[0].rw, hvio_trace::fio::FioRw::Write);
}

/// A mutated `--blkparse-format` (a user's `-f` string) on its sample: a
/// usage error naming the format, or records/errors as for any input.
#[test]
fn mutated_blkparse_formats() {
    let mut runner = TestRunner::new(Config {
        cases: mutate::cases(48),
        failure_persistence: None,
        ..Config::default()
    });
    for s in samples().into_iter().filter(|s| s.opts.blkparse_format.is_some()) {
        let fmt = s.opts.blkparse_format.clone().unwrap();
        runner
            .run(&mutations(), |muts| {
                let mut f = fmt.clone().into_bytes();
                for &(k, a, c) in &muts {
                    mutate::apply(&mut f, k, a, c);
                }
                let f = String::from_utf8_lossy(&f).into_owned();
                let opts = ReadOptions {
                    blkparse_format: Some(f.clone()),
                    ..s.opts.clone()
                };
                match TraceReader::from_reader(s.name, Box::new(Cursor::new(s.bytes.clone())), &opts) {
                    Err(TraceError::Usage(m)) if m.starts_with("blkparse format ") => Ok(()),
                    _ => exercise(s.name, &s.bytes, &opts)
                        .map_err(|m| TestCaseError::fail(format!("{m}\nformat: {f:?}"))),
                }
            })
            .unwrap();
    }
}

/// An endless line (`--format spc /dev/zero`) is an error after 1 MiB, not a
/// read to the end of the line first (which never comes).
#[test]
fn endless_line_is_an_error_without_reading_it_all() {
    let e = mutate::within(60, || {
        let o = ReadOptions {
            format: Some(Format::Spc),
            ..Default::default()
        };
        let mut r = TraceReader::open("/dev/zero", &o).unwrap();
        r.next().unwrap().unwrap_err()
    });
    assert!(
        e.to_string()
            .starts_with("/dev/zero: line 1: expected text lines shorter"),
        "{e}"
    );
}
