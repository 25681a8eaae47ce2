//! Reading a DiskSim validation trace's text into [`TraceRecord`]s at a
//! small part of a replay's cost: a replay's time includes reading its
//! trace, as DiskSim's does (docs/hdd-model.md, "Replay speed").
//!
//! Every line is read one of two ways, to the same result. The quick way
//! takes a line as the validation traces write it: `R` or `W`, a word of
//! ASCII, an LBN of at most 19 digits, a size of at most 9, and two
//! decimals of at most 15 digits with at most one point, between runs of
//! ASCII whitespace, the whole line within 64 bytes. It finds every
//! field at once: bit masks of the window's blanks, line ends, digits and
//! points (sixteen bytes a step with SSE2) give each field's start and end
//! without reading the field before it, so the fields' values, eight
//! digits at a time with integer arithmetic, do not wait on one another;
//! a decimal is one exact integer divided by a power of ten (Clinger's
//! fast path, which `str::parse` takes too). Any other line (a number
//! written another way, `+5`, `1e3`, 16 digits; a byte that is not ASCII;
//! a wrong field) is read the plain way, with `split_ascii_whitespace`
//! and `str::parse`, which also names what is wrong by file, line and
//! field. A line the quick way takes is ASCII, and the plain way checks
//! the others' UTF-8, so the whole file is checked without a separate
//! pass, and an error is the one reading the file as text and then
//! parsing it would give: a byte that is not UTF-8 anywhere in the file
//! comes before a field that does not parse.

use super::{TraceRecord, ValidateError, MAX_GAP_MS};
use crate::disksim::parse::not_utf8;

/// The requests of a validation trace's bytes, read from `file` (named in errors).
pub(super) fn parse(bytes: &[u8], file: &str) -> Result<Vec<TraceRecord>, ValidateError> {
    let mut out = Vec::with_capacity(bytes.len() / 24);
    parse_into(bytes, file, &mut out)?;
    Ok(out)
}

/// [`parse`] into `out` (emptied first), whose memory a caller reading
/// trace after trace keeps.
pub(super) fn parse_into(bytes: &[u8], file: &str, out: &mut Vec<TraceRecord>) -> Result<(), ValidateError> {
    out.clear();
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
    Ok(())
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
    let m = Masks::of(w.bytes);
    // The line ends at its first `\n` or at the end of the text, within the window.
    let past_text = if w.len < WINDOW { !0u64 << w.len } else { 0 };
    let ends_at = m.newline | past_text;
    if ends_at == 0 {
        return Quick::Other;
    }
    let end = ends_at.trailing_zeros() as usize;
    let len = if end < w.len { end + 1 } else { end };
    let in_line = (1u64 << end) - 1;
    // The fields: runs of bytes that are not blanks. Where each starts and
    // ends comes from the masks at once, not from reading the field before.
    let field = !m.blank & in_line;
    let mut starts = field & !(field << 1);
    let mut ends = field & !(field >> 1);
    if starts == 0 {
        return Quick::Blank(len);
    }
    let mut span = [(0usize, 0usize); 6];
    for f in &mut span {
        *f = (starts.trailing_zeros() as usize, ends.trailing_zeros() as usize + 1);
        starts &= starts.wrapping_sub(1);
        ends &= ends.wrapping_sub(1);
    }
    // Six fields (no sixth: it starts at 64, past the window; a seventh:
    // starts left), ASCII only: the plain reading checks the others' UTF-8.
    if span[5].0 >= WINDOW || starts != 0 || m.high & in_line != 0 {
        return Quick::Other;
    }
    let write = match (span[0].1 - span[0].0, w.byte(span[0].0)) {
        (1, b'R' | b'r') => false,
        (1, b'W' | b'w') => true,
        _ => return Quick::Other,
    };
    // span[1], what the real disk's cache did, is not read.
    // 19 digits always fit a u64.
    let Some(lbn) = m.integer(w, span[2], 19) else {
        return Quick::Other;
    };
    let Some(sectors) = m.integer(w, span[3], 9).filter(|&s| s > 0) else {
        return Quick::Other;
    };
    let (Some(service_us), Some(gap_us)) = (m.decimal(w, span[4]), m.decimal(w, span[5])) else {
        return Quick::Other;
    };
    let gap_ms = gap_us / 1000.0;
    if gap_ms > MAX_GAP_MS {
        return Quick::Other;
    }
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

/// Which of a window's first [`WINDOW`] bytes are blanks (space, tab, form
/// feed, carriage return: the ASCII whitespace that is not `\n`), line
/// ends, digits, points and not ASCII: bit `i` for byte `i`.
#[derive(Default, Debug, PartialEq)]
struct Masks {
    blank: u64,
    newline: u64,
    digit: u64,
    point: u64,
    high: u64,
}

impl Masks {
    /// The masks of the first [`WINDOW`] bytes, sixteen bytes a step.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn of(bytes: &[u8; WINDOW + 8]) -> Masks {
        use std::arch::x86_64::*;
        let mut m = Masks::default();
        for k in 0..WINDOW / 16 {
            // SAFETY: SSE2 is part of x86_64, and the load reads bytes
            // 16k..16k + 16 of the array, all within it.
            unsafe {
                let v = _mm_loadu_si128(bytes.as_ptr().add(16 * k) as *const __m128i);
                let is = |c: u8| _mm_cmpeq_epi8(v, _mm_set1_epi8(c as i8));
                let bits = |x: __m128i| (_mm_movemask_epi8(x) as u16 as u64) << (16 * k);
                let blank = _mm_or_si128(_mm_or_si128(is(b' '), is(b'\t')), _mm_or_si128(is(0x0c), is(b'\r')));
                // Signed compares: a byte from 0x80 is below '0'.
                let digit = _mm_and_si128(
                    _mm_cmpgt_epi8(v, _mm_set1_epi8(b'0' as i8 - 1)),
                    _mm_cmplt_epi8(v, _mm_set1_epi8(b'9' as i8 + 1)),
                );
                m.blank |= bits(blank);
                m.newline |= bits(is(b'\n'));
                m.digit |= bits(digit);
                m.point |= bits(is(b'.'));
                m.high |= bits(v);
            }
        }
        m
    }

    /// The masks of the first [`WINDOW`] bytes.
    #[cfg(not(target_arch = "x86_64"))]
    fn of(bytes: &[u8; WINDOW + 8]) -> Masks {
        Masks::bytewise(bytes)
    }

    /// The masks of the first [`WINDOW`] bytes, a byte at a time.
    #[cfg(any(test, not(target_arch = "x86_64")))]
    fn bytewise(bytes: &[u8; WINDOW + 8]) -> Masks {
        let mut m = Masks::default();
        for (i, &c) in bytes[..WINDOW].iter().enumerate() {
            let bit = 1u64 << i;
            match c {
                b' ' | b'\t' | 0x0c | b'\r' => m.blank |= bit,
                b'\n' => m.newline |= bit,
                b'0'..=b'9' => m.digit |= bit,
                b'.' => m.point |= bit,
                0x80.. => m.high |= bit,
                _ => {}
            }
        }
        m
    }

    /// The field `start..end` as an unsigned integer of 1 to `most` digits.
    #[inline(always)]
    fn integer(&self, w: &Window, (start, end): (usize, usize), most: usize) -> Option<u64> {
        let n = end - start;
        (n <= most && span_bits(start, end) & !self.digit == 0).then(|| digits_value(w, start, n))
    }

    /// The field `start..end` as a decimal `digits[.digits]` of 1 to 15
    /// digits, to the bit as `str::parse::<f64>` reads it.
    #[inline(always)]
    fn decimal(&self, w: &Window, (start, end): (usize, usize)) -> Option<f64> {
        let bits = span_bits(start, end);
        let point = bits & self.point;
        if bits & !(self.digit | self.point) != 0 || point & point.wrapping_sub(1) != 0 {
            return None;
        }
        let (int_end, frac_start) = match point {
            0 => (end, end),
            p => (p.trailing_zeros() as usize, p.trailing_zeros() as usize + 1),
        };
        let (n_int, n_frac) = (int_end - start, end - frac_start);
        if !(1..=15).contains(&(n_int + n_frac)) {
            return None;
        }
        let mantissa = digits_value(w, start, n_int) * POW10[n_frac] + digits_value(w, frac_start, n_frac);
        // Both below 2^53, so exact as f64, and one division rounds
        // correctly (Clinger's fast path, which `str::parse` takes too).
        Some(mantissa as i64 as f64 / POW10_F64[n_frac])
    }
}

