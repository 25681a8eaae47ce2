//! A physical node for the MapReduce runner, built from hvio's scheduler
//! driver and device models: each VM's guest scheduler and virtio ring, the
//! host scheduler (streams = VMs) and the disk. Both schedulers sit behind
//! [`hvio_sched::Driver`], so a plan can switch either at run time
//! ([`HostNode::switch`]), the paper's (host, guest) pairs.
//!
//! With [`NodeSpec::page_cache`] each guest has the simulator's page cache
//! ([`crate::pagecache`], the model behind buffered `hvio sim` jobs): a
//! write dirties pages and returns (the writer blocks above `dirty_ratio`
//! until write-back brings the guest under it), the flusher writes back
//! pages older than `dirty_expire_centisecs` every
//! `dirty_writeback_centisecs` and everything above
//! `dirty_background_ratio`, and a read is served from the cache or by
//! read-ahead. Hadoop 0.19 syncs none of its spills, map outputs or HDFS
//! blocks, so nothing forces a write through. A file the job deletes
//! (merged spills and segments, [`super::job::Action::Delete`]) has its
//! dirty pages dropped unwritten and its cached pages freed, as `unlink`
//! does through `truncate_inode_pages`; write-back already handed to the
//! guest scheduler still reaches the disk. Without a page cache a file
//! operation becomes block requests at once (reads synchronous, writes
//! asynchronous) and the task waits for all of them, as if every write
//! were flushed.
//!
//! The guest file layout: a file is placed when first touched, at its whole
//! size, contiguous (page-aligned with a cache), in the first free extent
//! of its VM's image that holds it, else after the last file; a deleted
//! file's extent is free again (merged with free neighbours), so a later
//! spill reuses the blocks of one merged before it, as ext3 reuses freed
//! blocks. No TRIM is sent (the HDD model has no use for one). Not
//! modelled: the file system's block groups and journal, and the virtio
//! latency.
//! Without a cache the job's requests are split at `max_request` bytes, as
//! Linux splits at `max_sectors_kb`; with one, at the cache's
//! `max_sectors_kb` (Xen blkfront's 44 KiB). The host merges a request
//! that continues one it still queues, up to `max_request` (the block
//! layer's back merge, through each scheduler's `back_merge`): dom0
//! rebuilds the disk's large requests from blkfront's pieces.

use super::cluster::NodeIo;
use super::job::{FileKey, FileOp, OpId};
use crate::engine::Engine;
use crate::error::{Result, SimError};
use crate::pagecache::{self, FileSpan, PageCache, PageCacheConfig, Run, PAGE_BYTES, PAGE_SECTORS};
use hvio_core::time::Nanos;
use hvio_core::*;
use hvio_sched::{Driver, Next, SwitchPolicy};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};

/// How a node is set up.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeSpec {
    /// The host scheduler.
    pub host: String,
    /// Every guest's scheduler.
    pub guest: String,
    /// VMs on the node.
    pub vms: usize,
    /// Requests a VM keeps in flight to the host (its virtio ring).
    pub virtio_depth: u32,
    /// Each VM's image, laid out one after the other from sector 0.
    pub image_bytes: u64,
    /// The largest request (bytes).
    pub max_request: u64,
    /// Each guest's page cache; `None`: every operation goes to the disk
    /// at once and is waited for.
    pub page_cache: Option<PageCacheConfig>,
}

impl NodeSpec {
    /// A node of `vms` VMs under the pair (`host`, `guest`).
    pub fn new(host: &str, guest: &str, vms: usize) -> NodeSpec {
        NodeSpec {
            host: host.into(),
            guest: guest.into(),
            vms,
            virtio_depth: 32,
            image_bytes: 32 << 30,
            max_request: 512 << 10,
            page_cache: None,
        }
    }

    /// The node with a page cache in every guest.
    pub fn with_page_cache(self, cache: PageCacheConfig) -> NodeSpec {
        NodeSpec {
            page_cache: Some(cache),
            ..self
        }
    }
}

/// The page cache of a paper-002 Hadoop VM (1 GiB of RAM, Linux 2.6's
/// default ratios): the memory the four task JVMs' heaps leave
/// (`mapred.child.java.opts` -Xmx200m × 2 map + 2 reduce slots = 800 MiB),
/// 224 MiB. `dd` alone in such a VM has all of it: [`dd_page_cache`].
pub fn hadoop_page_cache() -> PageCacheConfig {
    PageCacheConfig {
        memory: crate::size::Size(224 << 20),
        ..PageCacheConfig::default()
    }
}

/// The page cache of a paper-002 VM running only `dd`: its whole 1 GiB.
pub fn dd_page_cache() -> PageCacheConfig {
    PageCacheConfig::default()
}

/// The guest stream of the flusher's write-back (the tasks' threads are
/// numbered from 0).
const FLUSHER_STREAM: StreamId = StreamId::MAX;

/// Who a request in flight is for.
#[derive(Clone, Copy, Debug)]
enum Owner {
    /// A part of an operation sent straight to the disk (no cache).
    Op(OpId),
    /// A read of pages into the cache.
    CacheRead(Run),
    /// The flusher's write-back of pages.
    Writeback(Run),
}

/// A guest's page cache and what waits on it.
struct Cache {
    pages: PageCache,
    /// The flusher's next pass.
    flusher_at: Option<Nanos>,
    /// Write-back runs queued for submission, and how many are in flight.
    wb_queue: VecDeque<Run>,
    wb_inflight: u32,
    /// Writers blocked above `dirty_ratio`: their operations.
    throttled: Vec<OpId>,
    /// Readers waiting for pages: (operation, pages left, pages read).
    readers: BTreeMap<u32, (OpId, u32, u64)>,
    next_reader: u32,
}

struct Guest {
    driver: Driver,
    timer: Option<Nanos>,
    ring_used: u32,
    base: Sector,
    sectors: Sector,
    next_free: Sector,
    /// Free extents below `next_free` (start → sectors), from deleted files.
    free: BTreeMap<Sector, Sector>,
    /// Each file's first sector and size in sectors.
    files: BTreeMap<FileKey, (Sector, Sector)>,
    cache: Option<Cache>,
}

