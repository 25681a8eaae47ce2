//! `hvio sweep` and `hvio report` hand their arguments to hvio's Python
//! package (`HVIO_PYTHON -m hvio ...`): what they pass, and the error when
//! that Python cannot run.

use std::process::Command;

fn hvio(python: &str, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_hvio"))
        .env("HVIO_PYTHON", python)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn sweep_and_report_pass_their_arguments_to_python() {
    // `echo` stands in for Python: it prints what it was given.
    let o = hvio(
        "echo",
        &[
            "sweep",
            "s.study.toml",
            "--workers",
            "2",
            "--no-cache",
            "--cluster",
            "tcp://h:8786",
        ],
    );
    assert!(o.status.success());
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "-m hvio sweep s.study.toml --out out --cluster tcp://h:8786 --workers 2 --no-cache\n"
    );
    let o = hvio("echo", &["report", "--out", "res", "--html", "r.html"]);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "-m hvio report --out res --html r.html\n"
    );
    // Python's own failure is its exit status; it has said why.
    assert_eq!(hvio("false", &["report"]).status.code(), Some(1));
}

#[test]
fn a_python_that_cannot_run_is_named() {
    let o = hvio("/nonexistent/python3", &["sweep", "s.study.toml"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("cannot run /nonexistent/python3 (set HVIO_PYTHON"),
        "{err}"
    );
    let o = hvio("echo", &["sweep", "s.study.toml", "--workers", "0"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("`--workers` must be a positive integer, got 0"));
}

#[test]
fn without_hvio_python_the_projects_venv_beside_the_build_runs() {
    // A project laid out as `make run` leaves it: the binary under
    // target/release, a `.venv/bin/python` at the top (here a script that
    // says it ran). The binary is started from elsewhere.
    let dir = tempfile::tempdir().unwrap();
    let bin_dir = dir.path().join("target/release");
    let venv_bin = dir.path().join(".venv/bin");
    std::fs::create_dir_all(&bin_dir).unwrap();
    std::fs::create_dir_all(&venv_bin).unwrap();
    let bin = bin_dir.join("hvio");
    std::fs::copy(env!("CARGO_BIN_EXE_hvio"), &bin).unwrap();
    let python = venv_bin.join("python");
    std::fs::write(&python, "#!/bin/sh\necho \"venv python $*\"\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let o = Command::new(&bin)
        .env_remove("HVIO_PYTHON")
        .current_dir(elsewhere.path())
        .args(["report", "--out", "res"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "venv python -m hvio report --out res\n"
    );
}
