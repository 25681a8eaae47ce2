//! Every `[disk]` key is user input: 0, 1, huge, nan, inf and negative
//! values either fail at construction with an error naming the key, or
//! build a device whose every completion time is finite and sane under a
//! mixed workload (debug build: no overflow, no division by zero, no NaN
//! turned into a time).

use hvio_core::{Completion, Device, Nanos, Op, Request};
use hvio_device::{build_device, DeviceConfig, DisksimConfig};
use std::path::Path;

mod common;

/// Longest believable service of one request (10 000 s): a saturated NaN
/// or infinity shows up far beyond it.
const MAX_SERVICE: Nanos = 10_000_000_000_000;

const FLOATS: &[&str] = &["0.0", "1.0", "1e300", "nan", "inf", "-inf", "-1.0", "1e-300", "0.5"];
const INTS: &[&str] = &["0", "1", "2", "4294967295", "9223372036854775807", "-1"];

/// Run a mixed workload (reads, writes, flushes, discards; small and large;
/// sequential and random; at the device's depth) and check every time.
fn exercise(label: &str, d: &mut dyn Device) {
    let info = d.info();
    let cap = info.capacity;
    assert!(cap > 0, "{label}: capacity 0");
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut now: Nanos = 0;
    let mut out: Vec<Completion> = Vec::new();
    let mut submitted = 0u64;
    let mut seq = 0u64;
    let n = 300u64;
    while out.len() < n as usize {
        while submitted < n && d.can_accept() {
            let r = next();
            let op = match r % 10 {
                0..=4 => Op::Read,
                5..=7 => Op::Write,
                8 => Op::Flush,
                _ => Op::Discard,
            };
            let sectors = [1u32, 8, 128, 2048][(r >> 8) as usize % 4];
            let sector = if r & 0x10000 != 0 { seq % cap } else { (r >> 20) % cap };
            let sectors = if op == Op::Flush {
                0
            } else {
                sectors.min((cap - sector).min(u32::MAX as u64) as u32).max(1)
            };
            let sector = if op == Op::Flush { 0 } else { sector };
            seq = sector + sectors as u64;
            let rq = Request::new(submitted, 0, op, sector, sectors, now).with_sync(r & 0x20000 != 0);
            d.submit(rq, now);
            submitted += 1;
        }
        let t = d
            .next_event()
            .unwrap_or_else(|| panic!("{label}: {} in flight and no event", d.in_flight()));
        assert!(t >= now, "{label}: event at {t} before now {now}");
        assert!(t - now <= MAX_SERVICE, "{label}: next event {} ns ahead", t - now);
        now = t;
        let before = out.len();
        d.advance(now, &mut out);
        for c in &out[before..] {
            assert!(c.start >= c.rq.arrival && c.done >= c.start, "{label}: {c:?}");
            assert!(c.done <= now, "{label}: completion after now: {c:?}");
            assert!(c.done - c.rq.arrival <= MAX_SERVICE, "{label}: {c:?}");
            let s = c.service;
            let parts = [s.overhead, s.seek, s.rotation, s.transfer];
            assert!(parts.iter().all(|&p| p <= MAX_SERVICE), "{label}: {c:?}");
        }
    }
}

/// Build from TOML; an error must name the key (`name` is the key set).
fn check(model: &str, base: &str, key: &str, value: &str) {
    let text = format!("model = \"{model}\"\n{base}\n{key} = {value}\n");
    let label = format!("{model} {base} {key} = {value}");
    // Captured; shown above a panic inside the model.
    eprintln!("{label}");
    let cfg: DeviceConfig = match toml::from_str(&text) {
        Ok(c) => c,
        // A value of the wrong type (negative or too big for the field) is
        // the config loader's typed error.
        Err(_) => return,
    };
    match build_device(&cfg, Path::new(".")) {
        Err(e) => {
            let msg = e.to_string();
            let named = msg.contains(key) || (key.ends_with("sectors_per_track") && msg.contains("sectors_per_track"));
            assert!(named, "{label}: error does not name the key: {msg}");
        }
        Ok(mut d) => exercise(&label, d.as_mut()),
    }
}

