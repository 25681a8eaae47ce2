//! Per-VM statistics kept by the scheduling core, rendered as Prometheus
//! text (`/metrics`) and as JSON (`/vms`).

use crate::io::IoKind;
use hdrhistogram::Histogram;
use hvio_core::{Nanos, NS_PER_S};
use serde::Serialize;
use std::fmt::Write;

/// Operation classes counted separately.
pub const OPS: [&str; 4] = ["read", "write", "flush", "discard"];

fn op_index(kind: IoKind) -> usize {
    match kind {
        IoKind::Read => 0,
        IoKind::Write => 1,
        IoKind::Flush => 2,
        IoKind::Trim | IoKind::WriteZeroes { .. } => 3,
    }
}

/// Latency bucket bounds of the Prometheus histograms, in seconds.
const BUCKETS_S: [f64; 16] = [
    25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1.0, 2.5,
];

/// One operation's counts.
#[derive(Clone)]
pub struct OpStats {
    /// Requests completed.
    pub count: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// Requests that failed.
    pub errors: u64,
    /// Sum of latencies, ns.
    pub lat_sum_ns: u64,
    /// Latency (arrival to completion) in microseconds.
    pub lat_us: Histogram<u64>,
}

impl OpStats {
    fn new() -> OpStats {
        OpStats {
            count: 0,
            bytes: 0,
            errors: 0,
            lat_sum_ns: 0,
            lat_us: Histogram::new_with_bounds(1, 3_600_000_000, 2).expect("valid histogram bounds"),
        }
    }
}

/// One VM's counters.
#[derive(Clone)]
pub struct VmStats {
    /// Read, write, flush and discard counts.
    pub ops: [OpStats; 4],
    /// Requests waiting in the scheduler.
    pub queued: u64,
    /// Requests at the backend.
    pub inflight: u64,
    window_start: Nanos,
    window_count: u64,
    window_bytes: u64,
    /// Completions and bytes per second over the last whole second.
    pub iops: f64,
    /// Bytes per second over the last whole second.
    pub bytes_per_s: f64,
}

impl VmStats {
    /// No counts yet.
    pub fn new() -> VmStats {
        VmStats {
            ops: [OpStats::new(), OpStats::new(), OpStats::new(), OpStats::new()],
            queued: 0,
            inflight: 0,
            window_start: 0,
            window_count: 0,
            window_bytes: 0,
            iops: 0.0,
            bytes_per_s: 0.0,
        }
    }

    fn roll(&mut self, now: Nanos) {
        if now >= self.window_start + NS_PER_S {
            let secs = (now - self.window_start) / NS_PER_S;
            // Counts of the last whole second; an idle gap of more than one second reads as 0.
            if secs == 1 {
                self.iops = self.window_count as f64;
                self.bytes_per_s = self.window_bytes as f64;
            } else {
                self.iops = 0.0;
                self.bytes_per_s = 0.0;
            }
            self.window_start += secs * NS_PER_S;
            self.window_count = 0;
            self.window_bytes = 0;
        }
    }

    /// A request of `kind` and `bytes` finished at `now` after `latency`.
    pub fn complete(&mut self, kind: IoKind, bytes: u64, latency: Nanos, ok: bool, now: Nanos) {
        self.roll(now);
        let o = &mut self.ops[op_index(kind)];
        if !ok {
            o.errors += 1;
            return;
        }
        o.count += 1;
        let b = if matches!(kind, IoKind::Read | IoKind::Write) {
            bytes
        } else {
            0
        };
        o.bytes += b;
        o.lat_sum_ns += latency;
        o.lat_us.saturating_record((latency / 1000).max(1));
        self.window_count += 1;
        self.window_bytes += b;
    }

    /// Closes the one-second window if it is over at `now`.
    pub fn refresh(&mut self, now: Nanos) {
        self.roll(now);
    }
}

impl Default for VmStats {
    fn default() -> Self {
        VmStats::new()
    }
}

