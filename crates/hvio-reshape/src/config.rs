//! The reshaping configuration (typed, serde, validated) and the image layout
//! it implies (paper 001 §III.A.2: a metadata region and a data region; the
//! log area of §III.B.3; two checkpoint slots for the remap table).
//!
//! Sizes are in bytes in the configuration and in 512-byte sectors in the
//! layout. A bad value is a [`ConfigError`] naming the key and the value; the
//! caller adds where the configuration came from (the simulator names the VM).

use crate::encoding::{checkpoint_bytes_for, tx_blocks_for};
use hvio_core::{ConfigError, Sector, SECTOR_BYTES};
use serde::{Deserialize, Serialize};

/// How the cleaner picks the segment to clean (§III.B.2; LFS's two policies).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Victim {
    /// The segment with the fewest valid sectors.
    #[default]
    Greedy,
    /// The largest (1 − u) · age / (1 + u) (Rosenblum and Ousterhout, LFS §3.5).
    CostBenefit,
}

/// The user's reshaping keys.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReshapeConfig {
    /// Unit of the log, the checkpoints and segment alignment, bytes.
    pub block_bytes: u64,
    /// Keep the original image at the start of the file: unmapped reads go to
    /// the original address there (the paper's behaviour). Without it,
    /// unmapped sectors read as zeroes (a fresh image).
    pub base: bool,
    /// The metadata region, bytes (a multiple of `segment_bytes`).
    pub meta_region_bytes: u64,
    /// The data region, bytes (a multiple of `segment_bytes`).
    pub data_region_bytes: u64,
    /// The cleaning unit, bytes (a multiple of `block_bytes`).
    pub segment_bytes: u64,
    /// The write-ahead log area, bytes (a multiple of `block_bytes`).
    pub log_bytes: u64,
    /// The whole image file, bytes; 0 means "exactly what the layout needs".
    pub image_bytes: u64,
    /// Commit the running transaction once it holds this many remap entries.
    pub commit_entries: u32,
    /// Checkpoint the table once the log since the last checkpoint fills this
    /// fraction of the log area, in (0, 1).
    pub checkpoint_at: f64,
    /// Start cleaning a region when its free segments fall under this
    /// fraction of its segments, in (0, 1).
    pub clean_start: f64,
    /// Hold new writes to a region while its free segments are under this
    /// fraction (they are left to the cleaner), in [0, clean_start].
    pub clean_hard: f64,
    /// Victim selection.
    pub victim: Victim,
    /// Segments one cleaning job may copy, one after another, before the
    /// commit that frees them all (at least 1). A job goes on to another
    /// victim only while the region still wants space.
    pub clean_victims: u32,
}

impl Default for ReshapeConfig {
    fn default() -> Self {
        ReshapeConfig {
            block_bytes: 4096,
            base: true,
            meta_region_bytes: 64 << 20,
            data_region_bytes: 1 << 30,
            segment_bytes: 2 << 20,
            log_bytes: 16 << 20,
            image_bytes: 0,
            commit_entries: 1024,
            checkpoint_at: 0.5,
            clean_start: 0.02,
            clean_hard: 0.01,
            victim: Victim::Greedy,
            clean_victims: 4,
        }
    }
}

/// A region's place, in sectors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Area {
    /// First sector.
    pub start: Sector,
    /// Length in sectors.
    pub sectors: u64,
}

impl Area {
    /// One past the last sector.
    pub fn end(&self) -> Sector {
        self.start + self.sectors
    }
    /// Whether sector `s` lies in the area.
    pub fn contains(&self, s: Sector) -> bool {
        s >= self.start && s < self.end()
    }
}

