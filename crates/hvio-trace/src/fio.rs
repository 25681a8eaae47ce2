//! fio job files as workloads.
//!
//! The parser follows fio's own rules (`init.c`, `parse.c`, `options.c`):
//! INI sections, any number of `[global]` sections (each applies to the jobs
//! after it), `include FILE` (relative to the including file, nested, no
//! sections inside), `${VAR}` expansion in values (unset → empty), the
//! reserved `$pagesize`, `$ncpus`, `$mb_memory`, value-less options (booleans
//! set to 1), `;`/`#` comment lines, and fio's integer units: with the default
//! `kb_base=1024`, `k`/`m`/`g`/`t`/`p` (with or without `b`) are powers of 1024
//! and `kib`/`mib`/... are powers of 1000 (fio's compatibility mode); with
//! `kb_base=1000` the other way round (`kb_base` applies to the whole
//! section it is in, wherever it is written, as fio sorts it first). Note: fio's documentation says `1mi`
//! means 10⁶, but fio 3.33 (and fio's `parse.c`) reads `mi` as `m` = 2²⁰; only
//! `mib` is 10⁶. hvio does what fio does (checked against fio in the tests).
//!
//! Each job becomes a [`FioJob`]; options hvio does not model are
//! [`FioWarning`]s naming them. Arithmetic expressions (`size=(4*1024)`) are
//! not supported and are an error.

use serde::Serialize;
use std::fmt;
use std::path::{Path, PathBuf};

/// fio's `rw`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FioRw {
    /// `read`: sequential reads.
    Read,
    /// `write`: sequential writes.
    Write,
    /// `trim`: sequential trims.
    Trim,
    /// `randread`: random reads.
    RandRead,
    /// `randwrite`: random writes.
    RandWrite,
    /// `randtrim`: random trims.
    RandTrim,
    /// `rw` / `readwrite`: mixed sequential reads and writes.
    ReadWrite,
    /// `randrw`: mixed random reads and writes.
    RandRw,
    /// `trimwrite`: each block trimmed, then written.
    TrimWrite,
    /// `randtrimwrite`: random blocks trimmed, then written.
    RandTrimWrite,
}

impl FioRw {
    /// The mode named `s` in a job file (fio's aliases included).
    pub fn parse(s: &str) -> Option<FioRw> {
        Some(match s {
            "read" => FioRw::Read,
            "write" => FioRw::Write,
            "trim" => FioRw::Trim,
            "randread" => FioRw::RandRead,
            "randwrite" => FioRw::RandWrite,
            "randtrim" => FioRw::RandTrim,
            "rw" | "readwrite" => FioRw::ReadWrite,
            "randrw" => FioRw::RandRw,
            "trimwrite" => FioRw::TrimWrite,
            "randtrimwrite" => FioRw::RandTrimWrite,
            _ => return None,
        })
    }
    /// fio's name of the mode.
    pub fn name(self) -> &'static str {
        match self {
            FioRw::Read => "read",
            FioRw::Write => "write",
            FioRw::Trim => "trim",
            FioRw::RandRead => "randread",
            FioRw::RandWrite => "randwrite",
            FioRw::RandTrim => "randtrim",
            FioRw::ReadWrite => "rw",
            FioRw::RandRw => "randrw",
            FioRw::TrimWrite => "trimwrite",
            FioRw::RandTrimWrite => "randtrimwrite",
        }
    }
    /// Whether offsets are random.
    pub fn is_random(self) -> bool {
        matches!(
            self,
            FioRw::RandRead | FioRw::RandWrite | FioRw::RandTrim | FioRw::RandRw | FioRw::RandTrimWrite
        )
    }
}

/// fio's `random_distribution`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "lowercase", tag = "kind", content = "value")]
pub enum RandomDistribution {
    /// Uniform random offsets (fio's default).
    Random,
    /// Zipf with exponent theta (default 1.1, must not be 1).
    Zipf(f64),
    /// Pareto with power h (default 0.2, 0 < h < 1).
    Pareto(f64),
    /// Normal ("gauss") with deviation in percent (0 ≤ dev < 100).
    Normal(f64),
}

/// In job-file syntax: `random`, `zipf:1.2`, `pareto:0.2`, `normal:5`.
impl fmt::Display for RandomDistribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RandomDistribution::Random => write!(f, "random"),
            RandomDistribution::Zipf(t) => write!(f, "zipf:{t}"),
            RandomDistribution::Pareto(h) => write!(f, "pareto:{h}"),
            RandomDistribution::Normal(d) => write!(f, "normal:{d}"),
        }
    }
}

/// A size given either in bytes or as a percentage of the file/device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SizeSpec {
    /// A number of bytes.
    Bytes(u64),
    /// A percentage of the file or device.
    Percent(u32),
}

