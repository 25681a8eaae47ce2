//! What a run measures, where blktrace would sit in a real hypervisor (the
//! host scheduler/device boundary) and at the guest (application latency,
//! job completion time).

use hdrhistogram::Histogram;
use hvio_core::{ns_to_ms, ns_to_s, Nanos, SliceGrant, SECTOR_BYTES};
use serde::Serialize;
use std::collections::BTreeMap;

/// A latency histogram in nanoseconds (1 µs .. 1 h, 3 significant digits).
#[derive(Clone, Debug)]
pub struct Latency(Histogram<u64>);

impl Default for Latency {
    fn default() -> Self {
        Latency(Histogram::new_with_bounds(1_000, 3_600_000_000_000, 3).expect("static bounds are valid"))
    }
}

impl Latency {
    /// Records a latency of `ns` (at least 1 µs).
    #[inline]
    pub fn record(&mut self, ns: Nanos) {
        self.0.saturating_record(ns.max(1_000));
    }
    /// Adds the samples of `other`.
    pub fn add(&mut self, other: &Latency) {
        self.0.add(&other.0).expect("same bounds");
    }
    /// Mean, percentiles and maximum in ms.
    pub fn summary(&self) -> LatencySummary {
        let h = &self.0;
        let q = |p: f64| {
            if h.is_empty() {
                0.0
            } else {
                ns_to_ms(h.value_at_quantile(p))
            }
        };
        LatencySummary {
            mean_ms: if h.is_empty() { 0.0 } else { h.mean() / 1e6 },
            p50_ms: q(0.50),
            p95_ms: q(0.95),
            p99_ms: q(0.99),
            p999_ms: q(0.999),
            max_ms: if h.is_empty() { 0.0 } else { ns_to_ms(h.max()) },
        }
    }
}

/// A latency distribution in milliseconds.
#[derive(Clone, Debug, Default, Serialize)]
pub struct LatencySummary {
    /// Mean.
    pub mean_ms: f64,
    /// Median.
    pub p50_ms: f64,
    /// 95th percentile.
    pub p95_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// 99.9th percentile.
    pub p999_ms: f64,
    /// Largest.
    pub max_ms: f64,
}

/// Counts of an I/O stream.
#[derive(Clone, Debug, Default)]
pub struct IoCount {
    /// Reads completed.
    pub reads: u64,
    /// Writes completed.
    pub writes: u64,
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Their latencies.
    pub latency: Latency,
}

impl IoCount {
    /// Records one completed I/O.
    #[inline]
    pub fn record(&mut self, read: bool, bytes: u64, latency: Nanos) {
        if read {
            self.reads += 1;
            self.read_bytes += bytes;
        } else {
            self.writes += 1;
            self.write_bytes += bytes;
        }
        self.latency.record(latency);
    }
    /// Reads and writes.
    pub fn ops(&self) -> u64 {
        self.reads + self.writes
    }
    /// Bytes read and written.
    pub fn bytes(&self) -> u64 {
        self.read_bytes + self.write_bytes
    }
}

/// Per-job results (sysbench-style execution time = `end_s - start_s`).
#[derive(Clone, Debug, Serialize)]
pub struct JobResult {
    /// The VM it ran in.
    pub vm: String,
    /// The job's name.
    pub job: String,
    /// Its threads.
    pub threads: u32,
    /// When it started, s.
    pub start_s: f64,
    /// When its last thread finished (or the run ended), s.
    pub end_s: f64,
    /// `end_s - start_s`.
    pub exec_time_s: f64,
    /// Whether every thread finished its work.
    pub finished: bool,
    /// Reads completed.
    pub reads: u64,
    /// Writes completed.
    pub writes: u64,
    /// MB read (10^6 bytes).
    pub read_mb: f64,
    /// MB written.
    pub write_mb: f64,
    /// I/Os per second over its execution time.
    pub iops: f64,
    /// MB per second over its execution time.
    pub mb_per_s: f64,
    /// Latency of its I/Os at the guest.
    pub latency: LatencySummary,
}

