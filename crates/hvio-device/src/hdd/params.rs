//! User-facing HDD parameters (serde) and the built-in default disk: the
//! 7200 RPM 1 TB SATA disk of ca. 2012 of `shared/design/device-models.md`.

use super::geometry::{Geometry, Hole, Zone};
use super::model::{CacheParams, DestagePolicy, HddModel, Overheads, Phases, QueuePolicy, ReadAheadPolicy};
use super::seek::SeekCurve;
use crate::DeviceError;
use serde::Deserialize;

/// A seek curve as given in a config.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum SeekSpec {
    /// `a1 + b1·√d` ms below `split` cylinders, `a2 + b2·d` ms beyond.
    TwoRegime {
        split: f64,
        a1: f64,
        b1: f64,
        a2: f64,
        b2: f64,
    },
    /// Measured `[distance_cylinders, ms]` points, interpolated.
    Table { points: Vec<[f64; 2]> },
}

/// Overrides of the default disk (`model = "hdd"`): every field optional.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HddParams {
    /// Spindle speed, revolutions per minute (default 7200).
    pub rpm: Option<f64>,
    /// Capacity in 512-byte sectors (default 1,953,525,168 = 1 TB).
    pub capacity_sectors: Option<u64>,
    /// Recording surfaces (default 4).
    pub surfaces: Option<u32>,
    /// Sectors per track in the outermost zone (default 2673).
    pub outer_sectors_per_track: Option<u32>,
    /// Sectors per track in the innermost zone (default 1350).
    pub inner_sectors_per_track: Option<u32>,
    /// Number of zones (default 30).
    pub zones: Option<u32>,
    /// Track skew, in revolutions (default 0.148).
    pub track_skew: Option<f64>,
    /// Cylinder skew, in revolutions (default 0.148).
    pub cylinder_skew: Option<f64>,
    /// Seek curve (default: the two-regime fit of device-models.md, scaled to the cylinder count).
    pub seek: Option<SeekSpec>,
    /// Head switch time, ms (default 0.8).
    pub head_switch_ms: Option<f64>,
    /// Write settle time, ms (default 0.25).
    pub write_settle_ms: Option<f64>,
    /// Controller overhead of a read served from the cache, ms (default 0.05).
    pub read_hit_overhead_ms: Option<f64>,
    /// Controller overhead of a read from the media, ms (default 0.15).
    pub read_miss_overhead_ms: Option<f64>,
    /// Controller overhead of a buffered write, ms (default 0.05).
    pub write_hit_overhead_ms: Option<f64>,
    /// Controller overhead of a write to the media, ms (default 0.15).
    pub write_miss_overhead_ms: Option<f64>,
    /// Host interface rate, MB/s (default 300, SATA 3 Gb/s).
    pub interface_mb_s: Option<f64>,
    /// Read cache segments (default 16; 0 disables read caching).
    pub cache_segments: Option<usize>,
    /// Sectors per cache segment (default 4096 = 2 MiB).
    pub segment_sectors: Option<u64>,
    /// Most sectors read ahead after a read (default 4096).
    pub read_ahead_sectors: Option<u64>,
    /// Sectors the drive reads ahead after a read before it serves another
    /// command or destages (DiskSim's "Minimum read-ahead"; default 0).
    pub min_read_ahead_sectors: Option<u64>,
    /// Which reads `min_read_ahead_sectors` follows: "drive" (default: every
    /// read) or "adaptive" (only a read continuing a sequential run, as a
    /// RAID controller's adaptive read-ahead; needs `min_read_ahead_sectors` > 0).
    pub read_ahead_policy: Option<String>,
    /// "adaptive": a read continues a sequential run when it starts at most
    /// this many sectors past where an earlier read ended (default 0: adjacent).
    pub sequential_gap_sectors: Option<u64>,
    /// Write-back cache: writes complete once buffered (default false).
    pub write_cache: Option<bool>,
    /// Write-back buffer, sectors (default 8192 = 4 MiB).
    pub write_buffer_sectors: Option<u64>,
    /// Destage order of the write-back buffer: "sptf" (default: the dirty
    /// run nearest the head in positioning time), "cscan" (a controller's
    /// order: the next run by block number from where the last destage
    /// ended, wrapping) or "fifo" (oldest write first).
    pub destage: Option<String>,
    /// SPTF and CSCAN destage age bound, ms: data dirty this long is written next (default 5000:
    /// above the time a run waits in a full 4 MiB buffer under random writes, so the
    /// bound prevents starvation without turning a busy buffer into FIFO).
    pub destage_max_age_ms: Option<f64>,
    /// Most sectors one SPTF or CSCAN destage writes (default 1024 = 512 KiB).
    pub destage_chunk_sectors: Option<u64>,
    /// Idle time before the drive destages while its buffer is less than half full, ms (default 0).
    pub destage_idle_ms: Option<f64>,
    /// Write-back: destaged data stays in the buffer as clean data that reads
    /// hit, evicted least recently used when writes need the room (a
    /// controller cache; default false: a destaged run leaves the buffer).
    pub keep_destaged: Option<bool>,
    /// Commands the drive accepts at once (default 1; NCQ drives 32).
    pub queue_depth: Option<usize>,
    /// How a drive with queue_depth > 1 orders them: "sptf" (default) or "fcfs".
    pub queue_policy: Option<String>,
    /// SPTF age bound, ms (default 500).
    pub max_queue_wait_ms: Option<f64>,
}

