//! User-facing HDD parameters (serde) and the built-in default disk: the
//! 7200 RPM 1 TB SATA disk of ca. 2012 of `shared/design/device-models.md`.

use super::geometry::{Geometry, Hole, Zone};
use super::model::{
    CacheParams, DestagePolicy, HddModel, Overheads, Phases, QueuePolicy, ReadAheadExtent, ReadAheadPolicy,
};
use super::seek::{SeekCurve, SeekTimes};
use crate::DeviceError;
use serde::Deserialize;

/// A seek curve as given in a config.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum SeekSpec {
    /// `a1 + b1·√d` ms below `split` cylinders, `a2 + b2·d` ms beyond.
    TwoRegime {
        /// Distance (cylinders) where the second regime starts.
        split: f64,
        /// Constant of the first regime, ms.
        a1: f64,
        /// Factor of √d in the first regime, ms.
        b1: f64,
        /// Constant of the second regime, ms.
        a2: f64,
        /// Factor of d in the second regime, ms.
        b2: f64,
    },
    /// Measured `[distance_cylinders, ms]` points, interpolated.
    Table {
        /// `[distance_cylinders, ms]` points.
        points: Vec<[f64; 2]>,
    },
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

fn non_negative(key: &str, v: f64) -> Result<f64, DeviceError> {
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(DeviceError::param(key, v, "must be a non-negative number"))
    }
}

/// A number within `min..=max` (finite), or an error naming the key and the range.
fn within(key: &str, v: f64, min: f64, max: f64, unit: &str) -> Result<f64, DeviceError> {
    if v.is_finite() && (min..=max).contains(&v) {
        Ok(v)
    } else {
        Err(DeviceError::param(
            key,
            v,
            format!("must be between {min} and {max} {unit}"),
        ))
    }
}

/// A whole number within `min..=max`, or an error naming the key and the range.
fn count_within<T: Copy + Into<u64> + std::fmt::Display>(
    key: &str,
    v: T,
    min: u64,
    max: u64,
) -> Result<T, DeviceError> {
    if (min..=max).contains(&v.into()) {
        Ok(v)
    } else {
        Err(DeviceError::param(key, v, format!("must be between {min} and {max}")))
    }
}

/// Longest time of one mechanical step or controller overhead (seek,
/// rotation, head switch, settle, overhead), ms: 1000 s, far above any disk,
/// low enough that no run of requests leaves u64 nanoseconds.
pub const MAX_STEP_MS: f64 = 1e6;
/// Longest policy time (destage age and idle, SPTF age bound), ms: 11.6
/// days ("never" in a simulation), far from the end of u64 nanoseconds.
pub const MAX_POLICY_MS: f64 = 1e9;
/// Most recording surfaces, sectors per track and zones a disk may have
/// (real disks: under 20, a few thousand, a few dozen), so a cylinder's
/// sectors and the zone table stay small.
pub const MAX_SURFACES: u64 = 1024;
/// Most physical sectors per track a description may give.
pub const MAX_SECTORS_PER_TRACK: u64 = 1_000_000;
/// Most zones a description may give.
pub const MAX_ZONES: u64 = 10_000;
/// Most commands a drive accepts at once (NCQ: 32, SCSI TCQ: 256).
pub const MAX_QUEUE_DEPTH: u64 = 1024;

/// The default disk's capacity: 1 TB.
pub const DEFAULT_CAPACITY: u64 = 1_953_525_168;
/// Most read cache segments (a scan of the segments runs on every read).
pub const MAX_SEGMENTS: usize = 1024;
/// Cylinders the default seek fit was measured over (device-models.md).
const FIT_CYLINDERS: f64 = 228_700.0;