impl JobResult {
    /// The result of a job from its counts and times.
    pub fn from_counts(
        vm: &str,
        job: &str,
        threads: u32,
        start: Nanos,
        end: Nanos,
        finished: bool,
        c: &IoCount,
    ) -> Self {
        let dur = ns_to_s(end.saturating_sub(start)).max(1e-9);
        JobResult {
            vm: vm.into(),
            job: job.into(),
            threads,
            start_s: ns_to_s(start),
            end_s: ns_to_s(end),
            exec_time_s: ns_to_s(end.saturating_sub(start)),
            finished,
            reads: c.reads,
            writes: c.writes,
            read_mb: c.read_bytes as f64 / 1e6,
            write_mb: c.write_bytes as f64 / 1e6,
            iops: c.ops() as f64 / dur,
            mb_per_s: c.bytes() as f64 / 1e6 / dur,
            latency: c.latency.summary(),
        }
    }
}

/// Per-VM results: the VM's application I/O over its active period, and what
/// the host saw of it.
#[derive(Clone, Debug, Serialize)]
pub struct VmResult {
    /// The VM's name.
    pub vm: String,
    /// Its weight at the host.
    pub weight: u32,
    /// Seconds from its first job's start to its last job's end.
    pub active_s: f64,
    /// Reads its applications completed.
    pub reads: u64,
    /// Writes its applications completed.
    pub writes: u64,
    /// MB read and written (10^6 bytes).
    pub mb: f64,
    /// I/Os per second over `active_s`.
    pub iops: f64,
    /// MB per second over `active_s`.
    pub mb_per_s: f64,
    /// Latency of its applications' I/Os.
    pub latency: LatencySummary,
    /// Requests the host dispatched for this VM (data, journal and flushes).
    pub host_requests: u64,
    /// MB of those requests.
    pub host_mb: f64,
    /// Device time spent on this VM's requests, seconds.
    pub disk_time_s: f64,
    /// The cost of address reshaping, for a VM with `reshape`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reshape: Option<ReshapeResult>,
}

/// What address reshaping (paper 001) cost on a VM's host path: the
/// reshaper's counters and its remap tables at the end. In the JSON result
/// (`vms[].reshape`, `reshape`) the counters are bytes, with the bytes it
/// wrote to the image besides the guest's data, by purpose, and the ratios.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReshapeResult {
    /// The reshaper's counters (sectors and bytes, as it keeps them).
    pub stats: hvio_reshape::Stats,
    /// Extents in the remap tables at the end.
    pub table_extents: u64,
    /// Memory of the remap tables and their reverse maps at the end.
    pub table_bytes: u64,
}

impl ReshapeResult {
    /// The sum of several VMs' costs, its ratios over the sums.
    pub fn total<'a>(all: impl IntoIterator<Item = &'a ReshapeResult>) -> Option<ReshapeResult> {
        let mut t: Option<ReshapeResult> = None;
        for r in all {
            let s = t.get_or_insert_with(ReshapeResult::default);
            s.stats += &r.stats;
            s.table_extents += r.table_extents;
            s.table_bytes += r.table_bytes;
        }
        t
    }

    /// Guest data written (both regions), bytes.
    pub fn guest_write_bytes(&self) -> u64 {
        (self.stats.guest_write_sectors[0] + self.stats.guest_write_sectors[1]) * SECTOR_BYTES
    }

    /// Of it, to the metadata region (writes the guest flagged as metadata).
    pub fn guest_meta_write_bytes(&self) -> u64 {
        self.stats.guest_write_sectors[0] * SECTOR_BYTES
    }

    /// Bytes the cleaner copied to its frontier.
    pub fn clean_write_bytes(&self) -> u64 {
        self.stats.clean_write_sectors * SECTOR_BYTES
    }

    /// Everything written to the image: guest data, cleaning copies, log, checkpoints.
    pub fn image_write_bytes(&self) -> u64 {
        self.guest_write_bytes() + self.clean_write_bytes() + self.stats.log_bytes + self.stats.checkpoint_bytes
    }

    /// Host-side write amplification: image bytes written / guest bytes written (0 when the guest wrote nothing).
    pub fn write_amplification(&self) -> f64 {
        self.stats.write_amplification()
    }

    /// Remap table memory per GiB the guest wrote (0 when the guest wrote nothing).
    pub fn table_bytes_per_gib_written(&self) -> f64 {
        let guest = self.guest_write_bytes() as f64;
        if guest > 0.0 {
            self.table_bytes as f64 / (guest / (1u64 << 30) as f64)
        } else {
            0.0
        }
    }
}

