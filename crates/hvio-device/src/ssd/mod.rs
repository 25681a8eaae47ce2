//! A flash SSD for paper 001 (address reshaping, §II.C and §IV): a
//! page-mapped FTL (`ftl`: write frontiers, greedy or cost-benefit garbage
//! collection with start and hard thresholds, trim), over-provisioning,
//! channel / chip / die / plane parallelism, an optional DRAM write buffer
//! and host link, preconditioning to steady state, and presets for the
//! paper's two drives ([`SsdPreset`]). Without a preset the defaults are
//! MQSim-like (read 75 µs, program 750 µs, erase 3.8 ms; 8 channels × 4
//! chips × 2 dies × 2 planes, 256 pages per block, 8 KiB pages, 333 MB/s
//! channels).
//!
//! Timing is reservation based: a request's page operations are placed on
//! the earliest free time of their channel and die when it is submitted, so
//! requests on different dies overlap and requests on the same die queue.
//! [`theory`] gives the analytic write amplification the FTL is checked
//! against (docs/ssd-model.md).

mod ftl;
pub mod presets;
pub mod steady;
pub mod theory;

use crate::done::DoneQueue;
use crate::DeviceError;
use ftl::{Ftl, FtlShape};
pub use ftl::{GcPolicy, SsdStats};
use hvio_core::{Completion, Device, DeviceInfo, LinearSeek, Nanos, Op, Request, ServiceBreakdown};
pub use presets::SsdPreset;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Deserialize;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};
/// `model = "ssd"`: every field optional; a `preset` supplies the fields not given.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SsdParams {
    /// A drive to start from (`samsung-850-pro-256`, `intel-p3700-400`).
    pub preset: Option<SsdPreset>,
    /// Logical capacity, GiB (default 32).
    pub capacity_gib: Option<f64>,
    /// Spare flash as a fraction of the logical capacity (default 0.07).
    pub over_provisioning: Option<f64>,
    /// Channels (default 8).
    pub channels: Option<u32>,
    /// Chips per channel (default 4).
    pub chips_per_channel: Option<u32>,
    /// Dies per chip (default 2).
    pub dies_per_chip: Option<u32>,
    /// Planes per die (default 2).
    pub planes_per_die: Option<u32>,
    /// Pages per erase block (default 256).
    pub pages_per_block: Option<u32>,
    /// Flash page size, KiB (default 8).
    pub page_kib: Option<u32>,
    /// Page read time, µs (default 75).
    pub read_us: Option<f64>,
    /// Page program time, µs (default 750).
    pub program_us: Option<f64>,
    /// Block erase time, ms (default 3.8). A preset's is for its own block:
    /// with `pages_per_block` given and `erase_ms` not, the preset's erase
    /// time per page is kept (its `erase_ms` × `pages_per_block` / its
    /// pages per block), so a drive scaled down with smaller blocks keeps
    /// the preset's sustained write rate.
    pub erase_ms: Option<f64>,
    /// Channel transfer rate, MB/s (default 333).
    pub channel_mb_s: Option<f64>,
    /// Garbage collection starts when a plane's free blocks fall below this fraction of its blocks (default 0.01, at least 2 blocks).
    pub gc_threshold: Option<f64>,
    /// Below this fraction of free blocks GC runs in the foreground: the host
    /// write waits for it (default `gc_threshold`: all GC in the foreground).
    /// Between the two, GC cleans one block per page written, in the die's
    /// idle time.
    pub gc_hard_threshold: Option<f64>,
    /// Victim choice: `greedy` (default) or `cost-benefit`.
    pub gc_policy: Option<GcPolicy>,
    /// GC copies go to their own open block per plane, apart from host writes (default false).
    pub separate_gc_frontier: Option<bool>,
    /// DRAM write buffer, MiB (default 0: none): a write completes once its
    /// pages are in the buffer (a FUA write once programmed); each page holds
    /// its slot until programmed.
    pub write_buffer_mib: Option<f64>,
    /// Host link rate, MB/s (default: unlimited); data of every request crosses it.
    pub interface_mb_s: Option<f64>,
    /// Controller time per command, µs, taken one command at a time (default 0): 1 / this is the drive's IOPS ceiling.
    pub command_us: Option<f64>,
    /// Bring the drive to steady state before the run (default: fresh, empty).
    pub precondition: Option<Precondition>,
    /// Commands accepted at once (default 32).
    pub queue_depth: Option<usize>,
    /// Controller time per request, µs (default 10).
    pub controller_us: Option<f64>,
}

