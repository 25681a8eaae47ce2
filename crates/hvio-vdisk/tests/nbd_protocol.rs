//! The NBD export against the protocol, with a minimal client: handshake
//! options, errors the spec names, many requests in flight, bad clients.

mod common;
use common::*;
use hvio_vdisk::nbd::proto::*;
use std::io::{Read, Write};

const CONF: &str = r#"
[store]
path = "@DIR@/disk.img"
depth = 8
[scheduler]
name = "deadline"
[nbd]
unix = "@DIR@/nbd.sock"
[[vm]]
name = "vm1"
size = "8MiB"
[[vm]]
name = "vm2"
size = "4MiB"
[[vm]]
name = "ro"
size = "1MiB"
read_only = true
"#;

#[test]
fn option_haggling() {
    option_haggling_on(CONF);
}

#[test]
fn option_haggling_over_io_uring() {
    if have_io_uring() {
        option_haggling_on(&over_io_uring(CONF));
    }
}

fn option_haggling_on(conf: &str) {
    let d = Daemon::start(conf);
    let mut s = Client::greet(&d.sock());
    // Unknown option and structured replies: UNSUP, the connection carries on.
    opt(&mut s, 8, &[]);
    assert_eq!(opt_reply(&mut s).1, REP_ERR_UNSUP);
    opt(&mut s, 1234, b"whatever");
    assert_eq!(opt_reply(&mut s).1, REP_ERR_UNSUP);
    // LIST: one SERVER reply per export, then ACK.
    opt(&mut s, OPT_LIST, &[]);
    let mut names = Vec::new();
    loop {
        let (o, t, data) = opt_reply(&mut s);
        assert_eq!(o, OPT_LIST);
        if t == REP_ACK {
            break;
        }
        assert_eq!(t, REP_SERVER);
        names.push(String::from_utf8(data[4..].to_vec()).unwrap());
    }
    assert_eq!(names, ["vm1", "vm2", "ro"]);
    opt(&mut s, OPT_LIST, b"x");
    assert_eq!(opt_reply(&mut s).1, REP_ERR_INVALID);
    // INFO on an unknown export: ERR_UNKNOWN; malformed INFO: ERR_INVALID.
    opt(&mut s, OPT_INFO, &go_data("nope", &[]));
    assert_eq!(opt_reply(&mut s).1, REP_ERR_UNKNOWN);
    opt(&mut s, OPT_INFO, &[0, 0, 0, 9, b'a']);
    assert_eq!(opt_reply(&mut s).1, REP_ERR_INVALID);
    // INFO: EXPORT and BLOCK_SIZE, then ACK.
    opt(&mut s, OPT_INFO, &go_data("vm2", &[INFO_BLOCK_SIZE, INFO_NAME]));
    let mut got_export = false;
    let mut got_bs = false;
    loop {
        let (_, t, data) = opt_reply(&mut s);
        if t == REP_ACK {
            break;
        }
        assert_eq!(t, REP_INFO);
        match u16::from_be_bytes([data[0], data[1]]) {
            INFO_EXPORT => {
                assert_eq!(u64::from_be_bytes(data[2..10].try_into().unwrap()), 4 << 20);
                let f = u16::from_be_bytes([data[10], data[11]]);
                assert!(f & TF_CAN_MULTI_CONN != 0 && f & TF_SEND_FLUSH != 0 && f & TF_SEND_FUA != 0);
                got_export = true;
            }
            INFO_BLOCK_SIZE => {
                let v: Vec<u32> = data[2..]
                    .chunks(4)
                    .map(|c| u32::from_be_bytes(c.try_into().unwrap()))
                    .collect();
                assert_eq!(v, [512, 4096, 32 << 20]);
                got_bs = true;
            }
            _ => {}
        }
    }
    assert!(got_export && got_bs);
    // ABORT: ACK and close.
    opt(&mut s, OPT_ABORT, &[]);
    assert_eq!(opt_reply(&mut s).1, REP_ACK);
    let mut b = [0u8; 1];
    assert_eq!(s.read(&mut b).unwrap(), 0);

    // EXPORT_NAME (old clients): size, flags, no zeroes (negotiated).
    let mut s = Client::greet(&d.sock());
    opt(&mut s, OPT_EXPORT_NAME, b"vm1");
    let mut r = [0u8; 10];
    s.read_exact(&mut r).unwrap();
    assert_eq!(u64::from_be_bytes(r[0..8].try_into().unwrap()), 8 << 20);
    let mut c = Client {
        s,
        size: 8 << 20,
        flags: 0,
    };
    assert_eq!(c.write(0, &pattern(1, 0)), 0);
    assert_eq!(c.read(0, 4096).unwrap(), pattern(1, 0));
    // Without block-size negotiation unaligned requests are served.
    assert_eq!(c.read(1, 3).unwrap(), pattern(1, 0)[1..4].to_vec());
    c.disc();
    // EXPORT_NAME of an unknown export: the server must close.
    let mut s = Client::greet(&d.sock());
    opt(&mut s, OPT_EXPORT_NAME, b"nope");
    assert_eq!(s.read(&mut b).unwrap(), 0);
    d.stop();
}

