//! Robustness of `hvio validate-disk`'s inputs: the DiskSim parameter files
//! (`.parv`, `.diskspecs`, `.model`, the extracted seek curve) and the
//! validation trace, broken by the mutations of `hvio_trace::mutate` (bit
//! flips, truncation, duplicated lines, huge numbers, NaN, empty fields, CRLF,
//! a BOM, bytes that are not UTF-8). Each must load and replay, or fail with an
//! error naming the file (and the line, for a syntax or key error): never a
//! panic, an abort or a hang.
//!
//! `cargo test -p hvio-device --test disksim_robust` runs a few seconds' worth;
//! the long run: `HVIO_FUZZ_CASES=5000 cargo test -p hvio-device --test disksim_robust -- --ignored`.

use hvio_device::disksim::{load_disk, read_spec, LoadOptions, SpecError};
use hvio_device::validate::{validate, DisksimRuns, ValidateError};
use hvio_trace::mutate;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use std::path::{Path, PathBuf};

mod common;

/// The real-disk data; only called by tests that checked [`common::have_hdd_validation`].
fn shared() -> PathBuf {
    common::hdd_validation().expect("checked by have_hdd_validation")
}

/// The files of one disk: (name, bytes); the first is the top-level `.parv`,
/// the last the validation trace (its first 60 requests).
fn disk_files(disk: &str) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for f in std::fs::read_dir(shared()).unwrap() {
        let p = f.unwrap().path();
        let name = p.file_name().unwrap().to_str().unwrap().to_string();
        let stem_ok = name.starts_with(disk);
        let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
        if stem_ok && matches!(ext, "parv" | "diskspecs" | "model" | "seek") {
            out.push((name, std::fs::read(&p).unwrap()));
        }
    }
    out.sort_by_key(|(n, _)| !n.ends_with(".parv"));
    let trace = std::fs::read_to_string(shared().join(format!("{disk}.trace"))).unwrap();
    let head: String = trace.lines().take(60).map(|l| format!("{l}\n")).collect();
    out.push((format!("{disk}.trace"), head.into_bytes()));
    out
}

/// A fresh directory under the target directory.
fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hvio-disksim-robust-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn check_spec_err(dir: &Path, e: &SpecError) -> Result<(), String> {
    let msg = e.to_string();
    let d = dir.display().to_string();
    let ok = match e {
        SpecError::Syntax { file, line, .. } | SpecError::Key { file, line, .. } => file.starts_with(&d) && *line > 0,
        SpecError::File { file, .. } => file.starts_with(&d),
    };
    if ok {
        Ok(())
    } else {
        Err(format!("error without the file (and line): {msg}"))
    }
}

/// Loads the disk and replays the trace; any error must say where.
fn exercise(dir: &Path, files: &[(String, Vec<u8>)]) -> Result<(), String> {
    for (n, b) in files {
        std::fs::write(dir.join(n), b).unwrap();
    }
    let top = dir.join(&files[0].0);
    let trace = dir.join(&files.last().unwrap().0);
    if let Err(e) = read_spec(&top) {
        return check_spec_err(dir, &e);
    }
    if let Err(e) = load_disk(&top, None) {
        return check_spec_err(dir, &e);
    }
    match validate(&top, None, &trace, &LoadOptions::default()) {
        Ok(v) => {
            let _ = v.to_string();
            Ok(())
        }
        Err(ValidateError::Spec(e)) => check_spec_err(dir, &e),
        Err(e @ ValidateError::Trace { .. }) | Err(e @ ValidateError::File { .. }) => {
            let msg = e.to_string();
            if msg.starts_with(&dir.display().to_string()) {
                Ok(())
            } else {
                Err(format!("trace error without the file: {msg}"))
            }
        }
        Err(e @ ValidateError::SameFile(_)) => Err(format!("validate writes no file: {e}")),
    }
}

