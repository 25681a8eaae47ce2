//! Protocol rejections counted by reason: each kind provoked by a raw
//! client, then read back from `/status` and `/metrics` (the exposition
//! checked by Prometheus's own `promtool check metrics`), on both engines;
//! and the real binary logs one line per misbehaving connection at info.

mod common;
use common::*;
use hvio_vdisk::nbd::proto::*;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

const CONF: &str = r#"
[store]
path = "@DIR@/disk.img"
depth = 8
[scheduler]
name = "noop"
[nbd]
unix = "@DIR@/nbd.sock"
handshake_timeout_s = 1
[control]
http = "127.0.0.1:0"
[[vm]]
name = "vm1"
size = "8MiB"
"#;

/// Whether the server closed the connection (EOF before `timeout`).
fn closed(s: &mut std::os::unix::net::UnixStream, timeout: Duration) -> bool {
    s.set_read_timeout(Some(timeout)).unwrap();
    let mut b = [0u8; 4096];
    loop {
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(_) => return false,
        }
    }
}

/// Provoke every reason the issue names, and a few more; returns the
/// counts each reason must have.
fn provoke(sock: &Path) -> Vec<(&'static str, u64)> {
    // Transmission: two out-of-range requests, an oversized read, a
    // misaligned read and an unknown command on one connection (it carries
    // on), then a request without its magic (it closes).
    let mut c = Client::connect(sock, "vm1");
    assert_eq!(c.read(8 << 20, 4096).unwrap_err(), EINVAL);
    assert_eq!(c.write(8 << 20, &[0u8; 512]), ENOSPC);
    c.send(0, CMD_READ, 9, 0, MAX_PAYLOAD + 1, &[]);
    assert_eq!(c.reply(), (9, EINVAL));
    assert_eq!(c.read(1, 512).unwrap_err(), EINVAL);
    c.send(0, 77, 10, 0, 0, &[]);
    assert_eq!(c.reply(), (10, EINVAL));
    assert_eq!(c.read(0, 4096).unwrap().len(), 4096);
    let mut bad = Vec::new();
    request(&mut bad, 0, CMD_READ, 11, 0, 512);
    bad[0] ^= 0xff;
    c.s.write_all(&bad).unwrap();
    assert!(closed(&mut c.s, Duration::from_secs(10)), "a bad magic must close");
    // Handshake: a bad option magic closes.
    let mut s = Client::greet(sock);
    s.write_all(&0x1234u64.to_be_bytes()).unwrap();
    assert!(closed(&mut s, Duration::from_secs(10)));
    // An unknown export by GO (the client may try again), then EXPORT_NAME (closes).
    let mut s = Client::greet(sock);
    opt(&mut s, OPT_GO, &go_data("vm9", &[]));
    assert_eq!(opt_reply(&mut s).1, REP_ERR_UNKNOWN);
    opt(&mut s, OPT_EXPORT_NAME, b"vm9");
    assert!(closed(&mut s, Duration::from_secs(10)));
    // Option data over 64 KiB.
    let mut s = Client::greet(sock);
    opt(&mut s, OPT_INFO, &vec![0u8; 64 * 1024 + 1]);
    assert_eq!(opt_reply(&mut s).1, REP_ERR_INVALID);
    drop(s); // gone before the handshake timeout can count it
             // A silent client after the greeting: closed after handshake_timeout_s.
    let mut s = Client::greet(sock);
    assert!(closed(&mut s, Duration::from_secs(10)), "no handshake timeout");
    vec![
        ("bad_magic", 2),
        ("unknown_export", 2),
        ("out_of_range", 2),
        ("oversized", 2),
        ("handshake_timeout", 1),
        ("misaligned", 1),
        ("unknown_command", 1),
        ("read_only", 0),
        ("bad_flags", 0),
        ("malformed", 0),
    ]
}

fn counted_on(conf: &str) {
    let d = Daemon::start(conf);
    let want = provoke(&d.sock());
    let addr: SocketAddr = d.control_addr();
    let (code, body) = http(addr, "GET", "/status", "");
    assert_eq!(code, 200);
    let status: serde_json::Value = serde_json::from_str(&body).unwrap();
    let (_, metrics) = http(addr, "GET", "/metrics", "");
    for (reason, n) in &want {
        assert_eq!(status["rejections"][reason], *n, "{reason}: {}", status["rejections"]);
        let line = format!("hvio_protocol_rejections_total{{reason=\"{reason}\"}} {n}\n");
        assert!(metrics.contains(&line), "no `{line}` in\n{metrics}");
    }
    promtool_accepts(&metrics);
    d.stop();
}

#[test]
fn rejections_are_counted_by_reason_in_status_and_metrics() {
    counted_on(CONF);
}

#[test]
fn rejections_are_counted_by_reason_over_io_uring() {
    if !have_io_uring() {
        return;
    }
    counted_on(&CONF.replace("depth = 8\n", "depth = 8\nengine = \"io_uring\"\n"));
}

/// The real binary at `--log-level info`: two connections with three
/// rejections each give two log lines, each naming its reason.
#[test]
fn each_misbehaving_connection_is_logged_once_at_info() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("host.toml");
    let text = CONF.replace("@DIR@", dir.path().to_str().unwrap());
    std::fs::write(&conf, text).unwrap();
    let log = dir.path().join("serve.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_hvio-vdisk"))
        .args(["--log-level", "info"])
        .arg(&conf)
        .stderr(std::fs::File::create(&log).unwrap())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let sock = dir.path().join("nbd.sock");
    for _ in 0..500 {
        if sock.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    for _ in 0..2 {
        let mut c = Client::connect(&sock, "vm1");
        for _ in 0..3 {
            assert_eq!(c.read(8 << 20, 4096).unwrap_err(), EINVAL);
        }
        c.disc();
    }
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("nbd: rejected")).collect();
    assert_eq!(lines.len(), 2, "{text}");
    for l in lines {
        assert!(l.contains("INFO") && l.contains("reason=\"out_of_range\""), "{l}");
    }
}
