//! `hvio tune CONFIG`: paper 002's Algorithm 1 over a config's phases
//! ([`hvio_sim::tune::workload`]), with a progress bar on stderr.

use crate::common::{check_not_dir, outln, write_atomic};
use anyhow::{bail, Result};
use clap::Args;
use hvio_sim::report::{f, Table};
use hvio_sim::tune::workload::{self, TuneOptions, Tuned};
use hvio_sim::Config;
use std::path::PathBuf;

#[derive(Args)]
pub struct TuneArgs {
    /// The simulation config (TOML); its jobs' `phase` keys give the phases.
    config: PathBuf,
    /// Comma-separated host schedulers to try (default: the paper's four).
    #[arg(long, default_value = "cfq,deadline,anticipatory,noop")]
    host: String,
    /// Comma-separated guest schedulers to try (every VM runs the same one).
    #[arg(long, default_value = "cfq,deadline,anticipatory,noop")]
    guest: String,
    /// Also run every plan (pairs ^ phases, at most 4096) and say how close
    /// Algorithm 1 came to the optimum.
    #[arg(long)]
    brute_force: bool,
    /// How the plan's switches treat queued requests: drain, freeze or migrate.
    #[arg(long, default_value = "drain")]
    policy: String,
    /// Write the config with the chosen plan as `[[phase]]` tables here.
    #[arg(long)]
    out: Option<PathBuf>,
}

fn list(option: &str, text: &str) -> Result<Vec<String>> {
    let names: Vec<String> = text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect();
    if names.is_empty() {
        bail!("{option} {text:?}: name at least one scheduler");
    }
    for n in &names {
        hvio_sched::spec(n).map_err(|e| anyhow::anyhow!("{option}: {e}"))?;
    }
    Ok(names)
}

pub fn tune(a: TuneArgs) -> Result<()> {
    let cfg = Config::from_file(&a.config)?;
    let policy = a
        .policy
        .parse()
        .map_err(|_| anyhow::anyhow!("--policy {:?}: one of drain, freeze, migrate", a.policy))?;
    let opts = TuneOptions {
        hosts: list("--host", &a.host)?,
        guests: list("--guest", &a.guest)?,
        brute_force: a.brute_force,
        policy,
    };
    if let Some(out) = &a.out {
        check_not_dir(out)?;
        cfg.check_outputs(&[("--out", out)], &[])?;
        check_relative_paths(&cfg, out)?;
    }
    let pairs = opts.hosts.len() * opts.guests.len();
    let phases = cfg.workload_phases().len().max(1);
    // The default run, the profile and Algorithm 1's bound (P × S);
    // the brute force's S^P on top.
    let mut bound = 1 + pairs + phases * pairs;
    if opts.brute_force {
        bound += u32::try_from(phases)
            .ok()
            .and_then(|p| pairs.checked_pow(p))
            .unwrap_or(0);
    }
    let bar = indicatif::ProgressBar::with_draw_target(Some(bound as u64), indicatif::ProgressDrawTarget::stderr());
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{prefix} [{bar:30}] {pos} runs (at most {len}) {elapsed}, ETA at most {eta}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar.set_prefix("tune");
    let tuned = workload::tune(&cfg, &opts, &|| bar.inc(1));
    bar.finish_and_clear();
    let tuned = tuned?;
    print(&a, &cfg, &tuned)?;
    if let Some(out) = &a.out {
        write_atomic(out, &workload::plan_config(&cfg, &tuned.plan)?)?;
        outln!(
            "plan written: {} (run it with `hvio sim {}`)",
            out.display(),
            out.display()
        );
    }
    Ok(())
}

/// A config that reads other files (fio job files, a DiskSim spec) names
/// them relative to its own directory: the plan goes beside it.
fn check_relative_paths(cfg: &Config, out: &std::path::Path) -> Result<()> {
    let dir = |p: &std::path::Path| {
        let parent = p
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(std::path::Path::new("."));
        std::fs::canonicalize(parent).unwrap_or_else(|_| parent.to_path_buf())
    };
    let others: Vec<String> = cfg
        .input_files()
        .into_iter()
        .filter(|(what, _)| what != "config")
        .map(|(_, p)| p.display().to_string())
        .collect();
    let config = cfg.file.clone().unwrap_or_default();
    if !others.is_empty() && dir(out) != dir(&config) {
        bail!(
            "--out {}: the config reads {} relative to its own directory; write the plan in that directory",
            out.display(),
            others.join(", ")
        );
    }
    Ok(())
}

fn print(a: &TuneArgs, cfg: &Config, t: &Tuned) -> Result<()> {
    let c = &t.comparison;
    if t.by_phase {
        outln!(
            "tune {}: {} phases ({}), {} pairs ({} host x {} guest schedulers)",
            a.config.display(),
            t.phases.len(),
            t.phases.join(", "),
            t.pairs.len(),
            a.host.split(',').count(),
            a.guest.split(',').count()
        );
    } else {
        outln!(
            "tune {}: no job has a `phase`, so the whole run is one phase; {} pairs",
            a.config.display(),
            t.pairs.len()
        );
    }
    if !cfg.phases.is_empty() {
        outln!("(the config's own [[phase]] plan is left out of every run)");
    }
    outln!();
    let mut columns: Vec<&str> = vec!["pair"];
    columns.extend(t.phases.iter().map(|p| p.as_str()));
    columns.push("total");
    let mut profile = Table::new("profile: each pair's seconds per phase (one run per pair)", &columns);
    for (i, pair) in t.pairs.iter().enumerate() {
        let mut row = vec![pair.to_string()];
        row.extend(c.profile.phase_s.iter().map(|phase| f(phase[i], 3)));
        row.push(f(c.profile.total_s[i], 3));
        profile.row(row);
    }
    outln!("{}", profile.render());
    let best = c.best_single;
    outln!("chosen plan (Algorithm 1): {}", t.describe(&c.heuristic.plan));
    outln!("predicted: {} s", f(t.predicted_s, 3));
    outln!(
        "gain over the config's own schedulers ({} s): {} %",
        f(t.default_s, 3),
        f(t.gain_over_default_pct, 2)
    );
    outln!(
        "gain over the best single pair {} ({} s): {} %",
        t.best_single(),
        f(c.profile.total_s[best], 3),
        f(t.gain_over_best_single_pct, 2)
    );
    outln!(
        "runs: {} in all (1 as written, {} profiling, {} for Algorithm 1, whose bound is P x S = {}{})",
        t.runs,
        c.profile.runs,
        c.heuristic.runs,
        t.phases.len() * t.pairs.len(),
        match &c.brute_force {
            Some(b) => format!(", {} brute force", b.runs),
            None => String::new(),
        }
    );
    if let Some(b) = &c.brute_force {
        outln!(
            "brute force: the optimum is {} ({} s); Algorithm 1 is {} % over it",
            t.describe(&b.plan),
            f(b.outcome.total_s(), 3),
            f(c.heuristic_gap_pct().unwrap_or(0.0), 2)
        );
    }
    Ok(())
}
