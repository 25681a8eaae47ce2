//! `hvio validate-disk` end to end on the shared real-disk data.

use std::process::Command;

#[path = "../../hvio-device/tests/common/mod.rs"]
mod device_common;

/// A file of the real-disk data; only called by tests that checked [`device_common::have_hdd_validation`].
fn data(name: &str) -> String {
    let dir = device_common::hdd_validation().expect("checked by have_hdd_validation");
    dir.join(name).to_str().unwrap().to_string()
}

fn hvio(args: &[&str]) -> (bool, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_hvio")).args(args).output().unwrap();
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn validate_disk_reports_and_writes_cdfs() {
    if !device_common::have_hdd_validation() {
        return;
    }
    let out_dir = std::env::temp_dir().join(format!("hvio-validate-disk-{}", std::process::id()));
    let (ok, out, err) = hvio(&[
        "validate-disk",
        &data("ibm18es.parv"),
        &data("ibm18es.trace"),
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(out.contains("measured mean service time     5.261 ms"), "{out}");
    assert!(out.contains("RMS demerit"), "{out}");
    assert!(out.contains("DiskSim's own demerit          0.136 ms"), "{out}");
    let csv = std::fs::read_to_string(out_dir.join("cdf.csv")).unwrap();
    assert_eq!(csv.lines().count(), 10_001);
    std::fs::remove_dir_all(&out_dir).ok();
}

#[test]
fn validate_disk_bad_input_names_the_file() {
    if !device_common::have_hdd_validation() {
        return;
    }
    let (ok, _, err) = hvio(&["validate-disk", &data("nope.parv"), &data("ibm18es.trace")]);
    assert!(!ok);
    assert!(err.contains("nope.parv"), "{err}");
    let (ok, _, err) = hvio(&["validate-disk", &data("ibm18es.parv"), &data("ibm18es.seek")]);
    assert!(!ok);
    assert!(err.contains("ibm18es.seek:1"), "{err}");
}

#[test]
fn validate_disk_is_byte_identical_unless_timed() {
    if !device_common::have_hdd_validation() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("hvio-validate-disk-twice-{}", std::process::id()));
    let (spec, trace) = (data("hp_c2247a.parv"), data("hp_c2247a.trace"));
    let run = |sub: &str, extra: &[&str]| {
        let d = dir.join(sub);
        let d = d.to_str().unwrap();
        let mut args = vec!["validate-disk", &spec, &trace, "--out", d];
        args.extend_from_slice(extra);
        let (ok, out, err) = hvio(&args);
        assert!(ok, "{err}");
        (
            out.replace(d, "DIR"),
            std::fs::read(dir.join(sub).join("cdf.csv")).unwrap(),
        )
    };
    let a = run("a", &[]);
    let b = run("b", &[]);
    assert_eq!(a, b, "two validations of the same disk and trace differ");
    assert!(!a.0.contains("replay speed"), "{}", a.0);
    let (timed, _) = run("c", &["--bench", "1"]);
    assert!(timed.contains("replay speed"), "{timed}");
    std::fs::remove_dir_all(&dir).ok();
}

/// `--all DIR`: one row per NAME.trace of the folder, in name order, with
/// DiskSim's demerit and the ratio where NAME.outv is there; a CDF per disk
/// under --out; a folder without a trace is an error naming it.
#[test]
fn validate_disk_all_tabulates_every_disk_of_a_folder() {
    if !device_common::have_hdd_validation() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("hvio-validate-all-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for f in [
        "hp_c2247a.parv",
        "hp_c2247a.diskspecs",
        "hp_c2247a_validate.model",
        "hp_c2247a.trace",
        "hp_c2247a.outv",
        "ibm18es.parv",
        "ibm18es.diskspecs",
        "ibm18es.model",
        "ibm18es.seek",
        "ibm18es.trace",
    ] {
        std::fs::copy(data(f), dir.join(f)).unwrap();
    }
    let out_dir = dir.join("out");
    let (ok, out, err) = hvio(&[
        "validate-disk",
        "--all",
        dir.to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let rows: Vec<Vec<&str>> = out.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(rows.len(), 4, "{out}");
    assert_eq!(rows[0][0], "disk");
    // HP: 9,999 requests, 15.298 ms measured, hvio 0.136 ms (0.89 %), DiskSim 0.089, ratio 1.53.
    assert_eq!(
        rows[1],
        ["hp_c2247a", "9999", "15.298", "0.136", "0.89", "0.089", "1.53"],
        "{out}"
    );
    // IBM without its .outv: DiskSim's column is empty. Its seek table is
    // DIXtrac's: 0.55 ms moved from every seek into the miss overheads.
    assert_eq!(
        rows[2],
        ["ibm18es", "10000", "5.261", "0.081", "1.55", "—", "—"],
        "{out}"
    );
    assert_eq!(
        out.lines().nth(3),
        Some("DIXtrac seek overhead 0.550 ms moved from every seek into the miss overheads: ibm18es (--as-described: none)"),
        "{out}"
    );
    // As described: the IBM as DiskSim reads it, the HP (a seek equation) unchanged, no footnote.
    let (ok, described, err) = hvio(&["validate-disk", "--all", dir.to_str().unwrap(), "--as-described"]);
    assert!(ok, "{err}");
    let rows: Vec<Vec<&str>> = described.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(rows.len(), 3, "{described}");
    assert_eq!(
        rows[1],
        ["hp_c2247a", "9999", "15.298", "0.136", "0.89", "0.089", "1.53"],
        "{described}"
    );
    assert_eq!(
        rows[2],
        ["ibm18es", "10000", "5.261", "0.150", "2.86", "—", "—"],
        "{described}"
    );
    for d in ["hp_c2247a", "ibm18es"] {
        let csv = std::fs::read_to_string(out_dir.join(d).join("cdf.csv")).unwrap();
        assert_eq!(csv.lines().count(), 10_001);
    }
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let (ok, _, err) = hvio(&["validate-disk", "--all", empty.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("empty") && err.contains("no validation trace"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

/// `--disksim-out DIR`: DiskSim's own runs read from DIR/NAME.outv instead
/// of beside the traces; a disk without one there has no DiskSim figure; a
/// run there that is not DiskSim's output, or a folder that is not there,
/// is an error naming it.
#[test]
fn validate_disk_reads_disksim_runs_from_another_folder() {
    if !device_common::have_hdd_validation() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("hvio-validate-runs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (traces, runs) = (dir.join("traces"), dir.join("runs"));
    std::fs::create_dir_all(&traces).unwrap();
    std::fs::create_dir_all(&runs).unwrap();
    for f in [
        "hp_c2247a.parv",
        "hp_c2247a.diskspecs",
        "hp_c2247a_validate.model",
        "hp_c2247a.trace",
        "ibm18es.parv",
        "ibm18es.diskspecs",
        "ibm18es.model",
        "ibm18es.seek",
        "ibm18es.trace",
        "ibm18es.outv",
    ] {
        std::fs::copy(data(f), traces.join(f)).unwrap();
    }
    std::fs::copy(data("hp_c2247a.outv"), runs.join("hp_c2247a.outv")).unwrap();
    let all = |extra: &[&str]| {
        let mut args = vec!["validate-disk", "--all", traces.to_str().unwrap()];
        args.extend_from_slice(extra);
        hvio(&args)
    };
    let (ok, out, err) = all(&["--disksim-out", runs.to_str().unwrap()]);
    assert!(ok, "{err}");
    let rows: Vec<Vec<&str>> = out.lines().map(|l| l.split_whitespace().collect()).collect();
    // The HP's run from the other folder; the IBM's beside its trace is not read.
    assert_eq!(rows[1][5..], ["0.089", "1.53"], "{out}");
    assert_eq!(rows[2][5..], ["—", "—"], "{out}");
    // Without the option: the IBM's beside its trace, none for the HP.
    let (ok, out, err) = all(&[]);
    assert!(ok, "{err}");
    let rows: Vec<Vec<&str>> = out.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(rows[1][5..], ["—", "—"], "{out}");
    assert_eq!(rows[2][5..], ["0.136", "0.60"], "{out}");
    // One disk: the line names the run it read.
    let (ok, out, err) = hvio(&[
        "validate-disk",
        traces.join("hp_c2247a.parv").to_str().unwrap(),
        traces.join("hp_c2247a.trace").to_str().unwrap(),
        "--disksim-out",
        runs.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let line = out
        .lines()
        .find(|l| l.contains("DiskSim's own demerit"))
        .unwrap_or_default();
    assert!(line.contains("0.089 ms") && line.ends_with("hp_c2247a.outv"), "{out}");
    // Asked for, a run that is not DiskSim's output is an error naming it.
    std::fs::write(runs.join("ibm18es.outv"), "not a DiskSim output\n").unwrap();
    let (ok, _, err) = all(&["--disksim-out", runs.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("ibm18es.outv"), "{err}");
    let (ok, _, err) = all(&["--disksim-out", dir.join("nowhere").to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("nowhere") && err.contains("no such folder"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

/// `--seek-overhead MS` replaces the fitted constant (0 is `--as-described`);
/// a value that is not a time is refused naming it; the two flags conflict.
#[test]
fn validate_disk_seek_overhead_option() {
    if !device_common::have_hdd_validation() {
        return;
    }
    let (spec, trace) = (data("ibm18es.parv"), data("ibm18es.trace"));
    let (ok, zero, err) = hvio(&["validate-disk", &spec, &trace, "--seek-overhead", "0"]);
    assert!(ok, "{err}");
    let (ok, described, err) = hvio(&["validate-disk", &spec, &trace, "--as-described"]);
    assert!(ok, "{err}");
    assert_eq!(zero, described);
    assert!(
        described.contains("RMS demerit                    0.150 ms (2.86%"),
        "{described}"
    );
    assert!(!described.contains("DIXtrac"), "{described}");
    let (ok, moved, err) = hvio(&["validate-disk", &spec, &trace, "--seek-overhead", "0.3"]);
    assert!(ok, "{err}");
    assert!(
        moved.contains("DIXtrac seek overhead          0.300 ms moved"),
        "{moved}"
    );
    for bad in ["-0.1", "nan", "x", "1e9"] {
        let (ok, _, err) = hvio(&["validate-disk", &spec, &trace, "--seek-overhead", bad]);
        assert!(!ok, "{bad}");
        assert!(err.contains(bad) && err.contains("milliseconds"), "{bad}: {err}");
    }
    let (ok, _, err) = hvio(&[
        "validate-disk",
        &spec,
        &trace,
        "--as-described",
        "--seek-overhead",
        "0.3",
    ]);
    assert!(!ok);
    assert!(
        err.contains("--as-described") && err.contains("--seek-overhead"),
        "{err}"
    );
}
