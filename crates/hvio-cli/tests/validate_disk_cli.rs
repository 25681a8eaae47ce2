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
