//! Mutation operators for robustness tests of every input reader (traces,
//! fio job files, DiskSim parameter files): take a valid sample and break it
//! the ways real files break. Deterministic: a mutation is `(kind, a, b)`, so
//! property tests (proptest) and plain loops drive them alike, and a failing
//! case is reproduced from its three numbers.

/// Values that break number parsers: past 2^63, 2^64 and 2^128, floats out
/// of range, negatives, NaN, infinities, empty.
pub const WEIRD_NUMBERS: &[&str] = &[
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "340282366920938463463374607431768211456",
    "4294967295",
    "4294967296",
    "1e308",
    "1.7976931348623157e308",
    "1e-320",
    "-1",
    "-0",
    "nan",
    "NaN",
    "inf",
    "-inf",
    "0x7fffffffffffffff",
    "0",
    "",
    "00000000000000000000000000000000001",
    "1.5",
];

/// Binary words that break record decoders.
const WEIRD_WORDS: &[u64] = &[
    u64::MAX,
    1 << 63,
    (1 << 63) - 1,
    u32::MAX as u64,
    1 << 32,
    0,
    0xffff_ffff_0000_0000,
];

/// How many kinds of mutation [`apply`] knows.
pub const KINDS: u8 = 16;

fn line_spans(s: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, &c) in s.iter().enumerate() {
        if c == b'\n' {
            out.push((start, i + 1));
            start = i + 1;
        }
    }
    if start < s.len() {
        out.push((start, s.len()));
    }
    out
}

/// Byte ranges of the numbers in `s` (digit runs with an optional fraction).
fn number_spans(s: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        if s[i].is_ascii_digit() {
            let b = i;
            while i < s.len() && (s[i].is_ascii_digit() || s[i] == b'.') {
                i += 1;
            }
            out.push((b, i));
        } else {
            i += 1;
        }
    }
    out
}

/// Byte ranges of the fields in `s`: runs between blanks, commas, `=` and newlines.
fn field_spans(s: &[u8]) -> Vec<(usize, usize)> {
    let sep = |c: u8| matches!(c, b' ' | b'\t' | b',' | b'\n' | b'\r' | b'=');
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        if sep(s[i]) {
            i += 1;
            continue;
        }
        let b = i;
        while i < s.len() && !sep(s[i]) {
            i += 1;
        }
        out.push((b, i));
    }
    out
}

fn pick(spans: &[(usize, usize)], a: u64) -> Option<(usize, usize)> {
    if spans.is_empty() {
        None
    } else {
        Some(spans[(a % spans.len() as u64) as usize])
    }
}

