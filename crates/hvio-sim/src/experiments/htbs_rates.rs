//! HTBS's rate guarantees at the host (pClock's token buckets): three VMs with
//! token rates 1:2:4, each asking for far more than its rate, get throughput in
//! that proportion (±15 %); and a fourth VM that stays under its rate keeps its
//! latency while the other three are overloaded.
//!
//! Each overloaded VM runs 8 threads of 16 KiB random reads (sysbench-like,
//! `iodepth` 1). pClock can only promise rates the disk can deliver, so the
//! rates are sized from a calibration run: the IOPS the disk gives the three
//! VMs under `noop`, `C`; the contracts are `0.7·C·(1, 2, 4)/7`. The light VM
//! has a contract of `0.1·C` and sends one 16 KiB random read at a time with
//! a think time that keeps it near half of that.

use crate::config::Config;
use crate::error::Result;
use crate::experiments::{ExpOptions, Experiment, Report};
use crate::metrics::SimResult;
use crate::report::{f, Table};
use serde_json::json;

const SHARES: [f64; 3] = [1.0, 2.0, 4.0];

fn config(
    host: &str,
    rates: Option<[f64; 3]>,
    light: Option<(f64, u64)>,
    busy: bool,
    runtime_s: f64,
    seed: u64,
) -> Result<Config> {
    let mut t = format!(
        "seed = {seed}\nmax_time_s = {}\n[host]\nscheduler = \"{host}\"\n",
        runtime_s * 2.0 + 60.0
    );
    if busy {
        for (i, share) in SHARES.iter().enumerate() {
            let attrs = rates.map_or(String::new(), |r| format!("rate_iops = {}", r[i]));
            t.push_str(&format!(
                "[[vm]]\nname = \"vm{}x{share}\"\nattrs = {{ {attrs} }}\n[[vm.job]]\nname = \"rr\"\nrw = \"randread\"\nbs = \"16k\"\n\
                 size = \"1g\"\nnumjobs = 8\niodepth = 1\nruntime_s = {runtime_s}\n",
                i + 1
            ));
        }
    }
    if let Some((rate, think_us)) = light {
        t.push_str(&format!(
            "[[vm]]\nname = \"light\"\nattrs = {{ rate_iops = {rate} }}\n[[vm.job]]\nname = \"rr\"\nrw = \"randread\"\nbs = \"16k\"\n\
             size = \"1g\"\nnumjobs = 1\niodepth = 1\nthinktime_us = {think_us}\nruntime_s = {runtime_s}\n"
        ));
    }
    Config::from_toml_str(&t, "htbs-rates")
}

fn iops(r: &SimResult, i: usize) -> f64 {
    r.vms[i].iops
}

pub const EXPERIMENT: Experiment = Experiment {
    name: "htbs-rates",
    title: "HTBS token rates 1:2:4 under overload, and a VM under its rate",
    paper: "HTBS (Rocha & Bona, MSST 2012) / pClock rate guarantees, paper 004's scheduler",
    run,
};

