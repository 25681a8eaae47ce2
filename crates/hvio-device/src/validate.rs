//! Validation against real disks, DiskSim's way: replay a measured trace
//! closed-loop on a disk model and compare the distributions of per-request
//! service time with the Ruemmler–Wilkes demerit figure (the RMS horizontal
//! distance between the two CDFs, sampled at 10,000 evenly spaced quantiles).

use crate::disksim::{load_disk_with, LoadOptions, Loaded, SpecError};
use crate::hdd::{Hdd, HddModel};
use hvio_core::{Device, Nanos, Op, Request};
use std::fmt;
use std::path::{Path, PathBuf};
use thiserror::Error;

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
    // Bounded, and a byte that is not UTF-8 is an error naming its line.
    let text = crate::disksim::parse::read_text(path)?;
    parse_trace(&text, &path.display().to_string())
}

/// [`read_trace`] of a trace already read: `text`, from `file` (named in errors).
pub fn parse_trace(text: &str, file: &str) -> Result<Vec<TraceRecord>, ValidateError> {
    let mut out = Vec::with_capacity(text.len() / 24);
    let (mut at, mut line) = (0, 0);
    while let Some((f, n)) = line_fields(text, &mut at) {
        line += 1;
        if n == 0 {
            continue;
        }
        let err = |msg: String| ValidateError::Trace {
            file: file.to_string(),
            line,
            msg,
        };
        if n != 6 {
            return Err(err(format!(
                "expected 6 fields (R|W, Hit|Miss|Doub|Trip, LBN, sectors, service µs, gap µs), found {n}"
            )));
        }
        let write = match f[0] {
            "R" | "r" => false,
            "W" | "w" => true,
            other => return Err(err(format!("operation `{other}` is not R or W"))),
        };
        let lbn = f[2]
            .parse::<u64>()
            .map_err(|_| err(format!("LBN `{}` is not a block number", f[2])))?;
        let sectors = f[3]
            .parse::<u32>()
            .ok()
            .filter(|&s| s > 0)
            .ok_or_else(|| err(format!("size `{}` is not a positive number of sectors", f[3])))?;
        let num = |s: &str, what: &str| {
            parse_decimal(s)
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| err(format!("{what} `{s}` is not a non-negative number")))
        };
        let measured_ms = num(f[4], "service time")? / 1000.0;
        let gap_ms = num(f[5], "inter-arrival gap")? / 1000.0;
        // A gap beyond 1000 s would push the replay clock past u64 ns.
        if gap_ms > MAX_GAP_MS {
            return Err(err(format!("inter-arrival gap `{}` µs is more than 1e9 µs", f[5])));
        }
        out.push(TraceRecord {
            write,
            lbn,
            sectors,
            measured_ms,
            gap_ms,
            line,
        });
    }
    if out.is_empty() {
        return Err(ValidateError::File {
            file: file.to_string(),
            msg: "no requests".into(),
        });
    }
    Ok(out)
}

