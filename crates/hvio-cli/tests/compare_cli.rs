//! `hvio compare` on the three-VM example (examples/three-vms: fio job
//! files for two sequential readers, a database-like random mix and a
//! backup writer, weights 4:2:1): the tables, the verdict and the files.

use std::path::Path;
use std::process::Command;

#[test]
fn the_three_vm_example_gives_a_verdict() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = std::env::temp_dir().join(format!("hvio-compare-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_hvio"))
        .current_dir(&root)
        .args(["compare", "examples/three-vms/three-vms.toml", "--json"])
        .arg(dir.join("c.json"))
        .arg("--csv")
        .arg(dir.join("c.csv"))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(o.stderr.is_empty(), "{}", String::from_utf8_lossy(&o.stderr));
    for s in hvio_sched::names() {
        assert!(
            out.lines().any(|l| l.starts_with(&format!("{s} "))),
            "{s} missing:\n{out}"
        );
    }
    for needle in [
        "total MB/s  fairness (Jain)  worst p99 ms",
        "p50 ms  p99 ms  p99.9 ms  disk %  weight %  alone MB/s  slowdown",
        "\nverdict\n  throughput: ",
        "\n  worst-case latency: ",
        "\n  weighted fairness: ",
        // The case the comparison exists to show: mq-deadline leaves the
        // database VM a few requests a second.
        "starved: mq-deadline gives db 0.08 MB/s",
    ] {
        assert!(out.contains(needle), "{needle:?} missing:\n{out}");
    }
    // Every job is time-based: no execution-time table.
    assert!(!out.contains("job execution time"), "{out}");
    let csv = std::fs::read_to_string(dir.join("c.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 3 * hvio_sched::names().len());
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("c.json")).unwrap()).unwrap();
    assert_eq!(json["schedulers"].as_array().unwrap().len(), hvio_sched::names().len());
    assert_eq!(json["seeds"], serde_json::json!([1]));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn sim_warns_of_weights_the_scheduler_ignores() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = std::env::temp_dir().join(format!("hvio-compare-cli-w-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let run = |sched: &str| {
        let o = Command::new(env!("CARGO_BIN_EXE_hvio"))
            .current_dir(&root)
            .args([
                "sim",
                "examples/three-vms/three-vms.toml",
                "--scheduler",
                sched,
                "--json",
            ])
            .arg(dir.join("s.json"))
            .output()
            .unwrap();
        assert!(o.status.success());
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let err = run("mq-deadline");
    assert!(
        err.contains("warning: the VMs' weights differ, but mq-deadline ignores weights (these read them: "),
        "{err}"
    );
    assert!(run("bfq").is_empty());
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn bad_seeds_and_a_missing_python_are_named() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = std::env::temp_dir().join(format!("hvio-compare-cli-f-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let run = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_hvio"))
            .current_dir(&root)
            .env("HVIO_PYTHON", dir.join("no-such-python"))
            .args([
                "compare",
                "examples/three-vms/three-vms.toml",
                "--schedulers",
                "noop",
                "--json",
            ])
            .arg(dir.join("c.json"))
            .args(extra)
            .output()
            .unwrap()
    };
    let o = run(&["--seeds", "0"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--seeds") && err.contains('0'), "{err}");
    assert!(!dir.join("c.json").exists());
    let o = run(&["--figures", "figs"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("--figures: cannot run") && err.contains("HVIO_PYTHON"),
        "{err}"
    );
    // The comparison itself was written before the figures were tried.
    assert!(dir.join("c.json").exists());
    let _ = std::fs::remove_dir_all(dir);
}
