//! DiskSim's sparing schemes and LBN-to-PBN mapping schemes on small
//! hand-built layouts, checked against positions computed by hand from
//! DiskSim 4.0's layout rules (diskmodel `layout_g1`): where each block
//! lands, how many blocks a zone holds, the skew of a reversed cylinder, and
//! a negative write settling delay; and the minimum seek delay of writes.

use hvio_device::disksim::load_disk;
use hvio_device::hdd::HddModel;

mod common;

/// A disk of `surfaces` surfaces, 10 sectors per track, with the given
/// layout keys and zones, the HP C2247's mechanics (write settle replaced by
/// `settle` ms), loaded through the HP's `.diskspecs`.
fn disk(tag: &str, surfaces: u32, cylinders: u32, layout: &str, zones: &[&str], settle: f64) -> Option<HddModel> {
    let data = common::hdd_validation()?;
    let dir = std::env::temp_dir().join(format!("hvio-layouts-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let specs = std::fs::read_to_string(data.join("hp_c2247a.diskspecs")).unwrap();
    let model = std::fs::read_to_string(data.join("hp_c2247a_validate.model")).unwrap();
    let mech = &model[model.find("   Mechanical Model").unwrap()..];
    let mech = mech.replacen(
        "Add. write settling delay = 0.650000",
        &format!("Add. write settling delay = {settle}"),
        1,
    );
    let zones: Vec<String> = zones
        .iter()
        .map(|z| {
            format!(
                "dm_layout_g1_zone {{ Blocks per track = 10, Offset of first block = 0, Empty space at zone front = 0, \
                 Skew for track switch = 2, Skew for cylinder switch = 3, defects = [], {z} }}"
            )
        })
        .collect();
    let text = format!(
        "dm_disk HP_C2247A_validate_model {{\n Number of data surfaces = {surfaces},\n Number of cylinders = {cylinders},\n \
         Block count = 0,\n Layout Model = dm_layout_g1 {{\n {layout},\n Zones = [ {} ]\n }},\n{mech}",
        zones.join(",\n")
    );
    std::fs::write(dir.join("hp_c2247a.diskspecs"), specs).unwrap();
    std::fs::write(dir.join("hp_c2247a_validate.model"), text).unwrap();
    let l = load_disk(&dir.join("hp_c2247a.diskspecs"), None);
    std::fs::remove_dir_all(&dir).ok();
    Some(l.unwrap_or_else(|e| panic!("{tag}: {e}")).model)
}

/// (cylinder, head, sector) of an LBN.
fn chs(m: &HddModel, lbn: u64) -> (u32, u32, u32) {
    let l = m.geom.locate(lbn);
    (l.cyl, l.head, l.sector)
}

/// Scheme 8: 3 spares at the end of every 2 cylinders (40 sectors); the
/// slip at sector 5 takes one of range 0's; the zone's last cylinder is a
/// partial range without spares. Range 0 holds 37 blocks (LBN 5 on sector 6,
/// LBN 36 on sector 37), range 1 from sector 40 (cylinder 2), the partial
/// range from sector 80 (cylinder 4): 100 − 2 × 3 = 94 blocks.
#[test]
fn spares_per_range_of_cylinders() {
    let Some(m) = disk(
        "range",
        2,
        5,
        "LBN-to-PBN mapping scheme = 0, Sparing scheme used = 8, Rangesize for sparing = 2",
        &["First cylinder number = 0, Last cylinder number = 4, Number of spares = 3, slips = [5]"],
        0.65,
    ) else {
        return;
    };
    assert_eq!(m.geom.capacity(), 94);
    assert_eq!(chs(&m, 4), (0, 0, 4));
    assert_eq!(chs(&m, 5), (0, 0, 6));
    assert_eq!(chs(&m, 36), (1, 1, 7));
    assert_eq!(chs(&m, 37), (2, 0, 0));
    assert_eq!(chs(&m, 73), (3, 1, 6));
    assert_eq!(chs(&m, 74), (4, 0, 0));
    assert_eq!(chs(&m, 93), (4, 1, 9));
}

/// Spares per cylinder (2 of 20 sectors), a slip at sector 3: scheme 2 lets
/// the slip take one of cylinder 0's spares (18 blocks there, LBN 17 on
/// sector 18, 54 in all); scheme 4 pushes the blocks on to the zone's end
/// (17 blocks on cylinder 0, LBN 17 on cylinder 1, 53 in all); scheme 5 puts
/// the spares at the front (the slip leaves one: LBN 0 on sector 1, LBN 14
/// past the slip on sector 16, cylinder 1 from sector 22); scheme 6 keeps
/// both front spares (LBN 0 on sector 2, LBN 17 on cylinder 1's sector 2).
#[test]
fn spares_per_cylinder_at_the_end_or_the_front() {
    let zone = ["First cylinder number = 0, Last cylinder number = 2, Number of spares = 2, slips = [3]"];
    let layout = |n: u32| format!("Sparing scheme used = {n}");
    let Some(m2) = disk("cyl2", 2, 3, &layout(2), &zone, 0.65) else {
        return;
    };
    assert_eq!(m2.geom.capacity(), 54);
    assert_eq!(chs(&m2, 3), (0, 0, 4));
    assert_eq!(chs(&m2, 17), (0, 1, 8));
    assert_eq!(chs(&m2, 18), (1, 0, 0));

    let m4 = disk("cyl4", 2, 3, &layout(4), &zone, 0.65).unwrap();
    assert_eq!(m4.geom.capacity(), 53);
    assert_eq!(chs(&m4, 16), (0, 1, 7));
    assert_eq!(chs(&m4, 17), (1, 0, 0));
    assert_eq!(chs(&m4, 35), (2, 0, 0));
    assert_eq!(chs(&m4, 52), (2, 1, 7));

    let front = ["First cylinder number = 0, Last cylinder number = 1, Number of spares = 2, slips = [15]"];
    let m5 = disk("cyl5", 2, 2, &layout(5), &front, 0.65).unwrap();
    assert_eq!(m5.geom.capacity(), 36);
    assert_eq!(chs(&m5, 0), (0, 0, 1));
    assert_eq!(chs(&m5, 13), (0, 1, 4));
    assert_eq!(chs(&m5, 14), (0, 1, 6));
    assert_eq!(chs(&m5, 17), (0, 1, 9));
    assert_eq!(chs(&m5, 18), (1, 0, 2));

    let m6 = disk("cyl6", 2, 2, &layout(6), &front, 0.65).unwrap();
    assert_eq!(m6.geom.capacity(), 35);
    assert_eq!(chs(&m6, 0), (0, 0, 2));
    assert_eq!(chs(&m6, 12), (0, 1, 4));
    assert_eq!(chs(&m6, 13), (0, 1, 6));
    assert_eq!(chs(&m6, 17), (1, 0, 2));
}

/// Mapping 1 reverses the surfaces on the zone's odd cylinders, mapping 2 on
/// the disk's odd cylinders: with zones 0..=0 and 1..=2, LBN 20 (cylinder
/// 1's first track) is on surface 0 under mapping 1 (cylinder 1 is even in
/// its zone) and on surface 1 under mapping 2; LBN 40 (cylinder 2's first)
/// the other way round. A reversed track's skew is that of its place in the
/// order: cylinder 2's first track under mapping 1 (surface 1) starts at
/// 1 track switch × 2 + 1 cylinder switch × 3 = 5 sectors of 10, half a
/// revolution, as surface 0 does under the normal mapping. Going on from
/// cylinder 1 to 2 on the same surface costs a one-cylinder seek, no head
/// switch; under the normal mapping the same step switches heads too.
#[test]
fn surfaces_reversed_on_odd_cylinders() {
    let zones = [
        "First cylinder number = 0, Last cylinder number = 0, Number of spares = 0, slips = []",
        "First cylinder number = 1, Last cylinder number = 2, Number of spares = 0, slips = []",
    ];
    let layout = |n: u32| format!("LBN-to-PBN mapping scheme = {n}, Sparing scheme used = 0");
    let Some(m1) = disk("map1", 2, 3, &layout(1), &zones, 0.65) else {
        return;
    };
    let m2 = disk("map2", 2, 3, &layout(2), &zones, 0.65).unwrap();
    let m0 = disk("map0", 2, 3, &layout(0), &zones, 0.65).unwrap();
    assert_eq!(m1.geom.capacity(), 60);
    assert_eq!(chs(&m1, 20), (1, 0, 0));
    assert_eq!(chs(&m1, 30), (1, 1, 0));
    assert_eq!(chs(&m1, 40), (2, 1, 0));
    assert_eq!(chs(&m1, 59), (2, 0, 9));
    assert_eq!(chs(&m2, 20), (1, 1, 0));
    assert_eq!(chs(&m2, 30), (1, 0, 0));
    assert_eq!(chs(&m2, 40), (2, 0, 0));
    assert_eq!(chs(&m0, 40), (2, 0, 0));
    for m in [&m0, &m1, &m2] {
        for lbn in 0..60 {
            assert_eq!(m.geom.lbn_at(m.geom.locate(lbn)), Some(lbn));
        }
    }
    let a = m1.geom.angle(m1.geom.locate(40));
    assert!((a - 0.5).abs() < 1e-12, "{a}");
    assert_eq!(m0.geom.angle(m0.geom.locate(40)), a);
    let (l30, l40) = (m1.geom.locate(30), m1.geom.locate(40));
    assert_eq!(m1.reposition(l30, l40, false), m1.seek_ns(1, 2));
    let (n39, n40) = (m0.geom.locate(39), m0.geom.locate(40));
    assert_eq!((n39.head, n40.head), (1, 0));
    assert_eq!(m0.reposition(n39, n40, false), m0.seek_ns(1, 2).max(m0.head_switch));
}

/// A negative `Add. write settling delay` shortens a write's positioning by
/// that much (DiskSim adds it to every write that moved); positioning never
/// goes below zero. Reads are unchanged.
#[test]
fn negative_write_settle_shortens_writes() {
    let zone = ["First cylinder number = 0, Last cylinder number = 99, Number of spares = 0, slips = []"];
    let Some(m) = disk("settle", 2, 100, "Sparing scheme used = 0", &zone, -0.1) else {
        return;
    };
    let (a, b) = (m.geom.locate(0), m.geom.locate(20 * 50));
    let read = m.reposition(a, b, false);
    assert!(read > 1e6);
    assert!((m.reposition(a, b, true) - (read - 1e5)).abs() < 1e-6);
    let huge = disk("settle-huge", 2, 100, "Sparing scheme used = 0", &zone, -1000.0).unwrap();
    assert_eq!(huge.reposition(a, b, true), 0.0);
    assert_eq!(huge.reposition(a, b, false), read);
}

/// `Minimum seek delay` (0.6 ms in the HP C2247's description): a write's
/// positioning lasts at least that long, even on the same track, unless the
/// head is at the first sector as it passes (a write stream going on
/// without a gap); reads and longer seeks are unchanged (DiskSim 4.0's
/// `disk_check_hda_pending` / `disk_initiate_seek`).
#[test]
fn minimum_seek_delay_holds_back_writes_only() {
    let zone = ["First cylinder number = 0, Last cylinder number = 99, Number of spares = 0, slips = []"];
    let Some(m) = disk("minseek", 2, 100, "Sparing scheme used = 0", &zone, 0.0) else {
        return;
    };
    assert_eq!(m.min_write_seek, 0.6e6);
    let to = m.geom.locate(5);
    let passes = m.geom.angle(to) * m.rev + 3.0 * m.rev;
    // The sector comes round 0.2 ms after the command: a read waits 0.2 ms,
    // a write first holds 0.6 ms and then waits for the next turn.
    let t = passes - 0.2e6;
    let read = m.access(to, t, 5, 1, false);
    assert_eq!(read.seek, 0.0);
    assert!((read.rotation - 0.2e6).abs() < 1.0, "{read:?}");
    let write = m.access(to, t, 5, 1, true);
    assert_eq!(write.seek, 0.6e6);
    assert!((write.rotation - (m.rev - 0.4e6)).abs() < 1.0, "{write:?}");
    // Arriving as the sector passes: a stream going on, no minimum.
    let stream = m.access(to, passes, 5, 1, true);
    assert_eq!((stream.seek, stream.rotation), (0.0, 0.0));
    // A seek longer than the minimum is the seek.
    let far = m.geom.locate(20 * 50);
    let long = m.access(far, t, 5, 1, true);
    assert!(long.seek > 0.6e6);
    assert_eq!(long.seek, m.reposition(far, to, true));
}
