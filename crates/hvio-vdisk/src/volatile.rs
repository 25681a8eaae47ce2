//! A test facility for crash consistency: a volatile write cache in front of
//! the backing store, like a disk's write-back cache that a power cut empties.
//!
//! Plain writes are held in process memory; a random subset is written to
//! the file at random moments (out of order, as a disk reorders its cache,
//! but never letting an older write land over a newer one); FLUSH writes all
//! of them and `fdatasync`s; FUA writes go straight to the file. `crash()`
//! drops whatever is still held. A test then checks the file: every write
//! acknowledged before a FLUSH that completed must be there; any other block
//! holds its old or its new contents, never anything else. `ignore_flush`
//! is the negative control that must make such a test fail.
//!
//! Enabled by `[store] volatile_test = { ... }`; never for real data.

use crate::io::IoResult;
use serde::Deserialize;
use std::sync::Mutex;

/// `[store] volatile_test`: a write cache that loses what was not flushed (tests of durability).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VolatileConfig {
    /// Chance, at each write, that one random held write reaches the file.
    #[serde(default = "default_p")]
    pub persist_probability: f64,
    /// Seed of its random choices.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Negative control: FLUSH does not write the held data.
    #[serde(default)]
    pub ignore_flush: bool,
    /// Negative control for a reshaped image: break its durability order.
    #[serde(default)]
    pub image_fault: Option<ImageFault>,
    /// A reshaped image ends the process (as `kill -9`) in the middle of the
    /// `crash_after`-th I/O of this kind, half of it written.
    #[serde(default)]
    pub crash_in: Option<CrashPoint>,
    /// Which one (default 1).
    #[serde(default = "default_crash_after")]
    pub crash_after: u64,
}

/// Ways to break a reshaped image's durability order, which the crash
/// campaign must catch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ImageFault {
    /// The cache flush before a commit is done after the log write instead.
    CommitBeforeData,
    /// The cache flush before a commit is skipped.
    NoFlushSync,
    /// Checkpoint writes are acknowledged and never written.
    LostCheckpoint,
}

/// Where a reshaped image's test crash happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CrashPoint {
    /// Writing a checkpoint.
    Checkpoint,
    /// Writing a cleaning copy.
    Clean,
}

fn default_crash_after() -> u64 {
    1
}

fn default_p() -> f64 {
    0.3
}
fn default_seed() -> u64 {
    1
}

struct Held {
    file: usize,
    off: u64,
    data: Vec<u8>,
}

fn overlaps(a: &Held, file: usize, off: u64, len: u64) -> bool {
    a.file == file && a.off < off + len && off < a.off + a.data.len() as u64
}

/// Writes held back from the file, as a drive's volatile cache holds them.
pub struct VolatileCache {
    held: Mutex<(Vec<Held>, u64)>,
    cfg: VolatileConfig,
}

/// Where held data goes: (file index, offset, bytes) → result.
pub type Persist<'a> = &'a dyn Fn(usize, u64, &[u8]) -> IoResult;

impl VolatileCache {
    /// An empty cache.
    pub fn new(cfg: VolatileConfig) -> VolatileCache {
        VolatileCache {
            held: Mutex::new((Vec::new(), cfg.seed | 1)),
            cfg,
        }
    }

    /// Its configuration.
    pub fn config(&self) -> &VolatileConfig {
        &self.cfg
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (Vec<Held>, u64)> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Hold a plain write; maybe let one held write through.
    pub fn write(&self, file: usize, off: u64, data: &[u8], persist: Persist) -> IoResult {
        let mut g = self.lock();
        g.0.push(Held {
            file,
            off,
            data: data.to_vec(),
        });
        // xorshift64
        let mut x = g.1;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        g.1 = x;
        if (x % 1_000_000) as f64 / 1e6 < self.cfg.persist_probability {
            let i = (x >> 20) as usize % g.0.len();
            let h = &g.0[i];
            // Never let an older write land after a newer one over the same bytes.
            let newer = g.0[i + 1..]
                .iter()
                .any(|n| overlaps(n, h.file, h.off, h.data.len() as u64));
            if !newer {
                let h = g.0.remove(i);
                persist(h.file, h.off, &h.data)?;
            }
        }
        Ok(())
    }

    /// A FUA write or a zeroing goes to the file now: held writes it covers are superseded.
    pub fn write_through(&self, file: usize, off: u64, len: u64) {
        self.lock().0.retain(|h| !overlaps(h, file, off, len));
    }

    /// Read `buf.len()` bytes at `off` of `file`: what `read_file` reads
    /// from the file, with the held writes laid over it. Both under the
    /// cache's lock, so a held write persisted (and dropped from the cache)
    /// meanwhile cannot be missed by both.
    pub fn read(
        &self,
        file: usize,
        off: u64,
        buf: &mut [u8],
        read_file: impl FnOnce(&mut [u8]) -> IoResult,
    ) -> IoResult {
        let g = self.lock();
        read_file(buf)?;
        let len = buf.len() as u64;
        for h in g.0.iter().filter(|h| overlaps(h, file, off, len)) {
            let start = h.off.max(off);
            let end = (h.off + h.data.len() as u64).min(off + len);
            buf[(start - off) as usize..(end - off) as usize]
                .copy_from_slice(&h.data[(start - h.off) as usize..(end - h.off) as usize]);
        }
        Ok(())
    }

    /// FLUSH: write everything held, in order (unless `ignore_flush`).
    pub fn flush(&self, persist: Persist) -> IoResult {
        if self.cfg.ignore_flush {
            return Ok(());
        }
        let mut g = self.lock();
        for h in g.0.drain(..) {
            persist(h.file, h.off, &h.data)?;
        }
        Ok(())
    }

    /// Power cut: everything held is gone. Returns how many writes were lost.
    pub fn crash(&self) -> usize {
        let mut g = self.lock();
        let n = g.0.len();
        g.0.clear();
        n
    }
}