impl Guest {
    /// `size` sectors for a new file: the first free extent that holds
    /// them, else after the last file; `None` when the image is full.
    fn allocate(&mut self, size: Sector) -> Option<Sector> {
        if let Some((&start, &len)) = self.free.iter().find(|(_, &len)| len >= size) {
            self.free.remove(&start);
            if len > size {
                self.free.insert(start + size, len - size);
            }
            return Some(start);
        }
        if self.next_free + size > self.sectors {
            return None;
        }
        let start = self.next_free;
        self.next_free += size;
        Some(start)
    }

    /// The extent `[start, start + size)` is free again: merged with its
    /// free neighbours, and given back to the end when it is the last.
    fn release(&mut self, mut start: Sector, mut size: Sector) {
        if let Some((&before, &len)) = self.free.range(..start).next_back() {
            if before + len == start {
                self.free.remove(&before);
                start = before;
                size += len;
            }
        }
        if let Some(len) = self.free.remove(&(start + size)) {
            size += len;
        }
        if start + size == self.next_free {
            self.next_free = start;
        } else {
            self.free.insert(start, size);
        }
    }
}

/// A node's backlog at one instant ([`HostNode::backlog`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Backlog {
    /// Bytes dirty in the guests' page caches, not yet under write-back.
    pub dirty_bytes: u64,
    /// Bytes under write-back.
    pub writeback_bytes: u64,
    /// Requests queued or in flight in the guest schedulers.
    pub guest_queued: usize,
    /// Requests queued or in flight in the host scheduler.
    pub host_queued: usize,
}

impl Backlog {
    /// Two backlogs together (two nodes').
    pub fn plus(self, other: Backlog) -> Backlog {
        Backlog {
            dirty_bytes: self.dirty_bytes + other.dirty_bytes,
            writeback_bytes: self.writeback_bytes + other.writeback_bytes,
            guest_queued: self.guest_queued + other.guest_queued,
            host_queued: self.host_queued + other.host_queued,
        }
    }
}

/// What a node's disk and host scheduler did from the start of a run
/// ([`HostNode::disk_trace`]): the request-level view of a phase, as the
/// difference of two traces ([`DiskTrace::minus`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct DiskTrace {
    /// Requests the host scheduler dispatched to the disk.
    pub requests: u64,
    /// Of them, reads.
    pub reads: u64,
    /// Bytes they moved.
    pub bytes: u64,
    /// Dispatched requests that did not start where the one dispatched
    /// before them ended.
    pub seeks: u64,
    /// Their distances summed, sectors.
    pub seek_sectors: u64,
    /// Time the disk held at least one request, ns.
    pub busy_ns: u64,
    /// Requests the guests sent to the host.
    pub guest_requests: u64,
    /// Of them, merged by the host into a queued request (`back_merge`).
    pub merged: u64,
    /// The host scheduler's queue summed over its dispatches (the requests
    /// it held beside the one it chose).
    pub queued_at_dispatch: u64,
    /// Bytes the guests' page caches read from the disk (read-ahead
    /// included) for reads of the job's input, of the maps' spills and
    /// intermediate merges, of map outputs (serving fetches) and of the
    /// reducers' segments, merges and output.
    pub cache_reads: [u64; 4],
}

impl DiskTrace {
    /// What happened between `earlier` and this trace.
    pub fn minus(self, earlier: DiskTrace) -> DiskTrace {
        DiskTrace {
            requests: self.requests - earlier.requests,
            reads: self.reads - earlier.reads,
            bytes: self.bytes - earlier.bytes,
            seeks: self.seeks - earlier.seeks,
            seek_sectors: self.seek_sectors - earlier.seek_sectors,
            busy_ns: self.busy_ns - earlier.busy_ns,
            guest_requests: self.guest_requests - earlier.guest_requests,
            merged: self.merged - earlier.merged,
            queued_at_dispatch: self.queued_at_dispatch - earlier.queued_at_dispatch,
            cache_reads: std::array::from_fn(|i| self.cache_reads[i] - earlier.cache_reads[i]),
        }
    }

    /// Two nodes' traces together.
    pub fn plus(self, other: DiskTrace) -> DiskTrace {
        DiskTrace {
            requests: self.requests + other.requests,
            reads: self.reads + other.reads,
            bytes: self.bytes + other.bytes,
            seeks: self.seeks + other.seeks,
            seek_sectors: self.seek_sectors + other.seek_sectors,
            busy_ns: self.busy_ns + other.busy_ns,
            guest_requests: self.guest_requests + other.guest_requests,
            merged: self.merged + other.merged,
            queued_at_dispatch: self.queued_at_dispatch + other.queued_at_dispatch,
            cache_reads: std::array::from_fn(|i| self.cache_reads[i] + other.cache_reads[i]),
        }
    }

    /// Which of [`DiskTrace::cache_reads`] a read of `file` counts in.
    fn read_kind(file: FileKey) -> usize {
        match file {
            FileKey::Input(_) | FileKey::Plain(_) => 0,
            FileKey::Spill { .. } | FileKey::Merged { reduce: false, .. } => 1,
            FileKey::MapOutput(_) => 2,
            FileKey::Segment { .. } | FileKey::Merged { reduce: true, .. } | FileKey::Output { .. } => 3,
        }
    }
}

/// One physical node; see the module doc.
pub struct HostNode {
    host: Driver,
    host_timer: Option<Nanos>,
    guests: Vec<Guest>,
    device: Box<dyn Device>,
    ring_depth: u32,
    max_sectors: u64,
    next_rq: RequestId,
    /// Each request in flight: who it is for, its VM and the request as
    /// the guest scheduler holds it.
    parts: BTreeMap<RequestId, (Owner, usize, Request)>,
    /// Requests the host merged into a queued one (`back_merge`), by the
    /// id of the request that took them: they complete with it.
    merged: BTreeMap<RequestId, Vec<RequestId>>,
    /// Requests an operation still waits for.
    left: BTreeMap<OpId, usize>,
    completions: Vec<Completion>,
    done: Vec<(OpId, Nanos)>,
    /// Operations served by the page cache, done at a time to come (the
    /// copy between the cache and the task), earliest first.
    ready: BinaryHeap<Reverse<(Nanos, OpId)>>,
    now: Nanos,
    trace: DiskTrace,
    /// Requests on the disk, since when it has been busy, and where the
    /// last dispatched request ended.
    on_disk: usize,
    busy_since: Nanos,
    head: Sector,
}

fn sectors(bytes: u64) -> Sector {
    bytes.div_ceil(SECTOR_BYTES)
}