/// In job-file syntax: bytes, or `N%`.
impl fmt::Display for SizeSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SizeSpec::Bytes(b) => write!(f, "{b}"),
            SizeSpec::Percent(p) => write!(f, "{p}%"),
        }
    }
}

/// One job of a job file, after `[global]` merging.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FioJob {
    /// The job's section name.
    pub name: String,
    /// `rw`: the I/O pattern.
    pub rw: FioRw,
    /// The `rw=randread:N` / `rw=write:N` suffix, if given (not modelled).
    pub rw_suffix: Option<u64>,
    /// Block size in bytes for reads, writes and trims.
    pub bs: [u64; 3],
    /// `bssplit` per direction (read, write, trim): (bytes, percent); empty = use `bs`.
    pub bssplit: [Vec<(u64, u32)>; 3],
    /// `size`: the region the job covers (None: the whole file or device).
    pub size: Option<SizeSpec>,
    /// `offset`: where that region starts.
    pub offset: SizeSpec,
    /// `nrfiles`: files per job.
    pub nrfiles: u32,
    /// `numjobs`: clones of the job.
    pub numjobs: u32,
    /// `iodepth`: I/Os in flight per job.
    pub iodepth: u32,
    /// `thinktime` in microseconds between I/Os.
    pub thinktime_us: u64,
    /// `rate_iops` per direction (read, write, trim).
    pub rate_iops: [Option<u64>; 3],
    /// `fsync`: an fsync after this many writes (0: never).
    pub fsync: u32,
    /// `rwmixread`: percentage of reads in a mixed job.
    pub rwmixread: u32,
    /// `random_distribution`.
    pub random_distribution: RandomDistribution,
    /// `runtime` in microseconds, if given.
    pub runtime_us: Option<u64>,
    /// `time_based`: run for `runtime` even after `size` is done.
    pub time_based: bool,
    /// `startdelay` in microseconds.
    pub startdelay_us: u64,
    /// `filename`, if given.
    pub filename: Option<String>,
    /// `kb_base`: 1024 or 1000.
    pub kb_base: u32,
    /// `direct=1` (or `buffered=0`): O_DIRECT; fio's default is buffered.
    pub direct: bool,
    /// `ioengine`, as written (`None`: fio's default, `psync`).
    pub ioengine: Option<String>,
}

impl Default for FioJob {
    fn default() -> Self {
        FioJob {
            name: String::new(),
            rw: FioRw::Read,
            rw_suffix: None,
            bs: [4096; 3],
            bssplit: [Vec::new(), Vec::new(), Vec::new()],
            size: None,
            offset: SizeSpec::Bytes(0),
            nrfiles: 1,
            numjobs: 1,
            iodepth: 1,
            thinktime_us: 0,
            rate_iops: [None; 3],
            fsync: 0,
            rwmixread: 50,
            random_distribution: RandomDistribution::Random,
            runtime_us: None,
            time_based: false,
            startdelay_us: 0,
            filename: None,
            kb_base: 1024,
            direct: false,
            ioengine: None,
        }
    }
}

/// An option hvio read but does not model.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FioWarning {
    /// The job file.
    pub file: String,
    /// The line of the option.
    pub line: u32,
    /// The section it is in.
    pub section: String,
    /// The option as written.
    pub option: String,
    /// Why hvio does not model it.
    pub message: String,
}

impl fmt::Display for FioWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: [{}] {}: {}",
            self.file, self.line, self.section, self.option, self.message
        )
    }
}

/// A job file that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FioError {
    /// The job file could not be read.
    #[error("{file}: {source}")]
    Io {
        /// The job file.
        file: String,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// An option fio would refuse.
    #[error("{file}:{line}: {option}: {message}")]
    Bad {
        /// The job file.
        file: String,
        /// The line of the option.
        line: u32,
        /// The option as written.
        option: String,
        /// What is wrong, in fio's words where fio has them.
        message: String,
    },
}

/// The jobs of a job file and the warnings met reading it.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FioJobFile {
    /// The jobs in file order.
    pub jobs: Vec<FioJob>,
    /// Options read but not modelled.
    pub warnings: Vec<FioWarning>,
}

/// Options that only change fio's reporting or process model: no warning.
const SILENT: &[&str] = &[
    "description",
    "group_reporting",
    "thread",
    "per_job_logs",
    "output",
    "output-format",
    "eta",
    "clat_percentiles",
    "lat_percentiles",
    "percentile_list",
    "unified_rw_reporting",
    "stats",
    "disable_lat",
    "disable_clat",
    "disable_slat",
];

struct Line {
    file: String,
    no: u32,
    text: String,
}

fn io_err(file: &Path, source: std::io::Error) -> FioError {
    FioError::Io {
        file: file.display().to_string(),
        source,
    }
}