#[test]
fn errors_per_spec_and_the_connection_carries_on() {
    errors_per_spec_and_the_connection_carries_on_on(CONF);
}

#[test]
fn errors_per_spec_and_the_connection_carries_on_over_io_uring() {
    if have_io_uring() {
        errors_per_spec_and_the_connection_carries_on_on(&over_io_uring(CONF));
    }
}

fn errors_per_spec_and_the_connection_carries_on_on(conf: &str) {
    let d = Daemon::start(conf);
    let mut c = Client::connect(&d.sock(), "vm2");
    let size = c.size;
    // Read past the end: EINVAL. Write past the end: ENOSPC (payload skipped).
    assert_eq!(c.read(size - 512, 1024), Err(EINVAL));
    assert_eq!(c.write(size - 512, &[7u8; 1024]), ENOSPC);
    // Offset overflow.
    assert_eq!(c.read(u64::MAX - 511, 512), Err(EINVAL));
    // Over the maximum payload: EINVAL for read and for write (payload skipped).
    assert_eq!(c.read(0, MAX_PAYLOAD + 512), Err(EINVAL));
    let big = vec![1u8; MAX_PAYLOAD as usize + 512];
    assert_eq!(c.write(0, &big), EINVAL);
    // Unaligned after negotiating block sizes: EINVAL.
    assert_eq!(c.read(100, 512), Err(EINVAL));
    // Unknown command and undocumented flags: EINVAL.
    c.send(0, 99, 5, 0, 0, &[]);
    assert_eq!(c.reply(), (5, EINVAL));
    c.send(CMD_FLAG_NO_HOLE, CMD_WRITE, 6, 0, 512, &[0u8; 512]);
    assert_eq!(c.reply(), (6, EINVAL));
    c.send(1 << 4, CMD_WRITE_ZEROES, 7, 0, 512, &[]);
    assert_eq!(c.reply(), (7, EINVAL));
    // Trim and write-zeroes past the end.
    c.send(0, CMD_TRIM, 8, size, 512, &[]);
    assert_eq!(c.reply(), (8, EINVAL));
    c.send(0, CMD_WRITE_ZEROES, 9, size - 512, 4096, &[]);
    assert_eq!(c.reply(), (9, ENOSPC));
    // Still usable: write, FUA write, zeroes, read back.
    assert_eq!(c.write(4096, &pattern(2, 1)), 0);
    c.send(CMD_FLAG_FUA, CMD_WRITE, 10, 8192, 4096, &pattern(2, 2));
    assert_eq!(c.reply(), (10, 0));
    assert_eq!(c.read(4096, 8192).unwrap(), [pattern(2, 1), pattern(2, 2)].concat());
    c.send(CMD_FLAG_NO_HOLE, CMD_WRITE_ZEROES, 11, 4096, 4096, &[]);
    assert_eq!(c.reply(), (11, 0));
    c.send(0, CMD_WRITE_ZEROES, 12, 8192, 4096, &[]);
    assert_eq!(c.reply(), (12, 0));
    assert!(c.read(4096, 8192).unwrap().iter().all(|&b| b == 0));
    c.send(0, CMD_TRIM, 13, 0, 4096, &[]);
    assert_eq!(c.reply(), (13, 0));
    assert_eq!(c.flush(), 0);
    // Read-only export: EPERM for writes.
    let mut ro = Client::connect(&d.sock(), "ro");
    assert!(ro.flags & TF_READ_ONLY != 0);
    assert_eq!(ro.write(0, &[0u8; 512]), EPERM);
    assert!(ro.read(0, 512).is_ok());
    // A bad magic is a hard disconnect; the server goes on serving others.
    c.s.write_all(&[0u8; 28]).unwrap();
    let mut b = [0u8; 1];
    assert_eq!(c.s.read(&mut b).unwrap(), 0);
    assert!(ro.read(0, 512).is_ok());
    ro.disc();
    d.stop();
}

#[test]
fn many_in_flight_multi_conn_and_disconnect_mid_request() {
    many_in_flight_multi_conn_and_disconnect_mid_request_on(CONF);
}

#[test]
fn many_in_flight_multi_conn_and_disconnect_mid_request_over_io_uring() {
    if have_io_uring() {
        many_in_flight_multi_conn_and_disconnect_mid_request_on(&over_io_uring(CONF));
    }
}

