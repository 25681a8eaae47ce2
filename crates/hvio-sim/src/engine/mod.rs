//! The discrete-event engine: a host with one disk and a host scheduler, VMs
//! with guest file systems, guest schedulers, a virtio ring and threads.
//!
//! Data flows one way (ARCHITECTURE.md): a thread's request → the guest
//! scheduler (streams = the VM's threads and its journal) → the virtio ring
//! (at most `virtio_depth` in flight) → `virt_latency` later, the host
//! scheduler (streams = VMs), mapped to physical sectors through the image
//! layout → the device → completion back up the same path.
//!
//! Determinism: integer nanoseconds, events ordered by (time, sequence number
//! of insertion), one seeded RNG per job (so a job's address sequence does not
//! depend on what other VMs do), no global state, no hash-order iteration.

use crate::config::{Config, VmLayout};
use crate::error::{Result, SimError};
use crate::metrics::*;
use crate::pagecache::{self, FileSpan, PageCache, Run, PAGE_SECTORS};
use crate::records::RecordWriter;
use crate::workload::{InodeLock, Job, Sharing};
use hvio_core::*;
use hvio_sched::{Driver, Next};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus as JobRng;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

mod completion;
mod device;
mod events;
mod finish;
mod guest;
mod phases;
pub(crate) mod precondition;
mod requests;
mod stage;
#[cfg(test)]
mod tests;

use crate::host::{build_host_scheduler, HostEvent, HostSide, RunTotals, VmTotals};
pub(crate) use events::*;
pub(crate) use guest::*;
pub(crate) use requests::*;
pub(crate) use stage::blktap::Blktap;
pub(crate) use stage::direct::Direct;
pub(crate) use stage::qemu::IoThreads;
pub(crate) use stage::reshape::Reshape;
pub(crate) use stage::*;

/// The VMs' host-path stages one run hands to the next (by VM; `None`
/// where a new one is built): reshaped images, for workload-dependent
/// preconditioning.
pub(crate) type Stages = Vec<Option<Box<dyn HostPath>>>;

/// One simulation run.
pub struct Engine {
    now: Nanos,
    queue: EventQueue,
    requests: Requests,
    vms: Vec<Vm>,
    /// Each VM's host-path stage and image map.
    paths: Vec<VmPath>,
    /// The image maps' extents of a request (a buffer).
    extents: Vec<Extent>,
    host: HostSide,
    /// The device's completions, a buffer kept between its events.
    completions: Vec<Completion>,
    idle_pending: Nanos,
    idle_since: Option<Nanos>,
    interval: Nanos,
    records: Option<RecordWriter>,
    events: u64,
    max_time: Nanos,
    seed: u64,
    host_weights: Vec<u32>,
    /// Whether the VMs' host path is blktap (its counters are reported).
    blktap: bool,
    /// The workload's phases and the `[[phase]]` plan, when the config has either.
    phases: Option<phases::PhaseRun>,
}

