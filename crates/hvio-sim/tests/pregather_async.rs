//! Pregather's `async_service` (choice 15 of its module doc) on the blktap
//! host path, where a 2.6.18 dom0 sees a VM's reads as sync and its writes
//! as async: SRRW of Table 3, a sequential reader beside a random writer in
//! one VM, scaled down to 300 sysbench requests per application.

use hvio_sim::{run, Config, SimResult};

fn srrw(async_service: u32) -> SimResult {
    let job = |name: &str| {
        format!("[[vm.job]]\nname = \"{name}\"\npreset = \"{name}\"\ndirect = false\nfsync = 100\nrequests = 300\n")
    };
    let text = format!(
        "seed = 1\nmax_time_s = 600\n[host]\nscheduler = \"pregather\"\nparams = {{ async_service = {async_service} }}\nblktap = {{}}\n[[vm]]\nname = \"vm1\"\nbarrier = false\n{}{}",
        job("SR-M"),
        job("RW")
    );
    let r = run(&Config::from_toml_str(&text, "srrw.toml").unwrap()).unwrap();
    assert!(!r.truncated);
    assert!(r.jobs.iter().all(|j| j.finished));
    r
}

fn exec(r: &SimResult, job: &str) -> f64 {
    r.jobs.iter().find(|j| j.job == job).unwrap().exec_time_s
}

#[test]
fn sync_first_lets_the_reader_pass_the_async_random_writes() {
    let (mixed, sync_first, shared) = (srrw(0), srrw(1), srrw(2));
    // One position order: the reader waits behind seeks to the random
    // writes. Sync first (cfq_choose_req): it streams.
    let (m, s) = (exec(&mixed, "SR-M"), exec(&sync_first, "SR-M"));
    assert!(s * 5.0 < m, "SR-M {s} s with sync first, {m} s mixed");
    // The shared async queue ends the reader's turn whenever it has
    // nothing queued, and its slices of random writes delay it again.
    let q = exec(&shared, "SR-M");
    assert!(
        s * 5.0 < q,
        "SR-M {s} s with sync first, {q} s with the shared async queue"
    );
    // The writer barely notices (within 10 %).
    let (wm, ws) = (exec(&mixed, "RW"), exec(&sync_first, "RW"));
    assert!((ws / wm - 1.0).abs() < 0.1, "RW {ws} s against {wm} s");
    // The shared async queue shows in the counters; deterministic.
    assert!(shared
        .host
        .counters
        .iter()
        .any(|(k, v)| k == "slices.async" && *v > 0.0));
    assert_eq!(exec(&srrw(1), "SR-M"), s);
}
