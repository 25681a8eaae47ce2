//! Guest threads and jobs: drawing requests, fsync, the journal, inode locks.

use super::*;

/// The data a thread or a job walks: extents of the image, flattened.
pub(crate) struct Area {
    /// (first image sector, sectors).
    pub(crate) extents: Vec<(u64, u64)>,
    /// Start of each extent in the flattened space.
    pub(crate) prefix: Vec<u64>,
    pub(crate) total: u64,
    /// Random offsets: how many blocks of the job's smallest size the area
    /// holds (at least 1; set by [`DrawPlan::new`]).
    pub(crate) slots: u64,
    /// Sequential positions (flattened offsets): `[0]` for reads, `[1]` for
    /// writes when the job keeps one per direction
    /// ([`Job::cursor_per_direction`]), else `[0]` for both.
    pub(crate) cursor: [u64; 2],
}

impl Area {
    pub(crate) fn new(extents: Vec<(u64, u64)>) -> Area {
        let mut prefix = Vec::with_capacity(extents.len());
        let mut total = 0;
        for e in &extents {
            prefix.push(total);
            total += e.1;
        }
        Area {
            extents,
            prefix,
            total,
            slots: total.max(1),
            cursor: [0; 2],
        }
    }
    /// Image sector and the sectors left in its extent at flattened offset `off`.
    #[inline]
    pub(crate) fn locate(&self, off: u64) -> (u64, u64) {
        let i = match self.prefix.binary_search(&off) {
            Ok(i) => i,
            Err(i) => i - 1,
        };
        let within = off - self.prefix[i];
        (self.extents[i].0 + within, self.extents[i].1 - within)
    }
    /// The `len` sectors from flattened offset `off`, as an area of their own.
    pub(crate) fn range(&self, off: u64, len: u64) -> Area {
        let mut ext = Vec::new();
        let (mut off, mut left) = (off, len);
        while left > 0 {
            let (s, avail) = self.locate(off);
            let n = avail.min(left);
            ext.push((s, n));
            off += n;
            left -= n;
        }
        Area::new(ext)
    }
}

/// What a draw needs of its job, resolved once from the job's keys.
#[derive(Clone, Copy)]
pub(crate) struct DrawPlan {
    /// The block size when `bssplit` has one entry (no draw for it).
    fixed_bytes: Option<u64>,
    random: bool,
    /// Random offsets are multiples of this many sectors (the smallest block).
    align: u64,
    /// [`Job::cursor_per_direction`].
    per_direction: bool,
}

impl DrawPlan {
    /// The plan of job `j`, whose threads walk `areas` (each told how many
    /// random blocks it holds).
    pub(crate) fn new(j: &Job, areas: &mut [Area]) -> DrawPlan {
        let plan = DrawPlan {
            fixed_bytes: (j.bssplit.len() == 1).then(|| j.bssplit[0].0),
            random: j.rw.random(),
            align: (j.min_bs() / SECTOR_BYTES).max(1),
            per_direction: j.cursor_per_direction(),
        };
        for a in areas {
            a.slots = (a.total / plan.align).max(1);
        }
        plan
    }
}

pub(crate) struct JobState {
    pub(crate) job: Job,
    pub(crate) plan: DrawPlan,
    /// The index of the job's phase (see [`crate::engine::phases`]).
    pub(crate) phase: Option<usize>,
    pub(crate) rng: JobRng,
    pub(crate) areas: Vec<Area>,
    pub(crate) issued: u64,
    pub(crate) issued_bytes: u64,
    pub(crate) outstanding: u64,
    pub(crate) start: Nanos,
    pub(crate) end: Option<Nanos>,
    pub(crate) live_threads: u32,
    pub(crate) counts: IoCount,
    /// First image sector of the job's files and each file's sectors.
    pub(crate) file_first: u64,
    pub(crate) file_sectors: u64,
    /// Buffered jobs, sysbench's fsync cycle: the job wrote since its last
    /// cycle (`is_dirty`), the next file to fsync (`fsynced_file`), and
    /// which files were written since their last fsync.
    pub(crate) is_dirty: bool,
    pub(crate) fsynced_file: u32,
    pub(crate) file_dirty: Vec<bool>,
    /// `inode_lock` jobs: per file, the thread holding its lock and the
    /// threads waiting for it, in arrival order (empty otherwise).
    pub(crate) lock_holder: Vec<Option<u32>>,
    pub(crate) lock_waiters: Vec<VecDeque<u32>>,
}