impl HostNode {
    /// The node on `device`.
    pub fn new(spec: &NodeSpec, device: Box<dyn Device>) -> Result<HostNode> {
        let info = device.info();
        let image = sectors(spec.image_bytes);
        if spec.vms == 0 || image == 0 || spec.max_request < SECTOR_BYTES || spec.virtio_depth == 0 {
            return Err(SimError::invalid(
                "mapreduce node",
                "vms",
                spec.vms,
                "a node needs VMs, an image, a ring and requests of at least a sector",
            ));
        }
        if image.saturating_mul(spec.vms as u64) > info.capacity {
            return Err(SimError::invalid(
                "mapreduce node",
                "image_bytes",
                spec.image_bytes,
                format!("{} images do not fit the disk's {} sectors", spec.vms, info.capacity),
            ));
        }
        let streams = (0..spec.vms)
            .map(|v| {
                let mut s = StreamInfo::new(v as StreamId, format!("vm{v}"));
                s.region = Some((v as u64 * image, image));
                s
            })
            .collect();
        let host = Driver::build(
            &spec.host,
            &ParamValues::new(),
            SchedContext {
                streams,
                device: info.clone(),
            },
        )
        .map_err(|e| SimError::invalid("mapreduce node", "host", &spec.host, e.to_string()))?;
        let guest_info = DeviceInfo {
            capacity: image,
            ..info
        };
        let guests = (0..spec.vms)
            .map(|v| {
                let ctx = SchedContext {
                    streams: Vec::new(),
                    device: guest_info.clone(),
                };
                let driver = Driver::build(&spec.guest, &ParamValues::new(), ctx)
                    .map_err(|e| SimError::invalid("mapreduce node", "guest", &spec.guest, e.to_string()))?;
                Ok(Guest {
                    driver,
                    timer: None,
                    ring_used: 0,
                    base: v as u64 * image,
                    sectors: image,
                    next_free: 0,
                    free: BTreeMap::new(),
                    files: BTreeMap::new(),
                    cache: spec.page_cache.as_ref().map(|c| Cache {
                        pages: PageCache::new(c),
                        flusher_at: None,
                        wb_queue: VecDeque::new(),
                        wb_inflight: 0,
                        throttled: Vec::new(),
                        readers: BTreeMap::new(),
                        next_reader: 0,
                    }),
                })
            })
            .collect::<Result<_>>()?;
        Ok(HostNode {
            host,
            host_timer: None,
            guests,
            device,
            ring_depth: spec.virtio_depth,
            max_sectors: sectors(spec.max_request),
            next_rq: 0,
            parts: BTreeMap::new(),
            merged: BTreeMap::new(),
            left: BTreeMap::new(),
            completions: Vec::new(),
            done: Vec::new(),
            ready: BinaryHeap::new(),
            now: 0,
            trace: DiskTrace::default(),
            on_disk: 0,
            busy_since: 0,
            head: 0,
        })
    }

    /// Switch the host scheduler, every guest's, or both, at `now`.
    pub fn switch(&mut self, host: Option<&str>, guest: Option<&str>, policy: SwitchPolicy, now: Nanos) -> Result<()> {
        let params = ParamValues::new();
        let fail =
            |key: &str, name: &str, e: hvio_sched::SwitchError| SimError::invalid("switch", key, name, e.to_string());
        if let Some(name) = host {
            self.host
                .switch_by_name(name, &params, policy, now)
                .map_err(|e| fail("host", name, e))?;
        }
        if let Some(name) = guest {
            for g in &mut self.guests {
                g.driver
                    .switch_by_name(name, &params, policy, now)
                    .map_err(|e| fail("guest", name, e))?;
            }
        }
        self.pump(now);
        Ok(())
    }

    /// The scheduler pair running now (host, guest).
    pub fn pair(&self) -> (&'static str, &'static str) {
        (self.host.name(), self.guests[0].driver.name())
    }

    /// What the node holds at this instant: bytes dirty and under
    /// write-back in its guests' page caches, requests queued in the guest
    /// schedulers and in the host's.
    pub fn backlog(&self) -> Backlog {
        let mut b = Backlog {
            host_queued: self.host.queued() + self.host.in_flight(),
            ..Backlog::default()
        };
        for g in &self.guests {
            b.guest_queued += g.driver.queued() + g.driver.in_flight();
            if let Some(c) = &g.cache {
                b.dirty_bytes += c.pages.nr_dirty() * PAGE_BYTES;
                b.writeback_bytes += c.pages.nr_writeback() * PAGE_BYTES;
            }
        }
        b
    }

    /// What the disk and the host scheduler did from the start to `now`.
    pub fn disk_trace(&self, now: Nanos) -> DiskTrace {
        let mut t = self.trace;
        if self.on_disk > 0 {
            t.busy_ns += now.saturating_sub(self.busy_since);
        }
        t
    }

    /// Whether a switch is still in progress anywhere on the node.
    pub fn switching(&self) -> bool {
        self.host.switching() || self.guests.iter().any(|g| g.driver.switching())
    }

    fn place(&mut self, op: &FileOp) -> Result<Sector> {
        let guest = &mut self.guests[op.vm.vm];
        if let Some(&(start, _)) = guest.files.get(&op.file) {
            return Ok(start);
        }
        let mut size = sectors(op.file_size.max(op.offset + op.len));
        if guest.cache.is_some() {
            // Files start on a page (every extent then does).
            guest.next_free = guest.next_free.next_multiple_of(PAGE_SECTORS);
            size = size.next_multiple_of(PAGE_SECTORS);
        }
        let Some(start) = guest.allocate(size) else {
            return Err(SimError::invalid(
                "mapreduce node",
                "image_bytes",
                guest.sectors * SECTOR_BYTES,
                format!("VM {} of node {} ran out of image space", op.vm.vm, op.vm.node),
            ));
        };
        guest.files.insert(op.file, (start, size));
        Ok(start)
    }

