//! Paper 000 (Pregather, Ling et al., IEEE TPDS 2015): its §5 experiments.
//!
//! - `pregather-fig5`: the zone size B from 10 to 10⁷ sectors, two
//!   sequential readers in one VM (§5.1, Fig. 5);
//! - `pregather-table3`: seven two-application mixes in one VM under
//!   Pregather, CFQ and AS, and Pregather's success ratio of waiting
//!   (§5.1, Table 3);
//! - `pregather-overhead`: Pregather's model memory per VM and CPU time per
//!   scheduling decision against CFQ (§5.3, Fig. 12).
//!
//! `pregather-table4` (the four VMs of Table 1: Fig. 6, Table 4, Fig. 7) is
//! a study, `experiments/pregather-table4.study.toml`, analysed by hvio's
//! Python package (`hvio.analysis.pregather_table4`).
//!
//! Each prints the paper's numbers next to hvio's. A baseline scheduler that
//! is not registered in this build is left out with a note.

mod fig5;
mod overhead;
mod table3;

use super::{ExpOptions, Experiment};
use crate::config::Config;
use crate::error::Result;
use crate::metrics::SimResult;

/// Paper 000 Fig. 5: the zone size `B`, two sequential readers in one VM.
pub const FIG5: Experiment = Experiment {
    name: "pregather-fig5",
    title: "Pregather zone size B: two sequential readers in one VM",
    paper: "paper 000 §5.1, Fig. 5",
    run: fig5::run,
};

/// Paper 000 Table 3: two applications in one VM, Pregather against CFQ and AS.
pub const TABLE3: Experiment = Experiment {
    name: "pregather-table3",
    title: "Two applications in one VM: Pregather vs CFQ vs AS, success ratio of waiting",
    paper: "paper 000 §5.1, Table 3",
    run: table3::run,
};

/// Paper 000 Fig. 12: Pregather's own cost in memory and CPU.
pub const OVERHEAD: Experiment = Experiment {
    name: "pregather-overhead",
    title: "Pregather's memory per VM and CPU time per scheduling decision vs CFQ",
    paper: "paper 000 §5.3, Fig. 12",
    run: overhead::run,
};

/// The disk of every run, as the reports name it.
const DISK: &str = "hvio's HDD model (7200 RPM, 1 TB: seek curve, rotation, zones, read-ahead cache; write cache off unless the guest model says \"write cache on\"; one command at a time unless it says \"NCQ\")";

/// The paper's disk: hvio's 7200 RPM 1 TB HDD model with its defaults.
fn disk() -> Result<Box<dyn hvio_core::Device>> {
    hvio_device::build_device(&hvio_device::DeviceConfig::default(), std::path::Path::new(""))
        .map_err(|e| crate::SimError::Device(e.to_string()))
}

/// Run `cfg` on its `[disk]` (the HDD model's defaults unless the guest
/// model set the write cache).
fn simulate(cfg: &Config) -> Result<SimResult> {
    if cfg.disk.is_empty() {
        crate::run_with_device(cfg, disk()?)
    } else {
        crate::run(cfg)
    }
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
/// - `Direct`: hvio's sysbench presets as they are, O_DIRECT: 16 threads on
///   a shared cursor, every 16 KiB request goes to the disk, so a sequential
///   application keeps about 16 contiguous requests queued at the host.
/// - `PageCache`: sysbench fileio's defaults as the paper ran them (buffered
///   I/O, synchronous mode, 16 KiB blocks, fsync every 100 requests) through
///   hvio's guest page cache (`direct = false`, the `[vm] page_cache`
///   defaults: 1 GiB guests, 128 KiB read-ahead, 44 KiB blkfront requests,
///   2.6.18's dirty ratios, ext3 without barriers). Sequential reads reach
///   the host as read-ahead windows issued ahead of the application, writes
///   as sorted write-back.
/// - `Stream`: an idealised "buffered" guest: every
///   sequential application is one stream of 44 KiB requests with exactly
///   one in flight, moving the same 160 MB; random applications as
///   `Direct`. It isolates the pattern §4.1 is built for — a short gap
///   after each completion of a sequential stream.
/// - `PageCacheWriteCache`: `PageCache` on a drive with its write cache on
///   (the SATA default; hvio's HDD model destages it in the background).
/// - `PageCacheBlktap`: `PageCache` through the paper's host path, Xen
///   4.0.1's blktap2 with tapdisk's AIO driver on a 2.6.18 dom0
///   (`[host.blktap]` with its defaults: tapdisk's `io_merge`, the dom0
///   elevator's back merges, sync reads and async writes at the host).
/// - `PageCacheNcq`: `PageCache` on the same drive with command queueing
///   (`queue_depth = 32`, SPTF; libata's NCQ on an AHCI host takes up to 31
///   tags), write cache still off: queued contiguous writes stream, random
///   ones are reordered by the drive. A probe of the paper's SATA host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Guest {
    Direct,
    PageCache,
    Stream,
    PageCacheWriteCache,
    PageCacheBlktap,
    PageCacheNcq,
}

