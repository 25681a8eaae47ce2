//! The vhost-user-blk export's stop, seen by a hypervisor that does not
//! resend anything: this test is the hypervisor. It drives the export with
//! rust-vmm's vhost-user frontend, lays out the virtqueue in a memfd it
//! shares with the daemon, and writes the requests itself, so it sees
//! exactly which requests the daemon answered, with what status, and which
//! it left in the queue.
//!
//! A real `hvio-vdisk` process serves an emulated HDD (milliseconds a write,
//! so requests are still in flight when the stop comes). The test makes 32
//! writes available, and once they flow sends SIGTERM; when the daemon says
//! its queues are closed it makes 32 more available and kicks. The daemon
//! must answer all of the first 32 with success before it exits, their data
//! in the backing file, and take none of the second 32: they stay in the
//! queue. A second daemon, given the queue at the used index (as QEMU
//! resumes a reconnected device), serves them.
//!
//! The same hypervisor connecting and disconnecting twenty times leaves the
//! daemon with the descriptors it had before the first connection.

mod common;
use common::field;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};
use vhost::vhost_user::message::VhostUserProtocolFeatures;
use vhost::vhost_user::{Frontend, VhostUserFrontend};
use vhost::{VhostBackend, VhostUserMemoryRegionInfo, VringConfigData};
use vm_memory::{Bytes, GuestAddress, GuestMemoryBackend, GuestMemoryMmap};
use vmm_sys_util::eventfd::EventFd;

/// Guest memory: the virtqueue, then the requests' headers, data and status bytes.
const MEM: usize = 4 << 20;
const QUEUE: u16 = 256;
const DESC: u64 = 0;
const AVAIL: u64 = 0x1000;
const USED: u64 = 0x2000;
/// Request i: header at HDR + 16 i, status byte at STATUS + i, data at DATA + 4096 i.
const HDR: u64 = 0x4000;
const STATUS: u64 = 0x6000;
const DATA: u64 = 0x10000;
const BLOCK: u64 = 4096;
/// Requests made available before the stop, and after it.
const BEFORE: u16 = 32;
const AFTER: u16 = 32;
/// Where request i writes: spread over the disk, so the HDD seeks.
fn offset(i: u16) -> u64 {
    (i as u64 * 37 % 1024) * 64 * 1024
}
fn pattern(i: u16) -> Vec<u8> {
    (0..BLOCK)
        .map(|b| (b as u8) ^ (i as u8).wrapping_mul(31) ^ 0x5a)
        .collect()
}
const VIRTQ_DESC_F_NEXT: u16 = 1;
const VIRTQ_DESC_F_WRITE: u16 = 2;
const VIRTIO_BLK_T_OUT: u32 = 1;
const VIRTIO_F_EVENT_IDX: u64 = 1 << 29;
/// A status byte the device never writes.
const UNANSWERED: u8 = 0xff;

/// The shared memory (a memfd, passed to each daemon) and the virtqueue laid out in it.
struct Guest {
    mem: GuestMemoryMmap,
}

impl Guest {
    fn new() -> Guest {
        let mem = common::memfd_guest_memory(MEM);
        let g = Guest { mem };
        for i in 0..BEFORE + AFTER {
            g.lay_out(i);
        }
        g
    }

    fn host_addr(&self, gpa: u64) -> u64 {
        self.mem.get_host_address(GuestAddress(gpa)).unwrap() as u64
    }

