//! The vhost-user-blk export kept busy by a driver that behaves like
//! Linux's virtio-blk with `VIRTIO_RING_F_EVENT_IDX`: this test is the
//! hypervisor and the guest. It shares its memory (a memfd) with a daemon
//! running in this process, keeps 16 requests in flight on each of two
//! queues (random 4 KiB reads and writes over a file whose every block says
//! which block and which version it holds), kicks only when the device's
//! `avail_event` asks for it, and sleeps on the call eventfd with its
//! `used_event` set as Linux sets it. Every answer is checked: the status,
//! the length, the data (a read returns the block's last version written).
//!
//! A request the device never answers, or an answer it never signals, stops
//! the driver: after `HVIO_STRESS_WAIT_S` (5) seconds without an interrupt
//! the test fails with what the rings say (used index against the
//! driver's, `avail_event` against the avail index) and the daemon's
//! `/status`. `HVIO_STRESS_REQUESTS` sets the number of requests per queue.
//!
//! The same driver then disconnects and connects again: the export serves
//! one hypervisor connection after another.

mod common;
use common::*;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use vhost::vhost_user::message::VhostUserProtocolFeatures;
use vhost::vhost_user::{Frontend, VhostUserFrontend};
use vhost::{VhostBackend, VhostUserMemoryRegionInfo, VringConfigData};
use vm_memory::{Bytes, GuestAddress, GuestMemoryBackend, GuestMemoryMmap};
use vmm_sys_util::eventfd::EventFd;

const QUEUES: usize = 2;
const QUEUE: u16 = 256;
/// Requests in flight per queue (fio's iodepth in the benchmark's guest).
const DEPTH: u16 = 16;
const BLOCK: u64 = 4096;
/// Blocks of the disk.
const BLOCKS: u64 = 8192;
/// Each queue's part of guest memory.
const PART: u64 = 1 << 20;
/// Offsets in a queue's part: descriptor table, avail ring, used ring,
/// request headers (16 bytes each), status bytes, data (a block each).
const DESC: u64 = 0;
const AVAIL: u64 = 0x1000;
const USED: u64 = 0x2000;
const HDR: u64 = 0x3000;
const STATUS: u64 = 0x3800;
const DATA: u64 = 0x10000;

const VIRTQ_DESC_F_NEXT: u16 = 1;
const VIRTQ_DESC_F_WRITE: u16 = 2;
const VIRTIO_BLK_T_IN: u32 = 0;
const VIRTIO_BLK_T_OUT: u32 = 1;
const VIRTIO_F_EVENT_IDX: u64 = 1 << 29;

/// Block `block`'s contents at version `version`.
fn pattern(block: u64, version: u64) -> Vec<u8> {
    let mut b = Vec::with_capacity(BLOCK as usize);
    for i in 0..BLOCK / 8 {
        let w = if i == 0 {
            block
        } else if i == 1 {
            version
        } else {
            (block << 32 ^ version << 16 ^ i).wrapping_mul(0x9e37_79b9_7f4a_7c15)
        };
        b.extend_from_slice(&w.to_le_bytes());
    }
    b
}

/// Linux's `vring_need_event`: whether moving an index from `old` to `new`
/// passes `event`.
fn need_event(event: u16, new: u16, old: u16) -> bool {
    new.wrapping_sub(event).wrapping_sub(1) < new.wrapping_sub(old)
}

/// Guest memory shared with the daemon: one part per queue.
struct Memory {
    mem: GuestMemoryMmap,
}

impl Memory {
    fn new() -> Memory {
        let mem = memfd_guest_memory(PART as usize * QUEUES);
        Memory { mem }
    }

    fn host_addr(&self, gpa: u64) -> u64 {
        self.mem.get_host_address(GuestAddress(gpa)).unwrap() as u64
    }

