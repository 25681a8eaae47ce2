//! §5.2.1 of paper 000: the four VMs of Table 1 (VM1 SR-M + SR-S, VM2 SW-M +
//! SW-S, VM3 SR-M + RRW, VM4 RR + RW) on one disk under Pregather, CFQ, AS
//! and Deadline: per-application execution time (Fig. 6a), per-VM and total
//! bandwidth (Fig. 6b), the seek-distance distribution (Table 4) and per-VM
//! throughput over time (Fig. 7).

use super::{counter, exec, pct, registered, secs, simulate, sum_vm_bandwidth, Guest, DISK};
use crate::config::Config;
use crate::experiments::{ExpOptions, Report};
use crate::metrics::{SimResult, TimeSeries};
use crate::report::{f, Table};
use crate::Result;
use serde::Deserialize;

const SCHEDULERS: [&str; 4] = ["pregather", "cfq", "anticipatory", "deadline"];
const LABELS: [&str; 4] = ["Pregather", "CFQ", "AS", "Deadline"];

/// The paper's numbers, each with its table or figure and row: a data file
/// beside the configs, printed beside hvio's and never an input to a run.
const PAPER_FILE: &str = include_str!("../../../../../experiments/pregather-table4.paper.toml");

/// A column of Table 4: the seek distances (%) under one scheduler.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PaperSeek {
    /// Where the numbers come from (for readers of the file).
    #[allow(dead_code)]
    source: String,
    scheduler: String,
    zero_pct: f64,
    within_image_pct: f64,
    beyond_image_pct: f64,
}

/// Fig. 6(b): Pregather's total bandwidth over another scheduler's.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PaperRatio {
    #[allow(dead_code)]
    source: String,
    over: String,
    ratio: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PaperFile {
    table4: Vec<PaperSeek>,
    fig6b: Vec<PaperRatio>,
}

/// The paper's numbers in [`LABELS`]' order: Table 4's (zero, within
/// ±image, beyond) per scheduler, and Fig. 6(b)'s ratio over each of the
/// other three.
struct Paper {
    seek: [[f64; 3]; 4],
    total_ratio: [f64; 3],
}

impl Paper {
    fn load() -> Result<Paper> {
        let bad = |e: String| crate::SimError::Other(format!("experiments/pregather-table4.paper.toml: {e}"));
        let p: PaperFile = toml::from_str(PAPER_FILE).map_err(|e| bad(e.to_string()))?;
        let mut seek = [[0.0; 3]; 4];
        for (i, label) in LABELS.iter().enumerate() {
            let c = p
                .table4
                .iter()
                .find(|c| c.scheduler == *label)
                .ok_or_else(|| bad(format!("table4 has no scheduler = \"{label}\"")))?;
            seek[i] = [c.zero_pct, c.within_image_pct, c.beyond_image_pct];
        }
        let mut total_ratio = [0.0; 3];
        for (i, label) in LABELS[1..].iter().enumerate() {
            total_ratio[i] = p
                .fig6b
                .iter()
                .find(|r| r.over == *label)
                .ok_or_else(|| bad(format!("fig6b has no over = \"{label}\"")))?
                .ratio;
        }
        Ok(Paper { seek, total_ratio })
    }
}

/// The four-VM scenario (`hvio_sim::DEFAULT_SCENARIO`) under `scheduler`
/// with `guest`'s I/O model.
pub(super) fn scenario(opts: &ExpOptions, guest: Guest, scheduler: &str) -> Result<Config> {
    let mut cfg = Config::from_toml_str(crate::DEFAULT_SCENARIO, "paper000-four-vms.toml")?;
    cfg.seed = opts.seed;
    cfg.host.scheduler = scheduler.into();
    cfg.host.params.clear();
    cfg.output.locality_bound = true;
    guest.apply(&mut cfg, opts.quick);
    Ok(cfg)
}

/// A number taken from a run.
type Metric = fn(&SimResult) -> f64;

fn cell(r: Option<&SimResult>, g: impl Fn(&SimResult) -> String) -> String {
    r.map_or("—".into(), g)
}

