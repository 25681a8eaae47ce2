//! Workloads: an fio-like job description and the named presets of the papers.
//!
//! A job is a group of `numjobs` threads working on `nrfiles` files of total
//! `size`, laid out contiguously by the guest file system. Three ways to
//! share the files, after the two benchmarks the papers used:
//! - `shared` (sysbench `fileio`, paper 000): one cursor per job; every
//!   thread takes the next block of the next file, so a sequential job is one
//!   sequential stream served by many threads;
//! - `per-thread` (fio's default, no `filename`: each clone of a `numjobs`
//!   job gets files of its own): each thread owns a slice of the files (a
//!   file each when there are enough, else an equal range of the data set);
//! - `same-file` (fio with `filename` set: every clone opens the same
//!   file(s)): each thread has a cursor of its own over all of the job's
//!   files, starting at `offset_increment` × its thread number (fio's
//!   `offset + offset_increment * thread_number`, `offset` being 0 here), so
//!   with the default 0 the sequential threads of a job all sweep the same
//!   blocks from the start, and random threads draw from the whole data set
//!   (from their start to its end, as fio's region for that clone).
//!
//! In the two fio modes a sequential mixed job (`rw = "rw"`) keeps two
//! positions per thread, one for its reads and one for its writes, as fio
//! does (see [`Job::cursor_per_direction`]); a `shared` job has one cursor.
//!
//! A job stops after `requests` requests (sysbench `--max-requests`), after
//! `io_size` bytes, after `runtime_s`, or after one pass over `size` — the
//! first that is set, in that order.

use crate::error::{Result, SimError};
use crate::size::{parse_size, Size};
use hvio_core::SECTOR_BYTES;
use serde::{Deserialize, Serialize};

/// The access pattern (fio's `rw`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Rw {
    /// Sequential reads.
    Read,
    /// Sequential writes.
    Write,
    /// Random reads.
    #[serde(rename = "randread")]
    RandRead,
    /// Random writes.
    #[serde(rename = "randwrite")]
    RandWrite,
    /// Mixed sequential reads and writes (fio `rw`/`readwrite`).
    #[serde(alias = "readwrite")]
    Rw,
    /// Mixed random reads and writes.
    #[serde(rename = "randrw")]
    RandRw,
}

impl Rw {
    /// Whether offsets are random.
    pub fn random(self) -> bool {
        matches!(self, Rw::RandRead | Rw::RandWrite | Rw::RandRw)
    }
    /// Percentage of reads implied by the pattern (mixes use `rwmixread`).
    pub fn read_pct(self, rwmixread: u32) -> u32 {
        match self {
            Rw::Read | Rw::RandRead => 100,
            Rw::Write | Rw::RandWrite => 0,
            Rw::Rw | Rw::RandRw => rwmixread,
        }
    }
}

/// How a job's threads share its files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Sharing {
    /// One cursor over the job's files for all its threads (sysbench).
    Shared,
    /// A file per thread (fio's clones).
    PerThread,
    /// One file for all threads, each from `offset_increment` × its number (fio's `filename`).
    SameFile,
}

