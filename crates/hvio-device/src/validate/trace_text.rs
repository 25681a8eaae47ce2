//! Reading a DiskSim validation trace's text into [`TraceRecord`]s at a
//! small part of a replay's cost: a replay's time includes reading its
//! trace, as DiskSim's does (docs/hdd-model.md, "Replay speed").
//!
//! Every line is read one of two ways, to the same result. The quick way
//! takes a line as the validation traces write it: `R` or `W`, a word of
//! printable ASCII, and four unsigned numbers of at most 15 digits (the last
//! two with at most one point), between runs of ASCII whitespace; it
//! reads eight bytes at a time with integer arithmetic (a run of spaces,
//! a run of digits and its value) and turns a decimal into an `f64` with
//! one division (Clinger's fast path, which `str::parse` takes too). Any
//! other line (a number written another way, `+5`, `1e3`, 16 digits; a
//! byte that is not ASCII; a wrong field) is read the plain way, with
//! `split_ascii_whitespace` and `str::parse`, which also names what is wrong
//! by file, line and field. A line the quick way takes is ASCII, and the
//! plain way checks the others' UTF-8, so the whole file is checked
//! without a separate pass, and an error is the one reading the file as
//! text and then parsing it would give: a byte that is not UTF-8 anywhere
//! in the file comes before a field that does not parse.

use super::{TraceRecord, ValidateError, MAX_GAP_MS};
use crate::disksim::parse::not_utf8;

/// The requests of a validation trace's bytes, read from `file` (named in errors).
pub(super) fn parse(bytes: &[u8], file: &str) -> Result<Vec<TraceRecord>, ValidateError> {
    let mut out = Vec::with_capacity(bytes.len() / 24);
    let (mut at, mut line) = (0, 0);
    // Lines as `str::lines` counts them: each ends at a `\n` or the end of the text.
    while at < bytes.len() {
        line += 1;
        let start = at;
        let record = match quick_line(bytes, start) {
            Quick::Record(r, len) => {
                at += len;
                Some(r)
            }
            Quick::Blank(len) => {
                at += len;
                None
            }
            Quick::Other => {
                let end = bytes[start..]
                    .iter()
                    .position(|&c| c == b'\n')
                    .map_or(bytes.len(), |k| start + k);
                at = end + 1;
                plain_line(bytes, start, end, file, line)?
            }
        };
        if let Some(r) = record {
            out.push(TraceRecord { line, ..r });
        }
    }
    if out.is_empty() {
        return Err(ValidateError::File {
            file: file.to_string(),
            msg: "no requests".into(),
        });
    }
    Ok(out)
}

/// What the quick reading made of a line.
enum Quick {
    /// A request (its `line` not yet set), and the length of its line.
    Record(TraceRecord, usize),
    /// Whitespace only, and its length.
    Blank(usize),
    /// Something to read the plain way.
    Other,
}

/// The most bytes of a line the quick reading takes (with its `\n`): the
/// validation traces' lines are 40 to 50.
const WINDOW: usize = 64;

/// The [`WINDOW`] bytes from a line's start and eight more: the text's
/// own, or at the end of the text a copy padded with zeros; every word
/// the quick reading loads is in bounds. A position is taken modulo
/// [`WINDOW`]; one past the window means a line too long for it, which
/// the quick reading leaves to the plain one (positions only grow along
/// a line, so its end is then past the window too).
struct Window<'a> {
    /// The bytes.
    bytes: &'a [u8; WINDOW + 8],
    /// How many of the first [`WINDOW`] are the text's.
    len: usize,
}

impl Window<'_> {
    /// The byte at `p` (modulo the window).
    #[inline(always)]
    fn byte(&self, p: usize) -> u8 {
        self.bytes[p % WINDOW]
    }

    /// The eight bytes from `p` (modulo the window), the first in the lowest byte.
    #[inline(always)]
    fn word(&self, p: usize) -> u64 {
        let p = p % WINDOW;
        let mut w = [0u8; 8];
        w.copy_from_slice(&self.bytes[p..p + 8]);
        u64::from_le_bytes(w)
    }
}

