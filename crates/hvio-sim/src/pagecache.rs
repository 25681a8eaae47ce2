//! A guest page cache: Linux's on-demand read-ahead and dirty-page write-back,
//! for jobs with `direct = false` (buffered I/O, sysbench fileio's default).
//!
//! The cache holds 4 KiB pages of the guest image, keyed by image page
//! number. Each page is up to date, being read, dirty, under write-back, or
//! a combination (a dirty page may be under write-back again).
//!
//! - **Reads** (`read`) look the pages up. A missing page starts a
//!   synchronous read-ahead; a page carrying the read-ahead marker starts
//!   the next, asynchronous window before the application needs it. The
//!   windows follow Linux's `ondemand_readahead` (mm/readahead.c, 2.6.23 and
//!   later): the first window is `get_init_ra_size` (the request rounded up to
//!   a power of two, ×4 or ×2 when small), each next one `get_next_ra_size`
//!   (×4 below 1/16 of the maximum, else ×2), capped at `read_ahead_kb`; a
//!   random miss reads just the requested pages.
//! - **Writes** (`write`) dirty pages and return. Dirty pages go to the disk
//!   through `writeback_*` (fsync of a file, the periodic flusher for pages
//!   older than `dirty_expire_centisecs`, background write-back above
//!   `dirty_background_ratio`); writers block above `dirty_ratio`.
//! - **Memory**: clean pages are evicted first in, first out when the cache
//!   holds more than `memory`; dirty pages and pages in flight stay.
//! - **Deletion** (`discard`, `unlink` of a file no one holds open, as
//!   `truncate_inode_pages` does): the file's dirty pages are dropped
//!   without being written back and its cached pages freed; a page whose
//!   read or write-back is already in flight is dropped when that ends.
//!
//! The cache only decides which pages move; the engine turns page runs into
//! requests of at most `max_sectors_kb` and tells the cache when they finish.
//! Waiters are engine thread indices.
//!
//! Every page keeps its own state (its flags and when it was dirtied), but
//! in chunks of 1024 consecutive pages with bitmaps of the dirty pages and
//! the pages under write-back: a sequential read or write touches a run of
//! pages a chunk at a time, and write-back finds dirty pages 64 at a time
//! walking only the chunks that hold some. This is what lets a MapReduce
//! node push gigabytes per VM through the cache (paper 002's sort moves
//! 512 MiB per VM three times over). A property test holds it to a
//! one-map-entry-per-page model of the same semantics.

use crate::error::{Result, SimError};
use crate::size::Size;
use hvio_core::Nanos;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, VecDeque};

/// The cache's maps are keyed by page numbers, dense integers the
/// simulation makes itself: rustc's Fx hash spreads them over the table at a
/// fraction of SipHash's cost (no map is iterated, so the hasher changes no
/// result).
type HashMap<K, V> = rustc_hash::FxHashMap<K, V>;

/// Sectors per page (4 KiB pages, 512-byte sectors).
pub const PAGE_SECTORS: u64 = 8;
/// Bytes per page.
pub const PAGE_BYTES: u64 = 4096;

/// `[vm] page_cache = { ... }`: the guest's memory and Linux's tunables
/// (defaults: the paper's 1 GB guests with CentOS 5 / 2.6.18's values).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PageCacheConfig {
    /// Guest memory the cache may fill.
    #[serde(default = "default_memory")]
    pub memory: Size,
    /// `/sys/block/*/queue/read_ahead_kb`: the largest read-ahead window.
    #[serde(default = "default_ra")]
    pub read_ahead_kb: u32,
    /// `/sys/block/*/queue/max_sectors_kb`: the largest request (Xen blkfront: 11 segments of 4 KiB).
    #[serde(default = "default_max_sectors")]
    pub max_sectors_kb: u32,
    /// `vm.dirty_ratio` (% of memory): writers block above it.
    #[serde(default = "default_dirty_ratio")]
    pub dirty_ratio: u32,
    /// `vm.dirty_background_ratio` (% of memory): background write-back starts above it.
    #[serde(default = "default_dirty_background_ratio")]
    pub dirty_background_ratio: u32,
    /// `vm.dirty_expire_centisecs`: dirty pages older than this are written by the flusher.
    #[serde(default = "default_expire")]
    pub dirty_expire_centisecs: u32,
    /// `vm.dirty_writeback_centisecs`: the flusher's period.
    #[serde(default = "default_writeback")]
    pub dirty_writeback_centisecs: u32,
    /// `/sys/block/*/queue/nr_requests`: write-back requests the flusher keeps queued.
    #[serde(default = "default_nr_requests")]
    pub nr_requests: u32,
    /// CPU time to copy one 4 KiB page between the cache and the application.
    #[serde(default = "default_copy_ns")]
    pub copy_ns_per_page: u64,
}

/// Bounds of the page cache's keys (see `crate::config::limits`): a
/// read-ahead window of at most 1 GiB, requests of at most 32 MiB (the
/// `[host.blktap] max_sectors_kb` bound), at most 65536 write-back
/// requests queued, and a page copy of at most a second.
const MAX_READ_AHEAD_KB: u32 = 1 << 20;
const MAX_SECTORS_KB: u32 = 32_768;
const MAX_NR_REQUESTS: u32 = 65_536;
const MAX_COPY_NS: u64 = 1_000_000_000;

fn default_memory() -> Size {
    Size(1 << 30)
}
fn default_ra() -> u32 {
    128
}
fn default_max_sectors() -> u32 {
    44
}
fn default_dirty_ratio() -> u32 {
    40
}
fn default_dirty_background_ratio() -> u32 {
    10
}
fn default_expire() -> u32 {
    3000
}
fn default_writeback() -> u32 {
    500
}
fn default_nr_requests() -> u32 {
    128
}
fn default_copy_ns() -> u64 {
    // About 2 GB/s of memcpy.
    2_000
}

impl Default for PageCacheConfig {
    fn default() -> Self {
        PageCacheConfig {
            memory: default_memory(),
            read_ahead_kb: default_ra(),
            max_sectors_kb: default_max_sectors(),
            dirty_ratio: default_dirty_ratio(),
            dirty_background_ratio: default_dirty_background_ratio(),
            dirty_expire_centisecs: default_expire(),
            dirty_writeback_centisecs: default_writeback(),
            nr_requests: default_nr_requests(),
            copy_ns_per_page: default_copy_ns(),
        }
    }
}

impl PageCacheConfig {
    /// Check the values; `context` names the VM for errors.
    pub fn check(&self, context: &str) -> Result<()> {
        let bad = |key: &str, v: u64, why: &str| Err(SimError::invalid(context, key, v, why));
        if self.memory.0 < 16 * PAGE_BYTES {
            return bad("page_cache.memory", self.memory.0, "must be at least 64 KiB");
        }
        if !self.read_ahead_kb.is_multiple_of(4) || self.read_ahead_kb > MAX_READ_AHEAD_KB {
            return bad(
                "page_cache.read_ahead_kb",
                self.read_ahead_kb.into(),
                "must be a multiple of 4 (whole pages), at most 1048576 (1 GiB)",
            );
        }
        if !(4..=MAX_SECTORS_KB).contains(&self.max_sectors_kb) || !self.max_sectors_kb.is_multiple_of(4) {
            return bad(
                "page_cache.max_sectors_kb",
                self.max_sectors_kb.into(),
                "must be a multiple of 4 (whole pages) from 4 to 32768",
            );
        }
        if self.copy_ns_per_page > MAX_COPY_NS {
            return bad(
                "page_cache.copy_ns_per_page",
                self.copy_ns_per_page,
                "must be at most 1000000000 (one second a page)",
            );
        }
        if self.dirty_ratio == 0 || self.dirty_ratio > 100 {
            return bad("page_cache.dirty_ratio", self.dirty_ratio.into(), "must be 1..=100");
        }
        if self.dirty_background_ratio >= self.dirty_ratio {
            return bad(
                "page_cache.dirty_background_ratio",
                self.dirty_background_ratio.into(),
                "must be below dirty_ratio",
            );
        }
        if self.dirty_writeback_centisecs == 0 {
            return bad("page_cache.dirty_writeback_centisecs", 0, "must be positive");
        }
        if !(1..=MAX_NR_REQUESTS).contains(&self.nr_requests) {
            return bad("page_cache.nr_requests", self.nr_requests.into(), "must be 1..=65536");
        }
        Ok(())
    }