impl Serialize for ReshapeResult {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let s = &self.stats;
        let mut m = ser.serialize_struct("ReshapeResult", 17)?;
        m.serialize_field("guest_write_bytes", &self.guest_write_bytes())?;
        m.serialize_field("guest_meta_write_bytes", &self.guest_meta_write_bytes())?;
        m.serialize_field("image_write_bytes", &self.image_write_bytes())?;
        m.serialize_field("write_amplification", &self.write_amplification())?;
        m.serialize_field("guest_read_bytes", &(s.guest_read_sectors * SECTOR_BYTES))?;
        // The host reads guest reads took (a read is split across the extents it touches).
        m.serialize_field("guest_read_requests", &s.guest_read_ios)?;
        m.serialize_field("clean_read_bytes", &(s.clean_read_sectors * SECTOR_BYTES))?;
        m.serialize_field("clean_write_bytes", &self.clean_write_bytes())?;
        m.serialize_field("segments_cleaned", &s.segments_cleaned)?;
        m.serialize_field("log_bytes", &s.log_bytes)?;
        m.serialize_field("commits", &s.commits)?;
        m.serialize_field("checkpoint_bytes", &s.checkpoint_bytes)?;
        m.serialize_field("checkpoints", &s.checkpoints)?;
        // Cache flushes before commits.
        m.serialize_field("flushes", &s.flushes)?;
        m.serialize_field("table_extents", &self.table_extents)?;
        m.serialize_field("table_bytes", &self.table_bytes)?;
        m.serialize_field("table_bytes_per_gib_written", &self.table_bytes_per_gib_written())?;
        m.end()
    }
}

/// Seek distances between consecutive host dispatches, in paper 000 Table 4's buckets.
///
/// The distance is the one blktrace's analysis tool `btt` reports for
/// consecutive dispatches (`seek_dist` in btt's `seek.c`, its default,
/// non-absolute mode), since paper 000 measured its seek distances with
/// blktrace (§2.1): zero when the new request overlaps or touches the
/// previous one's sectors at either end (so a run served downwards, each
/// request ending where the previous one began, counts as zero seeks, as
/// one served upwards does); otherwise forward from the previous end, or
/// backward from the previous start. `zero_head` counts the stricter
/// measure of the head's own travel, start − previous end = 0.
///
/// `zero_bound` is the most zero seeks (btt's measure) that *any* order of
/// the same dispatched requests could have had, whatever the scheduler and
/// however long it waited: see [`LocalityBound`].
#[derive(Clone, Debug, Default, Serialize)]
pub struct SeekDistribution {
    /// Bucket bound: the (largest) VM image size in sectors.
    pub image_sectors: u64,
    /// Distances recorded.
    pub total: u64,
    /// Zero distances (btt's measure).
    pub zero: u64,
    /// Non-zero, within ± the image size.
    pub within_image: u64,
    /// Beyond ± the image size.
    pub beyond_image: u64,
    /// `zero` / `total`.
    pub zero_frac: f64,
    /// Dispatches that started exactly where the previous one ended (no
    /// overlap or backward adjacency counted), and their share.
    pub zero_head: u64,
    /// `zero_head` / `total`.
    pub zero_head_frac: f64,
    /// The most zero distances any order of these dispatches could give
    /// ([`LocalityBound`]), and its share of `total`; `None` unless asked
    /// for (`[output] locality_bound = true`).
    pub zero_bound: Option<u64>,
    /// `zero_bound` / `total`.
    pub zero_bound_frac: Option<f64>,
    /// Zero or within ± the image size (paper 000 Table 4's second row).
    pub within_image_frac: f64,
    /// `beyond_image` / `total`.
    pub beyond_image_frac: f64,
    /// Counts by ⌈log2 |distance|⌉ (index 0 = zero distance), signed: backward then forward.
    pub log2_backward: Vec<u64>,
    /// Forward counts by ⌈log2 distance⌉.
    pub log2_forward: Vec<u64>,
    /// Start and end of the previous dispatched request.
    #[serde(skip)]
    last: Option<(u64, u64)>,
    #[serde(skip)]
    bound: Option<LocalityBound>,
}

