//! `blkparse` text output (blktrace's `blkparse_fmt.c`).
//!
//! Default lines start with the header `%D %2c %8s %5T.%9t %5p %2a %3d ` and
//! go on per action: `Q`/`D`/`I`/`B`/`M`/`F`/`G`/`S`: `sector + n [comm]`;
//! `C`: `sector + n [error]` (with `(elapsed)` under `-t`); `A` (remap):
//! `sector + n <- (maj,min) from`; `m` (message), `P`, `U`, `T`, `X`: no request.
//! The run-time lines (`Input file … added`), comment lines starting with
//! `#` (some blkparse front-ends print a column header such as `#Maj,Mn CPU
//! SeqNo Time PID Act RWBS ...`) and the summary block blkparse prints at
//! the end (`CPU0 (sda):`, `Total (sda):`, ` Reads Queued: …`, `Throughput`,
//! `Events`, `Skips`, per-process stats) are skipped, and counted by reason
//! with the other lines that are not requests (`hvio trace stats` reports
//! them).
//!
//! RWBS: `[F]` (preflush) then `R`, `W`, `D` (discard, `DE` secure erase), `N`
//! (no data) or a zoned op (`ZA` zone append = write; other `Z?` ops carry no
//! data), then any of `F` (FUA), `A` (readahead), `S` (sync), `M` (meta);
//! older blkparse prints `B` for a barrier (read as preflush). A no-data
//! request with the preflush flag (`FN`, or `FWS` with no sectors) is a flush.
//!
//! Which action is the request is chosen by [`crate::BlkAction`] (`Q` by
//! default, as fio's blktrace replay does). Remaps are not requests: a stacked
//! device (dm, md, partitions) shows the same I/O once per layer, so trace the
//! layer you want to replay.

use crate::error::TraceError;
use crate::parse::{fixed_ns, u32_dec, u64_dec, Devices, Tokens};
use crate::reader::{Bad, LineFormat, ReadOptions};
use crate::record::{RecFlags, TraceRecord};
use hvio_core::Op;

/// What an RWBS string says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RwbsKind {
    /// `R`: a read.
    Read,
    /// `W`: a write.
    Write,
    /// `D`: a discard.
    Discard,
    /// No data (`N`, or a zone management op).
    None,
}

/// Parses an RWBS string into its kind and flags.
pub fn parse_rwbs(s: &[u8]) -> Option<(RwbsKind, RecFlags)> {
    let mut flags = RecFlags::default();
    let mut i = 0;
    if s.len() >= 2 && (s[0] == b'F' || s[0] == b'B') && matches!(s[1], b'R' | b'W' | b'D' | b'N' | b'Z' | b'F') {
        flags.set(RecFlags::PREFLUSH);
        i = 1;
    }
    let kind = match s.get(i)? {
        b'R' => RwbsKind::Read,
        b'W' => RwbsKind::Write,
        b'D' => {
            if s.get(i + 1) == Some(&b'E') {
                i += 1;
            }
            RwbsKind::Discard
        }
        b'N' => RwbsKind::None,
        // A flush op without data (kernel `REQ_OP_FLUSH`).
        b'F' => {
            flags.set(RecFlags::PREFLUSH);
            RwbsKind::None
        }
        b'Z' => {
            i += 1;
            let k = match s.get(i)? {
                b'A' => RwbsKind::Write,
                b'R' | b'O' | b'C' | b'F' => RwbsKind::None,
                _ => return None,
            };
            // zone reset all: `ZRA`
            if s.get(i) == Some(&b'R') && s.get(i + 1) == Some(&b'A') {
                i += 1;
            }
            k
        }
        _ => return None,
    };
    i += 1;
    for &c in &s[i..] {
        match c {
            b'F' => flags.set(RecFlags::FUA),
            b'A' => flags.set(RecFlags::READAHEAD),
            b'S' => flags.set(RecFlags::SYNC),
            b'M' => flags.set(RecFlags::META),
            b'B' => flags.set(RecFlags::PREFLUSH),
            b'E' => {}
            _ => return None,
        }
    }
    Some((kind, flags))
}

fn majmin(t: &[u8]) -> Option<(u32, u32)> {
    let i = memchr::memchr(b',', t)?;
    Some((u32_dec(&t[..i])?, u32_dec(&t[i + 1..])?))
}

