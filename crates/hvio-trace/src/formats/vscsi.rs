//! CloudPhysics/VMware vSCSI binary traces, as read by libCacheSim
//! (`traceReader/customizedReader/vscsi.h`), little-endian:
//!
//! - v1, 32 bytes: `u32 sn, u32 len, u32 nSG, u16 cmd, u16 ver, u64 lbn, u64 ts`
//! - v2, 40 bytes: `u16 cmd, u16 ver, u32 sn, u32 len, u32 nSG, u64 lbn, u64 ts, u64 rt`
//!
//! `ver >> 8` is the version (checked on the first two records, as
//! libCacheSim does); `len` is in bytes, `lbn` in 512-byte blocks, `ts` and
//! `rt` in microseconds. `cmd` is the SCSI opcode: READ(6/10/12/16) and
//! WRITE(6/10/12/16) are requests, SYNCHRONIZE CACHE(10/16) a flush, UNMAP a
//! discard; other commands (INQUIRY, TEST UNIT READY, ...) carry no data and
//! are skipped. The file is one virtual disk: its device is named after the file.

use crate::error::{Loc, TraceError};
use crate::input::{Exact, Input};
use crate::parse::Devices;
use crate::reader::{Format, Source};
use crate::record::TraceRecord;
use hvio_core::Op;

/// Bytes of a version-1 record.
pub const V1_RECORD: usize = 32;
/// Bytes of a version-2 record.
pub const V2_RECORD: usize = 40;

/// The vSCSI version of a file from its first two records.
pub fn detect_version(head: &[u8]) -> Option<Format> {
    let ver_at = |rec: usize, off: usize, i: usize| {
        let o = i * rec + off;
        head.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]) >> 8)
    };
    if head.len() >= 2 * V2_RECORD && (0..2).all(|i| ver_at(V2_RECORD, 2, i) == Some(2)) {
        return Some(Format::Vscsi2);
    }
    if head.len() >= 2 * V1_RECORD && (0..2).all(|i| ver_at(V1_RECORD, 14, i) == Some(1)) {
        return Some(Format::Vscsi1);
    }
    None
}

/// The operation of a SCSI command, `None` for commands without data.
pub fn scsi_op(cmd: u16) -> Option<Op> {
    Some(match cmd {
        0x08 | 0x28 | 0xa8 | 0x88 => Op::Read,
        0x0a | 0x2a | 0xaa | 0x8a => Op::Write,
        0x35 | 0x91 => Op::Flush,
        0x42 => Op::Discard,
        _ => return None,
    })
}

/// VMware's vscsiStats trace (binary, versions 1 and 2).
pub struct Vscsi {
    input: Input,
    path: String,
    version: u8,
    index: u64,
    dev_name: String,
}

impl Vscsi {
    /// A reader of `input` as version `version`.
    pub fn new(input: Input, version: u8) -> Self {
        let p = std::path::Path::new(&input.path);
        let mut stem = p.file_name().and_then(|s| s.to_str()).unwrap_or("vscsi").to_string();
        for ext in [".gz", ".bin", ".vscsi", ".trace"] {
            if let Some(s) = stem.strip_suffix(ext) {
                stem = s.to_string();
            }
        }
        Vscsi {
            path: input.path.clone(),
            input,
            version,
            index: 0,
            dev_name: stem,
        }
    }
}

fn le16(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}
fn le32(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}
fn le64(b: &[u8], o: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(a)
}

impl Source for Vscsi {
    fn next(&mut self, devs: &mut Devices) -> Result<Option<(TraceRecord, Loc)>, TraceError> {
        let size = if self.version == 1 { V1_RECORD } else { V2_RECORD };
        loop {
            let loc = Loc::Record {
                index: self.index,
                byte: self.input.consumed,
            };
            let b = match self.input.exact(size)? {
                Exact::Eof => return Ok(None),
                Exact::Partial(got) => {
                    return Err(TraceError::Truncated {
                        path: self.path.clone(),
                        loc,
                        got,
                        need: size,
                    })
                }
                Exact::Full(b) => b,
            };
            self.index += 1;
            let (cmd, ver, len, lbn, ts, rt) = if self.version == 1 {
                (le16(b, 12), le16(b, 14), le32(b, 4), le64(b, 16), le64(b, 24), None)
            } else {
                (
                    le16(b, 0),
                    le16(b, 2),
                    le32(b, 8),
                    le64(b, 16),
                    le64(b, 24),
                    Some(le64(b, 32)),
                )
            };
            if (ver >> 8) as u8 != self.version {
                return Err(TraceError::Malformed {
                    path: self.path.clone(),
                    loc,
                    expected: format!(
                        "a vSCSI v{} record (version field {:#06x})",
                        self.version,
                        (self.version as u16) << 8
                    ),
                    found: format!("version field {ver:#06x}"),
                });
            }
            let Some(op) = scsi_op(cmd) else { continue };
            let Some(time) = ts.checked_mul(1000) else {
                return Err(TraceError::Malformed {
                    path: self.path.clone(),
                    loc,
                    expected: "a timestamp that fits 64-bit nanoseconds".into(),
                    found: ts.to_string(),
                });
            };
            let dev = devs.name(self.dev_name.as_bytes());
            let sectors = if op == Op::Flush { 0 } else { len.div_ceil(512) };
            let mut r = TraceRecord::new(time, dev, op, if op == Op::Flush { 0 } else { lbn }, sectors);
            r.latency = rt.map(|x| x.saturating_mul(1000));
            return Ok(Some((r, loc)));
        }
    }
}
