//! Engine unit tests: job draws, inode locks, the guest disk's rotational flag.

use super::*;
use crate::testing::SimpleDisk;

/// The engine of one VM running one job (`job` is the TOML of its fields).
fn engine(job: &str) -> Engine {
    engine_in("", job)
}

/// As [`engine`], with more of the VM's keys (`vm_keys`, TOML).
fn engine_in(vm_keys: &str, job: &str) -> Engine {
    let text = format!(
        "seed = 3\n[host]\nscheduler = \"noop\"\n[[vm]]\nname = \"a\"\nimage_size = \"1GiB\"\n{vm_keys}\n[[vm.job]]\n{job}\nrequests = 100\n"
    );
    let cfg = Config::from_toml_str(&text, "test.toml").unwrap();
    Engine::new(&cfg, Box::new(SimpleDisk::new(2_000_000_000))).unwrap()
}

/// The first request each thread of job 0 draws: (sector, sectors).
fn first_draws(e: &mut Engine) -> Vec<(u64, u64)> {
    let vm = &mut e.vms[0];
    let n = vm.jobs[0].job.numjobs;
    (0..n)
        .map(|t| {
            let area = vm.threads[t as usize].area as usize;
            let (s, n, _) = vm.jobs[0].draw(area);
            (s, n)
        })
        .collect()
}

#[test]
fn same_file_sequential_threads_all_start_at_the_first_block() {
    let mut e = engine("rw = \"write\"\nbs = \"4k\"\nsize = \"64MiB\"\nnumjobs = 3\nsharing = \"same-file\"");
    let first = e.vms[0].jobs[0].file_first;
    assert_eq!(first_draws(&mut e), vec![(first, 8); 3]);
    // Each keeps its own cursor: the second round is the second block for all.
    assert_eq!(first_draws(&mut e), vec![(first + 8, 8); 3]);
    // per-thread (fio without `filename`) gives the threads disjoint ranges instead.
    let mut p = engine("rw = \"write\"\nbs = \"4k\"\nsize = \"64MiB\"\nnumjobs = 3\nsharing = \"per-thread\"");
    let starts: Vec<u64> = first_draws(&mut p).iter().map(|d| d.0 - first).collect();
    let third = (64 << 20) / 512 / 3;
    assert_eq!(starts, vec![0, third, 2 * third]);
}

#[test]
fn offset_increment_spaces_the_threads_starts() {
    let mut e = engine(
        "rw = \"read\"\nbs = \"4k\"\nsize = \"64MiB\"\nnumjobs = 4\nsharing = \"same-file\"\noffset_increment = \"1MiB\"",
    );
    let first = e.vms[0].jobs[0].file_first;
    let starts: Vec<u64> = first_draws(&mut e).iter().map(|d| d.0 - first).collect();
    assert_eq!(starts, vec![0, 2048, 4096, 6144]);
    // A sequential thread wraps to its own start, not to the file's (fio's region).
    let area = &mut e.vms[0].jobs[0].areas[3];
    assert_eq!(area.total, (64 << 20) / 512 - 6144);
    area.cursor[0] = area.total - 8;
    let (s, _, _) = e.vms[0].jobs[0].draw(3);
    assert_eq!(s - first, (64 << 20) / 512 - 8);
    let (s, _, _) = e.vms[0].jobs[0].draw(3);
    assert_eq!(s - first, 6144);
}

/// Requests as (offset from the job's first sector, sectors).
type Runs = Vec<(u64, u64)>;

/// `n` draws of job 0 for `area`, split by direction: (reads, writes).
fn draws_by_direction(e: &mut Engine, area: usize, n: usize) -> (Runs, Runs) {
    let job = &mut e.vms[0].jobs[0];
    let first = job.file_first;
    let (mut reads, mut writes) = (Vec::new(), Vec::new());
    for _ in 0..n {
        let (s, k, read) = job.draw(area);
        if read { &mut reads } else { &mut writes }.push((s - first, k));
    }
    (reads, writes)
}

/// Every run continues the one before it.
fn contiguous(runs: &[(u64, u64)]) -> bool {
    runs.windows(2).all(|w| w[0].0 + w[0].1 == w[1].0)
}