impl Guest {
    /// The guest models (the write cache matters only where applications write).
    pub(super) const ALL: [Guest; 5] = [
        Guest::Direct,
        Guest::PageCache,
        Guest::Stream,
        Guest::PageCacheBlktap,
        Guest::PageCacheNcq,
    ];
    /// The guest models and page-cache guests on a drive with its write cache on.
    pub(super) const WITH_WRITE_CACHE: [Guest; 6] = [
        Guest::Direct,
        Guest::PageCache,
        Guest::Stream,
        Guest::PageCacheWriteCache,
        Guest::PageCacheBlktap,
        Guest::PageCacheNcq,
    ];

    pub(super) fn label(self) -> &'static str {
        match self {
            Guest::Direct => "direct I/O guests (hvio's sysbench presets: 16 threads, 16 KiB, O_DIRECT)",
            Guest::PageCache => {
                "page-cache guests (sysbench defaults: buffered, fsync every 100 requests; read-ahead and write-back of a 1 GiB guest)"
            }
            Guest::Stream => "one-stream guests (each sequential application one 44 KiB stream, one request in flight)",
            Guest::PageCacheWriteCache => "page-cache guests, drive write cache on",
            Guest::PageCacheBlktap => "page-cache guests through blktap2/tapdisk AIO (io_merge, dom0 elevator merges)",
            Guest::PageCacheNcq => "page-cache guests, drive with NCQ (queue depth 32, SPTF), write cache off",
        }
    }

    pub(super) fn short(self) -> &'static str {
        match self {
            Guest::Direct => "direct",
            Guest::PageCache => "page-cache",
            Guest::Stream => "one-stream",
            Guest::PageCacheWriteCache => "page-cache+wc",
            Guest::PageCacheBlktap => "page-cache+blktap",
            Guest::PageCacheNcq => "page-cache+ncq",
        }
    }

    /// Apply the model to every job of `cfg`: sysbench's 10,000 requests
    /// of 16 KiB (1,000 when quick); for page-cache guests, buffered I/O with
    /// sysbench's `--file-fsync-freq=100`; for one-stream guests, the same
    /// bytes of a sequential application in 44 KiB requests, one in flight.
    pub(super) fn apply(self, cfg: &mut Config, quick: bool) {
        if self == Guest::PageCacheWriteCache {
            cfg.disk.insert("model".into(), "hdd".into());
            cfg.disk.insert("write_cache".into(), true.into());
        }
        if self == Guest::PageCacheNcq {
            cfg.disk.insert("model".into(), "hdd".into());
            cfg.disk.insert("queue_depth".into(), 32.into());
        }
        if self == Guest::PageCacheBlktap {
            cfg.host.blktap = Some(crate::config::BlktapConfig::default());
        }
        let n: u64 = if quick { 1000 } else { 10_000 };
        let page_cache = matches!(
            self,
            Guest::PageCache | Guest::PageCacheWriteCache | Guest::PageCacheBlktap | Guest::PageCacheNcq
        );
        for vm in &mut cfg.vms {
            // CentOS 5's ext3 mounts with barrier=0: fsync sends no flush.
            // Direct guests keep the simulator's default (ext4: barrier on).
            vm.barrier = !page_cache;
            for job in &mut vm.jobs {
                job.requests = Some(n);
                // Set both ways: the default scenario's jobs are buffered.
                job.direct = Some(!page_cache);
                job.fsync = None;
                let sequential = matches!(job.preset.as_deref(), Some("SR-M" | "SR-S" | "SW-M" | "SW-S"));
                match self {
                    Guest::Direct => {}
                    Guest::PageCache | Guest::PageCacheWriteCache | Guest::PageCacheBlktap | Guest::PageCacheNcq => {
                        job.direct = Some(false);
                        job.fsync = Some(100);
                    }
                    Guest::Stream if sequential => {
                        job.requests = Some((n * 16).div_ceil(44));
                        job.numjobs = Some(1);
                        job.iodepth = Some(1);
                        job.bs = Some(crate::size::Size(44 << 10));
                    }
                    Guest::Stream => {}
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

fn pct(x: f64) -> String {
    format!("{:.2}", 100.0 * x)
}

fn secs(x: Option<f64>) -> String {
    x.map_or("—".into(), |v| format!("{v:.2}"))
}
