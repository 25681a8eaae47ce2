//! Reading a DiskSim validation trace's text into [`TraceRecord`]s at a
//! small part of a replay's cost: a replay's time includes reading its
//! trace, as DiskSim's does (docs/hdd-model.md, "Replay speed").
//!
//! Every line is read one of two ways, to the same result. The quick way
//! takes a line as the validation traces write it: `R` or `W`, a word of
//! ASCII, an LBN of at most 19 digits, a size of at most 9, and two
//! decimals of at most 15 digits with at most one point, between runs of
//! ASCII whitespace, the whole line within 64 bytes. Each byte of the text
//! is classified once, 64 bytes at a time with SSE2 or AVX2 (bit masks of
//! its whitespace, line ends, digits and bytes that are not ASCII:
//! [`Blocks`]), and a line reads its 64 bits of each mask from the two
//! blocks it lies in. The masks give every field's start and end at once,
//! without reading the field before it, so the fields' values do not wait
//! on one another: the six runs of digits are read together, eight digits
//! to a 64-bit lane of SSE2; a decimal is one exact integer divided by a
//! power of ten (Clinger's fast path, which `str::parse` takes too). Any
//! other line (a number written another way,
//! `+5`, `1e3`, 16 digits; a byte that is not ASCII; a wrong field) is read
//! the plain way, with `split_ascii_whitespace` and `str::parse`, which
//! also names what is wrong by file, line and field. A line the quick way
//! takes is ASCII, and the plain way checks the others' UTF-8, so the whole
//! file is checked without a separate pass, and an error is the one
//! reading the file as text and then parsing it would give: a byte that is
//! not UTF-8 anywhere in the file comes before a field that does not parse.

use super::{TraceRecord, ValidateError, MAX_GAP_MS};
use crate::disksim::parse::not_utf8;
use std::num::NonZeroU64;

/// The requests of a validation trace's bytes, read from `file` (named in errors).
pub(super) fn parse(bytes: &[u8], file: &str) -> Result<Vec<TraceRecord>, ValidateError> {
    let mut out = Vec::with_capacity(bytes.len() / 24);
    parse_into(bytes, file, &mut out)?;
    Ok(out)
}

/// [`parse`] into `out` (emptied first), whose memory a caller reading
/// trace after trace keeps.
pub(super) fn parse_into(bytes: &[u8], file: &str, out: &mut Vec<TraceRecord>) -> Result<(), ValidateError> {
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("bmi1") && is_x86_feature_detected!("bmi2") {
        // SAFETY: the processor has the features `parse_into_x86_64_v3` is built for.
        return unsafe { parse_into_x86_64_v3(bytes, file, out) };
    }
    parse_lines::<false>(bytes, file, out)
}

/// [`parse_lines`] built for processors with AVX2 and BMI (x86-64-v3,
/// most since 2013): the text's bytes classified 32 at a time, each bit
/// count, lowest bit cleared and mask one instruction, and the SSE2
/// operations in their three-operand form (no copies).
///
/// # Safety
/// The processor has AVX2, BMI1 and BMI2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,bmi1,bmi2")]
unsafe fn parse_into_x86_64_v3(bytes: &[u8], file: &str, out: &mut Vec<TraceRecord>) -> Result<(), ValidateError> {
    parse_lines::<true>(bytes, file, out)
}