/// The largest job file (or included file) read: job files are small, and
/// `include /dev/zero` must end.
pub const MAX_FILE_BYTES: u64 = 16 << 20;
/// The most `include`s one job file may expand (a file included twice by a
/// file included twice ... is exponential without a loop).
pub const MAX_INCLUDES: u32 = 1024;

/// Reads a job file as text: at most [`MAX_FILE_BYTES`], UTF-8 (the error names
/// the first line that is not), a leading byte-order mark dropped.
fn read_text(path: &Path) -> Result<String, FioError> {
    use std::io::Read;
    let name = path.display().to_string();
    let f = std::fs::File::open(path).map_err(|e| io_err(path, e))?;
    let mut bytes = Vec::new();
    f.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_err(path, e))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(FioError::Io {
            file: name,
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("larger than {} MiB: not a job file", MAX_FILE_BYTES >> 20),
            ),
        });
    }
    String::from_utf8(bytes).map_err(|e| {
        let ok = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        FioError::Bad {
            file: name,
            line: ok.iter().filter(|&&c| c == b'\n').count() as u32 + 1,
            option: "text".into(),
            message: format!("byte {} is not UTF-8", ok.len()),
        }
    })
}

/// Reads a file's lines, expanding `include`s (at most 16 deep, [`MAX_INCLUDES`] in all).
fn load(path: &Path, depth: u32, includes: &mut u32, out: &mut Vec<Line>) -> Result<(), FioError> {
    let text = read_text(path)?;
    load_text(&text, path, depth, includes, out)
}

fn load_text(text: &str, path: &Path, depth: u32, includes: &mut u32, out: &mut Vec<Line>) -> Result<(), FioError> {
    let name = path.display().to_string();
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    for (i, raw) in text.lines().enumerate() {
        let no = i as u32 + 1;
        let t = raw.trim();
        if t == "include" {
            return Err(FioError::Bad {
                file: name.clone(),
                line: no,
                option: "include".into(),
                message: "names no file (fio: `include FILE`)".into(),
            });
        }
        if let Some(inc) = t.strip_prefix("include ").or_else(|| t.strip_prefix("include\t")) {
            let inc = inc.trim();
            let bad = |m: String| FioError::Bad {
                file: name.clone(),
                line: no,
                option: "include".into(),
                message: m,
            };
            if depth >= 16 {
                return Err(bad("includes nested more than 16 deep (a loop?)".into()));
            }
            *includes += 1;
            if *includes > MAX_INCLUDES {
                return Err(bad(format!("more than {MAX_INCLUDES} includes in all")));
            }
            let p = Path::new(inc);
            let p = if p.is_absolute() {
                p.to_path_buf()
            } else {
                path.parent().unwrap_or(Path::new(".")).join(p)
            };
            let before = out.len();
            load(&p, depth + 1, includes, out).map_err(|e| match e {
                FioError::Io { source, .. } => bad(format!("cannot read {}: {source}", p.display())),
                other => other,
            })?;
            if let Some(l) = out[before..].iter().find(|l| l.text.trim_start().starts_with('[')) {
                return Err(FioError::Bad {
                    file: l.file.clone(),
                    line: l.no,
                    option: "include".into(),
                    message: "an included file may not contain [sections]".into(),
                });
            }
            continue;
        }
        out.push(Line {
            file: name.clone(),
            no,
            text: raw.to_string(),
        });
    }
    Ok(())
}

fn expand(value: &str) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let Some(j) = after.find('}') else {
            return Err(format!("unterminated ${{ in {value:?}"));
        };
        out.push_str(&std::env::var(&after[..j]).unwrap_or_default());
        rest = &after[j + 1..];
    }
    out.push_str(rest);
    if out.contains("$pagesize") {
        out = out.replace("$pagesize", "4096");
    }
    if out.contains("$ncpus") {
        let n = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        out = out.replace("$ncpus", &n.to_string());
    }
    if out.contains("$mb_memory") {
        let mb = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                m.lines()
                    .find(|l| l.starts_with("MemTotal:"))
                    .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            })
            .map(|kb| kb / 1024)
            .ok_or("$mb_memory: cannot read MemTotal from /proc/meminfo")?;
        out = out.replace("$mb_memory", &mb.to_string());
    }
    Ok(out)
}

/// The leading integer of `s` (decimal, or hex with `0x`) and the rest.
fn leading_int(s: &str) -> Result<(u64, &str), String> {
    let (digits, radix, body) = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        (h.find(|c: char| !c.is_ascii_hexdigit()).unwrap_or(h.len()), 16, h)
    } else {
        (s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()), 10, s)
    };
    if s.starts_with('-') {
        return Err(format!("{s:?} is negative"));
    }
    if s.starts_with('(') {
        return Err(format!(
            "{s:?}: arithmetic expressions are not supported by hvio's job parser"
        ));
    }
    if digits == 0 {
        return Err(format!("{s:?} is not a number"));
    }
    let v = u64::from_str_radix(&body[..digits], radix).map_err(|_| format!("{s:?} is too large"))?;
    Ok((v, &body[digits..]))
}