/// Bits `start..end` set (`end` ≤ [`WINDOW`] − 1).
#[inline(always)]
fn span_bits(start: usize, end: usize) -> u64 {
    ((1u64 << (end - start)) - 1) << start
}

/// The value of the `n` ASCII digits from `start` (modulo 2^64), eight at a time.
#[inline(always)]
fn digits_value(w: &Window, start: usize, n: usize) -> u64 {
    let (mut value, mut at, mut left) = (0u64, start, n);
    while left > 0 {
        let k = left.min(8);
        // The k digits moved to the top bytes, zeros (leading) below them.
        let d = w.word(at).wrapping_sub(splat(b'0')) << (64 - 8 * k);
        value = value.wrapping_mul(POW10[k]).wrapping_add(eight_digits(d));
        at += k;
        left -= k;
    }
    value
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

    /// [`Masks::decimal`] of all of `s` as a field at the start of a window
    /// (`None` if it is empty or holds a blank or a line end).
    fn quick_decimal(s: &str) -> Option<f64> {
        let mut bytes = [0u8; WINDOW + 8];
        bytes[..s.len()].copy_from_slice(s.as_bytes());
        let w = Window {
            bytes: &bytes,
            len: s.len(),
        };
        let m = Masks::of(w.bytes);
        let one_field = !s.is_empty() && (m.blank | m.newline) & span_bits(0, s.len()) == 0;
        one_field.then(|| m.decimal(&w, (0, s.len()))).flatten()
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
                Some(v) => {
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

    /// Any byte, half of them the ones the masks tell apart and their neighbours.
    fn window_byte() -> impl Strategy<Value = u8> {
        prop_oneof![
            any::<u8>(),
            proptest::sample::select(b" \t\x0b\x0c\r\n\x1f!/0459:-.\x7f\x80\xff".to_vec()),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn the_masks_are_those_of_each_byte(bytes in proptest::collection::vec(window_byte(), WINDOW + 8)) {
            let window: &[u8; WINDOW + 8] = bytes.as_slice().try_into().unwrap();
            prop_assert_eq!(Masks::of(window), Masks::bytewise(window));
        }

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
