//! The vhost-user-blk export: a VM's disk as a virtio-blk device whose
//! virtqueues live in the hypervisor's shared guest memory (QEMU's
//! `-device vhost-user-blk-pci` with `memory-backend-memfd,share=on`), as
//! qemu-storage-daemon and SPDK's vhost target export disks.
//!
//! The vhost-user protocol, the virtqueues and guest memory are rust-vmm's
//! (`vhost-user-backend`, `vhost`, `virtio-queue`, `vm-memory`); this module
//! is the virtio-blk device (virtio 1.2 §5.2): each request's header,
//! data and status are read from and written to guest memory, and the I/O
//! goes through the engine — the same host scheduler as the NBD and FUSE
//! exports. Requests: read, write, flush, discard, write-zeroes (with
//! unmap), get-id; several queues (served by one worker thread, each
//! request completing asynchronously from the backend); event-idx
//! notification suppression.
//!
//! At the daemon's stop the device takes no more requests from its queues
//! and waits for those it took to complete: every request the guest sees
//! answered was done, and the rest stay in the guest's queue, where a
//! hypervisor that reconnects (QEMU's `-chardev socket,reconnect=N`) hands
//! them to the next daemon (QEMU resumes a broken connection's queues at
//! their used index).

use crate::buf::AlignedBuf;
use crate::config::VhostUserConfig;
use crate::engine::EngineHandle;
use crate::faults::Fault;
use crate::io::{IoJob, IoKind};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};
use vhost::vhost_user::message::{VhostUserProtocolFeatures, VhostUserVirtioFeatures};
use vhost::vhost_user::Listener;
use vhost_user_backend::{VhostUserBackend, VhostUserDaemon, VringRwLock, VringT};
use virtio_bindings::virtio_blk::*;
use virtio_bindings::virtio_config::VIRTIO_F_VERSION_1;
use virtio_bindings::virtio_ring::{VIRTIO_RING_F_EVENT_IDX, VIRTIO_RING_F_INDIRECT_DESC};
use virtio_queue::QueueOwnedT;
use vm_memory::{Bytes, GuestAddress, GuestAddressSpace, GuestMemoryAtomic, GuestMemoryMmap};
use vmm_sys_util::epoll::EventSet;
use vmm_sys_util::eventfd::EventFd;

type Memory = GuestMemoryAtomic<GuestMemoryMmap>;

const SECTOR: u64 = 512;
/// Largest data segment and request the device advertises (`size_max`).
const SIZE_MAX: u32 = 1 << 20;
/// Sectors of the largest discard or write-zeroes request.
const MAX_RANGE_SECTORS: u32 = (32 << 20) / SECTOR as u32;
/// How long a queue's stop (`GET_VRING_BASE`) waits for its requests.
const STOP_VRING_WAIT: Duration = Duration::from_secs(30);

/// One VM's disk as a vhost-user-blk device.
pub struct BlkDevice {
    vm: usize,
    name: String,
    size: u64,
    read_only: bool,
    queues: usize,
    queue_size: usize,
    engine: EngineHandle,
    mem: RwLock<Option<Memory>>,
    event_idx: AtomicBool,
    /// Set at stop: the queues are no longer read.
    stopping: AtomicBool,
    /// Held (shared) while a queue is read and its requests started, so a
    /// stop knows when no more can start.
    reading: RwLock<()>,
    in_flight: Arc<InFlight>,
}

/// Requests taken from the queues and not yet answered, per queue.
struct InFlight {
    count: Mutex<Vec<usize>>,
    answered: Condvar,
}

impl InFlight {
    fn new(queues: usize) -> InFlight {
        InFlight {
            count: Mutex::new(vec![0; queues]),
            answered: Condvar::new(),
        }
    }

    fn begin(&self, queue: usize) {
        self.count.lock().unwrap_or_else(|p| p.into_inner())[queue] += 1;
    }

    fn end(&self, queue: usize) {
        let mut n = self.count.lock().unwrap_or_else(|p| p.into_inner());
        n[queue] -= 1;
        if n[queue] == 0 {
            self.answered.notify_all();
        }
    }

