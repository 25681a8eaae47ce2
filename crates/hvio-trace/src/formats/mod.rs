//! One module per trace format.

pub mod blkparse;
pub mod blktrace;
pub mod columns;
pub mod iolog;
pub mod vscsi;

use crate::error::TraceError;
use crate::input::Input;
use crate::parse::{fixed_ns, u64_dec, Split, Tokens};
use crate::reader::{Format, ReadOptions, Source, TextSource};

/// The record source for one input in a given format.
pub(crate) fn source(input: Input, format: Format, opts: &ReadOptions) -> Result<Box<dyn Source>, TraceError> {
    Ok(match format {
        Format::Blkparse => Box::new(TextSource::new(input, blkparse::Blkparse::new(opts)?)),
        Format::Blktrace => Box::new(blktrace::Merged::new(vec![input], opts.blk_action)?),
        Format::Iolog2 => Box::new(TextSource::new(input, iolog::Iolog::new(2))),
        Format::Iolog3 => Box::new(TextSource::new(input, iolog::Iolog::new(3))),
        Format::Msr => Box::new(TextSource::new(input, columns::Msr::default())),
        Format::Spc => Box::new(TextSource::new(input, columns::Spc::default())),
        Format::Alibaba => Box::new(TextSource::new(input, columns::Alibaba::default())),
        Format::Tencent => Box::new(TextSource::new(input, columns::Tencent::default())),
        Format::Fiu => Box::new(TextSource::new(input, columns::Fiu)),
        Format::Disksim => Box::new(TextSource::new(input, columns::Disksim)),
        Format::Mqsim => Box::new(TextSource::new(
            input,
            columns::Mqsim {
                unit_ns: opts.mqsim_time_unit_ns.max(1),
            },
        )),
        Format::Vscsi1 => Box::new(vscsi::Vscsi::new(input, 1)),
        Format::Vscsi2 => Box::new(vscsi::Vscsi::new(input, 2)),
    })
}

fn is_rw(t: &[u8]) -> bool {
    matches!(t, b"r" | b"R" | b"w" | b"W")
}

/// Guesses a text format from the first meaningful line(s).
pub(crate) fn detect_text(head: &[u8]) -> Option<Format> {
    let mut lines = head
        .split(|&c| c == b'\n')
        .map(|l| crate::parse::trim(l.strip_suffix(b"\r").unwrap_or(l)))
        .filter(|l| !l.is_empty() && !l.starts_with(b"#"));
    let mut first = lines.next()?;
    if first.starts_with(b"fio version 2 iolog") {
        return Some(Format::Iolog2);
    }
    if first.starts_with(b"fio version 3 iolog") {
        return Some(Format::Iolog3);
    }
    if first.starts_with(b"Input file ") {
        return Some(Format::Blkparse);
    }
    // A CSV header line starts with a letter: judge by the next line.
    if first.first().is_some_and(|c| c.is_ascii_alphabetic()) && first.contains(&b',') {
        first = lines.next()?;
    }
    if first.contains(&b',') && !blkparse::looks_like_event(first) {
        let f: Vec<&[u8]> = Split::new(first, b',').collect();
        let int = |i: usize| f.get(i).and_then(|t| u64_dec(t)).is_some();
        if f.len() == 7
            && int(0)
            && !int(1)
            && (f[3].eq_ignore_ascii_case(b"read") || f[3].eq_ignore_ascii_case(b"write"))
        {
            return Some(Format::Msr);
        }
        if f.len() == 5 && int(0) && matches!(f[1], b"R" | b"W" | b"r" | b"w") && int(2) && int(3) && int(4) {
            return Some(Format::Alibaba);
        }
        if f.len() >= 5 && int(0) && int(1) && int(2) && is_rw(f[3]) && fixed_ns(f[4], 1).is_some() {
            return Some(Format::Spc);
        }
        if f.len() == 5 && (0..5).all(int) && matches!(f[3], b"0" | b"1") {
            return Some(Format::Tencent);
        }
        return None;
    }
    if blkparse::looks_like_event(first) {
        return Some(Format::Blkparse);
    }
    let t: Vec<&[u8]> = Tokens::new(first).collect();
    let int = |i: usize| t.get(i).and_then(|x| u64_dec(x)).is_some();
    if t.len() >= 9 && int(0) && int(1) && {
        let n = t.len();
        int(n - 6) && int(n - 5) && matches!(t[n - 4], b"R" | b"W" | b"r" | b"w") && int(n - 3) && int(n - 2)
    } {
        return Some(Format::Fiu);
    }
    if t.len() == 5 && int(1) && int(2) && int(3) {
        if t[0].contains(&b'.') && fixed_ns(t[0], 1).is_some() && crate::parse::u64_hex(t[4]).is_some() {
            return Some(Format::Disksim);
        }
        if int(0) && matches!(t[4], b"0" | b"1") {
            return Some(Format::Mqsim);
        }
    }
    None
}
