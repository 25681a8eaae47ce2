//! The `hvio` command line. Each subcommand lives in its own module; this
//! file only lists them.

mod analysis;
mod bench;
mod common;
mod crash_test;
mod huge_pages;
mod image;
mod replay;
mod serve;
mod sim;
mod trace;
mod tune;
mod validate_disk;

use clap::{Parser, Subcommand};
use common::errln;

#[derive(Parser)]
#[command(
    name = "hvio",
    version,
    about = "Disk I/O scheduling for virtualized hosts: simulator, schedulers, daemon"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Simulate a config: per-VM, per-job and host tables; JSON result.
    Sim(sim::SimArgs),
    /// Run a config under several host schedulers and compare them.
    Compare(sim::CompareArgs),
    /// Choose a (host, guest) scheduler pair per phase of a config (paper 002's Algorithm 1).
    Tune(tune::TuneArgs),
    /// List every scheduler with its parameters, defaults and units.
    Schedulers(sim::SchedulersArgs),
    /// List the workload presets (paper 000 Table 1, paper 003 Table I).
    Presets,
    /// Reproduce a paper's experiment by name (`--list` to see them).
    Reproduce(sim::ReproduceArgs),
    /// Run a study's matrix (schedulers × guests × seeds × config keys) on
    /// every core or a Dask cluster: Parquet and JSON results, cached.
    Sweep(analysis::SweepArgs),
    /// One self-contained HTML page of every result under out/: tables,
    /// the papers' numbers beside hvio's, goals, interactive figures.
    Report(analysis::ReportArgs),
    /// Benchmarks that print figures and ratios.
    Bench(bench::BenchArgs),
    /// Block traces: statistics and conversion (see docs/traces.md).
    Trace(trace::TraceArgs),
    /// Serve VM disks over NBD/FUSE through an hvio scheduler (see docs/serve.md).
    Serve(serve::ServeArgs),
    /// Reshaped images of `hvio serve`: create, info, check, repair, compact (see docs/reshaped-image.md).
    Image(image::ImageArgs),
    /// Replay a block trace under a host scheduler: per-VM table (see docs/traces.md).
    Replay(replay::ReplayArgs),
    /// Replay a DiskSim validation trace on a DiskSim disk description: demerit vs the real disk.
    ValidateDisk(validate_disk::ValidateDiskArgs),
}

/// Let a closed stdout end the process quietly, as `hvio sim … | head`
/// expects, instead of a panic in `println!`. Rust ignores SIGPIPE so that
/// a socket write returns EPIPE; `hvio serve` writes to sockets and keeps
/// that, every other subcommand only writes to stdout and files.
fn die_quietly_on_closed_stdout() {
    // SAFETY: called once at start, before any thread exists; SIG_DFL is a
    // valid disposition for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Parses the command line. A bad value is an error in hvio's words and
/// exit status 1, like every other bad input ("`--seed` must be a
/// non-negative integer, got -1"); help and version print as clap does.
fn parse_command_line() -> Cli {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let e = match Cli::try_parse() {
        Ok(cli) => return cli,
        Err(e) => e,
    };
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            e.exit()
        }
        ErrorKind::ValueValidation => {
            let arg = match e.get(ContextKind::InvalidArg) {
                Some(ContextValue::String(a)) => a.split([' ', '=']).next().unwrap_or_default().to_string(),
                _ => String::new(),
            };
            match std::error::Error::source(&e) {
                Some(why) if !arg.is_empty() => errln!("hvio: error: `{arg}` {why}"),
                _ => {
                    let _ = e.print();
                }
            }
        }
        _ => {
            let _ = e.print();
        }
    }
    std::process::exit(1)
}

fn main() {
    huge_pages::start_on_huge_pages();
    let cli = parse_command_line();
    if !matches!(cli.command, Command::Serve(_)) {
        die_quietly_on_closed_stdout();
    }
    let result = match cli.command {
        Command::Sim(a) => sim::sim(a),
        Command::Compare(a) => sim::compare(a),
        Command::Tune(a) => tune::tune(a),
        Command::Schedulers(a) => sim::schedulers(a),
        Command::Presets => sim::presets(),
        Command::Reproduce(a) => sim::reproduce(a),
        Command::Sweep(a) => analysis::sweep(a),
        Command::Report(a) => analysis::report(a),
        Command::Bench(a) => bench::bench(a),
        Command::Trace(a) => trace::trace(a),
        Command::Serve(a) => serve::serve(a),
        Command::Image(a) => image::image(a),
        Command::Replay(a) => replay::replay_cmd(a),
        Command::ValidateDisk(a) => validate_disk::validate_disk(a),
    };
    if let Err(e) = result {
        // A value quoted whole (a 300 kB name) is cut to a few hundred bytes.
        let cut = hvio_core::message::cut_long_words;
        errln!("hvio: error: {}", cut(&e.to_string()));
        // Errors that name a path wrap an io::Error and print it in their
        // own message; a cause already said above is not said again.
        let mut said = e.to_string();
        for cause in e.chain().skip(1) {
            let cause = cause.to_string();
            if !said.contains(&cause) {
                errln!("  caused by: {}", cut(&cause));
                said.push_str(&cause);
            }
        }
        std::process::exit(1);
    }
}
