//! Fuzz the DiskSim parameter-file reader (hvio-device's `.parv`/`.diskspecs`
//! parser): any text parses or is an error, never a panic. Includes resolve
//! against a directory that does not exist.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let _ = hvio_device::disksim::parse::parse_spec(text, Path::new("/nonexistent/fuzz.parv"), 0);
});