/// True if the line starts like a default-format blkparse event.
pub fn looks_like_event(line: &[u8]) -> bool {
    let mut t = Tokens::new(line);
    let (Some(dev), Some(cpu), Some(seq), Some(time), Some(_pid), Some(act)) =
        (t.next(), t.next(), t.next(), t.next(), t.next(), t.next())
    else {
        return false;
    };
    majmin(dev).is_some()
        && u64_dec(cpu).is_some()
        && u64_dec(seq).is_some()
        && time.contains(&b'.')
        && fixed_ns(time, 1).is_some()
        && act.iter().all(|c| c.is_ascii_alphabetic())
}

fn is_summary(line: &[u8]) -> bool {
    (line.starts_with(b"CPU") && line.get(3).is_some_and(|c| c.is_ascii_digit()))
        || line.starts_with(b"Total (")
        || line.starts_with(b"Throughput (")
        || line.starts_with(b"Events (")
        || line.starts_with(b"Skips:")
}

/// Builds the record for a request line once its fields are known.
fn record(time: u64, dev: u32, rwbs: &[u8], span: Option<(u64, u32)>) -> Result<Option<TraceRecord>, Bad> {
    let (kind, flags) = parse_rwbs(rwbs).ok_or(Bad::from("RWBS flags ([F]R|W|D|N[F][A][S][M])"))?;
    let (sector, sectors) = span.unwrap_or((0, 0));
    let op = match kind {
        RwbsKind::Read if sectors > 0 => Op::Read,
        RwbsKind::Write if sectors > 0 => Op::Write,
        RwbsKind::Discard if sectors > 0 => Op::Discard,
        _ if flags.has(RecFlags::PREFLUSH) && sectors == 0 => Op::Flush,
        _ => return Ok(None),
    };
    let mut r = TraceRecord::new(time, dev, op, if op == Op::Flush { 0 } else { sector }, sectors);
    r.flags = flags;
    if op == Op::Flush {
        r.flags.0 &= !RecFlags::PREFLUSH;
    }
    Ok(Some(r))
}

/// Parses `sector + n` (and a following `(elapsed)`) or nothing (`[comm]`, PC requests).
/// A request's `(sector, count)`.
type Span = Option<(u64, u32)>;

fn span(rest: &[u8]) -> Result<(Span, Option<u64>), Bad> {
    let mut t = Tokens::new(rest);
    let Some(a) = t.next() else { return Ok((None, None)) };
    if a.starts_with(b"[") || a.starts_with(b"(") {
        return Ok((None, None));
    }
    let sector = u64_dec(a).ok_or(Bad::from("`sector + count` (non-negative integers)"))?;
    match t.next() {
        Some(b"+") => {}
        // `sector [error]` (a completion without size) or a PC request: no span.
        Some(x) if x.starts_with(b"[") || x.starts_with(b"(") => return Ok((None, None)),
        None => return Ok((None, None)),
        _ => return Err("`sector + count`".into()),
    }
    let n = t
        .next()
        .and_then(u32_dec)
        .ok_or(Bad::from("a sector count after `+` (non-negative integer)"))?;
    let rest = t.rest();
    let mut elapsed = None;
    if let Some(r) = rest.strip_prefix(b"(") {
        if let Some(end) = memchr::memchr(b')', r) {
            elapsed = u64_dec(crate::parse::trim(&r[..end]));
        }
    }
    Ok((Some((sector, n)), elapsed))
}

#[derive(Clone, Debug, PartialEq)]
enum Piece {
    Lit(Vec<u8>),
    Field(u8),
}

/// A compiled `-f` format.
#[derive(Clone, Debug)]
struct Custom {
    pieces: Vec<Piece>,
    /// `-F A,fmt`: the format applies to this action only.
    only: Option<u8>,
}

const FIELDS: &[u8] = b"acCdDeMmnNpPsStTuUz";

