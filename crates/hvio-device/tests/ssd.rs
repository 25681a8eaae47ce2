//! SSD model: write amplification of random vs sequential writes at steady state.

use hvio_core::{Device, Op, Request};
use hvio_device::ssd::{Ssd, SsdParams};

/// A small drive (256 MiB, 4 planes of 64-page blocks) so steady state comes quickly.
fn small() -> Ssd {
    SsdParams {
        capacity_gib: Some(0.25),
        channels: Some(2),
        chips_per_channel: Some(2),
        dies_per_chip: Some(1),
        planes_per_die: Some(1),
        pages_per_block: Some(32),
        queue_depth: Some(8),
        ..Default::default()
    }
    .build()
    .unwrap()
}

/// Closed loop at the drive's depth; returns the write amplification of `writes` page writes
/// from `next`, measured after `warm` writes of the same pattern.
fn wa(d: &mut Ssd, warm: u64, writes: u64, mut next: impl FnMut(u64) -> u64) -> f64 {
    let spp = 16; // 8 KiB pages
    let mut out = Vec::new();
    let (mut now, mut id) = (0, 0u64);
    let mut base = d.stats();
    while id < warm + writes {
        while d.can_accept() && id < warm + writes {
            if id == warm {
                base = d.stats();
            }
            d.submit(Request::new(id, 0, Op::Write, next(id) * spp, spp as u32, now), now);
            id += 1;
        }
        now = d.next_event().unwrap();
        d.advance(now, &mut out);
    }
    let s = d.stats();
    let host = s.host_pages_written - base.host_pages_written;
    let moved = s.gc_pages_moved - base.gc_pages_moved;
    (host + moved) as f64 / host as f64
}

#[test]
fn random_writes_amplify_sequential_do_not() {
    let mut d = small();
    let pages = d.capacity() / 16;
    // Fill sequentially, then overwrite sequentially: whole blocks die together.
    let seq = wa(&mut d, pages, 2 * pages, |i| i % pages);
    let mut s = 0x9e3779b97f4a7c15u64;
    let mut rnd = move |_| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s % pages
    };
    let random = wa(&mut d, 2 * pages, 3 * pages, &mut rnd);
    eprintln!("write amplification: sequential {seq:.3}, random {random:.3}");
    assert!(seq < 1.05, "sequential WA {seq}");
    assert!(random > 2.0, "random WA {random}");
}

#[test]
fn reads_overlap_across_dies_and_queue_on_one() {
    let mut d = SsdParams::default().build().unwrap();
    // Write 64 consecutive pages (striped over all planes), then read them at once.
    let mut out = Vec::new();
    for i in 0..64u64 {
        d.submit(Request::new(i, 0, Op::Write, i * 16, 16, 0), 0);
        let t = d.next_event().unwrap();
        d.advance(t, &mut out);
    }
    let t0 = 1_000_000_000;
    for i in 0..32u64 {
        d.submit(Request::new(100 + i, 0, Op::Read, i * 16, 16, t0), t0);
    }
    out.clear();
    while let Some(t) = d.next_event() {
        d.advance(t, &mut out);
    }
    let last = out.iter().map(|c| c.done).max().unwrap() - t0;
    // 32 reads on 32 different dies over 8 channels: about one read plus 4 transfers per channel, far below 32 serial reads.
    assert!(last < 32 * 75_000 / 4, "32 parallel reads took {last} ns");
    assert!(last >= 75_000, "a read takes at least the flash read time");
    assert!(!d.info().rotational);
}

#[test]
fn config_errors_name_the_key() {
    let e = SsdParams {
        over_provisioning: Some(0.0),
        ..Default::default()
    }
    .build()
    .err()
    .unwrap();
    assert!(e.to_string().contains("over_provisioning"), "{e}");
    let e = SsdParams {
        channels: Some(0),
        ..Default::default()
    }
    .build()
    .err()
    .unwrap();
    assert!(e.to_string().contains("channels"), "{e}");
    let cfg: hvio_device::DeviceConfig = toml::from_str("model = \"ssd\"\ncapacity_gib = 1\n").unwrap();
    let d = hvio_device::build_device(&cfg, std::path::Path::new(".")).unwrap();
    assert_eq!(d.info().capacity, 2 * 1024 * 1024);
}
