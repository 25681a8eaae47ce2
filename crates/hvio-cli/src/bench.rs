//! `hvio bench`: benchmarks that print figures (not timed tests).

mod gitref;

use crate::common::outln;
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use hvio_device::hdd::speed as hdd_speed;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Clone, Copy, ValueEnum)]
pub enum Which {
    /// Simulated requests per second: 4 VMs × 16 threads under deadline.
    Sim,
    /// Scheduler decision cost (insert + dispatch + complete) at 1k and 100k queued.
    Schedulers,
}

#[derive(Args)]
pub struct BenchArgs {
    #[arg(value_enum, default_value = "sim")]
    which: Which,
    /// Requests per VM in the long run (the short run is a quarter).
    #[arg(long, default_value_t = 1_000_000, allow_negative_numbers = true, value_parser = crate::common::positive::<u64>)]
    requests: u64,
    /// Disk model.
    #[arg(long, default_value = "hdd")]
    disk: String,
    /// Also run the hvio built from this git ref (built once into
    /// target/bench-ref/ of the repository the current directory is in),
    /// alternating with this build, and print the ratio of their figures.
    #[arg(long, value_name = "REF", conflicts_with = "against_bin")]
    against: Option<String>,
    /// As --against, with an hvio binary already built.
    #[arg(long, value_name = "PATH")]
    against_bin: Option<PathBuf>,
    /// `sim` with --against: how many alternating pairs of runs.
    #[arg(long, default_value_t = 3, allow_negative_numbers = true, value_parser = crate::common::positive::<u32>)]
    pairs: u32,
    /// `schedulers`: rounds (this build and the other alternating); each figure is the median.
    #[arg(long, default_value_t = 3, value_parser = crate::common::positive::<usize>)]
    rounds: usize,
    /// `schedulers`: decisions timed per scheduler and queue length.
    #[arg(long, default_value_t = 200_000, value_parser = crate::common::positive::<usize>)]
    decisions: usize,
}

/// The simulator's speed goal, shown beside its figures.
const SIM_GOAL: &str = "goal: >= 3,000,000 requests/s on a quiet machine (load average < 1)";
/// Where to get DiskSim 4.0's speed beside hvio's: a figure measured on
/// another day would not be comparable, so the script measures both in one run.
const DISKSIM_SPEED: &str = "against DiskSim 4.0: bench/disksim-speed.sh --disksim-src DIR \
     builds it and replays the same trace in both";

pub fn bench(a: BenchArgs) -> Result<()> {
    match a.which {
        Which::Sim => {
            let other = match (&a.against, &a.against_bin) {
                (Some(git_ref), _) => Some((git_ref.clone(), gitref::hvio_binary(git_ref)?)),
                (None, Some(bin)) => Some((bin.display().to_string(), bin.clone())),
                (None, None) => None,
            };
            match other {
                Some((name, bin)) => sim_against(&a, &name, &bin)?,
                None => sim(&a)?,
            }
        }
        Which::Schedulers => {
            let other = match (&a.against, &a.against_bin) {
                (Some(git_ref), _) => Some((git_ref.clone(), gitref::hvio_binary(git_ref)?)),
                (None, Some(bin)) => Some((bin.display().to_string(), bin.clone())),
                (None, None) => None,
            };
            schedulers(&a, other.as_ref())?;
        }
    }
    Ok(())
}

/// `hvio bench sim`: the short and the long run of this build.
fn sim(a: &BenchArgs) -> Result<()> {
    outln!("hvio bench sim: 4 VMs x 16 threads, deadline, disk model `{}`", a.disk);
    outln!("{}", crate::huge_pages::heap_pages());
    outln!(
        "{:>12} {:>12} {:>10} {:>14} {:>14} {:>12}",
        "requests",
        "events",
        "wall s",
        "requests/s",
        "events/s",
        "peak RSS MiB"
    );
    for n in [a.requests / 4, a.requests] {
        let r = hvio_sim::bench::run_once(n, &a.disk)?;
        outln!(
            "{:>12} {:>12} {:>10.2} {:>14.0} {:>14.0} {:>12.1}",
            r.requests,
            r.events,
            r.wall_s,
            r.requests_per_s,
            r.events_per_s,
            r.peak_rss_kib.unwrap_or(0) as f64 / 1024.0
        );
    }
    outln!("{SIM_GOAL}; {DISKSIM_SPEED}");
    Ok(())
}