    /// Unanswered requests of `queue` (every queue's if None).
    fn left(counts: &[usize], queue: Option<usize>) -> usize {
        match queue {
            Some(q) => counts.get(q).copied().unwrap_or(0),
            None => counts.iter().sum(),
        }
    }

    /// Wait until none of `queue`'s (every queue's if None) is left or
    /// `limit` has passed; how many are left.
    fn wait_none(&self, queue: Option<usize>, limit: Duration) -> usize {
        let end = Instant::now() + limit;
        let mut n = self.count.lock().unwrap_or_else(|p| p.into_inner());
        while InFlight::left(&n, queue) > 0 {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            n = self.answered.wait_timeout(n, left).unwrap_or_else(|p| p.into_inner()).0;
        }
        InFlight::left(&n, queue)
    }
}

/// A guest memory range of a request.
#[derive(Clone, Copy)]
struct Range {
    addr: GuestAddress,
    len: u32,
}

/// A request's descriptors: what the driver wrote (header, write data,
/// discard ranges) and where the device writes (read data, id, status).
struct Chain {
    head: u16,
    readable: Vec<Range>,
    writable: Vec<Range>,
}

impl Chain {
    fn readable_len(&self) -> u64 {
        self.readable.iter().map(|r| r.len as u64).sum()
    }
    fn writable_len(&self) -> u64 {
        self.writable.iter().map(|r| r.len as u64).sum()
    }
}

/// Copy `len` bytes starting `skip` bytes into `ranges` out of guest memory.
fn gather(mem: &GuestMemoryMmap, ranges: &[Range], mut skip: u64, out: &mut [u8]) -> Result<(), String> {
    let mut at = 0usize;
    for r in ranges {
        if at == out.len() {
            break;
        }
        if skip >= r.len as u64 {
            skip -= r.len as u64;
            continue;
        }
        let n = ((r.len as u64 - skip) as usize).min(out.len() - at);
        let addr = GuestAddress(r.addr.0 + skip);
        mem.read_slice(&mut out[at..at + n], addr)
            .map_err(|e| format!("guest memory at {:#x}: {e}", addr.0))?;
        at += n;
        skip = 0;
    }
    if at < out.len() {
        return Err("the request's buffers are shorter than it says".into());
    }
    Ok(())
}

/// Copy `data` into guest memory across `ranges`.
fn scatter(mem: &GuestMemoryMmap, ranges: &[Range], data: &[u8]) -> Result<(), String> {
    let mut at = 0usize;
    for r in ranges {
        if at == data.len() {
            break;
        }
        let n = (r.len as usize).min(data.len() - at);
        mem.write_slice(&data[at..at + n], r.addr)
            .map_err(|e| format!("guest memory at {:#x}: {e}", r.addr.0))?;
        at += n;
    }
    Ok(())
}

/// What a request asks for, once parsed.
enum Parsed {
    Io {
        kind: IoKind,
        offset: u64,
        len: u64,
        /// Write payload (for writes).
        buf: AlignedBuf,
    },
    GetId,
    /// Answer at once with this status.
    Status(u8),
}

impl BlkDevice {
    /// The vhost-user-blk device of VM `vm`.
    pub fn new(
        vm: usize,
        name: &str,
        size: u64,
        read_only: bool,
        cfg: &VhostUserConfig,
        engine: EngineHandle,
    ) -> BlkDevice {
        BlkDevice {
            vm,
            name: name.to_string(),
            size,
            read_only,
            queues: cfg.queues as usize,
            queue_size: cfg.queue_size as usize,
            engine,
            mem: RwLock::new(None),
            event_idx: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
            reading: RwLock::new(()),
            in_flight: Arc::new(InFlight::new(cfg.queues as usize)),
        }
    }

