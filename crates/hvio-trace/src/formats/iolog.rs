//! fio iolog versions 2 and 3 (fio's `iolog.c`).
//!
//! v2: `fio version 2 iolog`, then `file add|open|close` or
//! `file read|write|trim|sync|datasync|wait offset length`; `wait` carries a
//! delay in microseconds in the offset field, and a record's time is the sum of
//! the waits before it.
//! v3: `fio version 3 iolog`, then `usec file action [offset length]`, the time
//! in microseconds since the log started; fio ignores `wait` there, so do we.
//! Each file is a device.

use crate::parse::{u64_dec, Devices, Tokens};
use crate::reader::{Bad, LineFormat};
use crate::record::{bytes_to_sectors, TraceRecord};
use hvio_core::Op;

/// fio's iolog (versions 2 and 3).
pub struct Iolog {
    version: u8,
    header_seen: bool,
    wait_us: u64,
}

impl Iolog {
    /// A reader of iolog version `version`.
    pub fn new(version: u8) -> Self {
        Iolog {
            version,
            header_seen: false,
            wait_us: 0,
        }
    }
}

fn io_op(act: &[u8]) -> Option<Op> {
    Some(match act {
        b"read" => Op::Read,
        b"write" => Op::Write,
        b"trim" => Op::Discard,
        b"sync" | b"datasync" => Op::Flush,
        _ => return None,
    })
}

impl LineFormat for Iolog {
    fn parse(&mut self, line: &[u8], devs: &mut Devices) -> Result<Option<TraceRecord>, Bad> {
        if !self.header_seen {
            self.header_seen = true;
            let want: &[u8] = if self.version == 2 {
                b"fio version 2 iolog"
            } else {
                b"fio version 3 iolog"
            };
            if line != want {
                return Err(if self.version == 2 {
                    "the header \"fio version 2 iolog\""
                } else {
                    "the header \"fio version 3 iolog\""
                }
                .into());
            }
            return Ok(None);
        }
        let t: Tokens = Tokens::new(line);
        let mut f = [&line[..0]; 6];
        let mut n = 0;
        for tok in t {
            if n == 6 {
                return Err("at most 5 fields".into());
            }
            f[n] = tok;
            n += 1;
        }
        let (time_us, rest) = if self.version == 3 {
            if n == 0 {
                return Err("a timestamp".into());
            }
            let ts = u64_dec(f[0]).ok_or(Bad::from(
                "a timestamp in microseconds (non-negative integer) in field 1",
            ))?;
            (Some(ts), &f[1..n])
        } else {
            (None, &f[..n])
        };
        match rest.len() {
            2 => match rest[1] {
                b"add" | b"open" | b"close" => Ok(None),
                _ => Err("a file action add, open or close".into()),
            },
            4 => {
                let off = u64_dec(rest[2]).ok_or(Bad::from("an offset in bytes (non-negative integer)"))?;
                let len = u64_dec(rest[3]).ok_or(Bad::from("a length in bytes (non-negative integer)"))?;
                if rest[1] == b"wait" {
                    if self.version == 2 {
                        self.wait_us = self.wait_us.saturating_add(off);
                    }
                    return Ok(None);
                }
                let op = io_op(rest[1]).ok_or(Bad::from("an action read, write, trim, sync, datasync or wait"))?;
                let us = time_us.unwrap_or(self.wait_us);
                let time = us
                    .checked_mul(1000)
                    .ok_or(Bad::from("a timestamp that fits 64-bit nanoseconds"))?;
                let dev = devs.name(rest[0]);
                let (sector, sectors) = if op == Op::Flush {
                    (0, 0)
                } else {
                    bytes_to_sectors(off, len).map_err(Bad::from)?
                };
                Ok(Some(TraceRecord::new(time, dev, op, sector, sectors)))
            }
            _ => Err(if self.version == 3 {
                "`usec file action` or `usec file action offset length`"
            } else {
                "`file action` or `file action offset length`"
            }
            .into()),
        }
    }
}