    /// Connect to the export at `sock` with event-idx and start every queue at 0.
    fn attach(&self, sock: &Path) -> (Frontend, Vec<(EventFd, EventFd)>) {
        // A fresh start: empty rings.
        for q in 0..QUEUES as u64 {
            self.mem.write_slice(&[0u8; 0x3000], GuestAddress(q * PART)).unwrap();
        }
        let mut f = Frontend::connect(sock, QUEUES as u64).unwrap();
        f.set_owner().unwrap();
        let features = f.get_features().unwrap();
        assert!(features & VIRTIO_F_EVENT_IDX != 0, "the export offers no event-idx");
        f.set_features(features).unwrap();
        let proto = f.get_protocol_features().unwrap();
        f.set_protocol_features(proto & (VhostUserProtocolFeatures::CONFIG | VhostUserProtocolFeatures::MQ))
            .unwrap();
        let region =
            VhostUserMemoryRegionInfo::from_guest_region(self.mem.find_region(GuestAddress(0)).unwrap()).unwrap();
        f.set_mem_table(&[region]).unwrap();
        let mut fds = Vec::new();
        for q in 0..QUEUES {
            let base = q as u64 * PART;
            f.set_vring_num(q, QUEUE).unwrap();
            f.set_vring_addr(
                q,
                &VringConfigData {
                    queue_max_size: QUEUE,
                    queue_size: QUEUE,
                    flags: 0,
                    desc_table_addr: self.host_addr(base + DESC),
                    used_ring_addr: self.host_addr(base + USED),
                    avail_ring_addr: self.host_addr(base + AVAIL),
                    log_addr: None,
                },
            )
            .unwrap();
            f.set_vring_base(q, 0).unwrap();
            let kick = EventFd::new(libc::EFD_NONBLOCK).unwrap();
            let call = EventFd::new(libc::EFD_NONBLOCK).unwrap();
            f.set_vring_call(q, &call).unwrap();
            f.set_vring_kick(q, &kick).unwrap();
            f.set_vring_enable(q, true).unwrap();
            fds.push((kick, call));
        }
        (f, fds)
    }
}

/// One queue of the shared memory, with its kick and call eventfds.
struct Ring<'a> {
    mem: &'a GuestMemoryMmap,
    q: usize,
    kick: &'a EventFd,
    call: &'a EventFd,
}

/// What one queue's driver did.
#[derive(Default, Debug)]
struct Counts {
    reads: u64,
    writes: u64,
    kicks: u64,
    interrupts: u64,
}