/// A byte count or percentage in fio's units (see the module docs).
pub fn parse_size(s: &str, kb_base: u32) -> Result<SizeSpec, String> {
    let s = s.trim();
    let (v, suffix) = leading_int(s)?;
    let c = suffix.to_ascii_lowercase();
    let c = c.split([':', '-', ',', '/']).next().unwrap_or("");
    if c.starts_with('%') {
        return u32::try_from(v)
            .ok()
            .filter(|&p| p <= 100)
            .map(SizeSpec::Percent)
            .ok_or_else(|| format!("{s:?}: a percentage must be 0-100"));
    }
    let iec = if kb_base == 1000 { 1024u64 } else { 1000 };
    let (pow, mult) = match () {
        _ if c.starts_with("pib") => (5, iec),
        _ if c.starts_with("tib") => (4, iec),
        _ if c.starts_with("gib") => (3, iec),
        _ if c.starts_with("mib") => (2, iec),
        _ if c.starts_with("kib") => (1, iec),
        _ if c.starts_with('p') => (5, kb_base as u64),
        _ if c.starts_with('t') => (4, kb_base as u64),
        _ if c.starts_with('g') => (3, kb_base as u64),
        _ if c.starts_with('m') => (2, kb_base as u64),
        _ if c.starts_with('k') => (1, kb_base as u64),
        _ if c.is_empty() || c.starts_with('b') => (0, 1),
        _ => {
            return Err(format!(
                "{s:?}: unknown unit {suffix:?} (use k, m, g, t, p, with i and/or b)"
            ))
        }
    };
    let m = mult.checked_pow(pow).ok_or("unit overflow")?;
    v.checked_mul(m)
        .map(SizeSpec::Bytes)
        .ok_or_else(|| format!("{s:?} is too large"))
}

fn bytes(s: &str, kb_base: u32) -> Result<u64, String> {
    match parse_size(s, kb_base)? {
        SizeSpec::Bytes(b) => Ok(b),
        SizeSpec::Percent(_) => Err(format!("{s:?}: a percentage is not allowed here")),
    }
}

/// A time in microseconds; `default_us` is the unit of a bare number
/// (fio: seconds for `runtime`/`startdelay`, microseconds for `thinktime`).
pub fn parse_time_us(s: &str, default_us: u64) -> Result<u64, String> {
    let s = s.trim();
    let (v, suffix) = leading_int(s)?;
    let c = suffix.to_ascii_lowercase();
    let mult = match c.as_str() {
        "" => default_us,
        "us" | "usec" => 1,
        "ms" | "msec" => 1_000,
        "s" | "sec" => 1_000_000,
        "m" | "min" => 60_000_000,
        "h" => 3_600_000_000,
        "d" => 86_400_000_000,
        _ => return Err(format!("{s:?}: unknown time unit {suffix:?} (us, ms, s, m, h, d)")),
    };
    v.checked_mul(mult).ok_or_else(|| format!("{s:?} is too large"))
}

fn int(s: &str) -> Result<u64, String> {
    let (v, rest) = leading_int(s.trim())?;
    if !rest.is_empty() {
        return Err(format!("{s:?} is not an integer"));
    }
    Ok(v)
}

fn boolean(s: &str) -> Result<bool, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(format!("{s:?} is not a boolean (0 or 1)")),
    }
}

/// fio's per-direction value lists: `a` (all), `a,b` (read a, write and trim b),
/// `a,b,` (trim default), `,b` (read default) ...
fn per_dir<T: Clone>(s: &str, parse: impl Fn(&str) -> Result<T, String>) -> Result<[Option<T>; 3], String> {
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    if parts.iter().all(|p| p.is_empty()) {
        return Err(format!("{s:?} gives no value (fio: \"failed parsing\")"));
    }
    if parts.len() > 3 {
        return Err(format!("{s:?}: at most three values (read,write,trim)"));
    }
    let mut out: [Option<T>; 3] = [None, None, None];
    let mut last: Option<T> = None;
    for (i, slot) in out.iter_mut().enumerate() {
        match parts.get(i) {
            Some(p) if !p.is_empty() => {
                let v = parse(p)?;
                last = Some(v.clone());
                *slot = Some(v);
            }
            Some(_) => last = None,
            None => *slot = last.clone(),
        }
    }
    Ok(out)
}

