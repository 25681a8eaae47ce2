//! Run one config under several host schedulers and compare them side by
//! side: the question hvio exists to answer, "which scheduler should sit in
//! the hypervisor for these VMs, and what does it buy?" (`hvio compare`,
//! `make run`).
//!
//! Per VM: MB/s, IOPS, latency percentiles, its share of the disk's time
//! against its share of the weights, and its slowdown against running alone
//! on the disk. Per scheduler: total throughput, Jain's fairness index over
//! weight-normalised progress, the worst VM's p99. Over several seeds every
//! figure is a mean with its spread. A verdict names the best scheduler for
//! each objective, what it costs the others, and every VM a scheduler starves.

use crate::config::Config;
use crate::error::Result;
use crate::metrics::SimResult;
use crate::report::{f, Table};
use serde::Serialize;

/// Run `cfg` once per scheduler (the config's own `[host] params` apply only
/// to its own scheduler; the others run with their defaults), the runs in
/// parallel on rayon's pool.
pub fn compare(cfg: &Config, schedulers: &[&str]) -> Result<Vec<SimResult>> {
    let configs: Vec<Config> = schedulers.iter().map(|s| under(cfg, s)).collect();
    run_all(&configs, &|| ()).into_iter().collect()
}

/// Every config's run, in the configs' order, run in parallel on rayon's
/// pool (one run per task), `done` called as each ends. Each run is
/// deterministic and shares nothing with the others, so the results are
/// those of running them one by one.
fn run_all(configs: &[Config], done: &(dyn Fn() + Sync)) -> Vec<Result<SimResult>> {
    use rayon::prelude::*;
    configs
        .par_iter()
        .map(|c| {
            let r = crate::run(c);
            done();
            r
        })
        .collect()
}

/// `cfg` under scheduler `s`: the config's `[host] params` are its own
/// scheduler's and are dropped for any other.
fn under(cfg: &Config, s: &str) -> Config {
    let mut c = cfg.clone();
    if c.host.scheduler != s {
        c.host.params.clear();
    }
    c.host.scheduler = s.to_string();
    c
}

/// `cfg` with only VM `keep` doing I/O: the other VMs stay (their images
/// keep their places on the disk, so the VM's own image is where it was)
/// but have no jobs.
fn alone(cfg: &Config, keep: usize) -> Config {
    let mut c = cfg.clone();
    for (i, vm) in c.vms.iter_mut().enumerate() {
        if i != keep {
            vm.jobs.clear();
        }
    }
    c
}

/// A VM gets less than this fraction of the progress its weight entitles it
/// to (its MB/s against its MB/s alone, over its share of the weights): it
/// is starved. A quarter: well below what any proportional scheduler aims
/// at, far above measurement noise.
pub const STARVED_BELOW: f64 = 0.25;

/// Most seeds a comparison takes: each is a run per scheduler and per VM.
pub const MAX_SEEDS: u64 = 1000;

/// A figure over the seeds of a comparison: mean, sample standard deviation
/// (0 for one seed), least and greatest.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq)]
pub struct Spread {
    /// Mean.
    pub mean: f64,
    /// Sample standard deviation (0 for one value).
    pub sd: f64,
    /// Least.
    pub min: f64,
    /// Greatest.
    pub max: f64,
}

