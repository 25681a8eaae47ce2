//! The two drives of paper 001 §IV: a Samsung 850 PRO 256 GB (SATA) and an
//! Intel SSD DC P3700 (NVMe), as SSD model parameters.
//!
//! Datasheet figures the presets aim at (sources in docs/ssd-model.md):
//! - 850 PRO 256 GB: 550 MB/s sequential read, 520 MB/s sequential write,
//!   4 KiB random read 100K IOPS and write 90K IOPS at QD32, 10K / 36K IOPS
//!   at QD1; SATA 6 Gb/s; 512 MB LPDDR2 cache; 32-layer MLC V-NAND.
//! - P3700 400 GB: 2700 / 1080 MB/s sequential read / write, 4 KiB random
//!   read / write 450K / 75K IOPS (steady state), 20 µs sequential latency;
//!   PCIe 3.0 x4; 20 nm MLC. (The series, 400 GB to 2 TB, reaches "up to"
//!   2800 / 2000 MB/s and 460K / 175K IOPS with its 2 TB model.)
//!
//! Where the datasheets are silent (raw flash, channels, dies, page and block
//! size, buffer, GC thresholds) the values below are choices, each with its
//! reason; the mapping unit is a 4 KiB page, so a 4 KiB write is one page and
//! the flash timings are per 4 KiB of a larger physical page (a 16 KiB
//! two-plane program counts as eight 4 KiB pages).

use super::{GcPolicy, SsdParams};
use serde::Deserialize;

/// `preset = "..."` in a `model = "ssd"` table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum SsdPreset {
    /// Samsung 850 PRO 256 GB, SATA.
    #[serde(rename = "samsung-850-pro-256")]
    Samsung850Pro256,
    /// Intel SSD DC P3700 400 GB, NVMe, timed to that capacity's datasheet figures.
    #[serde(rename = "intel-p3700-400")]
    IntelP3700_400,
}

/// 256 GB and 400 GB in GiB (decimal capacities, as sold).
const GB_256: f64 = 256e9 / (1u64 << 30) as f64;
const GB_400: f64 = 400e9 / (1u64 << 30) as f64;

impl SsdPreset {
    /// The preset's parameters.
    pub fn params(self) -> SsdParams {
        // Common choices: 4 KiB mapping pages in 2 MiB blocks; GC starts at
        // 0.2 % free blocks of a plane and holds host writes at 0.1 % (at
        // least 2 blocks), so the reserve barely eats into the spare flash;
        // GC copies go to their own frontier (hot host data apart from cold
        // survivors); greedy victims, as most drive firmware documents.
        let common = SsdParams {
            page_kib: Some(4),
            pages_per_block: Some(512),
            gc_threshold: Some(0.002),
            gc_hard_threshold: Some(0.001),
            gc_policy: Some(GcPolicy::Greedy),
            separate_gc_frontier: Some(true),
            erase_ms: Some(3.8),
            ..Default::default()
        };
        match self {
            SsdPreset::Samsung850Pro256 => SsdParams {
                preset: Some(self),
                capacity_gib: Some(GB_256),
                // 256 GiB of raw flash behind 256 GB (assumed: the datasheet
                // gives no raw capacity; binary raw behind decimal user
                // capacity is the usual consumer spare, 7.4 %).
                over_provisioning: Some(256.0 / GB_256 - 1.0),
                // The MEX controller's 8 channels (assumed), 4 dies on each,
                // 2 planes per die: 32 dies.
                channels: Some(8),
                chips_per_channel: Some(4),
                dies_per_chip: Some(1),
                planes_per_die: Some(2),
                channel_mb_s: Some(400.0),
                // 32 dies × 4 KiB / 250 µs = 524 MB/s: the 520 MB/s sequential write.
                program_us: Some(250.0),
                // QD1 random read 10K IOPS: 15 + 10 + 58 + 10 (channel) + 7 (link) ≈ 100 µs.
                read_us: Some(58.0),
                controller_us: Some(15.0),
                // SATA 6 Gb/s after 8b/10b is 600 MB/s; framing leaves about 570.
                interface_mb_s: Some(570.0),
                // One command per 10 µs on the link: the 100K IOPS random-read ceiling.
                command_us: Some(10.0),
                // Most of the 512 MB DRAM holds the map; 16 MiB of it buffers writes (assumed).
                write_buffer_mib: Some(16.0),
                queue_depth: Some(32),
                ..common
            },
            SsdPreset::IntelP3700_400 => SsdParams {
                preset: Some(self),
                capacity_gib: Some(GB_400),
                // 37.4 % spare: binary raw flash behind a decimal capacity
                // (2 TiB behind 1.6 TB, 512 GiB behind 400 GB), assumed: the
                // datasheet gives no raw capacity. Steady-state random writes
                // then come out above the datasheet's 75K IOPS (docs/ssd-model.md).
                over_provisioning: Some(0.374),
                // 18 channels (the controller's, assumed), 2 dies each, 2
                // planes: the 400 GB model has a fifth of the 2 TB model's
                // flash, and its sequential write is about half.
                channels: Some(18),
                chips_per_channel: Some(2),
                dies_per_chip: Some(1),
                planes_per_die: Some(2),
                // 18 × 150 MB/s of channels: the 2700 MB/s sequential read.
                channel_mb_s: Some(150.0),
                // 36 dies × 4 KiB / 137 µs ≈ 1076 MB/s: the 1080 MB/s sequential write.
                program_us: Some(137.0),
                // 36 dies × 4 KiB / 50 µs ≈ 2950 MB/s: the dies keep up with the channels.
                read_us: Some(50.0),
                controller_us: Some(5.0),
                // PCIe 3.0 x4: 3.94 GB/s raw, about 3.2 GB/s of payload.
                interface_mb_s: Some(3200.0),
                // 2.2 µs per command: the 460K IOPS random-read ceiling.
                command_us: Some(2.2),
                write_buffer_mib: Some(32.0),
                queue_depth: Some(256),
                ..common
            },
        }
    }
}
