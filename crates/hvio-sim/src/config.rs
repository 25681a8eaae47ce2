//! The simulation config (TOML): the disk, the host scheduler, the VMs with
//! their images, guest settings and jobs. Unknown keys are errors.
//!
//! Image layout: each VM's image is a contiguous region of the disk (the
//! hypervisor's file system allocates image files contiguously, paper 000
//! §2.2). Without an explicit `offset`, images follow each other from
//! `[host] first_image_offset`, separated by `[host] image_gap`; a VM can
//! also be split into `fragments` equal extents spread `fragment_gap` apart.

use crate::error::{Result, SimError};
use crate::size::Size;
use crate::workload::{Job, JobConfig};
use hvio_core::{ParamValues, SECTOR_BYTES};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The whole simulation config.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Safety stop in simulated seconds; a run normally ends when every job has finished.
    #[serde(default = "default_max_time")]
    pub max_time_s: f64,
    /// The device: `hvio_device::DeviceConfig` (checked when the run starts).
    #[serde(default)]
    pub disk: toml::Table,
    #[serde(default)]
    pub host: HostConfig,
    #[serde(default, rename = "vm")]
    pub vms: Vec<VmConfig>,
    #[serde(default)]
    pub output: OutputConfig,
    /// Directory relative paths in the config are resolved against (not serialised).
    #[serde(skip)]
    pub base_dir: PathBuf,
}

fn default_seed() -> u64 {
    1
}
fn default_max_time() -> f64 {
    3600.0
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostConfig {
    #[serde(default = "default_host_sched")]
    pub scheduler: String,
    #[serde(default)]
    pub params: ParamValues,
    /// Where the first image starts when VMs give no offset.
    #[serde(default = "default_first_offset")]
    pub first_image_offset: Size,
    /// Space between consecutive images.
    #[serde(default = "default_image_gap")]
    pub image_gap: Size,
    /// The host I/O path of Xen's blktap2 with tapdisk's AIO driver (the
    /// paper's "Xen 4.0.1 with Blktap AIO driver"); absent: requests go
    /// from the guest ring straight to the host scheduler, unchanged.
    #[serde(default)]
    pub blktap: Option<BlktapConfig>,
}

/// `[host.blktap]`: what Xen 4.0.1's blktap2 path does to a guest's
/// requests between blkfront and the dom0 elevator. Read from the Xen
/// sources (`tools/blktap2/drivers/`):
///
/// - `tapdisk-vbd.c`, `tapdisk_vbd_pull_ring_requests` and
///   `tapdisk_vbd_issue_request`: tapdisk (one user process per VBD)
///   takes every request on its ring at once and queues one AIO control
///   block per segment (`td_queue_read`/`td_queue_write` →
///   `block-aio.c`, `tdaio_queue_read` → `tapdisk_prep_tiocb`), with the
///   segment's buffer at `MMAP_VADDR(vstart, req->id, seg)`: ring slot
///   `id`'s 11 pages follow slot `id − 1`'s. The kernel side gives each
///   request the lowest free slot (`blktap_ring_make_request`).
/// - `tapdisk-server.c`, `tapdisk_server_iterate` →
///   `tapdisk_server_submit_tiocbs` → `tapdisk-queue.c`,
///   `tapdisk_submit_tiocbs`: once per event-loop pass, everything queued
///   goes to one `io_submit` after `io_merge` (`io-optimize.c`), which
///   joins each control block to the one before it when both read or both
///   write, the file offsets are contiguous and the buffers are
///   contiguous (`contiguous_iocbs`). So the pages of one blkif request
///   become one read or write again, and consecutive full (11-segment,
///   44 KiB) requests in consecutive slots join into one.
/// - No other limit: tapdisk's queue holds `TAPDISK_DATA_REQUESTS`
///   (ring size × 11) control blocks, more than a ring can bring.
/// - dom0 (the paper's CentOS 5, kernel 2.6.18): the image file is opened
///   `O_DIRECT`; each control block becomes bios of at most the disk's
///   `max_sectors_kb`, unplugged at once (`direct_io_worker` ends with
///   `blk_run_address_space`). Reads are sync; 2.6.18's direct writes carry
///   no sync flag (`WRITE_ODIRECT` came in 2.6.29), so CFQ puts every VM's
///   writes in its shared async queue (`sync_writes` says otherwise). The guest's metadata flag does not cross blkif.
///   The elevator back-merges a bio into a queued request that ends where
///   the bio starts (`elv_merge`), for CFQ only within the same queue.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BlktapConfig {
    /// tapdisk's `io_merge` of contiguous control blocks within one `io_submit`.
    #[serde(default = "yes")]
    pub io_merge: bool,
    /// The dom0 elevator's back merge into queued requests.
    #[serde(default = "yes")]
    pub elevator_merge: bool,
    /// O_DIRECT writes are sync at the host (`WRITE_ODIRECT`, Linux 2.6.29
    /// and later). 2.6.18, the paper's dom0 kernel, sends them as plain
    /// (async) writes: false.
    #[serde(default)]
    pub sync_writes: bool,
    /// dom0's `max_sectors_kb` for the disk (2.6.18's `BLK_DEF_MAX_SECTORS`:
    /// 512 KiB): no merged request is longer.
    #[serde(default = "default_host_max_kb")]
    pub max_sectors_kb: u32,
}

