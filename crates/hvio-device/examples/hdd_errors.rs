//! Where a validation replay's demerit comes from:
//! `cargo run --release -p hvio-device --example hdd_errors -- SPEC TRACE [TOP]`.
//!
//! Replays the DiskSim validation trace as `hvio validate-disk` does and
//! splits the requests into classes: read or write, what the real disk's
//! cache did (the trace's second column, read here only to explain errors,
//! never by the model), sequential (starts where the last one ended) or
//! not, where it starts against the last request (a re-read of its blocks,
//! right after it, ahead or behind it on the same cylinder, elsewhere),
//! on the last request's cylinder: on its last track or another (and of
//! the reads there, those that took 1 ms or more in both: media
//! accesses), seek distance in cylinders, zone. For each class it prints the
//! requests, the measured and simulated means, the RMS demerit within the
//! class, how many of each took under 1 ms (a buffer hit on the validation
//! disks), and the whole disk's demerit if that class alone were simulated
//! exactly (its simulated times replaced by the measured ones): the drop is
//! what the class's error costs the disk. Then the `TOP` (default 15)
//! requests hvio gets most wrong.
//!
//! `--disksim OUTTRACE` puts DiskSim 4.0's own service time for the same
//! requests beside hvio's: OUTTRACE is the trace of requests DiskSim
//! simulated (its global `Output file for trace of I/O requests
//! simulated`, one line per request with its arrival time in ms); in a
//! closed-loop replay a request's service time is the next arrival minus
//! this arrival minus the recorded gap. Each class then also shows
//! DiskSim's mean and its demerit, and the top list DiskSim's time.
//! Then the requests a drive's buffer serves, by size: reads that start
//! where a read ended (the read-ahead's blocks) and writes, each after a
//! read or a write, with the median of each column beside the mean (a
//! median is the buffer's own time, command overhead and bus transfer,
//! where a mean mixes in the misses).
//! `--dump FILE` writes `line,op,lbn,sectors,measured_ms,hvio_ms` (and
//! `disksim_ms`) per request. `--as-described` reads the description as
//! DiskSim does (no DIXtrac seek-overhead correction, as
//! `hvio validate-disk --as-described`).

use hvio_device::disksim::{load_disk_with, LoadOptions};
use hvio_device::validate::{quantiles, read_trace, replay, rms};
use std::collections::BTreeMap;
use std::path::Path;

