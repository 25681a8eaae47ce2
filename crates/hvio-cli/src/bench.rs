//! `hvio bench`: benchmarks that print figures (not timed tests).

use crate::common::{out, outln};
use anyhow::Result;
use clap::{Args, ValueEnum};

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
}

pub fn bench(a: BenchArgs) -> Result<()> {
    match a.which {
        Which::Sim => {
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
            outln!("goal: >= 3,000,000 requests/s; DiskSim 4.0 does 57,000-84,000 on this machine");
        }
        Which::Schedulers => {
            outln!("hvio bench schedulers: thread CPU ns per insert + dispatch + complete, 200,000 decisions");
            out!("{}", hvio_sched::bench::table(200_000));
            outln!("goal: <= 200 ns deadline, <= 600 ns cfq/bfq/anticipatory; Linux: 700 ns mq-deadline, 1900 ns bfq");
        }
    }
    Ok(())
}
