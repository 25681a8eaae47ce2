//! Trace statistics in one streaming pass and constant memory (plus one small
//! entry per device).

use crate::error::TraceError;
use crate::record::TraceRecord;
use crate::TraceReader;
use hvio_core::Op;
use serde::Serialize;
use std::fmt;

/// A log-linear histogram of u64 values (16 sub-buckets per power of two,
/// about 6 % relative error) for quantiles in constant memory.
#[derive(Clone, Debug)]
pub struct LogHist {
    counts: Vec<u64>,
    n: u64,
    max: u64,
}

impl Default for LogHist {
    fn default() -> Self {
        LogHist {
            counts: vec![0; 64 * 16],
            n: 0,
            max: 0,
        }
    }
}

impl LogHist {
    fn index(v: u64) -> usize {
        if v < 16 {
            return v as usize;
        }
        let e = 63 - v.leading_zeros() as usize; // ≥ 4
        let sub = ((v >> (e - 4)) & 15) as usize;
        (e - 3) * 16 + sub
    }
    fn lower(i: usize) -> u64 {
        if i < 16 {
            return i as u64;
        }
        let e = i / 16 + 3;
        let sub = (i % 16) as u64;
        (16 + sub) << (e - 4)
    }
    /// Counts value `v`.
    pub fn record(&mut self, v: u64) {
        self.counts[Self::index(v)] += 1;
        self.n += 1;
        self.max = self.max.max(v);
    }
    /// The value at quantile `q` (lower edge of its bucket; the maximum for q = 1).
    pub fn quantile(&self, q: f64) -> u64 {
        if self.n == 0 {
            return 0;
        }
        if q >= 1.0 {
            return self.max;
        }
        let rank = ((q * self.n as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Self::lower(i).min(self.max);
            }
        }
        self.max
    }
}

/// Inter-arrival time statistics, microseconds.
#[derive(Clone, Debug, Default, Serialize)]
pub struct InterArrival {
    /// Mean.
    pub mean_us: f64,
    /// Standard deviation.
    pub stddev_us: f64,
    /// Coefficient of variation (1 for Poisson arrivals).
    pub cv: f64,
    /// Median.
    pub p50_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// Largest.
    pub max_us: f64,
}

/// Per-device counts.
#[derive(Clone, Debug, Default, Serialize)]
pub struct DeviceStats {
    /// The device's name.
    pub device: String,
    /// Requests to it.
    pub requests: u64,
    /// Reads among them.
    pub reads: u64,
    /// Bytes of its data requests.
    pub bytes: u64,
    /// Fraction of this device's data requests that start where its previous one ended.
    pub sequential_fraction: f64,
    #[serde(skip)]
    last_end: Option<u64>,
    #[serde(skip)]
    seq: u64,
    #[serde(skip)]
    data: u64,
}

/// The report of `hvio trace stats`.
#[derive(Clone, Debug, Default, Serialize)]
pub struct TraceStats {
    /// The trace file.
    pub file: String,
    /// Its format.
    pub format: String,
    /// Requests read.
    pub requests: u64,
    /// Reads.
    pub reads: u64,
    /// Writes.
    pub writes: u64,
    /// Flushes.
    pub flushes: u64,
    /// Discards.
    pub discards: u64,
    /// Reads over reads + writes.
    pub read_fraction: f64,
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// (upper bound in bytes, count) for data requests: ≤512 B, ≤1 KiB, …, ≤1 MiB, larger.
    pub size_histogram: Vec<(String, u64)>,
    /// Mean size of a data request.
    pub mean_size_bytes: f64,
    /// Smallest data request.
    pub min_size_bytes: u64,
    /// Largest data request.
    pub max_size_bytes: u64,
    /// Time between requests.
    pub inter_arrival: InterArrival,
    /// Last request's time minus the first's, seconds.
    pub duration_s: f64,
    /// First request's time (trace clock).
    pub first_time_ns: u64,
    /// Last request's time (trace clock).
    pub last_time_ns: u64,
    /// Data requests that start where the previous request of the same device ended.
    pub sequential_fraction: f64,
    /// Per-device counts.
    pub devices: Vec<DeviceStats>,
    /// Malformed records skipped (with `skip_bad`).
    pub skipped_bad: u64,
    /// Lines that were not requests, by reason (e.g. blkparse comments and
    /// other actions); empty for formats where every line is a request.
    pub skipped_lines: Vec<(String, u64)>,
}

const SIZE_BUCKETS: usize = 13;

fn bucket_label(i: usize) -> String {
    if i == SIZE_BUCKETS - 1 {
        return ">1MiB".into();
    }
    let b = 512u64 << i;
    if b < 1024 {
        format!("<={b}B")
    } else if b < 1 << 20 {
        format!("<={}KiB", b >> 10)
    } else {
        format!("<={}MiB", b >> 20)
    }
}

