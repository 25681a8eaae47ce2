//! The discrete-event engine: a host with one disk and a host scheduler, VMs
//! with guest file systems, guest schedulers, a virtio ring and threads.
//!
//! Data flows one way (ARCHITECTURE.md): a thread's request → the guest
//! scheduler (streams = the VM's threads and its journal) → the virtio ring
//! (at most `virtio_depth` in flight) → `virt_latency` later, the host
//! scheduler (streams = VMs), mapped to physical sectors through the image
//! layout → the device → completion back up the same path.
//!
//! Determinism: integer nanoseconds, events ordered by (time, sequence number
//! of insertion), one seeded RNG per job (so a job's address sequence does not
//! depend on what other VMs do), no global state, no hash-order iteration.

use crate::config::{Config, VmLayout};
use crate::error::{Result, SimError};
use crate::metrics::*;
use crate::pagecache::{self, FileSpan, PageCache, Run, PAGE_SECTORS};
use crate::records::RecordWriter;
use crate::workload::{InodeLock, Job, Sharing};
use hvio_core::*;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus as JobRng;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

#[derive(Clone, Copy, Debug)]
enum Ev {
    /// A thread may issue (start, or after its think time).
    ThreadIssue {
        vm: u16,
        thread: u32,
    },
    /// A request leaves the guest ring and reaches the host scheduler.
    HostArrive {
        slot: u32,
    },
    /// A completion reaches the guest.
    GuestDone {
        slot: u32,
    },
    HostTimer,
    GuestTimer {
        vm: u16,
    },
    Device,
    JournalTick {
        vm: u16,
    },
    /// A buffered (page-cache) operation of a thread is done: its pages were
    /// there (or arrived) and were copied, or its write was copied in.
    BufferedDone {
        vm: u16,
        thread: u32,
    },
    /// The guest's periodic write-back (`dirty_writeback_centisecs`).
    Flusher {
        vm: u16,
    },
    /// blktap: tapdisk's event-loop pass submits the requests it took
    /// from the VM's ring (one `io_submit`).
    TapdiskSubmit {
        vm: u16,
    },
}

struct Entry {
    t: Nanos,
    seq: u64,
    ev: Ev,
}
impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        self.t == o.t && self.seq == o.seq
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    #[inline]
    fn cmp(&self, o: &Self) -> Ordering {
        // BinaryHeap is a max-heap: reverse for earliest (time, seq) first.
        // One 128-bit comparison: (t, seq) in lexicographic order.
        (((o.t as u128) << 64) | o.seq as u128).cmp(&(((self.t as u128) << 64) | self.seq as u128))
    }
}

/// What a request in flight is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Data,
    /// The journal write of a thread's fsync; the flush follows when it completes.
    FsyncJournal,
    FsyncFlush,
    /// Periodic journal commit / metadata write-back (nobody waits).
    Journal,
    /// A page-cache read (read-ahead or a miss) for buffered jobs.
    CacheRead,
    /// A page-cache write-back; `flusher`: by the background flusher.
    CacheWrite {
        flusher: bool,
    },
}

#[derive(Clone, Copy)]
struct Slot {
    vm: u16,
    /// Index of the thread within its VM (`u32::MAX` for the journal).
    thread: u32,
    kind: Kind,
    /// The request as the guest scheduler saw it.
    guest: Request,
    /// When the application issued it.
    issued: Nanos,
    host_arrival: Nanos,
    host_dispatch: Nanos,
    /// blktap: the next guest request merged into the same host request
    /// (`NO_SLOT` for none), and this request's tapdisk ring slot.
    chain: u32,
    tap_slot: u32,
}

/// No slot (the end of a merge chain, or no tapdisk ring slot).
const NO_SLOT: u32 = u32::MAX;

const SLOT_BITS: u32 = 20;
const SLOT_MASK: u64 = (1 << SLOT_BITS) - 1;

/// The data a thread or a job walks: extents of the image, flattened.
struct Area {
    /// (first image sector, sectors).
    extents: Vec<(u64, u64)>,
    /// Start of each extent in the flattened space.
    prefix: Vec<u64>,
    total: u64,
    /// Sequential positions (flattened offsets): `[0]` for reads, `[1]` for
    /// writes when the job keeps one per direction
    /// ([`Job::cursor_per_direction`]), else `[0]` for both.
    cursor: [u64; 2],
}

impl Area {
    fn new(extents: Vec<(u64, u64)>) -> Area {
        let mut prefix = Vec::with_capacity(extents.len());
        let mut total = 0;
        for e in &extents {
            prefix.push(total);
            total += e.1;
        }
        Area {
            extents,
            prefix,
            total,
            cursor: [0; 2],
        }
    }
    /// Image sector and the sectors left in its extent at flattened offset `off`.
    #[inline]
    fn locate(&self, off: u64) -> (u64, u64) {
        let i = match self.prefix.binary_search(&off) {
            Ok(i) => i,
            Err(i) => i - 1,
        };
        let within = off - self.prefix[i];
        (self.extents[i].0 + within, self.extents[i].1 - within)
    }
    /// The `len` sectors from flattened offset `off`, as an area of their own.
    fn range(&self, off: u64, len: u64) -> Area {
        let mut ext = Vec::new();
        let (mut off, mut left) = (off, len);
        while left > 0 {
            let (s, avail) = self.locate(off);
            let n = avail.min(left);
            ext.push((s, n));
            off += n;
            left -= n;
        }
        Area::new(ext)
    }
}

struct JobState {
    job: Job,
    rng: JobRng,
    areas: Vec<Area>,
    issued: u64,
    issued_bytes: u64,
    outstanding: u64,
    start: Nanos,
    end: Option<Nanos>,
    live_threads: u32,
    counts: IoCount,
    /// First image sector of the job's files and each file's sectors.
    file_first: u64,
    file_sectors: u64,
    /// Buffered jobs, sysbench's fsync cycle: the job wrote since its last
    /// cycle (`is_dirty`), the next file to fsync (`fsynced_file`), and
    /// which files were written since their last fsync.
    is_dirty: bool,
    fsynced_file: u32,
    file_dirty: Vec<bool>,
    /// `inode_lock` jobs: per file, the thread holding its lock and the
    /// threads waiting for it, in arrival order (empty otherwise).
    lock_holder: Vec<Option<u32>>,
    lock_waiters: Vec<VecDeque<u32>>,
}

impl JobState {
    fn may_issue(&self, now: Nanos) -> bool {
        let j = &self.job;
        if let Some(r) = j.requests {
            return self.issued < r;
        }
        if let Some(b) = j.io_size {
            return self.issued_bytes < b;
        }
        if let Some(rt) = j.runtime_ns {
            return now < self.start + rt;
        }
        self.issued_bytes < j.size
    }

    /// Draw the next request of the job for area `area`: (image sector,
    /// sectors, read), and count it as issued.
    fn draw(&mut self, area: usize) -> (u64, u64, bool) {
        let j = &self.job;
        let bytes = if j.bssplit.len() == 1 {
            j.bssplit[0].0
        } else {
            let x = self.rng.gen_range(0..100u32);
            j.bssplit
                .iter()
                .find(|b| x < b.1)
                .map(|b| b.0)
                .unwrap_or(j.bssplit[0].0)
        };
        let read = match j.read_pct {
            100 => true,
            0 => false,
            p => self.rng.gen_range(0..100u32) < p,
        };
        let want = bytes / SECTOR_BYTES;
        let area = &mut self.areas[area];
        // fio's `f->last_pos[ddir]`: a sequential mixed fio job reads and
        // writes from positions of its own, each wrapping to the area's start.
        let dir = usize::from(j.cursor_per_direction() && !read);
        let off = if j.rw.random() {
            let align = (j.min_bs() / SECTOR_BYTES).max(1);
            let slots = (area.total / align).max(1);
            self.rng.gen_range(0..slots) * align
        } else {
            area.cursor[dir]
        };
        let (sector, avail) = area.locate(off.min(area.total - 1));
        let sectors = want.min(avail).max(1);
        if !j.rw.random() {
            area.cursor[dir] = (off + sectors) % area.total;
        }
        self.issued += 1;
        self.issued_bytes += sectors * SECTOR_BYTES;
        (sector, sectors, read)
    }

    /// Index of the job's file holding image sector `sector`.
    fn file_index(&self, sector: u64) -> u64 {
        (sector - self.file_first) / self.file_sectors
    }

    /// The job's file `idx`, in pages, for the page cache (job `ji`).
    fn file_span(&self, ji: usize, idx: u64) -> FileSpan {
        FileSpan {
            key: ((ji as u64) << 32) | idx,
            first: (self.file_first + idx * self.file_sectors) / PAGE_SECTORS,
            pages: self.file_sectors / PAGE_SECTORS,
        }
    }

    /// All of the job's files, as (first page, pages).
    fn pages(&self) -> (u64, u64) {
        (
            self.file_first / PAGE_SECTORS,
            self.file_sectors * self.job.nrfiles as u64 / PAGE_SECTORS,
        )
    }
}

