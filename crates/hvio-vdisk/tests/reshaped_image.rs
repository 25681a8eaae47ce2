//! A reshaped image served over NBD: what the guest writes reads back
//! (before and after a restart), random writes land sequentially in the
//! image, a FLUSH makes its writes durable, a stop leaves a clean image and
//! `image::check` finds every invariant intact.

mod common;
use common::*;
use hvio_vdisk::image;
use hvio_vdisk::nbd::proto::*;

const CONF: &str = r#"
[store]
depth = 8
layout = "reshaped"
reshape = { base = false, meta_region_bytes = 3145728, data_region_bytes = 16777216, segment_bytes = 1048576, log_bytes = 1048576, commit_entries = 64 }
[scheduler]
name = "deadline"
[nbd]
unix = "@DIR@/nbd.sock"
[[vm]]
name = "vm1"
size = "8MiB"
image = "@DIR@/vm1.rsi"
"#;

/// Blocks in a scattered order (a permutation of 0..n).
fn scattered(n: u64) -> Vec<u64> {
    (0..n).map(|i| (i * 37 + 11) % n).collect()
}

fn run(conf: &str) {
    let d = Daemon::start(conf);
    let mut c = Client::connect(&d.sock(), "vm1");
    assert_eq!(c.size, 8 << 20);
    // Unwritten blocks read as zeroes.
    assert_eq!(c.read(0, 4096).unwrap(), vec![0u8; 4096]);
    let blocks = scattered(512);
    for &b in &blocks {
        assert_eq!(c.write(b * 4096, &pattern(1, b)), 0);
    }
    // Overwrite a third of them: the cleaner and the table see overwrites.
    for &b in blocks.iter().step_by(3) {
        assert_eq!(c.write(b * 4096, &pattern(2, b)), 0);
    }
    assert_eq!(c.flush(), 0);
    // A read spanning many extents is assembled in guest order.
    let all = c.read(0, 64 * 4096).unwrap();
    for b in 0..64u64 {
        let want = expected(&blocks, b);
        assert_eq!(
            &all[(b * 4096) as usize..((b + 1) * 4096) as usize],
            &want[..],
            "block {b}"
        );
    }
    // TRIM and WRITE_ZEROES read back as zeroes.
    c.send(0, CMD_TRIM, 9, 8 * 4096, 4096, &[]);
    assert_eq!(c.reply().1, 0);
    c.send(CMD_FLAG_FUA, CMD_WRITE_ZEROES, 10, 9 * 4096, 4096, &[]);
    assert_eq!(c.reply().1, 0);
    assert_eq!(c.read(8 * 4096, 8192).unwrap(), vec![0u8; 8192]);
    // A write not a whole number of sectors is refused, not half done.
    c.send(0, CMD_WRITE, 11, 100, 10, &[7u8; 10]);
    assert_ne!(c.reply().1, 0);
    c.disc();
    let dir = d.stop();
    let path = dir.path().join("vm1.rsi");
    let rep = image::check(&path).unwrap();
    assert!(rep.problems.is_empty(), "{:?}", rep.problems);
    assert!(rep.opened.superblock.clean, "an orderly stop leaves the clean flag");
    // Scattered guest writes were appended: every mapping lies in the first
    // (blocks written) sectors of the data region, in write order.
    let layout = rep.opened.superblock.layout();
    let written = (512 + 171) * 8;
    let mut at = Vec::new();
    for e in rep.opened.reshaper.table(hvio_reshape::Region::Data).iter() {
        if let hvio_reshape::Target::At(t) = e.target {
            assert!(
                t >= layout.data.start && t + e.sectors <= layout.data.start + written,
                "{e:?}"
            );
            at.push((e.start, t));
        }
    }
    assert_eq!(at.len(), 510, "one extent per block left mapped (two trimmed)");
    // Block b's first write went to position (its index in the scattered order).
    let (orig, t) = at.iter().find(|(o, _)| *o == blocks[1] * 8).copied().unwrap();
    assert_eq!((orig, t), (blocks[1] * 8, layout.data.start + 8));
    // Restart on the same image: everything reads back.
    let d = Daemon::start_in(conf, dir);
    let mut c = Client::connect(&d.sock(), "vm1");
    for &b in &blocks {
        let got = c.read(b * 4096, 4096).unwrap();
        if b == 8 || b == 9 {
            assert_eq!(got, vec![0u8; 4096], "trimmed block {b}");
        } else {
            assert_eq!(got, expected(&blocks, b), "block {b} after restart");
        }
    }
    c.disc();
    d.stop();
}

