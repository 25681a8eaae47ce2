//! fio itself as the oracle for the job-file parser: sizes and units through
//! fio's null engine, sections/globals/includes/env through `--showcmd` and
//! JSON runs, validity through `--parse-only`. Skipped (with a message) when
//! fio is not installed (`scripts/deps.sh` installs it).

use hvio_trace::fio::{parse_job_file, parse_size, FioRw, SizeSpec};
use std::path::Path;
use std::process::Command;

#[path = "../../hvio-device/tests/common/skip.rs"]
mod skip;

fn have_fio() -> bool {
    let ok = Command::new("fio")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        skip::skipped("fio is not installed (apt-get install fio, or scripts/deps.sh)");
    }
    ok
}

fn json(args: &[&str], env: &[(&str, &str)], dir: &Path) -> serde_json::Value {
    let mut c = Command::new("fio");
    c.args(args).arg("--output-format=json").current_dir(dir);
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    assert!(
        o.status.success(),
        "fio {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = String::from_utf8_lossy(&o.stdout);
    // fio may print notes before the JSON.
    let start = text.find('{').expect("fio printed JSON");
    serde_json::from_str(&text[start..]).unwrap()
}

#[test]
fn size_units_match_fio() {
    if !have_fio() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for kb in [1024u32, 1000] {
        for s in [
            "4k", "4K", "4kb", "4KiB", "1m", "1mi", "1mib", "1MiB", "1M", "3ki", "0x2000", "8192", "8192b", "1g",
        ] {
            let SizeSpec::Bytes(ours) = parse_size(s, kb).unwrap() else {
                panic!("{s}")
            };
            let bs = if ours >= 1 << 26 { "1m" } else { "512" };
            let kbarg = format!("--kb_base={kb}");
            let sarg = format!("--size={s}");
            let barg = format!("--bs={bs}");
            let v = json(
                &[&kbarg, "--name=u", "--ioengine=null", &sarg, "--rw=read", &barg],
                &[],
                dir.path(),
            );
            let io = v["jobs"][0]["read"]["io_bytes"].as_u64().unwrap();
            let bsb = if bs == "1m" {
                if kb == 1000 {
                    1_000_000
                } else {
                    1 << 20
                }
            } else {
                512
            };
            assert_eq!(
                io,
                ours / bsb * bsb,
                "size={s} kb_base={kb}: fio did {io} bytes, hvio reads {ours}"
            );
        }
    }
}

#[test]
fn job_files_match_fio() {
    if !have_fio() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("common.inc"), "ioengine=null\nthread\n").unwrap();
    let job = "\
; hvio oracle test
[global]
include common.inc
rw=read
size=${HVIO_SZ}
bs=4k,8k
[first]
numjobs=2
[second]
rw=write
size=256k
# second global: applies to the jobs after it only
[global]
bs=16k
kb_base=1000
[third]
size=1m
norandommap
";
    let path = dir.path().join("oracle.fio");
    std::fs::write(&path, job).unwrap();
    std::env::set_var("HVIO_SZ", "512k");
    let ours = parse_job_file(&path).unwrap();
    let names: Vec<&str> = ours.jobs.iter().map(|j| j.name.as_str()).collect();
    assert_eq!(names, ["first", "second", "third"]);
    assert_eq!(ours.jobs[1].rw, FioRw::Write);
    assert_eq!(ours.jobs[0].ioengine.as_deref(), Some("null"));
    assert!(ours.warnings.iter().any(|w| w.option == "norandommap"));

    // --showcmd: the same jobs in the same order.
    let o = Command::new("fio")
        .arg("--showcmd")
        .arg(&path)
        .env("HVIO_SZ", "512k")
        .output()
        .unwrap();
    assert!(o.status.success());
    let cmd = String::from_utf8_lossy(&o.stdout);
    let shown: Vec<&str> = cmd
        .split_whitespace()
        .filter_map(|t| t.strip_prefix("--name="))
        .collect();
    assert_eq!(shown, names, "{cmd}");

    // A real (null-engine) run: one entry per numjobs clone, the bytes and
    // request counts each job's size and block size imply.
    let v = json(&[path.to_str().unwrap()], &[("HVIO_SZ", "512k")], dir.path());
    let runs = v["jobs"].as_array().unwrap();
    let expected: usize = ours.jobs.iter().map(|j| j.numjobs as usize).sum();
    assert_eq!(runs.len(), expected);
    let mut k = 0;
    for j in &ours.jobs {
        for _ in 0..j.numjobs {
            let r = &runs[k];
            k += 1;
            assert_eq!(r["jobname"].as_str().unwrap(), j.name);
            let (dir, bs) = if j.rw == FioRw::Write {
                ("write", j.bs[1])
            } else {
                ("read", j.bs[0])
            };
            let Some(SizeSpec::Bytes(size)) = j.size else { panic!() };
            let io = r[dir]["io_bytes"].as_u64().unwrap();
            let ios = r[dir]["total_ios"].as_u64().unwrap();
            assert_eq!(io, size / bs * bs, "job {}: bytes", j.name);
            assert_eq!(ios, size / bs, "job {}: requests of {bs} bytes", j.name);
        }
    }
}

#[test]
fn validity_matches_fio_parse_only() {
    if !have_fio() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "[j]\nrw=randrw\nrwmixread=70\nsize=1m\nbssplit=4k/50:8k/50\nrandom_distribution=zipf:1.2\n",
            true,
        ),
        (
            "[j]\nsize=1m\nrandom_distribution=pareto:0.5\nthinktime=10\nrate_iops=100\n",
            true,
        ),
        (
            "[j]\nsize=1m\nrandom_distribution=normal:5\nfsync=8\niodepth=4\nnrfiles=2\noffset=4k\n",
            true,
        ),
        ("[j]\nsize=1m\nrw=sideways\n", false),
        ("[j]\nsize=1m\nrandom_distribution=zipf:1\n", false),
        ("[j]\nsize=1m\nrandom_distribution=pareto:1.5\n", false),
        ("[j]\nsize=1m\nrandom_distribution=normal:100\n", false),
    ];
    for (i, (text, valid)) in cases.iter().enumerate() {
        let p = dir.path().join(format!("c{i}.fio"));
        std::fs::write(&p, text).unwrap();
        let fio_ok = Command::new("fio")
            .arg("--parse-only")
            .arg(&p)
            .output()
            .unwrap()
            .status
            .success();
        let ours_ok = parse_job_file(&p).is_ok();
        assert_eq!(fio_ok, *valid, "fio on case {i}:\n{text}");
        assert_eq!(ours_ok, *valid, "hvio on case {i}:\n{text}");
    }
}
