//! A reshaped image in service: the host-path stage between a VM's export
//! and the host scheduler (paper 001 §III: the sequentializer in front of
//! the image, its cleaner, write-ahead log and recovery).
//!
//! Guest requests of a VM whose layout is `reshaped` go to its
//! [`ReshapedDisk`] instead of the scheduler. The disk hands them to its
//! [`Reshaper`] (the sans-I/O state machine of `hvio-reshape`) and turns every
//! I/O the reshaper asks for into a job on the image file, which goes through
//! the host scheduler like any request of that VM: guest data writes
//! asynchronous, reads, log and checkpoint writes and cache flushes
//! synchronous, cleaning in the idle class. A completed job goes back to the
//! reshaper; the guest's request is answered when the reshaper says it is
//! done. A cache flush is one `fdatasync` of the image file; a log or
//! checkpoint write is a FUA write (`RWF_DSYNC`). A request that is not
//! whole sectors is served in whole-sector parts (its partial edge sectors
//! read, merged and written in one request); a guest FLUSH never waits
//! behind writes held for the cleaner. `docs/reshaped-image.md` has the
//! durability contract this keeps.

use crate::buf::AlignedBuf;
use crate::engine::EngineHandle;
use crate::ext4meta::{Ext4Classifier, HEAD_BYTES};
use crate::image::{self, ImageError, Superblock};
use crate::io::{IoJob, IoKind, IoResult};
use crate::stats::{ImageFileStatus, VmStats};
use crate::store::Store;
use crate::volatile::{CrashPoint, ImageFault};
use hvio_core::{IoClass, Op, Request, RequestId, SECTOR_BYTES};
use hvio_reshape::reshaper::{Event, Io, IoKind as RIoKind, Payload};
use hvio_reshape::{Region, Reshaper};
use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How a job of the image file is presented to the host scheduler.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// The I/O class.
    pub class: IoClass,
    /// Somebody waits for it.
    pub sync: bool,
    /// It carries file-system metadata.
    pub meta: bool,
}

/// What recovery found when the disk was opened.
#[derive(Clone, Debug)]
pub struct Recovered {
    /// The image was stopped in order.
    pub clean: bool,
    /// Committed transactions replayed.
    pub transactions: u64,
    /// Remap entries they held.
    pub entries: u64,
    /// The checkpoint used, if any.
    pub checkpoint_seq: Option<u64>,
    /// Why the log scan stopped, if not at its end.
    pub discarded: Option<String>,
    /// How long recovery took.
    pub took: Duration,
    /// Bytes it read.
    pub bytes_read: u64,
}

/// Counters shown in `/metrics`.
#[derive(Default)]
struct Counters {
    guest_flushes: AtomicU64,
    fdatasyncs: AtomicU64,
    fua_writes: AtomicU64,
    image_ios: AtomicU64,
    image_errors: AtomicU64,
}

/// A guest request the reshaper is serving (in one or two parts).
struct Guest {
    /// `None` for the disk's own flush at shutdown.
    job: Option<IoJob>,
    parts: u32,
    result: IoResult,
    arrival: Instant,
    /// A FLUSH that arrived while the cleaner was copying: the copies in
    /// progress, by number, and the time commits had spent behind cleaning
    /// until then ([`CleanTiming::behind_until`]).
    during_cleaning: Option<(Vec<u64>, Duration)>,
}

/// How long the cleaner's segment copies take and how long the commits of
/// FLUSHes that arrive during one wait behind cleaning I/O (`/metrics`; the
/// durability section of `docs/reshaped-image.md`).
#[derive(Default)]
struct CleanTiming {
    /// Per region: the segment copy in progress, as (the reshaper's number
    /// of it, when its first read was issued).
    copy: [Option<(u64, Instant)>; 2],
    /// How long the latest copies took, by number.
    recent: VecDeque<(u64, Duration)>,
    copies: u64,
    copy_sum: Duration,
    copy_max: Duration,
    /// Cleaning I/O at the scheduler (issued to it, not complete).
    at_scheduler: HashSet<u64>,
    /// Of those, the ones that were there when the commit in progress
    /// began: it may be served after them.
    ahead_of_commit: HashSet<u64>,
    /// Since when the commit in progress has cleaning I/O ahead of it.
    behind_since: Option<Instant>,
    /// Time commits spent with cleaning I/O ahead of them, intervals closed.
    behind_closed: Duration,
    /// FLUSHes that arrived during a copy, answered.
    flushes: u64,
    behind_sum: Duration,
    behind_max: Duration,
    /// FLUSHes whose commits were behind cleaning for longer than the copy
    /// (the longest, when both regions copied) in progress at their arrival.
    over: u64,
    latency_max: Duration,
}

impl CleanTiming {
    /// Region `i`'s copy in progress ended at `now`.
    fn copy_ended(&mut self, i: usize, now: Instant) {
        let Some((n, start)) = self.copy[i].take() else { return };
        let took = now.saturating_duration_since(start);
        self.copies += 1;
        self.copy_sum += took;
        self.copy_max = self.copy_max.max(took);
        self.recent.push_back((n, took));
        if self.recent.len() > RECENT_COPIES {
            self.recent.pop_front();
        }
    }

    /// Time commits spent behind cleaning I/O, from the start until `now`.
    fn behind_until(&self, now: Instant) -> Duration {
        self.behind_closed
            + self
                .behind_since
                .map_or(Duration::ZERO, |t| now.saturating_duration_since(t))
    }

    /// A commit begins: whatever cleaning I/O is at the scheduler may be
    /// served before it.
    fn commit_began(&mut self, now: Instant) {
        self.commit_over(now);
        self.ahead_of_commit = self.at_scheduler.clone();
        if !self.ahead_of_commit.is_empty() {
            self.behind_since = Some(now);
        }
    }

    /// The commit in progress ended, or nothing is ahead of it any more.
    fn commit_over(&mut self, now: Instant) {
        self.ahead_of_commit.clear();
        if let Some(t) = self.behind_since.take() {
            self.behind_closed += now.saturating_duration_since(t);
        }
    }

    /// Cleaning I/O `id` completed.
    fn clean_io_done(&mut self, id: u64, now: Instant) {
        self.at_scheduler.remove(&id);
        if self.ahead_of_commit.remove(&id) && self.ahead_of_commit.is_empty() {
            self.commit_over(now);
        }
    }