/// JSON view of one VM.
#[derive(Debug, Serialize)]
pub struct VmStatus {
    /// The VM's name.
    pub name: String,
    /// Its disk's size in bytes.
    pub size: u64,
    /// Its weight.
    pub weight: u32,
    /// Its scheduler attributes.
    pub attrs: std::collections::BTreeMap<String, f64>,
    /// Reads completed.
    pub reads: u64,
    /// Writes completed.
    pub writes: u64,
    /// Flushes completed.
    pub flushes: u64,
    /// Discards and write-zeroes completed.
    pub discards: u64,
    /// Requests that failed.
    pub errors: u64,
    /// Bytes read.
    pub bytes_read: u64,
    /// Bytes written.
    pub bytes_written: u64,
    /// Completions per second.
    pub iops: f64,
    /// MB per second.
    pub mb_per_s: f64,
    /// Requests waiting in the scheduler.
    pub queued: u64,
    /// Requests at the backend.
    pub inflight: u64,
    /// Median read latency, µs.
    pub read_p50_us: u64,
    /// 99th-percentile read latency, µs.
    pub read_p99_us: u64,
    /// Median write latency, µs.
    pub write_p50_us: u64,
    /// 99th-percentile write latency, µs.
    pub write_p99_us: u64,
    /// For a reshaped VM (whose counts above are the guest's requests as
    /// its exports sent them): the requests the daemon made of its image
    /// file, which the host scheduler scheduled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_file: Option<ImageFileStatus>,
}

/// A reshaped VM's image-file requests: guest data written at the append
/// points, guest reads, cleaning copies, log and checkpoint writes and
/// cache flushes (`fdatasync`).
#[derive(Debug, Serialize)]
pub struct ImageFileStatus {
    /// Reads completed (guest reads and cleaning reads).
    pub reads: u64,
    /// Writes completed (guest data, cleaning copies, log, checkpoints).
    pub writes: u64,
    /// Cache flushes completed.
    pub flushes: u64,
    /// Requests that failed.
    pub errors: u64,
    /// Bytes read.
    pub bytes_read: u64,
    /// Bytes written.
    pub bytes_written: u64,
    /// Of `bytes_written`: the guest's data.
    pub guest_data_bytes_written: u64,
    /// Of `bytes_read`: read by cleaning.
    pub cleaning_bytes_read: u64,
    /// Of `bytes_written`: copied by cleaning.
    pub cleaning_bytes_written: u64,
    /// Of `bytes_written`: log transactions.
    pub log_bytes_written: u64,
    /// Of `bytes_written`: checkpoints.
    pub checkpoint_bytes_written: u64,
}

/// JSON view of the daemon.
#[derive(Debug, Serialize)]
pub struct Status {
    /// The host scheduler.
    pub scheduler: String,
    /// Its tunables.
    pub params: std::collections::BTreeMap<String, f64>,
    /// Requests the backend takes at once.
    pub depth: usize,
    /// Requests at the backend.
    pub inflight: usize,
    /// Requests waiting in the scheduler.
    pub queued: usize,
    /// Scheduler switches so far.
    pub switches: u64,
    /// Switches by what started them: `api` (`PUT /scheduler`), `plan_time`,
    /// `plan_api` (`POST /phase`, `PUT /plan`), `online`.
    pub switches_by_reason: std::collections::BTreeMap<String, u64>,
    /// The newest finished switches, oldest first, with their costs.
    pub switch_log: Vec<crate::plan::SwitchRecord>,
    /// The switch plan, its current step and each step's switch.
    pub plan: Option<crate::plan::PlanStatus>,
    /// The online mode: its class, the last window's mix, windows by class.
    pub online: Option<crate::online::OnlineStatus>,
    /// Times a scheduler panicked and noop took over (a scheduler bug).
    pub scheduler_failures: u64,
    /// Seconds since start.
    pub uptime_s: f64,
    /// The scheduler's counters by name.
    pub counters: Vec<(String, f64)>,
    /// The engine's busy-polling (see `poll.rs`).
    pub poll: crate::poll::PollStats,
    /// Protocol rejections by reason (`faults`), zeros included.
    pub rejections: std::collections::BTreeMap<&'static str, u64>,
    /// Each VM.
    pub vms: Vec<VmStatus>,
}