impl JobState {
    pub(crate) fn may_issue(&self, now: Nanos) -> bool {
        let j = &self.job;
        if let Some(r) = j.requests {
            return self.issued < r;
        }
        if let Some(b) = j.io_size {
            return self.issued_bytes < b;
        }
        if let Some(rt) = j.runtime_ns {
            return now < self.start + rt;
        }
        self.issued_bytes < j.size
    }

    /// Draw the next request of the job for area `area`: (image sector,
    /// sectors, read), and count it as issued.
    #[inline]
    pub(crate) fn draw(&mut self, area: usize) -> (u64, u64, bool) {
        let j = &self.job;
        let plan = self.plan;
        let bytes = match plan.fixed_bytes {
            Some(b) => b,
            None => {
                let x = self.rng.gen_range(0..100u32);
                j.bssplit
                    .iter()
                    .find(|b| x < b.1)
                    .map(|b| b.0)
                    .unwrap_or(j.bssplit[0].0)
            }
        };
        let read = match j.read_pct {
            100 => true,
            0 => false,
            p => self.rng.gen_range(0..100u32) < p,
        };
        let want = bytes / SECTOR_BYTES;
        let area = &mut self.areas[area];
        // fio's `f->last_pos[ddir]`: a sequential mixed fio job reads and
        // writes from positions of its own, each wrapping to the area's start.
        let dir = usize::from(plan.per_direction && !read);
        let off = if plan.random {
            self.rng.gen_range(0..area.slots) * plan.align
        } else {
            area.cursor[dir]
        };
        let (sector, avail) = area.locate(off.min(area.total - 1));
        let sectors = want.min(avail).max(1);
        if !plan.random {
            // Within the area but at its very end: no division for the wrap.
            let next = off + sectors;
            area.cursor[dir] = if next < area.total { next } else { next % area.total };
        }
        self.issued += 1;
        self.issued_bytes += sectors * SECTOR_BYTES;
        (sector, sectors, read)
    }

    /// Index of the job's file holding image sector `sector`.
    pub(crate) fn file_index(&self, sector: u64) -> u64 {
        (sector - self.file_first) / self.file_sectors
    }

    /// The job's file `idx`, in pages, for the page cache (job `ji`).
    pub(crate) fn file_span(&self, ji: usize, idx: u64) -> FileSpan {
        FileSpan {
            key: ((ji as u64) << 32) | idx,
            first: (self.file_first + idx * self.file_sectors) / PAGE_SECTORS,
            pages: self.file_sectors / PAGE_SECTORS,
        }
    }

    /// All of the job's files, as (first page, pages).
    pub(crate) fn pages(&self) -> (u64, u64) {
        (
            self.file_first / PAGE_SECTORS,
            self.file_sectors * self.job.nrfiles as u64 / PAGE_SECTORS,
        )
    }
}

pub(crate) struct Thread {
    pub(crate) job: u16,
    pub(crate) area: u16,
    pub(crate) outstanding: u32,
    pub(crate) writes_since_fsync: u32,
    /// Waiting for its writes to drain before an fsync.
    pub(crate) fsync_due: bool,
    /// An fsync (journal write + flush) is in progress.
    pub(crate) in_fsync: bool,
    pub(crate) done: bool,
    /// Buffered jobs: pages (or write-backs) the thread waits for.
    pub(crate) waiting: u32,
    /// Buffered jobs: the operation in progress (issued, bytes, read).
    pub(crate) op: Option<(Nanos, u64, bool)>,
    /// Buffered jobs: blocked above `dirty_ratio`.
    pub(crate) throttled: bool,
    /// Buffered writers: the end-of-run fsync was done.
    pub(crate) final_synced: bool,
    /// `inode_lock` jobs: the drawn write (sector, sectors, when drawn)
    /// waiting for its file's lock.
    pub(crate) lock_wait: Option<(u64, u64, Nanos)>,
}

