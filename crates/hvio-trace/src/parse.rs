//! Small, allocation-free field parsers shared by the text readers.

use std::collections::HashMap;

/// A non-negative decimal integer with no sign, spaces or suffix.
#[inline]
pub fn u64_dec(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s.len() <= 19 {
        // Cannot overflow: no checks needed.
        let mut v: u64 = 0;
        for &c in s {
            let d = c.wrapping_sub(b'0');
            if d > 9 {
                return None;
            }
            v = v * 10 + d as u64;
        }
        return Some(v);
    }
    let mut v: u64 = 0;
    for &c in s {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(d as u64)?;
    }
    Some(v)
}

/// A decimal `u32`, or None if `s` is not one.
#[inline]
pub fn u32_dec(s: &[u8]) -> Option<u32> {
    u64_dec(s).and_then(|v| u32::try_from(v).ok())
}

/// A hexadecimal integer, with or without `0x`.
pub fn u64_hex(s: &[u8]) -> Option<u64> {
    let s = s.strip_prefix(b"0x").or_else(|| s.strip_prefix(b"0X")).unwrap_or(s);
    if s.is_empty() || s.len() > 16 {
        return None;
    }
    let mut v: u64 = 0;
    for &c in s {
        let d = (c as char).to_digit(16)?;
        v = (v << 4) | d as u64;
    }
    Some(v)
}

/// A non-negative fixed-point decimal (`12`, `12.5`, `.5`) in units of
/// `unit_ns` nanoseconds, converted exactly (digits below 1 ns are dropped).
#[inline]
pub fn fixed_ns(s: &[u8], unit_ns: u64) -> Option<u64> {
    let (int, frac) = match memchr::memchr(b'.', s) {
        Some(i) => (&s[..i], &s[i + 1..]),
        None => (s, &s[..0]),
    };
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let whole = if int.is_empty() { 0 } else { u64_dec(int)? };
    let mut ns = whole.checked_mul(unit_ns)?;
    let mut scale = unit_ns;
    for &c in frac {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        if scale >= 10 {
            scale /= 10;
            ns = ns.checked_add(d as u64 * scale)?;
        }
    }
    Some(ns)
}

/// Fields separated by one byte (CSV without quoting, as all block traces are).
pub struct Split<'a> {
    rest: Option<&'a [u8]>,
    sep: u8,
}

impl<'a> Split<'a> {
    /// Fields of `s` between separators `sep`.
    pub fn new(s: &'a [u8], sep: u8) -> Self {
        Split { rest: Some(s), sep }
    }
}

impl<'a> Iterator for Split<'a> {
    type Item = &'a [u8];
    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        let s = self.rest?;
        // Fields are short: a plain scan beats memchr's set-up.
        match s.iter().position(|&c| c == self.sep) {
            Some(i) => {
                self.rest = Some(&s[i + 1..]);
                Some(trim(&s[..i]))
            }
            None => {
                self.rest = None;
                Some(trim(s))
            }
        }
    }
}

/// Whitespace-separated tokens.
pub struct Tokens<'a> {
    s: &'a [u8],
}

impl<'a> Tokens<'a> {
    /// Whitespace-separated tokens of `s`.
    pub fn new(s: &'a [u8]) -> Self {
        Tokens { s }
    }
    /// What is left, leading blanks removed.
    pub fn rest(&self) -> &'a [u8] {
        let mut i = 0;
        while i < self.s.len() && is_blank(self.s[i]) {
            i += 1;
        }
        &self.s[i..]
    }
}

#[inline]
fn is_blank(c: u8) -> bool {
    c == b' ' || c == b'\t'
}

impl<'a> Iterator for Tokens<'a> {
    type Item = &'a [u8];
    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        let s = self.s;
        let mut i = 0;
        while i < s.len() && is_blank(s[i]) {
            i += 1;
        }
        if i == s.len() {
            self.s = &s[s.len()..];
            return None;
        }
        let b = i;
        while i < s.len() && !is_blank(s[i]) {
            i += 1;
        }
        self.s = &s[i..];
        Some(&s[b..i])
    }
}

