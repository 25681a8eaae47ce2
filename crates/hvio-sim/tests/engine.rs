//! End-to-end tests of the engine on the small hand-computable disk.

use hvio_sim::{run, Config, DEFAULT_SCENARIO};

fn cfg(text: &str) -> Config {
    Config::from_toml_str(text, "test.toml").unwrap()
}

const TWO_VMS: &str = r#"
seed = 7
[host]
scheduler = "deadline"
[[vm]]
name = "a"
image_size = "2GiB"
[[vm.job]]
rw = "randread"
bs = "4k"
size = "64MiB"
numjobs = 4
iodepth = 2
requests = 2000
[[vm]]
name = "b"
image_size = "2GiB"
[[vm.job]]
rw = "write"
bs = "16k"
size = "64MiB"
nrfiles = 4
numjobs = 4
requests = 3000
fsync = 50
"#;

#[test]
fn same_config_and_seed_give_identical_output() {
    let a = serde_json::to_string(&run(&cfg(TWO_VMS)).unwrap()).unwrap();
    let b = serde_json::to_string(&run(&cfg(TWO_VMS)).unwrap()).unwrap();
    assert_eq!(a, b);
    let c = serde_json::to_string(&run(&cfg(&TWO_VMS.replace("seed = 7", "seed = 8"))).unwrap()).unwrap();
    assert_ne!(a, c, "a different seed should change the random addresses");
}

#[test]
fn every_request_completes_exactly_once() {
    let r = run(&cfg(TWO_VMS)).unwrap();
    assert!(!r.truncated);
    let a = r.jobs.iter().find(|j| j.vm == "a").unwrap();
    let b = r.jobs.iter().find(|j| j.vm == "b").unwrap();
    assert_eq!(a.reads + a.writes, 2000);
    assert_eq!(a.writes, 0);
    assert_eq!(b.reads + b.writes, 3000);
    assert!(a.finished && b.finished);
    // Host saw the data requests plus fsync journal writes and flushes (3000/50/4 threads ≥ 60 fsyncs).
    let host_b = r.vms.iter().find(|v| v.vm == "b").unwrap().host_requests;
    assert!(host_b >= 3000 + 2 * 60, "host requests of b: {host_b}");
    assert_eq!(
        r.vms[0].host_requests, 2000,
        "vm a writes nothing, so no journal traffic"
    );
}

#[test]
fn default_scenario_parses_and_lays_out() {
    let c = cfg(DEFAULT_SCENARIO);
    let l = c.layout(1_953_525_168).unwrap();
    assert_eq!(l.len(), 4);
    assert_eq!(l[0].map.extents()[0].0, 300_000_000);
    assert!(l[1].map.extents()[0].0 > l[0].map.extents()[0].0 + l[0].image_sectors);
}

fn err(text: &str) -> String {
    match Config::from_toml_str(text, "bad.toml") {
        Err(e) => e.to_string(),
        Ok(c) => run(&c).expect_err("config should be rejected").to_string(),
    }
}

