//! The end of a run: the result tables.

use super::*;

impl Engine {
    /// End-of-run accounting, as Linux's `dd_exit_sched` warns of requests
    /// left behind, but an error: after a run that was not cut short, every
    /// request issued was completed, no host-path stage holds anything, and
    /// each VM's host path was served every byte it was handed.
    fn account(&self) -> Result<()> {
        let fail = |what: String| Err(SimError::Other(format!("end of run: {what}")));
        if self.requests.live > 0 {
            return fail(format!("{} requests issued were never completed", self.requests.live));
        }
        for ((vm, path), s) in self.vms.iter().zip(&self.paths).zip(&self.host.streams) {
            let name = &vm.layout.name;
            if let Some(n) = path.qemu.as_ref().map(IoThreads::held).filter(|&n| n > 0) {
                return fail(format!("VM {name}'s QEMU threads still hold {n} requests"));
            }
            if path.stage.as_dyn().held() > 0 {
                return fail(format!(
                    "VM {name}'s host path still holds {} requests",
                    path.stage.as_dyn().held()
                ));
            }
            if s.offered != s.bytes + s.stage_completed {
                return fail(format!(
                    "VM {name}'s host path was handed {} bytes and the host served {} (and its stage completed {} of guest requests itself)",
                    s.offered, s.bytes, s.stage_completed
                ));
            }
        }
        Ok(())
    }

    pub(crate) fn finish(&mut self, truncated: bool) -> Result<SimResult> {
        let now = self.now;
        if !truncated {
            self.account()?;
        }
        self.host.slices.take_from(&mut self.host.driver);
        if let Some(w) = self.records.take() {
            w.finish()?;
        }
        if let Some(s) = self.idle_since {
            self.idle_pending += now - s;
        }
        let mut jobs = Vec::new();
        // A VM's application I/O is the sum of its jobs' (one histogram
        // record per request), from its first job's start to its last one's end.
        let mut vm_counts = Vec::with_capacity(self.vms.len());
        for vm in &self.vms {
            let (mut vs, mut ve) = (Nanos::MAX, 0);
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
                (vs, ve) = (0, 0);
            }
            vm_counts.push((vs, ve, counts));
        }
        let vms: Vec<VmTotals> = self
            .vms
            .iter()
            .zip(&self.host_weights)
            .zip(&vm_counts)
            .map(|((vm, &weight), (start, end, counts))| VmTotals {
                name: &vm.layout.name,
                weight,
                start: *start,
                end: *end,
                counts,
                series_ops: &vm.series_ops,
                series_bytes: &vm.series_bytes,
            })
            .collect();
        let mut counters = Vec::new();
        if self.blktap {
            // The stages' counters, summed over the VMs, in the first VM's order.
            let mut sums: Vec<(&'static str, f64)> = Vec::new();
            for p in &self.paths {
                for (k, v) in p.stage.as_dyn().counters() {
                    match sums.iter_mut().find(|s| s.0 == k) {
                        Some(s) => s.1 += v,
                        None => sums.push((k, v)),
                    }
                }
            }
            counters.extend(sums.into_iter().map(|(k, v)| (k.to_string(), v)));
            let mut q = self.host.seek_queued.clone().unwrap_or_default();
            q.finish();
            counters.push(("blktap_queued_distances".into(), q.total as f64));
            counters.push(("blktap_queued_zero_frac".into(), q.zero_frac));
            counters.push(("blktap_queued_within_image_frac".into(), q.within_image_frac));
        }
        if self.paths.iter().any(|p| p.qemu.is_some()) {
            // QEMU's threads' counters, summed over the VMs that have them.
            let mut sums: Vec<(&'static str, f64)> = Vec::new();
            for q in self.paths.iter().filter_map(|p| p.qemu.as_ref()) {
                for (i, (k, v)) in q.counters().into_iter().enumerate() {
                    match sums.get_mut(i) {
                        Some(s) => s.1 += v,
                        None => sums.push((k, v)),
                    }
                }
            }
            counters.extend(sums.into_iter().map(|(k, v)| (k.to_string(), v)));
        }
        let run = RunTotals {
            seed: self.seed,
            now,
            truncated,
            events: self.events,
            max_outstanding: self.requests.high_water(),
            interval: self.interval,
            idle_pending: self.idle_pending,
        };
        let interval_s = ns_to_s(self.interval);
        let mut result = self
            .host
            .run_result(run, &vms, jobs, |b| b as f64 / 1e6 / interval_s, counters);
        for (row, path) in result.vms.iter_mut().zip(&self.paths) {
            row.reshape = path.stage.as_dyn().reshape();
        }
        let reshape = ReshapeResult::total(result.vms.iter().filter_map(|v| v.reshape.as_ref()));
        let (phases, switches) = self.phase_results();
        Ok(SimResult {
            phases,
            switches,
            reshape,
            ..result
        })
    }
}