/// `precondition = { ... }`: fill the drive, then overwrite it at random
/// until write amplification settles, with an untimed FTL-level loop.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Precondition {
    /// Fraction of the logical pages written in order first (default 1.0);
    /// the random overwrites then stay within them.
    pub fill: Option<f64>,
    /// Settled when two successive windows (each half the filled pages) differ
    /// by at most this fraction of write amplification (default 0.02).
    pub tolerance: Option<f64>,
    /// Most random overwrites, in drive writes (default 8).
    pub max_drive_writes: Option<f64>,
    /// Seed of the overwrite addresses (default 1; in a simulation, the run's seed).
    pub seed: Option<u64>,
    /// Byte offset of a range trimmed once the overwrites are done (default 0).
    pub trim_offset: Option<u64>,
    /// Bytes of that range (default 0: nothing trimmed). Trimming the range
    /// an image file will occupy is what a host file system that discards
    /// (ext4 `-o discard`, or `fstrim`) leaves behind when the image is a
    /// freshly created file: the drive holds the rest of its data, not the
    /// image's former contents. Only pages the range covers whole are
    /// unmapped.
    pub trim_bytes: Option<u64>,
    /// Precondition the way SNIA's PTS does: the drive filled in order
    /// twice over (its workload-independent preconditioning), then the run's
    /// own workload repeated in rounds until it reaches steady state
    /// ([`steady`]). The device does the fill; the simulator runs the rounds.
    /// Excludes `tolerance` and `max_drive_writes` (no random overwrites).
    pub workload: Option<steady::WorkloadRounds>,
}

/// What preconditioning did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PreconditionReport {
    /// Pages written in order, then at random.
    pub fill_pages: u64,
    /// Pages written at random.
    pub random_pages: u64,
    /// Write amplification of the last window of random overwrites.
    pub write_amplification: f64,
    /// Whether it settled within the tolerance before `max_drive_writes`.
    pub settled: bool,
    /// Pages unmapped by `trim_offset` / `trim_bytes` afterwards.
    pub trimmed_pages: u64,
    /// Times the drive's filled part was written in order before any random
    /// overwrite: 1, or 2 with `workload` (the PTS's 2× sequential fill).
    pub fill_passes: u32,
}

/// An address pattern for [`Ssd::overwrite_untimed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    /// Uniform random pages among the first `n`.
    UniformRandom {
        /// How many pages.
        n: u64,
        /// The random seed.
        seed: u64,
    },
    /// Pages 0, 1, 2, ... modulo `n`, from `start`.
    Sequential {
        /// How many pages.
        n: u64,
        /// The first page.
        start: u64,
    },
}

/// DRAM write buffer: pages accepted and not yet programmed.
struct WriteBuffer {
    slots: usize,
    /// (programmed at, as f64 bits; logical page), earliest first.
    draining: BinaryHeap<Reverse<(u64, u64)>>,
    /// Latest buffered copy of a logical page: programmed at (f64 bits).
    held: HashMap<u64, u64>,
    /// When the last page accepted so far is programmed (a flush waits for it).
    last_programmed: f64,
}

impl WriteBuffer {
    fn release(&mut self, bits: u64, lpn: u64) {
        if self.held.get(&lpn) == Some(&bits) {
            self.held.remove(&lpn);
        }
    }

    /// When a page arriving at `t` gets a slot.
    fn slot_at(&mut self, t: f64) -> f64 {
        while let Some(&Reverse((bits, lpn))) = self.draining.peek() {
            if f64::from_bits(bits) > t {
                break;
            }
            self.draining.pop();
            self.release(bits, lpn);
        }
        if self.draining.len() < self.slots {
            return t;
        }
        let Reverse((bits, lpn)) = self.draining.pop().expect("buffer has slots");
        self.release(bits, lpn);
        f64::from_bits(bits)
    }

    fn hold(&mut self, lpn: u64, programmed: f64) {
        // Times are non-negative, so their bit patterns sort like the values.
        let bits = programmed.to_bits();
        self.draining.push(Reverse((bits, lpn)));
        self.held.insert(lpn, bits);
        self.last_programmed = self.last_programmed.max(programmed);
    }

    /// Whether page `lpn` is still in the buffer at `t`.
    fn holds(&self, lpn: u64, t: f64) -> bool {
        self.held.get(&lpn).is_some_and(|&b| f64::from_bits(b) > t)
    }
}

/// Host link and command processing: each a serial resource. Every command
/// takes `command_ns` of the controller in arrival order (the IOPS ceiling);
/// its data crosses the link at `ns_per_byte`, written data before the flash
/// writes, read data after the flash reads.
struct Link {
    ns_per_byte: f64,
    command_ns: f64,
    command_free: f64,
    free: f64,
}

/// A simulated SSD.
pub struct Ssd {
    channels: usize,
    dies_total: usize,
    sectors_per_page: u64,
    lpns: u64,
    read_ns: f64,
    program_ns: f64,
    xfer_ns: f64,
    controller_ns: f64,
    depth: usize,
    ftl: Ftl,
    chan_free: Vec<f64>,
    die_free: Vec<f64>,
    buffer: Option<WriteBuffer>,
    link: Option<Link>,
    done: DoneQueue,
    in_flight: usize,
    preconditioned: Option<PreconditionReport>,
    seek: Arc<LinearSeek>,
}

