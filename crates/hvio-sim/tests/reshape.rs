//! Address reshaping (paper 001) as a VM's host-path stage: the guest's
//! random writes reach the device as sequential ones, its reads are split
//! across the extents they touch, the stage's own I/O is counted apart, and
//! a bad `reshape` key is an error naming the VM, the key and the value.

use hvio_sim::{run, Config, SimResult};

/// One VM on an SSD (the 850 PRO preset scaled down) with `reshape` (none
/// when empty) and one job of `job` keys.
fn config(reshape: &str, job: &str) -> String {
    format!(
        r#"
seed = 5
[host]
scheduler = "noop"
first_image_offset = 0
[disk]
model = "ssd"
preset = "samsung-850-pro-256"
capacity_gib = 2
pages_per_block = 32
[[vm]]
name = "vm1"
image_size = "256MiB"
virtio_depth = 64
{reshape}
[[vm.job]]
bs = "4k"
size = "64MiB"
numjobs = 4
iodepth = 16
direct = true
{job}
"#
    )
}

const RESHAPE: &str = r#"reshape = { meta_region_bytes = "16MiB", data_region_bytes = "96MiB", segment_bytes = "1MiB", log_bytes = "4MiB" }"#;

fn sim(text: &str) -> SimResult {
    let cfg = Config::from_toml_str(text, "reshape.toml").unwrap_or_else(|e| panic!("{e}"));
    run(&cfg).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn random_writes_reach_the_device_in_order_and_their_cost_is_counted_apart() {
    let job = "rw = \"randwrite\"\nrequests = 6000";
    let direct = sim(&config("", job));
    let reshaped = sim(&config(RESHAPE, job));
    // The guest wrote the same; under reshaping the device saw fewer, larger
    // and far more sequential requests.
    assert_eq!(direct.vms[0].writes, reshaped.vms[0].writes);
    assert!(
        reshaped.host.seek.zero_frac > direct.host.seek.zero_frac + 0.5,
        "zero-seek fraction: direct {}, reshaped {}",
        direct.host.seek.zero_frac,
        reshaped.host.seek.zero_frac
    );
    assert!(reshaped.host.requests < direct.host.requests);
    let r = reshaped.vms[0].reshape.as_ref().expect("the VM reshapes");
    assert!(direct.vms[0].reshape.is_none() && direct.reshape.is_none());
    // Every guest write went through the sequentializer (journal writes too).
    assert!(r.guest_write_bytes() >= 6000 * 4096, "{r:?}");
    assert_eq!(
        r.image_write_bytes(),
        r.guest_write_bytes() + r.clean_write_bytes() + r.stats.log_bytes + r.stats.checkpoint_bytes
    );
    assert!(r.write_amplification() >= 1.0);
    assert!(r.stats.log_bytes > 0 && r.stats.commits > 0, "{r:?}");
    // One extent per scattered 4 KiB write, at most.
    assert!(r.table_extents > 0 && r.table_extents <= 6000 + 100, "{r:?}");
    assert!(r.table_bytes_per_gib_written() > 0.0);
    // The host wrote the image bytes (in MB) and the guest's total is the VM's.
    let host_mb = reshaped.vms[0].host_mb;
    assert!(host_mb * 1e6 >= r.image_write_bytes() as f64, "{host_mb} MB, {r:?}");
    assert_eq!(reshaped.reshape.as_ref(), Some(r));
    // The SSD's own counters are in the result of an SSD run.
    let device: std::collections::BTreeMap<&str, f64> =
        reshaped.host.device.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    assert!(device["ssd_host_pages_written"] > 0.0);
    assert!(device["ssd_write_amplification"] >= 1.0);
    assert!(device.contains_key("ssd_gc_pages_moved"));
}

#[test]
fn reads_are_split_across_the_extents_they_touch() {
    // 64 KiB reads among 4 KiB writes at random places of a 4 MiB file:
    // a read touches extents written apart and the base image between them.
    let job = "rw = \"randrw\"\nbssplit = \"4k/50:64k/50\"\nrequests = 4000";
    let text = config(RESHAPE, job).replace(
        "bs = \"4k\"\nsize = \"64MiB\"\nnumjobs = 4",
        "size = \"4MiB\"\nnumjobs = 1",
    );
    let r = sim(&text);
    let rs = r.vms[0].reshape.as_ref().unwrap();
    assert!(r.vms[0].reads > 1000);
    assert!(
        rs.stats.guest_read_ios as f64 > 2.0 * r.vms[0].reads as f64,
        "{} guest reads took {} host reads",
        r.vms[0].reads,
        rs.stats.guest_read_ios
    );
}

#[test]
fn the_same_config_and_seed_give_the_same_result() {
    let text = config(RESHAPE, "rw = \"randrw\"\nrequests = 3000");
    let a = serde_json::to_string(&sim(&text)).unwrap();
    let b = serde_json::to_string(&sim(&text)).unwrap();
    assert_eq!(a, b);
}

/// The error of running `text`.
fn error_of(text: &str) -> String {
    let cfg = match Config::from_toml_str(text, "bad.toml") {
        Ok(c) => c,
        Err(e) => return e.to_string(),
    };
    match run(&cfg) {
        Ok(_) => panic!("ran: {text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_reshape_keys_name_the_vm_the_key_and_the_value() {
    let job = "rw = \"randwrite\"\nrequests = 10";
    for (keys, parts) in [
        (
            // Regions that do not fit the image the user sized.
            r#"reshape = { meta_region_bytes = "16MiB", data_region_bytes = "96MiB", segment_bytes = "1MiB", image_bytes = "300MiB" }"#,
            &["vm \"vm1\"", "reshape.image_bytes", "314572800", "do not fit"][..],
        ),
        (
            r#"reshape = { segment_bytes = 6000 }"#,
            &["vm \"vm1\"", "reshape.segment_bytes", "6000", "multiple of block_bytes"][..],
        ),
        (
            r#"reshape = { clean_start = 1.5 }"#,
            &["vm \"vm1\"", "reshape.clean_start", "1.5", "(0, 1)"][..],
        ),
        (
            r#"reshape = { clean_hard = 0.5 }"#,
            &["vm \"vm1\"", "reshape.clean_hard", "0.5"][..],
        ),
        (
            // A region that is not a whole number of segments.
            r#"reshape = { segment_bytes = "1MiB", data_region_bytes = "2500KiB" }"#,
            &[
                "vm \"vm1\"",
                "reshape.data_region_bytes",
                "2560000",
                "multiple of segment_bytes",
            ][..],
        ),
        (
            // A region too small to clean.
            r#"reshape = { segment_bytes = "1MiB", meta_region_bytes = "2MiB" }"#,
            &[
                "vm \"vm1\"",
                "reshape.meta_region_bytes",
                "2097152",
                "at least 3 segments",
            ][..],
        ),
        (
            r#"reshape = { segment_bytes = 0 }"#,
            &["vm \"vm1\"", "reshape.segment_bytes", "0", "non-zero multiple"][..],
        ),
        (
            r#"reshape = { block_bytes = 3000 }"#,
            &["vm \"vm1\"", "reshape.block_bytes", "3000", "power of two"][..],
        ),
        (
            r#"reshape = { log_bytes = "64KiB" }"#,
            &["vm \"vm1\"", "reshape.log_bytes", "65536", "four full transactions"][..],
        ),
        (
            r#"reshape = { clean_start = 0.0 }"#,
            &["vm \"vm1\"", "reshape.clean_start", "0", "(0, 1)"][..],
        ),
        (
            r#"reshape = { clean_start = nan }"#,
            &["vm \"vm1\"", "reshape.clean_start", "NaN", "(0, 1)"][..],
        ),
        (
            r#"reshape = { clean_hard = -0.01 }"#,
            &["vm \"vm1\"", "reshape.clean_hard", "-0.01", "[0, clean_start]"][..],
        ),
        (
            r#"reshape = { checkpoint_at = 1.0 }"#,
            &["vm \"vm1\"", "reshape.checkpoint_at", "1", "(0, 1)"][..],
        ),
        (
            r#"reshape = { data_region_bytes = "10x" }"#,
            &["reshape.data_region_bytes", "10x"][..],
        ),
        (r#"reshape = { segment = 4 }"#, &["reshape", "segment"][..]),
    ] {
        let e = error_of(&config(keys, job));
        for p in parts {
            assert!(e.contains(p), "`{p}` missing from: {e}");
        }
    }
    // Regions that do not fit the disk the image is on.
    let big = config(r#"reshape = { data_region_bytes = "4GiB" }"#, job);
    let e = error_of(&big);
    for p in ["vm \"vm1\"", "image_size", "past the end of the disk"] {
        assert!(e.contains(p), "`{p}` missing from: {e}");
    }
}

fn counter(r: &SimResult, name: &str) -> f64 {
    r.host.counters.iter().find(|(k, _)| k == name).map_or(0.0, |c| c.1)
}

/// With QEMU's thread, a batch is what one pass pops (Fig. 3's requests
/// after a VM exit), not what reaches the host at one instant: guest
/// requests that arrive one at a time (one vCPU spends 1 µs on each) while
/// the thread is busy (20 µs a guest request) leave together as one data
/// write. Batched by instant, each would leave alone: a host request per
/// guest request.
#[test]
fn with_qemus_thread_a_batch_is_what_one_pass_pops() {
    let job = "rw = \"randwrite\"\nrequests = 6000";
    let keys = format!(
        "{RESHAPE}\nqemu_path = {{ guest_request_us = 20, request_us = 4 }}\nguest_cpu = {{ vcpus = 1, request_us = 1 }}"
    );
    let r = sim(&config(&keys, job));
    let (guests, passes, host) = (
        counter(&r, "qemu_guest_requests"),
        counter(&r, "qemu_passes"),
        counter(&r, "qemu_host_requests"),
    );
    eprintln!("{guests} guest requests, {passes} passes, {host} host requests");
    // The job's 6000 writes and the flushes that end it.
    assert!((6000.0..6010.0).contains(&guests), "{guests} guest requests");
    // A pass sends at most one data write, beside the stage's own log
    // writes and cache flushes.
    let own = (r.vms[0].reshape.as_ref().unwrap().stats.commits * 2) as f64;
    assert!(
        host <= passes + own,
        "{host} host requests, {passes} passes, {own} of the stage's own"
    );
    assert!(host < guests / 10.0, "{host} host requests for {guests} guest ones");
}