    /// Take no more requests from the queues and wait (at most `limit`) for
    /// those taken to be answered: how many were unanswered when the queues
    /// were closed, and how many still are.
    fn drain(&self, limit: Duration) -> (usize, usize) {
        self.stopping.store(true, Ordering::SeqCst);
        // A queue pass under way finishes starting what it took.
        drop(self.reading.write().unwrap_or_else(|p| p.into_inner()));
        let at_stop = InFlight::left(&self.in_flight.count.lock().unwrap_or_else(|p| p.into_inner()), None);
        tracing::info!(vm = %self.name, in_flight = at_stop, "vhost-user: taking no more requests");
        (at_stop, self.in_flight.wait_none(None, limit))
    }

    /// virtio-blk's configuration space (`struct virtio_blk_config`).
    fn config_space(&self) -> Vec<u8> {
        let mut c = vec![0u8; 60];
        c[0..8].copy_from_slice(&(self.size / SECTOR).to_le_bytes()); // capacity
        c[8..12].copy_from_slice(&SIZE_MAX.to_le_bytes()); // size_max
        c[12..16].copy_from_slice(&((self.queue_size as u32).saturating_sub(2)).to_le_bytes()); // seg_max
        c[20..24].copy_from_slice(&(SECTOR as u32).to_le_bytes()); // blk_size
        c[34..36].copy_from_slice(&(self.queues as u16).to_le_bytes()); // num_queues
        c[36..40].copy_from_slice(&MAX_RANGE_SECTORS.to_le_bytes()); // max_discard_sectors
        c[40..44].copy_from_slice(&1u32.to_le_bytes()); // max_discard_seg
        c[44..48].copy_from_slice(&1u32.to_le_bytes()); // discard_sector_alignment
        c[48..52].copy_from_slice(&MAX_RANGE_SECTORS.to_le_bytes()); // max_write_zeroes_sectors
        c[52..56].copy_from_slice(&1u32.to_le_bytes()); // max_write_zeroes_seg
        c[56] = 1; // write_zeroes_may_unmap
        c
    }

    fn reject(&self, fault: Fault, what: std::fmt::Arguments) -> Parsed {
        let mut logged = false;
        self.engine.faults.record(fault, &mut logged, &self.name, what);
        Parsed::Status(VIRTIO_BLK_S_IOERR as u8)
    }

