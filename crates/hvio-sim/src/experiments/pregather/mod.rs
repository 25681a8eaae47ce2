//! Paper 000 (Pregather, Ling et al., IEEE TPDS 2015): its §5 experiments.
//!
//! - `pregather-fig5`: the zone size B from 10 to 10⁷ sectors, two
//!   sequential readers in one VM (§5.1, Fig. 5);
//! - `pregather-table3`: seven two-application mixes in one VM under
//!   Pregather, CFQ and AS, and Pregather's success ratio of waiting
//!   (§5.1, Table 3);
//! - `pregather-table4`: the four VMs of Table 1 under Pregather, CFQ, AS and
//!   Deadline: execution times (Fig. 6a), bandwidth (Fig. 6b), seek
//!   distances (Table 4), throughput over time (Fig. 7);
//! - `pregather-overhead`: Pregather's model memory per VM and CPU time per
//!   scheduling decision against CFQ (§5.3, Fig. 12).
//!
//! Each prints the paper's numbers next to hvio's. A baseline scheduler that
//! is not registered in this build is left out with a note.

mod fig5;
mod overhead;
mod table3;
mod table4;

use super::{ExpOptions, Experiment};
use crate::config::Config;
use crate::error::Result;
use crate::metrics::SimResult;

pub const FIG5: Experiment = Experiment {
    name: "pregather-fig5",
    title: "Pregather zone size B: two sequential readers in one VM",
    paper: "paper 000 §5.1, Fig. 5",
    run: fig5::run,
};

pub const TABLE3: Experiment = Experiment {
    name: "pregather-table3",
    title: "Two applications in one VM: Pregather vs CFQ vs AS, success ratio of waiting",
    paper: "paper 000 §5.1, Table 3",
    run: table3::run,
};

pub const TABLE4: Experiment = Experiment {
    name: "pregather-table4",
    title: "Four VMs with mixed applications: execution time, bandwidth, seek distances, throughput over time",
    paper: "paper 000 §5.2.1, Fig. 6, Table 4, Fig. 7",
    run: table4::run,
};

pub const OVERHEAD: Experiment = Experiment {
    name: "pregather-overhead",
    title: "Pregather's memory per VM and CPU time per scheduling decision vs CFQ",
    paper: "paper 000 §5.3, Fig. 12",
    run: overhead::run,
};

/// The disk of every run, as the reports name it.
const DISK: &str = "hvio's HDD model (7200 RPM, 1 TB: seek curve, rotation, zones, read-ahead cache)";

/// The paper's disk: hvio's 7200 RPM 1 TB HDD model with its defaults.
fn disk() -> Result<Box<dyn hvio_core::Device>> {
    hvio_device::build_device(&hvio_device::DeviceConfig::default(), std::path::Path::new(""))
        .map_err(|e| crate::SimError::Device(e.to_string()))
}

/// Run `cfg` on [`disk`].
fn simulate(cfg: &Config) -> Result<SimResult> {
    crate::run_with_device(cfg, disk()?)
}

/// Whether scheduler `name` is registered in this build.
fn available(name: &str) -> bool {
    hvio_sched::spec(name).is_ok()
}

/// Split `wanted` into registered schedulers and a note about the others.
fn registered<'a>(wanted: &[&'a str]) -> (Vec<&'a str>, Option<String>) {
    let (have, missing): (Vec<&str>, Vec<&str>) = wanted.iter().partition(|s| available(s));
    let note = (!missing.is_empty()).then(|| {
        format!(
            "not registered in this build, left out: {} (their columns show \"—\")",
            missing.join(", ")
        )
    });
    (have, note)
}

/// How the guests issue the applications' I/O.
///
/// hvio's sysbench presets model direct I/O: 16 threads on a shared cursor,
/// so a sequential application keeps 16 requests queued at the host and its
/// queue never runs dry. The paper's guests ran sysbench through the page
/// cache and Xen's blkfront (requests of at most 44 KiB, §4.2): a sequential
/// application reaches the host as one readahead (or writeback) stream with
/// a request in flight at a time, the pattern non-work-conserving schedulers
/// exist for. `Buffered` models that: every sequential application becomes
/// one stream of 44 KiB requests, one in flight, moving the same 160 MB;
/// random applications stay as they are (their reads miss the page cache).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Guest {
    Direct,
    Buffered,
}

