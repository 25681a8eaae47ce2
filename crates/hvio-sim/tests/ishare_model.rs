//! The iShare set-up (paper 003) the iShare studies run, checked on the
//! model: two VMs weighted 2:1 running Table I's fio workloads under CFQ,
//! Blkio and iShare, on the HDD model write-through and behind a RAID
//! controller's cache. The studies (`experiments/ishare-*.study.toml`) hold
//! the same VMs, guests and disks as data; docs/ishare.md has why each key
//! is what it is. These tests hold the results docs/ishare.md documents.

use hvio_sim::metrics::SimResult;
use hvio_sim::{Config, Result, SimError};

/// The runs' seed, and whether they are the scaled-down (`--quick`) ones.
struct ExpOptions {
    seed: u64,
    quick: bool,
}

/// The three host schedulers of the paper, in its column order.
const SCHEDULERS: [&str; 3] = ["cfq", "blkio", "ishare"];

/// VM weights 2:1 (§3.1), as blkio weights.
const WEIGHTS: [u32; 2] = [1000, 500];

/// The disks the tests run on (`hvio_device::DeviceConfig`; the `disk`
/// cases of the iShare studies): the built-in 7200 RPM 1 TB disk as it is
/// (write-through), and the same disk behind a controller's write-back
/// cache ([`controller_cache`] with [`CONTROLLER_DESTAGE_IDLE_MS`]).
fn disks() -> [(&'static str, String); 2] {
    [
        ("write cache off", "model = \"hdd\"\n".to_string()),
        ("controller write cache", controller_cache(CONTROLLER_DESTAGE_IDLE_MS)),
    ]
}

/// The controller write cache's idle delay before it destages, ms.
///
/// A controller's cache does not destage in the 40 µs gaps between two
/// commands of the host: DiskSim's controller caches (`disksim_cachemem`,
/// `disksim_cachedev`) start background write-backs only after their
/// `Flush idle delay` of "contiguous idle time" ("any front-end request
/// processing visible to the cache resets the idle timer"), and the one
/// DiskSim 4.0 validation setup with a controller write-back cache
/// (`valid/synthcachedev.parv`) sets it to 100 ms; storage controllers
/// drain by occupancy instead (IBM's WOW, Gill & Modha, FAST 2005: no
/// destages at all below a low threshold of 80 % of the NVS; Varma &
/// Jacobson's high/low marks and linear threshold). hvio takes DiskSim's
/// 100 ms (the drive model destages at once anyway when half the cache is
/// dirty, a run is due by age, or a write waits for room). The drive
/// model's own default stays 0 (a drive's 4 MiB buffer), and so do the
/// other experiments. `hvio reproduce ishare-destage-idle` shows every
/// goal over 0–100 ms (docs/ishare.md).
const CONTROLLER_DESTAGE_IDLE_MS: f64 = 100.0;

/// The paper's disk is a SAS RAID5 volume (§3.1), i.e. behind a RAID
/// controller, whose cache §3.3.2 credits for the small, even write
/// latencies under CFQ. RAID controllers of the time carried 256 MiB–1 GiB
/// of battery-backed cache and destage whole stripes; hvio models this as
/// the drive model's write-back buffer grown from a drive's 4 MiB to 256 MiB
/// (the low end), destaging in CSCAN order with a 60 s age bound (longer
/// than the cache holds data at the rates measured here, so the destage is
/// the controller's sweep; the drive model's 500 ms bound suits a 4 MiB
/// buffer that holds well under a second of writes, and over 256 MiB it
/// makes the destage oldest-first, i.e. the arrival order of the two VMs'
/// writes), after `destage_idle_ms` of quiet ([`CONTROLLER_DESTAGE_IDLE_MS`]).
///
/// CSCAN (`destage = "cscan"`: the next dirty run by block number from
/// where the last destage ended), not the drive's shortest-positioning
/// order: a controller sees block numbers, not the position of the heads of
/// the disks behind it. Gill & Modha (WOW, FAST 2005, §2.2) set storage
/// controllers apart from disk scheduling because "detailed knowledge of the
/// disk head and the exact position of various outstanding writes relative
/// to this head position … cannot be assumed" there, and destage in CSCAN
/// order (WOW is CSCAN plus a recency bit). Destaging from the head made
/// each VM's dirty data go in that VM's own time slices, so the buffer
/// drained the less-served VM's writes within a second and its readers,
/// trailing their writers, missed (docs/ishare.md, O-SRW).
///
/// Destaged data stays in the cache (`keep_destaged = true`): a
/// controller's cache is one memory, and a written line, once flushed to
/// disk, stays valid and readable until LRU replacement reuses it (DiskSim
/// 4.0's controller cache, `disksim_cachemem.c`: a flush clears only the
/// line's dirty bit; replacement unmaps clean lines least recently used
/// first and flushes dirty ones instead). The 256 MiB bounds dirty and clean
/// data together (docs/hdd-model.md, "Destaged data kept clean").
///
/// Reads: the controller's adaptive read-ahead ([`CONTROLLER_READ_AHEAD`]).
fn controller_cache(destage_idle_ms: f64) -> String {
    format!(
        "model = \"hdd\"\nwrite_cache = true\nwrite_buffer_sectors = 524288\ndestage = \"cscan\"\ndestage_max_age_ms = 60000\ndestage_idle_ms = {destage_idle_ms}\nkeep_destaged = true\n{CONTROLLER_READ_AHEAD}"
    )
}

/// The controller's read cache, as `[disk]` keys: adaptive read-ahead of one
/// stripe element per sequential read, in 64 segments.
///
/// - `read_ahead_policy = "adaptive"`: RAID controllers of the paper's
///   time offer "Adaptive Read Ahead" (Dell PERC, i.e. LSI MegaRAID, and
///   LSI's own cards): read ahead "only if the two most recent read
///   requests accessed sequential sectors of the disk", and none for
///   random reads (Dell OpenManage Server Administrator 7.2 User's Guide,
///   "Read Policy"; the LSI 1078 card's manual words it the same); the
///   drive's own policy (a minimum after every read) costs random reads
///   (O-RR 1.73 → 1.58 MB/s at 128 sectors, docs/ishare.md).
/// - `min_read_ahead_sectors = 128` (64 KiB): one stripe element at the
///   LSI / PERC default strip size (64 KB); IBM ServeRAID's and Adaptec's
///   read-ahead reads "in increments equal to the stripe-unit size". Not
///   tuned: docs/ishare.md has the sweep over 128–2048 sectors.
/// - `sequential_gap_sectors` left at 0: "sequential sectors".
/// - `cache_segments = 64` (the model's most): the two VMs' 32 fio threads
///   each are 64 streams, one segment each (32 segments: O-SR falls back to
///   1.6 MB/s, docs/ishare.md); 64 × 2 MiB (`segment_sectors`' default) is
///   128 MiB of read cache, half the 256 MiB the write side models.
const CONTROLLER_READ_AHEAD: &str =
    "read_ahead_policy = \"adaptive\"\nmin_read_ahead_sectors = 128\ncache_segments = 64\n";

/// Run `cfg` on `disk` (the TOML of a `[disk]` table).
fn run_on_disk(cfg: &Config, disk: &str) -> Result<SimResult> {
    let bad = |e: String| SimError::invalid("ishare experiment [disk]", "model", disk.trim(), e);
    let dc: hvio_device::DeviceConfig = toml::from_str(disk).map_err(|e| bad(e.to_string()))?;
    let dev = hvio_device::build_device(&dc, std::path::Path::new(".")).map_err(|e| bad(e.to_string()))?;
    hvio_sim::run_with_device(cfg, dev)
}

/// The guests' I/O scheduler: CentOS 6.4's kernel 2.6.32 (§3.1) runs CFQ by
/// default, on the virtual disk Xen 4.0's blkfront gives it (see
/// [`GUEST_VM_KEYS`]).
const GUEST_SCHEDULER: &str = "cfq";

/// The guests' view of their virtual disk, as `[[vm]]` keys: blkfront marks
/// its queue `QUEUE_FLAG_VIRT` (`xen-blkfront.c`, `xlvbd_init_blk_queue`,
/// Linux ≥ 2.6.29), an alias of `QUEUE_FLAG_NONROT` (`blkdev.h`), so the
/// guest CFQ sees a non-rotational disk with a 32-slot ring (`hw_tag`).
/// 2.6.32 keeps `slice_idle` at 8 ms there (the zeroing on non-rotational
/// disks is Linux ≥ 4.10's), but `cfq_arm_slice_timer` returns at once on
/// `nonrot && hw_tag` and `cfq_should_idle` keeps only the last queue of a
/// service tree: the guest does not idle for a thread's next request, and
/// each fio thread with a file of its own (O-*) has its request at the host
/// at the same time as the others' (up to 32 per VM), while the writers of
/// one file (U-SW, U-RW) still go one at a time (the inode lock, [`job`]).
const GUEST_VM_KEYS: &str = "guest_params = { slice_idle = 8 }\nguest_disk_rotational = false\n";

/// Table I's twelve workloads, in the paper's order.
const WORKLOADS: [&str; 12] = [
    "O-SR", "O-SW", "O-RR", "O-RW", "O-RRW", "O-SRW", "U-SR", "U-SW", "U-RR", "U-RW", "U-RRW", "U-SRW",
];

/// The TOML of one `[[vm.job]]` running workload `w` from `start_s` for
/// `runtime_s` seconds.
///
/// Every workload is its Table I preset: O-* 32 threads with a file each,
/// U-* 32 threads on *one* file with fio's shared-`filename` semantics
/// (`sharing = "same-file"`: every thread its own offset, all from the
/// file's start). The guests' ext4 (kernel 2.6.32) holds a
/// file's inode lock across each direct write (`inode_lock`): U-*'s writes
/// go one at a time, and the thread that releases the lock takes it again
/// before a woken waiter runs (`"steal"`), so U-SW and U-RW are one writer
/// at a time, one request in flight — the paper's underloaded state ("VMs do
/// not have backlogged requests", §3.3.1) — while the reads of U-RR, U-RRW
/// and U-SRW run in parallel. O-*'s threads never share a file: the lock
/// changes nothing there.
fn job(w: &str, start_s: f64, runtime_s: f64) -> String {
    let mut s = format!("[[vm.job]]\npreset = \"{w}\"\nstart_s = {start_s}\nruntime_s = {runtime_s}\n");
    s.push_str("inode_lock = \"steal\"\n");
    s
}

/// Two VMs (30 GiB images, weights 2:1) each running `jobs` (TOML of their
/// `[[vm.job]]` tables) under host scheduler `sched`; run it with [`run_on_disk`].
fn two_vms(sched: &str, jobs: &str, seed: u64, max_time_s: f64, interval_s: f64) -> Result<Config> {
    let mut t = format!(
        "seed = {seed}\nmax_time_s = {max_time_s}\n[output]\ninterval_s = {interval_s}\n[host]\nscheduler = \"{sched}\"\n"
    );
    for (i, w) in WEIGHTS.iter().enumerate() {
        t.push_str(&format!(
            "[[vm]]\nname = \"vm{}\"\nimage_size = \"30GiB\"\nweight = {w}\nguest_scheduler = \"{GUEST_SCHEDULER}\"\n{GUEST_VM_KEYS}{jobs}",
            i + 1
        ));
    }
    Config::from_toml_str(&t, "ishare experiment")
}

/// One run's numbers.
#[derive(Clone, Debug, serde::Serialize)]
struct Bw {
    pub vm1: f64,
    pub vm2: f64,
    /// Fraction of the busy time iShare's detector saw the disk underloaded (iShare runs only).
    pub underloaded: Option<f64>,
}

impl Bw {
    pub fn total(&self) -> f64 {
        self.vm1 + self.vm2
    }
    pub fn ratio(&self) -> f64 {
        self.vm1 / self.vm2.max(1e-9)
    }
}

fn counter(r: &SimResult, name: &str) -> Option<f64> {
    r.host.counters.iter().find(|c| c.0 == name).map(|c| c.1)
}

fn bw(r: &SimResult) -> Bw {
    let under = counter(r, "state.underloaded_s");
    let over = counter(r, "state.overloaded_s");
    Bw {
        vm1: r.vms[0].mb_per_s,
        vm2: r.vms[1].mb_per_s,
        underloaded: under.zip(over).map(|(u, o)| u / (u + o).max(1e-9)),
    }
}

/// Measured bandwidths of every workload under every scheduler on `disk`: `out[w][k]`.
fn measure(opts: &ExpOptions, runtime_s: f64, disk: &str) -> Result<Vec<[Bw; 3]>> {
    WORKLOADS
        .iter()
        .map(|w| {
            let mut row = Vec::with_capacity(3);
            for s in SCHEDULERS {
                let cfg = two_vms(s, &job(w, 0.0, runtime_s), opts.seed, runtime_s * 4.0 + 10.0, 1.0)?;
                row.push(bw(&run_on_disk(&cfg, disk)?));
            }
            Ok(row.try_into().expect("three schedulers"))
        })
        .collect()
}

/// The phases of §5.3, in order.
const PHASES: [&str; 7] = ["O-SW", "U-SR", "U-SR", "O-SR", "U-SW", "O-SW", "O-RW"];

/// Per-phase mean bandwidth of each VM from a run's series, leaving out the
/// first tenth of each phase (the previous phase's requests drain, the new
/// jobs start).
fn phase_means(series: &[Vec<f64>], interval_s: f64, phase_s: f64) -> Vec<Bw> {
    let per = (phase_s / interval_s).round().max(1.0) as usize;
    let skip = per / 10;
    (0..PHASES.len())
        .map(|p| {
            let mean = |v: &Vec<f64>| {
                let xs: Vec<f64> = v.iter().skip(p * per + skip).take(per - skip).copied().collect();
                xs.iter().sum::<f64>() / (per - skip) as f64
            };
            Bw {
                vm1: mean(&series[0]),
                vm2: mean(&series[1]),
                underloaded: None,
            }
        })
        .collect()
}

/// Fig. 4's phase length and series interval, s.
fn timing(opts: &ExpOptions) -> (f64, f64) {
    if opts.quick {
        (6.0, 0.5)
    } else {
        (100.0, 1.0)
    }
}

/// One disk's three runs of Fig. 4 (CFQ, Blkio, iShare): per-phase means
/// `phases[scheduler][phase]`, and each run's series and whole-run means.
struct Fig4Runs {
    pub phases: Vec<Vec<Bw>>,
    pub series: Vec<hvio_sim::metrics::TimeSeries>,
    pub totals: Vec<Bw>,
}

fn run_on(opts: &ExpOptions, disk: &str) -> Result<Fig4Runs> {
    let (phase_s, interval_s) = timing(opts);
    let jobs: String = PHASES
        .iter()
        .enumerate()
        .map(|(i, w)| job(w, i as f64 * phase_s, phase_s))
        .collect();
    let mut out = Fig4Runs {
        phases: Vec::new(),
        series: Vec::new(),
        totals: Vec::new(),
    };
    for s in SCHEDULERS {
        let cfg = two_vms(s, &jobs, opts.seed, phase_s * PHASES.len() as f64 * 2.0, interval_s)?;
        let r = run_on_disk(&cfg, disk)?;
        out.totals.push(bw(&r));
        out.phases.push(phase_means(&r.series.mb_per_s, interval_s, phase_s));
        out.series.push(r.series);
    }
    Ok(out)
}

#[test]
fn configs_parse_for_every_workload() {
    for w in WORKLOADS {
        let cfg = two_vms("ishare", &job(w, 0.0, 1.0), 1, 10.0, 1.0).unwrap();
        assert_eq!(cfg.vms.len(), 2);
        assert_eq!(cfg.vms[0].weight, 2 * cfg.vms[1].weight);
    }
}

/// The scaled-down run on the write-through disk holds what hvio meets
/// (see docs/ishare.md). The guests' CFQ does not idle on their
/// non-rotational virtual disks, so every O-* workload is backlogged at
/// the host: iShare's detector sees the disk overloaded (3 s: 1–5 % of
/// the busy time underloaded; with a rotational guest disk O-SR was
/// 25 %, O-SW 77 % behind the controller cache) and iShare stays within
/// 5 % of Blkio near 2:1 (3 s runs: Blkio 2.2–2.75 as its first slices
/// settle, 60 s: 2.0–2.5). Underloaded, it never falls more than 5 %
/// below Blkio where one writer holds the file's inode lock (U-SW,
/// U-RW), nor more than 10 % on the other U-* (3 s: 0.97–1.00×), except
/// U-SR, whose first seconds are erratic (3 s: 0.55×; 60 s: 1.79×).
#[test]
fn quick_run_holds_the_documented_results() {
    let m = measure(&ExpOptions { seed: 1, quick: true }, 3.0, &disks()[0].1).unwrap();
    for (w, r) in WORKLOADS.iter().zip(&m) {
        let gain = r[2].total() / r[1].total();
        if w.starts_with("O-") {
            let under = r[2].underloaded.expect("iShare's disk-state counters");
            assert!(under < 0.1, "{w}: underloaded {:.1} % of the busy time", 100.0 * under);
            if *w != "O-SR" {
                // O-SR's 3 s run is 1.21× (60 s: 1.00×).
                assert!((gain - 1.0).abs() <= 0.05, "{w}: iShare/Blkio {gain:.3}");
            }
            for x in &r[1..] {
                assert!((1.6..=3.0).contains(&x.ratio()), "{w}: VM1:VM2 {:.2}", x.ratio());
            }
            continue;
        }
        match *w {
            "U-SW" | "U-RW" => assert!(gain >= 0.95, "{w}: iShare/Blkio {gain:.3}"),
            "U-SR" => {}
            _ => assert!(gain >= 0.9, "{w}: iShare/Blkio {gain:.3}"),
        }
    }
}

/// The controller's adaptive read-ahead serves the 64 interleaved
/// sequential streams of O-SR (60 s: 68.5 MB/s under Blkio against
/// 1.59 write-through, VM1:VM2 2.07) and leaves random reads alone
/// (O-RR 1.73 on both).
#[test]
fn controller_read_ahead_serves_sequential_streams_only() {
    let total = |w: &str, disk: &str| {
        let cfg = two_vms("blkio", &job(w, 0.0, 3.0), 1, 20.0, 1.0).unwrap();
        bw(&run_on_disk(&cfg, disk).unwrap())
    };
    let (bare, cache) = (&disks()[0].1, &disks()[1].1);
    let (a, b) = (total("O-SR", bare), total("O-SR", cache));
    // 3 s: 1.72 -> 27.5 MB/s (the first seconds fill 64 segments).
    assert!(a.total() < 3.0 && b.total() > 10.0 * a.total(), "O-SR {a:?} -> {b:?}");
    let (a, b) = (total("O-RR", bare), total("O-RR", cache));
    assert!((b.total() / a.total() - 1.0).abs() < 0.03, "O-RR {a:?} -> {b:?}");
}

/// Behind the controller write cache: O-SW, backlogged at the host now
/// that the guests do not idle, is Blkio's (60 s: 1.00×; with the
/// rotational guest disk it was 1.33× at VM1:VM2 1.67); U-SW, one
/// writer at a time, gains from DyIso (4 s: 1.29×, 60 s: 1.33×); so
/// does U-SRW, now that its threads read and write from positions of
/// their own as fio's do (10 s: 1.17×, 60 s: 1.29×; with one cursor for
/// both directions it was 0.99× at 60 s), see docs/ishare.md.
#[test]
fn controller_cache_gains_on_usw_and_usrw() {
    let gain = |w: &str, idle_ms: f64, runtime_s: f64| {
        let disk = controller_cache(idle_ms);
        let t: Vec<f64> = ["blkio", "ishare"]
            .iter()
            .map(|s| {
                let cfg = two_vms(s, &job(w, 0.0, runtime_s), 1, runtime_s + 22.0, 1.0).unwrap();
                bw(&run_on_disk(&cfg, &disk).unwrap()).total()
            })
            .collect();
        t[1] / t[0]
    };
    let osw = gain("O-SW", CONTROLLER_DESTAGE_IDLE_MS, 4.0);
    assert!((osw - 1.0).abs() <= 0.05, "O-SW: iShare/Blkio {osw:.3}");
    let usw = gain("U-SW", CONTROLLER_DESTAGE_IDLE_MS, 4.0);
    assert!(usw >= 1.2, "U-SW: iShare/Blkio {usw:.3}");
    let usrw = gain("U-SRW", CONTROLLER_DESTAGE_IDLE_MS, 10.0);
    assert!(usrw >= 1.1, "U-SRW: iShare/Blkio {usrw:.3}");
    assert_eq!(disks()[1].1, controller_cache(CONTROLLER_DESTAGE_IDLE_MS));
}

/// The scaled-down run on the write-through disk keeps near 2:1 in every
/// overloaded phase (6 s phases are noisy: 1.5–2.8 in bandwidth) and at
/// least 0.9× CFQ's total in every underloaded one.
#[test]
fn quick_run_meets_its_goals_on_the_write_through_disk() {
    let opts = ExpOptions { seed: 1, quick: true };
    let phases = run_on(&opts, &disks()[0].1).unwrap().phases;
    for (p, w) in PHASES.iter().enumerate() {
        let (c, i) = (&phases[0][p], &phases[2][p]);
        if w.starts_with("O-") {
            assert!(
                (1.5..=2.8).contains(&i.ratio()),
                "phase {p} {w}: VM1:VM2 {:.2}",
                i.ratio()
            );
        } else {
            assert!(
                i.total() >= 0.9 * c.total(),
                "phase {p} {w}: {:.2} vs CFQ {:.2}",
                i.total(),
                c.total()
            );
        }
    }
}