/// A job as written in a config: every field optional so a preset can fill it.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobConfig {
    /// An fio job file (relative to the config) giving the whole job: each
    /// of its jobs becomes one job of the VM (see `crate::fiojob`).
    pub fio: Option<std::path::PathBuf>,
    /// Take only this job (its `name`, or its section) of the `fio` file.
    pub fio_job: Option<String>,
    /// The job's name.
    pub name: Option<String>,
    /// A named preset filling the keys not given.
    pub preset: Option<String>,
    /// The access pattern.
    pub rw: Option<Rw>,
    /// Block size.
    pub bs: Option<Size>,
    /// `4k/30:8k/40:16k/30` — block sizes with percentages (fio `bssplit`).
    pub bssplit: Option<String>,
    /// Bytes each file (or the job's region) spans.
    pub size: Option<Size>,
    /// Files per job.
    pub nrfiles: Option<u32>,
    /// Threads.
    pub numjobs: Option<u32>,
    /// Requests in flight per thread (direct I/O).
    pub iodepth: Option<u32>,
    /// Pause after each request, µs.
    pub thinktime_us: Option<u64>,
    /// Issue an fsync after every N writes of a thread (0 = never). With
    /// `direct = false`, sysbench's `--file-fsync-freq`: after every N
    /// requests of the job (reads too), if it wrote since the last cycle,
    /// fsync each of its files in turn (a file not written since its last
    /// fsync costs nothing); the job's last thread fsyncs what is left.
    pub fsync: Option<u32>,
    /// `false`: buffered I/O through the guest page cache (read-ahead,
    /// write-back; `[vm] page_cache`), synchronous, one request per thread
    /// at a time. Default `true`: O_DIRECT, every request goes to the disk.
    pub direct: Option<bool>,
    /// Percentage of reads in a mixed job.
    pub rwmixread: Option<u32>,
    /// Requests per thread, then stop.
    pub requests: Option<u64>,
    /// Bytes per thread, then stop.
    pub io_size: Option<Size>,
    /// Seconds to run, then stop.
    pub runtime_s: Option<f64>,
    /// When the job starts, s.
    pub start_s: Option<f64>,
    /// How threads share the files.
    pub sharing: Option<Sharing>,
    /// fio's `offset_increment` (`sharing = "same-file"` only): thread `t`
    /// of the job starts at `t` × this many bytes into the job's files.
    pub offset_increment: Option<Size>,
    /// The guest file system holds a file's inode lock across each direct
    /// write to it, as ext4 in Linux 2.6.32 does (`generic_file_aio_write`
    /// takes `i_mutex` around the whole O_DIRECT write): one direct write
    /// per file at a time, reads unaffected; threads that find the lock
    /// held wait in line. Who gets a released lock: see [`InodeLock`].
    /// Default: no lock.
    pub inode_lock: Option<InodeLock>,
    /// The phase of the run the job belongs to (any name). The jobs of
    /// every VM labelled with one phase run together; the next phase's jobs
    /// start when the last of them has finished, so a phase boundary falls
    /// where the workload's progress puts it. Phases run in the order
    /// their names first appear in the config; `start_s` counts from the
    /// phase's start. A job without a phase runs from the start of the
    /// run, outside the phases. A `[[phase]]` switch plan names these.
    pub phase: Option<String>,
}

/// Who takes a released inode lock (`inode_lock`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InodeLock {
    /// The thread that released it, if its next request is a write to the
    /// same file, else the first waiter: Linux's mutexes before 4.10 set
    /// the lock free and wake the first waiter, and the releasing thread,
    /// already running, takes it again before the waiter is scheduled.
    Steal,
    /// The first waiter, always (a FIFO hand-off; Linux 4.10+ hands off
    /// only to a waiter that has starved for a while).
    Fifo,
}

/// A fully resolved job.
#[derive(Clone, Debug, Serialize)]
pub struct Job {
    /// The job's name.
    pub name: String,
    /// The access pattern.
    pub rw: Rw,
    /// (bytes, cumulative weight in percent) for the block-size draw.
    pub bssplit: Vec<(u64, u32)>,
    /// Bytes each file spans.
    pub size: u64,
    /// Files.
    pub nrfiles: u32,
    /// Threads.
    pub numjobs: u32,
    /// Requests in flight per thread.
    pub iodepth: u32,
    /// Pause after each request, ns.
    pub thinktime_ns: u64,
    /// An fsync after this many writes (0: never).
    pub fsync: u32,
    /// Percentage of reads.
    pub read_pct: u32,
    /// Requests per thread, if bounded.
    pub requests: Option<u64>,
    /// Bytes per thread, if bounded.
    pub io_size: Option<u64>,
    /// Run time, ns, if bounded.
    pub runtime_ns: Option<u64>,
    /// Start time, ns.
    pub start_ns: u64,
    /// How threads share the files.
    pub sharing: Sharing,
    /// Bytes between the starting offsets of consecutive threads (`same-file`).
    pub offset_increment: u64,
    /// Direct writes are serialised per file (see [`JobConfig::inode_lock`]).
    pub inode_lock: Option<InodeLock>,
    /// O_DIRECT (else buffered through the guest page cache).
    pub direct: bool,
    /// The phase the job runs in ([`JobConfig::phase`]).
    pub phase: Option<String>,
}