impl Engine {
    /// Issue requests from thread `ti` up to its iodepth.
    pub(crate) fn thread_fill(&mut self, vi: usize, ti: u32, now: Nanos) -> Result<()> {
        loop {
            let vm = &mut self.vms[vi];
            let th = &vm.threads[ti as usize];
            if th.done || th.in_fsync {
                return Ok(());
            }
            let job = &mut vm.jobs[th.job as usize];
            if !job.job.direct {
                return self.buffered_fill(vi, ti, now);
            }
            if th.fsync_due {
                if th.outstanding > 0 {
                    return Ok(());
                }
                return self.issue_fsync(vi, ti, now);
            }
            if th.outstanding >= job.job.iodepth {
                return Ok(());
            }
            if !job.may_issue(now) {
                if th.outstanding == 0 {
                    self.thread_finished(vi, ti, now);
                }
                return Ok(());
            }
            let iodepth = job.job.iodepth;
            let (sector, sectors, read) = job.draw(th.area as usize);
            job.outstanding += 1;
            let fsync_every = job.job.fsync;
            let op = if read { Op::Read } else { Op::Write };
            let th = &mut vm.threads[ti as usize];
            th.outstanding += 1;
            if !read {
                vm.dirty = true;
                if fsync_every > 0 {
                    th.writes_since_fsync += 1;
                    if th.writes_since_fsync >= fsync_every {
                        th.fsync_due = true;
                    }
                }
            }
            let job = &vm.jobs[th.job as usize];
            if !read && job.job.inode_lock.is_some() && !Self::take_inode_lock(vm, ti, sector, sectors, now) {
                continue;
            }
            self.submit_data(vi, ti, op, sector, sectors, now, now)?;
            // At its depth the thread has nothing more to do now (every
            // check at the loop's top would end it without doing anything).
            if self.vms[vi].threads[ti as usize].outstanding >= iodepth {
                return Ok(());
            }
        }
    }

    /// `inode_lock`: thread `ti`'s write at image sector `sector` takes its
    /// file's lock (`true`), or waits for it with the drawn write.
    #[inline(never)]
    fn take_inode_lock(vm: &mut Vm, ti: u32, sector: u64, sectors: u64, now: Nanos) -> bool {
        let job = &mut vm.jobs[vm.threads[ti as usize].job as usize];
        let f = job.file_index(sector) as usize;
        if job.lock_holder[f].is_some_and(|h| h != ti) {
            job.lock_waiters[f].push_back(ti);
            vm.threads[ti as usize].lock_wait = Some((sector, sectors, now));
            return false;
        }
        job.lock_holder[f] = Some(ti);
        true
    }