/// `hvio bench sim --against`: this build and the other one run alternately,
/// each as its own process doing `hvio bench sim` (so both pay the same
/// start-up and neither inherits the other's heap); each pair's long-run
/// figures, their ratio, and the median ratio.
fn sim_against(a: &BenchArgs, other_name: &str, other: &Path) -> Result<()> {
    let this = std::env::current_exe().context("finding this hvio binary")?;
    outln!(
        "hvio bench sim: 4 VMs x 16 threads, deadline, disk model `{}`; this build against {other_name}, {} alternating pairs of {} requests per VM",
        a.disk,
        a.pairs,
        a.requests
    );
    outln!("load average before: {}", load_average());
    outln!(
        "{:>5} {:>16} {:>16} {:>8} {:>11} {:>12} {:>10}",
        "pair",
        "this requests/s",
        "other requests/s",
        "ratio",
        "this CPU s",
        "other CPU s",
        "CPU ratio"
    );
    let (mut ratios, mut cpu_ratios) = (Vec::new(), Vec::new());
    for pair in 1..=a.pairs {
        // Which goes first alternates, so a machine getting busier or
        // quieter during the run does not favour one side.
        let (new, old) = if pair % 2 == 1 {
            let new = long_run_speed(&this, a)?;
            (new, long_run_speed(other, a)?)
        } else {
            let old = long_run_speed(other, a)?;
            (long_run_speed(&this, a)?, old)
        };
        // Both sides simulate the same requests: the other's CPU time over
        // this one's is the speed ratio, and unlike wall clock it does not
        // move with what else the machine runs.
        ratios.push(new.requests_per_s / old.requests_per_s);
        cpu_ratios.push(old.cpu_s / new.cpu_s);
        outln!(
            "{pair:>5} {:>16.0} {:>16.0} {:>8.3} {:>11.3} {:>12.3} {:>10.3}",
            new.requests_per_s,
            old.requests_per_s,
            new.requests_per_s / old.requests_per_s,
            new.cpu_s,
            old.cpu_s,
            old.cpu_s / new.cpu_s
        );
    }
    for (what, r) in [("wall clock", &mut ratios), ("CPU time", &mut cpu_ratios)] {
        r.sort_by(f64::total_cmp);
        outln!(
            "ratio this/other by {what}: median {:.3}, range {:.3}-{:.3}",
            r[r.len() / 2],
            r[0],
            r[r.len() - 1]
        );
    }
    outln!("load average after: {}", load_average());
    outln!("{SIM_GOAL}");
    Ok(())
}

/// One `hvio bench sim` process: its long run's requests per second (wall
/// clock) and the CPU time (user + system) the whole process used.
struct SimSpeed {
    requests_per_s: f64,
    cpu_s: f64,
}

/// CPU time (user + system, seconds) of this process's children that have
/// ended and been waited for.
fn children_cpu_s() -> f64 {
    // SAFETY: getrusage only writes the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) } != 0 {
        return f64::NAN;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(u.ru_utime) + secs(u.ru_stime)
}