/// The fields of the line starting at byte `*at` of `text`, as
/// `str::lines` and `split_ascii_whitespace` would give them (the first six,
/// and how many there are, without an allocation), and `*at` moved past
/// the line; `None` at the end of the text. One pass over the bytes: a
/// replay's time includes reading its trace, as DiskSim's does.
fn line_fields<'a>(text: &'a str, at: &mut usize) -> Option<([&'a str; 6], usize)> {
    let b = text.as_bytes();
    let mut i = *at;
    if i >= b.len() {
        return None;
    }
    let (mut f, mut n) = ([""; 6], 0);
    loop {
        while i < b.len() && b[i] != b'\n' && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i == b.len() || b[i] == b'\n' {
            break;
        }
        let start = i;
        while i < b.len() && !b[i].is_ascii_whitespace() {
            i += 1;
        }
        if n < 6 {
            // Both ends are at an ASCII byte or the end: char boundaries.
            f[n] = &text[start..i];
        }
        n += 1;
    }
    *at = i + 1;
    Some((f, n))
}

/// `s.parse::<f64>()`, the same value to the bit, quicker for the plain
/// decimals of a validation trace (`6657.00000`): digits with at most one
/// point, 15 digits at most, read as an integer and divided by a power of
/// ten. Both are exact in an `f64`, so the one division rounds correctly,
/// to the value `parse` gives (Clinger's fast path, which `parse` takes too,
/// after the checks every other form of number needs: they were half of
/// reading a trace). Anything else goes to `parse`.
fn parse_decimal(s: &str) -> Result<f64, std::num::ParseFloatError> {
    const POW10: [f64; 16] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
    ];
    let (mut m, mut digits, mut frac, mut point) = (0u64, 0usize, 0usize, false);
    for &c in s.as_bytes() {
        match c {
            b'0'..=b'9' if digits < 15 => {
                m = m * 10 + (c - b'0') as u64;
                digits += 1;
                frac += point as usize;
            }
            b'.' if !point => point = true,
            _ => return s.parse(),
        }
    }
    if digits == 0 {
        return s.parse();
    }
    Ok(m as f64 / POW10[frac])
}

/// The longest inter-arrival gap of a validation trace, ms (1000 s).
const MAX_GAP_MS: f64 = 1e6;

/// Replays `trace` closed-loop (one request outstanding; the next is issued
/// at completion plus the recorded gap); returns each request's service time in ms.
pub fn replay(model: HddModel, trace: &[TraceRecord]) -> Result<Vec<f64>, ValidateError> {
    let cap = model.geom.capacity();
    let mut disk = Hdd::new(model);
    let mut out = Vec::with_capacity(trace.len());
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
        done.clear();
        while done.is_empty() {
            let t = disk.next_event().expect("a submitted request completes");
            disk.advance(t, &mut done);
        }
        let end = done[0].done;
        out.push((end - now) as f64 / 1e6);
        // Records built by a caller (not read_trace) may carry any gap.
        now = Some((r.gap_ms * 1e6).round())
            .filter(|g| *g >= 0.0 && *g < u64::MAX as f64)
            .and_then(|g| end.checked_add(g as Nanos))
            .ok_or_else(|| ValidateError::Trace {
                file: "trace".into(),
                line: r.line,
                msg: format!("gap {} ms: the replay's clock would pass 2^64 ns", r.gap_ms),
            })?;
    }
    Ok(out)
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
/// whole replay from the trace file to every request's service time.
pub fn replay_speed(model: &HddModel, path: &Path, repeats: u32) -> Result<f64, ValidateError> {
    let mut best = 0.0f64;
    for _ in 0..repeats.max(1) {
        let t0 = std::time::Instant::now();
        let trace = read_trace(path)?;
        let out = replay(model.clone(), &trace)?;
        let secs = t0.elapsed().as_secs_f64();
        std::hint::black_box(out);
        best = best.max(trace.len() as f64 / secs.max(1e-9));
    }
    Ok(best)
}

