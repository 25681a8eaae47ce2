//! The streaming reader: format detection, bad-record policy, time checks.

use crate::error::{snippet, Loc, TraceError};
use crate::formats;
use crate::input::Input;
use crate::parse::Devices;
use crate::record::TraceRecord;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// A trace format hvio reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// `blkparse` text output (default format, or a `-f`/`-F` format given in [`ReadOptions::blkparse_format`]).
    Blkparse,
    /// `blktrace` binary (`struct blk_io_trace`), one file, per-CPU files, or `blkparse -d` output.
    Blktrace,
    /// fio iolog version 2.
    Iolog2,
    /// fio iolog version 3.
    Iolog3,
    /// MSR Cambridge CSV.
    Msr,
    /// SPC (UMass Financial / WebSearch).
    Spc,
    /// Alibaba block traces 2020 (`io_traces.csv`).
    Alibaba,
    /// Tencent CBS.
    Tencent,
    /// FIU SRCMap / homes / webmail / mail.
    Fiu,
    /// DiskSim ASCII.
    Disksim,
    /// MQSim ASCII.
    Mqsim,
    /// CloudPhysics/VMware vSCSI binary, version 1 (32-byte records).
    Vscsi1,
    /// CloudPhysics/VMware vSCSI binary, version 2 (40-byte records).
    Vscsi2,
}

impl Format {
    /// Every format, in the order `names` lists them.
    pub const ALL: [Format; 13] = [
        Format::Blkparse,
        Format::Blktrace,
        Format::Iolog2,
        Format::Iolog3,
        Format::Msr,
        Format::Spc,
        Format::Alibaba,
        Format::Tencent,
        Format::Fiu,
        Format::Disksim,
        Format::Mqsim,
        Format::Vscsi1,
        Format::Vscsi2,
    ];

    /// The name the CLI and Python take.
    pub fn name(self) -> &'static str {
        match self {
            Format::Blkparse => "blkparse",
            Format::Blktrace => "blktrace",
            Format::Iolog2 => "iolog2",
            Format::Iolog3 => "iolog3",
            Format::Msr => "msr",
            Format::Spc => "spc",
            Format::Alibaba => "alibaba",
            Format::Tencent => "tencent",
            Format::Fiu => "fiu",
            Format::Disksim => "disksim",
            Format::Mqsim => "mqsim",
            Format::Vscsi1 => "vscsi1",
            Format::Vscsi2 => "vscsi2",
        }
    }

    /// Whether the format is binary (no lines).
    pub fn is_binary(self) -> bool {
        matches!(self, Format::Blktrace | Format::Vscsi1 | Format::Vscsi2)
    }

    /// Every format's name, comma-separated.
    pub fn names() -> String {
        Format::ALL.iter().map(|f| f.name()).collect::<Vec<_>>().join(", ")
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Format {
    type Err = TraceError;
    fn from_str(s: &str) -> Result<Self, TraceError> {
        let l = s.to_ascii_lowercase();
        let alias = match l.as_str() {
            "blkparse-text" | "blkparse_text" => "blkparse",
            "blktrace-bin" | "bin" => "blktrace",
            "fio2" | "iolog-v2" => "iolog2",
            "fio3" | "iolog-v3" => "iolog3",
            "umass" => "spc",
            "tencent-cbs" | "cbs" => "tencent",
            "vscsi" | "vscsi-v1" => "vscsi1",
            "vscsi-v2" => "vscsi2",
            x => x,
        };
        Format::ALL.iter().copied().find(|f| f.name() == alias).ok_or_else(|| {
            let hint = hvio_core::message::hint(s, Format::ALL.iter().map(|f| f.name()));
            TraceError::Usage(format!("unknown trace format {s:?}{hint} (known: {})", Format::names()))
        })
    }
}

/// Which blktrace event stands for a request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BlkAction {
    /// `Q`: the request as submitted to the block layer (what fio replays).
    #[default]
    Queue,
    /// `D`: the request as issued to the driver (after merging and scheduling).
    Issue,
    /// `C`: the completion.
    Complete,
}

impl BlkAction {
    /// blktrace's letter for the action.
    pub fn letter(self) -> u8 {
        match self {
            BlkAction::Queue => b'Q',
            BlkAction::Issue => b'D',
            BlkAction::Complete => b'C',
        }
    }
    pub(crate) fn code(self) -> u32 {
        match self {
            BlkAction::Queue => 1,
            BlkAction::Issue => 7,
            BlkAction::Complete => 8,
        }
    }
}