impl Spread {
    /// The spread of `xs` (all zero when empty).
    pub fn of(xs: &[f64]) -> Spread {
        if xs.is_empty() {
            return Spread::default();
        }
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        let sd = if xs.len() < 2 || !mean.is_finite() {
            0.0
        } else {
            (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
        };
        Spread {
            mean,
            sd,
            min: xs.iter().copied().fold(f64::INFINITY, f64::min),
            max: xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        }
    }

    /// `mean` with `d` decimals, `±sd` after it when there is a spread to show.
    pub fn show(&self, d: usize, with_sd: bool) -> String {
        if !self.mean.is_finite() {
            return "inf".into();
        }
        if with_sd {
            format!("{}±{}", f(self.mean, d), f(self.sd, d))
        } else {
            f(self.mean, d)
        }
    }
}

/// One VM under one scheduler, over the seeds.
#[derive(Clone, Debug, Serialize)]
pub struct VmComparison {
    /// The VM's name.
    pub vm: String,
    /// Its weight.
    pub weight: u32,
    /// The VM's weight over the weights of the VMs that do I/O.
    pub weight_share: f64,
    /// Its MB/s.
    pub mb_per_s: Spread,
    /// Its I/Os per second.
    pub iops: Spread,
    /// Its median latency, ms.
    pub p50_ms: Spread,
    /// Its 99th-percentile latency, ms.
    pub p99_ms: Spread,
    /// Its 99.9th-percentile latency, ms.
    pub p999_ms: Spread,
    /// The VM's device time over the device time of every VM.
    pub disk_share: Spread,
    /// MB/s of the VM alone on the disk, same scheduler and seed.
    pub alone_mb_per_s: Spread,
    /// Alone MB/s over shared MB/s (infinite when the VM moved no data).
    pub slowdown: Spread,
    /// Shared MB/s over alone MB/s: the fraction of its own speed it kept.
    pub progress: Spread,
    /// Mean progress below [`STARVED_BELOW`] × its weight share.
    pub starved: bool,
}

/// One scheduler, over the seeds.
#[derive(Clone, Debug, Serialize)]
pub struct SchedulerComparison {
    /// The host scheduler.
    pub scheduler: String,
    /// The scheduler reads the VMs' weights (`hvio schedulers` lists them).
    pub reads_weights: bool,
    /// MB/s over all VMs.
    pub total_mb_per_s: Spread,
    /// Jain's index over the VMs' progress divided by their weight shares:
    /// 1 when every VM keeps the same fraction of its alone speed per unit
    /// of weight, 1/n when one VM gets everything.
    pub jain: Spread,
    /// The largest p99 of any VM in each run.
    pub worst_p99_ms: Spread,
    /// The VM with the largest mean p99.
    pub worst_p99_vm: String,
    /// Some run hit `max_time_s` before its jobs finished.
    pub truncated: bool,
    /// Each VM under it.
    pub vms: Vec<VmComparison>,
}

/// A comparison of schedulers on one config.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    /// The config's origin (its file name).
    pub config: String,
    /// The seeds run.
    pub seeds: Vec<u64>,
    /// Each scheduler, in the order asked.
    pub schedulers: Vec<SchedulerComparison>,
    /// The best scheduler for each objective and what it costs, then starvation.
    pub verdict: Vec<String>,
    /// Things the reader should know about the inputs (ignored weights, time-based jobs).
    pub notes: Vec<String>,
    /// Every shared run, scheduler by scheduler, seed by seed.
    pub runs: Vec<SimResult>,
    /// (vm, job) of every job that ends by time (`runtime_s` set): its
    /// execution time is its runtime under every scheduler.
    pub time_based: Vec<(String, String)>,
}

/// Jain's fairness index of `xs`: (Σx)² / (n Σx²); 1 for an empty or all-zero list.
pub fn jain(xs: &[f64]) -> f64 {
    let sum: f64 = xs.iter().sum();
    let sq: f64 = xs.iter().map(|x| x * x).sum();
    if xs.is_empty() || sq == 0.0 {
        1.0
    } else {
        sum * sum / (xs.len() as f64 * sq)
    }
}

/// Run `cfg` under each scheduler with `seeds` seeds (the config's seed and
/// the ones after it), and each VM alone under each, and compare.
pub fn comparison(cfg: &Config, schedulers: &[&str], seeds: u64) -> Result<Comparison> {
    comparison_with_progress(cfg, schedulers, seeds, &|_, _| ())
}