    /// Pages in the largest request.
    pub fn max_request_pages(&self) -> u64 {
        self.max_sectors_kb as u64 / 4
    }

    /// The flusher's period (`dirty_writeback_centisecs`).
    pub fn writeback_period(&self) -> Nanos {
        centisecs(self.dirty_writeback_centisecs)
    }

    /// How long a page may stay dirty before the flusher writes it (`dirty_expire_centisecs`).
    pub fn dirty_expire(&self) -> Nanos {
        centisecs(self.dirty_expire_centisecs)
    }
}

fn centisecs(cs: u32) -> Nanos {
    cs as Nanos * 10_000_000
}

/// A file as the cache sees it: where it starts and how long it is, in
/// image pages, and a key for its read-ahead state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileSpan {
    /// Keys its read-ahead state.
    pub key: u64,
    /// Its first image page.
    pub first: u64,
    /// Its length in pages.
    pub pages: u64,
}

/// A run of contiguous image pages to read or write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    /// First image page.
    pub first: u64,
    /// Pages.
    pub pages: u64,
}

/// Linux's `struct file_ra_state`, in pages relative to the file start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RaState {
    /// First page of the current window.
    pub start: u64,
    /// Pages in the window.
    pub size: u64,
    /// Pages at its end whose reading starts the next window asynchronously.
    pub async_size: u64,
    /// The last page the application read.
    pub prev: Option<u64>,
}

/// What a read found: the runs to read from the disk and how many pages the
/// reader now waits for.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ReadOutcome {
    /// Runs to read from the disk.
    pub runs: Vec<Run>,
    /// Pages the reader waits for.
    pub wait: u32,
}

/// Read-ahead and write-back counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Pages read from the cache.
    pub hits: u64,
    /// Pages not in the cache.
    pub misses: u64,
    /// Pages read ahead.
    pub readahead_pages: u64,
    /// Asynchronous read-ahead windows started.
    pub async_windows: u64,
    /// Pages written back.
    pub written_pages: u64,
    /// Pages evicted.
    pub evicted: u64,
    /// Dirty pages dropped unwritten because their file was deleted.
    pub discarded_dirty: u64,
}

/// `get_init_ra_size`: the first window for a request of `req` pages.
pub fn init_ra_size(req: u64, max: u64) -> u64 {
    let size = req.max(1).next_power_of_two();
    let size = if size <= max / 32 {
        size * 4
    } else if size <= max / 4 {
        size * 2
    } else {
        max
    };
    size.min(max)
}

/// `get_next_ra_size`: the window after one of `cur` pages.
pub fn next_ra_size(cur: u64, max: u64) -> u64 {
    let next = if cur < max / 16 { 4 * cur } else { 2 * cur };
    next.min(max)
}

/// Page flags: the page is cached.
const PRESENT: u8 = 1;
/// Its data is valid.
const UPTODATE: u8 = 1 << 1;
/// A read of it is in flight.
const READING: u8 = 1 << 2;
/// `PG_readahead`: reading this page starts the next asynchronous window.
const MARKER: u8 = 1 << 3;
/// It holds data not yet on the disk.
const DIRTY: u8 = 1 << 4;
/// A write of it is in flight.
const WRITEBACK: u8 = 1 << 5;
/// Its file was deleted while a read or write-back of it was in flight:
/// not valid data, dropped when the last of them ends.
const GONE: u8 = 1 << 6;

/// A page the cache may drop: cached, valid, and neither moving nor dirty.
fn evictable(flags: u8) -> bool {
    flags & (PRESENT | UPTODATE | READING | DIRTY | WRITEBACK) == PRESENT | UPTODATE
}

/// Pages per `Chunk` (4 MiB of image), a power of two.
const CHUNK_SHIFT: u32 = 10;
const CHUNK_PAGES: usize = 1 << CHUNK_SHIFT;
const CHUNK_WORDS: usize = CHUNK_PAGES / 64;

/// The state of 1024 consecutive image pages: a flags byte and the time
/// it was dirtied for each, and bitmaps of the dirty pages and the pages
/// under write-back, so that write-back finds them in page order a word
/// (64 pages) at a time. A sequential reader or writer touches pages a
/// chunk at a time: one map look-up serves a run of pages.
struct Chunk {
    flags: [u8; CHUNK_PAGES],
    dirtied_at: [Nanos; CHUNK_PAGES],
    dirty: [u64; CHUNK_WORDS],
    writeback: [u64; CHUNK_WORDS],
    /// Pages cached, dirty and under write-back in the chunk.
    present: u32,
    nr_dirty: u32,
    nr_writeback: u32,
}

impl Chunk {
    fn new() -> Box<Chunk> {
        Box::new(Chunk {
            flags: [0; CHUNK_PAGES],
            dirtied_at: [0; CHUNK_PAGES],
            dirty: [0; CHUNK_WORDS],
            writeback: [0; CHUNK_WORDS],
            present: 0,
            nr_dirty: 0,
            nr_writeback: 0,
        })
    }
}

fn chunk_of(p: u64) -> u64 {
    p >> CHUNK_SHIFT
}

fn slot_of(p: u64) -> usize {
    (p & (CHUNK_PAGES as u64 - 1)) as usize
}

/// The part of `[first, end)` in chunk `c`: (its first page, slot range).
fn chunk_span(c: u64, first: u64, end: u64) -> (u64, std::ops::Range<usize>) {
    let base = c << CHUNK_SHIFT;
    let lo = first.max(base) - base;
    let hi = end.min(base + CHUNK_PAGES as u64) - base;
    (base, lo as usize..hi as usize)
}

/// Append page `p` to `runs`, extending the last run when `p` continues it.
fn push_page(runs: &mut Vec<Run>, p: u64) {
    match runs.last_mut() {
        Some(r) if r.first + r.pages == p => r.pages += 1,
        _ => runs.push(Run { first: p, pages: 1 }),
    }
}

/// Who waits for a page: most pages have one waiter, kept without a heap
/// allocation.
enum WaitList {
    One(u32),
    Many(Vec<u32>),
}

/// Waiters by page, woken in the order they came.
#[derive(Default)]
struct Waiters(HashMap<u64, WaitList>);

impl Waiters {
    fn push(&mut self, p: u64, waiter: u32) {
        use std::collections::hash_map::Entry;
        match self.0.entry(p) {
            Entry::Vacant(e) => {
                e.insert(WaitList::One(waiter));
            }
            Entry::Occupied(mut e) => match e.get_mut() {
                WaitList::Many(v) => v.push(waiter),
                WaitList::One(first) => {
                    let first = *first;
                    e.insert(WaitList::Many(vec![first, waiter]));
                }
            },
        }
    }

    /// Move the waiters of `[first, first + n)` to `woken`, page by page.
    fn wake(&mut self, first: u64, n: u64, woken: &mut Vec<u32>) {
        if self.0.is_empty() {
            return;
        }
        for p in first..first + n {
            match self.0.remove(&p) {
                Some(WaitList::One(w)) => woken.push(w),
                Some(WaitList::Many(v)) => woken.extend(v),
                None => {}
            }
        }
    }
}

