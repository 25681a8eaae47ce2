//! The NBD export with real clients: qemu-io, qemu-img, fio's nbd engine.
//! Each test skips (loudly) only if its tool is not installed.

mod common;
use common::*;
use std::process::Command;

fn conf(engine: &str, sched: &str) -> String {
    format!(
        r#"
[store]
path = "@DIR@/disk.img"
engine = "{engine}"
depth = 16
[scheduler]
name = "{sched}"
[nbd]
unix = "@DIR@/nbd.sock"
tcp = "127.0.0.1:0"
[[vm]]
name = "vm1"
size = "32MiB"
[[vm]]
name = "vm2"
size = "8MiB"
weight = 250
"#
    )
}

fn qemu_io(uri: &str, cmds: &[&str]) -> String {
    let mut c = Command::new("qemu-io");
    c.args(["-f", "raw"]);
    for x in cmds {
        c.args(["-c", x]);
    }
    c.arg(uri);
    let out = run(&mut c);
    assert!(!out.contains("Pattern verification failed"), "{out}");
    assert!(!out.contains("failed:"), "{out}");
    out
}

fn qemu_io_ops(d: &Daemon, tcp: bool) {
    let uri = if tcp {
        let a = d.running.as_ref().unwrap().nbd_addr.unwrap();
        format!("nbd://{a}/vm1")
    } else {
        d.uri("vm1")
    };
    qemu_io(
        &uri,
        &[
            "write -P 0xab 0 1M",
            "write -f -P 0xcd 1M 64k", // FUA
            "flush",
            "read -P 0xab 0 1M",
            "read -P 0xcd 1M 64k",
            "write -z 64k 64k", // write zeroes, no unmap
            "read -P 0 64k 64k",
            "write -z -u 128k 128k", // write zeroes, may punch
            "read -P 0 128k 128k",
            "read -P 0xab 256k 768k",
            "discard 2M 1M",
            "aio_write -P 0x11 4M 4k",
            "aio_write -P 0x22 4100k 4k",
            "aio_flush",
            "read -P 0x11 4M 4k",
            "read -P 0x22 4100k 4k",
        ],
    );
    // The other VM's region is untouched.
    qemu_io(&d.uri("vm2"), &["read -P 0 0 1M"]);
}

#[test]
fn qemu_io_read_write_flush_fua_zeroes() {
    if !have("qemu-io") {
        return;
    }
    let d = Daemon::start(&conf("threads", "deadline"));
    qemu_io_ops(&d, false);
    qemu_io_ops(&d, true);
    d.stop();
}

#[test]
fn qemu_io_over_io_uring() {
    if !have("qemu-io") || !have_io_uring() {
        return;
    }
    let d = Daemon::start(&conf("io_uring", "noop"));
    // Both sockets: after the handshake the scheduler thread's ring serves them.
    qemu_io_ops(&d, false);
    qemu_io_ops(&d, true);
    d.stop();
}

/// The attachment syntaxes docs/serve.md shows for QEMU (`-drive file=`
/// legacy and URI forms, `-blockdev driver=nbd,...`), through qemu-io and
/// qemu-img, which parse them with the same QEMU block layer.
#[test]
fn qemu_attaches_with_the_documented_syntaxes() {
    if !have("qemu-io") || !have("qemu-img") {
        return;
    }
    // The syntaxes do not depend on the engine: io_uring where it runs.
    let engine = if have_io_uring() { "io_uring" } else { "threads" };
    let d = Daemon::start(&conf(engine, "noop"));
    let sock = d.path("nbd.sock");
    let sock = sock.display();
    let tcp = d.running.as_ref().unwrap().nbd_addr.unwrap();
    let forms = [
        format!("nbd:unix:{sock}:exportname=vm1"),
        format!("nbd://{tcp}/vm1"),
        format!("nbd+unix:///vm1?socket={sock}"),
    ];
    for (i, f) in forms.iter().enumerate() {
        let info = run(Command::new("qemu-img").args(["info", "-f", "raw"]).arg(f));
        assert!(info.contains("virtual size: 32 MiB"), "{f}: {info}");
        let p = format!("{:#x}", 0x30 + i);
        qemu_io(
            f,
            &[
                &format!("write -P {p} {i}M 64k"),
                "flush",
                &format!("read -P {p} {i}M 64k"),
            ],
        );
    }
    // -blockdev driver=nbd,server.type=unix,server.path=...,export=vm1
    let opts = format!("driver=nbd,server.type=unix,server.path={sock},export=vm1");
    let out = run(Command::new("qemu-io")
        .args(["--image-opts", "-c", "read -P 0x30 0 64k", "-c", "read -P 0x32 2M 64k"])
        .arg(&opts));
    assert!(
        !out.contains("Pattern verification failed") && !out.contains("failed:"),
        "{out}"
    );
    d.stop();
}

#[test]
fn qemu_img_convert_and_compare() {
    if !have("qemu-img") {
        return;
    }
    let d = Daemon::start(&conf("threads", "noop"));
    // An 8 MiB source with data and holes.
    let src = d.path("src.raw");
    let mut data = vec![0u8; 8 << 20];
    for (i, b) in data.iter_mut().enumerate().take(6 << 20) {
        *b = (i.wrapping_mul(2654435761) >> 13) as u8;
    }
    std::fs::write(&src, &data).unwrap();
    let uri = qemu_img_round_trip(&d, "vm2", &src, &data);
    // A different image does not compare equal.
    data[5 << 20] ^= 0xff;
    std::fs::write(&src, &data).unwrap();
    let st = Command::new("qemu-img")
        .args(["compare", "-f", "raw", "-F", "raw"])
        .arg(&src)
        .arg(&uri)
        .output()
        .unwrap();
    assert_eq!(st.status.code(), Some(1), "{}", String::from_utf8_lossy(&st.stdout));
    d.stop();
}

fn fio_verify(d: &Daemon, export: &str, extra: &[&str]) -> String {
    let out = run(Command::new("fio")
        .args([
            "--name=verify",
            "--ioengine=nbd",
            &format!("--uri={}", d.uri(export)),
            "--rw=randwrite",
            "--bs=4k",
            "--iodepth=32",
            "--size=8M",
            "--verify=crc32c",
            "--do_verify=1",
            "--verify_fatal=1",
            "--verify_state_save=0",
            "--output-format=terse",
        ])
        .args(extra));
    assert!(!out.contains("verify: bad"), "{out}");
    out
}

#[test]
fn fio_nbd_verify_crc32c_iodepth_32() {
    if !have("fio") {
        return;
    }
    let d = Daemon::start(&conf("threads", "deadline"));
    fio_verify(&d, "vm1", &[]);
    // Two jobs = two connections to the same export (multi-conn), disjoint halves.
    fio_verify(&d, "vm1", &["--numjobs=2", "--offset_increment=8M", "--bs=64k"]);
    d.stop();
    if have_io_uring() {
        let d = Daemon::start(&conf("io_uring", "noop"));
        fio_verify(&d, "vm1", &[]);
        d.stop();
    }
}