    /// A FLUSH that arrived during `copies` with `behind_at_arrival`
    /// ([`behind_until`](Self::behind_until) then) is answered at `now`.
    fn flush_answered(&mut self, copies: &[u64], behind_at_arrival: Duration, latency: Duration, now: Instant) {
        let behind = self.behind_until(now).saturating_sub(behind_at_arrival);
        self.flushes += 1;
        self.behind_sum += behind;
        self.behind_max = self.behind_max.max(behind);
        self.latency_max = self.latency_max.max(latency);
        // A copy still in progress began before the FLUSH arrived: it has
        // taken longer than the FLUSH.
        let running = copies.iter().any(|n| self.copy.iter().flatten().any(|c| c.0 == *n));
        let longest = self
            .recent
            .iter()
            .filter(|(n, _)| copies.contains(n))
            .map(|&(_, d)| d)
            .max();
        if !running && longest.is_some_and(|d| behind > d) {
            self.over += 1;
        }
    }
}

/// Copies remembered after they end, for FLUSHes not yet answered (one
/// copy per region runs at a time and a FLUSH takes a few commits at most,
/// so a few dozen are plenty).
const RECENT_COPIES: usize = 64;

struct State {
    reshaper: Reshaper,
    next_key: u64,
    guests: HashMap<u64, Guest>,
    /// I/O in flight, kept for its payload.
    ios: HashMap<u64, Io>,
    /// Data of cleaning reads, per region, until the cleaning writes naming
    /// them are issued (each region's cleaner runs on its own).
    clean_data: [HashMap<u64, AlignedBuf>; 2],
    /// Per region: whether the cleaner's last I/O was a write (a read after
    /// one starts a new victim, so older read data is no longer named).
    clean_writing: [bool; 2],
    /// An image I/O failed: every request fails from now on (the table
    /// might name data that never reached the file).
    failed: Option<i32>,
    checkpoints_issued: u64,
    clean_writes_issued: u64,
    /// I/O a test fault completes without doing it.
    skipped: Vec<u64>,
    /// Metadata or data, from the guest's ext4 layout.
    classifier: Ext4Classifier,
    /// Where the classifier's journal inode was last read from.
    journal_read: Option<(u64, usize)>,
    meta_writes: u64,
    data_writes: u64,
    timing: CleanTiming,
    /// Guest requests that are not whole sectors, served in whole-sector
    /// parts, by number.
    unaligned: HashMap<u64, Unaligned>,
    next_unaligned: u64,
    /// Guest writes and trims waiting for a read-modify-write of a sector
    /// they touch (or, for one, of a write in flight to its edge sectors)
    /// to finish, in arrival order.
    parked: VecDeque<IoJob>,
    /// A write finished while requests are parked: take them again.
    unpark_wanted: bool,
    /// Image writes held while a commit is in progress (see
    /// [`ReshapedDisk::holds`]), in order.
    held: VecDeque<(IoJob, Shape, RIoKind, u64)>,
}

/// A guest request that is not whole sectors. A read reads the sectors it
/// touches and copies its bytes out. A write or write-zeroes first reads
/// the partial sectors at its edges (no other write to them runs
/// meanwhile), merges, and writes whole sectors: a write as one request, so
/// one remap entry in one transaction covers all of it and a crash leaves
/// each sector old or new, never torn.
struct Unaligned {
    job: IoJob,
    /// The partial sectors at its edges (writes only), locked until done.
    edges: Vec<u64>,
    /// What the edge sectors held.
    old: HashMap<u64, AlignedBuf>,
    /// Parts in flight.
    left: u32,
    result: IoResult,
}

/// One VM's reshaped image, served.
pub struct ReshapedDisk {
    /// The VM (index in the configuration).
    pub vm: usize,
    /// The VM's name.
    pub name: String,
    path: std::path::PathBuf,
    file: usize,
    header: u64,
    superblock: Mutex<Superblock>,
    /// What recovery found at start.
    pub recovered: Recovered,
    state: Mutex<State>,
    engine: OnceLock<EngineHandle>,
    fault: Option<ImageFault>,
    crash: Option<(CrashPoint, u64)>,
    store: Arc<Store>,
    counters: Counters,
    /// The guest's own requests, as its exports sent them.
    guest_stats: Mutex<VmStats>,
    /// Time zero of `guest_stats`.
    started: Instant,
}

type Finished = Vec<(IoJob, IoResult)>;

fn finish(done: Finished) {
    for (job, r) in done {
        job.finish(r);
    }
}

impl ReshapedDisk {
    /// Open VM `vm`'s image in `store`: read and check the superblock,
    /// recover the table from the checkpoints and the log (refusing damage
    /// recovery would have to guess about), then mark the image in use (the
    /// clean flag cleared, durably) before any write.
    pub fn open(store: Arc<Store>, vm: usize) -> Result<ReshapedDisk, ImageError> {
        let disk = &store.disks[vm];
        let bf = &store.files[disk.file];
        let path = bf.path.clone();
        let opened = image::recover(&path, &bf.buffered)?;
        if let Some(d) = &opened.damage {
            return Err(ImageError::Repairable {
                path: path.clone(),
                problem: d.clone(),
            });
        }
        let mut sb = opened.superblock.clone();
        if sb.disk_bytes != disk.size {
            return Err(ImageError::Bad {
                path,
                problem: format!(
                    "holds a disk of {} bytes; VM `{}` is configured with size {}",
                    sb.disk_bytes, disk.name, disk.size
                ),
            });
        }
        let recovered = Recovered {
            clean: sb.clean,
            transactions: opened.report.transactions_replayed,
            entries: opened.report.entries_replayed,
            checkpoint_seq: opened.report.checkpoint_seq,
            discarded: opened.report.log_end.as_ref().map(|e| e.to_string()),
            took: opened.took,
            bytes_read: opened.bytes_read,
        };
        if sb.clean {
            tracing::info!(
                vm = %disk.name,
                image = %path.display(),
                transactions = recovered.transactions,
                took_ms = %format!("{:.1}", recovered.took.as_secs_f64() * 1e3),
                "reshaped image opened (stopped cleanly)"
            );
        } else {
            tracing::warn!(
                vm = %disk.name,
                image = %path.display(),
                checkpoint = ?recovered.checkpoint_seq,
                transactions_replayed = recovered.transactions,
                entries_replayed = recovered.entries,
                log_end = recovered.discarded.as_deref().unwrap_or("end of log"),
                table_extents = opened.report.table_extents,
                took_ms = %format!("{:.1}", recovered.took.as_secs_f64() * 1e3),
                "reshaped image recovered after an unclean stop: committed transactions replayed, the uncommitted one discarded, free space rebuilt"
            );
        }
        if !disk.read_only {
            sb.clean = false;
            sb.generation += 1;
            image::write_superblock(&path, &bf.buffered, &sb)?;
        }
        let (fault, crash) = match &store.volatile {
            Some(v) => (
                v.config().image_fault,
                v.config().crash_in.map(|c| (c, v.config().crash_after)),
            ),
            None => (None, None),
        };
        Ok(ReshapedDisk {
            vm,
            name: disk.name.clone(),
            file: disk.file,
            header: sb.header_bytes,
            superblock: Mutex::new(sb),
            recovered,
            state: Mutex::new(State {
                reshaper: opened.reshaper,
                next_key: 1,
                guests: HashMap::new(),
                ios: HashMap::new(),
                clean_data: Default::default(),
                clean_writing: [false; 2],
                failed: None,
                checkpoints_issued: 0,
                clean_writes_issued: 0,
                skipped: Vec::new(),
                classifier: Ext4Classifier::new(),
                journal_read: None,
                meta_writes: 0,
                data_writes: 0,
                timing: CleanTiming::default(),
                unaligned: HashMap::new(),
                next_unaligned: 1,
                parked: VecDeque::new(),
                unpark_wanted: false,
                held: VecDeque::new(),
            }),
            engine: OnceLock::new(),
            fault,
            crash,
            path,
            store,
            counters: Counters::default(),
            guest_stats: Mutex::new(VmStats::new()),
            started: Instant::now(),
        })
    }

