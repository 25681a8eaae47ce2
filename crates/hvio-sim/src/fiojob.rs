//! fio job files as workloads: `[[vm.job]] fio = "db.fio"` (and
//! `fio_job = "name"` to take one job of the file) becomes one simulator job
//! per fio job, read by `hvio_trace::fio` when the config is loaded.
//!
//! Every option the parser reads is either mapped onto [`JobConfig`] or
//! refused with the reason; options the parser reads but the simulator
//! does not model come back as warnings (see docs/traces.md, "fio job files
//! as workloads"). The mapping follows fio's semantics:
//!
//! - `size` is per clone: without `filename` each of the `numjobs` clones
//!   works on files of its own (`sharing = "per-thread"`, `size` × `numjobs`
//!   and `nrfiles` × `numjobs` in all); with `filename` the clones share the
//!   same file(s) (`sharing = "same-file"`).
//! - `direct` defaults to 0 in fio: buffered I/O through the guest page cache.
//! - `ioengine` defaults to `psync`. The synchronous engines (`sync`,
//!   `psync`, `vsync`, `pvsync`, `pvsync2`) have one I/O in flight per
//!   clone whatever `iodepth` says; `libaio`, `io_uring` and `posixaio` keep
//!   `iodepth` in flight when `direct=1` (Linux AIO on buffered files
//!   completes inside `io_submit`, and the simulator's buffered guests are
//!   synchronous).
//! - `runtime` with `time_based` runs the job for that long; `runtime`
//!   alone stops fio at one pass over `size` or the runtime, whichever comes
//!   first, and the simulator takes the pass (a warning says so).

use crate::config::Config;
use crate::error::{Result, SimError};
use crate::size::Size;
use crate::workload::{JobConfig, Rw, Sharing};
use hvio_trace::fio::{FioJob, FioRw, RandomDistribution, SizeSpec};

/// fio's default `ioengine` on every system but Windows.
pub const FIO_DEFAULT_ENGINE: &str = "psync";
/// Engines whose clones wait for each I/O: `iodepth` has no effect.
const SYNC_ENGINES: &[&str] = &["sync", "psync", "vsync", "pvsync", "pvsync2"];
/// Engines that keep `iodepth` I/Os in flight (with `direct=1`).
const ASYNC_ENGINES: &[&str] = &["libaio", "io_uring", "posixaio"];

/// One fio job as a simulator job, with what the mapping had to say.
#[derive(Debug)]
pub struct Mapped {
    /// The job in the simulator's terms.
    pub job: JobConfig,
    /// Options kept but changed, each with its reason.
    pub warnings: Vec<String>,
}

