//! The opt-in blktap2 host path (`[host.blktap]`): tapdisk's `io_merge`
//! within one `io_submit`, the dom0 elevator's back merges, and how the host
//! sees tapdisk's O_DIRECT I/O. Hand-computed request counts on the small
//! test disk.

use hvio_sim::{run, Config, SimResult};

fn sim(blktap: &str, jobs: &str) -> SimResult {
    let text = format!(
        r#"
seed = 3
[disk]
model = "simple"
[host]
scheduler = "deadline"
{blktap}
[[vm]]
name = "g"
image_size = "1GiB"
journal_commit_s = 0
barrier = false
{jobs}
"#
    );
    let r = run(&Config::from_toml_str(&text, "test.toml").unwrap()).unwrap();
    assert!(!r.truncated);
    assert!(r.jobs.iter().all(|j| j.finished));
    r
}

fn counter(r: &SimResult, name: &str) -> f64 {
    r.host
        .counters
        .iter()
        .find(|(k, _)| k == name)
        .map_or(f64::NAN, |c| c.1)
}

/// One buffered read of 128 KiB: a 32-page read-ahead window, which
/// blkfront sends as three requests of 11, 11 and 10 pages (44/44/40 KiB).
const ONE_READ: &str = r#"[[vm.job]]
rw = "read"
bs = "128k"
size = "1MiB"
requests = 1
direct = false"#;

#[test]
fn a_128k_read_leaves_tapdisk_as_one_request() {
    // Without blktap the host sees blkfront's three pieces.
    let plain = sim("", ONE_READ);
    assert_eq!(plain.host.requests, 3);
    // Through tapdisk they arrive in one pass of its event loop, in ring
    // slots 0, 1, 2; the first two fill their slots (11 pages), so the
    // buffers are contiguous and io_merge joins all three: one 256-sector read.
    let r = sim("blktap = {}", ONE_READ);
    assert_eq!(r.host.requests, 1);
    assert!((r.host.mb - 131_072.0 / 1e6).abs() < 1e-12, "{}", r.host.mb);
    assert_eq!(counter(&r, "blktap_io_merges"), 2.0);
    assert_eq!(counter(&r, "blktap_elevator_merges"), 0.0);
    assert_eq!(r.jobs[0].reads, 1);
    // Without io_merge the first piece goes straight to the idle disk and
    // the elevator appends the third to the queued second.
    let r = sim("blktap = { io_merge = false }", ONE_READ);
    assert_eq!(r.host.requests, 2);
    assert_eq!(counter(&r, "blktap_elevator_merges"), 1.0);
    // Neither: three requests again.
    let r = sim("blktap = { io_merge = false, elevator_merge = false }", ONE_READ);
    assert_eq!(r.host.requests, 3);
}

/// 64 sequential writes of 16 KiB (256 pages of one file), no fsync cycle:
/// at the end sysbench's final fsync writes them back in one run, which
/// blkfront sends as 24 requests (23 of 11 pages and one of 3) in one
/// batch, then one 4 KiB commit record.
const WRITER: &str = r#"[[vm.job]]
rw = "write"
bs = "16k"
size = "1MiB"
requests = 64
direct = false"#;

#[test]
fn write_back_is_merged_up_to_max_sectors_kb() {
    let plain = sim("", WRITER);
    assert_eq!(plain.host.requests, 24 + 1);
    // io_merge joins full pieces while the sum stays within 512 KiB (1024
    // sectors): 11 + 11 + 2 pieces, then the commit.
    let r = sim("blktap = {}", WRITER);
    assert_eq!(r.host.requests, 3 + 1);
    assert_eq!(counter(&r, "blktap_io_merges"), 21.0);
    // The elevator alone: the first piece is dispatched at once, pieces
    // 2–12 and 13–24 (968 and 992 sectors) merge while queued.
    let r = sim("blktap = { io_merge = false }", WRITER);
    assert_eq!(r.host.requests, 3 + 1);
    assert_eq!(counter(&r, "blktap_elevator_merges"), 21.0);
    // A smaller dom0 max_sectors_kb caps both.
    let r = sim("blktap = { max_sectors_kb = 88 }", WRITER);
    assert_eq!(r.host.requests, 12 + 1);
    // Same bytes either way.
    assert!((r.host.mb - plain.host.mb).abs() < 1e-9);
}

#[test]
fn the_host_sees_tapdisk_writes_as_async_and_without_metadata_flags() {
    // Two VMs, each one sequential O_DIRECT writer with one request in
    // flight and an fsync every 10 writes (a journal write flagged meta).
    // With sync writes CFQ gives each VM a slice and idles for its next
    // request; through blktap on 2.6.18 the writes are async and share
    // CFQ's one async queue, so the disk never idles with work queued.
    let vm = |name: &str| {
        format!(
            "[[vm]]\nname = \"{name}\"\nimage_size = \"1GiB\"\njournal_commit_s = 0\nbarrier = false\n[[vm.job]]\nrw = \"write\"\nbs = \"16k\"\nsize = \"4MiB\"\nrequests = 100\nfsync = 10\ndirect = true\n"
        )
    };
    let dir = std::env::temp_dir().join(format!("hvio-blktap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfq = |blktap: &str, records: &str| {
        let text = format!(
            "seed = 3\n[disk]\nmodel = \"simple\"\n[host]\nscheduler = \"cfq\"\n{blktap}\n{}{}[output]\nrecords = \"{}\"\n",
            vm("a"),
            vm("b"),
            dir.join(records).display()
        );
        let r = run(&Config::from_toml_str(&text, "test.toml").unwrap()).unwrap();
        let csv = std::fs::read_to_string(dir.join(records)).unwrap();
        let metas = csv.lines().skip(1).filter(|l| l.split(',').nth(4) == Some("1")).count();
        (r, metas)
    };
    let (plain, plain_meta) = cfq("", "plain.csv");
    let (sync_w, _) = cfq(
        "blktap = { io_merge = false, elevator_merge = false, sync_writes = true }",
        "sync.csv",
    );
    let (tap, tap_meta) = cfq("blktap = { io_merge = false, elevator_merge = false }", "tap.csv");
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(plain.host.requests, 2 * (100 + 10));
    assert_eq!(tap.host.requests, plain.host.requests);
    assert_eq!(plain_meta, 20, "the guest's journal writes carry REQ_META");
    assert_eq!(tap_meta, 0, "the metadata flag does not cross blkif");
    assert!(sync_w.host.idle_pending_s > 0.0, "CFQ idles on sync queues");
    assert_eq!(tap.host.idle_pending_s, 0.0, "CFQ's shared async queue needs no idling");
}

#[test]
fn blktap_runs_are_deterministic() {
    let a = sim("blktap = {}", WRITER);
    let b = sim("blktap = {}", WRITER);
    assert_eq!(serde_json::to_string(&a).unwrap(), serde_json::to_string(&b).unwrap());
}

#[test]
fn max_sectors_kb_is_checked() {
    let text = "[host]\nblktap = { max_sectors_kb = 4 }\n[[vm]]\nname = \"g\"\n[[vm.job]]\npreset = \"RR\"\n";
    let cfg = Config::from_toml_str(text, "t.toml").unwrap();
    let err = run(&cfg).unwrap_err().to_string();
    assert!(err.contains("max_sectors_kb"), "{err}");
}