/// `s` without leading and trailing ASCII whitespace.
#[inline]
pub fn trim(s: &[u8]) -> &[u8] {
    let mut a = 0;
    let mut b = s.len();
    while a < b && (s[a] == b' ' || s[a] == b'\t') {
        a += 1;
    }
    while b > a && (s[b - 1] == b' ' || s[b - 1] == b'\t') {
        b -= 1;
    }
    &s[a..b]
}

/// The reader's table of traced devices (volumes, disks, files, tenants):
/// dense ids in order of first appearance, each with a printable name.
#[derive(Default, Debug, Clone)]
pub struct Devices {
    names: Vec<String>,
    by_name: HashMap<Vec<u8>, u32>,
    by_num: HashMap<u64, u32>,
    last_num: Option<(u64, u32)>,
    last_name: Option<(Vec<u8>, u32)>,
}

impl Devices {
    /// Device names in order of first appearance.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    fn push(&mut self, name: String) -> u32 {
        let id = self.names.len() as u32;
        self.names.push(name);
        id
    }

    /// Id of a numeric device (named by its decimal number).
    #[inline]
    pub fn num(&mut self, n: u64) -> u32 {
        if let Some((k, id)) = self.last_num {
            if k == n {
                return id;
            }
        }
        let id = match self.by_num.get(&n) {
            Some(&id) => id,
            None => {
                let id = self.push(n.to_string());
                self.by_num.insert(n, id);
                id
            }
        };
        self.last_num = Some((n, id));
        id
    }

    /// Id of a `major,minor` device (named `major,minor`).
    #[inline]
    pub fn majmin(&mut self, major: u32, minor: u32) -> u32 {
        let key = (1u64 << 63) | ((major as u64) << 32) | minor as u64;
        if let Some((k, id)) = self.last_num {
            if k == key {
                return id;
            }
        }
        let id = match self.by_num.get(&key) {
            Some(&id) => id,
            None => {
                let id = self.push(format!("{major},{minor}"));
                self.by_num.insert(key, id);
                id
            }
        };
        self.last_num = Some((key, id));
        id
    }

    /// Id of a named device.
    #[inline]
    pub fn name(&mut self, name: &[u8]) -> u32 {
        if let Some((k, id)) = &self.last_name {
            if k.as_slice() == name {
                return *id;
            }
        }
        let id = match self.by_name.get(name) {
            Some(&id) => id,
            None => {
                let id = self.push(String::from_utf8_lossy(name).into_owned());
                self.by_name.insert(name.to_vec(), id);
                id
            }
        };
        match &mut self.last_name {
            Some((k, i)) => {
                k.clear();
                k.extend_from_slice(name);
                *i = id;
            }
            None => self.last_name = Some((name.to_vec(), id)),
        }
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_point() {
        assert_eq!(fixed_ns(b"1.5", 1_000_000_000), Some(1_500_000_000));
        assert_eq!(fixed_ns(b"0.000000001", 1_000_000_000), Some(1));
        assert_eq!(fixed_ns(b"2.0000000019", 1_000_000_000), Some(2_000_000_001));
        assert_eq!(fixed_ns(b"3", 1_000_000), Some(3_000_000));
        assert_eq!(fixed_ns(b".25", 1_000_000), Some(250_000));
        assert_eq!(fixed_ns(b"-1", 1), None);
        assert_eq!(fixed_ns(b"1e3", 1), None);
        assert_eq!(fixed_ns(b".", 1), None);
    }

    #[test]
    fn integers() {
        assert_eq!(u64_dec(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(u64_dec(b"18446744073709551616"), None);
        assert_eq!(u64_dec(b"-3"), None);
        assert_eq!(u64_hex(b"0x1f"), Some(31));
        assert_eq!(u64_hex(b"ff"), Some(255));
    }

    #[test]
    fn devices_are_dense() {
        let mut d = Devices::default();
        assert_eq!(d.num(7), 0);
        assert_eq!(d.name(b"sda"), 1);
        assert_eq!(d.num(7), 0);
        assert_eq!(d.majmin(8, 0), 2);
        assert_eq!(d.name(b"sda"), 1);
        assert_eq!(d.names(), ["7", "sda", "8,0"]);
    }
}
