//! `hvio serve`'s configuration against bad values and bad files: every
//! error names the file, the key and the value; a start that fails leaves
//! nothing behind (no socket, no created image) and destroys nothing.

mod common;
use common::*;
use hvio_vdisk::Config;
use std::path::Path;

const BASE: &str = r#"
[store]
path = "@DIR@/disk.img"
threads = 4
depth = 16
[scheduler]
name = "deadline"
params = { fifo_batch = 8 }
[nbd]
unix = "@DIR@/nbd.sock"
max_inflight = 64
[control]
unix = "@DIR@/control.sock"
[log]
level = "info"
[[vm]]
name = "vm1"
size = "8MiB"
weight = 500
attrs = { rate_iops = 100 }
[[vm]]
name = "vm2"
size = "4MiB"
"#;

fn with(dir: &Path, from: &str, to: &str) -> String {
    assert!(BASE.contains(from), "{from}");
    BASE.replacen(from, to, 1).replace("@DIR@", dir.to_str().unwrap())
}

#[test]
fn every_bad_value_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    Config::from_toml_str(&with(d, "", ""), "host.toml").unwrap();
    // (replace, with, words the error must contain)
    let cases: &[(&str, &str, &[&str])] = &[
        ("threads = 4", "threads = 0", &["threads", "0"]),
        ("threads = 4", "threads = -1", &["threads", "-1"]),
        ("threads = 4", "threads = 100000", &["threads", "100000"]),
        ("threads = 4", "threads = nan", &["threads", "nan"]),
        ("threads = 4", "threads = \"\"", &["threads"]),
        ("depth = 16", "depth = 0", &["depth", "0"]),
        ("depth = 16", "depth = 99999999999999999999", &["depth"]),
        ("depth = 16", "depth = 1e3", &["depth"]),
        ("depth = 16", "depth = 16\nengine = \"spdk\"", &["engine", "spdk"]),
        ("depth = 16", "depth = 16\nkind = \"tape\"", &["kind", "tape"]),
        ("depth = 16", "depth = 16\ncreate = \"yes\"", &["create", "yes"]),
        ("depth = 16", "depth = 16\npoll_max_us = -1", &["poll_max_us"]),
        ("depth = 16", "depth = 16\npoll_grow = 0", &["poll_grow", "0"]),
        (
            "path = \"@DIR@/disk.img\"",
            "path = \"\"",
            &["[store]", "`path`", "\"\""],
        ),
        ("path = \"@DIR@/disk.img\"", "path = 5", &["path", "5"]),
        ("name = \"deadline\"", "name = \"\"", &["scheduler", "``"]),
        ("name = \"deadline\"", "name = \"dedline\"", &["dedline"]),
        ("fifo_batch = 8", "fifo_batch = nan", &["fifo_batch", "NaN"]),
        ("fifo_batch = 8", "fifo_batch = -1", &["fifo_batch", "-1"]),
        ("fifo_batch = 8", "fifo_batch = 1e300", &["fifo_batch"]),
        ("fifo_batch = 8", "fifo_batch = \"8\"", &["fifo_batch"]),
        ("fifo_batch = 8", "fifo_bach = 8", &["fifo_bach"]),
        ("max_inflight = 64", "max_inflight = 0", &["max_inflight", "0"]),
        (
            "max_inflight = 64",
            "max_inflight = 64\nhandshake_timeout_s = 0",
            &["handshake_timeout_s", "0"],
        ),
        (
            "max_inflight = 64",
            "max_inflight = 64\nhandshake_timeout_s = -1",
            &["handshake_timeout_s", "-1"],
        ),
        ("max_inflight = 64", "max_inflight = -1", &["max_inflight", "-1"]),
        (
            "max_inflight = 64",
            "max_inflight = 1000000",
            &["max_inflight", "1000000"],
        ),
        (
            "max_inflight = 64",
            "max_inflight = 64\ntcp = \"0.0.0.0:10809\"",
            &["tcp", "0.0.0.0"],
        ),
        (
            "max_inflight = 64",
            "max_inflight = 64\ntcp = \"localhost\"",
            &["tcp", "localhost"],
        ),
        (
            "unix = \"@DIR@/control.sock\"",
            "unix = \"@DIR@/control.sock\"\nheader_timeout_s = 0",
            &["[control]", "header_timeout_s", "0"],
        ),
        ("level = \"info\"", "level = \"loud\"", &["[log]", "level", "loud"]),
        ("level = \"info\"", "level = \"\"", &["[log]", "level", "``"]),
        ("level = \"info\"", "level = 3", &["level", "3"]),
        ("size = \"8MiB\"", "size = 0", &["vm1", "size", "0"]),
        ("size = \"8MiB\"", "size = -1", &["size", "-1"]),
        ("size = \"8MiB\"", "size = \"\"", &["size", "``"]),
        ("size = \"8MiB\"", "size = \"nan\"", &["size", "nan"]),
        ("size = \"8MiB\"", "size = \"inf GiB\"", &["size", "inf GiB"]),
        ("size = \"8MiB\"", "size = \"1e30\"", &["size", "1e30"]),
        ("size = \"8MiB\"", "size = \"100000PiB\"", &["size", "PiB"]),
        ("size = \"8MiB\"", "size = 1000", &["vm1", "size", "1000"]),
        ("size = \"8MiB\"", "size = 1.5", &["size"]),
        ("weight = 500", "weight = 0", &["vm1", "weight", "0"]),
        ("weight = 500", "weight = -1", &["weight", "-1"]),
        ("weight = 500", "weight = 99999999999", &["weight", "99999999999"]),
        ("weight = 500", "weight = nan", &["weight", "nan"]),
        ("rate_iops = 100", "rate_iops = nan", &["attrs.rate_iops", "NaN"]),
        ("rate_iops = 100", "rate_iops = inf", &["attrs.rate_iops", "inf"]),
        ("rate_iops = 100", "rate_iops = \"fast\"", &["rate_iops", "fast"]),
        (
            "rate_iops = 100",
            "rate_iops = 1e-300",
            &["attrs.rate_iops", "1e-300", "htbs accepts"],
        ),
        (
            "rate_iops = 100",
            "rate_iop = 100",
            &["attrs.rate_iop", "no scheduler reads"],
        ),
        ("name = \"vm1\"", "name = \"\"", &["name", "\"\""]),
        ("name = \"vm1\"", "name = \"a/b\"", &["name", "a/b"]),
        ("name = \"vm1\"", "name = \"vm2\"", &["vm2", "two VMs"]),
        (
            "weight = 500",
            "weight = 500\nexports = [\"iscsi\"]",
            &["exports", "iscsi"],
        ),
        (
            "weight = 500",
            "weight = 500\nexports = [\"fuse\"]",
            &["exports", "fuse"],
        ),
        (
            "size = \"4MiB\"",
            "size = \"4MiB\"\noffset = \"4MiB\"",
            &["overlaps", "vm1", "vm2"],
        ),
        ("weight = 500", "weight = 500\noffset = 1000", &["offset", "1000"]),
        (
            "attrs = { rate_iops = 100 }",
            "attrs = { rate_iops = 100 }\nvhost_user = { socket = \"@DIR@/vu.sock\", queues = 0 }",
            &["vm1", "vhost_user.queues", "0"],
        ),
        (
            "attrs = { rate_iops = 100 }",
            "attrs = { rate_iops = 100 }\nvhost_user = { socket = \"@DIR@/vu.sock\", queue_size = 100 }",
            &["vm1", "vhost_user.queue_size", "100"],
        ),
        (
            "attrs = { rate_iops = 100 }",
            "attrs = { rate_iops = 100 }\nvhost_user = { socket = \"@DIR@/nbd.sock\" }",
            &["vhost_user.socket", "nbd.sock"],
        ),
        (
            "attrs = { rate_iops = 100 }",
            "attrs = { rate_iops = 100 }\nvhost_user = { path = \"x\" }",
            &["path"],
        ),
        (
            "weight = 500",
            "weight = 500\nread_only = \"yes\"",
            &["read_only", "yes"],
        ),
        // One path for two things.
        (
            "unix = \"@DIR@/control.sock\"",
            "unix = \"@DIR@/nbd.sock\"",
            &["[control]", "unix", "nbd.sock", "[nbd] unix"],
        ),
        (
            "unix = \"@DIR@/control.sock\"",
            "unix = \"@DIR@/./disk.img\"",
            &["[control]", "disk.img", "[store] path"],
        ),
        (
            "level = \"info\"",
            "level = \"info\"\nrequests = \"@DIR@//disk.img\"",
            &["[log]", "requests", "disk.img", "[store] path"],
        ),
        (
            "size = \"4MiB\"",
            "size = \"4MiB\"\nimage = \"@DIR@/disk.img\"",
            &["vm2", "image", "disk.img", "[store] path"],
        ),
        (
            "weight = 500",
            "weight = 500\nimage = \"@DIR@/one.img\"\n[[vm]]\nname = \"vm3\"\nsize = 4096\nimage = \"@DIR@/one.img\"",
            &["vm3", "image", "one.img", "vm1"],
        ),
    ];
    let mut wrong = Vec::new();
    for (from, to, words) in cases {
        let text = with(d, from, to);
        let e = match Config::from_toml_str(&text, "host.toml") {
            Ok(_) => {
                wrong.push(format!("`{to}` was accepted"));
                continue;
            }
            Err(e) => e.to_string(),
        };
        for w in words.iter().chain(&["host.toml"]) {
            if !e.contains(w) {
                wrong.push(format!("`{to}`: `{e}` does not name `{w}`"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // A broken TOML file names the line.
    let e = Config::from_toml_str("[store\npath = 1", "host.toml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("host.toml") && e.contains("line 1"), "{e}");
    // A missing file names it.
    let e = Config::load(&d.join("nope.toml")).unwrap_err().to_string();
    assert!(e.contains("nope.toml"), "{e}");
}

/// Start `text` (with `@DIR@` = `dir`); the error text if it fails.
fn start_err(dir: &Path, text: &str) -> String {
    let text = text.replace("@DIR@", dir.to_str().unwrap());
    let cfg = match Config::from_toml_str(&text, "host.toml") {
        Ok(c) => c,
        Err(e) => return e.to_string(),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    match rt.block_on(hvio_vdisk::start(&cfg)) {
        Ok(r) => {
            rt.block_on(r.stop()).unwrap();
            panic!("started: {text}")
        }
        Err(e) => e.to_string(),
    }
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    v.sort();
    v
}

const ONE: &str = r#"
[store]
path = "@DIR@/disk.img"
[nbd]
unix = "@DIR@/nbd.sock"
[[vm]]
name = "vm1"
size = "1MiB"
"#;

#[test]
fn bad_files_fail_cleanly() {
    // An image that is a directory; a missing image with create = false.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("disk.img")).unwrap();
    let e = start_err(d, ONE);
    assert!(e.contains("disk.img") && e.contains("directory"), "{e}");
    assert_eq!(names(d), ["disk.img"]);
    std::fs::remove_dir(d.join("disk.img")).unwrap();
    let e = start_err(d, &ONE.replace("[store]\n", "[store]\ncreate = false\n"));
    assert!(e.contains("disk.img") && e.contains("No such file"), "{e}");
    assert!(names(d).is_empty(), "{:?}", names(d));
    // An image too small for its VM with create = false.
    std::fs::write(d.join("disk.img"), [0u8; 4096]).unwrap();
    let e = start_err(d, &ONE.replace("[store]\n", "[store]\ncreate = false\n"));
    assert!(e.contains("disk.img") && e.contains("4096") && e.contains("vm1"), "{e}");
    std::fs::remove_file(d.join("disk.img")).unwrap();
    // An NBD socket path where a file is: refused, the file kept.
    std::fs::write(d.join("nbd.sock"), b"precious").unwrap();
    let e = start_err(d, ONE);
    assert!(e.contains("nbd.sock") && e.contains("not a socket"), "{e}");
    assert_eq!(std::fs::read(d.join("nbd.sock")).unwrap(), b"precious");
    // ...and the image this failed start created is gone again.
    assert_eq!(names(d), ["nbd.sock"]);
    std::fs::remove_file(d.join("nbd.sock")).unwrap();
    // Images in a directory that does not exist: created, and removed again
    // with the directories when the start fails later.
    let nested = ONE.replace("@DIR@/disk.img", "@DIR@/new/deeper/disk.img");
    std::fs::write(d.join("nbd.sock"), b"x").unwrap();
    let e = start_err(d, &nested);
    assert!(e.contains("not a socket"), "{e}");
    assert_eq!(names(d), ["nbd.sock"]);
    std::fs::remove_file(d.join("nbd.sock")).unwrap();
}

#[test]
fn a_control_socket_path_never_deletes_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The control socket configured where another file is: refused, file
    // kept; the NBD socket already bound and the image created are removed.
    std::fs::write(d.join("notes.txt"), b"keep me").unwrap();
    let conf = format!("{ONE}[control]\nunix = \"@DIR@/notes.txt\"\n");
    let e = start_err(d, &conf);
    assert!(e.contains("notes.txt") && e.contains("not a socket"), "{e}");
    assert_eq!(std::fs::read(d.join("notes.txt")).unwrap(), b"keep me");
    assert_eq!(names(d), ["notes.txt"]);
    // A control socket another daemon listens on: refused, that daemon unharmed.
    let other = Daemon::start(&format!(
        "{}[control]\nunix = \"@DIR@/control.sock\"\n",
        ONE.replace("@DIR@/nbd.sock", "@DIR@/nbd-a.sock")
    ));
    let conf = format!(
        "{}[control]\nunix = \"{}\"\n",
        ONE.replace("@DIR@/disk.img", "@DIR@/b.img"),
        other.path("control.sock").display()
    );
    let e = start_err(d, &conf);
    assert!(e.contains("control.sock") && e.contains("another server"), "{e}");
    let mut s = std::os::unix::net::UnixStream::connect(other.path("control.sock")).unwrap();
    use std::io::{Read, Write};
    s.write_all(b"GET /vms HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    assert_eq!(names(d), ["notes.txt"]);
    // The control API's TCP port already taken: the NBD socket bound
    // before it is removed, the image created is removed.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let conf = format!("{ONE}[control]\nhttp = \"{}\"\n", taken.local_addr().unwrap());
    let e = start_err(d, &conf);
    assert!(e.contains("bind control API"), "{e}");
    assert_eq!(names(d), ["notes.txt"]);
    // The same with the sockets in directories that do not exist yet: the
    // directories made for them go too.
    let conf = format!(
        "{}[control]\nhttp = \"{}\"\nunix = \"@DIR@/run/ctl/control.sock\"\n",
        ONE.replace("@DIR@/nbd.sock", "@DIR@/run/nbd/nbd.sock"),
        taken.local_addr().unwrap()
    );
    let e = start_err(d, &conf);
    assert!(e.contains("bind control API"), "{e}");
    assert_eq!(names(d), ["notes.txt"]);
    other.stop();
}

#[test]
fn one_file_under_two_names_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("a.img"), vec![7u8; 1 << 20]).unwrap();
    std::os::unix::fs::symlink(d.join("a.img"), d.join("b.img")).unwrap();
    std::fs::hard_link(d.join("a.img"), d.join("c.img")).unwrap();
    for other in ["b.img", "c.img", "sub/../a.img"] {
        std::fs::create_dir_all(d.join("sub")).unwrap();
        let conf = format!(
            "[store]\n[nbd]\nunix = \"@DIR@/nbd.sock\"\n[[vm]]\nname = \"vm1\"\nsize = \"1MiB\"\nimage = \"@DIR@/a.img\"\n[[vm]]\nname = \"vm2\"\nsize = \"1MiB\"\nimage = \"@DIR@/{other}\"\n"
        );
        let e = start_err(d, &conf);
        assert!(
            e.contains("a.img") && e.contains(other) && e.contains("same file"),
            "{e}"
        );
    }
    // The request log pointed at a backing file through another name: refused, the disk intact.
    let conf = "[store]\n[nbd]\nunix = \"@DIR@/nbd.sock\"\n[log]\nrequests = \"@DIR@/c.img\"\n[[vm]]\nname = \"vm1\"\nsize = \"1MiB\"\nimage = \"@DIR@/a.img\"\n";
    let e = start_err(d, conf);
    assert!(e.contains("c.img") && e.contains("backing file"), "{e}");
    assert_eq!(std::fs::read(d.join("a.img")).unwrap(), vec![7u8; 1 << 20]);
    assert_eq!(names(d), ["a.img", "b.img", "c.img", "sub"]);
}

#[test]
fn read_only_vms_serve_from_a_read_only_file_system() {
    let dir = tempfile::tempdir().unwrap();
    let Some(guard) = mount_tmpfs(dir.path(), "ro", "4m") else {
        return;
    };
    let ro = guard.0.clone();
    // Remounting read-only fails with EBUSY while any process holds a file
    // of the mount open for writing, and the other tests of this binary
    // spawn processes concurrently: a child forked while this process had
    // base.img open would hold a copy of that descriptor until it execs (it
    // did once). So this process never opens a file of the mount for
    // writing: `cp`, a process of its own, writes base.img, and has exited
    // (its descriptors closed) when the remount runs.
    let src = dir.path().join("base.src");
    std::fs::write(&src, pattern(3, 0).repeat(256)).unwrap();
    run(std::process::Command::new("cp").arg(&src).arg(ro.join("base.img")));
    run(std::process::Command::new("mount").args(["-o", "remount,ro"]).arg(&ro));
    let img = ro.join("base.img");
    let conf = format!(
        "[store]\n[nbd]\nunix = \"@DIR@/nbd.sock\"\n[[vm]]\nname = \"base\"\nsize = \"1MiB\"\nimage = \"{}\"\nread_only = true\n[[vm]]\nname = \"scratch\"\nsize = \"1MiB\"\nimage = \"@DIR@/scratch.img\"\n",
        img.display()
    );
    let d = Daemon::start(&conf);
    let mut c = Client::connect(&d.sock(), "base");
    assert_eq!(c.read(4096, 4096).unwrap(), pattern(3, 0));
    assert_eq!(c.write(0, &[1u8; 4096]), hvio_vdisk::nbd::proto::EPERM);
    assert_eq!(c.flush(), 0);
    c.disc();
    d.stop();
    // A writable VM on it: a clear error naming the file.
    let e = start_err(dir.path(), &conf.replace("read_only = true\n", ""));
    assert!(e.contains("base.img") && e.contains("Read-only"), "{e}");
}

#[test]
fn the_binary_names_a_bad_log_level_and_a_bad_file() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("host.toml");
    std::fs::write(&conf, ONE.replace("@DIR@", dir.path().to_str().unwrap())).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hvio-vdisk"))
        .args(["--log-level", "loud"])
        .arg(&conf)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("--log-level `loud`") && err.contains("trace"), "{err}");
    // No half-started daemon: nothing created next to the configuration.
    assert_eq!(names(dir.path()), ["host.toml"]);
    std::fs::write(&conf, "[store]\npath = 3\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hvio-vdisk"))
        .arg("--check")
        .arg(&conf)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("host.toml") && err.contains("path") && err.contains("line 2"),
        "{err}"
    );
}

#[test]
fn bad_emulated_device_values_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let conf = |dev: &str| {
        ONE.replace(
            "[store]\n",
            &format!("[store]\nkind = \"emulator\"\ndevice = {{ {dev} }}\n"),
        )
    };
    for (dev, words) in [
        ("model = \"hdd\", rpm = 0", &["rpm", "0"][..]),
        ("model = \"hdd\", rpm = -7200", &["rpm", "-7200"]),
        ("model = \"hdd\", rpm = nan", &["rpm", "NaN"]),
        ("model = \"hdd\", rpm = inf", &["rpm", "inf"]),
        ("model = \"hdd\", rpm = \"fast\"", &["rpm", "fast"]),
        ("model = \"hdd\", queue_depth = 0", &["queue_depth", "0"]),
        ("model = \"tape\"", &["model", "tape"]),
        ("model = \"hdd\", rmp = 7200", &["rmp"]),
    ] {
        let e = start_err(d, &conf(dev));
        for w in words {
            assert!(e.contains(w), "`{dev}`: `{e}` does not name `{w}`");
        }
        assert!(names(d).is_empty(), "`{dev}` left {:?}", names(d));
    }
}