/// Run `bin bench sim` and measure it ([`SimSpeed`]).
fn long_run_speed(bin: &Path, a: &BenchArgs) -> Result<SimSpeed> {
    let cpu_before = children_cpu_s();
    let out = std::process::Command::new(bin)
        .args(["bench", "sim", "--requests", &a.requests.to_string(), "--disk", &a.disk])
        .output()
        .with_context(|| format!("running {}", bin.display()))?;
    if !out.status.success() {
        bail!(
            "{} bench sim failed ({}): {}",
            bin.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let cpu_s = children_cpu_s() - cpu_before;
    let text = String::from_utf8_lossy(&out.stdout);
    let requests_per_s = long_run_requests_per_s(&text).with_context(|| {
        format!(
            "{} bench sim printed no table row with requests/s:\n{text}",
            bin.display()
        )
    })?;
    Ok(SimSpeed { requests_per_s, cpu_s })
}

/// The requests/s column of the last row of `hvio bench sim`'s table.
fn long_run_requests_per_s(table: &str) -> Option<f64> {
    table
        .lines()
        .rev()
        .find(|l| l.split_whitespace().next().is_some_and(|w| w.parse::<u64>().is_ok()))?
        .split_whitespace()
        .nth(3)?
        .parse()
        .ok()
}

/// The 1, 5 and 15 minute load averages, as /proc/loadavg says them.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_long_run_is_the_tables_last_row() {
        let table = "hvio bench sim: 4 VMs x 16 threads, deadline, disk model `hdd`
    requests       events     wall s     requests/s       events/s peak RSS MiB
       20000        60064       0.03         781321        2346464          7.0
       80000       240064       0.09         863070        2589901          7.1
goal: >= 3,000,000 requests/s; against DiskSim 4.0: bench/disksim-speed.sh --disksim-src DIR builds it and replays the same trace in both
";
        assert_eq!(long_run_requests_per_s(table), Some(863070.0));
        assert_eq!(long_run_requests_per_s("hvio: error: no such disk model\n"), None);
    }
}

/// HDD requests timed per scheduler decision timed (the `hdd_speed`
/// example's 2,000,000 at the default 200,000 decisions).
const HDD_REQUESTS_PER_DECISION: u64 = 10;

/// The median of `v` (0 for none).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// What another build's `hvio bench schedulers` printed: scheduler → ns at
/// 1k and 100k queued (the first two numbers of its row, in every version
/// of the table), and its HDD figure where it prints one.
#[derive(Default)]
struct OtherRun {
    rows: BTreeMap<String, [f64; 2]>,
    hdd: Option<f64>,
}

fn parse_other(text: &str) -> OtherRun {
    let mut run = OtherRun::default();
    for line in text.lines() {
        if line.starts_with("HDD model alone") {
            let f: Vec<&str> = line.split_whitespace().collect();
            run.hdd = f
                .iter()
                .position(|w| *w == "ns/request")
                .and_then(|i| f.get(i.checked_sub(1)?)?.parse().ok());
            continue;
        }
        let mut words = line.split_whitespace();
        let Some(name) = words.next() else { continue };
        let nums: Vec<f64> = words.filter_map(|w| w.parse().ok()).take(2).collect();
        if let [a, b] = nums[..] {
            if hvio_sched::SCHEDULERS.iter().any(|s| s.name == name) {
                run.rows.insert(name.to_string(), [a, b]);
            }
        }
    }
    run
}

