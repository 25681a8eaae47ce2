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
//!
//! The cache only decides which pages move; the engine turns page runs into
//! requests of at most `max_sectors_kb` and tells the cache when they finish.
//! Waiters are engine thread indices.

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

#[derive(Clone, Copy, Debug, Default)]
struct Page {
    uptodate: bool,
    reading: bool,
    dirty: bool,
    writeback: bool,
    /// `PG_readahead`: reading this page starts the next asynchronous window.
    marker: bool,
    dirtied_at: Nanos,
}

impl Page {
    fn evictable(&self) -> bool {
        self.uptodate && !self.reading && !self.dirty && !self.writeback
    }
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

/// One VM's page cache.
pub struct PageCache {
    cfg: PageCacheConfig,
    max_ra: u64,
    capacity: u64,
    pages: HashMap<u64, Page>,
    dirty: BTreeSet<u64>,
    writeback: BTreeSet<u64>,
    /// Clean pages in the order they became clean (lazy: stale entries are skipped).
    fifo: VecDeque<u64>,
    ra: HashMap<u64, RaState>,
    read_waiters: HashMap<u64, Vec<u32>>,
    wb_waiters: HashMap<u64, Vec<u32>>,
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
            pages: HashMap::default(),
            dirty: BTreeSet::new(),
            writeback: BTreeSet::new(),
            fifo: VecDeque::new(),
            ra: HashMap::default(),
            read_waiters: HashMap::default(),
            wb_waiters: HashMap::default(),
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
        self.pages.len() as u64
    }
    /// Dirty pages.
    pub fn nr_dirty(&self) -> u64 {
        self.dirty.len() as u64
    }
    /// Pages under write-back.
    pub fn nr_writeback(&self) -> u64 {
        self.writeback.len() as u64
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
        self.pages.get(&p).is_some_and(|pg| pg.uptodate)
    }
    /// Whether page `p` is dirty.
    pub fn page_dirty(&self, p: u64) -> bool {
        self.dirty.contains(&p)
    }
    /// Whether page `p` carries the read-ahead marker (`PG_readahead`).
    pub fn page_marker(&self, p: u64) -> bool {
        self.pages.get(&p).is_some_and(|pg| pg.marker)
    }

    /// The application reads pages `[first, first + n)` of `file` (absolute
    /// image pages); `waiter` is told through `read_done` when they arrive.
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
                    // A miss: synchronous read-ahead from here, then wait for it.
                    self.stats.misses += 1;
                    self.readahead(file, p, end - p, false, &mut out.runs);
                    // The window covers at least the rest of the request.
                    if !self.pages.get(&p).is_some_and(|pg| pg.reading || pg.uptodate) {
                        // Past the file end or a zero window: read the page alone.
                        self.start_read(p, 1, None, &mut out.runs);
                    }
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
        let max = self.max_ra;
        let offset = abs - file.first;
        let mut ra = self.ra.get(&file.key).copied().unwrap_or_default();
        let window = if max == 0 {
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
            while start < offset + max && self.pages.contains_key(&(file.first + start)) {
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
        };
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
        let mut run: Option<Run> = None;
        for p in first..first + n {
            if self.pages.contains_key(&p) {
                if let Some(r) = run.take() {
                    runs.push(r);
                }
                continue;
            }
            self.pages.insert(
                p,
                Page {
                    reading: true,
                    marker: marker == Some(p),
                    ..Default::default()
                },
            );
            self.stats.readahead_pages += 1;
            match &mut run {
                Some(r) => r.pages += 1,
                None => run = Some(Run { first: p, pages: 1 }),
            }
        }
        if let Some(r) = run {
            runs.push(r);
        }
    }

    /// A read of `run` finished: the pages are up to date. Returns the
    /// waiters, once per page they waited for.
    pub fn read_done(&mut self, run: Run) -> Vec<u32> {
        let mut woken = Vec::new();
        for p in run.first..run.first + run.pages {
            if let Some(pg) = self.pages.get_mut(&p) {
                pg.reading = false;
                pg.uptodate = true;
                if pg.evictable() {
                    self.fifo.push_back(p);
                }
            }
            if let Some(w) = self.read_waiters.remove(&p) {
                woken.extend(w);
            }
        }
        self.evict();
        woken
    }