/// [`parse_into`], built into each of its forms; with `AVX2`, only for a
/// processor that has it.
#[inline(always)]
fn parse_lines<const AVX2: bool>(bytes: &[u8], file: &str, out: &mut Vec<TraceRecord>) -> Result<(), ValidateError> {
    out.clear();
    let mut blocks = Blocks::<AVX2>::new(bytes);
    let (mut at, mut line) = (0, 0);
    // Lines as `str::lines` counts them: each ends at a `\n` or the end of the text.
    while at < bytes.len() {
        line += 1;
        let start = at;
        let record = match quick_line(bytes, start, &mut blocks) {
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
    /// A request (its `line` not yet set), and the length of its line
    /// (one more than what is left of the text when no `\n` ends it).
    Record(TraceRecord, usize),
    /// Whitespace only, and its length (likewise).
    Blank(usize),
    /// Something to read the plain way.
    Other,
}

/// The most bytes of a line the quick reading takes (with its `\n`): the
/// validation traces' lines are 40 to 50. Also the bytes of a block of
/// [`Blocks`].
const WINDOW: usize = 64;

/// The [`WINDOW`] bytes from a line's start and eight more: the text's
/// own, or at the end of the text a copy padded with zeros; every word the
/// quick reading loads is in bounds. A position is taken modulo
/// [`WINDOW`]; the masks (of the same bytes) say where the line ends.
type Window = [u8; WINDOW + 8];

/// The byte at `p` (modulo the window).
#[inline(always)]
fn byte(w: &Window, p: usize) -> u8 {
    w[p % WINDOW]
}

/// The eight bytes from `p` (modulo the window), the first in the lowest byte.
#[inline(always)]
fn word(w: &Window, p: usize) -> u64 {
    let p = p % WINDOW;
    let mut b = [0u8; 8];
    b.copy_from_slice(&w[p..p + 8]);
    u64::from_le_bytes(b)
}

/// The line starting at byte `at` of `text` (not its end), read the quick
/// way; `blocks` are the text's.
#[inline(always)]
fn quick_line<const AVX2: bool>(text: &[u8], at: usize, blocks: &mut Blocks<AVX2>) -> Quick {
    let m = blocks.window(at);
    let rest = &text[at..];
    match rest.first_chunk::<{ WINDOW + 8 }>() {
        Some(w) => quick_window(w, &m),
        None => {
            let mut w = [0u8; WINDOW + 8];
            w[..rest.len()].copy_from_slice(rest);
            quick_window(&w, &m)
        }
    }
}

/// The first and the one-past-last byte of the next field in `starts` and
/// `lasts` (each field's first and last bytes), taken from both. With no
/// field left, 64 and 65: past any line.
#[inline(always)]
fn next_field(starts: &mut u64, lasts: &mut u64) -> (usize, usize) {
    let (s, l) = (starts.trailing_zeros(), lasts.trailing_zeros());
    *starts &= starts.wrapping_sub(1);
    *lasts &= lasts.wrapping_sub(1);
    (s as usize, l as usize + 1)
}

/// The line at the start of `w`, whose masks are `m`, read the quick way.
#[inline(always)]
fn quick_window(w: &Window, m: &Masks) -> Quick {
    // The line ends at its first `\n` or at the end of the text, within the window.
    let Some(ends_at) = NonZeroU64::new(m.newline) else {
        return Quick::Other;
    };
    let end = ends_at.trailing_zeros() as usize;
    let len = end + 1;
    // The fields: runs of bytes that are not whitespace. Where each starts
    // and ends comes from the masks at once, not from reading the field before.
    let field = !m.space & !(!0u64 << end);
    let mut starts = field & !(field << 1);
    if starts == 0 {
        return Quick::Blank(len);
    }
    let mut lasts = field & !(field >> 1);
    let op = next_field(&mut starts, &mut lasts);
    // The second, what the real disk's cache did, is not read.
    next_field(&mut starts, &mut lasts);
    let lbn = next_field(&mut starts, &mut lasts);
    let size = next_field(&mut starts, &mut lasts);
    let service = next_field(&mut starts, &mut lasts);
    let gap = next_field(&mut starts, &mut lasts);
    // Six fields (no sixth: it starts at 64, past the line; a seventh:
    // starts left), ASCII only: the plain reading checks the others' UTF-8.
    if gap.0 >= end || starts != 0 || m.high & field != 0 {
        return Quick::Other;
    }
    // `R`, `W`, `r` or `w`: the upper case and the lower differ in bit 5.
    let op_lower = byte(w, op.0) | 0x20;
    if op.1 - op.0 != 1 || (op_lower != b'r' && op_lower != b'w') {
        return Quick::Other;
    }
    // From the LBN on, every byte is a digit but for a point in each decimal.
    let not_digit = field & !m.digit & (!0u64 << lbn.0);
    let in_decimals = not_digit & (!0u64 << service.0);
    if not_digit != in_decimals {
        return Quick::Other;
    }
    let in_gap = in_decimals & (!0u64 << gap.0);
    let (Some(service_point), Some(gap_point)) = (point(w, in_decimals ^ in_gap), point(w, in_gap)) else {
        return Quick::Other;
    };
    // At most 19 digits (they always fit a u64) and 9 (a u32).
    let (lbn, size) = ((lbn.0, lbn.1 - lbn.0), (size.0, size.1 - size.0));
    let (Some(service), Some(gap)) = (decimal_parts(service, service_point), decimal_parts(gap, gap_point)) else {
        return Quick::Other;
    };
    if lbn.1 > 19 || size.1 > 9 {
        return Quick::Other;
    }
    let [lbn, sectors, service_int, service_frac, gap_int, gap_frac] =
        digit_runs_values(w, [lbn, size, service.0, service.1, gap.0, gap.1]);
    let service_us = decimal_value(service_int, service_frac, service.1 .1);
    let gap_ms = decimal_value(gap_int, gap_frac, gap.1 .1) / 1000.0;
    if sectors == 0 || gap_ms > MAX_GAP_MS {
        return Quick::Other;
    }
    let record = TraceRecord {
        write: op_lower == b'w',
        lbn,
        sectors: sectors as u32,
        measured_ms: service_us / 1000.0,
        gap_ms,
        line: 0,
    };
    Quick::Record(record, len)
}

/// Where a decimal's point is, from the bytes of its field that are not
/// digits (`not_digit`): `Some(None)` with none, `Some(Some(p))` with one
/// point at `p`, `None` with anything else.
#[inline(always)]
#[allow(clippy::option_option)]
fn point(w: &Window, not_digit: u64) -> Option<Option<usize>> {
    match NonZeroU64::new(not_digit) {
        None => Some(None),
        Some(p) => {
            let at = p.trailing_zeros() as usize;
            (not_digit & (not_digit - 1) == 0 && byte(w, at) == b'.').then_some(Some(at))
        }
    }
}

/// The decimal field `start..end`, digits with a point at `point` or
/// none, as its integer part and its fraction (each a start and a number
/// of digits), if it has 1 to 15 digits.
#[inline(always)]
fn decimal_parts((start, end): (usize, usize), point: Option<usize>) -> Option<DecimalParts> {
    let (int_end, frac_start) = match point {
        None => (end, end),
        Some(p) => (p, p + 1),
    };
    let (n_int, n_frac) = (int_end - start, end - frac_start);
    (1..=15)
        .contains(&(n_int + n_frac))
        .then_some(((start, n_int), (frac_start, n_frac)))
}

/// A decimal's integer part and fraction: each its start and number of digits.
type DecimalParts = ((usize, usize), (usize, usize));

/// The decimal whose integer part and fraction (of `n_frac` digits) have
/// the values `int` and `frac`, 15 digits at most, to the bit as
/// `str::parse::<f64>` reads it.
#[inline(always)]
fn decimal_value(int: u64, frac: u64, n_frac: usize) -> f64 {
    let mantissa = int * POW10[n_frac] + frac;
    // Below 10^15 < 2^53, so exact as f64, as is the power of ten, and one
    // division rounds correctly (Clinger's fast path, which `str::parse` takes too).
    mantissa as i64 as f64 / POW10_F64[n_frac]
}

/// The values of six runs of ASCII digits, each its start and its number
/// of digits (each value modulo 2^64).
#[inline(always)]
fn digit_runs_values(w: &Window, runs: [(usize, usize); 6]) -> [u64; 6] {
    if runs.iter().all(|&(_, n)| n <= 8) {
        // Written out: `runs.map` here is not inlined.
        let top = |k: usize| digits_on_top(w, runs[k].0, runs[k].1);
        return eight_digits_six([top(0), top(1), top(2), top(3), top(4), top(5)]);
    }
    let value = |k: usize| digits_value(w, runs[k].0, runs[k].1);
    [value(0), value(1), value(2), value(3), value(4), value(5)]
}

/// The `n` (0 to 8) bytes from `start`, moved to the top bytes of a word
/// with zeros below them (leading zeros to [`eight_digits`]).
#[inline(always)]
fn digits_on_top(w: &Window, start: usize, n: usize) -> u64 {
    // Two shifts: a shift of the whole word (n = 0) would overflow.
    let half = 32 - 4 * n as u32;
    (word(w, start) << half) << half
}

/// The value of the `n` ASCII digits from `start` (modulo 2^64), eight at a time.
#[inline(always)]
fn digits_value(w: &Window, start: usize, n: usize) -> u64 {
    if n <= 8 {
        return eight_digits(digits_on_top(w, start, n) & splat(0x0f));
    }
    long_digits_value(w, start, n)
}

/// [`digits_value`] of more than eight digits.
#[inline(never)]
fn long_digits_value(w: &Window, start: usize, n: usize) -> u64 {
    let (mut value, mut at, mut left) = (0u64, start, n);
    while left > 0 {
        let k = left.min(8);
        let d = (word(w, at) << (64 - 8 * k)) & splat(0x0f);
        value = value.wrapping_mul(POW10[k]).wrapping_add(eight_digits(d));
        at += k;
        left -= k;
    }
    value
}

/// Which of 64 bytes are ASCII whitespace (`space`: space, tab, line end,
/// form feed, carriage return), line ends, digits and not ASCII: bit `i`
/// for byte `i`.
#[derive(Clone, Copy, Default, Debug, PartialEq)]
struct Masks {
    space: u64,
    newline: u64,
    digit: u64,
    high: u64,
}

/// The masks of a text's 64-byte blocks at `base` and `base + 64`, carried
/// from line to line so that each byte is classified once: a line starting
/// in the first block takes its 64 bits of each mask from the two. With
/// `AVX2` (only on a processor that has it) they are classified with it.
struct Blocks<'a, const AVX2: bool> {
    text: &'a [u8],
    base: usize,
    lo: Masks,
    hi: Masks,
}

impl<'a, const AVX2: bool> Blocks<'a, AVX2> {
    fn new(text: &'a [u8]) -> Blocks<'a, AVX2> {
        Blocks {
            text,
            base: 0,
            lo: Self::block(text, 0),
            hi: Self::block(text, WINDOW),
        }
    }

    /// The masks of the 64 bytes of `text` from `at`; every byte past the
    /// text counts as a line end (and whitespace), so the last line ends there.
    #[inline(always)]
    fn block(text: &[u8], at: usize) -> Masks {
        match text.get(at..).and_then(|rest| rest.first_chunk::<WINDOW>()) {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `AVX2` only where the processor has it (`parse_into`).
            Some(bytes) if AVX2 => unsafe { Masks::of_avx2(bytes) },
            Some(bytes) => Masks::of(bytes),
            None => Masks::of_text_end(text, at),
        }
    }

    /// The masks of the 64 bytes from `at` (not before the last position asked).
    #[inline(always)]
    fn window(&mut self, at: usize) -> Masks {
        if at >= self.base + WINDOW {
            self.advance(at);
        }
        // Below 64 (`& 63` says so to the compiler: one double-word shift each).
        let off = (at - self.base) as u32 & 63;
        // Bits `off..off + 64` of the two blocks' 128.
        let join = |lo: u64, hi: u64| ((((hi as u128) << 64) | lo as u128) >> off) as u64;
        Masks {
            space: join(self.lo.space, self.hi.space),
            newline: join(self.lo.newline, self.hi.newline),
            digit: join(self.lo.digit, self.hi.digit),
            high: join(self.lo.high, self.hi.high),
        }
    }

    /// Moves on to the blocks that `at` starts.
    #[inline(always)]
    fn advance(&mut self, at: usize) {
        if at < self.base + 2 * WINDOW {
            self.base += WINDOW;
            self.lo = self.hi;
        } else {
            // Past a long line.
            self.base = at / WINDOW * WINDOW;
            self.lo = Self::block(self.text, self.base);
        }
        self.hi = Self::block(self.text, self.base + WINDOW);
    }
}

impl Masks {
    /// [`Blocks::block`] of a block that the text's end cuts short.
    #[cold]
    #[inline(never)]
    fn of_text_end(text: &[u8], at: usize) -> Masks {
        let mut bytes = [0u8; WINDOW];
        let rest = text.get(at..).unwrap_or_default();
        bytes[..rest.len()].copy_from_slice(rest);
        let mut m = Masks::of(&bytes);
        let past = !0u64 << rest.len();
        m.space |= past;
        m.newline |= past;
        m
    }

    /// The masks of 64 bytes, sixteen a step. A block of spaces, line
    /// ends, digits, letters and punctuation (the traces' own) takes the
    /// short way; one with any other byte below `!` or any not ASCII is
    /// classified in full.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn of(bytes: &[u8; WINDOW]) -> Masks {
        use std::arch::x86_64::*;
        let mut m = Masks::default();
        // SAFETY: SSE2 is part of x86_64, and each load reads bytes 16k..16k + 16 of the array.
        unsafe {
            let mut other = _mm_setzero_si128();
            for k in 0..WINDOW / 16 {
                let v = _mm_loadu_si128(bytes.as_ptr().add(16 * k) as *const __m128i);
                let is = |c: u8| _mm_cmpeq_epi8(v, _mm_set1_epi8(c as i8));
                let bits = |x: __m128i| (_mm_movemask_epi8(x) as u16 as u64) << (16 * k);
                let newline = is(b'\n');
                let space = _mm_or_si128(is(b' '), newline);
                // Signed compares: a byte from 0x80 is below `!` and below '0'.
                let below_bang = _mm_cmplt_epi8(v, _mm_set1_epi8(b'!' as i8));
                other = _mm_or_si128(other, _mm_andnot_si128(space, below_bang));
                let digit = _mm_and_si128(
                    _mm_cmpgt_epi8(v, _mm_set1_epi8(b'0' as i8 - 1)),
                    _mm_cmplt_epi8(v, _mm_set1_epi8(b'9' as i8 + 1)),
                );
                m.space |= bits(space);
                m.newline |= bits(newline);
                m.digit |= bits(digit);
            }
            if _mm_movemask_epi8(other) != 0 {
                return Masks::of_any(bytes);
            }
        }
        m
    }

    /// [`Masks::of`] with AVX2, 32 bytes a step.
    ///
    /// # Safety
    /// The processor has AVX2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn of_avx2(bytes: &[u8; WINDOW]) -> Masks {
        use std::arch::x86_64::*;
        let mut m = Masks::default();
        let mut other = _mm256_setzero_si256();
        for k in 0..WINDOW / 32 {
            // SAFETY: the load reads bytes 32k..32k + 32 of the array.
            let v = unsafe { _mm256_loadu_si256(bytes.as_ptr().add(32 * k) as *const __m256i) };
            let newline = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'\n' as i8));
            let space = _mm256_or_si256(_mm256_cmpeq_epi8(v, _mm256_set1_epi8(b' ' as i8)), newline);
            // Signed compares: a byte from 0x80 is below `!` and below '0'.
            let below_bang = _mm256_cmpgt_epi8(_mm256_set1_epi8(b'!' as i8), v);
            other = _mm256_or_si256(other, _mm256_andnot_si256(space, below_bang));
            let digit = _mm256_and_si256(
                _mm256_cmpgt_epi8(v, _mm256_set1_epi8(b'0' as i8 - 1)),
                _mm256_cmpgt_epi8(_mm256_set1_epi8(b'9' as i8 + 1), v),
            );
            m.space |= (_mm256_movemask_epi8(space) as u32 as u64) << (32 * k);
            m.newline |= (_mm256_movemask_epi8(newline) as u32 as u64) << (32 * k);
            m.digit |= (_mm256_movemask_epi8(digit) as u32 as u64) << (32 * k);
        }
        if _mm256_movemask_epi8(other) != 0 {
            return Masks::of_any(bytes);
        }
        m
    }

    /// [`Masks::of`] of a block with whitespace other than spaces and line
    /// ends, control bytes or bytes that are not ASCII.
    #[cfg(target_arch = "x86_64")]
    #[cold]
    #[inline(never)]
    fn of_any(bytes: &[u8; WINDOW]) -> Masks {
        use std::arch::x86_64::*;
        let mut m = Masks::default();
        for k in 0..WINDOW / 16 {
            // SAFETY: as in `of`.
            unsafe {
                let v = _mm_loadu_si128(bytes.as_ptr().add(16 * k) as *const __m128i);
                let is = |c: u8| _mm_cmpeq_epi8(v, _mm_set1_epi8(c as i8));
                let bits = |x: __m128i| (_mm_movemask_epi8(x) as u16 as u64) << (16 * k);
                let newline = is(b'\n');
                let blank = _mm_or_si128(_mm_or_si128(is(b' '), is(b'\t')), _mm_or_si128(is(0x0c), is(b'\r')));
                let digit = _mm_and_si128(
                    _mm_cmpgt_epi8(v, _mm_set1_epi8(b'0' as i8 - 1)),
                    _mm_cmplt_epi8(v, _mm_set1_epi8(b'9' as i8 + 1)),
                );
                m.space |= bits(_mm_or_si128(blank, newline));
                m.newline |= bits(newline);
                m.digit |= bits(digit);
                m.high |= bits(v);
            }
        }
        m
    }

    /// The masks of 64 bytes.
    #[cfg(not(target_arch = "x86_64"))]
    fn of(bytes: &[u8; WINDOW]) -> Masks {
        Masks::bytewise(bytes)
    }

    /// The masks of 64 bytes, a byte at a time.
    #[cfg(any(test, not(target_arch = "x86_64")))]
    fn bytewise(bytes: &[u8; WINDOW]) -> Masks {
        let mut m = Masks::default();
        for (i, &c) in bytes.iter().enumerate() {
            let bit = 1u64 << i;
            match c {
                b' ' | b'\t' | 0x0c | b'\r' => m.space |= bit,
                b'\n' => {
                    m.space |= bit;
                    m.newline |= bit
                }
                b'0'..=b'9' => m.digit |= bit,
                0x80.. => m.high |= bit,
                _ => {}
            }
        }
        m
    }
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
/// in the lowest byte: neighbours paired, then the pairs, then the fours,
/// each step one multiplication (`x * (10 << 8 | 1) >> 8` puts ten times
/// each byte plus the next in that byte; no sum carries out of its lane).
#[inline(always)]
fn eight_digits(d: u64) -> u64 {
    let d = (d.wrapping_mul(10 << 8 | 1) >> 8) & 0x00ff_00ff_00ff_00ff;
    let d = (d.wrapping_mul(100 << 16 | 1) >> 16) & 0x0000_ffff_0000_ffff;
    d.wrapping_mul(10_000 << 32 | 1) >> 32
}

