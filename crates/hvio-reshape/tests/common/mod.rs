//! A model image for driving the reshaper in tests: every sector holds a
//! token (guest data), a chunk of bytes (log and checkpoints) or nothing.
//! Completed writes sit in a volatile cache until a flush; a FUA write is
//! durable when it completes. A crash keeps an arbitrary subset of the
//! volatile and in-flight sectors, then recovery runs on what is durable.

#![allow(dead_code)]

use hvio_core::{Op, Request, RequestId, Sector, SECTOR_BYTES};
use hvio_reshape::{Event, Io, IoKind, Layout, Payload, RecoveryReport, Region, Reshaper};
use std::collections::{BTreeMap, HashMap};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Content {
    Token(u64),
    Bytes(Vec<u8>),
}

/// What a never-written sector of the base image holds.
pub fn base_token(s: Sector) -> u64 {
    (1 << 63) | s
}

/// What guest write `id` puts at original sector `s`.
pub fn token(id: RequestId, s: Sector) -> u64 {
    (id << 24) | s
}

pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

pub struct Model {
    pub r: Reshaper,
    pub layout: Layout,
    pub current: HashMap<Sector, Content>,
    pub durable: HashMap<Sector, Content>,
    pub volatile: Vec<(Sector, Content)>,
    pub inflight: Vec<Io>,
    /// Every I/O issued, in order (for tests that check ordering).
    pub issued: Vec<Io>,
    pub requests: HashMap<RequestId, Request>,
    /// Tokens read, per guest read request.
    pub read_bufs: BTreeMap<RequestId, Vec<u64>>,
    clean_bufs: HashMap<u64, Vec<Option<Content>>>,
    pub done: Vec<RequestId>,
    pub failed: Vec<RequestId>,
    pub next_id: RequestId,
}

impl Model {
    pub fn new(layout: Layout) -> Self {
        Model {
            r: Reshaper::new(layout.clone()),
            layout,
            current: HashMap::new(),
            durable: HashMap::new(),
            volatile: Vec::new(),
            inflight: Vec::new(),
            issued: Vec::new(),
            requests: HashMap::new(),
            read_bufs: BTreeMap::new(),
            clean_bufs: HashMap::new(),
            done: Vec::new(),
            failed: Vec::new(),
            next_id: 1,
        }
    }

    pub fn request(&mut self, op: Op, sector: Sector, sectors: u32, meta: bool, fua: bool) -> Request {
        let id = self.next_id;
        self.next_id += 1;
        let mut r = Request::new(id, 0, op, sector, sectors, 0);
        r.meta = meta;
        r.fua = fua;
        r
    }

    pub fn submit(&mut self, batch: Vec<Request>) {
        for r in &batch {
            self.requests.insert(r.id, *r);
            if r.op == Op::Read {
                self.read_bufs.insert(r.id, vec![0; r.sectors as usize]);
            }
        }
        self.r.submit(&batch).expect("a valid batch");
        self.drain();
    }

    pub fn drain(&mut self) {
        while let Some(e) = self.r.poll() {
            match e {
                Event::Io(io) => {
                    self.check_one_copy(&io);
                    self.issued.push(io.clone());
                    self.inflight.push(io);
                }
                Event::Done(id) => self.done.push(id),
                Event::Failed(id, _) => self.failed.push(id),
            }
        }
    }

    /// The cleaning I/O in flight in a region belongs to one segment copy:
    /// reads of one victim, or the writes of its copy, never both, so a
    /// commit can be queued behind at most one copy's I/O.
    fn check_one_copy(&self, io: &Io) {
        let (IoKind::CleanRead(region) | IoKind::CleanWrite(region)) = io.kind else {
            return;
        };
        let area = match region {
            Region::Meta => self.layout.meta,
            Region::Data => self.layout.data,
        };
        let seg = |s: Sector| (s - area.start) / self.layout.segment_sectors;
        for other in &self.inflight {
            match (io.kind, other.kind) {
                (IoKind::CleanRead(a), IoKind::CleanRead(b)) if a == b => assert_eq!(
                    seg(io.sector),
                    seg(other.sector),
                    "cleaning reads of two victims in flight: {io:?} {other:?}"
                ),
                (IoKind::CleanRead(a), IoKind::CleanWrite(b)) | (IoKind::CleanWrite(a), IoKind::CleanRead(b))
                    if a == b =>
                {
                    panic!("cleaning reads and writes in flight together: {io:?} {other:?}")
                }
                _ => {}
            }
        }
    }

    fn at(&self, s: Sector) -> Option<Content> {
        self.current.get(&s).cloned()
    }

    fn read_token(&self, s: Sector) -> u64 {
        match self.current.get(&s) {
            Some(Content::Token(t)) => *t,
            Some(Content::Bytes(_)) => u64::MAX,
            None if self.layout.base.contains(s) => base_token(s),
            None => 0,
        }
    }

    /// The contents an I/O writes, sector by sector.
    fn contents(&self, io: &Io) -> Vec<Option<Content>> {
        match &io.payload {
            Payload::Guest(slices) => slices
                .iter()
                .flat_map(|g| {
                    let start = self.requests[&g.request].sector + g.offset;
                    (0..g.sectors).map(move |k| Some(Content::Token(token(g.request, start + k))))
                })
                .collect(),
            Payload::Bytes(b) => b
                .chunks(SECTOR_BYTES as usize)
                .map(|c| Some(Content::Bytes(c.to_vec())))
                .collect(),
            Payload::Copy(slices) => slices
                .iter()
                .flat_map(|c| {
                    let buf = &self.clean_bufs[&c.read];
                    buf[c.offset as usize..(c.offset + c.sectors) as usize].to_vec()
                })
                .collect(),
            Payload::None => vec![None; io.sectors as usize],
        }
    }