/// One run of `other`'s `hvio bench schedulers`: one round of `decisions`
/// where it has those options, its defaults where it has not.
fn run_other(other: &Path, decisions: usize) -> Result<OtherRun> {
    let with_options = [
        "bench".to_string(),
        "schedulers".into(),
        "--rounds".into(),
        "1".into(),
        "--decisions".into(),
        decisions.to_string(),
    ];
    let mut out = Command::new(other)
        .args(&with_options)
        .output()
        .with_context(|| format!("running {}", other.display()))?;
    if !out.status.success() {
        // A build before these options refuses them: run it with its defaults.
        out = Command::new(other)
            .args(["bench", "schedulers"])
            .output()
            .with_context(|| format!("running {}", other.display()))?;
    }
    if !out.status.success() {
        bail!(
            "{} bench schedulers failed: {}",
            other.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let run = parse_other(&String::from_utf8_lossy(&out.stdout));
    if run.rows.is_empty() {
        bail!("{} bench schedulers printed no scheduler rows", other.display());
    }
    Ok(run)
}

/// "≤goal ✓" or "≤goal ✗" for `value`, or blank without a goal.
fn verdict(value: f64, goal: Option<f64>) -> String {
    match goal {
        Some(g) => format!("≤{g} {}", if value <= g { "✓" } else { "✗" }),
        None => String::new(),
    }
}

/// `hvio bench schedulers`: every scheduler's decision cost at 1k and 100k
/// queued and the HDD model's cost per request, each beside its goal; with
/// another build, its figures from runs alternating with this build's and
/// the new/old ratios.
fn schedulers(a: &BenchArgs, other: Option<&(String, PathBuf)>) -> Result<()> {
    use hvio_sched::bench::{bench_decisions, goal, QUEUED};
    let hdd_requests = a.decisions as u64 * HDD_REQUESTS_PER_DECISION;
    outln!(
        "hvio bench schedulers: thread CPU ns per decision (insert + dispatch + complete), {} decisions, median of {} round{}",
        a.decisions,
        a.rounds,
        if a.rounds == 1 { "" } else { "s" }
    );
    if let Some((name, _)) = other {
        outln!("old: {name}, run alternately with this build");
    }
    let load_before = load_average();
    let names: Vec<&str> = hvio_sched::SCHEDULERS.iter().map(|s| s.name).collect();
    let mut new: BTreeMap<&str, [Vec<f64>; 2]> = BTreeMap::new();
    let mut old: BTreeMap<String, [Vec<f64>; 2]> = BTreeMap::new();
    let (mut hdd_new, mut hdd_old) = (Vec::new(), Vec::new());
    for round in 0..a.rounds {
        // Which build goes first alternates, so neither always meets a warmer or busier machine.
        for other_turn in [round % 2 == 0, round % 2 == 1] {
            match other {
                Some((_, bin)) if other_turn => {
                    let run = run_other(bin, a.decisions)?;
                    for (name, ns) in run.rows {
                        let e = old.entry(name).or_default();
                        e[0].push(ns[0]);
                        e[1].push(ns[1]);
                    }
                    hdd_old.extend(run.hdd);
                }
                _ if !other_turn => {
                    for &name in &names {
                        let e = new.entry(name).or_default();
                        for (i, &q) in QUEUED.iter().enumerate() {
                            e[i].push(bench_decisions(name, q, a.decisions));
                        }
                    }
                    hdd_new.push(hdd_speed::run(&hdd_speed::SPEED_CASES[0], hdd_requests).cpu_ns);
                }
                _ => {}
            }
        }
    }
    outln!("load average: {load_before} before, {} after", load_average());
    outln!("this build's {}", crate::huge_pages::heap_pages());
    let with_old = other.is_some();
    let mut header = format!("{:<13}", "scheduler");
    for q in ["1k", "100k"] {
        header += &format!(" {:>9}", format!("{q} ns"));
        if with_old {
            header += &format!(" {:>9} {:>7}", format!("old {q}"), "new/old");
        }
        header += &format!(" {:<8}", "goal");
    }
    header += &format!(" {:>6} {:<8}", "growth", "goal");
    outln!("{}", header.trim_end());
    for &name in &names {
        let g = goal(name);
        let ns = new[name].clone().map(median);
        let mut row = format!("{name:<13}");
        for (i, &v) in ns.iter().enumerate() {
            row += &format!(" {v:>9.0}");
            if with_old {
                match old.get(name) {
                    Some(o) => {
                        let o = median(o[i].clone());
                        row += &format!(" {o:>9.0} {:>7.2}", v / o);
                    }
                    None => row += &format!(" {:>9} {:>7}", "—", "—"),
                }
            }
            row += &format!(" {:<8}", verdict(v, g.ns[i]));
        }
        let growth = ns[1] / ns[0];
        row += &format!(" {growth:>6.2} {:<8}", verdict(growth, g.growth));
        outln!("{}", row.trim_end());
    }
    let hdd = median(hdd_new);
    let mut row = format!(
        "HDD model alone ({}): {hdd:.0} ns/request CPU",
        hdd_speed::SPEED_CASES[0].name
    );
    if with_old {
        if hdd_old.is_empty() {
            row += ", old — (that build does not time it)";
        } else {
            let o = median(hdd_old);
            row += &format!(", old {o:.0}, new/old {:.2}", hdd / o);
        }
    }
    outln!("{row}; goal {}", verdict(hdd, Some(100.0)));
    outln!("Linux, for comparison: mq-deadline about 700 ns per request, bfq about 1900 ns");
    Ok(())
}
