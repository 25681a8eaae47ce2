//! The request log: one record per request at its arrival, written as a fio
//! iolog v3 by `hvio_trace`'s writer, so a real run can be replayed by fio
//! (`--read_iolog`) or by hvio's simulator under other schedulers.
//!
//! Each VM is a file named after it; offsets are bytes within the VM's disk
//! (rounded to 512-byte sectors); timestamps are microseconds since the first
//! request. Write-zeroes are logged as writes, trims as `trim`, flushes as
//! `sync`.

use crate::io::IoKind;
use hvio_core::{Nanos, Op, SECTOR_BYTES};
use hvio_trace::record::{RecFlags, TraceRecord};
use hvio_trace::write::IologWriter;
use std::fs::File;
use std::io::BufWriter;
use std::path::Path;

/// Writes the request log, one fio iolog file per VM.
pub struct IoLog {
    out: IologWriter<BufWriter<File>>,
    failed: bool,
}

impl IoLog {
    /// Create `path` and write the header; `names` are the VMs in stream order.
    pub fn create(path: &Path, names: &[String]) -> std::io::Result<IoLog> {
        let out = IologWriter::new(BufWriter::with_capacity(1 << 16, File::create(path)?), names)?;
        Ok(IoLog { out, failed: false })
    }

    /// Record one request of VM `vm` arriving at `now`.
    pub fn record(&mut self, now: Nanos, vm: usize, kind: IoKind, offset: u64, len: u64, fua: bool) {
        if self.failed {
            return;
        }
        let op = match kind {
            IoKind::Read => Op::Read,
            IoKind::Write | IoKind::WriteZeroes { .. } => Op::Write,
            IoKind::Flush => Op::Flush,
            IoKind::Trim => Op::Discard,
        };
        let first = offset / SECTOR_BYTES;
        let sectors = (offset + len).div_ceil(SECTOR_BYTES) - first;
        let mut r = TraceRecord::new(now, vm as u32, op, first, sectors.min(u32::MAX as u64) as u32);
        r.flags.set(RecFlags::SYNC);
        if fua {
            r.flags.set(RecFlags::FUA);
        }
        if let Err(e) = self.out.write(&r) {
            tracing::error!(error = %e, "request log: write failed; logging stops");
            self.failed = true;
        }
    }

    /// Write the `close` lines and flush.
    pub fn finish(self) -> std::io::Result<()> {
        self.out.finish().map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_v3() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log");
        let mut l = IoLog::create(&p, &["a".into(), "b".into()]).unwrap();
        l.record(1_000_000, 1, IoKind::Write, 4096, 512, false);
        l.record(1_015_000, 1, IoKind::Read, 4096, 4096, false);
        l.record(1_020_000, 0, IoKind::Flush, 0, 0, false);
        l.finish().unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(
            text,
            "fio version 3 iolog\n0 b add\n0 b open\n0 b write 4096 512\n15 b read 4096 4096\n20 a add\n20 a open\n20 a sync 0 0\n20 a close\n20 b close\n"
        );
    }
}