/// One VM's page cache.
///
/// Pages live in chunks of 1024 (a chunk is dropped when its last page
/// is evicted); the chunks holding dirty pages and pages under write-back
/// are kept in page order, so write-back walks only those. Clean pages
/// wait for eviction as runs of pages in the order they became clean.
pub struct PageCache {
    cfg: PageCacheConfig,
    max_ra: u64,
    capacity: u64,
    chunks: HashMap<u64, Box<Chunk>>,
    /// Chunks holding dirty pages, and pages under write-back.
    dirty_chunks: BTreeSet<u64>,
    writeback_chunks: BTreeSet<u64>,
    cached: u64,
    nr_dirty: u64,
    nr_writeback: u64,
    /// Clean pages in the order they became clean, as runs (lazy: a page
    /// no longer evictable when its turn comes is skipped).
    fifo: VecDeque<Run>,
    ra: HashMap<u64, RaState>,
    read_waiters: Waiters,
    wb_waiters: Waiters,
    /// Where background write-back resumes (cyclic, like an inode's `writeback_index`).
    wb_cursor: u64,
    /// Its counters.
    pub stats: CacheStats,
}

impl PageCache {
    /// An empty cache of `cfg`'s size and ratios.
    pub fn new(cfg: &PageCacheConfig) -> PageCache {
        PageCache {
            max_ra: cfg.read_ahead_kb as u64 / 4,
            capacity: cfg.memory.0 / PAGE_BYTES,
            cfg: cfg.clone(),
            chunks: HashMap::default(),
            dirty_chunks: BTreeSet::new(),
            writeback_chunks: BTreeSet::new(),
            cached: 0,
            nr_dirty: 0,
            nr_writeback: 0,
            fifo: VecDeque::new(),
            ra: HashMap::default(),
            read_waiters: Waiters::default(),
            wb_waiters: Waiters::default(),
            wb_cursor: 0,
            stats: CacheStats::default(),
        }
    }

    /// Its configuration.
    pub fn config(&self) -> &PageCacheConfig {
        &self.cfg
    }

    /// Pages held.
    pub fn cached(&self) -> u64 {
        self.cached
    }
    /// Dirty pages.
    pub fn nr_dirty(&self) -> u64 {
        self.nr_dirty
    }
    /// Pages under write-back.
    pub fn nr_writeback(&self) -> u64 {
        self.nr_writeback
    }
    /// The read-ahead state of file `key`.
    pub fn ra_state(&self, key: u64) -> Option<RaState> {
        self.ra.get(&key).copied()
    }

    /// Dirty and write-back pages are above `dirty_ratio`: writers must wait.
    pub fn over_dirty_limit(&self) -> bool {
        (self.nr_dirty() + self.nr_writeback()) * 100 > self.capacity * self.cfg.dirty_ratio as u64
    }
    /// Dirty pages are above `dirty_background_ratio`: background write-back runs.
    pub fn over_background(&self) -> bool {
        self.nr_dirty() * 100 > self.capacity * self.cfg.dirty_background_ratio as u64
    }
    /// Whether page `p` is cached and up to date.
    pub fn page_uptodate(&self, p: u64) -> bool {
        self.flags(p) & UPTODATE != 0
    }
    /// Whether page `p` is dirty.
    pub fn page_dirty(&self, p: u64) -> bool {
        self.flags(p) & DIRTY != 0
    }
    /// Whether page `p` carries the read-ahead marker (`PG_readahead`).
    pub fn page_marker(&self, p: u64) -> bool {
        self.flags(p) & MARKER != 0
    }

    /// Page `p`'s flags (0: not cached).
    fn flags(&self, p: u64) -> u8 {
        self.chunks.get(&chunk_of(p)).map_or(0, |c| c.flags[slot_of(p)])
    }

    /// The chunk of page `p`, made if missing.
    fn chunk_mut(chunks: &mut HashMap<u64, Box<Chunk>>, c: u64) -> &mut Chunk {
        chunks.entry(c).or_insert_with(Chunk::new)
    }

    /// The application reads pages `[first, first + n)` of `file` (absolute
    /// image pages); `waiter` is told through `read_done` when they arrive.
    pub fn read(&mut self, file: FileSpan, first: u64, n: u64, waiter: u32) -> ReadOutcome {
        let mut out = ReadOutcome::default();
        let end = first + n;
        let mut p = first;
        while p < end {
            let flags = self.flags(p);
            if flags & (UPTODATE | READING) != 0 {
                if flags & MARKER != 0 {
                    let chunk = self.chunks.get_mut(&chunk_of(p)).expect("a cached page has its chunk");
                    chunk.flags[slot_of(p)] &= !MARKER;
                    self.readahead(file, p, end - p, true, &mut out.runs);
                }
                if flags & READING != 0 && flags & UPTODATE == 0 {
                    self.read_waiters.push(p, waiter);
                    out.wait += 1;
                } else {
                    self.stats.hits += 1;
                }
                p += 1;
            } else {
                // A miss: synchronous read-ahead from here, then wait for it.
                self.stats.misses += 1;
                self.readahead(file, p, end - p, false, &mut out.runs);
                // The window covers at least the rest of the request.
                if self.flags(p) & (READING | UPTODATE) == 0 {
                    // Past the file end or a zero window: read the page alone.
                    self.start_read(p, 1, None, &mut out.runs);
                }
            }
        }
        if let Some(ra) = self.ra.get_mut(&file.key) {
            ra.prev = Some(end - 1 - file.first);
        } else {
            self.ra.insert(
                file.key,
                RaState {
                    prev: Some(end - 1 - file.first),
                    ..Default::default()
                },
            );
        }
        self.evict();
        out
    }

    /// `ondemand_readahead` at file page `abs` (absolute) for `req` pages.
    fn readahead(&mut self, file: FileSpan, abs: u64, req: u64, hit_marker: bool, runs: &mut Vec<Run>) {
        let offset = abs - file.first;
        let mut ra = self.ra.get(&file.key).copied().unwrap_or_default();
        let window = ra_window(&ra, offset, req, hit_marker, self.max_ra, |start| {
            self.flags(file.first + start) & PRESENT != 0
        });
        let Some((start, size, async_size)) = window else {
            // A random read: just the requested pages.
            if !hit_marker {
                let n = req.min(file.pages - offset);
                self.start_read(abs, n, None, runs);
            }
            return;
        };
        ra.start = start;
        ra.size = size;
        ra.async_size = async_size;
        self.ra.insert(file.key, ra);
        if hit_marker {
            self.stats.async_windows += 1;
        }
        let first = file.first + start;
        let n = size.min(file.pages.saturating_sub(start));
        let marker =
            (async_size > 0 && start + size - async_size < file.pages).then(|| file.first + start + size - async_size);
        self.start_read(first, n, marker, runs);
    }

    /// Start reading the missing pages of `[first, first + n)` as runs;
    /// `marker` gets `PG_readahead` if it is read here.
    fn start_read(&mut self, first: u64, n: u64, marker: Option<u64>, runs: &mut Vec<Run>) {
        if n == 0 {
            return;
        }
        let end = first + n;
        let mut run: Option<Run> = None;
        let mut added = 0;
        for c in chunk_of(first)..=chunk_of(end - 1) {
            let (base, slots) = chunk_span(c, first, end);
            let chunk = Self::chunk_mut(&mut self.chunks, c);
            for s in slots {
                let p = base + s as u64;
                let f = chunk.flags[s];
                let marker_bit = if marker == Some(p) { MARKER } else { 0 };
                if f & PRESENT != 0 && f & (GONE | READING) == GONE {
                    // A deleted file's page still under write-back, its
                    // block now another file's: read it again.
                    chunk.flags[s] = (f & !GONE) | READING | marker_bit;
                    self.stats.readahead_pages += 1;
                } else if f & PRESENT != 0 {
                    if let Some(r) = run.take() {
                        runs.push(r);
                    }
                    continue;
                } else {
                    chunk.flags[s] = PRESENT | READING | marker_bit;
                    chunk.present += 1;
                    added += 1;
                }
                match &mut run {
                    Some(r) => r.pages += 1,
                    None => run = Some(Run { first: p, pages: 1 }),
                }
            }
        }
        self.cached += added;
        self.stats.readahead_pages += added;
        if let Some(r) = run {
            runs.push(r);
        }
    }