/// The line starting at byte `at` of `text` (not its end), read the quick way.
#[inline(always)]
fn quick_line(text: &[u8], at: usize) -> Quick {
    let rest = &text[at..];
    match rest.first_chunk::<{ WINDOW + 8 }>() {
        Some(bytes) => quick_window(&Window { bytes, len: WINDOW }),
        None => {
            let mut bytes = [0u8; WINDOW + 8];
            let len = rest.len().min(WINDOW);
            bytes[..len].copy_from_slice(&rest[..len]);
            quick_window(&Window { bytes: &bytes, len })
        }
    }
}

/// The line at the start of `w`, read the quick way.
#[inline(always)]
fn quick_window(w: &Window) -> Quick {
    let i = skip_blanks(w, 0);
    let write = match w.byte(i) {
        b'\n' if i < w.len => return Quick::Blank(i + 1),
        _ if i == w.len && w.len < WINDOW => return Quick::Blank(i),
        b'R' | b'r' => false,
        b'W' | b'w' => true,
        _ => return Quick::Other,
    };
    let Some(i) = next_field(w, i + 1) else {
        return Quick::Other;
    };
    // What the real disk's cache did: read only to check the format. (An
    // empty word is no field: no blank can follow it, where a blank run ended.)
    let n = printable(w.word(i));
    let Some(i) = next_field(w, i + n) else {
        return Quick::Other;
    };
    let (lbn, n) = digits(w, i);
    // 19 digits always fit a u64.
    if !(1..=19).contains(&n) {
        return Quick::Other;
    }
    let Some(i) = next_field(w, i + n) else {
        return Quick::Other;
    };
    let (sectors, n) = digits(w, i);
    if !(1..=9).contains(&n) || sectors == 0 {
        return Quick::Other;
    }
    let Some((service_us, end)) = next_field(w, i + n).and_then(|i| decimal(w, i)) else {
        return Quick::Other;
    };
    let Some((gap_us, end)) = next_field(w, end).and_then(|i| decimal(w, i)) else {
        return Quick::Other;
    };
    let gap_ms = gap_us / 1000.0;
    if gap_ms > MAX_GAP_MS {
        return Quick::Other;
    }
    let i = skip_blanks(w, end);
    let len = match w.byte(i) {
        b'\n' if i < w.len => i + 1,
        _ if i == w.len && w.len < WINDOW => i,
        _ => return Quick::Other,
    };
    let record = TraceRecord {
        write,
        lbn,
        sectors: sectors as u32,
        measured_ms: service_us / 1000.0,
        gap_ms,
        line: 0,
    };
    Quick::Record(record, len)
}

/// A line that is not in the quick form, `b[start..end]`, read with
/// `split_ascii_whitespace` and `str::parse`: its request, `None` for a
/// blank line, or what is wrong with it.
#[cold]
fn plain_line(
    b: &[u8],
    start: usize,
    end: usize,
    file: &str,
    line: usize,
) -> Result<Option<TraceRecord>, ValidateError> {
    let text = std::str::from_utf8(&b[start..end]).map_err(|e| not_utf8(file, b, start + e.valid_up_to()))?;
    plain_fields(text).map_err(|msg| {
        // Read as text first, the file's first byte that is not UTF-8 is its error.
        match std::str::from_utf8(&b[end..]) {
            Err(e) => not_utf8(file, b, end + e.valid_up_to()).into(),
            Ok(_) => ValidateError::Trace {
                file: file.to_string(),
                line,
                msg,
            },
        }
    })
}

