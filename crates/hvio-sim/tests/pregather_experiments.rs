//! Paper 000's experiment written in Rust, `pregather-overhead`, scaled down
//! (`quick`): it runs and produces the expected rows. The others are
//! studies: tests/test_studies.py runs them.

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
fn overhead_measures_memory_and_cpu() {
    let o = run("pregather-overhead", &quick()).unwrap();
    let cpu = table(&o, "CPU");
    assert!(cpu.rows.iter().any(|r| r[0] == "pregather"));
    let mem = table(&o, "Memory");
    let kib: f64 = mem.rows.last().unwrap()[2].parse().unwrap();
    assert!(kib > 0.0 && kib < 2148.0, "model memory {kib} KiB");
}
