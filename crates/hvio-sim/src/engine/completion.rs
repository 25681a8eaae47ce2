//! A request's completion reaching the guest, by what it was for.

use super::*;

impl Engine {
    pub(crate) fn guest_done(&mut self, slot: u32) -> Result<()> {
        let now = self.now;
        self.requests.release(slot);
        // The fields a thread's completion needs, read where they are: the
        // whole slot copied out was read back in pieces that its copy's
        // wider stores could not forward.
        let s = &self.requests[slot];
        let Owner::Guest { thread, kind } = s.owner else {
            return Err(SimError::Other(format!(
                "request {} reached the guest but is not the guest's",
                s.guest.id
            )));
        };
        let vi = s.vm as usize;
        let interval = self.interval;
        let vm = &mut self.vms[vi];
        vm.ring_used -= 1;
        if kind == Kind::Data {
            // Nearly every completion: inline, the other kinds out of line.
            let (read, bytes, sector, issued) = (s.guest.is_read(), s.guest.bytes(), s.guest.sector, s.issued);
            vm.sched.completed(&s.guest, now);
            vm.threads[thread as usize].outstanding -= 1;
            vm.record_op(thread, read, bytes, now - issued, now, interval);
            match vm.jobs[vm.threads[thread as usize].job as usize].job.inode_lock {
                Some(how) if !read => self.release_inode_lock(vi, thread, sector, how)?,
                _ => self.after_thread_completion(vi, thread)?,
            }
        } else {
            let guest = s.guest;
            vm.sched.completed(&guest, now);
            self.other_completion(vi, thread, kind, &guest)?;
        }
        self.guest_kick(vi);
        Ok(())
    }

    /// A completion other than a thread's data request: the journal's,
    /// an fsync's, the page cache's.
    #[inline(never)]
    fn other_completion(&mut self, vi: usize, thread: u32, kind: Kind, guest: &Request) -> Result<()> {
        let now = self.now;
        let vm = &mut self.vms[vi];
        match kind {
            // (`Data` is `guest_done`'s own.)
            Kind::Journal | Kind::Data => {}
            Kind::FsyncJournal if vm.barrier => {
                // The commit record is down: now the cache flush.
                let rq = Request::new(0, thread, Op::Flush, 0, 0, now).with_sync(true);
                self.submit_guest(vi, thread, Kind::FsyncFlush, rq, now)?;
            }
            Kind::FsyncJournal | Kind::FsyncFlush => {
                let th = &mut vm.threads[thread as usize];
                th.in_fsync = false;
                th.outstanding -= 1;
                self.after_thread_completion(vi, thread)?;
            }
            Kind::CacheRead => {
                let run = Self::pages_of(guest);
                let woken = vm.cache.as_mut().map(|c| c.read_done(run)).unwrap_or_default();
                for t in woken {
                    self.page_arrived(vi, t, now)?;
                }
            }
            Kind::CacheWrite { flusher } => {
                let run = Self::pages_of(guest);
                vm.wb_inflight -= flusher as u32;
                let woken = vm.cache.as_mut().map(|c| c.write_done(run)).unwrap_or_default();
                for t in woken {
                    self.page_arrived(vi, t, now)?;
                }
                self.wake_throttled(vi)?;
                self.flusher_pump(vi)?;
            }
        }
        Ok(())
    }
}
