//! Buffered jobs (`direct = false`) through the guest page cache, end to end
//! on the small test disk, against hand-computed request counts.

use hvio_sim::{run, Config, SimResult};

fn sim(jobs: &str, page_cache: &str) -> SimResult {
    let text = format!(
        r#"
seed = 3
[disk]
model = "simple"
[host]
scheduler = "noop"
[[vm]]
name = "g"
image_size = "1GiB"
journal_commit_s = 0
page_cache = {{ {page_cache} }}
{jobs}
"#
    );
    let r = run(&Config::from_toml_str(&text, "test.toml").unwrap()).unwrap();
    assert!(!r.truncated);
    assert!(r.jobs.iter().all(|j| j.finished));
    r
}

const PAGE: f64 = 4096.0;

/// Every access pattern, buffered and direct, in one VM.
const MIXED: &str = r#"[[vm.job]]
rw = "randrw"
bs = "16k"
size = "8MiB"
nrfiles = 4
numjobs = 4
requests = 120
fsync = 10
direct = false
[[vm.job]]
rw = "rw"
bs = "8k"
size = "4MiB"
numjobs = 2
requests = 100
thinktime_us = 50
direct = false
[[vm.job]]
rw = "read"
bs = "16k"
size = "4MiB"
numjobs = 3
sharing = "shared"
requests = 150
direct = false
[[vm.job]]
rw = "randwrite"
bs = "4k"
size = "2MiB"
requests = 80
direct = true"#;

/// 32 sequential writes of 16 KiB to one 1 MiB file, fsync every 16 requests.
const WRITER: &str = r#"[[vm.job]]
rw = "write"
bs = "16k"
size = "1MiB"
requests = 32
fsync = 16
direct = false"#;

#[test]
fn sequential_reads_go_out_as_growing_read_ahead_windows() {
    // 16 reads of 16 KiB (pages 0..63) of a 1 MiB file. Windows (pages):
    // 8 at 0 (initial: 4 rounded, ×2), then at each marker 16 at 8, 32 at 24,
    // 32 at 56, 32 at 88 — 120 pages. Requests of at most 11 pages (44 KiB):
    // 1 + 2 + 3 + 3 + 3 = 12.
    let r = sim(
        r#"[[vm.job]]
rw = "read"
bs = "16k"
size = "1MiB"
requests = 16
direct = false"#,
        "",
    );
    assert_eq!(r.jobs[0].reads, 16);
    assert_eq!(r.vms[0].host_requests, 12);
    assert!(
        (r.vms[0].host_mb - 120.0 * PAGE / 1e6).abs() < 1e-9,
        "{}",
        r.vms[0].host_mb
    );
    // Read-ahead runs ahead of the reader: nearly every read is a cache hit.
    assert!(r.jobs[0].latency.p50_ms < 0.1, "{:?}", r.jobs[0].latency);
}

#[test]
fn random_reads_fetch_only_the_block() {
    let r = sim(
        r#"[[vm.job]]
rw = "randread"
bs = "16k"
size = "64MiB"
nrfiles = 4
numjobs = 4
requests = 200
direct = false"#,
        "",
    );
    // One request per read of 4 pages (a few reads hit earlier ones or land
    // at a file start, where the first window is 8 pages).
    let host = r.vms[0].host_requests;
    assert!((190..=200).contains(&host), "{host}");
}

#[test]
fn fsync_writes_the_dirty_pages_back_in_sorted_runs() {
    // 32 writes of 16 KiB (128 pages) to one file, fsync every 16 requests:
    // after write 16 the cycle fsyncs the file (64 pages = 6 requests of
    // ≤ 11 pages, plus the commit record and the flush); after write 32 the
    // job ends and its last thread fsyncs the other 64 pages the same way.
    let r = sim(WRITER, "");
    assert_eq!(r.jobs[0].writes, 32);
    assert_eq!(r.vms[0].host_requests, 2 * (6 + 2));
    let journal = 2.0 * 8.0 * 512.0;
    assert!((r.vms[0].host_mb - (128.0 * PAGE + journal) / 1e6).abs() < 1e-9);
}