    /// Move requests down: guests to the host while their rings have room,
    /// the host to the disk while it takes them.
    fn pump(&mut self, now: Nanos) {
        for (v, g) in self.guests.iter_mut().enumerate() {
            while g.ring_used < self.ring_depth {
                match g.driver.poll(now) {
                    Next::Request(rq) => {
                        g.ring_used += 1;
                        let mut host_rq = rq;
                        host_rq.sector = g.base + rq.sector;
                        host_rq.stream = v as StreamId;
                        host_rq.arrival = now;
                        // The host's block layer merges a request that
                        // continues a queued one of the same VM, up to the
                        // disk's largest request.
                        self.trace.guest_requests += 1;
                        match self.host.back_merge(&host_rq, self.max_sectors as u32, now) {
                            Some(into) => {
                                self.trace.merged += 1;
                                self.merged.entry(into).or_default().push(host_rq.id)
                            }
                            None => self.host.insert(host_rq, now),
                        }
                    }
                    Next::Wait { until, .. } => {
                        g.timer = Some(until);
                        break;
                    }
                    Next::Idle => break,
                }
            }
        }
        while self.device.can_accept() {
            match self.host.poll(now) {
                Next::Request(rq) => {
                    let t = &mut self.trace;
                    t.requests += 1;
                    t.reads += u64::from(rq.op == Op::Read);
                    t.bytes += rq.sectors as u64 * SECTOR_BYTES;
                    if rq.sector != self.head {
                        t.seeks += 1;
                        t.seek_sectors += rq.sector.abs_diff(self.head);
                    }
                    t.queued_at_dispatch += self.host.queued() as u64;
                    self.head = rq.sector + rq.sectors as u64;
                    if self.on_disk == 0 {
                        self.busy_since = now;
                    }
                    self.on_disk += 1;
                    self.device.submit(rq, now)
                }
                Next::Wait { until, .. } => {
                    self.host_timer = Some(until);
                    break;
                }
                Next::Idle => break,
            }
        }
    }

    fn next(&self) -> Option<Nanos> {
        self.device
            .next_event()
            .into_iter()
            .chain(self.host_timer)
            .chain(self.guests.iter().filter_map(|g| g.timer))
            .chain(self.guests.iter().filter_map(|g| g.cache.as_ref()?.flusher_at))
            .chain(self.ready.peek().map(|Reverse((t, _))| *t))
            .min()
    }

    /// Hand `rq` of VM `v` for `owner` to its guest scheduler, under a new id.
    fn send(&mut self, v: usize, owner: Owner, mut rq: Request) {
        rq.id = self.next_rq;
        self.next_rq += 1;
        self.parts.insert(rq.id, (owner, v, rq));
        self.guests[v].driver.insert(rq, self.now);
    }

    /// An operation of VM `v` through its page cache: a write dirties its
    /// pages, a read finds them or reads them in.
    fn submit_cached(&mut self, v: usize, op: &FileOp, start: Sector) {
        let now = self.now;
        let g = &mut self.guests[v];
        let cache = g.cache.as_mut().expect("called with a cache");
        let file_first = start / PAGE_SECTORS;
        let first = file_first + op.offset / PAGE_BYTES;
        let end = file_first + (op.offset + op.len).div_ceil(PAGE_BYTES);
        let pages = (end - first).max(1);
        let copy = cache.pages.config().copy_ns_per_page * pages;
        if op.write {
            cache.pages.write(first, pages, now);
            if cache.flusher_at.is_none() {
                cache.flusher_at = Some(now + cache.pages.config().writeback_period());
            }
            if cache.pages.over_dirty_limit() {
                cache.throttled.push(op.id);
            } else {
                self.ready.push(Reverse((now + copy, op.id)));
            }
            self.flusher_pump(v);
            return;
        }
        let span = FileSpan {
            key: file_first,
            first: file_first,
            pages: sectors(op.file_size).div_ceil(PAGE_SECTORS).max(end - file_first),
        };
        let reader = cache.next_reader;
        cache.next_reader = cache.next_reader.wrapping_add(1);
        let outcome = cache.pages.read(span, first, pages, reader);
        if outcome.wait == 0 {
            self.ready.push(Reverse((now + copy, op.id)));
        } else {
            cache.readers.insert(reader, (op.id, outcome.wait, pages));
        }
        let max = cache.pages.config().max_request_pages();
        let missed: u64 = outcome.runs.iter().map(|r| r.pages).sum();
        self.trace.cache_reads[DiskTrace::read_kind(op.file)] += missed * PAGE_BYTES;
        for run in outcome.runs {
            for r in pagecache::split(run, max) {
                self.send(
                    v,
                    Owner::CacheRead(r),
                    Engine::page_request(op.thread as StreamId, Op::Read, r, now).with_sync(true),
                );
            }
        }
    }

    /// Submit queued write-back up to `nr_requests`, refilling the queue
    /// while above `dirty_background_ratio` or while writers are throttled
    /// (the engine's flusher: `crate::engine`'s buffered guests).
    fn flusher_pump(&mut self, v: usize) {
        loop {
            let Some(cache) = self.guests[v].cache.as_mut() else {
                return;
            };
            if cache.wb_inflight >= cache.pages.config().nr_requests {
                return;
            }
            if let Some(r) = cache.wb_queue.pop_front() {
                cache.wb_inflight += 1;
                let rq = Engine::page_request(FLUSHER_STREAM, Op::Write, r, self.now);
                self.send(v, Owner::Writeback(r), rq);
                continue;
            }
            if !cache.pages.over_background() && cache.throttled.is_empty() {
                return;
            }
            // MAX_WRITEBACK_PAGES: one pass takes up to 4 MiB.
            let runs = cache.pages.writeback_background(1024);
            if runs.is_empty() {
                return;
            }
            let max = cache.pages.config().max_request_pages();
            for run in runs {
                cache.wb_queue.extend(pagecache::split(run, max));
            }
        }
    }

    /// The flusher's pass in VM `v` at `now`: pages dirty for longer than
    /// `dirty_expire_centisecs` go to the disk; it comes again while the
    /// cache holds dirty pages or pages under write-back.
    fn flusher_tick(&mut self, v: usize, now: Nanos) {
        let Some(cache) = self.guests[v].cache.as_mut() else {
            return;
        };
        let cfg = cache.pages.config();
        let (period, expire, max) = (cfg.writeback_period(), cfg.dirty_expire(), cfg.max_request_pages());
        if let Some(cutoff) = now.checked_sub(expire) {
            for run in cache.pages.writeback_expired(cutoff) {
                cache.wb_queue.extend(pagecache::split(run, max));
            }
        }
        let more = cache.pages.nr_dirty() > 0 || cache.pages.nr_writeback() > 0 || !cache.wb_queue.is_empty();
        cache.flusher_at = more.then_some(now + period);
        self.flusher_pump(v);
    }