/// One queue's driver: `requests` random reads and writes (one in four) at
/// `DEPTH` in flight over the blocks `b` with `b % QUEUES == q`, every
/// answer checked. Fails, with what the rings say, when no interrupt comes
/// for `wait` while requests are outstanding.
fn drive(ring: Ring, requests: u64, wait: Duration, versions: &mut [u64], status: &dyn Fn() -> String) -> Counts {
    let Ring { mem, q, kick, call } = ring;
    let base = q as u64 * PART;
    let at = |off: u64| GuestAddress(base + off);
    let mut rng = 0x2545_f491_4f6c_dd1d_u64 ^ (q as u64 + 1);
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut free: Vec<u16> = (0..DEPTH).rev().collect();
    // Per slot: (block, is a write, the version written).
    let mut slots: Vec<Option<(u64, bool, u64)>> = vec![None; DEPTH as usize];
    let mut busy = std::collections::HashSet::new();
    let (mut avail_idx, mut last_used, mut made, mut answered) = (0u16, 0u16, 0u64, 0u64);
    let mut counts = Counts::default();
    let used_idx = || {
        let v: u16 = mem.read_obj(at(USED + 2)).unwrap();
        fence(Ordering::SeqCst);
        v
    };
    while answered < requests {
        // Make requests available (virtio_queue_rq, then virtqueue_kick).
        let old = avail_idx;
        while made < requests {
            let Some(s) = free.pop() else { break };
            let block = loop {
                let b = (next() % (BLOCKS / QUEUES as u64)) * QUEUES as u64 + q as u64;
                if busy.insert(b) {
                    break b;
                }
            };
            let write = next() % 4 == 0;
            let version = versions[block as usize] + 1;
            let hdr = HDR + 16 * s as u64;
            let data = DATA + BLOCK * s as u64;
            let typ = if write { VIRTIO_BLK_T_OUT } else { VIRTIO_BLK_T_IN };
            mem.write_obj(typ, at(hdr)).unwrap();
            mem.write_obj(0u32, at(hdr + 4)).unwrap();
            mem.write_obj(block * BLOCK / 512, at(hdr + 8)).unwrap();
            if write {
                mem.write_slice(&pattern(block, version), at(data)).unwrap();
            } else {
                mem.write_slice(&[0u8; BLOCK as usize], at(data)).unwrap();
            }
            mem.write_obj(0xffu8, at(STATUS + s as u64)).unwrap();
            let data_flags = VIRTQ_DESC_F_NEXT | if write { 0 } else { VIRTQ_DESC_F_WRITE };
            let parts = [
                (base + hdr, 16u32, VIRTQ_DESC_F_NEXT),
                (base + data, BLOCK as u32, data_flags),
                (base + STATUS + s as u64, 1, VIRTQ_DESC_F_WRITE),
            ];
            let d = 3 * s;
            for (k, (addr, len, flags)) in parts.into_iter().enumerate() {
                let desc = DESC + 16 * (d as u64 + k as u64);
                mem.write_obj(addr, at(desc)).unwrap();
                mem.write_obj(len, at(desc + 8)).unwrap();
                mem.write_obj(flags, at(desc + 12)).unwrap();
                mem.write_obj(d + k as u16 + 1, at(desc + 14)).unwrap();
            }
            mem.write_obj(d, at(AVAIL + 4 + 2 * (avail_idx % QUEUE) as u64))
                .unwrap();
            avail_idx = avail_idx.wrapping_add(1);
            slots[s as usize] = Some((block, write, version));
            made += 1;
        }
        if avail_idx != old {
            fence(Ordering::SeqCst);
            mem.write_obj(avail_idx, at(AVAIL + 2)).unwrap();
            fence(Ordering::SeqCst);
            let avail_event: u16 = mem.read_obj(at(USED + 4 + 8 * QUEUE as u64)).unwrap();
            if need_event(avail_event, avail_idx, old) {
                kick.write(1).unwrap();
                counts.kicks += 1;
            }
        }
        // virtqueue_enable_cb: ask for an interrupt at the next answer, then
        // look again (an answer may have come meanwhile).
        mem.write_obj(last_used, at(AVAIL + 4 + 2 * QUEUE as u64)).unwrap();
        fence(Ordering::SeqCst);
        if used_idx() == last_used {
            let mut pfd = libc::pollfd {
                fd: call.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            let n = unsafe { libc::poll(&mut pfd, 1, wait.as_millis() as i32) };
            if n == 0 {
                let avail_event: u16 = mem.read_obj(at(USED + 4 + 8 * QUEUE as u64)).unwrap();
                let used = used_idx();
                let why = if used != last_used {
                    "the device answered but did not signal"
                } else if avail_event != avail_idx {
                    "requests made available were not taken"
                } else {
                    "requests taken were not answered"
                };
                panic!(
                    "queue {q}: no interrupt for {} s with {} requests outstanding: {why} \
                     (driver: avail idx {avail_idx}, used idx seen {last_used}; device: used idx {used}, \
                     avail_event {avail_event}; {counts:?}, {answered} answered)\nthe daemon's /status: {}",
                    wait.as_secs(),
                    made - answered,
                    status()
                );
            }
            let _ = call.read();
            counts.interrupts += 1;
        }
        // virtblk_done: take every answer.
        while used_idx() != last_used {
            let elem = USED + 4 + 8 * (last_used % QUEUE) as u64;
            let id: u32 = mem.read_obj(at(elem)).unwrap();
            let len: u32 = mem.read_obj(at(elem + 4)).unwrap();
            let s = (id / 3) as u16;
            assert!(
                id.is_multiple_of(3) && s < DEPTH,
                "queue {q}: used element names descriptor {id}"
            );
            let (block, write, version) = slots[s as usize]
                .take()
                .unwrap_or_else(|| panic!("queue {q}: slot {s} answered twice"));
            let st: u8 = mem.read_obj(at(STATUS + s as u64)).unwrap();
            assert_eq!(
                st, 0,
                "queue {q}: block {block} (write {write}) answered with status {st}"
            );
            if write {
                assert_eq!(len, 1, "queue {q}: a write's used length");
                versions[block as usize] = version;
                counts.writes += 1;
            } else {
                assert_eq!(len as u64, BLOCK + 1, "queue {q}: a read's used length");
                let mut got = vec![0u8; BLOCK as usize];
                mem.read_slice(&mut got, at(DATA + BLOCK * s as u64)).unwrap();
                let want = versions[block as usize];
                assert!(
                    got == pattern(block, want),
                    "queue {q}: block {block} read back as block {} version {}, not version {want}",
                    u64::from_le_bytes(got[0..8].try_into().unwrap()),
                    u64::from_le_bytes(got[8..16].try_into().unwrap())
                );
                counts.reads += 1;
            }
            busy.remove(&block);
            free.push(s);
            last_used = last_used.wrapping_add(1);
            answered += 1;
        }
    }
    counts
}

fn env(key: &str, default: u64) -> u64 {
    std::env::var(key).ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// Run every queue's driver over the export at `sock` (a connection of its
/// own), within `limit` (a hypervisor the export never answers fails the
/// test instead of hanging it).
fn run_connection(
    mem: Arc<Memory>,
    sock: PathBuf,
    requests: u64,
    mut versions: Vec<Vec<u64>>,
    status: Arc<dyn Fn() -> String + Send + Sync>,
    limit: Duration,
) -> Vec<Vec<u64>> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (frontend, fds) = mem.attach(&sock);
        let wait = Duration::from_secs(env("HVIO_STRESS_WAIT_S", 5));
        let t0 = Instant::now();
        let counts: Vec<Counts> = std::thread::scope(|scope| {
            let handles: Vec<_> = fds
                .iter()
                .zip(versions.iter_mut())
                .enumerate()
                .map(|(q, ((kick, call), v))| {
                    let (m, status) = (&mem.mem, &status);
                    scope.spawn(move || drive(Ring { mem: m, q, kick, call }, requests, wait, v, &**status))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        });
        eprintln!(
            "{} requests on {QUEUES} queues in {:.1} s: {counts:?}",
            requests * QUEUES as u64,
            t0.elapsed().as_secs_f64()
        );
        drop(frontend);
        let _ = tx.send(versions);
    });
    match rx.recv_timeout(limit) {
        Ok(v) => v,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("the hypervisor connection was not served within {} s", limit.as_secs())
        }
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => panic!("a queue's driver failed (above)"),
    }
}