impl SeekDistribution {
    /// An empty distribution with buckets bounded by `image_sectors`.
    pub fn new(image_sectors: u64) -> Self {
        SeekDistribution {
            image_sectors,
            log2_backward: vec![0; 65],
            log2_forward: vec![0; 65],
            ..Default::default()
        }
    }

    /// Also compute [`SeekDistribution::zero_bound`] when `on` (memory per
    /// group of touching requests; see [`LocalityBound`]).
    pub fn with_locality_bound(mut self, on: bool) -> Self {
        self.bound = on.then(LocalityBound::default);
        self
    }
    /// A request went to the device: record its distance from where the
    /// previous one ended (flushes have no position and are skipped).
    #[inline]
    pub fn dispatched(&mut self, rq: &hvio_core::Request) {
        if rq.op == hvio_core::Op::Flush {
            return;
        }
        let (start, end) = (rq.sector, rq.end());
        if let Some(b) = &mut self.bound {
            b.add(start, end);
        }
        if let Some(last) = self.last {
            if start == last.1 {
                self.zero_head += 1;
            }
            self.record(btt_distance(last, (start, end)));
        }
        self.last = Some((start, end));
    }

    /// Records one distance (sectors, signed).
    #[inline]
    pub fn record(&mut self, distance: i64) {
        self.total += 1;
        let a = distance.unsigned_abs();
        if a == 0 {
            self.zero += 1;
        } else if a <= self.image_sectors {
            self.within_image += 1;
        } else {
            self.beyond_image += 1;
        }
        let b = (64 - a.leading_zeros()) as usize;
        if distance < 0 {
            self.log2_backward[b] += 1;
        } else {
            self.log2_forward[b] += 1;
        }
    }
    /// Computes the shares.
    pub fn finish(&mut self) {
        let t = self.total.max(1) as f64;
        self.zero_frac = self.zero as f64 / t;
        self.zero_head_frac = self.zero_head as f64 / t;
        self.zero_bound = self.bound.as_ref().map(LocalityBound::max_zero);
        self.zero_bound_frac = self.zero_bound.map(|z| z as f64 / t);
        self.within_image_frac = (self.zero + self.within_image) as f64 / t;
        self.beyond_image_frac = self.beyond_image as f64 / t;
    }
}

/// The signed seek distance btt gives a request `(start, end)` after the
/// request `last` (half-open sector ranges): btt's `seek_dist`, where any
/// overlap, or a touch at either end, is no seek.
pub fn btt_distance(last: (u64, u64), (start, end): (u64, u64)) -> i64 {
    let (last_start, last_end) = last;
    let touches = |x: u64| last_start <= x && x <= last_end;
    if touches(start) || touches(end) {
        0
    } else if start > last_end {
        (start - last_end) as i64
    } else {
        start as i64 - last_start as i64
    }
}

/// An upper bound on the zero seeks of any dispatch order of a set of
/// requests: how much spatial locality there was to exploit, as distinct
/// from how much a scheduler exploited (paper 000's Table 4 question).
///
/// btt's distance is zero only between requests whose sector ranges
/// overlap or touch (closed ranges `[start, end]`). Link every such pair:
/// a dispatch sequence can have a zero distance only where two consecutive
/// requests are linked, so each connected group of `k` requests gives at
/// most `k − 1` zeros, and `n` requests in `c` groups at most `n − c`. The
/// bound is exact for a stream of contiguous requests and ignores time, so
/// it holds for a non-work-conserving scheduler that waits as long as it
/// likes. It is computed over the requests as the device saw them (after
/// any merging), so a scheduler that merges changes its own set.
///
/// Requests linked by a chain of overlaps cover one unbroken range, so the
/// groups are the disjoint unions of the ranges, kept merged in a map from
/// start to end: memory grows with the number of groups, not requests.
#[derive(Clone, Debug, Default)]
pub struct LocalityBound {
    requests: u64,
    groups: BTreeMap<u64, u64>,
}