/// [`eight_digits`] of six words of ASCII digits on top of zeros (as
/// [`digits_on_top`] gives them), at once with SSE2.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn eight_digits_six(words: [u64; 6]) -> [u64; 6] {
    use std::arch::x86_64::*;
    // SAFETY: SSE2 is part of x86_64; nothing here touches memory.
    unsafe {
        // Two words' digit values, four to each 32-bit lane (below 10^4).
        let fours = |a: u64, b: u64| {
            let v = _mm_and_si128(_mm_set_epi64x(b as i64, a as i64), _mm_set1_epi8(0x0f));
            // Each 16-bit lane: ten times its first (lower) byte plus its second.
            let tens = _mm_mullo_epi16(_mm_and_si128(v, _mm_set1_epi16(0xff)), _mm_set1_epi16(10));
            let twos = _mm_add_epi16(tens, _mm_srli_epi16(v, 8));
            // Each 32-bit lane: a hundred times its first 16-bit lane plus its second.
            _mm_madd_epi16(twos, _mm_set1_epi32(1 << 16 | 100))
        };
        let (a, b, c) = (
            fours(words[0], words[1]),
            fours(words[2], words[3]),
            fours(words[4], words[5]),
        );
        // The fours to 16 bits each, then each pair to ten thousand times the first plus the second.
        let ten_thousand = _mm_set1_epi32(1 << 16 | 10_000);
        let first = _mm_madd_epi16(_mm_packs_epi32(a, b), ten_thousand);
        let last = _mm_madd_epi16(_mm_packs_epi32(c, c), ten_thousand);
        let (w01, w23) = (
            _mm_cvtsi128_si64(first) as u64,
            _mm_cvtsi128_si64(_mm_unpackhi_epi64(first, first)) as u64,
        );
        let w45 = _mm_cvtsi128_si64(last) as u64;
        let low = |x: u64| x & 0xffff_ffff;
        [low(w01), w01 >> 32, low(w23), w23 >> 32, low(w45), w45 >> 32]
    }
}