fn demerit(measured: &[f64], sim: &[f64]) -> f64 {
    rms(&quantiles(measured), &quantiles(sim))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args: Vec<String> = std::env::args().collect();
    let mut option = |name: &str| -> Option<String> {
        let i = args.iter().position(|a| a == name)?;
        let v = args.get(i + 1).cloned();
        args.drain(i..(i + 2).min(args.len()));
        v
    };
    let (disksim_trace, dump) = (option("--disksim"), option("--dump"));
    let as_described = args
        .iter()
        .position(|a| a == "--as-described")
        .map(|i| args.remove(i))
        .is_some();
    let opts = if as_described {
        LoadOptions::as_described()
    } else {
        LoadOptions::default()
    };
    if args.len() < 3 {
        return Err("usage: hdd_errors SPEC TRACE [TOP] [--disksim OUTTRACE] [--dump FILE] [--as-described]".into());
    }
    let (spec, trace) = (Path::new(&args[1]), Path::new(&args[2]));
    let top: usize = args.get(3).map(|s| s.parse()).transpose()?.unwrap_or(15);
    let loaded = load_disk_with(spec, None, &opts)?;
    let geom = loaded.model.geom.clone();
    let records = read_trace(trace)?;
    let text = std::fs::read_to_string(trace)?;
    let cache: Vec<String> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().nth(1).unwrap_or("?").to_string())
        .collect();
    let sim = replay(loaded.model, &records)?;
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let measured: Vec<f64> = records.iter().map(|r| r.measured_ms).collect();
    let total = demerit(&measured, &sim);
    // DiskSim's service times from its trace of simulated requests.
    let disksim: Option<Vec<f64>> = match &disksim_trace {
        None => None,
        Some(p) => {
            let arrivals: Vec<f64> = std::fs::read_to_string(p)?
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| l.split_whitespace().next().unwrap_or("").parse::<f64>())
                .collect::<Result<_, _>>()?;
            if arrivals.len() != records.len() {
                return Err(format!("{p}: {} requests, the trace has {}", arrivals.len(), records.len()).into());
            }
            // The last request's completion is not in the file: its measured time stands in.
            let mut v: Vec<f64> = arrivals
                .windows(2)
                .zip(&records)
                .map(|(w, r)| w[1] - w[0] - r.gap_ms)
                .collect();
            v.push(records[records.len() - 1].measured_ms);
            let d = demerit(&measured, &v);
            println!(
                "DiskSim 4.0 ({p}): mean {:.3} ms, demerit {:.4} ms ({:.2} %); hvio against DiskSim {:.4} ms",
                mean(&v),
                d,
                100.0 * d / mean(&measured),
                demerit(&v, &sim)
            );
            Some(v)
        }
    };
    if let Some(path) = &dump {
        let mut out = String::from("line,op,lbn,sectors,measured_ms,hvio_ms,disksim_ms\n");
        for (i, r) in records.iter().enumerate() {
            out += &format!(
                "{},{},{},{},{:.6},{:.6},{}\n",
                r.line,
                if r.write { "W" } else { "R" },
                r.lbn,
                r.sectors,
                measured[i],
                sim[i],
                disksim.as_ref().map_or(String::new(), |d| format!("{:.6}", d[i]))
            );
        }
        std::fs::write(path, out)?;
    }
    println!(
        "{}: {} requests, measured mean {:.3} ms, hvio {:.3} ms, demerit {:.4} ms ({:.2} %)",
        trace.display(),
        records.len(),
        mean(&measured),
        mean(&sim),
        total,
        100.0 * total / mean(&measured)
    );

    // Classes of each request.
    let mut classes: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    let (mut prev, mut prev_end): (Option<u64>, Option<u64>) = (None, None);
    let mut dist = Vec::with_capacity(records.len());
    for (i, r) in records.iter().enumerate() {
        let from = prev_end.map_or(0, |e| geom.cylinder_of(e.saturating_sub(1)));
        let d = geom.cylinder_of(r.lbn).abs_diff(from);
        dist.push(d);
        let bucket = match d {
            0 => "0",
            1..=10 => "1-10",
            11..=100 => "11-100",
            101..=1000 => "101-1000",
            _ => ">1000",
        };
        let op = if r.write { "W" } else { "R" };
        let seq = if prev_end == Some(r.lbn) { "seq" } else { "rand" };
        // Where it starts against the last request (`prev`..`prev_end`).
        let end = r.lbn + r.sectors as u64;
        let kind = match (prev, prev_end) {
            (Some(p), Some(e)) if r.lbn >= p && end <= e => "re-read",
            (_, Some(e)) if r.lbn == e => "sequential",
            (Some(p), Some(e)) if r.lbn < e && end > p => "overlap",
            (_, Some(e)) if r.lbn > e && d == 0 => "ahead, same cyl",
            (_, Some(e)) if r.lbn < e && d == 0 => "behind, same cyl",
            _ => "elsewhere",
        };
        let zone = geom.locate(r.lbn).zone;
        // On the last request's cylinder: on its last track, or a head switch away.
        let track = prev_end.filter(|_| d == 0).map(|e| {
            if geom.locate(e.saturating_sub(1)).head == geom.locate(r.lbn).head {
                "same track"
            } else {
                "other track"
            }
        });
        if let Some(track) = track {
            classes.entry(format!("op+cyl {op} {track}")).or_default().push(i);
            // A read neither the drive nor hvio served from the buffer.
            if !r.write && r.measured_ms >= 1.0 && sim[i] >= 1.0 {
                classes
                    .entry(format!("op+cyl {op} {track}, media"))
                    .or_default()
                    .push(i);
            }
        }
        for key in [
            format!("op {op}"),
            format!("op+cache {op} {}", cache.get(i).map_or("?", |s| s.as_str())),
            format!("op+order {op} {seq}"),
            format!("op+start {op} {kind}"),
            format!("seek {bucket}"),
            format!("op+seek {op} {bucket}"),
            format!("zone {zone:02}"),
        ] {
            classes.entry(key).or_default().push(i);
        }
        (prev, prev_end) = (Some(r.lbn), Some(end));
    }
    println!(
        "\n{:<26} {:>6} {:>9} {:>9} {:>9} {:>7} {:>7} {:>10} {:>12}{}",
        "class",
        "n",
        "meas ms",
        "hvio ms",
        "diff ms",
        "meas<1",
        "hvio<1",
        "class dem",
        "disk w/o it",
        if disksim.is_some() {
            format!(" {:>9} {:>7} {:>10}", "DiskSim", "DS<1", "DS dem")
        } else {
            String::new()
        }
    );
    // Requests served in under 1 ms: buffer hits on these disks.
    let fast = |v: &[f64]| v.iter().filter(|&&x| x < 1.0).count();
    for (key, idx) in &classes {
        let m: Vec<f64> = idx.iter().map(|&i| measured[i]).collect();
        let s: Vec<f64> = idx.iter().map(|&i| sim[i]).collect();
        let mut fixed = sim.clone();
        for &i in idx {
            fixed[i] = measured[i];
        }
        let ds = disksim.as_ref().map_or(String::new(), |d| {
            let d: Vec<f64> = idx.iter().map(|&i| d[i]).collect();
            format!(" {:>9.3} {:>7} {:>10.3}", mean(&d), fast(&d), demerit(&m, &d))
        });
        println!(
            "{key:<26} {:>6} {:>9.3} {:>9.3} {:>+9.3} {:>7} {:>7} {:>10.3} {:>12.4}{ds}",
            idx.len(),
            mean(&m),
            mean(&s),
            mean(&s) - mean(&m),
            fast(&m),
            fast(&s),
            demerit(&m, &s),
            demerit(&measured, &fixed)
        );
    }
    by_size(&records, &measured, &sim, disksim.as_deref());
    let mut worst: Vec<usize> = (0..records.len()).collect();
    worst.sort_by(|&a, &b| (sim[b] - measured[b]).abs().total_cmp(&(sim[a] - measured[a]).abs()));
    println!(
        "\n{:>6} {:>2} {:>5} {:>10} {:>5} {:>7} {:>9} {:>9} {:>9}",
        "line", "op", "cache", "lbn", "n", "seek", "meas ms", "hvio ms", "DiskSim"
    );
    for &i in worst.iter().take(top) {
        let r = &records[i];
        println!(
            "{:>6} {:>2} {:>5} {:>10} {:>5} {:>7} {:>9.3} {:>9.3} {:>9}",
            r.line,
            if r.write { "W" } else { "R" },
            cache.get(i).map_or("?", |s| s.as_str()),
            r.lbn,
            r.sectors,
            dist[i],
            measured[i],
            sim[i],
            disksim.as_ref().map_or("—".to_string(), |d| format!("{:.3}", d[i]))
        );
    }
    Ok(())
}