/// What block `b` holds: every third block in the scattered order was overwritten.
fn expected(blocks: &[u64], b: u64) -> Vec<u8> {
    if blocks.iter().position(|&x| x == b).unwrap() % 3 == 0 {
        pattern(2, b)
    } else {
        pattern(1, b)
    }
}

#[test]
fn reads_back_across_restart_and_checks_clean() {
    run(CONF);
}

#[test]
fn reads_back_across_restart_on_io_uring() {
    if have_io_uring() {
        run(&over_io_uring(CONF));
    }
}

#[test]
fn a_reshaped_vm_needs_its_own_image() {
    let text = CONF
        .replace("image = \"@DIR@/vm1.rsi\"\n", "")
        .replace("[store]\n", "[store]\npath = \"/tmp/x.img\"\n");
    let e = hvio_vdisk::Config::from_toml_str(&text, "t.toml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("layout") && e.contains("image"), "{e}");
}

fn metrics(d: &Daemon) -> String {
    let (tx, rx) = tokio::sync::oneshot::channel();
    assert!(d.engine().control(hvio_vdisk::engine::Control::Metrics(tx)));
    rx.blocking_recv().unwrap()
}

fn metric(text: &str, name: &str) -> f64 {
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("hvio_image_{name}{{")))
        .unwrap_or_else(|| panic!("no {name} in\n{text}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

/// The durability contract's cost: one cache flush (`fdatasync`) and one
/// FUA log write per FLUSH that follows writes, none for a FLUSH with
/// nothing new to commit, none for plain writes.
#[test]
fn fdatasyncs_only_at_commits() {
    let d = Daemon::start(CONF);
    let mut c = Client::connect(&d.sock(), "vm1");
    for round in 0..5u64 {
        for b in 0..10u64 {
            assert_eq!(c.write((round * 10 + b) * 4096, &pattern(round, b)), 0);
        }
        let m = metrics(&d);
        assert_eq!(
            metric(&m, "fdatasyncs_total"),
            round as f64,
            "plain writes sync nothing"
        );
        assert_eq!(c.flush(), 0);
        assert_eq!(c.flush(), 0, "a second FLUSH has nothing to commit");
    }
    let m = metrics(&d);
    assert_eq!(metric(&m, "guest_flushes_total"), 10.0);
    assert_eq!(metric(&m, "fdatasyncs_total"), 5.0);
    assert_eq!(metric(&m, "fua_writes_total"), 5.0);
    assert_eq!(metric(&m, "commits_total"), 5.0);
    c.disc();
    d.stop();
}

/// Recovery after an unclean stop: a copy of the image taken while the
/// daemon runs (nothing in flight) is what `kill -9` would leave; served
/// again, it replays the committed transactions and every flushed write
/// reads back; the unflushed ones read as written or as zeroes.
#[test]
fn recovers_after_an_unclean_stop() {
    let d = Daemon::start(CONF);
    let mut c = Client::connect(&d.sock(), "vm1");
    for b in 0..100u64 {
        assert_eq!(c.write(b * 4096, &pattern(3, b)), 0);
    }
    assert_eq!(c.flush(), 0);
    for b in 100..130u64 {
        assert_eq!(c.write(b * 4096, &pattern(3, b)), 0);
    }
    let copy = d.path("copy.rsi");
    std::fs::copy(d.path("vm1.rsi"), &copy).unwrap();
    c.disc();
    let _kept = d.stop();
    // The copy was not stopped cleanly.
    let rep = image::check(&copy).unwrap();
    assert!(!rep.opened.superblock.clean);
    assert!(rep.problems.is_empty(), "{:?}", rep.problems);
    // 100 entries flushed at commit_entries = 64: a full transaction, then the FLUSH's.
    assert_eq!(rep.opened.report.transactions_replayed, 2);
    let dir = tempfile::tempdir().unwrap();
    std::fs::rename(&copy, dir.path().join("vm1.rsi")).unwrap();
    let d = Daemon::start_in(CONF, dir);
    let mut c = Client::connect(&d.sock(), "vm1");
    for b in 0..130u64 {
        let got = c.read(b * 4096, 4096).unwrap();
        if b < 100 {
            assert_eq!(got, pattern(3, b), "flushed block {b}");
        } else {
            assert!(
                got == pattern(3, b) || got == vec![0u8; 4096],
                "block {b}: neither new nor old"
            );
        }
    }
    c.disc();
    let dir = d.stop();
    let rep = image::check(&dir.path().join("vm1.rsi")).unwrap();
    assert!(rep.opened.superblock.clean && rep.problems.is_empty());
}

/// Both regions clean at once: an ext4 superblock and descriptor written
/// first make the classifier send inode-table writes to the metadata region
/// and the rest to the data region; random overwrites in both keep both
/// cleaners busy; every block reads back its last write, before and after
/// a restart, and the metrics show cleaning in both regions' traffic.
#[test]
fn both_regions_clean_at_once_and_lose_nothing() {
    let conf = CONF.replace(
        "reshape = { base = false, meta_region_bytes = 3145728, data_region_bytes = 16777216, segment_bytes = 1048576, log_bytes = 1048576, commit_entries = 64 }",
        "reshape = { base = false, meta_region_bytes = 1048576, data_region_bytes = 3145728, segment_bytes = 262144, log_bytes = 1048576, commit_entries = 64, clean_start = 0.3, clean_hard = 0.1 }",
    );
    let d = Daemon::start(&conf);
    let mut c = Client::connect(&d.sock(), "vm1");
    // ext4: 4 KiB blocks, 2048 blocks, one group; block bitmap 2, inode
    // bitmap 3, inode table 4..132 (2048 inodes of 256 bytes).
    let mut b0 = vec![0u8; 4096];
    let sb = &mut b0[1024..2048];
    sb[4..8].copy_from_slice(&2048u32.to_le_bytes());
    sb[24..28].copy_from_slice(&2u32.to_le_bytes());
    sb[32..36].copy_from_slice(&32768u32.to_le_bytes());
    sb[40..44].copy_from_slice(&2048u32.to_le_bytes());
    sb[56..58].copy_from_slice(&0xEF53u16.to_le_bytes());
    sb[88..90].copy_from_slice(&256u16.to_le_bytes());
    let mut b1 = vec![0u8; 4096];
    b1[0..4].copy_from_slice(&2u32.to_le_bytes());
    b1[4..8].copy_from_slice(&3u32.to_le_bytes());
    b1[8..12].copy_from_slice(&4u32.to_le_bytes());
    assert_eq!(c.write(4096, &b1), 0);
    assert_eq!(c.write(0, &b0), 0);
    let meta: Vec<u64> = (5..132).collect();
    let data: Vec<u64> = (200..700).collect();
    let mut last = std::collections::HashMap::new();
    let mut x = 12345u64;
    for round in 0..6000u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let b = if round % 3 == 0 {
            meta[(x % meta.len() as u64) as usize]
        } else {
            data[(x % data.len() as u64) as usize]
        };
        assert_eq!(c.write(b * 4096, &pattern(round, b)), 0);
        last.insert(b, round);
        if round % 500 == 499 {
            assert_eq!(c.flush(), 0);
        }
    }
    let m = metrics(&d);
    assert!(metric(&m, "meta_writes_total") >= 1900.0, "{m}");
    assert!(metric(&m, "segments_cleaned_total") > 20.0, "{m}");
    let check = |c: &mut Client| {
        for (&b, &round) in &last {
            assert_eq!(c.read(b * 4096, 4096).unwrap(), pattern(round, b), "block {b}");
        }
    };
    check(&mut c);
    c.disc();
    let dir = d.stop();
    let rep = image::check(&dir.path().join("vm1.rsi")).unwrap();
    assert!(rep.problems.is_empty(), "{:?}", rep.problems);
    assert!(!rep.opened.reshaper.table(hvio_reshape::Region::Meta).is_empty());
    let d = Daemon::start_in(&conf, dir);
    let mut c = Client::connect(&d.sock(), "vm1");
    check(&mut c);
    c.disc();
    d.stop();
}

/// Cleaning never holds a FLUSH back for longer than one segment's copy:
/// a nearly full data region under pipelined random overwrites (so the
/// cleaner copies all the time, several victims per job, and writes wait
/// for room) while a second client FLUSHes every few milliseconds. Under
/// every scheduler `hvio serve` offers, each FLUSH that arrives during a
/// copy waits for its commit to start no longer than that copy takes, as
/// timed in the same run, and the writes read back: the daemon holds
/// cleaning, and guest writes while a FLUSH waits, during a commit, so
/// the commit is behind only what was queued when it began.
#[test]
fn a_flush_waits_for_at_most_one_segment_copy() {
    for scheduler in hvio_sched::names() {
        let m = flushes_during_cleaning(scheduler);
        assert_eq!(
            metric(&m, "flush_waits_over_segment_copy_total"),
            0.0,
            "{scheduler}: {m}"
        );
        assert!(
            metric(&m, "flush_behind_cleaning_max_seconds") <= metric(&m, "segment_copy_max_seconds"),
            "{scheduler}: {m}"
        );
    }
}

/// The run of [`a_flush_waits_for_at_most_one_segment_copy`] under `scheduler`; its metrics.
fn flushes_during_cleaning(scheduler: &str) -> String {
    let conf = CONF.replace(
        "reshape = { base = false, meta_region_bytes = 3145728, data_region_bytes = 16777216, segment_bytes = 1048576, log_bytes = 1048576, commit_entries = 64 }",
        "reshape = { base = false, meta_region_bytes = 1048576, data_region_bytes = 3145728, segment_bytes = 262144, log_bytes = 1048576, commit_entries = 256, clean_start = 0.3, clean_hard = 0.1 }",
    ).replace("name = \"deadline\"", &format!("name = \"{scheduler}\""));
    let d = Daemon::start(&conf);
    let go = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let flusher = {
        let (sock, go) = (d.sock(), go.clone());
        std::thread::spawn(move || {
            let mut c = Client::connect(&sock, "vm1");
            let mut n = 0u32;
            while go.load(std::sync::atomic::Ordering::Relaxed) {
                assert_eq!(c.flush(), 0);
                n += 1;
                std::thread::sleep(std::time::Duration::from_millis(3));
            }
            c.disc();
            n
        })
    };
    // 512 blocks (2 MiB) of a 3 MiB region, 16 writes in flight.
    let mut c = Client::connect(&d.sock(), "vm1");
    let mut last = std::collections::HashMap::new();
    let mut x = 99u64;
    let (depth, writes) = (16u64, 4_000u64);
    for round in 0..writes + depth {
        if round >= depth {
            let (cookie, err) = c.reply();
            assert_eq!(err, 0, "write {cookie}");
        }
        if round < writes {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let b = x % 512;
            c.send(0, CMD_WRITE, round, b * 4096, 4096, &pattern(round, b));
            last.insert(b, round);
        }
    }
    go.store(false, std::sync::atomic::Ordering::Relaxed);
    let flushes = flusher.join().unwrap();
    let m = metrics(&d);
    let (copies, copy_max) = (
        metric(&m, "segment_copies_total"),
        metric(&m, "segment_copy_max_seconds"),
    );
    let (waited, wait_max) = (
        metric(&m, "flushes_during_cleaning_total"),
        metric(&m, "flush_behind_cleaning_max_seconds"),
    );
    eprintln!(
        "{scheduler}: {flushes} FLUSHes, {waited} during a segment copy: longest behind cleaning {:.3} ms, \
         longest FLUSH {:.3} ms, {} longer than the copy in progress at their arrival; {copies} segment copies, longest {:.3} ms, mean {:.3} ms",
        wait_max * 1e3,
        metric(&m, "flush_latency_during_cleaning_max_seconds") * 1e3,
        metric(&m, "flush_waits_over_segment_copy_total"),
        copy_max * 1e3,
        metric(&m, "segment_copy_seconds_total") / copies.max(1.0) * 1e3
    );
    assert!(copies > 10.0 && waited > 0.0, "the cleaner ran under FLUSHes: {m}");
    for (&b, &round) in &last {
        assert_eq!(c.read(b * 4096, 4096).unwrap(), pattern(round, b), "block {b}");
    }
    c.disc();
    let dir = d.stop();
    let rep = image::check(&dir.path().join("vm1.rsi")).unwrap();
    assert!(rep.problems.is_empty(), "{:?}", rep.problems);
    m
}

/// `/status` counts a reshaped VM's guest requests as the guest sent them
/// and its image file's (guest data at the append point, the log, the
/// cache flushes) under `image_file`; a raw VM has no `image_file`.
#[test]
fn status_counts_guest_and_image_file_requests_apart() {
    let conf =
        format!("{CONF}\n[[vm]]\nname = \"raw\"\nsize = \"1MiB\"\nimage = \"@DIR@/raw.img\"\nlayout = \"raw\"\n");
    let d = Daemon::start(&conf);
    let mut c = Client::connect(&d.sock(), "vm1");
    for b in 0..20u64 {
        assert_eq!(c.write(b * 8192, &pattern(4, b)), 0);
    }
    assert_eq!(c.flush(), 0);
    for b in 0..5u64 {
        assert_eq!(c.read(b * 8192, 4096).unwrap(), pattern(4, b));
    }
    assert_eq!(
        c.read(4096, 4096).unwrap(),
        vec![0u8; 4096],
        "never written: no image I/O"
    );
    c.disc();
    // The engine counts an image-file request once it has taken its
    // completion, which may be just after the guest's answer.
    let get = |d: &Daemon| {
        let (tx, rx) = tokio::sync::oneshot::channel();
        assert!(d.engine().control(hvio_vdisk::engine::Control::Status(tx)));
        serde_json::to_value(rx.blocking_recv().unwrap()).unwrap()
    };
    let mut status = get(&d);
    for _ in 0..100 {
        if status["vms"][0]["image_file"]["reads"] == 5 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
        status = get(&d);
    }
    let vm = &status["vms"][0];
    assert_eq!(
        (
            &vm["writes"],
            &vm["bytes_written"],
            &vm["flushes"],
            &vm["reads"],
            &vm["bytes_read"]
        ),
        (
            &20.into(),
            &(20 * 4096).into(),
            &1.into(),
            &6.into(),
            &(6 * 4096).into()
        ),
        "the guest's requests: {vm}"
    );
    let file = &vm["image_file"];
    // 20 data writes and one log write (TX start, entries, TX commit in one
    // block); 5 reads of mapped blocks; one fdatasync, at the FLUSH.
    assert_eq!(file["writes"], 21, "{file}");
    assert_eq!(file["reads"], 5, "{file}");
    assert_eq!(file["flushes"], 1, "{file}");
    assert_eq!(file["guest_data_bytes_written"], 20 * 4096, "{file}");
    assert_eq!(file["log_bytes_written"], 4096, "{file}");
    assert_eq!(file["bytes_written"], 21 * 4096, "{file}");
    assert_eq!(file["cleaning_bytes_written"], 0, "{file}");
    promtool_accepts(&metrics(&d));
    let raw = &status["vms"][1];
    assert_eq!(raw["name"], "raw");
    assert!(raw.get("image_file").is_none(), "{raw}");
    d.stop();
}

/// A guest request of the unaligned test: what and where (bytes).
#[derive(Clone, Debug)]
enum Rq {
    Write { off: u64, len: u64, fua: bool },
    Zero { off: u64, len: u64 },
    Trim { off: u64, len: u64 },
    Read { off: u64, len: u64 },
    Flush,
}

/// The first `SHADOW` bytes of the disk take every request.
const SHADOW: u64 = 32 * 1024;

fn rq_strategy() -> impl proptest::strategy::Strategy<Value = Rq> {
    use proptest::prelude::*;
    let range = (0..SHADOW - 1).prop_flat_map(|off| (Just(off), 1..=(SHADOW - off).min(3000)));
    prop_oneof![
        6 => (range.clone(), any::<bool>()).prop_map(|((off, len), fua)| Rq::Write { off, len, fua }),
        1 => range.clone().prop_map(|(off, len)| Rq::Zero { off, len }),
        1 => range.clone().prop_map(|(off, len)| Rq::Trim { off, len }),
        2 => range.prop_map(|(off, len)| Rq::Read { off, len }),
        1 => Just(Rq::Flush),
    ]
}

/// Serve `rq` over `c` and apply it to `shadow` (a trim zeroes the whole
/// sectors inside its range: what this image reads back there).
fn apply(c: &mut Client, rq: &Rq, n: u64, shadow: &mut [u8]) {
    match *rq {
        Rq::Write { off, len, fua } => {
            let data: Vec<u8> = (0..len).map(|i| (n * 31 + i * 7 + 1) as u8).collect();
            c.send(if fua { CMD_FLAG_FUA } else { 0 }, CMD_WRITE, n, off, len as u32, &data);
            assert_eq!(c.reply().1, 0, "{rq:?}");
            shadow[off as usize..(off + len) as usize].copy_from_slice(&data);
        }
        Rq::Zero { off, len } => {
            c.send(0, CMD_WRITE_ZEROES, n, off, len as u32, &[]);
            assert_eq!(c.reply().1, 0, "{rq:?}");
            shadow[off as usize..(off + len) as usize].fill(0);
        }
        Rq::Trim { off, len } => {
            c.send(0, CMD_TRIM, n, off, len as u32, &[]);
            assert_eq!(c.reply().1, 0, "{rq:?}");
            let (first, end) = (off.div_ceil(512) * 512, (off + len) / 512 * 512);
            if end > first {
                shadow[first as usize..end as usize].fill(0);
            }
        }
        Rq::Read { off, len } => {
            let got = c.read(off, len as u32).unwrap();
            assert!(
                got == shadow[off as usize..(off + len) as usize],
                "{rq:?}: differs from the shadow"
            );
        }
        Rq::Flush => assert_eq!(c.flush(), 0),
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 6, ..Default::default() })]

    /// Requests at any byte offset and length (a client that did not ask
    /// for block sizes) read back as a shadow byte array says, before and
    /// after a restart; after a crash (a copy of the image taken after a
    /// FLUSH and more requests) every sector reads back as one of the
    /// versions the shadow gave it since that FLUSH: never torn.
    #[test]
    fn unaligned_requests_match_a_shadow_disk_across_a_crash(
        before in proptest::collection::vec(rq_strategy(), 40..120),
        after in proptest::collection::vec(rq_strategy(), 1..80),
    ) {
        let d = Daemon::start(CONF);
        let mut c = Client::connect_asking(&d.sock(), "vm1", &[]);
        let mut shadow = vec![0u8; SHADOW as usize];
        for (n, rq) in before.iter().enumerate() {
            apply(&mut c, rq, n as u64, &mut shadow);
        }
        assert_eq!(c.flush(), 0);
        // Per sector: every version since the FLUSH.
        let sectors = (SHADOW / 512) as usize;
        let mut versions: Vec<Vec<Vec<u8>>> = (0..sectors).map(|s| vec![shadow[s * 512..(s + 1) * 512].to_vec()]).collect();
        for (n, rq) in after.iter().enumerate() {
            apply(&mut c, rq, (before.len() + n) as u64, &mut shadow);
            for (s, v) in versions.iter_mut().enumerate() {
                let now = &shadow[s * 512..(s + 1) * 512];
                if v.last().unwrap() != now {
                    v.push(now.to_vec());
                }
            }
        }
        let crashed = d.path("crashed.rsi");
        std::fs::copy(d.path("vm1.rsi"), &crashed).unwrap();
        assert!(c.read(0, SHADOW as u32).unwrap() == shadow, "all of it, served");
        c.disc();
        let dir = d.stop();
        // An orderly restart: everything reads back.
        let d = Daemon::start_in(CONF, dir);
        let mut c = Client::connect_asking(&d.sock(), "vm1", &[]);
        assert!(c.read(0, SHADOW as u32).unwrap() == shadow, "after a restart");
        c.disc();
        let dir = d.stop();
        // The crash: recovery from the copy.
        std::fs::rename(&crashed, dir.path().join("vm1.rsi")).unwrap();
        let rep = image::check(&dir.path().join("vm1.rsi")).unwrap();
        assert!(rep.problems.is_empty(), "{:?}", rep.problems);
        let d = Daemon::start_in(CONF, dir);
        let mut c = Client::connect_asking(&d.sock(), "vm1", &[]);
        let got = c.read(0, SHADOW as u32).unwrap();
        for (s, v) in versions.iter().enumerate() {
            let sector = &got[s * 512..(s + 1) * 512];
            assert!(v.iter().any(|x| x == sector), "sector {s} after the crash: none of its {} versions", v.len());
        }
        c.disc();
        d.stop();
    }
}

