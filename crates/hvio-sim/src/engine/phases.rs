//! A run's phases and its switch plan (paper 002 §IV, for any workload).
//!
//! A workload's phases are the names its jobs' `phase` keys give, in the
//! order they first appear: the jobs of one phase (in every VM) run
//! together, and the next phase's jobs start when the last of them has
//! finished, as a MapReduce job's reduces wait for its maps. A phase
//! boundary therefore falls where the run's own progress puts it, and moves
//! with the schedulers. A `[[phase]]` plan switches the host scheduler,
//! every guest's, or both when a phase starts or at a time, through the
//! scheduler driver's run-time switch; what each switch cost (the driver's
//! report) is part of the result.
//!
//! A switch asked for while an earlier one on the same scheduler is still
//! in progress (a drain outlasting a short phase) waits for it: the step is
//! tried again every [`DRAIN_POLL`], the block layer's own drain period.

use super::*;
use crate::metrics::{PhaseResult, SwitchResult};
use crate::tune::plan::{PhasePlan, Step, When};
use hvio_sched::DRAIN_POLL;

/// The phases' progress and the plan's steps during a run.
pub(crate) struct PhaseRun {
    names: Vec<String>,
    /// Per phase: its jobs as (VM, job) and how many have not finished.
    members: Vec<Vec<(usize, usize)>>,
    live: Vec<usize>,
    begin: Vec<Option<Nanos>>,
    end: Vec<Option<Nanos>>,
    /// Per phase: the (host, guests) the plan runs in it, set at its start.
    planned: Vec<Option<(String, Vec<String>)>>,
    steps: Vec<Step>,
    /// The config's host and guest schedulers with their params: a switch
    /// to the scheduler a config names takes the params it gives, a switch
    /// to any other its defaults.
    host_config: (String, ParamValues),
    guest_config: Vec<(String, ParamValues)>,
    /// The schedulers the plan has switched to so far.
    host_now: String,
    guests_now: Vec<String>,
}

/// `cfg` with the plan's first step applied, when it takes effect at the
/// start: the run begins under that pair instead of switching to it.
pub(crate) fn started(cfg: &Config, plan: &PhasePlan) -> Option<Config> {
    let step = plan.steps.first().filter(|s| s.at_start())?;
    let mut cfg = cfg.clone();
    if let Some(host) = &step.host {
        if *host != cfg.host.scheduler {
            cfg.host.scheduler = host.clone();
            cfg.host.params.clear();
        }
    }
    if let Some(guest) = &step.guest {
        for vm in &mut cfg.vms {
            if *guest != vm.guest_scheduler {
                vm.guest_scheduler = guest.clone();
                vm.guest_params.clear();
            }
        }
    }
    Some(cfg)
}

impl PhaseRun {
    /// Whether a step of the plan switches the guests' schedulers.
    pub(crate) fn switches_guests(&self) -> bool {
        self.steps.iter().any(|s| s.guest.is_some())
    }

    /// The phases of `jobs` (each VM's (job, phase) list) under `plan`, for
    /// a run of `original` started as `started`; `None` when the config has
    /// neither phases nor a plan.
    pub(crate) fn new(original: &Config, started: &Config, plan: PhasePlan) -> Option<PhaseRun> {
        let names = original.workload_phases();
        if names.is_empty() && plan.steps.is_empty() {
            return None;
        }
        Some(PhaseRun {
            members: vec![Vec::new(); names.len()],
            live: vec![0; names.len()],
            begin: vec![None; names.len()],
            end: vec![None; names.len()],
            planned: vec![None; names.len()],
            names,
            steps: plan.steps,
            host_config: (original.host.scheduler.clone(), original.host.params.clone()),
            guest_config: original
                .vms
                .iter()
                .map(|v| (v.guest_scheduler.clone(), v.guest_params.clone()))
                .collect(),
            host_now: started.host.scheduler.clone(),
            guests_now: started.vms.iter().map(|v| v.guest_scheduler.clone()).collect(),
        })
    }

    /// The index of phase `name`.
    pub(crate) fn index(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    /// Job `ji` of VM `vi` runs in phase `p`.
    pub(crate) fn add_job(&mut self, p: usize, vi: usize, ji: usize) {
        self.members[p].push((vi, ji));
        self.live[p] += 1;
    }

    /// The steps to schedule at the start: the times of steps by time (the
    /// one at the start was applied by [`started`]).
    pub(crate) fn timed_steps(&self) -> Vec<(usize, Nanos)> {
        self.steps
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.at_start())
            .filter_map(|(i, s)| match s.when {
                When::Time(t) => Some((i, t)),
                _ => None,
            })
            .collect()
    }

    fn planned_now(&self) -> (String, Vec<String>) {
        (self.host_now.clone(), self.guests_now.clone())
    }
}

