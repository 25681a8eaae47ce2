//! `hvio sim`, `hvio compare` and `hvio replay` on bad input: exit code 1,
//! one error line naming the file and line, and no result file written.

use std::path::PathBuf;
use std::process::Command;

#[path = "../../hvio-device/tests/common/mod.rs"]
mod device_common;

fn hvio(dir: &PathBuf, args: &[&str]) -> (i32, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_hvio"))
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn config_errors_name_the_file_and_line_and_write_nothing() {
    let dir = std::env::temp_dir().join(format!("hvio-cli-sim-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("w.toml"), "seed = 1\n\n[[vm]]\nname = \"a\"\nweight = 0\n").unwrap();
    let (code, err) = hvio(&dir, &["sim", "w.toml", "--records", "r.csv"]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(
        err.trim(),
        "hvio: error: w.toml:5: vm \"a\": invalid value 0 for `weight`: must be between 1 and 10000"
    );
    let (code, err) = hvio(&dir, &["compare", "w.toml", "--schedulers", "noop"]);
    assert_eq!(code, 1);
    assert!(err.starts_with("hvio: error: w.toml:5: "), "{err}");
    std::fs::write(dir.join("t.csv"), "128166372000000000,host,0,Read,4096,4096,100\n").unwrap();
    let (code, err) = hvio(&dir, &["replay", "t.csv", "--format", "msr", "--config", "w.toml"]);
    assert_eq!(code, 1);
    assert!(err.starts_with("hvio: error: w.toml:5: "), "{err}");

    // numjobs = 4e9 used to abort the process (exit 134) allocating 288 GB.
    std::fs::write(
        dir.join("n.toml"),
        "[[vm]]\nname = \"a\"\n[[vm.job]]\nrw = \"read\"\nnumjobs = 4000000000\n",
    )
    .unwrap();
    let (code, err) = hvio(&dir, &["sim", "n.toml"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("n.toml:5: vm \"a\" job 0: invalid value 4000000000 for `numjobs`"),
        "{err}"
    );

    // An unknown --scheduler is the option's fault: no config line.
    std::fs::write(
        dir.join("ok.toml"),
        "[host]\nscheduler = \"cfq\"\n[[vm]]\nname = \"a\"\n",
    )
    .unwrap();
    let (code, err) = hvio(&dir, &["sim", "ok.toml", "--scheduler", "nope"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("--scheduler") && err.contains("`nope`") && !err.contains("ok.toml"),
        "{err}"
    );

    // No scheduler to compare: an error, not an empty table.
    let (code, err) = hvio(&dir, &["compare", "ok.toml", "--schedulers", ","]);
    assert_eq!(code, 1);
    assert!(err.contains("--schedulers \",\": name at least one scheduler"), "{err}");

    // An endless input used to be read until memory ran out.
    let (code, err) = hvio(&dir, &["sim", "/dev/zero"]);
    assert_eq!(code, 1);
    assert!(err.contains("/dev/zero: larger than 64 MiB: not a config"), "{err}");
    std::fs::write(dir.join("bin.toml"), b"seed = 1\n\xff\xfe").unwrap();
    let (code, err) = hvio(&dir, &["sim", "bin.toml"]);
    assert_eq!(code, 1);
    assert!(err.contains("bin.toml:2: byte 9 is not UTF-8"), "{err}");

    // A --json that is a directory is an error naming it (checked before the run).
    std::fs::create_dir_all(dir.join("adir")).unwrap();
    let (code, err) = hvio(&dir, &["sim", "ok.toml", "--json", "adir"]);
    assert_eq!(code, 1);
    assert!(err.contains("adir is a directory"), "{err}");
    std::fs::remove_dir(dir.join("adir")).unwrap();

    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".toml") && !n.ends_with(".csv") || n == "r.csv")
        .collect();
    assert!(left.is_empty(), "files written by failed runs: {left:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_full_stdout_is_an_error_not_a_panic() {
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        return; // no /dev/full here
    };
    let dir = std::env::temp_dir().join(format!("hvio-cli-full-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("ok.toml"),
        "[disk]\nmodel = \"simple\"\n[[vm]]\nname = \"a\"\nimage_size = \"1GiB\"\n[[vm.job]]\nrw = \"randread\"\nsize = \"1MiB\"\nrequests = 20\n",
    )
    .unwrap();
    std::fs::write(dir.join("j.fio"), "[j]\nrw=randread\nsize=1m\n").unwrap();
    let trace = format!("{}/../hvio-trace/tests/data/sda.blkparse", env!("CARGO_MANIFEST_DIR"));
    // `validate-disk` needs the real-disk data; without it, only its row is skipped.
    let parv_trace = device_common::hdd_validation().map(|d| {
        let path = |f: &str| d.join(f).to_str().unwrap().to_string();
        (path("ibm18es.parv"), path("ibm18es.trace"))
    });
    // Every subcommand that writes to stdout (all but `serve`); the bench,
    // trace and validate-disk ones panicked (exit 101).
    let always: &[&[&str]] = &[
        &["sim", "ok.toml"],
        &["compare", "ok.toml", "--schedulers", "noop"],
        &["presets"],
        &["schedulers"],
        &["reproduce", "--list"],
        &["bench", "sim", "--requests", "40", "--disk", "simple"],
        &["bench", "schedulers"],
        &["trace", "stats", &trace],
        &["trace", "stats", "--json", &trace],
        &["trace", "convert", "--to", "iolog3", &trace],
        &["trace", "convert", "--to", "blkparse", &trace],
        &["trace", "fio", "j.fio"],
        &["trace", "fio", "--json", "j.fio"],
        &["replay", &trace, "--scheduler", "noop"],
    ];
    let validate_disk;
    let mut runs = always.to_vec();
    if let Some((parv, vtrace)) = &parv_trace {
        validate_disk = ["validate-disk", parv.as_str(), vtrace.as_str()];
        runs.push(&validate_disk);
    }
    for args in &runs {
        let o = Command::new(env!("CARGO_BIN_EXE_hvio"))
            .current_dir(&dir)
            .args(*args)
            .stdout(full.try_clone().unwrap())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.starts_with("hvio: error: "), "{args:?}: {err}");
        assert!(
            err.contains("writing to stdout: No space left on device"),
            "{args:?}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    }
    // A full stderr too: the error is lost, the exit code is still 1 (was a
    // panic in `eprintln!`, exit 101).
    let o = Command::new(env!("CARGO_BIN_EXE_hvio"))
        .current_dir(&dir)
        .args(["sim", "missing.toml"])
        .stderr(full.try_clone().unwrap())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    // A closed pipe (`hvio X | head`) still ends quietly.
    let mut child = Command::new(env!("CARGO_BIN_EXE_hvio"))
        .arg("schedulers")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    assert!(o.stderr.is_empty(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bench_sim_measures_both_runs() {
    // Its scenario once asked for more than the simulator's max_time_s
    // bound and the benchmark failed before timing anything; the full-stdout
    // test above could not tell.
    let o = Command::new(env!("CARGO_BIN_EXE_hvio"))
        .args(["bench", "sim", "--requests", "40", "--disk", "simple"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}{}", String::from_utf8_lossy(&o.stderr));
    let counts: Vec<&str> = out
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| w.parse::<u64>().is_ok())
        .collect();
    assert_eq!(counts, ["40", "160"], "{out}");
}

#[test]
fn bench_schedulers_prints_goals_and_refuses_an_unknown_revision() {
    let o = Command::new(env!("CARGO_BIN_EXE_hvio"))
        .args(["bench", "schedulers", "--decisions", "200", "--rounds", "1"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}{}", String::from_utf8_lossy(&o.stderr));
    let row = |name: &str| {
        out.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no {name} row: {out}"))
            .to_string()
    };
    for spec in hvio_sched::SCHEDULERS {
        row(spec.name);
    }
    // deadline: ≤ 200 ns at both lengths; mq-deadline: a growth goal only.
    assert_eq!(row("deadline").matches("≤200").count(), 2, "{out}");
    assert_eq!(row("mq-deadline").matches("≤1.5").count(), 1, "{out}");
    assert!(
        row("pregather").contains("≤600") && row("pregather").contains("≤900"),
        "{out}"
    );
    assert!(out.contains("HDD model alone") && out.contains("goal ≤100"), "{out}");
    assert!(out.contains("load average: "), "{out}");

    let o = Command::new(env!("CARGO_BIN_EXE_hvio"))
        .args([
            "bench",
            "schedulers",
            "--against",
            "no-such-revision",
            "--decisions",
            "200",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    // Outside a git checkout (a source tarball) there is no revision to look up.
    assert!(
        err.contains("no-such-revision") || err.contains("git repository"),
        "{err}"
    );
}