    /// The I/O a request asks for, or the status to answer it with.
    fn parse(&self, mem: &GuestMemoryMmap, c: &Chain) -> Parsed {
        let mut hdr = [0u8; 16];
        if gather(mem, &c.readable, 0, &mut hdr).is_err() || c.writable_len() < 1 {
            return self.reject(
                Fault::Malformed,
                format_args!("a virtio-blk request without header or status"),
            );
        }
        let typ = u32::from_le_bytes(hdr[0..4].try_into().expect("4 bytes"));
        let sector = u64::from_le_bytes(hdr[8..16].try_into().expect("8 bytes"));
        let in_range = |offset: u64, len: u64| offset.checked_add(len).is_some_and(|e| e <= self.size);
        match typ {
            VIRTIO_BLK_T_IN | VIRTIO_BLK_T_OUT => {
                let len = if typ == VIRTIO_BLK_T_IN {
                    c.writable_len() - 1
                } else {
                    c.readable_len() - 16
                };
                let Some(offset) = sector.checked_mul(SECTOR) else {
                    return self.reject(Fault::OutOfRange, format_args!("sector {sector}"));
                };
                if len % SECTOR != 0 {
                    return self.reject(Fault::Misaligned, format_args!("{len} bytes at sector {sector}"));
                }
                if len > u32::MAX as u64 {
                    return self.reject(Fault::Oversized, format_args!("{len} bytes at sector {sector}"));
                }
                if !in_range(offset, len) {
                    return self.reject(Fault::OutOfRange, format_args!("{len} bytes at sector {sector}"));
                }
                if typ == VIRTIO_BLK_T_OUT && self.read_only {
                    return self.reject(Fault::ReadOnly, format_args!("a write at sector {sector}"));
                }
                let kind = if typ == VIRTIO_BLK_T_IN {
                    IoKind::Read
                } else {
                    IoKind::Write
                };
                let mut buf = crate::nbd::io_buffer(kind, len as u32);
                if kind == IoKind::Write && gather(mem, &c.readable, 16, buf.as_mut_slice()).is_err() {
                    return self.reject(Fault::Malformed, format_args!("write data outside guest memory"));
                }
                Parsed::Io { kind, offset, len, buf }
            }
            VIRTIO_BLK_T_FLUSH => Parsed::Io {
                kind: IoKind::Flush,
                offset: 0,
                len: 0,
                buf: AlignedBuf::empty(),
            },
            VIRTIO_BLK_T_GET_ID => Parsed::GetId,
            VIRTIO_BLK_T_DISCARD | VIRTIO_BLK_T_WRITE_ZEROES => {
                if self.read_only {
                    return self.reject(Fault::ReadOnly, format_args!("a discard or write-zeroes"));
                }
                // One segment (max_discard_seg = max_write_zeroes_seg = 1):
                // sector u64, num_sectors u32, flags u32.
                let mut seg = [0u8; 16];
                if c.readable_len() != 32 || gather(mem, &c.readable, 16, &mut seg).is_err() {
                    return self.reject(Fault::Malformed, format_args!("not one discard/write-zeroes segment"));
                }
                let start = u64::from_le_bytes(seg[0..8].try_into().expect("8 bytes"));
                let n = u32::from_le_bytes(seg[8..12].try_into().expect("4 bytes"));
                let flags = u32::from_le_bytes(seg[12..16].try_into().expect("4 bytes"));
                let (offset, len) = (start.saturating_mul(SECTOR), n as u64 * SECTOR);
                if n > MAX_RANGE_SECTORS {
                    return self.reject(Fault::Oversized, format_args!("{n} sectors at sector {start}"));
                }
                if !in_range(offset, len) {
                    return self.reject(Fault::OutOfRange, format_args!("{n} sectors at sector {start}"));
                }
                let kind = if typ == VIRTIO_BLK_T_DISCARD {
                    if flags != 0 {
                        return self.reject(Fault::BadFlags, format_args!("discard flags {flags:#x}"));
                    }
                    IoKind::Trim
                } else {
                    if flags & !VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP != 0 {
                        return self.reject(Fault::BadFlags, format_args!("write-zeroes flags {flags:#x}"));
                    }
                    IoKind::WriteZeroes {
                        punch: flags & VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP != 0,
                    }
                };
                Parsed::Io {
                    kind,
                    offset,
                    len,
                    buf: AlignedBuf::empty(),
                }
            }
            _ => {
                let mut logged = false;
                let what = format_args!("virtio-blk request type {typ}");
                self.engine
                    .faults
                    .record(Fault::UnknownCommand, &mut logged, &self.name, what);
                Parsed::Status(VIRTIO_BLK_S_UNSUPP as u8)
            }
        }
    }

    /// Start every request the driver has made available on queue `queue`.
    fn process_queue(&self, queue: usize, vring: &VringRwLock, mem: &Memory) -> Result<(), QueueError> {
        let chains: Vec<Chain> = {
            let guard = mem.memory();
            let mut state = vring.get_mut();
            let iter = state.get_queue_mut().iter(guard)?;
            iter.map(|chain| {
                let head = chain.head_index();
                let (mut readable, mut writable) = (Vec::new(), Vec::new());
                for d in chain {
                    let r = Range {
                        addr: d.addr(),
                        len: d.len(),
                    };
                    if d.is_write_only() {
                        writable.push(r);
                    } else {
                        readable.push(r);
                    }
                }
                Chain {
                    head,
                    readable,
                    writable,
                }
            })
            .collect()
        };
        for c in chains {
            self.start(queue, c, vring, mem);
        }
        Ok(())
    }

