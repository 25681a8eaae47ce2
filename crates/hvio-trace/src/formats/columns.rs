//! The column formats: MSR Cambridge, SPC, Alibaba, Tencent CBS (CSV) and
//! FIU, DiskSim, MQSim (whitespace-separated).

use crate::parse::{fixed_ns, u32_dec, u64_dec, u64_hex, Devices, Split, Tokens};
use crate::reader::{Bad, LineFormat};
use crate::record::{bytes_to_sectors, TraceRecord};
use hvio_core::Op;

const NS_PER_S: u64 = 1_000_000_000;

/// Windows FILETIME of the Unix epoch, in 100 ns ticks.
const FILETIME_UNIX_EPOCH: u64 = 116_444_736_000_000_000;

fn header(first: &mut bool, line: &[u8]) -> bool {
    let h = *first && line.first().is_some_and(|c| c.is_ascii_alphabetic());
    *first = false;
    h
}

fn field<'a>(it: &mut impl Iterator<Item = &'a [u8]>, what: &'static str) -> Result<&'a [u8], Bad> {
    it.next().ok_or(Bad::from(what))
}

fn num(t: &[u8], what: &'static str) -> Result<u64, Bad> {
    u64_dec(t).ok_or(Bad::from(what))
}

fn bytes_range(off: u64, len: u64) -> Result<(u64, u32), Bad> {
    bytes_to_sectors(off, len).map_err(Bad::from)
}

fn sectors_u32(n: u64) -> Result<u32, Bad> {
    u32::try_from(n).map_err(|_| Bad::from("a request length under 2^32 sectors"))
}

/// MSR Cambridge: `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`
/// (FILETIME ticks, bytes, 100 ns ticks). Devices are named `host_disk`.
#[derive(Default)]
pub struct Msr {
    seen: bool,
    key: Vec<u8>,
}

impl LineFormat for Msr {
    fn parse(&mut self, line: &[u8], devs: &mut Devices) -> Result<Option<TraceRecord>, Bad> {
        let mut first = !self.seen;
        self.seen = true;
        if header(&mut first, line) {
            return Ok(None);
        }
        const E: &str = "MSR CSV: Timestamp,Hostname,DiskNumber,Read|Write,Offset,Size,ResponseTime (integers)";
        let mut f = Split::new(line, b',');
        let ts = num(
            field(&mut f, E)?,
            "a FILETIME timestamp (non-negative integer) in column 1",
        )?;
        let host = field(&mut f, E)?;
        let disk = field(&mut f, E)?;
        let ty = field(&mut f, E)?;
        let off = num(field(&mut f, E)?, "a byte offset (non-negative integer) in column 5")?;
        let size = num(field(&mut f, E)?, "a size in bytes (non-negative integer) in column 6")?;
        let rt = num(field(&mut f, E)?, "a response time (non-negative integer) in column 7")?;
        if f.next().is_some() || host.is_empty() || u64_dec(disk).is_none() {
            return Err(E.into());
        }
        let op = if ty.eq_ignore_ascii_case(b"read") {
            Op::Read
        } else if ty.eq_ignore_ascii_case(b"write") {
            Op::Write
        } else {
            return Err("Read or Write in column 4".into());
        };
        let unix = ts
            .checked_sub(FILETIME_UNIX_EPOCH)
            .ok_or(Bad::from("a FILETIME timestamp after 1970"))?;
        let time = unix
            .checked_mul(100)
            .ok_or(Bad::from("a FILETIME timestamp before year 2554"))?;
        self.key.clear();
        self.key.extend_from_slice(host);
        self.key.push(b'_');
        self.key.extend_from_slice(disk);
        let dev = devs.name(&self.key);
        let (sector, sectors) = bytes_range(off, size)?;
        let mut r = TraceRecord::new(time, dev, op, sector, sectors);
        r.latency = Some(rt.saturating_mul(100));
        Ok(Some(r))
    }
}

/// SPC: `ASU,LBA,Size,Opcode,Timestamp[,...]` (512 B blocks, bytes, seconds).
#[derive(Default)]
pub struct Spc {
    seen: bool,
}