    /// Guest request `id` is done at `t`: its ring slot frees, its guest
    /// scheduler hears of it, and so does what it was for.
    fn guest_done(&mut self, id: RequestId, t: Nanos) {
        let Some((owner, v, guest_rq)) = self.parts.remove(&id) else {
            return;
        };
        let g = &mut self.guests[v];
        g.ring_used -= 1;
        g.driver.completed(&guest_rq, t);
        let Owner::Op(op) = owner else {
            self.cache_done(v, owner, t);
            return;
        };
        let left = self.left.get_mut(&op).expect("an operation in flight is counted");
        *left -= 1;
        if *left == 0 {
            self.left.remove(&op);
            self.done.push((op, t));
        }
    }

    /// A request of VM `v` for the cache finished at `t`.
    fn cache_done(&mut self, v: usize, owner: Owner, t: Nanos) {
        let Some(cache) = self.guests[v].cache.as_mut() else {
            return;
        };
        let copy = cache.pages.config().copy_ns_per_page;
        match owner {
            Owner::CacheRead(run) => {
                for reader in cache.pages.read_done(run) {
                    let Some(entry) = cache.readers.get_mut(&reader) else {
                        continue;
                    };
                    entry.1 -= 1;
                    if entry.1 == 0 {
                        let (op, _, pages) = cache.readers.remove(&reader).expect("just seen");
                        self.ready.push(Reverse((t + copy * pages, op)));
                    }
                }
            }
            Owner::Writeback(run) => {
                cache.pages.write_done(run);
                cache.wb_inflight -= 1;
                if !cache.pages.over_dirty_limit() {
                    for op in std::mem::take(&mut cache.throttled) {
                        self.ready.push(Reverse((t, op)));
                    }
                }
                self.flusher_pump(v);
            }
            Owner::Op(_) => {}
        }
    }
}

impl HostNode {
    /// VM `v` deletes `file`: its dirty pages and the write-back queued
    /// for them but not yet handed to the guest scheduler are dropped, its
    /// cached pages freed, its extent free for the next file. Writers
    /// throttled above `dirty_ratio` go on if that brings the guest under.
    fn delete_file(&mut self, v: usize, file: FileKey) {
        let g = &mut self.guests[v];
        let Some((start, size)) = g.files.remove(&file) else {
            return;
        };
        g.release(start, size);
        let Some(cache) = g.cache.as_mut() else {
            return;
        };
        let first = start / PAGE_SECTORS;
        let span = FileSpan {
            key: first,
            first,
            pages: size / PAGE_SECTORS,
        };
        cache.pages.discard(span);
        let end = first + span.pages;
        let mut kept = VecDeque::with_capacity(cache.wb_queue.len());
        for run in std::mem::take(&mut cache.wb_queue) {
            let (lo, hi) = (run.first.max(first), (run.first + run.pages).min(end));
            if lo >= hi {
                kept.push_back(run);
                continue;
            }
            // The part in the file is never sent: its pages are dropped.
            cache.pages.write_done(Run {
                first: lo,
                pages: hi - lo,
            });
            if run.first < lo {
                kept.push_back(Run {
                    first: run.first,
                    pages: lo - run.first,
                });
            }
            if hi < run.first + run.pages {
                kept.push_back(Run {
                    first: hi,
                    pages: run.first + run.pages - hi,
                });
            }
        }
        cache.wb_queue = kept;
        if !cache.pages.over_dirty_limit() {
            for op in std::mem::take(&mut cache.throttled) {
                self.ready.push(Reverse((self.now, op)));
            }
        }
        self.flusher_pump(v);
    }
}

impl NodeIo for HostNode {
    fn delete(&mut self, now: Nanos, vm: super::job::VmId, file: FileKey) {
        self.now = self.now.max(now);
        self.delete_file(vm.vm, file);
        self.pump(self.now);
    }

    fn submit(&mut self, now: Nanos, op: FileOp) -> Result<()> {
        self.now = self.now.max(now);
        let start = self.place(&op)?;
        if self.guests[op.vm.vm].cache.is_some() {
            self.submit_cached(op.vm.vm, &op, start);
            self.pump(self.now);
            return Ok(());
        }
        let first = start + op.offset / SECTOR_BYTES;
        let total = sectors(op.offset % SECTOR_BYTES + op.len).max(1);
        let pieces = total.div_ceil(self.max_sectors);
        self.left.insert(op.id, pieces as usize);
        let kind = if op.write { Op::Write } else { Op::Read };
        for k in 0..pieces {
            let sector = first + k * self.max_sectors;
            let len = self.max_sectors.min(total - k * self.max_sectors) as u32;
            let rq = Request::new(0, op.thread as StreamId, kind, sector, len, self.now);
            self.send(op.vm.vm, Owner::Op(op.id), rq);
        }
        self.pump(self.now);
        Ok(())
    }

    fn next_event(&self) -> Option<Nanos> {
        self.next()
    }

    fn advance(&mut self, until: Nanos) -> Vec<(OpId, Nanos)> {
        while let Some(t) = self.next().filter(|&t| t <= until) {
            let t = t.max(self.now);
            self.now = t;
            self.device.advance(t, &mut self.completions);
            for c in std::mem::take(&mut self.completions) {
                self.on_disk -= 1;
                if self.on_disk == 0 {
                    self.trace.busy_ns += c.done.saturating_sub(self.busy_since);
                }
                self.host.completed(&c.rq, c.done);
                let merged = self.merged.remove(&c.rq.id).unwrap_or_default();
                for id in std::iter::once(c.rq.id).chain(merged) {
                    self.guest_done(id, c.done);
                }
            }
            if self.host_timer.is_some_and(|at| at <= t) {
                self.host_timer = None;
                self.host.timer_due(t);
            }
            for g in &mut self.guests {
                if g.timer.is_some_and(|at| at <= t) {
                    g.timer = None;
                    g.driver.timer_due(t);
                }
            }
            for v in 0..self.guests.len() {
                if self.guests[v]
                    .cache
                    .as_ref()
                    .and_then(|c| c.flusher_at)
                    .is_some_and(|at| at <= t)
                {
                    self.flusher_tick(v, t);
                }
            }
            while let Some(&Reverse((at, op))) = self.ready.peek() {
                if at > t {
                    break;
                }
                self.ready.pop();
                self.done.push((op, at));
            }
            self.pump(t);
        }
        self.now = self.now.max(until);
        std::mem::take(&mut self.done)
    }
}