/// Map one parsed fio job; an `Err` names the option and why the simulator
/// cannot run it.
pub fn map_job(j: &FioJob) -> std::result::Result<Mapped, String> {
    let mut warnings = Vec::new();
    let rw = match j.rw {
        FioRw::Read => Rw::Read,
        FioRw::Write => Rw::Write,
        FioRw::RandRead => Rw::RandRead,
        FioRw::RandWrite => Rw::RandWrite,
        FioRw::ReadWrite => Rw::Rw,
        FioRw::RandRw => Rw::RandRw,
        t => {
            return Err(format!(
                "rw={}: trims are not modelled (the simulator's guests read and write)",
                t.name()
            ))
        }
    };
    let read_pct = rw.read_pct(j.rwmixread);
    let blocks = |d: usize| -> Vec<(u64, u32)> {
        if j.bssplit[d].is_empty() {
            vec![(j.bs[d], 100)]
        } else {
            j.bssplit[d].clone()
        }
    };
    let dirs: Vec<usize> = [(0, read_pct > 0), (1, read_pct < 100)]
        .into_iter()
        .filter(|d| d.1)
        .map(|d| d.0)
        .collect();
    let split = blocks(dirs[0]);
    if dirs.len() == 2 && blocks(1) != split {
        return Err(format!(
            "bs/bssplit: reads ({}) and writes ({}) differ; the simulator draws one block size for both directions",
            show_split(&split),
            show_split(&blocks(1))
        ));
    }
    let total: u32 = split.iter().map(|b| b.1).sum();
    if total != 100 {
        return Err(format!(
            "bssplit={}: the percentages add up to {total}, not 100",
            show_split(&split)
        ));
    }
    let bssplit = show_split(&split);
    let per_clone =
        match j.size {
            Some(SizeSpec::Bytes(b)) => b,
            Some(SizeSpec::Percent(p)) => {
                return Err(format!(
                    "size={p}%: a share of an existing file or device, which the simulator does not have; give bytes"
                ))
            }
            None => return Err(
                "size is not set: fio would take the size of an existing file or device; the simulator needs the bytes"
                    .into(),
            ),
        };
    if j.offset != SizeSpec::Bytes(0) {
        return Err(format!(
            "offset={}: a start offset into the files is not modelled (each job's files start at its data set's start)",
            j.offset
        ));
    }
    if let Some(d) = j.rate_iops.iter().flatten().next() {
        return Err(format!(
            "rate_iops={d}: rate limits are not modelled; slow the job with thinktime instead"
        ));
    }
    if j.random_distribution != RandomDistribution::Random {
        return Err(format!(
            "random_distribution={}: the simulator draws uniform random offsets",
            j.random_distribution
        ));
    }
    let (sharing, size, nrfiles) = match &j.filename {
        Some(_) => (Sharing::SameFile, per_clone, j.nrfiles),
        None => (
            Sharing::PerThread,
            per_clone
                .checked_mul(j.numjobs as u64)
                .ok_or_else(|| format!("size={per_clone} × numjobs={} is too large", j.numjobs))?,
            j.nrfiles
                .checked_mul(j.numjobs)
                .ok_or_else(|| format!("nrfiles={} × numjobs={} is too large", j.nrfiles, j.numjobs))?,
        ),
    };
    let engine = j.ioengine.as_deref().unwrap_or(FIO_DEFAULT_ENGINE);
    let iodepth = if SYNC_ENGINES.contains(&engine) {
        if j.iodepth > 1 {
            warnings.push(format!(
                "iodepth={}: ioengine={engine} is synchronous, so each clone has one I/O in flight (as in fio); iodepth 1",
                j.iodepth
            ));
        }
        1
    } else if ASYNC_ENGINES.contains(&engine) {
        if !j.direct && j.iodepth > 1 {
            warnings.push(format!(
                "iodepth={}: buffered I/O (direct=0) is synchronous in the simulator's page cache, as Linux AIO on buffered files is; iodepth 1",
                j.iodepth
            ));
            1
        } else {
            j.iodepth
        }
    } else {
        return Err(format!(
            "ioengine={engine}: not modelled (the simulator's guests do block I/O as {} or {})",
            SYNC_ENGINES.join(", "),
            ASYNC_ENGINES.join(", ")
        ));
    };
    if !j.direct && j.fsync > 0 {
        warnings.push(format!(
            "fsync={}: buffered jobs fsync every {} requests of the job (reads too, sysbench's rule), fio every {} writes of a clone",
            j.fsync, j.fsync, j.fsync
        ));
    }
    let runtime_s = match (j.time_based, j.runtime_us) {
        (true, Some(us)) => Some(us as f64 / 1e6),
        (true, None) => return Err("time_based without runtime: fio would run until stopped".into()),
        (false, Some(us)) => {
            warnings.push(format!(
                "runtime={} s without time_based: fio stops after one pass over size or the runtime, whichever comes first; the simulator runs the one pass (add time_based to run for the runtime)",
                us as f64 / 1e6
            ));
            None
        }
        (false, None) => None,
    };
    Ok(Mapped {
        job: JobConfig {
            name: Some(j.name.clone()),
            rw: Some(rw),
            bssplit: Some(bssplit),
            size: Some(Size(size)),
            nrfiles: Some(nrfiles),
            numjobs: Some(j.numjobs),
            iodepth: Some(iodepth),
            thinktime_us: Some(j.thinktime_us),
            fsync: Some(j.fsync),
            direct: Some(j.direct),
            rwmixread: Some(j.rwmixread),
            runtime_s,
            start_s: Some(j.startdelay_us as f64 / 1e6),
            sharing: Some(sharing),
            ..Default::default()
        },
        warnings,
    })
}