impl Custom {
    fn compile(spec: &str) -> Result<Self, TraceError> {
        let bad = |m: String| TraceError::Usage(format!("blkparse format {spec:?}: {m}"));
        let (only, fmt) = match spec.as_bytes() {
            [a, b',', ..] if b"ABCDFGIMPQRSTUWX".contains(a) => (Some(*a), &spec[2..]),
            _ => (None, spec),
        };
        let b = fmt.as_bytes();
        let mut pieces = Vec::new();
        let mut lit = Vec::new();
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b'%' if b.get(i + 1) == Some(&b'%') => {
                    lit.push(b'%');
                    i += 2;
                }
                b'%' => {
                    i += 1;
                    if b.get(i) == Some(&b'-') {
                        i += 1;
                    }
                    while b.get(i).is_some_and(|c| c.is_ascii_digit()) {
                        i += 1;
                    }
                    let Some(&c) = b.get(i) else {
                        return Err(bad("ends inside a field".into()));
                    };
                    if !FIELDS.contains(&c) {
                        lit.push(c);
                    } else {
                        if !lit.is_empty() {
                            pieces.push(Piece::Lit(std::mem::take(&mut lit)));
                        }
                        pieces.push(Piece::Field(c));
                    }
                    i += 1;
                }
                b'\\' => {
                    let c = match b.get(i + 1) {
                        Some(b'n') => b'\n',
                        Some(b't') => b'\t',
                        Some(b'r') => b'\r',
                        Some(b'b') => 8,
                        other => return Err(bad(format!("invalid escape {:?}", other.map(|&c| c as char)))),
                    };
                    lit.push(c);
                    i += 2;
                }
                c => {
                    lit.push(c);
                    i += 1;
                }
            }
        }
        if !lit.is_empty() {
            pieces.push(Piece::Lit(lit));
        }
        // Lines are split on newlines: drop them from the literals.
        for p in &mut pieces {
            if let Piece::Lit(l) = p {
                l.retain(|&c| c != b'\n' && c != b'\r');
            }
        }
        pieces.retain(|p| !matches!(p, Piece::Lit(l) if l.is_empty()));
        let has = |c: u8| pieces.contains(&Piece::Field(c));
        if !has(b'S') || !(has(b'n') || has(b'N')) || !has(b'd') || !has(b'T') {
            return Err(bad("a format hvio can read needs %S (sector), %n or %N (size), %d (RWBS) and %T (seconds, with %t for nanoseconds)".into()));
        }
        Ok(Custom { pieces, only })
    }

    /// `other` is set when the line is an event of another action.
    fn parse(&self, line: &[u8], action: u8, devs: &mut Devices, other: &mut bool) -> Result<Option<TraceRecord>, Bad> {
        let blank = |c: u8| c == b' ' || c == b'\t';
        let mut pos = 0;
        let skip = |pos: &mut usize| {
            while *pos < line.len() && blank(line[*pos]) {
                *pos += 1;
            }
        };
        let (mut sec, mut nsec, mut sector, mut blocks, mut bytes) = (None, None, None, None, None);
        let (mut rwbs, mut act): (Option<&[u8]>, Option<&[u8]>) = (None, None);
        let mut dev: Option<(u32, u32)> = None;
        let (mut major, mut minor) = (None, None);
        for (k, p) in self.pieces.iter().enumerate() {
            match p {
                Piece::Lit(l) => {
                    for &c in l {
                        skip(&mut pos);
                        if blank(c) {
                            continue;
                        }
                        if line.get(pos) != Some(&c) {
                            return Err(Bad::from(format!("{:?} as in the blkparse format", c as char)));
                        }
                        pos += 1;
                    }
                }
                Piece::Field(f) => {
                    skip(&mut pos);
                    let start = pos;
                    let stop = match self.pieces.get(k + 1) {
                        Some(Piece::Lit(l)) => l.iter().copied().find(|&c| !blank(c)),
                        _ => None,
                    };
                    match f {
                        b'C' | b'P' | b'z' => {
                            while pos < line.len() && Some(line[pos]) != stop && (stop.is_some() || !blank(line[pos])) {
                                pos += 1;
                            }
                        }
                        b'a' | b'd' => {
                            while pos < line.len() && line[pos].is_ascii_alphabetic() {
                                pos += 1;
                            }
                        }
                        b'D' => {
                            while pos < line.len() && line[pos].is_ascii_digit() {
                                pos += 1;
                            }
                            let maj = u32_dec(&line[start..pos]);
                            skip(&mut pos);
                            if line.get(pos) != Some(&b',') {
                                return Err("a device as major,minor (%D)".into());
                            }
                            pos += 1;
                            skip(&mut pos);
                            let s2 = pos;
                            while pos < line.len() && line[pos].is_ascii_digit() {
                                pos += 1;
                            }
                            dev = Some((
                                maj.ok_or(Bad::from("a major number (%D)"))?,
                                u32_dec(&line[s2..pos]).ok_or(Bad::from("a minor number (%D)"))?,
                            ));
                            continue;
                        }
                        _ => {
                            if line.get(pos) == Some(&b'-') {
                                pos += 1;
                            }
                            while pos < line.len() && line[pos].is_ascii_digit() {
                                pos += 1;
                            }
                        }
                    }
                    let tok = &line[start..pos];
                    let need = |what: &'static str| Bad::from(what);
                    match f {
                        b'T' => sec = Some(u64_dec(tok).ok_or(need("seconds (%T)"))?),
                        b't' => nsec = Some(u64_dec(tok).ok_or(need("nanoseconds (%t)"))?),
                        b'S' => sector = Some(u64_dec(tok).ok_or(need("a sector (%S)"))?),
                        b'n' => blocks = Some(u32_dec(tok).ok_or(need("a sector count (%n)"))?),
                        b'N' => bytes = Some(u64_dec(tok).ok_or(need("a byte count (%N)"))?),
                        b'M' => major = Some(u32_dec(tok).ok_or(need("a major number (%M)"))?),
                        b'm' => minor = Some(u32_dec(tok).ok_or(need("a minor number (%m)"))?),
                        b'd' => rwbs = Some(tok),
                        b'a' => act = Some(tok),
                        _ => {
                            if tok.is_empty() && !matches!(f, b'C' | b'P' | b'z') {
                                return Err(Bad::from(format!("a value for %{}", *f as char)));
                            }
                        }
                    }
                }
            }
        }
        if let Some(a) = act {
            if a != [action] {
                *other = true;
                return Ok(None);
            }
        }
        let time = sec
            .unwrap_or(0)
            .checked_mul(1_000_000_000)
            .and_then(|s| s.checked_add(nsec.unwrap_or(0)))
            .ok_or(Bad::from("a time that fits 64-bit nanoseconds"))?;
        let dev = match (dev, major, minor) {
            (Some((a, b)), _, _) => devs.majmin(a, b),
            (None, a, b) if a.is_some() || b.is_some() => devs.majmin(a.unwrap_or(0), b.unwrap_or(0)),
            _ => devs.num(0),
        };
        let n = match (blocks, bytes) {
            (Some(n), _) => n,
            (None, Some(b)) => u32::try_from(b.div_ceil(512)).map_err(|_| Bad::from("a size under 2 TiB"))?,
            _ => 0,
        };
        record(time, dev, rwbs.unwrap_or(b""), sector.map(|s| (s, n)))
    }
}

