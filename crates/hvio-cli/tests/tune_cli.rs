//! `hvio tune` end to end: Algorithm 1 over a config's phases, the brute
//! force beside it, and the written plan, which `hvio sim` runs in the time
//! the search predicted.

use std::path::{Path, PathBuf};
use std::process::Command;

fn hvio(dir: &Path, args: &[&str]) -> (bool, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_hvio"))
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap();
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("tune-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Two VMs, a sequential phase and a random one, on the small test disk,
/// under (noop, noop).
fn config(phases: &[&str]) -> String {
    config_under("noop", phases)
}

/// [`config`] with `sched` at the host and in both guests.
fn config_under(sched: &str, phases: &[&str]) -> String {
    let mut text = format!("seed = 5\n[disk]\nmodel = \"simple\"\n[host]\nscheduler = \"{sched}\"\n");
    for vm in ["a", "b"] {
        text.push_str(&format!(
            "[[vm]]\nname = \"{vm}\"\nimage_size = \"1GiB\"\nguest_scheduler = \"{sched}\"\n"
        ));
        for (i, p) in phases.iter().enumerate() {
            let job = if i % 2 == 0 {
                "rw = \"read\"\nbs = \"128k\"\nsize = \"16MiB\"\nnumjobs = 2\n"
            } else {
                "rw = \"randrw\"\nbs = \"16k\"\nsize = \"64MiB\"\niodepth = 4\nrequests = 200\n"
            };
            text.push_str(&format!("[[vm.job]]\nname = \"{p}\"\nphase = \"{p}\"\n{job}"));
        }
    }
    text
}

fn value_after<'a>(out: &'a str, prefix: &str) -> &'a str {
    let line = out
        .lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix:?} in\n{out}"));
    line[prefix.len()..].split_whitespace().next().unwrap()
}

#[test]
fn the_written_plan_runs_in_the_predicted_time() {
    let dir = scratch("plan");
    std::fs::write(dir.join("job.toml"), config(&["scan", "update"])).unwrap();
    let (ok, out, err) = hvio(
        &dir,
        &[
            "tune",
            "job.toml",
            "--host",
            "noop,deadline,anticipatory",
            "--guest",
            "noop,cfq",
            "--brute-force",
            "--out",
            "plan.toml",
        ],
    );
    assert!(ok, "{err}");
    // Not a terminal: no progress bar.
    assert_eq!(err, "");
    assert!(out.contains("2 phases (scan, update), 6 pairs"), "{out}");
    assert!(out.contains("Algorithm 1's plan: scan: ("), "{out}");
    assert!(out.contains("chosen plan ("), "{out}");
    let predicted: f64 = value_after(&out, "predicted: ").parse().unwrap();
    let gap: f64 = out
        .lines()
        .find(|l| l.starts_with("brute force: the optimum is "))
        .and_then(|l| l.split("Algorithm 1 is ").nth(1))
        .and_then(|r| r.split(' ').next())
        .unwrap_or_else(|| panic!("no brute-force line in\n{out}"))
        .parse()
        .unwrap();
    assert!(gap >= 0.0, "the optimum is the fastest of all plans: {out}");
    // The plan written is the fastest run measured: with the brute force,
    // no slower than its optimum.
    let optimum: f64 = out
        .lines()
        .find_map(|l| l.strip_prefix("brute force: the optimum is "))
        .and_then(|l| l.rsplit_once(" s); ").map(|(a, _)| a))
        .and_then(|a| a.rsplit_once('(').map(|(_, s)| s))
        .unwrap_or_else(|| panic!("no optimum in\n{out}"))
        .parse()
        .unwrap();
    assert!(
        predicted <= optimum,
        "predicted {predicted} against the optimum {optimum}\n{out}"
    );
    // 1 as written, 6 profiling, Algorithm 1 within P × S = 12, 36 brute force.
    let runs: usize = value_after(&out, "runs: ").parse().unwrap();
    assert!((1 + 6 + 36..=1 + 6 + 12 + 36).contains(&runs), "{out}");
    let plan = std::fs::read_to_string(dir.join("plan.toml")).unwrap();
    assert!(plan.contains("[[phase]]\nat = \"scan\""), "{plan}");
    let (ok, sim, err) = hvio(&dir, &["sim", "plan.toml", "--json", "plan.json"]);
    assert!(ok, "{err}");
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("plan.json")).unwrap()).unwrap();
    let total: f64 = r["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["duration_s"].as_f64().unwrap())
        .sum();
    assert_eq!(format!("{total:.3}"), format!("{predicted:.3}"), "{sim}");
}