/// A switch at a phase boundary: when the job enters `at`, switch the host
/// to `host` and every guest to `guest` (either may stay).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PhaseSwitch {
    /// The phase it happens at.
    pub at: super::phases::PhaseKind,
    /// The host scheduler to switch to.
    pub host: Option<String>,
    /// The guests' scheduler to switch to.
    pub guest: Option<String>,
    /// The switch policy.
    pub policy: SwitchPolicy,
}

/// Run `job` on `cluster`, each physical node a [`HostNode`] set up as
/// `node` on its own disk built from the `[disk]` table `disk`, switching
/// pairs at the phases `switches` name. A switch at a shuffle that is empty
/// (no reducers) happens with the reduce's.
pub fn simulate(
    job: &super::spec::JobSpec,
    cluster: &super::spec::ClusterSpec,
    node: &NodeSpec,
    disk: &toml::Table,
    switches: &[PhaseSwitch],
) -> Result<super::cluster::ClusterRun> {
    simulate_with_backlog(job, cluster, node, disk, switches).map(|(run, _)| run)
}

/// [`simulate`], and the cluster's backlog (every node's summed) as the
/// job entered each phase of the run's `boundaries`, before any switch
/// there: what a plan's next pair inherits from the one before.
pub fn simulate_with_backlog(
    job: &super::spec::JobSpec,
    cluster: &super::spec::ClusterSpec,
    node: &NodeSpec,
    disk: &toml::Table,
    switches: &[PhaseSwitch],
) -> Result<(super::cluster::ClusterRun, Vec<Backlog>)> {
    simulate_traced(job, cluster, node, disk, switches).map(|(run, backlogs, _)| (run, backlogs))
}

/// [`simulate_with_backlog`], and what the disks did (every node's
/// [`DiskTrace`] summed) in each phase of the run's `boundaries` and after
/// the last: one trace per boundary, then one to the job's end.
pub fn simulate_traced(
    job: &super::spec::JobSpec,
    cluster: &super::spec::ClusterSpec,
    node: &NodeSpec,
    disk: &toml::Table,
    switches: &[PhaseSwitch],
) -> Result<(super::cluster::ClusterRun, Vec<Backlog>, Vec<DiskTrace>)> {
    let node = NodeSpec {
        vms: cluster.vms_per_node,
        ..node.clone()
    };
    let mut nodes = (0..cluster.nodes)
        .map(|_| {
            HostNode::new(
                &node,
                crate::testing::device_from_table(disk, std::path::Path::new("."))?,
            )
        })
        .collect::<Result<Vec<_>>>()?;
    let mut job = super::job::Job::new(job, cluster)?;
    let mut backlogs = Vec::new();
    let mut traces = Vec::new();
    let total = |nodes: &[HostNode], now| {
        nodes
            .iter()
            .map(|n| n.disk_trace(now))
            .fold(DiskTrace::default(), DiskTrace::plus)
    };
    let run = super::cluster::run(&mut job, &mut nodes, cluster, |kind, now, nodes| {
        backlogs.push(
            nodes
                .iter()
                .map(HostNode::backlog)
                .fold(Backlog::default(), Backlog::plus),
        );
        traces.push(total(nodes, now));
        for s in switches.iter().filter(|s| s.at == kind) {
            for n in nodes.iter_mut() {
                n.switch(s.host.as_deref(), s.guest.as_deref(), s.policy, now)?;
            }
        }
        Ok(())
    })?;
    traces.push(total(&nodes, run.progress.end));
    let mut before = DiskTrace::default();
    let traces = traces
        .into_iter()
        .map(|t| {
            let phase = t.minus(before);
            before = t;
            phase
        })
        .collect();
    Ok((run, backlogs, traces))
}

/// Paper 002's switch-cost benchmark (§IV.B) on one node: every VM writes
/// `bytes` of zeros to a file, `dd`-like, one `block` at a time, all VMs at
/// once; with `switch`, at the first completion at or after its time, the
/// host and every guest are switched to its pair (both, even to the
/// schedulers already running: the paper re-assigns the pair). Returns when
/// the last VM is done. The paper does not give `dd`'s block size; without a
/// guest page cache each block is written through (`oflag=direct`).
pub fn dd_time(
    node: &NodeSpec,
    disk: &toml::Table,
    bytes: u64,
    block: u64,
    switch: Option<((&str, &str), Nanos)>,
) -> Result<Nanos> {
    use super::job::VmId;
    let mut host = HostNode::new(
        node,
        crate::testing::device_from_table(disk, std::path::Path::new("."))?,
    )?;
    let block = block.clamp(1, bytes.max(1));
    let mut written = vec![0u64; node.vms];
    // An operation's id says its VM: sequence number × VMs + VM.
    let vms = node.vms as OpId;
    let mut seq: OpId = 0;
    let mut pending_switch = switch;
    let mut submit = |host: &mut HostNode, vm: usize, written: &mut [u64], now: Nanos| -> Result<()> {
        let len = block.min(bytes - written[vm]);
        let op = FileOp {
            id: seq * vms + vm as OpId,
            vm: VmId { node: 0, vm },
            file: FileKey::Plain(vm as u32),
            file_size: bytes,
            offset: written[vm],
            len,
            write: true,
            thread: 0,
        };
        seq += 1;
        written[vm] += len;
        host.submit(now, op)
    };
    for vm in 0..node.vms {
        if bytes > 0 {
            submit(&mut host, vm, &mut written, 0)?;
        }
    }
    let mut end = 0;
    while let Some(t) = host.next_event() {
        let done = host.advance(t);
        if let Some(((to_host, to_guest), at)) = pending_switch.filter(|(_, at)| *at <= t) {
            host.switch(Some(to_host), Some(to_guest), SwitchPolicy::Drain, at.max(t))?;
            pending_switch = None;
        }
        for (id, at) in done {
            end = end.max(at);
            let vm = (id % vms) as usize;
            if written[vm] < bytes {
                submit(&mut host, vm, &mut written, t)?;
            }
        }
    }
    Ok(end)
}

#[cfg(test)]
mod tests {
    use super::super::phases::PhaseKind;
    use super::super::spec::{Benchmark, ClusterSpec, JobSpec};
    use super::*;