    fn start(&self, queue: usize, c: Chain, vring: &VringRwLock, mem: &Memory) {
        let m = mem.memory();
        let parsed = self.parse(&m, &c);
        let event_idx = self.event_idx.load(Ordering::Relaxed);
        let (vring, mem) = (vring.clone(), mem.clone());
        let finish = move |c: Chain, status: u8, data: Option<&[u8]>| {
            let m = mem.memory();
            let total = c.writable_len();
            let mut used = 1u32;
            if let Some(d) = data {
                // Read data fills the writable buffers up to the status byte.
                if scatter(&m, &c.writable, d).is_ok() {
                    used += d.len() as u32;
                }
            }
            // The status is the last writable byte.
            let mut at = total - 1;
            for r in &c.writable {
                if at < r.len as u64 {
                    let _ = m.write_obj(status, GuestAddress(r.addr.0 + at));
                    break;
                }
                at -= r.len as u64;
            }
            if vring.add_used(c.head, used).is_err() {
                return;
            }
            if !event_idx || vring.needs_notification().unwrap_or(true) {
                let _ = vring.signal_used_queue();
            }
        };
        match parsed {
            Parsed::Status(s) => finish(c, s, None),
            Parsed::GetId => {
                let mut id = [0u8; VIRTIO_BLK_ID_BYTES as usize];
                let name = format!("hvio-{}", self.name);
                let n = name.len().min(id.len());
                id[..n].copy_from_slice(&name.as_bytes()[..n]);
                let room = (c.writable_len() - 1).min(id.len() as u64) as usize;
                finish(c, VIRTIO_BLK_S_OK as u8, Some(&id[..room]));
            }
            Parsed::Io { kind, offset, len, buf } => {
                let in_flight = self.in_flight.clone();
                in_flight.begin(queue);
                let finish = move |c: Chain, status: u8, data: Option<&[u8]>| {
                    finish(c, status, data);
                    in_flight.end(queue);
                };
                self.engine.submit(IoJob {
                    vm: self.vm,
                    kind,
                    offset,
                    len,
                    fua: false,
                    buf,
                    done: Box::new(move |res, buf| match res {
                        Ok(()) if kind == IoKind::Read => finish(c, VIRTIO_BLK_S_OK as u8, Some(buf.as_slice())),
                        Ok(()) => finish(c, VIRTIO_BLK_S_OK as u8, None),
                        Err(_) => finish(c, VIRTIO_BLK_S_IOERR as u8, None),
                    }),
                });
            }
        }
    }
}

impl VhostUserBackend for BlkDevice {
    type Bitmap = ();
    type Vring = VringRwLock;

    fn num_queues(&self) -> usize {
        self.queues
    }

    fn max_queue_size(&self) -> usize {
        self.queue_size
    }

    fn features(&self) -> u64 {
        let mut f = 1u64 << VIRTIO_F_VERSION_1
            | 1 << VIRTIO_RING_F_INDIRECT_DESC
            | 1 << VIRTIO_RING_F_EVENT_IDX
            | 1 << VIRTIO_BLK_F_SIZE_MAX
            | 1 << VIRTIO_BLK_F_SEG_MAX
            | 1 << VIRTIO_BLK_F_BLK_SIZE
            | 1 << VIRTIO_BLK_F_FLUSH
            | 1 << VIRTIO_BLK_F_DISCARD
            | 1 << VIRTIO_BLK_F_WRITE_ZEROES
            | VhostUserVirtioFeatures::PROTOCOL_FEATURES.bits();
        if self.queues > 1 {
            f |= 1 << VIRTIO_BLK_F_MQ;
        }
        if self.read_only {
            f |= 1 << VIRTIO_BLK_F_RO;
        }
        f
    }

    fn protocol_features(&self) -> VhostUserProtocolFeatures {
        VhostUserProtocolFeatures::CONFIG | VhostUserProtocolFeatures::MQ
    }

    fn set_event_idx(&self, enabled: bool) {
        self.event_idx.store(enabled, Ordering::Relaxed);
    }

    fn get_config(&self, offset: u32, size: u32) -> Vec<u8> {
        let c = self.config_space();
        let start = (offset as usize).min(c.len());
        let end = start.saturating_add(size as usize).min(c.len());
        c[start..end].to_vec()
    }

    fn update_memory(&self, mem: Memory) -> std::io::Result<()> {
        *self.mem.write().unwrap_or_else(|p| p.into_inner()) = Some(mem);
        Ok(())
    }