/// The validated configuration and where everything lives in the image.
#[derive(Clone, Debug, PartialEq)]
pub struct Layout {
    /// The keys as given.
    pub config: ReshapeConfig,
    /// The guest-visible disk (original addresses `0..disk_sectors`).
    pub disk_sectors: u64,
    /// Sectors per block (`block_bytes` / 512).
    pub block_sectors: u64,
    /// Sectors per segment (`segment_bytes` / 512).
    pub segment_sectors: u64,
    /// The original image, identity-mapped (empty without `base`).
    pub base: Area,
    /// The metadata region (§III.A.2).
    pub meta: Area,
    /// The data region.
    pub data: Area,
    /// The log area (§III.B.3).
    pub log: Area,
    /// Two checkpoint slots, written alternately.
    pub checkpoints: [Area; 2],
    /// The whole image.
    pub image_sectors: u64,
}

fn invalid(key: &str, value: impl ToString, reason: impl Into<String>) -> ConfigError {
    ConfigError::InvalidValue {
        context: "reshape".into(),
        key: key.into(),
        value: value.to_string(),
        reason: reason.into(),
    }
}

impl ReshapeConfig {
    /// Check every key and compute the layout for a disk of `disk_bytes`.
    pub fn layout(&self, disk_bytes: u64) -> Result<Layout, ConfigError> {
        let b = self.block_bytes;
        if b == 0 || !b.is_multiple_of(SECTOR_BYTES) || !b.is_power_of_two() || b > (1 << 20) {
            return Err(invalid(
                "block_bytes",
                b,
                "must be a power of two, a multiple of 512 and at most 1 MiB",
            ));
        }
        if disk_bytes == 0 || !disk_bytes.is_multiple_of(b) {
            return Err(invalid(
                "disk_bytes",
                disk_bytes,
                format!("the disk must be a non-zero multiple of block_bytes ({b})"),
            ));
        }
        let seg = self.segment_bytes;
        if seg == 0 || !seg.is_multiple_of(b) {
            return Err(invalid(
                "segment_bytes",
                seg,
                format!("must be a non-zero multiple of block_bytes ({b})"),
            ));
        }
        for (key, bytes) in [
            ("meta_region_bytes", self.meta_region_bytes),
            ("data_region_bytes", self.data_region_bytes),
        ] {
            if !bytes.is_multiple_of(seg) || bytes / seg < MIN_SEGMENTS {
                return Err(invalid(
                    key,
                    bytes,
                    format!("must be a multiple of segment_bytes ({seg}) holding at least {MIN_SEGMENTS} segments"),
                ));
            }
        }
        if self.commit_entries == 0 {
            return Err(invalid("commit_entries", 0, "must be at least 1"));
        }
        let tx_bytes = tx_blocks_for(self.commit_entries as usize, b as usize) as u64 * b;
        if !self.log_bytes.is_multiple_of(b) || self.log_bytes < 4 * tx_bytes {
            return Err(invalid(
                "log_bytes",
                self.log_bytes,
                format!(
                    "must be a multiple of block_bytes ({b}) holding at least four full transactions \
                     ({} bytes at commit_entries = {})",
                    4 * tx_bytes,
                    self.commit_entries
                ),
            ));
        }
        for (key, v) in [("checkpoint_at", self.checkpoint_at), ("clean_start", self.clean_start)] {
            if !(v > 0.0 && v < 1.0) {
                return Err(invalid(key, v, "must be in (0, 1)"));
            }
        }
        if !(self.clean_hard >= 0.0 && self.clean_hard <= self.clean_start) {
            return Err(invalid(
                "clean_hard",
                self.clean_hard,
                format!("must be in [0, clean_start] = [0, {}]", self.clean_start),
            ));
        }
        if self.clean_victims == 0 {
            return Err(invalid("clean_victims", 0, "must be at least 1"));
        }
        let bs = b / SECTOR_BYTES;
        let sectors = |bytes: u64| bytes / SECTOR_BYTES;
        let base_sectors = if self.base { sectors(disk_bytes) } else { 0 };
        let base = Area {
            start: 0,
            sectors: base_sectors,
        };
        let meta = Area {
            start: base.end(),
            sectors: sectors(self.meta_region_bytes),
        };
        let data = Area {
            start: meta.end(),
            sectors: sectors(self.data_region_bytes),
        };
        let log = Area {
            start: data.end(),
            sectors: sectors(self.log_bytes),
        };
        // A slot holds the table at one extent per block of both regions, plus
        // one trimmed extent per block of the disk.
        let most_extents = (meta.sectors + data.sectors + sectors(disk_bytes)) / bs;
        let slot_sectors = checkpoint_bytes_for(most_extents as usize, b as usize) as u64 / SECTOR_BYTES;
        let ck0 = Area {
            start: log.end(),
            sectors: slot_sectors,
        };
        let ck1 = Area {
            start: ck0.end(),
            sectors: slot_sectors,
        };
        let needed = ck1.end();
        let image_sectors = if self.image_bytes == 0 {
            needed
        } else {
            if self.image_bytes < needed * SECTOR_BYTES {
                return Err(invalid(
                    "image_bytes",
                    self.image_bytes,
                    format!(
                        "the regions do not fit: base {} + meta {} + data {} + log {} + checkpoints {} = {} bytes",
                        base.sectors * SECTOR_BYTES,
                        self.meta_region_bytes,
                        self.data_region_bytes,
                        self.log_bytes,
                        2 * slot_sectors * SECTOR_BYTES,
                        needed * SECTOR_BYTES
                    ),
                ));
            }
            sectors(self.image_bytes)
        };
        Ok(Layout {
            config: self.clone(),
            disk_sectors: sectors(disk_bytes),
            block_sectors: bs,
            segment_sectors: sectors(seg),
            base,
            meta,
            data,
            log,
            checkpoints: [ck0, ck1],
            image_sectors,
        })
    }
}