/// Accumulates statistics record by record.
#[derive(Clone, Debug, Default)]
pub struct StatsBuilder {
    s: TraceStats,
    sizes: [u64; SIZE_BUCKETS],
    gaps: LogHist,
    gap_sum: f64,
    gap_sq: f64,
    gaps_n: u64,
    prev_time: Option<u64>,
    seq: u64,
    data: u64,
}

impl StatsBuilder {
    /// Counts record `r`.
    pub fn add(&mut self, r: &TraceRecord) {
        let s = &mut self.s;
        if s.requests == 0 {
            s.first_time_ns = r.time;
            s.min_size_bytes = u64::MAX;
        }
        s.requests += 1;
        s.last_time_ns = s.last_time_ns.max(r.time);
        s.first_time_ns = s.first_time_ns.min(r.time);
        if let Some(p) = self.prev_time {
            let gap = r.time.saturating_sub(p);
            self.gaps.record(gap);
            let g = gap as f64 / 1e3;
            self.gap_sum += g;
            self.gap_sq += g * g;
            self.gaps_n += 1;
        }
        self.prev_time = Some(r.time);
        let d = r.device as usize;
        if s.devices.len() <= d {
            s.devices.resize_with(d + 1, DeviceStats::default);
        }
        let dev = &mut s.devices[d];
        dev.requests += 1;
        let bytes = r.bytes();
        match r.op {
            Op::Read => {
                s.reads += 1;
                s.read_bytes = s.read_bytes.saturating_add(bytes);
                dev.reads += 1;
            }
            Op::Write => {
                s.writes += 1;
                s.write_bytes = s.write_bytes.saturating_add(bytes);
            }
            Op::Flush => s.flushes += 1,
            Op::Discard => s.discards += 1,
        }
        if matches!(r.op, Op::Read | Op::Write) {
            self.data += 1;
            dev.bytes = dev.bytes.saturating_add(bytes);
            dev.data += 1;
            s.min_size_bytes = s.min_size_bytes.min(bytes);
            s.max_size_bytes = s.max_size_bytes.max(bytes);
            let b = if bytes <= 512 {
                0
            } else {
                (64 - (bytes - 1).leading_zeros() as usize)
                    .saturating_sub(9)
                    .min(SIZE_BUCKETS - 1)
            };
            self.sizes[b] += 1;
            if dev.last_end == Some(r.sector) {
                dev.seq += 1;
                self.seq += 1;
            }
            dev.last_end = Some(r.end());
        }
    }

    /// The report for `file` in `format`, with the reader's device names and skipped count.
    pub fn finish(mut self, file: &str, format: &str, device_names: &[String], skipped: u64) -> TraceStats {
        let s = &mut self.s;
        s.file = file.to_string();
        s.format = format.to_string();
        s.skipped_bad = skipped;
        let rw = s.reads + s.writes;
        s.read_fraction = if rw > 0 { s.reads as f64 / rw as f64 } else { 0.0 };
        if self.data == 0 {
            s.min_size_bytes = 0;
        }
        s.mean_size_bytes = if self.data > 0 {
            (s.read_bytes as f64 + s.write_bytes as f64) / self.data as f64
        } else {
            0.0
        };
        s.size_histogram = self
            .sizes
            .iter()
            .enumerate()
            .map(|(i, &c)| (bucket_label(i), c))
            .collect();
        s.duration_s = (s.last_time_ns - s.first_time_ns) as f64 / 1e9;
        s.sequential_fraction = if self.data > 0 {
            self.seq as f64 / self.data as f64
        } else {
            0.0
        };
        for (i, d) in s.devices.iter_mut().enumerate() {
            d.device = device_names.get(i).cloned().unwrap_or_else(|| i.to_string());
            d.sequential_fraction = d.seq as f64 / d.data.max(1) as f64;
        }
        if self.gaps_n > 0 {
            let n = self.gaps_n as f64;
            let mean = self.gap_sum / n;
            let var = (self.gap_sq / n - mean * mean).max(0.0);
            let q = |p: f64| self.gaps.quantile(p) as f64 / 1e3;
            s.inter_arrival = InterArrival {
                mean_us: mean,
                stddev_us: var.sqrt(),
                cv: if mean > 0.0 { var.sqrt() / mean } else { 0.0 },
                p50_us: q(0.5),
                p90_us: q(0.9),
                p99_us: q(0.99),
                max_us: q(1.0),
            };
        }
        self.s
    }
}