    /// `GET_VRING_BASE`: the queue is no longer read (its kick is
    /// unregistered and it is marked not ready); answer the requests taken
    /// from it before the hypervisor learns where the queue stands, so none
    /// is answered into a ring the driver has since reset or handed on.
    fn stop_vring(&self, queue_index: u32) -> std::io::Result<()> {
        // A pass under way finishes starting what it took.
        drop(self.reading.write().unwrap_or_else(|p| p.into_inner()));
        let left = self.in_flight.wait_none(Some(queue_index as usize), STOP_VRING_WAIT);
        if left > 0 {
            tracing::warn!(vm = %self.name, queue = queue_index, left, "vhost-user: queue stopped with requests unanswered");
        }
        Ok(())
    }

    fn handle_event(
        &self,
        device_event: u16,
        _evset: EventSet,
        vrings: &[VringRwLock],
        _thread_id: usize,
    ) -> std::io::Result<()> {
        let queue = device_event as usize;
        if device_event == self.connection_end_event() {
            // Ends the worker's loop (see `Connection`).
            return Err(std::io::Error::other("the hypervisor connection ended"));
        }
        let Some(vring) = vrings.get(queue) else {
            return Ok(());
        };
        let Some(mem) = self.mem.read().unwrap_or_else(|p| p.into_inner()).clone() else {
            return Ok(());
        };
        let _reading = self.reading.read().unwrap_or_else(|p| p.into_inner());
        if self.stopping.load(Ordering::SeqCst) {
            // Left in the queue for the next daemon (see the module doc).
            return Ok(());
        }
        match self.serve_queue(queue, vring, &mem) {
            // An event taken from epoll just before `GET_VRING_BASE` stopped
            // the queue: nothing to do (an error would end the worker).
            Ok(()) | Err(QueueError::NotReady) => Ok(()),
            Err(e) => {
                // The worker thread ends with this error and vhost-user-backend
                // drops it unseen: the queue is served no more.
                tracing::error!(vm = %self.name, queue, error = %e, "vhost-user: the queue's worker stops");
                Err(std::io::Error::other(e.to_string()))
            }
        }
    }
}

/// Why a queue cannot be read.
#[derive(Debug, thiserror::Error)]
enum QueueError {
    /// Stopped by the hypervisor (`GET_VRING_BASE`), or not yet set up.
    #[error("the queue is not ready")]
    NotReady,
    /// Anything else: a virtqueue the driver broke, guest memory out of reach.
    #[error("virtqueue: {0}")]
    Virtqueue(virtio_queue::Error),
}

impl From<virtio_queue::Error> for QueueError {
    fn from(e: virtio_queue::Error) -> QueueError {
        match e {
            virtio_queue::Error::QueueNotReady => QueueError::NotReady,
            e => QueueError::Virtqueue(e),
        }
    }
}

impl BlkDevice {
    /// The epoll event of a connection's exit eventfd in the queue worker
    /// (0..queues are the queues, `queues` is vhost-user-backend's own).
    fn connection_end_event(&self) -> u16 {
        self.queues as u16 + 1
    }

    /// Take and start the requests on queue `queue`.
    fn serve_queue(&self, queue: usize, vring: &VringRwLock, mem: &Memory) -> Result<(), QueueError> {
        if !self.event_idx.load(Ordering::Relaxed) {
            return self.process_queue(queue, vring, mem);
        }
        // With event-idx: take everything, re-enable kicks, and take what
        // arrived meanwhile (enable_notification says if anything did).
        loop {
            vring.disable_notification()?;
            self.process_queue(queue, vring, mem)?;
            if !vring.enable_notification()? {
                return Ok(());
            }
        }
    }
}

/// One hypervisor connection: vhost-user-backend's daemon (the protocol
/// thread and the queue worker) and the eventfd that ends the worker.
///
/// The worker's exit event is ours rather than vhost-user-backend's
/// (`VhostUserBackend::exit_event`): the library hands that eventfd to the
/// worker's epoll with `into_raw_fd` and never closes it, one descriptor
/// lost per connection. Ours is registered as an extra listener, ends the
/// worker through `handle_event`, and is closed with the connection.
struct Connection {
    daemon: VhostUserDaemon<Arc<BlkDevice>>,
    exit: EventFd,
}