    /// Queue page `p` for eviction (it just became clean).
    fn push_clean(fifo: &mut VecDeque<Run>, p: u64) {
        match fifo.back_mut() {
            Some(r) if r.first + r.pages == p => r.pages += 1,
            _ => fifo.push_back(Run { first: p, pages: 1 }),
        }
    }

    /// A read of `run` finished: the pages are up to date. Returns the
    /// waiters, once per page they waited for.
    pub fn read_done(&mut self, run: Run) -> Vec<u32> {
        let mut woken = Vec::new();
        let end = run.first + run.pages;
        let mut c = chunk_of(run.first);
        while run.pages > 0 && c <= chunk_of(end - 1) {
            let (base, slots) = chunk_span(c, run.first, end);
            let first = base + slots.start as u64;
            let n = slots.len() as u64;
            if let Some(chunk) = self.chunks.get_mut(&c) {
                for s in slots {
                    let f = &mut chunk.flags[s];
                    if *f & GONE != 0 {
                        *f &= !READING;
                        if *f & WRITEBACK == 0 {
                            *f = 0;
                            chunk.present -= 1;
                            self.cached -= 1;
                        }
                    } else if *f & PRESENT != 0 {
                        *f = (*f & !READING) | UPTODATE;
                        if evictable(*f) {
                            Self::push_clean(&mut self.fifo, base + s as u64);
                        }
                    }
                }
                if chunk.present == 0 {
                    self.chunks.remove(&c);
                }
            }
            self.read_waiters.wake(first, n, &mut woken);
            c += 1;
        }
        self.evict();
        woken
    }

    /// The application writes pages `[first, first + n)` at `now` (whole
    /// pages: no read first).
    pub fn write(&mut self, first: u64, n: u64, now: Nanos) {
        let end = first + n;
        let mut c = chunk_of(first);
        while n > 0 && c <= chunk_of(end - 1) {
            let (_, slots) = chunk_span(c, first, end);
            let chunk = Self::chunk_mut(&mut self.chunks, c);
            let was_dirty = chunk.nr_dirty;
            for s in slots {
                let f = &mut chunk.flags[s];
                if *f & PRESENT == 0 {
                    *f = PRESENT;
                    chunk.present += 1;
                    self.cached += 1;
                }
                *f = (*f & !GONE) | UPTODATE;
                if *f & DIRTY == 0 {
                    *f |= DIRTY;
                    chunk.dirtied_at[s] = now;
                    chunk.dirty[s / 64] |= 1 << (s % 64);
                    chunk.nr_dirty += 1;
                }
            }
            self.nr_dirty += (chunk.nr_dirty - was_dirty) as u64;
            if was_dirty == 0 && chunk.nr_dirty > 0 {
                self.dirty_chunks.insert(c);
            }
            c += 1;
        }
        self.evict();
    }

    /// Take the dirty pages of `[first, first + n)` for write-back (fsync):
    /// they are now under write-back, as runs.
    pub fn writeback_range(&mut self, first: u64, n: u64) -> Vec<Run> {
        let mut runs = Vec::new();
        self.take_dirty(first, first.saturating_add(n), u64::MAX, None, &mut runs);
        runs
    }

    /// Take up to `max` dirty pages for background write-back, in page order
    /// from where the last pass stopped (wrapping around once).
    pub fn writeback_background(&mut self, max: u64) -> Vec<Run> {
        let mut runs = Vec::new();
        let (taken, mut last) = self.take_dirty(self.wb_cursor, u64::MAX, max, None, &mut runs);
        if taken < max {
            let (_, wrapped) = self.take_dirty(0, self.wb_cursor, max - taken, None, &mut runs);
            last = wrapped.or(last);
        }
        if let Some(last) = last {
            self.wb_cursor = last + 1;
        }
        runs
    }

    /// Take the dirty pages dirtied at or before `cutoff` (the flusher's
    /// `dirty_expire_centisecs` pass), in page order.
    pub fn writeback_expired(&mut self, cutoff: Nanos) -> Vec<Run> {
        let mut runs = Vec::new();
        self.take_dirty(0, u64::MAX, u64::MAX, Some(cutoff), &mut runs);
        runs
    }

    /// Put up to `max` dirty pages of `[lo, hi)` under write-back, in page
    /// order (only those dirtied at or before `cutoff`, if given), appending
    /// them to `runs` (contiguous pages form one run). Returns how many it
    /// took and the last.
    fn take_dirty(
        &mut self,
        lo: u64,
        hi: u64,
        max: u64,
        cutoff: Option<Nanos>,
        runs: &mut Vec<Run>,
    ) -> (u64, Option<u64>) {
        let mut taken = 0;
        let mut last = None;
        if lo >= hi {
            return (0, None);
        }
        let (first_chunk, last_chunk) = (chunk_of(lo), chunk_of(hi - 1));
        let mut next = first_chunk;
        while taken < max && next <= last_chunk {
            let Some(&c) = self.dirty_chunks.range(next..=last_chunk).next() else {
                break;
            };
            next = c + 1;
            let chunk = self.chunks.get_mut(&c).expect("a chunk with dirty pages is cached");
            let (base, slots) = chunk_span(c, lo, hi);
            let was_writeback = chunk.nr_writeback;
            let mut w = slots.start / 64;
            while w * 64 < slots.end && taken < max {
                let mut bits = chunk.dirty[w];
                // Keep the slots of [slots.start, slots.end) in this word.
                if w * 64 < slots.start {
                    bits &= !0u64 << (slots.start - w * 64);
                }
                if slots.end < (w + 1) * 64 {
                    bits &= (1u64 << (slots.end - w * 64)) - 1;
                }
                while bits != 0 && taken < max {
                    let bit = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    let s = w * 64 + bit;
                    if cutoff.is_some_and(|cut| chunk.dirtied_at[s] > cut) {
                        continue;
                    }
                    chunk.dirty[w] &= !(1 << bit);
                    chunk.nr_dirty -= 1;
                    // A page written again while under write-back is
                    // already counted there.
                    if chunk.writeback[w] & (1 << bit) == 0 {
                        chunk.writeback[w] |= 1 << bit;
                        chunk.nr_writeback += 1;
                        self.nr_writeback += 1;
                    }
                    chunk.flags[s] = (chunk.flags[s] & !DIRTY) | WRITEBACK;
                    let p = base + s as u64;
                    push_page(runs, p);
                    last = Some(p);
                    taken += 1;
                }
                w += 1;
            }
            if chunk.nr_dirty == 0 {
                self.dirty_chunks.remove(&c);
            }
            if was_writeback == 0 && chunk.nr_writeback > 0 {
                self.writeback_chunks.insert(c);
            }
        }
        self.nr_dirty -= taken;
        self.stats.written_pages += taken;
        (taken, last)
    }

    /// `waiter` waits for every page of `[first, first + n)` under
    /// write-back (fsync's `filemap_fdatawait`); returns how many.
    pub fn wait_writeback(&mut self, first: u64, n: u64, waiter: u32) -> u32 {
        let end = first.saturating_add(n);
        if first >= end {
            return 0;
        }
        let mut count = 0;
        let (mut next, last_chunk) = (chunk_of(first), chunk_of(end - 1));
        while next <= last_chunk {
            let Some(&c) = self.writeback_chunks.range(next..=last_chunk).next() else {
                break;
            };
            next = c + 1;
            let chunk = &self.chunks[&c];
            let (base, slots) = chunk_span(c, first, end);
            for s in slots {
                if chunk.writeback[s / 64] & (1 << (s % 64)) != 0 {
                    self.wb_waiters.push(base + s as u64, waiter);
                    count += 1;
                }
            }
        }
        count
    }