fn parse_split(s: &str, kb_base: u32) -> Result<Vec<(u64, u32)>, String> {
    let mut entries: Vec<(u64, Option<u32>)> = Vec::new();
    for part in s.split(':') {
        if part.trim().is_empty() {
            break;
        }
        let (b, p) = match part.split_once('/') {
            Some((b, p)) => {
                let p: u32 = p
                    .trim()
                    .parse()
                    .map_err(|_| format!("{part:?}: the percentage is not an integer"))?;
                (b, if p == 0 { None } else { Some(p.min(100)) })
            }
            None => (part, None),
        };
        let b = bytes(b, kb_base)?;
        if b == 0 {
            return Err(format!("{part:?}: a block size must be positive"));
        }
        entries.push((b, p));
    }
    // Each is at most 100: in u64 the sum cannot overflow.
    let given: u64 = entries.iter().filter_map(|e| e.1).map(u64::from).sum();
    let missing = entries.iter().filter(|e| e.1.is_none()).count() as u64;
    if given > 100 && missing > 1 {
        return Err(format!("{s:?}: percentages add up to more than 100"));
    }
    let rest = if missing == 1 && entries.len() == 1 {
        100
    } else {
        (100u64.saturating_sub(given) / missing.max(1)) as u32
    };
    Ok(entries.into_iter().map(|(b, p)| (b, p.unwrap_or(rest))).collect())
}

fn parse_distribution(s: &str) -> Result<RandomDistribution, String> {
    let (kind, val) = match s.split_once(':') {
        Some((k, v)) => (k.trim(), Some(v.trim())),
        None => (s.trim(), None),
    };
    let num = |d: f64| -> Result<f64, String> {
        match val {
            None => Ok(d),
            Some(v) => {
                let v = v.split(':').next().unwrap_or(v);
                v.parse::<f64>().map_err(|_| format!("{s:?}: {v:?} is not a number"))
            }
        }
    };
    match kind {
        "random" => Ok(RandomDistribution::Random),
        "zipf" => {
            let t = num(1.1)?;
            if !(t.is_finite() && t > 0.0) {
                return Err(format!("zipf theta {t} must be a positive number"));
            }
            if t == 1.0 {
                return Err("zipf theta must be different from 1.0".into());
            }
            Ok(RandomDistribution::Zipf(t))
        }
        "pareto" => {
            let h = num(0.2)?;
            if !(h > 0.0 && h < 1.0) {
                return Err("pareto input out of range (0 < h < 1)".into());
            }
            Ok(RandomDistribution::Pareto(h))
        }
        "normal" => {
            let d = num(0.0)?;
            if !(0.0..100.0).contains(&d) {
                return Err("normal deviation out of range (0 <= dev < 100)".into());
            }
            Ok(RandomDistribution::Normal(d))
        }
        "zoned" | "zoned_abs" => Err(format!("{kind} distributions are not modelled by hvio")),
        _ => Err(format!(
            "{s:?}: unknown distribution (random, zipf[:theta], pareto[:h], normal[:dev])"
        )),
    }
}

/// The options [`apply`] models: a slip is taken for one of them first.
const MODELLED: &[&str] = &[
    "name",
    "rw",
    "readwrite",
    "bs",
    "blocksize",
    "bssplit",
    "size",
    "offset",
    "nrfiles",
    "nr_files",
    "numjobs",
    "iodepth",
    "thinktime",
    "rate_iops",
    "fsync",
    "rwmixread",
    "rwmixwrite",
    "random_distribution",
    "runtime",
    "timeout",
    "time_based",
    "startdelay",
    "filename",
    "kb_base",
    "direct",
    "buffered",
    "ioengine",
];