impl LocalityBound {
    /// A request covering sectors `start..end` was dispatched.
    pub fn add(&mut self, start: u64, end: u64) {
        self.requests += 1;
        let (mut lo, mut hi) = (start, end);
        // Groups are disjoint and do not touch, so those meeting
        // [start, end] are the last few that start at or before `end`.
        while let Some((&s, &e)) = self.groups.range(..=hi).next_back() {
            if e < lo {
                break;
            }
            self.groups.remove(&s);
            lo = lo.min(s);
            hi = hi.max(e);
        }
        self.groups.insert(lo, hi);
    }

    /// The most zero distances any order of the requests so far could give.
    pub fn max_zero(&self) -> u64 {
        self.requests - self.groups.len() as u64
    }
}

/// Host-level results.
#[derive(Clone, Debug, Serialize)]
pub struct HostResult {
    /// The host scheduler's name.
    pub scheduler: String,
    /// Requests the device served.
    pub requests: u64,
    /// MB the device moved.
    pub mb: f64,
    /// Seconds the device was busy.
    pub busy_s: f64,
    /// Device idle while the host scheduler held requests (anticipation, slice idling).
    pub idle_pending_s: f64,
    /// `busy_s` over the run's length.
    pub utilisation: f64,
    /// Seek distances between dispatches.
    pub seek: SeekDistribution,
    /// Mean seek time per request, ms.
    pub mean_seek_ms: f64,
    /// Mean rotational latency per request, ms.
    pub mean_rotation_ms: f64,
    /// Mean transfer time per request, ms.
    pub mean_transfer_ms: f64,
    /// Requests served from the drive's cache.
    pub cache_hits: u64,
    /// The host scheduler's counters by name.
    pub counters: Vec<(String, f64)>,
    /// The device's own counters (an SSD's FTL: page writes, garbage
    /// collection, write amplification).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub device: Vec<(String, f64)>,
}

/// Per-VM throughput over time (paper 000 Fig. 7).
#[derive(Clone, Debug, Default, Serialize)]
pub struct TimeSeries {
    /// Bucket length, s.
    pub interval_s: f64,
    /// VM names, in the order of the other fields' rows.
    pub vms: Vec<String>,
    /// `iops[vm][bucket]`, completions per second at the guest.
    pub iops: Vec<Vec<f64>>,
    /// `mb_per_s[vm][bucket]`.
    pub mb_per_s: Vec<Vec<f64>>,
    /// Host time slices by the bucket they began in (paper 000's per-VM
    /// slice lengths over time, §4.2 and Fig. 7): `slices[vm][bucket]`
    /// how many, `slice_ms` their mean granted length and `slice_used_ms`
    /// the mean time the VM held the disk in them (0 where none began).
    /// Empty when the host scheduler has no slices (see
    /// `Scheduler::take_slices`; Pregather, CFQ/Blkio, BFQ and iShare report
    /// them, docs/schedulers.md "Slices over time").
    pub slices: Vec<Vec<f64>>,
    /// Mean granted slice length per bucket, ms.
    pub slice_ms: Vec<Vec<f64>>,
    /// Mean time held in those slices, ms.
    pub slice_used_ms: Vec<Vec<f64>>,
}

/// The host scheduler's time slices, gathered as they end
/// (`Scheduler::take_slices`) into per-VM buckets by the time they began.
/// Stream `i` is VM `i`; a slice of a stream that is no VM (Pregather's
/// shared async queue) is not counted.
#[derive(Clone, Debug)]
pub struct SliceSeries {
    interval: Nanos,
    n_vms: usize,
    /// The scheduler reported a slice: the series then carries them.
    seen: bool,
    /// Per VM, per bucket: slices begun, their granted and used lengths.
    vms: Vec<Vec<(u64, Nanos, Nanos)>>,
}

impl SliceSeries {
    /// Buckets of `interval` for `n_vms` VMs (streams `0..n_vms`).
    pub fn new(interval: Nanos, n_vms: usize) -> Self {
        SliceSeries {
            interval: interval.max(1),
            n_vms,
            seen: false,
            vms: Vec::new(),
        }
    }