/// A label value escaped for the Prometheus text format.
pub(crate) fn esc(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// Prometheus text exposition of `status` plus the histograms in `vms`.
pub fn render_prometheus(status: &Status, vms: &[VmStats], dispatched: u64, backend_errors: u64) -> String {
    let mut o = String::with_capacity(8192);
    let _ = writeln!(
        o,
        "# HELP hvio_requests_total Requests completed successfully, by VM and operation."
    );
    let _ = writeln!(o, "# TYPE hvio_requests_total counter");
    for (v, s) in status.vms.iter().zip(vms) {
        for (i, op) in OPS.iter().enumerate() {
            let _ = writeln!(
                o,
                "hvio_requests_total{{vm=\"{}\",op=\"{op}\"}} {}",
                esc(&v.name),
                s.ops[i].count
            );
        }
    }
    let _ = writeln!(
        o,
        "# HELP hvio_bytes_total Bytes read and written, by VM and operation."
    );
    let _ = writeln!(o, "# TYPE hvio_bytes_total counter");
    for (v, s) in status.vms.iter().zip(vms) {
        for (i, op) in OPS.iter().enumerate().take(2) {
            let _ = writeln!(
                o,
                "hvio_bytes_total{{vm=\"{}\",op=\"{op}\"}} {}",
                esc(&v.name),
                s.ops[i].bytes
            );
        }
    }
    let _ = writeln!(o, "# HELP hvio_errors_total Requests that failed, by VM and operation.");
    let _ = writeln!(o, "# TYPE hvio_errors_total counter");
    for (v, s) in status.vms.iter().zip(vms) {
        for (i, op) in OPS.iter().enumerate() {
            let _ = writeln!(
                o,
                "hvio_errors_total{{vm=\"{}\",op=\"{op}\"}} {}",
                esc(&v.name),
                s.ops[i].errors
            );
        }
    }
    for (name, help, f) in [
        (
            "hvio_iops",
            "Requests completed in the last whole second.",
            (|v: &VmStatus| v.iops) as fn(&VmStatus) -> f64,
        ),
        (
            "hvio_throughput_bytes_per_second",
            "Bytes moved in the last whole second.",
            |v| v.mb_per_s * 1e6,
        ),
        ("hvio_queued_requests", "Requests waiting in the host scheduler.", |v| {
            v.queued as f64
        }),
        ("hvio_inflight_requests", "Requests at the backend.", |v| {
            v.inflight as f64
        }),
        ("hvio_weight", "The VM's scheduling weight.", |v| v.weight as f64),
    ] {
        let _ = writeln!(o, "# HELP {name} {help}");
        let _ = writeln!(o, "# TYPE {name} gauge");
        for v in &status.vms {
            let _ = writeln!(o, "{name}{{vm=\"{}\"}} {}", esc(&v.name), f(v));
        }
    }
    let _ = writeln!(
        o,
        "# HELP hvio_request_latency_seconds Arrival-to-completion latency, by VM and operation."
    );
    let _ = writeln!(o, "# TYPE hvio_request_latency_seconds histogram");
    for (v, s) in status.vms.iter().zip(vms) {
        for (i, op) in OPS.iter().enumerate() {
            let st = &s.ops[i];
            for b in BUCKETS_S {
                let us = (b * 1e6) as u64;
                let c = st.lat_us.count_between(0, us);
                let _ = writeln!(
                    o,
                    "hvio_request_latency_seconds_bucket{{vm=\"{}\",op=\"{op}\",le=\"{b}\"}} {c}",
                    esc(&v.name)
                );
            }
            let _ = writeln!(
                o,
                "hvio_request_latency_seconds_bucket{{vm=\"{}\",op=\"{op}\",le=\"+Inf\"}} {}",
                esc(&v.name),
                st.count
            );
            let _ = writeln!(
                o,
                "hvio_request_latency_seconds_sum{{vm=\"{}\",op=\"{op}\"}} {}",
                esc(&v.name),
                st.lat_sum_ns as f64 / 1e9
            );
            let _ = writeln!(
                o,
                "hvio_request_latency_seconds_count{{vm=\"{}\",op=\"{op}\"}} {}",
                esc(&v.name),
                st.count
            );
        }
    }
    let _ = writeln!(
        o,
        "# HELP hvio_device_queue_depth Requests in flight at the backend (all VMs)."
    );
    let _ = writeln!(o, "# TYPE hvio_device_queue_depth gauge");
    let _ = writeln!(o, "hvio_device_queue_depth {}", status.inflight);
    let _ = writeln!(o, "# HELP hvio_device_queue_limit Configured device depth.");
    let _ = writeln!(o, "# TYPE hvio_device_queue_limit gauge");
    let _ = writeln!(o, "hvio_device_queue_limit {}", status.depth);
    let _ = writeln!(o, "# HELP hvio_dispatched_total Requests dispatched to the backend.");
    let _ = writeln!(o, "# TYPE hvio_dispatched_total counter");
    let _ = writeln!(o, "hvio_dispatched_total {dispatched}");
    let _ = writeln!(
        o,
        "# HELP hvio_backend_errors_total Requests the backend failed (EIO, ENOSPC, ...)."
    );
    let _ = writeln!(o, "# TYPE hvio_backend_errors_total counter");
    let _ = writeln!(o, "hvio_backend_errors_total {backend_errors}");
    let _ = writeln!(
        o,
        "# HELP hvio_protocol_rejections_total Client requests and handshakes the exports refused, by reason."
    );
    let _ = writeln!(o, "# TYPE hvio_protocol_rejections_total counter");
    for (reason, n) in &status.rejections {
        let _ = writeln!(o, "hvio_protocol_rejections_total{{reason=\"{reason}\"}} {n}");
    }
    let _ = writeln!(o, "# HELP hvio_scheduler_switches_total Run-time scheduler switches.");
    let _ = writeln!(o, "# TYPE hvio_scheduler_switches_total counter");
    let _ = writeln!(o, "hvio_scheduler_switches_total {}", status.switches);
    let _ = writeln!(
        o,
        "# HELP hvio_scheduler_switches_by_reason_total Run-time scheduler switches by what started them."
    );
    let _ = writeln!(o, "# TYPE hvio_scheduler_switches_by_reason_total counter");
    for (reason, n) in &status.switches_by_reason {
        let _ = writeln!(o, "hvio_scheduler_switches_by_reason_total{{reason=\"{reason}\"}} {n}");
    }
    let _ = writeln!(
        o,
        "# HELP hvio_scheduler_switch_last_seconds Time from the request to the swap of the newest switch."
    );
    let _ = writeln!(o, "# TYPE hvio_scheduler_switch_last_seconds gauge");
    let last = status.switch_log.last().map_or(0.0, |r| r.drain_us as f64 / 1e6);
    let _ = writeln!(o, "hvio_scheduler_switch_last_seconds {last}");
    if let Some(on) = &status.online {
        let _ = writeln!(
            o,
            "# HELP hvio_online_class The online mode's class whose scheduler runs (1), the others (0)."
        );
        let _ = writeln!(o, "# TYPE hvio_online_class gauge");
        for c in &on.classes {
            let v = u8::from(on.class.as_deref() == Some(c.name.as_str()));
            let _ = writeln!(o, "hvio_online_class{{class=\"{}\"}} {v}", esc(&c.name));
        }
        let _ = writeln!(
            o,
            "# HELP hvio_online_windows_total Windows of the online mode by the class they were counted as."
        );
        let _ = writeln!(o, "# TYPE hvio_online_windows_total counter");
        for (c, n) in &on.windows {
            let _ = writeln!(o, "hvio_online_windows_total{{class=\"{}\"}} {n}", esc(c));
        }
        let last = on.last_window.unwrap_or_default();
        for (name, help, v) in [
            (
                "hvio_online_window_requests",
                "Reads and writes that arrived in the last whole window.",
                last.requests as f64,
            ),
            (
                "hvio_online_window_read_share",
                "Reads / (reads + writes) in the last whole window.",
                last.read_share,
            ),
            (
                "hvio_online_window_sequential_share",
                "Share of the last whole window's requests that were sequential.",
                last.sequential,
            ),
            (
                "hvio_online_window_queue_depth",
                "Mean requests queued or in flight over the last whole window.",
                last.queue_depth,
            ),
        ] {
            let _ = writeln!(o, "# HELP {name} {help}");
            let _ = writeln!(o, "# TYPE {name} gauge");
            let _ = writeln!(o, "{name} {v}");
        }
    }
    if let Some(plan) = &status.plan {
        let _ = writeln!(
            o,
            "# HELP hvio_plan_step The plan step the daemon is on (1 for the current one)."
        );
        let _ = writeln!(o, "# TYPE hvio_plan_step gauge");
        for s in &plan.steps {
            let on = u8::from(plan.current.as_deref() == Some(s.step.name.as_str()));
            let _ = writeln!(o, "hvio_plan_step{{step=\"{}\"}} {on}", esc(&s.step.name));
        }
    }
    let _ = writeln!(
        o,
        "# HELP hvio_scheduler_failures_total Times a scheduler panicked and noop took over its requests."
    );
    let _ = writeln!(o, "# TYPE hvio_scheduler_failures_total counter");
    let _ = writeln!(o, "hvio_scheduler_failures_total {}", status.scheduler_failures);
    let p = &status.poll;
    for (name, kind, help, v) in [
        (
            "hvio_poll_max_seconds",
            "gauge",
            "Configured longest busy-poll window (0: polling off).",
            p.max_us / 1e6,
        ),
        (
            "hvio_poll_window_seconds",
            "gauge",
            "Current adaptive busy-poll window.",
            p.window_us / 1e6,
        ),
        (
            "hvio_poll_waits_total",
            "counter",
            "Times the engine had nothing to do and waited.",
            p.waits as f64,
        ),
        (
            "hvio_polls_total",
            "counter",
            "Waits that began with a busy-poll spin.",
            p.polls as f64,
        ),
        (
            "hvio_poll_hits_total",
            "counter",
            "Spins that found work before sleeping.",
            p.poll_hits as f64,
        ),
        (
            "hvio_poll_seconds_total",
            "counter",
            "CPU time spent spinning.",
            p.poll_s,
        ),
        (
            "hvio_poll_sleeps_total",
            "counter",
            "Waits that slept in the kernel.",
            p.sleeps as f64,
        ),
    ] {
        let _ = writeln!(o, "# HELP {name} {help}");
        let _ = writeln!(o, "# TYPE {name} {kind}");
        let _ = writeln!(o, "{name} {v}");
    }
    let _ = writeln!(o, "# HELP hvio_scheduler_info The active host scheduler.");
    let _ = writeln!(o, "# TYPE hvio_scheduler_info gauge");
    let _ = writeln!(o, "hvio_scheduler_info{{scheduler=\"{}\"}} 1", esc(&status.scheduler));
    // A gauge, not a counter: a switch starts the new scheduler's values from zero, and some
    // (Kyber's depths) are levels rather than counts.
    let _ = writeln!(
        o,
        "# HELP hvio_scheduler_stat The active scheduler's own statistics, by name."
    );
    let _ = writeln!(o, "# TYPE hvio_scheduler_stat gauge");
    for (k, v) in &status.counters {
        let _ = writeln!(
            o,
            "hvio_scheduler_stat{{scheduler=\"{}\",name=\"{}\"}} {v}",
            esc(&status.scheduler),
            esc(k)
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iops_window_and_histogram() {
        let mut s = VmStats::new();
        for i in 0..10 {
            s.complete(IoKind::Read, 4096, 100_000, true, i * 50_000_000);
        }
        s.complete(IoKind::Write, 4096, 2_000_000, false, 600_000_000);
        s.refresh(1_100_000_000);
        assert_eq!(s.iops, 10.0);
        assert_eq!(s.ops[0].count, 10);
        assert_eq!(s.ops[1].errors, 1);
        assert_eq!(s.ops[0].lat_us.count_between(0, 100), 10);
        s.refresh(5_000_000_000);
        assert_eq!(s.iops, 0.0);
    }
}