    /// Perform in-flight I/O number `index` and report it.
    pub fn complete_at(&mut self, index: usize) {
        let io = self.inflight.remove(index);
        match io.op {
            Op::Write => {
                let contents = self.contents(&io);
                assert_eq!(contents.len() as u64, io.sectors, "payload length of {io:?}");
                for (k, c) in contents.into_iter().enumerate() {
                    let s = io.sector + k as u64;
                    match c {
                        Some(c) => {
                            self.current.insert(s, c.clone());
                            if io.fua {
                                self.durable.insert(s, c);
                            } else {
                                self.volatile.push((s, c));
                            }
                        }
                        None => {
                            self.current.remove(&s);
                        }
                    }
                }
            }
            Op::Read => match (&io.kind, &io.payload) {
                (IoKind::GuestRead, Payload::Guest(slices)) => {
                    for g in slices {
                        for k in 0..g.sectors {
                            let t = self.read_token(io.sector + k);
                            self.read_bufs.get_mut(&g.request).unwrap()[(g.offset + k) as usize] = t;
                        }
                    }
                }
                (IoKind::CleanRead(_), _) => {
                    let data = (0..io.sectors).map(|k| self.at(io.sector + k)).collect();
                    self.clean_bufs.insert(io.id, data);
                }
                other => panic!("unexpected read {other:?}"),
            },
            Op::Flush => {
                for (s, c) in self.volatile.drain(..) {
                    self.durable.insert(s, c);
                }
            }
            Op::Discard => panic!("the reshaper never discards"),
        }
        self.r.complete(io.id).expect("an outstanding I/O");
        self.drain();
    }

    pub fn step(&mut self, rng: &mut Rng) -> bool {
        if self.inflight.is_empty() {
            return false;
        }
        let i = rng.below(self.inflight.len());
        self.complete_at(i);
        true
    }

    /// Complete everything, in random order.
    pub fn settle(&mut self, rng: &mut Rng) {
        while self.step(rng) {}
    }

    /// Complete everything in issue order.
    pub fn settle_fifo(&mut self) {
        while !self.inflight.is_empty() {
            self.complete_at(0);
        }
    }

    fn area_bytes(&self, start: Sector, sectors: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity((sectors * SECTOR_BYTES) as usize);
        for s in start..start + sectors {
            match self.durable.get(&s) {
                Some(Content::Bytes(b)) => out.extend_from_slice(b),
                Some(Content::Token(t)) => {
                    for _ in 0..SECTOR_BYTES / 8 {
                        out.extend_from_slice(&t.to_le_bytes());
                    }
                }
                None => out.extend(std::iter::repeat_n(0, SECTOR_BYTES as usize)),
            }
        }
        out
    }

    /// Lose power: keep a random subset of the volatile and in-flight writes,
    /// sector by sector, then recover from what is durable.
    pub fn crash(&mut self, rng: &mut Rng) -> RecoveryReport {
        for (s, c) in std::mem::take(&mut self.volatile) {
            if rng.next().is_multiple_of(2) {
                self.durable.insert(s, c);
            }
        }
        for io in std::mem::take(&mut self.inflight) {
            if io.op == Op::Write {
                for (k, c) in self.contents(&io).into_iter().enumerate() {
                    if let (Some(c), true) = (c, rng.next().is_multiple_of(2)) {
                        self.durable.insert(io.sector + k as u64, c);
                    }
                }
            }
        }
        self.clean_bufs.clear();
        self.current = self.durable.clone();
        self.recover()
    }

    /// Persist only the first `sectors` sectors of in-flight I/O `index`
    /// (a torn write), which then never completes.
    pub fn tear(&mut self, index: usize, sectors: u64) {
        let io = self.inflight.remove(index);
        for (k, c) in self.contents(&io).into_iter().enumerate().take(sectors as usize) {
            if let Some(c) = c {
                self.durable.insert(io.sector + k as u64, c);
            }
        }
    }

    /// Lose power with every unflushed and in-flight write lost, then recover.
    pub fn power_cut(&mut self) -> RecoveryReport {
        self.volatile.clear();
        self.inflight.clear();
        self.clean_bufs.clear();
        self.current = self.durable.clone();
        self.recover()
    }

    /// Complete in-flight I/O in issue order until one of `kind` is in flight;
    /// its index, if one comes.
    pub fn run_until(&mut self, kind: impl Fn(&Io) -> bool) -> Option<usize> {
        loop {
            if let Some(i) = self.inflight.iter().position(&kind) {
                return Some(i);
            }
            if self.inflight.is_empty() {
                return None;
            }
            self.complete_at(0);
        }
    }

    pub fn recover(&mut self) -> RecoveryReport {
        let l = &self.layout;
        let c0 = self.area_bytes(l.checkpoints[0].start, l.checkpoints[0].sectors);
        let c1 = self.area_bytes(l.checkpoints[1].start, l.checkpoints[1].sectors);
        let log = self.area_bytes(l.log.start, l.log.sectors);
        let (r, report) = Reshaper::recover(self.layout.clone(), [&c0, &c1], &log).expect("recovery");
        self.r = r;
        report
    }

    /// Read `[start, start + sectors)` to the end and return its tokens.
    pub fn read_now(&mut self, start: Sector, sectors: u32, rng: &mut Rng) -> Vec<u64> {
        let r = self.request(Op::Read, start, sectors, false, false);
        self.submit(vec![r]);
        self.settle(rng);
        assert!(self.done.contains(&r.id), "read {} never completed", r.id);
        self.read_bufs.remove(&r.id).unwrap()
    }
}
