//! The control API against bad requests: malformed JSON, wrong types,
//! unknown routes and schedulers, odd stream attributes, huge bodies. Each
//! gets a clear error reply; the daemon and its disks carry on.

mod common;
use common::*;
use std::io::{Read, Write};
use std::net::SocketAddr;

const CONF: &str = r#"
[store]
path = "@DIR@/disk.img"
[scheduler]
name = "htbs"
[nbd]
unix = "@DIR@/nbd.sock"
[control]
http = "127.0.0.1:0"
unix = "@DIR@/control.sock"
[[vm]]
name = "vm1"
size = "8MiB"
[[vm]]
name = "vm2"
size = "8MiB"
"#;

/// The error reply names what was wrong.
fn bad(addr: SocketAddr, method: &str, path: &str, body: &str, code: u16, names: &str) {
    let (c, b) = http(addr, method, path, body);
    assert_eq!(c, code, "{method} {path} {body}: {b}");
    let v: serde_json::Value = serde_json::from_str(&b).unwrap_or_else(|e| panic!("{b}: {e}"));
    let msg = v["error"].as_str().unwrap();
    assert!(
        msg.contains(names),
        "{method} {path} {body}: `{msg}` does not name `{names}`"
    );
}

fn io_works(d: &Daemon, tag: u64) {
    for vm in ["vm1", "vm2"] {
        let mut c = Client::connect(&d.sock(), vm);
        for i in 0..32u64 {
            assert_eq!(c.write(i * 4096, &pattern(tag, i)), 0);
        }
        assert_eq!(c.flush(), 0);
        for i in 0..32u64 {
            assert_eq!(c.read(i * 4096, 4096).unwrap(), pattern(tag, i));
        }
        c.disc();
    }
}

