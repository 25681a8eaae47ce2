//! Real Linux guests on hvio's disks: a Debian cloud kernel booted by QEMU
//! (TCG: no KVM needed) with an hvio export as its virtio disk. The guest's
//! /init (scripts/guest-init.sh) writes and reads back random data, runs fio
//! with `verify=crc32c` at iodepth 16, and reports on the serial console;
//! the host checks the same bytes in the backing store. The scheduler is
//! switched through the control API while the guest's fio runs.
//!
//! scripts/guest-image.sh fetches and builds the kit (QEMU, kernel,
//! initramfs) under target/guest once; where it cannot (no Debian archive,
//! no fio) the tests skip with the reason logged. A guest that hangs or
//! panics fails its test within `HVIO_GUEST_TIMEOUT_S` (default 300 s) with
//! its console log.

mod common;
use common::*;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The kit scripts/guest-image.sh printed (KEY=PATH), or why there is none.
fn kit() -> Option<&'static HashMap<String, String>> {
    static KIT: OnceLock<Result<HashMap<String, String>, String>> = OnceLock::new();
    let kit = KIT.get_or_init(|| {
        let ws = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let out = Command::new("bash")
            .arg(ws.join("scripts/guest-image.sh"))
            .arg(ws.join("target/guest"))
            .output()
            .map_err(|e| format!("bash scripts/guest-image.sh: {e}"))?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            let tail: Vec<&str> = err.lines().rev().take(3).collect();
            return Err(format!(
                "scripts/guest-image.sh could not build the guest kit ({}): {}",
                out.status,
                tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect())
    });
    match kit {
        Ok(k) => Some(k),
        Err(why) => {
            skipped(why);
            None
        }
    }
}

fn timeout() -> Duration {
    let s = std::env::var("HVIO_GUEST_TIMEOUT_S")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    Duration::from_secs(s)
}

/// A QEMU guest whose serial console is read line by line.
pub struct Guest {
    child: Child,
    lines: Receiver<String>,
    console: Arc<Mutex<String>>,
    deadline: Instant,
    name: String,
}

impl Guest {
    /// Boot the kit's kernel and initramfs with `disk` (QEMU arguments that
    /// attach the virtio disk) and `append` added to the kernel command line.
    pub fn boot(kit: &HashMap<String, String>, name: &str, disk: &[String], append: &str) -> Guest {
        let mut cmd = Command::new(&kit["QEMU"]);
        cmd.env("QEMU_MODULE_DIR", &kit["QEMU_MODULE_DIR"])
            .env("LD_LIBRARY_PATH", &kit["QEMU_LIB"]);
        for dir in kit["QEMU_FIRMWARE"].split(':') {
            cmd.args(["-L", dir]);
        }
        cmd.args(["-accel", "tcg", "-m", "512", "-smp", "1"])
            .args(["-nographic", "-no-reboot", "-net", "none"])
            .args(["-kernel", &kit["KERNEL"], "-initrd", &kit["INITRD"]])
            .arg("-append")
            .arg(format!("console=ttyS0 panic=-1 quiet {append}"))
            .args(disk)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
        let console = Arc::new(Mutex::new(String::new()));
        let (tx, lines) = channel();
        let out: Box<dyn Read + Send> = Box::new(child.stdout.take().unwrap());
        let err: Box<dyn Read + Send> = Box::new(child.stderr.take().unwrap());
        for pipe in [out, err] {
            let (tx, console) = (tx.clone(), console.clone());
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    console.lock().unwrap().push_str(&format!("{line}\n"));
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        Guest {
            child,
            lines,
            console,
            deadline: Instant::now() + timeout(),
            name: name.to_string(),
        }
    }

    /// Kill the guest and fail the test with its console log.
    fn fail(&mut self, why: &str) -> ! {
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::thread::sleep(Duration::from_millis(200)); // the readers drain
        panic!(
            "guest {}: {why}\n---- console ----\n{}---- end of console ----",
            self.name,
            self.console.lock().unwrap()
        );
    }

    /// The rest of the first console line that begins with `HVIO-GUEST
    /// <what>`; a failure report, the guest's exit or the deadline fails
    /// the test with the console log.
    pub fn expect(&mut self, what: &str) -> String {
        let want = format!("HVIO-GUEST {what}");
        loop {
            let left = self.deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let line = line.trim_end_matches('\r');
                    if let Some(rest) = line.strip_prefix(&want) {
                        return rest.trim().to_string();
                    }
                    if line.contains("HVIO-GUEST result FAIL") || line.contains("Kernel panic") {
                        let line = line.to_string();
                        self.fail(&format!("reported `{line}` before `{want}`"));
                    }
                }
                Err(RecvTimeoutError::Timeout) => self.fail(&format!("no `{want}` within {} s", timeout().as_secs())),
                Err(RecvTimeoutError::Disconnected) => {
                    let status = self.child.wait();
                    self.fail(&format!("exited ({status:?}) before `{want}`"))
                }
            }
        }
    }

    /// Wait for QEMU to exit after the guest powered off.
    pub fn finish(mut self) -> String {
        self.expect("result ok");
        let left = self.deadline.saturating_duration_since(Instant::now());
        let t0 = Instant::now();
        while t0.elapsed() < left {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "guest {}: QEMU exited with {status}", self.name);
                return self.console.lock().unwrap().clone();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.fail("did not power off");
    }
}

