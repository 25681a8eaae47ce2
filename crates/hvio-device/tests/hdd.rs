//! HDD model: hand-computed cases and the sanity figures of device-models.md.

use hvio_core::{Completion, Device, Nanos, Op, Request};
use hvio_device::hdd::{Hdd, HddParams, ReadAheadExtent, ReadAheadPolicy, MAX_SEGMENTS};
use hvio_device::{build_device, DeviceConfig};

fn disk(p: HddParams) -> Hdd {
    Hdd::new(p.build().unwrap())
}

/// Submits `rq` at `now` and runs the device until it completes.
fn run_one(d: &mut dyn Device, rq: Request, now: Nanos) -> Completion {
    d.submit(rq, now);
    let out = completions(d, 1);
    assert_eq!(out.len(), 1);
    out[0]
}

/// Runs the device until at least `n` requests have completed; returns them.
fn completions(d: &mut dyn Device, n: usize) -> Vec<Completion> {
    let mut out = Vec::new();
    while out.len() < n {
        let t = d.next_event().expect("pending work has an event");
        d.advance(t, &mut out);
    }
    out
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn rev() -> f64 {
    60e9 / 7200.0
}

#[test]
fn random_4k_reads_give_75_to_85_iops() {
    let mut d = disk(HddParams::default());
    let cap = d.info().capacity;
    let mut rng = Rng(7);
    let mut now = 0;
    let n = 3000;
    for i in 0..n {
        let lbn = (rng.next() % (cap / 8)) * 8;
        let c = run_one(&mut d, Request::new(i, 0, Op::Read, lbn, 8, now), now);
        assert_eq!(c.done - c.start, c.service.total());
        now = c.done;
    }
    let iops = n as f64 / (now as f64 / 1e9);
    eprintln!("random 4 KiB reads at depth 1: {iops:.1} IOPS");
    assert!((75.0..=85.0).contains(&iops), "random 4 KiB read IOPS {iops:.1}");
}

#[test]
fn first_read_hand_computed() {
    // Fresh disk, head on track 0 at angle 0 at time 0: a read of LBN 0 pays
    // the overhead, no seek, waits the rest of the revolution, then reads 8 sectors.
    let mut d = disk(HddParams::default());
    let c = run_one(&mut d, Request::new(1, 0, Op::Read, 0, 8, 0), 0);
    let oh = 150_000.0;
    assert_eq!(c.service.overhead, 150_000);
    assert_eq!(c.service.seek, 0);
    assert!(
        (c.service.rotation as f64 - (rev() - oh)).abs() <= 1.0,
        "{:?}",
        c.service
    );
    // Media transfer plus the last sector over the 300 MB/s interface.
    let xfer = 8.0 * rev() / 2673.0 + 512.0 / 300e6 * 1e9;
    assert!((c.service.transfer as f64 - xfer).abs() <= 1.0, "{:?}", c.service);
    assert!(!c.service.cache_hit);
}

#[test]
fn late_sequential_write_waits_almost_a_revolution() {
    let mut d = disk(HddParams::default());
    let c1 = run_one(&mut d, Request::new(1, 0, Op::Write, 1000, 8, 0), 0);
    // Arriving exactly at completion, the next sector has only just passed
    // under the head by the overhead time: nearly a whole revolution to wait.
    let gap = 200_000;
    let c2 = run_one(
        &mut d,
        Request::new(2, 0, Op::Write, 1008, 8, c1.done + gap),
        c1.done + gap,
    );
    assert_eq!(c2.service.seek, 0);
    let expect = rev() - (gap as f64 + 150_000.0);
    assert!(
        (c2.service.rotation as f64 - expect).abs() <= 2.0,
        "rotation {} expected {expect}",
        c2.service.rotation
    );
    // A sequential read arriving as late is served by the read-ahead instead.
    let c3 = run_one(&mut d, Request::new(3, 0, Op::Read, 5000, 8, c2.done), c2.done);
    let t = c3.done + gap;
    let c4 = run_one(&mut d, Request::new(4, 0, Op::Read, 5008, 8, t), t);
    assert!(c4.service.cache_hit, "{:?}", c4.service);
    assert!(c4.service.total() < 100_000, "{:?}", c4.service);
}

#[test]
fn reread_is_a_cache_hit() {
    let mut d = disk(HddParams::default());
    let c1 = run_one(&mut d, Request::new(1, 0, Op::Read, 123_456_789, 16, 0), 0);
    assert!(!c1.service.cache_hit);
    let c2 = run_one(&mut d, Request::new(2, 0, Op::Read, 123_456_789, 16, c1.done), c1.done);
    assert!(c2.service.cache_hit);
    // read-hit overhead 0.05 ms + 16 sectors over a 300 MB/s interface
    let expect = 50_000.0 + 16.0 * 512.0 / 300e6 * 1e9;
    assert!((c2.service.total() as f64 - expect).abs() <= 1.0, "{:?}", c2.service);
}

#[test]
fn minimum_read_ahead_holds_the_mechanism() {
    // A read at 1e8, then at once a read 5e8 sectors away. Without a
    // minimum the far read stops the read-ahead; with 1024 sectors the drive
    // first reads 1024 sectors past the first read (about a track's worth:
    // more than 1024 / 2000 of a revolution, less than two), and a later
    // sequential read of those sectors is a hit.
    let run = |min: Option<u64>| {
        let mut d = disk(HddParams {
            min_read_ahead_sectors: min,
            ..Default::default()
        });
        let c1 = run_one(&mut d, Request::new(1, 0, Op::Read, 100_000_000, 16, 0), 0);
        let c2 = run_one(&mut d, Request::new(2, 0, Op::Read, 600_000_000, 16, c1.done), c1.done);
        let c3 = run_one(
            &mut d,
            Request::new(3, 0, Op::Read, 100_000_016, 1000, c2.done),
            c2.done,
        );
        (c1, c2, c3)
    };
    let (a1, a2, a3) = run(None);
    let (b1, b2, b3) = run(Some(1024));
    assert_eq!(a1.done, b1.done, "the first read is not delayed");
    let held = (b2.start - b1.done) as f64;
    assert_eq!(a2.start, a1.done, "no minimum: the far read starts at once");
    assert!(held > 0.25 * rev() && held < 2.0 * rev(), "held {held} ns");
    assert!(!a3.service.cache_hit, "without a minimum the read-ahead was cut off");
    assert!(
        b3.service.cache_hit,
        "the minimum read-ahead holds the next 1000 sectors"
    );
}

/// The default disk with segments of `sectors` sectors and a read-ahead of as many.
fn segments_of(sectors: u64) -> hvio_device::hdd::HddModel {
    HddParams {
        segment_sectors: Some(sectors),
        read_ahead_sectors: Some(sectors),
        ..Default::default()
    }
    .build()
    .unwrap()
}

/// DiskSim's `Buffer continuous read` on the default disk (2673 sectors per
/// track on the outer zone, 4 surfaces), its segments widened to 32,768
/// sectors so that the segment never stops the read-ahead first: a read of
/// `a..b`, then 50 ms of idle time (six revolutions: the read-ahead has
/// gone as far as it may), then a one-sector read of `probe`. Returns
/// whether the probe hit the buffer.
fn read_ahead_reaches(extent: ReadAheadExtent, a: u64, b: u64, probe: u64) -> bool {
    let mut m = segments_of(32_768);
    m.cache.read_ahead_extent = extent;
    let track = 2673;
    assert_eq!(m.geom.track_end_lbn(m.geom.locate(0)), track, "the outer zone's track");
    let mut d = Hdd::new(m);
    let c1 = run_one(&mut d, Request::new(1, 0, Op::Read, a, (b - a) as u32, 0), 0);
    assert!(!c1.service.cache_hit);
    let t = c1.done + 50_000_000;
    let c2 = run_one(&mut d, Request::new(2, 0, Op::Read, probe, 1, t), t);
    c2.service.cache_hit
}

#[test]
fn buffer_continuous_read_bounds_the_read_ahead() {
    use ReadAheadExtent::*;
    let (track, cylinder) = (2673, 4 * 2673);
    // To the segment's end (3): on past the track and the cylinder.
    assert!(read_ahead_reaches(Segment, 0, 8, track - 1));
    assert!(read_ahead_reaches(Segment, 0, 8, cylinder + 10));
    // To the track's end (1): not one block further.
    assert!(read_ahead_reaches(Track, 0, 8, track - 1));
    assert!(!read_ahead_reaches(Track, 0, 8, track));
    // A read ending with its track: no read-ahead at all.
    assert!(!read_ahead_reaches(Track, track - 8, track, track));
    // To the cylinder's end (2): the other surfaces, not the next cylinder.
    assert!(read_ahead_reaches(Cylinder, 0, 8, cylinder - 1));
    assert!(!read_ahead_reaches(Cylinder, 0, 8, cylinder));
    // Decreasing prefetch (4): a read within one track reads to its end;
    // a read that began on an earlier track (sequential) one track further.
    assert!(read_ahead_reaches(DecreasingPrefetch, 0, 8, track - 1));
    assert!(!read_ahead_reaches(DecreasingPrefetch, 0, 8, track));
    assert!(read_ahead_reaches(
        DecreasingPrefetch,
        track - 8,
        track + 8,
        3 * track - 1
    ));
    assert!(!read_ahead_reaches(DecreasingPrefetch, track - 8, track + 8, 3 * track));
    // Ending exactly at a track's end: the next track and one more.
    assert!(read_ahead_reaches(DecreasingPrefetch, track - 8, track, 3 * track - 1));
    assert!(!read_ahead_reaches(DecreasingPrefetch, track - 8, track, 3 * track));
}

/// DiskSim's `Read-ahead over requested` on the default disk (segments of
/// 4096 sectors, read-ahead up to 4096): a read of 0..8, then 50 ms of idle
/// time, then a re-read of 0..8 and a read of 4100. Returns whether each hit.
fn over_requested(over: bool, drop: bool) -> (bool, bool) {
    let mut m = segments_of(4096);
    m.cache.read_ahead_over_request = over;
    m.cache.drop_read_data = drop;
    let mut d = Hdd::new(m);
    let c1 = run_one(&mut d, Request::new(1, 0, Op::Read, 0, 8, 0), 0);
    let t = c1.done + 50_000_000;
    let reread = run_one(&mut d, Request::new(2, 0, Op::Read, 0, 8, t), t);
    let t = reread.done;
    let past = run_one(&mut d, Request::new(3, 0, Op::Read, 4100, 1, t), t);
    (reread.service.cache_hit, past.service.cache_hit)
}

#[test]
fn read_ahead_over_requested() {
    // Kept (DiskSim's 0): the segment holds the read and 4088 sectors after it.
    assert_eq!(over_requested(false, false), (true, false));
    // Over the request (1 with no maximum): the read-ahead goes a whole
    // segment past the read, whose own blocks give way.
    assert_eq!(over_requested(true, false), (false, true));
    // Dropped once sent (−1): a re-read misses; the read-ahead is as kept.
    assert_eq!(over_requested(false, true), (false, false));
}

/// DiskSim's `Read any free blocks` on the default disk (2673 sectors per
/// track on the outer zone; segments of 4096 sectors, 64 read ahead): a
/// first read of 2000..2008 on a fresh disk reaches track 0 after the
/// 0.15 ms overhead, with the head over sector ≈48, and waits for sector
/// 2000. 50 ms later, a read of 1000..1008 (passed under the head while it
/// waited) and one of 10..18 (passed before the head got there). Returns
/// whether each hit.
fn passing_blocks(on: bool) -> (bool, bool) {
    let mut m = HddParams {
        segment_sectors: Some(4096),
        read_ahead_sectors: Some(64),
        ..Default::default()
    }
    .build()
    .unwrap();
    m.cache.read_passing_blocks = on;
    let mut d = Hdd::new(m);
    let first = run_one(&mut d, Request::new(1, 0, Op::Read, 2000, 8, 0), 0);
    assert!(!first.service.cache_hit && first.service.rotation > 5_000_000);
    let t = first.done + 50_000_000;
    let behind = run_one(&mut d, Request::new(2, 0, Op::Read, 1000, 8, t), t);
    let t = behind.done;
    let before = run_one(&mut d, Request::new(3, 0, Op::Read, 10, 8, t), t);
    (behind.service.cache_hit, before.service.cache_hit)
}

#[test]
fn read_any_free_blocks_keeps_what_passed_under_the_head() {
    assert_eq!(passing_blocks(false), (false, false));
    assert_eq!(passing_blocks(true), (true, false));
}

/// Reads one after another, each arriving as the previous completes:
/// `(lbn, sectors)`. Returns the completions and the disk.
fn read_chain(p: HddParams, reads: &[(u64, u32)]) -> (Vec<Completion>, Hdd) {
    let mut d = disk(p);
    let mut now = 0;
    let mut out = Vec::new();
    for (i, &(lbn, n)) in reads.iter().enumerate() {
        let c = run_one(&mut d, Request::new(i as u64, 0, Op::Read, lbn, n, now), now);
        now = c.done;
        out.push(c);
    }
    (out, d)
}

fn adaptive(min: u64, gap: Option<u64>) -> HddParams {
    HddParams {
        read_ahead_policy: Some("adaptive".into()),
        min_read_ahead_sectors: Some(min),
        sequential_gap_sectors: gap,
        ..Default::default()
    }
}

#[test]
fn adaptive_read_ahead_follows_sequential_runs_only() {
    // A run's first read (1e8), a far read, the run's second read (1e8 + 16:
    // sequential), a far read, another far read, the run's next 1000 sectors.
    let reads = [
        (100_000_000, 16),
        (600_000_000, 16),
        (100_000_016, 16),
        (300_000_000, 16),
        (500_000_000, 16),
        (100_000_032, 1000),
    ];
    let (c, d) = read_chain(adaptive(1024, None), &reads);
    assert_eq!(c[1].start, c[0].done, "a run's first read is not followed");
    let held = (c[3].start - c[2].done) as f64;
    assert!(
        held > 0.25 * rev() && held < 2.0 * rev(),
        "the sequential pair holds the mechanism for the read-ahead: held {held} ns"
    );
    assert_eq!(c[4].start, c[3].done, "a random read after it starts no read-ahead");
    assert!(
        c[5].service.cache_hit,
        "the third read of the run hits: {:?}",
        c[5].service
    );
    assert_eq!(d.stats().sequential_reads, 2);
    // The same minimum under the drive's policy follows every read; without
    // a minimum the run's third read misses.
    let (c, _) = read_chain(
        HddParams {
            min_read_ahead_sectors: Some(1024),
            ..Default::default()
        },
        &reads,
    );
    assert!(c[1].start > c[0].done && c[4].start > c[3].done);
    let (c, d) = read_chain(HddParams::default(), &reads);
    assert!(!c[5].service.cache_hit);
    assert_eq!(d.stats().sequential_reads, 0, "only the adaptive policy detects runs");
}

#[test]
fn adaptive_read_ahead_keeps_up_with_a_long_interleaved_run() {
    // A run of 16-sector reads over three segments' worth (3 × 4096
    // sectors), each followed by a far random read that stops the drive's
    // own read-ahead. A run's refill treats its segment as a ring buffer:
    // every miss brings at least the 128-sector minimum, so at most one run
    // read in eight misses, past the segment's first 2 MiB too.
    let mut rng = Rng(5);
    let mut reads = Vec::new();
    for k in 0..768u64 {
        reads.push((100_000_000 + 16 * k, 16));
        reads.push((200_000_000 + (rng.next() % 100_000_000) * 8, 8));
    }
    let (c, _) = read_chain(adaptive(128, None), &reads);
    let misses = |from: usize| c.iter().step_by(2).skip(from).filter(|c| !c.service.cache_hit).count();
    assert!(misses(0) <= 768 / 8 + 2, "{} of 768 run reads missed", misses(0));
    assert!(
        misses(512) <= 256 / 8 + 1,
        "{} of the last 256 run reads missed",
        misses(512)
    );
    let (c, _) = read_chain(HddParams::default(), &reads);
    let drive = c.iter().step_by(2).filter(|c| !c.service.cache_hit).count();
    assert!(drive > 700, "without the policy nearly every run read misses ({drive})");
}

#[test]
fn adaptive_read_ahead_sequential_gap() {
    // The run's second read starts 32 sectors past where the first ended.
    let reads = [
        (100_000_000, 16),
        (600_000_000, 16),
        (100_000_048, 16),
        (300_000_000, 16),
    ];
    let (c, _) = read_chain(adaptive(1024, None), &reads);
    assert_eq!(c[3].start, c[2].done, "a 32-sector gap is not sequential by default");
    let (c, d) = read_chain(adaptive(1024, Some(64)), &reads);
    assert!(c[3].start > c[2].done, "within a 64-sector gap it is");
    assert_eq!(d.stats().sequential_reads, 1);
}

#[test]
fn adaptive_read_ahead_leaves_random_reads_alone() {
    // Random 4 KiB reads: no read continues a run, so every completion is
    // the drive policy's without a minimum.
    let mut rng = Rng(11);
    let reads: Vec<(u64, u32)> = (0..500).map(|_| ((rng.next() % 200_000_000) * 8, 8)).collect();
    let (a, _) = read_chain(HddParams::default(), &reads);
    let (b, d) = read_chain(adaptive(2048, None), &reads);
    assert_eq!(d.stats().sequential_reads, 0);
    for (x, y) in a.iter().zip(&b) {
        assert_eq!((x.start, x.done), (y.start, y.done));
    }
}

#[test]
fn read_ahead_policy_defaults_and_errors() {
    let m = HddParams::default().build().unwrap();
    assert_eq!(m.cache.read_ahead_policy, ReadAheadPolicy::Drive);
    assert_eq!((m.cache.min_read_ahead, m.cache.sequential_gap), (0, 0));
    let m = adaptive(128, Some(8)).build().unwrap();
    assert_eq!(m.cache.read_ahead_policy, ReadAheadPolicy::Adaptive);
    assert_eq!((m.cache.min_read_ahead, m.cache.sequential_gap), (128, 8));
    let err = |p: HddParams| p.build().unwrap_err().to_string();
    let e = err(HddParams {
        read_ahead_policy: Some("always".into()),
        ..Default::default()
    });
    assert!(e.contains("read_ahead_policy") && e.contains("always"), "{e}");
    let e = err(adaptive(0, None));
    assert!(e.contains("min_read_ahead_sectors") && e.contains('0'), "{e}");
    let e = err(HddParams {
        sequential_gap_sectors: Some(16),
        ..Default::default()
    });
    assert!(e.contains("sequential_gap_sectors") && e.contains("16"), "{e}");
    let toml =
        "model = \"hdd\"\nread_ahead_policy = \"adaptive\"\nmin_read_ahead_sectors = 128\nsequential_gap_sectors = 8\n";
    let cfg: DeviceConfig = toml::from_str(toml).unwrap();
    assert!(build_device(&cfg, std::path::Path::new(".")).is_ok());
}

/// Sequential reads of `bs` sectors from `start` for `total` sectors: MB/s.
fn seq_read_rate(d: &mut dyn Device, start: u64, bs: u32, total: u64) -> f64 {
    let mut now = 0;
    let mut lbn = start;
    let mut t0 = None;
    let mut i = 0;
    while lbn < start + total {
        let c = run_one(d, Request::new(i, 0, Op::Read, lbn, bs, now), now);
        t0.get_or_insert(c.start);
        now = c.done;
        lbn += bs as u64;
        i += 1;
    }
    (lbn - start) as f64 * 512.0 / ((now - t0.unwrap()) as f64 / 1e9) / 1e6
}

#[test]
fn sequential_read_runs_at_the_zone_media_rate() {
    let p = HddParams::default();
    let m = p.build().unwrap();
    let zones = &m.geom.zones;
    for (zi, z) in [(0usize, &zones[0]), (zones.len() - 1, zones.last().unwrap())] {
        let mut d = disk(p.clone());
        // Per track: spt sectors plus the skew's worth of rotation.
        let media = z.spt as f64 * 512.0 / (rev() * (z.spt as f64 + z.track_skew) / z.spt as f64 / 1e9) / 1e6;
        let rate = seq_read_rate(&mut d, z.first_lbn + 1000, 256, 64 * 2048);
        assert!(
            (rate / media - 1.0).abs() < 0.03,
            "zone {zi}: {rate:.1} MB/s vs media {media:.1} MB/s"
        );
    }
    // Outer ≈ 164 MB/s raw / 1.15, inner about half of it.
    let mut d = disk(p.clone());
    let outer = seq_read_rate(&mut d, 0, 2048, 32 * 2048);
    let mut d = disk(p.clone());
    let inner = seq_read_rate(&mut d, m.geom.capacity() - 40 * 2048, 2048, 32 * 2048);
    eprintln!("sequential 1 MiB reads: outer {outer:.1} MB/s, inner {inner:.1} MB/s");
    assert!((135.0..150.0).contains(&outer), "outer {outer:.1} MB/s");
    assert!((68.0..76.0).contains(&inner), "inner {inner:.1} MB/s");
}

#[test]
fn deterministic() {
    for destage in ["sptf", "fifo"] {
        deterministic_with(destage);
    }
}

fn deterministic_with(destage: &str) {
    let run = || {
        let mut d = disk(HddParams {
            queue_depth: Some(8),
            write_cache: Some(true),
            destage: Some(destage.into()),
            ..Default::default()
        });
        let cap = d.info().capacity;
        let mut rng = Rng(99);
        let mut out = Vec::new();
        let mut now = 0;
        let mut id = 0;
        while out.len() < 2000 {
            while d.can_accept() {
                let op = if rng.next().is_multiple_of(3) {
                    Op::Write
                } else {
                    Op::Read
                };
                let lbn = rng.next() % (cap - 64);
                d.submit(Request::new(id, 0, op, lbn, 8 + (rng.next() % 56) as u32, now), now);
                id += 1;
            }
            now = d.next_event().unwrap();
            d.advance(now, &mut out);
        }
        out
    };
    let a = run();
    assert_eq!(a, run());
    // Every completion is well formed.
    for c in &a {
        assert_eq!(c.done - c.start, c.service.total());
        assert!(c.start >= c.rq.arrival);
    }
}

#[test]
fn ncq_reordering_beats_fifo() {
    let iops = |depth: usize| {
        let mut d = disk(HddParams {
            queue_depth: Some(depth),
            cache_segments: Some(0),
            ..Default::default()
        });
        let cap = d.info().capacity;
        let mut rng = Rng(3);
        let mut out = Vec::new();
        let mut now = 0;
        let mut id = 0;
        while out.len() < 1500 {
            while d.can_accept() {
                d.submit(Request::new(id, 0, Op::Read, (rng.next() % (cap / 8)) * 8, 8, now), now);
                id += 1;
            }
            now = d.next_event().unwrap();
            d.advance(now, &mut out);
        }
        out.len() as f64 / (now as f64 / 1e9)
    };
    let one = iops(1);
    let deep = iops(32);
    eprintln!("random 4 KiB reads, no cache: depth 1 {one:.1} IOPS, depth 32 (SPTF) {deep:.1} IOPS");
    assert!(deep > 1.5 * one, "depth 32 {deep:.0} IOPS vs depth 1 {one:.0}");
}

#[test]
fn write_back_acknowledges_early_and_flush_waits() {
    let mut d = disk(HddParams {
        write_cache: Some(true),
        ..Default::default()
    });
    let c = run_one(&mut d, Request::new(1, 0, Op::Write, 77_777, 8, 0), 0);
    assert!(c.service.cache_hit);
    assert!(c.service.total() < 100_000);
    let f = run_one(&mut d, Request::new(2, 0, Op::Flush, 0, 0, c.done), c.done);
    // The flush completes only after the data reached the media (≥ the seek to it).
    assert!(
        f.done > c.done + 1_000_000,
        "flush done {} after ack {}",
        f.done,
        c.done
    );
}

#[test]
fn seek_model_for_schedulers() {
    let d = disk(HddParams::default());
    let info = d.info();
    let full = info.seek.max_seek_time() as f64 / 1e6;
    assert!((full - 15.2).abs() < 0.05, "full stroke {full}");
    assert_eq!(info.seek.seek_time(5, 5), 0);
    assert!(info.seek.revolution() == 8_333_333);
    let one_track = info.seek.seek_time(0, 2673 * 4 * 2) as f64 / 1e6;
    assert!((0.7..1.0).contains(&one_track), "short seek {one_track}");
}

#[test]
fn config_overrides_and_errors() {
    let cfg: DeviceConfig = toml::from_str("model = \"hdd\"\nrpm = 5400\nqueue_depth = 4\n").unwrap();
    let d = build_device(&cfg, std::path::Path::new(".")).unwrap();
    assert_eq!(d.info().queue_depth, 4);
    assert_eq!(d.info().seek.revolution(), 11_111_111);
    let err = toml::from_str::<DeviceConfig>("model = \"hdd\"\nrpms = 5400\n").unwrap_err();
    assert!(err.to_string().contains("rpms"), "{err}");
    let bad: DeviceConfig = toml::from_str("model = \"hdd\"\nrpm = -1\n").unwrap();
    let e = build_device(&bad, std::path::Path::new(".")).err().unwrap();
    assert!(e.to_string().contains("rpm"), "{e}");
}

/// Writers at `starts`, each one `bs`-sector write at a time (a new one as
/// the last completes), taking turns at a depth-1 drive with its write cache
/// on, `total` sectors each, then a flush. Returns (MB/s to the media, the disk).
fn writers(destage: &str, starts: &[u64], bs: u32, total: u64) -> (f64, Hdd) {
    let mut d = disk(HddParams {
        write_cache: Some(true),
        destage: Some(destage.into()),
        ..Default::default()
    });
    let mut next: Vec<u64> = starts.to_vec();
    let mut ready: std::collections::VecDeque<usize> = (0..starts.len()).collect();
    let mut owner = std::collections::HashMap::new();
    let (mut now, mut id, mut out) = (0, 0u64, Vec::new());
    loop {
        while d.can_accept() {
            let Some(w) = ready.pop_front() else { break };
            if next[w] >= starts[w] + total {
                continue;
            }
            owner.insert(id, w);
            d.submit(Request::new(id, w as u32, Op::Write, next[w], bs, now), now);
            next[w] += bs as u64;
            id += 1;
        }
        let Some(t) = d.next_event() else { break };
        now = t;
        out.clear();
        d.advance(now, &mut out);
        for c in &out {
            ready.push_back(owner[&c.rq.id]);
        }
    }
    let f = run_one(&mut d, Request::new(id, 0, Op::Flush, 0, 0, now), now);
    assert_eq!(d.dirty_sectors(), 0, "the flush drained the buffer");
    let bytes = (total * starts.len() as u64 * 512) as f64;
    (bytes / (f.done as f64 / 1e9) / 1e6, d)
}

#[test]
fn interleaved_sequential_writers_destage_in_runs() {
    let gib10 = 10 * (1u64 << 30) / 512;
    let total = 16 * (1 << 20) / 512; // 16 MiB each, 4× the buffer
    let (one, _) = writers("sptf", &[0], 128, 2 * total);
    let (sptf, ds) = writers("sptf", &[0, gib10], 128, total);
    let (fifo, df) = writers("fifo", &[0, gib10], 128, total);
    eprintln!(
        "two sequential 64 KiB writers 10 GiB apart, write cache on: one writer {one:.1} MB/s, \
         two with SPTF destage {sptf:.1} MB/s ({} destages), FIFO {fifo:.1} MB/s ({} destages)",
        ds.stats().destages,
        df.stats().destages
    );
    assert!(sptf > 0.8 * one, "SPTF {sptf:.1} vs one writer {one:.1} MB/s");
    assert!(fifo < 0.3 * sptf, "FIFO {fifo:.1} vs SPTF {sptf:.1} MB/s");
    assert!(
        ds.stats().buffer_waits > 0,
        "the writers outran the media and waited for room"
    );
}

/// Random 16 KiB writes over 12 GiB, 32 in flight, write cache on: MB/s.
fn random_writers(destage: &str, age_ms: Option<f64>) -> (f64, u64) {
    let mut d = disk(HddParams {
        write_cache: Some(true),
        destage: Some(destage.into()),
        destage_max_age_ms: age_ms,
        ..Default::default()
    });
    let span = 12 * (1u64 << 30) / 512 / 32;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (n, bs) = (4000u64, 32u32);
    let (mut now, mut id, mut in_flight, mut out) = (0, 0u64, 0, Vec::new());
    loop {
        while in_flight < 32 && id < n {
            let lbn = (rng.next() % span) * 32;
            d.submit(Request::new(id, 0, Op::Write, lbn, bs, now), now);
            id += 1;
            in_flight += 1;
        }
        let Some(t) = d.next_event() else { break };
        now = t;
        out.clear();
        d.advance(now, &mut out);
        in_flight -= out.len();
    }
    let f = run_one(&mut d, Request::new(id, 0, Op::Flush, 0, 0, now), now);
    (
        (n * bs as u64 * 512) as f64 / (f.done as f64 / 1e9) / 1e6,
        d.stats().aged_destages,
    )
}

#[test]
fn age_bound_does_not_turn_a_full_buffer_into_fifo() {
    // Sustained random writes keep the buffer full; a run waits there about
    // (runs in the buffer) / (destages per second). An age bound shorter
    // than that forces every destage to the oldest run, destages slow down,
    // runs wait longer still: the drive collapses to FIFO. The default bound
    // must sit above that wait so SPTF keeps its gain.
    let (sptf, aged) = random_writers("sptf", None);
    let (fifo, _) = random_writers("fifo", None);
    let (short, short_aged) = random_writers("sptf", Some(100.0));
    eprintln!(
        "random 16 KiB writes, full buffer: SPTF {sptf:.2} MB/s ({aged} aged destages), \
         FIFO {fifo:.2}, SPTF with a 100 ms bound {short:.2} ({short_aged} aged)"
    );
    assert!(sptf > 2.0 * fifo, "SPTF {sptf:.2} vs FIFO {fifo:.2} MB/s");
    assert!(
        short < 0.7 * sptf,
        "a short bound degenerates towards FIFO: {short:.2} vs {sptf:.2}"
    );
}

#[test]
fn overwrites_coalesce_in_the_buffer() {
    let mut d = disk(HddParams {
        write_cache: Some(true),
        ..Default::default()
    });
    let far = d.info().capacity / 2;
    let mut now = 0;
    let mut write = |d: &mut Hdd, id: u64, lbn: u64, n: u32, fua: bool| {
        let mut rq = Request::new(id, 0, Op::Write, lbn, n, now);
        rq.fua = fua;
        let c = run_one(d, rq, now);
        assert_eq!(c.service.cache_hit, !fua, "write {id}");
        now = c.done;
        c
    };
    // The first write goes to the media at once (the mechanism was idle):
    // a long seek, during which the others stay in the buffer.
    write(&mut d, 0, far, 8, false);
    assert_eq!(d.dirty_sectors(), 0);
    write(&mut d, 1, 1000, 8, false);
    write(&mut d, 2, 1000, 8, false); // rewrite: no more room taken
    write(&mut d, 3, 1004, 8, false); // overlaps: one run 1000..1012
    write(&mut d, 4, 1012, 4, false); // touches: one run 1000..1016
    write(&mut d, 5, 2000, 8, false);
    write(&mut d, 6, 2010, 8, false); // a gap: a run of its own
    assert_eq!((d.dirty_sectors(), d.dirty_runs()), (32, 3));
    assert_eq!(d.stats().destages, 1);
    // A write through (FUA) waits for the destage in progress, then cleans what it covers.
    let c = write(&mut d, 7, 996, 8, true);
    // (The next destage may have started as the FUA write completed.)
    assert!(d.stats().destages <= 2, "the FUA write went before the buffered runs");
    assert!((996..1004).all(|b| !d.is_dirty(b, c.done)));
    assert!([1004, 1015, 2000, 2007, 2010, 2017]
        .iter()
        .all(|&b| d.is_dirty(b, c.done)));
    // Dirty data reads as a buffer hit.
    let r = run_one(&mut d, Request::new(8, 0, Op::Read, 1005, 10, c.done), c.done);
    assert!(r.service.cache_hit && r.service.total() < 100_000, "{:?}", r.service);
    // The flush waits for every run to reach the media.
    let f = run_one(&mut d, Request::new(9, 0, Op::Flush, 0, 0, r.done), r.done);
    assert_eq!(d.dirty_sectors(), 0);
    assert!(!d.is_dirty(1004, f.done) && !d.is_dirty(2000, f.done));
    assert_eq!(d.stats().destaged_sectors, 8 + 28);
}

#[test]
fn age_bound_destages_a_starved_run() {
    // A sequential writer keeps the head busy at the front of the disk; one
    // write far away waits until it is `destage_max_age_ms` old.
    let run = |age_ms: f64| {
        let mut d = disk(HddParams {
            write_cache: Some(true),
            destage_max_age_ms: Some(age_ms),
            ..Default::default()
        });
        let far = d.info().capacity / 2;
        let mut now = 0;
        let mut cleaned = None;
        for i in 0..3000u64 {
            let lbn = if i == 10 { far } else { i * 128 };
            let c = run_one(&mut d, Request::new(i, 0, Op::Write, lbn, 128, now), now);
            now = c.done;
            if i > 10 && cleaned.is_none() && !d.is_dirty(far, now) {
                cleaned = Some(now);
            }
        }
        (cleaned, d.stats().aged_destages, now)
    };
    let (cleaned, aged, end) = run(100.0);
    eprintln!("far write destaged at {cleaned:?} ns with a 100 ms age bound ({aged} aged destages, run {end} ns)");
    let at = cleaned.expect("the far write reached the media");
    assert!((100_000_000..200_000_000).contains(&at), "destaged at {at} ns");
    assert!(aged >= 1);
    // Without the bound the head never leaves the stream.
    let (cleaned, aged, end) = run(1e9);
    assert!(end > 300_000_000, "the stream ran {end} ns");
    assert_eq!((cleaned, aged), (None, 0));
}

#[test]
fn destage_policy_is_a_checked_parameter() {
    let e = HddParams {
        destage: Some("lifo".into()),
        ..Default::default()
    }
    .build()
    .unwrap_err()
    .to_string();
    assert!(e.contains("destage") && e.contains("lifo"), "{e}");
    let toml = "model = \"hdd\"\nwrite_cache = true\ndestage = \"fifo\"\ndestage_max_age_ms = 250\n";
    let cfg: DeviceConfig = toml::from_str(toml).unwrap();
    assert!(build_device(&cfg, std::path::Path::new(".")).is_ok());
}

#[test]
fn destage_starts_when_the_data_is_there_and_after_the_idle_time() {
    // The disk has been idle for a second when a far write comes: its
    // destage (a long seek) starts then, not when the mechanism last
    // stopped, so the flush right behind it waits for the seek.
    let flush_wait = |idle_ms: f64| {
        let mut d = disk(HddParams {
            write_cache: Some(true),
            destage_idle_ms: Some(idle_ms),
            ..Default::default()
        });
        let t0 = 1_000_000_000;
        let far = d.info().capacity / 2;
        let c = run_one(&mut d, Request::new(1, 0, Op::Write, far, 8, t0), t0);
        let dirty_at_ack = d.is_dirty(far, c.done) && d.dirty_sectors() == 8;
        let f = run_one(&mut d, Request::new(2, 0, Op::Flush, 0, 0, c.done), c.done);
        (dirty_at_ack, f.done - c.done)
    };
    let (dirty, wait) = flush_wait(0.0);
    assert!(!dirty, "idle 0: the destage started at once");
    assert!(wait > 5_000_000, "flush waited {wait} ns: the destage seeks ~10 ms");
    // With an idle time, the write stays in the buffer until the host has
    // left the drive alone that long (a flush still drains it at once).
    let (dirty, wait) = flush_wait(50.0);
    assert!(dirty, "idle 50 ms: still buffered at the acknowledgement");
    assert!(wait > 5_000_000 && wait < 50_000_000, "flush waited {wait} ns");
    let mut d = disk(HddParams {
        write_cache: Some(true),
        destage_idle_ms: Some(5.0),
        ..Default::default()
    });
    let c = run_one(&mut d, Request::new(1, 0, Op::Write, 4096, 8, 0), 0);
    assert!(d.is_dirty(4096, c.done));
    assert_eq!(
        d.next_event(),
        Some(5_000_000),
        "the idle timer runs from the write's arrival"
    );
    let mut out = Vec::new();
    d.advance(5_000_000, &mut out);
    assert_eq!(d.stats().destages, 1);
    // Half a buffer of dirty data starts a destage whatever the idle time.
    let mut d = disk(HddParams {
        write_cache: Some(true),
        destage_idle_ms: Some(1000.0),
        ..Default::default()
    });
    let mut now = 0;
    for i in 0..32u64 {
        now = run_one(&mut d, Request::new(i, 0, Op::Write, 100_000 + i * 128, 128, now), now).done;
        assert_eq!(d.stats().destages, (i == 31) as u64, "after write {i}");
    }
}

/// `streams` sequential readers of 8 sectors each, `rounds` times round robin
/// (stream `j`'s file at `j` × 10^7): the read hits of each stream.
fn interleaved_readers(segments: usize, streams: u64, rounds: u64) -> Vec<u64> {
    let p = HddParams {
        cache_segments: Some(segments),
        ..adaptive(128, None)
    };
    let mut d = disk(p);
    let mut hits = vec![0; streams as usize];
    let mut now = 0;
    for k in 0..rounds {
        for j in 0..streams {
            let rq = Request::new(k * streams + j, j as u32, Op::Read, j * 10_000_000 + 8 * k, 8, now);
            let c = run_one(&mut d, rq, now);
            now = c.done;
            hits[j as usize] += c.service.cache_hit as u64;
        }
    }
    hits
}

#[test]
fn more_segments_than_64_hold_more_streams() {
    // 96 interleaved runs: 64 segments thrash (LRU evicts the segment read
    // next), 128 hold every run, and each run's misses are then the
    // read-ahead minimum's one in 16 (past the run's first reads). Segments
    // past the 64th once aliased the first 64 in the bit-mask scans.
    let rounds = 64;
    let few: u64 = interleaved_readers(64, 96, rounds).iter().sum();
    let many = interleaved_readers(128, 96, rounds);
    assert!(few < 96 * rounds / 10, "64 segments for 96 runs hit {few} times");
    for (j, &h) in many.iter().enumerate() {
        assert!(
            h >= rounds * 15 / 16 - 3,
            "run {j} hit {h} of {rounds} with 128 segments"
        );
    }
    // Up to 64 streams, 64 and 1024 segments serve them the same.
    assert_eq!(
        interleaved_readers(64, 64, 32),
        interleaved_readers(MAX_SEGMENTS, 64, 32)
    );
    let e = HddParams {
        cache_segments: Some(MAX_SEGMENTS + 1),
        ..Default::default()
    }
    .build()
    .unwrap_err()
    .to_string();
    assert!(e.contains("cache_segments") && e.contains("1025"), "{e}");
}

/// Stream `j` of `streams` sequential 8-sector readers (file at `j` × 10^7)
/// reads its `k`-th block; then, after every round, `write(d, k, now)`.
/// Returns the read hits of each stream.
fn readers_with_writes(
    p: HddParams,
    streams: u64,
    rounds: u64,
    mut write: impl FnMut(&mut Hdd, u64, Nanos) -> Nanos,
) -> (Vec<u64>, Hdd) {
    let mut d = disk(p);
    let mut hits = vec![0; streams as usize];
    let mut now = 0;
    for k in 0..rounds {
        for j in 0..streams {
            let rq = Request::new(
                2 * (k * streams + j),
                j as u32,
                Op::Read,
                j * 10_000_000 + 8 * k,
                8,
                now,
            );
            let c = run_one(&mut d, rq, now);
            now = c.done;
            hits[j as usize] += c.service.cache_hit as u64;
        }
        now = write(&mut d, k, now);
    }
    (hits, d)
}

#[test]
fn adaptive_written_data_takes_no_streams_segment() {
    // 64 interleaved runs in 64 segments, and after each round a write
    // (written through) far from them. Under the adaptive policy the
    // segments are the controller's stream table: the written data, kept
    // for read hits, takes no run's segment, so each run misses only once
    // per read-ahead minimum (16 reads). Taking the least recently used
    // segment ended the run read next, which then took the next one's.
    let p = || HddParams {
        cache_segments: Some(64),
        ..adaptive(128, None)
    };
    let write = |d: &mut Hdd, k: u64, now: Nanos| {
        run_one(d, Request::new(1, 99, Op::Write, 1_500_000_000 + 64 * k, 8, now), now).done
    };
    let rounds = 48;
    let (hits, d) = readers_with_writes(p(), 64, rounds, write);
    for (j, &h) in hits.iter().enumerate() {
        assert!(h >= rounds * 15 / 16 - 3, "run {j} hit {h} of {rounds}");
    }
    assert!(d.stats().sequential_reads >= 64 * (rounds - 1));
    // The written data is still kept when a segment is free.
    let (_, mut d) = readers_with_writes(p(), 8, 4, write);
    let now = d.stats().reads * 100_000_000;
    let c = run_one(&mut d, Request::new(3, 99, Op::Read, 1_500_000_000, 8, now), now);
    assert!(c.service.cache_hit, "re-reading written data hits");
}

#[test]
fn adaptive_buffered_writes_keep_the_read_ahead_past_them() {
    // One run of 8-sector reads behind a write-back cache; its writer
    // rewrites the block just past each read, as fio's mixed sequential
    // read/write threads do (a position per direction, both from the
    // file's start). The dirty copy serves the rewritten blocks and the
    // segment keeps the read-ahead past them: the run misses once per
    // read-ahead minimum (16 reads), goes on through reads of dirty data,
    // and the drive's policy still forgets what a write overlaps.
    let p = |policy: &str| HddParams {
        write_cache: Some(true),
        read_ahead_policy: Some(policy.into()),
        min_read_ahead_sectors: Some(128),
        ..Default::default()
    };
    let write = |d: &mut Hdd, k: u64, now: Nanos| {
        if k.is_multiple_of(2) {
            run_one(d, Request::new(1, 1, Op::Write, 8 * k + 8, 8, now), now).done
        } else {
            now
        }
    };
    let rounds = 400;
    let (hits, d) = readers_with_writes(p("adaptive"), 1, rounds, write);
    assert!(hits[0] >= rounds * 15 / 16 - 2, "hit {} of {rounds}", hits[0]);
    assert_eq!(
        d.stats().sequential_reads,
        rounds - 1,
        "reads of dirty data continue the run"
    );
    let (hits, _) = readers_with_writes(p("drive"), 1, rounds, write);
    assert!(
        hits[0] < rounds * 3 / 4,
        "the drive's policy cuts its segment: hit {}",
        hits[0]
    );
}

/// Runs `d` until request `id` completes; returns its completion time.
fn run_until_done(d: &mut Hdd, id: u64) -> Nanos {
    let mut out = Vec::new();
    loop {
        let t = d.next_event().expect("pending work has an event");
        out.clear();
        d.advance(t, &mut out);
        if let Some(c) = out.iter().find(|c| c.rq.id == id) {
            return c.done;
        }
    }
}

#[test]
fn cscan_destages_by_block_number_not_from_the_head() {
    // Two runs buffered while a read takes the head to the middle of the
    // disk, the second run right next to where the read ends: SPTF destages
    // that one first; a controller's CSCAN goes on by block number from
    // where its last destage ended (block 0 at first), so the low run first,
    // then on up to the high one before it wraps to a run written meanwhile
    // below both.
    // Still waiting in the buffer (not the run the destage under way writes).
    let waits = |d: &Hdd, b: u64| d.is_dirty(b, Nanos::MAX);
    let order = |destage: &str| {
        let mut d = disk(HddParams {
            write_cache: Some(true),
            destage: Some(destage.into()),
            ..Default::default()
        });
        let far = d.info().capacity / 2;
        let (low, high, lowest) = (1_000_000, far + 4096, 500);
        d.submit(Request::new(0, 0, Op::Read, far, 8, 0), 0);
        d.submit(Request::new(1, 0, Op::Write, low, 8, 0), 0);
        d.submit(Request::new(2, 0, Op::Write, high, 8, 0), 0);
        let t = run_until_done(&mut d, 0);
        assert_eq!(d.stats().destages, 1, "{destage}: the idle drive started a destage");
        let first = (waits(&d, low), waits(&d, high));
        d.submit(Request::new(3, 0, Op::Write, lowest, 8, t), t);
        let mut out = Vec::new();
        while d.stats().destages < 2 {
            let now = d.next_event().expect("dirty runs left");
            d.advance(now, &mut out);
        }
        (first, waits(&d, high), waits(&d, lowest))
    };
    let (sptf_first, ..) = order("sptf");
    assert_eq!(sptf_first, (true, false), "SPTF: the run next to the head first");
    let (cscan_first, high_dirty, lowest_dirty) = order("cscan");
    assert_eq!(cscan_first, (false, true), "CSCAN: the lowest block number first");
    assert!(!high_dirty && lowest_dirty, "CSCAN: on up the disk before it wraps");
}

/// `n` contiguous writes of `sectors` from block 1000 on a write-cache-off
/// drive of `depth`, the host keeping the drive's queue full (a new command
/// as soon as one completes); returns the completions.
fn queued_contiguous_writes(depth: usize, sectors: u32, n: usize) -> Vec<Completion> {
    let mut d = disk(HddParams {
        queue_depth: Some(depth),
        ..Default::default()
    });
    let (mut out, mut now, mut next) = (Vec::new(), 0, 0u64);
    while out.len() < n {
        while d.can_accept() && (next as usize) < n {
            let lbn = 1000 + sectors as u64 * next;
            d.submit(Request::new(next, 0, Op::Write, lbn, sectors, now), now);
            next += 1;
        }
        now = d.next_event().expect("queued writes have an event");
        d.advance(now, &mut out);
    }
    out
}

/// From the first completion to the last, ns.
fn span(v: &[Completion]) -> f64 {
    v.last().unwrap().done as f64 - v[0].done as f64
}

#[test]
fn ncq_contiguous_writes_stream_without_losing_a_revolution() {
    // NCQ: a command queued behind the one the mechanism serves was taken in
    // (command overhead, its data moved to the buffer) while that one was
    // written, so the next contiguous write starts on the very next sector.
    // 64 KiB writes (0.4 ms on the media) at depth 2, and 4 KiB writes
    // (25 µs) at depth 8: enough queued to cover the 0.15 ms overhead.
    for (depth, sectors) in [(2, 128), (8, 8)] {
        let deep = queued_contiguous_writes(depth, sectors, 40);
        for c in &deep[1..] {
            assert_eq!(c.service.seek, 0, "{c:?}");
            assert!(
                c.service.rotation < 1_000,
                "depth {depth}: queued write {} lost a turn: {:?}",
                c.rq.id,
                c.service
            );
            assert_eq!(c.service.overhead, 0, "{c:?}");
            assert_eq!(c.done - c.start, c.service.total());
        }
        // 39 writes back to back: their media time, a few revolutions at most.
        let media = 39.0 * sectors as f64 * rev() / 2673.0;
        let fast = span(&deep);
        eprintln!("39 queued contiguous writes of {sectors} sectors at depth {depth}: {fast:.0} ns");
        assert!(
            fast < media + 2.0 * rev(),
            "depth {depth} took {fast} ns, media {media}"
        );
    }
    // At depth 1 the next command arrives only when the last completes: its
    // overhead lets the next sector pass, and it waits nearly a revolution.
    let one = queued_contiguous_writes(1, 128, 40);
    for c in &one[1..] {
        let expect = rev() - 150_000.0;
        assert!(
            (c.service.rotation as f64 - expect).abs() <= 2.0,
            "depth 1 write {}: {:?}",
            c.rq.id,
            c.service
        );
        assert_eq!(c.service.overhead, 150_000);
    }
    assert!(span(&one) > 39.0 * rev(), "depth 1 took {} ns", span(&one));
    // 4 KiB writes at depth 2: a command submitted as the write before it
    // starts is only 25 µs early, so the rest of its overhead lets the sector
    // pass; it waits a turn, during which the next one is taken in and
    // follows at once. Every other write loses a revolution.
    let shallow = queued_contiguous_writes(2, 8, 40);
    let late: Vec<_> = shallow[2..].iter().filter(|c| c.service.rotation > 8_000_000).collect();
    assert_eq!(late.len(), 19, "{:?}", shallow[2]);
    for c in late {
        // Taken in 25 µs (the write before it) early: that much less overhead.
        assert!((120_000..130_000).contains(&c.service.overhead), "{c:?}");
    }
}

#[test]
fn ncq_overhead_overlaps_only_the_time_a_command_was_queued() {
    // Two far reads reaching an idle depth-4 drive together: the first pays
    // its whole overhead; the second was taken in while the first was
    // served (well over 0.15 ms), so none of its overhead is left.
    let mut d = disk(HddParams {
        queue_depth: Some(4),
        ..Default::default()
    });
    let t = 1_000_000;
    d.submit(Request::new(1, 0, Op::Read, 5_000_000, 8, t), t);
    d.submit(Request::new(2, 0, Op::Read, 9_000_000, 8, t), t);
    let mut out = completions(&mut d, 2);
    out.sort_by_key(|c| c.start);
    let (a, b) = (out[0], out[1]);
    assert_eq!((a.start, a.service.overhead), (t, 150_000), "{a:?}");
    assert_eq!(b.start, a.done);
    assert_eq!(b.service.overhead, 0, "{b:?}");
    // A command reaching a drive whose mechanism is idle pays it all.
    let t2 = b.done + 20_000_000;
    let c = run_one(&mut d, Request::new(3, 0, Op::Read, 700_000, 8, t2), t2);
    assert_eq!((c.start, c.service.overhead), (t2, 150_000), "{c:?}");
    for c in [a, b, c] {
        assert_eq!(c.done - c.start, c.service.total());
    }
}

#[test]
fn sptf_counts_the_read_ahead_under_way() {
    // After a read of 0..88 the drive reads ahead. The next read (88..176)
    // comes from the read-ahead; while it does, reads of 352 and 176 queue.
    // The read-ahead reaches 176 first, so SPTF takes 176 next. (Costed from
    // the head where the first read left it, 176 had just passed and looked
    // a revolution away, so 352 went first, and the segment, sliding past
    // it, dropped 176..352: a revolution more for 176.)
    let mut d = disk(HddParams {
        queue_depth: Some(32),
        ..Default::default()
    });
    let first = run_one(&mut d, Request::new(0, 0, Op::Read, 0, 88, 0), 0);
    let t = first.done;
    d.submit(Request::new(1, 0, Op::Read, 88, 88, t), t);
    d.submit(Request::new(2, 0, Op::Read, 352, 88, t), t);
    d.submit(Request::new(3, 0, Op::Read, 176, 88, t), t);
    let mut out = completions(&mut d, 3);
    out.sort_by_key(|c| c.start);
    assert_eq!(out.iter().map(|c| c.rq.id).collect::<Vec<_>>(), [1, 3, 2], "{out:?}");
    // All come from the read-ahead: no seek, no rotation.
    for c in &out {
        assert_eq!((c.service.seek, c.service.rotation), (0, 0), "{c:?}");
    }
    assert!(out[2].done - t < 2_000_000, "{:?}", out[2]);
}

/// A write-back disk with `keep_destaged` set as given, a 1024-sector
/// buffer and no idle delay (destages start as soon as the disk is idle),
/// after `runs` writes of `sectors` each, one at a time, at block 10^6 × (i + 1),
/// all destaged: the disk and the time.
fn written_and_destaged(keep: bool, runs: u64, sectors: u32) -> (Hdd, Nanos) {
    let mut d = disk(HddParams {
        write_cache: Some(true),
        write_buffer_sectors: Some(1024),
        keep_destaged: Some(keep),
        ..Default::default()
    });
    let mut now = 0;
    for i in 0..runs {
        let rq = Request::new(i, 0, Op::Write, 1_000_000 * (i + 1), sectors, now);
        now = run_one(&mut d, rq, now).done;
    }
    let now = drain(&mut d).max(now);
    assert_eq!(d.dirty_sectors(), 0, "keep {keep}: everything destaged");
    assert_eq!(d.stats().destaged_sectors, runs * sectors as u64);
    (d, now)
}

/// Runs `d` until nothing is left to do (every write destaged) and a
/// second more; returns that time.
fn drain(d: &mut Hdd) -> Nanos {
    let (mut out, mut now) = (Vec::new(), 0);
    while let Some(t) = d.next_event() {
        now = t;
        d.advance(t, &mut out);
    }
    now += 1_000_000_000;
    d.advance(now, &mut out);
    now
}

#[test]
fn keep_destaged_reads_of_just_destaged_data_hit() {
    // 20 far-apart 8-sector writes, destaged while the host is quiet, then a
    // re-read of the first. The drive keeps each destaged run in a read
    // segment, so with 16 segments the first run's was taken by the 17th
    // and the re-read goes to the media; a controller's cache still holds
    // the run (clean) and serves it.
    let reread = |keep: bool| {
        let (mut d, now) = written_and_destaged(keep, 20, 8);
        let c = run_one(&mut d, Request::new(99, 0, Op::Read, 1_000_000, 8, now), now);
        (c.service.cache_hit, d.clean_sectors(), d.stats().clean_hits)
    };
    assert_eq!(reread(false), (false, 0, 0), "off: a destaged run leaves the buffer");
    assert_eq!(
        reread(true),
        (true, 160, 1),
        "on: it stays, clean, and the read hits it"
    );
}

#[test]
fn keep_destaged_evicts_clean_data_before_a_write_waits() {
    // Half the buffer is written and destaged (clean), then a burst of
    // three quarters of a buffer's worth of writes at one instant: clean data makes room
    // (least recently used first: the re-read extent outlives the rest),
    // no write waits that would not wait without it, dirty data is never
    // dropped (every written block is destaged or still dirty) and the
    // buffer never holds more than its size.
    let burst = |keep: bool| {
        let (mut d, mut now) = written_and_destaged(keep, 4, 128);
        if keep {
            assert_eq!(d.clean_sectors(), 512);
        }
        // Re-read the oldest extent: it becomes the most recently used.
        now = run_one(&mut d, Request::new(9, 0, Op::Read, 1_000_000, 8, now), now).done;
        let before = d.stats();
        let mut out = Vec::new();
        for i in 0..6u64 {
            d.submit(Request::new(10 + i, 0, Op::Write, 50_000_000 + 1000 * i, 128, now), now);
            assert!(
                d.buffered_sectors(now) <= 1024,
                "after write {i}: {}",
                d.buffered_sectors(now)
            );
        }
        while out.len() < 6 {
            let t = d.next_event().expect("writes pending");
            d.advance(t, &mut out);
            assert!(d.buffered_sectors(t) <= 1024);
        }
        let s = d.stats();
        let written = 4 * 128 + 6 * 128;
        let destaged_after = drain(&mut d);
        assert!(destaged_after > 0);
        assert_eq!(
            d.stats().destaged_sectors,
            written,
            "keep {keep}: every dirty block destaged"
        );
        (
            s.buffer_waits - before.buffer_waits,
            s.clean_evicted_sectors,
            d.clean_sectors(),
            d,
        )
    };
    let (waits_off, _, _, _) = burst(false);
    let (waits_on, evicted, _, mut d) = burst(true);
    assert_eq!(waits_on, waits_off, "clean data never makes a write wait");
    assert_eq!(evicted, 256, "clean data was evicted for the burst, just enough");
    // The re-read extent (most recently used) survived the burst's evictions.
    let now = drain(&mut d);
    let c = run_one(&mut d, Request::new(50, 0, Op::Read, 1_000_000, 8, now), now);
    assert!(
        c.service.cache_hit,
        "the recently read extent was kept, the others evicted"
    );
    let c = run_one(&mut d, Request::new(51, 0, Op::Read, 2_000_000, 8, c.done), c.done);
    assert!(!c.service.cache_hit, "the least recently used extent was evicted");
}

#[test]
fn keep_destaged_never_exceeds_the_buffer() {
    // Random 8–64-sector writes and reads over a small region (rewrites of
    // clean and of dirty blocks, reads of both) at random times: the
    // buffer's memory never holds more than its size, clean data is evicted
    // and read, and a flush still empties the dirty part.
    let (mut d, start) = written_and_destaged(true, 0, 8);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut out, mut now) = (Vec::new(), start);
    for id in 0..4000u64 {
        let lbn = 1_000_000 + (rng.next() % 4096) * 8;
        let n = 8 * (1 + rng.next() % 8) as u32;
        let op = if rng.next().is_multiple_of(3) {
            Op::Read
        } else {
            Op::Write
        };
        while !d.can_accept() {
            let t = d.next_event().expect("a request in flight");
            d.advance(t, &mut out);
            now = now.max(t);
            assert!(d.buffered_sectors(now) <= 1024);
        }
        d.submit(Request::new(id, 0, op, lbn, n, now), now);
        assert!(
            d.buffered_sectors(now) <= 1024,
            "request {id}: {}",
            d.buffered_sectors(now)
        );
        now += rng.next() % 2_000_000;
        d.advance(now, &mut out);
        assert!(
            d.buffered_sectors(now) <= 1024,
            "request {id}: {}",
            d.buffered_sectors(now)
        );
    }
    let s = d.stats();
    assert!(s.clean_evicted_sectors > 0 && s.clean_hits > 0, "{s:?}");
    run_until_done_flush(&mut d, now);
    assert_eq!(d.dirty_sectors(), 0);
    assert!(d.clean_sectors() > 0 && d.clean_sectors() <= 1024);
}

/// Flushes `d` at `now` and runs it until the flush completes.
fn run_until_done_flush(d: &mut Hdd, now: Nanos) {
    d.submit(Request::new(u64::MAX, 0, Op::Flush, 0, 0, now), now);
    run_until_done(d, u64::MAX);
}

#[test]
fn keep_destaged_needs_the_write_cache() {
    let bad: DeviceConfig = toml::from_str("model = \"hdd\"\nkeep_destaged = true\n").unwrap();
    let e = build_device(&bad, std::path::Path::new(".")).err().unwrap();
    assert!(e.to_string().contains("keep_destaged"), "{e}");
    let ok: DeviceConfig = toml::from_str("model = \"hdd\"\nwrite_cache = true\nkeep_destaged = true\n").unwrap();
    assert!(build_device(&ok, std::path::Path::new(".")).is_ok());
}