#[test]
fn sequential_mixed_fio_jobs_keep_a_position_per_direction() {
    // fio's rw=rw: reads follow reads and writes follow writes, both
    // from the thread's start (per-thread: its own file).
    let mut e = engine("rw = \"rw\"\nbssplit = \"4k/30:8k/40:16k/30\"\nsize = \"64MiB\"\nnrfiles = 2\nnumjobs = 2");
    let file = (32 << 20) / 512;
    for t in 0..2usize {
        let (reads, writes) = draws_by_direction(&mut e, t, 400);
        assert!(
            reads.len() > 150 && writes.len() > 150,
            "{} reads, {} writes",
            reads.len(),
            writes.len()
        );
        let start = t as u64 * file;
        assert_eq!((reads[0].0, writes[0].0), (start, start), "thread {t}");
        assert!(contiguous(&reads) && contiguous(&writes), "thread {t}");
    }
    // same-file with offset_increment: both directions from t × 1 MiB.
    let mut e = engine(
        "rw = \"readwrite\"\nbs = \"8k\"\nsize = \"64MiB\"\nnumjobs = 3\nsharing = \"same-file\"\noffset_increment = \"1MiB\"",
    );
    for t in 0..3usize {
        let (reads, writes) = draws_by_direction(&mut e, t, 100);
        let start = t as u64 * 2048;
        assert_eq!((reads[0].0, writes[0].0), (start, start), "thread {t}");
        assert!(contiguous(&reads) && contiguous(&writes), "thread {t}");
        // 100 draws of 16 sectors: the two together cover 1600 sectors,
        // each direction only its own share of them.
        let ends = (reads.last().unwrap(), writes.last().unwrap());
        assert_eq!(
            ends.0 .0 + ends.0 .1 + ends.1 .0 + ends.1 .1 - 2 * start,
            1600,
            "thread {t}"
        );
    }
}

#[test]
fn each_direction_wraps_to_the_start_on_its_own() {
    let mut e = engine("rw = \"rw\"\nbs = \"4k\"\nsize = \"8MiB\"\nsharing = \"same-file\"");
    let total = e.vms[0].jobs[0].areas[0].total;
    // Reads one block before the end, writes in the middle.
    e.vms[0].jobs[0].areas[0].cursor = [total - 8, 4096];
    let (reads, writes) = draws_by_direction(&mut e, 0, 60);
    assert_eq!(&reads[..2], &[(total - 8, 8), (0, 8)]);
    assert!(contiguous(&reads[1..]));
    assert_eq!(writes[0], (4096, 8));
    assert!(contiguous(&writes));
    // A sequential job of one direction and a sysbench-style `shared`
    // mixed job keep one cursor: every draw continues the last one.
    for job in [
        "rw = \"write\"\nbs = \"4k\"\nsize = \"8MiB\"\nsharing = \"same-file\"",
        "rw = \"rw\"\nbs = \"4k\"\nsize = \"8MiB\"\nnumjobs = 4\nsharing = \"shared\"",
    ] {
        let mut e = engine(job);
        let job0 = &mut e.vms[0].jobs[0];
        let all: Vec<(u64, u64)> = (0..200)
            .map(|_| {
                let (s, k, _) = job0.draw(0);
                (s, k)
            })
            .collect();
        assert!(contiguous(&all), "{job}");
    }
}

#[test]
fn same_file_random_threads_cover_the_whole_file() {
    let mut e = engine("rw = \"randread\"\nbs = \"4k\"\nsize = \"8MiB\"\nnumjobs = 2\nsharing = \"same-file\"");
    let first = e.vms[0].jobs[0].file_first;
    let sectors = (8 << 20) / 512;
    for t in 0..2usize {
        let (mut lo, mut hi) = (u64::MAX, 0);
        for _ in 0..4000 {
            let (s, n, _) = e.vms[0].jobs[0].draw(t);
            assert!(
                s >= first && s + n <= first + sectors,
                "thread {t}: {s}+{n} outside the file"
            );
            lo = lo.min(s - first);
            hi = hi.max(s - first + n);
        }
        // 2048 slots, 4000 draws: both ends are reached by every thread.
        assert!(lo < 64 && hi > sectors - 64, "thread {t}: [{lo}, {hi}) of {sectors}");
    }
}

/// Host records of one VM running `job` (noop guest and host, so the
/// host sees what the threads issue): (op, sector, sectors, arrival,
/// done) of its data requests (not the journal's).
fn host_records(job: &str, name: &str) -> Vec<(String, u64, u64, u64, u64)> {
    host_records_in("guest_scheduler = \"noop\"", job, name)
}