    /// The engine the image's I/O goes to (set once it runs).
    pub fn attach(&self, engine: EngineHandle) {
        let _ = self.engine.set(engine);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Serve a guest request.
    pub fn submit(self: &Arc<Self>, mut job: IoJob) {
        // Counted in the guest's statistics when it is answered, whatever
        // parts it was served in.
        let (kind, len, arrival) = (job.kind, job.len, Instant::now());
        let answer = std::mem::replace(&mut job.done, Box::new(|_, _| {}));
        let me = self.clone();
        job.done = Box::new(move |r, buf| {
            let now = Instant::now();
            let latency = now.saturating_duration_since(arrival).as_nanos() as u64;
            let at = now.saturating_duration_since(me.started).as_nanos() as u64;
            me.guest_stats
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .complete(kind, len, latency, r.is_ok(), at);
            answer(r, buf)
        });
        let mut done = Finished::new();
        {
            let mut st = self.lock();
            self.take(&mut st, job, &mut done);
            self.drain(&mut st, &mut done);
        }
        finish(done);
    }

    fn take(self: &Arc<Self>, st: &mut State, mut job: IoJob, done: &mut Finished) {
        let arrival = Instant::now();
        if let Some(e) = st.failed {
            done.push((job, Err(e)));
            return;
        }
        let (op, _) = reshaper_op(&job);
        if op == Op::Flush {
            self.counters.guest_flushes.fetch_add(1, Ordering::Relaxed);
        }
        if job.kind.writes() && self.store.disks[self.vm].read_only {
            done.push((job, Err(libc::EPERM)));
            return;
        }
        if op == Op::Flush {
            self.take_flush(st, job, arrival, done);
            return;
        }
        let size = self.store.disks[self.vm].size;
        if job.offset.checked_add(job.len).is_none_or(|end| end > size) || job.len / SECTOR_BYTES > u32::MAX as u64 {
            done.push((job, Err(libc::EINVAL)));
            return;
        }
        if job.kind == IoKind::Trim {
            // Advisory: only the whole sectors inside the range are trimmed.
            let (first, end) = (job.offset.div_ceil(SECTOR_BYTES), (job.offset + job.len) / SECTOR_BYTES);
            job.offset = first * SECTOR_BYTES;
            job.len = end.saturating_sub(first) * SECTOR_BYTES;
        }
        if job.len == 0 {
            done.push((job, Ok(())));
            return;
        }
        if !job.offset.is_multiple_of(SECTOR_BYTES) || !job.len.is_multiple_of(SECTOR_BYTES) {
            // The table maps whole sectors: served by whole-sector parts.
            self.take_unaligned(st, job, done);
            return;
        }
        if job.kind.writes() && locked(st, job.offset / SECTOR_BYTES, (job.offset + job.len) / SECTOR_BYTES) {
            st.parked.push_back(job);
            return;
        }
        self.take_whole(st, job, done);
    }

    /// Serve a request of whole sectors (checked, not empty, not a FLUSH).
    fn take_whole(self: &Arc<Self>, st: &mut State, mut job: IoJob, done: &mut Finished) {
        let arrival = Instant::now();
        let (op, fua_flush) = reshaper_op(&job);
        if op == Op::Read {
            // The reshaper reads only mapped pieces; the rest is zeroes.
            job.buf.as_mut_slice().fill(0);
        }
        let key = st.next_key;
        st.next_key += 1;
        let mut first = Request::new(
            key * 2,
            self.vm as u32,
            op,
            job.offset / SECTOR_BYTES,
            (job.len / SECTOR_BYTES) as u32,
            0,
        );
        first.fua = job.fua && op == Op::Write;
        first.meta = op == Op::Write && st.classifier.is_meta(job.offset, job.len);
        let mut batch = vec![first];
        if fua_flush {
            batch.push(Request::new(key * 2 + 1, self.vm as u32, Op::Flush, 0, 0, 0));
        }
        match st.reshaper.submit(&batch) {
            Ok(()) => {
                if op == Op::Write {
                    if first.meta {
                        st.meta_writes += 1;
                    } else {
                        st.data_writes += 1;
                    }
                    st.classifier.observe(job.offset, job.buf.as_slice());
                    self.load_journal_inode(st);
                }
                st.guests.insert(
                    key,
                    Guest {
                        job: Some(job),
                        parts: batch.len() as u32,
                        result: Ok(()),
                        arrival,
                        during_cleaning: None,
                    },
                );
            }
            Err(e) => {
                tracing::debug!(vm = %self.name, error = %e, "request refused by the reshaper");
                done.push((job, Err(libc::EINVAL)));
            }
        }
    }

    /// Start serving a request that is not whole sectors (see [`Unaligned`]).
    fn take_unaligned(self: &Arc<Self>, st: &mut State, job: IoJob, done: &mut Finished) {
        let (first, end) = sectors_of(&job);
        let (head, tail) = (
            !job.offset.is_multiple_of(SECTOR_BYTES),
            !(job.offset + job.len).is_multiple_of(SECTOR_BYTES),
        );
        let mut edges = Vec::new();
        if job.kind != IoKind::Read {
            edges.extend(head.then_some(first));
            edges.extend(tail.then_some(end - 1).filter(|&t| !(head && t == first)));
            // Another write to an edge sector in flight, or another
            // read-modify-write of one: wait, so the merge reads what the
            // sector holds once that is done and nothing is lost.
            let busy = edges.iter().any(|&e| {
                locked(st, e, e + 1)
                    || st.guests.values().any(|g| {
                        g.job.as_ref().is_some_and(|j| {
                            let (f, n) = sectors_of(j);
                            j.kind.writes() && (f..n).contains(&e)
                        })
                    })
            });
            if busy {
                st.parked.push_back(job);
                return;
            }
        }
        let id = st.next_unaligned;
        st.next_unaligned += 1;
        // A read reads every sector it touches; a write its partial edges.
        let reads: Vec<(u64, u64)> = if job.kind == IoKind::Read {
            vec![(first, end - first)]
        } else {
            edges.iter().map(|&e| (e, 1)).collect()
        };
        st.unaligned.insert(
            id,
            Unaligned {
                job,
                edges,
                old: HashMap::new(),
                left: reads.len() as u32,
                result: Ok(()),
            },
        );
        for (sector, sectors) in reads {
            let me = self.clone();
            let read = self.part(
                IoKind::Read,
                sector,
                sectors,
                false,
                AlignedBuf::zeroed((sectors * SECTOR_BYTES) as usize),
                move |r, buf| me.unaligned_part_done(id, Some(sector), r, buf),
            );
            self.take_whole(st, read, done);
        }
    }

    /// A whole-sector part of an unaligned request.
    fn part(
        &self,
        kind: IoKind,
        sector: u64,
        sectors: u64,
        fua: bool,
        buf: AlignedBuf,
        done: impl FnOnce(IoResult, AlignedBuf) + Send + 'static,
    ) -> IoJob {
        IoJob {
            vm: self.vm,
            kind,
            offset: sector * SECTOR_BYTES,
            len: sectors * SECTOR_BYTES,
            fua,
            buf,
            done: Box::new(done),
        }
    }

    /// A part of unaligned request `id` finished: `read` names the first
    /// sector of a read part.
    fn unaligned_part_done(self: &Arc<Self>, id: u64, read: Option<u64>, r: IoResult, buf: AlignedBuf) {
        let mut done = Finished::new();
        {
            let mut st = self.lock();
            let Some(u) = st.unaligned.get_mut(&id) else { return };
            u.left -= 1;
            if u.result.is_ok() {
                u.result = r;
            }
            if let Some(sector) = read {
                u.old.insert(sector, buf);
            }
            if u.left == 0 {
                let u = st.unaligned.remove(&id).expect("present");
                match (u.job.kind, read, u.result) {
                    (IoKind::Read, _, r) => {
                        let mut job = u.job;
                        if r.is_ok() {
                            let whole = &u.old[&(job.offset / SECTOR_BYTES)];
                            let from = (job.offset % SECTOR_BYTES) as usize;
                            let len = job.len as usize;
                            job.buf.as_mut_slice()[..len].copy_from_slice(&whole.as_slice()[from..from + len]);
                        }
                        done.push((job, r));
                    }
                    // The edges are read: write.
                    (_, Some(_), Ok(())) => self.write_merged(&mut st, id, u, &mut done),
                    (_, _, r) => {
                        done.push((u.job, r));
                        st.unpark_wanted = true;
                    }
                }
            }
            self.drain(&mut st, &mut done);
        }
        finish(done);
    }

    /// The edges of unaligned write `u` are read: merge and write whole
    /// sectors (the edges stay locked until that is done).
    fn write_merged(self: &Arc<Self>, st: &mut State, id: u64, mut u: Unaligned, done: &mut Finished) {
        let job = &u.job;
        let (first, end) = sectors_of(job);
        let (from, to) = (job.offset, job.offset + job.len);
        let mut parts = Vec::new();
        if job.kind == IoKind::Write {
            // One write of every sector touched: one remap entry.
            let mut buf = AlignedBuf::zeroed(((end - first) * SECTOR_BYTES) as usize);
            let out = buf.as_mut_slice();
            for (&e, old) in &u.old {
                let at = ((e - first) * SECTOR_BYTES) as usize;
                out[at..at + SECTOR_BYTES as usize].copy_from_slice(old.as_slice());
            }
            let at = (from - first * SECTOR_BYTES) as usize;
            out[at..at + job.len as usize].copy_from_slice(&job.buf.as_slice()[..job.len as usize]);
            parts.push((IoKind::Write, first, end - first, buf));
        } else {
            // Write-zeroes: each edge sector written with its part zeroed,
            // the whole sectors between them zeroed by the table.
            for (&e, old) in &u.old {
                let mut buf = AlignedBuf::zeroed(SECTOR_BYTES as usize);
                buf.as_mut_slice().copy_from_slice(old.as_slice());
                let (s, n) = (e * SECTOR_BYTES, (e + 1) * SECTOR_BYTES);
                buf.as_mut_slice()[(from.max(s) - s) as usize..(to.min(n) - s) as usize].fill(0);
                parts.push((IoKind::Write, e, 1, buf));
            }
            let (inner, inner_end) = (from.div_ceil(SECTOR_BYTES), to / SECTOR_BYTES);
            if inner_end > inner {
                parts.push((job.kind, inner, inner_end - inner, AlignedBuf::empty()));
            }
        }
        let fua = job.fua;
        u.left = parts.len() as u32;
        u.old.clear();
        st.unaligned.insert(id, u);
        for (kind, sector, sectors, buf) in parts {
            let me = self.clone();
            let part = self.part(kind, sector, sectors, fua, buf, move |r, _| {
                me.unaligned_part_done(id, None, r, AlignedBuf::empty())
            });
            self.take_whole(st, part, done);
        }
    }

    /// Take again the requests parked behind a read-modify-write.
    fn unpark(self: &Arc<Self>, st: &mut State, done: &mut Finished) {
        for job in std::mem::take(&mut st.parked) {
            self.take(st, job, done);
        }
    }

    /// A guest FLUSH goes to the reshaper on its own, not behind writes
    /// held for room: it covers the writes already answered, so the cleaner
    /// never holds it back (its commit starts now, or when the commit in
    /// progress is over). One that arrives while a segment is being copied
    /// is timed.
    fn take_flush(&self, st: &mut State, job: IoJob, arrival: Instant, done: &mut Finished) {
        let key = st.next_key;
        st.next_key += 1;
        let copies: Vec<u64> = st.timing.copy.iter().flatten().map(|&(n, _)| n).collect();
        let during_cleaning = (!copies.is_empty()).then(|| (copies, st.timing.behind_until(arrival)));
        st.guests.insert(
            key,
            Guest {
                job: Some(job),
                parts: 1,
                result: Ok(()),
                arrival,
                during_cleaning,
            },
        );
        match st.reshaper.flush(key * 2) {
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(vm = %self.name, error = %e, "FLUSH refused by the reshaper");
                let g = st.guests.remove(&key).expect("just inserted");
                if let Some(job) = g.job {
                    done.push((job, Err(libc::EIO)));
                }
            }
        }
    }