impl HddParams {
    /// Builds the disk: defaults with these overrides applied.
    pub fn build(&self) -> Result<HddModel, DeviceError> {
        // 1 rpm (a 60 s revolution) to 1e6 rpm: real disks spin at 3600-15000.
        let rpm = within("rpm", self.rpm.unwrap_or(7200.0), 1.0, 1e6, "rpm")?;
        let capacity = self.capacity_sectors.unwrap_or(DEFAULT_CAPACITY);
        if capacity == 0 {
            return Err(DeviceError::param("capacity_sectors", 0, "must be positive"));
        }
        let heads = count_within("surfaces", self.surfaces.unwrap_or(4), 1, MAX_SURFACES)?;
        let outer = count_within(
            "outer_sectors_per_track",
            self.outer_sectors_per_track.unwrap_or(2673),
            1,
            MAX_SECTORS_PER_TRACK,
        )?;
        let inner = self.inner_sectors_per_track.unwrap_or(1350);
        if inner == 0 || outer < inner {
            return Err(DeviceError::param(
                "inner_sectors_per_track",
                inner,
                format!("must be positive and at most outer_sectors_per_track ({outer})"),
            ));
        }
        let nz = count_within("zones", self.zones.unwrap_or(30), 1, MAX_ZONES)?;
        let skew = |key: &str, v: Option<f64>| {
            let v = non_negative(key, v.unwrap_or(0.148))?;
            if v >= 1.0 {
                return Err(DeviceError::param(
                    key,
                    v,
                    "skews are fractions of a revolution, below 1",
                ));
            }
            Ok(v)
        };
        let tskew = skew("track_skew", self.track_skew)?;
        let cskew = skew("cylinder_skew", self.cylinder_skew)?;
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
        let cyl_per_zone = capacity.div_ceil(per_cyl).max(1);
        if cyl_per_zone * nz as u64 > u32::MAX as u64 {
            return Err(DeviceError::param(
                "capacity_sectors",
                capacity,
                format!("needs {cyl_per_zone} cylinders per zone, more than the model's 2^32 cylinders: add surfaces, zones or sectors per track"),
            ));
        }
        let cyl_per_zone = cyl_per_zone as u32;
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
            .and_then(|()| seek.check_range(cylinders, MAX_STEP_MS))
            .map_err(|e| DeviceError::param("seek", format!("{:?}", self.seek), e))?;
        let ms =
            |key: &str, v: Option<f64>, d: f64| within(key, v.unwrap_or(d), 0.0, MAX_STEP_MS, "ms").map(|x| x * 1e6);
        let policy_ms =
            |key: &str, v: Option<f64>, d: f64| within(key, v.unwrap_or(d), 0.0, MAX_POLICY_MS, "ms").map(|x| x * 1e6);
        let rh = ms("read_hit_overhead_ms", self.read_hit_overhead_ms, 0.05)?;
        let rm = ms("read_miss_overhead_ms", self.read_miss_overhead_ms, 0.15)?;
        let wh = ms("write_hit_overhead_ms", self.write_hit_overhead_ms, 0.05)?;
        let wm = ms("write_miss_overhead_ms", self.write_miss_overhead_ms, 0.15)?;
        // At least 1 MB/s (0.5 ms a sector): slower would make one large
        // request take hours; at most 1e6 MB/s.
        let bus_mb = within("interface_mb_s", self.interface_mb_s.unwrap_or(300.0), 1.0, 1e6, "MB/s")?;
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
        let queue_depth =
            count_within("queue_depth", self.queue_depth.unwrap_or(1) as u64, 1, MAX_QUEUE_DEPTH)? as usize;
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
        let rev = 60e9 / rpm;
        Ok(HddModel {
            name: "hdd-7200rpm-1tb".into(),
            sector_ns: HddModel::sector_times(&geom, rev),
            geom,
            seek: SeekTimes::new(seek, cylinders),
            rev,
            head_switch: ms("head_switch_ms", self.head_switch_ms, 0.8)?,
            write_settle: ms("write_settle_ms", self.write_settle_ms, 0.25)?,
            min_write_seek: 0.0,
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
                read_ahead_extent: ReadAheadExtent::Segment,
                read_ahead_over_request: false,
                drop_read_data: false,
                read_passing_blocks: false,
                sequential_gap: self.sequential_gap_sectors.unwrap_or(0),
                read_hits_on_write_data: true,
                write_back: self.write_cache.unwrap_or(false),
                write_buffer_sectors: self.write_buffer_sectors.unwrap_or(8192),
                destage,
                destage_max_age: policy_ms("destage_max_age_ms", self.destage_max_age_ms, 5000.0)?.round() as u64,
                destage_chunk,
                destage_idle: policy_ms("destage_idle_ms", self.destage_idle_ms, 0.0)?.round() as u64,
                keep_destaged: self.keep_destaged.unwrap_or(false),
            },
            queue_depth,
            policy,
            max_queue_wait: policy_ms("max_queue_wait_ms", self.max_queue_wait_ms, 500.0)?.round() as u64,
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