fn fuzz(cases: u32) {
    for disk in ["hp_c2247a", "ibm18es"] {
        let files = disk_files(disk);
        let dir = scratch(disk);
        let n = files.len();
        let strategy = (
            0..n,
            prop::collection::vec((0..mutate::KINDS, any::<u64>(), any::<u64>()), 1..=4),
        );
        let mut runner = TestRunner::new(Config {
            cases,
            failure_persistence: None,
            ..Config::default()
        });
        let res = runner.run(&strategy, |(which, muts)| {
            let mut f = files.clone();
            for &(k, a, b) in &muts {
                mutate::apply(&mut f[which].1, k, a, b);
            }
            let t0 = std::time::Instant::now();
            if std::env::var("HVIO_FUZZ_TRACE").is_ok() {
                eprintln!("START {} {:?}", f[which].0, muts);
            }
            let r = exercise(&dir, &f);
            if t0.elapsed().as_secs_f64() > 2.0 {
                eprintln!("SLOW {:.1}s {} {:?}", t0.elapsed().as_secs_f64(), f[which].0, muts);
            }
            r.map_err(|m| TestCaseError::fail(format!("{} mutated: {m}", f[which].0)))
        });
        std::fs::remove_dir_all(&dir).ok();
        if let Err(e) = res {
            panic!("{disk}: {e}");
        }
    }
}

#[test]
fn shared_disks_load_and_replay() {
    if !common::have_hdd_validation() {
        return;
    }
    for disk in ["hp_c2247a", "ibm18es"] {
        let dir = scratch(&format!("{disk}-clean"));
        exercise(&dir, &disk_files(disk)).unwrap();
        assert!(load_disk(&dir.join(format!("{disk}.parv")), None).is_ok());
        std::fs::remove_dir_all(&dir).ok();
    }
}

#[test]
fn mutated_disks() {
    if !common::have_hdd_validation() {
        return;
    }
    fuzz(mutate::cases(16));
}

#[test]
#[ignore = "long: HVIO_FUZZ_CASES=5000 cargo test -p hvio-device --test disksim_robust -- --ignored"]
fn mutated_disks_long() {
    if !common::have_hdd_validation() {
        return;
    }
    fuzz(mutate::cases(2000));
}