    /// After the reshaper moved on: note copies that ended.
    fn note_timing(st: &mut State, now: Instant) {
        for region in [Region::Meta, Region::Data] {
            let i = region_index(region);
            if st.timing.copy[i].is_some_and(|(n, _)| st.reshaper.segment_copy(region) != Some(n)) {
                st.timing.copy_ended(i, now);
            }
        }
    }

    /// Give the classifier what the disk holds where it looks: the head of
    /// the disk (at start) and the journal inode once the layout names it.
    pub fn load_layout(&self) {
        let mut st = self.lock();
        let head = self.read_guest(&st, 0, HEAD_BYTES.min(self.store.disks[self.vm].size));
        st.classifier.observe(0, &head);
        self.load_journal_inode(&mut st);
        tracing::info!(
            vm = %self.name,
            ext4 = st.classifier.found,
            meta_bytes = st.classifier.meta_bytes(),
            "metadata classifier: the guest's ext4 layout, or all data"
        );
    }

    fn load_journal_inode(&self, st: &mut State) {
        let at = st.classifier.journal_inode_at();
        if let Some((off, len)) = at.filter(|_| at != st.journal_read) {
            st.journal_read = at;
            let bytes = self.read_guest(st, off, len as u64);
            st.classifier.observe(off, &bytes);
        }
    }