const HDD_FLOAT_KEYS: &[&str] = &[
    "rpm",
    "track_skew",
    "cylinder_skew",
    "head_switch_ms",
    "write_settle_ms",
    "read_hit_overhead_ms",
    "read_miss_overhead_ms",
    "write_hit_overhead_ms",
    "write_miss_overhead_ms",
    "interface_mb_s",
    "destage_max_age_ms",
    "destage_idle_ms",
    "max_queue_wait_ms",
];

const HDD_INT_KEYS: &[&str] = &[
    "capacity_sectors",
    "surfaces",
    "outer_sectors_per_track",
    "inner_sectors_per_track",
    "zones",
    "cache_segments",
    "segment_sectors",
    "read_ahead_sectors",
    "min_read_ahead_sectors",
    "write_buffer_sectors",
    "destage_chunk_sectors",
    "queue_depth",
];

/// Base settings that reach the write-back, NCQ and adaptive read-ahead paths.
const HDD_BASES: &[&str] = &[
    "capacity_sectors = 2000000",
    "capacity_sectors = 2000000\nwrite_cache = true\nkeep_destaged = true\nqueue_depth = 8",
    "capacity_sectors = 2000000\nread_ahead_policy = \"adaptive\"\nmin_read_ahead_sectors = 64\nsequential_gap_sectors = 8\ndestage = \"cscan\"\nwrite_cache = true",
];

#[test]
fn hdd_keys_at_extreme_values() {
    for base in HDD_BASES {
        for key in HDD_FLOAT_KEYS {
            for v in FLOATS {
                check("hdd", base, key, v);
            }
        }
        for key in HDD_INT_KEYS {
            // The base's capacity would be set twice.
            let base = if *key == "capacity_sectors" {
                base.replace("capacity_sectors = 2000000", "")
            } else {
                base.to_string()
            };
            for v in INTS {
                check("hdd", &base, key, v);
            }
        }
    }
}

#[test]
fn hdd_seek_curves_at_extreme_values() {
    for k in ["split", "a1", "b1", "a2", "b2"] {
        for v in FLOATS {
            let mut p = [
                ("split", "1000.0"),
                ("a1", "1.0"),
                ("b1", "0.1"),
                ("a2", "5.0"),
                ("b2", "0.001"),
            ];
            for e in p.iter_mut() {
                if e.0 == k {
                    e.1 = v;
                }
            }
            let fields: Vec<String> = p.iter().map(|(k, v)| format!("{k} = {v}")).collect();
            let seek = format!("{{ kind = \"two-regime\", {} }}", fields.join(", "));
            check("hdd", "capacity_sectors = 2000000", "seek", &seek);
        }
    }
    for v in FLOATS {
        let seek = format!("{{ kind = \"table\", points = [[1.0, 1.0], [100.0, {v}], [1000.0, 8.0]] }}");
        check("hdd", "capacity_sectors = 2000000", "seek", &seek);
        let seek = format!("{{ kind = \"table\", points = [[{v}, 1.0], [1e6, 8.0]] }}");
        check("hdd", "capacity_sectors = 2000000", "seek", &seek);
    }
}

const SSD_FLOAT_KEYS: &[&str] = &[
    "capacity_gib",
    "over_provisioning",
    "read_us",
    "program_us",
    "erase_ms",
    "channel_mb_s",
    "gc_threshold",
    "controller_us",
    "gc_hard_threshold",
    "write_buffer_mib",
    "interface_mb_s",
    "command_us",
];

const SSD_INT_KEYS: &[&str] = &[
    "channels",
    "chips_per_channel",
    "dies_per_chip",
    "planes_per_die",
    "pages_per_block",
    "page_kib",
    "queue_depth",
];

