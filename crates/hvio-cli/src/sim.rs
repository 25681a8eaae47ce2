//! `hvio sim`, `hvio compare`, `hvio schedulers`, `hvio presets`, `hvio reproduce`.

use crate::common::{check_not_dir, errln, out, outln, write_atomic};
use anyhow::{bail, Context, Result};
use clap::Args;
use hvio_sim::{compare as cmp, report, Config, DEFAULT_SCENARIO};
use std::ffi::OsString;
use std::path::PathBuf;

#[derive(Args)]
pub struct SimArgs {
    /// The simulation config (TOML).
    config: PathBuf,
    /// Where to write the JSON result (default: out/NAME.json, NAME the config file's stem).
    #[arg(long)]
    json: Option<PathBuf>,
    /// Override the config's seed.
    #[arg(long, allow_negative_numbers = true, value_parser = crate::common::non_negative::<u64>)]
    seed: Option<u64>,
    /// Override the host scheduler.
    #[arg(long)]
    scheduler: Option<String>,
    /// Stream per-request records (CSV) to this file.
    #[arg(long)]
    records: Option<PathBuf>,
}

fn load(path: &std::path::Path) -> Result<Config> {
    Ok(Config::from_file(path)?)
}

pub fn sim(a: SimArgs) -> Result<()> {
    let mut cfg = load(&a.config)?;
    if let Some(s) = a.seed {
        cfg.seed = s;
    }
    if let Some(s) = a.scheduler {
        // Checked here: an unknown name is the option's fault, not the config's.
        hvio_sched::spec(&s).map_err(|e| anyhow::anyhow!("--scheduler: {e}"))?;
        if s != cfg.host.scheduler {
            cfg.host.params.clear();
        }
        cfg.host.scheduler = s;
    }
    if let Some(r) = a.records {
        cfg.output.records = Some(std::env::current_dir()?.join(r));
    }
    for w in cfg.warnings.iter().chain(&cfg.ignored_by(&cfg.host.scheduler)) {
        errln!("warning: {w}");
    }
    let json = a.json.clone().unwrap_or_else(|| default_json(&a.config));
    check_not_dir(&json)?;
    cfg.check_outputs(&[("--json", &json)], &[])?;
    let r = hvio_sim::run(&cfg)?;
    write_atomic(&json, &serde_json::to_string_pretty(&r)?)?;
    out!(
        "{}\n{}\n{}",
        report::vm_table(&r).render(),
        report::job_table(&r).render(),
        report::host_table(&r).render()
    );
    if !r.phases.is_empty() {
        out!("\n{}", report::phase_table(&r).render());
    }
    if !r.switches.is_empty() || !cfg.phases.is_empty() {
        out!("\n{}", report::switch_table(&r).render());
    }
    if let Some(t) = report::reshape_table(&r) {
        out!("\n{}", t.render());
    }
    if r.truncated {
        outln!("warning: the run hit max_time_s before every job finished");
    }
    outln!("result: {}", json.display());
    Ok(())
}

fn default_json(config: &std::path::Path) -> PathBuf {
    let stem = config
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "result".into());
    PathBuf::from("out").join(format!("{stem}.json"))
}

#[derive(Args)]
pub struct CompareArgs {
    /// The config (default: paper 000's four-VM scenario, embedded).
    config: Option<PathBuf>,
    /// Comma-separated host schedulers, or `all`.
    #[arg(long, default_value = "all")]
    schedulers: String,
    /// Run each scheduler with this many seeds (the config's seed, or
    /// `--seed`, and the ones after it); figures are means with their spread.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true, value_parser = crate::common::positive::<u64>)]
    seeds: u64,
    /// The first seed (default: the config's).
    #[arg(long, allow_negative_numbers = true, value_parser = crate::common::non_negative::<u64>)]
    seed: Option<u64>,
    /// Where to write the JSON comparison (every figure, the verdict and every run).
    #[arg(long, default_value = "out/compare.json")]
    json: PathBuf,
    /// Also write one CSV row per scheduler and VM here.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Also draw the figures into this directory (needs hvio's Python
    /// package: runs `python3 -m hvio figures`).
    #[arg(long)]
    figures: Option<PathBuf>,
}

pub fn compare(a: CompareArgs) -> Result<()> {
    let mut cfg = match &a.config {
        Some(p) => load(p)?,
        None => Config::from_toml_str(DEFAULT_SCENARIO, "paper000-four-vms.toml")?,
    };
    if let Some(s) = a.seed {
        cfg.seed = s;
    }
    if !(1..=cmp::MAX_SEEDS).contains(&a.seeds) {
        bail!("--seeds {}: must be 1..={}", a.seeds, cmp::MAX_SEEDS);
    }
    let names: Vec<&str> = if a.schedulers == "all" {
        hvio_sched::names()
    } else {
        a.schedulers
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect()
    };
    if names.is_empty() {
        bail!("--schedulers {:?}: name at least one scheduler, or `all`", a.schedulers);
    }
    for n in &names {
        hvio_sched::spec(n).map_err(|e| anyhow::anyhow!("--schedulers: {e}"))?;
    }
    check_not_dir(&a.json)?;
    let mut outputs: Vec<(&str, &std::path::Path)> = vec![("--json", &a.json)];
    if let Some(c) = &a.csv {
        check_not_dir(c)?;
        outputs.push(("--csv", c));
    }
    cfg.check_outputs(&outputs, &[])?;
    let bar = crate::common::progress_bar(cmp::comparison_runs(&cfg, &names, a.seeds) as u64);
    let c = cmp::comparison_with_progress(&cfg, &names, a.seeds, &|done, _| bar.set_position(done as u64));
    bar.finish_and_clear();
    let c = c?;
    write_atomic(&a.json, &serde_json::to_string_pretty(&c)?)?;
    if let Some(p) = &a.csv {
        write_atomic(p, &c.csv())?;
    }
    out!("{}", c.render());
    match &a.csv {
        Some(p) => outln!("results: {}, {}", a.json.display(), p.display()),
        None => outln!("results: {}", a.json.display()),
    }
    if let Some(dir) = &a.figures {
        figures(&a.json, dir)?;
    }
    Ok(())
}