fn pos(key: &str, v: f64) -> Result<f64, DeviceError> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(DeviceError::param(key, v, "must be a positive number"))
    }
}

fn count(key: &str, v: u32, max: u32) -> Result<usize, DeviceError> {
    if v == 0 || v > max {
        Err(DeviceError::param(key, v, format!("must be between 1 and {max}")))
    } else {
        Ok(v as usize)
    }
}

/// A time within `0..=max` (finite), or an error naming the key.
fn time(key: &str, v: f64, positive: bool, max: f64, unit: &str) -> Result<f64, DeviceError> {
    if v.is_finite() && (v > 0.0 || (!positive && v == 0.0)) && v <= max {
        Ok(v)
    } else {
        let low = if positive { "above 0" } else { "at least 0" };
        Err(DeviceError::param(
            key,
            v,
            format!("must be {low} and at most {max} {unit}"),
        ))
    }
}

/// Most of each parallel unit (channels, chips per channel, dies per chip,
/// planes per die) and of all planes together: real SSDs have a few dozen
/// to a few thousand planes; the model keeps a table per plane.
const MAX_UNITS: u32 = 1024;
const MAX_PLANES: u64 = 65_536;
/// Largest flash block (pages) and page (KiB): real flash has 64-1024
/// pages of 2-16 KiB.
const MAX_PAGES_PER_BLOCK: u32 = 65_536;
const MAX_PAGE_KIB: u32 = 1024;
/// Longest flash operation or controller time, µs (1000 s), so no run of
/// requests leaves u64 nanoseconds.
const MAX_OP_US: f64 = 1e9;
/// Most flash pages (logical; physical at most twice as many): the FTL keeps
/// 4-byte maps of both, so 2^28 pages (2 TiB of 8 KiB pages) take about
/// 3 GiB; a 30 TiB drive at 8 KiB pages would need 16 GiB and abort.
const MAX_PAGES: u64 = 1 << 28;
/// Most commands accepted at once (NVMe allows 64 Ki; real queues are shallower).
const MAX_DEPTH: usize = 65_536;
/// Largest write buffer, MiB (drives carry up to a few GiB of DRAM).
const MAX_BUFFER_MIB: f64 = 65_536.0;
/// Most preconditioning overwrites, in drive writes.
const MAX_DRIVE_WRITES: f64 = 1000.0;

impl SsdParams {
    /// These parameters over the preset's (the same when there is none).
    pub fn resolved(&self) -> SsdParams {
        let Some(preset) = self.preset else {
            return self.clone();
        };
        let base = preset.params();
        SsdParams {
            preset: Some(preset),
            capacity_gib: self.capacity_gib.or(base.capacity_gib),
            over_provisioning: self.over_provisioning.or(base.over_provisioning),
            channels: self.channels.or(base.channels),
            chips_per_channel: self.chips_per_channel.or(base.chips_per_channel),
            dies_per_chip: self.dies_per_chip.or(base.dies_per_chip),
            planes_per_die: self.planes_per_die.or(base.planes_per_die),
            pages_per_block: self.pages_per_block.or(base.pages_per_block),
            page_kib: self.page_kib.or(base.page_kib),
            read_us: self.read_us.or(base.read_us),
            program_us: self.program_us.or(base.program_us),
            erase_ms: self.erase_ms.or(base
                .erase_ms
                .map(|ms| match (self.pages_per_block, base.pages_per_block) {
                    // A preset's erase time is for its own block. A config that
                    // shrinks the block scales the drive down (fewer pages per
                    // block leave a small drive enough blocks per plane for
                    // garbage collection to behave as on the full one), so it
                    // keeps the preset's erase time per page: the scaled drive
                    // sustains the preset's write rate once its blocks must be
                    // erased for reuse.
                    (Some(ppb), Some(preset_ppb)) => ms * ppb as f64 / preset_ppb as f64,
                    _ => ms,
                })),
            channel_mb_s: self.channel_mb_s.or(base.channel_mb_s),
            gc_threshold: self.gc_threshold.or(base.gc_threshold),
            gc_hard_threshold: self.gc_hard_threshold.or(base.gc_hard_threshold),
            gc_policy: self.gc_policy.or(base.gc_policy),
            separate_gc_frontier: self.separate_gc_frontier.or(base.separate_gc_frontier),
            write_buffer_mib: self.write_buffer_mib.or(base.write_buffer_mib),
            interface_mb_s: self.interface_mb_s.or(base.interface_mb_s),
            command_us: self.command_us.or(base.command_us),
            queue_depth: self.queue_depth.or(base.queue_depth),
            controller_us: self.controller_us.or(base.controller_us),
            precondition: self.precondition.clone().or(base.precondition),
        }
    }