    /// Sort on 2 nodes × 2 VMs, 128 MiB each, without Hadoop's heartbeats:
    /// these tests pin the node (its schedulers, cache and switches), and
    /// with the JobTracker loop the disks sit idle while tasks wait for
    /// heartbeats, so a switch at the shuffle finds nothing to drain.
    fn small() -> (JobSpec, ClusterSpec) {
        let spec = JobSpec {
            input_per_vm: 128 << 20,
            heartbeat: None,
            ..JobSpec::preset(Benchmark::Sort)
        };
        (
            spec,
            ClusterSpec {
                nodes: 2,
                vms_per_node: 2,
                ..ClusterSpec::default()
            },
        )
    }

    fn hdd() -> toml::Table {
        toml::Table::new()
    }

    #[test]
    fn sort_runs_on_the_hdd_model_under_any_pair() {
        let (spec, cluster) = small();
        let run =
            |host: &str, guest: &str| simulate(&spec, &cluster, &NodeSpec::new(host, guest, 2), &hdd(), &[]).unwrap();
        let cfq = run("cfq", "cfq");
        let noop = run("noop", "noop");
        let spans = cfq.phases.spans;
        assert!(spans[0].duration() > 0 && spans[2].duration() > 0);
        assert_eq!(cfq.stats.input_read, 4 * (128 << 20));
        // Same job, same bytes; the pair changes only the time.
        assert_eq!(cfq.stats, noop.stats);
        assert_ne!(cfq.phases.job(), noop.phases.job());
        // Deterministic.
        assert_eq!(run("cfq", "cfq"), cfq);
    }

    #[test]
    fn a_plan_switches_the_pair_when_the_job_enters_a_phase() {
        let (spec, cluster) = small();
        let node = NodeSpec {
            vms: cluster.vms_per_node,
            ..NodeSpec::new("cfq", "cfq", 2)
        };
        let mut nodes: Vec<HostNode> = (0..2)
            .map(|_| {
                HostNode::new(
                    &node,
                    crate::testing::device_from_table(&hdd(), std::path::Path::new(".")).unwrap(),
                )
                .unwrap()
            })
            .collect();
        let mut job = super::super::job::Job::new(&spec, &cluster).unwrap();
        let mut seen = Vec::new();
        let run = super::super::cluster::run(&mut job, &mut nodes, &cluster, |kind, now, nodes| {
            if kind == PhaseKind::Shuffle {
                for n in nodes.iter_mut() {
                    n.switch(Some("anticipatory"), Some("deadline"), SwitchPolicy::Drain, now)?;
                }
            }
            seen.push((kind, nodes[0].pair()));
            Ok(())
        })
        .unwrap();
        // Right after the switch the host still drains its queue under cfq
        // (the guests' queues were empty: they switched at once); by the
        // reduce both have switched.
        assert_eq!(seen[0].0, PhaseKind::Shuffle);
        assert_eq!(seen[0].1 .0, "cfq");
        assert_eq!(seen[1], (PhaseKind::Reduce, ("anticipatory", "deadline")));
        assert!(!nodes[0].switching());
        // The switched run differs from the one that stays on (cfq, cfq).
        let stay = simulate(&spec, &cluster, &node, &hdd(), &[]).unwrap();
        assert_eq!(stay.phases.spans[0], run.phases.spans[0], "identical until the switch");
        assert_ne!(stay.phases.job(), run.phases.job());
    }

    #[test]
    fn dd_writes_in_every_vm_and_a_switch_to_the_same_pair_changes_its_time() {
        let node = NodeSpec::new("cfq", "cfq", 4);
        let alone = dd_time(&node, &hdd(), 64 << 20, 1 << 20, None).unwrap();
        // Four VMs' 256 MiB through one HDD: well under its 138 MB/s outer rate.
        assert!(alone > 2_000_000_000, "{alone} ns");
        let to_self = dd_time(&node, &hdd(), 64 << 20, 1 << 20, Some((("cfq", "cfq"), alone / 2))).unwrap();
        // The switch goes through the driver even to the pair running: a
        // fresh scheduler state, a drain; the time changes.
        assert_ne!(to_self, alone);
        let to_noop = dd_time(&node, &hdd(), 64 << 20, 1 << 20, Some((("noop", "noop"), alone / 2))).unwrap();
        assert_ne!(to_noop, to_self);
        assert_eq!(dd_time(&node, &hdd(), 64 << 20, 1 << 20, None).unwrap(), alone);
    }

    #[test]
    fn through_the_page_cache_a_write_returns_before_the_disk_and_a_reader_finds_it() {
        let through = NodeSpec::new("cfq", "cfq", 4);
        // A 64 MiB guest: writers wait above 40 % of it.
        let guest_64m = PageCacheConfig {
            memory: crate::size::Size(64 << 20),
            ..dd_page_cache()
        };
        let cached = through.clone().with_page_cache(guest_64m);
        let mib = 1 << 20;
        // 16 MiB per VM is under dirty_ratio: dd returns after copying
        // into the cache, the flusher writes it later.
        let t_through = dd_time(&through, &hdd(), 16 * mib, mib, None).unwrap();
        let t_cached = dd_time(&cached, &hdd(), 16 * mib, mib, None).unwrap();
        assert!(t_cached * 10 < t_through, "{t_cached} against {t_through} ns");
        // 64 MiB is over it: the writers wait for write-back.
        let t_big = dd_time(&cached, &hdd(), 64 * mib, mib, None).unwrap();
        assert!(t_big > t_through, "{t_big} ns");
        // Sort through the cache: the same job's bytes, another time, the
        // same again on a second run.
        let (spec, cluster) = small();
        let run = |node: &NodeSpec| simulate(&spec, &cluster, node, &hdd(), &[]).unwrap();
        let plain = run(&NodeSpec::new("cfq", "cfq", 2));
        let with_cache = run(&NodeSpec::new("cfq", "cfq", 2).with_page_cache(hadoop_page_cache()));
        assert_eq!(plain.stats, with_cache.stats);
        // The cache serves the merges' re-reads and hides the writes, and
        // the host merges blkfront's 44 KiB pieces back into large
        // requests: sort is faster through it. (Without the host's merge
        // every 44 KiB piece paid its own seek: 5 times slower.)
        assert!(
            with_cache.phases.job() < plain.phases.job(),
            "{} against {} ns",
            with_cache.phases.job(),
            plain.phases.job()
        );
        assert_eq!(
            run(&NodeSpec::new("cfq", "cfq", 2).with_page_cache(hadoop_page_cache())),
            with_cache
        );
    }

