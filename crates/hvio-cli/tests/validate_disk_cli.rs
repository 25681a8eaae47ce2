//! `hvio validate-disk` end to end on the shared real-disk data.

use std::process::Command;

fn data(name: &str) -> String {
    format!(
        "{}/../../../shared/data/hdd-validation/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
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
    let (ok, _, err) = hvio(&["validate-disk", &data("nope.parv"), &data("ibm18es.trace")]);
    assert!(!ok);
    assert!(err.contains("nope.parv"), "{err}");
    let (ok, _, err) = hvio(&["validate-disk", &data("ibm18es.parv"), &data("ibm18es.seek")]);
    assert!(!ok);
    assert!(err.contains("ibm18es.seek:1"), "{err}");
}