/// `hvio validate-disk SPEC TRACE [--out DIR] [--disk NAME] [--bench N]`
/// (`opts`: `--as-described`, `--seek-overhead MS`): the
/// printable report; with `out`, also `DIR/cdf.csv` (and DiskSim's own
/// demerit when a `.outv` sits beside the trace); with `bench_repeats`, the
/// best replay speed of that many more replays.
pub fn run_cli(
    spec: &Path,
    trace: &Path,
    out: Option<&Path>,
    disk: Option<&str>,
    bench_repeats: u32,
    opts: &LoadOptions,
) -> Result<String, ValidateError> {
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
    let outv: PathBuf = trace.with_extension("outv");
    if outv.exists() {
        if let Ok(d) = disksim_demerit(&outv) {
            report.push_str(&format!(
                "  DiskSim's own demerit       {d:8.3} ms ({:.2}%) from {}\n",
                100.0 * d / v.measured_mean_ms,
                outv.display()
            ));
        }
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
/// (from `NAME.outv` when it is there, else `—`) and the ratio of the two.
/// With `out`, also `OUT/NAME/cdf.csv` for each disk. Every disk is read as `opts` say.
pub fn run_all(dir: &Path, out: Option<&Path>, opts: &LoadOptions) -> Result<String, ValidateError> {
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
        let outv = trace.with_extension("outv");
        let own = if outv.is_file() {
            disksim_demerit(&outv).ok()
        } else {
            None
        };
        let (own_s, ratio_s) = match own {
            Some(d) => (format!("{d:.3}"), format!("{:.2}", v.demerit_ms / d)),
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
    use proptest::prelude::*;

    /// `str::lines`, then each line's first six `split_ascii_whitespace`
    /// fields and their count.
    fn by_std(text: &str) -> Vec<([&str; 6], usize)> {
        text.lines()
            .map(|line| {
                let (mut f, mut n) = ([""; 6], 0);
                for w in line.split_ascii_whitespace() {
                    if n < 6 {
                        f[n] = w;
                    }
                    n += 1;
                }
                (f, n)
            })
            .collect()
    }

    fn by_line_fields(text: &str) -> Vec<([&str; 6], usize)> {
        let (mut at, mut out) = (0, Vec::new());
        while let Some(x) = line_fields(text, &mut at) {
            out.push(x);
        }
        out
    }

    #[test]
    fn line_fields_split_as_lines_and_whitespace_do() {
        for text in [
            "",
            "\n",
            "R Hit 1 8 1.5 2.5\n",
            "R Hit 1 8 1.5 2.5",
            "W\tMiss   10 4 3.0 0.0\r\nR Hit 1 8 1.5 2.5\r\n\n\n  \t\n",
            "a b c d e f g h\n\rx\ry \u{a0}z\u{2003}\n\u{c}R\u{b}1",
        ] {
            assert_eq!(by_line_fields(text), by_std(text), "{text:?}");
        }
    }

    #[test]
    fn decimals_parse_as_the_standard_library_parses_them() {
        for s in [
            "0",
            "0.0",
            "663.00000",
            "45422.00000",
            "5.",
            ".5",
            ".",
            "",
            "1e3",
            "+1",
            "-0",
            "1.2.3",
            "0.1",
            "0.3",
            "999999999999999",
            "9999999999999999",
            "123456789.012345",
            "12345678.9012345",
            "00000000000000001",
            "inf",
            "NaN",
            " 1",
        ] {
            match (parse_decimal(s), s.parse::<f64>()) {
                (Ok(a), Ok(b)) => assert_eq!(a.to_bits(), b.to_bits(), "{s}"),
                (a, b) => assert_eq!(a.is_ok(), b.is_ok(), "{s}"),
            }
        }
    }

    proptest! {
        #[test]
        fn any_decimal_parses_to_the_standard_librarys_bits(
            int in "[0-9]{0,12}", frac in proptest::option::of("[0-9]{0,12}")
        ) {
            let s = match &frac {
                Some(f) => format!("{int}.{f}"),
                None => int.clone(),
            };
            match (parse_decimal(&s), s.parse::<f64>()) {
                (Ok(a), Ok(b)) => prop_assert_eq!(a.to_bits(), b.to_bits(), "{}", s),
                (a, b) => prop_assert_eq!(a.is_ok(), b.is_ok(), "{}", s),
            }
        }

        #[test]
        fn line_fields_split_any_text_as_the_standard_library_does(
            text in proptest::collection::vec(
                prop_oneof![Just(' '), Just('\t'), Just('\n'), Just('\r'), Just('\u{c}'), Just('\u{b}'), Just('\u{a0}'), Just('x'), Just('7'), Just('é')],
                0..60,
            ).prop_map(|v| v.into_iter().collect::<String>())
        ) {
            prop_assert_eq!(by_line_fields(&text), by_std(&text));
        }
    }
}
