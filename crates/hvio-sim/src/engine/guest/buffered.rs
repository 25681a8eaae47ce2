//! Buffered jobs through the guest page cache: read-ahead, write-back, the flusher, fsync.

use super::*;

impl Engine {
    /// Image pages of a page-cache request.
    pub(crate) fn pages_of(rq: &Request) -> Run {
        Run {
            first: rq.sector / PAGE_SECTORS,
            pages: (rq.sectors as u64).div_ceil(PAGE_SECTORS),
        }
    }

    /// A page-cache request of `r` for guest stream `stream`.
    pub(crate) fn page_request(stream: StreamId, op: Op, r: Run, now: Nanos) -> Request {
        Request::new(
            0,
            stream,
            op,
            r.first * PAGE_SECTORS,
            (r.pages * PAGE_SECTORS) as u32,
            now,
        )
    }

    /// Submit `runs` for thread `ti` as synchronous requests of at most `max_sectors_kb`.
    pub(crate) fn submit_runs(&mut self, vi: usize, ti: u32, kind: Kind, runs: Vec<Run>, now: Nanos) -> Result<()> {
        let max = self.vms[vi]
            .cache
            .as_ref()
            .map_or(1, |c| c.config().max_request_pages());
        let op = if kind == Kind::CacheRead { Op::Read } else { Op::Write };
        for run in runs {
            for r in pagecache::split(run, max) {
                let rq = Self::page_request(ti, op, r, now).with_sync(true);
                self.submit_guest(vi, ti, kind, rq, now)?;
            }
        }
        Ok(())
    }

    /// One operation of a buffered thread: the end-of-run fsync of a
    /// writer, the next fsync of sysbench's cycle, or a read or write
    /// through the page cache.
    pub(crate) fn buffered_fill(&mut self, vi: usize, ti: u32, now: Nanos) -> Result<()> {
        let vm = &mut self.vms[vi];
        let th = &mut vm.threads[ti as usize];
        if th.outstanding > 0 || th.throttled || th.waiting > 0 {
            return Ok(());
        }
        let ji = th.job as usize;
        let job = &mut vm.jobs[ji];
        // sysbench's `--file-fsync-freq`: every `fsync` requests (reads
        // too), while the job has written since its last cycle, the next
        // requests are fsyncs of each of its files in turn. A file not
        // written since its last fsync costs nothing (no dirty pages, no
        // dirty inode, no journal commit).
        while job.may_issue(now) && job.is_dirty && job.job.fsync > 0 && job.issued.is_multiple_of(job.job.fsync as u64)
        {
            let f = job.fsynced_file as usize;
            job.fsynced_file += 1;
            if job.fsynced_file == job.job.nrfiles {
                job.fsynced_file = 0;
                job.is_dirty = false;
            }
            if std::mem::take(&mut job.file_dirty[f]) {
                let file = job.file_span(ji, f as u64);
                return self.buffered_fsync(vi, ti, file.first, file.pages, now);
            }
        }
        if !job.may_issue(now) {
            // sysbench's `--file-fsync-end`: the last thread of a job syncs
            // the files written since their last fsync (one commit).
            if job.live_threads == 1 && !th.final_synced && job.file_dirty.iter().any(|&d| d) {
                th.final_synced = true;
                job.file_dirty.fill(false);
                job.is_dirty = false;
                let (first, n) = job.pages();
                return self.buffered_fsync(vi, ti, first, n, now);
            }
            self.thread_finished(vi, ti, now);
            return Ok(());
        }
        let (sector, sectors, read) = job.draw(th.area as usize);
        job.outstanding += 1;
        let first = sector / PAGE_SECTORS;
        let n = (sector + sectors).div_ceil(PAGE_SECTORS) - first;
        th.outstanding = 1;
        th.op = Some((now, sectors * SECTOR_BYTES, read));
        let copy = vm.cache.as_ref().map_or(0, |c| c.config().copy_ns_per_page) * n;
        let Some(cache) = vm.cache.as_mut() else {
            return Err(SimError::Other("a buffered job in a VM without a page cache".into()));
        };
        if read {
            let file = job.file_span(ji, job.file_index(sector));
            let out = cache.read(file, first, n, ti);
            th.waiting = out.wait;
            let ready = out.wait == 0;
            self.submit_runs(vi, ti, Kind::CacheRead, out.runs, now)?;
            if ready {
                self.push(
                    now + copy,
                    Ev::BufferedDone {
                        vm: vi as u16,
                        thread: ti,
                    },
                );
            }
        } else {
            cache.write(first, n, now);
            vm.dirty = true;
            job.is_dirty = true;
            let f = job.file_index(sector) as usize;
            job.file_dirty[f] = true;
            self.push(
                now + copy,
                Ev::BufferedDone {
                    vm: vi as u16,
                    thread: ti,
                },
            );
            self.flusher_pump(vi)?;
        }
        Ok(())
    }