impl Drop for Guest {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `key=value` from a guest report line.
pub fn field<'a>(line: &'a str, key: &str) -> &'a str {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
        .unwrap_or_else(|| panic!("no {key}= in `{line}`"))
}

/// The sha256 of the first `bytes` of `path`, by coreutils' sha256sum.
fn sha256_of_prefix(path: &Path, bytes: u64) -> String {
    let out = run(Command::new("sh")
        .arg("-c")
        .arg(format!("head -c {bytes} '{}' | sha256sum", path.display())));
    out.split_whitespace().next().unwrap().to_string()
}

fn conf(store: &str, sched: &str) -> String {
    format!(
        r#"
{store}
[scheduler]
name = "{sched}"
[nbd]
unix = "@DIR@/nbd.sock"
[control]
http = "127.0.0.1:0"
[[vm]]
name = "vm1"
size = "64MiB"
"#
    )
}

const FILE_STORE: &str = "[store]\npath = \"@DIR@/disk.img\"";
const HDD_STORE: &str = "[store]\nkind = \"emulator\"\npath = \"@DIR@/disk.img\"\n[store.device]\nmodel = \"hdd\"";

/// Boot a guest on vm1 over NBD; switch the scheduler to `switch_to` once
/// the guest's fio has started; check the guest's bytes in the backing file.
fn guest_on_nbd(store: &str, sched: &str, switch_to: &str, fio_mib: u32) -> String {
    let Some(kit) = kit() else { return String::new() };
    let d = Daemon::start(&conf(store, sched));
    let disk = [
        "-drive".to_string(),
        format!(
            "file=nbd+unix:///vm1?socket={},format=raw,if=virtio,cache=none",
            d.sock().display()
        ),
    ];
    let name = format!("{sched}->{switch_to}");
    let mut g = Guest::boot(kit, &name, &disk, &format!("hvio.check_mib=8 hvio.fio_mib={fio_mib}"));
    let check = g.expect("check");
    g.expect("fio start");
    let (code, body) = http(
        d.control_addr(),
        "PUT",
        "/scheduler",
        &format!(r#"{{"name": "{switch_to}"}}"#),
    );
    assert_eq!(code, 200, "switch to {switch_to}: {body}");
    let fio = g.expect("fio");
    let console = g.finish();
    let (_, status) = http(d.control_addr(), "GET", "/status", "");
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert_eq!(status["scheduler"], switch_to, "{status}");
    let dir = d.stop();
    let bytes: u64 = field(&check, "bytes").parse().unwrap();
    assert_eq!(
        sha256_of_prefix(&dir.path().join("disk.img"), bytes),
        field(&check, "sha256"),
        "the backing store does not hold the bytes the guest wrote\n{console}"
    );
    eprintln!("guest {name}: {fio}");
    fio
}

#[test]
fn guest_on_nbd_noop_switched_to_cfq() {
    guest_on_nbd(FILE_STORE, "noop", "cfq", 16);
}

#[test]
fn guest_on_nbd_cfq_switched_to_deadline() {
    guest_on_nbd(FILE_STORE, "cfq", "deadline", 16);
}

/// The guest sees the emulated 7200 RPM disk: rotational, and its random
/// writes take the model's milliseconds (fewer of them, so the test stays short).
#[test]
fn guest_on_emulated_hdd_cfq_switched_to_noop() {
    let fio = guest_on_nbd(HDD_STORE, "cfq", "noop", 2);
    if fio.is_empty() {
        return;
    }
    // fio's random 4 KiB writes over 2 MiB at iodepth 16 (its reads come
    // after and hit the drive's cache): a 7200 RPM disk does at most a few
    // hundred per second, where the file store gives the guest thousands.
    let write_iops: f64 = field(&fio, "write_iops").parse().unwrap();
    assert!(write_iops < 400.0, "emulated HDD too fast for a disk: {fio}");
}
