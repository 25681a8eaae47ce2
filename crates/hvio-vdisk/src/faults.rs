//! Protocol rejections: what a client sent that the exports refused, counted
//! by reason for `/status` (`rejections`) and `/metrics`
//! (`hvio_protocol_rejections_total{reason=...}`), and logged at `info` once
//! per connection (its first rejection), at most [`LOG_PER_SECOND`] lines a
//! second daemon-wide: a misbehaving client shows up in the log without a
//! flood of lines drowning it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// Why a request or handshake was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// A request or option header without its magic number (the connection closes).
    BadMagic,
    /// `NBD_OPT_EXPORT_NAME`, `_INFO` or `_GO` for a name no VM has.
    UnknownExport,
    /// A request past the end of the export (or whose end overflows).
    OutOfRange,
    /// A READ or WRITE longer than the advertised maximum payload, or
    /// option data longer than the server takes.
    Oversized,
    /// The client did not reach transmission within `[nbd] handshake_timeout_s`.
    HandshakeTimeout,
    /// Offset or length not a multiple of the minimum block size, from a
    /// client that agreed to block-size constraints.
    Misaligned,
    /// A write, trim or write-zeroes on a read-only export.
    ReadOnly,
    /// Client or command flags the server does not know or did not offer.
    BadFlags,
    /// A command type the server does not offer.
    UnknownCommand,
    /// Option data that does not parse (`NBD_OPT_INFO`/`_GO`, `_LIST`).
    Malformed,
}

impl Fault {
    /// Every reason, in the order they are reported.
    pub const ALL: [Fault; 10] = [
        Fault::BadMagic,
        Fault::UnknownExport,
        Fault::OutOfRange,
        Fault::Oversized,
        Fault::HandshakeTimeout,
        Fault::Misaligned,
        Fault::ReadOnly,
        Fault::BadFlags,
        Fault::UnknownCommand,
        Fault::Malformed,
    ];

    /// The reason's name in `/status`, `/metrics` and the log.
    pub fn name(self) -> &'static str {
        match self {
            Fault::BadMagic => "bad_magic",
            Fault::UnknownExport => "unknown_export",
            Fault::OutOfRange => "out_of_range",
            Fault::Oversized => "oversized",
            Fault::HandshakeTimeout => "handshake_timeout",
            Fault::Misaligned => "misaligned",
            Fault::ReadOnly => "read_only",
            Fault::BadFlags => "bad_flags",
            Fault::UnknownCommand => "unknown_command",
            Fault::Malformed => "malformed",
        }
    }

    fn index(self) -> usize {
        Fault::ALL
            .iter()
            .position(|&f| f == self)
            .expect("every fault is in ALL")
    }
}

/// Daemon-wide cap on rejection log lines.
pub const LOG_PER_SECOND: u32 = 20;

/// The daemon's rejection counters and log limiter (shared by every export).
pub struct Faults {
    counts: [AtomicU64; Fault::ALL.len()],
    limiter: Mutex<Limiter>,
}

struct Limiter {
    second: Option<Instant>,
    lines: u32,
    /// Lines left out since the last one logged.
    suppressed: u64,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
            limiter: Mutex::new(Limiter {
                second: None,
                lines: 0,
                suppressed: 0,
            }),
        }
    }
}

impl Faults {
    /// Count `fault`; log it at `info` if it is the connection's first
    /// (`*logged` is false, and set) and the daemon-wide rate allows.
    /// `who` names the connection (peer or export), `detail` the request.
    pub fn record(&self, fault: Fault, logged: &mut bool, who: &str, detail: std::fmt::Arguments) {
        self.counts[fault.index()].fetch_add(1, Ordering::Relaxed);
        if std::mem::replace(logged, true) {
            return;
        }
        let suppressed = {
            let mut l = self.limiter.lock().unwrap_or_else(|p| p.into_inner());
            let now = Instant::now();
            if l.second.is_none_or(|s| now.duration_since(s).as_secs() >= 1) {
                l.second = Some(now);
                l.lines = 0;
            }
            if l.lines >= LOG_PER_SECOND {
                l.suppressed += 1;
                return;
            }
            l.lines += 1;
            std::mem::take(&mut l.suppressed)
        };
        tracing::info!(
            client = %who,
            reason = fault.name(),
            suppressed_before = suppressed,
            "nbd: rejected {detail} (further rejections on this connection are counted, not logged)"
        );
    }

    /// (reason, count) for every reason, zeros included.
    pub fn counts(&self) -> Vec<(&'static str, u64)> {
        Fault::ALL
            .iter()
            .map(|f| (f.name(), self.counts[f.index()].load(Ordering::Relaxed)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_every_rejection_and_logs_the_first_per_connection() {
        let f = Faults::default();
        let mut logged = false;
        f.record(Fault::OutOfRange, &mut logged, "c1", format_args!("x"));
        assert!(logged);
        f.record(Fault::OutOfRange, &mut logged, "c1", format_args!("x"));
        f.record(Fault::BadMagic, &mut logged, "c1", format_args!("x"));
        let c = f.counts();
        assert_eq!(c.len(), Fault::ALL.len());
        assert!(c.contains(&("out_of_range", 2)));
        assert!(c.contains(&("bad_magic", 1)));
        assert!(c.contains(&("handshake_timeout", 0)));
    }

    #[test]
    fn the_log_is_capped_per_second_and_counts_what_it_left_out() {
        let f = Faults::default();
        for _ in 0..LOG_PER_SECOND + 5 {
            f.record(Fault::Oversized, &mut false, "c", format_args!("x"));
        }
        let l = f.limiter.lock().unwrap();
        assert_eq!(l.lines, LOG_PER_SECOND);
        assert_eq!(l.suppressed, 5);
        drop(l);
        assert_eq!(f.counts()[Fault::Oversized.index()].1, LOG_PER_SECOND as u64 + 5);
    }
}
