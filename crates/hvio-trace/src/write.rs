//! Writers: records out as blkparse-style text or as a fio iolog v3, so a
//! simulated or captured workload can be inspected with blkparse tooling or
//! replayed by fio (`read_iolog=FILE`, with `replay_redirect=/dev/X` to aim
//! it at a real device).

use crate::record::{RecFlags, TraceRecord};
use hvio_core::Op;
use std::io::{self, Write};

/// The RWBS string blkparse prints for a record.
pub fn rwbs(r: &TraceRecord) -> String {
    let mut s = String::with_capacity(6);
    if r.flags.has(RecFlags::PREFLUSH) || r.op == Op::Flush {
        s.push('F');
    }
    s.push(match r.op {
        Op::Read => 'R',
        Op::Write => 'W',
        Op::Discard => 'D',
        Op::Flush => 'N',
    });
    for (bit, c) in [
        (RecFlags::FUA, 'F'),
        (RecFlags::READAHEAD, 'A'),
        (RecFlags::SYNC, 'S'),
        (RecFlags::META, 'M'),
    ] {
        if r.flags.has(bit) {
            s.push(c);
        }
    }
    s
}

/// `major,minor` for a device name: the name itself when it is one, else 253 (device-mapper) and the id.
fn majmin(name: Option<&str>, id: u32) -> (u32, u32) {
    if let Some((a, b)) = name.and_then(|n| n.split_once(',')) {
        if let (Ok(a), Ok(b)) = (a.trim().parse(), b.trim().parse()) {
            return (a, b);
        }
    }
    (253, id)
}

/// Writes `Q` events in blkparse's default format:
/// `%3d,%-3d %2d %8d %5d.%09lu %5u %2s %3s sector + n [comm]`.
pub struct BlkparseWriter<W: Write> {
    out: W,
    devices: Vec<String>,
    seq: u32,
    comm: String,
}

impl<W: Write> BlkparseWriter<W> {
    /// `devices` names the records' device ids (`major,minor` names are kept).
    pub fn new(out: W, devices: &[String]) -> Self {
        BlkparseWriter {
            out,
            devices: devices.to_vec(),
            seq: 0,
            comm: "hvio".into(),
        }
    }

    /// Updates the device names (a reader learns them as it goes).
    pub fn set_devices(&mut self, devices: &[String]) {
        if devices.len() != self.devices.len() {
            self.devices = devices.to_vec();
        }
    }

    /// Writes record `r`.
    pub fn write(&mut self, r: &TraceRecord) -> io::Result<()> {
        self.seq = self.seq.wrapping_add(1);
        let (maj, min) = majmin(self.devices.get(r.device as usize).map(String::as_str), r.device);
        let (s, ns) = (r.time / 1_000_000_000, r.time % 1_000_000_000);
        let head = format!(
            "{maj:3},{min:<3} {:2} {:8} {s:5}.{ns:09} {:5} {:>2} {:>3} ",
            0,
            self.seq,
            0,
            "Q",
            rwbs(r)
        );
        if r.op == Op::Flush || r.sectors == 0 {
            writeln!(self.out, "{head}[{}]", self.comm)
        } else {
            writeln!(self.out, "{head}{} + {} [{}]", r.sector, r.sectors, self.comm)
        }
    }

    /// Flushes and returns the writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// Writes a fio iolog v3: `usec file action [offset length]`, times relative
/// to the first record (microseconds, rounded down). Each device is a file
/// (`add` and `open` before its first use, `close` at the end).
pub struct IologWriter<W: Write> {
    out: W,
    names: Vec<String>,
    opened: Vec<bool>,
    t0: Option<u64>,
    last_us: u64,
}

impl<W: Write> IologWriter<W> {
    /// A writer to `out` that names `devices`, header written.
    pub fn new(mut out: W, devices: &[String]) -> io::Result<Self> {
        writeln!(out, "fio version 3 iolog")?;
        let names = devices.iter().map(|n| n.replace(char::is_whitespace, "_")).collect();
        Ok(IologWriter {
            out,
            names,
            opened: vec![false; devices.len()],
            t0: None,
            last_us: 0,
        })
    }

    /// Updates the file names (a reader learns them as it goes).
    pub fn set_devices(&mut self, devices: &[String]) {
        for (i, n) in devices.iter().enumerate().skip(self.names.len()) {
            let _ = i;
            self.names.push(n.replace(char::is_whitespace, "_"));
            self.opened.push(false);
        }
    }

    fn name(&mut self, id: u32) -> String {
        let i = id as usize;
        if i >= self.names.len() {
            for k in self.names.len()..=i {
                self.names.push(format!("dev{k}"));
                self.opened.push(false);
            }
        }
        self.names[i].clone()
    }

    /// Writes record `r`.
    pub fn write(&mut self, r: &TraceRecord) -> io::Result<()> {
        let t0 = *self.t0.get_or_insert(r.time);
        let us = r.time.saturating_sub(t0) / 1000;
        self.last_us = self.last_us.max(us);
        let name = self.name(r.device);
        if !self.opened[r.device as usize] {
            self.opened[r.device as usize] = true;
            writeln!(self.out, "{us} {name} add")?;
            writeln!(self.out, "{us} {name} open")?;
        }
        let act = match r.op {
            Op::Read => "read",
            Op::Write => "write",
            Op::Discard => "trim",
            Op::Flush => "sync",
        };
        if r.op == Op::Flush {
            writeln!(self.out, "{us} {name} {act} 0 0")
        } else {
            writeln!(self.out, "{us} {name} {act} {} {}", r.sector * 512, r.bytes())
        }
    }

    /// Closes every file, flushes and returns the writer.
    pub fn finish(mut self) -> io::Result<W> {
        for i in 0..self.names.len() {
            if self.opened[i] {
                writeln!(self.out, "{} {} close", self.last_us, self.names[i])?;
            }
        }
        self.out.flush()?;
        Ok(self.out)
    }
}