#[test]
fn bad_configs_name_the_key_and_value() {
    let e = err("[[vm]]\nname = \"a\"\nimage_sise = \"1G\"\n");
    assert!(e.contains("bad.toml") && e.contains("image_sise"), "{e}");
    let e = err("[[vm]]\nname = \"a\"\nimage_size = 0\n[[vm.job]]\nrw = \"read\"\n");
    assert!(e.contains("image_size") && e.contains('0'), "{e}");
    let e = err("[[vm]]\nname = \"a\"\nimage_size = \"-4k\"\n");
    assert!(e.contains("image_size") || e.contains("-4k"), "{e}");
    let e = err("[[vm]]\nname = \"a\"\nimage_size = \"1GiB\"\n[[vm.job]]\nrw = \"read\"\nsize = \"2GiB\"\n");
    assert!(
        e.contains("image_size") && e.contains("more than the image holds"),
        "{e}"
    );
    let e = err("[[vm]]\nname = \"a\"\noffset = \"1000GiB\"\n[[vm.job]]\nrw = \"read\"\n");
    assert!(e.contains("past the end of the disk"), "{e}");
    let e = err("[host]\nscheduler = \"fancy\"\n[[vm]]\nname = \"a\"\n[[vm.job]]\nrw = \"read\"\n");
    assert!(e.contains("fancy"), "{e}");
    let e = err("[host]\nscheduler = \"deadline\"\nparams = { fifo_batch = 0 }\n[[vm]]\nname = \"a\"\n[[vm.job]]\nrw = \"read\"\n");
    assert!(e.contains("fifo_batch"), "{e}");
    let e = err("[[vm]]\nname = \"a\"\n[[vm.job]]\nrw = \"sideways\"\n");
    assert!(e.contains("sideways"), "{e}");
    let e = err("[[vm]]\nname = \"a\"\n[[vm.job]]\nrw = \"read\"\nnumjobs = -1\n");
    assert!(e.contains("numjobs") || e.contains("-1"), "{e}");
}

#[test]
fn memory_follows_outstanding_requests_not_run_length() {
    let short = run(&cfg(TWO_VMS)).unwrap();
    let long = run(&cfg(&TWO_VMS
        .replace("requests = 2000", "requests = 20000")
        .replace("requests = 3000", "requests = 30000")))
    .unwrap();
    assert!(long.host.requests > 9 * short.host.requests);
    // 4 + 4 threads (depth 2 and 1) plus journal writes: a handful of slots, whatever the length.
    assert!(long.max_outstanding <= 16, "{}", long.max_outstanding);
    assert_eq!(long.max_outstanding, short.max_outstanding);
}

#[test]
fn guest_and_host_schedulers_pair_freely() {
    for (guest, host) in [("deadline", "noop"), ("noop", "deadline"), ("deadline", "deadline")] {
        let text = TWO_VMS
            .replace("scheduler = \"deadline\"", &format!("scheduler = \"{host}\""))
            .replace("name = \"a\"", &format!("name = \"a\"\nguest_scheduler = \"{guest}\""));
        let r = run(&cfg(&text)).unwrap();
        assert_eq!(r.scheduler, host);
        assert_eq!(r.jobs.iter().map(|j| j.reads + j.writes).sum::<u64>(), 5000);
    }
}

#[test]
fn default_scenario_finishes_under_every_scheduler() {
    // A scaled-down paper 000 scenario on the default HDD model: every
    // registered host scheduler must finish every job (no lost device
    // event, no endless idling).
    let mut text = DEFAULT_SCENARIO.to_string();
    for p in ["SR-M", "SR-S", "SW-M", "SW-S", "RRW", "RR", "RW"] {
        text = text.replace(
            &format!("preset = \"{p}\""),
            &format!("preset = \"{p}\"\nrequests = 300"),
        );
    }
    let base = cfg(&text);
    for name in hvio_sched::names() {
        let mut c = base.clone();
        c.host.scheduler = name.to_string();
        let r = run(&c).unwrap();
        assert!(!r.truncated, "{name} did not finish");
        assert!(r.jobs.iter().all(|j| j.finished && j.reads + j.writes == 300), "{name}");
    }
}

/// Random 4 KiB direct writes from one VM on the 850 PRO preset (scaled to
/// 2 GiB), fresh or preconditioned: its IOPS.
fn ssd_random_write_iops(precondition: &str) -> f64 {
    let text = format!(
        r#"
seed = 3
[host]
scheduler = "noop"
first_image_offset = 0
[disk]
model = "ssd"
preset = "samsung-850-pro-256"
capacity_gib = 2
pages_per_block = 32
{precondition}
[[vm]]
name = "a"
image_size = "1GiB"
[[vm.job]]
rw = "randwrite"
bs = "4k"
size = "512MiB"
numjobs = 4
iodepth = 8
direct = true
requests = 20000
"#
    );
    let r = run(&cfg(&text)).unwrap();
    assert_eq!(
        serde_json::to_string(&r).unwrap(),
        serde_json::to_string(&run(&cfg(&text)).unwrap()).unwrap(),
        "same config, same output"
    );
    let job = &r.jobs[0];
    assert!(job.finished && job.writes == 20_000);
    job.iops
}

