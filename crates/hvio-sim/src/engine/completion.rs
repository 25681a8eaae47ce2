//! A request's completion reaching the guest, by what it was for.

use super::*;

impl Engine {
    pub(crate) fn guest_done(&mut self, slot: u32) -> Result<()> {
        let now = self.now;
        let s = self.slots[slot as usize];
        self.free.push(slot);
        let vi = s.vm as usize;
        let interval = self.interval;
        let vm = &mut self.vms[vi];
        vm.ring_used -= 1;
        vm.sched.completed(&s.guest, now);
        match s.kind {
            Kind::Journal => {}
            Kind::FsyncJournal if vm.barrier => {
                // The commit record is down: now the cache flush.
                let rq = Request::new(0, s.thread, Op::Flush, 0, 0, now).with_sync(true);
                self.submit_guest(vi, s.thread, Kind::FsyncFlush, rq, now)?;
            }
            Kind::FsyncJournal | Kind::FsyncFlush => {
                let th = &mut vm.threads[s.thread as usize];
                th.in_fsync = false;
                th.outstanding -= 1;
                self.after_thread_completion(vi, s.thread)?;
            }
            Kind::Data => {
                vm.threads[s.thread as usize].outstanding -= 1;
                vm.record_op(
                    s.thread,
                    s.guest.is_read(),
                    s.guest.bytes(),
                    now - s.issued,
                    now,
                    interval,
                );
                match vm.jobs[vm.threads[s.thread as usize].job as usize].job.inode_lock {
                    Some(how) if !s.guest.is_read() => self.release_inode_lock(vi, s.thread, s.guest.sector, how)?,
                    _ => self.after_thread_completion(vi, s.thread)?,
                }
            }
            Kind::CacheRead => {
                let run = Self::pages_of(&s.guest);
                let woken = vm.cache.as_mut().map(|c| c.read_done(run)).unwrap_or_default();
                for t in woken {
                    self.page_arrived(vi, t, now)?;
                }
            }
            Kind::CacheWrite { flusher } => {
                let run = Self::pages_of(&s.guest);
                vm.wb_inflight -= flusher as u32;
                let woken = vm.cache.as_mut().map(|c| c.write_done(run)).unwrap_or_default();
                for t in woken {
                    self.page_arrived(vi, t, now)?;
                }
                self.wake_throttled(vi)?;
                self.flusher_pump(vi)?;
            }
        }
        self.guest_kick(vi);
        Ok(())
    }
}