/// The request of one line of text, `None` if it is blank, or what is wrong with it.
fn plain_fields(text: &str) -> Result<Option<TraceRecord>, String> {
    let (mut f, mut n) = ([""; 6], 0);
    for (k, w) in text.split_ascii_whitespace().enumerate() {
        if k < 6 {
            f[k] = w;
        }
        n = k + 1;
    }
    if n == 0 {
        return Ok(None);
    }
    if n != 6 {
        return Err(format!(
            "expected 6 fields (R|W, Hit|Miss|Doub|Trip, LBN, sectors, service µs, gap µs), found {n}"
        ));
    }
    let write = match f[0] {
        "R" | "r" => false,
        "W" | "w" => true,
        other => return Err(format!("operation `{other}` is not R or W")),
    };
    let lbn = f[2]
        .parse::<u64>()
        .map_err(|_| format!("LBN `{}` is not a block number", f[2]))?;
    let sectors = f[3]
        .parse::<u32>()
        .ok()
        .filter(|&s| s > 0)
        .ok_or_else(|| format!("size `{}` is not a positive number of sectors", f[3]))?;
    let num = |s: &str, what: &str| {
        s.parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
            .ok_or_else(|| format!("{what} `{s}` is not a non-negative number"))
    };
    let measured_ms = num(f[4], "service time")? / 1000.0;
    let gap_ms = num(f[5], "inter-arrival gap")? / 1000.0;
    // A gap beyond 1000 s would push the replay clock past u64 ns.
    if gap_ms > MAX_GAP_MS {
        return Err(format!("inter-arrival gap `{}` µs is more than 1e9 µs", f[5]));
    }
    Ok(Some(TraceRecord {
        write,
        lbn,
        sectors,
        measured_ms,
        gap_ms,
        line: 0,
    }))
}

/// Each byte of a word set to `c`.
const fn splat(c: u8) -> u64 {
    u64::from_le_bytes([c; 8])
}

/// The first position at or after `i` whose byte is not ASCII whitespace
/// other than `\n` (the blanks between fields: space, tab, form feed,
/// carriage return), or one past the window.
#[inline(always)]
fn skip_blanks(w: &Window, mut i: usize) -> usize {
    while i < WINDOW {
        // Spaces eight at a time: the first byte of the word that is not one.
        let not_space = w.word(i) ^ splat(b' ');
        if not_space == 0 {
            i += 8;
            continue;
        }
        i += not_space.trailing_zeros() as usize / 8;
        match w.byte(i) {
            b'\t' | b'\x0c' | b'\r' => i += 1,
            _ => return i,
        }
    }
    i
}

/// Where the field after one that ends at `end` starts, if blanks end
/// that one (else the line is read the plain way).
#[inline(always)]
fn next_field(w: &Window, end: usize) -> Option<usize> {
    // Most often a few spaces, then the field: one word tells.
    let not_space = w.word(end) ^ splat(b' ');
    let start = end + not_space.trailing_zeros() as usize / 8;
    if start > end && w.byte(start) > b' ' {
        return Some(start);
    }
    match w.byte(end) {
        b' ' | b'\t' | b'\x0c' | b'\r' => Some(skip_blanks(w, end + 1)),
        _ => None,
    }
}

/// How many of the eight bytes of `w` (the first in the lowest byte) lead
/// with printable ASCII, 0x21..=0x7f: bytes up to 0x20 have no top bit
/// after adding 0x5f, and bytes from 0x80 have it before (a carry runs
/// only into later bytes, past the first that is not printable).
#[inline(always)]
fn printable(w: u64) -> usize {
    let not_printable = (!w.wrapping_add(splat(0x5f)) | w) & splat(0x80);
    not_printable.trailing_zeros() as usize / 8
}

/// How many of the eight bytes of `w` (the first in the lowest byte)
/// lead with ASCII digits, and their value. A digit byte less `'0'` is
/// 0..=9; any other byte is 10 or more, or has its top bit set, and so
/// does (byte + 0x76); a borrow or a carry runs only into later bytes,
/// past the first that is not a digit.
#[inline(always)]
fn digits8(w: u64) -> (u64, usize) {
    let d = w.wrapping_sub(splat(b'0'));
    let not_digit = (d.wrapping_add(splat(0x76)) | d) & splat(0x80);
    let n = not_digit.trailing_zeros() as usize / 8;
    // The n digits moved to the top bytes, zeros (leading) below them.
    let value = d.checked_shl(64 - 8 * n as u32).map_or(0, eight_digits);
    (value, n)
}

