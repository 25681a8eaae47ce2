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
    /// Write the config with the chosen plan as `[[phase]]` tables here
    /// (with `--online`: the daemon's config with its classes filled in).
    #[arg(long)]
    out: Option<PathBuf>,
    /// A daemon config (`hvio serve`) with an `[online]` table: `--out`
    /// gets it with each `[[online.class]]` named after a phase switching
    /// the host to the scheduler the plan runs in that phase.
    #[arg(long, requires = "out")]
    online: Option<PathBuf>,
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
    // The daemon config is read (and its `[online]` checked) before the
    // search, so a mistake in it costs no runs.
    let online = match &a.online {
        Some(path) => {
            let text =
                std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("--online {}: {e}", path.display()))?;
            hvio_vdisk::config::Config::from_toml_str(&text, &path.display().to_string())?;
            Some((path, text))
        }
        None => None,
    };
    if let Some(out) = &a.out {
        check_not_dir(out)?;
        if online.is_none() {
            cfg.check_outputs(&[("--out", out)], &[])?;
            check_relative_paths(&cfg, out)?;
        }
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
    match (&a.out, online) {
        (Some(out), Some((path, text))) => {
            let hosts = phase_hosts(&tuned, &cfg);
            let (written, missing) = online_classes(&text, &path.display().to_string(), &hosts)?;
            // What is written must load as the daemon's config.
            hvio_vdisk::config::Config::from_toml_str(&written, &out.display().to_string())?;
            write_atomic(out, &written)?;
            outln!(
                "daemon config written: {} ([[online.class]] hosts: {}; run it with `hvio serve {}`)",
                out.display(),
                hosts
                    .iter()
                    .filter(|(p, _)| !missing.contains(p))
                    .map(|(p, h)| format!("{p} -> {h}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                out.display()
            );
            if !missing.is_empty() {
                outln!(
                    "no [[online.class]] is named {}: those phases are not written",
                    missing.join(", ")
                );
            }
        }
        (Some(out), None) => {
            write_atomic(out, &workload::plan_config(&cfg, &tuned.plan)?)?;
            outln!(
                "plan written: {} (run it with `hvio sim {}`)",
                out.display(),
                out.display()
            );
        }
        _ => {}
    }
    Ok(())
}

/// Each phase and the host scheduler the written plan runs in it (the
/// config's own host scheduler when the config as written was fastest).
fn phase_hosts(t: &Tuned, cfg: &Config) -> Vec<(String, String)> {
    t.phases
        .iter()
        .enumerate()
        .map(|(k, phase)| {
            let host = match &t.chosen {
                Some(c) => t.pairs[c.plan[k]].host.clone(),
                None => cfg.host.scheduler.clone(),
            };
            (phase.clone(), host)
        })
        .collect()
}

/// The daemon config `text` (read from `origin`) with `host` of every
/// `[[online.class]]` named after a phase set to that phase's scheduler
/// (the daemon runs no guest schedulers: only the host's is written);
/// the rest of the file is kept as written. Also the phases no class is
/// named after. An error when the file has no `[online]` classes or none
/// is named after a phase.
fn online_classes(text: &str, origin: &str, hosts: &[(String, String)]) -> Result<(String, Vec<String>)> {
    let mut doc: toml_edit::DocumentMut = text.parse().map_err(|e| anyhow::anyhow!("--online {origin}: {e}"))?;
    let phases = || hosts.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>().join(", ");
    let Some(classes) = doc
        .get_mut("online")
        .and_then(|o| o.get_mut("class"))
        .and_then(|c| c.as_array_of_tables_mut())
    else {
        bail!(
            "--online {origin}: no [[online.class]] tables; give one per phase ({}), named after it, with the request mix it takes (docs/serve.md)",
            phases()
        );
    };
    let mut missing = Vec::new();
    for (phase, host) in hosts {
        let mut found = false;
        for class in classes.iter_mut() {
            if class.get("name").and_then(|n| n.as_str()) == Some(phase.as_str()) {
                class.insert("host", toml_edit::value(host.as_str()));
                found = true;
            }
        }
        if !found {
            missing.push(phase.clone());
        }
    }
    if missing.len() == hosts.len() {
        bail!(
            "--online {origin}: no [[online.class]] is named after a phase ({}); name the classes after the phases",
            phases()
        );
    }
    Ok((doc.to_string(), missing))
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
    outln!(
        "Algorithm 1's plan: {} ({} s)",
        t.describe(&c.heuristic.plan),
        f(c.heuristic.outcome.total_s(), 3)
    );
    outln!(
        "chosen plan ({}): {}",
        t.chosen_from.describe(),
        t.chosen
            .as_ref()
            .map_or_else(|| "no [[phase]] plan".to_string(), |p| t.describe(&p.plan))
    );
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

#[cfg(test)]
mod tests {
    use super::*;

    const DAEMON: &str = r#"[store]
kind = "emulator"
path = "/tmp/hvio-tune-online/data.img"

[store.device]
model = "hdd"

[scheduler]
name = "cfq"

[nbd]
unix = "/tmp/hvio-tune-online/nbd.sock"

[online]
window_ms = 500

[[online.class]]
name = "scan"      # sequential reads
host = "cfq"
read_share = [0.5, 1.0]

[[online.class]]
name = "other"
host = "cfq"

[[vm]]
name = "vm1"
size = "1GiB"
"#;

    fn hosts() -> Vec<(String, String)> {
        vec![
            ("scan".into(), "anticipatory".into()),
            ("update".into(), "deadline".into()),
        ]
    }

    #[test]
    fn the_classes_named_after_phases_get_the_plans_host_and_the_daemon_loads_it() {
        let (text, missing) = online_classes(DAEMON, "d.toml", &hosts()).unwrap();
        assert_eq!(missing, vec!["update".to_string()]);
        let cfg = hvio_vdisk::config::Config::from_toml_str(&text, "written").unwrap();
        let online = cfg.online.as_ref().unwrap().check().unwrap();
        let host = |name: &str| online.classes.iter().find(|c| c.name == name).unwrap().host.clone();
        assert_eq!(host("scan"), "anticipatory");
        assert_eq!(host("other"), "cfq");
        assert_eq!(online.classes[0].read_share, [0.5, 1.0]);
        // The rest of the file as written, comments too.
        assert!(text.contains("# sequential reads"), "{text}");
        assert!(text.contains("window_ms = 500"), "{text}");
    }

    #[test]
    fn a_daemon_config_without_classes_for_the_phases_is_an_error_naming_them() {
        let err = online_classes("[scheduler]\nname = \"cfq\"\n", "d.toml", &hosts())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("d.toml") && err.contains("[[online.class]]") && err.contains("scan, update"),
            "{err}"
        );
        let other = DAEMON.replace("\"scan\"", "\"map\"").replace("\"other\"", "\"more\"");
        let err = online_classes(&other, "d.toml", &hosts()).unwrap_err().to_string();
        assert!(err.contains("no [[online.class]] is named after a phase"), "{err}");
    }
}