    /// Take the slices `sched` has ended since the last call.
    #[inline]
    pub fn take_from(&mut self, driver: &mut hvio_sched::Driver) {
        driver.take_slices_with(|g| self.record(g));
    }

    /// Records one granted slice.
    pub fn record(&mut self, g: &SliceGrant) {
        self.seen = true;
        let vm = g.stream as usize;
        if vm >= self.n_vms {
            return;
        }
        if self.vms.len() <= vm {
            self.vms.resize(vm + 1, Vec::new());
        }
        let b = (g.start / self.interval) as usize;
        let row = &mut self.vms[vm];
        if row.len() <= b {
            row.resize(b + 1, (0, 0, 0));
        }
        let cell = &mut row[b];
        cell.0 += 1;
        cell.1 = cell.1.saturating_add(g.length);
        cell.2 = cell.2.saturating_add(g.used);
    }

    /// Buckets the series needs: up to the last one a slice began in or,
    /// if later, the longest of the VMs' throughput columns (`ops`).
    pub fn buckets(&self, ops: impl IntoIterator<Item = usize>) -> usize {
        self.vms.iter().map(Vec::len).chain(ops).max().unwrap_or(0)
    }

    /// Fill `series`' slice columns for its VMs over `buckets` buckets
    /// (left empty when the scheduler reported no slice).
    pub fn fill(&self, series: &mut TimeSeries, buckets: usize) {
        if !self.seen {
            return;
        }
        let cell = |vm: usize, b: usize| self.vms.get(vm).and_then(|r| r.get(b)).copied().unwrap_or((0, 0, 0));
        let mean = |sum: Nanos, n: u64| if n == 0 { 0.0 } else { ns_to_ms(sum) / n as f64 };
        let n_vms = series.vms.len();
        let column = |f: &dyn Fn((u64, Nanos, Nanos)) -> f64| -> Vec<Vec<f64>> {
            (0..n_vms)
                .map(|vm| (0..buckets).map(|b| f(cell(vm, b))).collect())
                .collect()
        };
        series.slices = column(&|c| c.0 as f64);
        series.slice_ms = column(&|c| mean(c.1, c.0));
        series.slice_used_ms = column(&|c| mean(c.2, c.0));
    }
}

/// Everything a run produced.
#[derive(Clone, Debug, Serialize)]
pub struct SimResult {
    /// The seed used.
    pub seed: u64,
    /// The host scheduler's name.
    pub scheduler: String,
    /// Simulated time at the end, s.
    pub sim_time_s: f64,
    /// The run hit `max_time_s` before every job finished.
    pub truncated: bool,
    /// Events processed.
    pub events: u64,
    /// Most requests in flight at once anywhere in the system (memory follows this, not run length).
    pub max_outstanding: u64,
    /// MB per second over all VMs.
    pub total_mb_per_s: f64,
    /// Per-VM results.
    pub vms: Vec<VmResult>,
    /// Per-job results.
    pub jobs: Vec<JobResult>,
    /// The host's results.
    pub host: HostResult,
    /// Throughput and slices over time.
    pub series: TimeSeries,
    /// The workload's phases (jobs with a `phase`), in order; absent without.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<PhaseResult>,
    /// Every scheduler switch a `[[phase]]` plan made; absent without.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub switches: Vec<SwitchResult>,
    /// Address reshaping's cost over every VM with `reshape`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reshape: Option<ReshapeResult>,
    /// The rounds of a workload-dependent preconditioning
    /// (`[disk] precondition.workload`) before the measured run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub precondition: Option<PreconditionRounds>,
}

/// What a workload-dependent preconditioning did: its criterion, whether
/// the rounds reached it before the cap, and each round's measures.
#[derive(Clone, Debug, Serialize)]
pub struct PreconditionRounds {
    /// Rounds in the measurement window.
    pub window: usize,
    /// The round cap.
    pub max_rounds: usize,
    /// Largest range over the window, a fraction of its average.
    pub excursion: f64,
    /// Largest change of the linear fit across the window, a fraction of the average.
    pub slope: f64,
    /// A reshaped image between rounds: `kept` or `fresh`.
    pub reshaped_image: &'static str,
    /// Whether the last `window` rounds met the criterion (false: the cap was reached).
    pub settled: bool,
    /// Every round, in order.
    pub rounds: Vec<PreconditionRound>,
}

