//! Validation against real disks, DiskSim's way: replay a measured trace
//! closed-loop on a disk model and compare the distributions of per-request
//! service time with the Ruemmler–Wilkes demerit figure (the RMS horizontal
//! distance between the two CDFs, sampled at 10,000 evenly spaced quantiles).

use crate::disksim::{load_disk_with, LoadOptions, Loaded, SpecError};
use crate::hdd::{round, Hdd, HddModel};
use hvio_core::{Device, Nanos, Op, Request};
use std::fmt;
use std::path::{Path, PathBuf};
use thiserror::Error;

mod trace_text;

/// Why a validation could not run.
#[derive(Debug, Error)]
pub enum ValidateError {
    /// The disk description was refused.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// A trace line that does not parse.
    #[error("{file}:{line}: {msg}")]
    Trace {
        /// The trace file.
        file: String,
        /// The line.
        line: usize,
        /// What is wrong.
        msg: String,
    },
    /// A file that cannot be used.
    #[error("{file}: {msg}")]
    File {
        /// The file.
        file: String,
        /// What is wrong.
        msg: String,
    },
    /// An output would overwrite an input.
    #[error(transparent)]
    SameFile(#[from] hvio_core::output::SameFile),
}

/// One measured request of a DiskSim validation trace.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TraceRecord {
    /// A write (else a read).
    pub write: bool,
    /// First logical block.
    pub lbn: u64,
    /// Length in sectors.
    pub sectors: u32,
    /// The real disk's service time, ms.
    pub measured_ms: f64,
    /// Gap from this request's completion to the next request's issue, ms.
    pub gap_ms: f64,
    /// Its line in the trace file (for errors).
    pub line: usize,
}

/// Reads a DiskSim validation trace: `R|W Hit|Miss|Doub|Trip LBN sectors service_us gap_us`.
/// The second column (what the real disk's cache did) is read only to check the format.
pub fn read_trace(path: &Path) -> Result<Vec<TraceRecord>, ValidateError> {
    // Bounded; a byte that is not UTF-8 is an error naming its line.
    let bytes = crate::disksim::parse::read_bytes(path)?;
    trace_text::parse(&bytes, &path.display().to_string())
}

/// [`read_trace`] of a trace already read: `text`, from `file` (named in errors).
pub fn parse_trace(text: &str, file: &str) -> Result<Vec<TraceRecord>, ValidateError> {
    trace_text::parse(text.as_bytes(), file)
}

/// The longest inter-arrival gap of a validation trace, ms (1000 s).
const MAX_GAP_MS: f64 = 1e6;

/// Replays `trace` closed-loop (one request outstanding; the next is issued
/// at completion plus the recorded gap); returns each request's service time in ms.
pub fn replay(model: HddModel, trace: &[TraceRecord]) -> Result<Vec<f64>, ValidateError> {
    let mut out = Vec::with_capacity(trace.len());
    replay_into(model, trace, &mut out)?;
    Ok(out)
}

/// [`replay`] into `out` (emptied first), whose memory a caller replaying
/// trace after trace keeps.
fn replay_into(model: HddModel, trace: &[TraceRecord], out: &mut Vec<f64>) -> Result<(), ValidateError> {
    let cap = model.geom.capacity();
    let mut disk = Hdd::new(model);
    out.clear();
    out.reserve(trace.len());
    let mut done = Vec::with_capacity(4);
    let mut now: Nanos = 0;
    for (i, r) in trace.iter().enumerate() {
        if r.lbn.checked_add(r.sectors as u64).is_none_or(|end| end > cap) {
            return Err(ValidateError::Trace {
                file: "trace".into(),
                line: r.line,
                msg: format!(
                    "request {}+{} past the end of the disk ({cap} blocks)",
                    r.lbn, r.sectors
                ),
            });
        }
        let op = if r.write { Op::Write } else { Op::Read };
        disk.submit(Request::new(i as u64, 0, op, r.lbn, r.sectors, now), now);
        let end = match disk.take_lone_completion() {
            Some(c) => c.done,
            None => {
                // Something else is under way (a destage): the drive's own events lead to the completion.
                done.clear();
                while done.is_empty() {
                    let t = disk.next_event().expect("a submitted request completes");
                    disk.advance(t, &mut done);
                }
                done[0].done
            }
        };
        out.push((end - now) as f64 / 1e6);
        // Records built by a caller (not read_trace) may carry any gap.
        now = Some(round(r.gap_ms * 1e6))
            .filter(|g| *g >= 0.0 && *g < u64::MAX as f64)
            .and_then(|g| end.checked_add(g as Nanos))
            .ok_or_else(|| ValidateError::Trace {
                file: "trace".into(),
                line: r.line,
                msg: format!("gap {} ms: the replay's clock would pass 2^64 ns", r.gap_ms),
            })?;
    }
    Ok(())
}