pub fn run(opts: &ExpOptions) -> Result<Report> {
    let runtime = if opts.quick { 15.0 } else { 60.0 };
    let mut report = Report::default();
    let mut data = serde_json::Map::new();

    // Calibration: what the disk gives three backlogged VMs.
    let cal = crate::run(&config("noop", None, None, true, runtime, opts.seed)?)?;
    let capacity: f64 = (0..3).map(|i| iops(&cal, i)).sum();
    let sum: f64 = SHARES.iter().sum();
    let rates = SHARES.map(|s| 0.7 * capacity * s / sum);

    // Part 1: shares under overload.
    let mut t = Table::new(
        format!("three overloaded VMs, token rates 1:2:4 (disk: {capacity:.1} IOPS under noop)"),
        &[
            "scheduler",
            "vm",
            "rate_iops",
            "IOPS",
            "share %",
            "rate share %",
            "share / rate share",
            "mean ms",
        ],
    );
    let mut all_within = true;
    for host in ["htbs", "noop"] {
        let r = crate::run(&config(host, Some(rates), None, true, runtime, opts.seed)?)?;
        let total: f64 = (0..3).map(|i| iops(&r, i)).sum();
        for i in 0..3 {
            let share = iops(&r, i) / total;
            let want = SHARES[i] / sum;
            if host == "htbs" && (share / want - 1.0).abs() > 0.15 {
                all_within = false;
            }
            t.row(vec![
                host.into(),
                r.vms[i].vm.clone(),
                f(rates[i], 1),
                f(iops(&r, i), 1),
                f(100.0 * share, 1),
                f(100.0 * want, 1),
                f(share / want, 3),
                f(r.vms[i].latency.mean_ms, 1),
            ]);
        }
        data.insert(
            format!("shares_{host}"),
            json!((0..3).map(|i| iops(&r, i)).collect::<Vec<_>>()),
        );
        if host == "htbs" {
            data.insert("htbs_counters".into(), json!(r.host.counters));
        }
    }
    report.tables.push(t);
    report.notes.push(format!(
        "rates 1:2:4 under overload: HTBS throughput {} the ±15 % band of the rate proportion",
        if all_within { "within" } else { "NOT within" }
    ));

    // Part 2: a light VM (contract 0.1·C, sending about half of it).
    let light_rate = 0.1 * capacity;
    let think_us = (2.0 / light_rate * 1e6).round() as u64;
    let mut t = Table::new(
        format!(
            "a light VM (rate_iops {light_rate:.1}, one read every ~{:.0} ms) beside three overloaded VMs",
            think_us as f64 / 1e3
        ),
        &[
            "scheduler",
            "others busy",
            "light IOPS",
            "light mean ms",
            "light p95 ms",
            "light p99 ms",
            "busy VMs' IOPS",
        ],
    );
    let mut hosts = vec!["htbs", "noop"];
    if hvio_sched::spec("cfq").is_ok() {
        hosts.push("cfq");
    }
    let alone = crate::run(&config(
        "htbs",
        None,
        Some((light_rate, think_us)),
        false,
        runtime,
        opts.seed,
    )?)?;
    let mut rows = vec![("htbs", false, alone)];
    for host in hosts {
        rows.push((
            host,
            true,
            crate::run(&config(
                host,
                Some(rates),
                Some((light_rate, think_us)),
                true,
                runtime,
                opts.seed,
            )?)?,
        ));
    }
    let mut light_lat = serde_json::Map::new();
    for (host, busy, r) in &rows {
        let li = r.vms.len() - 1;
        let l = &r.vms[li];
        let others: f64 = (0..li).map(|i| iops(r, i)).sum();
        t.row(vec![
            host.to_string(),
            if *busy { "yes" } else { "no" }.into(),
            f(l.iops, 1),
            f(l.latency.mean_ms, 2),
            f(l.latency.p95_ms, 2),
            f(l.latency.p99_ms, 2),
            if *busy { f(others, 1) } else { "-".into() },
        ]);
        light_lat.insert(
            format!("{host}{}", if *busy { "" } else { "_alone" }),
            json!(l.latency.mean_ms),
        );
    }
    report.tables.push(t);
    let alone_ms = rows[0].2.vms[0].latency.mean_ms;
    let busy_ms = rows[1].2.vms[3].latency.mean_ms;
    report.notes.push(format!(
        "the light VM's mean latency under HTBS: {alone_ms:.2} ms alone, {busy_ms:.2} ms beside three overloaded VMs (noop: {:.2} ms)",
        rows[2].2.vms[3].latency.mean_ms
    ));
    data.insert("light_mean_ms".into(), serde_json::Value::Object(light_lat));
    data.insert("rates".into(), json!(rates));
    data.insert("capacity_iops".into(), json!(capacity));
    report.data = serde_json::Value::Object(data);
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_run_shares_in_proportion_and_protects_the_light_vm() {
        let r = run(&ExpOptions { seed: 1, quick: true }).unwrap();
        let shares: Vec<f64> = r.data["shares_htbs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        let total: f64 = shares.iter().sum();
        for (s, want) in shares.iter().zip(SHARES) {
            let got = s / total / (want / 7.0);
            assert!((got - 1.0).abs() <= 0.15, "share/rate share {got}: {}", r.render());
        }
        let lat = &r.data["light_mean_ms"];
        assert!(
            lat["htbs"].as_f64().unwrap() < 0.5 * lat["noop"].as_f64().unwrap(),
            "{}",
            r.render()
        );
    }
}
