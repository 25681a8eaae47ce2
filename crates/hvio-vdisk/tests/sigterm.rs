//! SIGTERM under load: the daemon (a real process) drains, flushes and exits
//! 0, and no write it acknowledged is lost — in particular none that a
//! completed FLUSH covered.
//!
//! What this can and cannot show: the data is checked in the backing file
//! after the process is gone, which catches writes answered but never
//! issued, issued to the wrong place, or dropped by the drain; the host's
//! page cache survives the process, so it cannot catch a missing fdatasync.

mod common;
use common::*;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[test]
fn sigterm_under_load_loses_no_acknowledged_write() {
    sigterm_on("threads");
}

/// The io_uring engine serves the connections from its own thread after the
/// handshake: the drain goes through that path.
#[test]
fn sigterm_under_load_loses_no_acknowledged_write_over_io_uring() {
    if !have_io_uring() {
        return;
    }
    sigterm_on("io_uring");
}

fn sigterm_on(engine: &str) {
    let dir = tempfile::tempdir().unwrap();
    let conf = format!(
        "[store]\npath = \"{0}/disk.img\"\ndepth = 16\nengine = \"{1}\"\n[scheduler]\nname = \"deadline\"\n[nbd]\nunix = \"{0}/nbd.sock\"\n[[vm]]\nname = \"vm1\"\nsize = \"64MiB\"\n",
        dir.path().display(),
        engine
    );
    let cfg = dir.path().join("host.toml");
    std::fs::write(&cfg, conf).unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_hvio-vdisk"))
        .arg(&cfg)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let sock = dir.path().join("nbd.sock");
    let t0 = Instant::now();
    while UnixStream::connect(&sock).is_err() {
        assert!(t0.elapsed() < Duration::from_secs(20), "daemon did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    let go = Arc::new(AtomicBool::new(true));
    let flushes = Arc::new(AtomicUsize::new(0));
    let clients: Vec<_> = (0..3)
        .map(|i| {
            let (s, g, n) = (sock.clone(), go.clone(), flushes.clone());
            std::thread::spawn(move || flushing_writer(s, i, g, 0, Some(n)))
        })
        .collect();
    // Once a FLUSH has completed (an fdatasync can take long on a busy
    // machine), SIGTERM in the middle of the load. Not after a fixed time:
    // 400 ms took 1100-6400 of the 12000 blocks on a 2-core machine, so a
    // machine twice as fast could finish the load before the SIGTERM.
    let t1 = Instant::now();
    while flushes.load(Ordering::Relaxed) == 0 && t1.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(10));
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let seen: Vec<Seen> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    go.store(false, Ordering::Relaxed);
    let status = child.wait().unwrap();
    let mut log = String::new();
    child.stderr.take().unwrap().read_to_string(&mut log).unwrap();
    assert!(status.success(), "daemon exit {status}:\n{log}");
    assert!(log.contains("SIGTERM") && log.contains("store flushed"), "{log}");
    assert!(!sock.exists(), "socket not removed");
    let total: usize = seen.iter().map(|s| s.acked.len()).sum();
    let flushed: usize = seen.iter().map(|s| s.flushed).sum();
    assert!(flushed > 0, "no flush completed before the SIGTERM");
    assert!(
        total < 3 * BLOCKS_PER_CLIENT as usize,
        "the SIGTERM came after the load ended"
    );
    let f = std::fs::File::open(dir.path().join("disk.img")).unwrap();
    let mut buf = vec![0u8; 4096];
    for s in &seen {
        for (i, &blk) in s.acked.iter().enumerate() {
            f.read_exact_at(&mut buf, blk * 4096).unwrap();
            let what = if i < s.flushed {
                "acknowledged and flushed"
            } else {
                "acknowledged"
            };
            assert!(buf == pattern(7, blk), "{what} write of block {blk} lost");
        }
    }
    eprintln!("sigterm: {total} writes acknowledged ({flushed} covered by a FLUSH), all present");
}
