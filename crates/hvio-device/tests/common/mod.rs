//! What the hvio-device tests share: where the real-disk validation data is.
#![allow(dead_code)]

pub mod skip;

use std::path::PathBuf;

/// The HDD validation disks (DiskSim descriptions and traces of real
/// drives), which are not in the repository: `$HVIO_SHARED_DATA/hdd-validation`,
/// by default `<repo>/../shared/data/hdd-validation`. `None`, with a logged
/// skip, when the folder is absent; the test then returns.
pub fn hdd_validation() -> Option<PathBuf> {
    let root = std::env::var_os("HVIO_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"));
    let dir = root.join("hdd-validation");
    if dir.is_dir() {
        return Some(dir);
    }
    skip::skipped(&format!(
        "the HDD validation data is not at {} (set HVIO_SHARED_DATA to the folder holding hdd-validation/)",
        dir.display()
    ));
    None
}

/// Whether the HDD validation data is here; if not, the running test is
/// logged as skipped (and returns).
pub fn have_hdd_validation() -> bool {
    hdd_validation().is_some()
}
