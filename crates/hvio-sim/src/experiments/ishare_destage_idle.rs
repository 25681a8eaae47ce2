//! How iShare's goals on the controller write cache depend on the cache's
//! idle delay before it destages (`destage_idle_ms`): Tables II–IV's twelve
//! workloads and Fig. 4's phases under CFQ, Blkio and iShare, for each delay
//! of [`SWEEP_MS`]. The experiments use
//! [`CONTROLLER_DESTAGE_IDLE_MS`](super::ishare_tables::CONTROLLER_DESTAGE_IDLE_MS),
//! taken from DiskSim's controller cache rather than from this sweep; the
//! sweep shows what would change with another choice (docs/ishare.md).

use super::ishare_fig4::{phase_goal, PHASES, PHASE_COLUMNS};
use super::ishare_tables::{controller_cache, goals, measure, Bw, WORKLOADS};
use super::{ishare_fig4, ExpOptions, Experiment, Report};
use crate::error::Result;
use crate::report::{f, Table};
use serde_json::json;

pub const EXPERIMENT: Experiment = Experiment {
    name: "ishare-destage-idle",
    title: "iShare's goals behind the controller write cache, by its idle delay before destaging",
    paper: "003 Tables II–IV, Fig. 4",
    run,
};

/// The idle delays of the sweep, ms (0: destage in any gap, the drive model's default).
pub(crate) const SWEEP_MS: [f64; 8] = [0.0, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0];

/// A goal line "what (value)" split into its label and its value.
fn split_goal(line: &str) -> (String, String) {
    match line.rsplit_once(" (") {
        Some((what, v)) => (what.to_string(), v.trim_end_matches(')').to_string()),
        None => (line.to_string(), String::new()),
    }
}

pub fn run(opts: &ExpOptions) -> Result<Report> {
    let runtime_s = if opts.quick { 4.0 } else { 60.0 };
    let mut tables = Vec::new();
    let mut data = Vec::new();
    // goal label → one "value yes/NO" cell per delay
    let mut matrix: Vec<(String, Vec<String>)> = Vec::new();
    let mut ratios: Vec<Vec<String>> = WORKLOADS.iter().map(|w| vec![w.to_string()]).collect();
    for (n, ms) in SWEEP_MS.iter().enumerate() {
        let disk = controller_cache(*ms);
        let m = measure(opts, runtime_s, &disk)?;
        let fig = ishare_fig4::run_on(opts, &disk)?;
        tables.push(workload_table(*ms, &m));
        tables.push(fig4_table(*ms, &fig.phases));
        let mut lines = goals(&m).lines;
        lines.extend((0..PHASES.len()).map(|p| phase_goal(p, &fig.phases)));
        for (k, (line, ok)) in lines.into_iter().enumerate() {
            let (what, v) = split_goal(&line);
            if n == 0 {
                matrix.push((what, Vec::new()));
            }
            matrix[k].1.push(format!("{v} {}", if ok { "yes" } else { "NO" }));
        }
        for (row, r) in ratios.iter_mut().zip(&m) {
            row.push(f(r[2].total() / r[1].total().max(1e-9), 2));
        }
        data.push(json!({ "destage_idle_ms": ms, "measured": m, "fig4_phase_means": fig.phases }));
    }
    let head: Vec<String> = SWEEP_MS.iter().map(|ms| format!("{ms} ms")).collect();
    let mut cols = vec!["workload".to_string()];
    cols.extend(head.iter().cloned());
    let cols_ref: Vec<&str> = cols.iter().map(String::as_str).collect();
    let mut t = Table::new("iShare/Blkio total by destage_idle_ms", &cols_ref);
    for row in ratios {
        t.row(row);
    }
    tables.push(t);
    let mut cols = vec!["goal".to_string()];
    cols.extend(head);
    let cols_ref: Vec<&str> = cols.iter().map(String::as_str).collect();
    let mut t = Table::new("goals by destage_idle_ms", &cols_ref);
    for (what, cells) in matrix {
        let mut row = vec![what];
        row.extend(cells);
        t.row(row);
    }
    tables.push(t);
    Ok(Report {
        tables,
        notes: vec![
            format!("controller cache (256 MiB write-back, CSCAN destage, 60 s age bound, destaged data kept clean; adaptive read-ahead of 64 KiB, 64 segments) with each destage_idle_ms; {runtime_s} s per workload, Fig. 4 as in ishare-fig4; the experiments use {} ms", super::ishare_tables::CONTROLLER_DESTAGE_IDLE_MS),
            "the cache destages at once, whatever the delay, when half of it is dirty, a run is due by age, a flush waits or a write waits for room".into(),
        ],
        data: json!({ "sweep_ms": SWEEP_MS, "workloads": WORKLOADS, "phases": PHASES, "runs": data }),
        ..Default::default()
    })
}

/// Totals and ratios of the twelve workloads at one delay.
fn workload_table(ms: f64, m: &[[Bw; 3]]) -> Table {
    let mut t = Table::new(
        format!("destage_idle_ms = {ms}: totals, MB/s"),
        &[
            "workload",
            "CFQ",
            "Blkio",
            "iShare",
            "iShare/Blkio",
            "Blkio VM1:VM2",
            "iShare VM1:VM2",
        ],
    );
    for (w, r) in WORKLOADS.iter().zip(m) {
        t.row(vec![
            w.to_string(),
            f(r[0].total(), 2),
            f(r[1].total(), 2),
            f(r[2].total(), 2),
            f(r[2].total() / r[1].total().max(1e-9), 2),
            f(r[1].ratio(), 2),
            f(r[2].ratio(), 2),
        ]);
    }
    t
}

/// Fig. 4's per-phase totals at one delay.
fn fig4_table(ms: f64, phases: &[Vec<Bw>]) -> Table {
    let mut t = Table::new(
        format!("destage_idle_ms = {ms}: Fig. 4, mean total per phase, MB/s"),
        &PHASE_COLUMNS,
    );
    for (p, w) in PHASES.iter().enumerate() {
        let (c, b, i) = (&phases[0][p], &phases[1][p], &phases[2][p]);
        t.row(vec![
            p.to_string(),
            w.to_string(),
            f(c.total(), 1),
            f(b.total(), 1),
            f(i.total(), 1),
            f(i.ratio(), 2),
            f(i.total() / c.total().max(1e-9), 2),
        ]);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn goal_lines_split_into_label_and_value() {
        assert_eq!(
            split_goal("U-SRW: iShare total ≥ 1.2× Blkio (1.71×)"),
            ("U-SRW: iShare total ≥ 1.2× Blkio".to_string(), "1.71×".to_string())
        );
        assert_eq!(
            split_goal("O-SR: iShare total within 5 % of Blkio (-4.6 %)"),
            (
                "O-SR: iShare total within 5 % of Blkio".to_string(),
                "-4.6 %".to_string()
            )
        );
        assert_eq!(split_goal("no value"), ("no value".to_string(), String::new()));
    }
}