    /// A write of `run` finished. Returns the fsync waiters, once per page.
    pub fn write_done(&mut self, run: Run) -> Vec<u32> {
        let mut woken = Vec::new();
        let end = run.first + run.pages;
        let mut c = chunk_of(run.first);
        while run.pages > 0 && c <= chunk_of(end - 1) {
            let (base, slots) = chunk_span(c, run.first, end);
            let first = base + slots.start as u64;
            let n = slots.len() as u64;
            if let Some(chunk) = self.chunks.get_mut(&c) {
                let was_writeback = chunk.nr_writeback;
                for s in slots {
                    let bit = 1 << (s % 64);
                    if chunk.writeback[s / 64] & bit != 0 {
                        chunk.writeback[s / 64] &= !bit;
                        chunk.nr_writeback -= 1;
                    }
                    let f = &mut chunk.flags[s];
                    if *f & PRESENT != 0 {
                        *f &= !WRITEBACK;
                        if *f & (GONE | READING) == GONE {
                            *f = 0;
                            chunk.present -= 1;
                            self.cached -= 1;
                        } else if evictable(*f) {
                            Self::push_clean(&mut self.fifo, base + s as u64);
                        }
                    }
                }
                self.nr_writeback -= (was_writeback - chunk.nr_writeback) as u64;
                if was_writeback > 0 && chunk.nr_writeback == 0 {
                    self.writeback_chunks.remove(&c);
                }
                if chunk.present == 0 {
                    self.chunks.remove(&c);
                }
            }
            self.wb_waiters.wake(first, n, &mut woken);
            c += 1;
        }
        self.evict();
        woken
    }

    /// `file` was deleted: its dirty pages are dropped unwritten, its
    /// cached pages freed and its read-ahead state forgotten; a page whose
    /// read or write-back is in flight is no longer valid and is dropped
    /// when that ends. Returns the dirty pages dropped.
    pub fn discard(&mut self, file: FileSpan) -> u64 {
        self.ra.remove(&file.key);
        let (first, end) = (file.first, file.first + file.pages);
        let mut dropped_dirty = 0;
        if first >= end {
            return 0;
        }
        for c in chunk_of(first)..=chunk_of(end - 1) {
            let Some(chunk) = self.chunks.get_mut(&c) else { continue };
            let (_, slots) = chunk_span(c, first, end);
            let was_dirty = chunk.nr_dirty;
            for s in slots {
                let f = chunk.flags[s];
                if f & PRESENT == 0 {
                    continue;
                }
                if f & DIRTY != 0 {
                    chunk.dirty[s / 64] &= !(1 << (s % 64));
                    chunk.nr_dirty -= 1;
                }
                if f & (READING | WRITEBACK) != 0 {
                    chunk.flags[s] = (f & (PRESENT | READING | WRITEBACK)) | GONE;
                } else {
                    chunk.flags[s] = 0;
                    chunk.present -= 1;
                    self.cached -= 1;
                }
            }
            let dropped = (was_dirty - chunk.nr_dirty) as u64;
            dropped_dirty += dropped;
            if was_dirty > 0 && chunk.nr_dirty == 0 {
                self.dirty_chunks.remove(&c);
            }
            if chunk.present == 0 {
                self.chunks.remove(&c);
            }
        }
        self.nr_dirty -= dropped_dirty;
        self.stats.discarded_dirty += dropped_dirty;
        dropped_dirty
    }

    /// Drop clean pages, oldest first, while over `memory`.
    fn evict(&mut self) {
        while self.cached > self.capacity {
            let Some(front) = self.fifo.front_mut() else { return };
            let p = front.first;
            front.first += 1;
            front.pages -= 1;
            if front.pages == 0 {
                self.fifo.pop_front();
            }
            let c = chunk_of(p);
            let Some(chunk) = self.chunks.get_mut(&c) else { continue };
            let s = slot_of(p);
            if evictable(chunk.flags[s]) {
                chunk.flags[s] = 0;
                chunk.present -= 1;
                self.cached -= 1;
                self.stats.evicted += 1;
                if chunk.present == 0 {
                    self.chunks.remove(&c);
                }
            }
        }
    }
}

/// `ondemand_readahead`'s choice at file page `offset` for `req` pages,
/// given the file's read-ahead state and whether file page `p` is cached
/// (`cached(p)`): the window to read (start, size, async size), or none (a
/// random read).
fn ra_window(
    ra: &RaState,
    offset: u64,
    req: u64,
    hit_marker: bool,
    max: u64,
    cached: impl Fn(u64) -> bool,
) -> Option<(u64, u64, u64)> {
    if max == 0 {
        None
    } else if offset == 0 {
        Some(initial(offset, req, max))
    } else if ra.size > 0 && (offset == ra.start + ra.size - ra.async_size || offset == ra.start + ra.size) {
        // The expected continuation: the next window, all of it asynchronous.
        let size = next_ra_size(ra.size, max);
        Some((ra.start + ra.size, size, size))
    } else if hit_marker {
        // A marker of an older or interleaved window: start after the
        // pages already cached, as `ondemand_readahead` does.
        let mut start = offset + 1;
        while start < offset + max && cached(start) {
            start += 1;
        }
        if start >= offset + max {
            None
        } else {
            let size = next_ra_size(start - offset + req, max);
            Some((start, size, size))
        }
    } else if req > max || ra.prev.is_some_and(|p| offset == p || offset == p + 1) {
        Some(initial(offset, req, max))
    } else {
        None
    }
}

/// The first window at file page `offset` for `req` pages: (start, size, async size).
fn initial(offset: u64, req: u64, max: u64) -> (u64, u64, u64) {
    let size = init_ra_size(req, max);
    let async_size = if size > req { size - req } else { size };
    (offset, size, async_size)
}