struct Thread {
    job: u16,
    area: u16,
    outstanding: u32,
    writes_since_fsync: u32,
    /// Waiting for its writes to drain before an fsync.
    fsync_due: bool,
    /// An fsync (journal write + flush) is in progress.
    in_fsync: bool,
    done: bool,
    /// Buffered jobs: pages (or write-backs) the thread waits for.
    waiting: u32,
    /// Buffered jobs: the operation in progress (issued, bytes, read).
    op: Option<(Nanos, u64, bool)>,
    /// Buffered jobs: blocked above `dirty_ratio`.
    throttled: bool,
    /// Buffered writers: the end-of-run fsync was done.
    final_synced: bool,
    /// `inode_lock` jobs: the drawn write (sector, sectors, when drawn)
    /// waiting for its file's lock.
    lock_wait: Option<(u64, u64, Nanos)>,
}

struct Vm {
    layout: VmLayout,
    sched: Box<dyn Scheduler>,
    timer_at: Option<Nanos>,
    ring_depth: u32,
    ring_used: u32,
    latency: Nanos,
    threads: Vec<Thread>,
    jobs: Vec<JobState>,
    journal_stream: StreamId,
    journal_sectors: u64,
    journal_cursor: u64,
    commit_every: Nanos,
    dirty: bool,
    /// fsync ends with a cache flush (the file system's `barrier` option).
    barrier: bool,
    /// The page cache, when a job is buffered.
    cache: Option<PageCache>,
    flusher_stream: StreamId,
    /// Flusher write-back requests: queued for submission, and in flight.
    wb_queue: VecDeque<Run>,
    wb_inflight: u32,
    /// Writers blocked above `dirty_ratio`.
    throttled: Vec<u32>,
    /// blktap: which of tapdisk's ring slots hold a request, and the
    /// guest requests taken from the ring since the last `io_submit`.
    tap_ring: Vec<bool>,
    tap_batch: Vec<u32>,
    rng: JobRng,
    host_requests: u64,
    host_bytes: u64,
    disk_time: Nanos,
    series_ops: Vec<u64>,
    series_bytes: Vec<u64>,
}

impl Vm {
    fn active(&self) -> bool {
        self.jobs.iter().any(|j| j.end.is_none())
    }

    /// Count one application operation of thread `ti` (its job's counts and
    /// the VM's throughput series).
    fn record_op(&mut self, ti: u32, read: bool, bytes: u64, latency: Nanos, now: Nanos, interval: Nanos) {
        let job = &mut self.jobs[self.threads[ti as usize].job as usize];
        job.outstanding -= 1;
        job.counts.record(read, bytes, latency);
        let b = (now / interval) as usize;
        if self.series_ops.len() <= b {
            self.series_ops.resize(b + 1, 0);
            self.series_bytes.resize(b + 1, 0);
        }
        self.series_ops[b] += 1;
        self.series_bytes[b] += bytes;
    }
}

/// One simulation run.
pub struct Engine {
    now: Nanos,
    seq: u64,
    heap: BinaryHeap<Entry>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    next_id: u64,
    vms: Vec<Vm>,
    host: Box<dyn Scheduler>,
    host_timer_at: Option<Nanos>,
    device: Box<dyn Device>,
    device_event_at: Option<Nanos>,
    completions: Vec<Completion>,
    seek: SeekDistribution,
    host_requests: u64,
    host_bytes: u64,
    busy: Nanos,
    sum_seek: Nanos,
    sum_rotation: Nanos,
    sum_transfer: Nanos,
    cache_hits: u64,
    idle_pending: Nanos,
    idle_since: Option<Nanos>,
    interval: Nanos,
    /// The host scheduler's time slices, by VM and bucket.
    slices: SliceSeries,
    records: Option<RecordWriter>,
    events: u64,
    max_time: Nanos,
    seed: u64,
    host_weights: Vec<u32>,
    blktap: Option<crate::config::BlktapConfig>,
    /// blktap: guest requests joined by tapdisk's `io_merge`, and control
    /// blocks back-merged by the dom0 elevator.
    io_merges: u64,
    elevator_merges: u64,
    /// blktap: seek distances between consecutive bios as they reach the
    /// dom0 block layer (blktrace's Q events, before merging), beside the
    /// dispatch-order distances of `seek` (its D events).
    seek_queued: SeekDistribution,
}

/// Sectors of a full blkif request: `BLKIF_MAX_SEGMENTS_PER_REQUEST` (11)
/// pages, which fill one slot of tapdisk's ring buffer.
const TAP_SLOT_SECTORS: u32 = 11 * PAGE_SECTORS as u32;

/// Whether tapdisk's `io_merge` finds the buffer of a request in ring slot
/// `slot` contiguous with the one before it, of `prev_sectors` sectors in
/// slot `prev_slot` (`contiguous_buffers`): a slot's pages start at
/// `MMAP_VADDR(vstart, slot, 0)`, right after slot − 1's 11 pages, so only
/// a full previous request in the slot just below qualifies.
fn tap_joins(prev_sectors: u32, prev_slot: u32, slot: u32) -> bool {
    prev_sectors == TAP_SLOT_SECTORS && prev_slot.checked_add(1) == Some(slot)
}

