//! The FUSE export: punch-hole / zero-range read back zeros, and a real file
//! system on a `losetup --direct-io=on` loop device over the export
//! (mkfs.ext4, e2fsck -fn, mount, fio --verify=crc32c at iodepth 32).

mod common;
use common::*;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::Command;

const CONF: &str = r#"
[store]
path = "@DIR@/disk.img"
depth = 32
[scheduler]
name = "deadline"
[fuse]
mountpoint = "@DIR@/mnt"
[[vm]]
name = "vm1"
size = "128MiB"
[[vm]]
name = "vm2"
size = "4MiB"
"#;

fn can_fuse() -> bool {
    if !can_mount("the FUSE export") {
        return false;
    }
    let ok = Path::new("/dev/fuse").exists();
    if !ok {
        skipped("FUSE export tests need /dev/fuse (`modprobe fuse`)");
    }
    ok
}

#[test]
fn punch_hole_and_zero_range_read_back_zeros_and_fsync_is_flush() {
    if !can_fuse() {
        return;
    }
    let d = Daemon::start(CONF);
    let path = d.path("mnt/vm2");
    let f = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
    assert_eq!(f.metadata().unwrap().len(), 4 << 20);
    let data: Vec<u8> = (0..256 * 1024).map(|i| (i % 251) as u8 + 1).collect();
    f.write_all_at(&data, 0).unwrap();
    f.sync_all().unwrap();
    let mut back = vec![0u8; data.len()];
    f.read_exact_at(&mut back, 0).unwrap();
    assert_eq!(back, data);
    let fd = f.as_raw_fd();
    // SAFETY: plain syscalls on an open descriptor.
    let r = unsafe { libc::fallocate(fd, libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE, 4096, 65536) };
    assert_eq!(r, 0, "punch hole: {}", std::io::Error::last_os_error());
    let r = unsafe { libc::fallocate(fd, libc::FALLOC_FL_ZERO_RANGE, 131072, 8192) };
    assert_eq!(r, 0, "zero range: {}", std::io::Error::last_os_error());
    f.read_exact_at(&mut back, 0).unwrap();
    for (i, (&b, &want)) in back.iter().zip(&data).enumerate() {
        let zeroed = (4096..4096 + 65536).contains(&i) || (131072..131072 + 8192).contains(&i);
        assert_eq!(b, if zeroed { 0 } else { want }, "byte {i}");
    }
    // Past the end: ENOSPC, and the disk cannot be resized.
    assert!(f.write_all_at(&[1u8; 512], 4 << 20).is_err());
    assert!(f.set_len(1 << 20).is_err());
    // Reads at the end are short, as for any file.
    let mut tail = vec![0u8; 8192];
    assert_eq!(f.read_at(&mut tail, (4 << 20) - 4096).unwrap(), 4096);
    drop(f);
    let mut names: Vec<String> = std::fs::read_dir(d.path("mnt"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["vm1", "vm2"]);
    d.stop();
}

#[test]
fn ext4_on_direct_io_loop_device_survives_fsck_and_fio_verify() {
    ext4_on_loop("threads", true);
}

/// The same over the io_uring engine (the benchmark's configuration), where
/// the engine thread answers the FUSE requests itself.
#[test]
fn ext4_on_direct_io_loop_device_over_io_uring() {
    ext4_on_loop("io_uring", true);
}

/// io_uring over the page cache (`direct = false`, the benchmark's
/// like-for-like configuration): whole-page writes are done on the engine
/// thread itself, the rest on the ring.
#[test]
fn ext4_on_direct_io_loop_device_over_io_uring_buffered() {
    ext4_on_loop("io_uring", false);
}

fn ext4_on_loop(engine: &str, direct: bool) {
    if engine == "io_uring" && !have_io_uring() {
        return;
    }
    if !can_fuse() || !have("losetup") || !have("mkfs.ext4") || !have("e2fsck") || !have("fio") {
        return;
    }
    if !Path::new("/dev/loop-control").exists() {
        skipped("no loop devices here (/dev/loop-control; `modprobe loop`)");
        return;
    }
    let d = Daemon::start(&CONF.replacen(
        "depth = 32\n",
        &format!("depth = 32\nengine = \"{engine}\"\ndirect = {direct}\n"),
        1,
    ));
    let disk = d.path("mnt/vm1");
    let mut guard = Cleanup {
        mount: None,
        loopdev: None,
    };
    let dev = run(Command::new("losetup")
        .args(["--direct-io=on", "--show", "-f"])
        .arg(&disk))
    .trim()
    .to_string();
    guard.loopdev = Some(dev.clone());
    let dio =
        std::fs::read_to_string(format!("/sys/block/{}/loop/dio", dev.trim_start_matches("/dev/"))).unwrap_or_default();
    assert_eq!(
        dio.trim(),
        "1",
        "the loop device did not get direct I/O on the FUSE file"
    );
    run(Command::new("mkfs.ext4").args(["-q", "-F"]).arg(&dev));
    run(Command::new("e2fsck").args(["-fn"]).arg(&dev));
    let fsdir = d.path("fs");
    std::fs::create_dir_all(&fsdir).unwrap();
    run(Command::new("mount").arg(&dev).arg(&fsdir));
    guard.mount = Some(fsdir.clone());
    let out = run(Command::new("fio").args([
        "--name=fusev",
        &format!("--directory={}", fsdir.display()),
        "--rw=randwrite",
        "--bs=4k",
        "--iodepth=32",
        "--ioengine=libaio",
        "--direct=1",
        "--size=24M",
        "--verify=crc32c",
        "--do_verify=1",
        "--verify_fatal=1",
        "--verify_state_save=0",
        "--output-format=terse",
    ]));
    assert!(!out.contains("verify: bad"), "{out}");
    run(&mut Command::new("sync"));
    run(Command::new("umount").arg(&fsdir));
    guard.mount = None;
    run(Command::new("e2fsck").args(["-fn"]).arg(&dev));
    run(Command::new("losetup").arg("-d").arg(&dev));
    guard.loopdev = None;
    // The FUSE path never busy-polls (the spin would take its threads' CPU).
    let (tx, rx) = tokio::sync::oneshot::channel();
    assert!(d.engine().control(hvio_vdisk::engine::Control::Status(tx)));
    let p = rx.blocking_recv().unwrap().poll;
    assert!(
        (p.waits > 0) == (engine == "io_uring") && p.polls == 0 && p.poll_s == 0.0,
        "{p:?}"
    );
    d.stop();
}
