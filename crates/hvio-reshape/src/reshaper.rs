//! The sequentializer with its cleaner and write-ahead log, as a sans-I/O
//! state machine (paper 001 §III.A–B).
//!
//! The caller [`submit`](Reshaper::submit)s guest requests in batches (one
//! batch = the requests taken from the virtio ring at one VM exit, §II.A),
//! takes the I/O to perform from [`poll`](Reshaper::poll), performs it on the
//! image, and reports each completion with [`complete`](Reshaper::complete).
//! Nothing here reads a clock or touches a file.
//!
//! - §III.A.1 metadata/data checker: a write goes to the metadata region if
//!   the request's `meta` flag is set, to the data region otherwise.
//! - §III.A.2 sequentializer (Fig. 2–3): each region has its own append point
//!   and remap table; a batch's writes to one region are placed back to back
//!   and issued as one request (one more per segment boundary crossed).
//!   Reads are split across the extents they touch; unmapped sectors are
//!   read from the original address in the base image (or are zeroes when
//!   the image has no base); trimmed sectors read as zeroes without I/O.
//! - §III.B.2 cleaning: each region is cut into segments; when its free
//!   segments fall under `clean_start`, a victim (greedy or cost-benefit) has
//!   its valid extents read and copied to the region's cleaning frontier (a
//!   second append point, so cold data is not mixed with the guest's), and
//!   the table is updated only where it still points at the copied place.
//!   Under `clean_hard`, new writes to the region wait for the cleaner.
//! - §III.B.3 write-ahead logging (Fig. 4): the table is updated once a
//!   batch's data writes complete (in submission order); its remap entries
//!   join the running transaction. A commit makes the data durable (a cache
//!   flush), then writes TX start, entries and TX commit to the log area in
//!   one FUA write. Every so often a commit is a checkpoint of the whole
//!   table instead, written to the older of two slots. A segment emptied by
//!   overwrites or cleaning is reused only once the commit that emptied it
//!   is durable, so recovery never finds a mapping into reused space.

use crate::config::{Area, Layout, Victim};
use crate::encoding::{self, DecodeError, Entry, Mapping};
use crate::extent_map::{Extent, ExtentMap, Target, EXTENT_PAYLOAD_BYTES};
use hvio_core::{IoClass, Nanos, Op, Request, RequestId, Sector, StreamId, SECTOR_BYTES};
use std::collections::{BTreeMap, VecDeque};
use thiserror::Error;

/// Id of an I/O the reshaper asked for.
pub type IoId = u64;

/// The two regions of §III.A.2.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Region {
    /// File-system metadata and journal writes.
    Meta,
    /// Everything else.
    Data,
}

impl IoKind {
    /// The operation an I/O of this kind performs.
    pub fn op(self) -> Op {
        match self {
            IoKind::GuestRead | IoKind::CleanRead(_) => Op::Read,
            IoKind::Flush => Op::Flush,
            IoKind::GuestWrite(_) | IoKind::CleanWrite(_) | IoKind::Log | IoKind::Checkpoint => Op::Write,
        }
    }
}

impl Region {
    fn index(self) -> usize {
        match self {
            Region::Meta => 0,
            Region::Data => 1,
        }
    }
    const BOTH: [Region; 2] = [Region::Meta, Region::Data];
}

/// Why an I/O is done; the simulator counts these apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IoKind {
    /// Guest data written at a region's append point.
    GuestWrite(Region),
    /// A guest read of a mapped piece or of the base image.
    GuestRead,
    /// The cleaner reading a victim's valid extents.
    CleanRead(Region),
    /// The cleaner writing them at the region's cleaning frontier.
    CleanWrite(Region),
    /// A log transaction (TX start, entries, TX commit).
    Log,
    /// A checkpoint of the table.
    Checkpoint,
    /// A cache flush before a commit.
    Flush,
}

/// A slice of a guest request's buffer, `offset` sectors from its start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GuestSlice {
    /// The guest request.
    pub request: RequestId,
    /// Sectors from its start.
    pub offset: u64,
    /// Length in sectors.
    pub sectors: u64,
}

/// A slice of the data an earlier cleaning read returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CopySlice {
    /// The cleaning read.
    pub read: IoId,
    /// Sectors from its start.
    pub offset: u64,
    /// Length in sectors.
    pub sectors: u64,
}

/// Where the data of an I/O comes from (writes) or goes to (reads).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Payload {
    /// No data (a flush).
    None,
    /// Guest buffers, in order.
    Guest(Vec<GuestSlice>),
    /// These bytes (log and checkpoint writes).
    Bytes(Vec<u8>),
    /// Data of cleaning reads, in order; the caller keeps a cleaning read's
    /// data until the cleaning writes that name it have completed.
    Copy(Vec<CopySlice>),
}

/// One I/O for the caller to perform on the image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Io {
    /// Its id, to pass back to `complete`.
    pub id: IoId,
    /// What it is for.
    pub kind: IoKind,
    /// What it does.
    pub op: Op,
    /// First image sector (0 for a flush).
    pub sector: Sector,
    /// Length in sectors.
    pub sectors: u64,
    /// Complete only once on stable media.
    pub fua: bool,
    /// Where its data comes from or goes to.
    pub payload: Payload,
}

impl Io {
    /// The block request a host scheduler sees for this I/O, as `stream`'s,
    /// arriving at `arrival`. Cleaning is background work (the idle class,
    /// as a daemon's cleaner would ask with `ioprio_set`); a guest write keeps
    /// its region's metadata flag; log, checkpoint and flush writes are
    /// synchronous (a guest flush or FUA write waits on them), as are reads.
    pub fn request(&self, id: RequestId, stream: StreamId, arrival: Nanos) -> Request {
        let sectors = u32::try_from(self.sectors).expect("a reshaper I/O is at most a segment or a checkpoint slot");
        let mut r = Request::new(id, stream, self.op, self.sector, sectors, arrival);
        r.fua = self.fua;
        r.meta = matches!(
            self.kind,
            IoKind::GuestWrite(Region::Meta) | IoKind::CleanWrite(Region::Meta)
        );
        r.sync = !matches!(
            self.kind,
            IoKind::GuestWrite(_) | IoKind::CleanRead(_) | IoKind::CleanWrite(_)
        );
        if matches!(self.kind, IoKind::CleanRead(_) | IoKind::CleanWrite(_)) {
            r.class = IoClass::Idle;
        }
        r
    }
}

/// What the reshaper tells its caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// Perform this I/O and report its completion.
    Io(Io),
    /// This guest request is complete. For a read, the buffer was pre-zeroed
    /// by the caller and every mapped piece has been read into it.
    Done(RequestId),
    /// This guest request cannot be served (its region is full of valid data).
    Failed(RequestId, ReshapeError),
}

/// Errors of the reshaper.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ReshapeError {
    /// A request past the end of the disk.
    #[error("request {request}: sectors {sector}..{end} are past the end of the disk ({disk} sectors)")]
    PastEnd {
        /// The request.
        request: RequestId,
        /// Its first sector.
        sector: Sector,
        /// One past its last.
        end: u64,
        /// The disk's size in sectors.
        disk: u64,
    },
    /// A request larger than its region could ever hold.
    #[error("request {request}: {sectors} sectors is more than the {region:?} region can ever hold at once ({room})")]
    TooLarge {
        /// The request.
        request: RequestId,
        /// Its length in sectors.
        sectors: u64,
        /// The region.
        region: Region,
        /// The region's room in sectors.
        room: u64,
    },
    /// The region holds only valid data: cleaning cannot free a segment.
    #[error("the {region:?} region is full of valid data: nothing left to clean")]
    RegionFull {
        /// The region.
        region: Region,
    },
    /// `complete` named an I/O that is not outstanding.
    #[error("no I/O {0} is outstanding")]
    UnknownIo(IoId),
    #[error(
        "the remap table ({entries} extents) does not fit a checkpoint slot ({slot_bytes} bytes) and the log is full"
    )]
    /// The table outgrew a checkpoint slot while the log is full.
    TableTooLarge {
        /// Extents in the table.
        entries: usize,
        /// A slot's size.
        slot_bytes: u64,
    },
}