pub fn run(opts: &ExpOptions) -> Result<Report> {
    let paper = Paper::load()?;
    let (have, missing) = registered(&SCHEDULERS);
    let mut tables = Vec::new();
    let mut data = Vec::new();
    for guest in Guest::WITH_WRITE_CACHE {
        let mut runs: Vec<Option<SimResult>> = Vec::new();
        for s in SCHEDULERS {
            runs.push(match have.contains(&s) {
                true => Some(simulate(&scenario(opts, guest, s)?)?),
                false => None,
            });
        }
        tables.extend(tables_for(guest, &runs, &paper));
        data.push(serde_json::json!({
            "guests": guest.short(),
            "runs": runs.iter().flatten().map(|r| serde_json::to_value(r).unwrap_or_default()).collect::<Vec<_>>(),
        }));
    }
    let mut notes = vec![
        format!(
            "disk: {}; 12 GiB images; each application moves 160 MB ({} when quick); guests: {}",
            DISK,
            "16 MB",
            Guest::WITH_WRITE_CACHE.map(Guest::label).join(" / ")
        ),
        "total bandwidth = the sum of the VMs' bandwidths, each VM's bytes over its own active period (the bars of Fig. 6b); \"all bytes / makespan\" is dominated by the slowest VM".into(),
        "paper, Fig. 6(a): Pregather cuts VM1's execution times by 55 %, 62 % and 68 % against CFQ, AS and Deadline; VM3's SR-M and RRW by more than 50 % and 44 %; VM4's RR and RW gain 3 % and 26 % over CFQ".into(),
        "seek distance between consecutive dispatches as blktrace's btt computes it (seek_dist in btt/seek.c): 0 when a request overlaps or touches the previous one at either end, else from its end (forward) or its start (backward); \"0, head travel only\" counts only a start at the previous end; \"0, most any order gives\" is the most zero seeks any dispatch order of the same requests could have (n requests in c groups of overlapping or touching ranges: (n − c) of them)".into(),
        "paper, Fig. 7: under Pregather VM1 and VM2 get more throughput than VM3 and VM4, VM4 never below 70 IOPS".into(),
    ];
    notes.extend(missing);
    Ok(Report {
        tables,
        notes,
        data: serde_json::Value::Array(data),
        ..Default::default()
    })
}

/// The figures and tables of one guest model's four runs (one per scheduler, `None` if missing).
/// The first 100 s of a run's time series in 10-s windows (Fig. 7's
/// axis): a row per window, a column per VM headed "VM `unit`", each cell
/// `cell(vm, buckets of the window)` over `column`'s buckets.
fn first_100_s(
    title: String,
    series: &TimeSeries,
    column: &[Vec<f64>],
    unit: &str,
    cell: impl Fn(usize, std::ops::Range<usize>) -> String,
) -> Table {
    let mut cols = vec!["time (s)".to_string()];
    cols.extend(series.vms.iter().map(|v| format!("{v} {unit}")));
    let colr: Vec<&str> = cols.iter().map(String::as_str).collect();
    let mut t = Table::new(title, &colr);
    let per = (10.0 / series.interval_s).round().max(1.0) as usize;
    let n = column.first().map_or(0, Vec::len).min(10 * per);
    for start in (0..n).step_by(per) {
        let mut row = vec![format!("{}–{}", start / per * 10, start / per * 10 + 10)];
        row.extend((0..series.vms.len()).map(|vm| cell(vm, start..(start + per).min(n))));
        t.row(row);
    }
    t
}