#[test]
fn event_idx_driver_gets_every_answer_and_interrupt() {
    let d = Daemon::start(&format!(
        "[store]\npath = \"@DIR@/disk.img\"\n[scheduler]\nname = \"noop\"\n[control]\nhttp = \"127.0.0.1:0\"\n\
         [[vm]]\nname = \"vm1\"\nsize = \"{}\"\n[vm.vhost_user]\nsocket = \"@DIR@/vu.sock\"\nqueues = {QUEUES}\n",
        BLOCKS * BLOCK
    ));
    // Every block at version 0.
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(d.path("disk.img"))
        .unwrap();
    for b in 0..BLOCKS {
        file.write_all_at(&pattern(b, 0), b * BLOCK).unwrap();
    }
    file.sync_all().unwrap();
    let addr = d.control_addr();
    let status: Arc<dyn Fn() -> String + Send + Sync> = Arc::new(move || http(addr, "GET", "/status", "").1);
    let mem = Arc::new(Memory::new());
    let versions = vec![vec![0u64; BLOCKS as usize]; QUEUES];
    let requests = env("HVIO_STRESS_REQUESTS", 20_000);
    let limit = Duration::from_secs(600 + requests / 1000);
    let versions = run_connection(
        mem.clone(),
        d.path("vu.sock"),
        requests,
        versions,
        status.clone(),
        limit,
    );
    // The hypervisor disconnects and connects again: served as well.
    let versions = run_connection(mem, d.path("vu.sock"), 2_000, versions, status, Duration::from_secs(60));
    let dir = d.stop();
    // The backing file holds every block's last version.
    let file = std::fs::File::open(dir.path().join("disk.img")).unwrap();
    let mut got = vec![0u8; BLOCK as usize];
    for b in 0..BLOCKS {
        file.read_exact_at(&mut got, b * BLOCK).unwrap();
        let want = versions[b as usize % QUEUES][b as usize];
        assert!(
            got == pattern(b, want),
            "block {b} in the backing file is not version {want}"
        );
    }
}