/// Runs a comparison of `schedulers` × `seeds` makes: per scheduler and
/// seed, the shared run and one per VM with jobs (alone on the disk).
pub fn comparison_runs(cfg: &Config, schedulers: &[&str], seeds: u64) -> usize {
    let active = cfg.vms.iter().filter(|v| !v.jobs.is_empty()).count();
    schedulers.len() * seeds.max(1) as usize * (1 + active)
}

/// [`comparison`], calling `progress(done, total)` as each of its runs ends
/// (from rayon's threads: a progress bar's count and ETA).
pub fn comparison_with_progress(
    cfg: &Config,
    schedulers: &[&str],
    seeds: u64,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Comparison> {
    let total = comparison_runs(cfg, schedulers, seeds);
    let finished = std::sync::atomic::AtomicUsize::new(0);
    let done = || progress(finished.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1, total);
    let seeds: Vec<u64> = (0..seeds.max(1)).map(|k| cfg.seed.wrapping_add(k)).collect();
    let active: Vec<usize> = (0..cfg.vms.len()).filter(|&i| !cfg.vms[i].jobs.is_empty()).collect();
    let weight_sum: f64 = active.iter().map(|&i| cfg.vms[i].weight as f64).sum();
    // Every run of the comparison (per scheduler, per seed: each active VM
    // alone, then the shared run), computed in parallel and taken in this
    // same order below.
    let mut configs = Vec::new();
    for &s in schedulers {
        let base = under(cfg, s);
        for &seed in &seeds {
            let mut c = base.clone();
            c.seed = seed;
            configs.extend(active.iter().map(|&i| alone(&c, i)));
            configs.push(c);
        }
    }
    // In chunks, so a comparison of many seeds holds a chunk's alone runs,
    // not all of them.
    const CHUNK: usize = 256;
    let mut chunks = configs.chunks(CHUNK);
    let mut results = Vec::new().into_iter();
    let mut next = move || loop {
        if let Some(r) = results.next() {
            return r;
        }
        results = run_all(chunks.next().expect("one result per config"), &done).into_iter();
    };
    let mut runs = Vec::new();
    let mut out = Vec::new();
    for &s in schedulers {
        // Per VM, per seed: (shared run's VM figures, alone MB/s); per seed: total, jain, worst p99.
        let mut per_vm: Vec<Vec<(crate::metrics::VmResult, f64, f64)>> = vec![Vec::new(); active.len()];
        let (mut totals, mut jains, mut worst) = (Vec::new(), Vec::new(), Vec::new());
        let mut truncated = false;
        for _ in &seeds {
            let alones: Vec<Result<SimResult>> = active.iter().map(|_| next()).collect();
            let r = next()?;
            truncated |= r.truncated;
            let disk_sum: f64 = r.vms.iter().map(|v| v.disk_time_s).sum();
            let mut xs = Vec::new();
            let mut worst_p99 = 0.0f64;
            for ((k, &i), a) in active.iter().enumerate().zip(alones) {
                let a = a?;
                truncated |= a.truncated;
                let alone_mb = a.vms[i].mb_per_s;
                let v = r.vms[i].clone();
                let share = cfg.vms[i].weight as f64 / weight_sum;
                if alone_mb > 0.0 {
                    xs.push(v.mb_per_s / alone_mb / share);
                }
                worst_p99 = worst_p99.max(v.latency.p99_ms);
                let disk_share = if disk_sum > 0.0 { v.disk_time_s / disk_sum } else { 0.0 };
                per_vm[k].push((v, alone_mb, disk_share));
            }
            totals.push(r.total_mb_per_s);
            jains.push(jain(&xs));
            worst.push(worst_p99);
            runs.push(r);
        }
        let vms: Vec<VmComparison> = active
            .iter()
            .zip(&per_vm)
            .map(|(&i, rows)| {
                let col = |g: &dyn Fn(&(crate::metrics::VmResult, f64, f64)) -> f64| {
                    Spread::of(&rows.iter().map(g).collect::<Vec<_>>())
                };
                let weight_share = cfg.vms[i].weight as f64 / weight_sum;
                let progress = col(&|(v, a, _)| if *a > 0.0 { v.mb_per_s / a } else { 1.0 });
                VmComparison {
                    vm: cfg.vms[i].name.clone(),
                    weight: cfg.vms[i].weight,
                    weight_share,
                    mb_per_s: col(&|(v, _, _)| v.mb_per_s),
                    iops: col(&|(v, _, _)| v.iops),
                    p50_ms: col(&|(v, _, _)| v.latency.p50_ms),
                    p99_ms: col(&|(v, _, _)| v.latency.p99_ms),
                    p999_ms: col(&|(v, _, _)| v.latency.p999_ms),
                    disk_share: col(&|(_, _, d)| *d),
                    alone_mb_per_s: col(&|(_, a, _)| *a),
                    slowdown: col(&|(v, a, _)| {
                        if v.mb_per_s > 0.0 {
                            a / v.mb_per_s
                        } else {
                            f64::INFINITY
                        }
                    }),
                    starved: progress.mean < STARVED_BELOW * weight_share,
                    progress,
                }
            })
            .collect();
        let worst_p99_vm = vms
            .iter()
            .fold(None::<&VmComparison>, |w, v| match w {
                Some(w) if w.p99_ms.mean >= v.p99_ms.mean => Some(w),
                _ => Some(v),
            })
            .map(|v| v.vm.clone())
            .unwrap_or_default();
        out.push(SchedulerComparison {
            scheduler: s.to_string(),
            reads_weights: hvio_sched::spec(s)
                .map(|sp| sp.stream_attrs.iter().any(|a| a.range.is_none()))
                .unwrap_or(false),
            total_mb_per_s: Spread::of(&totals),
            jain: Spread::of(&jains),
            worst_p99_ms: Spread::of(&worst),
            worst_p99_vm,
            truncated,
            vms,
        });
    }
    let mut time_based = Vec::new();
    for vm in &cfg.vms {
        for (j, jc) in vm.jobs.iter().enumerate() {
            let job = jc
                .resolve(&format!("vm \"{}\" job {j}", vm.name))
                .map_err(|e| cfg.locate(e))?;
            if job.runtime_ns.is_some() {
                time_based.push((vm.name.clone(), job.name.clone()));
            }
        }
    }
    let mut c = Comparison {
        config: cfg.origin.clone(),
        seeds,
        schedulers: out,
        verdict: Vec::new(),
        notes: Vec::new(),
        runs,
        time_based,
    };
    c.verdict = verdict(&c.schedulers);
    c.notes = notes(cfg, &c);
    Ok(c)
}

/// The best scheduler for each objective, what choosing it costs the other
/// two, and every VM a scheduler starves.
fn verdict(s: &[SchedulerComparison]) -> Vec<String> {
    if s.is_empty() {
        return Vec::new();
    }
    let best = |key: &dyn Fn(&SchedulerComparison) -> f64, higher: bool| -> &SchedulerComparison {
        s.iter()
            .fold(None::<&SchedulerComparison>, |b, x| match b {
                Some(b) if (higher && key(b) >= key(x)) || (!higher && key(b) <= key(x)) => Some(b),
                _ => Some(x),
            })
            .expect("not empty")
    };
    let tput = best(&|x| x.total_mb_per_s.mean, true);
    let lat = best(&|x| x.worst_p99_ms.mean, false);
    let fair = best(&|x| x.jain.mean, true);
    let starved = |x: &SchedulerComparison| -> String {
        let names: Vec<&str> = x.vms.iter().filter(|v| v.starved).map(|v| v.vm.as_str()).collect();
        if names.is_empty() {
            String::new()
        } else {
            format!("; starves {}", names.join(", "))
        }
    };
    let cost = |x: &SchedulerComparison| -> String {
        let mut parts = Vec::new();
        if x.scheduler != tput.scheduler {
            parts.push(format!(
                "total {} MB/s ({:.0} % of {}'s)",
                f(x.total_mb_per_s.mean, 2),
                100.0 * x.total_mb_per_s.mean / tput.total_mb_per_s.mean.max(1e-12),
                tput.scheduler
            ));
        }
        if x.scheduler != lat.scheduler {
            parts.push(format!(
                "worst p99 {} ms ({} under {})",
                f(x.worst_p99_ms.mean, 1),
                f(lat.worst_p99_ms.mean, 1),
                lat.scheduler
            ));
        }
        if x.scheduler != fair.scheduler {
            parts.push(format!(
                "fairness {} ({} under {})",
                f(x.jain.mean, 3),
                f(fair.jain.mean, 3),
                fair.scheduler
            ));
        }
        if parts.is_empty() {
            "nothing: it is also best at the other two".into()
        } else {
            parts.join(", ")
        }
    };
    let mut v = vec![
        format!(
            "throughput: {} ({} MB/s in all); costs {}{}",
            tput.scheduler,
            f(tput.total_mb_per_s.mean, 2),
            cost(tput),
            starved(tput)
        ),
        format!(
            "worst-case latency: {} (worst VM p99 {} ms, {}); costs {}{}",
            lat.scheduler,
            f(lat.worst_p99_ms.mean, 1),
            lat.worst_p99_vm,
            cost(lat),
            starved(lat)
        ),
        format!(
            "weighted fairness: {} (Jain {}); costs {}{}",
            fair.scheduler,
            f(fair.jain.mean, 3),
            cost(fair),
            starved(fair)
        ),
    ];
    let mut any = false;
    for x in s {
        for vm in x.vms.iter().filter(|v| v.starved) {
            any = true;
            v.push(format!(
                "starved: {} gives {} {} MB/s ({:.1} % of its {} MB/s alone, against a {:.0} % weight share), p99 {} ms",
                x.scheduler,
                vm.vm,
                f(vm.mb_per_s.mean, 2),
                100.0 * vm.progress.mean,
                f(vm.alone_mb_per_s.mean, 2),
                100.0 * vm.weight_share,
                f(vm.p99_ms.mean, 1)
            ));
        }
    }
    if !any {
        v.push(format!(
            "no scheduler starves a VM (none keeps less than {STARVED_BELOW} × its weight share of its alone speed)"
        ));
    }
    v
}

fn notes(cfg: &Config, c: &Comparison) -> Vec<String> {
    let mut n = Vec::new();
    let weights: std::collections::BTreeSet<u32> = cfg.vms.iter().map(|v| v.weight).collect();
    if weights.len() > 1 {
        let ignore: Vec<&str> = c
            .schedulers
            .iter()
            .filter(|s| !s.reads_weights)
            .map(|s| s.scheduler.as_str())
            .collect();
        if !ignore.is_empty() {
            n.push(format!(
                "the VMs' weights differ; {} ignore weights (the share-vs-weight and fairness figures still measure against them)",
                ignore.join(", ")
            ));
        }
    }
    if c.schedulers.iter().any(|s| s.scheduler == "htbs") && cfg.vms.iter().all(|v| v.attrs.is_empty()) {
        if let Ok(spec) = hvio_sched::spec("htbs") {
            let own = cfg.host.scheduler == "htbs";
            let contract: Vec<String> = ["default_rate_iops", "default_burst", "default_latency"]
                .iter()
                .filter_map(|name| spec.params.iter().find(|p| p.name == *name))
                .map(|p| {
                    let v = own
                        .then(|| cfg.host.params.get(p.name).copied())
                        .flatten()
                        .unwrap_or(p.default);
                    format!("{} = {v} {}", p.name, p.unit)
                })
                .collect();
            n.push(format!(
                "htbs: no VM sets attrs.rate_iops, burst or latency_ms, so every VM gets the same contract ({}; `hvio schedulers htbs`); where the rates add up to more than the disk delivers, service follows demand, not weights (docs/htbs.md)",
                contract.join(", ")
            ));
        }
    }
    n.extend(cfg.warnings.iter().map(|w| format!("fio: {w}")));
    for s in c.schedulers.iter().filter(|s| s.truncated) {
        n.push(format!(
            "{}: a run hit max_time_s before every job finished; its figures cover the run up to then",
            s.scheduler
        ));
    }
    if !c.time_based.is_empty() {
        let names: Vec<String> = c.time_based.iter().map(|(vm, j)| format!("{vm}/{j}")).collect();
        n.push(format!(
            "time-based jobs ({}) run for their runtime under every scheduler: compare their MB/s and latency, not their execution time",
            names.join(", ")
        ));
    }
    n
}

impl Comparison {
    fn spread(&self) -> bool {
        self.seeds.len() > 1
    }

    fn seed_text(&self) -> String {
        match self.seeds.as_slice() {
            [s] => format!("seed {s}"),
            s => format!(
                "seeds {}..{}, mean±sd",
                s.first().copied().unwrap_or(0),
                s.last().copied().unwrap_or(0)
            ),
        }
    }

    /// Per scheduler: total MB/s, fairness, the worst VM's p99, starved VMs.
    pub fn scheduler_table(&self) -> Table {
        let sd = self.spread();
        let mut t = Table::new(
            format!("{} by host scheduler ({})", self.config, self.seed_text()),
            &[
                "scheduler",
                "total MB/s",
                "fairness (Jain)",
                "worst p99 ms",
                "worst VM",
                "starved",
            ],
        );
        for s in &self.schedulers {
            let starved: Vec<&str> = s.vms.iter().filter(|v| v.starved).map(|v| v.vm.as_str()).collect();
            t.row(vec![
                s.scheduler.clone(),
                s.total_mb_per_s.show(2, sd),
                s.jain.show(3, sd),
                s.worst_p99_ms.show(1, sd),
                s.worst_p99_vm.clone(),
                if starved.is_empty() {
                    "-".into()
                } else {
                    starved.join(",")
                },
            ]);
        }
        t
    }

    /// Per scheduler and VM: throughput, latency, disk share against weight share, slowdown.
    pub fn vm_table(&self) -> Table {
        let sd = self.spread();
        let mut t = Table::new(
            format!(
                "per VM ({}); slowdown = MB/s alone on the disk / MB/s shared",
                self.seed_text()
            ),
            &[
                "scheduler",
                "vm",
                "MB/s",
                "IOPS",
                "p50 ms",
                "p99 ms",
                "p99.9 ms",
                "disk %",
                "weight %",
                "alone MB/s",
                "slowdown",
            ],
        );
        for s in &self.schedulers {
            for v in &s.vms {
                t.row(vec![
                    s.scheduler.clone(),
                    v.vm.clone(),
                    v.mb_per_s.show(2, sd),
                    v.iops.show(1, sd),
                    v.p50_ms.show(1, sd),
                    v.p99_ms.show(1, sd),
                    v.p999_ms.show(1, sd),
                    Spread {
                        mean: 100.0 * v.disk_share.mean,
                        sd: 100.0 * v.disk_share.sd,
                        ..v.disk_share
                    }
                    .show(1, sd),
                    f(100.0 * v.weight_share, 1),
                    v.alone_mb_per_s.show(2, sd),
                    if v.slowdown.mean.is_finite() {
                        format!("{}x", v.slowdown.show(1, sd))
                    } else {
                        "no I/O".into()
                    },
                ]);
            }
        }
        t
    }

    /// Execution time of every job that ends by size or request count
    /// (time-based jobs run their runtime under every scheduler and are left
    /// out); `None` when every job is time-based. First seed.
    pub fn job_table(&self) -> Option<Table> {
        let first: Vec<&SimResult> = self
            .runs
            .iter()
            .filter(|r| r.seed == self.seeds.first().copied().unwrap_or(0))
            .collect();
        let jobs = &first.first()?.jobs;
        let keep: Vec<usize> = jobs
            .iter()
            .enumerate()
            .filter(|(_, j)| !self.time_based.iter().any(|(vm, name)| *vm == j.vm && *name == j.job))
            .map(|(i, _)| i)
            .collect();
        if keep.is_empty() {
            return None;
        }
        let mut cols: Vec<String> = vec!["vm".into(), "job".into()];
        cols.extend(first.iter().map(|r| format!("{} s", r.scheduler)));
        let mut t = Table {
            title: format!(
                "job execution time (s) by host scheduler (seed {})",
                self.seeds.first().copied().unwrap_or(0)
            ),
            columns: cols,
            rows: vec![],
        };
        for i in keep {
            let mut row = vec![jobs[i].vm.clone(), jobs[i].job.clone()];
            row.extend(first.iter().map(|r| f(r.jobs[i].exec_time_s, 2)));
            t.row(row);
        }
        Some(t)
    }

    /// The whole comparison as text: tables, notes, verdict.
    pub fn render(&self) -> String {
        let mut out = format!("{}\n{}", self.scheduler_table().render(), self.vm_table().render());
        if let Some(t) = self.job_table() {
            out.push('\n');
            out.push_str(&t.render());
        }
        for n in &self.notes {
            out.push_str(&format!("\nnote: {n}"));
        }
        if !self.notes.is_empty() {
            out.push('\n');
        }
        out.push_str("\nverdict\n");
        for v in &self.verdict {
            out.push_str(&format!("  {v}\n"));
        }
        out
    }

    /// One CSV row per scheduler and VM, with the scheduler's own figures
    /// repeated on each (means, and standard deviations over the seeds).
    pub fn csv(&self) -> String {
        let mut out = String::from(
            "scheduler,vm,weight,weight_share,mb_per_s,mb_per_s_sd,iops,p50_ms,p99_ms,p999_ms,disk_share,alone_mb_per_s,slowdown,starved,total_mb_per_s,total_mb_per_s_sd,jain,worst_p99_ms,seeds\n",
        );
        let seeds: Vec<String> = self.seeds.iter().map(u64::to_string).collect();
        for s in &self.schedulers {
            for v in &s.vms {
                out.push_str(&format!(
                    "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
                    csv_field(&s.scheduler),
                    csv_field(&v.vm),
                    v.weight,
                    v.weight_share,
                    v.mb_per_s.mean,
                    v.mb_per_s.sd,
                    v.iops.mean,
                    v.p50_ms.mean,
                    v.p99_ms.mean,
                    v.p999_ms.mean,
                    v.disk_share.mean,
                    v.alone_mb_per_s.mean,
                    v.slowdown.mean,
                    v.starved,
                    s.total_mb_per_s.mean,
                    s.total_mb_per_s.sd,
                    s.jain.mean,
                    s.worst_p99_ms.mean,
                    seeds.join(" ")
                ));
            }
        }
        out
    }
}

/// A CSV field, quoted when it holds a comma, quote or line break (RFC 4180).
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_index() {
        assert_eq!(jain(&[1.0, 1.0, 1.0]), 1.0);
        assert!((jain(&[1.0, 0.0, 0.0]) - 1.0 / 3.0).abs() < 1e-12);
        assert!((jain(&[2.0, 1.0]) - 0.9).abs() < 1e-12);
        assert_eq!(jain(&[]), 1.0);
    }

    #[test]
    fn spread_is_mean_sd_min_max() {
        let s = Spread::of(&[1.0, 2.0, 3.0]);
        assert_eq!((s.mean, s.sd, s.min, s.max), (2.0, 1.0, 1.0, 3.0));
        assert_eq!(Spread::of(&[5.0]).sd, 0.0);
        assert_eq!(s.show(2, true), "2.00±1.00");
        assert_eq!(Spread::of(&[f64::INFINITY]).show(1, false), "inf");
    }

    #[test]
    fn csv_quotes_what_needs_it() {
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"x\""), "\"say \"\"x\"\"\"");
        assert_eq!(csv_field("vm1"), "vm1");
    }
}
