//! Adaptive busy-polling of the io_uring engine thread.
//!
//! Before the engine sleeps in `io_uring_enter` it spins for a short window
//! on what it would wake for — the completion queue (completed disk I/O,
//! NBD receives and sends) and its message channel — without a system call.
//! A completion that arrives within the window is taken at once instead of
//! after a sleep and a wake-up: on a virtual machine that wake-up is a
//! halted vCPU woken by an IPI, tens of microseconds per completion.
//!
//! The window adapts as QEMU's `AioContext` polling does (`poll-max-ns`,
//! `poll-grow`, `poll-shrink`): after every wait, `block` (the time from
//! the start of the spin to the event that ended the wait) decides:
//! - `block <= window`: polling found the event; keep the window;
//! - `block > max`: polling that long would not have paid; shrink the
//!   window (divide by `shrink`, or to 0 when `shrink` is 0);
//! - otherwise the event came a little late: grow the window (0 → 4 µs,
//!   then times `grow`, capped at `max`).
//!
//! An idle server therefore sleeps at no CPU cost (a wait with nothing to
//! come spins one window, then sleeps); a busy one spins only as long as its
//! events come. The engine polls only while its ring serves NBD connections
//! (`Poller::serves_connections`): on the FUSE path the spin would take the
//! CPU of the threads that produce the requests.

use serde::Serialize;
use std::time::{Duration, Instant};

/// The first window after polling was off, as in QEMU.
const FIRST_WINDOW_NS: u64 = 4_000;

/// `[store] poll_max_us`, `poll_grow`, `poll_shrink`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PollConfig {
    /// Longest window in ns; 0 turns polling off.
    pub max_ns: u64,
    /// Window growth factor (≥ 2).
    pub grow: u64,
    /// Window shrink divisor (≥ 2), or 0: back to no polling at once.
    pub shrink: u64,
}

impl PollConfig {
    /// No polling.
    pub const OFF: PollConfig = PollConfig {
        max_ns: 0,
        grow: 2,
        shrink: 0,
    };
}

/// What polling did, for the control API and `/metrics`.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct PollStats {
    /// The configured cap (µs); 0: polling off.
    pub max_us: f64,
    /// The current window (µs).
    pub window_us: f64,
    /// Times the engine had nothing to do and waited (by polling, sleeping or both).
    pub waits: u64,
    /// Waits that began with a spin.
    pub polls: u64,
    /// Spins that found work (no sleep followed).
    pub poll_hits: u64,
    /// Time spent spinning (s): the CPU polling cost.
    pub poll_s: f64,
    /// Waits that slept in the kernel.
    pub sleeps: u64,
}

/// The adaptive window and its counters.
pub struct AdaptivePoll {
    cfg: PollConfig,
    window_ns: u64,
    waits: u64,
    polls: u64,
    hits: u64,
    spin_ns: u64,
    sleeps: u64,
    /// The current wait may spin (see `spin`'s `worth_it`).
    adapting: bool,
}

impl AdaptivePoll {
    /// A poller with no history.
    pub fn new(cfg: PollConfig) -> AdaptivePoll {
        AdaptivePoll {
            cfg,
            window_ns: 0,
            waits: 0,
            polls: 0,
            hits: 0,
            spin_ns: 0,
            sleeps: 0,
            adapting: false,
        }
    }

    /// The current window.
    pub fn window(&self) -> Duration {
        Duration::from_nanos(self.window_ns)
    }

    /// Spin for at most the current window (and never past `deadline`) until
    /// `ready` says there is work; whether it did. `start` is when the wait
    /// began; `worth_it` false: no spin, and this wait leaves the window as it is.
    pub fn spin(
        &mut self,
        start: Instant,
        deadline: Option<Instant>,
        worth_it: bool,
        mut ready: impl FnMut() -> bool,
    ) -> bool {
        self.waits += 1;
        self.adapting = worth_it;
        let mut until = start + self.window();
        if let Some(d) = deadline {
            until = until.min(d);
        }
        if !worth_it || self.window_ns == 0 || until <= start {
            return false;
        }
        self.polls += 1;
        let found = loop {
            if ready() {
                break true;
            }
            if Instant::now() >= until {
                break false;
            }
            std::hint::spin_loop();
        };
        self.spin_ns += start.elapsed().as_nanos() as u64;
        if found {
            self.hits += 1;
        }
        found
    }

    /// The wait that began at `start` slept in the kernel until now.
    pub fn slept(&mut self, start: Instant) {
        self.sleeps += 1;
        if self.adapting {
            self.adjust(start.elapsed().as_nanos() as u64);
        }
    }

