//! blktrace binary: `struct blk_io_trace` (48 bytes, the writer's byte order,
//! told by the magic), each followed by `pdu_len` payload bytes. One file per
//! CPU (`dev.blktrace.N`), merged here by time; `blkparse -d` output (already
//! merged) reads the same way.
//!
//! Like fio's blktrace replay, a request is a `Q` event (or `D`/`C`, see
//! [`crate::BlkAction`]) that is not a notify: discard → discard, flush
//! without data → flush, else write if the WRITE category is set, read
//! otherwise; zero-byte data events are dropped.

use crate::error::{Loc, TraceError};
use crate::input::{Exact, Input};
use crate::parse::Devices;
use crate::reader::{BlkAction, Source};
use crate::record::{RecFlags, TraceRecord};
use hvio_core::Op;

/// `blk_io_trace.magic`'s upper 24 bits.
pub const MAGIC: u32 = 0x6561_7400;
/// The record version hvio reads (its lower 8 bits).
pub const VERSION: u32 = 0x07;
/// Bytes of a record before its payload.
pub const RECORD: usize = 48;

/// `BLK_TC_READ`.
pub const TC_READ: u32 = 1 << 0;
/// `BLK_TC_WRITE`.
pub const TC_WRITE: u32 = 1 << 1;
/// `BLK_TC_FLUSH`.
pub const TC_FLUSH: u32 = 1 << 2;
/// `BLK_TC_SYNC`.
pub const TC_SYNC: u32 = 1 << 3;
/// `BLK_TC_QUEUE`.
pub const TC_QUEUE: u32 = 1 << 4;
/// `BLK_TC_ISSUE`.
pub const TC_ISSUE: u32 = 1 << 6;
/// `BLK_TC_COMPLETE`.
pub const TC_COMPLETE: u32 = 1 << 7;
/// `BLK_TC_FS`.
pub const TC_FS: u32 = 1 << 8;
/// `BLK_TC_PC`.
pub const TC_PC: u32 = 1 << 9;
/// `BLK_TC_NOTIFY`.
pub const TC_NOTIFY: u32 = 1 << 10;
/// `BLK_TC_AHEAD`.
pub const TC_AHEAD: u32 = 1 << 11;
/// `BLK_TC_META`.
pub const TC_META: u32 = 1 << 12;
/// `BLK_TC_DISCARD`.
pub const TC_DISCARD: u32 = 1 << 13;
/// `BLK_TC_FUA`.
pub const TC_FUA: u32 = 1 << 15;
/// Where the category bits start in `action`.
pub const TC_SHIFT: u32 = 16;

/// The fields hvio uses of one `blk_io_trace`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlkIoTrace {
    /// `MAGIC | VERSION`.
    pub magic: u32,
    /// Event sequence number.
    pub sequence: u32,
    /// Time in nanoseconds.
    pub time: u64,
    /// First sector.
    pub sector: u64,
    /// Length in bytes.
    pub bytes: u32,
    /// Category bits and action code.
    pub action: u32,
    /// The process.
    pub pid: u32,
    /// The device (major << 20 | minor).
    pub device: u32,
    /// The CPU.
    pub cpu: u32,
    /// Completion error.
    pub error: u16,
    /// Payload bytes after the record.
    pub pdu_len: u16,
}

impl BlkIoTrace {
    /// A record from its 48 bytes, byte-swapped when `swap`.
    pub fn decode(b: &[u8], swap: bool) -> Self {
        let u32_at = |o: usize| {
            let v = u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
            if swap {
                v.swap_bytes()
            } else {
                v
            }
        };
        let u64_at = |o: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[o..o + 8]);
            let v = u64::from_le_bytes(a);
            if swap {
                v.swap_bytes()
            } else {
                v
            }
        };
        let u16_at = |o: usize| {
            let v = u16::from_le_bytes([b[o], b[o + 1]]);
            if swap {
                v.swap_bytes()
            } else {
                v
            }
        };
        BlkIoTrace {
            magic: u32_at(0),
            sequence: u32_at(4),
            time: u64_at(8),
            sector: u64_at(16),
            bytes: u32_at(24),
            action: u32_at(28),
            pid: u32_at(32),
            device: u32_at(36),
            cpu: u32_at(40),
            error: u16_at(44),
            pdu_len: u16_at(46),
        }
    }

    /// Encodes little-endian (`big_endian` = false) or big-endian.
    pub fn encode(&self, big_endian: bool, out: &mut Vec<u8>) {
        macro_rules! put {
            ($v:expr) => {
                if big_endian {
                    out.extend_from_slice(&$v.to_be_bytes())
                } else {
                    out.extend_from_slice(&$v.to_le_bytes())
                }
            };
        }
        put!(self.magic);
        put!(self.sequence);
        put!(self.time);
        put!(self.sector);
        put!(self.bytes);
        put!(self.action);
        put!(self.pid);
        put!(self.device);
        put!(self.cpu);
        put!(self.error);
        put!(self.pdu_len);
    }
}

/// One blktrace file.
pub struct File {
    input: Input,
    path: String,
    swap: Option<bool>,
    index: u64,
    action: u32,
}