    /// The drive these parameters describe, or an error naming the bad key.
    pub fn build(&self) -> Result<Ssd, DeviceError> {
        let p = self.resolved();
        let cap = pos("capacity_gib", p.capacity_gib.unwrap_or(32.0))?;
        let op = p.over_provisioning.unwrap_or(0.07);
        if !(op.is_finite() && op > 0.0 && op < 10.0) {
            return Err(DeviceError::param(
                "over_provisioning",
                op,
                "must be above 0 (a fraction, e.g. 0.07)",
            ));
        }
        let ch = count("channels", p.channels.unwrap_or(8), MAX_UNITS)?;
        let chips = count("chips_per_channel", p.chips_per_channel.unwrap_or(4), MAX_UNITS)?;
        let dies = count("dies_per_chip", p.dies_per_chip.unwrap_or(2), MAX_UNITS)?;
        let ppd = count("planes_per_die", p.planes_per_die.unwrap_or(2), MAX_UNITS)?;
        let ppb = count("pages_per_block", p.pages_per_block.unwrap_or(256), MAX_PAGES_PER_BLOCK)? as u32;
        let page_kib = count("page_kib", p.page_kib.unwrap_or(8), MAX_PAGE_KIB)? as u64;
        let page_bytes = page_kib * 1024;
        let lpns_f = cap * (1u64 << 30) as f64 / page_bytes as f64;
        if !(1.0..=MAX_PAGES as f64).contains(&lpns_f) {
            return Err(DeviceError::param(
                "capacity_gib",
                cap,
                format!("must hold between 1 and 2^28 flash pages of page_kib = {page_kib} KiB (use bigger pages)"),
            ));
        }
        let lpns = lpns_f as u64;
        let planes = ch * chips * dies * ppd;
        if planes as u64 > MAX_PLANES {
            return Err(DeviceError::param(
                "channels",
                ch,
                format!("channels × chips_per_channel × dies_per_chip × planes_per_die = {planes}, more than {MAX_PLANES} planes"),
            ));
        }
        let gc = p.gc_threshold.unwrap_or(0.01);
        if !(gc.is_finite() && gc > 0.0 && gc < 0.5) {
            return Err(DeviceError::param(
                "gc_threshold",
                gc,
                "must be a fraction between 0 and 0.5",
            ));
        }
        let gc_hard = p.gc_hard_threshold.unwrap_or(gc);
        if !(gc_hard.is_finite() && gc_hard > 0.0 && gc_hard <= gc) {
            return Err(DeviceError::param(
                "gc_hard_threshold",
                gc_hard,
                format!("must be a fraction above 0 and at most gc_threshold = {gc}"),
            ));
        }
        let separate = p.separate_gc_frontier.unwrap_or(false);
        // Physical blocks per plane: logical share plus over-provisioning, and
        // at least the GC reserve plus an active block beyond the logical share.
        let logical_blocks = lpns.div_ceil(planes as u64 * ppb as u64);
        let bpp = ((logical_blocks as f64 * (1.0 + op)).ceil() as u64).max(logical_blocks + 3);
        let gc_min_free = ((bpp as f64 * gc).ceil() as usize).max(2);
        let gc_hard_free = ((bpp as f64 * gc_hard).ceil() as usize).clamp(2, gc_min_free);
        // The GC frontier, when separate, is one more block outside the reserve.
        let frontiers = separate as u64;
        if bpp <= logical_blocks + gc_min_free as u64 + frontiers {
            return Err(DeviceError::param(
                "over_provisioning",
                op,
                format!(
                    "leaves {} spare blocks per plane, GC needs more than {} (a small drive needs fewer pages_per_block)",
                    bpp - logical_blocks,
                    gc_min_free as u64 + frontiers
                ),
            ));
        }
        let phys_pages = planes as u128 * bpp as u128 * ppb as u128;
        if phys_pages > 2 * MAX_PAGES as u128 {
            return Err(DeviceError::param(
                "capacity_gib",
                cap,
                format!(
                    "with over_provisioning and whole blocks of pages_per_block on every plane, {phys_pages} flash pages, more than 2^29 (use bigger pages)"
                ),
            ));
        }
        let depth = p.queue_depth.unwrap_or(32);
        if depth == 0 || depth > MAX_DEPTH {
            return Err(DeviceError::param(
                "queue_depth",
                depth,
                format!("must be between 1 and {MAX_DEPTH}"),
            ));
        }
        // At least 1 MB/s (a 1 MiB page in about a second).
        let mb = p.channel_mb_s.unwrap_or(333.0);
        if !(mb.is_finite() && (1.0..=1e6).contains(&mb)) {
            return Err(DeviceError::param(
                "channel_mb_s",
                mb,
                "must be between 1 and 1000000 MB/s",
            ));
        }
        let read_ns = time("read_us", p.read_us.unwrap_or(75.0), true, MAX_OP_US, "µs")? * 1e3;
        let program_ns = time("program_us", p.program_us.unwrap_or(750.0), true, MAX_OP_US, "µs")? * 1e3;
        let erase_ns = time("erase_ms", p.erase_ms.unwrap_or(3.8), true, MAX_OP_US / 1e3, "ms")? * 1e6;
        let controller_ns = time("controller_us", p.controller_us.unwrap_or(10.0), false, MAX_OP_US, "µs")? * 1e3;
        let buffer_mib = p.write_buffer_mib.unwrap_or(0.0);
        if !(buffer_mib.is_finite() && (0.0..=MAX_BUFFER_MIB).contains(&buffer_mib)) {
            return Err(DeviceError::param(
                "write_buffer_mib",
                buffer_mib,
                format!("must be between 0 and {MAX_BUFFER_MIB} MiB"),
            ));
        }
        let slots = (buffer_mib * (1u64 << 20) as f64 / page_bytes as f64) as usize;
        if buffer_mib > 0.0 && slots == 0 {
            return Err(DeviceError::param(
                "write_buffer_mib",
                buffer_mib,
                format!("holds no whole page of page_kib = {page_kib} KiB"),
            ));
        }
        let link = if p.interface_mb_s.is_some() || p.command_us.is_some() {
            let ns_per_byte = match p.interface_mb_s {
                Some(r) if r.is_finite() && (1.0..=1e6).contains(&r) => 1e3 / r,
                Some(r) => {
                    return Err(DeviceError::param(
                        "interface_mb_s",
                        r,
                        "must be between 1 and 1000000 MB/s",
                    ))
                }
                None => 0.0,
            };
            let command_ns = time("command_us", p.command_us.unwrap_or(0.0), false, MAX_OP_US, "µs")? * 1e3;
            Some(Link {
                ns_per_byte,
                command_ns,
                command_free: 0.0,
                free: 0.0,
            })
        } else {
            None
        };
        let precondition = match &p.precondition {
            Some(pc) => Some(pc.checked(page_bytes / 512, lpns)?),
            None => None,
        };
        let mut ssd = Ssd {
            channels: ch,
            dies_total: ch * chips * dies,
            sectors_per_page: page_bytes / 512,
            lpns,
            read_ns,
            program_ns,
            xfer_ns: page_bytes as f64 / (mb * 1e6) * 1e9,
            controller_ns,
            depth,
            ftl: Ftl::new(FtlShape {
                planes,
                blocks_per_plane: bpp as u32,
                pages_per_block: ppb,
                lpns,
                gc_start_free: gc_min_free,
                gc_hard_free,
                policy: p.gc_policy.unwrap_or_default(),
                separate_gc_frontier: separate,
                copy_ns: read_ns + program_ns,
                erase_ns,
            }),
            chan_free: vec![0.0; ch],
            die_free: vec![0.0; ch * chips * dies],
            buffer: (slots > 0).then(|| WriteBuffer {
                slots,
                draining: BinaryHeap::new(),
                held: HashMap::new(),
                last_programmed: 0.0,
            }),
            link,
            done: DoneQueue::with_capacity(depth + 1),
            in_flight: 0,
            preconditioned: None,
            seek: Arc::new(LinearSeek {
                ns_per_sector: 0.0,
                max: 0,
                revolution: 0,
            }),
        };
        if let Some(pc) = precondition {
            ssd.preconditioned = Some(ssd.precondition(&pc));
        }
        Ok(ssd)
    }
}