/// Replace every `[[vm.job]]` with a `fio` key by the jobs of its file
/// (relative to the config's directory), collecting the warnings in
/// `cfg.warnings` and the files in `cfg.fio_files`. Errors name the VM, the
/// job, the file and its line.
pub fn expand(cfg: &mut Config) -> Result<()> {
    for vi in 0..cfg.vms.len() {
        if cfg.vms[vi].jobs.iter().all(|j| j.fio.is_none() && j.fio_job.is_none()) {
            continue;
        }
        let jobs = std::mem::take(&mut cfg.vms[vi].jobs);
        let mut out = Vec::with_capacity(jobs.len());
        for (j, jc) in jobs.iter().enumerate() {
            let Some(file) = &jc.fio else {
                if jc.fio_job.is_some() {
                    cfg.vms[vi].jobs = jobs.clone();
                    let ctx = format!("vm \"{}\" job {j}", cfg.vms[vi].name);
                    return Err(cfg.locate(SimError::invalid(
                        &ctx,
                        "fio_job",
                        format!("{:?}", jc.fio_job.as_deref().unwrap_or_default()),
                        "names a job of the `fio` file; set `fio` too",
                    )));
                }
                out.push(jc.clone());
                continue;
            };
            let fail = |cfg: &mut Config, reason: String| {
                cfg.vms[vi].jobs = jobs.clone();
                let ctx = format!("vm \"{}\" job {j}", cfg.vms[vi].name);
                cfg.locate(SimError::invalid(
                    &ctx,
                    "fio",
                    format!("{:?}", file.display().to_string()),
                    reason,
                ))
            };
            let others = jc.keys_besides_fio();
            if !others.is_empty() {
                let reason = format!(
                    "the job file gives the whole job; {} would be ignored: set it in the job file",
                    others.join(", ")
                );
                return Err(fail(cfg, reason));
            }
            let path = cfg.base_dir.join(file);
            let parsed = match hvio_trace::fio::parse_job_file(&path) {
                Ok(p) => p,
                Err(e) => return Err(fail(cfg, e.to_string())),
            };
            let chosen: Vec<&FioJob> = match &jc.fio_job {
                None => parsed.jobs.iter().collect(),
                Some(name) => parsed.jobs.iter().filter(|f| &f.name == name).collect(),
            };
            if chosen.is_empty() {
                let names: Vec<&str> = parsed.jobs.iter().map(|f| f.name.as_str()).collect();
                let reason = match &jc.fio_job {
                    Some(n) => format!("{} has no job {n:?} (its jobs: {})", path.display(), names.join(", ")),
                    None => format!("{} has no job (only [global] sections)", path.display()),
                };
                return Err(fail(cfg, reason));
            }
            for w in &parsed.warnings {
                cfg.warnings.push(w.to_string());
            }
            for f in chosen {
                match map_job(f) {
                    Ok(m) => {
                        for w in m.warnings {
                            cfg.warnings.push(format!("{}: [{}] {w}", path.display(), f.name));
                        }
                        out.push(JobConfig {
                            phase: jc.phase.clone(),
                            ..m.job
                        });
                    }
                    Err(e) => return Err(fail(cfg, format!("{}: [{}] {e}", path.display(), f.name))),
                }
            }
            cfg.fio_files.push(path);
        }
        cfg.vms[vi].jobs = out;
    }
    Ok(())
}

fn show_split(s: &[(u64, u32)]) -> String {
    s.iter().map(|(b, p)| format!("{b}/{p}")).collect::<Vec<_>>().join(":")
}

#[cfg(test)]
mod tests {
    use super::*;
    use hvio_trace::fio::parse_job_str;