/// The quantile function of a sample at 10,000 evenly spaced levels
/// (k/10000, k = 1..=10000), linear between order statistics.
pub fn quantiles(sample: &[f64]) -> Vec<f64> {
    let mut s = sample.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    (1..=10_000)
        .map(|k| {
            if n == 1 {
                return s[0];
            }
            let pos = k as f64 / 10_000.0 * (n - 1) as f64;
            let i = (pos as usize).min(n - 2);
            let f = pos - i as f64;
            s[i] + f * (s[i + 1] - s[i])
        })
        .collect()
}

/// RMS of the differences of two quantile functions (ms).
pub fn rms(q1: &[f64], q2: &[f64]) -> f64 {
    let n = q1.len().min(q2.len()).max(1);
    (q1.iter().zip(q2).map(|(a, b)| (a - b) * (a - b)).sum::<f64>() / n as f64).sqrt()
}

/// A cumulative distribution as DiskSim prints it: (value, cumulative fraction) rows.
#[derive(Debug, Clone, PartialEq)]
pub struct Distribution {
    /// Values, ascending.
    pub x: Vec<f64>,
    /// Cumulative fraction at each value.
    pub cum: Vec<f64>,
}

/// Reads the distribution titled `title` from a DiskSim output (`.outv`) file:
/// rows `value count fraction cumulative` up to the first cumulative ≥ 1.
pub fn read_outv_distribution(path: &Path, title: &str) -> Result<Distribution, ValidateError> {
    let file = path.display().to_string();
    // Bounded: a `.outv` beside the trace is read unasked.
    let text = crate::disksim::parse::read_text(path)?;
    let mut lines = text.lines().enumerate().skip_while(|(_, l)| l.trim_end() != title);
    if lines.next().is_none() {
        return Err(ValidateError::File {
            file,
            msg: format!("no distribution `{title}`"),
        });
    }
    let (mut x, mut cum) = (Vec::new(), Vec::new());
    for (i, l) in lines {
        let f: Vec<f64> = l.split_whitespace().filter_map(|v| v.parse().ok()).collect();
        if f.len() != 4 {
            return Err(ValidateError::Trace {
                file,
                line: i + 1,
                msg: format!("expected `value count fraction cumulative`, found `{l}`"),
            });
        }
        x.push(f[0]);
        cum.push(f[3]);
        if f[3] >= 1.0 {
            return Ok(Distribution { x, cum });
        }
    }
    Err(ValidateError::File {
        file,
        msg: format!("distribution `{title}` never reaches 1"),
    })
}

impl Distribution {
    /// The value at cumulative level `p`, linear within the row where the CDF first reaches `p`.
    pub fn at(&self, p: f64) -> f64 {
        let i = self.cum.partition_point(|&c| c < p).min(self.cum.len() - 1);
        if i == 0 {
            return self.x[0];
        }
        let (y0, y1) = (self.cum[i - 1], self.cum[i]);
        let f = if y1 > y0 { (p - y0) / (y1 - y0) } else { 1.0 };
        self.x[i - 1] + f * (self.x[i] - self.x[i - 1])
    }

    /// Its quantile function at the 10,000 levels of [`quantiles`].
    pub fn quantiles(&self) -> Vec<f64> {
        (1..=10_000).map(|k| self.at(k as f64 / 10_000.0)).collect()
    }
}