/// Unaligned writes in flight together to disjoint bytes of the same
/// sectors, with aligned writes and write-zeroes beside them: none is lost
/// (a read-modify-write waits for writes to its edge sectors and they wait
/// for it).
#[test]
fn concurrent_unaligned_writes_to_one_sector_lose_nothing() {
    let d = Daemon::start(CONF);
    let mut c = Client::connect_asking(&d.sock(), "vm1", &[]);
    let mut shadow = vec![0u8; 4096];
    let mut cookie = 0u64;
    for round in 0..20u8 {
        // 48 pieces of 40 bytes over the first 1920 bytes (sectors 0..4),
        // then an aligned write of sector 5 and write-zeroes of bytes
        // 2100..2200, all sent before any reply is read.
        for k in 0..48u64 {
            let off = k * 40;
            let data = vec![round.wrapping_mul(48).wrapping_add(k as u8) | 1; 40];
            shadow[off as usize..off as usize + 40].copy_from_slice(&data);
            c.send(0, CMD_WRITE, cookie, off, 40, &data);
            cookie += 1;
        }
        let whole = vec![round; 512];
        shadow[2560..3072].copy_from_slice(&whole);
        c.send(0, CMD_WRITE, cookie, 2560, 512, &whole);
        shadow[2100..2200].fill(0);
        c.send(0, CMD_WRITE_ZEROES, cookie + 1, 2100, 100, &[]);
        cookie += 2;
        for _ in 0..50 {
            assert_eq!(c.reply().1, 0);
        }
        assert!(c.read(0, 4096).unwrap() == shadow, "round {round}: a write was lost");
        shadow[2000..2400].fill(round | 0x80);
        assert_eq!(c.write(2000, &shadow[2000..2400]), 0);
    }
    c.disc();
    d.stop();
}