/// `GET_VRING_BASE` (QEMU stopping the device: a guest reset, a reboot, a
/// VM stop) while requests are in flight on an emulated HDD: when the reply
/// comes every request taken from the queue has been answered (in the used
/// ring, with its status), so the hypervisor, which then drops the call
/// eventfd and may reset the ring, loses none.
#[test]
fn get_vring_base_answers_the_requests_taken_first() {
    let d = Daemon::start(&format!(
        "[store]\nkind = \"emulator\"\npath = \"@DIR@/disk.img\"\n[store.device]\nmodel = \"hdd\"\n\
         [scheduler]\nname = \"cfq\"\n[[vm]]\nname = \"vm1\"\nsize = \"{}\"\n\
         [vm.vhost_user]\nsocket = \"@DIR@/vu.sock\"\nqueues = {QUEUES}\n",
        BLOCKS * BLOCK
    ));
    let mem = Memory::new();
    let (frontend, fds) = mem.attach(&d.path("vu.sock"));
    let m = &mem.mem;
    let at = GuestAddress;
    // DEPTH reads spread over the disk (the HDD seeks for each).
    for s in 0..DEPTH {
        let (hdr, data) = (HDR + 16 * s as u64, DATA + BLOCK * s as u64);
        m.write_obj(VIRTIO_BLK_T_IN, at(hdr)).unwrap();
        m.write_obj(0u32, at(hdr + 4)).unwrap();
        m.write_obj(s as u64 * 509 % BLOCKS * BLOCK / 512, at(hdr + 8)).unwrap();
        m.write_obj(0xffu8, at(STATUS + s as u64)).unwrap();
        let parts = [
            (hdr, 16u32, VIRTQ_DESC_F_NEXT),
            (data, BLOCK as u32, VIRTQ_DESC_F_NEXT | VIRTQ_DESC_F_WRITE),
            (STATUS + s as u64, 1, VIRTQ_DESC_F_WRITE),
        ];
        for (k, (addr, len, flags)) in parts.into_iter().enumerate() {
            let desc = DESC + 16 * (3 * s as u64 + k as u64);
            m.write_obj(addr, at(desc)).unwrap();
            m.write_obj(len, at(desc + 8)).unwrap();
            m.write_obj(flags, at(desc + 12)).unwrap();
            m.write_obj(3 * s + k as u16 + 1, at(desc + 14)).unwrap();
        }
        m.write_obj(3 * s, at(AVAIL + 4 + 2 * s as u64)).unwrap();
    }
    fence(Ordering::SeqCst);
    m.write_obj(DEPTH, at(AVAIL + 2)).unwrap();
    fence(Ordering::SeqCst);
    fds[0].0.write(1).unwrap();
    // The device took them all once it asks for a kick past them.
    let t0 = Instant::now();
    while m.read_obj::<u16>(at(USED + 4 + 8 * QUEUE as u64)).unwrap() != DEPTH {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the device did not take the requests"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let used_before: u16 = m.read_obj(at(USED + 2)).unwrap();
    let base = frontend.get_vring_base(0).unwrap();
    fence(Ordering::SeqCst);
    let used: u16 = m.read_obj(at(USED + 2)).unwrap();
    assert_eq!(base, DEPTH as u32, "GET_VRING_BASE's next available index");
    assert!(
        used_before < DEPTH,
        "all {DEPTH} were answered before GET_VRING_BASE: the test proves nothing"
    );
    assert_eq!(
        used,
        DEPTH,
        "GET_VRING_BASE replied with {} of the {DEPTH} requests taken still unanswered",
        DEPTH - used
    );
    for s in 0..DEPTH {
        assert_eq!(
            m.read_obj::<u8>(at(STATUS + s as u64)).unwrap(),
            0,
            "request {s}'s status"
        );
    }
    eprintln!("{used_before} of {DEPTH} answered when GET_VRING_BASE was sent, {used} when it was answered");
    drop(frontend);
    d.stop();
}
