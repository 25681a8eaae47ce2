//! Clients that exhaust the daemon's descriptors or never finish the
//! handshake: the daemon does not spin on failing accepts, drops idle
//! handshakes after `[nbd] handshake_timeout_s`, and serves again once
//! descriptors are free. Runs the real binary under `ulimit -n`.

mod common;
use common::*;
use std::io::Read;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// User + system CPU time of `pid` so far, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// The daemon process, killed if the test fails before stopping it.
struct Child(std::process::Child);

impl Child {
    fn id(&self) -> u32 {
        self.0.id()
    }
    /// SIGTERM; whether it exited cleanly.
    fn stop(&mut self) -> bool {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        self.0.wait().unwrap().success()
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn start(dir: &std::path::Path, nofile: u32, extra: &str) -> Child {
    let conf = format!(
        "[store]\npath = \"{0}/disk.img\"\n[nbd]\nunix = \"{0}/nbd.sock\"\n{extra}\n[control]\nunix = \"{0}/control.sock\"\n[[vm]]\nname = \"vm1\"\nsize = \"1MiB\"\n",
        dir.display()
    );
    let cfg = dir.join("host.toml");
    std::fs::write(&cfg, conf).unwrap();
    let child = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -n {nofile} && exec \"$0\" --log-level error \"$1\"",))
        .arg(env!("CARGO_BIN_EXE_hvio-vdisk"))
        .arg(&cfg)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let child = Child(child);
    let t0 = Instant::now();
    while UnixStream::connect(dir.join("control.sock")).is_err() {
        assert!(t0.elapsed() < Duration::from_secs(20), "daemon did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

#[test]
fn descriptors_exhausted_no_spin_and_service_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = start(dir.path(), 64, "");
    // Connections that say nothing, until the daemon runs out of descriptors
    // (the rest wait in the listener's backlog).
    let idle: Vec<UnixStream> = (0..200)
        .map(|_| UnixStream::connect(dir.path().join("nbd.sock")).unwrap())
        .collect();
    // The listener's backlog is full of connections it cannot accept: a
    // daemon retrying accept in a loop would burn a CPU here.
    let t0 = cpu_ticks(child.id());
    std::thread::sleep(Duration::from_millis(1000));
    let used = cpu_ticks(child.id()) - t0;
    assert!(used < 30, "{used} ticks of CPU in 1 s with descriptors exhausted");
    // Free them: a well-behaved client is served again.
    drop(idle);
    let t0 = Instant::now();
    loop {
        let mut c = Client::connect(&dir.path().join("nbd.sock"), "vm1");
        c.s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        if c.write(0, &pattern(1, 0)) == 0 {
            assert_eq!(c.read(0, 4096).unwrap(), pattern(1, 0));
            c.disc();
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "not served again");
    }
    assert!(child.stop());
}

#[test]
fn an_idle_handshake_is_dropped_after_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = start(dir.path(), 1024, "handshake_timeout_s = 1");
    let t0 = Instant::now();
    let mut s = Client::greet(&dir.path().join("nbd.sock"));
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut b = [0u8; 1];
    assert_eq!(s.read(&mut b).unwrap(), 0, "the server should close an idle handshake");
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_secs(10),
        "{waited:?}"
    );
    // A client past the handshake is never timed out.
    let mut c = Client::connect(&dir.path().join("nbd.sock"), "vm1");
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(c.write(0, &pattern(2, 0)), 0);
    c.disc();
    assert!(child.stop());
}
