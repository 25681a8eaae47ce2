//! Workload-dependent preconditioning (`[disk] precondition.workload`): the
//! run's own workload repeated in rounds on the whole system until the
//! rounds' throughput and the drive's write amplification are at steady
//! state, then the run measured; the round cap; a reshaped image kept or
//! created afresh between rounds.

use hvio_sim::{run, Config, SimResult};

/// fio's random (or sequential) 4 KiB direct writes, 8 threads × 8 MiB, on
/// the 850 PRO preset scaled to 1 GiB, with `disk` and `vm` lines added.
fn fio(rw: &str, disk: &str, vm: &str) -> SimResult {
    let text = format!(
        r#"
seed = 5
[host]
scheduler = "noop"
first_image_offset = 0
[disk]
model = "ssd"
preset = "samsung-850-pro-256"
capacity_gib = 1
pages_per_block = 16
{disk}
[[vm]]
name = "vm"
image_size = "384MiB"
{vm}
[[vm.job]]
name = "fio"
rw = "{rw}"
bs = "4k"
size = "64MiB"
nrfiles = 8
numjobs = 8
iodepth = 64
direct = true
"#
    );
    let cfg = Config::from_toml_str(&text, "t.toml").unwrap();
    run(&cfg).unwrap()
}

fn counter(r: &SimResult, key: &str) -> f64 {
    r.host.device.iter().find(|(k, _)| k == key).map(|c| c.1).unwrap()
}

#[test]
fn rounds_run_until_throughput_and_write_amplification_settle_and_are_reported() {
    // No command ceiling (the preset's 100K commands a second): the flash,
    // whose garbage collection the rounds build up, sets the pace.
    let disk = "precondition = { workload = {} }\ncommand_us = 0";
    let r = fio("randwrite", disk, "");
    let p = r.precondition.as_ref().unwrap();
    assert!(p.settled);
    assert_eq!((p.window, p.max_rounds), (5, 25));
    assert!(p.rounds.len() >= 5 && p.rounds.len() < 25, "{} rounds", p.rounds.len());
    assert_eq!(counter(&r, "precondition_rounds"), p.rounds.len() as f64);
    assert_eq!(counter(&r, "precondition_settled"), 1.0);
    // The first round meets a drive filled in order: random overwrites of it
    // then cost the drive more round after round, and the run measured
    // afterwards pays what the last rounds paid.
    let first = &p.rounds[0];
    let last = p.rounds.last().unwrap();
    assert!(last.device_write_amplification > first.device_write_amplification);
    assert!(last.mb_per_s < first.mb_per_s);
    let wa = counter(&r, "ssd_write_amplification");
    assert!(
        (wa / last.device_write_amplification - 1.0).abs() < 0.1,
        "{wa} vs {last:?}"
    );
    // The same config, the same output.
    let again = fio("randwrite", disk, "");
    assert_eq!(
        serde_json::to_string(&r).unwrap(),
        serde_json::to_string(&again).unwrap()
    );
}

#[test]
fn a_criterion_never_met_stops_at_the_round_cap_and_says_so() {
    let r = fio(
        "randwrite",
        "precondition = { workload = { window = 2, max_rounds = 3, excursion = 1e-12, slope = 1e-12 } }",
        "",
    );
    let p = r.precondition.as_ref().unwrap();
    assert!(!p.settled);
    assert_eq!(p.rounds.len(), 3);
    assert_eq!(counter(&r, "precondition_settled"), 0.0);
    assert_eq!(counter(&r, "precondition_max_rounds"), 3.0);
}

#[test]
fn a_kept_reshaped_image_fills_and_cleans_where_a_fresh_one_never_does() {
    // A data region of 88 MiB for 64 MiB of files: the second round fills it.
    let vm = "reshape = { data_region_bytes = \"88MiB\" }";
    let kept = fio("randwrite", "precondition = { workload = {} }", vm);
    let fresh = fio(
        "randwrite",
        "precondition = { workload = { reshaped_image = \"fresh\" } }",
        vm,
    );
    let cleaned = |r: &SimResult| r.reshape.as_ref().unwrap().stats.clean_write_sectors;
    assert!(cleaned(&kept) > 0, "the kept image cleans in the measured run");
    assert_eq!(cleaned(&fresh), 0, "a fresh image never fills");
    let p = kept.precondition.as_ref().unwrap();
    assert!(p.rounds[0].host_write_amplification.unwrap() < 1.1);
    assert!(p.rounds.last().unwrap().host_write_amplification.unwrap() > 1.5);
    // The measured run's counters are its own: the guest wrote as much as
    // in the run on a fresh image, not that and every round's.
    let guest = |r: &SimResult| r.reshape.as_ref().unwrap().stats.guest_write_sectors;
    assert_eq!(guest(&kept), guest(&fresh));
}
