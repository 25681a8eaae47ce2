//! The emulator backend: data lives in a file, but each request completes at
//! the real time the device model (hvio_device's HDD or SSD) says, so real
//! applications see an emulated disk's seeks and rotations.
//!
//! One thread owns the model (a single actuator): requests are submitted to
//! it in the order the scheduler dispatched them, at the real time they were
//! dispatched, so the model's state (head position, cache) evolves with the
//! real dispatch order. When the model completes a request, the thread does
//! the real I/O on the data file (buffered: it takes microseconds, against
//! the model's milliseconds) and answers.

use crate::config::Config;
use crate::daemon::ServeError;
use crate::engine::{Backend, Dispatched, Msg};
use crate::io::IoJob;
use crate::store::Store;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use hvio_core::{Completion, Device, DeviceInfo, Nanos, SECTOR_BYTES};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Build the model `[store.device]` describes (default: the 7200 RPM HDD)
/// and the emulator over `store`; returns it with the model's `DeviceInfo`
/// (what the scheduler is told: capacity, rotational, depth, seek curve).
pub fn build(
    cfg: &Config,
    store: Arc<Store>,
    notify: Sender<Msg>,
) -> Result<(Box<dyn Backend>, DeviceInfo), ServeError> {
    let dc = cfg.device_config().map_err(|e| ServeError::Other(e.to_string()))?;
    let dev = hvio_device::build_device(&dc, std::path::Path::new("."))
        .map_err(|e| ServeError::Other(format!("[store.device]: {e}")))?;
    let mut info = dev.info();
    let need = store.capacity() / SECTOR_BYTES;
    if need > info.capacity {
        return Err(ServeError::Other(format!(
            "[store.device]: the VMs' disks span {need} sectors but the emulated device has {}",
            info.capacity
        )));
    }
    if let Some(r) = cfg.store.rotational {
        info.rotational = r;
    }
    tracing::info!(
        capacity = info.capacity,
        depth = info.queue_depth,
        rotational = info.rotational,
        "emulated device"
    );
    let e = Emulator::new(dev, store, notify).map_err(|err| ServeError::Io {
        what: "start",
        path: "the emulator thread".into(),
        err,
    })?;
    Ok((Box::new(e), info))
}

/// The HDD emulator: serves requests from the store at the times the disk model gives.
pub struct Emulator {
    tx: Option<Sender<Dispatched>>,
    thread: Option<JoinHandle<()>>,
}

impl Emulator {
    /// Run `device` on its own thread over `store`'s data.
    pub fn new(device: Box<dyn Device>, store: Arc<Store>, notify: Sender<Msg>) -> std::io::Result<Emulator> {
        let (tx, rx) = crossbeam_channel::unbounded();
        let thread = std::thread::Builder::new()
            .name("hvio-emulator".into())
            .spawn(move || emulate(device, rx, store, notify))?;
        Ok(Emulator {
            tx: Some(tx),
            thread: Some(thread),
        })
    }
}

impl Backend for Emulator {
    fn submit(&mut self, d: Dispatched) {
        if let Some(tx) = &self.tx {
            if let Err(e) = tx.send(d) {
                e.0.job.finish(Err(libc::ESHUTDOWN));
            }
        }
    }

    fn stop(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        self.stop();
    }
}

fn emulate(mut dev: Box<dyn Device>, rx: Receiver<Dispatched>, store: Arc<Store>, notify: Sender<Msg>) {
    let epoch = Instant::now();
    let now = || epoch.elapsed().as_nanos() as Nanos + 1;
    let mut jobs: HashMap<u64, (u64, IoJob)> = HashMap::new();
    let mut backlog: VecDeque<Dispatched> = VecDeque::new();
    let mut done: Vec<Completion> = Vec::new();
    let mut closed = false;
    loop {
        let t = now();
        dev.advance(t, &mut done);
        for c in done.drain(..) {
            let Some((id, job)) = jobs.remove(&c.rq.id) else {
                tracing::error!(rq = c.rq.id, "emulator: model completed an unknown request");
                continue;
            };
            crate::backend::run_sync(&store, id, job, &notify);
        }
        while dev.can_accept() {
            let Some(d) = backlog.pop_front() else { break };
            dev.submit(d.rq, now());
            jobs.insert(d.rq.id, (d.id, d.job));
        }
        if closed && jobs.is_empty() && backlog.is_empty() {
            return;
        }
        let msg = match dev.next_event() {
            Some(at) => {
                let deadline = epoch + Duration::from_nanos(at.saturating_sub(1));
                if closed {
                    std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
                    continue;
                }
                match rx.recv_deadline(deadline) {
                    Ok(d) => Some(d),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => {
                        closed = true;
                        None
                    }
                }
            }
            None if closed => {
                // Nothing in the model and nothing can arrive: whatever is left can never complete.
                for (_, (id, job)) in jobs.drain() {
                    job.finish(Err(libc::EIO));
                    let _ = notify.send(Msg::Done {
                        id,
                        result: Err(libc::EIO),
                    });
                }
                return;
            }
            None => match rx.recv() {
                Ok(d) => Some(d),
                Err(_) => {
                    closed = true;
                    None
                }
            },
        };
        if let Some(d) = msg {
            backlog.push_back(d);
            while let Ok(d) = rx.try_recv() {
                backlog.push_back(d);
            }
        }
    }
}
