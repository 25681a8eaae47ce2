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
use hvio_vdisk::nbd::proto::*;
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const BLOCKS_PER_CLIENT: u64 = 4000;

/// What one client saw: blocks whose write was acknowledged, and how many of
/// them (in ack order) a completed FLUSH covered.
struct Seen {
    acked: Vec<u64>,
    flushed: usize,
}

fn client(sock: std::path::PathBuf, id: u64, go: Arc<AtomicBool>) -> Seen {
    let mut c = Client::connect(&sock, "vm1");
    let mut rd = c.s.try_clone().unwrap();
    let base = id * BLOCKS_PER_CLIENT;
    let mut seen = Seen {
        acked: Vec::new(),
        flushed: 0,
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
            b.extend_from_slice(&0u16.to_be_bytes());
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
            }
            flush_at = None;
        } else if err == 0 {
            seen.acked.push(cookie);
        } else {
            assert_eq!(err, ESHUTDOWN, "write {cookie} failed with {err}");
        }
    }
    seen
}

#[test]
fn sigterm_under_load_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let conf = format!(
        "[store]\npath = \"{0}/disk.img\"\ndepth = 16\n[scheduler]\nname = \"deadline\"\n[nbd]\nunix = \"{0}/nbd.sock\"\n[[vm]]\nname = \"vm1\"\nsize = \"64MiB\"\n",
        dir.path().display()
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
    let clients: Vec<_> = (0..3)
        .map(|i| {
            let (s, g) = (sock.clone(), go.clone());
            std::thread::spawn(move || client(s, i, g))
        })
        .collect();
    // Let the load run, then SIGTERM in the middle of it.
    std::thread::sleep(Duration::from_millis(400));
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