/// One round of a workload-dependent preconditioning.
#[derive(Clone, Debug, Serialize)]
pub struct PreconditionRound {
    /// MB per second over all VMs, as the run's `total_mb_per_s`.
    pub mb_per_s: f64,
    /// The device's write amplification in the round.
    pub device_write_amplification: f64,
    /// Reshaping's write amplification in the round (over every VM with `reshape`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_write_amplification: Option<f64>,
}

/// One phase of a run: when it began (the last job of the phase before
/// finished) and ended (its own last job finished), and the pair the plan
/// gave it.
#[derive(Clone, Debug, Serialize)]
pub struct PhaseResult {
    /// The phase's name (its jobs' `phase`).
    pub name: String,
    /// When its jobs could start: the run's start, or the end of the phase before.
    pub start_s: f64,
    /// When its last job finished (the run's end if cut short).
    pub end_s: f64,
    /// `end_s - start_s`.
    pub duration_s: f64,
    /// Every job of the phase finished (not cut short by `max_time_s`).
    pub finished: bool,
    /// The host scheduler the plan runs in the phase (switched to at its start).
    pub host: String,
    /// Each VM's guest scheduler in the phase, in VM order.
    pub guests: Vec<String>,
}

/// One finished scheduler switch (host or one VM's guest), from the driver's report.
#[derive(Clone, Debug, Serialize)]
pub struct SwitchResult {
    /// `host`, or the VM whose guest scheduler switched.
    pub at: String,
    /// The scheduler switched from.
    pub from: String,
    /// The scheduler switched to.
    pub to: String,
    /// `drain`, `freeze` or `migrate` (as applied: see `hvio_sched::SwitchReport`).
    pub policy: String,
    /// When the plan asked for the switch.
    pub requested_s: f64,
    /// When the new scheduler took over.
    pub swapped_s: f64,
    /// The time in between: the old scheduler's requests drained (or, with
    /// `freeze`, served while arrivals were held).
    pub switch_ms: f64,
    /// Requests taken from the old scheduler's queue (`drain`, `migrate`).
    pub handed_over: usize,
    /// Arrivals that bypassed both schedulers, served in arrival order (`drain`).
    pub bypassed: usize,
    /// Arrivals held until the swap (`freeze`).
    pub held: usize,
}