/// As [`host_records`], with the guest set by `vm_keys` (TOML of `[[vm]]` keys).
fn host_records_in(vm_keys: &str, job: &str, name: &str) -> Vec<(String, u64, u64, u64, u64)> {
    let path = std::env::temp_dir().join(format!("hvio-engine-{}-{name}.csv", std::process::id()));
    let text = format!(
        "seed = 3\n[host]\nscheduler = \"noop\"\n[output]\nrecords = \"{}\"\n[[vm]]\nname = \"a\"\nimage_size = \"1GiB\"\n{vm_keys}\n[[vm.job]]\n{job}\nrequests = 400\n",
        path.display()
    );
    let cfg = Config::from_toml_str(&text, "test.toml").unwrap();
    let r = crate::run_with_device(&cfg, Box::new(SimpleDisk::new(2_000_000_000))).unwrap();
    assert!(!r.truncated);
    let csv = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_file(&path).ok();
    csv.lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let n = |i: usize| f[i].parse::<u64>().unwrap();
            let data = f[4] == "0" || f[4] == "false";
            (if data { f[1] } else { "meta" }.to_string(), n(2), n(3), n(5), n(8))
        })
        .filter(|r| r.0 == "read" || r.0 == "write")
        .collect()
}

/// Most of the VM's requests of kind `op` at the host at once.
fn most_at_once(recs: &[(String, u64, u64, u64, u64)], op: &str) -> usize {
    let mut ev: Vec<(u64, i32)> = Vec::new();
    for r in recs.iter().filter(|r| r.0 == op) {
        ev.push((r.3, 1));
        ev.push((r.4, -1));
    }
    ev.sort_by_key(|e| (e.0, e.1));
    let (mut now, mut most) = (0i32, 0i32);
    for e in ev {
        now += e.1;
        most = most.max(now);
    }
    most as usize
}

#[test]
fn inode_lock_serialises_writes_and_the_releasing_thread_keeps_it() {
    let job = "rw = \"write\"\nbs = \"8k\"\nsize = \"64MiB\"\nnumjobs = 4\nsharing = \"same-file\"";
    let free = host_records(job, "free");
    assert!(
        most_at_once(&free, "write") >= 3,
        "without the lock the 4 writers overlap"
    );
    let locked = host_records(&format!("{job}\ninode_lock = \"steal\""), "locked");
    assert_eq!(locked.len(), 400);
    assert_eq!(most_at_once(&locked, "write"), 1, "one write to the file at a time");
    // The thread that releases the lock takes it again: one sequential
    // cursor while it runs, then the three waiters' first writes (block 0).
    let breaks = |r: &[(String, u64, u64, u64, u64)]| r.windows(2).filter(|w| w[1].1 != w[0].1 + w[0].2).count();
    assert!(breaks(&locked) <= 4, "{} breaks in the sequence", breaks(&locked));
    // Handed on in line, the lock goes round the four threads: each
    // rewrites the block the one before it wrote, so the host sees every
    // block four times, a break at three requests in four.
    let fifo = host_records(&format!("{job}\ninode_lock = \"fifo\""), "fifo");
    assert_eq!(most_at_once(&fifo, "write"), 1);
    assert!(breaks(&fifo) >= 290, "{} breaks", breaks(&fifo));
    let first = fifo[0].1;
    assert!(
        fifo[..4].iter().all(|r| r.1 == first),
        "all four start at the first block"
    );
}

#[test]
fn inode_lock_leaves_reads_free() {
    let job =
        "rw = \"randrw\"\nbs = \"8k\"\nsize = \"64MiB\"\nnumjobs = 8\nsharing = \"same-file\"\ninode_lock = \"steal\"";
    let recs = host_records(job, "mixed");
    assert_eq!(most_at_once(&recs, "write"), 1);
    assert!(most_at_once(&recs, "read") >= 4, "reads of the other threads go on");
}

/// An O-SW-like VM (8 threads, a file each, synchronous direct writes)
/// under guest CFQ with `slice_idle = 8` set, as 2.6.32 keeps it. On a
/// virtual disk the guest believes rotational (the default on the
/// rotational test disk), CFQ serves one thread at a time and idles for
/// its next write: one request at the host. Declared non-rotational
/// (Xen blkfront's `QUEUE_FLAG_VIRT`), with a 32-slot ring (`hw_tag`)
/// CFQ does not idle, and the threads' writes reach the host together.
#[test]
fn guest_disk_rotational_decides_how_many_requests_a_cfq_guest_has_at_the_host() {
    let job = "rw = \"write\"\nbs = \"8k\"\nsize = \"64MiB\"\nnrfiles = 8\nnumjobs = 8";
    let cfq = "guest_scheduler = \"cfq\"\nguest_params = { slice_idle = 8 }";
    let default = host_records_in(cfq, job, "rot-default");
    assert_eq!(most_at_once(&default, "write"), 1);
    let rot = host_records_in(&format!("{cfq}\nguest_disk_rotational = true"), job, "rot");
    assert_eq!(most_at_once(&rot, "write"), 1);
    let nonrot = host_records_in(&format!("{cfq}\nguest_disk_rotational = false"), job, "nonrot");
    assert!(
        most_at_once(&nonrot, "write") >= 6,
        "{} writes at once",
        most_at_once(&nonrot, "write")
    );
}