impl Engine {
    /// Phase 0 starts with the run.
    pub(crate) fn start_phases(&mut self) {
        if let Some(run) = self.phases.as_mut() {
            if !run.names.is_empty() {
                run.begin[0] = Some(0);
                run.planned[0] = Some(run.planned_now());
            }
            for (i, t) in run.timed_steps() {
                self.queue.push(t, Ev::PlanStep { step: i as u16 });
            }
        }
    }

    /// A job of phase `p` finished; the last one ends the phase and starts the next.
    pub(crate) fn phase_job_done(&mut self, p: usize) -> Result<()> {
        let now = self.now;
        let Some(run) = self.phases.as_mut() else {
            return Ok(());
        };
        run.live[p] -= 1;
        if run.live[p] > 0 {
            return Ok(());
        }
        run.end[p] = Some(now);
        let next = p + 1;
        if next >= run.names.len() {
            return Ok(());
        }
        run.begin[next] = Some(now);
        let steps: Vec<usize> = (0..run.steps.len())
            .filter(|&i| run.steps[i].when == When::Workload(next))
            .collect();
        for i in steps {
            self.apply_step(i)?;
        }
        let run = self.phases.as_mut().expect("phases exist");
        run.planned[next] = Some(run.planned_now());
        let members = run.members[next].clone();
        for (vi, ji) in members {
            let vm = &mut self.vms[vi];
            let start = now + vm.jobs[ji].job.start_ns;
            vm.jobs[ji].start = start;
            let threads: Vec<u32> = (0..vm.threads.len() as u32)
                .filter(|&t| vm.threads[t as usize].job as usize == ji)
                .collect();
            for thread in threads {
                self.queue.push(start, Ev::ThreadIssue { vm: vi as u16, thread });
            }
        }
        Ok(())
    }

    /// Apply step `i` of the plan now, or retry it a drain period later if
    /// a scheduler it switches is still in an earlier switch.
    pub(crate) fn apply_step(&mut self, i: usize) -> Result<()> {
        let now = self.now;
        let Some(run) = self.phases.as_mut() else {
            return Ok(());
        };
        let step = run.steps[i].clone();
        let busy = (step.host.is_some() && self.host.driver.switching())
            || (step.guest.is_some() && self.vms.iter().any(|v| v.sched.switching()));
        if busy {
            self.queue.push(now + DRAIN_POLL, Ev::PlanStep { step: i as u16 });
            return Ok(());
        }
        let failed = |e: hvio_sched::SwitchError| SimError::Other(format!("phase {i}: the switch failed: {e}"));
        if let Some(name) = &step.host {
            let params = if *name == run.host_config.0 {
                run.host_config.1.clone()
            } else {
                ParamValues::new()
            };
            self.host
                .driver
                .switch_by_name(name, &params, step.policy, now)
                .map_err(failed)?;
            run.host_now = name.clone();
        }
        if let Some(name) = &step.guest {
            for (vi, vm) in self.vms.iter_mut().enumerate() {
                let params = if *name == run.guest_config[vi].0 {
                    run.guest_config[vi].1.clone()
                } else {
                    ParamValues::new()
                };
                vm.sched
                    .driver_mut()
                    .ok_or_else(|| {
                        SimError::Other(format!(
                            "phase {i}: VM {}'s guest scheduler cannot switch",
                            vm.layout.name
                        ))
                    })?
                    .switch_by_name(name, &params, step.policy, now)
                    .map_err(failed)?;
                run.guests_now[vi] = name.clone();
            }
        }
        self.host_kick();
        for vi in 0..self.vms.len() {
            self.guest_kick(vi);
        }
        Ok(())
    }

    /// The phases and the switches of the run, for its result.
    pub(crate) fn phase_results(&mut self) -> (Vec<PhaseResult>, Vec<SwitchResult>) {
        let now = self.now;
        let Some(run) = self.phases.as_ref() else {
            return (Vec::new(), Vec::new());
        };
        let phases = (0..run.names.len())
            .filter_map(|p| {
                let begin = run.begin[p]?;
                let end = run.end[p].unwrap_or(now);
                let (host, guests) = run.planned[p].clone().unwrap_or_default();
                Some(PhaseResult {
                    name: run.names[p].clone(),
                    start_s: ns_to_s(begin),
                    end_s: ns_to_s(end),
                    duration_s: ns_to_s(end - begin),
                    finished: run.end[p].is_some(),
                    host,
                    guests,
                })
            })
            .collect();
        let mut switches: Vec<SwitchResult> = self
            .host
            .driver
            .take_reports()
            .iter()
            .map(|r| SwitchResult::from_report("host", r))
            .collect();
        for vm in &mut self.vms {
            let name = vm.layout.name.clone();
            switches.extend(
                vm.sched
                    .driver_mut()
                    .map(|d| d.take_reports())
                    .unwrap_or_default()
                    .iter()
                    .map(|r| SwitchResult::from_report(&name, r)),
            );
        }
        // In the order they were asked for (host first, then the VMs in order).
        switches.sort_by(|a, b| a.requested_s.total_cmp(&b.requested_s));
        (phases, switches)
    }
}