/// The run of ASCII digits at `i`: its value (modulo 2^64) and its length.
#[inline(always)]
fn digits(w: &Window, i: usize) -> (u64, usize) {
    let (mut value, mut len) = digits8(w.word(i));
    if len == 8 {
        // A longer run, eight at a time (one past the window stops there).
        loop {
            let (more, n) = digits8(w.word(i + len));
            value = value.wrapping_mul(POW10[n]).wrapping_add(more);
            len += n;
            if n < 8 || len >= WINDOW {
                break;
            }
        }
    }
    (value, len)
}

/// [`POW10`] as f64, each exact.
const POW10_F64: [f64; 16] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
];

/// Powers of ten up to 10^15.
const POW10: [u64; 16] = [
    1,
    10,
    100,
    1_000,
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    100_000_000,
    1_000_000_000,
    10_000_000_000,
    100_000_000_000,
    1_000_000_000_000,
    10_000_000_000_000,
    100_000_000_000_000,
    1_000_000_000_000_000,
];

/// The value of eight digit values 0..=9, one a byte, the most significant
/// in the lowest byte: neighbours paired, then the pairs, then the fours.
#[inline(always)]
fn eight_digits(d: u64) -> u64 {
    let d = (d.wrapping_mul(10).wrapping_add(d >> 8)) & 0x00ff_00ff_00ff_00ff;
    let d = (d.wrapping_mul(100).wrapping_add(d >> 16)) & 0x0000_ffff_0000_ffff;
    (d.wrapping_mul(10_000).wrapping_add(d >> 32)) & 0xffff_ffff
}

