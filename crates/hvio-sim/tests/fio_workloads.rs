//! `[[vm.job]] fio = "file.fio"`: fio job files as the simulator's
//! workloads, read relative to the config, with errors that name the config
//! line, the job file and the option.

use hvio_sim::{Config, Rw, Sharing};
use std::path::{Path, PathBuf};

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/three-vms/three-vms.toml")
}

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hvio-fio-workloads-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn the_three_vm_example_maps_onto_jobs() {
    let cfg = Config::from_file(&example()).unwrap();
    assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
    assert_eq!(cfg.fio_files.len(), 3);
    let job = |vm: usize| cfg.vms[vm].jobs[0].resolve("t").unwrap();
    // Two clones of 2 GiB each, a file each.
    let r = job(0);
    assert_eq!((r.rw, r.numjobs, r.size, r.nrfiles), (Rw::Read, 2, 4 << 30, 2));
    assert_eq!(
        (r.sharing, r.bssplit.as_slice(), r.iodepth),
        (Sharing::PerThread, &[(128 << 10, 100)][..], 1)
    );
    assert!(r.direct);
    assert_eq!(r.runtime_ns, Some(20_000_000_000));
    // libaio with direct=1 keeps its eight requests in flight.
    let d = job(1);
    assert_eq!((d.rw, d.read_pct, d.iodepth, d.bssplit[0].0), (Rw::RandRw, 70, 8, 8192));
    let b = job(2);
    assert_eq!((b.rw, b.bssplit[0].0, b.iodepth), (Rw::Write, 1 << 20, 1));
    assert_eq!(cfg.vms.iter().map(|v| v.weight).collect::<Vec<_>>(), [400, 200, 100]);
}

#[test]
fn paths_are_relative_to_the_config_and_warnings_are_kept() {
    let d = dir("rel");
    std::fs::create_dir_all(d.join("jobs")).unwrap();
    std::fs::write(
        d.join("jobs/two.fio"),
        "[global]\nsize=64m\ndirect=1\n[a]\nrw=read\n[b]\nrw=randwrite\niodepth=4\nnorandommap\n",
    )
    .unwrap();
    let toml = "seed = 1\n[[vm]]\nname = \"v\"\n[[vm.job]]\nfio = \"jobs/two.fio\"\n[[vm]]\nname = \"w\"\n[[vm.job]]\nfio = \"jobs/two.fio\"\nfio_job = \"b\"\n";
    std::fs::write(d.join("c.toml"), toml).unwrap();
    let cfg = Config::from_file(&d.join("c.toml")).unwrap();
    let names = |i: usize| {
        cfg.vms[i]
            .jobs
            .iter()
            .map(|j| j.name.clone().unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(0), ["a", "b"]);
    assert_eq!(names(1), ["b"]);
    // norandommap twice (read twice), psync's iodepth twice.
    assert_eq!(cfg.warnings.len(), 4, "{:?}", cfg.warnings);
    assert!(cfg.warnings.iter().any(|w| w.contains("two.fio:9: [b] norandommap")));
    assert!(cfg
        .warnings
        .iter()
        .any(|w| w.contains("[b] iodepth=4: ioengine=psync is synchronous")));
    // The run works and the jobs are the file's.
    let r = hvio_sim::run(&Config { max_time_s: 2.0, ..cfg }).unwrap();
    assert_eq!(
        r.jobs.iter().map(|j| j.job.as_str()).collect::<Vec<_>>(),
        ["a", "b", "b"]
    );
    let _ = std::fs::remove_dir_all(d);
}

#[test]
fn errors_name_the_config_line_the_file_and_the_option() {
    let d = dir("err");
    std::fs::write(d.join("j.fio"), "[a]\nrw=read\nsize=1g\n[t]\nrw=trim\nsize=1g\n").unwrap();
    let head = "seed = 1\n[[vm]]\nname = \"v\"\n[[vm.job]]\n";
    for (job, expect) in [
        (
            "fio = \"j.fio\"\nfio_job = \"z\"\n",
            "c.toml:5: vm \"v\" job 0: invalid value \"j.fio\" for `fio`: ",
        ),
        (
            "fio = \"j.fio\"\nfio_job = \"z\"\n",
            "has no job \"z\" (its jobs: a, t)",
        ),
        (
            "fio = \"j.fio\"\nfio_job = \"t\"\n",
            "[t] rw=trim: trims are not modelled",
        ),
        ("fio = \"j.fio\"\nbs = \"4k\"\n", "bs would be ignored"),
        ("fio = \"missing.fio\"\n", "missing.fio: No such file"),
        ("rw = \"read\"\nfio_job = \"a\"\n", "for `fio_job`"),
    ] {
        std::fs::write(d.join("c.toml"), format!("{head}{job}")).unwrap();
        let e = Config::from_file(&d.join("c.toml")).unwrap_err().to_string();
        assert!(e.contains(expect), "{job:?}: {e}");
    }
    let _ = std::fs::remove_dir_all(d);
}

/// BFQ on the three-VM example moves about 4 MB/s in all, the database VM
/// holding most of the disk's time: every VM's queue is new, so BFQ's
/// `low_latency` raises all three (×30, for `bfq_wr_duration`, up to 25 s
/// on a slow disk) and a raised queue is charged for its sectors, never for
/// its time (Linux: `bfqq->wr_coeff == 1` before `bfq_bfqq_charge_time`).
/// The random 8 KiB reads cost the most time per sector, so sector-fair
/// service gives them the disk. Without raising, the slow queues are
/// charged for time and the total is several times higher.
#[test]
fn bfq_collapse_on_the_example_is_weight_raising() {
    let mut cfg = Config::from_file(&example()).unwrap();
    let counter =
        |r: &hvio_sim::SimResult, name: &str| r.host.counters.iter().find(|c| c.0 == name).map(|c| c.1).unwrap();
    let raised = hvio_sim::run(&cfg).unwrap();
    assert_eq!(raised.scheduler, "bfq");
    assert_eq!(counter(&raised, "weight_raised"), 3.0);
    assert_eq!(counter(&raised, "time_charged"), 0.0);
    let db = &raised.vms[1];
    assert!(db.disk_time_s > 0.7 * raised.host.busy_s, "{db:?}");
    cfg.host.params.insert("low_latency".into(), 0.0);
    let plain = hvio_sim::run(&cfg).unwrap();
    assert_eq!(counter(&plain, "weight_raised"), 0.0);
    assert!(counter(&plain, "time_charged") > 10.0);
    assert!(
        plain.total_mb_per_s > 2.5 * raised.total_mb_per_s,
        "{} vs {}",
        plain.total_mb_per_s,
        raised.total_mb_per_s
    );
    assert!(plain.vms[1].disk_time_s < 0.5 * plain.host.busy_s);
}
