//! Paper 000's experiments, scaled down (`quick`): they run, print the
//! paper's numbers beside hvio's and produce the expected rows.

use hvio_sim::experiments::{run, ExpOptions};

fn quick() -> ExpOptions {
    ExpOptions { seed: 1, quick: true }
}

fn table<'a>(r: &'a hvio_sim::experiments::Report, title: &str) -> &'a hvio_sim::report::Table {
    r.tables
        .iter()
        .find(|t| t.title.starts_with(title))
        .unwrap_or_else(|| panic!("no table {title}"))
}

#[test]
fn fig5_sweeps_the_zone_size() {
    let r = run("pregather-fig5", &quick()).unwrap();
    let t = table(&r, "Fig. 5");
    for guests in ["direct", "page-cache", "one-stream"] {
        let bs: Vec<&str> = t
            .rows
            .iter()
            .filter(|r| r[0] == guests && r[1] == "pregather")
            .map(|r| r[2].as_str())
            .collect();
        assert_eq!(bs, ["10", "2000", "10000000"], "{guests}");
        assert!(t.rows.iter().any(|r| r[0] == guests && r[1] == "cfq"));
    }
    // One-stream guests: one request in flight per reader; at B = 2000
    // Pregather waits for the stream it serves and nearly every wait succeeds.
    let row = t
        .rows
        .iter()
        .find(|r| r[0] == "one-stream" && r[1] == "pregather" && r[2] == "2000")
        .unwrap();
    let success: f64 = row[8].parse().unwrap();
    assert!(success > 80.0, "wait success {success} %");
}

#[test]
fn table3_runs_seven_mixes_and_overhead_measures() {
    let r = run("pregather-table3", &quick()).unwrap();
    assert_eq!(table(&r, "Table 3").rows.len(), 14);
    assert_eq!(table(&r, "Pregather's waits").rows.len(), 8, "seven VMs and the total");
    let o = run("pregather-overhead", &quick()).unwrap();
    let cpu = table(&o, "CPU");
    assert!(cpu.rows.iter().any(|r| r[0] == "pregather"));
    let mem = table(&o, "Memory");
    let kib: f64 = mem.rows.last().unwrap()[2].parse().unwrap();
    assert!(kib > 0.0 && kib < 2148.0, "model memory {kib} KiB");
}
