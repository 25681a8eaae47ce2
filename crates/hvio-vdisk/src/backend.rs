//! Real-I/O backends: a thread pool doing pread/pwrite, and one io_uring ring.

use crate::engine::{recv_sleeping, Backend, Completions, Dispatched, Msg, Poller, Waker};
use crate::io::{IoJob, IoKind, IoResult};
use crate::nbd::ring::RingConn;
use crate::store::Store;
use crossbeam_channel::{Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

/// Run one job synchronously, complete it, tell the engine.
pub(crate) fn run_sync(store: &Store, id: u64, job: IoJob, notify: &Sender<Msg>) {
    let r = run_job(store, job);
    let _ = notify.send(Msg::Done { id, result: r });
}

/// Run one job synchronously and complete it (call its `done`).
fn run_job(store: &Store, job: IoJob) -> IoResult {
    let IoJob {
        vm,
        kind,
        offset,
        len,
        fua,
        mut buf,
        done,
    } = job;
    let r = store.execute(vm, kind, offset, len, fua, &mut buf);
    done(r, buf);
    r
}

/// `threads` workers taking dispatched requests from one queue.
pub struct ThreadPool {
    tx: Option<Sender<Dispatched>>,
    workers: Vec<JoinHandle<()>>,
    completions: Arc<Completions>,
}

impl ThreadPool {
    /// Starts `threads` workers serving `store`, telling `notify` of each completion.
    pub fn new(store: Arc<Store>, threads: usize, notify: Sender<Msg>) -> std::io::Result<ThreadPool> {
        let (tx, rx): (Sender<Dispatched>, Receiver<Dispatched>) = crossbeam_channel::unbounded();
        let completions = Arc::new(Completions::default());
        let mut workers = Vec::new();
        for i in 0..threads.max(1) {
            let rx = rx.clone();
            let store = store.clone();
            let notify = notify.clone();
            let completions = completions.clone();
            workers.push(
                std::thread::Builder::new()
                    .name(format!("hvio-io-{i}"))
                    .spawn(move || {
                        while let Ok(d) = recv_sleeping(&rx, None) {
                            let r = run_job(&store, d.job);
                            completions.done(d.id, r, &notify);
                        }
                    })?,
            );
        }
        Ok(ThreadPool {
            tx: Some(tx),
            workers,
            completions,
        })
    }
}

impl Backend for ThreadPool {
    fn submit(&mut self, d: Dispatched) {
        if let Some(tx) = &self.tx {
            if let Err(e) = tx.send(d) {
                // Workers gone: fail the request rather than lose it.
                let d = e.0;
                d.job.finish(Err(libc::ESHUTDOWN));
            }
        }
    }

    fn stop(&mut self) {
        self.tx = None;
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }

    fn completions(&self) -> Option<Arc<Completions>> {
        Some(self.completions.clone())
    }
}

impl Drop for ThreadPool {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One io_uring ring driven from the engine thread itself: the engine
/// pushes dispatched requests into the submission queue, submits them in one
/// batch after each scheduling round, and sleeps in `io_uring_enter` until a
/// completion, a new message (the [`Waker`]'s eventfd, read through the
/// ring) or the scheduler's `WaitUntil` deadline. A request thus costs no
/// thread hand-off between the scheduler and the device. Reads, writes (FUA
/// as `RWF_DSYNC`) and flushes (`fdatasync`) go through the ring; trims and
/// write-zeroes (fallocate with fallbacks), whole-page writes through the
/// page cache (`inline_write`) and any request the ring answers short or
/// with O_DIRECT's EINVAL are done synchronously.
///
/// The ring also serves NBD connections after their handshake
/// ([`Poller::adopt`]): it receives their requests (handed to the engine as
/// messages on this same thread) and sends their replies, every reply that
/// is ready after a round of completions in one `send`.
pub struct Uring {
    ring: io_uring::IoUring,
    store: Arc<Store>,
    notify: Sender<Msg>,
    waker: Arc<Waker>,
    slots: Vec<Option<Slot>>,
    free: Vec<usize>,
    in_ring: usize,
    /// Where the armed eventfd read lands (lives as long as the ring can write it).
    efd_buf: Box<u64>,
    efd_armed: bool,
    conns: Vec<Option<RingConn>>,
    /// Shutting down: adopted connections take no more requests.
    stopping: bool,
    /// After an [`inline_write`] blocked (dirty-page throttling, say), page
    /// cache writes go through the ring again until this instant.
    ring_writes_until: Option<Instant>,
}

/// An inline write taking longer than this blocked in the kernel...
const INLINE_SLOW: std::time::Duration = std::time::Duration::from_millis(1);
/// ...and page cache writes go through the ring (an io-wq worker blocks
/// instead of the scheduler) for this long.
const INLINE_PAUSE: std::time::Duration = std::time::Duration::from_secs(1);

const EVENTFD_TAG: u64 = u64::MAX;
/// Tag bit of a connection's operation: `CONN_TAG | index << 1 | (0 receive, 1 send)`.
const CONN_TAG: u64 = 1 << 62;

struct Slot {
    id: u64,
    job: IoJob,
    direct: bool,
}

impl Uring {
    /// A ring of `depth` entries serving `store`, telling `notify` of each completion.
    pub fn new(store: Arc<Store>, depth: usize, notify: Sender<Msg>) -> std::io::Result<Uring> {
        let entries = (depth + 2).next_power_of_two().max(64) as u32;
        // A plain ring: completions are posted by task work the kernel runs
        // on this thread at once (interrupting a busy-polling spin, which
        // then sees them in the queue). IORING_SETUP_COOP_TASKRUN, which
        // defers that work to the thread's next `io_uring_enter`, was tried:
        // on the FUSE path it tripled the scheduler thread's sleeps per
        // request (0.20-0.30 against 0.01-0.11) and NBD polling gained
        // nothing measurable from it (docs/serve.md, *Busy-polling*).
        let ring = io_uring::IoUring::new(entries)?;
        if !ring.params().is_feature_ext_arg() {
            return Err(std::io::Error::other(
                "this kernel's io_uring cannot wait with a timeout (IORING_FEAT_EXT_ARG, Linux 5.11): \
                 use engine = \"threads\"",
            ));
        }
        Ok(Uring {
            ring,
            store,
            notify,
            waker: Arc::new(Waker::new()?),
            slots: Vec::new(),
            free: Vec::new(),
            in_ring: 0,
            efd_buf: Box::new(0),
            efd_armed: false,
            conns: Vec::new(),
            stopping: false,
            ring_writes_until: None,
        })
    }

    fn push(&mut self, entry: io_uring::squeue::Entry) {
        // SAFETY: every buffer an entry points at is owned by its slot (or
        // `efd_buf`) until its completion is reaped.
        while unsafe { self.ring.submission().push(&entry) }.is_err() {
            if let Err(e) = self.ring.submit() {
                tracing::error!(error = %e, "io_uring submit failed");
            }
        }
    }

    fn arm_waker(&mut self) {
        if !self.efd_armed {
            let e = io_uring::opcode::Read::new(
                io_uring::types::Fd(self.waker.fd()),
                &mut *self.efd_buf as *mut u64 as *mut u8,
                8,
            )
            .build()
            .user_data(EVENTFD_TAG);
            self.push(e);
            self.efd_armed = true;
        }
    }

    /// Answer every completed request.
    fn reap(&mut self) {
        let cqes: Vec<(u64, i32)> = self.ring.completion().map(|c| (c.user_data(), c.result())).collect();
        for (tag, res) in cqes {
            if tag == EVENTFD_TAG {
                self.efd_armed = false;
                continue;
            }
            if tag & CONN_TAG != 0 {
                let notify = &self.notify;
                let idx = ((tag & !CONN_TAG) >> 1) as usize;
                if let Some(c) = self.conns.get_mut(idx).and_then(Option::as_mut) {
                    if tag & 1 == 0 {
                        c.on_recv(res, &mut |job| {
                            let _ = notify.send(Msg::Submit(job));
                        });
                    } else {
                        c.on_send(res);
                    }
                }
                continue;
            }
            let idx = tag as usize;
            let Some(slot) = self.slots.get_mut(idx).and_then(Option::take) else {
                continue;
            };
            self.free.push(idx);
            self.in_ring -= 1;
            let expected = match slot.job.kind {
                IoKind::Read | IoKind::Write => slot.job.len as i32,
                _ => 0,
            };
            if res == expected {
                complete(slot.id, slot.job, Ok(()), &self.notify);
            } else if res < 0 && !(res == -libc::EINVAL && slot.direct) {
                complete(slot.id, slot.job, Err(-res), &self.notify);
            } else {
                // Short transfer or O_DIRECT refusal: redo synchronously
                // (Store::execute falls back to the buffered descriptor).
                run_sync(&self.store, slot.id, slot.job, &self.notify);
            }
        }
        self.drive();
    }

    /// Collect the connections' replies and arm their receives and sends;
    /// close the connections that are done.
    fn drive(&mut self) {
        use io_uring::{opcode, types};
        if self.conns.is_empty() {
            return;
        }
        let notify = &self.notify;
        let mut submit = |job| {
            let _ = notify.send(Msg::Submit(job));
        };
        let mut entries = Vec::new();
        for (i, slot) in self.conns.iter_mut().enumerate() {
            let Some(c) = slot else { continue };
            c.pump(&mut submit);
            let fd = types::Fd(c.fd());
            let tag = CONN_TAG | (i as u64) << 1;
            if let Some((p, n)) = c.want_recv() {
                entries.push(opcode::Recv::new(fd, p, n).build().user_data(tag));
            }
            if let Some((p, n)) = c.want_send() {
                entries.push(
                    opcode::Send::new(fd, p, n)
                        .flags(libc::MSG_NOSIGNAL)
                        .build()
                        .user_data(tag | 1),
                );
            }
            if c.finished() {
                *slot = None;
            }
        }
        while self.conns.last().is_some_and(Option::is_none) {
            self.conns.pop();
        }
        for e in entries {
            self.push(e);
        }
    }

    fn enter(&mut self, want: usize, deadline: Option<Instant>) {
        let r = match deadline {
            Some(at) if want > 0 => {
                let d = at.saturating_duration_since(Instant::now());
                let ts = io_uring::types::Timespec::new().sec(d.as_secs()).nsec(d.subsec_nanos());
                let args = io_uring::types::SubmitArgs::new().timespec(&ts);
                self.ring.submitter().submit_with_args(want, &args)
            }
            _ => self.ring.submit_and_wait(want),
        };
        if let Err(e) = r {
            if !matches!(e.raw_os_error(), Some(libc::EINTR | libc::ETIME | libc::EBUSY)) {
                tracing::error!(error = %e, "io_uring wait failed");
            }
        }
        self.reap();
    }
}

fn complete(id: u64, mut job: IoJob, r: IoResult, notify: &Sender<Msg>) {
    let buf = std::mem::replace(&mut job.buf, crate::buf::AlignedBuf::empty());
    (job.done)(r, buf);
    let _ = notify.send(Msg::Done { id, result: r });
}

impl Backend for Uring {
    fn submit(&mut self, d: Dispatched) {
        let Dispatched { id, job, .. } = d;
        let inline = match self.ring_writes_until {
            Some(t) if Instant::now() < t => false,
            _ => {
                self.ring_writes_until = None;
                true
            }
        };
        let Some((entry, direct)) = uring_sqe(&self.store, &job, inline) else {
            let start = Instant::now();
            run_sync(&self.store, id, job, &self.notify);
            let took = start.elapsed();
            if took > INLINE_SLOW {
                tracing::debug!(
                    ?took,
                    "a synchronous request blocked: page cache writes go through the ring for a while"
                );
                self.ring_writes_until = Some(Instant::now() + INLINE_PAUSE);
            }
            return;
        };
        let idx = self.free.pop().unwrap_or_else(|| {
            self.slots.push(None);
            self.slots.len() - 1
        });
        self.slots[idx] = Some(Slot { id, job, direct });
        self.push(entry.user_data(idx as u64));
        self.in_ring += 1;
    }

    fn stop(&mut self) {
        for c in self.conns.iter_mut().flatten() {
            c.abort();
        }
        while self.in_ring > 0 || self.conns.iter().flatten().any(|c| !c.quiet()) {
            self.enter(1, None);
        }
        self.conns.clear();
        if self.efd_armed {
            // Complete the armed read so the kernel is done with `efd_buf`.
            self.waker.signal();
            while self.efd_armed {
                self.enter(1, None);
            }
        }
    }

    fn poller(&mut self) -> Option<&mut dyn Poller> {
        Some(self)
    }
}

impl Poller for Uring {
    fn poll(&mut self) {
        self.enter(0, None);
    }

    fn wait(&mut self, deadline: Option<Instant>) {
        self.arm_waker();
        self.enter(1, deadline);
    }

    fn ready(&mut self) -> bool {
        if !self.ring.submission().is_empty() {
            // Replies and receives `reap` armed after the last enter.
            if let Err(e) = self.ring.submit() {
                tracing::error!(error = %e, "io_uring submit failed");
            }
        }
        !self.ring.completion().is_empty()
    }

    fn serves_connections(&self) -> bool {
        self.conns.iter().any(Option::is_some)
    }

    fn waker(&self) -> Arc<Waker> {
        self.waker.clone()
    }

    fn adopt(&mut self, mut conn: RingConn) {
        if self.stopping {
            conn.stop_reading();
        }
        match self.conns.iter().position(Option::is_none) {
            Some(i) => self.conns[i] = Some(conn),
            None => self.conns.push(Some(conn)),
        }
        self.drive();
    }

    fn stop_reading(&mut self) {
        self.stopping = true;
        for c in self.conns.iter_mut().flatten() {
            c.stop_reading();
        }
        self.drive();
    }

    fn abort_connections(&mut self) {
        for c in self.conns.iter_mut().flatten() {
            c.abort();
        }
        self.drive();
    }
}

impl Drop for Uring {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether a write through the page cache (the buffered descriptor) is done
/// on the engine thread instead of the ring. ext4 cannot start a buffered
/// write without possibly blocking (no `FMODE_BUF_WASYNC`), so io_uring hands
/// every one to an io-wq worker thread: a wake-up of that worker, then of the
/// engine sleeping for its completion — measured on the FUSE path, 0.3–0.8
/// engine sleeps per write against 0.03 per read. Done here it is a copy into
/// the page cache (a few µs) and the engine does not sleep. Only whole,
/// aligned pages: a partial page not in the cache would be read from the disk
/// first, and FUA writes wait for the device, so those stay on the ring.
/// A write that does block (dirty-page throttling) would stall every VM's
/// requests behind it: after one taking more than [`INLINE_SLOW`], the ring
/// takes page cache writes for [`INLINE_PAUSE`].
fn inline_write(job: &IoJob, file_offset: u64, direct: bool) -> bool {
    const PAGE: u64 = 4096;
    job.kind == IoKind::Write && !direct && !job.fua && file_offset.is_multiple_of(PAGE) && job.len.is_multiple_of(PAGE)
}

/// The ring entry for a read, write or flush; `None` for what runs
/// synchronously (trims, write-zeroes, [`inline_write`]s).
fn uring_sqe(store: &Store, job: &IoJob, inline_writes: bool) -> Option<(io_uring::squeue::Entry, bool)> {
    use io_uring::{opcode, types};
    let disk = store.disks.get(job.vm)?;
    if job.kind.writes() && disk.read_only {
        return None;
    }
    if job.kind != IoKind::Flush && job.offset.checked_add(job.len).is_none_or(|e| e > disk.span) {
        return None;
    }
    if job.len > i32::MAX as u64 {
        return None;
    }
    let f = &store.files[disk.file];
    let off = disk.file_offset(job.offset);
    match job.kind {
        IoKind::Read | IoKind::Write => {
            let (fd, direct) = f.raw_fd_for(off, job.len);
            if inline_writes && inline_write(job, off, direct) {
                return None;
            }
            let e = if job.kind == IoKind::Read {
                opcode::Read::new(types::Fd(fd), job.buf.as_ptr() as *mut u8, job.len as u32)
                    .offset(off)
                    .build()
            } else {
                let flags = if job.fua { libc::RWF_DSYNC } else { 0 };
                opcode::Write::new(types::Fd(fd), job.buf.as_ptr(), job.len as u32)
                    .offset(off)
                    .rw_flags(flags)
                    .build()
            };
            Some((e, direct))
        }
        IoKind::Flush => {
            let e = opcode::Fsync::new(types::Fd(f.raw_buffered_fd()))
                .flags(types::FsyncFlags::DATASYNC)
                .build();
            Some((e, false))
        }
        IoKind::Trim | IoKind::WriteZeroes { .. } => None,
    }
}
