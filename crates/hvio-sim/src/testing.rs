//! A small, hand-computable disk for tests of the engine and of schedulers:
//! depth 1, seek time linear in distance, fixed rotation and per-sector
//! transfer. Not a model of a real disk (see `hvio_device` for that).

use crate::error::{Result, SimError};
use hvio_core::*;
use std::sync::Arc;

/// The test disk.
#[derive(Debug, Clone)]
pub struct SimpleDisk {
    /// Size in sectors.
    pub capacity: Sector,
    /// Seek time per sector of distance, ns.
    pub ns_per_sector_seek: f64,
    /// The longest seek, ns.
    pub max_seek: Nanos,
    /// Rotational delay of a request that moves the head, ns.
    pub rotation: Nanos,
    /// Transfer time per sector, ns.
    pub transfer_per_sector: Nanos,
    head: Sector,
    busy: Option<(Request, Nanos, Nanos, ServiceBreakdown)>,
}

impl SimpleDisk {
    /// 1 TB, ~8 ms average random access, ~100 MB/s sequential.
    pub fn new(capacity: Sector) -> SimpleDisk {
        SimpleDisk {
            capacity,
            ns_per_sector_seek: 10e6 / capacity as f64,
            max_seek: 10_000_000,
            rotation: 4_000_000,
            transfer_per_sector: 5_000,
            head: 0,
            busy: None,
        }
    }

    fn service(&self, rq: &Request) -> ServiceBreakdown {
        if rq.op == Op::Flush {
            return ServiceBreakdown {
                overhead: 100_000,
                ..Default::default()
            };
        }
        let d = rq.sector.abs_diff(self.head);
        let (seek, rotation) = if d == 0 {
            (0, 0)
        } else {
            (((d as f64) * self.ns_per_sector_seek) as Nanos + 500_000, self.rotation)
        };
        ServiceBreakdown {
            overhead: 0,
            seek: seek.min(self.max_seek),
            rotation,
            transfer: rq.sectors as Nanos * self.transfer_per_sector,
            cache_hit: false,
        }
    }
}

impl Device for SimpleDisk {
    fn info(&self) -> DeviceInfo {
        DeviceInfo {
            capacity: self.capacity,
            rotational: true,
            queue_depth: 1,
            seek: Arc::new(LinearSeek {
                ns_per_sector: self.ns_per_sector_seek,
                max: self.max_seek,
                revolution: 2 * self.rotation,
            }),
        }
    }
    fn in_flight(&self) -> usize {
        self.busy.is_some() as usize
    }
    fn can_accept(&self) -> bool {
        self.busy.is_none()
    }
    fn submit(&mut self, rq: Request, now: Nanos) {
        assert!(self.busy.is_none(), "SimpleDisk takes one request at a time");
        let s = self.service(&rq);
        if rq.op != Op::Flush {
            self.head = rq.end();
        }
        self.busy = Some((rq, now, now + s.total(), s));
    }
    fn next_event(&self) -> Option<Nanos> {
        self.busy.map(|b| b.2)
    }
    fn advance(&mut self, now: Nanos, out: &mut Vec<Completion>) {
        if let Some((rq, start, done, service)) = self.busy {
            if done <= now {
                out.push(Completion {
                    rq,
                    start,
                    done,
                    service,
                });
                self.busy = None;
            }
        }
    }
    fn head(&self) -> Sector {
        self.head
    }
}

/// Build the device of a `[disk]` table: `model = "simple"` is the test disk
/// above; anything else (the default `hdd`, `disksim`, ...) is
/// [`hvio_device::DeviceConfig`].
pub fn device_from_table(t: &toml::Table, base_dir: &std::path::Path) -> Result<Box<dyn Device>> {
    device_for_run(t, base_dir, None)
}

/// [`device_from_table`] for a run with seed `seed`: an SSD's
/// preconditioning that names no seed of its own takes the run's, so
/// another seed gives another drive, as it gives other requests.
pub fn device_for_run(t: &toml::Table, base_dir: &std::path::Path, seed: Option<u64>) -> Result<Box<dyn Device>> {
    if t.get("model").and_then(|v| v.as_str()) == Some("simple") {
        if let Some(k) = t.keys().find(|k| *k != "model") {
            return Err(SimError::invalid(
                "[disk]",
                k,
                t[k.as_str()].to_string(),
                "the simple test disk has no parameters",
            ));
        }
        return Ok(Box::new(SimpleDisk::new(1_953_525_168)));
    }
    let mut cfg: hvio_device::DeviceConfig = if t.is_empty() {
        hvio_device::DeviceConfig::default()
    } else {
        device_config(t).map_err(|e| disk_key_error(t, e))?
    };
    if let (Some(seed), hvio_device::DeviceConfig::Ssd(p)) = (seed, &mut cfg) {
        if let Some(pc) = p.precondition.as_mut() {
            pc.seed.get_or_insert(seed);
        }
    }
    hvio_device::build_device(&cfg, base_dir).map_err(|e| match e {
        hvio_device::DeviceError::Param { key, value, reason } => SimError::invalid("disk", &key, value, reason),
        e => SimError::Device(format!("[disk]: {e}")),
    })
}

fn device_config(t: &toml::Table) -> std::result::Result<hvio_device::DeviceConfig, toml::de::Error> {
    toml::Value::Table(t.clone()).try_into()
}

/// A `[disk]` table that does not deserialise, as an error naming its key:
/// the table was parsed already, so toml's error has lost the key. Each key
/// is tried alone beside `model`; the one whose error differs from
/// `model`'s alone is at fault (else `model` itself is).
fn disk_key_error(t: &toml::Table, e: toml::de::Error) -> SimError {
    let base: toml::Table = t
        .iter()
        .filter(|(k, _)| *k == "model")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let base_err = device_config(&base).err().map(|e| e.message().to_string());
    for (k, v) in t.iter().filter(|(k, _)| *k != "model") {
        let mut one = base.clone();
        one.insert(k.clone(), v.clone());
        if let Err(e) = device_config(&one) {
            if base_err.as_deref() != Some(e.message()) {
                return SimError::invalid("disk", k, v, e.message());
            }
        }
    }
    match t.get("model") {
        Some(m) if base_err.is_some() => SimError::invalid("disk", "model", m, e.message()),
        _ => SimError::Device(format!("[disk]: {}", e.message())),
    }
}