/// Applies one option to a job; `Ok(Some(msg))` is a warning.
fn apply(job: &mut FioJob, key: &str, value: Option<&str>) -> Result<Option<String>, String> {
    let need = || value.ok_or_else(|| "needs a value".to_string());
    let kb = job.kb_base;
    match key {
        "name" => job.name = need()?.to_string(),
        "rw" | "readwrite" => {
            let v = need()?;
            let (base, suffix) = match v.split_once(':') {
                Some((b, s)) => (b.trim(), Some(s.trim())),
                None => (v.trim(), None),
            };
            job.rw = FioRw::parse(base).ok_or_else(|| format!("{v:?} is not an fio rw pattern (read, write, trim, randread, randwrite, randtrim, rw, readwrite, randrw, trimwrite, randtrimwrite)"))?;
            job.rw_suffix = suffix.map(|s| bytes(s, kb)).transpose()?;
            if job.rw_suffix.is_some() {
                return Ok(Some("the `:N` suffix of rw is not modelled; ignored".into()));
            }
        }
        "bs" | "blocksize" => {
            let v = per_dir(need()?, |p| bytes(p, kb))?;
            for (i, x) in v.into_iter().enumerate() {
                job.bs[i] = x.unwrap_or(4096);
                if job.bs[i] == 0 {
                    return Err("a block size must be positive".into());
                }
            }
        }
        "bssplit" => {
            let v = need()?;
            let parts: Vec<&str> = v.split(',').collect();
            if parts.len() > 3 {
                return Err(format!("{v:?}: at most three lists (read,write,trim)"));
            }
            let lists = parts
                .iter()
                .map(|p| parse_split(p, kb))
                .collect::<Result<Vec<_>, _>>()?;
            for i in 0..3 {
                job.bssplit[i] = lists.get(i).or_else(|| lists.last()).cloned().unwrap_or_default();
            }
        }
        "size" => job.size = Some(parse_size(need()?, kb)?),
        "offset" => job.offset = parse_size(need()?, kb)?,
        "nrfiles" | "nr_files" => job.nrfiles = positive(need()?)?,
        "numjobs" => job.numjobs = positive(need()?)?,
        "iodepth" => job.iodepth = positive(need()?)?,
        "thinktime" => job.thinktime_us = parse_time_us(need()?, 1)?,
        "rate_iops" => {
            let v = per_dir(need()?, int)?;
            job.rate_iops = v;
        }
        "fsync" => job.fsync = u32::try_from(int(need()?)?).map_err(|_| "too large".to_string())?,
        "rwmixread" => job.rwmixread = pct(need()?)?,
        "rwmixwrite" => job.rwmixread = 100 - pct(need()?)?,
        "random_distribution" => job.random_distribution = parse_distribution(need()?)?,
        "runtime" | "timeout" => job.runtime_us = Some(parse_time_us(need()?, 1_000_000)?),
        "time_based" => job.time_based = value.map(boolean).transpose()?.unwrap_or(true),
        "startdelay" => job.startdelay_us = parse_time_us(need()?, 1_000_000)?,
        "filename" => job.filename = Some(need()?.to_string()),
        "direct" => job.direct = value.map(boolean).transpose()?.unwrap_or(true),
        "buffered" => job.direct = !value.map(boolean).transpose()?.unwrap_or(true),
        "ioengine" => job.ioengine = Some(need()?.to_string()),
        "kb_base" => {
            job.kb_base = match int(need()?)? {
                1000 => 1000,
                1024 => 1024,
                v => return Err(format!("{v} is not 1000 or 1024")),
            }
        }
        k if SILENT.contains(&k) => {}
        k if crate::fio_options::is_fio_option(k) => {
            return Ok(Some("a fio option hvio does not model; ignored".into()))
        }
        k => {
            let written = value.map_or_else(|| k.to_string(), |v| format!("{k}={v}"));
            return Err(format!(
                "Bad option <{}>: not an option fio knows{}",
                hvio_core::message::shorten(&written),
                hvio_core::message::hint(k, MODELLED.iter().chain(crate::fio_options::FIO_OPTIONS).copied())
            ));
        }
    }
    Ok(None)
}

fn positive(s: &str) -> Result<u32, String> {
    let v = int(s)?;
    u32::try_from(v)
        .ok()
        .filter(|&v| v > 0)
        .ok_or_else(|| format!("{s:?} must be a positive integer"))
}

fn pct(s: &str) -> Result<u32, String> {
    let v = int(s)?;
    u32::try_from(v)
        .ok()
        .filter(|&v| v <= 100)
        .ok_or_else(|| format!("{s:?} must be 0-100"))
}

/// Parses a job file from disk.
pub fn parse_job_file(path: impl AsRef<Path>) -> Result<FioJobFile, FioError> {
    let mut lines = Vec::new();
    load(path.as_ref(), 0, &mut 0, &mut lines)?;
    resolve(lines)
}

/// Parses job-file text; `origin` names it in messages and anchors relative `include`s.
pub fn parse_job_str(text: &str, origin: &str) -> Result<FioJobFile, FioError> {
    let mut lines = Vec::new();
    load_text(text, &PathBuf::from(origin), 0, &mut 0, &mut lines)?;
    resolve(lines)
}