/// The FUSE export serves a reshaped image's unaligned requests as NBD
/// does (files are opened with `FOPEN_DIRECT_IO`, so the kernel hands
/// odd offsets and lengths to the daemon as they are): writes at odd
/// offsets and lengths, some crossing sectors and some inside one, read
/// back exactly through the FUSE file, after an `fsync` (a FLUSH), and
/// across a restart.
#[test]
fn fuse_export_serves_unaligned_requests_across_a_restart() {
    if !can_mount("the FUSE export") {
        return;
    }
    if !std::path::Path::new("/dev/fuse").exists() {
        skipped("FUSE export tests need /dev/fuse (`modprobe fuse`)");
        return;
    }
    use std::os::unix::fs::FileExt;
    let conf = format!("{CONF}[fuse]\nmountpoint = \"@DIR@/mnt\"\n");
    let open = |d: &Daemon| {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(d.path("mnt/vm1"))
            .unwrap()
    };
    let d = Daemon::start(&conf);
    let f = open(&d);
    let mut shadow: Vec<u8> = (0..96 * 1024u32).map(|i| (i % 253) as u8 + 1).collect();
    f.write_all_at(&shadow, 0).unwrap();
    // (offset, length): inside one sector, across one or several sector
    // boundaries, across a 4 KiB block, one byte at a sector's last byte.
    let writes = [
        (1u64, 3usize),
        (511, 2),
        (700, 100),
        (4093, 5000),
        (12345, 777),
        (65531, 10),
        (20479, 1),
        (30000, 12289),
    ];
    for (n, &(off, len)) in writes.iter().enumerate() {
        let data: Vec<u8> = (0..len).map(|i| (n * 37 + i * 11) as u8 | 0x80).collect();
        f.write_all_at(&data, off).unwrap();
        shadow[off as usize..off as usize + len].copy_from_slice(&data);
    }
    let check = |f: &std::fs::File, when: &str| {
        let mut back = vec![0u8; shadow.len()];
        f.read_exact_at(&mut back, 0).unwrap();
        if let Some(i) = back.iter().zip(&shadow).position(|(a, b)| a != b) {
            panic!("{when}: byte {i} reads {} instead of {}", back[i], shadow[i]);
        }
        // Unaligned reads too.
        for &(off, len) in &writes {
            let (off, len) = (off.saturating_sub(3), len + 5);
            let mut part = vec![0u8; len];
            f.read_exact_at(&mut part, off).unwrap();
            assert_eq!(
                part,
                shadow[off as usize..off as usize + len],
                "{when}: read at {off}+{len}"
            );
        }
    };
    check(&f, "before fsync");
    f.sync_all().unwrap();
    check(&f, "after fsync");
    drop(f);
    let dir = d.stop();
    let rep = image::check(&dir.path().join("vm1.rsi")).unwrap();
    assert!(rep.problems.is_empty(), "{:?}", rep.problems);
    let d = Daemon::start_in(&conf, dir);
    let f = open(&d);
    check(&f, "after a restart");
    drop(f);
    d.stop();
}