/// The demerit DiskSim's own run had: its simulated distribution against the measured one, both from its `.outv`.
pub fn disksim_demerit(outv: &Path) -> Result<f64, ValidateError> {
    let measured = read_outv_distribution(outv, "VALIDATE Trace access time distribution")?;
    let simulated = read_outv_distribution(outv, "IOdriver Physical access time distribution")?;
    Ok(rms(&measured.quantiles(), &simulated.quantiles()))
}

/// Where DiskSim's own run of a validation disk is read from: `NAME.outv`
/// beside its trace, or in the folder `--disksim-out` names (DiskSim's runs
/// kept by `bench/disksim-runs.sh`).
#[derive(Clone, Copy, Debug, Default)]
pub enum DisksimRuns<'a> {
    /// `NAME.outv` beside `NAME.trace`, when it is there. It is read unasked,
    /// so one that is not a DiskSim output leaves DiskSim's figure out.
    #[default]
    BesideTrace,
    /// `DIR/NAME.outv`: asked for, so one that cannot be read is an error
    /// naming it. A disk without one there has no DiskSim figure.
    In(&'a Path),
}

impl DisksimRuns<'_> {
    /// An `In` folder that is not there is an error naming it.
    fn check(&self) -> Result<(), ValidateError> {
        match self {
            DisksimRuns::In(dir) if !dir.is_dir() => Err(ValidateError::File {
                file: dir.display().to_string(),
                msg: "--disksim-out: no such folder (bench/disksim-runs.sh --out DIR writes DiskSim's runs there)"
                    .into(),
            }),
            _ => Ok(()),
        }
    }

    /// DiskSim's demerit on `trace` and the file it came from, if there is one.
    fn demerit(&self, trace: &Path) -> Result<Option<(f64, PathBuf)>, ValidateError> {
        match self {
            DisksimRuns::BesideTrace => {
                let outv = trace.with_extension("outv");
                Ok(if outv.is_file() {
                    disksim_demerit(&outv).ok().map(|d| (d, outv))
                } else {
                    None
                })
            }
            DisksimRuns::In(dir) => {
                let mut name = trace.file_stem().unwrap_or_default().to_os_string();
                name.push(".outv");
                let outv = dir.join(name);
                if outv.is_file() {
                    Ok(Some((disksim_demerit(&outv)?, outv)))
                } else {
                    Ok(None)
                }
            }
        }
    }
}

/// The outcome of one validation replay.
#[derive(Debug, Clone)]
pub struct Validation {
    /// The disk's name.
    pub disk: String,
    /// Requests replayed.
    pub requests: usize,
    /// The real disk's mean service time, ms.
    pub measured_mean_ms: f64,
    /// hvio's mean service time, ms.
    pub simulated_mean_ms: f64,
    /// The RMS demerit, ms.
    pub demerit_ms: f64,
    /// Demerit as a percentage of the measured mean.
    pub demerit_pct: f64,
    /// The real disk's quantile function at the 10,000 levels of [`quantiles`].
    pub measured_q: Vec<f64>,
    /// hvio's, likewise.
    pub simulated_q: Vec<f64>,
    /// Replay speed: simulated requests per second of wall time (not in
    /// the `Display` report, which is the same on every run).
    pub requests_per_s: f64,
    /// Keys read but not modelled.
    pub warnings: Vec<String>,
    /// Moved from every seek into the miss overheads, ms (the DIXtrac
    /// seek-overhead correction; 0 when not applied).
    pub seek_overhead_moved_ms: f64,
}

/// Loads `spec` (a DiskSim `.parv`/`.diskspecs`) as `opts` say, replays `trace` and compares.
pub fn validate(
    spec: &Path,
    disk: Option<&str>,
    trace: &Path,
    opts: &LoadOptions,
) -> Result<Validation, ValidateError> {
    let loaded = load_disk_with(spec, disk, opts)?;
    let records = read_trace(trace)?;
    validate_loaded(loaded, &records, trace)
}