    /// The application writes pages `[first, first + n)` at `now` (whole
    /// pages: no read first).
    pub fn write(&mut self, first: u64, n: u64, now: Nanos) {
        for p in first..first + n {
            let pg = self.pages.entry(p).or_default();
            pg.uptodate = true;
            if !pg.dirty {
                pg.dirty = true;
                pg.dirtied_at = now;
                self.dirty.insert(p);
            }
        }
        self.evict();
    }

    /// Take the dirty pages of `[first, first + n)` for write-back (fsync):
    /// they are now under write-back, as runs.
    pub fn writeback_range(&mut self, first: u64, n: u64) -> Vec<Run> {
        let pages: Vec<u64> = self.dirty.range(first..first + n).copied().collect();
        self.start_writeback(&pages)
    }

    /// Take up to `max` dirty pages for background write-back, in page order
    /// from where the last pass stopped (wrapping around once).
    pub fn writeback_background(&mut self, max: u64) -> Vec<Run> {
        let mut pages: Vec<u64> = self.dirty.range(self.wb_cursor..).take(max as usize).copied().collect();
        if (pages.len() as u64) < max {
            let more = max - pages.len() as u64;
            let wrap: Vec<u64> = self
                .dirty
                .range(..self.wb_cursor)
                .take(more as usize)
                .copied()
                .collect();
            pages.extend(wrap);
        }
        if let Some(&last) = pages.last() {
            self.wb_cursor = last + 1;
        }
        self.start_writeback(&pages)
    }

    /// Take the dirty pages dirtied at or before `cutoff` (the flusher's
    /// `dirty_expire_centisecs` pass), in page order.
    pub fn writeback_expired(&mut self, cutoff: Nanos) -> Vec<Run> {
        let pages: Vec<u64> = self
            .dirty
            .iter()
            .copied()
            .filter(|p| self.pages.get(p).is_some_and(|pg| pg.dirtied_at <= cutoff))
            .collect();
        self.start_writeback(&pages)
    }

    /// `pages` (sorted, dirty) go under write-back; contiguous ones form runs.
    fn start_writeback(&mut self, pages: &[u64]) -> Vec<Run> {
        let mut runs: Vec<Run> = Vec::new();
        for &p in pages {
            self.dirty.remove(&p);
            self.writeback.insert(p);
            if let Some(pg) = self.pages.get_mut(&p) {
                pg.dirty = false;
                pg.writeback = true;
            }
            match runs.last_mut() {
                Some(r) if r.first + r.pages == p => r.pages += 1,
                _ => runs.push(Run { first: p, pages: 1 }),
            }
        }
        self.stats.written_pages += pages.len() as u64;
        runs
    }

    /// `waiter` waits for every page of `[first, first + n)` under
    /// write-back (fsync's `filemap_fdatawait`); returns how many.
    pub fn wait_writeback(&mut self, first: u64, n: u64, waiter: u32) -> u32 {
        let pages: Vec<u64> = self.writeback.range(first..first + n).copied().collect();
        for &p in &pages {
            self.wb_waiters.entry(p).or_default().push(waiter);
        }
        pages.len() as u32
    }

    /// A write of `run` finished. Returns the fsync waiters, once per page.
    pub fn write_done(&mut self, run: Run) -> Vec<u32> {
        let mut woken = Vec::new();
        for p in run.first..run.first + run.pages {
            self.writeback.remove(&p);
            if let Some(pg) = self.pages.get_mut(&p) {
                pg.writeback = false;
                if pg.evictable() {
                    self.fifo.push_back(p);
                }
            }
            if let Some(w) = self.wb_waiters.remove(&p) {
                woken.extend(w);
            }
        }
        self.evict();
        woken
    }

    /// Drop clean pages, oldest first, while over `memory`.
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
