//! `hvio trace stats|convert`: look at and convert block traces.

use crate::common::{errln, out, outln};
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use hvio_core::output::AtomicFile;
use hvio_trace::write::{BlkparseWriter, IologWriter};
use hvio_trace::{trace_stats, BlkAction, Format, ReadOptions, TraceReader};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

#[derive(Args)]
pub struct TraceArgs {
    #[command(subcommand)]
    command: TraceCommand,
}

#[derive(Subcommand)]
enum TraceCommand {
    /// Requests, read fraction, sizes, inter-arrival times, devices, sequentiality, duration.
    Stats(StatsArgs),
    /// Rewrite a trace as blkparse-style text or a fio iolog v3.
    Convert(ConvertArgs),
    /// Parse an fio job file: the jobs hvio reads from it and the options it ignores.
    Fio(FioArgs),
}

#[derive(Args)]
struct FioArgs {
    /// The fio job file.
    file: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// How to read a trace (shared by `trace` and `replay`).
#[derive(Args, Clone)]
pub struct ReadArgs {
    /// The format (default: detected). One of: blkparse, blktrace, iolog2, iolog3,
    /// msr, spc, alibaba, tencent, fiu, disksim, mqsim, vscsi1, vscsi2.
    #[arg(long)]
    pub format: Option<String>,
    /// Count and skip malformed records instead of stopping at the first.
    #[arg(long)]
    pub skip_bad: bool,
    /// Accept records whose time goes backwards.
    #[arg(long)]
    pub allow_unsorted: bool,
    /// blktrace/blkparse: the event that is the request: Q (queue), D (issue) or C (complete).
    #[arg(long, default_value = "Q")]
    pub action: String,
    /// blkparse: the -f format (or `A,format` for -F) the text was printed with.
    #[arg(long)]
    pub blkparse_format: Option<String>,
    /// MQSim: nanoseconds per trace time unit.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true, value_parser = crate::common::positive::<u64>)]
    pub mqsim_time_unit_ns: u64,
}

impl ReadArgs {
    pub fn options(&self) -> Result<ReadOptions> {
        Ok(ReadOptions {
            format: self.format.as_deref().map(str::parse::<Format>).transpose()?,
            skip_bad: self.skip_bad,
            allow_unsorted: self.allow_unsorted,
            blk_action: self.action.parse::<BlkAction>()?,
            blkparse_format: self.blkparse_format.clone(),
            mqsim_time_unit_ns: self.mqsim_time_unit_ns,
        })
    }
}

#[derive(Args)]
struct StatsArgs {
    /// The trace file (gzip or not; for blktrace, one per-CPU file or the device name).
    file: PathBuf,
    #[command(flatten)]
    read: ReadArgs,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct ConvertArgs {
    file: PathBuf,
    #[command(flatten)]
    read: ReadArgs,
    /// Output format: blkparse or iolog3.
    #[arg(long)]
    to: String,
    /// Output file (default: standard output).
    #[arg(long, short)]
    output: Option<PathBuf>,
}

pub fn trace(a: TraceArgs) -> Result<()> {
    match a.command {
        TraceCommand::Stats(s) => stats(s),
        TraceCommand::Convert(c) => convert(c),
        TraceCommand::Fio(f) => fio(f),
    }
}

fn fio(a: FioArgs) -> Result<()> {
    let f = hvio_trace::fio::parse_job_file(&a.file)?;
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&f)?);
        return Ok(());
    }
    // One line per job in the job file's own syntax (fio's comma-separated
    // read,write,trim values; an unset one is left empty, as fio writes it).
    let opt = |v: Option<u64>| v.map_or(String::new(), |x| x.to_string());
    for j in &f.jobs {
        let split = |v: &Vec<(u64, u32)>| v.iter().map(|(b, p)| format!("{b}/{p}")).collect::<Vec<_>>().join(":");
        let mut line = format!(
            "[{}] rw={} bs={},{},{} bssplit={},{}",
            j.name,
            j.rw.name(),
            j.bs[0],
            j.bs[1],
            j.bs[2],
            split(&j.bssplit[0]),
            split(&j.bssplit[1]),
        );
        if let Some(size) = j.size {
            line += &format!(" size={size}");
        }
        line += &format!(
            " offset={} nrfiles={} numjobs={} iodepth={} thinktime_us={} rate_iops={},{},{} fsync={} rwmixread={} random_distribution={}",
            j.offset,
            j.nrfiles,
            j.numjobs,
            j.iodepth,
            j.thinktime_us,
            opt(j.rate_iops[0]),
            opt(j.rate_iops[1]),
            opt(j.rate_iops[2]),
            j.fsync,
            j.rwmixread,
            j.random_distribution,
        );
        if let Some(r) = j.runtime_us {
            line += &format!(" runtime_us={r}");
        }
        if j.time_based {
            line += " time_based";
        }
        outln!("{line}");
    }
    for w in &f.warnings {
        errln!("warning: {w}");
    }
    Ok(())
}