/// Split `run` into requests of at most `max` pages: (first page, pages).
pub fn split(run: Run, max: u64) -> impl Iterator<Item = Run> {
    let max = max.max(1);
    (0..run.pages.div_ceil(max)).map(move |i| Run {
        first: run.first + i * max,
        pages: max.min(run.pages - i * max),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache() -> PageCache {
        PageCache::new(&PageCacheConfig::default())
    }
    const FILE: FileSpan = FileSpan {
        key: 7,
        first: 1000,
        pages: 2048,
    };

    #[test]
    fn window_sizes_follow_linux() {
        // max = 32 pages (128 KiB).
        assert_eq!(init_ra_size(1, 32), 4); // 1 ≤ 32/32 → ×4
        assert_eq!(init_ra_size(4, 32), 8); // 4 ≤ 32/4 → ×2
        assert_eq!(init_ra_size(3, 32), 8); // rounded up to 4, then ×2
        assert_eq!(init_ra_size(16, 32), 32); // > 32/4 → max
        assert_eq!(next_ra_size(8, 32), 16); // 8 ≥ 32/16 → ×2
        assert_eq!(next_ra_size(1, 32), 4); // 1 < 2 → ×4
        assert_eq!(next_ra_size(32, 32), 32);
    }

    #[test]
    fn sequential_reads_ramp_the_window_and_run_ahead() {
        let mut c = cache();
        // 16 KiB (4 pages) at the file start: initial window 8 pages, async 4,
        // marker on file page 4.
        let r = c.read(FILE, 1000, 4, 1);
        assert_eq!(r.runs, vec![Run { first: 1000, pages: 8 }]);
        assert_eq!(r.wait, 4);
        assert!(c.page_marker(1004));
        assert_eq!(
            c.ra_state(7),
            Some(RaState {
                start: 0,
                size: 8,
                async_size: 4,
                prev: Some(3)
            })
        );
        // The next 4 pages are in flight and carry the marker: the next
        // window (16 pages from page 8, all async) starts at once.
        let r = c.read(FILE, 1004, 4, 2);
        assert_eq!(r.runs, vec![Run { first: 1008, pages: 16 }]);
        assert_eq!(r.wait, 4);
        assert!(c.page_marker(1008));
        assert_eq!(c.stats.async_windows, 1);
        // The first window arrives: thread 1 once per page, thread 2 too.
        let w = c.read_done(Run { first: 1000, pages: 8 });
        assert_eq!(w.iter().filter(|&&t| t == 1).count(), 4);
        assert_eq!(w.iter().filter(|&&t| t == 2).count(), 4);
        // Reading page 8 (marker) before it arrived: window 3 is 32 pages at 24.
        let r = c.read(FILE, 1008, 4, 3);
        assert_eq!(r.runs, vec![Run { first: 1024, pages: 32 }]);
        assert!(c.page_marker(1024));
        assert_eq!(c.ra_state(7).unwrap().size, 32);
        c.read_done(Run { first: 1008, pages: 16 });
        // Cached pages are hits: no wait, no I/O.
        let r = c.read(FILE, 1012, 4, 4);
        assert_eq!(r, ReadOutcome::default());
        assert_eq!(c.stats.hits, 4);
    }

    #[test]
    fn random_reads_read_only_what_is_asked() {
        let mut c = cache();
        let r = c.read(FILE, 1400, 4, 1);
        assert_eq!(r.runs, vec![Run { first: 1400, pages: 4 }]);
        let r = c.read(FILE, 1100, 4, 1);
        assert_eq!(r.runs, vec![Run { first: 1100, pages: 4 }]);
        // A read right after the previous one is sequential: initial window.
        let r = c.read(FILE, 1104, 4, 1);
        assert_eq!(r.runs, vec![Run { first: 1104, pages: 8 }]);
    }

    #[test]
    fn windows_stop_at_the_file_end() {
        let mut c = cache();
        let f = FileSpan {
            key: 1,
            first: 0,
            pages: 6,
        };
        let r = c.read(f, 0, 4, 1);
        assert_eq!(r.runs, vec![Run { first: 0, pages: 6 }]);
    }

    #[test]
    fn requests_are_split_at_max_sectors() {
        let v: Vec<Run> = split(Run { first: 10, pages: 32 }, 11).collect();
        assert_eq!(
            v,
            vec![
                Run { first: 10, pages: 11 },
                Run { first: 21, pages: 11 },
                Run { first: 32, pages: 10 }
            ]
        );
    }

    #[test]
    fn writes_dirty_pages_and_fsync_writes_them_back_sorted() {
        let mut c = cache();
        c.write(120, 4, 5);
        c.write(100, 4, 6);
        c.write(104, 4, 7);
        c.write(500, 4, 8);
        assert_eq!(c.nr_dirty(), 16);
        // fsync of pages 0..200: two runs, in page order; 500.. stays dirty.
        let runs = c.writeback_range(0, 200);
        assert_eq!(runs, vec![Run { first: 100, pages: 8 }, Run { first: 120, pages: 4 }]);
        assert_eq!((c.nr_dirty(), c.nr_writeback()), (4, 12));
        assert_eq!(c.wait_writeback(0, 200, 9), 12);
        assert_eq!(c.write_done(runs[0]).len(), 8);
        assert_eq!(c.write_done(runs[1]), vec![9; 4]);
        assert_eq!(c.nr_writeback(), 0);
        // Written pages are clean and stay cached.
        assert!(c.page_uptodate(100) && !c.page_dirty(100));
    }

    #[test]
    fn expiry_and_background_writeback() {
        let mut c = cache();
        c.write(10, 2, 1_000);
        c.write(20, 2, 5_000);
        assert_eq!(c.writeback_expired(2_000), vec![Run { first: 10, pages: 2 }]);
        c.write(30, 2, 6_000);
        // Background: from the cursor (after page 11), wrapping.
        assert_eq!(
            c.writeback_background(3),
            vec![Run { first: 20, pages: 2 }, Run { first: 30, pages: 1 }]
        );
        assert_eq!(c.writeback_background(3), vec![Run { first: 31, pages: 1 }]);
    }

    #[test]
    fn thresholds_and_eviction() {
        let cfg = PageCacheConfig {
            memory: Size(100 * PAGE_BYTES),
            ..Default::default()
        };
        let mut c = PageCache::new(&cfg);
        c.write(0, 10, 0);
        assert!(!c.over_background()); // 10 % of 100 pages: not above
        c.write(10, 1, 0);
        assert!(c.over_background());
        assert!(!c.over_dirty_limit());
        c.write(11, 30, 0);
        assert!(c.over_dirty_limit()); // 41 > 40
                                       // Fill with clean pages past the memory: the oldest clean go first,
                                       // dirty ones stay.
        let f = FileSpan {
            key: 2,
            first: 1000,
            pages: 1000,
        };
        for i in 0..100 {
            let r = c.read(f, 1000 + i * 5, 1, 1);
            for run in r.runs {
                c.read_done(run);
            }
        }
        assert!(c.cached() <= 100);
        assert_eq!(c.nr_dirty(), 41);
        assert!(c.stats.evicted > 0);
        assert!(!c.page_uptodate(1000));
    }

    #[test]
    fn a_deleted_files_dirty_pages_are_dropped_unwritten() {
        let mut c = cache();
        let spill = FileSpan {
            key: 7,
            first: 0,
            pages: 100,
        };
        let other = FileSpan {
            key: 8,
            first: 100,
            pages: 50,
        };
        c.write(0, 100, 0);
        c.write(100, 50, 0);
        // 30 of the spill's pages are already under write-back.
        let inflight = c.writeback_range(0, 30);
        assert_eq!(inflight, vec![Run { first: 0, pages: 30 }]);
        assert_eq!((c.nr_dirty(), c.nr_writeback()), (120, 30));
        // Deleting it drops its 70 dirty pages: nothing of them is written.
        assert_eq!(c.discard(spill), 70);
        assert_eq!((c.nr_dirty(), c.nr_writeback()), (50, 30));
        assert_eq!(c.stats.discarded_dirty, 70);
        assert_eq!(c.cached(), 30 + 50);
        assert!(!c.page_uptodate(50) && !c.page_dirty(50));
        assert!((other.first..other.first + other.pages).all(|p| c.page_dirty(p)));
        // Write-back takes only the other file's pages.
        assert_eq!(c.writeback_background(1000), vec![Run { first: 100, pages: 50 }]);
        // The write-back in flight ends: those pages are dropped, not cached.
        c.write_done(inflight[0]);
        assert_eq!((c.cached(), c.nr_writeback()), (50, 50));
        assert!(!c.page_uptodate(10));
        // Its blocks taken by a new file while a page is still in flight:
        // the new file's write makes it that file's page.
        c.write(200, 10, 1);
        c.writeback_range(200, 10);
        c.discard(FileSpan {
            key: 9,
            first: 200,
            pages: 10,
        });
        c.write(200, 5, 2);
        assert!(c.page_dirty(200) && c.page_uptodate(200));
        c.write_done(Run { first: 200, pages: 10 });
        assert!(c.page_dirty(204) && !c.page_uptodate(205));
        // A read of the deleted file's page still under write-back reads it anew.
        c.write(300, 4, 3);
        c.writeback_range(300, 4);
        let f = FileSpan {
            key: 10,
            first: 300,
            pages: 4,
        };
        c.discard(f);
        let r = c.read(f, 300, 1, 1);
        assert_eq!(r.wait, 1);
        assert!(r.runs.iter().any(|run| run.first == 300), "{:?}", r.runs);
        for run in r.runs {
            assert_eq!(c.read_done(run), vec![1]);
        }
        assert!(c.page_uptodate(300));
    }

    #[test]
    fn config_checks_name_the_key() {
        let bad = PageCacheConfig {
            dirty_background_ratio: 50,
            ..Default::default()
        };
        let e = bad.check("vm \"a\"").unwrap_err().to_string();
        assert!(e.contains("dirty_background_ratio"), "{e}");
        let bad = PageCacheConfig {
            max_sectors_kb: 6,
            ..Default::default()
        };
        assert!(bad.check("x").unwrap_err().to_string().contains("max_sectors_kb"));
        PageCacheConfig::default().check("x").unwrap();
    }
}

/// The cache's semantics one page at a time, the plainest way: a map entry
/// per page, ordered sets of the dirty pages and the pages under
/// write-back, a queue of pages in the order they became clean. The
/// property test below holds [`PageCache`] to it.
#[cfg(test)]
mod reference {
    use super::*;
    use std::collections::BTreeMap;

    #[derive(Clone, Copy, Default)]
    struct Page {
        uptodate: bool,
        reading: bool,
        dirty: bool,
        writeback: bool,
        marker: bool,
        gone: bool,
        dirtied_at: Nanos,
    }

    impl Page {
        fn evictable(&self) -> bool {
            self.uptodate && !self.reading && !self.dirty && !self.writeback
        }
    }

    pub struct Model {
        max_ra: u64,
        capacity: u64,
        pages: BTreeMap<u64, Page>,
        dirty: BTreeSet<u64>,
        writeback: BTreeSet<u64>,
        fifo: VecDeque<u64>,
        ra: BTreeMap<u64, RaState>,
        read_waiters: BTreeMap<u64, Vec<u32>>,
        wb_waiters: BTreeMap<u64, Vec<u32>>,
        wb_cursor: u64,
        pub stats: CacheStats,
    }

    fn runs_of(pages: &[u64]) -> Vec<Run> {
        let mut runs = Vec::new();
        for &p in pages {
            push_page(&mut runs, p);
        }
        runs
    }

    impl Model {
        pub fn new(cfg: &PageCacheConfig) -> Model {
            Model {
                max_ra: cfg.read_ahead_kb as u64 / 4,
                capacity: cfg.memory.0 / PAGE_BYTES,
                pages: BTreeMap::new(),
                dirty: BTreeSet::new(),
                writeback: BTreeSet::new(),
                fifo: VecDeque::new(),
                ra: BTreeMap::new(),
                read_waiters: BTreeMap::new(),
                wb_waiters: BTreeMap::new(),
                wb_cursor: 0,
                stats: CacheStats::default(),
            }
        }

        /// (cached, dirty, under write-back) counts.
        pub fn counts(&self) -> (u64, u64, u64) {
            (
                self.pages.len() as u64,
                self.dirty.len() as u64,
                self.writeback.len() as u64,
            )
        }

        /// Page `p`: (up to date, dirty, marker).
        pub fn page(&self, p: u64) -> (bool, bool, bool) {
            self.pages
                .get(&p)
                .map_or((false, false, false), |pg| (pg.uptodate, pg.dirty, pg.marker))
        }

        pub fn ra_state(&self, key: u64) -> Option<RaState> {
            self.ra.get(&key).copied()
        }

        pub fn read(&mut self, file: FileSpan, first: u64, n: u64, waiter: u32) -> ReadOutcome {
            let mut out = ReadOutcome::default();
            let end = first + n;
            let mut p = first;
            while p < end {
                match self.pages.get_mut(&p) {
                    Some(pg) if pg.uptodate || pg.reading => {
                        let marker = std::mem::take(&mut pg.marker);
                        let reading = pg.reading && !pg.uptodate;
                        if marker {
                            self.readahead(file, p, end - p, true, &mut out.runs);
                        }
                        if reading {
                            self.read_waiters.entry(p).or_default().push(waiter);
                            out.wait += 1;
                        } else {
                            self.stats.hits += 1;
                        }
                        p += 1;
                    }
                    _ => {
                        self.stats.misses += 1;
                        self.readahead(file, p, end - p, false, &mut out.runs);
                        if !self.pages.get(&p).is_some_and(|pg| pg.reading || pg.uptodate) {
                            self.start_read(p, 1, None, &mut out.runs);
                        }
                    }
                }
            }
            self.ra.entry(file.key).or_default().prev = Some(end - 1 - file.first);
            self.evict();
            out
        }

        fn readahead(&mut self, file: FileSpan, abs: u64, req: u64, hit_marker: bool, runs: &mut Vec<Run>) {
            let offset = abs - file.first;
            let mut ra = self.ra.get(&file.key).copied().unwrap_or_default();
            let window = ra_window(&ra, offset, req, hit_marker, self.max_ra, |s| {
                self.pages.contains_key(&(file.first + s))
            });
            let Some((start, size, async_size)) = window else {
                if !hit_marker {
                    self.start_read(abs, req.min(file.pages - offset), None, runs);
                }
                return;
            };
            (ra.start, ra.size, ra.async_size) = (start, size, async_size);
            self.ra.insert(file.key, ra);
            self.stats.async_windows += hit_marker as u64;
            let marker = (async_size > 0 && start + size - async_size < file.pages)
                .then(|| file.first + start + size - async_size);
            let n = size.min(file.pages.saturating_sub(start));
            self.start_read(file.first + start, n, marker, runs);
        }

        fn start_read(&mut self, first: u64, n: u64, marker: Option<u64>, runs: &mut Vec<Run>) {
            let mut missing = Vec::new();
            for p in first..first + n {
                if let Some(pg) = self.pages.get_mut(&p).filter(|pg| pg.gone && !pg.reading) {
                    pg.gone = false;
                    pg.reading = true;
                    pg.marker = marker == Some(p);
                    self.stats.readahead_pages += 1;
                    missing.push(p);
                    continue;
                }
                if self.pages.contains_key(&p) {
                    runs.extend(runs_of(&std::mem::take(&mut missing)));
                    continue;
                }
                let pg = Page {
                    reading: true,
                    marker: marker == Some(p),
                    ..Default::default()
                };
                self.pages.insert(p, pg);
                self.stats.readahead_pages += 1;
                missing.push(p);
            }
            runs.extend(runs_of(&missing));
        }

        pub fn read_done(&mut self, run: Run) -> Vec<u32> {
            let mut woken = Vec::new();
            for p in run.first..run.first + run.pages {
                if let Some(pg) = self.pages.get_mut(&p) {
                    pg.reading = false;
                    if pg.gone {
                        if !pg.writeback {
                            self.pages.remove(&p);
                        }
                    } else {
                        pg.uptodate = true;
                        if pg.evictable() {
                            self.fifo.push_back(p);
                        }
                    }
                }
                woken.extend(self.read_waiters.remove(&p).unwrap_or_default());
            }
            self.evict();
            woken
        }

        pub fn write(&mut self, first: u64, n: u64, now: Nanos) {
            for p in first..first + n {
                let pg = self.pages.entry(p).or_default();
                pg.uptodate = true;
                pg.gone = false;
                if !pg.dirty {
                    pg.dirty = true;
                    pg.dirtied_at = now;
                    self.dirty.insert(p);
                }
            }
            self.evict();
        }

        pub fn writeback_range(&mut self, first: u64, n: u64) -> Vec<Run> {
            let pages: Vec<u64> = self.dirty.range(first..first + n).copied().collect();
            self.start_writeback(&pages)
        }

        pub fn writeback_background(&mut self, max: u64) -> Vec<Run> {
            let mut pages: Vec<u64> = self.dirty.range(self.wb_cursor..).take(max as usize).copied().collect();
            let more = max as usize - pages.len();
            pages.extend(
                self.dirty
                    .range(..self.wb_cursor)
                    .take(more)
                    .copied()
                    .collect::<Vec<_>>(),
            );
            if let Some(&last) = pages.last() {
                self.wb_cursor = last + 1;
            }
            self.start_writeback(&pages)
        }

        pub fn writeback_expired(&mut self, cutoff: Nanos) -> Vec<Run> {
            let pages: Vec<u64> = (self.dirty.iter().copied())
                .filter(|p| self.pages[p].dirtied_at <= cutoff)
                .collect();
            self.start_writeback(&pages)
        }

        fn start_writeback(&mut self, pages: &[u64]) -> Vec<Run> {
            for &p in pages {
                self.dirty.remove(&p);
                self.writeback.insert(p);
                let pg = self.pages.get_mut(&p).expect("dirty pages are cached");
                pg.dirty = false;
                pg.writeback = true;
            }
            self.stats.written_pages += pages.len() as u64;
            runs_of(pages)
        }

        pub fn wait_writeback(&mut self, first: u64, n: u64, waiter: u32) -> u32 {
            let pages: Vec<u64> = self.writeback.range(first..first + n).copied().collect();
            for &p in &pages {
                self.wb_waiters.entry(p).or_default().push(waiter);
            }
            pages.len() as u32
        }

        pub fn write_done(&mut self, run: Run) -> Vec<u32> {
            let mut woken = Vec::new();
            for p in run.first..run.first + run.pages {
                self.writeback.remove(&p);
                if let Some(pg) = self.pages.get_mut(&p) {
                    pg.writeback = false;
                    if pg.gone && !pg.reading {
                        self.pages.remove(&p);
                    } else if pg.evictable() {
                        self.fifo.push_back(p);
                    }
                }
                woken.extend(self.wb_waiters.remove(&p).unwrap_or_default());
            }
            self.evict();
            woken
        }

        pub fn discard(&mut self, file: FileSpan) -> u64 {
            self.ra.remove(&file.key);
            let mut dropped = 0;
            for p in file.first..file.first + file.pages {
                let Some(pg) = self.pages.get_mut(&p) else { continue };
                if pg.dirty {
                    pg.dirty = false;
                    self.dirty.remove(&p);
                    dropped += 1;
                }
                if pg.reading || pg.writeback {
                    pg.gone = true;
                    pg.uptodate = false;
                    pg.marker = false;
                } else {
                    self.pages.remove(&p);
                }
            }
            self.stats.discarded_dirty += dropped;
            dropped
        }

        fn evict(&mut self) {
            while self.pages.len() as u64 > self.capacity {
                let Some(p) = self.fifo.pop_front() else { return };
                if self.pages.get(&p).is_some_and(Page::evictable) {
                    self.pages.remove(&p);
                    self.stats.evicted += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod against_reference {
    use super::reference::Model;
    use super::*;
    use proptest::prelude::*;

    /// Files that cross the cache's chunk boundaries (every 1024 pages).
    const FILES: [FileSpan; 3] = [
        FileSpan {
            key: 1,
            first: 1000,
            pages: 100,
        },
        FileSpan {
            key: 2,
            first: 2040,
            pages: 2100,
        },
        FileSpan {
            key: 3,
            first: 4200,
            pages: 40,
        },
    ];

    #[derive(Clone, Debug)]
    enum Step {
        Read { file: usize, at: u64, n: u64 },
        ReadDone(usize),
        Write { first: u64, n: u64 },
        WritebackRange { first: u64, n: u64 },
        Background(u64),
        Expired(Nanos),
        Wait { first: u64, n: u64 },
        WriteDone(usize),
        Discard(usize),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            3 => (0..3usize, 0..2200u64, 1..48u64).prop_map(|(file, at, n)| Step::Read { file, at, n }),
            3 => any::<usize>().prop_map(Step::ReadDone),
            3 => (900..4300u64, 1..300u64).prop_map(|(first, n)| Step::Write { first, n }),
            1 => (900..4300u64, 1..600u64).prop_map(|(first, n)| Step::WritebackRange { first, n }),
            2 => (0..200u64).prop_map(Step::Background),
            1 => (0..60u64).prop_map(Step::Expired),
            1 => (900..4300u64, 1..600u64).prop_map(|(first, n)| Step::Wait { first, n }),
            3 => any::<usize>().prop_map(Step::WriteDone),
            1 => (0..3usize).prop_map(Step::Discard),
        ]
    }

    /// Finish the first piece (at most 11 pages, a blkfront request) of
    /// the `pick`-th run in flight.
    fn piece(inflight: &mut Vec<Run>, pick: usize) -> Option<Run> {
        if inflight.is_empty() {
            return None;
        }
        let i = pick % inflight.len();
        let run = inflight[i];
        let done = split(run, 11).next().expect("a run has pages");
        if done.pages == run.pages {
            inflight.remove(i);
        } else {
            inflight[i] = Run {
                first: run.first + done.pages,
                pages: run.pages - done.pages,
            };
        }
        Some(done)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(100))]
        #[test]
        fn the_cache_moves_the_pages_the_per_page_model_moves(steps in prop::collection::vec(step(), 1..250)) {
            let cfg = PageCacheConfig {
                memory: Size(300 * PAGE_BYTES),
                ..Default::default()
            };
            let (mut cache, mut model) = (PageCache::new(&cfg), Model::new(&cfg));
            let (mut reads, mut writes) = (Vec::new(), Vec::new());
            for (i, s) in steps.iter().enumerate() {
                let now = i as Nanos;
                let waiter = i as u32;
                match *s {
                    Step::Read { file, at, n } => {
                        let f = FILES[file];
                        let at = at % f.pages;
                        let n = n.min(f.pages - at);
                        let got = cache.read(f, f.first + at, n, waiter);
                        prop_assert_eq!(&got, &model.read(f, f.first + at, n, waiter));
                        reads.extend(got.runs);
                    }
                    Step::ReadDone(pick) => {
                        if let Some(run) = piece(&mut reads, pick) {
                            prop_assert_eq!(cache.read_done(run), model.read_done(run));
                        }
                    }
                    Step::Write { first, n } => {
                        cache.write(first, n, now);
                        model.write(first, n, now);
                    }
                    Step::WritebackRange { first, n } => {
                        let got = cache.writeback_range(first, n);
                        prop_assert_eq!(&got, &model.writeback_range(first, n));
                        writes.extend(got);
                    }
                    Step::Background(max) => {
                        let got = cache.writeback_background(max);
                        prop_assert_eq!(&got, &model.writeback_background(max));
                        writes.extend(got);
                    }
                    Step::Expired(age) => {
                        let cutoff = now.saturating_sub(age);
                        let got = cache.writeback_expired(cutoff);
                        prop_assert_eq!(&got, &model.writeback_expired(cutoff));
                        writes.extend(got);
                    }
                    Step::Wait { first, n } => {
                        prop_assert_eq!(cache.wait_writeback(first, n, waiter), model.wait_writeback(first, n, waiter));
                    }
                    Step::WriteDone(pick) => {
                        if let Some(run) = piece(&mut writes, pick) {
                            prop_assert_eq!(cache.write_done(run), model.write_done(run));
                        }
                    }
                    Step::Discard(file) => {
                        prop_assert_eq!(cache.discard(FILES[file]), model.discard(FILES[file]));
                    }
                }
                prop_assert_eq!((cache.cached(), cache.nr_dirty(), cache.nr_writeback()), model.counts());
                prop_assert_eq!(cache.stats, model.stats);
            }
            for p in 900..4300 {
                let got = (cache.page_uptodate(p), cache.page_dirty(p), cache.page_marker(p));
                prop_assert_eq!(got, model.page(p), "page {}", p);
            }
            for f in FILES {
                prop_assert_eq!(cache.ra_state(f.key), model.ra_state(f.key));
            }
        }
    }
}