fn resolve(lines: Vec<Line>) -> Result<FioJobFile, FioError> {
    // Group the option lines by section.
    let mut sections: Vec<(String, Vec<&Line>)> = Vec::new();
    for l in &lines {
        let t = l.text.trim();
        if t.is_empty() || t.starts_with(';') || t.starts_with('#') {
            continue;
        }
        let bad = |option: &str, message: String| FioError::Bad {
            file: l.file.clone(),
            line: l.no,
            option: option.to_string(),
            message,
        };
        if let Some(rest) = t.strip_prefix('[') {
            let name = rest
                .strip_suffix(']')
                .ok_or_else(|| bad("section", format!("{t:?} is not `[name]`")))?
                .trim()
                .to_string();
            if name.is_empty() {
                return Err(bad("section", "empty section name".into()));
            }
            sections.push((name, Vec::new()));
            continue;
        }
        match sections.last_mut() {
            Some((_, opts)) => opts.push(l),
            None => return Err(bad(t, "option outside of a [section]".into())),
        }
    }
    let mut out = FioJobFile::default();
    let mut global = FioJob::default();
    for (section, opts) in sections {
        let mut job = global.clone();
        if section != "global" {
            job.name = String::new();
        }
        let split = |l: &Line| -> (String, Option<String>) {
            let t = l.text.trim();
            match t.split_once('=') {
                Some((k, v)) => (k.trim().to_string(), Some(v.trim().to_string())),
                None => (t.to_string(), None),
            }
        };
        // fio sorts a section's options by priority: kb_base applies to every
        // value of the section wherever it is written.
        let kb_first = opts.iter().filter(|l| split(l).0 == "kb_base");
        let rest = opts.iter().filter(|l| split(l).0 != "kb_base");
        for l in kb_first.chain(rest) {
            let (key, value) = split(l);
            let bad = |message: String, quoted: &[&str]| FioError::Bad {
                file: l.file.clone(),
                line: l.no,
                option: hvio_core::message::shorten(&key).into_owned(),
                message: hvio_core::message::cut_quotes(&message, quoted),
            };
            let raw = value.as_deref().unwrap_or_default();
            let expanded = value.as_deref().map(expand).transpose().map_err(|m| bad(m, &[raw]))?;
            // An error about a value made by `${VAR}` says what it became.
            let expansion = match (&value, &expanded) {
                (Some(v), Some(e)) if v != e => format!(" ({v:?} expands to {e:?})"),
                _ => String::new(),
            };
            match apply(&mut job, &key, expanded.as_deref()).map_err(|m| m + &expansion) {
                Ok(None) => {}
                Ok(Some(message)) => out.warnings.push(FioWarning {
                    file: l.file.clone(),
                    line: l.no,
                    section: section.clone(),
                    option: key.clone(),
                    message,
                }),
                Err(m) => return Err(bad(m, &[raw, expanded.as_deref().unwrap_or_default()])),
            }
        }
        if section == "global" {
            global = job;
        } else {
            if job.name.is_empty() {
                job.name = section;
            }
            out.jobs.push(job);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_follow_fio() {
        let b = |s: &str, k: u32| parse_size(s, k).unwrap();
        assert_eq!(b("4k", 1024), SizeSpec::Bytes(4096));
        assert_eq!(b("4KB", 1024), SizeSpec::Bytes(4096));
        assert_eq!(b("1m", 1024), SizeSpec::Bytes(1 << 20));
        assert_eq!(b("1mi", 1024), SizeSpec::Bytes(1 << 20));
        assert_eq!(b("1mib", 1024), SizeSpec::Bytes(1_000_000));
        assert_eq!(b("1m", 1000), SizeSpec::Bytes(1_000_000));
        assert_eq!(b("1mib", 1000), SizeSpec::Bytes(1 << 20));
        assert_eq!(b("0x1000", 1024), SizeSpec::Bytes(4096));
        assert_eq!(b("512b", 1024), SizeSpec::Bytes(512));
        assert_eq!(b("50%", 1024), SizeSpec::Percent(50));
        assert!(parse_size("-4k", 1024).is_err());
        assert!(parse_size("4q", 1024).is_err());
        assert!(parse_size("(4*1024)", 1024).is_err());
        assert_eq!(parse_time_us("10", 1_000_000).unwrap(), 10_000_000);
        assert_eq!(parse_time_us("10", 1).unwrap(), 10);
        assert_eq!(parse_time_us("2m", 1).unwrap(), 120_000_000);
        assert_eq!(parse_time_us("5ms", 1_000_000).unwrap(), 5000);
    }

    #[test]
    fn per_direction_lists() {
        let f = |s: &str| per_dir(s, |p| bytes(p, 1024)).unwrap();
        assert_eq!(f("256k"), [Some(262144); 3]);
        assert_eq!(f("8k,32k"), [Some(8192), Some(32768), Some(32768)]);
        assert_eq!(f("8k,32k,"), [Some(8192), Some(32768), None]);
        assert_eq!(f(",8k"), [None, Some(8192), Some(8192)]);
        assert_eq!(f(",8k,"), [None, Some(8192), None]);
    }

    #[test]
    fn bssplit_fills_missing_percentages() {
        assert_eq!(parse_split("4k/50:8k/50", 1024).unwrap(), [(4096, 50), (8192, 50)]);
        assert_eq!(
            parse_split("4k/40:8k:16k", 1024).unwrap(),
            [(4096, 40), (8192, 30), (16384, 30)]
        );
        assert_eq!(parse_split("4k", 1024).unwrap(), [(4096, 100)]);
        assert!(parse_split("4k/80:8k:16k/30", 1024).is_ok());
        assert!(parse_split("4k/80:8k:16k:32k/30", 1024).is_err());
    }

    #[test]
    fn sections_globals_and_warnings() {
        std::env::set_var("HVIO_TEST_SZ", "64m");
        let text = "; comment\n[global]\nrw=randread\nsize=${HVIO_TEST_SZ}\nnorandommap\n[a]\nioengine=libaio\ndirect=1\nbs=4k,8k\nnumjobs=2\ntime_based\nruntime=30\n[global]\nrw=write\n[b]\nbssplit=4k/50:64k/50,16k\nrandom_distribution=zipf:1.2\nthinktime=2ms\nrate_iops=100,50\nrwmixwrite=30\n";
        let f = parse_job_str(text, "t.fio").unwrap();
        assert_eq!(f.jobs.len(), 2);
        let a = &f.jobs[0];
        assert_eq!(
            (a.name.as_str(), a.rw, a.bs, a.numjobs),
            ("a", FioRw::RandRead, [4096, 8192, 8192], 2)
        );
        assert_eq!(a.size, Some(SizeSpec::Bytes(64 << 20)));
        assert!(a.time_based);
        assert_eq!(a.runtime_us, Some(30_000_000));
        let b = &f.jobs[1];
        assert_eq!(b.rw, FioRw::Write);
        assert_eq!(b.bssplit[0], [(4096, 50), (65536, 50)]);
        assert_eq!(b.bssplit[1], [(16384, 100)]);
        assert_eq!(b.random_distribution, RandomDistribution::Zipf(1.2));
        assert_eq!(b.thinktime_us, 2000);
        assert_eq!(b.rate_iops, [Some(100), Some(50), Some(50)]);
        assert_eq!(b.rwmixread, 70);
        assert_eq!(f.warnings.len(), 1, "{:?}", f.warnings);
        assert_eq!(f.warnings[0].option, "norandommap");
        assert_eq!(f.warnings[0].section, "global");
        assert!(f.warnings[0].to_string().contains("t.fio:5: [global] norandommap"));
        assert_eq!((a.ioengine.as_deref(), a.direct), (Some("libaio"), true));
        assert_eq!(
            (b.ioengine.as_deref(), b.direct),
            (None, false),
            "fio's defaults: psync, buffered"
        );
        let f = parse_job_str("[x]\nbuffered=0\n[y]\ndirect\nbuffered\n", "d.fio").unwrap();
        assert_eq!((f.jobs[0].direct, f.jobs[1].direct), (true, false));
    }

    #[test]
    fn errors_name_file_line_and_option() {
        let e = parse_job_str("[j]\nrw=sideways\n", "x.fio").unwrap_err();
        assert!(e.to_string().starts_with("x.fio:2: rw: "), "{e}");
        let e = parse_job_str("size=1m\n", "x.fio").unwrap_err();
        assert!(e.to_string().contains("outside of a [section]"), "{e}");
        let e = parse_job_str("[j]\nrandom_distribution=zipf:1\n", "x.fio").unwrap_err();
        assert!(e.to_string().contains("zipf"), "{e}");
        let e = parse_job_str("[j]\nnumjobs=0\n", "x.fio").unwrap_err();
        assert!(e.to_string().contains("numjobs"), "{e}");
    }

    #[test]
    fn what_fio_refuses_is_an_error_and_a_real_option_ignored_is_a_warning() {
        let err = |text: &str| parse_job_str(text, "j.fio").unwrap_err().to_string();
        assert_eq!(
            err("[a]\niodpeth=8\n"),
            "j.fio:2: iodpeth: Bad option <iodpeth=8>: not an option fio knows; did you mean `iodepth`?"
        );
        assert!(
            err("[a]\nbz=8k\n").ends_with("did you mean `bs`?"),
            "{}",
            err("[a]\nbz=8k\n")
        );
        assert_eq!(
            err("[a]\nxyzzy\n"),
            "j.fio:2: xyzzy: Bad option <xyzzy>: not an option fio knows"
        );
        assert_eq!(
            err("[a]\nbs=\n"),
            "j.fio:2: bs: \"\" gives no value (fio: \"failed parsing\")"
        );
        std::env::remove_var("HVIO_TEST_UNSET_BS");
        assert_eq!(
            err("[a]\nbs=${HVIO_TEST_UNSET_BS}\n"),
            "j.fio:2: bs: \"\" gives no value (fio: \"failed parsing\") (\"${HVIO_TEST_UNSET_BS}\" expands to \"\")"
        );
        assert_eq!(
            err("[a]\ninclude\n"),
            "j.fio:2: include: names no file (fio: `include FILE`)"
        );
        assert_eq!(
            err("[a]\ninclude   \n"),
            "j.fio:2: include: names no file (fio: `include FILE`)"
        );
        let long = format!("[a]\nnope={}\n", "x".repeat(10_000));
        assert!(err(&long).len() < 300, "{}", err(&long));
        let f = parse_job_str("[a]\nnorandommap\nbs=,8k\n", "j.fio").unwrap();
        assert_eq!(f.warnings[0].message, "a fio option hvio does not model; ignored");
        assert_eq!(f.jobs[0].bs[1], 8192);
        assert!(MODELLED.iter().all(|m| crate::fio_options::is_fio_option(m)));
    }
}