impl File {
    /// A reader of one per-CPU file keeping the events of `action`.
    pub fn new(input: Input, action: BlkAction) -> Self {
        File {
            path: input.path.clone(),
            input,
            swap: None,
            index: 0,
            action: action.code(),
        }
    }

    fn next(&mut self, devs: &mut Devices) -> Result<Option<(TraceRecord, Loc)>, TraceError> {
        loop {
            let byte = self.input.consumed;
            let loc = Loc::Record {
                index: self.index,
                byte,
            };
            let path = &self.path;
            let rec = match self.input.exact(RECORD)? {
                Exact::Eof => return Ok(None),
                Exact::Partial(got) => {
                    return Err(TraceError::Truncated {
                        path: path.clone(),
                        loc,
                        got,
                        need: RECORD,
                    })
                }
                Exact::Full(b) => {
                    let swap = match self.swap {
                        Some(s) => s,
                        None => {
                            let m = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                            let s = if m & 0xffff_ff00 == MAGIC {
                                false
                            } else if m.swap_bytes() & 0xffff_ff00 == MAGIC {
                                true
                            } else {
                                return Err(TraceError::BadMagic {
                                    path: path.clone(),
                                    format: "blktrace",
                                    what: format!(
                                        "{loc}: first word {m:#010x} is not the magic 0x656174xx in either byte order"
                                    ),
                                });
                            };
                            self.swap = Some(s);
                            s
                        }
                    };
                    BlkIoTrace::decode(b, swap)
                }
            };
            if rec.magic & 0xffff_ff00 != MAGIC {
                return Err(TraceError::BadMagic {
                    path: path.clone(),
                    format: "blktrace",
                    what: format!("{loc}: magic {:#010x} (corrupt or cut file)", rec.magic),
                });
            }
            if rec.magic & 0xff != VERSION {
                return Err(TraceError::BadMagic {
                    path: path.clone(),
                    format: "blktrace",
                    what: format!("{loc}: version {:#04x}; only version 7 is supported", rec.magic & 0xff),
                });
            }
            self.index += 1;
            let pdu = rec.pdu_len as usize;
            if pdu > 0 {
                let got = self.input.skip(pdu)?;
                if got < pdu {
                    return Err(TraceError::Truncated {
                        path: self.path.clone(),
                        loc,
                        got: RECORD + got,
                        need: RECORD + pdu,
                    });
                }
            }
            if rec.action & 0xffff != self.action || rec.action & (TC_NOTIFY << TC_SHIFT) != 0 {
                continue;
            }
            let cat = rec.action >> TC_SHIFT;
            let sectors = rec.bytes.div_ceil(512);
            let op = if cat & TC_DISCARD != 0 {
                Op::Discard
            } else if cat & TC_FLUSH != 0 && rec.bytes == 0 {
                Op::Flush
            } else if rec.bytes == 0 {
                continue;
            } else if cat & TC_WRITE != 0 {
                Op::Write
            } else {
                Op::Read
            };
            let dev = devs.majmin(rec.device >> 20, rec.device & 0xf_ffff);
            let mut r = TraceRecord::new(rec.time, dev, op, if op == Op::Flush { 0 } else { rec.sector }, sectors);
            for (bit, f) in [
                (TC_SYNC, RecFlags::SYNC),
                (TC_META, RecFlags::META),
                (TC_AHEAD, RecFlags::READAHEAD),
                (TC_FUA, RecFlags::FUA),
            ] {
                if cat & bit != 0 {
                    r.flags.set(f);
                }
            }
            if cat & TC_FLUSH != 0 && op != Op::Flush {
                r.flags.set(RecFlags::PREFLUSH);
            }
            return Ok(Some((r, loc)));
        }
    }
}

/// Several per-CPU files merged by time (ties: lower file index first).
pub struct Merged {
    files: Vec<File>,
    heads: Vec<Option<(TraceRecord, Loc)>>,
    primed: bool,
}

impl Merged {
    /// A reader merging per-CPU files by time, keeping the events of `action`.
    pub fn new(inputs: Vec<Input>, action: BlkAction) -> Result<Self, TraceError> {
        if inputs.is_empty() {
            return Err(TraceError::Usage("no blktrace files given".into()));
        }
        let files: Vec<File> = inputs.into_iter().map(|i| File::new(i, action)).collect();
        let heads = vec![None; files.len()];
        Ok(Merged {
            files,
            heads,
            primed: false,
        })
    }
}

impl Source for Merged {
    fn next(&mut self, devs: &mut Devices) -> Result<Option<(TraceRecord, Loc)>, TraceError> {
        if self.files.len() == 1 {
            return self.files[0].next(devs);
        }
        if !self.primed {
            for (i, f) in self.files.iter_mut().enumerate() {
                self.heads[i] = f.next(devs)?;
            }
            self.primed = true;
        }
        let mut best: Option<usize> = None;
        for (i, h) in self.heads.iter().enumerate() {
            if let Some((r, _)) = h {
                if best.is_none_or(|b| self.heads[b].as_ref().is_some_and(|(x, _)| r.time < x.time)) {
                    best = Some(i);
                }
            }
        }
        let Some(b) = best else { return Ok(None) };
        let out = self.heads[b].take();
        self.heads[b] = self.files[b].next(devs)?;
        Ok(out)
    }
}