/// Reads a whole trace and returns its statistics. Stops at the first error
/// unless the reader skips bad records.
pub fn trace_stats(reader: &mut TraceReader) -> Result<TraceStats, TraceError> {
    let mut b = StatsBuilder::default();
    for r in reader.by_ref() {
        b.add(&r?);
    }
    let mut s = b.finish(
        reader.path(),
        reader.format().name(),
        reader.devices(),
        reader.skipped(),
    );
    s.skipped_lines = reader.skipped_lines();
    Ok(s)
}

impl fmt::Display for TraceStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "trace       {} ({})", self.file, self.format)?;
        writeln!(
            f,
            "requests    {} ({} reads, {} writes, {} flushes, {} discards)",
            self.requests, self.reads, self.writes, self.flushes, self.discards
        )?;
        writeln!(f, "read frac   {:.3}", self.read_fraction)?;
        writeln!(
            f,
            "bytes       {:.1} MB read, {:.1} MB written",
            self.read_bytes as f64 / 1e6,
            self.write_bytes as f64 / 1e6
        )?;
        writeln!(f, "duration    {:.3} s", self.duration_s)?;
        writeln!(
            f,
            "size        mean {:.0} B, min {} B, max {} B",
            self.mean_size_bytes, self.min_size_bytes, self.max_size_bytes
        )?;
        let ia = &self.inter_arrival;
        writeln!(
            f,
            "inter-arr.  mean {:.1} us, sd {:.1} us, cv {:.2}, p50 {:.1} us, p90 {:.1} us, p99 {:.1} us, max {:.1} us",
            ia.mean_us, ia.stddev_us, ia.cv, ia.p50_us, ia.p90_us, ia.p99_us, ia.max_us
        )?;
        writeln!(
            f,
            "sequential  {:.3} of data requests start where their device's previous one ended",
            self.sequential_fraction
        )?;
        if self.skipped_bad > 0 {
            writeln!(f, "skipped     {} bad records", self.skipped_bad)?;
        }
        if !self.skipped_lines.is_empty() {
            let total: u64 = self.skipped_lines.iter().map(|(_, n)| n).sum();
            let why: Vec<String> = self.skipped_lines.iter().map(|(r, n)| format!("{n} {r}")).collect();
            writeln!(f, "not read    {total} lines that are not requests: {}", why.join(", "))?;
        }
        writeln!(f, "\nsize distribution")?;
        for (label, n) in &self.size_histogram {
            if *n > 0 {
                let pct = 100.0 * *n as f64 / (self.reads + self.writes).max(1) as f64;
                writeln!(f, "  {label:>9} {n:>12} {pct:6.2} %")?;
            }
        }
        writeln!(
            f,
            "\n{:<24} {:>12} {:>10} {:>12} {:>10}",
            "device", "requests", "reads", "MB", "seq frac"
        )?;
        for d in &self.devices {
            writeln!(
                f,
                "{:<24} {:>12} {:>10} {:>12.1} {:>10.3}",
                d.device,
                d.requests,
                d.reads,
                d.bytes as f64 / 1e6,
                d.sequential_fraction
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_hist_quantiles() {
        let mut h = LogHist::default();
        for v in 1..=1000u64 {
            h.record(v * 1000);
        }
        let p50 = h.quantile(0.5) as f64;
        assert!((p50 - 500_000.0).abs() / 500_000.0 < 0.07, "{p50}");
        assert_eq!(h.quantile(1.0), 1_000_000);
        assert_eq!(LogHist::default().quantile(0.5), 0);
        for v in [0u64, 1, 15, 16, 17, 1 << 40, u64::MAX] {
            let i = LogHist::index(v);
            assert!(LogHist::lower(i) <= v);
        }
    }

    #[test]
    fn stats_of_a_small_trace() {
        let mut b = StatsBuilder::default();
        let recs = [
            TraceRecord::new(0, 0, Op::Read, 0, 8),
            TraceRecord::new(1000, 0, Op::Read, 8, 8),
            TraceRecord::new(3000, 1, Op::Write, 100, 128),
            TraceRecord::new(6000, 0, Op::Flush, 0, 0),
        ];
        for r in &recs {
            b.add(r);
        }
        let s = b.finish("t", "msr", &["a".into(), "b".into()], 0);
        assert_eq!((s.requests, s.reads, s.writes, s.flushes), (4, 2, 1, 1));
        assert!((s.read_fraction - 2.0 / 3.0).abs() < 1e-12);
        assert!((s.sequential_fraction - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(s.size_histogram[3].1, 2); // 4 KiB
        assert_eq!(s.size_histogram[7].1, 1); // 64 KiB
        assert!((s.inter_arrival.mean_us - 2.0).abs() < 1e-9);
        assert_eq!(s.devices[0].requests, 3);
        assert!((s.devices[0].sequential_fraction - 0.5).abs() < 1e-12);
        assert_eq!(s.duration_s, 6e-6);
        assert!(s.to_string().contains("requests    4"));
    }
}
