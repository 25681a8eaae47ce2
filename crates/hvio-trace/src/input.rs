//! Buffered input with look-ahead, line splitting and transparent gzip.

use crate::error::TraceError;
use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

const BUF: usize = 1 << 18;
/// The longest line accepted: longer ones are an error, not unbounded memory.
pub const MAX_LINE: usize = 1 << 20;

/// A byte source with a growable look-ahead buffer.
pub struct Input {
    src: Box<dyn Read + Send>,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    eof: bool,
    /// Bytes consumed so far (of the decompressed stream).
    pub consumed: u64,
    /// The input's name, for messages.
    pub path: String,
    /// Whether the bytes are decompressed gzip (for error messages).
    gzip: bool,
    /// The last line was too long: the next call skips the rest of it first
    /// (lazily: a reader that stops at the error never reads an endless line).
    skip_pending: bool,
}

/// Result of asking for an exact number of bytes.
pub enum Exact<'a> {
    /// The bytes asked for.
    Full(&'a [u8]),
    /// The input ended before any of them.
    Eof,
    /// The input ended after this many bytes.
    Partial(usize),
}

impl Input {
    /// An input named `path` reading from `src`.
    pub fn new(path: impl Into<String>, src: Box<dyn Read + Send>) -> Self {
        Input {
            src,
            buf: vec![0; BUF],
            start: 0,
            end: 0,
            eof: false,
            consumed: 0,
            path: path.into(),
            gzip: false,
            skip_pending: false,
        }
    }

    /// Opens a file; gzip input (by its magic bytes) is decompressed on the fly.
    pub fn open(path: &Path) -> Result<Self, TraceError> {
        let name = path.display().to_string();
        let f = File::open(path).map_err(|e| TraceError::io(&name, e))?;
        Self::with_gzip_detection(name, Box::new(f))
    }

    /// Wraps a reader, decompressing it if it starts with the gzip magic.
    pub fn with_gzip_detection(name: String, src: Box<dyn Read + Send>) -> Result<Self, TraceError> {
        let mut inp = Input::new(name.clone(), src);
        let head = inp.peek(2).map_err(|e| TraceError::io(&name, e))?;
        if head == [0x1f, 0x8b] {
            let rest = std::mem::replace(&mut inp.src, Box::new(io::empty()));
            let pending = inp.buf[inp.start..inp.end].to_vec();
            let chained = io::Cursor::new(pending).chain(rest);
            let gz = flate2::read::MultiGzDecoder::new(chained);
            let mut inp = Input::new(name, Box::new(gz));
            inp.gzip = true;
            return Ok(inp);
        }
        Ok(inp)
    }

    fn fill(&mut self) -> io::Result<usize> {
        if self.eof {
            return Ok(0);
        }
        if self.start > 0 && self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        if self.end == self.buf.len() {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else {
                let n = self.buf.len() * 2;
                self.buf.resize(n, 0);
            }
        }
        loop {
            match self.src.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(0);
                }
                Ok(n) => {
                    self.end += n;
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // Say where: the byte offset (of the decompressed stream for gzip).
                    let at = self.consumed + (self.end - self.start) as u64;
                    let what = if self.gzip {
                        "gzip data after decompressed byte"
                    } else {
                        "byte"
                    };
                    return Err(io::Error::new(e.kind(), format!("reading {what} {at}: {e}")));
                }
            }
        }
    }

    /// Up to `n` bytes ahead without consuming them (fewer only at the end).
    pub fn peek(&mut self, n: usize) -> io::Result<&[u8]> {
        while self.end - self.start < n {
            if self.fill()? == 0 {
                break;
            }
        }
        let m = (self.end - self.start).min(n);
        Ok(&self.buf[self.start..self.start + m])
    }

    /// The next line without its `\n` (and `\r`), or `None` at the end.
    /// A final line without a newline is returned too.
    pub fn next_line(&mut self) -> Result<Option<&[u8]>, TraceError> {
        if self.skip_pending {
            self.skip_pending = false;
            self.skip_line()?;
        }
        let mut scanned = 0;
        loop {
            let avail = &self.buf[self.start + scanned..self.end];
            if let Some(i) = memchr::memchr(b'\n', avail) {
                let s = self.start;
                let e = s + scanned + i;
                self.start = e + 1;
                self.consumed += (e + 1 - s) as u64;
                let line = &self.buf[s..e];
                let line = line.strip_suffix(b"\r").unwrap_or(line);
                return Ok(Some(line));
            }
            scanned = self.end - self.start;
            if scanned > MAX_LINE {
                let found = crate::error::snippet(&self.buf[self.start..self.start + 64]);
                // Skipping the line (skip_bad) moves on past all of it.
                self.skip_pending = true;
                return Err(TraceError::Malformed {
                    path: self.path.clone(),
                    loc: crate::error::Loc::File,
                    expected: format!("text lines shorter than {MAX_LINE} bytes"),
                    found,
                });
            }
            let n = self.fill().map_err(|e| TraceError::io(&self.path, e))?;
            if n == 0 {
                if self.start == self.end {
                    return Ok(None);
                }
                let s = self.start;
                let e = self.end;
                self.start = e;
                self.consumed += (e - s) as u64;
                let line = &self.buf[s..e];
                let line = line.strip_suffix(b"\r").unwrap_or(line);
                return Ok(Some(line));
            }
        }
    }

    /// Consumes everything up to and including the next newline (or to the end).
    fn skip_line(&mut self) -> Result<(), TraceError> {
        loop {
            if let Some(i) = memchr::memchr(b'\n', &self.buf[self.start..self.end]) {
                self.consumed += (i + 1) as u64;
                self.start += i + 1;
                return Ok(());
            }
            self.consumed += (self.end - self.start) as u64;
            self.start = self.end;
            if self.fill().map_err(|e| TraceError::io(&self.path, e))? == 0 {
                return Ok(());
            }
        }
    }

    /// Exactly `n` bytes, consumed.
    pub fn exact(&mut self, n: usize) -> Result<Exact<'_>, TraceError> {
        while self.end - self.start < n {
            if self.fill().map_err(|e| TraceError::io(&self.path, e))? == 0 {
                break;
            }
        }
        let have = self.end - self.start;
        if have == 0 {
            return Ok(Exact::Eof);
        }
        if have < n {
            self.start = self.end;
            self.consumed += have as u64;
            return Ok(Exact::Partial(have));
        }
        let s = self.start;
        self.start += n;
        self.consumed += n as u64;
        Ok(Exact::Full(&self.buf[s..s + n]))
    }

    /// Skips `n` bytes; returns how many were really there.
    pub fn skip(&mut self, mut n: usize) -> Result<usize, TraceError> {
        let want = n;
        while n > 0 {
            if self.start == self.end && self.fill().map_err(|e| TraceError::io(&self.path, e))? == 0 {
                break;
            }
            let k = n.min(self.end - self.start);
            self.start += k;
            self.consumed += k as u64;
            n -= k;
        }
        Ok(want - n)
    }
}