    /// The guest's bytes at `offset`, as the table maps them (what completed
    /// writes put there; unmapped and trimmed sectors are zeroes).
    fn read_guest(&self, st: &State, offset: u64, len: u64) -> Vec<u8> {
        let mut out = vec![0u8; len as usize];
        let (first, end) = (offset / SECTOR_BYTES, (offset + len).div_ceil(SECTOR_BYTES));
        let f = &self.store.files[self.file];
        let mut pieces = Vec::new();
        for p in st.reshaper.table(Region::Meta).lookup(first, end - first) {
            match p.target {
                Some(t) => pieces.push((p.start, p.sectors, t)),
                None => {
                    for q in st.reshaper.table(Region::Data).lookup(p.start, p.sectors) {
                        if let Some(t) = q.target {
                            pieces.push((q.start, q.sectors, t));
                        }
                    }
                }
            }
        }
        for (start, sectors, t) in pieces {
            let hvio_reshape::Target::At(at) = t else { continue };
            let mut buf = vec![0u8; (sectors * SECTOR_BYTES) as usize];
            let file_off = self.header + at * SECTOR_BYTES;
            let read_file = |b: &mut [u8]| {
                std::os::unix::fs::FileExt::read_exact_at(&f.buffered, b, file_off).map_err(|_| libc::EIO)
            };
            let read = match &self.store.volatile {
                Some(v) => v.read(self.file, file_off, &mut buf, read_file),
                None => read_file(&mut buf),
            };
            if read.is_err() {
                continue;
            }
            // Copy the part inside [offset, offset + len).
            let (s, e) = (start * SECTOR_BYTES, (start + sectors) * SECTOR_BYTES);
            let (from, to) = (s.max(offset), e.min(offset + len));
            if from < to {
                out[(from - offset) as usize..(to - offset) as usize]
                    .copy_from_slice(&buf[(from - s) as usize..(to - s) as usize]);
            }
        }
        out
    }

    /// Take the reshaper's events: start its I/O, answer finished requests.
    fn drain(self: &Arc<Self>, st: &mut State, done: &mut Finished) {
        loop {
            let Some(ev) = st.reshaper.poll() else {
                if std::mem::take(&mut st.unpark_wanted) && st.failed.is_none() {
                    self.unpark(st, done);
                    continue;
                }
                let Some(id) = st.skipped.pop() else { break };
                st.ios.remove(&id);
                if let Err(e) = st.reshaper.complete(id) {
                    tracing::error!(vm = %self.name, error = %e, "reshaper refused a completion");
                }
                continue;
            };
            match ev {
                Event::Io(io) => self.issue(st, io),
                Event::Done(rq) => self.part_done(st, rq, Ok(()), done),
                Event::Failed(rq, e) => {
                    tracing::warn!(vm = %self.name, error = %e, "reshaped image: request failed");
                    self.part_done(st, rq, Err(libc::ENOSPC), done)
                }
            }
        }
        Self::note_timing(st, Instant::now());
        self.release_held(st);
    }

    fn part_done(&self, st: &mut State, rq: RequestId, r: IoResult, done: &mut Finished) {
        let key = rq / 2;
        let Some(g) = st.guests.get_mut(&key) else { return };
        g.parts -= 1;
        if g.result.is_ok() {
            g.result = r;
        }
        if g.parts == 0 {
            let g = st.guests.remove(&key).expect("present");
            if !st.parked.is_empty() && g.job.as_ref().is_some_and(|j| j.kind.writes()) {
                st.unpark_wanted = true;
            }
            if let Some(job) = g.job {
                if let Some((copies, behind)) = &g.during_cleaning {
                    let now = Instant::now();
                    let latency = now.saturating_duration_since(g.arrival);
                    st.timing.flush_answered(copies, *behind, latency, now);
                }
                done.push((job, g.result));
            }
        }
    }

    /// Start one I/O of the reshaper on the image file, through the scheduler.
    fn issue(self: &Arc<Self>, st: &mut State, io: Io) {
        let len = io.sectors * SECTOR_BYTES;
        let offset = self.header + io.sector * SECTOR_BYTES;
        let (kind, buf) = match io.op {
            Op::Read => (IoKind::Read, AlignedBuf::zeroed(len as usize)),
            Op::Flush => (IoKind::Flush, AlignedBuf::empty()),
            _ => {
                let mut b = AlignedBuf::zeroed(len as usize);
                fill(st, &io.payload, b.as_mut_slice());
                (IoKind::Write, b)
            }
        };
        if let RIoKind::CleanRead(r) | RIoKind::CleanWrite(r) = io.kind {
            let writing = matches!(io.kind, RIoKind::CleanWrite(_));
            let i = region_index(r);
            if !writing && st.clean_writing[i] {
                // A new victim: the previous one's reads are no longer named.
                st.clean_data[i].clear();
            }
            st.clean_writing[i] = writing;
            // A job of several victims copies them one after another: the
            // first I/O of another number starts another copy.
            if let Some(n) = st.reshaper.segment_copy(r) {
                if st.timing.copy[i].is_none_or(|(c, _)| c != n) {
                    let now = Instant::now();
                    st.timing.copy_ended(i, now);
                    st.timing.copy[i] = Some((n, now));
                }
            }
        }
        match io.kind {
            RIoKind::Flush => {
                self.counters.fdatasyncs.fetch_add(1, Ordering::Relaxed);
            }
            RIoKind::Log | RIoKind::Checkpoint => {
                self.counters.fua_writes.fetch_add(1, Ordering::Relaxed);
            }
            _ => {}
        }
        self.counters.image_ios.fetch_add(1, Ordering::Relaxed);
        let rq = io.request(0, self.vm as u32, 0);
        let shape = Shape {
            class: rq.class,
            sync: rq.sync,
            meta: rq.meta,
        };
        let (id, fua, io_kind) = (io.id, io.fua, io.kind);
        // Test-only faults and crash points (`[store] volatile_test`).
        let skip = self.inject(st, &io, &buf);
        st.ios.insert(id, io);
        if skip {
            // Completed without reaching the file, as the fault says.
            st.skipped.push(id);
            return;
        }
        let me = self.clone();
        let job = IoJob {
            vm: self.vm,
            kind,
            offset,
            len: if kind == IoKind::Flush { 0 } else { len },
            fua,
            buf,
            done: Box::new(move |r, b| me.io_done(id, r, b)),
        };
        if io_kind == RIoKind::Flush {
            st.timing.commit_began(Instant::now());
        }
        if Self::holds(st, io_kind) {
            st.held.push_back((job, shape, io_kind, id));
            return;
        }
        self.to_scheduler(st, job, shape, io_kind, id);
    }