/// `precondition = { KEY = VALUE }` keys, checked like the others (the error names `precondition.KEY`).
const SSD_PRECONDITION_KEYS: &[&str] = &["fill", "tolerance", "max_drive_writes"];

#[test]
fn ssd_keys_at_extreme_values() {
    let base = "capacity_gib = 1.0";
    for key in SSD_FLOAT_KEYS {
        let base = if *key == "capacity_gib" { "" } else { base };
        for v in FLOATS {
            check("ssd", base, key, v);
        }
    }
    for key in SSD_INT_KEYS {
        for v in INTS {
            check("ssd", base, key, v);
        }
    }
    // A small drive, so that preconditioning is quick.
    let small = "capacity_gib = 0.0625\npages_per_block = 32";
    for key in SSD_PRECONDITION_KEYS {
        for v in FLOATS {
            let value = format!("{{ {key} = {v}, max_drive_writes = 2.0 }}");
            let value = if *key == "max_drive_writes" {
                format!("{{ {key} = {v} }}")
            } else {
                value
            };
            check("ssd", small, "precondition", &value);
        }
    }
    for preset in ["samsung-850-pro-256", "intel-p3700-400"] {
        check(
            "ssd",
            "capacity_gib = 2.0\npages_per_block = 16",
            "preset",
            &format!("\"{preset}\""),
        );
    }
}