fn many_in_flight_multi_conn_and_disconnect_mid_request_on(conf: &str) {
    let d = Daemon::start(conf);
    let mut a = Client::connect(&d.sock(), "vm1");
    let mut b = Client::connect(&d.sock(), "vm1");
    // 200 writes in flight on one connection before any reply is read.
    for i in 0..200u64 {
        a.send(0, CMD_WRITE, 1000 + i, i * 4096, 4096, &pattern(3, i));
    }
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..200 {
        let (cookie, err) = a.reply();
        assert_eq!(err, 0);
        assert!(seen.insert(cookie));
    }
    assert_eq!(seen.len(), 200);
    // Another connection's FLUSH covers them; it reads them back.
    assert_eq!(b.flush(), 0);
    for i in (0..200u64).step_by(17) {
        assert_eq!(b.read(i * 4096, 4096).unwrap(), pattern(3, i));
    }
    // Reads in flight: replies may come in any order, each with its own data.
    for i in 0..64u64 {
        b.send(0, CMD_READ, i, i * 4096, 4096, &[]);
    }
    for _ in 0..64 {
        let (cookie, err) = b.reply();
        assert_eq!(err, 0);
        let mut data = vec![0u8; 4096];
        b.s.read_exact(&mut data).unwrap();
        assert_eq!(data, pattern(3, cookie));
    }
    // A client that vanishes mid-request (header and half a payload; and one
    // with requests in flight): nothing leaks, others carry on.
    let mut gone = Client::connect(&d.sock(), "vm1");
    gone.send(0, CMD_WRITE, 1, 0, 4096, &[9u8; 2048]);
    drop(gone);
    let mut gone = Client::connect(&d.sock(), "vm1");
    for i in 0..32u64 {
        gone.send(0, CMD_READ, i, 0, 1 << 20, &[]);
    }
    drop(gone);
    assert_eq!(a.read(0, 4096).unwrap(), pattern(3, 0));
    // The abandoned requests still complete; nothing stays queued or in flight.
    let t0 = std::time::Instant::now();
    loop {
        let (tx, rx) = tokio::sync::oneshot::channel();
        assert!(d.engine().control(hvio_vdisk::engine::Control::Status(tx)));
        let st = rx.blocking_recv().unwrap();
        if st.inflight == 0 && st.queued == 0 {
            assert!(st.vms[0].reads >= 1 + 12 + 64, "{}", st.vms[0].reads);
            break;
        }
        assert!(
            t0.elapsed().as_secs() < 20,
            "requests left: {} in flight, {} queued",
            st.inflight,
            st.queued
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // A 6 MiB write (its payload spans many receives: on the io_uring engine
    // most of it lands straight in the request's buffer) and its read-back
    // (a reply far larger than one send).
    let big: Vec<u8> = (0..6u64 << 20).map(|i| (i * 7 + i / 4096) as u8).collect();
    assert_eq!(a.write(1 << 20, &big), 0);
    assert!(b.read(1 << 20, big.len() as u32).unwrap() == big);
    a.disc();
    b.disc();
    d.stop();
}

#[test]
fn backend_enospc_goes_to_that_client_and_is_counted() {
    backend_enospc_on(CONF);
}

#[test]
fn backend_enospc_goes_to_that_client_and_is_counted_over_io_uring() {
    if have_io_uring() {
        backend_enospc_on(&over_io_uring(CONF));
    }
}

fn backend_enospc_on(conf: &str) {
    let dir = tempfile::tempdir().unwrap();
    let Some(guard) = mount_tmpfs(dir.path(), "small", "1m") else {
        return;
    };
    let small = guard.0.clone();
    // A sparse 8 MiB backing file on a 1 MiB file system: writes run out of space.
    let d = Daemon::start(&conf.replace("@DIR@/disk.img", &format!("{}/disk.img", small.display())));
    let mut c = Client::connect(&d.sock(), "vm1");
    let mut enospc = 0;
    for i in 0..512u64 {
        match c.write(i * 8192, &pattern(4, i)) {
            0 => {}
            ENOSPC => enospc += 1,
            e => panic!("write {i}: error {e}"),
        }
    }
    assert!(enospc > 0, "a 1 MiB tmpfs took 2 MiB of writes");
    // The connection and the other clients carry on.
    assert!(c.read(0, 4096).is_ok());
    let mut other = Client::connect(&d.sock(), "vm2");
    assert!(other.read(0, 4096).is_ok());
    let (tx, rx) = tokio::sync::oneshot::channel();
    assert!(d.engine().control(hvio_vdisk::engine::Control::Metrics(tx)));
    let m = rx.blocking_recv().unwrap();
    assert!(
        m.contains(&format!("hvio_errors_total{{vm=\"vm1\",op=\"write\"}} {enospc}")),
        "{m}"
    );
    assert!(m.contains(&format!("hvio_backend_errors_total {enospc}")), "{m}");
    c.disc();
    other.disc();
    drop(d.stop());
}