/// [`validate`] of a loaded disk on the records read from `trace`.
fn validate_loaded(loaded: Loaded, records: &[TraceRecord], trace: &Path) -> Result<Validation, ValidateError> {
    let name = loaded.model.name.clone();
    let t0 = std::time::Instant::now();
    let sim = replay(loaded.model, records).map_err(|e| match e {
        ValidateError::Trace { line, msg, .. } => ValidateError::Trace {
            file: trace.display().to_string(),
            line,
            msg,
        },
        other => other,
    })?;
    let secs = t0.elapsed().as_secs_f64();
    let measured: Vec<f64> = records.iter().map(|r| r.measured_ms).collect();
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let (mq, sq) = (quantiles(&measured), quantiles(&sim));
    let d = rms(&mq, &sq);
    Ok(Validation {
        disk: name,
        requests: records.len(),
        measured_mean_ms: mean(&measured),
        simulated_mean_ms: mean(&sim),
        demerit_ms: d,
        demerit_pct: 100.0 * d / mean(&measured),
        measured_q: mq,
        simulated_q: sq,
        requests_per_s: records.len() as f64 / secs.max(1e-9),
        warnings: loaded.warnings,
        seek_overhead_moved_ms: loaded.seek_overhead_moved_ms,
    })
}

impl Validation {
    /// Writes `cdf.csv`: level, measured ms, simulated ms, whole or not at
    /// all (`hvio_core::output::write_whole`).
    pub fn write_cdfs(&self, path: &Path) -> std::io::Result<()> {
        let mut s = String::from("quantile,measured_ms,simulated_ms\n");
        for (k, (m, x)) in self.measured_q.iter().zip(&self.simulated_q).enumerate() {
            s.push_str(&format!("{:.4},{m:.6},{x:.6}\n", (k + 1) as f64 / 10_000.0));
        }
        hvio_core::output::write_whole(path, s.as_bytes())
    }
}

impl fmt::Display for Validation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "disk {}: {} requests replayed closed-loop", self.disk, self.requests)?;
        writeln!(f, "  measured mean service time  {:8.3} ms", self.measured_mean_ms)?;
        writeln!(f, "  simulated mean service time {:8.3} ms", self.simulated_mean_ms)?;
        writeln!(
            f,
            "  RMS demerit                 {:8.3} ms ({:.2}% of the measured mean)",
            self.demerit_ms, self.demerit_pct
        )?;
        if self.seek_overhead_moved_ms > 0.0 {
            writeln!(
                f,
                "  DIXtrac seek overhead       {:8.3} ms moved from every seek into the miss overheads (--as-described: none)",
                self.seek_overhead_moved_ms
            )?;
        }
        if !self.warnings.is_empty() {
            writeln!(f, "  {} parameter(s) not modelled:", self.warnings.len())?;
            for w in &self.warnings {
                writeln!(f, "    {w}")?;
            }
        }
        Ok(())
    }
}

/// Replay speed: the best of `repeats` closed-loop replays of the trace in
/// `path` (fresh disk each time), in simulated requests per second of wall
/// time. Each replay reads and parses the trace again, as a DiskSim run
/// does (`bench/disksim-speed.sh` compares the two): the time is of the
/// whole replay from the trace file to every request's service time. The
/// file's bytes, its records and the service times go into buffers that
/// the replays share, allocated by the first: a replay's own work is
/// reading, parsing and replaying, not the allocator's handing back and
/// taking again a megabyte of pages (which, on huge pages, the kernel
/// zeroes anew each time).
pub fn replay_speed(model: &HddModel, path: &Path, repeats: u32) -> Result<f64, ValidateError> {
    let mut best = 0.0f64;
    let file = path.display().to_string();
    let (mut bytes, mut trace, mut out) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..repeats.max(1) {
        let t0 = std::time::Instant::now();
        crate::disksim::parse::read_bytes_into(path, &mut bytes)?;
        trace_text::parse_into(&bytes, &file, &mut trace)?;
        replay_into(model.clone(), &trace, &mut out)?;
        let secs = t0.elapsed().as_secs_f64();
        std::hint::black_box(&out);
        best = best.max(trace.len() as f64 / secs.max(1e-9));
    }
    Ok(best)
}

