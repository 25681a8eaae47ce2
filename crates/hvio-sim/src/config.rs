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
use crate::tune::plan::{PhaseConfig, PhasePlan};
use crate::workload::{Job, JobConfig};
use hvio_core::{ExtentMap, ParamValues, SECTOR_BYTES};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The whole simulation config.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The seed of every random draw (default 1).
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Safety stop in simulated seconds; a run normally ends when every job has finished.
    #[serde(default = "default_max_time")]
    pub max_time_s: f64,
    /// The device: `hvio_device::DeviceConfig` (checked when the run starts).
    #[serde(default)]
    pub disk: toml::Table,
    /// The host scheduler and its tunables.
    #[serde(default)]
    pub host: HostConfig,
    /// The VMs (`[[vm]]` tables).
    #[serde(default, rename = "vm")]
    pub vms: Vec<VmConfig>,
    /// What to write besides the result.
    #[serde(default)]
    pub output: OutputConfig,
    /// `[[phase]]`: the plan that switches the host's and the guests'
    /// schedulers during the run (see [`crate::tune::plan`]).
    #[serde(default, rename = "phase")]
    pub phases: Vec<PhaseConfig>,
    /// Directory relative paths in the config are resolved against (not serialised).
    #[serde(skip)]
    pub base_dir: PathBuf,
    /// Where the config came from (its file name): the prefix of its errors.
    #[serde(skip)]
    pub origin: String,
    /// The TOML text it was read from, to find the line of a key at fault.
    #[serde(skip)]
    pub source_text: Option<Arc<str>>,
    /// The file it was read from ([`Config::from_file`]), an input no
    /// output may overwrite.
    #[serde(skip)]
    pub file: Option<PathBuf>,
    /// The fio job files its jobs were read from (`[[vm.job]] fio`), inputs too.
    #[serde(skip)]
    pub fio_files: Vec<PathBuf>,
    /// What reading it had to say without refusing it: fio options the
    /// simulator does not model or reads differently (the CLI prints them).
    #[serde(skip)]
    pub warnings: Vec<String>,
}

/// Upper bounds on the numbers a config gives. The simulator allocates per
/// VM, job, thread, file, ring slot, time-series bucket and outstanding
/// request, and keeps time in integer nanoseconds, so every count and
/// duration is bounded well below what would exhaust memory or overflow.
pub mod limits {
    /// A config file's size: 64 MiB, room for the largest config the other
    /// limits allow.
    pub const MAX_CONFIG_BYTES: u64 = hvio_core::input::MAX_CONFIG_BYTES;
    /// `[[vm]]` tables in one config.
    pub const MAX_VMS: usize = 1024;
    /// `[[vm.job]]` tables in one VM.
    pub const MAX_JOBS_PER_VM: usize = 1024;
    /// A job's `numjobs`, and the sum of `numjobs` over a VM's jobs.
    pub const MAX_THREADS_PER_VM: u64 = 65_536;
    /// A job's `nrfiles`.
    pub const MAX_NRFILES: u32 = 1 << 20;
    /// A job's `iodepth`.
    pub const MAX_IODEPTH: u32 = 65_536;
    /// Σ `numjobs` × `iodepth` over every job of the config, plus the
    /// `page_cache.nr_requests` of every VM with a buffered job: requests
    /// that may be outstanding at once (the engine's request table holds 2^20).
    pub const MAX_OUTSTANDING: u64 = 1 << 19;
    /// A VM's `virtio_depth` (the virtio spec's largest queue: 32768).
    pub const MAX_VIRTIO_DEPTH: u32 = 32_768;
    /// A VM's `fragments`.
    pub const MAX_FRAGMENTS: u32 = 65_536;
    /// Σ `fragments` over every VM of the config: the image extents kept.
    pub const MAX_IMAGE_EXTENTS: u64 = 1 << 20;
    /// File extents the engine keeps over the whole config: Σ `nrfiles`,
    /// where a `sharing = "same-file"` job counts `numjobs` × `nrfiles`
    /// (each of its threads walks all of the job's files from its own start).
    pub const MAX_FILE_EXTENTS: u64 = 1 << 22;
    /// Phases the jobs name, and `[[phase]]` steps of a plan.
    pub const MAX_PHASES: usize = 4096;
    /// `max_time_s` and every other duration in seconds (about 11.6 days).
    pub const MAX_SECONDS: f64 = 1e6;
    /// The shortest period of a periodic event the config sets
    /// (`journal_commit_s`): one millisecond.
    pub const MIN_PERIOD_S: f64 = 1e-3;
    /// Time-series buckets: `max_time_s` / `[output] interval_s` × VMs.
    pub const MAX_SERIES_BUCKETS: f64 = 1e7;
}