fn derive_seed(seed: u64, a: u64, b: u64) -> u64 {
    // SplitMix64 over the three parts: independent, reproducible streams.
    let mut z = seed ^ a.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ b.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The host scheduler of `cfg`: one stream per VM, with its weight, its
/// image's span as the region, and its scheduler attributes.
pub(crate) fn build_host_scheduler(
    cfg: &Config,
    layouts: &[VmLayout],
    info: &DeviceInfo,
) -> Result<Box<dyn Scheduler>> {
    let streams: Vec<StreamInfo> = cfg
        .vms
        .iter()
        .zip(layouts)
        .enumerate()
        .map(|(i, (vc, l))| {
            let (start, len) = l.span();
            let mut s = StreamInfo::new(i as StreamId, vc.name.clone())
                .with_weight(vc.weight)
                .with_region(start, len);
            s.attrs = vc.attrs.clone();
            s
        })
        .collect();
    Ok(hvio_sched::build(
        &cfg.host.scheduler,
        &cfg.host.params,
        &SchedContext {
            streams,
            device: info.clone(),
        },
    )?)
}

/// A guest scheduler's error, placed in its VM: a bad `guest_params` key
/// or value, or an unknown `guest_scheduler`.
fn guest_scheduler_error(vm: &str, scheduler: &str, e: ConfigError) -> SimError {
    let context = format!("vm \"{vm}\" guest_params (scheduler {scheduler})");
    SimError::Config(match e {
        ConfigError::InvalidValue { key, value, reason, .. } => ConfigError::InvalidValue {
            context,
            key,
            value,
            reason,
        },
        ConfigError::UnknownKey { key, known, .. } => ConfigError::UnknownKey { context, key, known },
        ConfigError::UnknownName { what, name, known } => ConfigError::invalid(
            format!("vm \"{vm}\""),
            "guest_scheduler",
            format!("\"{name}\""),
            format!("unknown {what} (known: {known})"),
        ),
        ConfigError::Other(m) => ConfigError::Other(format!("vm \"{vm}\" guest_scheduler {scheduler}: {m}")),
    })
}

impl Engine {
    /// Build a run of `cfg` on `device`.
    pub fn new(cfg: &Config, device: Box<dyn Device>) -> Result<Engine> {
        let info = device.info();
        let layouts = cfg.layout(info.capacity)?;
        let host = build_host_scheduler(cfg, &layouts, &info)?;
        let mut vms = Vec::new();
        for (vi, (vc, layout)) in cfg.vms.iter().zip(layouts).enumerate() {
            // Guest file system: the journal/metadata area first, then each
            // job's files contiguously, in job order.
            let journal_sectors = vc.journal_size.sectors();
            let mut next = journal_sectors;
            let mut jobs = Vec::new();
            let mut threads = Vec::new();
            let mut streams = Vec::new();
            for (ji, job) in layout.jobs.iter().enumerate() {
                let file_sectors = job.size / SECTOR_BYTES / job.nrfiles as u64;
                let file_first = next;
                let files: Vec<(u64, u64)> = (0..job.nrfiles as u64)
                    .map(|f| (next + f * file_sectors, file_sectors))
                    .collect();
                next += file_sectors * job.nrfiles as u64;
                let areas: Vec<Area> = match job.sharing {
                    Sharing::Shared => vec![Area::new(files)],
                    Sharing::PerThread if job.nrfiles >= job.numjobs => (0..job.numjobs as usize)
                        .map(|t| Area::new(files.iter().skip(t).step_by(job.numjobs as usize).copied().collect()))
                        .collect(),
                    Sharing::PerThread => {
                        // Fewer files than threads: each thread an equal slice of the data set.
                        let whole = Area::new(files);
                        let per = whole.total / job.numjobs as u64;
                        (0..job.numjobs as u64).map(|t| whole.range(t * per, per)).collect()
                    }
                    Sharing::SameFile => {
                        // fio with `filename`: every thread its own cursor over
                        // the same files, from `offset_increment` × thread to the end.
                        let whole = Area::new(files);
                        let step = job.offset_increment / SECTOR_BYTES;
                        (0..job.numjobs as u64)
                            .map(|t| whole.range(t * step, whole.total - t * step))
                            .collect()
                    }
                };
                for t in 0..job.numjobs {
                    let id = threads.len() as StreamId;
                    streams.push(StreamInfo::new(id, format!("{}/{}", job.name, t)));
                    threads.push(Thread {
                        job: ji as u16,
                        area: if areas.len() == 1 { 0 } else { t as u16 },
                        outstanding: 0,
                        writes_since_fsync: 0,
                        fsync_due: false,
                        in_fsync: false,
                        done: false,
                        waiting: 0,
                        op: None,
                        throttled: false,
                        final_synced: false,
                        lock_wait: None,
                    });
                }
                // One inode lock per file, only for jobs that model it.
                let locked_files = if job.inode_lock.is_some() {
                    job.nrfiles as usize
                } else {
                    0
                };
                jobs.push(JobState {
                    job: job.clone(),
                    rng: JobRng::seed_from_u64(derive_seed(cfg.seed, vi as u64 + 1, ji as u64 + 1)),
                    areas,
                    issued: 0,
                    issued_bytes: 0,
                    outstanding: 0,
                    start: job.start_ns,
                    end: None,
                    live_threads: job.numjobs,
                    counts: IoCount::default(),
                    file_first,
                    file_sectors,
                    is_dirty: false,
                    fsynced_file: 0,
                    file_dirty: if job.direct {
                        Vec::new()
                    } else {
                        vec![false; job.nrfiles as usize]
                    },
                    lock_holder: vec![None; locked_files],
                    lock_waiters: vec![VecDeque::new(); locked_files],
                });
            }
            let journal_stream = threads.len() as StreamId;
            streams.push(StreamInfo::new(journal_stream, "journal"));
            let cache = layout
                .jobs
                .iter()
                .any(|j| !j.direct)
                .then(|| PageCache::new(&vc.page_cache));
            let flusher_stream = journal_stream + 1;
            if cache.is_some() {
                streams.push(StreamInfo::new(flusher_stream, "flusher"));
            }
            let guest_info = DeviceInfo {
                capacity: layout.image_sectors,
                rotational: vc.guest_disk_rotational.unwrap_or(info.rotational),
                queue_depth: vc.virtio_depth as usize,
                seek: info.seek.clone(),
            };
            let sched = hvio_sched::build(
                &vc.guest_scheduler,
                &vc.guest_params,
                &SchedContext {
                    streams,
                    device: guest_info,
                },
            )
            .map_err(|e| guest_scheduler_error(&vc.name, &vc.guest_scheduler, e))?;
            vms.push(Vm {
                layout,
                sched,
                timer_at: None,
                ring_depth: vc.virtio_depth,
                ring_used: 0,
                latency: vc.virt_latency_us * NS_PER_US,
                threads,
                jobs,
                journal_stream,
                journal_sectors,
                journal_cursor: 0,
                commit_every: (vc.journal_commit_s * 1e9).round() as Nanos,
                dirty: false,
                barrier: vc.barrier,
                cache,
                flusher_stream,
                wb_queue: VecDeque::new(),
                wb_inflight: 0,
                throttled: Vec::new(),
                tap_ring: vec![false; vc.virtio_depth as usize],
                tap_batch: Vec::new(),
                rng: JobRng::seed_from_u64(derive_seed(cfg.seed, vi as u64 + 1, 0)),
                host_requests: 0,
                host_bytes: 0,
                disk_time: 0,
                series_ops: Vec::new(),
                series_bytes: Vec::new(),
            });
        }
        let image_sectors = vms.iter().map(|v| v.layout.image_sectors).max().unwrap_or(0);
        let interval_s = cfg.output.interval_s.unwrap_or(1.0);
        // Checked by `Config::layout`.
        let records = match &cfg.output.records {
            Some(p) => Some(RecordWriter::create(&cfg.base_dir.join(p), cfg.seed)?),
            None => None,
        };
        let mut e = Engine {
            now: 0,
            seq: 0,
            heap: BinaryHeap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            next_id: 0,
            vms,
            host,
            host_timer_at: None,
            device,
            device_event_at: None,
            completions: Vec::new(),
            seek: SeekDistribution::new(image_sectors).with_locality_bound(cfg.output.locality_bound),
            host_requests: 0,
            host_bytes: 0,
            busy: 0,
            sum_seek: 0,
            sum_rotation: 0,
            sum_transfer: 0,
            cache_hits: 0,
            idle_pending: 0,
            idle_since: None,
            interval: (interval_s * 1e9).round() as Nanos,
            slices: SliceSeries::new((interval_s * 1e9).round() as Nanos, cfg.vms.len()),
            records,
            events: 0,
            max_time: (cfg.max_time_s * 1e9).round() as Nanos,
            seed: cfg.seed,
            host_weights: cfg.vms.iter().map(|v| v.weight).collect(),
            blktap: cfg.host.blktap.clone(),
            io_merges: 0,
            elevator_merges: 0,
            seek_queued: SeekDistribution::new(image_sectors),
        };
        for vi in 0..e.vms.len() {
            for ti in 0..e.vms[vi].threads.len() {
                let start = e.vms[vi].jobs[e.vms[vi].threads[ti].job as usize].start;
                e.push(
                    start,
                    Ev::ThreadIssue {
                        vm: vi as u16,
                        thread: ti as u32,
                    },
                );
            }
            if e.vms[vi].commit_every > 0 && !e.vms[vi].jobs.is_empty() {
                let t = e.vms[vi].commit_every;
                e.push(t, Ev::JournalTick { vm: vi as u16 });
            }
            if let Some(c) = &e.vms[vi].cache {
                let t = c.config().writeback_period();
                e.push(t, Ev::Flusher { vm: vi as u16 });
            }
        }
        Ok(e)
    }

    #[inline]
    fn push(&mut self, t: Nanos, ev: Ev) {
        self.seq += 1;
        self.heap.push(Entry { t, seq: self.seq, ev });
    }

    fn alloc(&mut self, slot: Slot) -> Result<u64> {
        let idx = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = slot;
                i
            }
            None => {
                if self.slots.len() as u64 > SLOT_MASK {
                    return Err(SimError::Other(format!("more than {SLOT_MASK} requests outstanding")));
                }
                self.slots.push(slot);
                (self.slots.len() - 1) as u32
            }
        };
        self.next_id += 1;
        let id = (self.next_id << SLOT_BITS) | idx as u64;
        self.slots[idx as usize].guest.id = id;
        Ok(id)
    }

    /// Run to the end (every job finished and every request drained) or to `max_time_s`.
    pub fn run(mut self) -> Result<SimResult> {
        let mut truncated = false;
        while let Some(Entry { t, ev, .. }) = self.heap.pop() {
            if t > self.max_time {
                truncated = true;
                break;
            }
            self.now = t;
            self.events += 1;

            match ev {
                Ev::ThreadIssue { vm, thread } => {
                    self.thread_fill(vm as usize, thread, t)?;
                    self.guest_kick(vm as usize);
                }
                Ev::HostArrive { slot } => self.host_arrive(slot),
                Ev::GuestDone { slot } => self.guest_done(slot)?,
                Ev::HostTimer => {
                    if self.host_timer_at == Some(t) {
                        self.host_timer_at = None;
                    }
                    self.host_kick();
                }
                Ev::GuestTimer { vm } => {
                    let v = &mut self.vms[vm as usize];
                    if v.timer_at == Some(t) {
                        v.timer_at = None;
                    }
                    self.guest_kick(vm as usize);
                }
                Ev::Device => {
                    if self.device_event_at == Some(t) {
                        self.device_event_at = None;
                    }
                    self.device_advance();
                }
                Ev::JournalTick { vm } => self.journal_tick(vm as usize)?,
                Ev::BufferedDone { vm, thread } => self.buffered_done(vm as usize, thread)?,
                Ev::Flusher { vm } => self.flusher_tick(vm as usize)?,
                Ev::TapdiskSubmit { vm } => self.tapdisk_submit(vm as usize),
            }
            // Device idle while the host holds requests: anticipation / idling.
            let idle = self.device.in_flight() == 0 && self.host.has_work();
            match (idle, self.idle_since) {
                (true, None) => self.idle_since = Some(t),
                (false, Some(s)) => {
                    self.idle_pending += t - s;
                    self.idle_since = None;
                }
                _ => {}
            }
        }
        self.finish(truncated)
    }

    /// Issue requests from thread `ti` up to its iodepth.
    fn thread_fill(&mut self, vi: usize, ti: u32, now: Nanos) -> Result<()> {
        loop {
            let vm = &mut self.vms[vi];
            let th = &vm.threads[ti as usize];
            if th.done || th.in_fsync {
                return Ok(());
            }
            let job = &mut vm.jobs[th.job as usize];
            if !job.job.direct {
                return self.buffered_fill(vi, ti, now);
            }
            if th.fsync_due {
                if th.outstanding > 0 {
                    return Ok(());
                }
                return self.issue_fsync(vi, ti, now);
            }
            if th.outstanding >= job.job.iodepth {
                return Ok(());
            }
            if !job.may_issue(now) {
                if th.outstanding == 0 {
                    self.thread_finished(vi, ti, now);
                }
                return Ok(());
            }
            let (sector, sectors, read) = job.draw(th.area as usize);
            job.outstanding += 1;
            let fsync_every = job.job.fsync;
            let op = if read { Op::Read } else { Op::Write };
            let th = &mut vm.threads[ti as usize];
            th.outstanding += 1;
            if !read {
                vm.dirty = true;
                if fsync_every > 0 {
                    th.writes_since_fsync += 1;
                    if th.writes_since_fsync >= fsync_every {
                        th.fsync_due = true;
                    }
                }
            }
            let job = &mut vm.jobs[th.job as usize];
            if !read && job.job.inode_lock.is_some() {
                let f = job.file_index(sector) as usize;
                if job.lock_holder[f].is_some_and(|h| h != ti) {
                    job.lock_waiters[f].push_back(ti);
                    vm.threads[ti as usize].lock_wait = Some((sector, sectors, now));
                    continue;
                }
                job.lock_holder[f] = Some(ti);
            }
            self.submit_data(vi, ti, op, sector, sectors, now, now)?;
        }
    }

    /// Hand thread `ti`'s direct request, drawn at `drawn`, to the guest scheduler.
    #[allow(clippy::too_many_arguments)]
    fn submit_data(
        &mut self,
        vi: usize,
        ti: u32,
        op: Op,
        sector: u64,
        sectors: u64,
        drawn: Nanos,
        now: Nanos,
    ) -> Result<()> {
        // Direct, synchronous I/O: every request of a job is sync.
        let rq = Request::new(0, ti, op, sector, sectors as u32, now).with_sync(true);
        self.submit_guest_at(vi, ti, Kind::Data, rq, drawn, now)
    }

    /// `inode_lock`: thread `ti`'s write to the file holding image sector
    /// `sector` is done; release the file's lock and hand it on: with
    /// `steal`, the thread goes on first (it takes the lock again if its next
    /// request is a write there) and the first waiter gets the lock if it is
    /// still free; with `fifo`, the first waiter gets it, then the thread goes on.
    fn release_inode_lock(&mut self, vi: usize, ti: u32, sector: u64, how: InodeLock) -> Result<()> {
        let now = self.now;
        let vm = &mut self.vms[vi];
        let job = &mut vm.jobs[vm.threads[ti as usize].job as usize];
        let f = job.file_index(sector) as usize;
        job.lock_holder[f] = None;
        if how == InodeLock::Steal {
            self.after_thread_completion(vi, ti)?;
        }
        let vm = &mut self.vms[vi];
        let ji = vm.threads[ti as usize].job as usize;
        let job = &mut vm.jobs[ji];
        if job.lock_holder[f].is_none() {
            if let Some(w) = job.lock_waiters[f].pop_front() {
                job.lock_holder[f] = Some(w);
                let (s, n, drawn) = vm.threads[w as usize]
                    .lock_wait
                    .take()
                    .ok_or_else(|| SimError::Other(format!("inode lock waiter {w} has no write")))?;
                self.submit_data(vi, w, Op::Write, s, n, drawn, now)?;
            }
        }
        if how == InodeLock::Fifo {
            self.after_thread_completion(vi, ti)?;
        }
        Ok(())
    }

    fn thread_finished(&mut self, vi: usize, ti: u32, now: Nanos) {
        let vm = &mut self.vms[vi];
        let th = &mut vm.threads[ti as usize];
        if th.done {
            return;
        }
        th.done = true;
        let job = &mut vm.jobs[th.job as usize];
        job.live_threads -= 1;
        if job.live_threads == 0 {
            job.end = Some(now);
        }
    }

    /// fsync: a journal commit record, then a cache flush (ext4 `fsync`).
    fn issue_fsync(&mut self, vi: usize, ti: u32, now: Nanos) -> Result<()> {
        let vm = &mut self.vms[vi];
        let th = &mut vm.threads[ti as usize];
        th.fsync_due = false;
        th.in_fsync = true;
        th.writes_since_fsync = 0;
        th.outstanding += 1;
        let sector = Self::journal_position(vm, 8);
        let rq = Request::new(0, ti, Op::Write, sector, 8, now)
            .with_sync(true)
            .with_meta(true);
        self.submit_guest(vi, ti, Kind::FsyncJournal, rq, now)
    }

    /// Next `sectors` of the journal's circular log (first half of the journal area).
    fn journal_position(vm: &mut Vm, sectors: u64) -> u64 {
        let log = (vm.journal_sectors / 2).max(sectors);
        if vm.journal_cursor + sectors > log {
            vm.journal_cursor = 0;
        }
        let s = vm.journal_cursor;
        vm.journal_cursor += sectors;
        s
    }

    /// Periodic journal commit (jbd2): if data was written since the last
    /// commit, a commit block run in the log and an inode-table write-back in
    /// the metadata half of the journal area — paper 000 §2.2's "discrete
    /// requests" at the start of each image.
    fn journal_tick(&mut self, vi: usize) -> Result<()> {
        let now = self.now;
        let vm = &mut self.vms[vi];
        if vm.dirty {
            vm.dirty = false;
            let stream = vm.journal_stream;
            let log = Self::journal_position(vm, 24);
            let meta_base = vm.journal_sectors / 2;
            let meta_len = (vm.journal_sectors - meta_base).max(8);
            let meta = meta_base + vm.rng.gen_range(0..meta_len / 8) * 8;
            let a = Request::new(0, stream, Op::Write, log, 24, now)
                .with_sync(true)
                .with_meta(true);
            let b = Request::new(0, stream, Op::Write, meta, 8, now)
                .with_sync(false)
                .with_meta(true);
            self.submit_guest(vi, u32::MAX, Kind::Journal, a, now)?;
            self.submit_guest(vi, u32::MAX, Kind::Journal, b, now)?;
            self.guest_kick(vi);
        }
        let vm = &self.vms[vi];
        if vm.active() {
            let t = now + vm.commit_every;
            self.push(t, Ev::JournalTick { vm: vi as u16 });
        }
        Ok(())
    }

    /// Hand a request to the guest scheduler.
    fn submit_guest(&mut self, vi: usize, thread: u32, kind: Kind, rq: Request, now: Nanos) -> Result<()> {
        self.submit_guest_at(vi, thread, kind, rq, now, now)
    }

    /// [`Self::submit_guest`] for a request the application issued at `issued`
    /// (its latency counts from then).
    fn submit_guest_at(
        &mut self,
        vi: usize,
        thread: u32,
        kind: Kind,
        rq: Request,
        issued: Nanos,
        now: Nanos,
    ) -> Result<()> {
        let id = self.alloc(Slot {
            vm: vi as u16,
            thread,
            kind,
            guest: rq,
            issued,
            host_arrival: 0,
            host_dispatch: 0,
            chain: NO_SLOT,
            tap_slot: NO_SLOT,
        })?;
        let rq = Request { id, ..rq };
        self.vms[vi].sched.insert(rq, now);
        Ok(())
    }

    /// Move requests from the guest scheduler into the ring while it has room.
    fn guest_kick(&mut self, vi: usize) {
        let now = self.now;
        loop {
            let vm = &mut self.vms[vi];
            if vm.ring_used >= vm.ring_depth {
                return;
            }
            match vm.sched.dispatch(now) {
                Dispatch::Request(rq) => {
                    vm.ring_used += 1;
                    let t = now + vm.latency;
                    let slot = (rq.id & SLOT_MASK) as u32;
                    self.slots[slot as usize].guest = rq;
                    self.push(t, Ev::HostArrive { slot });
                }
                Dispatch::WaitUntil(t) => {
                    debug_assert!(t > now, "guest scheduler asked to wait for the past");
                    let t = t.max(now + 1);
                    if vm.timer_at != Some(t) {
                        vm.timer_at = Some(t);
                        self.push(t, Ev::GuestTimer { vm: vi as u16 });
                    }
                    return;
                }
                Dispatch::Empty => return,
            }
        }
    }

    fn host_arrive(&mut self, slot: u32) {
        let now = self.now;
        let s = &mut self.slots[slot as usize];
        s.host_arrival = now;
        let vi = s.vm as usize;
        if self.blktap.is_some() {
            // blktap: the request takes the lowest free slot of tapdisk's
            // ring (`blktap_ring_make_request`) and waits for the event
            // loop's next pass, which takes everything on the ring.
            let vm = &mut self.vms[vi];
            let free = vm.tap_ring.iter().position(|&b| !b).unwrap_or(vm.tap_ring.len());
            if free == vm.tap_ring.len() {
                vm.tap_ring.push(true);
            } else {
                vm.tap_ring[free] = true;
            }
            self.slots[slot as usize].tap_slot = free as u32;
            if vm.tap_batch.is_empty() {
                self.push(now, Ev::TapdiskSubmit { vm: vi as u16 });
            }
            self.vms[vi].tap_batch.push(slot);
            return;
        }
        let rq = self.host_request(slot, now);
        self.host.insert(rq, now);
        self.host_kick();
    }

    /// The host's view of guest request `slot`: physical sectors, the VM's
    /// stream; through blktap, tapdisk's O_DIRECT I/O (sync reads, writes
    /// as `sync_writes` says, no metadata flag).
    fn host_request(&self, slot: u32, now: Nanos) -> Request {
        let s = &self.slots[slot as usize];
        let vm = &self.vms[s.vm as usize];
        let g = s.guest;
        let sector = if g.op == Op::Flush { 0 } else { vm.layout.map(g.sector) };
        let mut rq = Request {
            stream: s.vm as StreamId,
            sector,
            arrival: now,
            ..g
        };
        if let Some(b) = &self.blktap {
            if g.op != Op::Flush {
                rq.sync = g.op == Op::Read || (b.sync_writes && g.op == Op::Write);
                rq.meta = false;
            }
        }
        rq
    }

    /// blktap: one pass of tapdisk's event loop for VM `vi`. The requests
    /// taken from the ring become control blocks in ring order; `io_merge`
    /// joins each to the one before when [`tap_joins`] allows; each
    /// resulting control block is submitted in turn, and the dom0
    /// elevator back-merges it into a queued request or queues it.
    fn tapdisk_submit(&mut self, vi: usize) {
        let now = self.now;
        let Some(cfg) = self.blktap.clone() else {
            return;
        };
        let batch = std::mem::take(&mut self.vms[vi].tap_batch);
        let max = cfg.max_sectors();
        let mut iocb: Option<(Request, u32)> = None; // (request, last slot of its chain)
        for slot in batch {
            let rq = self.host_request(slot, now);
            if let Some((cur, last)) = &mut iocb {
                let prev = &self.slots[*last as usize];
                let buffers = tap_joins(prev.guest.sectors, prev.tap_slot, self.slots[slot as usize].tap_slot);
                if cfg.io_merge && buffers && hvio_sched::util::back_mergeable(cur, &rq, max) {
                    cur.sectors += rq.sectors;
                    self.io_merges += 1;
                    self.slots[*last as usize].chain = slot;
                    *last = slot;
                    continue;
                }
            }
            if let Some((cur, _)) = iocb.replace((rq, slot)) {
                self.submit_iocb(cur, &cfg, now);
            }
        }
        if let Some((cur, _)) = iocb {
            self.submit_iocb(cur, &cfg, now);
        }
    }

    /// One control block reaches the dom0 block layer: back-merged into a
    /// queued request of the VM, or queued; then the queue is run
    /// (`blk_run_address_space`).
    fn submit_iocb(&mut self, rq: Request, cfg: &crate::config::BlktapConfig, now: Nanos) {
        self.seek_queued.dispatched(&rq);
        if cfg.elevator_merge {
            if let Some(id) = self.host.back_merge(&rq, cfg.max_sectors(), now) {
                let mut tail = (id & SLOT_MASK) as u32;
                while self.slots[tail as usize].chain != NO_SLOT {
                    tail = self.slots[tail as usize].chain;
                }
                self.slots[tail as usize].chain = (rq.id & SLOT_MASK) as u32;
                self.elevator_merges += 1;
                return;
            }
        }
        self.host.insert(rq, now);
        self.host_kick();
    }

    /// Dispatch from the host scheduler while the device accepts.
    fn host_kick(&mut self) {
        self.slices.take_from(self.host.as_mut());
        let now = self.now;
        while self.device.can_accept() {
            match self.host.dispatch(now) {
                Dispatch::Request(rq) => {
                    self.seek.dispatched(&rq);
                    self.slots[(rq.id & SLOT_MASK) as usize].host_dispatch = now;
                    self.device.submit(rq, now);
                    self.schedule_device();
                }
                Dispatch::WaitUntil(t) => {
                    debug_assert!(t > now, "host scheduler asked to wait for the past");
                    let t = t.max(now + 1);
                    if self.host_timer_at != Some(t) {
                        self.host_timer_at = Some(t);
                        self.push(t, Ev::HostTimer);
                    }
                    return;
                }
                Dispatch::Empty => return,
            }
        }
    }

    fn schedule_device(&mut self) {
        if let Some(t) = self.device.next_event() {
            // A device may report an event already due: run it now. Remember
            // the time actually scheduled, so that event clears the mark.
            let t = t.max(self.now);
            if self.device_event_at.is_none_or(|at| t < at) {
                self.device_event_at = Some(t);
                self.push(t, Ev::Device);
            }
        }
    }

    fn device_advance(&mut self) {
        let now = self.now;
        let mut done = std::mem::take(&mut self.completions);
        self.device.advance(now, &mut done);
        for c in done.drain(..) {
            let slot = (c.rq.id & SLOT_MASK) as u32;
            self.host.completed(&c.rq, c.done);
            let s = self.slots[slot as usize];
            let vm = &mut self.vms[s.vm as usize];
            let dt = c.done.saturating_sub(c.start);
            vm.host_requests += 1;
            vm.host_bytes += c.rq.bytes();
            vm.disk_time += dt;
            self.host_requests += 1;
            self.host_bytes += c.rq.bytes();
            self.busy += dt;
            self.sum_seek += c.service.seek;
            self.sum_rotation += c.service.rotation;
            self.sum_transfer += c.service.transfer;
            self.cache_hits += c.service.cache_hit as u64;
            if let Some(w) = &mut self.records {
                w.write(&vm.layout.name, &c, s.host_arrival, s.host_dispatch);
            }
            let t = c.done.max(now) + vm.latency;
            // Every guest request merged into this one completes with it
            // and frees its tapdisk ring slot.
            let mut next = slot;
            while next != NO_SLOT {
                let m = self.slots[next as usize];
                if let Some(b) = self.vms[m.vm as usize].tap_ring.get_mut(m.tap_slot as usize) {
                    *b = false;
                }
                self.push(t, Ev::GuestDone { slot: next });
                next = m.chain;
            }
        }
        self.completions = done;
        // Only the event that was scheduled clears `device_event_at` (in
        // `run`): a stale, earlier one must not make us schedule duplicates.
        self.schedule_device();
        self.host_kick();
    }

    fn guest_done(&mut self, slot: u32) -> Result<()> {
        let now = self.now;
        let s = self.slots[slot as usize];
        self.free.push(slot);
        let vi = s.vm as usize;
        let interval = self.interval;
        let vm = &mut self.vms[vi];
        vm.ring_used -= 1;
        vm.sched.completed(&s.guest, now);
        match s.kind {
            Kind::Journal => {}
            Kind::FsyncJournal if vm.barrier => {
                // The commit record is down: now the cache flush.
                let rq = Request::new(0, s.thread, Op::Flush, 0, 0, now).with_sync(true);
                self.submit_guest(vi, s.thread, Kind::FsyncFlush, rq, now)?;
            }
            Kind::FsyncJournal | Kind::FsyncFlush => {
                let th = &mut vm.threads[s.thread as usize];
                th.in_fsync = false;
                th.outstanding -= 1;
                self.after_thread_completion(vi, s.thread)?;
            }
            Kind::Data => {
                vm.threads[s.thread as usize].outstanding -= 1;
                vm.record_op(
                    s.thread,
                    s.guest.is_read(),
                    s.guest.bytes(),
                    now - s.issued,
                    now,
                    interval,
                );
                match vm.jobs[vm.threads[s.thread as usize].job as usize].job.inode_lock {
                    Some(how) if !s.guest.is_read() => self.release_inode_lock(vi, s.thread, s.guest.sector, how)?,
                    _ => self.after_thread_completion(vi, s.thread)?,
                }
            }
            Kind::CacheRead => {
                let run = Self::pages_of(&s.guest);
                let woken = vm.cache.as_mut().map(|c| c.read_done(run)).unwrap_or_default();
                for t in woken {
                    self.page_arrived(vi, t, now)?;
                }
            }
            Kind::CacheWrite { flusher } => {
                let run = Self::pages_of(&s.guest);
                vm.wb_inflight -= flusher as u32;
                let woken = vm.cache.as_mut().map(|c| c.write_done(run)).unwrap_or_default();
                for t in woken {
                    self.page_arrived(vi, t, now)?;
                }
                self.wake_throttled(vi)?;
                self.flusher_pump(vi)?;
            }
        }
        self.guest_kick(vi);
        Ok(())
    }

    /// Image pages of a page-cache request.
    fn pages_of(rq: &Request) -> Run {
        Run {
            first: rq.sector / PAGE_SECTORS,
            pages: (rq.sectors as u64).div_ceil(PAGE_SECTORS),
        }
    }

    /// A page-cache request of `r` for guest stream `stream`.
    fn page_request(stream: StreamId, op: Op, r: Run, now: Nanos) -> Request {
        Request::new(
            0,
            stream,
            op,
            r.first * PAGE_SECTORS,
            (r.pages * PAGE_SECTORS) as u32,
            now,
        )
    }

    /// Submit `runs` for thread `ti` as synchronous requests of at most `max_sectors_kb`.
    fn submit_runs(&mut self, vi: usize, ti: u32, kind: Kind, runs: Vec<Run>, now: Nanos) -> Result<()> {
        let max = self.vms[vi]
            .cache
            .as_ref()
            .map_or(1, |c| c.config().max_request_pages());
        let op = if kind == Kind::CacheRead { Op::Read } else { Op::Write };
        for run in runs {
            for r in pagecache::split(run, max) {
                let rq = Self::page_request(ti, op, r, now).with_sync(true);
                self.submit_guest(vi, ti, kind, rq, now)?;
            }
        }
        Ok(())
    }

    /// One operation of a buffered thread: the end-of-run fsync of a
    /// writer, the next fsync of sysbench's cycle, or a read or write
    /// through the page cache.
    fn buffered_fill(&mut self, vi: usize, ti: u32, now: Nanos) -> Result<()> {
        let vm = &mut self.vms[vi];
        let th = &mut vm.threads[ti as usize];
        if th.outstanding > 0 || th.throttled || th.waiting > 0 {
            return Ok(());
        }
        let ji = th.job as usize;
        let job = &mut vm.jobs[ji];
        // sysbench's `--file-fsync-freq`: every `fsync` requests (reads
        // too), while the job has written since its last cycle, the next
        // requests are fsyncs of each of its files in turn. A file not
        // written since its last fsync costs nothing (no dirty pages, no
        // dirty inode, no journal commit).
        while job.may_issue(now) && job.is_dirty && job.job.fsync > 0 && job.issued.is_multiple_of(job.job.fsync as u64)
        {
            let f = job.fsynced_file as usize;
            job.fsynced_file += 1;
            if job.fsynced_file == job.job.nrfiles {
                job.fsynced_file = 0;
                job.is_dirty = false;
            }
            if std::mem::take(&mut job.file_dirty[f]) {
                let file = job.file_span(ji, f as u64);
                return self.buffered_fsync(vi, ti, file.first, file.pages, now);
            }
        }
        if !job.may_issue(now) {
            // sysbench's `--file-fsync-end`: the last thread of a job syncs
            // the files written since their last fsync (one commit).
            if job.live_threads == 1 && !th.final_synced && job.file_dirty.iter().any(|&d| d) {
                th.final_synced = true;
                job.file_dirty.fill(false);
                job.is_dirty = false;
                let (first, n) = job.pages();
                return self.buffered_fsync(vi, ti, first, n, now);
            }
            self.thread_finished(vi, ti, now);
            return Ok(());
        }
        let (sector, sectors, read) = job.draw(th.area as usize);
        job.outstanding += 1;
        let first = sector / PAGE_SECTORS;
        let n = (sector + sectors).div_ceil(PAGE_SECTORS) - first;
        th.outstanding = 1;
        th.op = Some((now, sectors * SECTOR_BYTES, read));
        let copy = vm.cache.as_ref().map_or(0, |c| c.config().copy_ns_per_page) * n;
        let Some(cache) = vm.cache.as_mut() else {
            return Err(SimError::Other("a buffered job in a VM without a page cache".into()));
        };
        if read {
            let file = job.file_span(ji, job.file_index(sector));
            let out = cache.read(file, first, n, ti);
            th.waiting = out.wait;
            let ready = out.wait == 0;
            self.submit_runs(vi, ti, Kind::CacheRead, out.runs, now)?;
            if ready {
                self.push(
                    now + copy,
                    Ev::BufferedDone {
                        vm: vi as u16,
                        thread: ti,
                    },
                );
            }
        } else {
            cache.write(first, n, now);
            vm.dirty = true;
            job.is_dirty = true;
            let f = job.file_index(sector) as usize;
            job.file_dirty[f] = true;
            self.push(
                now + copy,
                Ev::BufferedDone {
                    vm: vi as u16,
                    thread: ti,
                },
            );
            self.flusher_pump(vi)?;
        }
        Ok(())
    }

    /// A page thread `ti` waited for is up to date or written back.
    fn page_arrived(&mut self, vi: usize, ti: u32, now: Nanos) -> Result<()> {
        let vm = &mut self.vms[vi];
        let copy = vm.cache.as_ref().map_or(0, |c| c.config().copy_ns_per_page);
        let th = &mut vm.threads[ti as usize];
        th.waiting -= 1;
        if th.waiting > 0 {
            return Ok(());
        }
        if th.in_fsync {
            // fsync's data is down: the journal commit and the flush follow.
            th.in_fsync = false;
            return self.issue_fsync(vi, ti, now);
        }
        if let Some((_, bytes, _)) = th.op {
            let t = now + copy * bytes.div_ceil(pagecache::PAGE_BYTES);
            self.push(
                t,
                Ev::BufferedDone {
                    vm: vi as u16,
                    thread: ti,
                },
            );
        }
        Ok(())
    }

    /// A buffered operation is done: count it, then the thread goes on
    /// (unless it wrote above `dirty_ratio`: then it waits for write-back).
    fn buffered_done(&mut self, vi: usize, ti: u32) -> Result<()> {
        let now = self.now;
        let interval = self.interval;
        let vm = &mut self.vms[vi];
        let th = &mut vm.threads[ti as usize];
        let Some((issued, bytes, read)) = th.op.take() else {
            return Ok(());
        };
        th.outstanding = 0;
        vm.record_op(ti, read, bytes, now - issued, now, interval);
        if !read && vm.cache.as_ref().is_some_and(|c| c.over_dirty_limit()) {
            vm.threads[ti as usize].throttled = true;
            vm.throttled.push(ti);
            self.flusher_pump(vi)?;
        } else {
            self.after_thread_completion(vi, ti)?;
        }
        self.guest_kick(vi);
        Ok(())
    }

    /// fsync of pages `[first, first + n)`: write the dirty ones back, wait
    /// for every page under write-back there, then the journal commit and
    /// the flush (`issue_fsync`).
    fn buffered_fsync(&mut self, vi: usize, ti: u32, first: u64, n: u64, now: Nanos) -> Result<()> {
        let vm = &mut self.vms[vi];
        let Some(cache) = vm.cache.as_mut() else {
            return Ok(());
        };
        let runs = cache.writeback_range(first, n);
        let wait = cache.wait_writeback(first, n, ti);
        let th = &mut vm.threads[ti as usize];
        th.waiting = wait;
        th.in_fsync = wait > 0;
        self.submit_runs(vi, ti, Kind::CacheWrite { flusher: false }, runs, now)?;
        if wait == 0 {
            self.issue_fsync(vi, ti, now)?;
        }
        Ok(())
    }

    /// Submit queued flusher write-back up to `nr_requests`, refilling the
    /// queue from the dirty pages while above `dirty_background_ratio` or
    /// while writers are throttled.
    fn flusher_pump(&mut self, vi: usize) -> Result<()> {
        let now = self.now;
        loop {
            let vm = &mut self.vms[vi];
            let Some(cache) = vm.cache.as_mut() else {
                return Ok(());
            };
            if vm.wb_inflight >= cache.config().nr_requests {
                return Ok(());
            }
            if let Some(r) = vm.wb_queue.pop_front() {
                vm.wb_inflight += 1;
                let stream = vm.flusher_stream;
                let rq = Self::page_request(stream, Op::Write, r, now);
                self.submit_guest(vi, u32::MAX, Kind::CacheWrite { flusher: true }, rq, now)?;
                continue;
            }
            if !cache.over_background() && vm.throttled.is_empty() {
                return Ok(());
            }
            // MAX_WRITEBACK_PAGES: one pass takes up to 4 MiB.
            let runs = cache.writeback_background(1024);
            if runs.is_empty() {
                return Ok(());
            }
            let max = cache.config().max_request_pages();
            for run in runs {
                vm.wb_queue.extend(pagecache::split(run, max));
            }
        }
    }

    /// Writers blocked above `dirty_ratio` go on once below it.
    fn wake_throttled(&mut self, vi: usize) -> Result<()> {
        let vm = &mut self.vms[vi];
        if vm.throttled.is_empty() || vm.cache.as_ref().is_none_or(|c| c.over_dirty_limit()) {
            return Ok(());
        }
        let woken = std::mem::take(&mut vm.throttled);
        for t in woken {
            self.vms[vi].threads[t as usize].throttled = false;
            self.after_thread_completion(vi, t)?;
        }
        Ok(())
    }

    /// The flusher wakes: pages dirty for longer than `dirty_expire_centisecs`
    /// go to the disk, then background write-back if still above its ratio.
    fn flusher_tick(&mut self, vi: usize) -> Result<()> {
        let now = self.now;
        let vm = &mut self.vms[vi];
        let active = vm.active();
        let Some(cache) = vm.cache.as_mut() else {
            return Ok(());
        };
        let cfg = cache.config();
        let (period, expire) = (cfg.writeback_period(), cfg.dirty_expire());
        let max = cfg.max_request_pages();
        if let Some(cutoff) = now.checked_sub(expire) {
            for run in cache.writeback_expired(cutoff) {
                vm.wb_queue.extend(pagecache::split(run, max));
            }
        }
        let more = active || cache.nr_dirty() > 0 || cache.nr_writeback() > 0;
        self.flusher_pump(vi)?;
        self.guest_kick(vi);
        if more {
            self.push(now + period, Ev::Flusher { vm: vi as u16 });
        }
        Ok(())
    }

    fn after_thread_completion(&mut self, vi: usize, ti: u32) -> Result<()> {
        let now = self.now;
        let vm = &self.vms[vi];
        let think = vm.jobs[vm.threads[ti as usize].job as usize].job.thinktime_ns;
        if think > 0 {
            self.push(
                now + think,
                Ev::ThreadIssue {
                    vm: vi as u16,
                    thread: ti,
                },
            );
            Ok(())
        } else {
            self.thread_fill(vi, ti, now)
        }
    }

    fn finish(mut self, truncated: bool) -> Result<SimResult> {
        let now = self.now;
        self.slices.take_from(self.host.as_mut());
        if let Some(w) = self.records.take() {
            w.finish()?;
        }
        if let Some(s) = self.idle_since {
            self.idle_pending += now - s;
        }
        self.seek.finish();
        let mut jobs = Vec::new();
        let mut vms = Vec::new();
        let (mut first, mut last) = (Nanos::MAX, 0);
        let mut total_bytes = 0u64;
        for (vm, &vc_weight) in self.vms.iter().zip(&self.host_weights) {
            let (mut vs, mut ve) = (Nanos::MAX, 0);
            // A VM's application I/O is the sum of its jobs' (one histogram record per request).
            let mut counts = IoCount::default();
            for j in &vm.jobs {
                counts.reads += j.counts.reads;
                counts.writes += j.counts.writes;
                counts.read_bytes += j.counts.read_bytes;
                counts.write_bytes += j.counts.write_bytes;
                counts.latency.add(&j.counts.latency);
                let end = j.end.unwrap_or(now);
                vs = vs.min(j.start);
                ve = ve.max(end);
                jobs.push(JobResult::from_counts(
                    &vm.layout.name,
                    &j.job.name,
                    j.job.numjobs,
                    j.start,
                    end,
                    j.end.is_some(),
                    &j.counts,
                ));
            }
            if vm.jobs.is_empty() {
                vs = 0;
                ve = 0;
            }
            first = first.min(vs);
            last = last.max(ve);
            total_bytes += counts.bytes();
            let dur = ns_to_s(ve.saturating_sub(vs)).max(1e-9);
            vms.push(VmResult {
                vm: vm.layout.name.clone(),
                weight: vc_weight,
                active_s: ns_to_s(ve.saturating_sub(vs)),
                reads: counts.reads,
                writes: counts.writes,
                mb: counts.bytes() as f64 / 1e6,
                iops: counts.ops() as f64 / dur,
                mb_per_s: counts.bytes() as f64 / 1e6 / dur,
                latency: counts.latency.summary(),
                host_requests: vm.host_requests,
                host_mb: vm.host_bytes as f64 / 1e6,
                disk_time_s: ns_to_s(vm.disk_time),
            });
        }
        let span = ns_to_s(last.saturating_sub(first.min(last))).max(1e-9);
        let interval_s = ns_to_s(self.interval);
        let buckets = self.slices.buckets(self.vms.iter().map(|v| v.series_ops.len()));
        let mut series = TimeSeries {
            interval_s,
            vms: self.vms.iter().map(|v| v.layout.name.clone()).collect(),
            iops: self
                .vms
                .iter()
                .map(|v| {
                    (0..buckets)
                        .map(|b| *v.series_ops.get(b).unwrap_or(&0) as f64 / interval_s)
                        .collect()
                })
                .collect(),
            mb_per_s: self
                .vms
                .iter()
                .map(|v| {
                    (0..buckets)
                        .map(|b| *v.series_bytes.get(b).unwrap_or(&0) as f64 / 1e6 / interval_s)
                        .collect()
                })
                .collect(),
            slices: Vec::new(),
            slice_ms: Vec::new(),
            slice_used_ms: Vec::new(),
        };
        self.slices.fill(&mut series, buckets);
        let n = self.host_requests.max(1) as f64;
        let host = HostResult {
            scheduler: self.host.name().to_string(),
            requests: self.host_requests,
            mb: self.host_bytes as f64 / 1e6,
            busy_s: ns_to_s(self.busy),
            idle_pending_s: ns_to_s(self.idle_pending),
            utilisation: ns_to_s(self.busy) / ns_to_s(now).max(1e-9),
            seek: self.seek.clone(),
            mean_seek_ms: ns_to_ms(self.sum_seek) / n,
            mean_rotation_ms: ns_to_ms(self.sum_rotation) / n,
            mean_transfer_ms: ns_to_ms(self.sum_transfer) / n,
            cache_hits: self.cache_hits,
            counters: {
                let mut c = self.host.counters();
                if self.blktap.is_some() {
                    c.push(("blktap_io_merges".into(), self.io_merges as f64));
                    c.push(("blktap_elevator_merges".into(), self.elevator_merges as f64));
                    let mut q = self.seek_queued.clone();
                    q.finish();
                    c.push(("blktap_queued_distances".into(), q.total as f64));
                    c.push(("blktap_queued_zero_frac".into(), q.zero_frac));
                    c.push(("blktap_queued_within_image_frac".into(), q.within_image_frac));
                }
                c
            },
        };
        Ok(SimResult {
            seed: self.seed,
            scheduler: host.scheduler.clone(),
            sim_time_s: ns_to_s(now),
            truncated,
            events: self.events,
            max_outstanding: self.slots.len() as u64,
            total_mb_per_s: total_bytes as f64 / 1e6 / span,
            vms,
            jobs,
            host,
            series,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::SimpleDisk;

    #[test]
    fn tapdisk_buffers_join_only_after_a_full_request_in_the_slot_below() {
        assert_eq!(TAP_SLOT_SECTORS, 88);
        assert!(tap_joins(88, 0, 1));
        assert!(tap_joins(88, 30, 31));
        // A 40 KiB request leaves a page of its slot unused: a gap.
        assert!(!tap_joins(80, 0, 1));
        // The lowest free slot was not the next one.
        assert!(!tap_joins(88, 0, 2));
        assert!(!tap_joins(88, 1, 0));
        assert!(!tap_joins(88, u32::MAX, 0));
    }

    /// The engine of one VM running one job (`job` is the TOML of its fields).
    fn engine(job: &str) -> Engine {
        let text = format!(
            "seed = 3\n[host]\nscheduler = \"noop\"\n[[vm]]\nname = \"a\"\nimage_size = \"1GiB\"\n[[vm.job]]\n{job}\nrequests = 100\n"
        );
        let cfg = Config::from_toml_str(&text, "test.toml").unwrap();
        Engine::new(&cfg, Box::new(SimpleDisk::new(2_000_000_000))).unwrap()
    }

    /// The first request each thread of job 0 draws: (sector, sectors).
    fn first_draws(e: &mut Engine) -> Vec<(u64, u64)> {
        let vm = &mut e.vms[0];
        let n = vm.jobs[0].job.numjobs;
        (0..n)
            .map(|t| {
                let area = vm.threads[t as usize].area as usize;
                let (s, n, _) = vm.jobs[0].draw(area);
                (s, n)
            })
            .collect()
    }

    #[test]
    fn same_file_sequential_threads_all_start_at_the_first_block() {
        let mut e = engine("rw = \"write\"\nbs = \"4k\"\nsize = \"64MiB\"\nnumjobs = 3\nsharing = \"same-file\"");
        let first = e.vms[0].jobs[0].file_first;
        assert_eq!(first_draws(&mut e), vec![(first, 8); 3]);
        // Each keeps its own cursor: the second round is the second block for all.
        assert_eq!(first_draws(&mut e), vec![(first + 8, 8); 3]);
        // per-thread (fio without `filename`) gives the threads disjoint ranges instead.
        let mut p = engine("rw = \"write\"\nbs = \"4k\"\nsize = \"64MiB\"\nnumjobs = 3\nsharing = \"per-thread\"");
        let starts: Vec<u64> = first_draws(&mut p).iter().map(|d| d.0 - first).collect();
        let third = (64 << 20) / 512 / 3;
        assert_eq!(starts, vec![0, third, 2 * third]);
    }

    #[test]
    fn offset_increment_spaces_the_threads_starts() {
        let mut e = engine(
            "rw = \"read\"\nbs = \"4k\"\nsize = \"64MiB\"\nnumjobs = 4\nsharing = \"same-file\"\noffset_increment = \"1MiB\"",
        );
        let first = e.vms[0].jobs[0].file_first;
        let starts: Vec<u64> = first_draws(&mut e).iter().map(|d| d.0 - first).collect();
        assert_eq!(starts, vec![0, 2048, 4096, 6144]);
        // A sequential thread wraps to its own start, not to the file's (fio's region).
        let area = &mut e.vms[0].jobs[0].areas[3];
        assert_eq!(area.total, (64 << 20) / 512 - 6144);
        area.cursor[0] = area.total - 8;
        let (s, _, _) = e.vms[0].jobs[0].draw(3);
        assert_eq!(s - first, (64 << 20) / 512 - 8);
        let (s, _, _) = e.vms[0].jobs[0].draw(3);
        assert_eq!(s - first, 6144);
    }

    /// Requests as (offset from the job's first sector, sectors).
    type Runs = Vec<(u64, u64)>;

    /// `n` draws of job 0 for `area`, split by direction: (reads, writes).
    fn draws_by_direction(e: &mut Engine, area: usize, n: usize) -> (Runs, Runs) {
        let job = &mut e.vms[0].jobs[0];
        let first = job.file_first;
        let (mut reads, mut writes) = (Vec::new(), Vec::new());
        for _ in 0..n {
            let (s, k, read) = job.draw(area);
            if read { &mut reads } else { &mut writes }.push((s - first, k));
        }
        (reads, writes)
    }

    /// Every run continues the one before it.
    fn contiguous(runs: &[(u64, u64)]) -> bool {
        runs.windows(2).all(|w| w[0].0 + w[0].1 == w[1].0)
    }

    #[test]
    fn sequential_mixed_fio_jobs_keep_a_position_per_direction() {
        // fio's rw=rw: reads follow reads and writes follow writes, both
        // from the thread's start (per-thread: its own file).
        let mut e = engine("rw = \"rw\"\nbssplit = \"4k/30:8k/40:16k/30\"\nsize = \"64MiB\"\nnrfiles = 2\nnumjobs = 2");
        let file = (32 << 20) / 512;
        for t in 0..2usize {
            let (reads, writes) = draws_by_direction(&mut e, t, 400);
            assert!(
                reads.len() > 150 && writes.len() > 150,
                "{} reads, {} writes",
                reads.len(),
                writes.len()
            );
            let start = t as u64 * file;
            assert_eq!((reads[0].0, writes[0].0), (start, start), "thread {t}");
            assert!(contiguous(&reads) && contiguous(&writes), "thread {t}");
        }
        // same-file with offset_increment: both directions from t × 1 MiB.
        let mut e = engine(
            "rw = \"readwrite\"\nbs = \"8k\"\nsize = \"64MiB\"\nnumjobs = 3\nsharing = \"same-file\"\noffset_increment = \"1MiB\"",
        );
        for t in 0..3usize {
            let (reads, writes) = draws_by_direction(&mut e, t, 100);
            let start = t as u64 * 2048;
            assert_eq!((reads[0].0, writes[0].0), (start, start), "thread {t}");
            assert!(contiguous(&reads) && contiguous(&writes), "thread {t}");
            // 100 draws of 16 sectors: the two together cover 1600 sectors,
            // each direction only its own share of them.
            let ends = (reads.last().unwrap(), writes.last().unwrap());
            assert_eq!(
                ends.0 .0 + ends.0 .1 + ends.1 .0 + ends.1 .1 - 2 * start,
                1600,
                "thread {t}"
            );
        }
    }

    #[test]
    fn each_direction_wraps_to_the_start_on_its_own() {
        let mut e = engine("rw = \"rw\"\nbs = \"4k\"\nsize = \"8MiB\"\nsharing = \"same-file\"");
        let total = e.vms[0].jobs[0].areas[0].total;
        // Reads one block before the end, writes in the middle.
        e.vms[0].jobs[0].areas[0].cursor = [total - 8, 4096];
        let (reads, writes) = draws_by_direction(&mut e, 0, 60);
        assert_eq!(&reads[..2], &[(total - 8, 8), (0, 8)]);
        assert!(contiguous(&reads[1..]));
        assert_eq!(writes[0], (4096, 8));
        assert!(contiguous(&writes));
        // A sequential job of one direction and a sysbench-style `shared`
        // mixed job keep one cursor: every draw continues the last one.
        for job in [
            "rw = \"write\"\nbs = \"4k\"\nsize = \"8MiB\"\nsharing = \"same-file\"",
            "rw = \"rw\"\nbs = \"4k\"\nsize = \"8MiB\"\nnumjobs = 4\nsharing = \"shared\"",
        ] {
            let mut e = engine(job);
            let job0 = &mut e.vms[0].jobs[0];
            let all: Vec<(u64, u64)> = (0..200)
                .map(|_| {
                    let (s, k, _) = job0.draw(0);
                    (s, k)
                })
                .collect();
            assert!(contiguous(&all), "{job}");
        }
    }

    #[test]
    fn same_file_random_threads_cover_the_whole_file() {
        let mut e = engine("rw = \"randread\"\nbs = \"4k\"\nsize = \"8MiB\"\nnumjobs = 2\nsharing = \"same-file\"");
        let first = e.vms[0].jobs[0].file_first;
        let sectors = (8 << 20) / 512;
        for t in 0..2usize {
            let (mut lo, mut hi) = (u64::MAX, 0);
            for _ in 0..4000 {
                let (s, n, _) = e.vms[0].jobs[0].draw(t);
                assert!(
                    s >= first && s + n <= first + sectors,
                    "thread {t}: {s}+{n} outside the file"
                );
                lo = lo.min(s - first);
                hi = hi.max(s - first + n);
            }
            // 2048 slots, 4000 draws: both ends are reached by every thread.
            assert!(lo < 64 && hi > sectors - 64, "thread {t}: [{lo}, {hi}) of {sectors}");
        }
    }

    /// Host records of one VM running `job` (noop guest and host, so the
    /// host sees what the threads issue): (op, sector, sectors, arrival,
    /// done) of its data requests (not the journal's).
    fn host_records(job: &str, name: &str) -> Vec<(String, u64, u64, u64, u64)> {
        host_records_in("guest_scheduler = \"noop\"", job, name)
    }

    /// As [`host_records`], with the guest set by `vm_keys` (TOML of `[[vm]]` keys).
    fn host_records_in(vm_keys: &str, job: &str, name: &str) -> Vec<(String, u64, u64, u64, u64)> {
        let path = std::env::temp_dir().join(format!("hvio-engine-{}-{name}.csv", std::process::id()));
        let text = format!(
            "seed = 3\n[host]\nscheduler = \"noop\"\n[output]\nrecords = \"{}\"\n[[vm]]\nname = \"a\"\nimage_size = \"1GiB\"\n{vm_keys}\n[[vm.job]]\n{job}\nrequests = 400\n",
            path.display()
        );
        let cfg = Config::from_toml_str(&text, "test.toml").unwrap();
        let r = crate::run_with_device(&cfg, Box::new(SimpleDisk::new(2_000_000_000))).unwrap();
        assert!(!r.truncated);
        let csv = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).ok();
        csv.lines()
            .skip(1)
            .map(|l| {
                let f: Vec<&str> = l.split(',').collect();
                let n = |i: usize| f[i].parse::<u64>().unwrap();
                let data = f[4] == "0" || f[4] == "false";
                (if data { f[1] } else { "meta" }.to_string(), n(2), n(3), n(5), n(8))
            })
            .filter(|r| r.0 == "read" || r.0 == "write")
            .collect()
    }

    /// Most of the VM's requests of kind `op` at the host at once.
    fn most_at_once(recs: &[(String, u64, u64, u64, u64)], op: &str) -> usize {
        let mut ev: Vec<(u64, i32)> = Vec::new();
        for r in recs.iter().filter(|r| r.0 == op) {
            ev.push((r.3, 1));
            ev.push((r.4, -1));
        }
        ev.sort_by_key(|e| (e.0, e.1));
        let (mut now, mut most) = (0i32, 0i32);
        for e in ev {
            now += e.1;
            most = most.max(now);
        }
        most as usize
    }

    #[test]
    fn inode_lock_serialises_writes_and_the_releasing_thread_keeps_it() {
        let job = "rw = \"write\"\nbs = \"8k\"\nsize = \"64MiB\"\nnumjobs = 4\nsharing = \"same-file\"";
        let free = host_records(job, "free");
        assert!(
            most_at_once(&free, "write") >= 3,
            "without the lock the 4 writers overlap"
        );
        let locked = host_records(&format!("{job}\ninode_lock = \"steal\""), "locked");
        assert_eq!(locked.len(), 400);
        assert_eq!(most_at_once(&locked, "write"), 1, "one write to the file at a time");
        // The thread that releases the lock takes it again: one sequential
        // cursor while it runs, then the three waiters' first writes (block 0).
        let breaks = |r: &[(String, u64, u64, u64, u64)]| r.windows(2).filter(|w| w[1].1 != w[0].1 + w[0].2).count();
        assert!(breaks(&locked) <= 4, "{} breaks in the sequence", breaks(&locked));
        // Handed on in line, the lock goes round the four threads: each
        // rewrites the block the one before it wrote, so the host sees every
        // block four times, a break at three requests in four.
        let fifo = host_records(&format!("{job}\ninode_lock = \"fifo\""), "fifo");
        assert_eq!(most_at_once(&fifo, "write"), 1);
        assert!(breaks(&fifo) >= 290, "{} breaks", breaks(&fifo));
        let first = fifo[0].1;
        assert!(
            fifo[..4].iter().all(|r| r.1 == first),
            "all four start at the first block"
        );
    }

    #[test]
    fn inode_lock_leaves_reads_free() {
        let job = "rw = \"randrw\"\nbs = \"8k\"\nsize = \"64MiB\"\nnumjobs = 8\nsharing = \"same-file\"\ninode_lock = \"steal\"";
        let recs = host_records(job, "mixed");
        assert_eq!(most_at_once(&recs, "write"), 1);
        assert!(most_at_once(&recs, "read") >= 4, "reads of the other threads go on");
    }

    /// An O-SW-like VM (8 threads, a file each, synchronous direct writes)
    /// under guest CFQ with `slice_idle = 8` set, as 2.6.32 keeps it. On a
    /// virtual disk the guest believes rotational (the default on the
    /// rotational test disk), CFQ serves one thread at a time and idles for
    /// its next write: one request at the host. Declared non-rotational
    /// (Xen blkfront's `QUEUE_FLAG_VIRT`), with a 32-slot ring (`hw_tag`)
    /// CFQ does not idle, and the threads' writes reach the host together.
    #[test]
    fn guest_disk_rotational_decides_how_many_requests_a_cfq_guest_has_at_the_host() {
        let job = "rw = \"write\"\nbs = \"8k\"\nsize = \"64MiB\"\nnrfiles = 8\nnumjobs = 8";
        let cfq = "guest_scheduler = \"cfq\"\nguest_params = { slice_idle = 8 }";
        let default = host_records_in(cfq, job, "rot-default");
        assert_eq!(most_at_once(&default, "write"), 1);
        let rot = host_records_in(&format!("{cfq}\nguest_disk_rotational = true"), job, "rot");
        assert_eq!(most_at_once(&rot, "write"), 1);
        let nonrot = host_records_in(&format!("{cfq}\nguest_disk_rotational = false"), job, "nonrot");
        assert!(
            most_at_once(&nonrot, "write") >= 6,
            "{} writes at once",
            most_at_once(&nonrot, "write")
        );
    }

    #[test]
    fn guest_disk_rotational_must_be_a_boolean() {
        let text = "[[vm]]\nname = \"a\"\nguest_disk_rotational = \"no\"\n";
        let e = Config::from_toml_str(text, "t.toml").unwrap_err().to_string();
        assert!(e.contains("guest_disk_rotational") && e.contains("t.toml"), "{e}");
    }
}
