//! Simulated and real time as integer nanoseconds.
//!
//! Integer time keeps the simulation deterministic: no float rounding decides
//! the order of two events.

/// A point in time or a duration, in nanoseconds.
pub type Nanos = u64;

/// Nanoseconds in a microsecond.
pub const NS_PER_US: Nanos = 1_000;
/// Nanoseconds in a millisecond.
pub const NS_PER_MS: Nanos = 1_000_000;
/// Nanoseconds in a second.
pub const NS_PER_S: Nanos = 1_000_000_000;

/// Microseconds to nanoseconds.
pub const fn us(v: u64) -> Nanos {
    v * NS_PER_US
}

/// Milliseconds to nanoseconds.
pub const fn ms(v: u64) -> Nanos {
    v * NS_PER_MS
}

/// Seconds to nanoseconds.
pub const fn s(v: u64) -> Nanos {
    v * NS_PER_S
}

/// Nanoseconds to (fractional) milliseconds, for reports.
pub fn ns_to_ms(v: Nanos) -> f64 {
    v as f64 / NS_PER_MS as f64
}

/// Nanoseconds to (fractional) seconds, for reports.
pub fn ns_to_s(v: Nanos) -> f64 {
    v as f64 / NS_PER_S as f64
}

/// A fractional number of milliseconds to nanoseconds (rounded to nearest).
pub fn ms_f64(v: f64) -> Nanos {
    (v * NS_PER_MS as f64).round().max(0.0) as Nanos
}