    fn to_scheduler(&self, st: &mut State, job: IoJob, shape: Shape, kind: RIoKind, id: u64) {
        if let RIoKind::CleanRead(_) | RIoKind::CleanWrite(_) = kind {
            st.timing.at_scheduler.insert(id);
        }
        self.engine
            .get()
            .expect("attached before serving")
            .submit_stage(job, shape);
    }

    /// Whether an image I/O issued now waits in the daemon until the commit
    /// in progress is over: cleaning always does, and guest data writes do
    /// while a guest FLUSH or FUA write waits for a commit. The commit then
    /// reaches the scheduler behind only what was there when it began (the
    /// guest's writes in flight and at most the segment copy in progress),
    /// and no scheduler can put later writes before it: a class-blind one
    /// sorting by sector would otherwise serve the guest's stream at the
    /// append point, and the cleaner's, ahead of it.
    fn holds(st: &State, kind: RIoKind) -> bool {
        st.reshaper.committing().is_some()
            && match kind {
                RIoKind::CleanRead(_) | RIoKind::CleanWrite(_) => true,
                RIoKind::GuestWrite(_) => st.reshaper.commit_awaited(),
                RIoKind::GuestRead | RIoKind::Log | RIoKind::Checkpoint | RIoKind::Flush => false,
            }
    }

    /// Writes held while a commit ran go to the scheduler, in order, once none runs.
    fn release_held(&self, st: &mut State) {
        if st.reshaper.committing().is_some() {
            return;
        }
        for (job, shape, kind, id) in std::mem::take(&mut st.held) {
            self.to_scheduler(st, job, shape, kind, id);
        }
    }

    /// Apply a test fault to `io`: `Some(true)` completes it without doing
    /// it (`true`); a crash point ends the process (as `kill -9` would) after writing
    /// part of the I/O.
    fn inject(&self, st: &mut State, io: &Io, buf: &AlignedBuf) -> bool {
        if let Some((point, after)) = self.crash {
            let hit = match (point, io.kind) {
                (CrashPoint::Checkpoint, RIoKind::Checkpoint) => {
                    st.checkpoints_issued += 1;
                    st.checkpoints_issued >= after
                }
                (CrashPoint::Clean, RIoKind::CleanWrite(_)) => {
                    st.clean_writes_issued += 1;
                    st.clean_writes_issued >= after
                }
                _ => false,
            };
            if hit {
                let half = (buf.len() / 2) as u64 / SECTOR_BYTES * SECTOR_BYTES;
                let f = &self.store.files[self.file];
                let _ = std::os::unix::fs::FileExt::write_all_at(
                    &f.buffered,
                    &buf.as_slice()[..half as usize],
                    self.header + io.sector * SECTOR_BYTES,
                );
                tracing::error!(vm = %self.name, ?point, "volatile_test crash point reached: the process ends now");
                // SAFETY: ends the process at once, as kill -9 would.
                unsafe { libc::_exit(137) };
            }
        }
        matches!(
            (self.fault, io.kind),
            (Some(ImageFault::NoFlushSync), RIoKind::Flush)
                | (Some(ImageFault::LostCheckpoint), RIoKind::Checkpoint)
                // The log reaches the file before the data it names is durable.
                | (Some(ImageFault::CommitBeforeData), RIoKind::Flush)
        )
    }

    /// A job of the image file finished.
    fn io_done(self: &Arc<Self>, id: u64, r: IoResult, buf: AlignedBuf) {
        let mut done = Finished::new();
        {
            let mut st = self.lock();
            let Some(io) = st.ios.remove(&id) else { return };
            match io.kind {
                RIoKind::CleanRead(_) | RIoKind::CleanWrite(_) => st.timing.clean_io_done(id, Instant::now()),
                RIoKind::Log | RIoKind::Checkpoint => st.timing.commit_over(Instant::now()),
                _ => {}
            }
            if let Err(e) = r {
                self.counters.image_errors.fetch_add(1, Ordering::Relaxed);
                if st.failed.is_none() {
                    tracing::error!(
                        vm = %self.name,
                        image = %self.path.display(),
                        error = %std::io::Error::from_raw_os_error(e),
                        io = ?io.kind,
                        "image I/O failed: the disk fails every request from now on"
                    );
                }
                st.failed = Some(e);
                for (_, g) in st.guests.drain() {
                    if let Some(job) = g.job {
                        done.push((job, Err(e)));
                    }
                }
                for job in st.parked.drain(..) {
                    done.push((job, Err(e)));
                }
            } else {
                match (&io.kind, &io.payload) {
                    (RIoKind::GuestRead, Payload::Guest(slices)) => {
                        let mut at = 0usize;
                        for s in slices {
                            let n = (s.sectors * SECTOR_BYTES) as usize;
                            if let Some(Guest { job: Some(job), .. }) = st.guests.get_mut(&(s.request / 2)) {
                                let from = (s.offset * SECTOR_BYTES) as usize;
                                job.buf.as_mut_slice()[from..from + n].copy_from_slice(&buf.as_slice()[at..at + n]);
                            }
                            at += n;
                        }
                    }
                    (RIoKind::CleanRead(r), _) => {
                        st.clean_data[region_index(*r)].insert(id, buf);
                    }
                    _ => {}
                }
                if self.fault == Some(ImageFault::CommitBeforeData) && io.kind == RIoKind::Log {
                    // The skipped cache flush, late: after the log write.
                    let _ = self.store.files[self.file].sync();
                }
                if let Err(e) = st.reshaper.complete(id) {
                    tracing::error!(vm = %self.name, error = %e, "reshaper refused a completion");
                }
            }
            if st.failed.is_none() {
                self.drain(&mut st, &mut done);
            }
        }
        finish(done);
    }

