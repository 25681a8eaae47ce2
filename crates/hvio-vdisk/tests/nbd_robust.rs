//! Misbehaving and malicious NBD clients: each gets the spec's error or a
//! closed connection; the daemon never panics, holds bounded memory for a
//! client, and every other client's disk keeps working. Every case runs on
//! both transmission paths (async runtime and the io_uring engine's ring).

mod common;
use common::*;
use hvio_vdisk::nbd::proto::*;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

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
size = "160MiB"
"#;

/// Both paths of every test.
macro_rules! both {
    ($name:ident, $uring:ident, $body:ident) => {
        #[test]
        fn $name() {
            $body(CONF);
        }
        #[test]
        fn $uring() {
            if have_io_uring() {
                $body(&over_io_uring(CONF));
            }
        }
    };
}

/// A well-behaved client on `export` writes, flushes and reads back.
fn still_serves(d: &Daemon, export: &str, tag: u64) {
    let mut c = Client::connect(&d.sock(), export);
    assert_eq!(c.write(4096, &pattern(tag, 1)), 0);
    assert_eq!(c.flush(), 0);
    assert_eq!(c.read(4096, 4096).unwrap(), pattern(tag, 1));
    c.disc();
}

/// The server closed the connection (EOF or reset), with nothing more to say.
fn closed(s: &mut UnixStream) -> bool {
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut b = [0u8; 1];
    match s.read(&mut b) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
    }
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Wait (bounded) until the engine has nothing queued or in flight.
fn quiesce(d: &Daemon) {
    let t0 = Instant::now();
    loop {
        let (tx, rx) = tokio::sync::oneshot::channel();
        assert!(d.engine().control(hvio_vdisk::engine::Control::Status(tx)));
        let st = rx.blocking_recv().unwrap();
        if st.inflight == 0 && st.queued == 0 {
            return;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "requests never finished");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn vm_reads(d: &Daemon, vm: usize) -> u64 {
    let (tx, rx) = tokio::sync::oneshot::channel();
    assert!(d.engine().control(hvio_vdisk::engine::Control::Status(tx)));
    rx.blocking_recv().unwrap().vms[vm].reads
}

both!(handshake_garbage, handshake_garbage_over_io_uring, handshake_garbage_on);

fn handshake_garbage_on(conf: &str) {
    let d = Daemon::start(conf);
    // Unknown client flags: closed.
    let mut s = UnixStream::connect(d.sock()).unwrap();
    let mut g = [0u8; 18];
    s.read_exact(&mut g).unwrap();
    s.write_all(&0xffff_ffffu32.to_be_bytes()).unwrap();
    assert!(closed(&mut s));
    // Bad option magic: closed.
    let mut s = Client::greet(&d.sock());
    s.write_all(&[0x55u8; 16]).unwrap();
    assert!(closed(&mut s));
    // Unknown options, with and without data: UNSUP, the haggling goes on.
    let mut s = Client::greet(&d.sock());
    for o in [0u32, 4, 8, 9, 10, 11, 0xffff_ffff] {
        opt(&mut s, o, &[1, 2, 3]);
        assert_eq!(opt_reply(&mut s).1, REP_ERR_UNSUP, "option {o}");
    }
    // Option data longer than the server takes (64 KiB + 1): drained, INVALID, goes on.
    opt(&mut s, OPT_GO, &vec![0u8; 64 * 1024 + 1]);
    assert_eq!(opt_reply(&mut s).1, REP_ERR_INVALID);
    // Malformed GO/INFO data: INVALID each time, and the connection still goes to GO.
    let mut nul = go_data("vm1", &[]);
    nul[5] = 0;
    let mut count_short = go_data("vm1", &[INFO_NAME]);
    count_short.truncate(count_short.len() - 1);
    let bad: Vec<Vec<u8>> = vec![
        vec![],
        vec![0, 0],
        0xffff_ffffu32.to_be_bytes().to_vec(),
        [&0xffff_fff0u32.to_be_bytes()[..], b"vm1", &[0, 0]].concat(),
        [&3u32.to_be_bytes()[..], &[0xff, 0xfe, 0xfd], &[0, 0]].concat(),
        nul,
        count_short,
        [&go_data("vm1", &[])[..], &[0]].concat(),
        [&3u32.to_be_bytes()[..], b"vm1", &0xffffu16.to_be_bytes()].concat(),
    ];
    for data in &bad {
        for o in [OPT_INFO, OPT_GO] {
            opt(&mut s, o, data);
            assert_eq!(opt_reply(&mut s).1, REP_ERR_INVALID, "{o} {data:?}");
        }
    }
    // A name of 5000 bytes (the spec's limit is 4096): INVALID.
    opt(&mut s, OPT_GO, &go_data(&"x".repeat(5000), &[]));
    assert_eq!(opt_reply(&mut s).1, REP_ERR_INVALID);
    // Unknown info types are ignored; GO still succeeds on this connection.
    opt(&mut s, OPT_GO, &go_data("vm1", &[0x7777, INFO_BLOCK_SIZE]));
    loop {
        let (_, t, _) = opt_reply(&mut s);
        if t == REP_ACK {
            break;
        }
        assert_eq!(t, REP_INFO);
    }
    let mut c = Client {
        s,
        size: 8 << 20,
        flags: 0,
    };
    assert_eq!(c.write(0, &pattern(1, 0)), 0);
    assert_eq!(c.read(0, 4096).unwrap(), pattern(1, 0));
    c.disc();
    // Option data of 2^32-1 bytes announced, a little sent, then gone:
    // nothing of that size is allocated and the daemon serves on.
    for o in [OPT_GO, OPT_EXPORT_NAME, 1234] {
        let mut s = Client::greet(&d.sock());
        let mut b = Vec::new();
        b.extend_from_slice(&IHAVEOPT.to_be_bytes());
        b.extend_from_slice(&o.to_be_bytes());
        b.extend_from_slice(&u32::MAX.to_be_bytes());
        b.extend_from_slice(&[0u8; 1000]);
        s.write_all(&b).unwrap();
        drop(s);
    }
    // Gone in the middle of the greeting or of an option header.
    for cut in [0usize, 3, 4, 10, 15] {
        let mut s = UnixStream::connect(d.sock()).unwrap();
        let mut g = [0u8; 18];
        s.read_exact(&mut g).unwrap();
        let mut b = (FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).to_be_bytes().to_vec();
        b.extend_from_slice(&IHAVEOPT.to_be_bytes());
        b.extend_from_slice(&OPT_GO.to_be_bytes());
        s.write_all(&b[..cut.min(b.len())]).unwrap();
    }
    // EXPORT_NAME with a name that is not UTF-8 or unknown: closed.
    let mut s = Client::greet(&d.sock());
    opt(&mut s, OPT_EXPORT_NAME, &[0xff, 0xfe]);
    assert!(closed(&mut s));
    still_serves(&d, "vm1", 2);
    still_serves(&d, "vm2", 3);
    d.stop();
}

both!(
    transmission_garbage,
    transmission_garbage_over_io_uring,
    transmission_garbage_on
);

fn transmission_garbage_on(conf: &str) {
    let d = Daemon::start(conf);
    let mut c = Client::connect(&d.sock(), "vm1");
    let size = c.size;
    assert_eq!(c.write(0, &pattern(5, 0)), 0);
    // Unknown command types, with and without length: EINVAL, the connection carries on.
    for (i, typ) in [5u16, 7, 8, 9, 99, 0xffff].into_iter().enumerate() {
        c.send(0, typ, 100 + i as u64, 0, 4096, &[]);
        assert_eq!(c.reply(), (100 + i as u64, EINVAL), "command {typ}");
    }
    // Offsets past the end and offset+length overflowing u64, for every command.
    for (i, off) in [size, size + 512, u64::MAX - 511, !511u64].into_iter().enumerate() {
        let k = 200 + 10 * i as u64;
        assert_eq!(c.read(off, 512), Err(EINVAL));
        c.send(0, CMD_WRITE, k, off, 512, &[7u8; 512]);
        assert_eq!(c.reply(), (k, ENOSPC));
        c.send(0, CMD_TRIM, k + 1, off, 512, &[]);
        assert_eq!(c.reply(), (k + 1, EINVAL));
        c.send(0, CMD_WRITE_ZEROES, k + 2, off, 512, &[]);
        assert_eq!(c.reply(), (k + 2, ENOSPC));
    }
    // Length 0: read, write, trim, write-zeroes succeed without I/O, even at the end.
    for (i, typ) in [CMD_READ, CMD_WRITE, CMD_TRIM, CMD_WRITE_ZEROES]
        .into_iter()
        .enumerate()
    {
        c.send(0, typ, 300 + i as u64, 0, 0, &[]);
        assert_eq!(c.reply(), (300 + i as u64, 0), "length 0, command {typ}");
        c.send(CMD_FLAG_FUA, typ, 310 + i as u64, size, 0, &[]);
        assert_eq!(c.reply(), (310 + i as u64, 0), "length 0 at the end, command {typ}");
    }
    // A read of 4 GiB - 512: EINVAL, nothing allocated.
    assert_eq!(c.read(0, !511u32), Err(EINVAL));
    // Flags not negotiated or not defined: EINVAL.
    for (i, f) in [1u16 << 2, 1 << 3, 1 << 15, CMD_FLAG_NO_HOLE].into_iter().enumerate() {
        c.send(f, CMD_READ, 400 + i as u64, 0, 512, &[]);
        assert_eq!(c.reply(), (400 + i as u64, EINVAL), "flag {f:#x}");
    }
    // FUA on FLUSH and READ is accepted (clients are known to send it).
    c.send(CMD_FLAG_FUA, CMD_FLUSH, 410, 0, 0, &[]);
    assert_eq!(c.reply(), (410, 0));
    let mut rd = [0u8; 512];
    c.send(CMD_FLAG_FUA, CMD_READ, 411, 0, 512, &[]);
    assert_eq!(c.reply(), (411, 0));
    c.s.read_exact(&mut rd).unwrap();
    assert_eq!(rd[..], pattern(5, 0)[..512]);
    // The data written first is intact.
    assert_eq!(c.read(0, 4096).unwrap(), pattern(5, 0));
    c.disc();

    // A 4 GiB - 1 write announced, a little payload sent, then gone.
    let mut c = Client::connect(&d.sock(), "vm1");
    c.send(0, CMD_WRITE, 1, 0, u32::MAX, &[1u8; 4096]);
    drop(c);
    // A write announced with 64 KiB, 1000 bytes sent, then gone: never written.
    let mut c = Client::connect(&d.sock(), "vm1");
    c.send(0, CMD_WRITE, 1, 8192, 65536, &[0xeeu8; 1000]);
    drop(c);
    // A bad magic after valid requests: hard disconnect, the earlier replies still come.
    let mut c = Client::connect(&d.sock(), "vm2");
    c.send(0, CMD_WRITE, 1, 0, 4096, &pattern(6, 0));
    c.send(0, CMD_FLUSH, 2, 0, 0, &[]);
    c.s.write_all(&[0xaau8; 28]).unwrap();
    let mut got = vec![c.reply(), c.reply()];
    got.sort();
    assert_eq!(got, [(1, 0), (2, 0)]);
    assert!(closed(&mut c.s));
    quiesce(&d);
    let mut c = Client::connect(&d.sock(), "vm1");
    assert_eq!(
        c.read(8192, 4096).unwrap(),
        vec![0u8; 4096],
        "a half-sent write reached the disk"
    );
    c.disc();
    still_serves(&d, "vm1", 7);
    still_serves(&d, "vm2", 8);
    d.stop();
}

both!(
    disc_with_requests_in_flight,
    disc_with_requests_in_flight_over_io_uring,
    disc_with_requests_in_flight_on
);

fn disc_with_requests_in_flight_on(conf: &str) {
    let d = Daemon::start(conf);
    let mut c = Client::connect(&d.sock(), "vm1");
    for i in 0..64u64 {
        c.send(0, CMD_WRITE, i, i * 4096, 4096, &pattern(9, i));
    }
    c.send(0, CMD_FLUSH, 64, 0, 0, &[]);
    // DISC, then requests the server must not act on.
    c.send(0, CMD_DISC, 65, 0, 0, &[]);
    c.send(0, CMD_WRITE, 66, 0, 4096, &[0u8; 4096]);
    // Every request sent before DISC is answered, then the server closes.
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..65 {
        let (cookie, err) = c.reply();
        assert_eq!(err, 0);
        assert!(seen.insert(cookie));
    }
    assert_eq!(seen.len(), 65);
    assert!(closed(&mut c.s));
    let mut c = Client::connect(&d.sock(), "vm1");
    for i in (0..64u64).step_by(9) {
        assert_eq!(c.read(i * 4096, 4096).unwrap(), pattern(9, i));
    }
    c.disc();
    d.stop();
}

both!(
    many_clients_vanish,
    many_clients_vanish_over_io_uring,
    many_clients_vanish_on
);

fn many_clients_vanish_on(conf: &str) {
    let d = Daemon::start(conf);
    let fds = open_fds();
    let mut keep = Client::connect(&d.sock(), "vm2");
    assert_eq!(keep.write(0, &pattern(10, 0)), 0);
    for i in 0..200u64 {
        match i % 5 {
            // Connect and go.
            0 => drop(UnixStream::connect(d.sock()).unwrap()),
            // Mid-haggling.
            1 => {
                let mut s = Client::greet(&d.sock());
                opt(&mut s, OPT_LIST, &[]);
            }
            // Reads in flight, gone without reading a reply.
            2 => {
                let mut c = Client::connect(&d.sock(), "vm1");
                for k in 0..8 {
                    c.send(0, CMD_READ, k, k * 65536, 65536, &[]);
                }
            }
            // Mid-payload.
            3 => {
                let mut c = Client::connect(&d.sock(), "vm1");
                c.send(0, CMD_WRITE, 1, 0, 8192, &[3u8; 100]);
            }
            // Writes and a flush in flight.
            _ => {
                let mut c = Client::connect(&d.sock(), "vm1");
                for k in 0..4u64 {
                    c.send(0, CMD_WRITE, k, (16 + k) * 4096, 4096, &pattern(11, k));
                }
                c.send(0, CMD_FLUSH, 9, 0, 0, &[]);
            }
        }
    }
    // The long-lived client was never disturbed.
    assert_eq!(keep.read(0, 4096).unwrap(), pattern(10, 0));
    keep.disc();
    quiesce(&d);
    still_serves(&d, "vm1", 12);
    // Every abandoned connection is closed: no descriptor stays open.
    let t0 = Instant::now();
    while open_fds() > fds {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "{} descriptors still open ({} before)",
            open_fds(),
            fds
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    d.stop();
}

both!(
    a_client_that_never_reads_replies_holds_bounded_memory,
    a_client_that_never_reads_replies_holds_bounded_memory_over_io_uring,
    never_reads_replies_on
);

/// 150 reads of 1 MiB (150 MiB of replies) from a client that reads
/// nothing: the server stops taking its requests once `CONN_BUDGET` bytes
/// are held for it, instead of buffering every reply.
/// Once it reads, every reply arrives.
fn never_reads_replies_on(conf: &str) {
    let d = Daemon::start(conf);
    let mut c = Client::connect(&d.sock(), "vm2");
    let mut w = c.s.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        let mut b = Vec::new();
        for i in 0..150u64 {
            request(&mut b, 0, CMD_READ, i, i << 20, 1 << 20);
        }
        w.write_all(&b).unwrap();
    });
    // Bounded: well under the 150 MiB asked for are ever completed (held) at once.
    let bound = (hvio_vdisk::nbd::CONN_BUDGET >> 20) as u64 + 8;
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_millis(1500) {
        let n = vm_reads(&d, 1);
        assert!(
            n <= bound,
            "{n} MiB of replies held for a client that reads none (bound {bound})"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The other VM is served meanwhile.
    still_serves(&d, "vm1", 13);
    // Reading now: every reply, in full.
    let mut seen = std::collections::BTreeSet::new();
    let mut data = vec![0u8; 1 << 20];
    for _ in 0..150 {
        let (cookie, err) = c.reply();
        assert_eq!(err, 0);
        c.s.read_exact(&mut data).unwrap();
        assert!(seen.insert(cookie));
    }
    writer.join().unwrap();
    assert_eq!(seen.len(), 150);
    c.disc();
    d.stop();
}

both!(
    stop_with_a_client_not_reading_takes_the_grace_only,
    stop_with_a_client_not_reading_takes_the_grace_only_over_io_uring,
    stop_not_reading_on
);

/// A client that asked for 100 MiB and reads none of it holds up a stopping
/// daemon for `SHUTDOWN_GRACE`, not 60 s; a client that reads gets every reply.
fn stop_not_reading_on(conf: &str) {
    let d = Daemon::start(conf);
    let mut c = Client::connect(&d.sock(), "vm2");
    let mut b = Vec::new();
    for i in 0..100u64 {
        request(&mut b, 0, CMD_READ, i, i << 20, 1 << 20);
    }
    c.s.write_all(&b).unwrap();
    let mut good = Client::connect(&d.sock(), "vm1");
    for i in 0..8u64 {
        good.send(0, CMD_WRITE, i, i * 4096, 4096, &pattern(14, i));
    }
    for _ in 0..8 {
        assert_eq!(good.reply().1, 0);
    }
    let t0 = Instant::now();
    d.stop();
    let took = t0.elapsed();
    let grace = hvio_vdisk::daemon::SHUTDOWN_GRACE;
    assert!(took < grace + Duration::from_secs(10), "stop took {took:?}");
    // The reading client had its replies and a clean close; the other one
    // was cut off before its 100 MiB.
    assert!(closed(&mut good.s));
    c.s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let (mut n, mut buf) = (0usize, vec![0u8; 1 << 16]);
    loop {
        match c.s.read(&mut buf) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("after {n} bytes: {e}"),
        }
    }
    assert!(n < 100 << 20, "{n} bytes of replies after the abort");
}

/// The thread that starts a daemon on io_uring is not interrupted when the
/// daemon stops: the kernel ties a ring to the task that made it and, when
/// the ring is torn down, queues task work there with a signal, which made
/// a blocking read with a timeout on that thread fail with EINTR.
#[test]
fn stopping_an_io_uring_daemon_does_not_interrupt_the_thread_that_started_it() {
    if !have_io_uring() {
        return;
    }
    let d = Daemon::start(&over_io_uring(CONF));
    still_serves(&d, "vm1", 15);
    d.stop();
    let (mut a, _b) = UnixStream::pair().unwrap();
    a.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    let e = a.read(&mut [0u8; 1]).unwrap_err();
    assert!(
        matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
        "a read with nothing to read ended with {e} instead of its timeout"
    );
}
