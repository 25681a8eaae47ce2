//! The host scheduler: built from the config, and driven while the device accepts.

use super::*;

/// The host scheduler of `cfg`: one stream per VM, with its weight, its
/// image's span as the region, and its scheduler attributes.
pub(crate) fn build_host_scheduler(
    cfg: &Config,
    layouts: &[VmLayout],
    info: &DeviceInfo,
) -> Result<Box<dyn Scheduler>> {
    let streams: Vec<StreamInfo> = cfg
        .vms
        .iter()
        .zip(layouts)
        .enumerate()
        .map(|(i, (vc, l))| {
            let (start, len) = l.span();
            let mut s = StreamInfo::new(i as StreamId, vc.name.clone())
                .with_weight(vc.weight)
                .with_region(start, len);
            s.attrs = vc.attrs.clone();
            s
        })
        .collect();
    Ok(hvio_sched::build(
        &cfg.host.scheduler,
        &cfg.host.params,
        &SchedContext {
            streams,
            device: info.clone(),
        },
    )?)
}

impl Engine {
    /// Dispatch from the host scheduler while the device accepts.
    pub(crate) fn host_kick(&mut self) {
        self.slices.take_from(self.host.as_mut());
        let now = self.now;
        while self.device.can_accept() {
            match self.host.dispatch(now) {
                Dispatch::Request(rq) => {
                    self.seek.dispatched(&rq);
                    self.slots[(rq.id & SLOT_MASK) as usize].host_dispatch = now;
                    self.device.submit(rq, now);
                    self.schedule_device();
                }
                Dispatch::WaitUntil(t) => {
                    debug_assert!(t > now, "host scheduler asked to wait for the past");
                    let t = t.max(now + 1);
                    if self.host_timer_at != Some(t) {
                        self.host_timer_at = Some(t);
                        self.push(t, Ev::HostTimer);
                    }
                    return;
                }
                Dispatch::Empty => return,
            }
        }
    }
}