fn default_host_max_kb() -> u32 {
    512
}

impl Default for BlktapConfig {
    fn default() -> Self {
        BlktapConfig {
            io_merge: true,
            elevator_merge: true,
            sync_writes: false,
            max_sectors_kb: default_host_max_kb(),
        }
    }
}

impl BlktapConfig {
    /// The longest merged request, in sectors.
    pub fn max_sectors(&self) -> u32 {
        self.max_sectors_kb * 2
    }
}

fn default_host_sched() -> String {
    "deadline".into()
}
fn default_first_offset() -> Size {
    // Paper 000 Fig. 1: the images sit around sector 3.0e8 of the 1 TB disk.
    Size(300_000_000 * SECTOR_BYTES)
}
fn default_image_gap() -> Size {
    Size(512 << 20)
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            scheduler: default_host_sched(),
            params: ParamValues::new(),
            first_image_offset: default_first_offset(),
            image_gap: default_image_gap(),
            blktap: None,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VmConfig {
    pub name: String,
    #[serde(default = "default_image_size")]
    pub image_size: Size,
    /// Byte offset of the image on the disk (default: after the previous image).
    pub offset: Option<Size>,
    /// Split the image into this many equal extents (fragmentation).
    #[serde(default = "one")]
    pub fragments: u32,
    /// Space between fragments.
    #[serde(default)]
    pub fragment_gap: Size,
    #[serde(default = "default_weight")]
    pub weight: u32,
    #[serde(default)]
    pub attrs: BTreeMap<String, f64>,
    #[serde(default = "default_guest_sched")]
    pub guest_scheduler: String,
    #[serde(default)]
    pub guest_params: ParamValues,
    /// Requests the virtio/blkfront ring holds between guest and host.
    #[serde(default = "default_ring")]
    pub virtio_depth: u32,
    /// What the guest kernel believes about its virtual disk: rotational
    /// (`true`) or not (`false`), i.e. the `rotational` of the guest
    /// scheduler's `DeviceInfo` (its `queue_depth` is `virtio_depth`).
    /// Default: the host device's flag.
    ///
    /// Paravirtual block drivers declare their disks non-rotational: Xen's
    /// blkfront sets `QUEUE_FLAG_VIRT` on its request queue
    /// (`xen-blkfront.c`, `xlvbd_init_blk_queue`:
    /// `queue_flag_set_unlocked(QUEUE_FLAG_VIRT, rq)`, since Linux 2.6.29),
    /// and `blkdev.h` defines `QUEUE_FLAG_VIRT` as `QUEUE_FLAG_NONROT`
    /// ("paravirt device"). A guest CFQ on such a disk with a ring of ≥ 5
    /// slots (`hw_tag`) does not idle for a thread's next request
    /// (`cfq_arm_slice_timer`, `cfq_should_idle`), so its threads reach the
    /// host together. Guests older than 2.6.29 (Pregather's 2.6.18) saw a
    /// rotational disk, which the default gives on the HDD model.
    #[serde(default)]
    pub guest_disk_rotational: Option<bool>,
    /// One-way latency of the virtualization path (guest ↔ host), µs.
    #[serde(default = "default_virt_latency")]
    pub virt_latency_us: u64,
    /// Size of the guest file system's journal/metadata area at the image start.
    #[serde(default = "default_journal")]
    pub journal_size: Size,
    /// Period of the guest journal commit while data was written (ext3/4 default 5 s; 0 = off).
    #[serde(default = "default_commit")]
    pub journal_commit_s: f64,
    /// The guest file system's `barrier` mount option: fsync ends with a
    /// cache flush (ext4's default; CentOS 5's ext3 mounted `barrier=0`).
    #[serde(default = "yes")]
    pub barrier: bool,
    /// The guest page cache of the jobs with `direct = false`.
    #[serde(default)]
    pub page_cache: crate::pagecache::PageCacheConfig,
    #[serde(default, rename = "job")]
    pub jobs: Vec<JobConfig>,
}

fn default_image_size() -> Size {
    Size(12 << 30)
}
fn one() -> u32 {
    1
}
fn yes() -> bool {
    true
}
fn default_weight() -> u32 {
    hvio_core::StreamInfo::DEFAULT_WEIGHT
}
fn default_guest_sched() -> String {
    "noop".into()
}
fn default_ring() -> u32 {
    // Xen blkfront's ring: 32 requests.
    32
}
fn default_virt_latency() -> u64 {
    20
}
fn default_journal() -> Size {
    Size(128 << 20)
}
fn default_commit() -> f64 {
    5.0
}

/// Optional outputs.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputConfig {
    /// Stream one CSV line per host-level request to this file.
    pub records: Option<PathBuf>,
    /// Width of the throughput time-series buckets, seconds (default 1).
    pub interval_s: Option<f64>,
}