#[test]
fn guest_disk_rotational_must_be_a_boolean() {
    let text = "[[vm]]\nname = \"a\"\nguest_disk_rotational = \"no\"\n";
    let e = Config::from_toml_str(text, "t.toml").unwrap_err().to_string();
    assert!(e.contains("guest_disk_rotational") && e.contains("t.toml"), "{e}");
}

/// A host-path stage that sends each guest request on and, for each write,
/// a 4 KiB log record of its own (in the image's first 256 KiB), counting
/// the records it sent and those done.
#[derive(Default)]
struct LogWrites {
    sent: std::rc::Rc<std::cell::Cell<u64>>,
    done: std::rc::Rc<std::cell::Cell<u64>>,
}

impl HostPath for LogWrites {
    fn arrive(&mut self, slot: u32, cx: &mut PathCx) -> Result<()> {
        let rq = cx.host_request(slot);
        let write = rq.op == Op::Write;
        cx.send(rq)?;
        if write {
            let n = self.sent.get() + 1;
            self.sent.set(n);
            let log = Request::new(0, 0, Op::Write, n % 64 * 8, 8, cx.now).with_sync(true);
            cx.originate(n, log)?;
        }
        Ok(())
    }

    fn done(&mut self, slot: u32, cx: &mut PathCx) -> Result<()> {
        if let Owner::Stage { tag } = cx.requests[slot].owner {
            assert!(tag >= 1 && tag <= self.sent.get(), "tag {tag} of {}", self.sent.get());
            self.done.set(self.done.get() + 1);
        }
        Ok(())
    }

    fn held(&self) -> usize {
        0
    }
}

#[test]
fn a_stages_own_io_goes_through_the_host_and_completes() {
    let job = "rw = \"randrw\"\nbs = \"8k\"\nsize = \"64MiB\"\nnumjobs = 2";
    let plain = engine(job).run().unwrap();
    let mut e = engine(job);
    let stage = LogWrites::default();
    let (sent, done) = (stage.sent.clone(), stage.done.clone());
    e.set_stage(0, Box::new(stage));
    let r = e.run().unwrap();
    assert!(!r.truncated);
    // A record for every write reaching the host (the jobs' and the
    // journal's), and every record completed.
    assert!(
        sent.get() >= r.vms[0].writes && r.vms[0].writes > 20,
        "{} records",
        sent.get()
    );
    assert_eq!(done.get(), sent.get());
    // The host served the guest's requests and the records, as the VM's.
    assert_eq!(r.host.requests, plain.host.requests + sent.get());
    assert_eq!(r.vms[0].host_requests, r.host.requests);
    let record_mb = sent.get() as f64 * 4096.0 / 1e6;
    assert!((r.vms[0].host_mb - plain.vms[0].host_mb - record_mb).abs() < 1e-9);
}

/// A stage that keeps every guest request.
struct Swallow(usize);

impl HostPath for Swallow {
    fn arrive(&mut self, _slot: u32, _cx: &mut PathCx) -> Result<()> {
        self.0 += 1;
        Ok(())
    }

    fn done(&mut self, _slot: u32, _cx: &mut PathCx) -> Result<()> {
        Ok(())
    }

    fn held(&self) -> usize {
        self.0
    }
}

#[test]
fn a_run_that_leaves_requests_behind_is_an_error() {
    // No journal commits: once the guest waits for what the stage keeps,
    // nothing is left to happen and the run ends.
    let mut e = engine_in("journal_commit_s = 0", "rw = \"read\"\nbs = \"8k\"\nsize = \"64MiB\"");
    e.set_stage(0, Box::new(Swallow(0)));
    let err = e.run().unwrap_err().to_string();
    assert!(err.contains("end of run") && err.contains("never completed"), "{err}");
}