impl FromStr for BlkAction {
    type Err = TraceError;
    fn from_str(s: &str) -> Result<Self, TraceError> {
        match s.to_ascii_lowercase().as_str() {
            "q" | "queue" => Ok(BlkAction::Queue),
            "d" | "issue" => Ok(BlkAction::Issue),
            "c" | "complete" => Ok(BlkAction::Complete),
            _ => Err(TraceError::Usage(format!(
                "unknown blktrace action {s:?}; use Q, D or C"
            ))),
        }
    }
}

/// Options of a trace reader.
#[derive(Clone, Debug)]
pub struct ReadOptions {
    /// The format; `None` detects it from the content.
    pub format: Option<Format>,
    /// Count and skip malformed records instead of stopping at the first one.
    pub skip_bad: bool,
    /// Accept records whose time goes backwards (otherwise an error, or a skip with `skip_bad`).
    pub allow_unsorted: bool,
    /// blktrace/blkparse: which event is the request.
    pub blk_action: BlkAction,
    /// blkparse: the `-f` format string (or `A,format` for `-F A,format`) the text was printed with.
    pub blkparse_format: Option<String>,
    /// MQSim: nanoseconds per trace time unit (MQSim's `Time_Unit`; 1 = NANOSECOND).
    pub mqsim_time_unit_ns: u64,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            format: None,
            skip_bad: false,
            allow_unsorted: false,
            blk_action: BlkAction::Queue,
            blkparse_format: None,
            mqsim_time_unit_ns: 1,
        }
    }
}

/// What was expected where a text line failed to parse.
pub(crate) struct Bad(pub Cow<'static, str>);

impl From<&'static str> for Bad {
    fn from(s: &'static str) -> Self {
        Bad(Cow::Borrowed(s))
    }
}
impl From<String> for Bad {
    fn from(s: String) -> Self {
        Bad(Cow::Owned(s))
    }
}

/// One text format: turns a line into a record, nothing, or a complaint.
pub(crate) trait LineFormat: Send {
    fn parse(&mut self, line: &[u8], devs: &mut Devices) -> Result<Option<TraceRecord>, Bad>;
    /// Lines read that were not requests, by reason (nonzero counts only).
    fn skipped_lines(&self) -> Vec<(String, u64)> {
        Vec::new()
    }
}

/// A source of records (one file, or merged per-CPU files).
pub(crate) trait Source: Send {
    fn next(&mut self, devs: &mut Devices) -> Result<Option<(TraceRecord, Loc)>, TraceError>;
    /// Lines read that were not requests, by reason (nonzero counts only).
    fn skipped_lines(&self) -> Vec<(String, u64)> {
        Vec::new()
    }
}

pub(crate) struct TextSource<F> {
    input: Input,
    path: String,
    line: u64,
    fmt: F,
}

impl<F: LineFormat> TextSource<F> {
    pub fn new(input: Input, fmt: F) -> Self {
        let path = input.path.clone();
        TextSource {
            input,
            path,
            line: 0,
            fmt,
        }
    }
}

impl<F: LineFormat> Source for TextSource<F> {
    fn next(&mut self, devs: &mut Devices) -> Result<Option<(TraceRecord, Loc)>, TraceError> {
        let TextSource { input, path, line, fmt } = self;
        loop {
            let next = input.next_line().map_err(|e| match e {
                // A line too long to hold: name it.
                TraceError::Malformed {
                    path,
                    loc: Loc::File,
                    expected,
                    found,
                } => TraceError::Malformed {
                    path,
                    loc: Loc::Line(*line + 1),
                    expected,
                    found,
                },
                e => e,
            });
            if next.is_err() {
                *line += 1;
            }
            let Some(l) = next? else {
                return Ok(None);
            };
            *line += 1;
            let l = crate::parse::trim(l);
            if l.is_empty() {
                continue;
            }
            match fmt.parse(l, devs) {
                Ok(Some(r)) => return Ok(Some((r, Loc::Line(*line)))),
                Ok(None) => continue,
                Err(Bad(expected)) => {
                    return Err(TraceError::Malformed {
                        path: path.clone(),
                        loc: Loc::Line(*line),
                        expected: expected.into_owned(),
                        found: snippet(l),
                    })
                }
            }
        }
    }

    fn skipped_lines(&self) -> Vec<(String, u64)> {
        self.fmt.skipped_lines()
    }
}

/// A streaming trace reader: an iterator of records in constant memory.
pub struct TraceReader {
    path: String,
    format: Format,
    src: Box<dyn Source>,
    devices: Devices,
    skip_bad: bool,
    allow_unsorted: bool,
    skipped: u64,
    last_time: Option<u64>,
    failed: bool,
}