fn default_seed() -> u64 {
    1
}
fn default_max_time() -> f64 {
    3600.0
}

/// The host's scheduler and where images start.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostConfig {
    /// The host scheduler (default `deadline`).
    #[serde(default = "default_host_sched")]
    pub scheduler: String,
    /// Its tunables by Linux name.
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

/// One VM: its image, weight, guest scheduler and jobs.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VmConfig {
    /// Its name.
    pub name: String,
    /// Its image's size.
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
    /// Its weight at the host (blkio: 10..1000, default 500).
    #[serde(default = "default_weight")]
    pub weight: u32,
    /// Scheduler-specific attributes (e.g. HTBS `rate_iops`).
    #[serde(default)]
    pub attrs: BTreeMap<String, f64>,
    /// The guest's scheduler.
    #[serde(default = "default_guest_sched")]
    pub guest_scheduler: String,
    /// Its tunables by Linux name.
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
    /// Its jobs (`[[vm.job]]` tables).
    #[serde(default, rename = "job")]
    pub jobs: Vec<JobConfig>,
    /// Paper 001's address reshaping on this VM's host path (`reshape =
    /// { ... }`: `hvio_reshape::ReshapeConfig`'s keys, its `*_bytes` keys
    /// also as size strings). The image file then holds the layout's base,
    /// regions, log and checkpoint slots (docs/reshape.md); the guest sees
    /// `image_size`.
    #[serde(default, deserialize_with = "crate::size::reshape_keys")]
    pub reshape: Option<hvio_reshape::ReshapeConfig>,
    /// QEMU's I/O path as a CPU cost that limits throughput (`qemu_path =
    /// { ... }`, docs/reshape.md "QEMU's I/O path"): the VM's guest
    /// requests and the host requests its host-path stage sends pass
    /// through `io_threads` event-loop threads, each busy for the request
    /// costs. Absent: no such cost (the path is `virt_latency_us` alone).
    #[serde(default)]
    pub qemu_path: Option<QemuPathConfig>,
    /// The guest's CPU time per request (`guest_cpu = { vcpus, request_us
    /// }`): a request enters the virtio ring once one of the VM's vCPUs has
    /// spent `request_us` on it. Absent: none (requests enter the ring at
    /// once).
    #[serde(default)]
    pub guest_cpu: Option<GuestCpuConfig>,
}

/// The CPU time a guest spends per request (`[vm] guest_cpu`): the
/// application's submission and reaping, the system call, the file system,
/// the block layer and the virtio driver, completion interrupt included,
/// on the VM's vCPUs. Each request leaving the guest scheduler for the
/// ring takes the vCPU that is free first for `request_us` (the completion
/// side's share is charged there too: the same CPU time per request, so the
/// same ceiling of `vcpus` / `request_us` requests per µs); it reaches the
/// host `virt_latency_us` after that. What this changes beside the ceiling
/// is when requests reach the host: requests the guest sends together
/// (the completions of one merged write, say) arrive spread over the
/// vCPUs' time instead of at one instant. `bench/guest-request-cost.sh`
/// measures `request_us` on the machine it runs on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuestCpuConfig {
    /// The VM's vCPUs that submit requests.
    pub vcpus: u32,
    /// CPU time per request, µs.
    pub request_us: f64,
}

impl GuestCpuConfig {
    /// The most vCPUs a VM may have (KVM's limit on x86 is 1024 and up).
    pub const MAX_VCPUS: u32 = 1024;

    /// Check the values; `ctx` names the VM in errors.
    fn check(&self, ctx: &str) -> Result<()> {
        check_count(ctx, "guest_cpu.vcpus", self.vcpus, Self::MAX_VCPUS)?;
        check_cost(
            ctx,
            "guest_cpu.request_us",
            self.request_us,
            QemuPathConfig::MAX_COST_US,
        )
    }
}