/// Preconditioning with its defaults filled in and checked.
struct PreconditionPlan {
    overwrites: Overwrites,
    /// Logical pages trimmed at the end.
    trim: std::ops::Range<u64>,
}

/// The fill and random overwrites of a plan: what decides the FTL's state
/// before the trim.
#[derive(Clone, Copy, PartialEq)]
struct Overwrites {
    fill: f64,
    fill_passes: u32,
    tolerance: f64,
    max_drive_writes: f64,
    seed: u64,
}

/// An FTL preconditioned by a plan's overwrites, and the report of them.
struct Preconditioned {
    shape: FtlShape,
    overwrites: Overwrites,
    result: OnceLock<(Ftl, PreconditionReport)>,
}

/// FTLs preconditioned lately, newest last. Preconditioning runs the FTL
/// alone for millions of page writes, and an experiment builds the same
/// drive with the same plan for each of its runs (one per system and
/// workload); a run takes a copy of the state the first one computed, which
/// is the state it would compute itself (preconditioning is deterministic).
/// Only drives of at most `CACHED_PAGES` physical pages are kept, and only
/// the last `CACHED_DRIVES`, so a full-size drive never stays in memory.
static PRECONDITIONED: Mutex<Vec<Arc<Preconditioned>>> = Mutex::new(Vec::new());
const CACHED_DRIVES: usize = 4;
const CACHED_PAGES: usize = 1 << 22;

