//! Fuzz the host configuration loader (`hvio serve`'s host.toml): any text
//! is a `Config` or an error naming the place, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Err(e) = hvio_vdisk::Config::from_toml_str(text, "fuzz.toml") {
        assert!(!e.to_string().is_empty());
    }
});
