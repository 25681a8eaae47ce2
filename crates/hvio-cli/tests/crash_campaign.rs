//! The reshaped image's crash campaign, short: `hvio image crash-test` with
//! 30 crashes (kill -9, power cut, crash inside a checkpoint or a cleaning
//! copy, in turn) must find no failure, and each negative control (commit
//! before data, no fdatasync at FLUSH, a lost checkpoint) must be caught.
//! The full campaign (1,000 crashes) is `hvio image crash-test` itself.

use std::process::Command;

fn crash_test(dir: &std::path::Path, extra: &[&str]) -> (bool, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_hvio"))
        .args(["image", "crash-test", "--dir"])
        .arg(dir)
        .args(extra)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.success(), text)
}

fn failures(text: &str) -> u64 {
    let line = text
        .lines()
        .find(|l| l.starts_with("failures"))
        .unwrap_or_else(|| panic!("{text}"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn thirty_crashes_lose_nothing_durable() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, text) = crash_test(dir.path(), &["--crashes", "30", "--seed", "7"]);
    assert!(ok, "{text}");
    assert_eq!(failures(&text), 0, "{text}");
    assert!(
        text.contains("crashes          30 (10 kill -9, 10 power cut, 10 crash in checkpoint/cleaning)"),
        "{text}"
    );
    // Every crash's state is read back (one more: the last); a crash point
    // the cleaner reaches while a state is read ends that reading early.
    let states: u64 = text
        .lines()
        .find(|l| l.starts_with("states checked"))
        .and_then(|l| l.split_whitespace().nth(2))
        .unwrap()
        .parse()
        .unwrap();
    assert!(states >= 21, "{text}");
}

#[test]
fn negative_controls_are_caught() {
    for fault in ["commit-before-data", "no-flush-sync", "lost-checkpoint"] {
        let dir = tempfile::tempdir().unwrap();
        let (ok, text) = crash_test(dir.path(), &["--crashes", "8", "--fault", fault]);
        // With a fault the command succeeds only if it found failures.
        assert!(ok, "{fault} went unnoticed:\n{text}");
        assert!(failures(&text) > 0, "{fault}:\n{text}");
    }
}
