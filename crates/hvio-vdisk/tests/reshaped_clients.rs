//! A reshaped image with real NBD clients: fio's nbd engine writes with
//! `--verify=crc32c` at iodepth 32 and verifies after a restart of the
//! daemon; qemu-img converts in, compares and converts out; nbdcopy copies
//! in and out. Each test skips (loudly) only if its tool is not installed.

mod common;
use common::*;
use std::process::Command;

const CONF: &str = r#"
[store]
depth = 16
layout = "reshaped"
reshape = { base = false, meta_region_bytes = 8388608, data_region_bytes = 50331648, segment_bytes = 1048576, log_bytes = 4194304 }
[scheduler]
name = "deadline"
[nbd]
unix = "@DIR@/nbd.sock"
[[vm]]
name = "vm1"
size = "32MiB"
image = "@DIR@/vm1.rsi"
"#;

fn fio(d: &Daemon, extra: &[&str]) -> String {
    let out = run(Command::new("fio")
        .args([
            "--name=verify",
            "--ioengine=nbd",
            &format!("--uri={}", d.uri("vm1")),
            "--rw=randwrite",
            "--bs=4k",
            "--iodepth=32",
            "--size=24M",
            "--randrepeat=1",
            "--verify=crc32c",
            "--verify_fatal=1",
            "--verify_state_save=0",
            "--output-format=terse",
        ])
        .args(extra));
    assert!(!out.contains("verify: bad"), "{out}");
    out
}

#[test]
fn fio_randwrite_verifies_after_a_restart() {
    if !have("fio") {
        return;
    }
    let d = Daemon::start(CONF);
    // Random writes (several passes over the disk: the cleaner runs), verified now...
    fio(&d, &["--do_verify=1", "--loops=3"]);
    let dir = d.stop();
    // ...and again by a fresh daemon that recovered the table from the image.
    let d = Daemon::start_in(CONF, dir);
    fio(&d, &["--verify_only=1"]);
    // The check can fail: zeroes where fio expects its blocks do not verify.
    let bad = Command::new("fio")
        .args([
            "--name=verify",
            "--ioengine=nbd",
            &format!("--uri={}", d.uri("vm1")),
            "--rw=randwrite",
            "--bs=4k",
            "--size=4M",
            "--offset=28M",
            "--verify=crc32c",
            "--verify_only=1",
            "--verify_state_save=0",
        ])
        .output()
        .unwrap();
    assert!(!bad.status.success(), "fio verified blocks never written");
    let dir = d.stop();
    let rep = hvio_vdisk::image::check(&dir.path().join("vm1.rsi")).unwrap();
    assert!(rep.problems.is_empty(), "{:?}", rep.problems);
}

#[test]
fn qemu_img_and_nbdcopy_in_and_out() {
    let d = Daemon::start(CONF);
    let src = d.path("src.raw");
    let mut data = vec![0u8; 32 << 20];
    for (i, b) in data.iter_mut().enumerate().take(20 << 20) {
        *b = (i.wrapping_mul(2654435761) >> 13) as u8;
    }
    std::fs::write(&src, &data).unwrap();
    let uri = d.uri("vm1");
    if have("qemu-img") {
        qemu_img_round_trip(&d, "vm1", &src, &data);
    }
    if have("nbdcopy") {
        data.reverse();
        std::fs::write(&src, &data).unwrap();
        run(Command::new("nbdcopy").arg(&src).arg(&uri));
        let back = d.path("back2.raw");
        run(Command::new("nbdcopy").arg(&uri).arg(&back));
        assert_eq!(std::fs::read(&back).unwrap(), data);
    }
    d.stop();
}