impl Precondition {
    /// The plan for a drive of `sectors_per_page` and `lpns` logical pages.
    fn checked(&self, sectors_per_page: u64, lpns: u64) -> Result<PreconditionPlan, DeviceError> {
        let fill = self.fill.unwrap_or(1.0);
        if !(fill.is_finite() && fill > 0.0 && fill <= 1.0) {
            return Err(DeviceError::param(
                "precondition.fill",
                fill,
                "must be a fraction above 0 and at most 1",
            ));
        }
        if let Some(w) = &self.workload {
            // The rounds replace the random overwrites: a key of those is a mistake.
            let why = "has no effect with precondition.workload, whose rounds replace the random overwrites";
            if let Some(t) = self.tolerance {
                return Err(DeviceError::param("precondition.tolerance", t, why));
            }
            if let Some(d) = self.max_drive_writes {
                return Err(DeviceError::param("precondition.max_drive_writes", d, why));
            }
            w.checked()?;
        }
        let tolerance = self.tolerance.unwrap_or(0.02);
        if !(tolerance.is_finite() && tolerance > 0.0 && tolerance <= 1.0) {
            return Err(DeviceError::param(
                "precondition.tolerance",
                tolerance,
                "must be a fraction above 0 and at most 1",
            ));
        }
        let max_drive_writes = match self.workload {
            Some(_) => 0.0,
            None => self.max_drive_writes.unwrap_or(8.0),
        };
        if !(max_drive_writes.is_finite() && (0.0..=MAX_DRIVE_WRITES).contains(&max_drive_writes)) {
            return Err(DeviceError::param(
                "precondition.max_drive_writes",
                max_drive_writes,
                format!("must be between 0 and {MAX_DRIVE_WRITES}"),
            ));
        }
        let capacity = lpns * sectors_per_page * 512;
        let offset = self.trim_offset.unwrap_or(0);
        let bytes = self.trim_bytes.unwrap_or(0);
        if offset > capacity {
            return Err(DeviceError::param(
                "precondition.trim_offset",
                offset,
                format!("must be at most the drive's capacity, {capacity} bytes"),
            ));
        }
        if bytes > capacity - offset {
            return Err(DeviceError::param(
                "precondition.trim_bytes",
                bytes,
                format!("the range from trim_offset ({offset}) must end within the drive's {capacity} bytes"),
            ));
        }
        let page_bytes = sectors_per_page * 512;
        Ok(PreconditionPlan {
            overwrites: Overwrites {
                fill,
                fill_passes: if self.workload.is_some() { 2 } else { 1 },
                tolerance,
                max_drive_writes,
                seed: self.seed.unwrap_or(1),
            },
            trim: offset.div_ceil(page_bytes)..(offset + bytes) / page_bytes,
        })
    }
}

impl Ssd {
    /// Counters since the run began (after any preconditioning).
    pub fn stats(&self) -> SsdStats {
        self.ftl.stats
    }

    /// What preconditioning did, if the config asked for it.
    pub fn precondition_report(&self) -> Option<PreconditionReport> {
        self.preconditioned
    }

    /// Logical capacity in sectors.
    pub fn capacity(&self) -> u64 {
        self.lpns * self.sectors_per_page
    }

    /// Logical capacity in flash pages.
    pub fn logical_pages(&self) -> u64 {
        self.lpns
    }

    /// Writes `pages` pages of `pattern` through the FTL alone (no time
    /// passes, no request is completed); returns the counters they added.
    /// This is how preconditioning runs, and how the write amplification
    /// checks measure the FTL fast.
    pub fn overwrite_untimed(&mut self, pattern: Pattern, pages: u64) -> SsdStats {
        let before = self.ftl.stats;
        match pattern {
            Pattern::Sequential { n, start } => {
                let n = n.clamp(1, self.lpns);
                for i in 0..pages {
                    self.ftl.write((start + i) % n, |_, _, _| {});
                }
            }
            Pattern::UniformRandom { n, seed } => {
                let n = n.clamp(1, self.lpns);
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
                for _ in 0..pages {
                    self.ftl.write(rng.gen_range(0..n), |_, _, _| {});
                }
            }
        }
        self.ftl.stats.since(&before)
    }