    /// Hand thread `ti`'s direct request, drawn at `drawn`, to the guest scheduler.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(crate) fn submit_data(
        &mut self,
        vi: usize,
        ti: u32,
        op: Op,
        sector: u64,
        sectors: u64,
        drawn: Nanos,
        now: Nanos,
    ) -> Result<()> {
        // Direct, synchronous I/O: every request of a job is sync.
        let rq = Request::new(0, ti, op, sector, sectors as u32, now).with_sync(true);
        self.submit_guest_at(vi, ti, Kind::Data, rq, drawn, now)
    }

    /// `inode_lock`: thread `ti`'s write to the file holding image sector
    /// `sector` is done; release the file's lock and hand it on: with
    /// `steal`, the thread goes on first (it takes the lock again if its next
    /// request is a write there) and the first waiter gets the lock if it is
    /// still free; with `fifo`, the first waiter gets it, then the thread goes on.
    pub(crate) fn release_inode_lock(&mut self, vi: usize, ti: u32, sector: u64, how: InodeLock) -> Result<()> {
        let now = self.now;
        let vm = &mut self.vms[vi];
        let job = &mut vm.jobs[vm.threads[ti as usize].job as usize];
        let f = job.file_index(sector) as usize;
        job.lock_holder[f] = None;
        if how == InodeLock::Steal {
            self.after_thread_completion(vi, ti)?;
        }
        let vm = &mut self.vms[vi];
        let ji = vm.threads[ti as usize].job as usize;
        let job = &mut vm.jobs[ji];
        if job.lock_holder[f].is_none() {
            if let Some(w) = job.lock_waiters[f].pop_front() {
                job.lock_holder[f] = Some(w);
                let (s, n, drawn) = vm.threads[w as usize]
                    .lock_wait
                    .take()
                    .ok_or_else(|| SimError::Other(format!("inode lock waiter {w} has no write")))?;
                self.submit_data(vi, w, Op::Write, s, n, drawn, now)?;
            }
        }
        if how == InodeLock::Fifo {
            self.after_thread_completion(vi, ti)?;
        }
        Ok(())
    }

    pub(crate) fn thread_finished(&mut self, vi: usize, ti: u32, now: Nanos) {
        let vm = &mut self.vms[vi];
        let th = &mut vm.threads[ti as usize];
        if th.done {
            return;
        }
        th.done = true;
        let job = &mut vm.jobs[th.job as usize];
        job.live_threads -= 1;
        if job.live_threads == 0 {
            job.end = Some(now);
            if let Some(p) = job.phase {
                self.queue.push(now, Ev::PhaseJobDone { phase: p as u16 });
            }
        }
    }

    /// fsync: a journal commit record, then a cache flush (ext4 `fsync`).
    pub(crate) fn issue_fsync(&mut self, vi: usize, ti: u32, now: Nanos) -> Result<()> {
        let vm = &mut self.vms[vi];
        let th = &mut vm.threads[ti as usize];
        th.fsync_due = false;
        th.in_fsync = true;
        th.writes_since_fsync = 0;
        th.outstanding += 1;
        let sector = Self::journal_position(vm, 8);
        let rq = Request::new(0, ti, Op::Write, sector, 8, now)
            .with_sync(true)
            .with_meta(true);
        self.submit_guest(vi, ti, Kind::FsyncJournal, rq, now)
    }

    /// Next `sectors` of the journal's circular log (first half of the journal area).
    pub(crate) fn journal_position(vm: &mut Vm, sectors: u64) -> u64 {
        let log = (vm.journal_sectors / 2).max(sectors);
        if vm.journal_cursor + sectors > log {
            vm.journal_cursor = 0;
        }
        let s = vm.journal_cursor;
        vm.journal_cursor += sectors;
        s
    }

    /// Periodic journal commit (jbd2): if data was written since the last
    /// commit, a commit block run in the log and an inode-table write-back in
    /// the metadata half of the journal area — paper 000 §2.2's "discrete
    /// requests" at the start of each image.
    pub(crate) fn journal_tick(&mut self, vi: usize) -> Result<()> {
        let now = self.now;
        let vm = &mut self.vms[vi];
        if vm.dirty {
            vm.dirty = false;
            let stream = vm.journal_stream;
            let log = Self::journal_position(vm, 24);
            let meta_base = vm.journal_sectors / 2;
            let meta_len = (vm.journal_sectors - meta_base).max(8);
            let meta = meta_base + vm.rng.gen_range(0..meta_len / 8) * 8;
            let a = Request::new(0, stream, Op::Write, log, 24, now)
                .with_sync(true)
                .with_meta(true);
            let b = Request::new(0, stream, Op::Write, meta, 8, now)
                .with_sync(false)
                .with_meta(true);
            self.submit_guest(vi, u32::MAX, Kind::Journal, a, now)?;
            self.submit_guest(vi, u32::MAX, Kind::Journal, b, now)?;
            self.guest_kick(vi);
        }
        let vm = &self.vms[vi];
        if vm.active() {
            let t = now + vm.commit_every;
            self.push(t, Ev::JournalTick { vm: vi as u16 });
        }
        Ok(())
    }

    pub(crate) fn after_thread_completion(&mut self, vi: usize, ti: u32) -> Result<()> {
        let now = self.now;
        let vm = &self.vms[vi];
        let think = vm.jobs[vm.threads[ti as usize].job as usize].job.thinktime_ns;
        if think > 0 {
            self.push(
                now + think,
                Ev::ThreadIssue {
                    vm: vi as u16,
                    thread: ti,
                },
            );
            Ok(())
        } else {
            self.thread_fill(vi, ti, now)
        }
    }
}
