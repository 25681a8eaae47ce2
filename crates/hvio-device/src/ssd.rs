//! A flash SSD: page-mapped FTL, greedy garbage collection, over-provisioning,
//! and the channel / chip / die / plane parallelism with MQSim-like default
//! timings (read 75 µs, program 750 µs, erase 3.8 ms; 8 channels × 4 chips ×
//! 2 dies × 2 planes, 256 pages per block, 8 KiB pages, 333 MB/s channels).
//!
//! Timing is reservation based: a request's page operations are placed on
//! the earliest free time of their channel and die when it is submitted, so
//! requests on different dies overlap and requests on the same die queue.

use crate::done::DoneQueue;
use crate::DeviceError;
use hvio_core::{Completion, Device, DeviceInfo, LinearSeek, Nanos, Op, Request, ServiceBreakdown};
use serde::Deserialize;
use std::sync::Arc;

/// `model = "ssd"`: every field optional.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SsdParams {
    /// Logical capacity, GiB (default 32).
    pub capacity_gib: Option<f64>,
    /// Spare flash as a fraction of the logical capacity (default 0.07).
    pub over_provisioning: Option<f64>,
    pub channels: Option<u32>,
    pub chips_per_channel: Option<u32>,
    pub dies_per_chip: Option<u32>,
    pub planes_per_die: Option<u32>,
    pub pages_per_block: Option<u32>,
    /// Flash page size, KiB (default 8).
    pub page_kib: Option<u32>,
    pub read_us: Option<f64>,
    pub program_us: Option<f64>,
    pub erase_ms: Option<f64>,
    /// Channel transfer rate, MB/s (default 333).
    pub channel_mb_s: Option<f64>,
    /// Garbage collection starts when a plane's free blocks fall below this fraction of its blocks (default 0.01, at least 2 blocks).
    pub gc_threshold: Option<f64>,
    /// Commands accepted at once (default 32).
    pub queue_depth: Option<usize>,
    /// Controller time per request, µs (default 10).
    pub controller_us: Option<f64>,
}

const FREE: u32 = u32::MAX;

/// Counters: host and flash page writes (write amplification), GC work.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SsdStats {
    pub host_pages_written: u64,
    pub gc_pages_moved: u64,
    pub erases: u64,
    pub pages_read: u64,
}

impl SsdStats {
    /// (host + GC page programs) / host page programs.
    pub fn write_amplification(&self) -> f64 {
        if self.host_pages_written == 0 {
            return 1.0;
        }
        (self.host_pages_written + self.gc_pages_moved) as f64 / self.host_pages_written as f64
    }
}

struct Plane {
    free: Vec<u32>,
    active: u32,
    next_page: u32,
}