    /// Fill, then random overwrites in windows of half the filled pages until
    /// two successive windows agree (or a copy of the FTL an earlier drive of
    /// the same shape reached with the same plan), then the trim; the
    /// counters start again from zero.
    fn precondition(&mut self, plan: &PreconditionPlan) -> PreconditionReport {
        let mut report = if self.ftl.physical_pages() > CACHED_PAGES {
            self.overwrite_randomly(&plan.overwrites)
        } else {
            let entry = {
                let mut cache = PRECONDITIONED.lock().unwrap_or_else(|e| e.into_inner());
                let shape = *self.ftl.shape();
                match cache
                    .iter()
                    .position(|c| c.shape == shape && c.overwrites == plan.overwrites)
                {
                    Some(i) => {
                        let c = cache.remove(i);
                        cache.push(c.clone());
                        c
                    }
                    None => {
                        if cache.len() == CACHED_DRIVES {
                            cache.remove(0);
                        }
                        let c = Arc::new(Preconditioned {
                            shape,
                            overwrites: plan.overwrites,
                            result: OnceLock::new(),
                        });
                        cache.push(c.clone());
                        c
                    }
                }
            };
            let (ftl, report) = entry.result.get_or_init(|| {
                let report = self.overwrite_randomly(&plan.overwrites);
                (self.ftl.clone(), report)
            });
            self.ftl = ftl.clone();
            *report
        };
        for lpn in plan.trim.clone() {
            report.trimmed_pages += self.ftl.trim(lpn) as u64;
        }
        self.ftl.stats = SsdStats::default();
        report
    }

    /// The fill and the random overwrites of preconditioning.
    fn overwrite_randomly(&mut self, plan: &Overwrites) -> PreconditionReport {
        let fill = ((self.lpns as f64 * plan.fill).round() as u64).clamp(1, self.lpns);
        self.overwrite_untimed(
            Pattern::Sequential { n: fill, start: 0 },
            fill * plan.fill_passes as u64,
        );
        let window = (fill / 2).max(1);
        let max_pages = (plan.max_drive_writes * self.lpns as f64) as u64;
        let mut random = 0;
        let mut previous: Option<f64> = None;
        let mut report = PreconditionReport {
            fill_pages: fill,
            random_pages: 0,
            write_amplification: 1.0,
            settled: false,
            trimmed_pages: 0,
            fill_passes: plan.fill_passes,
        };
        let mut seed = plan.seed;
        while random < max_pages {
            let n = window.min(max_pages - random);
            let wa = self
                .overwrite_untimed(Pattern::UniformRandom { n: fill, seed }, n)
                .write_amplification();
            seed = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
            random += n;
            report.write_amplification = wa;
            if previous.is_some_and(|p| (wa - p).abs() <= plan.tolerance * p) {
                report.settled = true;
                break;
            }
            previous = Some(wa);
        }
        report.random_pages = random;
        report
    }

    // Planes are numbered channel first, then chip and die ("way"), then
    // plane within the die: plane p is on die p % dies, channel p % channels,
    // so consecutive allocations stripe over channels, then ways, then planes.
    fn die_of(&self, plane: usize) -> usize {
        plane % self.dies_total
    }

    fn write_page(&mut self, lpn: u64, t: f64) -> f64 {
        let dies_total = self.dies_total;
        let die_free = &mut self.die_free;
        let p = self.ftl.write(lpn, |plane, cost, foreground| {
            let die = plane % dies_total;
            // Foreground GC starts now; background GC fills the die's idle time since its last operation.
            die_free[die] = if foreground {
                die_free[die].max(t)
            } else {
                die_free[die]
            } + cost;
        });
        let die = self.die_of(p);
        let ch = p % self.channels;
        let cs = t.max(self.chan_free[ch]);
        self.chan_free[ch] = cs + self.xfer_ns;
        let ds = (cs + self.xfer_ns).max(self.die_free[die]);
        self.die_free[die] = ds + self.program_ns;
        ds + self.program_ns
    }

    fn read_page(&mut self, lpn: u64, t: f64) -> f64 {
        if self.buffer.as_ref().is_some_and(|b| b.holds(lpn, t)) {
            // Still in the write buffer: served from DRAM.
            return t;
        }
        let Some(ppn) = self.ftl.lookup(lpn) else {
            // Never written: the FTL answers without touching flash.
            return t;
        };
        self.ftl.stats.pages_read += 1;
        let p = self.ftl.plane_of_ppn(ppn);
        let die = self.die_of(p);
        let ch = p % self.channels;
        let ds = t.max(self.die_free[die]);
        self.die_free[die] = ds + self.read_ns;
        let cs = (ds + self.read_ns).max(self.chan_free[ch]);
        self.chan_free[ch] = cs + self.xfer_ns;
        cs + self.xfer_ns
    }

    /// Moves `bytes` over the host link no earlier than `t`; when they have crossed.
    fn cross_link(&mut self, t: f64, bytes: f64) -> f64 {
        match &mut self.link {
            Some(link) => {
                link.free = t.max(link.free) + bytes * link.ns_per_byte;
                link.free
            }
            None => t,
        }
    }
}