    /// Commit everything (shutdown): a flush of the disk's own.
    pub fn close(self: &Arc<Self>) {
        let mut done = Finished::new();
        {
            let mut st = self.lock();
            if st.failed.is_some() {
                return;
            }
            let key = st.next_key;
            st.next_key += 1;
            let rq = Request::new(key * 2, self.vm as u32, Op::Flush, 0, 0, 0);
            if st.reshaper.submit(&[rq]).is_ok() {
                st.guests.insert(
                    key,
                    Guest {
                        job: None,
                        parts: 1,
                        result: Ok(()),
                        arrival: Instant::now(),
                        during_cleaning: None,
                    },
                );
            }
            self.drain(&mut st, &mut done);
        }
        finish(done);
    }

    /// Nothing in flight and nothing waiting.
    pub fn quiet(&self) -> bool {
        let st = self.lock();
        st.failed.is_some()
            || (st.reshaper.io_outstanding() == 0
                && st.reshaper.guest_outstanding() == 0
                && st.unaligned.is_empty()
                && st.parked.is_empty())
    }

    /// After the final flush: mark the image cleanly stopped (only if every
    /// write is committed and nothing failed).
    pub fn mark_clean(&self) {
        let st = self.lock();
        if st.failed.is_some() || st.reshaper.guest_outstanding() > 0 || self.store.disks[self.vm].read_only {
            return;
        }
        let mut sb = self.superblock.lock().unwrap_or_else(|p| p.into_inner());
        sb.clean = true;
        if let Err(e) = image::write_superblock(&self.path, &self.store.files[self.file].buffered, &sb) {
            tracing::error!(error = %e, "could not mark the image cleanly stopped");
        }
    }

    /// The guest's requests so far, as its exports sent them.
    pub fn guest_stats(&self) -> VmStats {
        let mut st = self.guest_stats.lock().unwrap_or_else(|p| p.into_inner());
        st.refresh(self.started.elapsed().as_nanos() as u64);
        st.clone()
    }

    /// The image file's requests: `scheduled` as the host scheduler served
    /// them, and what the reshaper wrote and read them for.
    pub fn file_status(&self, scheduled: &VmStats) -> ImageFileStatus {
        let st = self.lock();
        let s = st.reshaper.stats();
        let [r, w, f, _] = &scheduled.ops;
        ImageFileStatus {
            reads: r.count,
            writes: w.count,
            flushes: f.count,
            errors: scheduled.ops.iter().map(|o| o.errors).sum(),
            bytes_read: r.bytes,
            bytes_written: w.bytes,
            guest_data_bytes_written: (s.guest_write_sectors[0] + s.guest_write_sectors[1]) * SECTOR_BYTES,
            cleaning_bytes_read: s.clean_read_sectors * SECTOR_BYTES,
            cleaning_bytes_written: s.clean_write_sectors * SECTOR_BYTES,
            log_bytes_written: s.log_bytes,
            checkpoint_bytes_written: s.checkpoint_bytes,
        }
    }

    /// This image's samples (families of [`FAMILIES`]).
    fn samples(&self) -> Vec<Sample> {
        let st = self.lock();
        let s = st.reshaper.stats();
        let c = &self.counters;
        let count = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64;
        let bytes = |sectors: u64| (sectors * SECTOR_BYTES) as f64;
        let t = &st.timing;
        let mut v: Vec<Sample> = [
            ("guest_flushes_total", count(&c.guest_flushes)),
            ("fdatasyncs_total", count(&c.fdatasyncs)),
            ("fua_writes_total", count(&c.fua_writes)),
            ("ios_total", count(&c.image_ios)),
            ("io_errors_total", count(&c.image_errors)),
            ("commits_total", s.commits as f64),
            ("checkpoints_total", s.checkpoints as f64),
            ("segments_cleaned_total", s.segments_cleaned as f64),
            ("clean_write_bytes_total", bytes(s.clean_write_sectors)),
            (
                "guest_write_bytes_total",
                bytes(s.guest_write_sectors[0] + s.guest_write_sectors[1]),
            ),
            ("log_bytes_total", s.log_bytes as f64),
            ("checkpoint_bytes_total", s.checkpoint_bytes as f64),
            ("write_amplification", s.write_amplification()),
            ("table_extents", st.reshaper.table_extents() as f64),
            ("table_bytes", st.reshaper.table_bytes() as f64),
            ("free_segments_meta", st.reshaper.free_segments(Region::Meta) as f64),
            ("free_segments_data", st.reshaper.free_segments(Region::Data) as f64),
            ("recovery_seconds", self.recovered.took.as_secs_f64()),
            ("recovered_transactions", self.recovered.transactions as f64),
            ("failed", f64::from(u8::from(st.failed.is_some()))),
            ("meta_writes_total", st.meta_writes as f64),
            ("data_writes_total", st.data_writes as f64),
            ("ext4_found", f64::from(u8::from(st.classifier.found))),
            ("segment_copies_total", t.copies as f64),
            ("segment_copy_seconds_total", t.copy_sum.as_secs_f64()),
            ("segment_copy_max_seconds", t.copy_max.as_secs_f64()),
            ("flushes_during_cleaning_total", t.flushes as f64),
            ("flush_behind_cleaning_seconds_total", t.behind_sum.as_secs_f64()),
            ("flush_behind_cleaning_max_seconds", t.behind_max.as_secs_f64()),
            ("flush_waits_over_segment_copy_total", t.over as f64),
            ("flush_latency_during_cleaning_max_seconds", t.latency_max.as_secs_f64()),
        ]
        .into_iter()
        .map(|(name, value)| (name, String::new(), value))
        .collect();
        // The guest's own requests (`hvio_requests_total` counts the image
        // file's, which the scheduler scheduled).
        let guest = self.guest_stats.lock().unwrap_or_else(|p| p.into_inner());
        for (i, op) in crate::stats::OPS.iter().enumerate() {
            let o = &guest.ops[i];
            v.push(("guest_requests_total", format!(",op=\"{op}\""), o.count as f64));
            if i < 2 {
                v.push(("guest_bytes_total", format!(",op=\"{op}\""), o.bytes as f64));
            }
        }
        v
    }
}

