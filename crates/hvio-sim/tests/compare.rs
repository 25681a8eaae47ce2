//! `hvio_sim::compare::comparison`: the figures a scheduler choice rests on,
//! checked against their definitions on three VMs sharing an HDD.

use hvio_sim::compare::{comparison, STARVED_BELOW};
use hvio_sim::Config;

/// Two sequential readers, a 70/30 random 8 KiB mix at iodepth 8 and a
/// 1 MiB sequential writer, weights 4:2:1, 10 s each.
const THREE_VMS: &str = r#"
seed = 1
max_time_s = 60
[[vm]]
name = "reader"
weight = 400
[[vm.job]]
rw = "read"
bs = "128k"
numjobs = 2
size = "2g"
runtime_s = 10
[[vm]]
name = "db"
weight = 200
[[vm.job]]
rw = "randrw"
rwmixread = 70
bs = "8k"
iodepth = 8
size = "4g"
runtime_s = 10
[[vm]]
name = "backup"
weight = 100
[[vm.job]]
rw = "write"
bs = "1m"
size = "4g"
runtime_s = 10
"#;

#[test]
fn figures_follow_their_definitions() {
    let cfg = Config::from_toml_str(THREE_VMS, "three.toml").unwrap();
    let c = comparison(&cfg, &["noop", "mq-deadline", "ishare"], 1).unwrap();
    assert_eq!(c.seeds, [1]);
    assert_eq!(c.runs.len(), 3);
    for (s, r) in c.schedulers.iter().zip(&c.runs) {
        assert_eq!(s.scheduler, r.scheduler);
        assert_eq!(s.total_mb_per_s.mean, r.total_mb_per_s);
        let weights: f64 = s.vms.iter().map(|v| v.weight_share).sum();
        assert!((weights - 1.0).abs() < 1e-12);
        let disk: f64 = s.vms.iter().map(|v| v.disk_share.mean).sum();
        assert!((disk - 1.0).abs() < 1e-9, "{disk}");
        let mut xs = Vec::new();
        for (v, rv) in s.vms.iter().zip(&r.vms) {
            assert_eq!(v.mb_per_s.mean, rv.mb_per_s);
            assert_eq!(v.p99_ms.mean, rv.latency.p99_ms);
            assert!(v.p50_ms.mean <= v.p99_ms.mean && v.p99_ms.mean <= v.p999_ms.mean);
            assert!((v.slowdown.mean - v.alone_mb_per_s.mean / v.mb_per_s.mean).abs() < 1e-9);
            assert_eq!(v.starved, v.progress.mean < STARVED_BELOW * v.weight_share);
            xs.push(v.progress.mean / v.weight_share);
        }
        let jain = xs.iter().sum::<f64>().powi(2) / (3.0 * xs.iter().map(|x| x * x).sum::<f64>());
        assert!((s.jain.mean - jain).abs() < 1e-9);
        let worst = r.vms.iter().map(|v| v.latency.p99_ms).fold(0.0, f64::max);
        assert_eq!(s.worst_p99_ms.mean, worst);
    }
    // mq-deadline's read FIFOs and batching leave the random mix a few
    // requests a second behind the sequential streams.
    let mq = &c.schedulers[1];
    let db = mq.vms.iter().find(|v| v.vm == "db").unwrap();
    assert!(db.starved, "{db:?}");
    assert!(
        c.verdict.iter().any(|l| l.starts_with("starved: mq-deadline gives db")),
        "{:?}",
        c.verdict
    );
    for objective in ["throughput: ", "worst-case latency: ", "weighted fairness: "] {
        assert!(c.verdict.iter().any(|l| l.starts_with(objective)), "{:?}", c.verdict);
    }
    // Every job is time-based: no execution-time table, and a note says why.
    assert!(c.job_table().is_none());
    let text = c.render();
    assert!(!text.contains("job execution time"), "{text}");
    assert!(text.contains("time-based jobs"), "{text}");
    assert!(text.contains("ignore weights"), "{text}");
    let csv = c.csv();
    assert_eq!(csv.lines().count(), 1 + 3 * 3);
}

#[test]
fn seeds_give_a_spread() {
    let cfg = Config::from_toml_str(THREE_VMS, "three.toml").unwrap();
    let c = comparison(&cfg, &["cfq"], 3).unwrap();
    assert_eq!(c.seeds, [1, 2, 3]);
    assert_eq!(c.runs.len(), 3);
    let totals: Vec<f64> = c.runs.iter().map(|r| r.total_mb_per_s).collect();
    let t = &c.schedulers[0].total_mb_per_s;
    assert!((t.mean - totals.iter().sum::<f64>() / 3.0).abs() < 1e-12);
    assert_eq!(t.min, totals.iter().copied().fold(f64::INFINITY, f64::min));
    assert!(t.sd > 0.0, "the random mix differs between seeds: {totals:?}");
    assert!(c.scheduler_table().render().contains('±'));
}

/// The comparison's runs go to rayon's pool in parallel: on one thread and
/// on four the comparison is the same, byte for byte, and its runs are in
/// the order of the schedulers and seeds.
#[test]
fn parallel_runs_give_the_serial_comparison() {
    let cfg = Config::from_toml_str(THREE_VMS, "three.toml").unwrap();
    let names = ["deadline", "bfq"];
    let on = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        pool.install(|| comparison(&cfg, &names, 2)).unwrap()
    };
    let (one, four) = (on(1), on(4));
    assert_eq!(
        serde_json::to_string(&one).unwrap(),
        serde_json::to_string(&four).unwrap()
    );
    let order: Vec<String> = four
        .runs
        .iter()
        .map(|r| format!("{} {}", r.scheduler, r.seed))
        .collect();
    assert_eq!(order, ["deadline 1", "deadline 2", "bfq 1", "bfq 2"]);
}
