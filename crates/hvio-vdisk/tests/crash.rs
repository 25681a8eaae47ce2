//! Crash consistency with a store that loses what was not made durable: the
//! `volatile_test` write cache holds plain writes in memory, lets random ones
//! reach the file out of order, writes them all on FLUSH, and drops the rest
//! on a "power cut". Oracle: every write acknowledged before a FLUSH that
//! completed, and every acknowledged FUA write, reads back exactly; every
//! other block holds its old contents (zeros) or its new ones, never anything
//! else. The negative control (FLUSH ignored) must break the oracle.

mod common;
use common::*;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn conf(ignore_flush: bool) -> String {
    format!(
        r#"
[store]
path = "@DIR@/disk.img"
depth = 16
volatile_test = {{ persist_probability = 0.3, seed = 7, ignore_flush = {ignore_flush} }}
[scheduler]
name = "deadline"
[nbd]
unix = "@DIR@/nbd.sock"
[[vm]]
name = "vm1"
size = "64MiB"
"#
    )
}

/// Run three writers, cut the power, and return the blocks the oracle finds
/// wrong, plus (acked, covered, lost in the cache).
fn run_and_crash(ignore_flush: bool) -> (Vec<String>, usize, usize, usize) {
    let d = Daemon::start(&conf(ignore_flush));
    let go = Arc::new(AtomicBool::new(true));
    let clients: Vec<_> = (0..3)
        .map(|i| {
            let (s, g) = (d.sock(), go.clone());
            std::thread::spawn(move || flushing_writer(s, i, g, 10, None))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(600));
    go.store(false, Ordering::Relaxed);
    let seen: Vec<Seen> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    // Power cut: the held writes are gone.
    let lost = d.running.as_ref().unwrap().store.volatile.as_ref().unwrap().crash();
    let f = std::fs::File::open(d.path("disk.img")).unwrap();
    let mut wrong = Vec::new();
    let mut buf = vec![0u8; 4096];
    let (mut acked, mut covered) = (0, 0);
    for s in &seen {
        for (i, &blk) in s.acked.iter().enumerate() {
            acked += 1;
            f.read_exact_at(&mut buf, blk * 4096).unwrap();
            let new = buf == pattern(7, blk);
            let old = buf.iter().all(|&b| b == 0);
            let must = i < s.flushed || s.fua.contains(&blk);
            covered += usize::from(must);
            if must && !new {
                wrong.push(format!("block {blk}: durable write lost"));
            } else if !new && !old {
                wrong.push(format!("block {blk}: neither old nor new contents"));
            }
        }
    }
    d.stop();
    (wrong, acked, covered, lost)
}

#[test]
fn flushed_and_fua_writes_survive_a_power_cut() {
    let (wrong, acked, covered, lost) = run_and_crash(false);
    eprintln!("crash: {acked} writes acknowledged, {covered} durable by FLUSH/FUA, {lost} lost in the volatile cache");
    assert!(
        covered > 50,
        "the run did not exercise the cache ({covered} covered, {lost} lost)"
    );
    assert!(
        wrong.is_empty(),
        "{} wrong blocks, e.g. {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(5)]
    );
}

#[test]
fn negative_control_ignoring_flush_is_caught() {
    let (wrong, acked, covered, lost) = run_and_crash(true);
    eprintln!(
        "crash (FLUSH ignored): {acked} acknowledged, {covered} should be durable, {lost} lost, {} caught",
        wrong.len()
    );
    assert!(!wrong.is_empty(), "the oracle did not notice FLUSH being ignored");
    assert!(wrong.iter().all(|w| w.contains("durable write lost")));
}