impl TraceReader {
    /// Opens a trace file (gzip-compressed or not), detecting its format unless given.
    ///
    /// For blktrace, a per-CPU file `NAME.blktrace.N` (or the bare `NAME` when
    /// `NAME.blktrace.0` exists) opens all of `NAME.blktrace.*`, merged by time.
    pub fn open(path: impl AsRef<Path>, opts: &ReadOptions) -> Result<Self, TraceError> {
        let path = path.as_ref();
        if !path.exists() {
            let set = blktrace_set(path);
            if !set.is_empty() {
                return Self::open_blktrace_set(&set, opts);
            }
        }
        let mut input = Input::open(path)?;
        let format = match opts.format {
            Some(f) => f,
            None => detect(&mut input)?,
        };
        if format == Format::Blktrace {
            let set = blktrace_set(path);
            if set.len() > 1 {
                return Self::open_blktrace_set(&set, opts);
            }
        }
        Self::build(input, format, opts)
    }

    /// Reads from any byte stream (gzip detected), e.g. standard input.
    pub fn from_reader(name: &str, r: Box<dyn Read + Send>, opts: &ReadOptions) -> Result<Self, TraceError> {
        let mut input = Input::with_gzip_detection(name.to_string(), r)?;
        let format = match opts.format {
            Some(f) => f,
            None => detect(&mut input)?,
        };
        Self::build(input, format, opts)
    }

    /// Opens several blktrace binary files (one per CPU) merged by time.
    pub fn open_blktrace_set(paths: &[PathBuf], opts: &ReadOptions) -> Result<Self, TraceError> {
        let mut inputs = Vec::new();
        for p in paths {
            inputs.push(Input::open(p)?);
        }
        let name = paths.first().map(|p| p.display().to_string()).unwrap_or_default();
        let src = formats::blktrace::Merged::new(inputs, opts.blk_action)?;
        Ok(Self::with_source(name, Format::Blktrace, Box::new(src), opts))
    }

    fn build(input: Input, format: Format, opts: &ReadOptions) -> Result<Self, TraceError> {
        let name = input.path.clone();
        let src = formats::source(input, format, opts)?;
        Ok(Self::with_source(name, format, src, opts))
    }

    fn with_source(path: String, format: Format, src: Box<dyn Source>, opts: &ReadOptions) -> Self {
        TraceReader {
            path,
            format,
            src,
            devices: Devices::default(),
            skip_bad: opts.skip_bad,
            allow_unsorted: opts.allow_unsorted,
            skipped: 0,
            last_time: None,
            failed: false,
        }
    }

    /// The format being read.
    pub fn format(&self) -> Format {
        self.format
    }
    /// The input's name.
    pub fn path(&self) -> &str {
        &self.path
    }
    /// Names of the devices seen so far; a record's `device` indexes this.
    pub fn devices(&self) -> &[String] {
        self.devices.names()
    }
    /// Bad records counted and skipped (with `skip_bad`).
    pub fn skipped(&self) -> u64 {
        self.skipped
    }
    /// Lines read so far that were not requests (comments, other blkparse
    /// actions, summaries...), by reason; only reasons that occurred.
    pub fn skipped_lines(&self) -> Vec<(String, u64)> {
        self.src.skipped_lines()
    }
}

impl Iterator for TraceReader {
    type Item = Result<TraceRecord, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.failed {
                return None;
            }
            match self.src.next(&mut self.devices) {
                Ok(None) => return None,
                Ok(Some((r, loc))) => {
                    if r.sector
                        .checked_add(r.sectors as u64)
                        .is_none_or(|e| e > crate::record::MAX_SECTOR_END)
                    {
                        let e = TraceError::Malformed {
                            path: self.path.clone(),
                            loc,
                            expected: format!(
                                "a request that ends within 2^64 bytes (sector + count <= {})",
                                crate::record::MAX_SECTOR_END
                            ),
                            found: format!("sector {} + {}", r.sector, r.sectors),
                        };
                        if self.skip_bad {
                            self.skipped += 1;
                            continue;
                        }
                        self.failed = true;
                        return Some(Err(e));
                    }
                    if !self.allow_unsorted {
                        if let Some(prev) = self.last_time {
                            if r.time < prev {
                                if self.skip_bad {
                                    self.skipped += 1;
                                    continue;
                                }
                                self.failed = true;
                                return Some(Err(TraceError::NonMonotonic {
                                    path: self.path.clone(),
                                    loc,
                                    prev,
                                    time: r.time,
                                }));
                            }
                        }
                    }
                    self.last_time = Some(r.time);
                    return Some(Ok(r));
                }
                Err(e) if self.skip_bad && e.is_skippable() => {
                    self.skipped += 1;
                }
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

/// The per-CPU files of a blktrace run that `path` names, sorted by CPU.
fn blktrace_set(path: &Path) -> Vec<PathBuf> {
    let Some(fname) = path.file_name().and_then(|f| f.to_str()) else {
        return Vec::new();
    };
    let base = match fname.rfind(".blktrace.") {
        Some(i) if fname[i + 10..].chars().all(|c| c.is_ascii_digit()) && i + 10 < fname.len() => &fname[..i],
        _ => fname,
    };
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let prefix = format!("{base}.blktrace.");
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<(u32, PathBuf)> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let n = e.file_name().to_str()?.to_string();
            let cpu = n.strip_prefix(&prefix)?.parse::<u32>().ok()?;
            Some((cpu, e.path()))
        })
        .collect();
    found.sort();
    found.into_iter().map(|(_, p)| p).collect()
}