#[test]
fn a_config_without_phases_is_one_phase_and_gets_the_best_single_pair() {
    let dir = scratch("whole");
    let text = config(&["scan"]).replace("phase = \"scan\"\n", "");
    std::fs::write(dir.join("job.toml"), text).unwrap();
    let (ok, out, err) = hvio(
        &dir,
        &[
            "tune",
            "job.toml",
            "--host",
            "noop,cfq",
            "--guest",
            "noop",
            "--out",
            "plan.toml",
        ],
    );
    assert!(ok, "{err}");
    assert!(out.contains("the whole run is one phase; 2 pairs"), "{out}");
    assert!(out.contains("gain over the best single pair"), "{out}");
    assert!(
        out.contains(": 0.00 %"),
        "one phase: the plan is the best single pair\n{out}"
    );
    let plan = std::fs::read_to_string(dir.join("plan.toml")).unwrap();
    assert!(plan.contains("at_s = 0.0"), "{plan}");
    let (ok, _, err) = hvio(&dir, &["sim", "plan.toml", "--json", "plan.json"]);
    assert!(ok, "{err}");
}

#[test]
fn a_config_faster_as_written_than_every_plan_is_written_without_a_plan() {
    // (cfq, cfq) as written is faster here than every pair of noop and
    // deadline: the plan written is the config itself, and it says so.
    let dir = scratch("as-written");
    std::fs::write(dir.join("job.toml"), config_under("cfq", &["scan", "update"])).unwrap();
    let (ok, out, err) = hvio(
        &dir,
        &[
            "tune",
            "job.toml",
            "--host",
            "noop,deadline",
            "--guest",
            "noop",
            "--out",
            "plan.toml",
        ],
    );
    assert!(ok, "{err}");
    assert!(
        out.contains("chosen plan (the config as written, faster than every plan measured): no [[phase]] plan"),
        "{out}"
    );
    let predicted = value_after(&out, "predicted: ");
    let default = out
        .lines()
        .find_map(|l| l.strip_prefix("gain over the config's own schedulers ("))
        .and_then(|l| l.split(' ').next())
        .unwrap_or_else(|| panic!("no default in\n{out}"));
    assert_eq!(predicted, default, "{out}");
    let plan = std::fs::read_to_string(dir.join("plan.toml")).unwrap();
    assert!(!plan.contains("[[phase]]"), "{plan}");
    assert!(plan.contains("measured no plan faster"), "{plan}");
}

#[test]
fn bad_options_are_errors_naming_them_before_any_run() {
    let dir = scratch("bad");
    std::fs::write(dir.join("job.toml"), config(&["a", "b", "c", "d"])).unwrap();
    let (ok, _, err) = hvio(&dir, &["tune", "job.toml", "--host", "cfq,fifo"]);
    assert!(!ok && err.contains("--host") && err.contains("fifo"), "{err}");
    let (ok, _, err) = hvio(&dir, &["tune", "job.toml", "--guest", ","]);
    assert!(!ok && err.contains("--guest"), "{err}");
    let (ok, _, err) = hvio(&dir, &["tune", "job.toml", "--policy", "later"]);
    assert!(!ok && err.contains("--policy") && err.contains("later"), "{err}");
    // 16 pairs over 4 phases: 65536 plans.
    let (ok, _, err) = hvio(&dir, &["tune", "job.toml", "--brute-force"]);
    assert!(!ok && err.contains("brute-force") && err.contains("4096"), "{err}");
    std::fs::write(
        dir.join("bad-plan.toml"),
        config(&["a"]) + "[[phase]]\nat = \"z\"\nhost = \"cfq\"\n",
    )
    .unwrap();
    let (ok, _, err) = hvio(&dir, &["tune", "bad-plan.toml"]);
    assert!(!ok && err.contains("phase 0") && err.contains("no such phase"), "{err}");
}