#[test]
fn writers_above_the_dirty_limits_are_written_back_and_throttled() {
    // 1 MiB of memory = 256 pages: background write-back above 25.6 dirty
    // pages, writers wait above 51.2. 512 pages written without fsync: the
    // job must still end with every page on the disk exactly once.
    let r = sim(
        r#"[[vm.job]]
rw = "write"
bs = "16k"
size = "4MiB"
requests = 128
direct = false"#,
        "memory = \"1MiB\", dirty_ratio = 20, dirty_background_ratio = 10",
    );
    let journal = 8.0 * 512.0;
    assert!((r.vms[0].host_mb - (512.0 * PAGE + journal) / 1e6).abs() < 1e-9);
    // Throttled: the writes took disk time, not just copying (128 × 4 × 2 µs).
    assert!(r.jobs[0].exec_time_s > 0.01, "{}", r.jobs[0].exec_time_s);
}

#[test]
fn buffered_config_errors_name_the_key() {
    let e = Config::from_toml_str(
        r#"
[[vm]]
name = "g"
page_cache = { dirty_ratio = 5, dirty_background_ratio = 10 }
[[vm.job]]
rw = "read"
direct = false
"#,
        "t.toml",
    )
    .unwrap()
    .layout(1 << 40)
    .unwrap_err()
    .to_string();
    assert!(e.contains("dirty_background_ratio"), "{e}");
}

#[test]
fn every_pattern_finishes_under_every_guest_scheduler_with_a_small_cache() {
    // 256 KiB of memory: eviction, background write-back and throttling all
    // happen; every job must finish with its counts intact.

    for guest in hvio_sched::names() {
        let r = sim(
            &format!("guest_scheduler = \"{guest}\"\n{MIXED}"),
            "memory = \"256KiB\", dirty_ratio = 20, dirty_background_ratio = 5, nr_requests = 4",
        );
        let ops: Vec<u64> = r.jobs.iter().map(|j| j.reads + j.writes).collect();
        assert_eq!(ops, [120, 100, 150, 80], "guest scheduler {guest}");
        assert!(r.vms[0].host_requests > 0);
    }
}

#[test]
fn the_fsync_cycle_visits_every_file_and_commits_only_written_ones() {
    // 4 files of 1 MiB; 8 sequential writes of 16 KiB land in file 0 only;
    // fsync every 4 requests. Cycle 1 (after write 4) and cycle 2 (after
    // write 8 — the job's last, so the end-of-run fsync instead) each write
    // 16 pages (2 requests of ≤ 11 pages) and one commit + flush; the other
    // three files were never written and cost nothing.
    let r = sim(
        r#"[[vm.job]]
rw = "write"
bs = "16k"
size = "4MiB"
nrfiles = 4
requests = 8
fsync = 4
direct = false"#,
        "",
    );
    assert_eq!(r.vms[0].host_requests, 2 * (2 + 2));
    // Random reads only: the cycle never starts (nothing was written).
    let r = sim(
        r#"[[vm.job]]
rw = "randread"
bs = "16k"
size = "4MiB"
nrfiles = 4
requests = 40
fsync = 4
direct = false"#,
        "",
    );
    assert!(r.vms[0].host_requests <= 40);
}

#[test]
fn without_barriers_fsync_sends_no_flush() {
    // As fsync_writes_the_dirty_pages_back_in_sorted_runs, with ext3's
    // `barrier=0`: the two flushes are gone.
    let r = sim(&format!("barrier = false\n{WRITER}"), "");
    assert_eq!(r.vms[0].host_requests, 2 * (6 + 1));
}

#[test]
fn buffered_runs_are_deterministic() {
    let small = "memory = \"512KiB\"";
    let a = serde_json::to_string(&sim(MIXED, small)).unwrap();
    let b = serde_json::to_string(&sim(MIXED, small)).unwrap();
    assert_eq!(a, b);
}