/// A VM after layout: its extents on the disk and its resolved jobs.
#[derive(Clone, Debug)]
pub struct VmLayout {
    pub name: String,
    /// (first sector, sectors) of each extent, in image order.
    pub extents: Vec<(u64, u64)>,
    pub image_sectors: u64,
    pub jobs: Vec<Job>,
}

impl VmLayout {
    /// Physical sector of image sector `s`.
    #[inline]
    pub fn map(&self, s: u64) -> u64 {
        if self.extents.len() == 1 {
            return self.extents[0].0 + s;
        }
        let per = self.extents[0].1;
        let i = ((s / per) as usize).min(self.extents.len() - 1);
        self.extents[i].0 + (s - per * i as u64)
    }
    /// The whole span from first to last extent end.
    pub fn span(&self) -> (u64, u64) {
        let start = self.extents.first().map(|e| e.0).unwrap_or(0);
        let end = self.extents.last().map(|e| e.0 + e.1).unwrap_or(0);
        (start, end - start)
    }
}

impl Config {
    /// Parse a config; `origin` (a file name) prefixes every error.
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Config> {
        let mut cfg: Config = toml::from_str(text).map_err(|e| SimError::Parse {
            origin: origin.to_string(),
            message: e.to_string(),
        })?;
        cfg.base_dir = Path::new(origin).parent().map(Path::to_path_buf).unwrap_or_default();
        Ok(cfg)
    }

    /// Parse a config written as JSON (the Python API passes dicts this way).
    pub fn from_json_str(text: &str, origin: &str) -> Result<Config> {
        let mut cfg: Config = serde_json::from_str(text).map_err(|e| SimError::Parse {
            origin: origin.to_string(),
            message: e.to_string(),
        })?;
        cfg.base_dir = Path::new(origin).parent().map(Path::to_path_buf).unwrap_or_default();
        Ok(cfg)
    }

