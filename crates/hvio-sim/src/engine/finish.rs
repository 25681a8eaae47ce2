//! The end of a run: the result tables.

use super::*;

impl Engine {
    pub(crate) fn finish(mut self, truncated: bool) -> Result<SimResult> {
        let now = self.now;
        self.slices.take_from(self.host.as_mut());
        if let Some(w) = self.records.take() {
            w.finish()?;
        }
        if let Some(s) = self.idle_since {
            self.idle_pending += now - s;
        }
        self.seek.finish();
        let mut jobs = Vec::new();
        let mut vms = Vec::new();
        let (mut first, mut last) = (Nanos::MAX, 0);
        let mut total_bytes = 0u64;
        for (vm, &vc_weight) in self.vms.iter().zip(&self.host_weights) {
            let (mut vs, mut ve) = (Nanos::MAX, 0);
            // A VM's application I/O is the sum of its jobs' (one histogram record per request).
            let mut counts = IoCount::default();
            for j in &vm.jobs {
                counts.reads += j.counts.reads;
                counts.writes += j.counts.writes;
                counts.read_bytes += j.counts.read_bytes;
                counts.write_bytes += j.counts.write_bytes;
                counts.latency.add(&j.counts.latency);
                let end = j.end.unwrap_or(now);
                vs = vs.min(j.start);
                ve = ve.max(end);
                jobs.push(JobResult::from_counts(
                    &vm.layout.name,
                    &j.job.name,
                    j.job.numjobs,
                    j.start,
                    end,
                    j.end.is_some(),
                    &j.counts,
                ));
            }
            if vm.jobs.is_empty() {
                vs = 0;
                ve = 0;
            }
            first = first.min(vs);
            last = last.max(ve);
            total_bytes += counts.bytes();
            let dur = ns_to_s(ve.saturating_sub(vs)).max(1e-9);
            vms.push(VmResult {
                vm: vm.layout.name.clone(),
                weight: vc_weight,
                active_s: ns_to_s(ve.saturating_sub(vs)),
                reads: counts.reads,
                writes: counts.writes,
                mb: counts.bytes() as f64 / 1e6,
                iops: counts.ops() as f64 / dur,
                mb_per_s: counts.bytes() as f64 / 1e6 / dur,
                latency: counts.latency.summary(),
                host_requests: vm.host_requests,
                host_mb: vm.host_bytes as f64 / 1e6,
                disk_time_s: ns_to_s(vm.disk_time),
            });
        }
        let span = ns_to_s(last.saturating_sub(first.min(last))).max(1e-9);
        let interval_s = ns_to_s(self.interval);
        let buckets = self.slices.buckets(self.vms.iter().map(|v| v.series_ops.len()));
        let mut series = TimeSeries {
            interval_s,
            vms: self.vms.iter().map(|v| v.layout.name.clone()).collect(),
            iops: self
                .vms
                .iter()
                .map(|v| {
                    (0..buckets)
                        .map(|b| *v.series_ops.get(b).unwrap_or(&0) as f64 / interval_s)
                        .collect()
                })
                .collect(),
            mb_per_s: self
                .vms
                .iter()
                .map(|v| {
                    (0..buckets)
                        .map(|b| *v.series_bytes.get(b).unwrap_or(&0) as f64 / 1e6 / interval_s)
                        .collect()
                })
                .collect(),
            slices: Vec::new(),
            slice_ms: Vec::new(),
            slice_used_ms: Vec::new(),
        };
        self.slices.fill(&mut series, buckets);
        let n = self.host_requests.max(1) as f64;
        let host = HostResult {
            scheduler: self.host.name().to_string(),
            requests: self.host_requests,
            mb: self.host_bytes as f64 / 1e6,
            busy_s: ns_to_s(self.busy),
            idle_pending_s: ns_to_s(self.idle_pending),
            utilisation: ns_to_s(self.busy) / ns_to_s(now).max(1e-9),
            seek: self.seek.clone(),
            mean_seek_ms: ns_to_ms(self.sum_seek) / n,
            mean_rotation_ms: ns_to_ms(self.sum_rotation) / n,
            mean_transfer_ms: ns_to_ms(self.sum_transfer) / n,
            cache_hits: self.cache_hits,
            counters: {
                let mut c = self.host.counters();
                if self.blktap.is_some() {
                    c.push(("blktap_io_merges".into(), self.io_merges as f64));
                    c.push(("blktap_elevator_merges".into(), self.elevator_merges as f64));
                    let mut q = self.seek_queued.clone();
                    q.finish();
                    c.push(("blktap_queued_distances".into(), q.total as f64));
                    c.push(("blktap_queued_zero_frac".into(), q.zero_frac));
                    c.push(("blktap_queued_within_image_frac".into(), q.within_image_frac));
                }
                c
            },
        };
        Ok(SimResult {
            seed: self.seed,
            scheduler: host.scheduler.clone(),
            sim_time_s: ns_to_s(now),
            truncated,
            events: self.events,
            max_outstanding: self.slots.len() as u64,
            total_mb_per_s: total_bytes as f64 / 1e6 / span,
            vms,
            jobs,
            host,
            series,
        })
    }
}
