//! Shared test code: an in-process daemon, a minimal NBD client, tool checks.
#![allow(dead_code)]

use hvio_vdisk::nbd::proto::*;
use hvio_vdisk::{Config, Running};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

#[path = "../../../hvio-device/tests/common/skip.rs"]
mod skip;
pub use skip::skipped;

/// Whether `tool` can be run; if not, say so loudly (the test then skips).
pub fn have(tool: &str) -> bool {
    let ok = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        skipped(&format!("`{tool}` is not installed (run scripts/deps.sh)"));
    }
    ok
}

/// Whether io_uring is allowed here with what the engine needs (waits with
/// a timeout, Linux 5.11); if not, say so loudly (the io_uring variants
/// then skip). A seccomp profile can refuse it: Docker's default does since
/// 25.0, and `kernel.io_uring_disabled` can.
///
/// Probed once, on a thread of its own: tearing a ring down queues task
/// work on the thread that made it, which interrupts that thread's blocking
/// socket reads that have a timeout (EINTR; `nbd_robust` failed 4 runs in 25
/// with `--test-threads=16` when the test thread probed itself).
pub fn have_io_uring() -> bool {
    static PROBE: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    let probe = PROBE.get_or_init(|| {
        std::thread::spawn(|| match io_uring::IoUring::new(8) {
            Ok(r) if r.params().is_feature_ext_arg() => Ok(()),
            Ok(_) => Err("no IORING_FEAT_EXT_ARG (Linux < 5.11)".to_string()),
            Err(e) => Err(e.to_string()),
        })
        .join()
        .unwrap_or_else(|_| Err("the probe panicked".to_string()))
    });
    if let Err(why) = probe {
        skipped(&format!("io_uring refused here ({why}): its variants do not run"));
    }
    probe.is_ok()
}

/// A daemon running in this process, with its own runtime and directory.
pub struct Daemon {
    pub rt: tokio::runtime::Runtime,
    pub running: Option<Running>,
    pub dir: tempfile::TempDir,
}

impl Daemon {
    /// Start from a TOML text in which `@DIR@` stands for a fresh temporary directory.
    pub fn start(toml: &str) -> Daemon {
        Daemon::start_in(toml, tempfile::tempdir().unwrap())
    }

