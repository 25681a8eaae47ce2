//! `hvio bench`: benchmarks that print figures (not timed tests).

mod gitref;

use crate::common::{out, outln};
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use std::path::{Path, PathBuf};

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
    /// `sim`: also run the hvio built from this git ref (built once into
    /// target/bench-ref/ of the repository the current directory is in),
    /// alternating with this build, and print the ratio of their speeds.
    #[arg(long, value_name = "REF", conflicts_with = "against_bin")]
    against: Option<String>,
    /// `sim`: as --against, with an hvio binary already built.
    #[arg(long, value_name = "PATH")]
    against_bin: Option<PathBuf>,
    /// `sim` with --against: how many alternating pairs of runs.
    #[arg(long, default_value_t = 3, allow_negative_numbers = true, value_parser = crate::common::positive::<u32>)]
    pairs: u32,
}

/// The simulator's speed goal, shown beside its figures.
const SIM_GOAL: &str = "goal: >= 3,000,000 requests/s on a quiet machine (load average < 1)";

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
            if a.against.is_some() || a.against_bin.is_some() {
                bail!("--against and --against-bin are for `hvio bench sim`");
            }
            outln!("hvio bench schedulers: thread CPU ns per insert + dispatch + complete, 200,000 decisions");
            out!("{}", hvio_sched::bench::table(200_000));
            outln!("goal: <= 200 ns deadline, <= 600 ns cfq/bfq/anticipatory; Linux: 700 ns mq-deadline, 1900 ns bfq");
        }
    }
    Ok(())
}

/// `hvio bench sim`: the short and the long run of this build.
fn sim(a: &BenchArgs) -> Result<()> {
    outln!("hvio bench sim: 4 VMs x 16 threads, deadline, disk model `{}`", a.disk);
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
    outln!("{SIM_GOAL}; DiskSim 4.0 does 57,000-84,000 on this machine");
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
        "{:>5} {:>16} {:>16} {:>8}",
        "pair",
        "this requests/s",
        "other requests/s",
        "ratio"
    );
    let mut ratios = Vec::new();
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
        ratios.push(new / old);
        outln!("{pair:>5} {new:>16.0} {old:>16.0} {:>8.3}", new / old);
    }
    ratios.sort_by(f64::total_cmp);
    outln!(
        "ratio this/other: median {:.3}, range {:.3}-{:.3}",
        ratios[ratios.len() / 2],
        ratios[0],
        ratios[ratios.len() - 1]
    );
    outln!("load average after: {}", load_average());
    outln!("{SIM_GOAL}");
    Ok(())
}

/// Requests per second of `bin bench sim`'s long run (its last row).
fn long_run_speed(bin: &Path, a: &BenchArgs) -> Result<f64> {
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
    let text = String::from_utf8_lossy(&out.stdout);
    long_run_requests_per_s(&text).with_context(|| {
        format!(
            "{} bench sim printed no table row with requests/s:\n{text}",
            bin.display()
        )
    })
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
goal: >= 3,000,000 requests/s; DiskSim 4.0 does 57,000-84,000 on this machine
";
        assert_eq!(long_run_requests_per_s(table), Some(863070.0));
        assert_eq!(long_run_requests_per_s("hvio: error: no such disk model\n"), None);
    }
}
