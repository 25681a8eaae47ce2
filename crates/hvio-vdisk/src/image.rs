//! The reshaped image file (`[store] layout = "reshaped"`): paper 001's
//! sequentializer as an on-disk format that `hvio serve` exports.
//!
//! The file is a header, then the reshaper's layout (`hvio_reshape::Layout`,
//! in order: base image if any, metadata region, data region, log area, two
//! checkpoint slots):
//!
//! ```text
//! byte 0         superblock (4 KiB): magic "HVIORSHP", version, flags (bit 0: clean),
//!                disk bytes, header bytes, layout bytes, generation, crc32c, the
//!                reshape configuration as TOML
//! byte 4096      the same superblock again (the backup copy)
//! HEADER_BYTES   image sector 0 of the layout (1 MiB: regions stay 1 MiB aligned)
//! ```
//!
//! This module is the format without a daemon: create, open and recover,
//! check every invariant, repair, compact; `hvio image` and the daemon's
//! start both use it. Reading never writes: an image with something wrong is
//! refused with an [`ImageError`] naming the file and the problem, and only
//! [`repair`] changes it. `docs/reshaped-image.md` has the durability contract.

use hvio_reshape::encoding::{self, DecodeError, Entry, Mapping};
use hvio_reshape::{Layout, RecoveryReport, Region, ReshapeConfig, Reshaper, Target};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use thiserror::Error;

/// What a superblock starts with.
pub const MAGIC: &[u8; 8] = b"HVIORSHP";
/// The format version written; readers accept this one and older.
pub const VERSION: u16 = 1;
/// Bytes of one superblock copy.
pub const SUPERBLOCK_BYTES: u64 = 4096;
/// Where image sector 0 of the layout is in the file.
pub const HEADER_BYTES: u64 = 1 << 20;
const FLAG_CLEAN: u16 = 1;
const FIXED_BYTES: usize = 56;
const SECTOR: u64 = 512;