/// `hvio validate-disk SPEC TRACE [--out DIR] [--disk NAME] [--bench N]`
/// (`opts`: `--as-described`, `--seek-overhead MS`): the
/// printable report, with DiskSim's own demerit where `disksim` has its
/// run; with `out`, also `DIR/cdf.csv`; with `bench_repeats`, the best
/// replay speed of that many more replays.
pub fn run_cli(
    spec: &Path,
    trace: &Path,
    out: Option<&Path>,
    disk: Option<&str>,
    bench_repeats: u32,
    opts: &LoadOptions,
    disksim: DisksimRuns,
) -> Result<String, ValidateError> {
    disksim.check()?;
    let cdf = out.map(|dir| dir.join("cdf.csv"));
    if let Some(p) = &cdf {
        // The spec's `source`d files are inputs too (a spec that cannot be
        // read fails below, before anything is written).
        let sourced = crate::disksim::parse::read_spec(spec)
            .map(|s| s.files())
            .unwrap_or_default();
        let mut inputs = vec![("disk spec", spec), ("trace", trace)];
        inputs.extend(sourced.iter().map(|f| ("disk spec file", f.as_path())));
        hvio_core::output::check_outputs(&[("--out", p)], &inputs)?;
    }
    let loaded = load_disk_with(spec, disk, opts)?;
    let records = read_trace(trace)?;
    let model = (bench_repeats > 0).then(|| loaded.model.clone());
    let mut v = validate_loaded(loaded, &records, trace)?;
    if let Some(model) = model {
        v.requests_per_s = replay_speed(&model, trace, bench_repeats)?;
    }
    let mut report = v.to_string();
    // Wall-clock speed varies from run to run: only on request, so that the
    // report is otherwise byte-identical for the same disk and trace.
    if bench_repeats > 0 {
        report.push_str(&format!(
            "  replay speed                {:8.0} requests/s (best of {bench_repeats})\n",
            v.requests_per_s
        ));
    }
    if let Some((d, outv)) = disksim.demerit(trace)? {
        report.push_str(&format!(
            "  DiskSim's own demerit       {d:8.3} ms ({:.2}%) from {}\n",
            100.0 * d / v.measured_mean_ms,
            outv.display()
        ));
    }
    if let Some(p) = cdf {
        // The directory is made with the file (and removed if it fails).
        v.write_cdfs(&p).map_err(|e| ValidateError::File {
            file: p.display().to_string(),
            msg: e.to_string(),
        })?;
        report.push_str(&format!("  CDFs written to {}\n", p.display()));
    }
    Ok(report)
}

