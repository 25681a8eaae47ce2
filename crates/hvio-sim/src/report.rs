//! Plain-text tables of results (the CLI prints them; Python builds its own
//! DataFrames from the JSON).

use crate::metrics::SimResult;
use serde::Serialize;

/// A titled table of strings, printable with aligned columns.
#[derive(Clone, Debug, Serialize, Default)]
pub struct Table {
    /// Its title.
    pub title: String,
    /// Column headings.
    pub columns: Vec<String>,
    /// Rows of cells.
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// An empty table.
    pub fn new(title: impl Into<String>, columns: &[&str]) -> Table {
        Table {
            title: title.into(),
            columns: columns.iter().map(|c| c.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Aligned text: first column left, the others right.
    pub fn render(&self) -> String {
        let n = self.columns.len();
        let mut w: Vec<usize> = self.columns.iter().map(|c| c.chars().count()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate().take(n) {
                w[i] = w[i].max(c.chars().count());
            }
        }
        let line = |cells: &[String]| -> String {
            let mut s = String::new();
            for (i, c) in cells.iter().enumerate().take(n) {
                let pad = w[i] - c.chars().count();
                if i == 0 {
                    s.push_str(c);
                    s.push_str(&" ".repeat(pad));
                } else {
                    s.push_str("  ");
                    s.push_str(&" ".repeat(pad));
                    s.push_str(c);
                }
            }
            s.trim_end().to_string()
        };
        let mut out = String::new();
        if !self.title.is_empty() {
            out.push_str(&self.title);
            out.push('\n');
        }
        out.push_str(&line(&self.columns));
        out.push('\n');
        out.push_str(&w.iter().map(|&x| "-".repeat(x)).collect::<Vec<_>>().join("  "));
        out.push('\n');
        for r in &self.rows {
            out.push_str(&line(r));
            out.push('\n');
        }
        out
    }
}

/// Format a float with `d` decimals.
pub fn f(x: f64, d: usize) -> String {
    format!("{x:.d$}")
}

/// The per-VM table of one run.
pub fn vm_table(r: &SimResult) -> Table {
    let mut t = Table::new(
        format!("scheduler {}: per VM", r.scheduler),
        &[
            "vm", "weight", "MB/s", "IOPS", "MB", "active s", "p50 ms", "p99 ms", "disk s",
        ],
    );
    for v in &r.vms {
        t.row(vec![
            v.vm.clone(),
            v.weight.to_string(),
            f(v.mb_per_s, 2),
            f(v.iops, 1),
            f(v.mb, 1),
            f(v.active_s, 2),
            f(v.latency.p50_ms, 2),
            f(v.latency.p99_ms, 2),
            f(v.disk_time_s, 2),
        ]);
    }
    t
}

/// The per-job table of one run (sysbench-style execution times).
pub fn job_table(r: &SimResult) -> Table {
    let mut t = Table::new(
        format!("scheduler {}: per job", r.scheduler),
        &[
            "vm", "job", "exec s", "MB/s", "IOPS", "mean ms", "p95 ms", "p99 ms", "done",
        ],
    );
    for j in &r.jobs {
        t.row(vec![
            j.vm.clone(),
            j.job.clone(),
            f(j.exec_time_s, 2),
            f(j.mb_per_s, 2),
            f(j.iops, 1),
            f(j.latency.mean_ms, 2),
            f(j.latency.p95_ms, 2),
            f(j.latency.p99_ms, 2),
            if j.finished { "yes".into() } else { "no".into() },
        ]);
    }
    t
}

/// Host-level summary of one run.
pub fn host_table(r: &SimResult) -> Table {
    let h = &r.host;
    let mut t = Table::new(format!("scheduler {}: host", r.scheduler), &["metric", "value"]);
    let mut rows: Vec<(&str, String)> = vec![
        ("total MB/s", f(r.total_mb_per_s, 2)),
        ("simulated s", f(r.sim_time_s, 2)),
        ("host requests", h.requests.to_string()),
        ("zero seek %", f(100.0 * h.seek.zero_frac, 2)),
        ("within ±image %", f(100.0 * h.seek.within_image_frac, 2)),
        ("beyond image %", f(100.0 * h.seek.beyond_image_frac, 2)),
        ("mean seek ms", f(h.mean_seek_ms, 3)),
        ("mean rotation ms", f(h.mean_rotation_ms, 3)),
        ("busy s", f(h.busy_s, 2)),
        ("idle with pending s", f(h.idle_pending_s, 2)),
    ];
    if let Some(b) = h.seek.zero_bound_frac {
        rows.insert(4, ("zero seek, any order's most %", f(100.0 * b, 2)));
    }
    for (k, v) in rows {
        t.row(vec![k.to_string(), v]);
    }
    for (k, v) in h.counters.iter().chain(&h.device) {
        t.row(vec![k.clone(), format!("{v}")]);
    }
    t
}

/// The run's phases and the pair the plan ran in each (empty without phases).
pub fn phase_table(r: &SimResult) -> Table {
    let mut t = Table::new(
        "phases",
        &["phase", "start s", "end s", "duration s", "host", "guests", "done"],
    );
    for p in &r.phases {
        let mut guests = p.guests.clone();
        guests.dedup();
        t.row(vec![
            p.name.clone(),
            f(p.start_s, 3),
            f(p.end_s, 3),
            f(p.duration_s, 3),
            p.host.clone(),
            guests.join(","),
            if p.finished { "yes".into() } else { "no".into() },
        ]);
    }
    t
}

/// Every switch the plan made and what it cost, with the count and the
/// total time switching in the title.
pub fn switch_table(r: &SimResult) -> Table {
    let total_ms: f64 = r.switches.iter().map(|s| s.switch_ms).sum();
    let mut t = Table::new(
        format!("switches: {}, {} ms switching in all", r.switches.len(), f(total_ms, 3)),
        &[
            "at",
            "from",
            "to",
            "policy",
            "asked s",
            "swapped s",
            "switch ms",
            "handed over",
            "bypassed",
            "held",
        ],
    );
    for s in &r.switches {
        t.row(vec![
            s.at.clone(),
            s.from.clone(),
            s.to.clone(),
            s.policy.clone(),
            f(s.requested_s, 3),
            f(s.swapped_s, 3),
            f(s.switch_ms, 3),
            s.handed_over.to_string(),
            s.bypassed.to_string(),
            s.held.to_string(),
        ]);
    }
    t
}

/// What address reshaping cost, per VM that reshapes and in total (none
/// when no VM reshapes): host-side write amplification, cleaning, log and
/// checkpoint traffic, remap table memory.
pub fn reshape_table(r: &SimResult) -> Option<Table> {
    let total = r.reshape.as_ref()?;
    let mut t = Table::new(
        "address reshaping (paper 001): host-side cost",
        &[
            "vm",
            "guest MB written",
            "image MB written",
            "host WA",
            "cleaning MB read",
            "cleaning MB written",
            "segments cleaned",
            "log MB",
            "checkpoint MB",
            "table extents",
            "table KiB",
            "table KiB/GiB written",
        ],
    );
    let mb = |b: u64| f(b as f64 / 1e6, 1);
    let rows = r
        .vms
        .iter()
        .filter_map(|v| v.reshape.as_ref().map(|x| (v.vm.as_str(), x)))
        .chain(std::iter::once(("total", total)));
    for (name, x) in rows {
        t.row(vec![
            name.to_string(),
            mb(x.guest_write_bytes()),
            mb(x.image_write_bytes()),
            f(x.write_amplification(), 3),
            mb(x.stats.clean_read_sectors * hvio_core::SECTOR_BYTES),
            mb(x.clean_write_bytes()),
            x.stats.segments_cleaned.to_string(),
            mb(x.stats.log_bytes),
            mb(x.stats.checkpoint_bytes),
            x.table_extents.to_string(),
            f(x.table_bytes as f64 / 1024.0, 1),
            f(x.table_bytes_per_gib_written() / 1024.0, 1),
        ]);
    }
    Some(t)
}
