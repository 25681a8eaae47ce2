//! The emulator backend: real data, the HDD model's timing in real time, and
//! the host scheduler's weights visible to real clients.

mod common;
use common::*;
use hvio_vdisk::engine::Control;
use hvio_vdisk::nbd::proto::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn conf(sched: &str) -> String {
    format!(
        r#"
[store]
kind = "emulator"
path = "@DIR@/data.img"
[store.device]
model = "hdd"
[scheduler]
name = "{sched}"
[nbd]
unix = "@DIR@/nbd.sock"
[[vm]]
name = "vm1"
size = "256MiB"
weight = 1000
[[vm]]
name = "vm2"
size = "256MiB"
offset = "200GiB"
weight = 500
"#
    )
}

#[test]
fn emulated_hdd_keeps_data_and_takes_disk_time() {
    let d = Daemon::start(&conf("noop"));
    let mut c = Client::connect(&d.sock(), "vm1");
    assert!(c.flags & TF_ROTATIONAL != 0);
    for i in 0..8u64 {
        assert_eq!(c.write(i * (16 << 20), &pattern(9, i)), 0);
    }
    assert_eq!(c.flush(), 0);
    for i in (0..8u64).rev() {
        assert_eq!(c.read(i * (16 << 20), 4096).unwrap(), pattern(9, i));
    }
    // Reads 16 MiB apart that the drive's cache cannot hold (never written or
    // read before) on a 7200 RPM disk: milliseconds each, not microseconds.
    let t0 = Instant::now();
    for i in (0..8u64).rev() {
        assert!(c
            .read(i * (16 << 20) + (8 << 20), 4096)
            .unwrap()
            .iter()
            .all(|&b| b == 0));
    }
    let per_read = t0.elapsed() / 8;
    assert!(
        per_read > Duration::from_millis(2),
        "a random read took only {per_read:?}"
    );
    assert!(per_read < Duration::from_millis(60), "a random read took {per_read:?}");
    // Across the disk (vm2's region is 200 GiB further in): data lands in the right place.
    let mut c2 = Client::connect(&d.sock(), "vm2");
    assert_eq!(c2.write(0, &pattern(10, 0)), 0);
    assert_eq!(c2.read(0, 4096).unwrap(), pattern(10, 0));
    assert_eq!(c.read(0, 4096).unwrap(), pattern(9, 0));
    c.disc();
    c2.disc();
    d.stop();
}

/// Keep `depth` random 4 KiB reads in flight on `export` until `go` clears.
fn hammer(sock: std::path::PathBuf, export: &str, depth: usize, seed: u64, go: Arc<AtomicBool>) {
    let mut c = Client::connect(&sock, export);
    let blocks = c.size / 4096;
    let mut x = seed;
    let mut inflight = 0;
    loop {
        while go.load(Ordering::Relaxed) && inflight < depth {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            c.send(0, CMD_READ, 1, ((x >> 33) % blocks) * 4096, 4096, &[]);
            inflight += 1;
        }
        if inflight == 0 {
            break;
        }
        let (_, err) = c.reply();
        assert_eq!(err, 0);
        let mut buf = vec![0u8; 4096];
        std::io::Read::read_exact(&mut c.s, &mut buf).unwrap();
        inflight -= 1;
    }
    c.disc();
}

fn reads(d: &Daemon) -> Vec<u64> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    assert!(d.engine().control(Control::Status(tx)));
    rx.blocking_recv().unwrap().vms.iter().map(|v| v.reads).collect()
}

#[test]
fn blkio_weights_two_to_one_on_the_emulated_hdd() {
    let d = Daemon::start(&conf("blkio"));
    let go = Arc::new(AtomicBool::new(true));
    let hs: Vec<_> = [("vm1", 1u64), ("vm2", 2u64)]
        .into_iter()
        .map(|(vm, seed)| {
            let (s, g) = (d.sock(), go.clone());
            std::thread::spawn(move || hammer(s, vm, 16, seed, g))
        })
        .collect();
    // Both VMs overloaded (16 random reads each in flight on a depth-1 disk): measure after a warm-up.
    std::thread::sleep(Duration::from_millis(1000));
    let a = reads(&d);
    // At least 4 s and 500 reads (at most 16 s): a share measured over a few hundred
    // slices, not a few dozen, so a loaded machine's slower disk service does not
    // turn slice-boundary noise into a failed ratio.
    let start = Instant::now();
    let mut b;
    loop {
        std::thread::sleep(Duration::from_millis(500));
        b = reads(&d);
        let served = (b[0] - a[0]) + (b[1] - a[1]);
        let waited = start.elapsed();
        if waited >= Duration::from_secs(16) || (waited >= Duration::from_secs(4) && served >= 500) {
            break;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    go.store(false, Ordering::Relaxed);
    for h in hs {
        h.join().unwrap();
    }
    let (r1, r2) = (b[0] - a[0], b[1] - a[1]);
    let ratio = r1 as f64 / r2.max(1) as f64;
    eprintln!("blkio 1000:500 on the emulated HDD: vm1 {r1} reads, vm2 {r2} reads in {secs:.1} s, ratio {ratio:.2}");
    assert!(
        r1 + r2 > 200,
        "the emulated disk served only {} reads in {secs:.1} s",
        r1 + r2
    );
    assert!(
        (1.6..=2.5).contains(&ratio),
        "weights 2:1 gave {ratio:.2}:1 ({r1} vs {r2})"
    );
    d.stop();
}