    /// Request `i`: a write of its pattern at `offset(i)`, in descriptors 3i..3i+2.
    fn lay_out(&self, i: u16) {
        let m = &self.mem;
        let hdr = HDR + 16 * i as u64;
        m.write_obj(VIRTIO_BLK_T_OUT, GuestAddress(hdr)).unwrap();
        m.write_obj(0u32, GuestAddress(hdr + 4)).unwrap();
        m.write_obj(offset(i) / 512, GuestAddress(hdr + 8)).unwrap();
        let data = DATA + BLOCK * i as u64;
        m.write_slice(&pattern(i), GuestAddress(data)).unwrap();
        m.write_obj(UNANSWERED, GuestAddress(STATUS + i as u64)).unwrap();
        let d = 3 * i;
        let parts = [
            (hdr, 16u32, VIRTQ_DESC_F_NEXT),
            (data, BLOCK as u32, VIRTQ_DESC_F_NEXT),
            (STATUS + i as u64, 1, VIRTQ_DESC_F_WRITE),
        ];
        for (k, (addr, len, flags)) in parts.into_iter().enumerate() {
            let at = DESC + 16 * (d as u64 + k as u64);
            m.write_obj(addr, GuestAddress(at)).unwrap();
            m.write_obj(len, GuestAddress(at + 8)).unwrap();
            m.write_obj(flags, GuestAddress(at + 12)).unwrap();
            m.write_obj(d + k as u16 + 1, GuestAddress(at + 14)).unwrap();
        }
    }

    /// Make requests `range` available (their heads in the avail ring, then its index).
    fn make_available(&self, range: std::ops::Range<u16>) {
        for i in range.clone() {
            self.mem
                .write_obj(3 * i, GuestAddress(AVAIL + 4 + 2 * (i % QUEUE) as u64))
                .unwrap();
        }
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        self.mem.write_obj(range.end, GuestAddress(AVAIL + 2)).unwrap();
    }

    fn used_idx(&self) -> u16 {
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        self.mem.read_obj(GuestAddress(USED + 2)).unwrap()
    }

    /// The requests in the used ring, in the order answered.
    fn used(&self) -> Vec<u16> {
        (0..self.used_idx())
            .map(|k| {
                let head: u32 = self.mem.read_obj(GuestAddress(USED + 4 + 8 * k as u64)).unwrap();
                head as u16 / 3
            })
            .collect()
    }

    fn status(&self, i: u16) -> u8 {
        self.mem.read_obj(GuestAddress(STATUS + i as u64)).unwrap()
    }

    /// Connect to the export at `sock` and start its queue at `base` (the
    /// used index: where QEMU resumes a reconnected device).
    fn attach(&self, sock: &Path, base: u16) -> (Frontend, EventFd) {
        let mut f = Frontend::connect(sock, 1).unwrap();
        f.set_owner().unwrap();
        // No event-idx: every answer is signalled, and the test reads the used ring anyway.
        let features = f.get_features().unwrap() & !VIRTIO_F_EVENT_IDX;
        f.set_features(features).unwrap();
        let proto = f.get_protocol_features().unwrap();
        f.set_protocol_features(proto & (VhostUserProtocolFeatures::CONFIG | VhostUserProtocolFeatures::MQ))
            .unwrap();
        let region =
            VhostUserMemoryRegionInfo::from_guest_region(self.mem.find_region(GuestAddress(0)).unwrap()).unwrap();
        f.set_mem_table(&[region]).unwrap();
        f.set_vring_num(0, QUEUE).unwrap();
        f.set_vring_addr(
            0,
            &VringConfigData {
                queue_max_size: QUEUE,
                queue_size: QUEUE,
                flags: 0,
                desc_table_addr: self.host_addr(DESC),
                used_ring_addr: self.host_addr(USED),
                avail_ring_addr: self.host_addr(AVAIL),
                log_addr: None,
            },
        )
        .unwrap();
        f.set_vring_base(0, base).unwrap();
        let kick = EventFd::new(libc::EFD_NONBLOCK).unwrap();
        let call = EventFd::new(libc::EFD_NONBLOCK).unwrap();
        f.set_vring_call(0, &call).unwrap();
        f.set_vring_kick(0, &kick).unwrap();
        f.set_vring_enable(0, true).unwrap();
        (f, kick)
    }
}

