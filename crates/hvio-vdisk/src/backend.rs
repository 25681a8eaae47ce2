//! Real-I/O backends: a thread pool doing pread/pwrite, and one io_uring ring.

use crate::engine::{Backend, Dispatched, Msg};
use crate::io::{IoJob, IoKind, IoResult};
use crate::store::Store;
use crossbeam_channel::{Receiver, Sender, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Run one job synchronously, complete it, tell the engine.
pub(crate) fn run_sync(store: &Store, id: u64, job: IoJob, notify: &Sender<Msg>) {
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
    let _ = notify.send(Msg::Done { id, result: r });
}

/// `threads` workers taking dispatched requests from one queue.
pub struct ThreadPool {
    tx: Option<Sender<Dispatched>>,
    workers: Vec<JoinHandle<()>>,
}

impl ThreadPool {
    pub fn new(store: Arc<Store>, threads: usize, notify: Sender<Msg>) -> std::io::Result<ThreadPool> {
        let (tx, rx): (Sender<Dispatched>, Receiver<Dispatched>) = crossbeam_channel::unbounded();
        let mut workers = Vec::new();
        for i in 0..threads.max(1) {
            let rx = rx.clone();
            let store = store.clone();
            let notify = notify.clone();
            workers.push(
                std::thread::Builder::new()
                    .name(format!("hvio-io-{i}"))
                    .spawn(move || {
                        for d in rx {
                            run_sync(&store, d.id, d.job, &notify);
                        }
                    })?,
            );
        }
        Ok(ThreadPool { tx: Some(tx), workers })
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
}

impl Drop for ThreadPool {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One io_uring ring on its own thread. Reads, writes (FUA as `RWF_DSYNC`)
/// and flushes (`fdatasync`) go through the ring; trims and write-zeroes
/// (fallocate with fallbacks) and any request the ring answers short or with
/// O_DIRECT's EINVAL are done synchronously on the ring thread.
pub struct Uring {
    tx: Option<Sender<Dispatched>>,
    efd: i32,
    thread: Option<JoinHandle<()>>,
}

impl Uring {
    pub fn new(store: Arc<Store>, depth: usize, notify: Sender<Msg>) -> std::io::Result<Uring> {
        // SAFETY: plain syscall.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if efd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let entries = (depth + 2).next_power_of_two().max(8) as u32;
        let ring = io_uring::IoUring::new(entries)?;
        let (tx, rx) = crossbeam_channel::unbounded();
        let thread = std::thread::Builder::new()
            .name("hvio-uring".into())
            .spawn(move || uring_loop(ring, efd, rx, store, notify))?;
        Ok(Uring {
            tx: Some(tx),
            efd,
            thread: Some(thread),
        })
    }

    fn kick(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a valid u64 to our eventfd.
        unsafe { libc::write(self.efd, &one as *const u64 as *const _, 8) };
    }
}

impl Backend for Uring {
    fn submit(&mut self, d: Dispatched) {
        if let Some(tx) = &self.tx {
            if let Err(e) = tx.send(d) {
                e.0.job.finish(Err(libc::ESHUTDOWN));
                return;
            }
            self.kick();
        }
    }

    fn stop(&mut self) {
        if self.tx.take().is_some() {
            self.kick();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Uring {
    fn drop(&mut self) {
        self.stop();
        // SAFETY: our descriptor, closed once.
        unsafe { libc::close(self.efd) };
    }
}

const EVENTFD_TAG: u64 = u64::MAX;

struct Slot {
    id: u64,
    job: IoJob,
    direct: bool,
}

fn uring_loop(mut ring: io_uring::IoUring, efd: i32, rx: Receiver<Dispatched>, store: Arc<Store>, notify: Sender<Msg>) {
    use io_uring::{opcode, types};
    let mut slots: Vec<Option<Slot>> = Vec::new();
    let mut free: Vec<usize> = Vec::new();
    let mut in_ring = 0usize;
    let mut efd_buf: Box<u64> = Box::new(0);
    let mut efd_armed = false;
    let mut closed = false;
    loop {
        if !efd_armed && !closed {
            let sqe = opcode::Read::new(types::Fd(efd), &mut *efd_buf as *mut u64 as *mut u8, 8)
                .build()
                .user_data(EVENTFD_TAG);
            // SAFETY: efd_buf lives as long as the loop and is only read after completion.
            if unsafe { ring.submission().push(&sqe) }.is_ok() {
                efd_armed = true;
            }
        }
        // Take newly dispatched requests.
        loop {
            match rx.try_recv() {
                Ok(d) => {
                    let Dispatched { id, job, .. } = d;
                    let Some(sqe) = uring_sqe(&store, &job) else {
                        run_sync(&store, id, job, &notify);
                        continue;
                    };
                    let (entry, direct) = sqe;
                    let idx = free.pop().unwrap_or_else(|| {
                        slots.push(None);
                        slots.len() - 1
                    });
                    slots[idx] = Some(Slot { id, job, direct });
                    let entry = entry.user_data(idx as u64);
                    // SAFETY: the buffer the entry points at is owned by the slot until completion.
                    while unsafe { ring.submission().push(&entry) }.is_err() {
                        if let Err(e) = ring.submit() {
                            tracing::error!(error = %e, "io_uring submit failed");
                        }
                    }
                    in_ring += 1;
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    closed = true;
                    break;
                }
            }
        }
        if closed && in_ring == 0 {
            // The eventfd read may still be armed: the ring is dropped with it.
            return;
        }
        if let Err(e) = ring.submit_and_wait(1) {
            if e.raw_os_error() != Some(libc::EINTR) {
                tracing::error!(error = %e, "io_uring wait failed");
            }
            continue;
        }
        let cqes: Vec<(u64, i32)> = ring.completion().map(|c| (c.user_data(), c.result())).collect();
        for (tag, res) in cqes {
            if tag == EVENTFD_TAG {
                efd_armed = false;
                continue;
            }
            let idx = tag as usize;
            let Some(slot) = slots[idx].take() else { continue };
            free.push(idx);
            in_ring -= 1;
            let expected = match slot.job.kind {
                IoKind::Read | IoKind::Write => slot.job.len as i32,
                _ => 0,
            };
            let result: Option<IoResult> = if res == expected {
                Some(Ok(()))
            } else if res < 0 && !(res == -libc::EINVAL && slot.direct) {
                Some(Err(-res))
            } else {
                None // short transfer or O_DIRECT refusal: redo synchronously
            };
            match result {
                Some(r) => {
                    let mut job = slot.job;
                    let buf = std::mem::replace(&mut job.buf, crate::buf::AlignedBuf::empty());
                    (job.done)(r, buf);
                    let _ = notify.send(Msg::Done { id: slot.id, result: r });
                }
                // Store::execute falls back to the buffered descriptor after O_DIRECT's EINVAL.
                None => run_sync(&store, slot.id, slot.job, &notify),
            }
        }
    }
}

/// The ring entry for a read, write or flush; `None` for what runs synchronously.
fn uring_sqe(store: &Store, job: &IoJob) -> Option<(io_uring::squeue::Entry, bool)> {
    use io_uring::{opcode, types};
    let disk = store.disks.get(job.vm)?;
    if job.kind.writes() && disk.read_only {
        return None;
    }
    if job.kind != IoKind::Flush && job.offset.checked_add(job.len).is_none_or(|e| e > disk.size) {
        return None;
    }
    if job.len > i32::MAX as u64 {
        return None;
    }
    let f = &store.files[disk.file];
    let off = disk.base + job.offset;
    match job.kind {
        IoKind::Read | IoKind::Write => {
            let (fd, direct) = f.raw_fd_for(off, job.len);
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