/// A simulated SSD.
pub struct Ssd {
    channels: usize,
    dies_total: usize,
    ppb: u32,
    blocks_per_plane: u32,
    sectors_per_page: u64,
    lpns: u64,
    read_ns: f64,
    program_ns: f64,
    erase_ns: f64,
    xfer_ns: f64,
    controller_ns: f64,
    gc_min_free: usize,
    depth: usize,
    l2p: Vec<u32>,
    p2l: Vec<u32>,
    valid: Vec<u32>,
    planes: Vec<Plane>,
    next_plane: usize,
    chan_free: Vec<f64>,
    die_free: Vec<f64>,
    done: DoneQueue,
    in_flight: usize,
    stats: SsdStats,
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

impl SsdParams {
    pub fn build(&self) -> Result<Ssd, DeviceError> {
        let cap = pos("capacity_gib", self.capacity_gib.unwrap_or(32.0))?;
        let op = self.over_provisioning.unwrap_or(0.07);
        if !(op.is_finite() && op > 0.0 && op < 10.0) {
            return Err(DeviceError::param(
                "over_provisioning",
                op,
                "must be above 0 (a fraction, e.g. 0.07)",
            ));
        }
        let ch = count("channels", self.channels.unwrap_or(8), MAX_UNITS)?;
        let chips = count("chips_per_channel", self.chips_per_channel.unwrap_or(4), MAX_UNITS)?;
        let dies = count("dies_per_chip", self.dies_per_chip.unwrap_or(2), MAX_UNITS)?;
        let ppd = count("planes_per_die", self.planes_per_die.unwrap_or(2), MAX_UNITS)?;
        let ppb = count(
            "pages_per_block",
            self.pages_per_block.unwrap_or(256),
            MAX_PAGES_PER_BLOCK,
        )? as u32;
        let page_kib = count("page_kib", self.page_kib.unwrap_or(8), MAX_PAGE_KIB)? as u64;
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
        let gc = self.gc_threshold.unwrap_or(0.01);
        if !(gc.is_finite() && gc > 0.0 && gc < 0.5) {
            return Err(DeviceError::param(
                "gc_threshold",
                gc,
                "must be a fraction between 0 and 0.5",
            ));
        }
        // Physical blocks per plane: logical share plus over-provisioning, and
        // at least the GC reserve plus an active block beyond the logical share.
        let logical_blocks = lpns.div_ceil(planes as u64 * ppb as u64);
        let bpp = ((logical_blocks as f64 * (1.0 + op)).ceil() as u64).max(logical_blocks + 3);
        let gc_min_free = ((bpp as f64 * gc).ceil() as usize).max(2);
        if bpp <= logical_blocks + gc_min_free as u64 {
            return Err(DeviceError::param(
                "over_provisioning",
                op,
                format!(
                    "leaves {} spare blocks per plane, GC needs more than {gc_min_free}",
                    bpp - logical_blocks
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
        let phys_pages = phys_pages as u64;
        let depth = self.queue_depth.unwrap_or(32);
        if depth == 0 || depth > MAX_DEPTH {
            return Err(DeviceError::param(
                "queue_depth",
                depth,
                format!("must be between 1 and {MAX_DEPTH}"),
            ));
        }
        // At least 1 MB/s (a 1 MiB page in about a second).
        let mb = self.channel_mb_s.unwrap_or(333.0);
        if !(mb.is_finite() && (1.0..=1e6).contains(&mb)) {
            return Err(DeviceError::param(
                "channel_mb_s",
                mb,
                "must be between 1 and 1000000 MB/s",
            ));
        }
        let planes_v = (0..planes)
            .map(|p| {
                let base = (p as u64 * bpp) as u32;
                let mut free: Vec<u32> = (base + 1..base + bpp as u32).rev().collect();
                free.shrink_to_fit();
                Plane {
                    free,
                    active: base,
                    next_page: 0,
                }
            })
            .collect();
        Ok(Ssd {
            channels: ch,
            dies_total: ch * chips * dies,
            ppb,
            blocks_per_plane: bpp as u32,
            sectors_per_page: page_bytes / 512,
            lpns,
            read_ns: time("read_us", self.read_us.unwrap_or(75.0), true, MAX_OP_US, "µs")? * 1e3,
            program_ns: time("program_us", self.program_us.unwrap_or(750.0), true, MAX_OP_US, "µs")? * 1e3,
            erase_ns: time("erase_ms", self.erase_ms.unwrap_or(3.8), true, MAX_OP_US / 1e3, "ms")? * 1e6,
            xfer_ns: page_bytes as f64 / (mb * 1e6) * 1e9,
            controller_ns: time(
                "controller_us",
                self.controller_us.unwrap_or(10.0),
                false,
                MAX_OP_US,
                "µs",
            )? * 1e3,
            gc_min_free,
            depth,
            l2p: vec![FREE; lpns as usize],
            p2l: vec![FREE; phys_pages as usize],
            valid: vec![0; planes * bpp as usize],
            planes: planes_v,
            next_plane: 0,
            chan_free: vec![0.0; ch],
            die_free: vec![0.0; ch * chips * dies],
            done: DoneQueue::with_capacity(depth + 1),
            in_flight: 0,
            stats: SsdStats::default(),
            seek: Arc::new(LinearSeek {
                ns_per_sector: 0.0,
                max: 0,
                revolution: 0,
            }),
        })
    }
}

impl Ssd {
    pub fn stats(&self) -> SsdStats {
        self.stats
    }

    /// Logical capacity in sectors.
    pub fn capacity(&self) -> u64 {
        self.lpns * self.sectors_per_page
    }

    // Planes are numbered channel first, then chip and die ("way"), then
    // plane within the die: plane p is on die p % dies, channel p % channels,
    // so consecutive allocations stripe over channels, then ways, then planes.
    fn die_of(&self, plane: usize) -> usize {
        plane % self.dies_total
    }

    fn plane_of_block(&self, block: u32) -> usize {
        (block / self.blocks_per_plane) as usize
    }

    fn invalidate(&mut self, lpn: u64) {
        let old = self.l2p[lpn as usize];
        if old != FREE {
            self.p2l[old as usize] = FREE;
            self.valid[(old / self.ppb) as usize] -= 1;
            self.l2p[lpn as usize] = FREE;
        }
    }

    /// The next free page of plane `p` (opening a fresh block when needed).
    fn alloc(&mut self, p: usize) -> u32 {
        let ppb = self.ppb;
        let pl = &mut self.planes[p];
        if pl.next_page == ppb {
            pl.active = pl.free.pop().expect("GC keeps free blocks");
            pl.next_page = 0;
        }
        let ppn = pl.active * ppb + pl.next_page;
        pl.next_page += 1;
        ppn
    }

    /// Greedy GC on plane `p` at time `t` until it has enough free blocks; returns the die time it took.
    fn collect(&mut self, p: usize) -> f64 {
        let mut cost = 0.0;
        while self.planes[p].free.len() < self.gc_min_free {
            let base = p as u32 * self.blocks_per_plane;
            let active = self.planes[p].active;
            // The used block with the fewest valid pages (free blocks hold none, so skip them by state).
            let mut victim = None;
            let mut best = u32::MAX;
            for b in base..base + self.blocks_per_plane {
                if b == active || self.valid[b as usize] >= best || self.planes[p].free.contains(&b) {
                    continue;
                }
                best = self.valid[b as usize];
                victim = Some(b);
            }
            // Nothing to gain when every candidate is full of valid data (e.g. while the drive is first filled).
            let Some(v) = victim.filter(|_| best < self.ppb) else {
                break;
            };
            let first = v * self.ppb;
            for ppn in first..first + self.ppb {
                let lpn = self.p2l[ppn as usize];
                if lpn != FREE {
                    let new = self.alloc(p);
                    self.p2l[ppn as usize] = FREE;
                    self.p2l[new as usize] = lpn;
                    self.l2p[lpn as usize] = new;
                    self.valid[(new / self.ppb) as usize] += 1;
                    self.stats.gc_pages_moved += 1;
                    cost += self.read_ns + self.program_ns;
                }
            }
            self.valid[v as usize] = 0;
            self.planes[p].free.insert(0, v);
            self.stats.erases += 1;
            cost += self.erase_ns;
        }
        cost
    }

    fn write_page(&mut self, lpn: u64, t: f64) -> f64 {
        self.invalidate(lpn);
        // The next plane in striping order that can take a page (after GC when it runs low).
        let n = self.planes.len();
        let mut p = self.next_plane;
        for k in 0..n {
            p = (self.next_plane + k) % n;
            let gc = if self.planes[p].free.len() < self.gc_min_free {
                self.collect(p)
            } else {
                0.0
            };
            if gc > 0.0 {
                let die = self.die_of(p);
                self.die_free[die] = self.die_free[die].max(t) + gc;
            }
            let pl = &self.planes[p];
            if pl.next_page < self.ppb || !pl.free.is_empty() {
                break;
            }
        }
        self.next_plane = (p + 1) % n;
        let die = self.die_of(p);
        let ch = p % self.channels;
        let ppn = self.alloc(p);
        self.p2l[ppn as usize] = lpn as u32;
        self.l2p[lpn as usize] = ppn;
        self.valid[(ppn / self.ppb) as usize] += 1;
        self.stats.host_pages_written += 1;
        let cs = t.max(self.chan_free[ch]);
        self.chan_free[ch] = cs + self.xfer_ns;
        let ds = (cs + self.xfer_ns).max(self.die_free[die]);
        self.die_free[die] = ds + self.program_ns;
        ds + self.program_ns
    }

    fn read_page(&mut self, lpn: u64, t: f64) -> f64 {
        let ppn = self.l2p[lpn as usize];
        if ppn == FREE {
            // Never written: the FTL answers without touching flash.
            return t;
        }
        self.stats.pages_read += 1;
        let p = self.plane_of_block(ppn / self.ppb);
        let die = self.die_of(p);
        let ch = p % self.channels;
        let ds = t.max(self.die_free[die]);
        self.die_free[die] = ds + self.read_ns;
        let cs = (ds + self.read_ns).max(self.chan_free[ch]);
        self.chan_free[ch] = cs + self.xfer_ns;
        cs + self.xfer_ns
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
        let t = now as f64 + self.controller_ns;
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
            }
            Op::Write => {
                for l in first..=last {
                    end = end.max(self.write_page(l, t));
                }
            }
            Op::Discard => {
                for l in first..=last {
                    self.invalidate(l);
                }
            }
            Op::Flush => {}
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
}