/// The blkparse text reader.
pub struct Blkparse {
    action: u8,
    summary: bool,
    custom: Option<Custom>,
    skips: Skips,
    /// The line being parsed is an event of another action.
    other_action: bool,
}

/// Lines read that are not requests, by reason.
#[derive(Default)]
struct Skips {
    comment: u64,
    runtime: u64,
    summary: u64,
    other_action: u64,
    no_request: u64,
}

impl Blkparse {
    /// A reader with the options' custom format (`blkparse_format`), if any.
    pub fn new(opts: &ReadOptions) -> Result<Self, TraceError> {
        let custom = opts.blkparse_format.as_deref().map(Custom::compile).transpose()?;
        Ok(Blkparse {
            action: opts.blk_action.letter(),
            summary: false,
            custom,
            skips: Skips::default(),
            other_action: false,
        })
    }

    fn default_line(&mut self, line: &[u8], devs: &mut Devices) -> Result<Option<TraceRecord>, Bad> {
        let mut t = Tokens::new(line);
        let dev = t.next().and_then(majmin).ok_or(Bad::from(
            "a blkparse event line starting with the device `major,minor`",
        ))?;
        let cpu = t.next().and_then(u64_dec);
        let seq = t.next().and_then(u64_dec);
        if cpu.is_none() || seq.is_none() {
            return Err("the cpu and sequence numbers after the device".into());
        }
        let time = t
            .next()
            .and_then(|x| fixed_ns(x, 1_000_000_000))
            .ok_or(Bad::from("a time `seconds.nanoseconds` in field 4"))?;
        t.next().and_then(u64_dec).ok_or(Bad::from("a pid in field 5"))?;
        let act = t.next().ok_or(Bad::from("an action in field 6"))?;
        if act != [self.action] {
            self.other_action = true;
            return Ok(None);
        }
        let rwbs = t.next().ok_or(Bad::from("RWBS flags in field 7"))?;
        let (span, elapsed) = span(t.rest())?;
        let devid = devs.majmin(dev.0, dev.1);
        let mut r = record(time, devid, rwbs, span)?;
        if let (Some(r), Some(e)) = (r.as_mut(), elapsed) {
            if self.action == b'C' {
                r.latency = Some(e);
            }
        }
        Ok(r)
    }
}