fn positive(key: &str, v: f64) -> Result<f64, DeviceError> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(DeviceError::param(key, v, "must be a positive number"))
    }
}

fn non_negative(key: &str, v: f64) -> Result<f64, DeviceError> {
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(DeviceError::param(key, v, "must be a non-negative number"))
    }
}

/// The default disk's capacity: 1 TB.
pub const DEFAULT_CAPACITY: u64 = 1_953_525_168;
/// Most read cache segments (a scan of the segments runs on every read).
pub const MAX_SEGMENTS: usize = 1024;
/// Cylinders the default seek fit was measured over (device-models.md).
const FIT_CYLINDERS: f64 = 228_700.0;

impl HddParams {
    /// Builds the disk: defaults with these overrides applied.
    pub fn build(&self) -> Result<HddModel, DeviceError> {
        let rpm = positive("rpm", self.rpm.unwrap_or(7200.0))?;
        let capacity = self.capacity_sectors.unwrap_or(DEFAULT_CAPACITY);
        if capacity == 0 {
            return Err(DeviceError::param("capacity_sectors", 0, "must be positive"));
        }
        let heads = self.surfaces.unwrap_or(4);
        if heads == 0 {
            return Err(DeviceError::param("surfaces", 0, "must be positive"));
        }
        let outer = self.outer_sectors_per_track.unwrap_or(2673);
        let inner = self.inner_sectors_per_track.unwrap_or(1350);
        if inner == 0 || outer < inner {
            return Err(DeviceError::param(
                "inner_sectors_per_track",
                inner,
                format!("must be positive and at most outer_sectors_per_track ({outer})"),
            ));
        }
        let nz = self.zones.unwrap_or(30);
        if nz == 0 {
            return Err(DeviceError::param("zones", 0, "must be positive"));
        }
        let tskew = non_negative("track_skew", self.track_skew.unwrap_or(0.148))?;
        let cskew = non_negative("cylinder_skew", self.cylinder_skew.unwrap_or(0.148))?;
        if tskew >= 1.0 || cskew >= 1.0 {
            return Err(DeviceError::param(
                "track_skew",
                tskew.max(cskew),
                "skews are fractions of a revolution, below 1",
            ));
        }
        // Zones of equal width, sectors per track falling linearly from outer to inner.
        let spts: Vec<u32> = (0..nz)
            .map(|i| {
                if nz == 1 {
                    outer
                } else {
                    (outer as f64 + (inner as f64 - outer as f64) * i as f64 / (nz - 1) as f64).round() as u32
                }
            })
            .collect();
        let per_cyl: u64 = spts.iter().map(|&s| s as u64 * heads as u64).sum();
        let cyl_per_zone = capacity.div_ceil(per_cyl).max(1) as u32;
        let mut zones = Vec::with_capacity(nz as usize);
        let mut total = 0u64;
        for (i, &spt) in spts.iter().enumerate() {
            let first = i as u32 * cyl_per_zone;
            let last = first + cyl_per_zone - 1;
            let size = cyl_per_zone as u64 * heads as u64 * spt as u64;
            let mut holes = Vec::new();
            if total + size > capacity {
                // Trim the last zone to the exact capacity.
                let keep = capacity - total;
                holes.push(Hole {
                    pbn: keep,
                    len: size - keep,
                });
            }
            total += size.min(capacity - total);
            let z = Zone::new(
                first,
                last,
                spt,
                heads,
                0.0,
                (tskew * spt as f64).round(),
                (cskew * spt as f64).round(),
                holes,
            )
            .map_err(|e| DeviceError::param("capacity_sectors", capacity, e.0))?;
            zones.push(z);
            if total >= capacity {
                break;
            }
        }
        let cylinders = zones.last().map_or(1, |z| z.last_cyl + 1);
        let geom = Geometry::new(heads, cylinders, zones).map_err(|e| DeviceError::param("zones", nz, e.0))?;
        let seek = match &self.seek {
            None => {
                let k = FIT_CYLINDERS / cylinders as f64;
                SeekCurve::TwoRegime {
                    split: 22_872.0 / k,
                    a1: 0.762,
                    b1: 0.0382 * k.sqrt(),
                    a2: 5.57,
                    b2: 4.21e-5 * k,
                }
            }
            Some(SeekSpec::TwoRegime { split, a1, b1, a2, b2 }) => SeekCurve::TwoRegime {
                split: *split,
                a1: *a1,
                b1: *b1,
                a2: *a2,
                b2: *b2,
            },
            Some(SeekSpec::Table { points }) => SeekCurve::Table {
                dist: points.iter().map(|p| p[0]).collect(),
                ms: points.iter().map(|p| p[1]).collect(),
            },
        };
        seek.check()
            .map_err(|e| DeviceError::param("seek", format!("{:?}", self.seek), e))?;
        let ms = |key: &str, v: Option<f64>, d: f64| non_negative(key, v.unwrap_or(d)).map(|x| x * 1e6);
        let rh = ms("read_hit_overhead_ms", self.read_hit_overhead_ms, 0.05)?;
        let rm = ms("read_miss_overhead_ms", self.read_miss_overhead_ms, 0.15)?;
        let wh = ms("write_hit_overhead_ms", self.write_hit_overhead_ms, 0.05)?;
        let wm = ms("write_miss_overhead_ms", self.write_miss_overhead_ms, 0.15)?;
        let bus_mb = positive("interface_mb_s", self.interface_mb_s.unwrap_or(300.0))?;
        let segment_sectors = self.segment_sectors.unwrap_or(4096);
        if segment_sectors == 0 {
            return Err(DeviceError::param("segment_sectors", 0, "must be positive"));
        }
        let segments = self.cache_segments.unwrap_or(16);
        if segments > MAX_SEGMENTS {
            return Err(DeviceError::param(
                "cache_segments",
                segments,
                format!("at most {MAX_SEGMENTS}"),
            ));
        }
        let queue_depth = self.queue_depth.unwrap_or(1);
        if queue_depth == 0 {
            return Err(DeviceError::param("queue_depth", 0, "must be at least 1"));
        }
        let policy = match self.queue_policy.as_deref().unwrap_or("sptf") {
            "sptf" => QueuePolicy::Sptf,
            "fcfs" => QueuePolicy::Fcfs,
            other => {
                return Err(DeviceError::param(
                    "queue_policy",
                    other,
                    "expected \"sptf\" or \"fcfs\"",
                ))
            }
        };
        let min_read_ahead = self.min_read_ahead_sectors.unwrap_or(0);
        let read_ahead_policy = ReadAheadPolicy::parse(self.read_ahead_policy.as_deref().unwrap_or("drive"))?;
        if read_ahead_policy == ReadAheadPolicy::Adaptive && min_read_ahead == 0 {
            return Err(DeviceError::param(
                "min_read_ahead_sectors",
                min_read_ahead,
                "must be positive with read_ahead_policy = \"adaptive\" (the read-ahead a sequential read starts)",
            ));
        }
        if let (ReadAheadPolicy::Drive, Some(gap)) = (read_ahead_policy, self.sequential_gap_sectors) {
            return Err(DeviceError::param(
                "sequential_gap_sectors",
                gap,
                "applies only with read_ahead_policy = \"adaptive\"",
            ));
        }
        let destage = DestagePolicy::parse(self.destage.as_deref().unwrap_or("sptf"))?;
        if self.keep_destaged == Some(true) && self.write_cache != Some(true) {
            return Err(DeviceError::param(
                "keep_destaged",
                true,
                "applies only with write_cache = true (it keeps destaged data in the write-back buffer)",
            ));
        }
        let destage_chunk = self.destage_chunk_sectors.unwrap_or(1024);
        if destage_chunk == 0 {
            return Err(DeviceError::param("destage_chunk_sectors", 0, "must be positive"));
        }
        Ok(HddModel {
            name: "hdd-7200rpm-1tb".into(),
            geom,
            seek,
            rev: 60e9 / rpm,
            head_switch: ms("head_switch_ms", self.head_switch_ms, 0.8)?,
            write_settle: ms("write_settle_ms", self.write_settle_ms, 0.25)?,
            overheads: Overheads([[rh, rh], [rm, rm], [wh, wh], [wm, wm]]),
            bus_per_sector: 512.0 / (bus_mb * 1e6) * 1e9,
            bus_write_per_sector: 512.0 / (bus_mb * 1e6) * 1e9,
            phases: Phases::default(),
            cache: CacheParams {
                segments,
                segment_sectors,
                read_ahead: self.read_ahead_sectors.unwrap_or(4096),
                min_read_ahead,
                read_ahead_policy,
                sequential_gap: self.sequential_gap_sectors.unwrap_or(0),
                read_hits_on_write_data: true,
                write_back: self.write_cache.unwrap_or(false),
                write_buffer_sectors: self.write_buffer_sectors.unwrap_or(8192),
                destage,
                destage_max_age: ms("destage_max_age_ms", self.destage_max_age_ms, 5000.0)?.round() as u64,
                destage_chunk,
                destage_idle: ms("destage_idle_ms", self.destage_idle_ms, 0.0)?.round() as u64,
                keep_destaged: self.keep_destaged.unwrap_or(false),
            },
            queue_depth,
            policy,
            max_queue_wait: ms("max_queue_wait_ms", self.max_queue_wait_ms, 500.0)?.round() as u64,
        })
    }
}

impl ReadAheadPolicy {
    /// The policy a config names: "drive" or "adaptive".
    pub fn parse(name: &str) -> Result<ReadAheadPolicy, DeviceError> {
        match name {
            "drive" => Ok(ReadAheadPolicy::Drive),
            "adaptive" => Ok(ReadAheadPolicy::Adaptive),
            other => Err(DeviceError::param(
                "read_ahead_policy",
                other,
                "expected \"drive\" or \"adaptive\"",
            )),
        }
    }
}

impl DestagePolicy {
    /// The policy a config names: "sptf", "cscan" or "fifo".
    pub fn parse(name: &str) -> Result<DestagePolicy, DeviceError> {
        match name {
            "sptf" => Ok(DestagePolicy::Sptf),
            "cscan" => Ok(DestagePolicy::Cscan),
            "fifo" => Ok(DestagePolicy::Fifo),
            other => Err(DeviceError::param(
                "destage",
                other,
                "expected \"sptf\", \"cscan\" or \"fifo\"",
            )),
        }
    }
}