/// Why recovery refused the image.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum RecoveryError {
    /// A checkpoint slot that does not decode.
    #[error("checkpoint slot {slot}: {error}")]
    Checkpoint {
        /// The slot (0 or 1).
        slot: usize,
        /// Why.
        error: DecodeError,
    },
    /// A committed log transaction that does not decode.
    #[error("log transaction {seq} at block {block}: {error}")]
    Log {
        /// Its sequence number.
        seq: u64,
        /// Its first log block.
        block: u64,
        /// Why.
        error: DecodeError,
    },
    /// An entry that does not fit the layout.
    #[error("{place} entry {index}: {what}")]
    BadEntry {
        /// Checkpoint or log.
        place: String,
        /// Its index.
        index: usize,
        /// What is wrong.
        what: String,
    },
    /// An area of the wrong size was given.
    #[error("expected {expected} bytes of {what}, got {got}")]
    Size {
        /// Which area.
        what: &'static str,
        /// Its size in the layout.
        expected: u64,
        /// The size given.
        got: u64,
    },
}

/// What recovery found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecoveryReport {
    /// The transaction the checkpoint used includes, if one was valid.
    pub checkpoint_seq: Option<u64>,
    /// Committed transactions replayed from the log after it.
    pub transactions_replayed: u64,
    /// Entries those transactions held.
    pub entries_replayed: u64,
    /// Why the log scan stopped (an uncommitted or torn transaction, or the
    /// end of what was ever written).
    pub log_end: Option<DecodeError>,
    /// Extents in the rebuilt tables.
    pub table_extents: usize,
}

/// Counters for the host-side cost of reshaping.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Guest sectors written, per region (metadata, data).
    pub guest_write_sectors: [u64; 2],
    /// Device write requests issued for guest data, per region.
    pub guest_write_ios: [u64; 2],
    /// Guest sectors read.
    pub guest_read_sectors: u64,
    /// Device read requests issued for guest reads.
    pub guest_read_ios: u64,
    /// Guest sectors trimmed.
    pub guest_trim_sectors: u64,
    /// Sectors read by cleaning.
    pub clean_read_sectors: u64,
    /// Sectors written by cleaning.
    pub clean_write_sectors: u64,
    /// Segments cleaned and freed.
    pub segments_cleaned: u64,
    /// Cleaning jobs started (a job cleans up to `clean_victims` segments,
    /// then commits).
    pub cleaning_jobs: u64,
    /// Bytes written to the log.
    pub log_bytes: u64,
    /// Transactions committed.
    pub commits: u64,
    /// Bytes of checkpoints written.
    pub checkpoint_bytes: u64,
    /// Checkpoints written.
    pub checkpoints: u64,
    /// Cache flushes issued.
    pub flushes: u64,
}

impl Stats {
    /// Bytes written to the image per byte the guest wrote: guest data plus
    /// cleaning copies, log and checkpoints, over guest data.
    pub fn write_amplification(&self) -> f64 {
        let guest = (self.guest_write_sectors[0] + self.guest_write_sectors[1]) * SECTOR_BYTES;
        if guest == 0 {
            return 0.0;
        }
        let total = guest + self.clean_write_sectors * SECTOR_BYTES + self.log_bytes + self.checkpoint_bytes;
        total as f64 / guest as f64
    }
}

impl std::ops::AddAssign<&Stats> for Stats {
    /// Counts of several reshapers together (the VMs of a host).
    fn add_assign(&mut self, o: &Stats) {
        for region in 0..2 {
            self.guest_write_sectors[region] += o.guest_write_sectors[region];
            self.guest_write_ios[region] += o.guest_write_ios[region];
        }
        self.guest_read_sectors += o.guest_read_sectors;
        self.guest_read_ios += o.guest_read_ios;
        self.guest_trim_sectors += o.guest_trim_sectors;
        self.clean_read_sectors += o.clean_read_sectors;
        self.clean_write_sectors += o.clean_write_sectors;
        self.segments_cleaned += o.segments_cleaned;
        self.cleaning_jobs += o.cleaning_jobs;
        self.log_bytes += o.log_bytes;
        self.commits += o.commits;
        self.checkpoint_bytes += o.checkpoint_bytes;
        self.checkpoints += o.checkpoints;
        self.flushes += o.flushes;
    }
}

/// Which per-segment count [`Reshaper::account`] changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Count {
    /// Sectors mapped into it.
    Valid,
    /// Sectors no longer mapped into it.
    Invalid,
    /// Placed sectors whose mapping was applied (or dropped).
    Applied,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SegState {
    Free,
    Open,
    Full,
    /// No valid data; reusable once transaction `after` is durable.
    Dead {
        after: u64,
    },
}

#[derive(Clone, Debug)]
struct Segment {
    valid: u64,
    state: SegState,
    /// Logical time (sectors written so far) of its last write: the age of
    /// cost-benefit cleaning.
    last_write: u64,
    /// Guest reads in flight from it.
    pins: u32,
    /// Sectors placed in it whose mapping is not applied yet.
    pending: u64,
}

#[derive(Clone, Copy, Debug)]
struct Frontier {
    seg: usize,
    used: u64,
}

#[derive(Clone, Debug)]
struct RegionState {
    area: Area,
    segs: Vec<Segment>,
    free: VecDeque<usize>,
    /// Segments in state `Dead`, waiting to become free.
    dead: Vec<usize>,
    host: Option<Frontier>,
    clean: Option<Frontier>,
    job: Option<CleanJob>,
}

/// One piece of a victim being copied: `sectors` of original `orig` from `from`.
#[derive(Clone, Copy, Debug)]
struct Move {
    orig: Sector,
    sectors: u64,
    from: Sector,
    to: Sector,
}

#[derive(Clone, Debug)]
struct CleanJob {
    victim: usize,
    /// Which segment copy this is, counted from 1 by the reshaper.
    number: u64,
    /// Victims this job emptied before this one.
    copied: u32,
    /// Valid pieces found, as (read id, offset in the read, piece).
    pieces: Vec<(IoId, u64, Move)>,
    outstanding: u32,
    writing: bool,
}

#[derive(Clone, Debug)]
enum Action {
    Write {
        request: RequestId,
        region: Region,
        /// (original start, image start, sectors) pieces.
        placed: Vec<(Sector, Sector, u64)>,
        fua: bool,
    },
    Trim {
        request: RequestId,
        start: Sector,
        sectors: u64,
    },
    Flush {
        request: RequestId,
    },
}

#[derive(Clone, Debug)]
struct Batch {
    outstanding: u32,
    actions: Vec<Action>,
}

#[derive(Clone, Debug)]
enum Owner {
    GuestWrite {
        batch: u64,
    },
    GuestRead {
        request: RequestId,
        pinned: Vec<(Region, usize)>,
    },
    CleanRead(Region),
    CleanWrite(Region),
    CommitFlush,
    CommitWrite,
}

#[derive(Clone, Debug)]
enum Closing {
    Log { bytes: Vec<u8>, at: u64, end_v: u64 },
    Checkpoint { bytes: Vec<u8>, slot: usize, log_v: u64 },
}

#[derive(Clone, Debug)]
enum Commit {
    Idle,
    Flushing { seq: u64, closing: Closing },
    Writing { seq: u64, closing: Closing },
}

/// The reshaping state of one image.
#[derive(Clone, Debug)]
pub struct Reshaper {
    layout: Layout,
    /// Original → transformed, per region.
    tables: [ExtentMap; 2],
    /// Transformed → original, per region (the segment summary the cleaner reads).
    reverse: [ExtentMap; 2],
    regions: [RegionState; 2],
    next_io: IoId,
    ios: BTreeMap<IoId, Owner>,
    out: VecDeque<Event>,
    batches: BTreeMap<u64, Batch>,
    next_batch: u64,
    held: VecDeque<Vec<Request>>,
    reads: BTreeMap<RequestId, u32>,
    running: Vec<Entry>,
    running_seq: u64,
    durable_seq: u64,
    commit: Commit,
    commit_wanted: bool,
    waiters: Vec<(u64, RequestId)>,
    /// Log positions in blocks, counted without wrapping (the block is `v % log blocks`).
    head_v: u64,
    tail_v: u64,
    next_slot: usize,
    clock: u64,
    /// Segment copies started (the number of the latest).
    copies_started: u64,
    failed: Option<ReshapeError>,
    stats: Stats,
}