    fn one(text: &str) -> Result<Mapped, String> {
        let f = parse_job_str(text, "t.fio").map_err(|e| e.to_string())?;
        map_job(&f.jobs[0])
    }

    #[test]
    fn size_is_per_clone_and_filename_shares_it() {
        let m = one("[r]\nrw=read\nbs=128k\nnumjobs=2\nsize=1g\ndirect=1\n").unwrap();
        let j = m.job.resolve("r").unwrap();
        assert_eq!((j.size, j.nrfiles, j.numjobs), (2 << 30, 2, 2));
        assert_eq!(j.sharing, Sharing::PerThread);
        assert_eq!(j.bssplit, [(128 << 10, 100)]);
        assert!(j.direct);
        let m = one("[r]\nrw=read\nnumjobs=4\nsize=1g\nfilename=/data/f\n").unwrap();
        let j = m.job.resolve("r").unwrap();
        assert_eq!((j.size, j.nrfiles, j.sharing), (1 << 30, 1, Sharing::SameFile));
        assert!(!j.direct, "fio's default is buffered");
    }

    #[test]
    fn iodepth_follows_the_engine() {
        let j = |t: &str| one(t).unwrap();
        let m = j("[d]\nrw=randrw\nrwmixread=70\nbs=8k\niodepth=8\nsize=1g\nioengine=libaio\ndirect=1\n");
        let r = m.job.resolve("d").unwrap();
        assert_eq!((r.iodepth, r.read_pct), (8, 70));
        assert!(m.warnings.is_empty(), "{:?}", m.warnings);
        // psync (fio's default) is synchronous.
        let m = j("[d]\nrw=randread\niodepth=8\nsize=1g\ndirect=1\n");
        assert_eq!(m.job.iodepth, Some(1));
        assert!(m.warnings[0].contains("psync is synchronous"), "{:?}", m.warnings);
        // libaio on buffered files completes in io_submit.
        let m = j("[d]\nrw=randread\niodepth=8\nsize=1g\nioengine=libaio\n");
        assert_eq!(m.job.iodepth, Some(1));
        assert!(m.warnings[0].contains("buffered"), "{:?}", m.warnings);
    }

    #[test]
    fn runtime_and_time_based() {
        let m = one("[b]\nrw=write\nbs=1m\nsize=4g\ntime_based\nruntime=20\ndirect=1\n").unwrap();
        assert_eq!(m.job.runtime_s, Some(20.0));
        let m = one("[b]\nrw=write\nsize=4g\nruntime=20\ndirect=1\n").unwrap();
        assert_eq!(m.job.runtime_s, None);
        assert!(m.warnings[0].contains("without time_based"));
        assert!(one("[b]\nrw=write\nsize=4g\ntime_based\n")
            .unwrap_err()
            .contains("until stopped"));
    }

    #[test]
    fn what_cannot_be_run_is_refused_with_the_reason() {
        for (text, why) in [
            ("[t]\nrw=trim\nsize=1g\n", "trims"),
            ("[t]\nrw=read\n", "size is not set"),
            ("[t]\nrw=read\nsize=50%\n", "size=50%"),
            ("[t]\nrw=read\nsize=1g\noffset=4k\n", "offset=4096"),
            ("[t]\nrw=read\nsize=1g\nrate_iops=100\n", "rate_iops=100"),
            ("[t]\nrw=randread\nsize=1g\nrandom_distribution=zipf:1.2\n", "zipf:1.2"),
            ("[t]\nrw=read\nsize=1g\nioengine=null\n", "ioengine=null"),
            ("[t]\nrw=randrw\nbs=4k,64k\nsize=1g\n", "differ"),
        ] {
            let e = one(text).unwrap_err();
            assert!(e.contains(why), "{text:?}: {e}");
        }
        // One direction only: the other direction's block size is unused.
        let m = one("[t]\nrw=read\nbs=4k,64k\nsize=1g\n").unwrap();
        assert_eq!(m.job.bssplit.as_deref(), Some("4096/100"));
    }
}