/// The middle value (the mean of the two middle ones for an even count).
fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Sequential reads after a read, and writes, by previous operation and
/// size (classes of at least 5 requests): measured, hvio's and DiskSim's
/// mean and median.
fn by_size(records: &[hvio_device::validate::TraceRecord], measured: &[f64], sim: &[f64], disksim: Option<&[f64]>) {
    let mut classes: BTreeMap<(bool, bool, u32), Vec<usize>> = BTreeMap::new();
    for (i, pair) in records.windows(2).enumerate() {
        let (p, r) = (&pair[0], &pair[1]);
        let after_read_end = !p.write && r.lbn == p.lbn + p.sectors as u64;
        if r.write || after_read_end {
            classes.entry((r.write, p.write, r.sectors)).or_default().push(i + 1);
        }
    }
    let stats = |v: &[f64], idx: &[usize]| {
        let x: Vec<f64> = idx.iter().map(|&i| v[i]).collect();
        format!(" {:>8.3} {:>8.3}", x.iter().sum::<f64>() / x.len() as f64, median(&x))
    };
    println!(
        "\n{:<30} {:>6} {:>8} {:>8} {:>8} {:>8}{}",
        "buffered requests by size",
        "n",
        "meas",
        "median",
        "hvio",
        "median",
        if disksim.is_some() {
            format!(" {:>8} {:>8}", "DiskSim", "median")
        } else {
            String::new()
        }
    );
    for ((write, after_write, sectors), idx) in &classes {
        if idx.len() < 5 {
            continue;
        }
        let what = if *write { "W" } else { "R sequential" };
        let after = if *after_write { "W" } else { "R" };
        println!(
            "{:<30} {:>6}{}{}{}",
            format!("{what} after {after}, {sectors} blocks"),
            idx.len(),
            stats(measured, idx),
            stats(sim, idx),
            disksim.map_or(String::new(), |d| stats(d, idx))
        );
    }
}