/// `hvio validate-disk --all DIR`: every DiskSim validation trace in `dir`
/// (`NAME.trace`) replayed on its description (`NAME.parv`, else
/// `NAME.diskspecs`), one table row each: requests, the measured mean
/// service time, hvio's demerit (ms and % of that mean), DiskSim's own
/// (from its run's `NAME.outv` where `disksim` has one, else `—`) and the
/// ratio of the two. With `out`, also `OUT/NAME/cdf.csv` for each disk.
/// Every disk is read as `opts` say.
pub fn run_all(
    dir: &Path,
    out: Option<&Path>,
    opts: &LoadOptions,
    disksim: DisksimRuns,
) -> Result<String, ValidateError> {
    disksim.check()?;
    let file_err = |e: std::io::Error| ValidateError::File {
        file: dir.display().to_string(),
        msg: e.to_string(),
    };
    let mut traces: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(file_err)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(file_err)?
        .into_iter()
        .filter(|p| p.extension().is_some_and(|x| x == "trace") && p.is_file())
        .collect();
    traces.sort();
    if traces.is_empty() {
        return Err(ValidateError::File {
            file: dir.display().to_string(),
            msg: "no validation trace (NAME.trace) in this folder".into(),
        });
    }
    let mut report = format!(
        "{:<16} {:>8} {:>12} {:>12} {:>7} {:>12} {:>7}\n",
        "disk", "requests", "measured ms", "hvio RMS ms", "% mean", "DiskSim ms", "ratio"
    );
    let mut corrected = Vec::new();
    for trace in &traces {
        let stem = trace.file_stem().unwrap_or_default().to_string_lossy().into_owned();
        let spec = ["parv", "diskspecs"]
            .iter()
            .map(|x| trace.with_extension(x))
            .find(|p| p.is_file())
            .ok_or_else(|| ValidateError::File {
                file: trace.display().to_string(),
                msg: format!("no description beside it ({stem}.parv or {stem}.diskspecs)"),
            })?;
        let v = validate(&spec, None, trace, opts)?;
        if let Some(o) = out {
            let p = o.join(&stem).join("cdf.csv");
            hvio_core::output::check_outputs(&[("--out", &p)], &[("disk spec", &spec), ("trace", trace)])?;
            v.write_cdfs(&p).map_err(|e| ValidateError::File {
                file: p.display().to_string(),
                msg: e.to_string(),
            })?;
        }
        let (own_s, ratio_s) = match disksim.demerit(trace)? {
            Some((d, _)) => (format!("{d:.3}"), format!("{:.2}", v.demerit_ms / d)),
            None => ("—".to_string(), "—".to_string()),
        };
        report.push_str(&format!(
            "{stem:<16} {:>8} {:>12.3} {:>12.3} {:>7.2} {own_s:>12} {ratio_s:>7}\n",
            v.requests, v.measured_mean_ms, v.demerit_ms, v.demerit_pct
        ));
        if v.seek_overhead_moved_ms > 0.0 {
            corrected.push(stem);
        }
    }
    if !corrected.is_empty() {
        report.push_str(&format!(
            "DIXtrac seek overhead {:.3} ms moved from every seek into the miss overheads: {} (--as-described: none)\n",
            opts.dixtrac_seek_overhead_ms,
            corrected.join(", ")
        ));
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A trace of `n` requests, each line's numbers varied with `seed`.
    fn trace_text(n: u64, seed: u64) -> String {
        (0..n)
            .map(|i| {
                let k = i * 7919 + seed * 104_729;
                let op = if k.is_multiple_of(3) { 'W' } else { 'R' };
                format!(
                    "{op} Hit {} {} {}.{:03} {}.{:03}\n",
                    (k * 6151) % 50_000_000,
                    1 + k % 64,
                    100 + k % 20_000,
                    k % 1000,
                    k % 90_000,
                    (k / 7) % 1000
                )
            })
            .collect()
    }

    /// `replay_speed`'s replays read, parse and replay into buffers the
    /// replay before filled: a longer trace read, parsed and replayed
    /// first leaves nothing behind in the next one's results.
    #[test]
    fn shared_buffers_read_and_replay_as_fresh_ones() {
        let dir = std::env::temp_dir().join(format!("hvio-validate-buffers-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (long, short) = (dir.join("long.trace"), dir.join("short.trace"));
        std::fs::write(&long, trace_text(300, 1)).unwrap();
        std::fs::write(&short, trace_text(40, 2)).unwrap();
        let model = crate::hdd::HddParams::default().build().unwrap();
        let (mut bytes, mut records, mut out) = (Vec::new(), Vec::new(), Vec::new());
        for path in [&long, &short] {
            crate::disksim::parse::read_bytes_into(path, &mut bytes).unwrap();
            trace_text::parse_into(&bytes, "t", &mut records).unwrap();
            replay_into(model.clone(), &records, &mut out).unwrap();
        }
        let fresh = read_trace(&short).unwrap();
        assert_eq!(bytes, std::fs::read(&short).unwrap());
        assert_eq!(records, fresh);
        let fresh_out = replay(model, &fresh).unwrap();
        assert_eq!(out.len(), 40);
        assert!(out.iter().zip(&fresh_out).all(|(a, b)| a.to_bits() == b.to_bits()));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