    /// Start in `dir` (a directory a stopped daemon left, say).
    pub fn start_in(toml: &str, dir: tempfile::TempDir) -> Daemon {
        let text = toml.replace("@DIR@", dir.path().to_str().unwrap());
        let cfg = Config::from_toml_str(&text, "test.toml").unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let running = rt.block_on(hvio_vdisk::start(&cfg)).unwrap();
        Daemon {
            rt,
            running: Some(running),
            dir,
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn sock(&self) -> PathBuf {
        self.path("nbd.sock")
    }

    /// `nbd+unix:///NAME?socket=...` for qemu tools.
    pub fn uri(&self, export: &str) -> String {
        format!("nbd+unix:///{export}?socket={}", self.sock().display())
    }

    pub fn engine(&self) -> hvio_vdisk::engine::EngineHandle {
        self.running.as_ref().unwrap().engine.clone()
    }

    pub fn control_addr(&self) -> std::net::SocketAddr {
        self.running.as_ref().unwrap().control_addr.unwrap()
    }

    /// Stop the daemon; the directory lives on in the returned guard.
    pub fn stop(mut self) -> tempfile::TempDir {
        let r = self.running.take().unwrap();
        self.rt.block_on(r.stop()).unwrap();
        self.dir
    }
}

/// `src` (raw, holding `data`) into export `vm` with `qemu-img convert`,
/// compared equal with `qemu-img compare`, and converted back out
/// unchanged. Returns the export's URI.
pub fn qemu_img_round_trip(d: &Daemon, vm: &str, src: &std::path::Path, data: &[u8]) -> String {
    let uri = d.uri(vm);
    run(Command::new("qemu-img")
        .args(["convert", "-n", "-f", "raw", "-O", "raw"])
        .arg(src)
        .arg(&uri));
    let out = run(Command::new("qemu-img")
        .args(["compare", "-f", "raw", "-F", "raw"])
        .arg(src)
        .arg(&uri));
    assert!(out.contains("identical"), "{out}");
    let back = d.path("back.raw");
    run(Command::new("qemu-img")
        .args(["convert", "-f", "raw", "-O", "raw"])
        .arg(&uri)
        .arg(&back));
    assert_eq!(std::fs::read(&back).unwrap(), data);
    uri
}

/// Run a command, fail the test with its output if it fails; returns stdout.
pub fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// A synchronous NBD client speaking just enough of the protocol for tests.
pub struct Client {
    pub s: UnixStream,
    pub size: u64,
    pub flags: u16,
}

pub fn opt(s: &mut UnixStream, option: u32, data: &[u8]) {
    let mut b = Vec::new();
    b.extend_from_slice(&IHAVEOPT.to_be_bytes());
    b.extend_from_slice(&option.to_be_bytes());
    b.extend_from_slice(&(data.len() as u32).to_be_bytes());
    b.extend_from_slice(data);
    s.write_all(&b).unwrap();
}

/// Read one option reply: (option, type, data).
pub fn opt_reply(s: &mut UnixStream) -> (u32, u32, Vec<u8>) {
    let mut h = [0u8; 20];
    s.read_exact(&mut h).unwrap();
    assert_eq!(u64::from_be_bytes(h[0..8].try_into().unwrap()), OPT_REPLY_MAGIC);
    let len = u32::from_be_bytes(h[16..20].try_into().unwrap()) as usize;
    let mut d = vec![0u8; len];
    s.read_exact(&mut d).unwrap();
    (
        u32::from_be_bytes(h[8..12].try_into().unwrap()),
        u32::from_be_bytes(h[12..16].try_into().unwrap()),
        d,
    )
}

pub fn go_data(name: &str, infos: &[u16]) -> Vec<u8> {
    let mut d = Vec::new();
    d.extend_from_slice(&(name.len() as u32).to_be_bytes());
    d.extend_from_slice(name.as_bytes());
    d.extend_from_slice(&(infos.len() as u16).to_be_bytes());
    for i in infos {
        d.extend_from_slice(&i.to_be_bytes());
    }
    d
}

impl Client {
    /// Connect and do the fixed newstyle greeting; options are up to the caller.
    pub fn greet(sock: &Path) -> UnixStream {
        let mut s = UnixStream::connect(sock).unwrap();
        let mut g = [0u8; 18];
        s.read_exact(&mut g).unwrap();
        assert_eq!(u64::from_be_bytes(g[0..8].try_into().unwrap()), NBDMAGIC);
        assert_eq!(u64::from_be_bytes(g[8..16].try_into().unwrap()), IHAVEOPT);
        s.write_all(&(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).to_be_bytes())
            .unwrap();
        s
    }

    /// Connect with NBD_OPT_GO (asking for block sizes).
    pub fn connect(sock: &Path, export: &str) -> Client {
        Client::connect_asking(sock, export, &[INFO_BLOCK_SIZE])
    }

    /// Connect with NBD_OPT_GO asking for `infos` (without `INFO_BLOCK_SIZE`
    /// the server serves requests at any alignment).
    pub fn connect_asking(sock: &Path, export: &str, infos: &[u16]) -> Client {
        let mut s = Client::greet(sock);
        opt(&mut s, OPT_GO, &go_data(export, infos));
        let (mut size, mut flags) = (0, 0);
        loop {
            let (_, typ, d) = opt_reply(&mut s);
            match typ {
                REP_INFO if u16::from_be_bytes([d[0], d[1]]) == INFO_EXPORT => {
                    size = u64::from_be_bytes(d[2..10].try_into().unwrap());
                    flags = u16::from_be_bytes([d[10], d[11]]);
                }
                REP_INFO => {}
                REP_ACK => break,
                other => panic!("OPT_GO {export}: reply {other:#x} {}", String::from_utf8_lossy(&d)),
            }
        }
        Client { s, size, flags }
    }

    pub fn send(&mut self, flags: u16, typ: u16, cookie: u64, offset: u64, length: u32, payload: &[u8]) {
        let mut b = Vec::with_capacity(28 + payload.len());
        request(&mut b, flags, typ, cookie, offset, length);
        b.extend_from_slice(payload);
        self.s.write_all(&b).unwrap();
    }

    /// Read one simple reply header: (cookie, error).
    pub fn reply(&mut self) -> (u64, u32) {
        let mut h = [0u8; 16];
        self.s.read_exact(&mut h).unwrap();
        assert_eq!(u32::from_be_bytes(h[0..4].try_into().unwrap()), SIMPLE_REPLY_MAGIC);
        (
            u64::from_be_bytes(h[8..16].try_into().unwrap()),
            u32::from_be_bytes(h[4..8].try_into().unwrap()),
        )
    }

    pub fn write(&mut self, offset: u64, data: &[u8]) -> u32 {
        self.send(0, CMD_WRITE, 1, offset, data.len() as u32, data);
        self.reply().1
    }

    pub fn read(&mut self, offset: u64, len: u32) -> Result<Vec<u8>, u32> {
        self.send(0, CMD_READ, 2, offset, len, &[]);
        let (_, err) = self.reply();
        if err != 0 {
            return Err(err);
        }
        let mut d = vec![0u8; len as usize];
        self.s.read_exact(&mut d).unwrap();
        Ok(d)
    }

    pub fn flush(&mut self) -> u32 {
        self.send(0, CMD_FLUSH, 3, 0, 0, &[]);
        self.reply().1
    }

    pub fn disc(mut self) {
        self.send(0, CMD_DISC, 0, 0, 0, &[]);
    }
}

/// Append a request header to `b`.
pub fn request(b: &mut Vec<u8>, flags: u16, typ: u16, cookie: u64, offset: u64, length: u32) {
    b.extend_from_slice(&REQUEST_MAGIC.to_be_bytes());
    b.extend_from_slice(&flags.to_be_bytes());
    b.extend_from_slice(&typ.to_be_bytes());
    b.extend_from_slice(&cookie.to_be_bytes());
    b.extend_from_slice(&offset.to_be_bytes());
    b.extend_from_slice(&length.to_be_bytes());
}

/// The same configuration on the io_uring engine, whose thread serves the
/// connections itself after the handshake (a separate transmission path).
pub fn over_io_uring(conf: &str) -> String {
    conf.replacen("depth = 8\n", "depth = 8\nengine = \"io_uring\"\n", 1)
}

/// Whether this process may mount file systems: root with CAP_SYS_ADMIN
/// (a container's root often lacks it) and `mount`/`umount` installed; if
/// not, say so loudly (the test then skips).
pub fn can_mount(what: &str) -> bool {
    // SAFETY: getuid cannot fail.
    let root = unsafe { libc::getuid() } == 0;
    // CAP_SYS_ADMIN is bit 21 of the effective capability set.
    let cap = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let hex = s.lines().find_map(|l| l.strip_prefix("CapEff:"))?.trim().to_string();
            u64::from_str_radix(&hex, 16).ok()
        })
        .is_some_and(|caps| caps & (1 << 21) != 0);
    if !(root && cap) {
        skipped(&format!("{what} needs root with CAP_SYS_ADMIN to mount"));
        return false;
    }
    have("mount") && have("umount")
}