/// A daemon process and its log lines as they come.
struct Process {
    child: Child,
    lines: Receiver<String>,
    log: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Process {
    fn start(cfg: &Path, sock: &Path) -> Process {
        let _ = std::fs::remove_file(sock);
        let mut child = Command::new(env!("CARGO_BIN_EXE_hvio-vdisk"))
            .arg(cfg)
            .args(["--log-level", "info"])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, lines) = channel();
        let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let (err, log2) = (child.stderr.take().unwrap(), log.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                log2.lock().unwrap().push_str(&format!("{line}\n"));
                let _ = tx.send(line);
            }
        });
        let t0 = Instant::now();
        while !sock.exists() {
            assert!(t0.elapsed() < Duration::from_secs(30), "daemon did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Process { child, lines, log }
    }

    /// The first log line containing `what` (within 30 s).
    fn expect(&self, what: &str) -> String {
        let end = Instant::now() + Duration::from_secs(30);
        loop {
            match self.lines.recv_timeout(end.saturating_duration_since(Instant::now())) {
                Ok(l) if l.contains(what) => return l,
                Ok(_) => {}
                Err(_) => panic!("no `{what}` in the daemon's log:\n{}", self.log.lock().unwrap()),
            }
        }
    }

    fn terminate(&self) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
    }

    /// Wait (at most 60 s) for the exit; the daemon must exit 0.
    fn wait(mut self) -> String {
        let t0 = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                std::thread::sleep(Duration::from_millis(100)); // the reader drains
                let log = self.log.lock().unwrap().clone();
                assert!(status.success(), "daemon exit {status}:\n{log}");
                return log;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "the daemon did not exit after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A daemon's configuration in `dir` (the store `disk.img` there, with
/// `store`'s keys; one VM exported on `vu.sock`): its path and the socket's.
fn daemon_config(dir: &Path, store: &str, scheduler: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let (cfg, sock, image) = (dir.join("host.toml"), dir.join("vu.sock"), dir.join("disk.img"));
    std::fs::write(
        &cfg,
        format!(
            "[store]\npath = \"{}\"\n{store}\n[scheduler]\nname = \"{scheduler}\"\n[[vm]]\nname = \"vm1\"\nsize = \"64MiB\"\n[vm.vhost_user]\nsocket = \"{}\"\n",
            image.display(),
            sock.display()
        ),
    )
    .unwrap();
    (cfg, sock)
}

/// A test that fails leaves no daemon behind (holding the test's output open).
impl Drop for Process {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[test]
fn stop_answers_the_requests_taken_and_leaves_the_rest_queued() {
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("disk.img");
    let (cfg, sock) = daemon_config(
        dir.path(),
        "kind = \"emulator\"\n[store.device]\nmodel = \"hdd\"",
        "cfq",
    );
    let guest = Guest::new();

    // The first daemon takes the first 32 writes; SIGTERM while they are in flight.
    let first = Process::start(&cfg, &sock);
    let (frontend, kick) = guest.attach(&sock, 0);
    guest.make_available(0..BEFORE);
    kick.write(1).unwrap();
    let t0 = Instant::now();
    while guest.used_idx() == 0 {
        assert!(t0.elapsed() < Duration::from_secs(30), "no request answered");
        std::thread::sleep(Duration::from_millis(1));
    }
    let answered_before_stop = guest.used_idx();
    first.terminate();
    first.expect("vhost-user: taking no more requests");
    // The queue has more to give now; a kick says so.
    guest.make_available(BEFORE..BEFORE + AFTER);
    kick.write(1).unwrap();
    let log = first.wait();
    drop(frontend);

    let drained = log
        .lines()
        .find(|l| l.contains("vhost-user: every request taken was answered"))
        .unwrap_or_else(|| panic!("the daemon did not say its requests were answered:\n{log}"));
    let in_flight: u16 = field(drained, "in_flight").parse().unwrap();
    assert!(
        in_flight > 0 && in_flight <= BEFORE - answered_before_stop,
        "{in_flight} in flight at the stop, {answered_before_stop} of {BEFORE} answered before it: {drained}"
    );
    eprintln!("{answered_before_stop} of {BEFORE} answered before SIGTERM; the stop: {drained}");
    let used = guest.used();
    let mut sorted = used.clone();
    sorted.sort_unstable();
    assert_eq!(
        sorted,
        (0..BEFORE).collect::<Vec<_>>(),
        "the stopped daemon must answer exactly the {BEFORE} requests it took before the stop (used ring: {used:?})"
    );
    for i in 0..BEFORE {
        assert_eq!(
            guest.status(i),
            0,
            "request {i} answered with status {}",
            guest.status(i)
        );
    }
    for i in BEFORE..BEFORE + AFTER {
        assert_eq!(
            guest.status(i),
            UNANSWERED,
            "request {i}, made available after the stop, was touched"
        );
    }
    let file = std::fs::File::open(&image).unwrap();
    let on_disk = |i: u16| {
        let mut b = vec![0u8; BLOCK as usize];
        file.read_exact_at(&mut b, offset(i)).unwrap();
        b == pattern(i)
    };
    for i in 0..BEFORE {
        assert!(
            on_disk(i),
            "request {i} was answered but its data is not in the backing file"
        );
    }

    // A second daemon resumes the queue at its used index and serves the rest.
    let second = Process::start(&cfg, &sock);
    let (frontend, kick) = guest.attach(&sock, BEFORE);
    kick.write(1).unwrap();
    let t0 = Instant::now();
    while guest.used_idx() < BEFORE + AFTER {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the second daemon did not serve the queue's rest"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    second.terminate();
    second.wait();
    drop(frontend);
    for i in 0..BEFORE + AFTER {
        assert_eq!(guest.status(i), 0, "request {i}");
        assert!(on_disk(i), "request {i}'s data is not in the backing file");
    }
}

/// The descriptors a process has open, each with what it points at.
fn open_fds(pid: u32) -> Vec<(String, String)> {
    let mut fds: Vec<(String, String)> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| {
            let target = std::fs::read_link(e.path()).map(|t| t.display().to_string());
            (e.file_name().to_string_lossy().into_owned(), target.unwrap_or_default())
        })
        .collect();
    fds.sort();
    fds
}

/// A hypervisor that connects, sets up a queue (memory table, kick and call
/// eventfds), has requests answered and disconnects, again and again,
/// leaves the daemon with the descriptors it had before: each connection's
/// memory map, eventfds, epoll and socket are closed when it ends.
#[test]
fn connections_leave_no_descriptors_open() {
    const CYCLES: u16 = 20;
    let dir = tempfile::tempdir().unwrap();
    let (cfg, sock) = daemon_config(dir.path(), "", "noop");
    let daemon = Process::start(&cfg, &sock);
    let pid = daemon.child.id();
    // Waiting for its first hypervisor.
    std::thread::sleep(Duration::from_millis(300));
    let before = open_fds(pid);
    for cycle in 0..CYCLES {
        let guest = Guest::new();
        let (frontend, kick) = guest.attach(&sock, 0);
        daemon.expect("vhost-user: hypervisor connected");
        guest.make_available(0..4);
        kick.write(1).unwrap();
        let t0 = Instant::now();
        while guest.used_idx() < 4 {
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "connection {cycle}: the requests were not answered"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(frontend);
        daemon.expect("vhost-user: hypervisor disconnected");
    }
    // The export has set up for the next hypervisor, as before the first.
    let t0 = Instant::now();
    let mut after = open_fds(pid);
    while after.len() != before.len() && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
        after = open_fds(pid);
    }
    let leaked: Vec<_> = after.iter().filter(|fd| !before.contains(fd)).collect();
    assert_eq!(
        after.len(),
        before.len(),
        "{} descriptors open before {CYCLES} connections, {} after; new ones: {leaked:?}",
        before.len(),
        after.len()
    );
    daemon.terminate();
    daemon.wait();
}