/// Draw a comparison's figures with hvio's Python package.
fn figures(json: &std::path::Path, dir: &std::path::Path) -> Result<()> {
    let python = crate::analysis::python();
    let status = std::process::Command::new(&python)
        .args(["-m", "hvio", "figures"])
        .arg(json)
        .arg("--out")
        .arg(dir)
        .status()
        .with_context(|| format!("--figures: cannot run {} (set HVIO_PYTHON to the Python that has hvio installed, e.g. .venv/bin/python)", python.to_string_lossy()))?;
    if !status.success() {
        bail!(
            "--figures: `{} -m hvio figures` failed ({status}); the results are in {}",
            python.to_string_lossy(),
            json.display()
        );
    }
    Ok(())
}

#[derive(Args)]
pub struct SchedulersArgs {
    /// Show only this scheduler.
    name: Option<String>,
}

pub fn schedulers(a: SchedulersArgs) -> Result<()> {
    let list: Vec<&hvio_sched::SchedulerSpec> = match &a.name {
        Some(n) => vec![hvio_sched::spec(n)?],
        None => hvio_sched::SCHEDULERS.iter().collect(),
    };
    for s in list {
        outln!("{} — {}", s.name, s.summary);
        if s.params.is_empty() {
            outln!("  (no tunables)");
        }
        for p in s.params {
            outln!(
                "  {:<22} {:>12} {:<9} [{} .. {}]  {}",
                p.name,
                p.default,
                p.unit,
                p.min,
                p.max,
                p.doc
            );
        }
        for a in s.stream_attrs {
            match a.range {
                Some((min, max)) => outln!("  per-VM attribute {} [{min}..{max}]: {}", a.name, a.doc),
                None => outln!("  per-VM weight: {}", a.doc),
            }
        }
        outln!();
    }
    Ok(())
}

pub fn presets() -> Result<()> {
    for p in hvio_sim::workload::PRESETS {
        let j = hvio_sim::JobConfig {
            preset: Some(p.to_string()),
            ..Default::default()
        }
        .resolve(p)?;
        outln!(
            "{:<6} rw={:?} mean_bs={:.0}B size={}MiB nrfiles={} threads={} sharing={:?} iodepth={} thinktime={}us requests={:?} runtime_s={:?}",
            p,
            j.rw,
            j.mean_bs(),
            j.size >> 20,
            j.nrfiles,
            j.numjobs,
            j.sharing,
            j.iodepth,
            j.thinktime_ns / 1000,
            j.requests,
            j.runtime_ns.map(|n| n as f64 / 1e9)
        );
    }
    Ok(())
}

#[derive(Args)]
pub struct ReproduceArgs {
    /// The experiment's name, or the path of a study file (a copied and
    /// edited experiments/NAME.study.toml).
    name: Option<String>,
    /// List the experiments.
    #[arg(long)]
    list: bool,
    /// A scaled-down run.
    #[arg(long)]
    quick: bool,
    #[arg(long, allow_negative_numbers = true, value_parser = crate::common::non_negative::<u64>, default_value_t = 1)]
    seed: u64,
    /// Where to write the JSON report (default: out/NAME.json, with
    /// `-quick` and `-seed<N>` added for a quick run and a seed other than
    /// 1, so runs of one experiment do not overwrite each other).
    #[arg(long)]
    json: Option<PathBuf>,
    /// Compute every run of a study again instead of taking the results
    /// cached in out/cache (by config, seed and hvio build), and refresh
    /// the cache.
    #[arg(long)]
    no_cache: bool,
}

pub fn reproduce(a: ReproduceArgs) -> Result<()> {
    // Every experiment is a study (experiments/NAME.study.toml, or a study
    // file's path): its runs and its analysis are hvio's Python package's,
    // which also lists them and names the known ones for an unknown name.
    let mut args: Vec<OsString> = Vec::new();
    if a.list {
        args.push("--list".into());
    }
    if let Some(name) = a.name {
        args.push(name.into());
    }
    args.extend(["--seed".into(), a.seed.to_string().into()]);
    if a.quick {
        args.push("--quick".into());
    }
    if let Some(j) = a.json {
        args.extend(["--json".into(), j.into()]);
    }
    if a.no_cache {
        args.push("--no-cache".into());
    }
    crate::analysis::python_hvio("reproduce", args)
}