impl SwitchResult {
    /// The driver's report of a switch of `at` (`host` or a VM's name).
    pub fn from_report(at: &str, r: &hvio_sched::SwitchReport) -> SwitchResult {
        SwitchResult {
            at: at.to_string(),
            from: r.from.to_string(),
            to: r.to.to_string(),
            policy: r.policy.as_str().to_string(),
            requested_s: ns_to_s(r.requested),
            swapped_s: ns_to_s(r.swapped),
            switch_ms: r.drain_time() as f64 / 1e6,
            handed_over: r.handed_over,
            bypassed: r.bypassed,
            held: r.held,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hvio_core::{Op, Request};

    fn rq(sector: u64, sectors: u32) -> Request {
        Request::new(0, 0, Op::Write, sector, sectors, 0)
    }

    #[test]
    fn btt_distance_is_btt_seek_dist() {
        let last = (100, 108);
        // Contiguous forward, and a run served downwards (the new request
        // ends where the last one began): no seek for btt.
        assert_eq!(btt_distance(last, (108, 116)), 0);
        assert_eq!(btt_distance(last, (92, 100)), 0);
        // Overlap at either end, and containment.
        assert_eq!(btt_distance(last, (104, 112)), 0);
        assert_eq!(btt_distance(last, (96, 104)), 0);
        assert_eq!(btt_distance(last, (101, 107)), 0);
        // Forward from the last end, backward from the last start.
        assert_eq!(btt_distance(last, (120, 128)), 12);
        assert_eq!(btt_distance(last, (50, 58)), -50);
        assert_eq!(btt_distance(last, (91, 99)), -9);
    }

    #[test]
    fn zero_counts_btt_and_head_measures_apart() {
        let mut s = SeekDistribution::new(1 << 20).with_locality_bound(true);
        for (sector, n) in [(100, 8), (108, 8), (100, 8), (92, 8), (500, 8)] {
            s.dispatched(&rq(sector, n));
        }
        s.finish();
        assert_eq!(s.total, 4);
        assert_eq!(s.zero, 3, "one forward and two backward-adjacent requests");
        assert_eq!(s.zero_head, 1, "only 108 starts where the last one ended");
        assert_eq!(s.within_image, 1);
        assert!((s.zero_frac - 0.75).abs() < 1e-12 && (s.zero_head_frac - 0.25).abs() < 1e-12);
        // {92..116} is one group of four, 500 a group alone: 5 − 2 = 3,
        // which this order reached.
        assert_eq!(s.zero_bound, Some(3));
        // Not asked for: not computed.
        let mut plain = SeekDistribution::new(1 << 20);
        plain.dispatched(&rq(0, 8));
        plain.finish();
        assert_eq!((plain.zero_bound, plain.zero_bound_frac), (None, None));
    }

    #[test]
    fn locality_bound_counts_groups_of_linked_ranges() {
        let mut b = LocalityBound::default();
        // Three separate requests: no order has a zero distance.
        for s in [0, 100, 300] {
            b.add(s, s + 8);
        }
        assert_eq!(b.max_zero(), 0);
        // 108..116 touches 100..108; 92..100 touches it from below.
        b.add(108, 116);
        b.add(92, 100);
        assert_eq!(b.max_zero(), 2);
        // One request spanning 8..300 links 0..8, the 92..116 group and
        // 300..308 into one group of six.
        b.add(8, 300);
        assert_eq!(b.max_zero(), 5);
        // A repeat of the same range overlaps it: one more.
        b.add(8, 300);
        assert_eq!(b.max_zero(), 6);
        // A gap of one sector is not a touch.
        b.add(309, 317);
        assert_eq!(b.max_zero(), 6);
    }

    #[test]
    fn a_shuffled_stream_can_still_be_served_in_order() {
        // 64 contiguous requests dispatched in a scrambled order: the
        // order got few zeros, the bound is every one of them.
        let mut s = SeekDistribution::new(1 << 20).with_locality_bound(true);
        for i in 0..64u64 {
            s.dispatched(&rq(((i * 37) % 64) * 8, 8));
        }
        s.finish();
        assert_eq!(s.zero_bound, Some(63));
        assert!(s.zero < 10, "{}", s.zero);
        assert_eq!(s.zero_bound_frac, Some(1.0));
    }

    #[test]
    fn slice_series_buckets_slices_by_their_start() {
        let sec = 1_000_000_000;
        let mut ss = SliceSeries::new(sec, 2);
        let g = |stream, start, length, used| SliceGrant {
            stream,
            start,
            length,
            used,
        };
        ss.record(&g(0, 100, 200_000_000, 150_000_000));
        ss.record(&g(0, sec - 1, 400_000_000, 50_000_000));
        ss.record(&g(1, 2 * sec, 100_000_000, 100_000_000));
        // Pregather's shared async queue: no VM, not counted.
        ss.record(&g(u32::MAX as _, 0, 40_000_000, 40_000_000));
        assert_eq!(ss.buckets([]), 3);
        assert_eq!(ss.buckets([5]), 5);
        let mut t = TimeSeries {
            vms: vec!["a".into(), "b".into()],
            ..Default::default()
        };
        ss.fill(&mut t, 4);
        assert_eq!(t.slices, vec![vec![2.0, 0.0, 0.0, 0.0], vec![0.0, 0.0, 1.0, 0.0]]);
        assert_eq!(t.slice_ms[0][0], 300.0);
        assert_eq!(t.slice_used_ms[0][0], 100.0);
        assert_eq!(t.slice_ms[1][2], 100.0);
        // Nothing reported: the columns stay empty.
        let mut t = TimeSeries::default();
        SliceSeries::new(sec, 2).fill(&mut t, 4);
        assert!(t.slices.is_empty() && t.slice_ms.is_empty());
    }
}
