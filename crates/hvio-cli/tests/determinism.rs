//! Same config and seed → byte-identical output, across processes and
//! working directories: stdout, `--json` and `--records` of `hvio sim`,
//! `hvio compare` and `hvio reproduce`. A different seed changes a random
//! workload's output, and every output that depends on the seed names it.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Two VMs, one of them random: the seed decides its addresses.
const CONFIG: &str = r#"
seed = 3
[host]
scheduler = "deadline"
[[vm]]
name = "a"
image_size = "1GiB"
[[vm.job]]
rw = "randread"
bs = "4k"
size = "64MiB"
numjobs = 2
requests = 300
[[vm]]
name = "b"
image_size = "1GiB"
[[vm.job]]
rw = "read"
bs = "16k"
size = "64MiB"
numjobs = 2
requests = 300
"#;

/// A fresh directory of this test process.
fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hvio-determinism-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Run `hvio args` in `cwd`; its stdout (the command must succeed).
fn hvio(cwd: &Path, args: &[&str]) -> Vec<u8> {
    let o = Command::new(env!("CARGO_BIN_EXE_hvio"))
        .args(args)
        .current_dir(cwd)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "hvio {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o.stdout
}

/// Every file of `d` (flat), name → bytes, plus the stdout of each command.
fn outputs(d: &Path, stdouts: Vec<Vec<u8>>) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect();
    files.sort();
    files.extend(stdouts.into_iter().enumerate().map(|(i, s)| (format!("stdout {i}"), s)));
    files
}

/// `hvio sim` (with and without a seed override) and `hvio compare` in `d`,
/// every path relative to it.
fn sim_and_compare(d: &Path, seed: &str) -> Vec<(String, Vec<u8>)> {
    std::fs::write(d.join("c.toml"), CONFIG).unwrap();
    let stdouts = vec![
        hvio(d, &["sim", "c.toml", "--json", "sim.json", "--records", "rec.csv"]),
        hvio(
            d,
            &[
                "sim",
                "c.toml",
                "--seed",
                seed,
                "--scheduler",
                "cfq",
                "--json",
                "sim-seed.json",
                "--records",
                "rec-seed.csv",
            ],
        ),
        hvio(
            d,
            &[
                "compare",
                "c.toml",
                "--schedulers",
                "noop,cfq,bfq",
                "--json",
                "cmp.json",
            ],
        ),
    ];
    outputs(d, stdouts)
}

fn assert_same(a: &[(String, Vec<u8>)], b: &[(String, Vec<u8>)]) {
    assert_eq!(
        a.iter().map(|f| &f.0).collect::<Vec<_>>(),
        b.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    for (x, y) in a.iter().zip(b) {
        assert!(x.1 == y.1, "{} differs between two identical runs", x.0);
    }
}

fn file<'a>(outs: &'a [(String, Vec<u8>)], name: &str) -> &'a str {
    let f = outs.iter().find(|f| f.0 == name).unwrap_or_else(|| panic!("no {name}"));
    std::str::from_utf8(&f.1).unwrap()
}

#[test]
fn sim_and_compare_are_byte_identical_across_runs_and_directories() {
    let a = sim_and_compare(&dir("a"), "5");
    // Another process, another working directory, a nested one.
    let b_dir = dir("b").join("nested");
    std::fs::create_dir_all(&b_dir).unwrap();
    let b = sim_and_compare(&b_dir, "5");
    assert_same(&a, &b);
    assert!(file(&a, "rec.csv").lines().count() > 500);

    // The seed reaches every output that depends on it.
    let json: serde_json::Value = serde_json::from_str(file(&a, "sim.json")).unwrap();
    assert_eq!(json["seed"], 3);
    let json: serde_json::Value = serde_json::from_str(file(&a, "sim-seed.json")).unwrap();
    assert_eq!(json["seed"], 5);
    let cmp: serde_json::Value = serde_json::from_str(file(&a, "cmp.json")).unwrap();
    assert_eq!(cmp["seeds"], serde_json::json!([3]));
    assert!(cmp["runs"].as_array().unwrap().iter().all(|r| r["seed"] == 3));
    for (name, seed) in [("rec.csv", "3"), ("rec-seed.csv", "5")] {
        let mut lines = file(&a, name).lines();
        assert!(lines.next().unwrap().ends_with(",seed"));
        assert!(lines.all(|l| l.rsplit(',').next() == Some(seed)), "{name}");
    }

    // A different seed moves the random VM's requests.
    let c = sim_and_compare(&dir("c"), "6");
    let rec = |o: &[(String, Vec<u8>)]| file(o, "rec-seed.csv").replace(",5\n", "\n").replace(",6\n", "\n");
    assert_ne!(rec(&a), rec(&c), "seed 5 and seed 6 gave the same requests");
    assert_eq!(file(&a, "rec.csv"), file(&c, "rec.csv"));

    for d in ["a", "b", "c"] {
        let _ = std::fs::remove_dir_all(dir(d));
    }
}

#[test]
fn reproduce_is_byte_identical_and_names_its_seed() {
    let run = |d: &Path, seed: &str| {
        let out = hvio(
            d,
            &["reproduce", "htbs-rates", "--quick", "--seed", seed, "--json", "r.json"],
        );
        (out, std::fs::read_to_string(d.join("r.json")).unwrap())
    };
    let (d1, d2) = (dir("r1"), dir("r2"));
    let a = run(&d1, "2");
    let b = run(&d2, "2");
    assert!(a.0 == b.0, "stdout differs");
    assert!(a.1 == b.1, "JSON report differs");
    let json: serde_json::Value = serde_json::from_str(&a.1).unwrap();
    assert_eq!(json["seed"], 2);
    assert_eq!(json["quick"], true);
    assert!(String::from_utf8_lossy(&a.0).contains("\nseed 2, quick run\n"));
    let c = run(&d1, "3");
    let data = |s: &str| serde_json::from_str::<serde_json::Value>(s).unwrap()["data"].clone();
    assert_ne!(
        data(&a.1),
        data(&c.1),
        "htbs-rates draws random requests: the seed must matter"
    );
    // Without --json, runs with other seeds or --quick get their own
    // report instead of overwriting the full seed-1 one.
    for (args, name) in [
        (&["--quick"][..], "htbs-rates-quick.json"),
        (&["--quick", "--seed", "4"][..], "htbs-rates-quick-seed4.json"),
    ] {
        let mut all = vec!["reproduce", "htbs-rates"];
        all.extend_from_slice(args);
        let out = String::from_utf8_lossy(&hvio(&d2, &all)).to_string();
        assert!(d2.join("out").join(name).is_file(), "{name}: {out}");
        assert!(out.contains(&format!("report: out/{name}")), "{out}");
    }
    let _ = std::fs::remove_dir_all(&d1);
    let _ = std::fs::remove_dir_all(&d2);
}