fn tables_for(guest: Guest, runs: &[Option<SimResult>], paper: &Paper) -> Vec<Table> {
    let g = guest.short();
    let rs: Vec<Option<&SimResult>> = runs.iter().map(Option::as_ref).collect();
    let vms: Vec<String> = rs
        .iter()
        .flatten()
        .next()
        .map_or(vec![], |r| r.vms.iter().map(|v| v.vm.clone()).collect());

    let mut cols = vec!["VM", "application"];
    cols.extend(LABELS);
    let mut t6a = Table::new(
        format!("Fig. 6(a): execution time per application (s), {g} guests"),
        &cols,
    );
    if let Some(r0) = rs.iter().flatten().next() {
        for j in &r0.jobs {
            let mut row = vec![j.vm.clone(), j.job.clone()];
            row.extend(rs.iter().map(|r| secs(r.and_then(|r| exec(r, &j.vm, &j.job)))));
            t6a.row(row);
        }
    }

    let mut cols = vec!["VM"];
    cols.extend(LABELS);
    let mut t6b = Table::new(format!("Fig. 6(b): bandwidth (MB/s), {g} guests"), &cols);
    for (i, vm) in vms.iter().enumerate() {
        let mut row = vec![vm.clone()];
        row.extend(rs.iter().map(|r| cell(*r, |r| f(r.vms[i].mb_per_s, 2))));
        t6b.row(row);
    }
    let mut row = vec!["total (sum of VMs)".to_string()];
    row.extend(rs.iter().map(|r| cell(*r, |r| f(sum_vm_bandwidth(r), 2))));
    t6b.row(row);
    let mut row = vec!["all bytes / makespan".to_string()];
    row.extend(rs.iter().map(|r| cell(*r, |r| f(r.total_mb_per_s, 2))));
    t6b.row(row);
    let ratio = |i: usize, g: Metric| -> Option<f64> {
        match (rs[0], rs[i]) {
            (Some(p), Some(o)) => Some(g(p) / g(o)),
            _ => None,
        }
    };
    let mut row = vec!["Pregather total ÷ this (paper)".to_string(), "1".into()];
    for i in 1..4 {
        row.push(match ratio(i, sum_vm_bandwidth) {
            Some(x) => format!("{x:.2} ({})", paper.total_ratio[i - 1]),
            None => format!("— ({})", paper.total_ratio[i - 1]),
        });
    }
    t6b.row(row);

    let mut cols = vec!["seek distance"];
    for l in LABELS {
        cols.push(l);
        cols.push("paper");
    }
    let mut t4 = Table::new(
        format!("Table 4: distribution of seek distances (%), {g} guests"),
        &cols,
    );
    let image = rs.iter().flatten().next().map_or(0, |r| r.host.seek.image_sectors);
    let rows: [(String, Metric); 3] = [
        ("0".into(), |r| r.host.seek.zero_frac),
        (format!("[-{image}, {image}]"), |r| r.host.seek.within_image_frac),
        ("beyond ± image".into(), |r| r.host.seek.beyond_image_frac),
    ];
    for (k, (label, g)) in rows.iter().enumerate() {
        let mut row = vec![label.clone()];
        for (i, r) in rs.iter().enumerate() {
            row.push(cell(*r, |r| pct(g(r))));
            row.push(f(paper.seek[i][k], 2));
        }
        t4.row(row);
    }
    // btt's zero (above) also counts overlapping and backward-adjacent
    // requests; this row is the head's own travel, start = previous end.
    let mut row = vec!["0, head travel only".to_string()];
    for r in &rs {
        row.push(cell(*r, |r| pct(r.host.seek.zero_head_frac)));
        row.push("—".into());
    }
    t4.row(row);
    // The most zero seeks any order of the same dispatches could give
    // (metrics::LocalityBound): what there was to exploit.
    let mut row = vec!["0, most any order gives".to_string()];
    for r in &rs {
        row.push(cell(*r, |r| r.host.seek.zero_bound_frac.map_or("—".into(), pct)));
        row.push("—".into());
    }
    t4.row(row);

    // blktap: the same shares over the bios in the order they reach the
    // dom0 block layer (blktrace's Q events), before the elevator merges.
    if guest == Guest::PageCacheBlktap {
        let rows: [(&str, &str); 2] = [
            ("0, bio arrival order", "blktap_queued_zero_frac"),
            ("[± image], bio arrival order", "blktap_queued_within_image_frac"),
        ];
        for (k, (label, name)) in rows.iter().enumerate() {
            let mut row = vec![label.to_string()];
            for (i, r) in rs.iter().enumerate() {
                row.push(cell(*r, |r| pct(counter(r, name))));
                row.push(f(paper.seek[i][k], 2));
            }
            t4.row(row);
        }
    }

    // The request mix the zero-seek share is drawn from.
    let mut cols = vec!["VM"];
    cols.extend(LABELS);
    let mut mix = Table::new(format!("Host requests per VM, {g} guests"), &cols);
    for (i, vm) in vms.iter().enumerate() {
        let mut row = vec![vm.clone()];
        row.extend(rs.iter().map(|r| cell(*r, |r| r.vms[i].host_requests.to_string())));
        mix.row(row);
    }

    // Fig. 7: IOPS per VM in 10-s buckets over the first 100 s.
    let mut tables = vec![t6a, t6b, t4, mix];
    for (i, r) in rs.iter().enumerate() {
        let Some(r) = r else { continue };
        if i > 1 {
            break; // Pregather and CFQ (the paper's Fig. 7a–b)
        }
        let title = format!("Fig. 7: throughput over time under {}, {g} guests", LABELS[i]);
        let iops = &r.series.iops;
        tables.push(first_100_s(title, &r.series, iops, "IOPS", |vm, b| {
            let mean = iops[vm][b.clone()].iter().sum::<f64>() / b.len().max(1) as f64;
            f(mean, 1)
        }));
    }

    // Pregather's slices over the same 10-s windows: the mean length it
    // granted each VM (Eq. 8, maybe halved) and the share of the window the
    // VM held the disk in them.
    if let Some(p) = rs[0].filter(|p| !p.series.slices.is_empty()) {
        let title = format!("Pregather's slices over time: mean granted length, share of disk time, {g} guests");
        let s = &p.series;
        // A whole 10-s window, also for a shorter last one.
        let window_ms = 1000.0 * s.interval_s * (10.0 / s.interval_s).round().max(1.0);
        tables.push(first_100_s(title, s, &s.slices, "ms, share", |vm, b| {
            let (mut count, mut granted, mut used) = (0.0, 0.0, 0.0);
            for i in b {
                let k = s.slices[vm][i];
                count += k;
                granted += k * s.slice_ms[vm][i];
                used += k * s.slice_used_ms[vm][i];
            }
            if count == 0.0 {
                "—".into()
            } else {
                format!("{:.0}, {:.0} %", granted / count, 100.0 * used / window_ms)
            }
        }));
    }

    let mut slices = Table::new(
        format!("Pregather's adaptive time slices (Eq. 8), {g} guests"),
        &[
            "VM",
            "slices",
            "mean slice ms",
            "last slice ms",
            "SI %",
            "RI",
            "model KiB (peak)",
        ],
    );
    if let Some(p) = rs[0] {
        for vm in &vms {
            let c = |k: &str| counter(p, &format!("{k}.{vm}"));
            slices.row(vec![
                vm.clone(),
                f(c("slices"), 0),
                f(c("slice_mean_ms"), 1),
                f(c("slice_ms"), 1),
                pct(c("si")),
                format!("{:.2e}", c("ri")),
                f(c("model_peak_bytes") / 1024.0, 1),
            ]);
        }
    }
    tables.push(slices);

    let mut goals = Table::new(
        format!("Goals, {g} guests"),
        &["goal", "target", "hvio", "paper", "met"],
    );
    let mut goal = |name: &str, target: f64, got: Option<f64>, paper: &str, as_pct: bool| {
        let show = |x: f64| {
            if as_pct {
                format!("{:.1} %", 100.0 * x)
            } else {
                format!("{x:.2}×")
            }
        };
        goals.row(vec![
            name.into(),
            format!("≥ {}", show(target)),
            got.map_or("—".into(), show),
            paper.into(),
            got.map_or("—".into(), |g| if g >= target { "yes".into() } else { "no".into() }),
        ]);
    };
    goal("total bandwidth vs CFQ", 1.3, ratio(1, sum_vm_bandwidth), "1.5×", false);
    goal("total bandwidth vs AS", 1.4, ratio(2, sum_vm_bandwidth), "1.6×", false);
    goal(
        "total bandwidth vs Deadline",
        2.0,
        ratio(3, sum_vm_bandwidth),
        "2.2×",
        false,
    );
    goal(
        "zero seek distances",
        0.70,
        rs[0].map(|r| r.host.seek.zero_frac),
        "75.78 %",
        true,
    );
    let vm4 = vms.len().checked_sub(1);
    let vm4_share = match (rs[0], rs[1], vm4) {
        (Some(p), Some(c), Some(i)) => Some(p.vms[i].mb_per_s / c.vms[i].mb_per_s),
        _ => None,
    };
    goal(
        "VM4 throughput vs its CFQ throughput",
        0.90,
        vm4_share,
        "103 % (RR +3 %, RW +26 %)",
        true,
    );
    tables.push(goals);
    tables
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_paper_file_gives_every_scheduler_its_seek_shares() {
        let p = Paper::load().unwrap();
        for (label, [zero, within, beyond]) in LABELS.iter().zip(p.seek) {
            // Table 4's two ranges split every seek: they add up to 100 %
            // (to its rounding), and the zero seeks are among those within.
            assert!((within + beyond - 100.0).abs() < 0.05, "{label}: {within} + {beyond}");
            assert!(0.0 < zero && zero < within, "{label}");
        }
        assert!(p.total_ratio.iter().all(|&r| r > 1.0), "Pregather ahead of each");
    }
}