/// Why an image cannot be used; every message names the file.
#[derive(Debug, Error)]
pub enum ImageError {
    /// A read or write of the image failed.
    #[error("image {path}: {what}: {err}")]
    Io {
        /// The image.
        path: PathBuf,
        /// What was being done.
        what: &'static str,
        /// What the operating system said.
        err: std::io::Error,
    },
    /// The image is not usable as it is.
    #[error("image {path}: {problem}")]
    Bad {
        /// The image.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// The image is damaged in a way `hvio image repair` can fix.
    #[error("image {path}: {problem} (`hvio image repair {path}` fixes it)")]
    Repairable {
        /// The image.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
}

impl ImageError {
    fn bad(path: &Path, problem: impl Into<String>) -> ImageError {
        ImageError::Bad {
            path: path.to_path_buf(),
            problem: problem.into(),
        }
    }
    fn repairable(path: &Path, problem: impl Into<String>) -> ImageError {
        ImageError::Repairable {
            path: path.to_path_buf(),
            problem: problem.into(),
        }
    }
    /// Whether `hvio image repair` can fix it.
    pub fn is_repairable(&self) -> bool {
        matches!(self, ImageError::Repairable { .. })
    }
}

fn io_err<'a>(path: &'a Path, what: &'static str) -> impl FnOnce(std::io::Error) -> ImageError + 'a {
    move |err| ImageError::Io {
        path: path.to_path_buf(),
        what,
        err,
    }
}

/// The decoded superblock.
#[derive(Clone, Debug, PartialEq)]
pub struct Superblock {
    /// The format version.
    pub version: u16,
    /// Set by an orderly stop, cleared before the first write after start.
    pub clean: bool,
    /// The guest-visible disk.
    pub disk_bytes: u64,
    /// Where the layout starts in the file.
    pub header_bytes: u64,
    /// Bytes of the layout (base, regions, log, checkpoint slots).
    pub layout_bytes: u64,
    /// Times the image was opened for writing.
    pub generation: u64,
    /// The reshaping layout's keys.
    pub config: ReshapeConfig,
}

impl Superblock {
    /// A superblock for a disk of `disk_bytes` under `config`.
    pub fn new(disk_bytes: u64, config: ReshapeConfig) -> Result<Superblock, hvio_core::ConfigError> {
        let layout = config.layout(disk_bytes)?;
        Ok(Superblock {
            version: VERSION,
            clean: true,
            disk_bytes,
            header_bytes: HEADER_BYTES,
            layout_bytes: layout.image_sectors * SECTOR,
            generation: 0,
            config,
        })
    }

    /// The layout the configuration gives (checked when decoded).
    pub fn layout(&self) -> Layout {
        self.config
            .layout(self.disk_bytes)
            .expect("a decoded superblock's configuration was checked")
    }

    /// Bytes the file must have.
    pub fn file_bytes(&self) -> u64 {
        self.header_bytes + self.layout_bytes
    }

    /// Its bytes, checksum included.
    pub fn encode(&self) -> Vec<u8> {
        let config = toml::to_string(&self.config).expect("the reshape configuration serializes");
        let mut b = vec![0u8; SUPERBLOCK_BYTES as usize];
        b[0..8].copy_from_slice(MAGIC);
        b[8..10].copy_from_slice(&self.version.to_le_bytes());
        let flags = if self.clean { FLAG_CLEAN } else { 0 };
        b[10..12].copy_from_slice(&flags.to_le_bytes());
        b[12..16].copy_from_slice(&(config.len() as u32).to_le_bytes());
        b[16..24].copy_from_slice(&self.disk_bytes.to_le_bytes());
        b[24..32].copy_from_slice(&self.header_bytes.to_le_bytes());
        b[32..40].copy_from_slice(&self.layout_bytes.to_le_bytes());
        b[40..48].copy_from_slice(&self.generation.to_le_bytes());
        assert!(
            FIXED_BYTES + config.len() <= b.len(),
            "the reshape configuration fits a superblock"
        );
        b[FIXED_BYTES..FIXED_BYTES + config.len()].copy_from_slice(config.as_bytes());
        let crc = crc32c::crc32c(&b);
        b[48..52].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decode one copy; the error says what is wrong with it.
    pub fn decode(b: &[u8]) -> Result<Superblock, String> {
        if b.len() < SUPERBLOCK_BYTES as usize {
            return Err(format!(
                "superblock cut short ({} of {SUPERBLOCK_BYTES} bytes)",
                b.len()
            ));
        }
        let b = &b[..SUPERBLOCK_BYTES as usize];
        if &b[0..8] != MAGIC {
            return Err(format!(
                "not an hvio reshaped image (magic {:?}, expected {:?})",
                String::from_utf8_lossy(&b[0..8]),
                String::from_utf8_lossy(MAGIC)
            ));
        }
        let u16_at = |at: usize| u16::from_le_bytes(b[at..at + 2].try_into().expect("2 bytes"));
        let u32_at = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"));
        let u64_at = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        let version = u16_at(8);
        if version > VERSION {
            return Err(format!(
                "format version {version} is newer than this hvio's ({VERSION}): use a newer hvio"
            ));
        }
        let stored = u32_at(48);
        let mut digest = b.to_vec();
        digest[48..52].fill(0);
        let computed = crc32c::crc32c(&digest);
        if stored != computed {
            return Err(format!(
                "superblock checksum mismatch (stored {stored:#010x}, computed {computed:#010x}): a torn or damaged write"
            ));
        }
        let len = u32_at(12) as usize;
        if FIXED_BYTES + len > b.len() {
            return Err(format!("superblock configuration length {len} is past the superblock"));
        }
        let text = std::str::from_utf8(&b[FIXED_BYTES..FIXED_BYTES + len])
            .map_err(|e| format!("superblock configuration is not UTF-8: {e}"))?;
        let config: ReshapeConfig =
            toml::from_str(text).map_err(|e| format!("superblock configuration: {}", e.message()))?;
        let sb = Superblock {
            version,
            clean: u16_at(10) & FLAG_CLEAN != 0,
            disk_bytes: u64_at(16),
            header_bytes: u64_at(24),
            layout_bytes: u64_at(32),
            generation: u64_at(40),
            config,
        };
        let layout = sb
            .config
            .layout(sb.disk_bytes)
            .map_err(|e| format!("superblock configuration: {e}"))?;
        if sb.header_bytes < 2 * SUPERBLOCK_BYTES || !sb.header_bytes.is_multiple_of(SUPERBLOCK_BYTES) {
            return Err(format!(
                "header of {} bytes cannot hold two superblocks",
                sb.header_bytes
            ));
        }
        if layout.image_sectors * SECTOR != sb.layout_bytes {
            return Err(format!(
                "layout of {} bytes recorded, the configuration gives {}",
                sb.layout_bytes,
                layout.image_sectors * SECTOR
            ));
        }
        Ok(sb)
    }
}

/// Read the superblock: the primary copy, or an error saying whether the
/// backup could replace it.
pub fn read_superblock(path: &Path, f: &File) -> Result<Superblock, ImageError> {
    let mut b = vec![0u8; 2 * SUPERBLOCK_BYTES as usize];
    let n = read_at_most(f, &mut b, 0).map_err(io_err(path, "read superblock"))?;
    if n < SUPERBLOCK_BYTES as usize {
        return Err(ImageError::bad(
            path,
            format!("{n} bytes long: too short to hold a superblock"),
        ));
    }
    let primary = Superblock::decode(&b[..SUPERBLOCK_BYTES as usize]);
    let backup = Superblock::decode(&b[SUPERBLOCK_BYTES as usize..]);
    match (primary, backup) {
        (Ok(p), _) => Ok(p),
        // A foreign file or a newer format: the backup says nothing better.
        (Err(e), _) if e.starts_with("not an hvio") || e.contains("newer than") => Err(ImageError::bad(path, e)),
        (Err(e), Ok(_)) => Err(ImageError::repairable(
            path,
            format!("primary superblock: {e}; the backup copy at byte {SUPERBLOCK_BYTES} is intact"),
        )),
        (Err(e), Err(e2)) => Err(ImageError::bad(
            path,
            format!("primary superblock: {e}; backup copy: {e2}"),
        )),
    }
}

fn read_at_most(f: &File, buf: &mut [u8], off: u64) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match f.read_at(&mut buf[done..], off + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// Write both superblock copies, each made durable before the next: a torn
/// write can damage at most one.
pub fn write_superblock(path: &Path, f: &File, sb: &Superblock) -> Result<(), ImageError> {
    let b = sb.encode();
    for at in [0, SUPERBLOCK_BYTES] {
        f.write_all_at(&b, at).map_err(io_err(path, "write superblock"))?;
        f.sync_data().map_err(io_err(path, "sync superblock"))?;
    }
    Ok(())
}

/// Create a reshaped image at `path` (refused if something is there).
pub fn create(path: &Path, disk_bytes: u64, config: ReshapeConfig) -> Result<Superblock, ImageError> {
    let sb = Superblock::new(disk_bytes, config).map_err(|e| ImageError::bad(path, e.to_string()))?;
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(io_err(path, "create"))?;
    let r = (|| {
        f.set_len(sb.file_bytes()).map_err(io_err(path, "size"))?;
        write_superblock(path, &f, &sb)
    })();
    if r.is_err() {
        let _ = std::fs::remove_file(path);
    }
    r.map(|()| sb)
}

/// The areas of the file, by name, in bytes (start, end).
pub fn areas(sb: &Superblock) -> Vec<(&'static str, u64, u64)> {
    let l = sb.layout();
    let at = |a: hvio_reshape::Area| (sb.header_bytes + a.start * SECTOR, sb.header_bytes + a.end() * SECTOR);
    let mut v = vec![("superblocks", 0, 2 * SUPERBLOCK_BYTES)];
    if l.base.sectors > 0 {
        let (s, e) = at(l.base);
        v.push(("base image", s, e));
    }
    for (name, a) in [
        ("metadata region", l.meta),
        ("data region", l.data),
        ("log area", l.log),
        ("checkpoint slot 0", l.checkpoints[0]),
        ("checkpoint slot 1", l.checkpoints[1]),
    ] {
        let (s, e) = at(a);
        v.push((name, s, e));
    }
    v
}

/// An image opened and recovered (nothing written).
pub struct Opened {
    /// The superblock read.
    pub superblock: Superblock,
    /// The reshaper, tables rebuilt.
    pub reshaper: Reshaper,
    /// What recovery found.
    pub report: RecoveryReport,
    /// Reading the log and checkpoints and rebuilding the table.
    pub took: Duration,
    /// Bytes of log and checkpoint read.
    pub bytes_read: u64,
    /// The sequence numbers of the valid checkpoints in slots 0 and 1.
    pub checkpoint_seqs: [Option<u64>; 2],
    /// Damage recovery cannot silently skip, if any (see [`log_damage`]).
    pub damage: Option<String>,
}

/// Open the image read-only and recover its table from the checkpoints and the log.
pub fn open(path: &Path) -> Result<(File, Opened), ImageError> {
    let f = File::open(path).map_err(io_err(path, "open"))?;
    let opened = recover(path, &f)?;
    Ok((f, opened))
}

/// Recover the table of the image open as `f`, reading only.
pub fn recover(path: &Path, f: &File) -> Result<Opened, ImageError> {
    let start = Instant::now();
    let sb = read_superblock(path, f)?;
    let len = f.metadata().map_err(io_err(path, "stat"))?.len();
    for (name, s, e) in areas(&sb) {
        if e > len {
            return Err(ImageError::bad(
                path,
                format!("the {name} (bytes {s}..{e}) is past the end of the file ({len} bytes)"),
            ));
        }
    }
    let layout = sb.layout();
    let read_area = |a: hvio_reshape::Area| -> Result<Vec<u8>, ImageError> {
        let mut b = vec![0u8; (a.sectors * SECTOR) as usize];
        f.read_exact_at(&mut b, sb.header_bytes + a.start * SECTOR)
            .map_err(io_err(path, "read log and checkpoints"))?;
        Ok(b)
    };
    let ck0 = read_area(layout.checkpoints[0])?;
    let ck1 = read_area(layout.checkpoints[1])?;
    let log = read_area(layout.log)?;
    let seqs = [ck0.as_slice(), ck1.as_slice()].map(|b| encoding::decode_checkpoint(b).ok().map(|c| c.seq));
    let (reshaper, report) =
        Reshaper::recover(layout.clone(), [&ck0, &ck1], &log).map_err(|e| ImageError::bad(path, e.to_string()))?;
    let damage = log_damage(&layout, &log, reshaper.durable_seq() + 1, sb.clean, &report);
    Ok(Opened {
        bytes_read: (ck0.len() + ck1.len() + log.len()) as u64,
        superblock: sb,
        reshaper,
        report,
        took: start.elapsed(),
        checkpoint_seqs: seqs,
        damage,
    })
}

/// Damage in the log that recovery's stop at the first bad transaction would
/// silently lose: a committed transaction later than the one recovery stopped
/// at (the reshaper has one commit in flight at a time, so after a crash no
/// later transaction can exist), or, on a cleanly stopped image, a torn or
/// bad-checksum record where the next transaction would be.
pub fn log_damage(layout: &Layout, log: &[u8], next_seq: u64, clean: bool, report: &RecoveryReport) -> Option<String> {
    let block = (layout.block_sectors * SECTOR) as usize;
    let blocks = log.len() / block;
    for i in 0..blocks {
        let b = &log[i * block..];
        if &b[0..4] != b"HVTX" {
            continue;
        }
        let seq = u64::from_le_bytes(b[8..16].try_into().expect("8 bytes"));
        if seq <= next_seq {
            continue;
        }
        let Ok(n) = encoding::tx_blocks_at(b, seq) else {
            continue;
        };
        if n == 0 || i + n > blocks {
            continue;
        }
        if encoding::decode_tx(&b[..n * block], seq).is_ok() {
            return Some(format!(
                "log transaction {next_seq} is missing or damaged ({}) but committed transaction {seq} at log block {i} follows it: {} later transactions would be lost",
                report
                    .log_end
                    .as_ref()
                    .map(|e| e.to_string())
                    .unwrap_or_else(|| "not found".into()),
                seq - next_seq
            ));
        }
    }
    match &report.log_end {
        Some(e @ (DecodeError::Checksum { .. } | DecodeError::Truncated { .. })) if clean => Some(format!(
            "the image was stopped cleanly, yet log transaction {next_seq} is damaged: {e}"
        )),
        _ => None,
    }
}

/// What `hvio image check` found.
pub struct CheckReport {
    /// The image opened and recovered.
    pub opened: Opened,
    /// Broken invariants (empty: the image is consistent).
    pub problems: Vec<String>,
}

/// Verify every invariant of the image: the superblock copies agree, the
/// regions lie inside the file, the log is well formed, the table and its
/// reverse map are inverse (no two original addresses share an image
/// sector), the free-space accounting adds up. Reads only.
pub fn check(path: &Path) -> Result<CheckReport, ImageError> {
    let (f, opened) = open(path)?;
    let mut problems = Vec::new();
    let mut b = vec![0u8; SUPERBLOCK_BYTES as usize];
    f.read_exact_at(&mut b, SUPERBLOCK_BYTES)
        .map_err(io_err(path, "read backup superblock"))?;
    match Superblock::decode(&b) {
        Ok(backup) => {
            let strip = |s: &Superblock| Superblock {
                clean: false,
                generation: 0,
                ..s.clone()
            };
            if strip(&backup) != strip(&opened.superblock) {
                problems.push("the backup superblock describes another layout than the primary".into());
            }
        }
        Err(e) => problems.push(format!("backup superblock: {e}")),
    }
    if let Some(d) = &opened.damage {
        problems.push(d.clone());
    }
    problems.extend(opened.reshaper.verify());
    Ok(CheckReport { opened, problems })
}

/// The table as checkpoint entries, metadata region first.
fn table_entries(r: &Reshaper) -> Vec<Entry> {
    [Region::Meta, Region::Data]
        .iter()
        .flat_map(|&reg| r.table(reg).iter())
        .map(|e| Entry {
            start: e.start,
            sectors: e.sectors,
            mapping: Mapping::Map(e.target),
        })
        .collect()
}

/// What [`repair`] did.
#[derive(Debug, Default)]
pub struct RepairReport {
    /// What repair did.
    pub actions: Vec<String>,
}

/// Make the image consistent again, keeping everything recovery can reach:
/// restore a torn superblock copy from the other, accept the recovered
/// table (a damaged log's later transactions are lost, and said so), and
/// write it as a fresh checkpoint that starts an empty log. Crash-safe: the
/// new checkpoint, in the slot not holding the one recovery used, is durable
/// before anything else changes, and it alone decides the next recovery.
pub fn repair(path: &Path) -> Result<RepairReport, ImageError> {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(io_err(path, "open for repair"))?;
    let mut report = RepairReport::default();
    let mut b = vec![0u8; 2 * SUPERBLOCK_BYTES as usize];
    f.read_exact_at(&mut b, 0).map_err(io_err(path, "read superblock"))?;
    let primary = Superblock::decode(&b[..SUPERBLOCK_BYTES as usize]);
    let backup = Superblock::decode(&b[SUPERBLOCK_BYTES as usize..]);
    let mut sb = match (&primary, &backup) {
        (Ok(p), Ok(_)) => p.clone(),
        (Ok(p), Err(e)) => {
            report
                .actions
                .push(format!("backup superblock rewritten from the primary ({e})"));
            p.clone()
        }
        (Err(e), Ok(bk)) => {
            if e.starts_with("not an hvio") || e.contains("newer than") {
                return Err(ImageError::bad(path, e.clone()));
            }
            report
                .actions
                .push(format!("primary superblock restored from the backup ({e})"));
            bk.clone()
        }
        (Err(e), Err(e2)) => {
            return Err(ImageError::bad(
                path,
                format!("primary superblock: {e}; backup copy: {e2}; nothing to repair from"),
            ))
        }
    };
    // The superblock first, so recovery below reads a good one.
    sb.clean = false;
    write_superblock(path, &f, &sb)?;
    let opened = recover(path, &f)?;
    let mut problems = opened.reshaper.verify();
    if let Some(d) = &opened.damage {
        report.actions.push(format!("accepted the loss: {d}"));
    }
    if !problems.is_empty() {
        problems.truncate(5);
        return Err(ImageError::bad(
            path,
            format!(
                "the recovered table breaks invariants repair cannot fix: {}",
                problems.join("; ")
            ),
        ));
    }
    if opened.report.transactions_replayed > 0 || opened.damage.is_some() {
        report.actions.push(format!(
            "{} transactions ({} entries) from the log folded into a new checkpoint",
            opened.report.transactions_replayed, opened.report.entries_replayed
        ));
    }
    write_fresh_checkpoint(path, &f, &sb, &opened)?;
    sb.clean = true;
    write_superblock(path, &f, &sb)?;
    Ok(report)
}

/// Write the recovered table as a checkpoint newer than any on the image,
/// pointing at an empty log, into the slot recovery did not use; then clear
/// the log (a crash before that is harmless: the log's transactions are
/// older than the checkpoint and recovery ignores them).
fn write_fresh_checkpoint(path: &Path, f: &File, sb: &Superblock, opened: &Opened) -> Result<(), ImageError> {
    let layout = sb.layout();
    let block = (layout.block_sectors * SECTOR) as usize;
    let seq = opened
        .checkpoint_seqs
        .iter()
        .flatten()
        .copied()
        .chain([opened.reshaper.durable_seq()])
        .max()
        .unwrap_or(0)
        + 1;
    let used = opened.report.checkpoint_seq;
    let slot = match opened.checkpoint_seqs {
        [Some(a), _] if Some(a) == used => 1,
        _ => 0,
    };
    let bytes = encoding::encode_checkpoint(seq, 0, &table_entries(&opened.reshaper), block);
    let area = layout.checkpoints[slot];
    if bytes.len() as u64 > area.sectors * SECTOR {
        return Err(ImageError::bad(path, "the table no longer fits a checkpoint slot"));
    }
    f.write_all_at(&bytes, sb.header_bytes + area.start * SECTOR)
        .map_err(io_err(path, "write checkpoint"))?;
    f.sync_data().map_err(io_err(path, "sync checkpoint"))?;
    zero(
        path,
        f,
        sb.header_bytes + layout.log.start * SECTOR,
        layout.log.sectors * SECTOR,
    )?;
    f.sync_data().map_err(io_err(path, "sync log"))?;
    Ok(())
}

fn zero(path: &Path, f: &File, mut off: u64, len: u64) -> Result<(), ImageError> {
    let end = off + len;
    let zeros = vec![0u8; 1 << 20];
    while off < end {
        let n = (end - off).min(zeros.len() as u64) as usize;
        f.write_all_at(&zeros[..n], off).map_err(io_err(path, "zero"))?;
        off += n as u64;
    }
    Ok(())
}

/// What [`compact`] did.
#[derive(Debug)]
pub struct CompactReport {
    /// Extents in the table before.
    pub extents_before: usize,
    /// Extents after.
    pub extents_after: usize,
    /// Bytes moved.
    pub bytes_copied: u64,
}

/// Rewrite the image offline with its live data packed in original-address
/// order at the start of each region (a sequential read of the disk is then
/// a sequential read of the image) and one checkpoint, into a new file that
/// replaces the old one by rename once it is durable: a crash leaves the
/// old image or the new one.
pub fn compact(path: &Path) -> Result<CompactReport, ImageError> {
    let (f, opened) = open(path)?;
    if let Some(d) = &opened.damage {
        return Err(ImageError::repairable(path, d.clone()));
    }
    let problems = opened.reshaper.verify();
    if !problems.is_empty() {
        return Err(ImageError::bad(
            path,
            format!("inconsistent ({}): check it first", problems[0]),
        ));
    }
    let sb = opened.superblock.clone();
    let layout = sb.layout();
    let tmp = path.with_extension("compact-tmp");
    let _ = std::fs::remove_file(&tmp);
    let out = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(io_err(&tmp, "create"))?;
    let r = (|| {
        out.set_len(sb.file_bytes()).map_err(io_err(&tmp, "size"))?;
        let mut copied = 0u64;
        let mut buf = Vec::new();
        // The base image, unchanged.
        if layout.base.sectors > 0 {
            copy_range(
                &f,
                &out,
                sb.header_bytes,
                sb.header_bytes,
                layout.base.sectors * SECTOR,
                &mut buf,
            )
            .map_err(io_err(path, "copy base image"))?;
        }
        let mut entries = Vec::new();
        let mut extents_before = 0;
        for (region, area) in [(Region::Meta, layout.meta), (Region::Data, layout.data)] {
            let mut next = area.start;
            for e in opened.reshaper.table(region).iter() {
                extents_before += 1;
                match e.target {
                    Target::Zero => entries.push(Entry {
                        start: e.start,
                        sectors: e.sectors,
                        mapping: Mapping::Map(Target::Zero),
                    }),
                    Target::At(t) => {
                        copy_range(
                            &f,
                            &out,
                            sb.header_bytes + t * SECTOR,
                            sb.header_bytes + next * SECTOR,
                            e.sectors * SECTOR,
                            &mut buf,
                        )
                        .map_err(io_err(path, "copy data"))?;
                        copied += e.sectors * SECTOR;
                        let merge = matches!(entries.last(), Some(Entry { start, sectors, mapping: Mapping::Map(Target::At(p)) })
                            if start + sectors == e.start && p + sectors == next);
                        if merge {
                            let last = entries.last_mut().expect("merged with the last");
                            last.sectors += e.sectors;
                        } else {
                            entries.push(Entry {
                                start: e.start,
                                sectors: e.sectors,
                                mapping: Mapping::Map(Target::At(next)),
                            });
                        }
                        next += e.sectors;
                    }
                }
            }
            // Segments must keep room for the cleaner's frontier: the packed
            // data fills whole segments from the region's start.
            if next > area.end() {
                return Err(ImageError::bad(path, "live data larger than its region"));
            }
        }
        let block = (layout.block_sectors * SECTOR) as usize;
        let bytes = encoding::encode_checkpoint(1, 0, &entries, block);
        out.write_all_at(&bytes, sb.header_bytes + layout.checkpoints[0].start * SECTOR)
            .map_err(io_err(&tmp, "write checkpoint"))?;
        let mut new_sb = sb.clone();
        new_sb.clean = true;
        write_superblock(&tmp, &out, &new_sb)?;
        out.sync_all().map_err(io_err(&tmp, "sync"))?;
        Ok(CompactReport {
            extents_before,
            extents_after: entries.len(),
            bytes_copied: copied,
        })
    })();
    match r {
        Ok(rep) => {
            std::fs::rename(&tmp, path).map_err(io_err(path, "replace with the compacted image"))?;
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                if let Ok(d) = File::open(dir) {
                    let _ = d.sync_all();
                }
            }
            Ok(rep)
        }
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

fn copy_range(from: &File, to: &File, src: u64, dst: u64, len: u64, buf: &mut Vec<u8>) -> std::io::Result<()> {
    const CHUNK: u64 = 4 << 20;
    buf.resize(CHUNK as usize, 0);
    let mut done = 0;
    while done < len {
        let n = (len - done).min(CHUNK) as usize;
        from.read_exact_at(&mut buf[..n], src + done)?;
        to.write_all_at(&buf[..n], dst + done)?;
        done += n as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> ReshapeConfig {
        ReshapeConfig {
            base: false,
            meta_region_bytes: 3 << 20,
            data_region_bytes: 8 << 20,
            segment_bytes: 1 << 20,
            log_bytes: 1 << 20,
            commit_entries: 64,
            ..Default::default()
        }
    }

    #[test]
    fn superblock_round_trips_and_refuses_damage() {
        let sb = Superblock::new(4 << 20, small()).unwrap();
        let b = sb.encode();
        assert_eq!(Superblock::decode(&b).unwrap(), sb);
        let mut torn = b.clone();
        torn[100] ^= 1;
        assert!(Superblock::decode(&torn).unwrap_err().contains("checksum"));
        let mut newer = b.clone();
        newer[8..10].copy_from_slice(&2u16.to_le_bytes());
        assert!(Superblock::decode(&newer).unwrap_err().contains("newer"));
    }

    #[test]
    fn create_open_check_and_bad_input() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.img");
        let sb = create(&p, 4 << 20, small()).unwrap();
        assert!(create(&p, 4 << 20, small()).is_err(), "create never overwrites");
        let rep = check(&p).unwrap();
        assert!(rep.problems.is_empty(), "{:?}", rep.problems);
        assert_eq!(rep.opened.report.transactions_replayed, 0);

        // A torn primary superblock: refused, named, repairable; nothing written.
        let f = OpenOptions::new().read(true).write(true).open(&p).unwrap();
        f.write_all_at(&[0xff; 16], 200).unwrap();
        let damaged = std::fs::read(&p).unwrap();
        let e = check(&p).err().unwrap();
        assert!(e.is_repairable(), "{e}");
        let msg = e.to_string();
        assert!(msg.contains("a.img") && msg.contains("checksum"), "{msg}");
        assert_eq!(std::fs::read(&p).unwrap(), damaged, "reading wrote to the image");
        repair(&p).unwrap();
        assert!(check(&p).unwrap().problems.is_empty());

        // A region past the end of the file.
        f.set_len(sb.file_bytes() - 4096).unwrap();
        let msg = check(&p).err().unwrap().to_string();
        assert!(
            msg.contains("checkpoint slot 1") && msg.contains("past the end"),
            "{msg}"
        );

        // A newer format version.
        f.set_len(sb.file_bytes()).unwrap();
        let mut newer = sb.clone();
        newer.version = 2;
        write_superblock(&p, &f, &newer).unwrap();
        let msg = check(&p).err().unwrap().to_string();
        assert!(msg.contains("newer") && !msg.contains("repair"), "{msg}");

        // Not an image at all.
        let q = dir.path().join("raw.img");
        std::fs::write(&q, vec![0u8; 8192]).unwrap();
        let msg = check(&q).err().unwrap().to_string();
        assert!(
            msg.contains("raw.img") && msg.contains("not an hvio reshaped image"),
            "{msg}"
        );
    }
}