#[test]
fn the_throughput_series_counts_each_operation_in_its_interval() {
    // The series keeps the bucket of the last operation: operations in it,
    // in later ones (skipping some), on a boundary, and earlier again all
    // land where `now / interval` puts them.
    let mut e = engine("rw = \"randread\"\nbs = \"4k\"\nsize = \"8MiB\"");
    let interval = 1_000_000_000;
    let times = [
        0,
        5,
        interval - 1,
        interval,
        3 * interval + 7,
        3 * interval + 8,
        interval + 1,
        10 * interval,
    ];
    let vm = &mut e.vms[0];
    for (i, &now) in times.iter().enumerate() {
        vm.jobs[0].outstanding += 1;
        vm.record_op(0, true, 4096 * (i as u64 + 1), 1000, now, interval);
    }
    let mut ops = vec![0u64; 11];
    let mut bytes = vec![0u64; 11];
    for (i, &now) in times.iter().enumerate() {
        ops[(now / interval) as usize] += 1;
        bytes[(now / interval) as usize] += 4096 * (i as u64 + 1);
    }
    assert_eq!(vm.series_ops, ops);
    assert_eq!(vm.series_bytes, bytes);
    assert_eq!(vm.jobs[0].counts.reads, times.len() as u64);
}

/// Simulated seconds of 1000 sequential 4 KiB writes, 32 in flight, with
/// the VM's `guest_cpu` keys (none when empty), on a disk that writes one
/// in 4 µs wherever it is.
fn guest_cpu_run(keys: &str) -> f64 {
    let guest_cpu = if keys.is_empty() {
        String::new()
    } else {
        format!("guest_cpu = {{ {keys} }}")
    };
    let text = format!(
        "seed = 1\n[host]\nscheduler = \"noop\"\n[[vm]]\nname = \"a\"\nimage_size = \"1GiB\"\njournal_commit_s = 0\nvirtio_depth = 32\n{guest_cpu}\n\
         [[vm.job]]\nrw = \"write\"\nbs = \"4k\"\nsize = \"64MiB\"\niodepth = 32\nrequests = 1000\n"
    );
    let cfg = Config::from_toml_str(&text, "test.toml").unwrap();
    let mut disk = SimpleDisk::new(2_000_000_000);
    (disk.ns_per_sector_seek, disk.max_seek, disk.rotation) = (0.0, 0, 0);
    disk.transfer_per_sector = 500;
    Engine::new(&cfg, Box::new(disk)).unwrap().run().unwrap().sim_time_s
}

#[test]
fn the_guests_vcpus_cap_its_requests_per_second() {
    let free = guest_cpu_run("");
    assert!(free < 0.006, "the disk's 4 µs a write: {free} s");
    // 100 µs of CPU a request on one vCPU: 1000 requests take 0.1 s at least.
    let one = guest_cpu_run("vcpus = 1, request_us = 100");
    assert!((0.1..0.101).contains(&one), "{one} s");
    // Four vCPUs take a quarter of it; 32 leave the disk and the latency the limit.
    let four = guest_cpu_run("vcpus = 4, request_us = 100");
    assert!((0.025..0.0253).contains(&four), "{four} s");
    let many = guest_cpu_run("vcpus = 32, request_us = 1");
    assert!(many < free * 1.1, "{many} s against {free} s");
}

/// A run's result as JSON, noop's guest FIFO kept as slots or, with
/// `through_driver`, run through the scheduler driver as any other.
fn noop_guest_run(through_driver: bool) -> String {
    let mut e = engine_in(
        "guest_scheduler = \"noop\"\nbarrier = true\nvirtio_depth = 2",
        "rw = \"randrw\"\nbs = \"4k\"\nsize = \"64MiB\"\nnumjobs = 4\niodepth = 4\nfsync = 3",
    );
    assert!(matches!(e.vms[0].sched, GuestSched::Fifo(_)));
    if through_driver {
        let ctx = e.host.driver.context().clone();
        let driver = Driver::build("noop", &ParamValues::new(), ctx).unwrap();
        e.vms[0].sched = GuestSched::Driver(driver);
    }
    serde_json::to_string(&e.run().unwrap()).unwrap()
}

#[test]
fn noop_as_a_fifo_of_slots_runs_as_noop_through_its_driver() {
    // A ring of 2 for 16 requests at once: requests wait in the guest, and
    // each fsync's cache flush overtakes them (the driver's dispatch list).
    assert_eq!(noop_guest_run(false), noop_guest_run(true));
}