/// A tmpfs of `size` (e.g. `"1m"`) mounted on a new directory `name` in
/// `dir`, unmounted when the guard drops; `None` (and a loud skip) unless
/// this process may mount.
pub fn mount_tmpfs(dir: &Path, name: &str, size: &str) -> Option<Umount> {
    if !can_mount("a tmpfs") {
        return None;
    }
    let at = dir.join(name);
    std::fs::create_dir(&at).unwrap();
    run(Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
        .arg(&at));
    Some(Umount(at))
}

/// Unmounts its directory when dropped, and never leaves it mounted. A
/// plain `umount` left a tmpfs mounted 3 times in ~200 runs on a loaded
/// machine (busy: a file of the mount can stay open for a moment in a
/// child another test thread forked before it execs, or the directory be
/// in use by another process walking /tmp), so a busy unmount is retried,
/// then detached lazily.
pub struct Umount(pub PathBuf);

impl Drop for Umount {
    fn drop(&mut self) {
        let umount = |lazy: bool| {
            let mut c = Command::new("umount");
            if lazy {
                c.arg("-l");
            }
            c.arg(&self.0)
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        for tries in 0..50 {
            if umount(false) {
                if tries > 0 {
                    eprintln!("unmounted {} after {tries} busy tries", self.0.display());
                }
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let lazy = umount(true);
        eprintln!(
            "{} busy: {}",
            self.0.display(),
            if lazy {
                "detached lazily"
            } else {
                "could not unmount it"
            }
        );
    }
}

/// A recognisable 4 KiB block for (tag, block number).
pub fn pattern(tag: u64, block: u64) -> Vec<u8> {
    let mut v = vec![0u8; 4096];
    for (i, c) in v.chunks_mut(16).enumerate() {
        c[0..8].copy_from_slice(&tag.to_le_bytes());
        c[8..16].copy_from_slice(&(block * 256 + i as u64).to_le_bytes());
    }
    v
}

pub const BLOCKS_PER_CLIENT: u64 = 4000;

/// What one client saw: blocks whose write was acknowledged, and how many of
/// them (in ack order) a completed FLUSH covered.
pub struct Seen {
    pub acked: Vec<u64>,
    pub flushed: usize,
    /// Blocks written with FUA and acknowledged.
    pub fua: Vec<u64>,
}

/// Keep 16 writes of unique 4 KiB blocks (`id`'s own range) and at most one
/// FLUSH (every 64 writes) in flight until `go` clears or the server closes;
/// every `fua_every`-th write (0 = none) carries FUA; `flushes` (if given)
/// counts the FLUSHes that completed.
pub fn flushing_writer(
    sock: std::path::PathBuf,
    id: u64,
    go: Arc<AtomicBool>,
    fua_every: u64,
    flushes: Option<Arc<AtomicUsize>>,
) -> Seen {
    let mut c = Client::connect(&sock, "vm1");
    let mut rd = c.s.try_clone().unwrap();
    let base = id * BLOCKS_PER_CLIENT;
    let mut seen = Seen {
        acked: Vec::new(),
        flushed: 0,
        fua: Vec::new(),
    };
    let mut next = 0u64;
    let mut inflight = 0usize;
    let mut flush_at: Option<usize> = None; // acked count when the flush was sent
    let mut send_failed = false;
    loop {
        // Keep 16 writes and at most one flush in flight.
        while !send_failed && go.load(Ordering::Relaxed) && inflight < 16 && next < BLOCKS_PER_CLIENT {
            let blk = base + next;
            let mut b = Vec::with_capacity(28 + 4096);
            b.extend_from_slice(&REQUEST_MAGIC.to_be_bytes());
            let fua = fua_every > 0 && next % fua_every == fua_every - 1;
            b.extend_from_slice(&(if fua { CMD_FLAG_FUA } else { 0 }).to_be_bytes());
            b.extend_from_slice(&CMD_WRITE.to_be_bytes());
            b.extend_from_slice(&blk.to_be_bytes());
            b.extend_from_slice(&(blk * 4096).to_be_bytes());
            b.extend_from_slice(&4096u32.to_be_bytes());
            b.extend_from_slice(&pattern(7, blk));
            if c.s.write_all(&b).is_err() {
                send_failed = true;
                break;
            }
            next += 1;
            inflight += 1;
            if next.is_multiple_of(64) && flush_at.is_none() {
                let mut f = Vec::new();
                f.extend_from_slice(&REQUEST_MAGIC.to_be_bytes());
                f.extend_from_slice(&0u16.to_be_bytes());
                f.extend_from_slice(&CMD_FLUSH.to_be_bytes());
                f.extend_from_slice(&u64::MAX.to_be_bytes());
                f.extend_from_slice(&0u64.to_be_bytes());
                f.extend_from_slice(&0u32.to_be_bytes());
                if c.s.write_all(&f).is_err() {
                    send_failed = true;
                    break;
                }
                flush_at = Some(seen.acked.len());
                inflight += 1;
            }
        }
        if inflight == 0 {
            break;
        }
        let mut h = [0u8; 16];
        if rd.read_exact(&mut h).is_err() {
            break; // the server closed after draining
        }
        let err = u32::from_be_bytes(h[4..8].try_into().unwrap());
        let cookie = u64::from_be_bytes(h[8..16].try_into().unwrap());
        inflight -= 1;
        if cookie == u64::MAX {
            // Writes acknowledged before the flush was sent are covered by it.
            if err == 0 {
                seen.flushed = seen.flushed.max(flush_at.unwrap());
                if let Some(n) = &flushes {
                    n.fetch_add(1, Ordering::Relaxed);
                }
            }
            flush_at = None;
        } else if err == 0 {
            seen.acked.push(cookie);
            if fua_every > 0 && (cookie - base) % fua_every == fua_every - 1 {
                seen.fua.push(cookie);
            }
        } else {
            assert_eq!(err, ESHUTDOWN, "write {cookie} failed with {err}");
        }
    }
    seen
}

/// A TCP connection to the control API with 30 s read and write timeouts.
pub fn http_connect(addr: std::net::SocketAddr) -> std::net::TcpStream {
    let s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(30))).unwrap();
    s.set_write_timeout(Some(std::time::Duration::from_secs(30))).unwrap();
    s
}

/// One HTTP/1.1 request to the control API: (status code, body).
pub fn http(addr: std::net::SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut s = http_connect(addr);
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    http_response(&mut s)
}

/// Read a whole HTTP response (the server closes): (status code, body).
pub fn http_response(s: &mut impl Read) -> (u16, String) {
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let out = String::from_utf8_lossy(&out).to_string();
    let code = out.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = out.split_once("\r\n\r\n").map(|x| x.1.to_string()).unwrap_or_default();
    (code, body)
}

/// Undo mounts and loop devices even when an assertion fails.
pub struct Cleanup {
    pub mount: Option<PathBuf>,
    pub loopdev: Option<String>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(m) = self.mount.take() {
            let _ = Command::new("umount").arg(&m).status();
        }
        if let Some(l) = self.loopdev.take() {
            let _ = Command::new("losetup").arg("-d").arg(&l).status();
        }
    }
}