impl Reshaper {
    /// A fresh image: empty tables, every segment free. Its log and checkpoint
    /// areas must hold no valid record (zeroes do).
    pub fn new(layout: Layout) -> Self {
        let region = |area: Area| {
            let n = (area.sectors / layout.segment_sectors) as usize;
            RegionState {
                area,
                segs: vec![
                    Segment {
                        valid: 0,
                        state: SegState::Free,
                        last_write: 0,
                        pins: 0,
                        pending: 0,
                    };
                    n
                ],
                free: (0..n).collect(),
                dead: Vec::new(),
                host: None,
                clean: None,
                job: None,
            }
        };
        let regions = [region(layout.meta), region(layout.data)];
        Reshaper {
            layout,
            tables: Default::default(),
            reverse: Default::default(),
            regions,
            next_io: 1,
            ios: BTreeMap::new(),
            out: VecDeque::new(),
            batches: BTreeMap::new(),
            next_batch: 0,
            held: VecDeque::new(),
            reads: BTreeMap::new(),
            running: Vec::new(),
            running_seq: 1,
            durable_seq: 0,
            commit: Commit::Idle,
            commit_wanted: false,
            waiters: Vec::new(),
            head_v: 0,
            tail_v: 0,
            next_slot: 0,
            clock: 0,
            copies_started: 0,
            failed: None,
            stats: Stats::default(),
        }
    }

    /// Where everything lives in the image.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The counters so far.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Extents in the remap tables (both regions).
    pub fn table_extents(&self) -> usize {
        self.tables[0].len() + self.tables[1].len()
    }

    /// The remap tables, per region, in original-address order.
    pub fn table(&self, region: Region) -> &ExtentMap {
        &self.tables[region.index()]
    }

    /// Memory of the remap tables and their reverse maps: extents times the
    /// bytes of a key and value (B-tree node overhead not counted).
    pub fn table_bytes(&self) -> u64 {
        let extents: usize = self.tables.iter().chain(&self.reverse).map(ExtentMap::len).sum();
        (extents * EXTENT_PAYLOAD_BYTES) as u64
    }

    /// Start the counters of [`Reshaper::stats`] again from zero (the
    /// tables, segments and log stay as they are).
    pub fn reset_stats(&mut self) {
        self.stats = Stats::default();
    }

    /// Remap memory per GiB the guest has written.
    pub fn table_bytes_per_gib_written(&self) -> f64 {
        let written = (self.stats.guest_write_sectors[0] + self.stats.guest_write_sectors[1]) * SECTOR_BYTES;
        if written == 0 {
            return 0.0;
        }
        self.table_bytes() as f64 / (written as f64 / (1u64 << 30) as f64)
    }

    /// Free segments of a region (not counting emptied ones awaiting a commit).
    pub fn free_segments(&self, region: Region) -> usize {
        self.regions[region.index()].free.len()
    }

    /// Check every invariant of the tables and the segments, returning each
    /// one broken: the forward and reverse maps are inverse (so no two
    /// original addresses share a transformed sector), every mapping lies in
    /// the disk and in its region, each segment's valid count is what the
    /// tables map into it, and the free, emptied and open segments are where
    /// their states say.
    pub fn verify(&self) -> Vec<String> {
        let mut problems = Vec::new();
        for region in Region::BOTH {
            let ri = region.index();
            let area = self.regions[ri].area;
            let mut forward: Vec<(Sector, Sector, u64)> = Vec::new();
            for e in self.tables[ri].iter() {
                if e.end() > self.layout.disk_sectors {
                    problems.push(format!("{region:?} table: {}..{} is past the disk", e.start, e.end()));
                }
                match e.target {
                    Target::At(t) => {
                        if !(area.contains(t) && t + e.sectors <= area.end()) {
                            problems.push(format!(
                                "{region:?} table: {}.. maps outside the region to {t}",
                                e.start
                            ));
                        }
                        forward.push((t, e.start, e.sectors));
                    }
                    Target::Zero if region == Region::Meta => problems.push(format!(
                        "metadata table: {}.. is trimmed (trims live in the data table)",
                        e.start
                    )),
                    Target::Zero => {}
                }
            }
            if let Some(e) = self.tables[ri].iter().find(|e| {
                let other = &self.tables[1 - ri];
                other.lookup(e.start, e.sectors).iter().any(|p| p.target.is_some())
            }) {
                problems.push(format!("{}..{} is mapped in both tables", e.start, e.end()));
            }
            // Forward pieces, sector-exact, against the reverse map.
            forward.sort_unstable();
            let mut reverse: Vec<(Sector, Sector, u64)> = Vec::new();
            for e in self.reverse[ri].iter() {
                match e.target {
                    Target::At(orig) => reverse.push((e.start, orig, e.sectors)),
                    Target::Zero => problems.push(format!("{region:?} reverse map: {}.. is not an address", e.start)),
                }
            }
            let split = |v: &[(Sector, Sector, u64)]| -> Vec<(Sector, Sector)> {
                v.iter()
                    .flat_map(|&(a, b, n)| (0..n).map(move |k| (a + k, b + k)))
                    .collect()
            };
            if split(&forward) != split(&reverse) {
                problems.push(format!("{region:?}: the table and its reverse map disagree"));
            }
            let seg_sectors = self.layout.segment_sectors;
            let mut valid = vec![0u64; self.regions[ri].segs.len()];
            for (t, _) in split(&reverse) {
                valid[((t - area.start) / seg_sectors) as usize] += 1;
            }
            let st = &self.regions[ri];
            for (i, s) in st.segs.iter().enumerate() {
                if s.valid != valid[i] {
                    problems.push(format!(
                        "{region:?} segment {i}: {} valid sectors counted, {} mapped",
                        s.valid, valid[i]
                    ));
                }
                let listed_free = st.free.iter().filter(|&&f| f == i).count();
                let listed_dead = st.dead.iter().filter(|&&d| d == i).count();
                let frontier = [st.host, st.clean].iter().flatten().filter(|f| f.seg == i).count();
                let ok = match s.state {
                    SegState::Free => listed_free == 1 && listed_dead == 0 && frontier == 0 && valid[i] == 0,
                    SegState::Dead { .. } => listed_dead == 1 && listed_free == 0 && frontier == 0 && valid[i] == 0,
                    SegState::Open => listed_free + listed_dead == 0 && frontier == 1,
                    SegState::Full => listed_free + listed_dead == 0 && frontier == 0,
                };
                if !ok {
                    problems.push(format!(
                        "{region:?} segment {i}: state {:?} but listed free {listed_free}, emptied {listed_dead}, \
                         frontier {frontier}, {} valid",
                        s.state, valid[i]
                    ));
                }
            }
        }
        problems
    }

    /// Guest requests taken but not yet reported done (or failed): held for
    /// room, waiting for their data or for a commit, or reads in flight.
    pub fn guest_outstanding(&self) -> usize {
        let held: usize = self.held.iter().map(Vec::len).sum();
        let unretired: usize = self.batches.values().map(|b| b.actions.len()).sum();
        held + unretired + self.reads.len() + self.waiters.len()
    }

    /// I/O asked for and not yet reported complete.
    pub fn io_outstanding(&self) -> usize {
        self.ios.len()
    }

    /// The last transaction known durable.
    pub fn durable_seq(&self) -> u64 {
        self.durable_seq
    }

    /// The next event, if any.
    pub fn poll(&mut self) -> Option<Event> {
        self.out.pop_front()
    }