impl Connection {
    fn new(name: &str, device: &Arc<BlkDevice>) -> std::io::Result<Connection> {
        let mem = GuestMemoryAtomic::new(GuestMemoryMmap::new());
        let daemon = VhostUserDaemon::new(name.to_string(), device.clone(), mem)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        let exit = EventFd::new(libc::EFD_NONBLOCK | libc::EFD_CLOEXEC)?;
        for worker in daemon.get_epoll_handlers() {
            worker.register_listener(exit.as_raw_fd(), EventSet::IN, device.connection_end_event() as u64)?;
        }
        Ok(Connection { daemon, exit })
    }
}

impl Drop for Connection {
    /// The worker leaves its loop, so dropping the daemon (which joins it)
    /// returns; then the eventfd closes.
    fn drop(&mut self) {
        if let Err(e) = self.exit.write(1) {
            tracing::error!(error = %e, "vhost-user: cannot end the queue worker");
        }
    }
}

/// A listening vhost-user-blk socket: one hypervisor connection at a time,
/// served until it disconnects, then the next; stopped by [`Export::stop`].
pub struct Export {
    path: PathBuf,
    device: Arc<BlkDevice>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Export {
    /// Listen on `path` (a stale socket there is replaced, never a file).
    pub fn start(path: &Path, device: BlkDevice) -> std::io::Result<Export> {
        let listener = Listener::new(path, false).map_err(|e| std::io::Error::other(e.to_string()))?;
        let device = Arc::new(device);
        let stop = Arc::new(AtomicBool::new(false));
        let (stop2, name) = (stop.clone(), format!("hvio-vhost-{}", device.name));
        let served = device.clone();
        let thread = std::thread::Builder::new().name(name.clone()).spawn(move || {
            let mut listener = listener;
            while !stop2.load(Ordering::Relaxed) {
                let mut conn = match Connection::new(&name, &device) {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::error!(vm = %device.name, error = %e, "vhost-user: cannot start the device");
                        return;
                    }
                };
                if let Err(e) = conn.daemon.start(&mut listener) {
                    tracing::warn!(vm = %device.name, error = %e, "vhost-user: accept failed");
                    drop(conn);
                    std::thread::sleep(std::time::Duration::from_millis(100));
                    continue;
                }
                if stop2.load(Ordering::Relaxed) {
                    break;
                }
                tracing::info!(vm = %device.name, "vhost-user: hypervisor connected");
                let ended = conn.daemon.wait();
                drop(conn);
                // The guest's memory is unmapped with the connection (a
                // request still in flight holds it until answered).
                *device.mem.write().unwrap_or_else(|p| p.into_inner()) = None;
                match ended {
                    Err(e) => tracing::info!(vm = %device.name, error = %e, "vhost-user: hypervisor disconnected"),
                    Ok(()) => tracing::info!(vm = %device.name, "vhost-user: hypervisor disconnected"),
                }
            }
        })?;
        Ok(Export {
            path: path.to_path_buf(),
            device: served,
            stop,
            thread: Some(thread),
        })
    }

    /// Stop accepting, take no more requests, wait (at most `limit`) for
    /// the requests taken to be answered (the engine must still run), and
    /// remove the socket. A connected hypervisor keeps its connection, its
    /// requests left queued, until it disconnects or the process exits.
    pub fn stop(mut self, limit: Duration) {
        let (in_flight, left) = self.device.drain(limit);
        if left > 0 {
            tracing::warn!(vm = %self.device.name, in_flight, left, "vhost-user: requests still unanswered at stop");
        } else {
            tracing::info!(vm = %self.device.name, in_flight, "vhost-user: every request taken was answered");
        }
        self.stop.store(true, Ordering::Relaxed);
        // Wake the accept if no hypervisor is connected.
        let _ = std::os::unix::net::UnixStream::connect(&self.path);
        let _ = std::fs::remove_file(&self.path);
        if let Some(t) = self.thread.take() {
            if t.is_finished() {
                let _ = t.join();
            }
        }
    }
}