/// Detects the format from the first bytes of the (decompressed) input.
pub(crate) fn detect(input: &mut Input) -> Result<Format, TraceError> {
    let path = input.path.clone();
    let head = input.peek(1 << 16).map_err(|e| TraceError::io(&path, e))?.to_vec();
    let unknown = |why: String| TraceError::UnknownFormat {
        path: path.clone(),
        why,
        known: Format::names(),
    };
    if head.is_empty() {
        return Err(unknown("the input is empty".into()));
    }
    if head.len() >= 4 {
        let m = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        if m & 0xffff_ff00 == formats::blktrace::MAGIC || m.swap_bytes() & 0xffff_ff00 == formats::blktrace::MAGIC {
            return Ok(Format::Blktrace);
        }
    }
    let binary = head
        .iter()
        .take(4096)
        .any(|&c| c == 0 || (c < 0x20 && !matches!(c, b'\n' | b'\r' | b'\t')));
    if binary {
        if let Some(v) = formats::vscsi::detect_version(&head) {
            return Ok(v);
        }
        return Err(unknown(
            "binary data that is neither blktrace (magic 0x656174) nor vSCSI v1/v2".into(),
        ));
    }
    formats::detect_text(&head).ok_or_else(|| {
        let first = head
            .split(|&c| c == b'\n')
            .find(|l| !crate::parse::trim(l).is_empty())
            .unwrap_or(&[]);
        unknown(format!("no known format matches the first line {:?}", snippet(first)))
    })
}

/// A [`TraceReader`] running on its own thread, handing records over in
/// batches: the consumer (a replay) pays a channel hand-off per batch instead
/// of the parsing. Made by [`TraceReader::prefetch`].
pub struct Prefetch {
    rx: std::sync::mpsc::Receiver<Vec<Result<TraceRecord, TraceError>>>,
    cur: std::vec::IntoIter<Result<TraceRecord, TraceError>>,
    handle: Option<std::thread::JoinHandle<TraceReader>>,
}

impl TraceReader {
    /// Reads ahead on a background thread, `batch` records at a time (at most
    /// four batches ahead, so memory stays bounded).
    pub fn prefetch(mut self, batch: usize) -> Prefetch {
        let batch = batch.max(1);
        let (tx, rx) = std::sync::mpsc::sync_channel(4);
        let handle = std::thread::spawn(move || {
            loop {
                let mut v = Vec::with_capacity(batch);
                let mut end = false;
                while v.len() < batch {
                    match self.next() {
                        Some(x) => {
                            let err = x.is_err();
                            v.push(x);
                            if err {
                                end = true;
                                break;
                            }
                        }
                        None => {
                            end = true;
                            break;
                        }
                    }
                }
                if (!v.is_empty() && tx.send(v).is_err()) || end {
                    break;
                }
            }
            self
        });
        Prefetch {
            rx,
            cur: Vec::new().into_iter(),
            handle: Some(handle),
        }
    }
}

impl Prefetch {
    /// Waits for the reader thread and returns the reader (for `skipped`, `devices`).
    pub fn finish(mut self) -> Option<TraceReader> {
        let h = self.handle.take()?;
        drop(std::mem::replace(&mut self.rx, std::sync::mpsc::sync_channel(0).1));
        h.join().ok()
    }
}

impl Iterator for Prefetch {
    type Item = Result<TraceRecord, TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(x) = self.cur.next() {
                return Some(x);
            }
            self.cur = self.rx.recv().ok()?.into_iter();
        }
    }
}