impl Guest {
    pub(super) const BOTH: [Guest; 2] = [Guest::Direct, Guest::Buffered];

    pub(super) fn label(self) -> &'static str {
        match self {
            Guest::Direct => "direct I/O guests (hvio's sysbench presets: 16 threads, 16 KiB)",
            Guest::Buffered => "buffered guests (one 44 KiB readahead/writeback stream per sequential application)",
        }
    }

    pub(super) fn short(self) -> &'static str {
        match self {
            Guest::Direct => "direct",
            Guest::Buffered => "buffered",
        }
    }

    /// Whether this model turns `preset` into one stream.
    fn streams(self, preset: &str) -> bool {
        self == Guest::Buffered && matches!(preset, "SR-M" | "SR-S" | "SW-M" | "SW-S")
    }

    /// Requests per application: sysbench's 10,000 of 16 KiB (1,000 when quick),
    /// or the same bytes in 44 KiB requests.
    fn requests(self, preset: &str, quick: bool) -> u64 {
        let n: u64 = if quick { 1000 } else { 10_000 };
        if self.streams(preset) {
            (n * 16).div_ceil(44)
        } else {
            n
        }
    }

    /// Apply the model to every job of `cfg`.
    pub(super) fn apply(self, cfg: &mut Config, quick: bool) {
        for vm in &mut cfg.vms {
            for job in &mut vm.jobs {
                let preset = job.preset.clone().unwrap_or_default();
                job.requests = Some(self.requests(&preset, quick));
                if self.streams(&preset) {
                    job.numjobs = Some(1);
                    job.iodepth = Some(1);
                    job.bs = Some(crate::size::Size(44 << 10));
                }
            }
        }
    }
}

/// One `[[vm]]` with jobs given as (job name, preset, extra TOML lines).
fn vm_toml(name: &str, jobs: &[(&str, &str, &str)]) -> String {
    let mut s = format!("[[vm]]\nname = \"{name}\"\n");
    for (job, preset, extra) in jobs {
        s.push_str(&format!("[[vm.job]]\nname = \"{job}\"\npreset = \"{preset}\"\n{extra}"));
    }
    s
}

/// A full config: seed, disk, host scheduler with parameters, then the VMs
/// with `guest`'s I/O model.
fn config(opts: &ExpOptions, guest: Guest, scheduler: &str, params: &[(&str, f64)], vms: &str) -> Result<Config> {
    let p: Vec<String> = params.iter().map(|(k, v)| format!("{k} = {v}")).collect();
    let text = format!(
        "seed = {}\nmax_time_s = 3600\n[host]\nscheduler = \"{scheduler}\"\nparams = {{ {} }}\n{vms}",
        opts.seed,
        p.join(", ")
    );
    let mut cfg = Config::from_toml_str(&text, &format!("pregather experiment ({scheduler})"))?;
    guest.apply(&mut cfg, opts.quick);
    Ok(cfg)
}

/// A host counter of a run (0 when the scheduler does not report it).
fn counter(r: &SimResult, name: &str) -> f64 {
    r.host.counters.iter().find(|(k, _)| k == name).map_or(0.0, |c| c.1)
}

/// Execution time of job `job` of VM `vm`.
fn exec(r: &SimResult, vm: &str, job: &str) -> Option<f64> {
    r.jobs
        .iter()
        .find(|j| j.vm == vm && j.job == job)
        .map(|j| j.exec_time_s)
}

/// Sum of the VMs' bandwidths, each over its own active period (the bars of Fig. 6b).
fn sum_vm_bandwidth(r: &SimResult) -> f64 {
    r.vms.iter().map(|v| v.mb_per_s).sum()
}

fn pct(x: f64) -> String {
    format!("{:.2}", 100.0 * x)
}

fn secs(x: Option<f64>) -> String {
    x.map_or("—".into(), |v| format!("{v:.2}"))
}