/// Applies mutation `kind` (taken modulo [`KINDS`]) with parameters `a`, `b`.
pub fn apply(data: &mut Vec<u8>, kind: u8, a: u64, b: u64) {
    let len = data.len() as u64;
    let at = |n: u64| if n == 0 { 0 } else { (a % n) as usize };
    match kind % KINDS {
        // Flip some bits of one byte.
        0 if len > 0 => {
            let i = at(len);
            data[i] ^= (b as u8) | 1;
        }
        // Overwrite one byte with anything (a newline, NUL, 0xff, ...).
        1 if len > 0 => {
            let i = at(len);
            data[i] = b as u8;
        }
        // Cut the input short.
        2 => data.truncate(at(len + 1)),
        // Duplicate a line.
        3 => {
            if let Some((s, e)) = pick(&line_spans(data), a) {
                let mut line = data[s..e].to_vec();
                if line.last() != Some(&b'\n') {
                    line.insert(0, b'\n');
                }
                data.splice(e..e, line);
            }
        }
        // Delete a line.
        4 => {
            if let Some((s, e)) = pick(&line_spans(data), a) {
                data.drain(s..e);
            }
        }
        // Swap two lines (times go backwards).
        5 => {
            let spans = line_spans(data);
            if let (Some(x), Some(y)) = (pick(&spans, a), pick(&spans, b)) {
                let (x, y) = if x.0 <= y.0 { (x, y) } else { (y, x) };
                if x != y {
                    let mut out = data[..x.0].to_vec();
                    out.extend_from_slice(&data[y.0..y.1]);
                    out.extend_from_slice(&data[x.1..y.0]);
                    out.extend_from_slice(&data[x.0..x.1]);
                    out.extend_from_slice(&data[y.1..]);
                    *data = out;
                }
            }
        }
        // A number becomes huge, negative, NaN, empty, ...
        6 => {
            if let Some((s, e)) = pick(&number_spans(data), a) {
                let w = WEIRD_NUMBERS[(b % WEIRD_NUMBERS.len() as u64) as usize];
                data.splice(s..e, w.bytes());
            }
        }
        // Any field becomes a weird number.
        7 => {
            if let Some((s, e)) = pick(&field_spans(data), a) {
                let w = WEIRD_NUMBERS[(b % WEIRD_NUMBERS.len() as u64) as usize];
                data.splice(s..e, w.bytes());
            }
        }
        // A field goes missing (empty between its separators).
        8 => {
            if let Some((s, e)) = pick(&field_spans(data), a) {
                data.drain(s..e);
            }
        }
        // CRLF line ends.
        9 => {
            let mut out = Vec::with_capacity(data.len() + data.len() / 8);
            for &c in data.iter() {
                if c == b'\n' {
                    out.push(b'\r');
                }
                out.push(c);
            }
            *data = out;
        }
        // A UTF-8 byte-order mark in front.
        10 => {
            data.splice(0..0, [0xef, 0xbb, 0xbf]);
        }
        // Bytes that are not UTF-8 (a lone continuation, a cut sequence, 0xff).
        11 => {
            let i = at(len + 1);
            let bad: &[u8] = match b % 3 {
                0 => &[0xff, 0xfe],
                1 => &[0xc3],
                _ => &[0x80, b'x'],
            };
            data.splice(i..i, bad.iter().copied());
        }
        // Insert one byte.
        12 => {
            let i = at(len + 1);
            data.insert(i, b as u8);
        }
        // Duplicate a chunk (binary records repeated or shifted).
        13 if len > 0 => {
            let s = at(len);
            let e = (s + 1 + (b % 96) as usize).min(data.len());
            let chunk = data[s..e].to_vec();
            data.splice(e..e, chunk);
        }
        // Overwrite a binary word (either byte order) with an extreme value.
        14 if len >= 8 => {
            let i = at(len - 7);
            let w = WEIRD_WORDS[(b % WEIRD_WORDS.len() as u64) as usize];
            let bytes = if b & 64 != 0 { w.to_be_bytes() } else { w.to_le_bytes() };
            let n = if b & 128 != 0 { 4 } else { 8 };
            data[i..i + n].copy_from_slice(&bytes[..n]);
        }
        // Drop a byte.
        15 if len > 0 => {
            data.remove(at(len));
        }
        _ => {}
    }
}

/// Cases per sample for a mutation test: `HVIO_FUZZ_CASES`, else `default`.
pub fn cases(default: u32) -> u32 {
    std::env::var("HVIO_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Runs `f` on a thread and panics if it takes more than `secs` (a hang) or panics.
pub fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(secs))
        .expect("hung (or panicked)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_do_what_they_say() {
        let mut d = b"1,2\n3,4\n".to_vec();
        apply(&mut d, 3, 1, 0);
        assert_eq!(d, b"1,2\n3,4\n3,4\n");
        let mut d = b"1,2\n3,4\n".to_vec();
        apply(&mut d, 5, 0, 1);
        assert_eq!(d, b"3,4\n1,2\n");
        let mut d = b"t 12 x\n".to_vec();
        apply(&mut d, 6, 0, 2);
        assert_eq!(d, b"t 18446744073709551615 x\n");
        let mut d = b"a,bb,c\n".to_vec();
        apply(&mut d, 8, 1, 0);
        assert_eq!(d, b"a,,c\n");
        let mut d = b"a\nb\n".to_vec();
        apply(&mut d, 9, 0, 0);
        assert_eq!(d, b"a\r\nb\r\n");
        let mut d = b"a".to_vec();
        apply(&mut d, 10, 0, 0);
        assert_eq!(d, b"\xef\xbb\xbfa");
        let mut d = vec![0u8; 8];
        apply(&mut d, 14, 0, 0);
        assert_eq!(d, [0xff; 8]);
        for kind in 0..KINDS {
            let mut e = Vec::new();
            apply(&mut e, kind, 5, 7);
        }
    }
}
