//! Paper 001's experiments (`hvio reproduce paper001-*`), quick runs: the
//! direction of each effect as hvio gets it (docs/reshape.md, "Results").

use hvio_sim::experiments::{run, ExpOptions};
use serde_json::Value;

fn quick(name: &str) -> Value {
    let opts = ExpOptions { seed: 1, quick: true };
    let started = std::time::Instant::now();
    let r = run(name, &opts).unwrap_or_else(|e| panic!("{name}: {e}"));
    eprintln!(
        "{name} --quick: {:.1} s\n{}",
        started.elapsed().as_secs_f64(),
        r.render()
    );
    r.data
}

/// `data[rw].systems[system].result[key]` of a fio grid.
fn fio(data: &Value, rw: usize, system: usize, key: &str) -> f64 {
    data[rw]["systems"][system]["result"][key].as_f64().unwrap()
}

const METAL: usize = 0;
const BASELINE: usize = 1;
const RESHAPED: usize = 2;
const SEQ: usize = 0;
const RAND: usize = 1;

#[test]
fn fig5_reshaping_speeds_up_random_writes_and_keeps_sequential_ones() {
    let d = quick("paper001-fig5");
    let bw = |rw, s| fio(&d, rw, s, "mb_per_s");
    assert!(bw(RAND, RESHAPED) > 1.02 * bw(RAND, BASELINE), "{d}");
    assert!((bw(SEQ, RESHAPED) / bw(SEQ, BASELINE) - 1.0).abs() < 0.10, "{d}");
    // The drive copies less under reshaping's in-order writes.
    assert!(
        fio(&d, RAND, RESHAPED, "device_wa") < fio(&d, RAND, BASELINE, "device_wa"),
        "{d}"
    );
    assert!(bw(RAND, METAL) > 0.0);
}

#[test]
fn fig6_reshaping_lowers_random_write_latency() {
    let d = quick("paper001-fig6");
    let lat = |rw, s| fio(&d, rw, s, "mean_latency_ms");
    assert!(lat(RAND, RESHAPED) < lat(RAND, BASELINE), "{d}");
}

#[test]
fn fig7_fileserver_reads_lose_less_than_a_tenth_and_the_drive_copies_less() {
    // The quick run is too short for the write gain of the full one.
    let d = quick("paper001-fig7");
    let v = |s: usize, k: &str| d[s][k].as_f64().unwrap();
    assert!(v(RESHAPED, "read_mb_per_s") > 0.9 * v(BASELINE, "read_mb_per_s"), "{d}");
    assert!(v(RESHAPED, "device_wa") < v(BASELINE, "device_wa"), "{d}");
}

#[test]
fn fig8_reshaping_gains_under_every_host_scheduler() {
    let d = quick("paper001-fig8");
    for s in d.as_array().unwrap() {
        let g = &s["grid"][RAND];
        let bw = |k: &str| g[k]["mb_per_s"].as_f64().unwrap();
        assert!(bw("reshaped") > bw("baseline"), "{s}");
    }
}

#[test]
fn fig9_reshaping_speeds_up_random_writes_on_nvme() {
    let d = quick("paper001-fig9");
    let bw = |rw, s| fio(&d, rw, s, "mb_per_s");
    assert!(bw(RAND, RESHAPED) > bw(RAND, BASELINE), "{d}");
}

#[test]
fn fill_cleaning_grows_with_utilisation() {
    let d = quick("paper001-fill");
    let pts = d.as_array().unwrap();
    let first = &pts[0]["reshaped"];
    let last = &pts[pts.len() - 1]["reshaped"];
    let x = |p: &Value, k: &str| p[k].as_f64().unwrap();
    assert!(x(last, "host_wa") > x(first, "host_wa"), "{d}");
    assert!(x(last, "mb_per_s") < x(first, "mb_per_s"), "{d}");
}

#[test]
fn drive_state_a_trimmed_image_leaves_nothing_for_reshaping_to_gain() {
    // fio's files are written once: on the image's trimmed range every write
    // is a first write, which costs the drive the same in any order.
    let d = quick("paper001-drive-state");
    let rows = d.as_array().unwrap();
    let bw = |state: &str, row: &Value, sys: &str| {
        assert_eq!(row["state"], state);
        row[sys]["mb_per_s"].as_f64().unwrap()
    };
    let mut trimmed = 0;
    for row in rows.iter().filter(|r| r["state"] == "steady state, image trimmed") {
        let g = bw("steady state, image trimmed", row, "reshaped") / bw("steady state, image trimmed", row, "baseline");
        assert!((g - 1.0).abs() < 0.05, "{row}");
        trimmed += 1;
    }
    assert_eq!(trimmed, 4, "{d}");
    // At steady state reshaping gains on random writes, as in fig5 and fig9.
    for row in rows
        .iter()
        .filter(|r| r["state"] == "steady state" && r["workload"] == "random write")
    {
        assert!(
            bw("steady state", row, "reshaped") > bw("steady state", row, "baseline"),
            "{row}"
        );
    }
}