    pub fn from_file(path: &Path) -> Result<Config> {
        let text = std::fs::read_to_string(path).map_err(|source| SimError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Config::from_toml_str(&text, &path.display().to_string())
    }

    /// Check the values and lay out the images on a disk of `capacity` sectors.
    pub fn layout(&self, capacity: u64) -> Result<Vec<VmLayout>> {
        if !(self.max_time_s.is_finite() && self.max_time_s > 0.0) {
            return Err(SimError::invalid(
                "config",
                "max_time_s",
                self.max_time_s,
                "must be positive",
            ));
        }
        if let Some(b) = &self.host.blktap {
            if !(8..=32768).contains(&b.max_sectors_kb) {
                return Err(SimError::invalid(
                    "host.blktap",
                    "max_sectors_kb",
                    b.max_sectors_kb,
                    "must be between 8 and 32768",
                ));
            }
        }
        if self.vms.is_empty() {
            return Err(SimError::invalid("config", "vm", "[]", "at least one [[vm]] is needed"));
        }
        let mut names = std::collections::BTreeSet::new();
        let mut next = self.host.first_image_offset.sectors();
        let mut out = Vec::new();
        for (i, vm) in self.vms.iter().enumerate() {
            let ctx = format!("vm \"{}\"", vm.name);
            if !names.insert(vm.name.clone()) {
                return Err(SimError::invalid(&ctx, "name", &vm.name, "duplicate VM name"));
            }
            if vm.image_size.0 == 0 || vm.image_size.0 % SECTOR_BYTES != 0 {
                return Err(SimError::invalid(
                    &ctx,
                    "image_size",
                    vm.image_size.0,
                    "must be a positive multiple of 512 bytes",
                ));
            }
            if vm.fragments == 0 || vm.image_size.sectors() % vm.fragments as u64 != 0 {
                return Err(SimError::invalid(
                    &ctx,
                    "fragments",
                    vm.fragments,
                    "must be ≥ 1 and divide the image into whole sectors",
                ));
            }
            if vm.weight == 0 || vm.weight > 10_000 {
                return Err(SimError::invalid(
                    &ctx,
                    "weight",
                    vm.weight,
                    "must be between 1 and 10000",
                ));
            }
            if vm.virtio_depth == 0 {
                return Err(SimError::invalid(&ctx, "virtio_depth", 0, "must be at least 1"));
            }
            if !(vm.journal_commit_s.is_finite() && vm.journal_commit_s >= 0.0) {
                return Err(SimError::invalid(
                    &ctx,
                    "journal_commit_s",
                    vm.journal_commit_s,
                    "must be ≥ 0",
                ));
            }
            let start = match vm.offset {
                Some(o) if o.0 % SECTOR_BYTES != 0 => {
                    return Err(SimError::invalid(
                        &ctx,
                        "offset",
                        o.0,
                        "must be a multiple of 512 bytes",
                    ))
                }
                Some(o) => o.sectors(),
                None => next,
            };
            let per = vm.image_size.sectors() / vm.fragments as u64;
            let gap = vm.fragment_gap.sectors();
            let extents: Vec<(u64, u64)> = (0..vm.fragments as u64)
                .map(|f| (start + f * (per + gap), per))
                .collect();
            let end = extents.last().map(|e| e.0 + e.1).unwrap_or(start);
            if end > capacity {
                return Err(SimError::invalid(
                    &ctx,
                    "image_size",
                    vm.image_size.0,
                    format!("the image ends at sector {end}, past the end of the disk ({capacity} sectors)"),
                ));
            }
            for prev in &out {
                let (ps, pl) = VmLayout::span(prev);
                if start < ps + pl && ps < end {
                    return Err(SimError::invalid(
                        &ctx,
                        "offset",
                        start * SECTOR_BYTES,
                        format!("the image overlaps vm \"{}\"", prev.name),
                    ));
                }
            }
            next = end + self.host.image_gap.sectors();
            let mut jobs = Vec::new();
            let mut used = vm.journal_size.0;
            for (j, jc) in vm.jobs.iter().enumerate() {
                let job = jc.resolve(&format!("{ctx} job {j}"))?;
                used += job.size;
                jobs.push(job);
            }
            if jobs.iter().any(|j| !j.direct) {
                vm.page_cache.check(&ctx)?;
                if !vm.journal_size.0.is_multiple_of(crate::pagecache::PAGE_BYTES) {
                    return Err(SimError::invalid(
                        &ctx,
                        "journal_size",
                        vm.journal_size.0,
                        "must be whole 4 KiB pages when a job is buffered (direct = false)",
                    ));
                }
            }
            if used > vm.image_size.0 {
                return Err(SimError::invalid(
                    &ctx,
                    "image_size",
                    vm.image_size.0,
                    format!("the journal and the jobs' files need {used} bytes, more than the image holds"),
                ));
            }
            let _ = i;
            out.push(VmLayout {
                name: vm.name.clone(),
                extents,
                image_sectors: vm.image_size.sectors(),
                jobs,
            });
        }
        Ok(out)
    }
}