/// `value` of `key` is a count from 1 to `max`, or an error naming the key.
fn check_count(ctx: &str, key: &str, value: u32, max: u32) -> Result<()> {
    if (1..=max).contains(&value) {
        return Ok(());
    }
    Err(SimError::invalid(ctx, key, value, format!("must be 1..={max}")))
}

/// `value` of `key` is a finite cost from 0 to `max`, or an error naming the key.
fn check_cost(ctx: &str, key: &str, value: f64, max: f64) -> Result<()> {
    if value.is_finite() && (0.0..=max).contains(&value) {
        return Ok(());
    }
    Err(SimError::invalid(
        ctx,
        key,
        format!("{value:?}"),
        format!("must be a number from 0 to {max}"),
    ))
}

/// The CPU cost of QEMU's I/O path for one VM (`[vm] qemu_path`).
///
/// QEMU 2.5's virtio-blk runs in one event-loop thread per VM: a pass pops
/// every request the virtqueue holds, merges contiguous ones
/// (`virtio_blk_submit_multireq`) and submits them with one `io_submit`;
/// each completion is taken back by the same thread. `bench/qemu-path-cost.sh`
/// measures the per-request and per-byte costs of QEMU's block layer,
/// linux-aio and the host kernel on the machine it runs on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QemuPathConfig {
    /// Threads serving the VM's virtqueue (QEMU 2.5 without an iothread: 1,
    /// the main loop).
    #[serde(default = "one")]
    pub io_threads: u32,
    /// CPU time per guest request taken from the virtqueue (pop, completion
    /// push, guest notification), µs.
    #[serde(default)]
    pub guest_request_us: f64,
    /// CPU time per host request (its `io_submit` entry, its completion,
    /// the host file system and block layer), µs.
    #[serde(default)]
    pub request_us: f64,
    /// CPU time per byte of a host request (pinning and mapping its
    /// pages), ns.
    #[serde(default)]
    pub byte_ns: f64,
    /// `virtio_blk_submit_multireq`: contiguous reads or writes taken from
    /// the virtqueue in one pass leave as one host request.
    #[serde(default = "yes")]
    pub multireq: bool,
}

impl QemuPathConfig {
    /// The most threads a VM's path may have.
    pub const MAX_IO_THREADS: u32 = 1024;
    /// The largest per-request cost: a second.
    pub const MAX_COST_US: f64 = 1e6;
    /// The largest per-byte cost: a µs (a path of 1 MB/s).
    pub const MAX_BYTE_NS: f64 = 1e3;

    /// Check the values; `ctx` names the VM in errors.
    fn check(&self, ctx: &str) -> Result<()> {
        check_count(ctx, "qemu_path.io_threads", self.io_threads, Self::MAX_IO_THREADS)?;
        check_cost(
            ctx,
            "qemu_path.guest_request_us",
            self.guest_request_us,
            Self::MAX_COST_US,
        )?;
        check_cost(ctx, "qemu_path.request_us", self.request_us, Self::MAX_COST_US)?;
        check_cost(ctx, "qemu_path.byte_ns", self.byte_ns, Self::MAX_BYTE_NS)
    }
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
    /// Compute `host.seek.zero_bound`, the most zero seeks any order of the
    /// run's requests could give (`metrics::LocalityBound`). Off by
    /// default: it keeps a range per group of touching requests, so its
    /// memory grows with the run (random requests), not with the requests
    /// in flight like the rest of a run's state.
    #[serde(default)]
    pub locality_bound: bool,
}

/// A VM after layout: its extents on the disk and its resolved jobs.
#[derive(Clone, Debug)]
pub struct VmLayout {
    /// The VM's name.
    pub name: String,
    /// Where the image file's sectors are on the disk: its extents, in image order.
    pub map: ExtentMap,
    /// The disk the guest sees, in sectors.
    pub image_sectors: u64,
    /// The reshaped image's layout, for a VM with `reshape`.
    pub reshape: Option<hvio_reshape::Layout>,
    /// Its resolved jobs.
    pub jobs: Vec<Job>,
}

impl VmLayout {
    /// The whole span from first to last extent end.
    pub fn span(&self) -> (u64, u64) {
        self.map.span()
    }