/// A `/metrics` sample of an image: family, labels after `vm`, value.
type Sample = (&'static str, String, f64);

/// The reshaped images' `/metrics` families: name after `hvio_image_`,
/// type, help.
const FAMILIES: &[(&str, &str, &str)] = &[
    ("guest_flushes_total", "counter", "FLUSHes the guest sent."),
    (
        "fdatasyncs_total",
        "counter",
        "Cache flushes (fdatasync) of the image file, one per commit.",
    ),
    (
        "fua_writes_total",
        "counter",
        "FUA log and checkpoint writes of the image file.",
    ),
    ("ios_total", "counter", "Requests made of the image file."),
    ("io_errors_total", "counter", "Image-file requests that failed."),
    ("commits_total", "counter", "Log transactions committed."),
    (
        "checkpoints_total",
        "counter",
        "Checkpoints of the remap table written.",
    ),
    ("segments_cleaned_total", "counter", "Segments the cleaner emptied."),
    ("clean_write_bytes_total", "counter", "Bytes the cleaner copied."),
    (
        "guest_write_bytes_total",
        "counter",
        "Guest bytes written at the append points.",
    ),
    ("log_bytes_total", "counter", "Bytes written to the log."),
    ("checkpoint_bytes_total", "counter", "Bytes of checkpoints written."),
    (
        "write_amplification",
        "gauge",
        "Image bytes written per guest byte written.",
    ),
    ("table_extents", "gauge", "Extents in the remap tables."),
    (
        "table_bytes",
        "gauge",
        "Memory of the remap tables and their reverse maps.",
    ),
    ("free_segments_meta", "gauge", "Free segments of the metadata region."),
    ("free_segments_data", "gauge", "Free segments of the data region."),
    ("recovery_seconds", "gauge", "How long recovery took at start."),
    (
        "recovered_transactions",
        "gauge",
        "Committed transactions recovery replayed at start.",
    ),
    (
        "failed",
        "gauge",
        "1 once an image-file request failed: every request fails from then on.",
    ),
    ("meta_writes_total", "counter", "Guest writes classed metadata."),
    ("data_writes_total", "counter", "Guest writes classed data."),
    (
        "ext4_found",
        "gauge",
        "1 if the guest's ext4 layout was found on the disk.",
    ),
    (
        "segment_copies_total",
        "counter",
        "Segment copies of the cleaner timed.",
    ),
    (
        "segment_copy_seconds_total",
        "counter",
        "Time of the segment copies, first read to table update.",
    ),
    ("segment_copy_max_seconds", "gauge", "The longest segment copy."),
    (
        "flushes_during_cleaning_total",
        "counter",
        "FLUSHes that arrived while a segment was copied, answered.",
    ),
    (
        "flush_behind_cleaning_seconds_total",
        "counter",
        "Time the commits those FLUSHes waited for spent with cleaning I/O ahead of them at the scheduler.",
    ),
    (
        "flush_behind_cleaning_max_seconds",
        "gauge",
        "The longest such time of one FLUSH.",
    ),
    (
        "flush_waits_over_segment_copy_total",
        "counter",
        "FLUSHes whose commits were behind cleaning I/O longer than the segment copy in progress at their arrival took.",
    ),
    (
        "flush_latency_during_cleaning_max_seconds",
        "gauge",
        "The longest latency of a FLUSH that arrived while a segment was copied.",
    ),
    (
        "guest_requests_total",
        "counter",
        "The guest's requests answered, by operation.",
    ),
    (
        "guest_bytes_total",
        "counter",
        "The guest's bytes read and written, by operation.",
    ),
];

/// The `/metrics` lines of reshaped `images`: each family once, with its
/// help and type, one sample per image.
pub fn prometheus(images: &[&ReshapedDisk], out: &mut String) {
    if images.is_empty() {
        return;
    }
    let samples: Vec<(&ReshapedDisk, Vec<Sample>)> = images.iter().map(|img| (*img, img.samples())).collect();
    for (family, kind, help) in FAMILIES {
        let _ = writeln!(out, "# HELP hvio_image_{family} {help}");
        let _ = writeln!(out, "# TYPE hvio_image_{family} {kind}");
        for (img, v) in &samples {
            let vm = crate::stats::esc(&img.name);
            for (_, labels, value) in v.iter().filter(|(name, _, _)| name == family) {
                let _ = writeln!(out, "hvio_image_{family}{{vm=\"{vm}\"{labels}}} {value}");
            }
        }
    }
}

/// The reshaper's operation for a guest request, and whether a FLUSH must
/// follow it (a trim or write-zeroes reads back as zeroes once its entry is
/// in the table; with FUA it also waits for a commit).
fn reshaper_op(job: &IoJob) -> (Op, bool) {
    match job.kind {
        IoKind::Read => (Op::Read, false),
        IoKind::Write => (Op::Write, false),
        IoKind::Flush => (Op::Flush, false),
        IoKind::Trim | IoKind::WriteZeroes { .. } => (Op::Discard, job.fua),
    }
}

/// Sectors `[first, end)` of `job`'s range (rounded out to whole sectors).
fn sectors_of(job: &IoJob) -> (u64, u64) {
    (job.offset / SECTOR_BYTES, (job.offset + job.len).div_ceil(SECTOR_BYTES))
}

/// Whether a read-modify-write in progress has an edge sector in `[first, end)`.
fn locked(st: &State, first: u64, end: u64) -> bool {
    st.unaligned
        .values()
        .any(|u| u.edges.iter().any(|&e| (first..end).contains(&e)))
}

fn region_index(r: Region) -> usize {
    match r {
        Region::Meta => 0,
        Region::Data => 1,
    }
}

/// The bytes a write carries, from the guest's buffers or cleaning reads.
fn fill(st: &State, payload: &Payload, out: &mut [u8]) {
    let mut at = 0usize;
    match payload {
        Payload::None => {}
        Payload::Bytes(b) => out[..b.len()].copy_from_slice(b),
        Payload::Guest(slices) => {
            for s in slices {
                let n = (s.sectors * SECTOR_BYTES) as usize;
                if let Some(Guest { job: Some(job), .. }) = st.guests.get(&(s.request / 2)) {
                    let from = (s.offset * SECTOR_BYTES) as usize;
                    out[at..at + n].copy_from_slice(&job.buf.as_slice()[from..from + n]);
                }
                at += n;
            }
        }
        Payload::Copy(slices) => {
            for s in slices {
                let n = (s.sectors * SECTOR_BYTES) as usize;
                if let Some(src) = st.clean_data.iter().find_map(|m| m.get(&s.read)) {
                    let from = (s.offset * SECTOR_BYTES) as usize;
                    out[at..at + n].copy_from_slice(&src.as_slice()[from..from + n]);
                } else {
                    debug_assert!(false, "cleaning read {} gone before its write", s.read);
                }
                at += n;
            }
        }
    }
}