#[test]
fn bad_requests_get_clear_errors_and_the_daemon_carries_on() {
    let d = Daemon::start(CONF);
    let a = d.control_addr();
    // Malformed JSON and wrong types.
    bad(a, "PUT", "/scheduler", "{", 400, "not JSON");
    bad(a, "PUT", "/scheduler", "", 400, "not JSON");
    bad(a, "PUT", "/scheduler", "[1,2]", 400, "[1,2]");
    bad(a, "PUT", "/scheduler", "{}", 400, "`name`: missing");
    bad(
        a,
        "PUT",
        "/scheduler",
        r#"{"name": 5}"#,
        400,
        "`name`: expected a scheduler name, got 5",
    );
    bad(
        a,
        "PUT",
        "/scheduler",
        r#"{"name": "noop", "params": []}"#,
        400,
        "`params`",
    );
    bad(
        a,
        "PUT",
        "/scheduler",
        r#"{"name": "cfq", "params": {"quantum": "x"}}"#,
        400,
        "`params.quantum`",
    );
    bad(a, "PUT", "/scheduler", "\u{0}\u{1}\u{2}", 400, "not JSON");
    bad(a, "PUT", "/scheduler", r#"{"nam": "noop"}"#, 400, "unknown key `nam`");
    bad(
        a,
        "PUT",
        "/scheduler",
        r#"{"name": "noop", "policy": "gentle"}"#,
        400,
        "`policy`: unknown switch policy `gentle` (known: drain, freeze, migrate)",
    );
    bad(
        a,
        "PUT",
        "/scheduler",
        r#"{"name": "noop", "policy": 1}"#,
        400,
        "`policy`: expected",
    );
    bad(a, "PUT", "/vms/vm1", r#"{"weight": "heavy"}"#, 400, "weight");
    bad(a, "PUT", "/vms/vm1", r#"{"weight": -1}"#, 400, "-1");
    bad(a, "PUT", "/vms/vm1", r#"{"weight": 1e10}"#, 400, "weight");
    bad(a, "PUT", "/vms/vm1", r#"{"weight": 4294967296}"#, 400, "4294967296");
    bad(a, "PUT", "/vms/vm1", r#"{"weight": 10001}"#, 400, "10001");
    bad(a, "PUT", "/vms/vm1", r#"{"weight": 2.5}"#, 400, "2.5");
    bad(
        a,
        "PUT",
        "/vms/vm1",
        r#"{"attrs": {"rate_iops": "fast"}}"#,
        400,
        "`attrs.rate_iops`",
    );
    bad(a, "PUT", "/vms/vm1", r#"{"attrs": [1]}"#, 400, "`attrs`");
    bad(
        a,
        "PUT",
        "/vms/vm1",
        r#"{"attrs": {"rate_iops": 1e999}}"#,
        400,
        "not JSON",
    );
    bad(a, "PUT", "/vms/vm1", r#"{"wieght": 5}"#, 400, "wieght");
    // Unknown routes, VMs, schedulers and parameters: named.
    bad(a, "DELETE", "/vms/vm1", "", 404, "DELETE");
    bad(a, "GET", "/shutdown", "", 404, "/shutdown");
    bad(a, "PUT", "/vms/", r#"{"weight": 5}"#, 404, "");
    bad(a, "PUT", "/vms/nobody", r#"{"weight": 5}"#, 404, "nobody");
    bad(a, "PUT", "/vms/vm1/../vm2", r#"{"weight": 5}"#, 404, "vm1/../vm2");
    bad(a, "PUT", "/scheduler", r#"{"name": "fastest"}"#, 400, "fastest");
    bad(a, "PUT", "/scheduler", r#"{"name": ""}"#, 400, "scheduler");
    bad(
        a,
        "PUT",
        "/scheduler",
        r#"{"name": "deadline", "params": {"fifo_batch": -1}}"#,
        400,
        "fifo_batch",
    );
    bad(
        a,
        "PUT",
        "/scheduler",
        r#"{"name": "deadline", "params": {"fifo_batch": 1e308}}"#,
        400,
        "fifo_batch",
    );
    bad(
        a,
        "PUT",
        "/scheduler",
        r#"{"name": "deadline", "params": {"read_expire": 0.5}}"#,
        400,
        "read_expire",
    );
    // Stream attributes outside the range of the scheduler that reads them,
    // or read by none: refused, naming the attribute (they were taken and
    // silently replaced by the defaults); nothing of the change is applied.
    for (attrs, named) in [
        (
            r#"{"rate_iops": 0, "burst": 5}"#,
            "`attrs.rate_iops`: scheduler htbs accepts 0.001..=1000000000",
        ),
        (r#"{"burst": -5}"#, "`attrs.burst`"),
        (r#"{"latency_ms": 1e308}"#, "`attrs.latency_ms`"),
        (r#"{"latency_ms": -1}"#, "`attrs.latency_ms`"),
        (r#"{"rate_iops": 1e308}"#, "`attrs.rate_iops`"),
        (
            r#"{"rate_iops": 100, "unknown_attr": 3}"#,
            "`attrs.unknown_attr`: no scheduler reads",
        ),
        (r#"{"rate_iops": 1e-300}"#, "invalid value 1e-300 for `attrs.rate_iops`"),
        (r#"{"weight": 5}"#, "`attrs.weight`"),
    ] {
        let (c, b) = http(a, "PUT", "/vms/vm1", &format!(r#"{{"attrs": {attrs}}}"#));
        assert_eq!(c, 400, "{attrs}: {b}");
        assert!(b.contains(named) && b.contains("vm1"), "{attrs}: {b}");
        io_works(&d, 1);
    }
    // The bounds themselves are accepted.
    let (c, b) = http(
        a,
        "PUT",
        "/vms/vm1",
        r#"{"attrs": {"rate_iops": 0.001, "burst": 0, "latency_ms": 1e7}}"#,
    );
    assert_eq!(c, 200, "{b}");
    io_works(&d, 1);
    // Everything still answers; the scheduler is the one configured.
    let (c, st) = http(a, "GET", "/status", "");
    assert_eq!(c, 200);
    let st: serde_json::Value = serde_json::from_str(&st).unwrap();
    assert_eq!(st["scheduler"], "htbs");
    // Switch, and switch back, under the extreme attributes.
    assert_eq!(http(a, "PUT", "/scheduler", r#"{"name": "cfq"}"#).0, 200);
    io_works(&d, 2);
    assert_eq!(http(a, "PUT", "/scheduler", r#"{"name": "htbs"}"#).0, 200);
    io_works(&d, 3);
    // Not HTTP at all: the connection is closed; the API carries on.
    let mut s = http_connect(a);
    s.write_all(b"\x16\x03\x01\x02\x00garbage\r\n\r\n").unwrap();
    let (c, _) = http_response(&mut s);
    assert!(c == 0 || c == 400, "{c}");
    // The unix socket serves the same API.
    let mut s = std::os::unix::net::UnixStream::connect(d.path("control.sock")).unwrap();
    s.write_all(b"GET /vms HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    assert_eq!(http_response(&mut s).0, 200);
    d.stop();
}

#[test]
fn huge_requests_are_refused_without_buffering_them() {
    let d = Daemon::start(CONF);
    let a = d.control_addr();
    // A body announced as 16 GiB: refused (413) after at most the limit is read.
    let mut s = http_connect(a);
    write!(
        s,
        "PUT /scheduler HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        16u64 << 30
    )
    .unwrap();
    let chunk = vec![b' '; 1 << 20];
    let mut sent = 0usize;
    // The server answers and closes before 64 MiB are sent.
    while sent < 64 << 20 {
        if s.write_all(&chunk).is_err() {
            break;
        }
        sent += chunk.len();
    }
    let (c, b) = http_response(&mut s);
    assert_eq!(c, 413, "{sent} bytes sent: {b}");
    assert!(b.contains("bytes"), "{b}");
    // The same as a chunked body with no length.
    let mut s = http_connect(a);
    write!(
        s,
        "PUT /vms/vm1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    .unwrap();
    let mut sent = 0usize;
    while sent < 64 << 20 {
        let mut c = format!("{:x}\r\n", chunk.len()).into_bytes();
        c.extend_from_slice(&chunk);
        c.extend_from_slice(b"\r\n");
        if s.write_all(&c).is_err() {
            break;
        }
        sent += chunk.len();
    }
    assert_eq!(http_response(&mut s).0, 413, "{sent} bytes sent");
    // A header line of 1 MiB: refused by the HTTP layer.
    let mut s = http_connect(a);
    let long = "a".repeat(1 << 20);
    let _ = write!(s, "GET /vms HTTP/1.1\r\nHost: x\r\nX-Long: {long}\r\n\r\n");
    let (c, _) = http_response(&mut s);
    assert!(c == 0 || c == 431 || c == 400, "{c}");
    // A body just under the limit with a valid request in it still works.
    let mut body = r#"{"weight": 7}"#.to_string();
    body.push_str(&" ".repeat(60_000));
    let (c, b) = http(a, "PUT", "/vms/vm2", &body);
    assert_eq!(c, 200, "{b}");
    let (_, st) = http(a, "GET", "/vms", "");
    let v: serde_json::Value = serde_json::from_str(&st).unwrap();
    assert_eq!(v[1]["weight"], 7);
    io_works(&d, 4);
    d.stop();
}

#[test]
fn a_silent_connection_is_closed_after_the_header_timeout() {
    let d = Daemon::start(&CONF.replace("[control]\n", "[control]\nheader_timeout_s = 1\n"));
    let a = d.control_addr();
    let t0 = std::time::Instant::now();
    // Silent from the start, and half a request line.
    let mut quiet = http_connect(a);
    let mut half = http_connect(a);
    half.write_all(b"GET /vms HT").unwrap();
    for s in [&mut quiet, &mut half] {
        let mut b = Vec::new();
        let _ = s.read_to_end(&mut b);
    }
    let waited = t0.elapsed();
    assert!(
        waited >= std::time::Duration::from_millis(900) && waited < std::time::Duration::from_secs(10),
        "{waited:?}"
    );
    // A keep-alive connection serves requests, then is closed when idle.
    let mut s = http_connect(a);
    s.write_all(b"GET /vms HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let (c, _) = http_response(&mut s);
    assert_eq!(c, 200);
    io_works(&d, 5);
    d.stop();
}
