//! A client can make the daemon hold only bounded memory: 8 reads of the
//! maximum payload (256 MiB of buffers) asked in one go, replies unread,
//! take the daemon's resident memory up by about `CONN_BUDGET`, not 256 MiB.
//! Alone in its test binary: it measures this process's resident memory.

mod common;
use common::*;
use hvio_vdisk::nbd::proto::*;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

const CONF: &str = r#"
[store]
path = "@DIR@/disk.img"
direct = false
depth = 16
[nbd]
unix = "@DIR@/nbd.sock"
[[vm]]
name = "vm1"
size = "4MiB"
[[vm]]
name = "big"
size = "256MiB"
"#;

fn rss() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let l = s.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    l.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() << 10
}

fn run(conf: &str) {
    let d = Daemon::start(conf);
    let mut c = Client::connect(&d.sock(), "big");
    // The image is sparse: each read still fills its whole buffer (with zeros).
    let base = rss();
    let mut b = Vec::new();
    for i in 0..8u64 {
        request(&mut b, 0, CMD_READ, i, i * MAX_PAYLOAD as u64, MAX_PAYLOAD);
    }
    c.s.write_all(&b).unwrap();
    let limit = base + hvio_vdisk::nbd::CONN_BUDGET as u64 + (96 << 20);
    let t0 = Instant::now();
    let mut peak = base;
    while t0.elapsed() < Duration::from_millis(1500) {
        peak = peak.max(rss());
        assert!(
            peak <= limit,
            "{}: resident memory {} MiB over {} MiB before the reads",
            if conf.contains("io_uring") {
                "io_uring"
            } else {
                "threads"
            },
            peak >> 20,
            base >> 20
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // The other VM is served meanwhile, and every reply then arrives in full.
    let mut o = Client::connect(&d.sock(), "vm1");
    assert_eq!(o.write(0, &pattern(1, 0)), 0);
    assert_eq!(o.read(0, 4096).unwrap(), pattern(1, 0));
    o.disc();
    let mut data = vec![1u8; MAX_PAYLOAD as usize];
    let zeros = vec![0u8; MAX_PAYLOAD as usize];
    for _ in 0..8 {
        assert_eq!(c.reply().1, 0);
        c.s.read_exact(&mut data).unwrap();
        assert!(data == zeros);
    }
    c.disc();
    d.stop();
}

#[test]
fn large_reads_unread_hold_bounded_memory_on_both_paths() {
    run(CONF);
    if have_io_uring() {
        run(&CONF.replacen("depth = 16\n", "depth = 16\nengine = \"io_uring\"\n", 1));
    }
}
