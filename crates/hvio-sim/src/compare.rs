//! Run one config under several host schedulers and compare them side by
//! side — the main job of `make run` (paper 000's four VMs under every
//! scheduler).

use crate::config::Config;
use crate::error::Result;
use crate::metrics::SimResult;
use crate::report::{f, Table};

/// Run `cfg` once per scheduler (the config's own `[host] params` apply only
/// to its own scheduler; the others run with their defaults).
pub fn compare(cfg: &Config, schedulers: &[&str]) -> Result<Vec<SimResult>> {
    schedulers
        .iter()
        .map(|s| {
            let mut c = cfg.clone();
            if c.host.scheduler != *s {
                c.host.params.clear();
            }
            c.host.scheduler = s.to_string();
            crate::run(&c)
        })
        .collect()
}

/// Per-VM bandwidth (MB/s) under each scheduler, total, and zero-seek share.
pub fn comparison_table(results: &[SimResult]) -> Table {
    let vms: Vec<String> = results
        .first()
        .map(|r| r.vms.iter().map(|v| v.vm.clone()).collect())
        .unwrap_or_default();
    let mut cols: Vec<String> = vec!["scheduler".into()];
    cols.extend(vms.iter().map(|v| format!("{v} MB/s")));
    cols.extend([
        "total MB/s".into(),
        "zero seek %".into(),
        "idle-wait s".into(),
        "sim s".into(),
    ]);
    let mut t = Table {
        title: "per-VM bandwidth by host scheduler".into(),
        columns: cols,
        rows: vec![],
    };
    for r in results {
        let mut row = vec![r.scheduler.clone()];
        row.extend(r.vms.iter().map(|v| f(v.mb_per_s, 2)));
        row.push(f(r.total_mb_per_s, 2));
        row.push(f(100.0 * r.host.seek.zero_frac, 1));
        row.push(f(r.host.idle_pending_s, 2));
        row.push(f(r.sim_time_s, 1));
        t.row(row);
    }
    t
}

/// Execution time of every job under each scheduler.
pub fn job_comparison_table(results: &[SimResult]) -> Table {
    let mut cols: Vec<String> = vec!["vm".into(), "job".into()];
    cols.extend(results.iter().map(|r| format!("{} s", r.scheduler)));
    let mut t = Table {
        title: "job execution time (s) by host scheduler".into(),
        columns: cols,
        rows: vec![],
    };
    if let Some(first) = results.first() {
        for (i, j) in first.jobs.iter().enumerate() {
            let mut row = vec![j.vm.clone(), j.job.clone()];
            row.extend(results.iter().map(|r| f(r.jobs[i].exec_time_s, 2)));
            t.row(row);
        }
    }
    t
}