#[test]
fn a_preconditioned_ssd_preset_writes_at_random_far_slower_than_a_fresh_one() {
    let fresh = ssd_random_write_iops("");
    let steady = ssd_random_write_iops("precondition = { max_drive_writes = 1 }");
    eprintln!("random 4 KiB writes: fresh {fresh:.0} IOPS, preconditioned {steady:.0} IOPS");
    assert!(steady < 0.5 * fresh, "fresh {fresh}, preconditioned {steady}");
}

#[test]
fn an_ssd_preconditioning_without_a_seed_takes_the_runs() {
    // The runs' seed is 3: another seed is another steady state.
    let own = ssd_random_write_iops("precondition = { max_drive_writes = 1 }");
    assert_eq!(
        own,
        ssd_random_write_iops("precondition = { max_drive_writes = 1, seed = 3 }")
    );
    assert_ne!(
        own,
        ssd_random_write_iops("precondition = { max_drive_writes = 1, seed = 1 }")
    );
}

/// One VM with a 1 GiB image of `fragments` extents 64 MiB apart, a
/// sequential reader of 96 KiB requests over 880 MiB of it (no journal
/// traffic): the result and its host records as (sector, sectors).
fn fragmented_read(fragments: u32, name: &str) -> (hvio_sim::SimResult, Vec<(u64, u64)>) {
    let path = std::env::temp_dir().join(format!("hvio-fragments-{}-{name}.csv", std::process::id()));
    let text = format!(
        r#"
seed = 1
[disk]
model = "simple"
[host]
scheduler = "noop"
[output]
records = "{}"
[[vm]]
name = "a"
image_size = "1GiB"
fragments = {fragments}
fragment_gap = "64MiB"
journal_commit_s = 0
[[vm.job]]
rw = "read"
bs = "96k"
size = "880MiB"
"#,
        path.display()
    );
    let r = run(&cfg(&text)).unwrap();
    let csv = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_file(&path).ok();
    let recs = csv
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[2].parse().unwrap(), f[3].parse().unwrap())
        })
        .collect();
    (r, recs)
}

#[test]
fn a_request_across_a_fragment_boundary_is_split_at_it() {
    let (r, recs) = fragmented_read(4, "four");
    assert!(!r.truncated && r.jobs[0].finished);
    let c = cfg("[[vm]]\nname = \"a\"\nimage_size = \"1GiB\"\nfragments = 4\nfragment_gap = \"64MiB\"\n");
    let extents = c.layout(2_000_000_000).unwrap()[0].map.extents().to_vec();
    assert_eq!(extents.len(), 4);
    // Every host request lies inside one extent: none runs into a gap.
    for &(s, n) in &recs {
        assert!(
            extents.iter().any(|&(e, len)| s >= e && s + n <= e + len),
            "request {s}+{n} is not inside one extent of {extents:?}"
        );
    }
    // The reads that crossed one of the three boundaries went as two
    // requests each; every byte read was served once.
    let reads = r.vms[0].reads;
    assert!(
        r.host.requests > reads && r.host.requests <= reads + 3,
        "{} for {reads}",
        r.host.requests
    );
    assert_eq!(r.host.mb, r.vms[0].mb);
    // Unfragmented, the same reads reach the host as they are.
    let (whole, _) = fragmented_read(1, "one");
    assert_eq!(whole.vms[0].reads, reads);
    assert_eq!(whole.host.requests, reads);
}