fn derive_seed(seed: u64, a: u64, b: u64) -> u64 {
    // SplitMix64 over the three parts: independent, reproducible streams.
    let mut z = seed ^ a.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ b.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Engine {
    /// Build a run of `cfg` on `device`.
    pub fn new(cfg: &Config, device: Box<dyn Device>) -> Result<Engine> {
        Engine::resuming(cfg, device, Vec::new())
    }

    /// Build a run of `cfg` on `device` whose VMs take up the host-path
    /// stages `carried` (by VM; `None`, or past its end, for a new one): a
    /// reshaped image as an earlier run of a workload-dependent
    /// preconditioning left it.
    pub(crate) fn resuming(cfg: &Config, device: Box<dyn Device>, mut carried: Stages) -> Result<Engine> {
        let plan = cfg.plan()?;
        // A plan's first step at the start sets the pair the run begins with.
        let started = phases::started(cfg, &plan);
        let original = cfg;
        let cfg = started.as_ref().unwrap_or(cfg);
        let mut phase_run = phases::PhaseRun::new(original, cfg, plan);
        let info = device.info();
        let layouts = cfg.layout(info.capacity)?;
        let host = build_host_scheduler(cfg, &layouts, &info)?;
        let mut vms = Vec::new();
        for (vi, (vc, layout)) in cfg.vms.iter().zip(layouts).enumerate() {
            // Guest file system: the journal/metadata area first, then each
            // job's files contiguously, in job order.
            let journal_sectors = vc.journal_size.sectors();
            let mut next = journal_sectors;
            let mut jobs = Vec::new();
            let mut threads = Vec::new();
            let mut streams = Vec::new();
            for (ji, job) in layout.jobs.iter().enumerate() {
                let file_sectors = job.size / SECTOR_BYTES / job.nrfiles as u64;
                let file_first = next;
                let files: Vec<(u64, u64)> = (0..job.nrfiles as u64)
                    .map(|f| (next + f * file_sectors, file_sectors))
                    .collect();
                next += file_sectors * job.nrfiles as u64;
                let mut areas: Vec<Area> = match job.sharing {
                    Sharing::Shared => vec![Area::new(files)],
                    Sharing::PerThread if job.nrfiles >= job.numjobs => (0..job.numjobs as usize)
                        .map(|t| Area::new(files.iter().skip(t).step_by(job.numjobs as usize).copied().collect()))
                        .collect(),
                    Sharing::PerThread => {
                        // Fewer files than threads: each thread an equal slice of the data set.
                        let whole = Area::new(files);
                        let per = whole.total / job.numjobs as u64;
                        (0..job.numjobs as u64).map(|t| whole.range(t * per, per)).collect()
                    }
                    Sharing::SameFile => {
                        // fio with `filename`: every thread its own cursor over
                        // the same files, from `offset_increment` × thread to the end.
                        let whole = Area::new(files);
                        let step = job.offset_increment / SECTOR_BYTES;
                        (0..job.numjobs as u64)
                            .map(|t| whole.range(t * step, whole.total - t * step))
                            .collect()
                    }
                };
                for t in 0..job.numjobs {
                    let id = threads.len() as StreamId;
                    streams.push(StreamInfo::new(id, format!("{}/{}", job.name, t)));
                    threads.push(Thread {
                        job: ji as u16,
                        area: if areas.len() == 1 { 0 } else { t as u16 },
                        outstanding: 0,
                        writes_since_fsync: 0,
                        fsync_due: false,
                        in_fsync: false,
                        done: false,
                        waiting: 0,
                        op: None,
                        throttled: false,
                        final_synced: false,
                        lock_wait: None,
                    });
                }
                // One inode lock per file, only for jobs that model it.
                let locked_files = if job.inode_lock.is_some() {
                    job.nrfiles as usize
                } else {
                    0
                };
                let phase = job.phase.as_deref().and_then(|p| phase_run.as_ref()?.index(p));
                if let (Some(p), Some(run)) = (phase, phase_run.as_mut()) {
                    run.add_job(p, vi, ji);
                }
                let plan = DrawPlan::new(job, &mut areas);
                jobs.push(JobState {
                    phase,
                    job: job.clone(),
                    plan,
                    rng: JobRng::seed_from_u64(derive_seed(cfg.seed, vi as u64 + 1, ji as u64 + 1)),
                    areas,
                    issued: 0,
                    issued_bytes: 0,
                    outstanding: 0,
                    start: job.start_ns,
                    end: None,
                    live_threads: job.numjobs,
                    counts: IoCount::default(),
                    file_first,
                    file_sectors,
                    is_dirty: false,
                    fsynced_file: 0,
                    file_dirty: if job.direct {
                        Vec::new()
                    } else {
                        vec![false; job.nrfiles as usize]
                    },
                    lock_holder: vec![None; locked_files],
                    lock_waiters: vec![VecDeque::new(); locked_files],
                });
            }
            let journal_stream = threads.len() as StreamId;
            streams.push(StreamInfo::new(journal_stream, "journal"));
            let cache = layout
                .jobs
                .iter()
                .any(|j| !j.direct)
                .then(|| PageCache::new(&vc.page_cache));
            let flusher_stream = journal_stream + 1;
            if cache.is_some() {
                streams.push(StreamInfo::new(flusher_stream, "flusher"));
            }
            let guest_info = DeviceInfo {
                capacity: layout.image_sectors,
                rotational: vc.guest_disk_rotational.unwrap_or(info.rotational),
                queue_depth: vc.virtio_depth as usize,
                seek: info.seek.clone(),
            };
            let sched = Driver::build(
                &vc.guest_scheduler,
                &vc.guest_params,
                SchedContext {
                    streams,
                    device: guest_info,
                },
            )
            .map_err(|e| guest_scheduler_error(&vc.name, &vc.guest_scheduler, e))?;
            let sched = GuestSched::new(sched, phase_run.as_ref().is_some_and(|r| r.switches_guests()));
            vms.push(Vm {
                layout,
                sched,
                ring_depth: vc.virtio_depth,
                ring_used: 0,
                latency: vc.virt_latency_us * NS_PER_US,
                vcpu_free: vec![0; vc.guest_cpu.as_ref().map_or(0, |g| g.vcpus as usize)],
                guest_request_ns: vc
                    .guest_cpu
                    .as_ref()
                    .map_or(0, |g| (g.request_us * 1e3).round() as Nanos),
                threads,
                jobs,
                journal_stream,
                journal_sectors,
                journal_cursor: 0,
                commit_every: (vc.journal_commit_s * 1e9).round() as Nanos,
                dirty: false,
                barrier: vc.barrier,
                cache,
                flusher_stream,
                wb_queue: VecDeque::new(),
                wb_inflight: 0,
                throttled: Vec::new(),
                rng: JobRng::seed_from_u64(derive_seed(cfg.seed, vi as u64 + 1, 0)),
                series_ops: Vec::new(),
                series_bytes: Vec::new(),
                // Empty: the first operation enters its bucket.
                bucket: (0, 1, 0),
            });
        }
        let image_sectors = vms.iter().map(|v| v.layout.file_sectors()).max().unwrap_or(0);
        let interval_s = cfg.output.interval_s.unwrap_or(1.0);
        // Checked by `Config::layout`.
        let records = match &cfg.output.records {
            Some(p) => Some(RecordWriter::create(&cfg.base_dir.join(p), cfg.seed)?),
            None => None,
        };
        carried.resize_with(vms.len(), || None);
        let paths = vms
            .iter()
            .zip(carried)
            .zip(&cfg.vms)
            .map(|((vm, carried), vc)| VmPath {
                stage: match (&vm.layout.reshape, &cfg.host.blktap, carried) {
                    (Some(_), _, Some(stage)) => Stage::Other(stage),
                    (Some(l), _, None) => Stage::Other(Box::new(Reshape::new(&vm.layout.name, l.clone()))),
                    (None, Some(b), _) => Stage::Other(Box::new(Blktap::new(b.clone(), vm.ring_depth))),
                    (None, None, _) => Stage::Direct(Direct),
                },
                map: vm.layout.map.clone(),
                qemu: vc.qemu_path.clone().map(IoThreads::new),
            })
            .collect();
        let mut host = HostSide::new(cfg, host, device, image_sectors);
        if cfg.host.blktap.is_some() {
            // blktap reports the bios' distances as they reach dom0.
            host.measure_queued(image_sectors);
        }
        let mut e = Engine {
            now: 0,
            queue: EventQueue::default(),
            requests: Requests::default(),
            vms,
            paths,
            extents: Vec::new(),
            host,
            completions: Vec::new(),
            idle_pending: 0,
            idle_since: None,
            interval: (interval_s * 1e9).round() as Nanos,
            records,
            events: 0,
            max_time: (cfg.max_time_s * 1e9).round() as Nanos,
            seed: cfg.seed,
            host_weights: cfg.vms.iter().map(|v| v.weight).collect(),
            blktap: cfg.host.blktap.is_some(),
            phases: phase_run,
        };
        e.start_phases();
        for vi in 0..e.vms.len() {
            for ti in 0..e.vms[vi].threads.len() {
                let job = &e.vms[vi].jobs[e.vms[vi].threads[ti].job as usize];
                if job.phase.is_some_and(|p| p > 0) {
                    // Started when the phase before ends.
                    continue;
                }
                let start = job.start;
                e.push(
                    start,
                    Ev::ThreadIssue {
                        vm: vi as u16,
                        thread: ti as u32,
                    },
                );
            }
            if e.vms[vi].commit_every > 0 && !e.vms[vi].jobs.is_empty() {
                let t = e.vms[vi].commit_every;
                e.push(t, Ev::JournalTick { vm: vi as u16 });
            }
            if let Some(c) = &e.vms[vi].cache {
                let t = c.config().writeback_period();
                e.push(t, Ev::Flusher { vm: vi as u16 });
            }
        }
        Ok(e)
    }

    #[inline]
    fn push(&mut self, t: Nanos, ev: Ev) {
        self.queue.push(t, ev);
    }

    /// Put `stage` on VM `vi`'s host path.
    #[cfg(test)]
    pub(crate) fn set_stage(&mut self, vi: usize, stage: Box<dyn HostPath>) {
        self.paths[vi].stage = Stage::Other(stage);
    }

    /// Dispatch from the host scheduler while the device accepts.
    #[inline]
    pub(crate) fn host_kick(&mut self) {
        kick_host(&mut self.host, &mut self.requests, &mut self.queue, self.now);
    }

    /// Run to the end (every job finished and every request drained) or to `max_time_s`.
    pub fn run(mut self) -> Result<SimResult> {
        let truncated = self.play()?;
        self.finish(truncated)
    }

    /// [`Engine::run`], then hand back the device and the VMs' reshaping
    /// stages (by VM, `None` for another path) for the next run on them.
    pub(crate) fn run_keeping(mut self) -> Result<(SimResult, Box<dyn Device>, Stages)> {
        let truncated = self.play()?;
        let result = self.finish(truncated)?;
        let stages = std::mem::take(&mut self.paths)
            .into_iter()
            .map(|p| match p.stage {
                Stage::Other(s) if s.reshape().is_some() => Some(s),
                _ => None,
            })
            .collect();
        let device = std::mem::replace(&mut self.host.device, Box::new(crate::testing::SimpleDisk::new(0)));
        Ok((result, device, stages))
    }

    /// Play the events to the end; whether `max_time_s` cut the run short.
    fn play(&mut self) -> Result<bool> {
        let mut truncated = false;
        while let Some((t, ev)) = self.queue.pop() {
            if t > self.max_time {
                truncated = true;
                break;
            }
            self.now = t;
            self.events += 1;

            // The three kinds that make nearly every event of a run first,
            // as compares (a jump table's one indirect branch mispredicts as
            // they alternate); the rest out of line.
            let reaches_host = match ev {
                Ev::HostArrive { slot } => {
                    self.host_arrive(slot)?;
                    true
                }
                Ev::GuestDone { slot } => {
                    self.guest_done(slot)?;
                    false
                }
                Ev::Device => {
                    self.host.device_due(t);
                    self.device_advance()?;
                    true
                }
                _ => {
                    self.other_event(t, ev)?;
                    !ev.guest_only()
                }
            };
            // Device idle while the host holds requests: anticipation /
            // idling. Only an event that reaches the host can change it (a
            // guest's events end in the guest's ring: the host hears of its
            // requests at `HostArrive`).
            if reaches_host {
                self.track_idle(t);
            }
        }
        Ok(truncated)
    }

    /// The events other than a request's arrival at the host, its device
    /// completion and its completion at the guest.
    #[inline(never)]
    fn other_event(&mut self, t: Nanos, ev: Ev) -> Result<()> {
        match ev {
            Ev::ThreadIssue { vm, thread } => {
                self.thread_fill(vm as usize, thread, t)?;
                self.guest_kick(vm as usize);
            }
            Ev::HostArrive { .. } | Ev::GuestDone { .. } | Ev::Device => unreachable!("`play` runs these"),
            Ev::HostTimer => {
                self.host.timer_due(t);
                self.host_kick();
            }
            Ev::GuestTimer { vm } => {
                self.vms[vm as usize].sched.timer_due(t);
                self.guest_kick(vm as usize);
            }
            Ev::JournalTick { vm } => self.journal_tick(vm as usize)?,
            Ev::BufferedDone { vm, thread } => self.buffered_done(vm as usize, thread)?,
            Ev::Flusher { vm } => self.flusher_tick(vm as usize)?,
            Ev::StageWake { vm } => self.with_stage(vm as usize, |stage, cx| stage.wake(cx))?,
            Ev::QemuPass { vm } => self.qemu_pass(vm as usize)?,
            Ev::QemuSubmit { vm } => self.qemu_submit(vm as usize)?,
            Ev::PhaseJobDone { phase } => self.phase_job_done(phase as usize)?,
            Ev::PlanStep { step } => self.apply_step(step as usize)?,
        }
        Ok(())
    }

    /// After an event at `t` that reached the host: whether the device
    /// sits idle while the host scheduler holds requests, and since when.
    #[inline]
    fn track_idle(&mut self, t: Nanos) {
        let idle = self.host.device_in_flight() == 0 && self.host.driver.has_work();
        match (idle, self.idle_since) {
            (true, None) => self.idle_since = Some(t),
            (false, Some(s)) => {
                self.idle_pending += t - s;
                self.idle_since = None;
            }
            _ => {}
        }
    }
}