impl LineFormat for Spc {
    fn parse(&mut self, line: &[u8], devs: &mut Devices) -> Result<Option<TraceRecord>, Bad> {
        let mut first = !self.seen;
        self.seen = true;
        if header(&mut first, line) {
            return Ok(None);
        }
        const E: &str = "SPC: ASU,LBA,Size,Opcode,Timestamp";
        let mut f = Split::new(line, b',');
        let asu = num(field(&mut f, E)?, "an ASU number (non-negative integer) in column 1")?;
        let lba = num(field(&mut f, E)?, "an LBA (non-negative integer) in column 2")?;
        let size = num(field(&mut f, E)?, "a size in bytes (non-negative integer) in column 3")?;
        let op = match field(&mut f, E)? {
            b"r" | b"R" => Op::Read,
            b"w" | b"W" => Op::Write,
            _ => return Err("r or w in column 4".into()),
        };
        let time = fixed_ns(field(&mut f, E)?, NS_PER_S)
            .ok_or(Bad::from("a time in seconds (non-negative s.d) in column 5"))?;
        let sectors = sectors_u32(size.div_ceil(512))?;
        Ok(Some(TraceRecord::new(time, devs.num(asu), op, lba, sectors)))
    }
}

/// Alibaba 2020: `device_id,opcode,offset,length,timestamp` (bytes, microseconds).
#[derive(Default)]
pub struct Alibaba {
    seen: bool,
}

impl LineFormat for Alibaba {
    fn parse(&mut self, line: &[u8], devs: &mut Devices) -> Result<Option<TraceRecord>, Bad> {
        let mut first = !self.seen;
        self.seen = true;
        if header(&mut first, line) {
            return Ok(None);
        }
        const E: &str = "Alibaba: device_id,R|W,offset,length,timestamp";
        let mut f = Split::new(line, b',');
        let dev = num(field(&mut f, E)?, "a device id (non-negative integer) in column 1")?;
        let op = match field(&mut f, E)? {
            b"R" | b"r" => Op::Read,
            b"W" | b"w" => Op::Write,
            _ => return Err("R or W in column 2".into()),
        };
        let off = num(field(&mut f, E)?, "a byte offset (non-negative integer) in column 3")?;
        let len = num(
            field(&mut f, E)?,
            "a length in bytes (non-negative integer) in column 4",
        )?;
        let ts = num(
            field(&mut f, E)?,
            "a timestamp in microseconds (non-negative integer) in column 5",
        )?;
        if f.next().is_some() {
            return Err(E.into());
        }
        let time = ts
            .checked_mul(1000)
            .ok_or(Bad::from("a timestamp that fits 64-bit nanoseconds"))?;
        let (sector, sectors) = bytes_range(off, len)?;
        Ok(Some(TraceRecord::new(time, devs.num(dev), op, sector, sectors)))
    }
}

/// Tencent CBS: `Timestamp,Offset,Size,IOType,VolumeID` (seconds, sectors, 0 = read / 1 = write).
#[derive(Default)]
pub struct Tencent {
    seen: bool,
}

impl LineFormat for Tencent {
    fn parse(&mut self, line: &[u8], devs: &mut Devices) -> Result<Option<TraceRecord>, Bad> {
        let mut first = !self.seen;
        self.seen = true;
        if header(&mut first, line) {
            return Ok(None);
        }
        const E: &str = "Tencent CBS: Timestamp,Offset,Size,IOType,VolumeID";
        let mut f = Split::new(line, b',');
        let ts = num(
            field(&mut f, E)?,
            "a Unix time in seconds (non-negative integer) in column 1",
        )?;
        let off = num(
            field(&mut f, E)?,
            "an offset in sectors (non-negative integer) in column 2",
        )?;
        let size = num(
            field(&mut f, E)?,
            "a size in sectors (non-negative integer) in column 3",
        )?;
        let op = match field(&mut f, E)? {
            b"0" => Op::Read,
            b"1" => Op::Write,
            _ => return Err("IOType 0 (read) or 1 (write) in column 4".into()),
        };
        let vol = num(field(&mut f, E)?, "a volume id (non-negative integer) in column 5")?;
        if f.next().is_some() {
            return Err(E.into());
        }
        let time = ts
            .checked_mul(NS_PER_S)
            .ok_or(Bad::from("a timestamp that fits 64-bit nanoseconds"))?;
        Ok(Some(TraceRecord::new(time, devs.num(vol), op, off, sectors_u32(size)?)))
    }
}

