//! `hvio trace stats`, `hvio trace convert` and `hvio replay` end to end.

use std::process::Command;

fn data(name: &str) -> String {
    format!("{}/../hvio-trace/tests/data/{name}", env!("CARGO_MANIFEST_DIR"))
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
fn trace_stats_prints_and_serialises() {
    let (ok, out, err) = hvio(&["trace", "stats", &data("sda.blkparse")]);
    assert!(ok, "{err}");
    assert!(
        out.contains("requests    7 (2 reads, 3 writes, 1 flushes, 1 discards)"),
        "{out}"
    );
    // The lines that are not requests, by reason.
    assert!(
        out.contains("not read    18 lines that are not requests: 2 blkparse run-time lines (Input file ...), 8 summary lines, 8 events other than Q"),
        "{out}"
    );
    let (ok, out, _) = hvio(&["trace", "stats", "--json", &data("alibaba.csv")]);
    assert!(ok);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["requests"], 3);
    assert_eq!(v["format"], "alibaba");
}

#[test]
fn bad_input_is_an_error_unless_skipped() {
    let dir = std::env::temp_dir().join(format!("hvio-cli-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("bad.csv");
    std::fs::write(&p, "1,W,0,4096,10\n1,Q,0,4096,11\n1,R,0,4096,12\n").unwrap();
    let p = p.to_str().unwrap();
    let (ok, _, err) = hvio(&["trace", "stats", "--format", "alibaba", p]);
    assert!(!ok);
    assert!(err.contains("bad.csv: line 2: expected R or W"), "{err}");
    let (ok, out, err) = hvio(&["trace", "stats", "--format", "alibaba", "--skip-bad", p]);
    assert!(ok, "{err}");
    assert!(out.contains("skipped     1 bad records"), "{out}");
    assert!(err.contains("skipped 1 bad records"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn convert_then_read_back() {
    let (ok, out, err) = hvio(&["trace", "convert", "--to", "iolog3", &data("tencent.csv")]);
    assert!(ok, "{err}");
    assert!(out.starts_with("fio version 3 iolog\n"));
    assert!(out.contains("1063 write 528384 4096"), "{out}");
}

#[test]
fn replay_under_two_schedulers() {
    for s in ["noop", "deadline"] {
        let (ok, out, err) = hvio(&["replay", &data("sda.blkparse"), "--scheduler", s]);
        assert!(ok, "{err}");
        assert!(out.contains(&format!("scheduler {s}: per VM")), "{out}");
        assert!(out.contains("8,16"), "{out}");
    }
    let (ok, out, err) = hvio(&[
        "replay",
        &data("mqsim.trace"),
        "--closed",
        "2",
        "--vms",
        "1",
        "--scheduler",
        "deadline",
    ]);
    assert!(ok, "{err}");
    assert!(out.contains("vm0"), "{out}");
    let (ok, _, err) = hvio(&["replay", &data("mqsim.trace"), "--scheduler", "no-such-scheduler"]);
    assert!(!ok);
    assert!(err.contains("no-such-scheduler"), "{err}");
}

#[test]
fn fio_job_files_print_jobs_and_warnings() {
    let dir = std::env::temp_dir().join(format!("hvio-cli-fio-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("j.fio");
    std::fs::write(
        &p,
        "[global]\nnorandommap\nsize=1g\n[reader]\nrw=randread\nbs=4k\niodepth=8\n",
    )
    .unwrap();
    let (ok, out, err) = hvio(&["trace", "fio", p.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(out.contains("[reader] rw=randread bs=4096,4096,4096"), "{out}");
    assert!(out.contains(" size=1073741824 offset=0 "), "{out}");
    assert!(
        out.contains(" rate_iops=,, ") && out.contains("random_distribution=random"),
        "{out}"
    );
    assert!(
        !out.contains("Some(") && !out.contains("None"),
        "no Rust debug syntax: {out}"
    );
    assert!(
        err.contains("j.fio:2: [global] norandommap: a fio option hvio does not model; ignored"),
        "{err}"
    );
    std::fs::write(&p, "[reader]\nrw=backwards\n").unwrap();
    let (ok, _, err) = hvio(&["trace", "fio", p.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("j.fio:2: rw:"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_missing_file_is_named_once() {
    let (ok, _, err) = hvio(&["trace", "stats", "/nonexistent/hvio-x.trace"]);
    assert!(!ok);
    assert!(err.contains("/nonexistent/hvio-x.trace"), "{err}");
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
}

#[test]
fn a_closed_stdout_is_not_a_panic() {
    use std::io::Read;
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::process::Stdio;
    // A pipe whose reading end is closed before hvio writes, as
    // `hvio schedulers | head -0` once head has exited.
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe(2) returns.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: both descriptors were just opened and are owned here only.
    let (read_end, write_end) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read_end);
    let mut child = Command::new(env!("CARGO_BIN_EXE_hvio"))
        .arg("schedulers")
        .stdout(Stdio::from(write_end))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    child.wait().unwrap();
    assert!(!err.contains("panicked"), "{err}");
}

/// `trace convert -o FILE` wrote FILE as it went: a bad record midway left a
/// half-written FILE (and truncated an existing one), and `-o` naming the
/// input truncated the input before reading it. Now a temporary file is
/// renamed over FILE only when the whole trace converted.
#[test]
fn convert_never_leaves_half_written_output_nor_touches_the_input() {
    let dir = std::env::temp_dir().join(format!("hvio-cli-convert-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("in.csv");
    let good = "1,W,0,4096,10\n1,R,0,4096,11\n";
    std::fs::write(&input, format!("{good}1,Q,0,4096,12\n")).unwrap();
    let out = dir.join("out.iolog");
    let names = || {
        let mut v: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    let (i, o) = (input.to_str().unwrap(), out.to_str().unwrap());
    // An error on line 3: no output file, no temporary file.
    let (ok, _, err) = hvio(&["trace", "convert", "--format", "alibaba", "--to", "iolog3", "-o", o, i]);
    assert!(!ok && err.contains("in.csv: line 3"), "{err}");
    assert_eq!(names(), ["in.csv"]);
    // An existing output stays as it was.
    std::fs::write(&out, "keep me\n").unwrap();
    let (ok, _, _) = hvio(&[
        "trace", "convert", "--format", "alibaba", "--to", "blkparse", "-o", o, i,
    ]);
    assert!(!ok);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "keep me\n");
    assert_eq!(names(), ["in.csv", "out.iolog"]);
    // The output may not be the input.
    let (ok, _, err) = hvio(&["trace", "convert", "--format", "alibaba", "--to", "iolog3", "-o", i, i]);
    assert!(!ok && err.contains("the output is the input trace"), "{err}");
    assert_eq!(
        std::fs::read_to_string(&input).unwrap(),
        format!("{good}1,Q,0,4096,12\n")
    );
    // A good trace converts, replacing the old output.
    std::fs::write(&input, good).unwrap();
    let (ok, _, err) = hvio(&["trace", "convert", "--to", "iolog3", "-o", o, i]);
    assert!(ok, "{err}");
    assert!(std::fs::read_to_string(&out)
        .unwrap()
        .starts_with("fio version 3 iolog\n"));
    assert_eq!(names(), ["in.csv", "out.iolog"]);
    std::fs::remove_dir_all(&dir).ok();
}