impl Device for Ssd {
    fn info(&self) -> DeviceInfo {
        DeviceInfo {
            capacity: self.capacity(),
            rotational: false,
            queue_depth: self.depth,
            seek: self.seek.clone(),
        }
    }

    fn in_flight(&self) -> usize {
        self.in_flight
    }

    fn can_accept(&self) -> bool {
        self.in_flight < self.depth
    }

    fn submit(&mut self, rq: Request, now: Nanos) {
        self.in_flight += 1;
        let mut t = now as f64 + self.controller_ns;
        if let Some(link) = &mut self.link {
            link.command_free = t.max(link.command_free) + link.command_ns;
            t = link.command_free;
        }
        let bytes = rq.sectors as f64 * 512.0;
        let spp = self.sectors_per_page;
        let last_lpn = self.lpns - 1;
        let first = (rq.sector / spp).min(last_lpn);
        let last = (rq.end().max(rq.sector + 1).div_ceil(spp) - 1).clamp(first, last_lpn);
        let mut end = t;
        match rq.op {
            Op::Read => {
                for l in first..=last {
                    end = end.max(self.read_page(l, t));
                }
                end = self.cross_link(end, bytes);
            }
            Op::Write => {
                let t = self.cross_link(t, bytes);
                end = t;
                // A FUA write completes when programmed: it does not wait in the buffer.
                let buffered = self.buffer.is_some() && !rq.fua;
                for l in first..=last {
                    end = match self.buffer.as_mut().filter(|_| buffered).map(|b| b.slot_at(t)) {
                        // Done once the page is in the buffer; its slot frees when programmed.
                        Some(slot) => {
                            let programmed = self.write_page(l, slot);
                            self.buffer.as_mut().expect("checked above").hold(l, programmed);
                            end.max(slot)
                        }
                        None => end.max(self.write_page(l, t)),
                    };
                }
            }
            Op::Discard => {
                // Only pages the range covers whole are unmapped: the rest of a page keeps its data.
                let whole = rq.sector.div_ceil(spp)..(rq.end() / spp).min(self.lpns);
                for l in whole {
                    self.ftl.trim(l);
                    if let Some(b) = &mut self.buffer {
                        b.held.remove(&l);
                    }
                }
            }
            Op::Flush => {
                if let Some(b) = &self.buffer {
                    end = end.max(b.last_programmed);
                }
            }
        }
        let overhead = self.controller_ns.round() as Nanos;
        let done = (end.round() as Nanos).max(now + overhead);
        let c = Completion {
            rq,
            start: now,
            done,
            service: ServiceBreakdown {
                overhead,
                seek: 0,
                rotation: 0,
                transfer: done - now - overhead,
                cache_hit: false,
            },
        };
        self.done.push(c);
    }

    fn next_event(&self) -> Option<Nanos> {
        self.done.next()
    }

    fn advance(&mut self, now: Nanos, out: &mut Vec<Completion>) {
        self.in_flight -= self.done.drain_due(now, out);
    }

    fn head(&self) -> u64 {
        0
    }

    /// The drive sits idle until its buffer is programmed and its dies and
    /// channels are free, then its clock starts again at zero: the mapping,
    /// the blocks' valid pages and the free blocks stay as they are.
    fn restart(&mut self) -> bool {
        if self.in_flight > 0 {
            return false;
        }
        self.chan_free.iter_mut().for_each(|t| *t = 0.0);
        self.die_free.iter_mut().for_each(|t| *t = 0.0);
        if let Some(b) = &mut self.buffer {
            b.draining.clear();
            b.held.clear();
            b.last_programmed = 0.0;
        }
        if let Some(l) = &mut self.link {
            l.free = 0.0;
            l.command_free = 0.0;
        }
        self.ftl.stats = SsdStats::default();
        true
    }

    /// The FTL's counters since the run began (after any preconditioning):
    /// page writes from the host and moved by garbage collection, erases,
    /// page reads, trimmed pages, and the write amplification they give.
    fn counters(&self) -> Vec<(String, f64)> {
        let s = self.stats();
        let mut out: Vec<(String, f64)> = vec![
            ("ssd_host_pages_written".into(), s.host_pages_written as f64),
            ("ssd_gc_pages_moved".into(), s.gc_pages_moved as f64),
            ("ssd_erases".into(), s.erases as f64),
            ("ssd_pages_read".into(), s.pages_read as f64),
            ("ssd_pages_trimmed".into(), s.pages_trimmed as f64),
            ("ssd_write_amplification".into(), s.write_amplification()),
        ];
        if let Some(p) = self.preconditioned {
            out.push(("ssd_precondition_write_amplification".into(), p.write_amplification));
            if p.trimmed_pages > 0 {
                out.push(("ssd_precondition_pages_trimmed".into(), p.trimmed_pages as f64));
            }
        }
        out
    }
}
