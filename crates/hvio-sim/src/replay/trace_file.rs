//! A trace file replayed ([`replay_trace`]): its devices found and mapped
//! onto the config's VMs (`--map`, `--vms`, or a VM per device, made with an
//! image sized to what the device touches), then its records streamed into
//! [`replay`].

use super::*;

/// How a trace file is mapped onto VMs and driven: see [`replay_trace`].
#[derive(Clone, Debug)]
pub struct TraceReplay {
    /// `(device pattern, VM name)`: a pattern is a device name or a prefix ending in `*`.
    pub map: Vec<(String, String)>,
    /// Map by rule instead: device index (order of first appearance) modulo this many VMs `vm0`…
    pub vms: Option<usize>,
    /// Image size in bytes of the VMs created for the trace (default: what its devices touch).
    pub image_size: Option<u64>,
    /// How requests are issued.
    pub mode: ReplayMode,
}

impl Default for TraceReplay {
    fn default() -> Self {
        TraceReplay {
            map: Vec::new(),
            vms: None,
            image_size: None,
            mode: ReplayMode::Open { time_scale: 1.0 },
        }
    }
}

/// Parses `DEVICE=VM,...` into a map. DEVICE is a device name as the trace
/// names it (blkparse's `maj,min` too: `8,0=db,8,16=web`) or a prefix
/// ending in `*`; neither side may be empty, nor hold `=`.
pub fn parse_map(text: &str) -> Result<Vec<(String, String)>> {
    let bad =
        |entry: &str, why: &str| SimError::Other(format!("--map {:?}: {why}", hvio_core::message::shorten(entry)));
    let mut out = Vec::new();
    let mut major: Option<&str> = None;
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    for (i, part) in parts.iter().enumerate() {
        if part.is_empty() && major.is_none() {
            continue;
        }
        // A bare number is the major of a blkparse `maj,min` device.
        if !part.contains('=')
            && !part.is_empty()
            && part.bytes().all(|b| b.is_ascii_digit())
            && major.is_none()
            && i + 1 < parts.len()
        {
            major = Some(part);
            continue;
        }
        let entry = match major.take() {
            Some(m) => format!("{m},{part}"),
            None => part.to_string(),
        };
        let Some((dev, vm)) = entry.split_once('=') else {
            return Err(bad(&entry, "is not DEVICE=VM"));
        };
        let (dev, vm) = (dev.trim(), vm.trim());
        if dev.is_empty() || dev == "*" {
            return Err(bad(
                &entry,
                "names no device (DEVICE=VM, DEVICE a name or a prefix ending in *)",
            ));
        }
        if vm.is_empty() {
            return Err(bad(&entry, "names no VM (DEVICE=VM)"));
        }
        if vm.contains('=') {
            return Err(bad(
                &entry,
                "is not DEVICE=VM (one `=` per entry, entries separated by commas)",
            ));
        }
        if dev.trim_end_matches('*').contains('*') {
            return Err(bad(&entry, "`*` may only end a device prefix"));
        }
        out.push((dev.to_string(), vm.to_string()));
    }
    Ok(out)
}

/// A map every entry of which names a traced device (or a prefix of one),
/// each device pattern once.
fn check_map(map: &[(String, String)], devices: &[String], trace: &std::path::Path) -> Result<()> {
    for (i, (dev, vm)) in map.iter().enumerate() {
        if let Some((_, first)) = map[..i].iter().find(|(d, _)| d == dev) {
            return Err(SimError::Other(format!(
                "--map {dev}={vm}: device {dev} is mapped twice (also to {first})"
            )));
        }
        if !devices.iter().any(|d| pattern_matches(dev, d)) {
            let known = devices.iter().map(String::as_str).collect::<Vec<_>>();
            let mut list = known.iter().take(8).copied().collect::<Vec<_>>().join(" ");
            if known.len() > 8 {
                list.push_str(&format!(" … ({} in all)", known.len()));
            }
            return Err(SimError::Other(format!(
                "--map {dev}={vm}: {} has no device {dev}{} (its devices: {list})",
                trace.display(),
                hvio_core::message::hint(dev, known.iter().copied())
            )));
        }
    }
    Ok(())
}

fn pattern_matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => pattern == name,
    }
}