/// promtool from PATH or where scripts/deps.sh unpacks it.
pub fn promtool() -> Option<PathBuf> {
    let local = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/tools/usr/bin/promtool");
    if local.is_file() {
        return Some(local);
    }
    have("promtool").then(|| PathBuf::from("promtool"))
}

/// `promtool check metrics` on `text`: no errors and no lint warnings.
pub fn promtool_accepts(text: &str) {
    let Some(tool) = promtool() else { return };
    let mut p = Command::new(&tool)
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    p.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = p.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "promtool check metrics:\n{said}\n{text}"
    );
}

/// `key=value` from a line of `key=value` fields (a guest's report, a log line).
pub fn field<'a>(line: &'a str, key: &str) -> &'a str {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
        .unwrap_or_else(|| panic!("no {key}= in `{line}`"))
}

/// Guest memory of `size` bytes backed by a memfd, as QEMU's
/// `memory-backend-memfd,share=on` gives it: a vhost-user daemon maps the
/// same pages from the descriptor the frontend passes it.
pub fn memfd_guest_memory(size: usize) -> vm_memory::GuestMemoryMmap {
    use std::os::fd::{FromRawFd, OwnedFd};
    use vm_memory::{FileOffset, GuestAddress, GuestMemoryMmap};
    // SAFETY: plain syscall with a NUL-terminated name; the descriptor is owned below.
    let raw = unsafe { libc::memfd_create(c"hvio-test-guest".as_ptr(), libc::MFD_CLOEXEC) };
    assert!(raw >= 0, "memfd_create: {}", std::io::Error::last_os_error());
    // SAFETY: a fresh descriptor nobody else owns.
    let file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(raw) });
    file.set_len(size as u64).unwrap();
    GuestMemoryMmap::from_ranges_with_files(&[(GuestAddress(0), size, Some(FileOffset::new(file, 0)))]).unwrap()
}
