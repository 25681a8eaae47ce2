//! ext4 on a reshaped image survives `kill -9` of the daemon mid-write: the
//! FUSE export of `hvio serve` (a child process) carries ext4 through a
//! direct-I/O loop device while fio writes; the daemon is killed; a new one
//! recovers the image (`hvio image check` clean first), the kernel replays
//! ext4's journal at mount, and `e2fsck -fn` then finds nothing to fix.
//! Skips (loudly) without root, /dev/fuse, loop devices or the tools.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn have(tool: &str) -> bool {
    let ok = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("SKIPPED: `{tool}` is not installed (run scripts/deps.sh)");
    }
    ok
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into()
}

fn serve(conf: &Path, disk: &Path) -> Child {
    let child = Command::new(env!("CARGO_BIN_EXE_hvio"))
        .arg("serve")
        .arg(conf)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !disk.exists() {
        assert!(t0.elapsed() < Duration::from_secs(30), "the FUSE export did not appear");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

/// Detach what a dead daemon left mounted.
fn unmount(path: &Path) {
    let _ = Command::new("umount").arg("-l").arg(path).status();
}

#[test]
fn ext4_is_clean_after_kill_9_and_recovery() {
    if unsafe { libc::getuid() } != 0 || !Path::new("/dev/fuse").exists() || !Path::new("/dev/loop-control").exists() {
        eprintln!("SKIPPED: needs root, /dev/fuse and loop devices");
        return;
    }
    for t in ["losetup", "mkfs.ext4", "e2fsck", "fio", "mount", "umount"] {
        if !have(t) {
            return;
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let conf = d.join("host.toml");
    std::fs::write(
        &conf,
        format!(
            r#"[store]
depth = 32
layout = "reshaped"
reshape = {{ base = false, meta_region_bytes = 33554432, data_region_bytes = 268435456, log_bytes = 8388608 }}
[scheduler]
name = "deadline"
[fuse]
mountpoint = "{d}/mnt"
[log]
level = "warn"
[[vm]]
name = "vm1"
size = "192MiB"
image = "{d}/vm1.rsi"
"#,
            d = d.display()
        ),
    )
    .unwrap();
    let disk = d.join("mnt/vm1");
    let fsdir = d.join("fs");
    std::fs::create_dir_all(&fsdir).unwrap();
    let mut daemon = serve(&conf, &disk);
    let losetup = |disk: &Path| {
        run(Command::new("losetup")
            .args(["--direct-io=on", "--show", "-f"])
            .arg(disk))
        .trim()
        .to_string()
    };
    let dev = losetup(&disk);
    run(Command::new("mkfs.ext4").args(["-q", "-F"]).arg(&dev));
    run(Command::new("mount").arg(&dev).arg(&fsdir));
    let mut fio = Command::new("fio")
        .args([
            "--name=crash",
            &format!("--directory={}", fsdir.display()),
            "--rw=randwrite",
            "--bs=4k",
            "--iodepth=32",
            "--ioengine=libaio",
            "--direct=1",
            "--size=96M",
            "--nrfiles=16",
            "--fsync=64",
            "--time_based",
            "--runtime=30",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    daemon.kill().unwrap(); // SIGKILL
    daemon.wait().unwrap();
    let _ = fio.kill();
    let _ = fio.wait();
    unmount(&fsdir);
    let _ = Command::new("losetup").arg("-d").arg(&dev).status();
    unmount(&d.join("mnt"));
    // The image as the crash left it: recovery finds every invariant intact.
    let img = d.join("vm1.rsi");
    let out = run(Command::new(env!("CARGO_BIN_EXE_hvio"))
        .args(["image", "check"])
        .arg(&img));
    assert!(out.contains("clean") && out.contains("not stopped cleanly"), "{out}");
    // A new daemon recovers; the kernel replays ext4's journal; e2fsck agrees.
    let mut daemon = serve(&conf, &disk);
    let dev = losetup(&disk);
    run(Command::new("mount").arg(&dev).arg(&fsdir));
    run(Command::new("umount").arg(&fsdir));
    let fsck = run(Command::new("e2fsck").args(["-fn"]).arg(&dev));
    run(Command::new("losetup").arg("-d").arg(&dev));
    // SAFETY: plain kill(2) of our child.
    unsafe { libc::kill(daemon.id() as i32, libc::SIGTERM) };
    assert!(daemon.wait().unwrap().success());
    println!("{fsck}");
    let out = run(Command::new(env!("CARGO_BIN_EXE_hvio"))
        .args(["image", "check"])
        .arg(&img));
    assert!(out.contains("stopped cleanly"), "{out}");
}