/// Fewest segments a region may have: one open for the guest, one for the
/// cleaner, one to clean into.
pub const MIN_SEGMENTS: u64 = 3;

#[cfg(test)]
mod tests {
    use super::*;

    fn err(c: &ReshapeConfig) -> String {
        c.layout(1 << 30).unwrap_err().to_string()
    }

    #[test]
    fn default_layout_places_areas_in_order() {
        let l = ReshapeConfig::default().layout(1 << 30).unwrap();
        assert_eq!(
            l.base,
            Area {
                start: 0,
                sectors: 2 << 20
            }
        );
        assert_eq!(l.meta.start, 2 << 20);
        assert_eq!(l.data.start, l.meta.end());
        assert_eq!(l.log.start, l.data.end());
        assert_eq!(l.checkpoints[1].start, l.checkpoints[0].end());
        assert_eq!(l.image_sectors, l.checkpoints[1].end());
        assert_eq!(l.segment_sectors, 4096);
    }

    #[test]
    fn bad_values_name_key_and_value() {
        let c = ReshapeConfig {
            segment_bytes: 6000,
            ..Default::default()
        };
        let e = err(&c);
        assert!(e.contains("`segment_bytes`") && e.contains("6000"), "{e}");
        let c = ReshapeConfig {
            clean_start: 1.5,
            ..Default::default()
        };
        let e = err(&c);
        assert!(e.contains("`clean_start`") && e.contains("1.5"), "{e}");
        let c = ReshapeConfig {
            clean_hard: 0.2,
            ..Default::default()
        };
        assert!(err(&c).contains("`clean_hard`"));
        let c = ReshapeConfig {
            image_bytes: 1 << 30,
            ..Default::default()
        };
        let e = err(&c);
        assert!(e.contains("`image_bytes`") && e.contains("do not fit"), "{e}");
        let c = ReshapeConfig {
            meta_region_bytes: 4 << 20,
            ..Default::default()
        };
        assert!(err(&c).contains("`meta_region_bytes`"));
        let c = ReshapeConfig {
            log_bytes: 4096,
            ..Default::default()
        };
        assert!(err(&c).contains("`log_bytes`"));
    }

    #[test]
    fn unknown_key_is_refused_by_serde() {
        let e = toml::from_str::<ReshapeConfig>("segmnet_bytes = 1")
            .unwrap_err()
            .to_string();
        assert!(e.contains("segmnet_bytes"), "{e}");
        let c: ReshapeConfig = toml::from_str("victim = \"cost-benefit\"\nsegment_bytes = 1048576").unwrap();
        assert_eq!(c.victim, Victim::CostBenefit);
    }
}