/// Every 7th truncation of the HP disk's `.diskspecs` (410 loads).
#[test]
fn every_truncation_of_a_diskspecs() {
    if !common::have_hdd_validation() {
        return;
    }
    let files = disk_files("hp_c2247a");
    let dir = scratch("cut");
    let i = files.iter().position(|(n, _)| n.ends_with(".diskspecs")).unwrap();
    for len in (0..files[i].1.len()).step_by(7) {
        let mut f = files.clone();
        f[i].1.truncate(len);
        exercise(&dir, &f).unwrap_or_else(|e| panic!("cut at {len}: {e}"));
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// Every number of every parameter file replaced by each weird value in turn.
fn sweep_numbers(disk: &str) {
    let files = disk_files(disk);
    let dir = scratch(&format!("{disk}-sweep"));
    let nw = mutate::WEIRD_NUMBERS.len() as u64;
    for i in 0..files.len() - 1 {
        let count = {
            let mut probe = files[i].1.clone();
            let before = probe.clone();
            let mut k = 0u64;
            loop {
                probe.clone_from(&before);
                mutate::apply(&mut probe, 6, k, 0);
                if k > 0
                    && probe == {
                        let mut p0 = before.clone();
                        mutate::apply(&mut p0, 6, 0, 0);
                        p0
                    }
                {
                    break k;
                }
                k += 1;
            }
        };
        for k in 0..count {
            for w in 0..nw {
                let mut f = files.clone();
                mutate::apply(&mut f[i].1, 6, k, w);
                if std::env::var("HVIO_FUZZ_TRACE").is_ok() {
                    eprintln!("START {} number {k} -> {:?}", f[i].0, mutate::WEIRD_NUMBERS[w as usize]);
                }
                exercise(&dir, &f).unwrap_or_else(|e| {
                    panic!("{} number {k} -> {:?}: {e}", f[i].0, mutate::WEIRD_NUMBERS[w as usize])
                });
            }
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
#[ignore = "slow: every number of both disks' files replaced by each weird value"]
fn weird_numbers_everywhere() {
    if !common::have_hdd_validation() {
        return;
    }
    sweep_numbers("hp_c2247a");
    sweep_numbers("ibm18es");
}

// ---- regressions: one per bug found ----

/// The HP disk's files in a scratch directory with `from` replaced by `to` in
/// `file`; returns the directory.
fn hp_with(tag: &str, file: &str, from: &str, to: &str) -> PathBuf {
    let dir = scratch(tag);
    for (n, mut b) in disk_files("hp_c2247a") {
        if n == file {
            let t = String::from_utf8(b).unwrap();
            assert!(t.contains(from), "{file} has no {from:?}");
            b = t.replacen(from, to, 1).into_bytes();
        }
        std::fs::write(dir.join(n), b).unwrap();
    }
    dir
}

/// The load error of the HP disk with one change.
fn hp_error(tag: &str, file: &str, from: &str, to: &str) -> String {
    let dir = hp_with(tag, file, from, to);
    let e = load_disk(&dir.join("hp_c2247a.parv"), None).unwrap_err().to_string();
    std::fs::remove_dir_all(&dir).ok();
    e
}

/// `[[[[...` 100,000 deep overflowed the stack (an abort, not even a panic).
#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let text = format!("disksim_disk D {{\n A = {}\n}}\n", "[".repeat(100_000));
    let e = mutate::within(60, move || {
        hvio_device::disksim::parse::parse_spec(&text, Path::new("/x/deep.parv"), 0).unwrap_err()
    });
    assert!(
        e.to_string()
            .starts_with("/x/deep.parv:2: key `A`: lists and blocks nested more than 64 deep"),
        "{e}"
    );
}

/// Ten files each sourcing the next ten times: 10^10 reads without a loop.
#[test]
fn exponential_source_includes_are_bounded() {
    let dir = scratch("exp");
    for i in 0..10 {
        std::fs::write(
            dir.join(format!("l{i}.parv")),
            format!("source l{}.parv\n", i + 1).repeat(10),
        )
        .unwrap();
    }
    std::fs::write(dir.join("l10.parv"), "").unwrap();
    let top = dir.join("l0.parv");
    let e = mutate::within(60, move || read_spec(&top).unwrap_err());
    assert!(e.to_string().contains("more than 1024 includes in all"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}

/// `source /dev/zero` read until out of memory.
#[test]
fn source_of_an_endless_file_ends() {
    let e = mutate::within(120, || {
        hvio_device::disksim::parse::parse_spec("source /dev/zero\n", Path::new("/x/z.parv"), 0).unwrap_err()
    });
    assert!(
        e.to_string()
            .starts_with("/x/z.parv:1: `source /dev/zero`: larger than 16 MiB"),
        "{e}"
    );
}

/// An extracted seek curve whose header claims 2^60 distances reserved them
/// (capacity overflow / out of memory) before reading any.
#[test]
fn seek_table_header_count_is_not_trusted_for_memory() {
    let dir = scratch("seek");
    let p = dir.join("t.seek");
    std::fs::write(&p, "Seek distances measured: 1152921504606846976\n1, 1.0\n").unwrap();
    let e = hvio_device::disksim::parse::read_seek_table(&p).unwrap_err();
    assert!(
        e.to_string()
            .contains("t.seek:1: header says 1152921504606846976 distances, file has 1"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// `Max queue length = 1e300` reserved a queue of usize::MAX entries (capacity overflow).
#[test]
fn huge_queue_length_is_a_key_error() {
    if !common::have_hdd_validation() {
        return;
    }
    let e = hp_error(
        "depth",
        "hp_c2247a.diskspecs",
        "Max queue length = 1,",
        "Max queue length = 1e300,",
    );
    assert!(
        e.contains("hp_c2247a.diskspecs:18: key `Max queue length`: ")
            && e.contains("must be a number of at most 1024"),
        "{e}"
    );
}

/// A bus block transfer time of 2^63 ms saturated the clock and the replay never ended.
#[test]
fn huge_transfer_time_is_a_key_error_not_a_hang() {
    if !common::have_hdd_validation() {
        return;
    }
    let e = mutate::within(60, || {
        hp_error(
            "bus",
            "hp_c2247a.parv",
            "Read block transfer time = 0.0,",
            "Read block transfer time = 9223372036854775807,",
        )
    });
    assert!(
        e.contains(
            "hp_c2247a.parv:84: key `Read block transfer time`: 9223372036854776000 must be a number between 0 and 1"
        ),
        "{e}"
    );
}

/// A seek curve going negative (HPL b1 = -1) made a completion end before it started.
#[test]
fn negative_seek_time_is_a_key_error() {
    if !common::have_hdd_validation() {
        return;
    }
    let e = hp_error("neg", "hp_c2247a_validate.model", "0.330000", "-1");
    assert!(
        e.contains("hp_c2247a_validate.model:156: key `Seek type`: the seek curve gives -"),
        "{e}"
    );
}

/// Cylinders, surfaces and blocks per track of 1e300 overflowed the zone's sector count.
#[test]
fn huge_geometry_is_a_key_error() {
    if !common::have_hdd_validation() {
        return;
    }
    let e = hp_error(
        "cyl",
        "hp_c2247a_validate.model",
        "Number of cylinders = 2051,",
        "Number of cylinders = 1e300,",
    );
    assert!(
        e.contains("hp_c2247a_validate.model:3: key `Number of cylinders`: ")
            && e.contains("must be between 1 and 4294967295"),
        "{e}"
    );
    let e = hp_error(
        "spt",
        "hp_c2247a_validate.model",
        "Blocks per track = 96,",
        "Blocks per track = nan,",
    );
    assert!(
        e.contains("key `First cylinder number`: zone 0..=558 with NaN blocks per track"),
        "{e}"
    );
}

/// Per-track spares (scheme 3) on a zone of 2^32 one-sector tracks looped
/// 2^32 times scanning every slip, pushing a hole for each (a hang, then out of memory).
#[test]
fn spare_regions_are_bounded() {
    if !common::have_hdd_validation() {
        return;
    }
    let dir = hp_with(
        "spares",
        "hp_c2247a_validate.model",
        "Sparing scheme used = 1,",
        "Sparing scheme used = 3,",
    );
    let m = dir.join("hp_c2247a_validate.model");
    let t = std::fs::read_to_string(&m).unwrap();
    let t = t
        .replacen("Number of data surfaces = 13,", "Number of data surfaces = 1024,", 1)
        .replacen("Number of cylinders = 2051,", "Number of cylinders = 4194303,", 1)
        .replacen("Last cylinder number = 558,", "Last cylinder number = 4194302,", 1)
        .replacen("Blocks per track = 96,", "Blocks per track = 1,", 1)
        .replacen("Number of spares = 325,", "Number of spares = 1,", 1);
    std::fs::write(&m, t).unwrap();
    let top = dir.join("hp_c2247a.parv");
    let e = mutate::within(60, move || load_disk(&top, None).unwrap_err().to_string());
    assert!(
        e.contains("key `Number of spares`: 4294966272 spare regions in one zone: hvio models at most 4194304"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// More spares per track than the track has sectors (scheme 3, 200 spares on
/// 96-sector tracks) underflowed placing them at the track's end.
#[test]
fn more_spares_than_a_track_holds_is_an_error() {
    if !common::have_hdd_validation() {
        return;
    }
    let dir = hp_with(
        "spt",
        "hp_c2247a_validate.model",
        "Sparing scheme used = 1,",
        "Sparing scheme used = 3,",
    );
    let m = dir.join("hp_c2247a_validate.model");
    let t = std::fs::read_to_string(&m)
        .unwrap()
        .replacen("Number of spares = 325,", "Number of spares = 200,", 1);
    std::fs::write(&m, t).unwrap();
    let e = load_disk(&dir.join("hp_c2247a.parv"), None).unwrap_err().to_string();
    assert!(
        e.contains("hp_c2247a_validate.model:") && e.contains("key `slips`"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// A parameter file with a byte that is not UTF-8: the error names the line;
/// a UTF-8 byte-order mark is accepted.
#[test]
fn non_utf8_parameter_file_names_the_line_and_a_bom_reads() {
    if !common::have_hdd_validation() {
        return;
    }
    let dir = scratch("utf8");
    let p = dir.join("bad.parv");
    std::fs::write(&p, b"# ok\n# caf\xe9\n").unwrap();
    let e = read_spec(&p).unwrap_err();
    assert!(e.to_string().ends_with("bad.parv:2: byte 10 is not UTF-8"), "{e}");
    let dir2 = hp_with("bom", "hp_c2247a.diskspecs", "disksim_disk", "\u{feff}disksim_disk");
    assert!(load_disk(&dir2.join("hp_c2247a.parv"), None).is_ok());
    std::fs::remove_dir_all(&dir).ok();
    std::fs::remove_dir_all(&dir2).ok();
}

/// `validate-disk --out DIR` writes cdf.csv whole or not at all.
#[test]
fn cdf_csv_is_written_whole_or_not_at_all() {
    if !common::have_hdd_validation() {
        return;
    }
    let dir = scratch("cdf");
    let out = dir.join("out");
    let spec = shared().join("hp_c2247a.parv");
    let trace = dir.join("t.trace");
    std::fs::write(&trace, "R Miss 1000 8 100 100\nW Miss 2000 8 100 100\n").unwrap();
    let write_cdf = || {
        hvio_device::validate::run_cli(
            &spec,
            &trace,
            Some(&out),
            None,
            0,
            &LoadOptions::default(),
            DisksimRuns::BesideTrace,
        )
    };
    write_cdf().unwrap();
    let names: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["cdf.csv"]);
    assert_eq!(
        std::fs::read_to_string(out.join("cdf.csv")).unwrap().lines().count(),
        10_001
    );
    // cdf.csv a directory: the rename fails, no temporary file is left behind.
    std::fs::remove_file(out.join("cdf.csv")).unwrap();
    std::fs::create_dir_all(out.join("cdf.csv").join("x")).unwrap();
    let e = write_cdf().unwrap_err();
    assert!(e.to_string().starts_with(&out.display().to_string()), "{e}");
    let names: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["cdf.csv"]);
    std::fs::remove_dir_all(&dir).ok();
}

/// `validate::replay` on records built by a caller with a gap of 1e300 ms
/// (or NaN) saturated the gap to 2^64-1 ns and overflowed the clock.
#[test]
fn replay_of_a_huge_gap_is_an_error() {
    if !common::have_hdd_validation() {
        return;
    }
    use hvio_device::validate::{replay, TraceRecord};
    let model = load_disk(&shared().join("hp_c2247a.parv"), None).unwrap().model;
    for gap in [1e300, f64::NAN, -5.0] {
        let r = |line| TraceRecord {
            write: false,
            lbn: 1000,
            sectors: 8,
            measured_ms: 10.0,
            gap_ms: gap,
            line,
        };
        let e = replay(model.clone(), &[r(1), r(2)]).unwrap_err();
        assert!(e.to_string().starts_with("trace:1: gap "), "{gap}: {e}");
    }
}

/// The `.outv` beside a validation trace is read unasked: one that never
/// ends (here a symlink to /dev/zero) was read until out of memory.
#[test]
fn an_endless_outv_beside_the_trace_is_not_read_forever() {
    if !common::have_hdd_validation() {
        return;
    }
    let dir = scratch("outv");
    let trace = dir.join("t.trace");
    std::fs::write(&trace, "R Miss 1000 8 100 100\n").unwrap();
    std::os::unix::fs::symlink("/dev/zero", dir.join("t.outv")).unwrap();
    let spec = shared().join("hp_c2247a.parv");
    let t2 = trace.clone();
    let report = mutate::within(120, move || {
        hvio_device::validate::run_cli(
            &spec,
            &t2,
            None,
            None,
            0,
            &LoadOptions::default(),
            DisksimRuns::BesideTrace,
        )
        .unwrap()
    });
    assert!(
        report.contains("1 requests replayed") && !report.contains("DiskSim's own demerit"),
        "{report}"
    );
    let e = hvio_device::validate::disksim_demerit(&dir.join("t.outv")).unwrap_err();
    assert!(
        e.to_string()
            .ends_with("t.outv: larger than 16 MiB: not a DiskSim file"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// DiskSim 4.0 aborts on a negative `Max queue length` and never sends a
/// request to a disk of length 0; it aborts on fewer than one buffer
/// segment. hvio made them 1 and 0 silently; now errors at file:line:key.
#[test]
fn queue_length_and_segment_count_below_one_are_key_errors() {
    if !common::have_hdd_validation() {
        return;
    }
    for (from, to, line, key) in [
        ("Max queue length = 1,", "Max queue length = 0,", 18, "Max queue length"),
        (
            "Max queue length = 1,",
            "Max queue length = -3,",
            18,
            "Max queue length",
        ),
        (
            "Number of buffer segments = 2,",
            "Number of buffer segments = 0,",
            34,
            "Number of buffer segments",
        ),
        (
            "Number of buffer segments = 2,",
            "Number of buffer segments = -1,",
            34,
            "Number of buffer segments",
        ),
    ] {
        let e = hp_error("below-one", "hp_c2247a.diskspecs", from, to);
        assert!(
            e.contains(&format!("hp_c2247a.diskspecs:{line}: key `{key}`: ")) && e.contains("must be at least 1"),
            "{to}: {e}"
        );
    }
}

/// DiskSim 4.0 clamps the read-ahead bounds: a maximum below the minimum
/// becomes the minimum, and a maximum of 0 reads on to fill the segment. A
/// negative maximum used to become 0 (no read-ahead at all).
#[test]
fn negative_max_read_ahead_is_clamped_as_disksim_does() {
    if !common::have_hdd_validation() {
        return;
    }
    let load = |to: &str| {
        let dir = hp_with(
            "read-ahead",
            "hp_c2247a.diskspecs",
            "Maximum read-ahead (blks) = 128,",
            to,
        );
        let d = load_disk(&dir.join("hp_c2247a.parv"), None).unwrap();
        std::fs::remove_dir_all(&dir).ok();
        (d.model.cache.read_ahead, d.model.cache.min_read_ahead)
    };
    let seg = load("Maximum read-ahead (blks) = 256,");
    assert_eq!(load("Maximum read-ahead (blks) = -5,"), seg);
    assert_eq!(load("Maximum read-ahead (blks) = 0,"), seg);
    assert_ne!(load("Maximum read-ahead (blks) = 128,"), seg);
}

/// `Buffer continuous read` outside DiskSim's 0–4 is an error naming the
/// file, line and key.
#[test]
fn unknown_continuous_read_is_a_key_error() {
    if !common::have_hdd_validation() {
        return;
    }
    for bad in ["5", "-1"] {
        let e = hp_error(
            &format!("contread{bad}"),
            "hp_c2247a.diskspecs",
            "Buffer continuous read = 3,",
            &format!("Buffer continuous read = {bad},"),
        );
        assert!(
            e.contains("hp_c2247a.diskspecs:43: key `Buffer continuous read`: ")
                && e.contains(&format!("{bad}: DiskSim 4.0 knows 0 (none)")),
            "{e}"
        );
    }
}