impl Job {
    /// Mean block size in bytes.
    pub fn mean_bs(&self) -> f64 {
        let mut prev = 0;
        let mut sum = 0.0;
        for &(b, cum) in &self.bssplit {
            sum += b as f64 * (cum - prev) as f64 / 100.0;
            prev = cum;
        }
        sum
    }
    /// The smallest block size (random offsets are aligned to it).
    pub fn min_bs(&self) -> u64 {
        self.bssplit.iter().map(|b| b.0).min().unwrap_or(4096)
    }
    /// A sequential mixed job keeps a position per direction, as fio does
    /// (`f->last_pos[ddir]`, `get_next_seq_offset` in fio's `io_u.c`): each
    /// thread is a sequential reader and a sequential writer, both from its
    /// start and each wrapping there on its own. `shared` jobs model
    /// sysbench, whose sequential modes (`seqwr`, `seqrewr`, `seqrd`) are one
    /// direction with one global position; they keep one cursor.
    pub fn cursor_per_direction(&self) -> bool {
        self.rw == Rw::Rw && self.sharing != Sharing::Shared
    }
}

/// Parse fio's `bssplit` syntax: `4k/30:8k/40:16k/30`.
pub fn parse_bssplit(text: &str) -> std::result::Result<Vec<(u64, u32)>, String> {
    let mut out = Vec::new();
    let mut cum = 0u32;
    for part in text.split(':').filter(|p| !p.trim().is_empty()) {
        let (bs, pct) = part
            .split_once('/')
            .ok_or_else(|| format!("`{part}` is not `size/percent`"))?;
        let bs = parse_size(bs)?;
        let pct: u32 = pct
            .trim()
            .parse()
            .ok()
            .filter(|p| *p <= 100)
            .ok_or_else(|| format!("`{pct}` is not a percentage (0 to 100)"))?;
        if bs == 0 || bs % 512 != 0 {
            return Err(format!("block size {bs} is not a positive multiple of 512"));
        }
        cum += pct;
        if cum > 100 {
            return Err(format!("`{text}`: percentages add up to more than 100"));
        }
        out.push((bs, cum));
    }
    if out.is_empty() || cum != 100 {
        return Err(format!("`{text}`: percentages add up to {cum}, not 100"));
    }
    Ok(out)
}

/// Paper 003's request-size mix: 30 % 4 KiB, 40 % 8 KiB, 30 % 16 KiB.
pub const ISHARE_BSSPLIT: &str = "4k/30:8k/40:16k/30";

/// A named preset's fields.
pub fn preset(name: &str) -> Option<JobConfig> {
    let sysbench = |rw: Rw, nrfiles: u32| JobConfig {
        rw: Some(rw),
        bs: Some(Size(16 << 10)),
        size: Some(Size(1 << 30)),
        nrfiles: Some(nrfiles),
        numjobs: Some(16),
        iodepth: Some(1),
        requests: Some(10_000),
        rwmixread: Some(60),
        sharing: Some(Sharing::Shared),
        ..Default::default()
    };
    // Table I gives no think time: the U-* are underloaded by their one file
    // (see the ishare-tables experiment), not by pauses.
    let fio = |rw: Rw, files: u32, size: u64, threads: u32, sharing: Sharing| JobConfig {
        rw: Some(rw),
        bssplit: Some(ISHARE_BSSPLIT.into()),
        size: Some(Size(size)),
        nrfiles: Some(files),
        numjobs: Some(threads),
        iodepth: Some(1),
        rwmixread: Some(50),
        thinktime_us: Some(0),
        runtime_s: Some(60.0),
        sharing: Some(sharing),
        ..Default::default()
    };
    let c = match name {
        // Paper 000, Table 1 (sysbench fileio: 16 KiB blocks, 10,000 requests).
        "SR-M" => sysbench(Rw::Read, 128),
        "SR-S" => sysbench(Rw::Read, 1),
        "SW-M" => sysbench(Rw::Write, 128),
        "SW-S" => sysbench(Rw::Write, 1),
        "RRW" => sysbench(Rw::RandRw, 128),
        "RR" => sysbench(Rw::RandRead, 128),
        "RW" => sysbench(Rw::RandWrite, 128),
        // Paper 003, Table I (fio, synchronous direct I/O, 30/40/30 % 4/8/16 KiB).
        _ => return table1(name).map(|(rw, files, size, threads, sharing)| fio(rw, files, size, threads, sharing)),
    };
    Some(c)
}