/// The decimal `digits[.digits]` at `i` with 1 to 15 digits,
/// to the bit as `str::parse::<f64>` reads it, and the byte after it;
/// `None` for anything else.
#[inline(always)]
fn decimal(w: &Window, i: usize) -> Option<(f64, usize)> {
    let (int, n_int) = digits(w, i);
    let (frac, n_frac, end) = match w.byte(i + n_int) {
        b'.' => {
            let (frac, n) = digits(w, i + n_int + 1);
            (frac, n, i + n_int + 1 + n)
        }
        _ => (0, 0, i + n_int),
    };
    if !(1..=15).contains(&(n_int + n_frac)) {
        return None;
    }
    let mantissa = int * POW10[n_frac] + frac;
    // Both below 2^53, so exact as f64, and one division rounds correctly.
    Some((mantissa as i64 as f64 / POW10_F64[n_frac], end))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A record with its decimals as their bits.
    type Bits = (bool, u64, u32, u64, u64, usize);
    /// An error as (kind, file, line).
    type Named = (&'static str, String, usize);

    /// The plain reading of a whole trace: the bytes as UTF-8 text, then
    /// `str::lines`, `split_ascii_whitespace` and `str::parse`. The error
    /// as (kind, file, line).
    fn reference(bytes: &[u8], file: &str) -> Result<Vec<TraceRecord>, Named> {
        let text = std::str::from_utf8(bytes).map_err(|e| {
            let line = bytes[..e.valid_up_to()].iter().filter(|&&c| c == b'\n').count() + 1;
            ("utf8", file.to_string(), line)
        })?;
        let mut out = Vec::new();
        for (k, l) in text.lines().enumerate() {
            let bad = || ("trace", file.to_string(), k + 1);
            let f: Vec<&str> = l.split_ascii_whitespace().collect();
            if f.is_empty() {
                continue;
            }
            if f.len() != 6 {
                return Err(bad());
            }
            let write = match f[0] {
                "R" | "r" => false,
                "W" | "w" => true,
                _ => return Err(bad()),
            };
            let lbn: u64 = f[2].parse().map_err(|_| bad())?;
            let sectors: u32 = f[3].parse().map_err(|_| bad())?;
            let service: f64 = f[4].parse().map_err(|_| bad())?;
            let gap: f64 = f[5].parse().map_err(|_| bad())?;
            let ok = |v: f64| v.is_finite() && v >= 0.0;
            if sectors == 0 || !ok(service) || !ok(gap) || gap / 1000.0 > 1e6 {
                return Err(bad());
            }
            out.push(TraceRecord {
                write,
                lbn,
                sectors,
                measured_ms: service / 1000.0,
                gap_ms: gap / 1000.0,
                line: k + 1,
            });
        }
        if out.is_empty() {
            return Err(("empty", file.to_string(), 0));
        }
        Ok(out)
    }

    /// [`parse`]'s result in [`reference`]'s terms, decimals as their bits.
    fn quick(bytes: &[u8]) -> Result<Vec<Bits>, Named> {
        match parse(bytes, "t.trace") {
            Ok(v) => Ok(bits(&v)),
            Err(ValidateError::Trace { file, line, .. }) => Err(("trace", file, line)),
            Err(ValidateError::Spec(crate::disksim::SpecError::Syntax { file, line, msg })) => {
                assert!(msg.contains("not UTF-8"), "{msg}");
                Err(("utf8", file, line as usize))
            }
            Err(ValidateError::File { file, .. }) => Err(("empty", file, 0)),
            Err(e) => panic!("unexpected error {e}"),
        }
    }

    fn bits(v: &[TraceRecord]) -> Vec<Bits> {
        v.iter()
            .map(|r| {
                (
                    r.write,
                    r.lbn,
                    r.sectors,
                    r.measured_ms.to_bits(),
                    r.gap_ms.to_bits(),
                    r.line,
                )
            })
            .collect()
    }

    fn same_as_reference(bytes: &[u8]) -> Result<(), TestCaseError> {
        let want = reference(bytes, "t.trace").map(|v| bits(&v));
        prop_assert_eq!(quick(bytes), want, "{:?}", String::from_utf8_lossy(bytes));
        Ok(())
    }

    #[test]
    fn lines_read_as_the_plain_reading_reads_them() {
        for text in [
            "",
            "\n",
            "R Hit 1 8 1.5 2.5\n",
            "R Hit 1 8 1.5 2.5",
            "W\tMiss   10 4 3.0 0.0\r\nR Hit 1 8 1.5 2.5\r\n\n\n  \t\n",
            "R Hit    2992396   4  13670.00000  35942.00000\n",
            "R Miss  564347     2     14095.370     13876.270\n",
            "R Hit 265552 2 14901.000000 4757.708232\n",
            "r x 18446744073709551615 4294967295 0.5 5.\n",
            "R Hit 18446744073709551616 8 1 1\n",
            "R Hit 1 4294967296 1 1\n",
            "R Hit 1 0 1 1\n",
            "R Hit +1 +8 +1.5 +2.5\n",
            "R Hit 1 8 1e3 -0\n",
            "R Hit 1 8 -1 1\n",
            "R Hit 1 8 inf 1\n",
            "R Hit 1 8 NaN 1\n",
            "R Hit 1 8 1 1e9\n",
            "R Hit 1 8 1 1000000001\n",
            "R Hit 1 8 1 1000000000.0\n",
            "R Hit 1 8 . 1\n",
            "R Hit 1 8 1.2.3 1\n",
            "R Hit 1 8 0000000000000001 1\n",
            "R Hit 1 8 123456789.0123456 1\n",
            "R Hit 1 8 12345678.9012345 0.3\n",
            "R Hit 1 8 1 1 7\n",
            "R Hit 1 8 1\n",
            "R\n",
            "R Hit\u{b} 1 8 1 1\n",
            "R Hé 1 8 1 1\n",
            "R Hit\u{a0}1 8 1 1\n",
            "R Hit 1 8 1 1\n\u{c}R\u{b}1\n",
            "X Hit 1 8 1 1\n",
            "R Hit 1 8 1 1\nR Hit 1 8 1 1\nW Hit 1 8 x 1\n",
        ] {
            same_as_reference(text.as_bytes()).unwrap();
        }
        // Lines about as long as the quick reading's window, and longer.
        for pad in [0, 40, 48, 49, 50, 51, 52, 60, 64, 70, 100] {
            let sp = " ".repeat(pad);
            for text in [
                format!("R Hit 1 8 1 1{sp}\n"),
                format!("R Hit 1 8 1 1{sp}"),
                format!("{sp}R Hit 1 8 1 1\nW Hit 2 8 1 1\n"),
                format!("R Hit 1 8{sp} 1 1\n"),
                format!("R Hit {}1 8 1 1\n", "0".repeat(pad)),
                format!("R Hit 1 8 1.{} 1\n", "0".repeat(pad)),
                format!("{sp}\n{sp}"),
                format!("R Hit 1 8 1 1\n{sp}"),
            ] {
                same_as_reference(text.as_bytes()).unwrap();
            }
        }
        // A byte that is not UTF-8 after a bad field, and in the word a good line does not check.
        same_as_reference(b"R Hit 1 8 x 1\n\nR Hit 1 8 1 1 \xff\n").unwrap();
        same_as_reference(b"R H\xc3 1 8 1 1\n").unwrap();
        same_as_reference(b"R Hit 1 8 1 1\nR H\xe2\x82 1 8 1 1").unwrap();
    }

    #[test]
    fn the_validation_traces_lines_are_read_the_quick_way() {
        // One line of each of the five traces' forms, then with a CRLF
        // ending, tabs, and at the end of a text of more than a window.
        for line in [
            "W Hit    4583176   4    663.00000  45422.00000",
            "R Hit    2992396   4  13670.00000  35942.00000",
            "R Miss  564347     2     14095.370     13876.270",
            "R Hit 265552 2 14901.000000 4757.708232",
            "R Hit   17317516   4  13661.00000  26658.00000",
        ] {
            for text in [
                format!("{line}\n"),
                format!("{line}\r\n"),
                format!("{}\n", line.replace(' ', "\t")),
                line.to_string(),
                format!("{line}\n{line}\n"),
            ] {
                assert!(matches!(quick_line(text.as_bytes(), 0), Quick::Record(..)), "{text:?}");
            }
        }
    }

    /// [`decimal`] of all of `s`, from the start of a window on it.
    fn quick_decimal(s: &str) -> Option<(f64, usize)> {
        let mut bytes = [0u8; WINDOW + 8];
        bytes[..s.len()].copy_from_slice(s.as_bytes());
        decimal(
            &Window {
                bytes: &bytes,
                len: s.len(),
            },
            0,
        )
    }

    #[test]
    fn decimals_read_as_the_standard_library_reads_them() {
        for s in [
            "0",
            "0.0",
            "663.00000",
            "45422.00000",
            "5.",
            ".5",
            ".",
            "",
            "1e3",
            "+1",
            "-0",
            "1.2.3",
            "0.1",
            "0.3",
            "999999999999999",
            "9999999999999999",
            "123456789.012345",
            "12345678.9012345",
            "00000000000000001",
            "inf",
            "NaN",
            " 1",
        ] {
            // The quick reading takes the plain form whole, to the bits of
            // `str::parse`, and leaves any other to it.
            let digits = s.bytes().filter(u8::is_ascii_digit).count();
            let plain = s.bytes().all(|c| c.is_ascii_digit() || c == b'.')
                && s.matches('.').count() <= 1
                && (1..=15).contains(&digits);
            match quick_decimal(s) {
                Some((v, end)) if end == s.len() => {
                    assert!(plain, "{s}: not the plain form, but taken");
                    assert_eq!(v.to_bits(), s.parse::<f64>().unwrap().to_bits(), "{s}");
                }
                _ => assert!(!plain, "{s}: the plain form, but not taken"),
            }
        }
    }

    /// A decimal as a trace may write it, and the ways it may not be.
    fn decimal_text() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => ("[0-9]{0,12}", proptest::option::of("[0-9]{0,12}")).prop_map(|(i, f)| match f {
                Some(f) => format!("{i}.{f}"),
                None => i,
            }),
            1 => "[-+]?[0-9.]{0,20}([eE][-+]?[0-9]{1,3})?",
            1 => prop_oneof![Just("inf".to_string()), Just("NaN".to_string()), Just("1e400".to_string())],
        ]
    }

    /// A field that may or may not be an integer.
    fn integer_text() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => "[0-9]{1,21}",
            1 => "[-+]?[0-9a]{0,4}",
            1 => prop_oneof![Just("18446744073709551615".to_string()), Just("4294967296".to_string())],
        ]
    }

    /// Between fields: mostly spaces, sometimes any ASCII whitespace, or none.
    fn gap_text() -> impl Strategy<Value = String> {
        prop_oneof![
            6 => " {1,12}",
            1 => " {8,40}",
            1 => "[ \t\r\u{c}]{1,4}",
            1 => "[ \u{b}\u{a0}]{0,2}",
        ]
    }

    /// A whole line: six fields in the trace's form, each sometimes in another.
    fn line_text() -> impl Strategy<Value = String> {
        (
            prop_oneof![4 => "[RWrw]", 1 => "[RWX]{0,2}"],
            prop_oneof![4 => "(Hit|Miss|Doub|Trip)", 1 => "[a-zé\u{b}]{0,3}", 1 => "[!-~\u{7f}\u{80}]{6,10}"],
            integer_text(),
            integer_text(),
            decimal_text(),
            decimal_text(),
            proptest::collection::vec(gap_text(), 7),
            prop_oneof![6 => Just(String::new()), 1 => " [0-9x]{1,3}"],
            prop_oneof![6 => Just("\n"), 1 => Just("\r\n"), 1 => Just("")],
        )
            .prop_map(|(op, cache, lbn, size, service, gap, g, extra, end)| {
                format!(
                    "{}{op}{}{cache}{}{lbn}{}{size}{}{service}{}{gap}{extra}{}{end}",
                    g[0], g[1], g[2], g[3], g[4], g[5], g[6]
                )
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn a_decimal_reads_to_the_bits_str_parse_gives(service in decimal_text()) {
            same_as_reference(format!("R Hit 1 8 {service} 1\n").as_bytes())?;
            same_as_reference(format!("R Hit 1 8 1 {service}").as_bytes())?;
        }

        #[test]
        fn an_integer_reads_as_str_parse_reads_it(lbn in integer_text(), size in integer_text()) {
            same_as_reference(format!("W Miss {lbn} {size} 1.5 2.5\n").as_bytes())?;
        }

        #[test]
        fn any_trace_reads_as_the_plain_reading_reads_it(
            lines in proptest::collection::vec(line_text(), 0..6)
        ) {
            same_as_reference(lines.concat().as_bytes())?;
        }

        #[test]
        fn any_bytes_read_as_the_plain_reading_reads_them(
            bytes in proptest::collection::vec(
                prop_oneof![
                    Just(b' '), Just(b'\t'), Just(b'\n'), Just(b'\r'), Just(0x0c), Just(0x0b),
                    Just(b'R'), Just(b'W'), Just(b'.'), Just(b'7'), Just(b'0'), Just(b'!'), Just(0x7f),
                    Just(0x80), Just(0xc3), Just(0xa9), Just(0xff),
                ],
                0..80,
            )
        ) {
            same_as_reference(&bytes)?;
        }
    }
}