/// Replays a trace file: a first pass finds the traced devices and the extent
/// each touches; each device is mapped to a VM (`how.map`, else `how.vms`,
/// else a VM per device named after it); VMs `cfg` lacks are added with
/// images sized to their devices' extent (or `how.image_size`); the second
/// pass streams the records (parsed on a reader thread) into [`replay`].
/// Returns the result and the number of bad records skipped.
pub fn replay_trace(
    mut cfg: Config,
    path: &std::path::Path,
    read: &hvio_trace::ReadOptions,
    how: &TraceReplay,
) -> Result<(SimResult, u64)> {
    let terr = |e: hvio_trace::TraceError| SimError::Other(e.to_string());
    let mut r = hvio_trace::TraceReader::open(path, read).map_err(terr)?;
    let mut max_end: Vec<u64> = Vec::new();
    for rec in r.by_ref() {
        let rec = rec.map_err(terr)?;
        let d = rec.device as usize;
        if max_end.len() <= d {
            max_end.resize(d + 1, 0);
        }
        max_end[d] = max_end[d].max(rec.end());
    }
    let devices = r.devices().to_vec();
    let skipped = r.skipped();
    if devices.is_empty() {
        return Err(SimError::Other(format!(
            "{}: the trace has no requests",
            path.display()
        )));
    }
    if how.vms == Some(0) {
        return Err(SimError::Other("--vms 0: must be at least 1".into()));
    }
    check_map(&how.map, &devices, path)?;
    let vm_of_dev: Vec<String> = devices
        .iter()
        .enumerate()
        .map(|(i, d)| match how.vms {
            Some(n) => format!("vm{}", i % n),
            None => how
                .map
                .iter()
                .find(|(p, _)| pattern_matches(p, d))
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| d.clone()),
        })
        .collect();
    let mut extra = String::new();
    let mut made: Vec<String> = Vec::new();
    let mut names: Vec<String> = cfg.vms.iter().map(|v| v.name.clone()).collect();
    for vm in &vm_of_dev {
        if names.contains(vm) {
            continue;
        }
        let need = vm_of_dev
            .iter()
            .zip(&max_end)
            .filter(|(v, _)| *v == vm)
            .map(|(_, e)| *e)
            .max()
            .unwrap_or(0)
            * SECTOR_BYTES;
        let size = how.image_size.unwrap_or_else(|| need.div_ceil(1 << 20).max(1) << 20);
        let quoted = serde_json::to_string(vm).map_err(|e| SimError::Other(e.to_string()))?;
        extra.push_str(&format!(
            "[[vm]]\nname = {quoted}\nimage_size = \"{size}\"\njournal_size = 0\n"
        ));
        names.push(vm.clone());
        made.push(vm.clone());
    }
    if names.len() > crate::config::limits::MAX_VMS {
        return Err(SimError::Other(format!(
            "{}: its {} devices make {} VMs, more than {}; map them onto fewer with --vms N or --map",
            path.display(),
            devices.len(),
            names.len(),
            crate::config::limits::MAX_VMS
        )));
    }
    if !extra.is_empty() {
        // VMs made for the trace: their errors are the trace's.
        let origin = path.display().to_string();
        cfg.vms.extend(Config::from_toml_str(&extra, &origin)?.vms);
    }
    let index: Vec<usize> = vm_of_dev
        .iter()
        .map(|v| names.iter().position(|n| n == v).unwrap_or(0))
        .collect();
    let reader = hvio_trace::TraceReader::open(path, read).map_err(terr)?.prefetch(4096);
    let requests = reader.map(|rec| {
        rec.map(|r| ReplayRequest {
            time: r.time,
            vm: index.get(r.device as usize).copied().unwrap_or(0),
            op: r.op,
            sector: if r.op == Op::Flush { 0 } else { r.sector },
            sectors: r.sectors,
            sync: r.flags.has(hvio_trace::RecFlags::SYNC) || r.op == Op::Read,
            meta: r.flags.has(hvio_trace::RecFlags::META),
            fua: r.flags.has(hvio_trace::RecFlags::FUA),
        })
    });
    let result = replay(&cfg, requests, how.mode).map_err(|e| image_error(e, &made, path))?;
    Ok((result, skipped))
}

/// An image that does not fit, of a VM made for the trace, said in the
/// trace's terms: the user wrote no `image_size`.
fn image_error(e: SimError, made: &[String], trace: &std::path::Path) -> SimError {
    let inner = match &e {
        SimError::In { source, .. } => source.as_ref(),
        other => other,
    };
    if let SimError::Config(hvio_core::ConfigError::InvalidValue {
        context, key, value, ..
    }) = inner
    {
        if let Some(vm) = made.iter().find(|v| *context == format!("vm {v:?}")) {
            if key == "image_size" {
                return SimError::Other(format!(
                    "{}: device {vm} needs an image of {value} bytes (its largest offset), more than the disk holds; \
                     wrap its offsets with --image-size SIZE, or give --config a larger [disk]",
                    trace.display()
                ));
            }
        }
    }
    e
}