/// Paper 003, Table I: `O-*` are 32 threads on 32 files of 4 GiB in all,
/// `U-*` 32 threads on one 2 GiB file; the pattern is SR, SW, RR, RW, RRW
/// or SRW. Returns (rw, files, size, threads, sharing).
///
/// The extracted Table I gives no thread count on the first row of each
/// group: "O-SR … sequential read 32 files" (its "32 threads" is pushed to
/// the end of the line, before O-SW's description) and "U-SR sequential
/// read 1 file". O-SR has 32 threads for certain (32 files, one per
/// thread), so the missing count is the extraction's, not one thread: U-SR
/// is 32 threads like the other eleven rows (see docs/ishare.md).
///
/// In fio, 32 clones (`numjobs = 32`) get a file each unless `filename` is
/// set (O-*: `per-thread`, a 128 MiB file per thread); 32 threads on *one*
/// file means a shared `filename`, and then every clone keeps its own
/// offset from `offset + offset_increment × clone` = 0 (both default 0):
/// U-*'s sequential threads all sweep the file from its start, and its
/// random threads draw from all of it (`same-file`).
fn table1(name: &str) -> Option<(Rw, u32, u64, u32, Sharing)> {
    let (scenario, pattern) = name.split_once('-')?;
    let rw = match pattern {
        "SR" => Rw::Read,
        "SW" => Rw::Write,
        "RR" => Rw::RandRead,
        "RW" => Rw::RandWrite,
        "RRW" => Rw::RandRw,
        "SRW" => Rw::Rw,
        _ => return None,
    };
    match scenario {
        "O" => Some((rw, 32, 4 << 30, 32, Sharing::PerThread)),
        "U" => Some((rw, 1, 2 << 30, 32, Sharing::SameFile)),
        _ => None,
    }
}

/// Names of every preset.
pub const PRESETS: &[&str] = &[
    "SR-M", "SR-S", "SW-M", "SW-S", "RRW", "RR", "RW", "O-SR", "O-SW", "O-RR", "O-RW", "O-RRW", "O-SRW", "U-SR",
    "U-SW", "U-RR", "U-RW", "U-RRW", "U-SRW",
];