    /// A page thread `ti` waited for is up to date or written back.
    pub(crate) fn page_arrived(&mut self, vi: usize, ti: u32, now: Nanos) -> Result<()> {
        let vm = &mut self.vms[vi];
        let copy = vm.cache.as_ref().map_or(0, |c| c.config().copy_ns_per_page);
        let th = &mut vm.threads[ti as usize];
        th.waiting -= 1;
        if th.waiting > 0 {
            return Ok(());
        }
        if th.in_fsync {
            // fsync's data is down: the journal commit and the flush follow.
            th.in_fsync = false;
            return self.issue_fsync(vi, ti, now);
        }
        if let Some((_, bytes, _)) = th.op {
            let t = now + copy * bytes.div_ceil(pagecache::PAGE_BYTES);
            self.push(
                t,
                Ev::BufferedDone {
                    vm: vi as u16,
                    thread: ti,
                },
            );
        }
        Ok(())
    }

    /// A buffered operation is done: count it, then the thread goes on
    /// (unless it wrote above `dirty_ratio`: then it waits for write-back).
    pub(crate) fn buffered_done(&mut self, vi: usize, ti: u32) -> Result<()> {
        let now = self.now;
        let interval = self.interval;
        let vm = &mut self.vms[vi];
        let th = &mut vm.threads[ti as usize];
        let Some((issued, bytes, read)) = th.op.take() else {
            return Ok(());
        };
        th.outstanding = 0;
        vm.record_op(ti, read, bytes, now - issued, now, interval);
        if !read && vm.cache.as_ref().is_some_and(|c| c.over_dirty_limit()) {
            vm.threads[ti as usize].throttled = true;
            vm.throttled.push(ti);
            self.flusher_pump(vi)?;
        } else {
            self.after_thread_completion(vi, ti)?;
        }
        self.guest_kick(vi);
        Ok(())
    }

    /// fsync of pages `[first, first + n)`: write the dirty ones back, wait
    /// for every page under write-back there, then the journal commit and
    /// the flush (`issue_fsync`).
    pub(crate) fn buffered_fsync(&mut self, vi: usize, ti: u32, first: u64, n: u64, now: Nanos) -> Result<()> {
        let vm = &mut self.vms[vi];
        let Some(cache) = vm.cache.as_mut() else {
            return Ok(());
        };
        let runs = cache.writeback_range(first, n);
        let wait = cache.wait_writeback(first, n, ti);
        let th = &mut vm.threads[ti as usize];
        th.waiting = wait;
        th.in_fsync = wait > 0;
        self.submit_runs(vi, ti, Kind::CacheWrite { flusher: false }, runs, now)?;
        if wait == 0 {
            self.issue_fsync(vi, ti, now)?;
        }
        Ok(())
    }

    /// Submit queued flusher write-back up to `nr_requests`, refilling the
    /// queue from the dirty pages while above `dirty_background_ratio` or
    /// while writers are throttled.
    pub(crate) fn flusher_pump(&mut self, vi: usize) -> Result<()> {
        let now = self.now;
        loop {
            let vm = &mut self.vms[vi];
            let Some(cache) = vm.cache.as_mut() else {
                return Ok(());
            };
            if vm.wb_inflight >= cache.config().nr_requests {
                return Ok(());
            }
            if let Some(r) = vm.wb_queue.pop_front() {
                vm.wb_inflight += 1;
                let stream = vm.flusher_stream;
                let rq = Self::page_request(stream, Op::Write, r, now);
                self.submit_guest(vi, u32::MAX, Kind::CacheWrite { flusher: true }, rq, now)?;
                continue;
            }
            if !cache.over_background() && vm.throttled.is_empty() {
                return Ok(());
            }
            // MAX_WRITEBACK_PAGES: one pass takes up to 4 MiB.
            let runs = cache.writeback_background(1024);
            if runs.is_empty() {
                return Ok(());
            }
            let max = cache.config().max_request_pages();
            for run in runs {
                vm.wb_queue.extend(pagecache::split(run, max));
            }
        }
    }

    /// Writers blocked above `dirty_ratio` go on once below it.
    pub(crate) fn wake_throttled(&mut self, vi: usize) -> Result<()> {
        let vm = &mut self.vms[vi];
        if vm.throttled.is_empty() || vm.cache.as_ref().is_none_or(|c| c.over_dirty_limit()) {
            return Ok(());
        }
        let woken = std::mem::take(&mut vm.throttled);
        for t in woken {
            self.vms[vi].threads[t as usize].throttled = false;
            self.after_thread_completion(vi, t)?;
        }
        Ok(())
    }

    /// The flusher wakes: pages dirty for longer than `dirty_expire_centisecs`
    /// go to the disk, then background write-back if still above its ratio.
    pub(crate) fn flusher_tick(&mut self, vi: usize) -> Result<()> {
        let now = self.now;
        let vm = &mut self.vms[vi];
        let active = vm.active();
        let Some(cache) = vm.cache.as_mut() else {
            return Ok(());
        };
        let cfg = cache.config();
        let (period, expire) = (cfg.writeback_period(), cfg.dirty_expire());
        let max = cfg.max_request_pages();
        if let Some(cutoff) = now.checked_sub(expire) {
            for run in cache.writeback_expired(cutoff) {
                vm.wb_queue.extend(pagecache::split(run, max));
            }
        }
        let more = active || cache.nr_dirty() > 0 || cache.nr_writeback() > 0;
        self.flusher_pump(vi)?;
        self.guest_kick(vi);
        if more {
            self.push(now + period, Ev::Flusher { vm: vi as u16 });
        }
        Ok(())
    }
}