/// [`eight_digits`] of six words of ASCII digits on top of zeros.
#[cfg(not(target_arch = "x86_64"))]
fn eight_digits_six(words: [u64; 6]) -> [u64; 6] {
    words.map(|w| eight_digits(w & splat(0x0f)))
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
    /// The baseline build's reading is the same as [`parse`]'s (with AVX2 where the processor has it).
    fn quick(bytes: &[u8]) -> Result<Vec<Bits>, Named> {
        let mut records = Vec::new();
        let baseline = named(parse_lines::<false>(bytes, "t.trace", &mut records).map(|()| records));
        let quick = named(parse(bytes, "t.trace"));
        assert_eq!(quick, baseline, "{:?}", String::from_utf8_lossy(bytes));
        quick
    }

    fn named(read: Result<Vec<TraceRecord>, ValidateError>) -> Result<Vec<Bits>, Named> {
        match read {
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
                let mut blocks = Blocks::<false>::new(text.as_bytes());
                assert!(
                    matches!(quick_line(text.as_bytes(), 0, &mut blocks), Quick::Record(..)),
                    "{text:?}"
                );
            }
        }
    }

    /// The quick reading's decimal of all of `s` as a field at the start
    /// of a window (`None` if it is empty or holds whitespace).
    fn quick_decimal(s: &str) -> Option<f64> {
        let mut w = [0u8; WINDOW + 8];
        w[..s.len()].copy_from_slice(s.as_bytes());
        let m = Blocks::<false>::block(&w[..s.len()], 0);
        let field = (1u64 << s.len()) - 1;
        if s.is_empty() || m.space & field != 0 {
            return None;
        }
        let ((int, n_int), (frac, n_frac)) = decimal_parts((0, s.len()), point(&w, field & !m.digit)?)?;
        Some(decimal_value(
            digits_value(&w, int, n_int),
            digits_value(&w, frac, n_frac),
            n_frac,
        ))
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

    fn have_avx2() -> bool {
        #[cfg(target_arch = "x86_64")]
        return is_x86_feature_detected!("avx2");
        #[cfg(not(target_arch = "x86_64"))]
        false
    }

    /// A block's masks with SSE2 and with AVX2 (with SSE2 again where the processor has no AVX2).
    fn masks_each_way(block: &[u8; WINDOW]) -> Vec<Masks> {
        #[cfg(target_arch = "x86_64")]
        if have_avx2() {
            // SAFETY: the processor has AVX2.
            return vec![Masks::of(block), unsafe { Masks::of_avx2(block) }];
        }
        vec![Masks::of(block); 2]
    }

    /// A byte of the kinds the validation traces hold.
    fn trace_byte() -> impl Strategy<Value = u8> {
        proptest::sample::select(b"  \n\n0123456789.RWHitMs".to_vec())
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
        fn the_masks_are_those_of_each_byte(bytes in proptest::collection::vec(window_byte(), WINDOW)) {
            let block: &[u8; WINDOW] = bytes.as_slice().try_into().unwrap();
            prop_assert_eq!(masks_each_way(block), vec![Masks::bytewise(block); 2]);
        }

        #[test]
        fn the_short_ways_masks_are_those_of_each_byte(
            bytes in proptest::collection::vec(trace_byte(), WINDOW),
            other in proptest::option::of((0..WINDOW, window_byte())),
        ) {
            let mut block: [u8; WINDOW] = bytes.as_slice().try_into().unwrap();
            if let Some((at, c)) = other {
                block[at] = c;
            }
            prop_assert_eq!(masks_each_way(&block), vec![Masks::bytewise(&block); 2]);
        }

        #[test]
        fn six_runs_of_digits_read_as_each_alone(
            digits in proptest::collection::vec(b'0'..=b'9', WINDOW + 8),
            runs in proptest::collection::vec((0..WINDOW, 0..=20usize), 6),
        ) {
            let w: Window = digits.as_slice().try_into().unwrap();
            let runs: [(usize, usize); 6] = runs.try_into().unwrap();
            // A field ends before its line, within the window.
            let runs = runs.map(|(start, n)| (start, n.min(WINDOW - 1 - start)));
            let want = runs.map(|(start, n)| {
                let text = std::str::from_utf8(&w[start..start + n]).unwrap();
                if n == 0 { 0 } else { text.parse::<u128>().unwrap() as u64 }
            });
            prop_assert_eq!(digit_runs_values(&w, runs), want);
        }

        #[test]
        fn a_windows_masks_are_those_of_its_bytes(
            text in proptest::collection::vec(prop_oneof![3 => trace_byte(), 1 => window_byte()], 0..400),
            steps in proptest::collection::vec(prop_oneof![4 => 1..70usize, 1 => 70..300usize], 1..12),
        ) {
            let mut blocks = Blocks::<false>::new(&text);
            let mut avx2_blocks = have_avx2().then(|| Blocks::<true>::new(&text));
            let mut at = 0;
            for step in steps {
                // Past the text, every byte is a line end.
                let mut bytes = [b'\n'; WINDOW];
                let rest = text.get(at..).unwrap_or_default();
                let n = rest.len().min(WINDOW);
                bytes[..n].copy_from_slice(&rest[..n]);
                let want = Masks::bytewise(&bytes);
                prop_assert_eq!(blocks.window(at), want, "at {}", at);
                if let Some(b) = &mut avx2_blocks {
                    prop_assert_eq!(b.window(at), want, "AVX2, at {}", at);
                }
                at += step;
            }
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