/// FIU: `ts pid process lba size R|W major minor md5` (ns, 512 B sectors).
pub struct Fiu;

impl LineFormat for Fiu {
    fn parse(&mut self, line: &[u8], devs: &mut Devices) -> Result<Option<TraceRecord>, Bad> {
        const E: &str = "FIU: ts pid process lba size R|W major minor md5";
        let mut t = Tokens::new(line);
        let ts = num(field(&mut t, E)?, "a time in ns (non-negative integer) in field 1")?;
        // The process name may hold blanks: count the rest from the end.
        let rest: Vec<&[u8]> = t.collect();
        let n = rest.len();
        if n < 8 {
            return Err(E.into());
        }
        let lba = num(rest[n - 6], "an LBA (non-negative integer) in field 4")?;
        let size = num(rest[n - 5], "a size in 512 B blocks (non-negative integer) in field 5")?;
        let op = match rest[n - 4] {
            b"R" | b"r" => Op::Read,
            b"W" | b"w" => Op::Write,
            _ => return Err("R or W in field 6".into()),
        };
        let major = u32_dec(rest[n - 3]).ok_or(Bad::from("a major device number in field 7"))?;
        let minor = u32_dec(rest[n - 2]).ok_or(Bad::from("a minor device number in field 8"))?;
        Ok(Some(TraceRecord::new(
            ts,
            devs.majmin(major, minor),
            op,
            lba,
            sectors_u32(size)?,
        )))
    }
}

/// DiskSim ASCII: `time_ms devno blkno bcount flags_hex` (flag bit 0 = read).
pub struct Disksim;

impl LineFormat for Disksim {
    fn parse(&mut self, line: &[u8], devs: &mut Devices) -> Result<Option<TraceRecord>, Bad> {
        const E: &str = "DiskSim: time_ms devno blkno bcount flags";
        let mut t = Tokens::new(line);
        let time = fixed_ns(field(&mut t, E)?, 1_000_000)
            .ok_or(Bad::from("a time in ms (non-negative decimal) in field 1"))?;
        let dev = num(field(&mut t, E)?, "a device number (non-negative integer) in field 2")?;
        let blk = num(field(&mut t, E)?, "a block number (non-negative integer) in field 3")?;
        let n = num(field(&mut t, E)?, "a block count (non-negative integer) in field 4")?;
        let flags = u64_hex(field(&mut t, E)?).ok_or(Bad::from("hexadecimal flags in field 5"))?;
        if t.next().is_some() {
            return Err(E.into());
        }
        let op = if flags & 1 == 1 { Op::Read } else { Op::Write };
        Ok(Some(TraceRecord::new(time, devs.num(dev), op, blk, sectors_u32(n)?)))
    }
}

/// MQSim ASCII: `time device lba size type` (time in `unit_ns`, sectors, 0 = write / 1 = read).
pub struct Mqsim {
    /// Nanoseconds per unit of the time column.
    pub unit_ns: u64,
}

impl LineFormat for Mqsim {
    fn parse(&mut self, line: &[u8], devs: &mut Devices) -> Result<Option<TraceRecord>, Bad> {
        const E: &str = "MQSim: arrival_time device lba size_sectors type(0=write,1=read)";
        let mut t = Tokens::new(line);
        let ts = num(field(&mut t, E)?, "an arrival time (non-negative integer) in field 1")?;
        let dev = num(field(&mut t, E)?, "a device number (non-negative integer) in field 2")?;
        let lba = num(field(&mut t, E)?, "a start LBA (non-negative integer) in field 3")?;
        let n = num(field(&mut t, E)?, "a size in sectors (non-negative integer) in field 4")?;
        let op = match field(&mut t, E)? {
            b"0" => Op::Write,
            b"1" => Op::Read,
            _ => return Err("type 0 (write) or 1 (read) in field 5".into()),
        };
        if t.next().is_some() {
            return Err(E.into());
        }
        let time = ts
            .checked_mul(self.unit_ns)
            .ok_or(Bad::from("a time that fits 64-bit nanoseconds"))?;
        Ok(Some(TraceRecord::new(time, devs.num(dev), op, lba, sectors_u32(n)?)))
    }
}