    /// Take a batch of guest requests. Each is checked before any is taken;
    /// a bad one refuses the whole batch and changes nothing. Ids of
    /// outstanding requests must differ (completions are reported by id).
    pub fn submit(&mut self, batch: &[Request]) -> Result<(), ReshapeError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        for r in batch {
            let end = r.sector.saturating_add(r.sectors as u64);
            if matches!(r.op, Op::Read | Op::Write | Op::Discard) && end > self.layout.disk_sectors {
                return Err(ReshapeError::PastEnd {
                    request: r.id,
                    sector: r.sector,
                    end,
                    disk: self.layout.disk_sectors,
                });
            }
            if r.op == Op::Write {
                let region = self.classify(r);
                let room = self.host_capacity(region);
                if r.sectors as u64 > room {
                    return Err(ReshapeError::TooLarge {
                        request: r.id,
                        sectors: r.sectors as u64,
                        region,
                        room,
                    });
                }
            }
        }
        self.held.push_back(batch.to_vec());
        self.pump();
        Ok(())
    }

    /// Take a guest FLUSH on its own, ahead of held batches. It covers
    /// every write and trim already reported [`Event::Done`] (a FLUSH owes
    /// nothing to writes not yet completed), so it never waits for held
    /// writes to find room, that is for the cleaner: it is done now
    /// (`Ok(None)`, [`Event::Done`] queued) or when transaction `seq` is
    /// durable (`Ok(Some(seq))`), whose commit starts as soon as the one in
    /// progress, if any, is over. [`submit`](Self::submit) instead keeps a
    /// FLUSH in its batch's order, as a virtio ring's requests are taken.
    pub fn flush(&mut self, request: RequestId) -> Result<Option<u64>, ReshapeError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let seq = self.covering_seq();
        let waits = (seq > self.durable_seq).then_some(seq);
        match waits {
            None => self.out.push_back(Event::Done(request)),
            Some(seq) => {
                self.waiters.push((seq, request));
                self.commit_wanted = true;
            }
        }
        self.pump();
        Ok(waits)
    }

    /// The transaction whose commit is in progress (its cache flush or its
    /// log or checkpoint write outstanding), if any.
    pub fn committing(&self) -> Option<u64> {
        match &self.commit {
            Commit::Idle => None,
            Commit::Flushing { seq, .. } | Commit::Writing { seq, .. } => Some(*seq),
        }
    }

    /// Whether `region`'s cleaner is copying a victim (its reads or writes
    /// issued and the copy not yet applied to the table).
    pub fn cleaning(&self, region: Region) -> bool {
        self.regions[region.index()].job.is_some()
    }

    /// The segment copy `region`'s cleaner has in progress, by number
    /// (counted from 1 over both regions): a job that cleans several
    /// victims copies them one after another, each under its own number.
    pub fn segment_copy(&self, region: Region) -> Option<u64> {
        self.regions[region.index()].job.as_ref().map(|j| j.number)
    }

    /// Whether a guest request (a FLUSH or a FUA write) waits for a commit.
    pub fn commit_awaited(&self) -> bool {
        !self.waiters.is_empty()
    }

    /// Report the completion of an I/O from [`poll`](Self::poll).
    pub fn complete(&mut self, io: IoId) -> Result<(), ReshapeError> {
        let owner = self.ios.remove(&io).ok_or(ReshapeError::UnknownIo(io))?;
        match owner {
            Owner::GuestWrite { batch } => {
                self.batches
                    .get_mut(&batch)
                    .expect("batch of an outstanding write")
                    .outstanding -= 1;
            }
            Owner::GuestRead { request, pinned } => {
                for (r, s) in pinned {
                    self.regions[r.index()].segs[s].pins -= 1;
                }
                let left = self.reads.get_mut(&request).expect("read of an outstanding piece");
                *left -= 1;
                if *left == 0 {
                    self.reads.remove(&request);
                    self.out.push_back(Event::Done(request));
                }
            }
            Owner::CleanRead(r) | Owner::CleanWrite(r) => {
                self.regions[r.index()]
                    .job
                    .as_mut()
                    .expect("job of a cleaning I/O")
                    .outstanding -= 1;
            }
            Owner::CommitFlush => {
                let Commit::Flushing { seq, closing } = std::mem::replace(&mut self.commit, Commit::Idle) else {
                    unreachable!("a commit flush completes while flushing")
                };
                let (kind, sector, bytes) = match &closing {
                    Closing::Log { bytes, at, .. } => {
                        self.stats.log_bytes += bytes.len() as u64;
                        self.stats.commits += 1;
                        (
                            IoKind::Log,
                            self.layout.log.start + at * self.layout.block_sectors,
                            bytes,
                        )
                    }
                    Closing::Checkpoint { bytes, slot, .. } => {
                        self.stats.checkpoint_bytes += bytes.len() as u64;
                        self.stats.checkpoints += 1;
                        (IoKind::Checkpoint, self.layout.checkpoints[*slot].start, bytes)
                    }
                };
                let sectors = bytes.len() as u64 / SECTOR_BYTES;
                let payload = Payload::Bytes(bytes.clone());
                self.emit(kind, sector, sectors, true, payload, Owner::CommitWrite);
                self.commit = Commit::Writing { seq, closing };
            }
            Owner::CommitWrite => {
                let Commit::Writing { seq, closing } = std::mem::replace(&mut self.commit, Commit::Idle) else {
                    unreachable!("a commit write completes while writing")
                };
                match closing {
                    Closing::Log { end_v, .. } => self.head_v = self.head_v.max(end_v),
                    Closing::Checkpoint { slot, log_v, .. } => {
                        self.tail_v = log_v;
                        self.next_slot = 1 - slot;
                    }
                }
                self.durable_seq = seq;
                let durable = self.durable_seq;
                let mut i = 0;
                while i < self.waiters.len() {
                    if self.waiters[i].0 <= durable {
                        let (_, request) = self.waiters.remove(i);
                        self.out.push_back(Event::Done(request));
                    } else {
                        i += 1;
                    }
                }
            }
        }
        self.pump();
        Ok(())
    }

    fn classify(&self, r: &Request) -> Region {
        if r.meta {
            Region::Meta
        } else {
            Region::Data
        }
    }

    fn hard_reserve(&self, region: Region) -> usize {
        let n = self.regions[region.index()].segs.len();
        ((self.layout.config.clean_hard * n as f64).ceil() as usize).max(1)
    }

    fn start_count(&self, region: Region) -> usize {
        let n = self.regions[region.index()].segs.len();
        (self.layout.config.clean_start * n as f64).ceil() as usize
    }

    /// The most one write could ever be given: every segment but the
    /// reserve, the cleaner's frontier and the guest's partly used one.
    fn host_capacity(&self, region: Region) -> u64 {
        let n = self.regions[region.index()].segs.len();
        (n.saturating_sub(self.hard_reserve(region) + 2)) as u64 * self.layout.segment_sectors
    }

    /// Sectors the guest (or the cleaner) can be given right now.
    fn room(&self, region: Region, cleaner: bool) -> u64 {
        let st = &self.regions[region.index()];
        let f = if cleaner { st.clean } else { st.host };
        let in_frontier = f.map_or(0, |f| self.layout.segment_sectors - f.used);
        let usable = if cleaner {
            st.free.len()
        } else {
            st.free.len().saturating_sub(self.hard_reserve(region))
        };
        in_frontier + usable as u64 * self.layout.segment_sectors
    }

    /// Place `sectors` at a frontier: image extents in order (room checked).
    fn allocate(&mut self, region: Region, cleaner: bool, mut sectors: u64) -> Vec<(Sector, u64)> {
        let seg_sectors = self.layout.segment_sectors;
        let mut out: Vec<(Sector, u64)> = Vec::new();
        while sectors > 0 {
            let st = &mut self.regions[region.index()];
            let slot = if cleaner { &mut st.clean } else { &mut st.host };
            let mut f = match *slot {
                Some(f) => f,
                None => {
                    let seg = st.free.pop_front().expect("room was checked");
                    st.segs[seg].state = SegState::Open;
                    Frontier { seg, used: 0 }
                }
            };
            let take = sectors.min(seg_sectors - f.used);
            let at = st.area.start + f.seg as u64 * seg_sectors + f.used;
            f.used += take;
            sectors -= take;
            self.clock += take;
            st.segs[f.seg].last_write = self.clock;
            st.segs[f.seg].pending += take;
            match out.last_mut() {
                Some((s, n)) if *s + *n == at => *n += take,
                _ => out.push((at, take)),
            }
            if f.used == seg_sectors {
                *slot = None;
                let seg = f.seg;
                st.segs[seg].state = SegState::Full;
                self.maybe_dead(region, seg);
            } else {
                *slot = Some(f);
            }
        }
        out
    }

    fn region_of(&self, sector: Sector) -> Region {
        if self.layout.meta.contains(sector) {
            Region::Meta
        } else {
            Region::Data
        }
    }

    fn seg_of(&self, region: Region, sector: Sector) -> usize {
        ((sector - self.regions[region.index()].area.start) / self.layout.segment_sectors) as usize
    }

    /// The transaction that will hold every change applied so far (the
    /// running entries are committed `commit_entries` at a time).
    fn covering_seq(&self) -> u64 {
        let limit = self.layout.config.commit_entries as usize;
        if self.running.is_empty() {
            self.running_seq - 1
        } else {
            self.running_seq + ((self.running.len() - 1) / limit) as u64
        }
    }

    fn maybe_dead(&mut self, region: Region, seg: usize) {
        let after = self.covering_seq();
        let st = &mut self.regions[region.index()];
        let victim = st.job.as_ref().is_some_and(|j| j.victim == seg);
        let s = &mut st.segs[seg];
        if s.state == SegState::Full && s.valid == 0 && s.pending == 0 && !victim {
            s.state = SegState::Dead { after };
            st.dead.push(seg);
        }
    }

    /// Change the count `what` of image sectors `[at, at + sectors)`, segment by segment.
    fn account(&mut self, region: Region, at: Sector, sectors: u64, what: Count) {
        let seg_sectors = self.layout.segment_sectors;
        let (mut at, end) = (at, at + sectors);
        while at < end {
            let seg = self.seg_of(region, at);
            let seg_end = self.regions[region.index()].area.start + (seg as u64 + 1) * seg_sectors;
            let n = end.min(seg_end) - at;
            let s = &mut self.regions[region.index()].segs[seg];
            match what {
                Count::Valid => s.valid += n,
                Count::Invalid => s.valid -= n,
                Count::Applied => s.pending -= n,
            }
            if what != Count::Valid {
                self.maybe_dead(region, seg);
            }
            at += n;
        }
    }

    /// Forget what `removed` extents of `region`'s table held.
    fn invalidate(&mut self, region: Region, removed: Vec<Extent>) {
        for e in removed {
            if let Target::At(t) = e.target {
                self.reverse[region.index()].remove(t, e.sectors);
                self.account(region, t, e.sectors, Count::Invalid);
            }
        }
    }

    /// Apply one remap entry to the tables (live and in recovery alike).
    fn apply(&mut self, e: &Entry) {
        match e.mapping {
            Mapping::Map(Target::At(t)) => {
                let region = self.region_of(t);
                let other = if region == Region::Meta {
                    Region::Data
                } else {
                    Region::Meta
                };
                let gone = self.tables[other.index()].remove(e.start, e.sectors);
                self.invalidate(other, gone);
                let gone = self.tables[region.index()].insert(e.start, e.sectors, Target::At(t));
                self.invalidate(region, gone);
                self.reverse[region.index()].insert(t, e.sectors, Target::At(e.start));
                self.account(region, t, e.sectors, Count::Valid);
            }
            Mapping::Map(Target::Zero) => {
                let gone = self.tables[0].remove(e.start, e.sectors);
                self.invalidate(Region::Meta, gone);
                let gone = self.tables[1].insert(e.start, e.sectors, Target::Zero);
                self.invalidate(Region::Data, gone);
            }
            Mapping::Unmap => {
                for r in Region::BOTH {
                    let gone = self.tables[r.index()].remove(e.start, e.sectors);
                    self.invalidate(r, gone);
                }
            }
        }
    }

    fn emit(&mut self, kind: IoKind, sector: Sector, sectors: u64, fua: bool, payload: Payload, owner: Owner) -> IoId {
        let id = self.next_io;
        self.next_io += 1;
        let op = kind.op();
        self.ios.insert(id, owner);
        if op == Op::Flush {
            self.stats.flushes += 1;
        }
        self.out.push_back(Event::Io(Io {
            id,
            kind,
            op,
            sector,
            sectors,
            fua,
            payload,
        }));
        id
    }

    /// Run everything that can run now, until nothing changes.
    fn pump(&mut self) {
        loop {
            let mut progress = self.retire();
            progress |= self.release_dead();
            progress |= self.take_held();
            for r in Region::BOTH {
                progress |= self.clean_step(r);
            }
            progress |= self.commit_step();
            if !progress {
                break;
            }
        }
        self.check_stuck();
    }

    /// Apply completed batches to the tables, in submission order.
    fn retire(&mut self) -> bool {
        let mut progress = false;
        while let Some((&id, b)) = self.batches.iter().next() {
            if b.outstanding > 0 {
                break;
            }
            let batch = self.batches.remove(&id).expect("first batch");
            progress = true;
            for action in batch.actions {
                match action {
                    Action::Write {
                        request,
                        region,
                        placed,
                        fua,
                    } => {
                        for (orig, at, sectors) in placed {
                            let e = Entry {
                                start: orig,
                                sectors,
                                mapping: Mapping::Map(Target::At(at)),
                            };
                            // Pushed first: a segment this empties waits for the transaction holding it.
                            self.running.push(e);
                            self.apply(&e);
                            self.account(region, at, sectors, Count::Applied);
                        }
                        if fua {
                            // An empty FUA write adds no entry: it may be durable already.
                            self.done_when_durable(self.covering_seq(), request);
                        } else {
                            self.out.push_back(Event::Done(request));
                        }
                    }
                    // An empty trim changes nothing; its entry could not be decoded.
                    Action::Trim {
                        request, sectors: 0, ..
                    } => self.out.push_back(Event::Done(request)),
                    Action::Trim {
                        request,
                        start,
                        sectors,
                    } => {
                        let mapping = if self.layout.config.base {
                            Mapping::Map(Target::Zero)
                        } else {
                            Mapping::Unmap
                        };
                        let e = Entry {
                            start,
                            sectors,
                            mapping,
                        };
                        // Pushed first: a segment this empties waits for the transaction holding it.
                        self.running.push(e);
                        self.apply(&e);
                        self.out.push_back(Event::Done(request));
                    }
                    Action::Flush { request } => self.done_when_durable(self.covering_seq(), request),
                }
            }
        }
        progress
    }

    /// `request` is done once transaction `seq` is durable: now if it is,
    /// else when a commit makes it so.
    fn done_when_durable(&mut self, seq: u64, request: RequestId) {
        if seq <= self.durable_seq {
            self.out.push_back(Event::Done(request));
        } else {
            self.waiters.push((seq, request));
            self.commit_wanted = true;
        }
    }

    /// Emptied segments whose emptying is durable become free.
    fn release_dead(&mut self) -> bool {
        let durable = self.durable_seq;
        let mut progress = false;
        for st in &mut self.regions {
            let segs = &st.segs;
            let ready =
                |&i: &usize| matches!(segs[i].state, SegState::Dead { after } if after <= durable) && segs[i].pins == 0;
            let (mut now, later): (Vec<usize>, Vec<usize>) = st.dead.iter().copied().partition(ready);
            st.dead = later;
            // Freed in segment order, whatever order they died in.
            now.sort_unstable();
            for i in now {
                debug_assert_eq!(st.segs[i].valid, 0, "a dead segment holds no valid sector");
                st.segs[i].state = SegState::Free;
                st.free.push_back(i);
                progress = true;
            }
        }
        progress
    }

    /// Serve held batches while their writes find room.
    fn take_held(&mut self) -> bool {
        let mut progress = false;
        while let Some(batch) = self.held.pop_front() {
            let mut need = [0u64; 2];
            let mut cut = batch.len();
            for (i, r) in batch.iter().enumerate() {
                if r.op == Op::Write {
                    let region = self.classify(r);
                    need[region.index()] += r.sectors as u64;
                    if need[region.index()] > self.room(region, false) {
                        cut = i;
                        break;
                    }
                }
            }
            if cut == 0 {
                self.held.push_front(batch);
                break;
            }
            let (now, later) = batch.split_at(cut);
            self.start_batch(now);
            progress = true;
            if !later.is_empty() {
                self.held.push_front(later.to_vec());
                break;
            }
        }
        progress
    }

    /// Issue a batch: reads now, writes placed back to back per region and
    /// merged where contiguous (Fig. 3), trims and flushes in order.
    fn start_batch(&mut self, batch: &[Request]) {
        let id = self.next_batch;
        self.next_batch += 1;
        let mut actions = Vec::new();
        let mut runs: [Vec<(Sector, u64, Vec<GuestSlice>)>; 2] = Default::default();
        for r in batch {
            match r.op {
                Op::Read => self.start_read(r),
                Op::Write => {
                    let region = self.classify(r);
                    let sectors = r.sectors as u64;
                    self.stats.guest_write_sectors[region.index()] += sectors;
                    let mut offset = 0;
                    let mut placed = Vec::new();
                    for (at, n) in self.allocate(region, false, sectors) {
                        placed.push((r.sector + offset, at, n));
                        let slice = GuestSlice {
                            request: r.id,
                            offset,
                            sectors: n,
                        };
                        let list = &mut runs[region.index()];
                        match list.last_mut() {
                            Some((s, len, slices)) if *s + *len == at => {
                                *len += n;
                                slices.push(slice);
                            }
                            _ => list.push((at, n, vec![slice])),
                        }
                        offset += n;
                    }
                    actions.push(Action::Write {
                        request: r.id,
                        region,
                        placed,
                        fua: r.fua,
                    });
                }
                Op::Discard => {
                    self.stats.guest_trim_sectors += r.sectors as u64;
                    actions.push(Action::Trim {
                        request: r.id,
                        start: r.sector,
                        sectors: r.sectors as u64,
                    });
                }
                Op::Flush => actions.push(Action::Flush { request: r.id }),
            }
        }
        let mut outstanding = 0;
        for region in Region::BOTH {
            for (at, n, slices) in std::mem::take(&mut runs[region.index()]) {
                self.stats.guest_write_ios[region.index()] += 1;
                self.emit(
                    IoKind::GuestWrite(region),
                    at,
                    n,
                    false,
                    Payload::Guest(slices),
                    Owner::GuestWrite { batch: id },
                );
                outstanding += 1;
            }
        }
        self.batches.insert(id, Batch { outstanding, actions });
    }

    /// Split a read across the extents it touches: metadata table first,
    /// then the data table, then the base image (or zeroes).
    fn start_read(&mut self, r: &Request) {
        self.stats.guest_read_sectors += r.sectors as u64;
        let mut pieces = Vec::new();
        for p in self.tables[0].lookup(r.sector, r.sectors as u64) {
            match p.target {
                Some(t) => pieces.push((p.start, p.sectors, Some(t), Region::Meta)),
                None => {
                    for q in self.tables[1].lookup(p.start, p.sectors) {
                        pieces.push((q.start, q.sectors, q.target, Region::Data));
                    }
                }
            }
        }
        let mut count = 0;
        for (start, sectors, target, region) in pieces {
            let (at, pinned) = match target {
                Some(Target::Zero) => continue,
                None if !self.layout.config.base => continue,
                None => (self.layout.base.start + start, Vec::new()),
                Some(Target::At(t)) => {
                    let first = self.seg_of(region, t);
                    let last = self.seg_of(region, t + sectors - 1);
                    let pinned: Vec<(Region, usize)> = (first..=last).map(|s| (region, s)).collect();
                    for &(_, s) in &pinned {
                        self.regions[region.index()].segs[s].pins += 1;
                    }
                    (t, pinned)
                }
            };
            let slice = GuestSlice {
                request: r.id,
                offset: start - r.sector,
                sectors,
            };
            self.stats.guest_read_ios += 1;
            self.emit(
                IoKind::GuestRead,
                at,
                sectors,
                false,
                Payload::Guest(vec![slice]),
                Owner::GuestRead { request: r.id, pinned },
            );
            count += 1;
        }
        if count == 0 {
            self.out.push_back(Event::Done(r.id));
        } else {
            self.reads.insert(r.id, count);
        }
    }

    fn pick_victim(&self, region: Region) -> Option<usize> {
        let st = &self.regions[region.index()];
        let seg_sectors = self.layout.segment_sectors as f64;
        let mut best: Option<(f64, usize)> = None;
        for (i, s) in st.segs.iter().enumerate() {
            if s.state != SegState::Full || s.pending > 0 || s.valid as f64 >= seg_sectors {
                continue;
            }
            let u = s.valid as f64 / seg_sectors;
            let score = match self.layout.config.victim {
                Victim::Greedy => 1.0 - u,
                Victim::CostBenefit => (1.0 - u) * (self.clock - s.last_write + 1) as f64 / (1.0 + u),
            };
            if best.is_none_or(|(b, _)| score > b) {
                best = Some((score, i));
            }
        }
        best.map(|(_, i)| i)
    }

    fn needs_space(&self, region: Region) -> bool {
        let st = &self.regions[region.index()];
        st.free.len() + st.dead.len() < self.start_count(region) || self.held_wants(region)
    }

    fn held_wants(&self, region: Region) -> bool {
        self.held
            .front()
            .and_then(|b| b.iter().find(|r| r.op == Op::Write))
            .is_some_and(|r| self.classify(r) == region)
    }

    /// Advance the region's cleaning job, or start one.
    fn clean_step(&mut self, region: Region) -> bool {
        let ri = region.index();
        let Some(job) = &self.regions[ri].job else {
            if !self.needs_space(region) {
                return false;
            }
            // Emptied segments waiting for a commit: commit rather than clean more.
            let st = &self.regions[ri];
            let dead_waiting = st
                .dead
                .iter()
                .any(|&i| matches!(st.segs[i].state, SegState::Dead { after } if after > self.durable_seq));
            if dead_waiting {
                self.commit_wanted = true;
                return false;
            }
            let Some(victim) = self.pick_victim(region) else {
                return false;
            };
            self.stats.cleaning_jobs += 1;
            self.start_clean(region, victim, 0);
            return true;
        };
        if job.outstanding > 0 {
            return false;
        }
        if !job.writing {
            let total: u64 = job.pieces.iter().map(|p| p.2.sectors).sum();
            if total > self.room(region, true) {
                self.commit_wanted = true;
                return false;
            }
            self.copy_out(region, total);
            true
        } else {
            self.finish_clean(region);
            true
        }
    }

    fn start_clean(&mut self, region: Region, victim: usize, copied: u32) {
        let ri = region.index();
        self.copies_started += 1;
        let seg_sectors = self.layout.segment_sectors;
        let start = self.regions[ri].area.start + victim as u64 * seg_sectors;
        let valid: Vec<Move> = self.reverse[ri]
            .lookup(start, seg_sectors)
            .into_iter()
            .filter_map(|p| match p.target {
                Some(Target::At(orig)) => Some(Move {
                    orig,
                    sectors: p.sectors,
                    from: p.start,
                    to: 0,
                }),
                _ => None,
            })
            .collect();
        self.regions[ri].job = Some(CleanJob {
            victim,
            number: self.copies_started,
            copied,
            pieces: Vec::new(),
            outstanding: 0,
            writing: false,
        });
        // One read per run of contiguous valid pieces.
        let mut pieces = Vec::new();
        let mut i = 0;
        let mut outstanding = 0;
        while i < valid.len() {
            let mut j = i + 1;
            while j < valid.len() && valid[j - 1].from + valid[j - 1].sectors == valid[j].from {
                j += 1;
            }
            let at = valid[i].from;
            let sectors = valid[j - 1].from + valid[j - 1].sectors - at;
            self.stats.clean_read_sectors += sectors;
            let read = self.emit(
                IoKind::CleanRead(region),
                at,
                sectors,
                false,
                Payload::None,
                Owner::CleanRead(region),
            );
            outstanding += 1;
            for m in &valid[i..j] {
                pieces.push((read, m.from - at, *m));
            }
            i = j;
        }
        let job = self.regions[ri].job.as_mut().expect("job just set");
        job.pieces = pieces;
        job.outstanding = outstanding;
    }

    fn copy_out(&mut self, region: Region, total: u64) {
        let ri = region.index();
        let places = self.allocate(region, true, total);
        let mut job = self.regions[ri].job.take().expect("a job copies out");
        let mut moves = Vec::new();
        let mut writes = Vec::new();
        let mut pieces = job.pieces.iter().copied().peekable();
        let mut carry: Option<(IoId, u64, Move)> = None;
        for (at, n) in places {
            let mut slices = Vec::new();
            let mut filled = 0;
            while filled < n {
                let (read, off, m) = carry.take().or_else(|| pieces.next()).expect("pieces fill the places");
                let take = m.sectors.min(n - filled);
                slices.push(CopySlice {
                    read,
                    offset: off,
                    sectors: take,
                });
                moves.push(Move {
                    orig: m.orig,
                    sectors: take,
                    from: m.from,
                    to: at + filled,
                });
                if take < m.sectors {
                    carry = Some((
                        read,
                        off + take,
                        Move {
                            orig: m.orig + take,
                            sectors: m.sectors - take,
                            from: m.from + take,
                            to: 0,
                        },
                    ));
                }
                filled += take;
            }
            writes.push((at, n, slices));
        }
        job.pieces = moves.into_iter().map(|m| (0, 0, m)).collect();
        job.writing = true;
        job.outstanding = writes.len() as u32;
        self.regions[ri].job = Some(job);
        for (at, n, slices) in writes {
            self.stats.clean_write_sectors += n;
            self.emit(
                IoKind::CleanWrite(region),
                at,
                n,
                false,
                Payload::Copy(slices),
                Owner::CleanWrite(region),
            );
        }
    }

    /// Point the table at the copies wherever it still points at the victim.
    fn finish_clean(&mut self, region: Region) {
        let ri = region.index();
        let job = self.regions[ri].job.take().expect("a job finishes");
        for (_, _, m) in &job.pieces {
            for p in self.tables[ri].lookup(m.orig, m.sectors) {
                let off = p.start - m.orig;
                if p.target == Some(Target::At(m.from + off)) {
                    let e = Entry {
                        start: p.start,
                        sectors: p.sectors,
                        mapping: Mapping::Map(Target::At(m.to + off)),
                    };
                    // Pushed first: a segment this empties waits for the transaction holding it.
                    self.running.push(e);
                    self.apply(&e);
                }
            }
            self.account(region, m.to, m.sectors, Count::Applied);
        }
        let after = self.covering_seq();
        let s = &mut self.regions[ri].segs[job.victim];
        debug_assert_eq!(s.valid, 0, "every valid piece of the victim was moved");
        // The last move may already have marked it dead (the job is taken).
        if !matches!(s.state, SegState::Dead { .. }) {
            self.regions[ri].dead.push(job.victim);
        }
        self.regions[ri].segs[job.victim].state = SegState::Dead { after };
        self.stats.segments_cleaned += 1;
        match self.next_victim(region, job.copied + 1) {
            Some(victim) => self.start_clean(region, victim, job.copied + 1),
            None => self.commit_wanted = true,
        }
    }

    /// The victim a job that has emptied `copied` segments goes on to, if
    /// any: while it may copy more (`clean_victims`), the region still
    /// wants space, and the victim's valid sectors fit where the cleaner
    /// can write now. The commit that frees the job's victims comes after
    /// the last; a commit wanted meanwhile (a guest FLUSH) runs between
    /// two copies and covers those done.
    fn next_victim(&self, region: Region, copied: u32) -> Option<usize> {
        if copied >= self.layout.config.clean_victims || !self.needs_space(region) {
            return None;
        }
        let victim = self.pick_victim(region)?;
        let valid = self.regions[region.index()].segs[victim].valid;
        (valid <= self.room(region, true)).then_some(victim)
    }

    /// Start a commit if one is wanted and none is running: a log
    /// transaction of at most `commit_entries` entries, or a checkpoint of
    /// the whole table once the log since the last one is `checkpoint_at` full.
    fn commit_step(&mut self) -> bool {
        if !matches!(self.commit, Commit::Idle) || self.running.is_empty() {
            return false;
        }
        let limit = self.layout.config.commit_entries as usize;
        if !self.commit_wanted && self.running.len() < limit {
            return false;
        }
        let block = (self.layout.block_sectors * SECTOR_BYTES) as usize;
        let log_blocks = self.layout.log.sectors / self.layout.block_sectors;
        let take = self.running.len().min(limit);
        let bytes = encoding::encode_tx(self.running_seq, &self.running[..take], block);
        let blocks = (bytes.len() / block) as u64;
        let mut at_v = self.head_v;
        if at_v % log_blocks + blocks > log_blocks {
            at_v = at_v.div_ceil(log_blocks) * log_blocks;
        }
        let end_v = at_v + blocks;
        let used = end_v - self.tail_v;
        let closing = if used as f64 > self.layout.config.checkpoint_at * log_blocks as f64 {
            // The checkpoint covers every running entry: it stands for all
            // the transactions they would have made.
            let seq = self.covering_seq();
            match self.encode_checkpoint(seq) {
                Ok(bytes) => {
                    self.running.clear();
                    self.running_seq = seq + 1;
                    self.commit_wanted = false;
                    Some((
                        seq,
                        Closing::Checkpoint {
                            bytes,
                            slot: self.next_slot,
                            log_v: self.head_v,
                        },
                    ))
                }
                Err(e) if used > log_blocks => {
                    self.failed = Some(e);
                    return false;
                }
                // Keep logging while the log has room.
                Err(_) => None,
            }
        } else {
            None
        };
        let (seq, closing) = closing.unwrap_or_else(|| {
            let seq = self.running_seq;
            self.running.drain(..take);
            self.running_seq += 1;
            self.commit_wanted &= !self.running.is_empty();
            (
                seq,
                Closing::Log {
                    bytes,
                    at: at_v % log_blocks,
                    end_v,
                },
            )
        });
        self.emit(IoKind::Flush, 0, 0, false, Payload::None, Owner::CommitFlush);
        self.commit = Commit::Flushing { seq, closing };
        true
    }

    /// The whole table as a checkpoint of transaction `seq`, if it fits a slot.
    fn encode_checkpoint(&self, seq: u64) -> Result<Vec<u8>, ReshapeError> {
        let block = (self.layout.block_sectors * SECTOR_BYTES) as usize;
        let log_blocks = self.layout.log.sectors / self.layout.block_sectors;
        let table: Vec<Entry> = self.tables[0]
            .iter()
            .chain(self.tables[1].iter())
            .map(|e| Entry {
                start: e.start,
                sectors: e.sectors,
                mapping: Mapping::Map(e.target),
            })
            .collect();
        let bytes = encoding::encode_checkpoint(seq, self.head_v % log_blocks, &table, block);
        let slot_bytes = self.layout.checkpoints[self.next_slot].sectors * SECTOR_BYTES;
        if bytes.len() as u64 > slot_bytes {
            return Err(ReshapeError::TableTooLarge {
                entries: table.len(),
                slot_bytes,
            });
        }
        Ok(bytes)
    }

    /// Held writes that no cleaning, commit or completion can ever make room
    /// for fail rather than wait forever.
    fn check_stuck(&mut self) {
        let Some(first) = self.held.front() else {
            return;
        };
        let Some(region) = first.iter().find(|r| r.op == Op::Write).map(|r| self.classify(r)) else {
            return;
        };
        let st = &self.regions[region.index()];
        let busy = st.job.is_some()
            || !self.ios.is_empty()
            || !self.batches.is_empty()
            || !st.dead.is_empty()
            || self.pick_victim(region).is_some();
        if busy {
            return;
        }
        let error = ReshapeError::RegionFull { region };
        for batch in std::mem::take(&mut self.held) {
            for r in batch {
                self.out.push_back(Event::Failed(r.id, error.clone()));
            }
        }
    }

    /// Rebuild the state of an image after a stop, clean or not (§III.B.3):
    /// the newest valid checkpoint, then every committed transaction after it
    /// in the log; an uncommitted or torn transaction ends the log and is
    /// discarded. `checkpoints` are the two slots' bytes and `log` the log
    /// area's, as [`Layout`] places them.
    pub fn recover(
        layout: Layout,
        checkpoints: [&[u8]; 2],
        log: &[u8],
    ) -> Result<(Reshaper, RecoveryReport), RecoveryError> {
        let block = (layout.block_sectors * SECTOR_BYTES) as usize;
        let log_blocks = layout.log.sectors / layout.block_sectors;
        if log.len() as u64 != log_blocks * block as u64 {
            return Err(RecoveryError::Size {
                what: "log area",
                expected: log_blocks * block as u64,
                got: log.len() as u64,
            });
        }
        let mut best: Option<encoding::Checkpoint> = None;
        for (slot, bytes) in checkpoints.iter().enumerate() {
            match encoding::decode_checkpoint(bytes) {
                Ok(c) => {
                    if best.as_ref().is_none_or(|b| c.seq > b.seq) {
                        best = Some(c);
                    }
                }
                // A newer format, or a malformed entry under a good checksum: not a
                // torn write but something recovery must not guess about.
                Err(error @ (DecodeError::Version { .. } | DecodeError::Entry { .. })) => {
                    return Err(RecoveryError::Checkpoint { slot, error })
                }
                Err(_) => {}
            }
        }
        let mut r = Reshaper::new(layout);
        let mut report = RecoveryReport {
            checkpoint_seq: best.as_ref().map(|c| c.seq),
            transactions_replayed: 0,
            entries_replayed: 0,
            log_end: None,
            table_extents: 0,
        };
        let (mut seq, start_block) = match &best {
            Some(c) => {
                if c.log_block >= log_blocks {
                    return Err(RecoveryError::BadEntry {
                        place: format!("checkpoint {}", c.seq),
                        index: 0,
                        what: format!("log block {} is past the log ({log_blocks} blocks)", c.log_block),
                    });
                }
                for (i, e) in c.entries.iter().enumerate() {
                    r.check_entry(e, || format!("checkpoint {}", c.seq), i)?;
                    r.apply(e);
                }
                (c.seq + 1, c.log_block)
            }
            None => (1, 0),
        };
        r.tail_v = start_block;
        r.head_v = start_block;
        loop {
            let at = r.head_v % log_blocks;
            let try_at = |pos: u64| -> Result<(u64, Vec<Entry>), DecodeError> {
                let from = pos as usize * block;
                let blocks = encoding::tx_blocks_at(&log[from..], seq)?;
                if blocks == 0 || pos + blocks as u64 > log_blocks {
                    return Err(DecodeError::Truncated {
                        needed: blocks * block,
                        available: log.len() - from,
                    });
                }
                let entries = encoding::decode_tx(&log[from..from + blocks * block], seq)?;
                Ok((blocks as u64, entries))
            };
            let (at_v, found) = match try_at(at) {
                Ok(x) => (r.head_v, Ok(x)),
                Err(e) => {
                    let wrapped = r.head_v.div_ceil(log_blocks) * log_blocks;
                    match (at != 0).then(|| try_at(0)) {
                        Some(Ok(x)) => (wrapped.max(r.head_v), Ok(x)),
                        _ => (r.head_v, Err(e)),
                    }
                }
            };
            let (blocks, entries) = match found {
                Ok(x) => x,
                Err(error @ (DecodeError::Version { .. } | DecodeError::Entry { .. })) => {
                    return Err(RecoveryError::Log { seq, block: at, error })
                }
                Err(e) => {
                    report.log_end = Some(e);
                    break;
                }
            };
            if at_v + blocks - r.tail_v > log_blocks {
                break;
            }
            for (i, e) in entries.iter().enumerate() {
                r.check_entry(e, || format!("log transaction {seq}"), i)?;
                r.apply(e);
            }
            report.transactions_replayed += 1;
            report.entries_replayed += entries.len() as u64;
            r.head_v = at_v + blocks;
            seq += 1;
        }
        r.running_seq = seq;
        r.durable_seq = seq - 1;
        // Slot to write next: the one not holding the checkpoint used.
        if let Some(c) = &best {
            let slot_of_best = checkpoints
                .iter()
                .position(|b| encoding::decode_checkpoint(b).is_ok_and(|d| d.seq == c.seq))
                .unwrap_or(0);
            r.next_slot = 1 - slot_of_best;
        }
        for st in &mut r.regions {
            st.free.clear();
            for (i, s) in st.segs.iter_mut().enumerate() {
                s.state = if s.valid > 0 { SegState::Full } else { SegState::Free };
                if s.valid == 0 {
                    st.free.push_back(i);
                }
            }
        }
        report.table_extents = r.table_extents();
        Ok((r, report))
    }

    fn check_entry(&self, e: &Entry, place: impl Fn() -> String, index: usize) -> Result<(), RecoveryError> {
        let bad = |what: String| RecoveryError::BadEntry {
            place: place(),
            index,
            what,
        };
        if e.start + e.sectors > self.layout.disk_sectors {
            return Err(bad(format!(
                "sectors {}..{} are past the disk ({} sectors)",
                e.start,
                e.start + e.sectors,
                self.layout.disk_sectors
            )));
        }
        if let Mapping::Map(Target::At(t)) = e.mapping {
            let inside = |a: Area| a.contains(t) && t.checked_add(e.sectors).is_some_and(|end| end <= a.end());
            if !inside(self.layout.meta) && !inside(self.layout.data) {
                return Err(bad(format!(
                    "image sectors {t}..{} are outside the metadata and data regions",
                    t.saturating_add(e.sectors)
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ReshapeConfig;

    /// Greedy takes the emptiest segment; cost-benefit an older, fuller one
    /// when age outweighs it: with 16-sector segments at logical time 100,
    /// segment 0 (8 valid, last written at 0) scores (1 − 0.5) · 101 / 1.5 =
    /// 33.7 and segment 1 (4 valid, written at 90) (1 − 0.25) · 11 / 1.25 = 6.6.
    #[test]
    fn victims_by_hand() {
        for (victim, want) in [(Victim::Greedy, 1), (Victim::CostBenefit, 0)] {
            let cfg = ReshapeConfig {
                block_bytes: 512,
                segment_bytes: 16 * 512,
                meta_region_bytes: 3 * 16 * 512,
                data_region_bytes: 4 * 16 * 512,
                log_bytes: 16 * 512,
                commit_entries: 4,
                victim,
                ..Default::default()
            };
            let mut r = Reshaper::new(cfg.layout(32 * 512).unwrap());
            let data = &mut r.regions[Region::Data.index()];
            for (i, (valid, last_write)) in [(8, 0), (4, 90), (16, 50)].into_iter().enumerate() {
                data.segs[i] = Segment {
                    valid,
                    state: SegState::Full,
                    last_write,
                    pins: 0,
                    pending: 0,
                };
            }
            r.clock = 100;
            assert_eq!(r.pick_victim(Region::Data), Some(want), "{victim:?}");
            // A segment still receiving placed writes is never a victim.
            r.regions[Region::Data.index()].segs[want].pending = 1;
            assert_eq!(r.pick_victim(Region::Data), Some(1 - want), "{victim:?}");
        }
    }
}