impl JobConfig {
    /// The keys set besides `fio`, `fio_job` and `phase` (a job from an fio
    /// file takes nothing else; `phase` places all of its jobs in a phase).
    pub fn keys_besides_fio(&self) -> Vec<&'static str> {
        let JobConfig {
            fio: _,
            fio_job: _,
            name,
            preset,
            rw,
            bs,
            bssplit,
            size,
            nrfiles,
            numjobs,
            iodepth,
            thinktime_us,
            fsync,
            direct,
            rwmixread,
            requests,
            io_size,
            runtime_s,
            start_s,
            sharing,
            offset_increment,
            inode_lock,
            phase: _,
        } = self;
        [
            ("name", name.is_some()),
            ("preset", preset.is_some()),
            ("rw", rw.is_some()),
            ("bs", bs.is_some()),
            ("bssplit", bssplit.is_some()),
            ("size", size.is_some()),
            ("nrfiles", nrfiles.is_some()),
            ("numjobs", numjobs.is_some()),
            ("iodepth", iodepth.is_some()),
            ("thinktime_us", thinktime_us.is_some()),
            ("fsync", fsync.is_some()),
            ("direct", direct.is_some()),
            ("rwmixread", rwmixread.is_some()),
            ("requests", requests.is_some()),
            ("io_size", io_size.is_some()),
            ("runtime_s", runtime_s.is_some()),
            ("start_s", start_s.is_some()),
            ("sharing", sharing.is_some()),
            ("offset_increment", offset_increment.is_some()),
            ("inode_lock", inode_lock.is_some()),
        ]
        .into_iter()
        .filter(|k| k.1)
        .map(|k| k.0)
        .collect()
    }

    /// Fill unset fields from the preset and defaults, and check every value.
    /// `context` names the job for errors (e.g. `vm "vm1" job 0`).
    pub fn resolve(&self, context: &str) -> Result<Job> {
        if let Some(f) = &self.fio {
            return Err(SimError::invalid(
                context,
                "fio",
                f.display(),
                "fio job files are read when the config is loaded (Config::from_toml_str / from_file)",
            ));
        }
        let base = match &self.preset {
            Some(p) => preset(p).ok_or_else(|| {
                SimError::invalid(
                    context,
                    "preset",
                    format!("\"{p}\""),
                    format!(
                        "unknown preset{} (known: {})",
                        hvio_core::message::hint(p, PRESETS.iter().copied()),
                        PRESETS.join(", ")
                    ),
                )
            })?,
            None => JobConfig::default(),
        };
        macro_rules! pick {
            ($f:ident) => {
                self.$f.clone().or(base.$f.clone())
            };
        }
        let name = pick!(name).or(self.preset.clone()).unwrap_or_else(|| "job".into());
        let rw = pick!(rw).ok_or_else(|| SimError::invalid(context, "rw", "(missing)", "set `rw` or a `preset`"))?;
        let bssplit = match (pick!(bssplit), pick!(bs)) {
            (Some(s), _) if self.bs.is_none() || self.bssplit.is_some() => {
                parse_bssplit(&s).map_err(|e| SimError::invalid(context, "bssplit", format!("\"{s}\""), e))?
            }
            (_, Some(bs)) => {
                if bs.0 == 0 || bs.0 % 512 != 0 {
                    return Err(SimError::invalid(
                        context,
                        "bs",
                        bs.0,
                        "must be a positive multiple of 512 bytes",
                    ));
                }
                vec![(bs.0, 100)]
            }
            (_, None) => vec![(4096, 100)],
        };
        let size = pick!(size).map(|s| s.0).unwrap_or(1 << 30);
        if size == 0 {
            return Err(SimError::invalid(context, "size", 0, "must be positive"));
        }
        let nrfiles = pick!(nrfiles).unwrap_or(1);
        let numjobs = pick!(numjobs).unwrap_or(1);
        let iodepth = pick!(iodepth).unwrap_or(1);
        use crate::config::limits::{MAX_IODEPTH, MAX_NRFILES, MAX_SECONDS, MAX_THREADS_PER_VM};
        for (k, v, max) in [
            ("nrfiles", nrfiles, MAX_NRFILES),
            ("numjobs", numjobs, MAX_THREADS_PER_VM as u32),
            ("iodepth", iodepth, MAX_IODEPTH),
        ] {
            if !(1..=max).contains(&v) {
                return Err(SimError::invalid(context, k, v, format!("must be 1..={max}")));
            }
        }
        let max_bs = bssplit.iter().map(|b| b.0).max().unwrap_or(4096);
        if size / (nrfiles as u64) < max_bs {
            return Err(SimError::invalid(
                context,
                "size",
                size,
                format!("{nrfiles} files of this total size are smaller than one block of {max_bs} bytes"),
            ));
        }
        let sharing = pick!(sharing).unwrap_or(Sharing::PerThread);
        // Fewer files than threads: each thread gets an equal slice of the
        // data set, which must hold a block.
        let slice = size / SECTOR_BYTES / numjobs as u64 * SECTOR_BYTES;
        if sharing == Sharing::PerThread && nrfiles < numjobs && slice < max_bs {
            return Err(SimError::invalid(
                context,
                "numjobs",
                numjobs,
                format!(
                    "each of the {numjobs} threads would get {slice} bytes of the {size}-byte data set (sharing = \"per-thread\", {nrfiles} files), less than one block of {max_bs} bytes"
                ),
            ));
        }
        let rwmixread = pick!(rwmixread).unwrap_or(50);
        if rwmixread > 100 {
            return Err(SimError::invalid(context, "rwmixread", rwmixread, "must be 0..=100"));
        }
        let secs = |key: &str, v: Option<f64>| -> Result<Option<u64>> {
            match v {
                Some(x) if !(x.is_finite() && (0.0..=MAX_SECONDS).contains(&x)) => Err(SimError::invalid(
                    context,
                    key,
                    x,
                    format!("must be 0..={MAX_SECONDS} seconds"),
                )),
                Some(x) => Ok(Some((x * 1e9).round() as u64)),
                None => Ok(None),
            }
        };
        let runtime_ns = secs("runtime_s", pick!(runtime_s))?;
        if runtime_ns == Some(0) {
            return Err(SimError::invalid(context, "runtime_s", 0, "must be positive"));
        }
        let start_ns = secs("start_s", pick!(start_s))?.unwrap_or(0);
        let requests = pick!(requests);
        if requests == Some(0) {
            return Err(SimError::invalid(context, "requests", 0, "must be positive"));
        }
        let direct = pick!(direct).unwrap_or(true);
        if !direct {
            if iodepth != 1 {
                return Err(SimError::invalid(
                    context,
                    "iodepth",
                    iodepth,
                    "buffered jobs (direct = false) are synchronous: iodepth must be 1",
                ));
            }
            let page = crate::pagecache::PAGE_BYTES;
            if let Some(b) = bssplit.iter().find(|b| b.0 % page != 0) {
                return Err(SimError::invalid(
                    context,
                    "bs",
                    b.0,
                    "buffered jobs (direct = false) need whole 4 KiB pages",
                ));
            }
            if !(size / nrfiles as u64).is_multiple_of(page) {
                return Err(SimError::invalid(
                    context,
                    "size",
                    size,
                    "buffered jobs (direct = false) need files of whole 4 KiB pages",
                ));
            }
        }
        let io_size = pick!(io_size).map(|s| s.0);
        if io_size == Some(0) {
            return Err(SimError::invalid(context, "io_size", 0, "must be positive"));
        }
        let offset_increment = pick!(offset_increment).map_or(0, |s| s.0);
        if offset_increment > 0 {
            if sharing != Sharing::SameFile {
                return Err(SimError::invalid(
                    context,
                    "offset_increment",
                    offset_increment,
                    "needs sharing = \"same-file\" (threads on one file, as fio's `filename`)",
                ));
            }
            if !offset_increment.is_multiple_of(SECTOR_BYTES) {
                return Err(SimError::invalid(
                    context,
                    "offset_increment",
                    offset_increment,
                    "must be a multiple of 512 bytes",
                ));
            }
            let last = offset_increment.saturating_mul(numjobs as u64 - 1);
            if last.saturating_add(max_bs) > size {
                return Err(SimError::invalid(
                    context,
                    "offset_increment",
                    offset_increment,
                    format!(
                        "thread {} would start {last} bytes in, less than one {max_bs}-byte block before the end of the {size}-byte data set",
                        numjobs - 1
                    ),
                ));
            }
        }
        let thinktime_us = pick!(thinktime_us).unwrap_or(0);
        if thinktime_us as f64 > MAX_SECONDS * 1e6 {
            return Err(SimError::invalid(
                context,
                "thinktime_us",
                thinktime_us,
                format!("must be at most {MAX_SECONDS} seconds"),
            ));
        }
        let phase = pick!(phase);
        if phase.as_deref().is_some_and(|p| p.trim().is_empty()) {
            return Err(SimError::invalid(context, "phase", "\"\"", "a phase needs a name"));
        }
        let inode_lock = pick!(inode_lock);
        if inode_lock.is_some() && !direct {
            return Err(SimError::invalid(
                context,
                "inode_lock",
                format!("{inode_lock:?}"),
                "models direct writes only: set direct = true or drop inode_lock",
            ));
        }
        if inode_lock.is_some() && iodepth != 1 {
            return Err(SimError::invalid(
                context,
                "iodepth",
                iodepth,
                "inode_lock models synchronous writes (a thread holds the lock until its write completes): iodepth must be 1",
            ));
        }
        Ok(Job {
            name,
            rw,
            bssplit,
            size,
            nrfiles,
            numjobs,
            iodepth,
            thinktime_ns: thinktime_us * 1000,
            fsync: pick!(fsync).unwrap_or(0),
            read_pct: rw.read_pct(rwmixread),
            requests,
            io_size,
            runtime_ns,
            start_ns,
            sharing,
            offset_increment,
            inode_lock,
            direct,
            phase,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bssplit_parses_and_checks() {
        assert_eq!(
            parse_bssplit(ISHARE_BSSPLIT).unwrap(),
            vec![(4096, 30), (8192, 70), (16384, 100)]
        );
        assert!(parse_bssplit("4k/30:8k/40").is_err());
        assert!(parse_bssplit("4k:8k").is_err());
        assert!(parse_bssplit("1000/100").is_err());
    }

    #[test]
    fn every_preset_resolves() {
        for p in PRESETS {
            let j = JobConfig {
                preset: Some(p.to_string()),
                ..Default::default()
            }
            .resolve(p)
            .unwrap();
            assert_eq!(j.name, *p);
        }
        let j = JobConfig {
            preset: Some("O-RR".into()),
            ..Default::default()
        }
        .resolve("x")
        .unwrap();
        assert!((j.mean_bs() - 0.3 * 4096.0 - 0.4 * 8192.0 - 0.3 * 16384.0).abs() < 1e-6);
    }

    #[test]
    fn explicit_fields_override_the_preset() {
        let j = JobConfig {
            preset: Some("SR-M".into()),
            numjobs: Some(4),
            bs: Some(Size(4096)),
            ..Default::default()
        }
        .resolve("x")
        .unwrap();
        assert_eq!(j.numjobs, 4);
        assert_eq!(j.bssplit, vec![(4096, 100)]);
        assert_eq!(j.nrfiles, 128);
    }

    #[test]
    fn bad_values_name_the_key() {
        let e = JobConfig {
            preset: Some("nope".into()),
            ..Default::default()
        }
        .resolve("vm \"a\" job 0")
        .unwrap_err();
        assert!(e.to_string().contains("preset") && e.to_string().contains("nope"));
        let e = JobConfig {
            rw: Some(Rw::Read),
            size: Some(Size(0)),
            ..Default::default()
        }
        .resolve("j")
        .unwrap_err();
        assert!(e.to_string().contains("size"));
        let e = JobConfig {
            rw: Some(Rw::Read),
            numjobs: Some(0),
            ..Default::default()
        }
        .resolve("j")
        .unwrap_err();
        assert!(e.to_string().contains("numjobs"));
        let e = JobConfig {
            preset: Some("SR-M".into()),
            direct: Some(false),
            bs: Some(Size(6144)),
            ..Default::default()
        }
        .resolve("j")
        .unwrap_err();
        assert!(e.to_string().contains("bs") && e.to_string().contains("4 KiB"), "{e}");
        let e = JobConfig {
            preset: Some("SR-M".into()),
            direct: Some(false),
            iodepth: Some(4),
            ..Default::default()
        }
        .resolve("j")
        .unwrap_err();
        assert!(e.to_string().contains("iodepth"), "{e}");
    }

    #[test]
    fn offset_increment_is_checked() {
        let job = |sharing: Sharing, inc: u64| JobConfig {
            rw: Some(Rw::Read),
            bs: Some(Size(4096)),
            size: Some(Size(1 << 20)),
            numjobs: Some(4),
            sharing: Some(sharing),
            offset_increment: Some(Size(inc)),
            ..Default::default()
        };
        let j = job(Sharing::SameFile, 256 << 10).resolve("j").unwrap();
        assert_eq!(j.offset_increment, 256 << 10);
        for (sharing, inc, why) in [
            (Sharing::PerThread, 4096, "same-file"),
            (Sharing::SameFile, 1000, "512"),
            // Thread 3 would start 3 × 400 KiB in, past the 1 MiB file.
            (Sharing::SameFile, 400 << 10, "thread 3"),
        ] {
            let e = job(sharing, inc).resolve("vm \"a\" job 0").unwrap_err().to_string();
            assert!(
                e.contains("offset_increment") && e.contains(&inc.to_string()) && e.contains(why),
                "{e}"
            );
        }
    }
}