    /// The image file's sectors: the guest's disk, or the reshaped image.
    pub fn file_sectors(&self) -> u64 {
        self.reshape.as_ref().map_or(self.image_sectors, |l| l.image_sectors)
    }
}

impl Config {
    /// Parse a config; `origin` (a file name) prefixes every error.
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Config> {
        let mut cfg: Config = toml::from_str(text).map_err(|e| SimError::Parse {
            origin: origin.to_string(),
            message: hvio_core::message::tidy_serde_error(&e.to_string()),
        })?;
        cfg.base_dir = Path::new(origin).parent().map(Path::to_path_buf).unwrap_or_default();
        cfg.origin = origin.to_string();
        cfg.source_text = Some(text.into());
        crate::fiojob::expand(&mut cfg)?;
        Ok(cfg)
    }

    /// Parse a config written as JSON (the Python API passes dicts this way).
    pub fn from_json_str(text: &str, origin: &str) -> Result<Config> {
        let mut cfg: Config = serde_json::from_str(text).map_err(|e| SimError::Parse {
            origin: origin.to_string(),
            message: hvio_core::message::tidy_serde_error(&e.to_string()),
        })?;
        cfg.base_dir = Path::new(origin).parent().map(Path::to_path_buf).unwrap_or_default();
        cfg.origin = origin.to_string();
        crate::fiojob::expand(&mut cfg)?;
        Ok(cfg)
    }

    /// Read a config file of at most [`limits::MAX_CONFIG_BYTES`] (an endless
    /// input such as `/dev/zero` is an error, not a hang).
    pub fn from_file(path: &Path) -> Result<Config> {
        use hvio_core::input::{read_text, ReadError};
        let text = read_text(path, limits::MAX_CONFIG_BYTES, "config").map_err(|e| match e {
            ReadError::Io { file, source } => SimError::Io { path: file, source },
            e => SimError::Other(e.to_string()),
        })?;
        let mut cfg = Config::from_toml_str(&text, &path.display().to_string())?;
        cfg.file = Some(path.to_path_buf());
        Ok(cfg)
    }

    /// The files the config makes a run read: the config itself and a
    /// DiskSim `[disk] spec`, with the words that name them in errors.
    pub fn input_files(&self) -> Vec<(String, PathBuf)> {
        let mut v = Vec::new();
        if let Some(f) = &self.file {
            v.push(("config".to_string(), f.clone()));
        }
        if let Some(spec) = self.disk.get("spec").and_then(|v| v.as_str()) {
            let spec = self.base_dir.join(spec);
            // And the files it `source`s (one that cannot be read is an
            // error when the disk is built).
            let sourced = hvio_device::disksim::parse::read_spec(&spec).map(|s| s.files());
            v.push(("[disk] spec".to_string(), spec));
            for f in sourced.unwrap_or_default() {
                v.push(("[disk] spec's sourced file".to_string(), f));
            }
        }
        for f in &self.fio_files {
            v.push(("fio job file".to_string(), f.clone()));
        }
        v
    }