    #[test]
    fn a_file_deleted_before_write_back_never_reaches_the_disk_and_its_blocks_are_reused() {
        use super::super::cluster::NodeIo;
        use super::super::job::VmId;
        let mib = 1 << 20;
        let node = NodeSpec::new("cfq", "cfq", 1).with_page_cache(hadoop_page_cache());
        let write = |host: &mut HostNode, id: OpId, file: FileKey, now: Nanos| {
            host.submit(
                now,
                FileOp {
                    id,
                    vm: VmId { node: 0, vm: 0 },
                    file,
                    file_size: 16 * mib,
                    offset: 0,
                    len: 16 * mib,
                    write: true,
                    thread: 0,
                },
            )
            .unwrap();
        };
        let written_pages = |host: &HostNode| host.guests[0].cache.as_ref().unwrap().pages.stats.written_pages;
        let drain = |host: &mut HostNode| {
            while let Some(t) = host.next_event() {
                host.advance(t);
            }
        };
        let spill = FileKey::Spill { map: 0, n: 0 };
        // 16 MiB, under dirty_background_ratio of 224 MiB: it waits for the
        // flusher's 30 s expiry. Kept, it is written back.
        let mut kept = HostNode::new(
            &node,
            crate::testing::device_from_table(&hdd(), std::path::Path::new(".")).unwrap(),
        )
        .unwrap();
        write(&mut kept, 0, spill, 0);
        drain(&mut kept);
        assert_eq!(written_pages(&kept), 16 * mib / PAGE_BYTES);
        // Deleted a second later (merged): none of it is written.
        let mut deleted = HostNode::new(
            &node,
            crate::testing::device_from_table(&hdd(), std::path::Path::new(".")).unwrap(),
        )
        .unwrap();
        write(&mut deleted, 0, spill, 0);
        deleted.advance(1_000_000_000);
        deleted.delete(1_000_000_000, VmId { node: 0, vm: 0 }, spill);
        drain(&mut deleted);
        assert_eq!(written_pages(&deleted), 0);
        assert_eq!(
            deleted.guests[0].cache.as_ref().unwrap().pages.stats.discarded_dirty,
            16 * mib / PAGE_BYTES
        );
        // The next file takes the freed blocks.
        let next = FileKey::Spill { map: 0, n: 1 };
        write(&mut deleted, 1, next, 2_000_000_000);
        assert_eq!(deleted.guests[0].files[&next].0, 0);
        assert_eq!(deleted.guests[0].next_free, 16 * mib / SECTOR_BYTES);
    }

    #[test]
    fn freed_extents_are_reused_first_fit_and_merged_with_their_neighbours() {
        let node = NodeSpec::new("noop", "noop", 1);
        let mut host = HostNode::new(
            &node,
            crate::testing::device_from_table(&hdd(), std::path::Path::new(".")).unwrap(),
        )
        .unwrap();
        let g = &mut host.guests[0];
        let (a, b, c) = (g.allocate(8).unwrap(), g.allocate(16).unwrap(), g.allocate(8).unwrap());
        assert_eq!((a, b, c, g.next_free), (0, 8, 24, 32));
        g.release(b, 16);
        // A small file takes the front of the hole, a big one goes to the end.
        assert_eq!(g.allocate(4), Some(8));
        assert_eq!(g.allocate(40), Some(32));
        // Freed neighbours merge; the last extent goes back to the end.
        g.release(a, 8);
        g.release(8, 4);
        assert_eq!(g.free.iter().map(|(&s, &l)| (s, l)).collect::<Vec<_>>(), vec![(0, 24)]);
        g.release(32, 40);
        g.release(c, 8);
        assert!(g.free.is_empty());
        assert_eq!(g.next_free, 0);
        // A full image is an error, not a panic.
        assert_eq!(g.allocate(g.sectors + 1), None);
    }

    #[test]
    fn the_disk_trace_counts_each_phase_s_requests_and_busy_time() {
        let (spec, cluster) = small();
        let node = NodeSpec::new("cfq", "cfq", 2).with_page_cache(hadoop_page_cache());
        let (run, _, traces) = simulate_traced(&spec, &cluster, &node, &hdd(), &[]).unwrap();
        assert_eq!(traces.len(), run.boundaries.len() + 1, "one per phase");
        let edges: Vec<Nanos> = std::iter::once(0)
            .chain(run.boundaries.iter().map(|b| b.1))
            .chain([run.progress.end])
            .collect();
        for (t, span) in traces.iter().zip(edges.windows(2)) {
            // The two disks are busy at most the whole phase each.
            assert!(t.busy_ns <= 2 * (span[1] - span[0]), "{t:?}");
            assert!(t.merged <= t.guest_requests && t.seeks <= t.requests && t.reads <= t.requests);
        }
        // Every input block is read from the disks during the map phase
        // (nothing of it is cached at the start), and the disks are busy.
        let input = spec.input_per_vm * cluster.vms() as u64;
        assert!(traces[0].bytes >= input && traces[0].reads > 0 && traces[0].busy_ns > 0);
        // Through the guests' caches, counted as reads of the input.
        assert!(traces[0].cache_reads[0] >= input, "{:?}", traces[0].cache_reads);
        assert_eq!(
            traces.iter().map(|t| t.cache_reads[0]).sum::<u64>(),
            traces[0].cache_reads[0]
        );
        let all = traces.iter().fold(DiskTrace::default(), |a, t| a.plus(*t));
        assert_eq!(all.minus(traces[0]).minus(traces[1]), traces[2]);
    }

    #[test]
    fn bad_names_and_a_switch_during_a_switch_are_errors() {
        let (spec, cluster) = small();
        let err = simulate(&spec, &cluster, &NodeSpec::new("fifo", "cfq", 2), &hdd(), &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("host") && err.contains("fifo"), "{err}");
        let twice = |kind| PhaseSwitch {
            at: kind,
            host: Some("noop".into()),
            guest: None,
            policy: SwitchPolicy::Drain,
        };
        let err = simulate(
            &spec,
            &cluster,
            &NodeSpec::new("cfq", "cfq", 2),
            &hdd(),
            &[twice(PhaseKind::Shuffle), twice(PhaseKind::Shuffle)],
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("host") && err.contains("noop") && err.contains("in progress"),
            "{err}"
        );
    }
}