fn stats(a: StatsArgs) -> Result<()> {
    let mut r = TraceReader::open(&a.file, &a.read.options()?)?;
    let s = trace_stats(&mut r)?;
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&s)?);
    } else {
        out!("{s}");
    }
    if a.read.skip_bad && s.skipped_bad > 0 {
        errln!("hvio: skipped {} bad records", s.skipped_bad);
    }
    Ok(())
}

/// A converted trace's destination: stdout, or a file written whole or not
/// at all (`hvio_core::output::AtomicFile`: an error midway leaves no
/// half-written file and an existing one untouched).
enum Output {
    Stdout(std::io::StdoutLock<'static>),
    File(AtomicFile),
}

impl Output {
    fn open(path: &Path, input: &Path) -> Result<Self> {
        crate::common::check_not_dir(path)?;
        hvio_core::output::check_outputs(&[("--output", path)], &[("input trace", input)])?;
        let f = AtomicFile::create(path).with_context(|| format!("creating {}", path.display()))?;
        Ok(Output::File(f))
    }

    /// Renames a finished file over the output (stdout: nothing to do).
    fn commit(self) -> Result<()> {
        if let Output::File(f) = self {
            let path = f.path().display().to_string();
            f.commit().with_context(|| format!("writing {path}"))?;
        }
        Ok(())
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Output::Stdout(o) => o.write(buf),
            Output::File(f) => f.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Output::Stdout(o) => o.flush(),
            Output::File(f) => f.flush(),
        }
    }
}

fn convert(a: ConvertArgs) -> Result<()> {
    let mut r = TraceReader::open(&a.file, &a.read.options()?)?;
    let out = match &a.output {
        Some(p) => Output::open(p, &a.file)?,
        None => Output::Stdout(std::io::stdout().lock()),
    };
    let out = BufWriter::new(out);
    // The writers' errors are I/O errors of the destination: name it.
    let dest = a
        .output
        .as_ref()
        .map_or_else(|| "stdout".to_string(), |p| p.display().to_string());
    let wr = |e: std::io::Error| anyhow::anyhow!("writing to {dest}: {e}");
    // Device names are known as they appear: collect them lazily per record.
    let finished = match a.to.as_str() {
        "blkparse" => {
            let mut w = BlkparseWriter::new(out, &[]);
            while let Some(rec) = r.next() {
                let rec = rec?;
                w.set_devices(r.devices());
                w.write(&rec).map_err(wr)?;
            }
            w.finish().map_err(wr)?
        }
        "iolog3" | "iolog" => {
            let mut w = IologWriter::new(out, &[]).map_err(wr)?;
            while let Some(rec) = r.next() {
                let rec = rec?;
                w.set_devices(r.devices());
                w.write(&rec).map_err(wr)?;
            }
            w.finish().map_err(wr)?
        }
        other => bail!(
            "--to {other:?}: unknown output format (blkparse or iolog3){}",
            hvio_core::message::hint(other, ["blkparse", "iolog3"])
        ),
    };
    finished.into_inner().map_err(|e| wr(e.into_error()))?.commit()?;
    if r.skipped() > 0 {
        errln!("hvio: skipped {} bad records", r.skipped());
    }
    Ok(())
}