    /// The rule for outputs (`hvio_core::output::check_outputs`): `outputs`
    /// and `[output] records` are neither the config's inputs, `inputs`,
    /// nor each other.
    pub fn check_outputs(
        &self,
        outputs: &[hvio_core::output::Named<'_>],
        inputs: &[hvio_core::output::Named<'_>],
    ) -> Result<()> {
        let own = self.input_files();
        let mut all_inputs: Vec<hvio_core::output::Named<'_>> = inputs.to_vec();
        all_inputs.extend(own.iter().map(|(r, p)| (r.as_str(), p.as_path())));
        let records = self.output.records.as_ref().map(|r| self.base_dir.join(r));
        let mut all_outputs: Vec<hvio_core::output::Named<'_>> = Vec::new();
        if let Some(r) = &records {
            all_outputs.push(("records file", r));
        }
        all_outputs.extend_from_slice(outputs);
        hvio_core::output::check_outputs(&all_outputs, &all_inputs).map_err(|e| SimError::Other(e.to_string()))
    }

    /// Settings the config makes that `scheduler` does not read: differing
    /// VM weights under a scheduler without weights, and per-VM `attrs` it
    /// has no use for. One message per setting, naming what reads it.
    pub fn ignored_by(&self, scheduler: &str) -> Vec<String> {
        let Ok(spec) = hvio_sched::spec(scheduler) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let weights: std::collections::BTreeSet<u32> = self.vms.iter().map(|v| v.weight).collect();
        if weights.len() > 1 && !spec.stream_attrs.iter().any(|a| a.range.is_none()) {
            let readers: Vec<&str> = hvio_sched::SCHEDULERS
                .iter()
                .filter(|s| s.stream_attrs.iter().any(|a| a.range.is_none()))
                .map(|s| s.name)
                .collect();
            out.push(format!(
                "the VMs' weights differ, but {scheduler} ignores weights (these read them: {})",
                readers.join(", ")
            ));
        }
        for vm in &self.vms {
            for k in vm.attrs.keys() {
                if !spec.stream_attrs.iter().any(|a| a.range.is_some() && a.name == k) {
                    let readers: Vec<&str> = hvio_sched::SCHEDULERS
                        .iter()
                        .filter(|s| s.stream_attrs.iter().any(|a| a.range.is_some() && a.name == k))
                        .map(|s| s.name)
                        .collect();
                    out.push(format!(
                        "vm \"{}\" attrs.{k}: {scheduler} does not read it ({} does)",
                        vm.name,
                        readers.join(", ")
                    ));
                }
            }
        }
        out
    }

    /// Check the values and lay out the images on a disk of `capacity` sectors.
    pub fn layout(&self, capacity: u64) -> Result<Vec<VmLayout>> {
        use limits::*;
        if !(self.max_time_s.is_finite() && self.max_time_s > 0.0 && self.max_time_s <= MAX_SECONDS) {
            return Err(SimError::invalid(
                "config",
                "max_time_s",
                self.max_time_s,
                format!("must be positive and at most {MAX_SECONDS} seconds"),
            ));
        }
        if let Some(interval) = self.output.interval_s {
            if !(interval.is_finite() && interval >= 1e-6) {
                return Err(SimError::invalid(
                    "output",
                    "interval_s",
                    interval,
                    "must be at least 1e-6 (one microsecond)",
                ));
            }
            let buckets = self.max_time_s / interval * self.vms.len().max(1) as f64;
            if buckets > MAX_SERIES_BUCKETS {
                return Err(SimError::invalid(
                    "output",
                    "interval_s",
                    interval,
                    format!(
                        "max_time_s / interval_s × {} VMs would be {buckets:.3e} time-series buckets, more than {MAX_SERIES_BUCKETS:e}",
                        self.vms.len()
                    ),
                ));
            }
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
        if self.vms.len() > MAX_VMS {
            return Err(SimError::invalid(
                "config",
                "vm",
                format!("({} tables)", self.vms.len()),
                format!("at most {MAX_VMS} [[vm]] tables"),
            ));
        }
        let mut names = std::collections::BTreeSet::new();
        let mut next = self.host.first_image_offset.sectors();
        let mut out: Vec<VmLayout> = Vec::new();
        let (mut outstanding, mut image_extents, mut file_extents) = (0u64, 0u64, 0u64);
        for vm in &self.vms {
            let ctx = format!("vm \"{}\"", vm.name);
            if !names.insert(vm.name.clone()) {
                return Err(SimError::invalid(&ctx, "name", &vm.name, "duplicate VM name"));
            }
            vm.check(&ctx)?;
            image_extents += vm.fragments as u64;
            if image_extents > MAX_IMAGE_EXTENTS {
                return Err(SimError::invalid(
                    &ctx,
                    "fragments",
                    vm.fragments,
                    format!("the VMs' fragments come to {image_extents} in all, more than {MAX_IMAGE_EXTENTS}"),
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
            if vm.qemu_path.is_some() && self.host.blktap.is_some() {
                return Err(SimError::invalid(
                    &ctx,
                    "qemu_path",
                    "{ ... }",
                    "is QEMU's path, and [host] blktap is Xen's: a VM takes one of them",
                ));
            }
            let reshape = match &vm.reshape {
                Some(r) => Some(vm.reshape_layout(r, &ctx, self.host.blktap.is_some())?),
                None => None,
            };
            let file_sectors = reshape.as_ref().map_or(vm.image_size.sectors(), |l| l.image_sectors);
            if !file_sectors.is_multiple_of(vm.fragments as u64) {
                return Err(SimError::invalid(
                    &ctx,
                    "fragments",
                    vm.fragments,
                    format!("must divide the reshaped image ({file_sectors} sectors) into whole sectors"),
                ));
            }
            let per = file_sectors / vm.fragments as u64;
            let gap = vm.fragment_gap.sectors();
            // The last extent's end, in u128: offsets and gaps may be any u64.
            let end = start as u128 + (vm.fragments as u128 - 1) * (per as u128 + gap as u128) + per as u128;
            if end > capacity as u128 {
                return Err(SimError::invalid(
                    &ctx,
                    "image_size",
                    vm.image_size.0,
                    format!(
                        "the image (from sector {start}) ends at sector {end}, past the end of the disk ({capacity} sectors){}",
                        if vm.offset.is_none() {
                            "; images are laid out from [host] first_image_offset (default 300000000 sectors, about 143 GiB, for the 1 TB HDD) with image_gap between them: set those, or the VM's offset, on a smaller disk"
                        } else {
                            ""
                        }
                    ),
                ));
            }
            let end = end as u64;
            let extents: Vec<(u64, u64)> = (0..vm.fragments as u64)
                .map(|f| (start + f * (per + gap), per))
                .collect();
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
            next = end.saturating_add(self.host.image_gap.sectors());
            let mut jobs = Vec::new();
            let mut used = vm.journal_size.0;
            let mut threads = 0u64;
            for (j, jc) in vm.jobs.iter().enumerate() {
                let jctx = format!("{ctx} job {j}");
                let job = jc.resolve(&jctx)?;
                used = used.saturating_add(job.size);
                threads += job.numjobs as u64;
                if threads > MAX_THREADS_PER_VM {
                    return Err(SimError::invalid(
                        &jctx,
                        "numjobs",
                        job.numjobs,
                        format!("the VM's jobs would have {threads} threads in all, more than {MAX_THREADS_PER_VM}"),
                    ));
                }
                file_extents += match job.sharing {
                    crate::workload::Sharing::SameFile => job.numjobs as u64 * job.nrfiles as u64,
                    _ => job.nrfiles as u64,
                };
                if file_extents > MAX_FILE_EXTENTS {
                    return Err(SimError::invalid(
                        &jctx,
                        "nrfiles",
                        job.nrfiles,
                        format!(
                            "the jobs' files come to {file_extents} file extents in all (Σ nrfiles; numjobs × nrfiles for sharing = \"same-file\"), more than {MAX_FILE_EXTENTS}"
                        ),
                    ));
                }
                outstanding += job.numjobs as u64 * job.iodepth as u64;
                if outstanding > MAX_OUTSTANDING {
                    return Err(SimError::invalid(
                        &jctx,
                        "iodepth",
                        job.iodepth,
                        format!(
                            "numjobs × iodepth over every job of the config comes to {outstanding} requests in flight, more than {MAX_OUTSTANDING}"
                        ),
                    ));
                }
                jobs.push(job);
            }
            if jobs.iter().any(|j| !j.direct) {
                vm.page_cache.check(&ctx)?;
                // The flusher keeps up to nr_requests write-backs in flight.
                outstanding += vm.page_cache.nr_requests as u64;
                if outstanding > MAX_OUTSTANDING {
                    return Err(SimError::invalid(
                        &ctx,
                        "page_cache.nr_requests",
                        vm.page_cache.nr_requests,
                        format!(
                            "with the jobs' numjobs × iodepth, the config comes to {outstanding} requests in flight, more than {MAX_OUTSTANDING}"
                        ),
                    ));
                }
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
            out.push(VmLayout {
                name: vm.name.clone(),
                map: ExtentMap::new(extents),
                image_sectors: vm.image_size.sectors(),
                reshape,
                jobs,
            });
        }
        Ok(out)
    }

    /// The workload's phases: the names its jobs' `phase` keys give, in the
    /// order they first appear (VMs and their jobs top to bottom).
    pub fn workload_phases(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for job in self.vms.iter().flat_map(|v| &v.jobs) {
            if let Some(p) = &job.phase {
                if !names.contains(p) {
                    names.push(p.clone());
                }
            }
        }
        names
    }

    /// The `[[phase]]` switch plan, checked against the workload's phases.
    pub fn plan(&self) -> Result<PhasePlan> {
        let names = self.workload_phases();
        if names.len() > limits::MAX_PHASES {
            return Err(SimError::invalid(
                "config",
                "phase",
                names.len(),
                format!("the jobs name more than {} phases", limits::MAX_PHASES),
            ));
        }
        if self.phases.len() > limits::MAX_PHASES {
            return Err(SimError::invalid(
                "config",
                "phase",
                self.phases.len(),
                format!("a plan has at most {} steps", limits::MAX_PHASES),
            ));
        }
        PhasePlan::check_workload(&self.phases, &names)
    }

    /// `e` with the config's origin (file name) before it and, when the
    /// error names a key this config's TOML text holds, that key's line.
    /// Errors that already name the origin, and configs without one, pass.
    pub fn locate(&self, e: SimError) -> SimError {
        if self.origin.is_empty() || matches!(e, SimError::Parse { .. } | SimError::In { .. }) {
            return e;
        }
        SimError::In {
            origin: self.origin.clone(),
            line: self.line_of(&e),
            source: Box::new(e),
        }
    }

    /// The line of the key (or table) an error is about, if it can be found.
    fn line_of(&self, e: &SimError) -> Option<usize> {
        let text = self.source_text.as_deref()?;
        let path = self.error_path(e)?;
        let doc = toml_edit::ImDocument::parse(text).ok()?;
        let mut table: &dyn toml_edit::TableLike = doc.as_table();
        let mut array: Option<&toml_edit::ArrayOfTables> = None;
        let mut span = None;
        for seg in &path {
            match (seg, array.take()) {
                (Seg::Index(i), Some(a)) => {
                    let Some(t) = a.get(*i) else { break };
                    span = t.span().or(span);
                    table = t;
                }
                (Seg::Key(k), None) => {
                    let Some(item) = table.get(k) else { break };
                    span = table.key(k).and_then(|k| k.span()).or_else(|| item.span()).or(span);
                    if let Some(a) = item.as_array_of_tables() {
                        array = Some(a);
                    } else if let Some(t) = item.as_table_like() {
                        table = t;
                    } else {
                        break;
                    }
                }
                _ => break,
            }
        }
        let at = span?.start.min(text.len());
        Some(text.as_bytes()[..at].iter().filter(|&&b| b == b'\n').count() + 1)
    }

    /// Where in the config an error points: a path of keys and indices.
    fn error_path(&self, e: &SimError) -> Option<Vec<Seg>> {
        use hvio_core::ConfigError as C;
        match e {
            SimError::Config(C::InvalidValue { context, key, .. } | C::UnknownKey { context, key, .. }) => {
                let mut path = self.context_path(context, key)?;
                path.extend(key.split('.').map(|k| Seg::Key(k.to_string())));
                Some(path)
            }
            SimError::Config(C::UnknownName { what, .. }) if what == "scheduler" => {
                Some(vec![Seg::Key("host".into()), Seg::Key("scheduler".into())])
            }
            SimError::Device(_) => Some(vec![Seg::Key("disk".into())]),
            _ => None,
        }
    }

    /// The table an error's context names (`vm "a" job 2`, `scheduler cfq`, `host.blktap`).
    fn context_path(&self, context: &str, key: &str) -> Option<Vec<Seg>> {
        if let Some(rest) = context.strip_prefix("vm \"") {
            let (name, rest) = rest.split_once('"')?;
            let mut at = self
                .vms
                .iter()
                .enumerate()
                .filter(|(_, v)| v.name == name)
                .map(|(i, _)| i);
            // A duplicate name is reported at its second use.
            let i = if key == "name" { at.nth(1) } else { at.next() }?;
            let mut path = vec![Seg::Key("vm".into()), Seg::Index(i)];
            let rest = rest.trim();
            if let Some(j) = rest.strip_prefix("job ") {
                path.extend([Seg::Key("job".into()), Seg::Index(j.trim().parse().ok()?)]);
            } else if rest.starts_with("guest_params") {
                path.push(Seg::Key("guest_params".into()));
            }
            return Some(path);
        }
        if let Some(i) = context.strip_prefix("phase ") {
            return Some(vec![Seg::Key("phase".into()), Seg::Index(i.trim().parse().ok()?)]);
        }
        if context.starts_with("scheduler ") {
            return Some(vec![Seg::Key("host".into()), Seg::Key("params".into())]);
        }
        if context == "config" {
            return Some(Vec::new());
        }
        let table = context.trim_start_matches('[').trim_end_matches(']');
        let ok = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_lowercase() || c == '_');
        table
            .split('.')
            .all(ok)
            .then(|| table.split('.').map(|k| Seg::Key(k.to_string())).collect())
    }
}

/// A step of a path into the config's TOML document.
#[derive(Debug, Clone, PartialEq)]
enum Seg {
    Key(String),
    Index(usize),
}

impl VmConfig {
    /// Check the VM's own values (not its jobs); `ctx` names it in errors.
    /// The layout of this VM's reshaped image, checked: a bad key is an
    /// error naming the VM, the key and the value.
    fn reshape_layout(&self, r: &hvio_reshape::ReshapeConfig, ctx: &str, blktap: bool) -> Result<hvio_reshape::Layout> {
        if blktap {
            return Err(SimError::invalid(
                ctx,
                "reshape",
                "{ ... }",
                "address reshaping is a QEMU host path: it cannot be combined with [host] blktap",
            ));
        }
        r.layout(self.image_size.0).map_err(|e| match e {
            hvio_core::ConfigError::InvalidValue { key, value, reason, .. } => {
                // The guest's disk is the VM's image_size.
                let key = if key == "disk_bytes" {
                    "image_size".into()
                } else {
                    format!("reshape.{key}")
                };
                SimError::invalid(ctx, &key, value, reason)
            }
            other => SimError::Config(other),
        })
    }

    fn check(&self, ctx: &str) -> Result<()> {
        use limits::*;
        if self.image_size.0 == 0 || !self.image_size.0.is_multiple_of(SECTOR_BYTES) {
            return Err(SimError::invalid(
                ctx,
                "image_size",
                self.image_size.0,
                "must be a positive multiple of 512 bytes",
            ));
        }
        if self.fragments == 0
            || self.fragments > MAX_FRAGMENTS
            || !self.image_size.sectors().is_multiple_of(self.fragments as u64)
        {
            return Err(SimError::invalid(
                ctx,
                "fragments",
                self.fragments,
                format!("must be 1..={MAX_FRAGMENTS} and divide the image into whole sectors"),
            ));
        }
        if self.weight == 0 || self.weight > 10_000 {
            return Err(SimError::invalid(
                ctx,
                "weight",
                self.weight,
                "must be between 1 and 10000",
            ));
        }
        if !(1..=MAX_VIRTIO_DEPTH).contains(&self.virtio_depth) {
            return Err(SimError::invalid(
                ctx,
                "virtio_depth",
                self.virtio_depth,
                format!("must be 1..={MAX_VIRTIO_DEPTH}"),
            ));
        }
        // A commit every nanosecond would be a run of nothing but commits.
        let commit = self.journal_commit_s;
        if !(commit == 0.0 || (MIN_PERIOD_S..=MAX_SECONDS).contains(&commit)) {
            return Err(SimError::invalid(
                ctx,
                "journal_commit_s",
                commit,
                format!("must be 0 (off) or {MIN_PERIOD_S}..={MAX_SECONDS} seconds"),
            ));
        }
        if self.virt_latency_us as f64 > MAX_SECONDS * 1e6 {
            return Err(SimError::invalid(
                ctx,
                "virt_latency_us",
                self.virt_latency_us,
                format!("must be at most {MAX_SECONDS} seconds"),
            ));
        }
        if self.jobs.len() > MAX_JOBS_PER_VM {
            return Err(SimError::invalid(
                ctx,
                "job",
                format!("({} tables)", self.jobs.len()),
                format!("at most {MAX_JOBS_PER_VM} [[vm.job]] tables per VM"),
            ));
        }
        if let Some(q) = &self.qemu_path {
            q.check(ctx)?;
        }
        if let Some(g) = &self.guest_cpu {
            g.check(ctx)?;
        }
        // Checked against every scheduler, not just [host]'s: `hvio compare`
        // runs this VM under each of them.
        for (k, &v) in &self.attrs {
            hvio_sched::check_stream_attr(k, v)
                .map_err(|reason| SimError::invalid(ctx, &format!("attrs.{k}"), format!("{v:?}"), reason))?;
        }
        Ok(())
    }
}