impl LineFormat for Blkparse {
    fn parse(&mut self, line: &[u8], devs: &mut Devices) -> Result<Option<TraceRecord>, Bad> {
        self.other_action = false;
        if line.starts_with(b"#") {
            self.skips.comment += 1;
            return Ok(None);
        }
        if line.starts_with(b"Input file ") {
            self.skips.runtime += 1;
            return Ok(None);
        }
        if is_summary(line) {
            self.summary = true;
            self.skips.summary += 1;
            return Ok(None);
        }
        if let Some(c) = &self.custom {
            let r = c.parse(line, self.action, devs, &mut self.other_action);
            match (c.only, r) {
                (None, r) => return self.counted(r),
                (Some(_), Ok(x)) => return self.counted(Ok(x)),
                (Some(_), Err(e)) => {
                    if !looks_like_event(line) {
                        return if self.summary {
                            self.skips.summary += 1;
                            Ok(None)
                        } else {
                            Err(e)
                        };
                    }
                }
            }
        }
        if self.summary && !looks_like_event(line) {
            self.skips.summary += 1;
            return Ok(None);
        }
        let r = self.default_line(line, devs);
        self.counted(r)
    }

    fn skipped_lines(&self) -> Vec<(String, u64)> {
        let s = &self.skips;
        let action = self.action as char;
        [
            ("comment lines (#)".to_string(), s.comment),
            ("blkparse run-time lines (Input file ...)".to_string(), s.runtime),
            ("summary lines".to_string(), s.summary),
            (format!("events other than {action}"), s.other_action),
            (
                format!("{action} events that are not requests (no data, not a flush)"),
                s.no_request,
            ),
        ]
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .collect()
    }
}

impl Blkparse {
    /// Counts an event line that gave no request: another action, or the
    /// chosen action without data (`N`, a PC request, a remap's message).
    fn counted(&mut self, r: Result<Option<TraceRecord>, Bad>) -> Result<Option<TraceRecord>, Bad> {
        if let Ok(None) = r {
            if self.other_action {
                self.skips.other_action += 1;
            } else {
                self.skips.no_request += 1;
            }
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rwbs_strings() {
        assert_eq!(parse_rwbs(b"R").unwrap().0, RwbsKind::Read);
        let (k, f) = parse_rwbs(b"WS").unwrap();
        assert_eq!(k, RwbsKind::Write);
        assert!(f.has(RecFlags::SYNC));
        let (k, f) = parse_rwbs(b"FWFSM").unwrap();
        assert_eq!(k, RwbsKind::Write);
        assert!(f.has(RecFlags::PREFLUSH) && f.has(RecFlags::FUA) && f.has(RecFlags::SYNC) && f.has(RecFlags::META));
        assert_eq!(parse_rwbs(b"FN").unwrap().0, RwbsKind::None);
        assert!(parse_rwbs(b"FN").unwrap().1.has(RecFlags::PREFLUSH));
        assert_eq!(parse_rwbs(b"DE").unwrap().0, RwbsKind::Discard);
        assert_eq!(parse_rwbs(b"ZA").unwrap().0, RwbsKind::Write);
        assert_eq!(parse_rwbs(b"ZRA").unwrap().0, RwbsKind::None);
        assert!(parse_rwbs(b"RA").unwrap().1.has(RecFlags::READAHEAD));
        assert!(parse_rwbs(b"X").is_none());
        assert!(parse_rwbs(b"").is_none());
        assert!(parse_rwbs(b"RQ").is_none());
    }
}