    /// Adapt the window to a wait whose event came `block_ns` after it began.
    pub fn adjust(&mut self, block_ns: u64) {
        let max = self.cfg.max_ns;
        if max == 0 || block_ns <= self.window_ns {
            // Off, or the sweet spot: polling caught the event.
        } else if block_ns > max {
            // Polling would have had to run too long: poll less.
            self.window_ns = match self.cfg.shrink {
                0 => 0,
                s => self.window_ns / s,
            };
            if self.window_ns < FIRST_WINDOW_NS {
                // Below the first window: off, and the next grow starts at 4 µs again.
                self.window_ns = 0;
            }
        } else if self.window_ns < max {
            // The event came a little after the window: poll longer.
            self.window_ns = match self.window_ns {
                0 => FIRST_WINDOW_NS,
                w => w.saturating_mul(self.cfg.grow.max(2)),
            }
            .min(max);
        }
    }

    /// Its counters.
    pub fn stats(&self) -> PollStats {
        PollStats {
            max_us: self.cfg.max_ns as f64 / 1e3,
            window_us: self.window_ns as f64 / 1e3,
            waits: self.waits,
            polls: self.polls,
            poll_hits: self.hits,
            poll_s: self.spin_ns as f64 / 1e9,
            sleeps: self.sleeps,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(max_us: u64, shrink: u64) -> PollConfig {
        PollConfig {
            max_ns: max_us * 1000,
            grow: 2,
            shrink,
        }
    }

    #[test]
    fn grows_from_4us_to_the_cap_while_events_come_soon() {
        let mut p = AdaptivePoll::new(cfg(32, 0));
        assert_eq!(p.window(), Duration::ZERO);
        let mut seen = vec![];
        for _ in 0..6 {
            // A little after the window each time (never past the cap).
            p.adjust((p.window().as_nanos() as u64 + 1_000).min(32_000));
            seen.push(p.window().as_micros());
        }
        assert_eq!(seen, [4, 8, 16, 32, 32, 32]);
        // Caught within the window: unchanged.
        p.adjust(10_000);
        assert_eq!(p.window().as_micros(), 32);
    }

    #[test]
    fn a_long_wait_shrinks_or_resets() {
        let mut p = AdaptivePoll::new(cfg(32, 0));
        for _ in 0..4 {
            p.adjust(30_000);
        }
        assert_eq!(p.window().as_micros(), 32);
        p.adjust(1_000_000);
        assert_eq!(p.window(), Duration::ZERO, "shrink 0 resets");
        let mut p = AdaptivePoll::new(cfg(32, 2));
        for _ in 0..4 {
            p.adjust(30_000);
        }
        p.adjust(1_000_000);
        assert_eq!(p.window().as_micros(), 16);
        p.adjust(1_000_000);
        assert_eq!(p.window().as_micros(), 8);
    }

    #[test]
    fn off_never_polls() {
        let mut p = AdaptivePoll::new(PollConfig::OFF);
        for _ in 0..10 {
            p.adjust(1_000);
        }
        assert_eq!(p.window(), Duration::ZERO);
        let mut called = false;
        assert!(!p.spin(Instant::now(), None, true, || {
            called = true;
            true
        }));
        assert!(!called);
        let s = p.stats();
        assert_eq!((s.waits, s.polls, s.poll_hits), (1, 0, 0));
    }

    #[test]
    fn spin_stops_at_work_the_window_or_the_deadline() {
        let mut p = AdaptivePoll::new(cfg(200, 0));
        for _ in 0..7 {
            p.adjust(p.window().as_nanos() as u64 + 1);
        }
        assert_eq!(p.window().as_micros(), 200);
        let mut n = 0;
        assert!(p.spin(Instant::now(), None, true, || {
            n += 1;
            n == 3
        }));
        let t = Instant::now();
        assert!(!p.spin(t, None, true, || false));
        assert!(t.elapsed() >= Duration::from_micros(200));
        let t = Instant::now();
        assert!(!p.spin(t, Some(t), true, || true), "a deadline already due: no spin");
        // Not worth it: no spin, and the long wait that follows keeps the window.
        let t = Instant::now() - Duration::from_millis(5);
        assert!(!p.spin(t, None, false, || true));
        p.slept(t);
        assert_eq!(p.window().as_micros(), 200);
        let s = p.stats();
        assert_eq!((s.waits, s.polls, s.poll_hits, s.sleeps), (4, 2, 1, 1));
        assert!(s.poll_s >= 200e-6);
    }
}