/// Every numeric key of a DiskSim disk description (the HP C2247A's disk,
/// model, zones and mechanics) set to 0, 1, huge, nan, inf, negative and a
/// value past u32: an error naming the file and the key, or a disk whose
/// times are sane.
#[test]
fn disksim_keys_at_extreme_values() {
    let Some(data) = common::hdd_validation() else { return };
    let dir = std::env::temp_dir().join(format!("hvio-disksim-ranges-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let specs = std::fs::read_to_string(data.join("hp_c2247a.diskspecs")).unwrap();
    let model = std::fs::read_to_string(data.join("hp_c2247a_validate.model")).unwrap();
    let values = ["0", "1", "-1", "1e300", "nan", "inf", "4294967296", "1e-300"];
    for (file, text, other) in [
        ("hp_c2247a.diskspecs", &specs, ("hp_c2247a_validate.model", &model)),
        ("hp_c2247a_validate.model", &model, ("hp_c2247a.diskspecs", &specs)),
    ] {
        std::fs::write(dir.join(other.0), other.1).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            // `Key = number,` lines; a list's items are checked below.
            let Some((key, v)) = line.split_once(" = ") else {
                continue;
            };
            if v.trim_end_matches(',').parse::<f64>().is_err() {
                continue;
            }
            let key = key.trim();
            for value in values {
                let mut edited = lines.clone();
                let new = format!("{key} = {value}{}", if v.ends_with(',') { "," } else { "" });
                edited[i] = &new;
                std::fs::write(dir.join(file), edited.join("\n")).unwrap();
                check_disksim(&dir, &format!("{file}:{}: {key} = {value}", i + 1), key);
            }
        }
        std::fs::write(dir.join(file), text).unwrap();
    }
    // The seek equation and the first ten seek times (list items).
    for (item, value) in [
        ("300,", "1e300,"),
        ("3.810000,", "nan,"),
        ("0.330000,", "-5,"),
        ("2.890000,", "1e300,"),
        ("4.990000", "-1"),
    ] {
        std::fs::write(dir.join("hp_c2247a_validate.model"), model.replacen(item, value, 1)).unwrap();
        check_disksim(&dir, &format!("seek list {item} → {value}"), "seek");
    }
    // `[disk] queue_depth` over the description's own.
    std::fs::write(dir.join("hp_c2247a_validate.model"), &model).unwrap();
    for q in [0usize, 1, 32, 1 << 40, usize::MAX] {
        let cfg = DeviceConfig::Disksim(DisksimConfig {
            spec: dir.join("hp_c2247a.diskspecs"),
            disk: None,
            queue_depth: Some(q),
            dixtrac_seek_overhead_ms: None,
        });
        match build_device(&cfg, &dir) {
            Err(e) => assert!(e.to_string().contains("`queue_depth`"), "queue_depth {q}: {e}"),
            Ok(mut d) => exercise(&format!("disksim queue_depth = {q}"), d.as_mut()),
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

fn check_disksim(dir: &Path, label: &str, key: &str) {
    eprintln!("{label}");
    let cfg = DeviceConfig::Disksim(DisksimConfig {
        spec: dir.join("hp_c2247a.diskspecs"),
        disk: None,
        queue_depth: None,
        dixtrac_seek_overhead_ms: None,
    });
    match build_device(&cfg, dir) {
        Err(e) => {
            let msg = e.to_string();
            // The key itself, or (a value inconsistent with another key, e.g.
            // fewer surfaces than the zones' slips need) the key it breaks.
            assert!(
                msg.contains(key) || msg.contains("key `"),
                "{label}: error does not name a key: {msg}"
            );
            assert!(
                msg.contains("hp_c2247a"),
                "{label}: error does not name the file: {msg}"
            );
        }
        Ok(mut d) => exercise(label, d.as_mut()),
    }
}

/// The inputs that used to break, one per finding, with what they did:
/// each is now an error naming its key.
#[test]
fn inputs_that_used_to_break_are_named_errors() {
    let cases: &[(&str, &str, &str)] = &[
        ("hdd", "rpm = 1e-300", "rpm"), // infinite revolution: subtract overflow
        ("hdd", "interface_mb_s = 1e-300", "interface_mb_s"), // infinite transfer time
        ("hdd", "head_switch_ms = 1e300", "head_switch_ms"), // times saturated at u64::MAX
        ("hdd", "max_queue_wait_ms = 1e300", "max_queue_wait_ms"),
        ("hdd", "cylinder_skew = 1.0", "cylinder_skew"), // the error named track_skew
        (
            "hdd",
            "seek = { kind = \"two-regime\", split = 1000.0, a1 = 1e300, b1 = 0.1, a2 = 5.0, b2 = 0.001 }",
            "seek",
        ),
        (
            "hdd",
            "seek = { kind = \"two-regime\", split = 1000.0, a1 = -50.0, b1 = 0.1, a2 = 5.0, b2 = 0.001 }",
            "seek",
        ),
        ("hdd", "queue_depth = 9223372036854775807", "queue_depth"), // capacity overflow in with_capacity
        ("hdd", "zones = 4294967295", "zones"),                      // a 16 GiB zone table
        ("hdd", "surfaces = 4294967295", "surfaces"),
        ("hdd", "capacity_sectors = 9223372036854775807", "capacity_sectors"), // cylinders truncated to u32
        ("ssd", "capacity_gib = 1e-300", "capacity_gib"),                      // no pages: lpns − 1 underflow
        ("ssd", "channels = 1024\nchips_per_channel = 1024", "channels"),      // planes × blocks overflow
        ("ssd", "controller_us = -1.0", "controller_us"),                      // silently 0
        ("ssd", "controller_us = inf", "controller_us"),                       // overflow
        ("ssd", "read_us = 1e300", "read_us"),
        ("ssd", "channel_mb_s = 1e-300", "channel_mb_s"),
        ("ssd", "queue_depth = 9223372036854775807", "queue_depth"),
        ("ssd", "capacity_gib = 25000", "capacity_gib"), // ~26 GiB of page maps: out of memory
        (
            "hdd",
            "seek = { kind = \"table\", points = [[1.0, 1.0], [nan, 2.0]] }",
            "seek",
        ),
    ];
    for (model, keys, key) in cases {
        let cfg: DeviceConfig = toml::from_str(&format!("model = \"{model}\"\n{keys}\n")).unwrap();
        let e = build_device(&cfg, Path::new("."))
            .err()
            .unwrap_or_else(|| panic!("{model} {keys}: accepted"))
            .to_string();
        assert!(e.contains(&format!("`{key}`")), "{model} {keys}: {e}");
    }
}
