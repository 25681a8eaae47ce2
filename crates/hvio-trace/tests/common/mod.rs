//! Encoders shared by the reader tests: blktrace and vSCSI binary records.

#![allow(dead_code)]

use hvio_trace::formats::blktrace::{BlkIoTrace, MAGIC};

/// A `blk_io_trace` of device 8,16 with no payload.
pub fn blk(time: u64, sector: u64, bytes: u32, action: u32, cpu: u32) -> BlkIoTrace {
    BlkIoTrace {
        magic: MAGIC | 7,
        sequence: 0,
        time,
        sector,
        bytes,
        action,
        pid: 1,
        device: (8 << 20) | 16,
        cpu,
        error: 0,
        pdu_len: 0,
    }
}

pub fn vscsi1(cmd: u16, len: u32, lbn: u64, ts: u64) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&7u32.to_le_bytes());
    v.extend_from_slice(&len.to_le_bytes());
    v.extend_from_slice(&1u32.to_le_bytes());
    v.extend_from_slice(&cmd.to_le_bytes());
    v.extend_from_slice(&0x0100u16.to_le_bytes());
    v.extend_from_slice(&lbn.to_le_bytes());
    v.extend_from_slice(&ts.to_le_bytes());
    v
}

pub fn vscsi2(cmd: u16, len: u32, lbn: u64, ts: u64, rt: u64) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&cmd.to_le_bytes());
    v.extend_from_slice(&0x0200u16.to_le_bytes());
    v.extend_from_slice(&7u32.to_le_bytes());
    v.extend_from_slice(&len.to_le_bytes());
    v.extend_from_slice(&1u32.to_le_bytes());
    v.extend_from_slice(&lbn.to_le_bytes());
    v.extend_from_slice(&ts.to_le_bytes());
    v.extend_from_slice(&rt.to_le_bytes());
    v
}
