//! How often the daemon's metadata/data classifier (`ext4meta`) classes a
//! write right, on an ext4 made by mkfs.ext4 on the FUSE export of a
//! reshaped VM (through a direct-I/O loop device) and then written by fio.
//!
//! Truth, after the run: a 4 KiB block is data if it belongs to a regular
//! file (debugfs `blocks`), metadata otherwise (superblocks, descriptors,
//! bitmaps, inode tables, journal, directories, extent-tree blocks). The
//! classifier's verdict for a block is the region its last write went to
//! (the image's metadata or data table). The figures are printed; the test
//! asserts the classifier beats "all data" on metadata and keeps file data
//! in the data region.

mod common;
use common::*;
use hvio_reshape::{Region, Target};
use std::collections::HashSet;
use std::path::Path;
use std::process::Command;

const CONF: &str = r#"
[store]
depth = 32
layout = "reshaped"
reshape = { base = false, meta_region_bytes = 134217728, data_region_bytes = 805306368, log_bytes = 16777216 }
[scheduler]
name = "deadline"
[fuse]
mountpoint = "@DIR@/mnt"
[[vm]]
name = "vm1"
size = "512MiB"
image = "@DIR@/vm1.rsi"
"#;

#[test]
fn ext4_metadata_is_classed_from_the_guest_layout() {
    if !can_mount("the FUSE export") || !Path::new("/dev/fuse").exists() {
        return;
    }
    for tool in ["losetup", "mkfs.ext4", "fio", "debugfs", "e2fsck"] {
        if !have(tool) {
            return;
        }
    }
    if !Path::new("/dev/loop-control").exists() {
        skipped("no loop devices here (/dev/loop-control; `modprobe loop`)");
        return;
    }
    let d = Daemon::start(CONF);
    let mut guard = Cleanup {
        mount: None,
        loopdev: None,
    };
    let dev = run(Command::new("losetup")
        .args(["--direct-io=on", "--show", "-f"])
        .arg(d.path("mnt/vm1")))
    .trim()
    .to_string();
    guard.loopdev = Some(dev.clone());
    run(Command::new("mkfs.ext4").args(["-q", "-F"]).arg(&dev));
    let fsdir = d.path("fs");
    std::fs::create_dir_all(&fsdir).unwrap();
    run(Command::new("mount").arg(&dev).arg(&fsdir));
    guard.mount = Some(fsdir.clone());
    run(Command::new("fio").args([
        "--name=cls",
        &format!("--directory={}", fsdir.display()),
        "--rw=randwrite",
        "--bs=4k",
        "--iodepth=32",
        "--ioengine=libaio",
        "--direct=1",
        "--size=64M",
        "--nrfiles=4",
        "--output-format=terse",
    ]));
    run(&mut Command::new("sync"));
    run(Command::new("umount").arg(&fsdir));
    guard.mount = None;
    run(Command::new("e2fsck").args(["-fn"]).arg(&dev));
    let mut data_blocks = HashSet::new();
    for f in 0..4 {
        let out = run(Command::new("debugfs")
            .args(["-R", &format!("blocks /cls.0.{f}")])
            .arg(&dev));
        data_blocks.extend(out.split_whitespace().map(|b| b.parse::<u64>().unwrap()));
    }
    assert!(
        data_blocks.len() >= 16384,
        "fio's files hold {} blocks",
        data_blocks.len()
    );
    run(Command::new("losetup").arg("-d").arg(&dev));
    guard.loopdev = None;
    let dir = d.stop();
    let rep = hvio_vdisk::image::check(&dir.path().join("vm1.rsi")).unwrap();
    assert!(rep.problems.is_empty(), "{:?}", rep.problems);
    // [truth meta, truth data] × [classed meta, classed data], in 4 KiB blocks.
    let mut m = [[0u64; 2]; 2];
    for (classed, region) in [(0, Region::Meta), (1, Region::Data)] {
        for e in rep.opened.reshaper.table(region).iter() {
            if !matches!(e.target, Target::At(_)) {
                continue;
            }
            for b in e.start / 8..(e.start + e.sectors).div_ceil(8) {
                let truth = usize::from(data_blocks.contains(&b));
                m[truth][classed] += 1;
            }
        }
    }
    let total: u64 = m.iter().flatten().sum();
    let right = m[0][0] + m[1][1];
    println!(
        "ext4 classification: {right} of {total} written blocks classed right ({:.1} %); metadata blocks {} ({} classed metadata, {:.1} %); data blocks {} ({} classed data, {:.1} %)",
        100.0 * right as f64 / total as f64,
        m[0][0] + m[0][1],
        m[0][0],
        100.0 * m[0][0] as f64 / (m[0][0] + m[0][1]) as f64,
        m[1][0] + m[1][1],
        m[1][1],
        100.0 * m[1][1] as f64 / (m[1][0] + m[1][1]) as f64,
    );
    assert!(m[0][0] > 0, "no metadata block was classed metadata: {m:?}");
    assert!(
        m[1][1] as f64 >= 0.99 * (m[1][0] + m[1][1]) as f64,
        "file data classed metadata: {m:?}"
    );
}
